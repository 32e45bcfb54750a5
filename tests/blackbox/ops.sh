#!/bin/bash
# Black-box: operations and ecosystem. The README walkthroughs,
# the system spool of contrib/systemd (tmpfiles, sysusers, the unit's own
# command lines), kart gc, retry, status filters, watch, wait's progress,
# the worker's log lines and sd_notify, the clients, the cron recipe,
# completions, man pages and the example kart.conf.
. "$(dirname "$0")/../lib.sh"

has_result() { [ -e "$1/done/$2.json" ]; }
# count_ge N CMD...: CMD prints a number >= N (for wait_until, which
# must run the count each time).
count_ge() { [ "$("${@:2}" 2>/dev/null)" -ge "$1" ]; }
lines() { wc -l <"$1"; }
n_results() { find "$1/done" -maxdepth 1 -name '*.json' ! -name '.*' | wc -l; }
# A datagram socket that records what is sent to it (sd_notify's peer).
# notify_listen PATH LOG: background listener; sets NPID.
notify_listen() {
	python3 - "$1" "$2" <<'PY' &
import os, socket, sys
path, log = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0" + path[1:] if path.startswith("@") else path)
open(log + ".ready", "w").close()
while True:
    m = s.recv(4096).decode()
    with open(log, "a") as f:
        f.write(m.replace("\n", "|") + "\n")
PY
	NPID=$!
	T_PIDS+=("$NPID")
	wait_until 10 test -e "$2.ready" || fail "notify listener did not start"
}

# ---- README ------------------------------------------------------------------------

test_readme_first_screen_kept() {
	local first
	first=$(awk '/^```sh$/ { b = 1; next } b && /^```$/ { exit } b' "$ROOT/README.md")
	assert_match "make demo " "$first" "README's first block"
	assert_match "make check " "$first" "README's first block"
	assert_eq 3 "$(printf '%s\n' "$first" | wc -l)" "lines of README's first block"
}

test_readme_walkthroughs_run() {
	local h=$T_ROOT/home out b
	mkdir -p "$h"
	for b in personal cron client; do
		[ -n "$(readme_block $b)" ] || fail "README has no ops: $b block"
	done
	# The three blocks one after the other, as a newcomer would type
	# them; then the worker the first one started (--daemon) is stopped.
	out=$(cd "$ROOT" && HOME=$h PATH=$KART_BUILD:$PATH timeout 120 bash -c "
		set -u
		$(readme_block personal)
		$(readme_block cron)
		$(readme_block client)" 2>"$T_ROOT/walk.err")
	local rc=$? dpid
	dpid=$(sed -n 's/.*in the background as pid \([0-9]*\);.*/\1/p' <<<"$out")
	[ -n "$dpid" ] && stop_worker "$dpid" || fail "no daemon pid in: $out"
	assert_eq 0 "$rc" "the README walkthroughs (stderr: $(tail -5 "$T_ROOT/walk.err"))"
	assert_match "hello from a sandbox" "$out" "personal: kart cat hello"
	assert_match "exit 3" "$out" "personal: kart wait on a failing task"
	assert_match "fails\.2" "$out" "personal: kart retry"
	# fails.2, queued by retry just before, may have run by then (the
	# worker is live): failed 1 with it queued or running, or failed 2.
	assert_match "failed	[12]" "$out" "personal: kart status --summary"
	assert_match "total	3" "$out" "personal: kart status --summary (total)"
	assert_match '"state": "failed"' "$out" "personal: status --state failed --json"
	assert_match "hello ok" "$(cat "$h/results.log" 2>/dev/null)" "cron: the handler saw hello"
	assert_match "fails failed" "$(cat "$h/results.log" 2>/dev/null)" "cron: the handler saw fails"
	assert_match "hello from python" "$out" "client: the Python client"
	assert_match "hello from sh" "$out" "client: the sh client"
	assert_no_file "$ROOT/job.py"
	assert_eq "" "$(ls -A "$h/spool/tmp")" "tmp/ after the clients"
	assert_match "event=finished" "$(cat "$h/spool/worker.log")" "the worker's log"
}

# The system walkthrough, on a root directory instead of /: the same
# snippets (tmpfiles, sysusers), the unit's own command lines, and two
# submitters in the group kart, as uids of their own.
test_readme_system_spool() {
	local blk r=$T_ROOT/sysroot s gid unit pre start
	blk=$(readme_block system)
	# Each line of the block is one this test stands for; a new step
	# needs its check here.
	local line known=(
		"make install PREFIX=/usr/local"
		"systemd-sysusers /usr/local/lib/sysusers.d/kart.conf"
		"systemd-tmpfiles --create /usr/local/lib/tmpfiles.d/kart.conf"
		"usermod -aG kart alice"
		"systemctl daemon-reload"
		'systemctl enable --now "kart-worker@$(systemd-escape --path /var/spool/kart).service"'
		'systemctl enable --now "kart-gc@$(systemd-escape --path /var/spool/kart).timer"')
	for line in "${known[@]}"; do
		printf '%s\n' "$blk" | grep -qxF -- "$line" || fail "README's system block lost: $line"
	done
	assert_eq "${#known[@]}" "$(grep -c . <<<"$blk")" "lines in README's system block"
	# What those lines name is where make install PREFIX=/usr/local puts
	# it, in a directory systemd reads units from.
	# From a copy of the build under test (its times kept): make finds
	# it up to date and installs, rather than compiling it all again
	# (install.sh builds from nothing).
	local d=$T_ROOT/sysinst f
	cp -a "$KART_BUILD" "$T_ROOT/build" || { fail "cannot copy $KART_BUILD"; return; }
	make -s -C "$ROOT" B="$T_ROOT/build" PREFIX=/usr/local DESTDIR="$d" install >/dev/null ||
		{ fail "make install PREFIX=/usr/local DESTDIR=$d"; return; }
	for f in lib/sysusers.d/kart.conf lib/tmpfiles.d/kart.conf lib/systemd/system/kart-worker@.service \
		lib/systemd/system/kart-gc@.service lib/systemd/system/kart-gc@.timer bin/kart; do
		assert_file "$d/usr/local/$f"
	done
	systemd-analyze unit-paths 2>/dev/null | grep -qx /usr/local/lib/systemd/system ||
		fail "systemd does not read units from /usr/local/lib/systemd/system"
	assert_match 'kart submit -- uname -a' "$(readme_block system-user)" "README's system-user block"
	assert_eq "var-spool-kart" "$(systemd-escape --path /var/spool/kart)" "the unit's instance name"
	mkdir -p "$r/etc"
	chmod 0755 "$T_ROOT" # the submitters' uids must reach the spool
	systemd-sysusers --root="$r" "$ROOT/contrib/systemd/kart.sysusers" 2>/dev/null ||
		{ fail "systemd-sysusers"; return; }
	systemd-tmpfiles --root="$r" --create "$ROOT/contrib/systemd/kart.tmpfiles" ||
		{ fail "systemd-tmpfiles"; return; }
	gid=$(awk -F: '$1 == "kart" { print $3 }' "$r/etc/group")
	[ -n "$gid" ] || { fail "no group kart in $r/etc/group"; return; }
	s=$r/var/spool/kart
	assert_eq "drwxr-xr-x $gid" "$(stat -c '%A %g' "$s/new")" "new/ (the workers' alone)"
	assert_eq "drwxrwx--T $gid" "$(stat -c '%A %g' "$s/drop")" "drop/"
	assert_eq "drwxrws--T $gid" "$(stat -c '%A %g' "$s/tmp")" "tmp/"
	assert_eq "drwxrws--T $gid" "$(stat -c '%A %g' "$s/ids")" "ids/ (reservations; sticky)"
	assert_eq "1 -rw-r--r--" "$(cat "$s/format") $(stat -c %A "$s/format")" "format, the spool's format version"
	# The unit's ExecStartPre and ExecStart, %f being the spool.
	unit=$ROOT/contrib/systemd/kart-worker@.service
	pre=$(sed -n 's/^ExecStartPre=//p' "$unit" | sed "s|@BINDIR@|$KART_BUILD|; s|%f|$s|")
	start=$(sed -n 's/^ExecStart=//p' "$unit" | sed "s|@BINDIR@|$KART_BUILD|; s|%f|$s|")
	$pre || fail "ExecStartPre: $pre"
	# Each task runs as its submitter, who needs an account here: the
	# system accounts daemon and bin stand in for alice and bob, made
	# members of kart by setpriv (usermod -aG, for one process); nobody
	# is not a member.
	local alice="setpriv --reuid=daemon --regid=daemon --groups=$gid --"
	local bob="setpriv --reuid=bin --regid=bin --groups=$gid --"
	local eve="setpriv --reuid=nobody --regid=nogroup --clear-groups --"
	local id1 id2
	id1=$(cd / && KART_SPOOL=$s $alice "$KART" submit --name a1 -- uname -a) || fail "alice cannot submit"
	id2=$(cd / && KART_SPOOL=$s $bob "$KART" submit --name b1 -- echo bob) || fail "bob cannot submit"
	# Each drops into their own drop/USER/; the id is USER:NAME.
	assert_eq "daemon:a1 bin:b1" "$id1 $id2" "ids"
	assert_eq "daemon 700" "$(stat -c '%U %a' "$s/drop/daemon" 2>/dev/null)" "alice's drop directory"
	assert_file "$s/drop/daemon/a1"
	$bob rm -f "$s/drop/daemon/a1" 2>/dev/null
	assert_file "$s/drop/daemon/a1"
	$bob mv "$s/drop/daemon" "$s/drop/stolen" 2>/dev/null
	assert_file "$s/drop/daemon/a1"
	(cd / && KART_SPOOL=$s $eve "$KART" submit -- true >/dev/null 2>&1) && fail "a non-member could submit"
	# The worker as the unit starts it, with its notify socket.
	notify_listen "$T_ROOT/notify.sock" "$T_ROOT/notify.log"
	NOTIFY_SOCKET=$T_ROOT/notify.sock $start 2>>"$T_ROOT/sysworker.log" &
	local w=$!
	T_PIDS+=("$w")
	wait_until 20 grep -qs "^READY=1" "$T_ROOT/notify.log" || fail "no READY=1 from the unit's worker: $(tail -3 "$T_ROOT/sysworker.log")"
	local out
	out=$(cd / && KART_SPOOL=$s timeout 60 $alice sh -c "kart wait $id1 && kart cat $id1" 2>&1)
	assert_match "^Linux " "$out" "alice's kart wait && kart cat"
	# bob's result is bob's alone (users.sh has the rest).
	out=$(cd / && KART_SPOOL=$s timeout 60 $alice "$KART" wait "$id2" 2>&1; echo "rc=$?")
	assert_match "Permission denied.*rc=125" "$(tr '\n' ' ' <<<"$out")" "alice waits on bob's task"
	assert_eq "drwxr-s--- $gid" "$(stat -c '%A %g' "$s/done")" "done/"
	(cd / && KART_SPOOL=$s timeout 10 $eve "$KART" status >/dev/null 2>&1) && fail "a non-member read the results"
	# The timer's service, as the unit runs it (its KART_GC_ARGS), with
	# the worker live: a result older than those args go, the rest stay.
	local gcu=$ROOT/contrib/systemd/kart-gc@.service gcargs gccmd
	gcargs=$(sed -n 's/^Environment="KART_GC_ARGS=\(.*\)"$/\1/p' "$gcu")
	gccmd=$(sed -n 's/^ExecStart=//p' "$gcu" | sed "s|@BINDIR@|$KART_BUILD|; s|%f|$s|; s|\$KART_GC_ARGS|$gcargs|")
	assert_match "^--older-than [0-9]+d$" "$gcargs" "kart-gc@.service's KART_GC_ARGS"
	assert_file "$s/done/$id2.stdout"
	touch -d '400 days ago' "$s/done/$id2.json"
	$gccmd || fail "kart-gc@.service's ExecStart: $gccmd"
	assert_no_file "$s/done/$id2.json"
	assert_no_file "$s/done/$id2.stdout"
	assert_file "$s/done/$id1.json"
	assert_file "$s/cur/$(ls "$s/cur" | head -1)/.lock"
	stop_worker "$w"
	assert_match "STOPPING=1" "$(cat "$T_ROOT/notify.log")" "STOPPING=1 at SIGTERM"
}

# ---- systemd units ---------------------------------------------------------------------

test_units_verify() {
	local d=$T_ROOT/units u
	mkdir -p "$d/system" "$d/user" "$T_ROOT/xdg"
	chmod 0700 "$T_ROOT/xdg"
	for u in kart-worker@.service kart-gc@.service kart-gc@.timer; do
		sed "s|@BINDIR@|$KART_BUILD|g" "$ROOT/contrib/systemd/$u" >"$d/system/$u"
	done
	sed "s|@BINDIR@|$KART_BUILD|g" "$ROOT/contrib/systemd/kart-worker.service" >"$d/user/kart-worker.service"
	local err
	err=$(cd "$d/system" && systemd-analyze verify --man=no kart-worker@.service kart-gc@.service \
		kart-gc@.timer 2>&1)
	assert_eq "" "$err" "systemd-analyze verify (system units)"
	err=$(cd "$d/user" && XDG_RUNTIME_DIR=$T_ROOT/xdg systemd-analyze verify --man=no --user \
		kart-worker.service 2>&1)
	assert_eq "" "$err" "systemd-analyze verify (user unit)"
	local w=$ROOT/contrib/systemd/kart-worker@.service k
	for k in Type=notify Delegate=yes KillMode=mixed Restart=on-failure NoNewPrivileges=yes \
		WatchdogSec= ProtectSystem=strict 'ReadWritePaths=%f'; do
		grep -q "^$k" "$w" || fail "kart-worker@.service: no $k"
	done
	grep -q '^RestrictNamespaces\|^ProtectKernelTunables\|^ProtectControlGroups\|^SystemCallFilter' "$w" &&
		fail "kart-worker@.service sets an option that breaks bwrap or delegation"
	grep -q '^KillMode=mixed' "$ROOT/contrib/systemd/kart-worker.service" || fail "user unit: KillMode"
}

# The hardening the unit keeps still lets a root worker build sandboxes:
# its capability bounding set and no_new_privs, applied with setpriv.
test_unit_hardening_lets_it_work() {
	have_bwrap || { skip "bwrap cannot make a sandbox here"; return; }
	local caps s
	caps=$(sed -n '/^CapabilityBoundingSet=/,/^[^\t]/p' "$ROOT/contrib/systemd/kart-worker@.service" |
		sed 's/^CapabilityBoundingSet=//; s/\\$//' | tr -s ' \t\n' '\n' | grep '^CAP_' |
		tr 'A-Z' 'a-z' | sed 's/^cap_/+/' | paste -sd,)
	[ -n "$caps" ] || { fail "no CapabilityBoundingSet in the unit"; return; }
	s=$(mkspool)
	chmod 0755 "$T_ROOT" "$s" # the submitter's uid must reach its claim
	# A root task (allow_root: bwrap as root) and a user's (bwrap as the
	# submitter, after setresuid), with memory= (a cgroup leaf).
	printf '#!/bin/sh\n#kart: timeout=30s memory=64M\necho confined\n' >"$s/new/hard"
	printf '#!/bin/sh\n#kart: timeout=30s\nid -un\n' >"$s/tmp/user" && chown daemon "$s/tmp/user" &&
		mv "$s/tmp/user" "$s/new/user"
	timeout 60 setpriv --no-new-privs --bounding-set "-all,$caps" "$KART" -s "$s" worker --drain \
		>>"$s.worker.log" 2>&1 || fail "worker under the unit's bounding set: $(tail -3 "$s.worker.log")"
	has_result "$s" hard && has_result "$s" user || { fail "no results under the unit's hardening"; return; }
	assert_eq ok "$(field "$s" hard .status)" "status (error: $(field "$s" hard .error))"
	assert_eq confined "$(cat "$s/done/hard.stdout" 2>/dev/null)" "stdout"
	assert_eq ok "$(field "$s" user .status)" "a user's task (error: $(field "$s" user .error))"
	assert_eq daemon "$(cat "$s/done/user.stdout" 2>/dev/null)" "a user's task runs as its submitter"
}

# ---- kart gc ---------------------------------------------------------------------------

test_gc_tmp_and_stale() {
	local s
	s=$(mkspool)
	echo old >"$s/tmp/old" && touch -d '37 hours ago' "$s/tmp/old"
	mkdir "$s/tmp/olddir" && echo x >"$s/tmp/olddir/f" && touch -d '3 days ago' "$s/tmp/olddir"
	echo new >"$s/tmp/fresh" && touch -d '35 hours ago' "$s/tmp/fresh"
	echo x >"$s/done/.a.json.123.tmp" && touch -d '2 days ago' "$s/done/.a.json.123.tmp"
	echo x >"$s/done/.b.json.124.tmp"
	mkdir -p "$s/cur/.new.w.77" && touch "$s/cur/.new.w.77/.lock" && touch -d '2 days ago' "$s/cur/.new.w.77"
	ln -s /etc/passwd "$s/tmp/link" && touch -h -d '2 days ago' "$s/tmp/link"
	run_cmd -s "$s" gc --dry-run
	assert_eq 0 "$RC" "gc --dry-run ($ERR)"
	assert_match "would remove tmp/old" "$OUT" "gc --dry-run"
	assert_file "$s/tmp/old"
	run_cmd -s "$s" gc -v
	assert_eq 0 "$RC" "gc ($ERR)"
	assert_no_file "$s/tmp/old"
	assert_no_file "$s/tmp/olddir"
	assert_no_file "$s/tmp/link"
	assert_file /etc/passwd
	assert_file "$s/tmp/fresh"
	assert_no_file "$s/done/.a.json.123.tmp"
	assert_file "$s/done/.b.json.124.tmp"
	assert_no_file "$s/cur/.new.w.77"
	run_cmd -s "$s" gc --tmp-age 1h
	assert_no_file "$s/tmp/fresh"
	run_cmd -s "$s" gc --older-than nonsense
	assert_eq 2 "$RC" "gc --older-than nonsense"
	run_cmd -s "$s" gc extra
	assert_eq 2 "$RC" "gc with an argument"
}

# Dot files in new/ are never tasks: stale ones (a writer's staging file
# never renamed) go by the age rule of tmp/; a fresh one, a task, and a
# dot directory stay. 20,000 of them once stayed for good.
test_gc_new_dot_files() {
	local s i
	s=$(mkspool)
	for i in $(seq 1 200); do : >"$s/new/.stale.$i"; done
	touch -d '37 hours ago' "$s"/new/.stale.*
	: >"$s/new/.fresh" && touch -d '35 hours ago' "$s/new/.fresh"
	mkdir "$s/new/.dir" && touch -d '3 days ago' "$s/new/.dir"
	printf '#!/bin/sh\ntrue\n' >"$s/new/task" && touch -d '3 days ago' "$s/new/task"
	run_cmd -s "$s" gc
	assert_eq 0 "$RC" "gc ($ERR)"
	assert_eq 0 "$(find "$s/new" -name '.stale.*' | wc -l)" "stale dot files left in new/"
	assert_file "$s/new/.fresh"
	assert_file "$s/new/.dir"
	assert_file "$s/new/task"
	run_cmd -s "$s" gc --tmp-age 1h
	assert_no_file "$s/new/.fresh"
	assert_file "$s/new/task"
}

# Trees are removed iteratively, with a bounded number of descriptors:
# a directory 5,000 levels deep in tmp/ goes with `ulimit -n 64` (one
# descriptor per level, as before, could not), and so does a wide one.
test_gc_deep_tree() {
	command -v python3 >/dev/null || { skip "python3 is not installed"; return; }
	local s; s=$(mkspool)
	python3 - "$s/tmp" <<'PY' || { fail "cannot build the trees"; return; }
import os, sys
top = os.open(sys.argv[1], os.O_RDONLY)
for name, depth in (("deep", 5000), ("wide", 1)):
    os.mkdir(name, dir_fd=top)
    fd = os.open(name, os.O_RDONLY, dir_fd=top)
    for i in range(depth):
        os.mkdir("d", dir_fd=fd)
        n = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = n
    for i in range(3000 if name == "wide" else 3):
        os.close(os.open("f%d" % i, os.O_CREAT | os.O_WRONLY, dir_fd=fd))
    if name == "deep":
        os.symlink("/etc", "link", dir_fd=fd)
    os.close(fd)
PY
	touch -d '3 days ago' "$s/tmp/deep" "$s/tmp/wide"
	local rc=0
	(ulimit -n 64 && exec "$KART" -s "$s" gc) >"$T_ROOT/gc.out" 2>&1 || rc=$?
	assert_eq 0 "$rc" "gc of a 5,000-deep tree with 64 descriptors ($(head -c 300 "$T_ROOT/gc.out"))"
	assert_no_file "$s/tmp/deep"
	assert_no_file "$s/tmp/wide"
	assert_file /etc/passwd
}

test_gc_worker_dirs() {
	local s lp
	s=$(mkspool)
	mkdir "$s/cur/dead" && touch "$s/cur/dead/.lock" "$s/cur/dead/.x.stdout" && mkdir "$s/cur/dead/.x.out"
	mkdir "$s/cur/nolock"
	mkdir "$s/cur/held" && touch "$s/cur/held/.lock"
	# A live worker is a held lock: flock(1) holds this one.
	flock "$s/cur/held/.lock" sleep 29 &
	lp=$!
	T_PIDS+=("$lp")
	mkdir "$s/cur/claims" && touch "$s/cur/claims/.lock" "$s/cur/claims/task"
	wait_until 5 sh -c "! flock -n '$s/cur/held/.lock' true" || fail "flock(1) did not take the lock"
	run_cmd -s "$s" gc -v
	assert_eq 0 "$RC" "gc ($ERR)"
	assert_no_file "$s/cur/dead"
	assert_no_file "$s/cur/nolock"
	assert_file "$s/cur/held/.lock"
	assert_file "$s/cur/claims/task"
	assert_match "cur/dead/" "$OUT" "gc -v"
	kill $(pgrep -P "$lp") "$lp" 2>/dev/null # the sleep too: nothing outlives the test
	# A real worker's directory stays, and the worker works on.
	export KART_BACKEND=none
	start_worker "$s" --id live
	wait_until 10 test -e "$s/cur/live/.lock" || fail "worker did not start"
	run_cmd -s "$s" gc
	assert_file "$s/cur/live/.lock"
	echo 'echo after gc' >"$s/new/after"
	wait_until 20 has_result "$s" after || fail "the live worker did not run a task after gc"
	stop_worker "$WPID"
	unset KART_BACKEND
}

# A starting worker's directory is locked from the moment it appears in
# cur/: gc (or a peer) run just then must not take it for a dead one. The
# worker is held for 1 s right after the rename that puts it in place.
test_gc_never_takes_a_starting_worker() {
	command -v strace >/dev/null || { skip "strace is not installed"; return; }
	local s w; s=$(mkspool)
	KART_BACKEND=none strace -f -qq -o /dev/null -e trace=renameat2 \
		-e inject=renameat2:delay_exit=1000000:when=1 \
		"$KART" -s "$s" worker --id born >>"$s.worker.log" 2>&1 &
	w=$!
	T_PIDS+=("$w")
	wait_until 5 test -e "$s/cur/born/.lock" || { fail "the worker's directory never appeared"; return; }
	run_cmd -s "$s" gc -v
	assert_eq 0 "$RC" "gc ($ERR)"
	assert_file "$s/cur/born/.lock"
	echo 'echo up' >"$s/new/t"
	wait_until 20 has_result "$s" t || fail "the worker did not run a task"
	# SIGTERM to strace would only detach it: the worker itself first
	# (strace's one child; under make check-valgrind it is not named kart).
	local kp; kp=$(pgrep -P "$w")
	[ -n "$kp" ] && kill "$kp"
	wait_gone 20 "$w" || { fail "the worker did not stop"; kill -9 "$kp" "$w" 2>/dev/null; }
}

test_gc_older_than_removes_results_json_first() {
	local s
	s=$(mkspool)
	printf 'echo out; echo err >&2; echo keep >"$KART_OUTDIR/f"\n' >"$s/new/old1"
	echo 'echo x' >"$s/new/young"
	ln -s /etc/passwd "$s/new/hostile"
	KART_BACKEND=none drain "$s"
	has_result "$s" old1 || { fail "no result for old1"; return; }
	touch -d '3 days ago' "$s/done/old1.json" "$s/done/hostile.json"
	local named
	named=$(jq -r '[.stdout.path, .stderr.path, .task.path, (.artifacts.path // empty)] | map(select(.)) | .[]' \
		"$s/done/old1.json")
	# An orphan (a half-removed result) and a finish in progress.
	echo x >"$s/done/orphan.stdout" && touch -d '2 days ago' "$s/done/orphan.stdout"
	echo x >"$s/done/busy.task" && ln "$s/done/busy.task" "$T_ROOT/busy.claim" &&
		touch -d '2 days ago' "$s/done/busy.task"
	echo x >"$s/done/busy.stdout" && touch -d '2 days ago' "$s/done/busy.stdout"
	strace -f -o "$T_ROOT/gc.strace" -e trace=unlinkat,unlink,rmdir,fsync \
		"$KART" -s "$s" gc --older-than 1d >/dev/null 2>&1 || fail "gc --older-than 1d"
	assert_no_file "$s/done/old1.json"
	local p
	for p in $named; do assert_no_file "$s/$p"; done
	assert_no_file "$s/done/old1.task"
	assert_no_file "$s/done/hostile.json"
	assert_no_file "$s/done/hostile.task"
	assert_file "$s/done/young.json"
	assert_file "$s/done/young.stdout"
	assert_no_file "$s/done/orphan.stdout"
	assert_file "$s/done/busy.task"
	assert_file "$s/done/busy.stdout"
	# The JSON went first, then done/ was fsynced, then the files it names.
	local order
	order=$(grep -o 'unlinkat([^"]*"old1[^"]*"\|fsync(' "$T_ROOT/gc.strace" | sed 's/^unlinkat([^"]*"//; s/"$//' |
		awk '/old1/ || (seen && /fsync/) { print } /old1.json/ { seen = 1 }' | tr '\n' ' ')
	assert_match "^old1\.json fsync\( old1\.(stdout|stderr)" "$order" "order of removals"
	assert_match "old1\.task (fsync\( )*$" "$order" "the .task (the id's reservation) goes last"
}

test_gc_while_workers_run() {
	local s i n
	s=$(mkspool)
	export KART_BACKEND=none
	start_worker "$s" --slots 4
	local w1=$WPID
	start_worker "$s" --slots 4
	local w2=$WPID
	for i in $(seq 1 40); do printf 'sleep 0.0%s\necho %s\n' "$((i % 10))" "$i" >"$s/tmp/t$i" &&
		mv "$s/tmp/t$i" "$s/new/t$i"; done
	for i in $(seq 1 20); do "$KART" -s "$s" gc --tmp-age 0 >/dev/null 2>&1 || fail "gc exited $?"; done
	wait_until 60 count_ge 40 n_results "$s" || fail "not every task finished"
	for i in $(seq 1 40); do
		has_result "$s" "t$i" || { fail "t$i: no result"; continue; }
		[ "$(field "$s" "t$i" .status)" = ok ] || fail "t$i: $(field "$s" "t$i" '.status + " " + (.error // "")')"
	done
	n=$(ls -A "$s/cur" | wc -l)
	assert_eq 2 "$n" "live workers' directories left by gc"
	stop_worker "$w1"
	stop_worker "$w2"
	unset KART_BACKEND
}

# ---- retry, status, watch, wait -------------------------------------------------------------

test_retry() {
	local s
	s=$(mkspool)
	printf '#!/bin/sh\necho attempt $KART_ATTEMPT\nexit 4\n' >"$s/new/job"
	ln -s /etc/passwd "$s/new/bad"
	KART_BACKEND=none drain "$s"
	run_cmd -s "$s" retry job
	assert_eq 0 "$RC" "retry job ($ERR)"
	assert_eq job.2 "$OUT" "the new id"
	assert_file "$s/new/job.2"
	assert_eq "" "$(ls -A "$s/tmp")" "tmp/ after retry"
	run_cmd -s "$s" retry job
	assert_eq job.3 "$OUT" "retried again while job.2 is queued"
	KART_BACKEND=none drain "$s"
	assert_eq failed "$(field "$s" job.2 .status)" "the retried task ran"
	assert_eq job "$(field "$s" job.2 .name)" "its name is the submitted one"
	assert_eq 1 "$(field "$s" job.2 .attempt)" "attempt"
	assert_eq "attempt 1" "$(cat "$s/done/job.2.stdout")" "its output"
	assert_eq job "$(field "$s" job .id)" "the old result is left as it is"
	run_cmd -s "$s" retry bad
	assert_eq 1 "$RC" "retry of a hostile entry"
	run_cmd -s "$s" retry nosuch
	assert_eq 1 "$RC" "retry of an unknown id"
	run_cmd -s "$s" retry
	assert_eq 2 "$RC" "retry without an id"
}

test_status_summary_filters_ndjson() {
	local s
	s=$(mkspool)
	echo 'echo ok' >"$s/new/a"
	echo 'exit 1' >"$s/new/b"
	echo 'exit 2' >"$s/new/c"
	KART_BACKEND=none drain "$s"
	echo 'echo later' >"$s/new/q"
	touch -d '2 hours ago' "$s/done/a.json"
	run_cmd -s "$s" status --summary
	assert_eq 0 "$RC" "status --summary ($ERR)"
	assert_match "queued	1" "$OUT" "summary: queued"
	assert_match "ok	1" "$OUT" "summary: ok"
	assert_match "failed	2" "$OUT" "summary: failed"
	assert_match "total	4" "$OUT" "summary: total"
	run_cmd -s "$s" status --summary --json
	assert_eq "1 2 4" "$(jq -r '"\(.ok) \(.failed) \(.total)"' <<<"$OUT")" "summary --json"
	run_cmd -s "$s" status --state failed
	assert_eq "b c" "$(cut -f1 <<<"$OUT" | sort | tr '\n' ' ' | sed 's/ $//')" "--state failed"
	run_cmd -s "$s" status --state queued,ok
	assert_eq "a q" "$(cut -f1 <<<"$OUT" | sort | tr '\n' ' ' | sed 's/ $//')" "--state queued,ok"
	run_cmd -s "$s" status --state done --state queued --summary --json
	assert_eq 4 "$(jq .total <<<"$OUT")" "--state done --state queued"
	run_cmd -s "$s" status --older-than 1h
	assert_eq a "$(cut -f1 <<<"$OUT")" "--older-than 1h"
	run_cmd -s "$s" status --newer-than 1h --state done
	assert_eq "b c" "$(cut -f1 <<<"$OUT" | sort | tr '\n' ' ' | sed 's/ $//')" "--newer-than 1h"
	run_cmd -s "$s" status --ndjson
	assert_eq 4 "$(grep -c . <<<"$OUT")" "--ndjson: lines"
	jq -e -s 'length == 4 and all(.[]; has("id") and has("state") and has("since"))' <<<"$OUT" \
		>/dev/null || fail "--ndjson: not one object per line: $OUT"
	run_cmd -s "$s" status --json
	jq -e 'type == "array" and length == 4' <<<"$OUT" >/dev/null || fail "--json: not one array"
	run_cmd -s "$s" status --state nonsense
	assert_eq 2 "$RC" "--state nonsense"
	run_cmd -s "$s" status --json --ndjson
	assert_eq 2 "$RC" "--json --ndjson"
	run_cmd -s "$s" status --older-than x
	assert_eq 2 "$RC" "--older-than x"
}

test_watch() {
	local s wp out
	s=$(mkspool)
	echo 'echo before' >"$s/new/before"
	KART_BACKEND=none drain "$s"
	"$KART" -s "$s" watch >"$T_ROOT/watch.out" 2>&1 &
	wp=$!
	T_PIDS+=("$wp")
	"$KART" -s "$s" watch --json --all >"$T_ROOT/watch.json" 2>&1 &
	local wj=$!
	T_PIDS+=("$wj")
	sleep 0.3
	echo 'echo one' >"$s/new/one"
	echo 'exit 5' >"$s/new/two"
	KART_BACKEND=none drain "$s"
	wait_until 10 count_ge 2 lines "$T_ROOT/watch.out" || fail "watch printed $(cat "$T_ROOT/watch.out")"
	wait_until 10 count_ge 3 lines "$T_ROOT/watch.json" || fail "watch --json --all printed too little"
	out=$(sort "$T_ROOT/watch.out")
	assert_eq "one	ok	0
two	failed	5" "$out" "watch lines"
	assert_eq "before one two" "$(jq -r .id "$T_ROOT/watch.json" | sort | tr '\n' ' ' | sed 's/ $//')" \
		"watch --json --all: one result document per line"
	kill -TERM "$wp"
	wait_gone 5 "$wp" || fail "watch did not exit on SIGTERM"
	assert_eq 0 "$RC" "watch's exit status on SIGTERM"
	kill -INT "$wj"
	wait_gone 5 "$wj" || fail "watch did not exit on SIGINT"
	assert_eq 0 "$RC" "watch's exit status on SIGINT"
	run_cmd -s "$s" watch extra
	assert_eq 2 "$RC" "watch with an argument"
	# It is inotify on done/ that wakes it, not a timer: a watch on
	# done/, and only waits without a timeout, while a result lands.
	command -v strace >/dev/null || { skip "strace is not installed"; return; }
	timeout -s INT 3 strace -qq -o "$T_ROOT/watch.strace" -e trace=inotify_add_watch,poll,ppoll,epoll_wait,nanosleep,clock_nanosleep \
		"$KART" -s "$s" watch >"$T_ROOT/watch3.out" 2>/dev/null &
	local sp=$!
	T_PIDS+=("$sp")
	wait_until 5 grep -qs 'inotify_add_watch' "$T_ROOT/watch.strace" || fail "no inotify_add_watch"
	echo 'echo three' >"$s/new/three"
	KART_BACKEND=none drain "$s"
	wait_until 5 grep -qs three "$T_ROOT/watch3.out" || fail "watch under strace missed a result"
	wait_gone 10 "$sp"
	assert_match "inotify_add_watch\(.*\"$s/done\", .*IN_MOVED_TO.*\) = [0-9]+" \
		"$(cat "$T_ROOT/watch.strace")" "watch: an inotify watch on done/"
	grep -E '^(poll|ppoll|epoll_wait)\(' "$T_ROOT/watch.strace" | grep -vE '(, -1|NULL, NULL, 8)\)' |
		grep -q . && fail "watch waits with a timeout: $(grep -E '^(poll|ppoll)' "$T_ROOT/watch.strace" | head -2)"
	grep -qE '^(clock_)?nanosleep' "$T_ROOT/watch.strace" && fail "watch sleeps"
}

test_wait_shows_progress_on_a_terminal() {
	command -v script >/dev/null || { skip "no script(1)"; return; }
	local s out
	s=$(mkspool)
	echo 'true' >"$s/new/p1"
	echo 'true' >"$s/new/p2"
	KART_BACKEND=none drain "$s"
	out=$(timeout 30 script -qec "$KART -s $s wait p1 p2" /dev/null </dev/null)
	assert_match "2/2 done" "$out" "kart wait on a terminal"
	out=$("$KART" -s "$s" wait p1 p2 2>&1)
	assert_eq "" "$out" "kart wait off a terminal prints nothing"
}

# ---- worker logging and sd_notify ---------------------------------------------------------

test_worker_log_lines() {
	local s log
	s=$(mkspool)
	echo 'sleep 0.1' >"$s/new/lg"
	echo 'exit 1' >"$s/new/lf"
	KART_BACKEND=none drain "$s" --id wlog
	log=$(cat "$s.worker.log")
	assert_match 'level=info event=claimed worker=wlog id=lg' "$log" "claimed line"
	assert_match 'event=started worker=wlog id=lg' "$log" "started line"
	assert_match 'event=finished worker=wlog id=lg status=ok duration_ms=[0-9]+' "$log" "finished line"
	assert_match 'event=finished worker=wlog id=lf status=failed' "$log" "finished (failed) line"
	grep -v '^ts=[0-9T:.-]*Z level=[a-z]* ' "$s.worker.log" | grep -q . &&
		fail "lines not in logfmt: $(grep -v '^ts=' "$s.worker.log" | head -3)"
	s=$(mkspool)
	echo 'true' >"$s/new/lj"
	KART_BACKEND=none timeout 60 "$KART" -s "$s" worker --drain --log-format json 2>"$T_ROOT/j.log" ||
		fail "worker --log-format json"
	jq -e -s 'all(.[]; has("ts") and has("level"))' "$T_ROOT/j.log" >/dev/null ||
		fail "--log-format json: not one object per line: $(head -3 "$T_ROOT/j.log")"
	assert_eq "claimed started finished" \
		"$(jq -r 'select(.id == "lj") | .event' "$T_ROOT/j.log" | tr '\n' ' ' | sed 's/ $//')" "json events"
	assert_eq ok "$(jq -r 'select(.event == "finished") | .status' "$T_ROOT/j.log")" "json status"
	run_cmd -s "$s" worker --log-format xml
	assert_eq 2 "$RC" "--log-format xml"
}

test_sd_notify() {
	local s w log=$T_ROOT/n.log
	s=$(mkspool)
	notify_listen "@kart-test-$$" "$log"
	KART_BACKEND=none NOTIFY_SOCKET=@kart-test-$$ WATCHDOG_USEC=200000 "$KART" -s "$s" worker \
		2>>"$s.worker.log" &
	w=$!
	T_PIDS+=("$w")
	wait_until 10 grep -qs '^READY=1' "$log" || fail "no READY=1"
	echo 'sleep 0.2' >"$s/new/n1"
	wait_until 10 has_result "$s" n1 || fail "no result"
	wait_until 5 count_ge 3 grep -c '^WATCHDOG=1' "$log" || fail "WATCHDOG=1 not sent every 100ms"
	assert_match "STATUS=1 running" "$(cat "$log")" "STATUS= while a task runs"
	stop_worker "$w"
	assert_match "STOPPING=1" "$(cat "$log")" "STOPPING=1"
	# WATCHDOG_PID names another process: no watchdog pings for us.
	: >"$log"
	KART_BACKEND=none NOTIFY_SOCKET=@kart-test-$$ WATCHDOG_USEC=100000 WATCHDOG_PID=1 \
		"$KART" -s "$s" worker 2>>"$s.worker.log" &
	w=$!
	T_PIDS+=("$w")
	wait_until 10 grep -qs '^READY=1' "$log" || fail "no READY=1 the second time"
	sleep 0.5
	grep -q WATCHDOG "$log" && fail "watchdog pings although WATCHDOG_PID is not ours"
	stop_worker "$w"
}

# ---- clients and the cron recipe -----------------------------------------------------------

test_clients_against_a_worker() {
	local s py=$ROOT/contrib/clients/kart_submit.py sh=$ROOT/contrib/clients/kart-submit.sh id i
	s=$(mkspool)
	export KART_BACKEND=none
	start_worker "$s"
	printf '#!/bin/sh\necho py-task\n' >"$T_ROOT/t.sh"
	id=$(python3 "$py" "$s" "$T_ROOT/t.sh" pyname) || fail "python client"
	assert_eq pyname "$id" "python client: id"
	id=$(echo 'echo sh-task' | "$sh" "$s" shname) || fail "sh client"
	assert_eq shname "$id" "sh client: id"
	wait_until 20 has_result "$s" pyname && wait_until 20 has_result "$s" shname || fail "no results"
	assert_eq py-task "$(cat "$s/done/pyname.stdout" 2>/dev/null)" "python client's task ran"
	assert_eq sh-task "$(cat "$s/done/shname.stdout" 2>/dev/null)" "sh client's task ran"
	# A name done/ already has: the next free one, so the id printed is
	# the result's.
	id=$(python3 "$py" "$s" "$T_ROOT/t.sh" pyname)
	assert_eq pyname.2 "$id" "python client: a reused name"
	id=$(echo true | "$sh" "$s" shname)
	assert_eq shname.2 "$id" "sh client: a reused name"
	# Without a name: the python client names a task after its file, as
	# kart submit does; the sh client (stdin) makes a unique name. Many at
	# once, none lost or replaced.
	local subs=()
	# (each its own output file: concurrent appends to one may interleave)
	mkdir -p "$T_ROOT/idout"
	for i in $(seq 1 10); do
		python3 "$py" "$s" "$T_ROOT/t.sh" >"$T_ROOT/idout/a$i" &
		subs+=($!)
		echo 'echo x' | "$sh" "$s" >"$T_ROOT/idout/b$i" &
		subs+=($!)
		python3 "$py" "$s" "$T_ROOT/t.sh" same >"$T_ROOT/idout/c$i" &
		subs+=($!)
	done
	for i in "${subs[@]}"; do wait_gone 60 "$i" || fail "a submit hangs"; done
	cat "$T_ROOT"/idout/* >>"$T_ROOT/ids"
	assert_eq 30 "$(lines "$T_ROOT/ids")" "ids printed by 30 concurrent submits"
	# Unnamed sh submits get unique names; ten racing for one name each
	# reserve their own id (spool-layout README §5): 30 distinct ids.
	assert_eq 10 "$(grep -v '^same\|^t\.sh' "$T_ROOT/ids" | sort -u | wc -l)" "distinct ids of 10 concurrent unnamed sh submits"
	assert_eq 30 "$(sort -u "$T_ROOT/ids" | wc -l)" "distinct ids of all 30"
	assert_eq 10 "$(grep -c '^t\.sh' "$T_ROOT/ids")" "python submits named after their file"
	for id in $(cat "$T_ROOT/ids"); do
		wait_until 30 has_result "$s" "$id" || fail "$id: no result"
	done
	assert_eq "" "$(ls -A "$s/tmp")" "tmp/ after the clients"
	stop_worker "$WPID"
	unset KART_BACKEND
	# Maildir-correct: fsync of the file and of new/, RENAME_NOREPLACE.
	strace -f -o "$T_ROOT/py.strace" -e trace=renameat2,fsync,rename,link,linkat \
		python3 "$py" "$s" "$T_ROOT/t.sh" straced >/dev/null || fail "python client under strace"
	assert_match "renameat2\(.*RENAME_NOREPLACE\) = 0" "$(cat "$T_ROOT/py.strace")" "python: renameat2"
	assert_eq 3 "$(grep -c 'fsync(.*= 0' "$T_ROOT/py.strace")" "python: fsyncs (file, ids/, new/)"
	grep -q 'link(' "$T_ROOT/py.strace" && fail "python client uses link()"
	strace -f -o "$T_ROOT/sh.strace" -e trace=renameat2,fsync,rename,link,linkat \
		sh "$sh" "$s" shstraced </dev/null >/dev/null || fail "sh client under strace"
	assert_match "renameat2\(.*RENAME_NOREPLACE\) = 0" "$(cat "$T_ROOT/sh.strace")" "sh: renameat2"
	assert_eq 3 "$(grep -c 'fsync(.*= 0' "$T_ROOT/sh.strace")" "sh: fsyncs (file, ids/, new/)"
	grep -q 'link(' "$T_ROOT/sh.strace" && fail "sh client uses link()"
	python3 "$py" "$s" "$T_ROOT/t.sh" .hidden >/dev/null 2>&1 && fail "python client took a dot name"
	echo true | "$sh" "$s" a/b >/dev/null 2>&1 && fail "sh client took a name with /"
}

test_cron_consume_once_each() {
	local s c=$ROOT/contrib/cron/kart-consume st=$T_ROOT/state h=$T_ROOT/handler
	s=$(mkspool)
	printf '#!/bin/sh\nsleep 0.2\necho "$KART_ID $KART_STATUS $(basename "$1")" >>%s\n' "$T_ROOT/handled" >"$h"
	chmod +x "$h"
	echo 'true' >"$s/new/r1"
	echo 'exit 1' >"$s/new/r2"
	KART_BACKEND=none drain "$s"
	# Two runs at once: one does the work, the other leaves at once.
	PATH=$KART_BUILD:$PATH "$c" "$s" "$st" "$h" &
	local p=$!
	PATH=$KART_BUILD:$PATH "$c" "$s" "$st" "$h" || fail "kart-consume (second, concurrent)"
	wait "$p" || fail "kart-consume exited $?"
	assert_eq "r1 ok r1.json
r2 failed r2.json" "$(sort "$T_ROOT/handled")" "handled once each"
	PATH=$KART_BUILD:$PATH "$c" "$s" "$st" "$h" || fail "kart-consume (nothing new)"
	assert_eq 2 "$(wc -l <"$T_ROOT/handled")" "a run with nothing new"
	echo 'true' >"$s/new/r3"
	KART_BACKEND=none drain "$s"
	PATH=$KART_BUILD:$PATH "$c" "$s" "$st" "$h" || fail "kart-consume (one new)"
	assert_eq "r3 ok r3.json" "$(tail -1 "$T_ROOT/handled")" "the new result"
	assert_eq 3 "$(wc -l <"$T_ROOT/handled")" "handled in all"
	# A failing handler: that result again next time, the others not.
	echo 'true' >"$s/new/r4"
	KART_BACKEND=none drain "$s"
	printf '#!/bin/sh\n[ "$KART_ID" = r4 ] && [ ! -e %s ] && exit 1\necho "$KART_ID" >>%s\n' \
		"$T_ROOT/fixed" "$T_ROOT/handled" >"$h"
	PATH=$KART_BUILD:$PATH "$c" "$s" "$st" "$h" 2>/dev/null && fail "kart-consume hid a handler failure"
	touch "$T_ROOT/fixed"
	PATH=$KART_BUILD:$PATH "$c" "$s" "$st" "$h" || fail "kart-consume (retry)"
	assert_eq r4 "$(tail -1 "$T_ROOT/handled")" "a failed handler ran again"
	assert_eq 4 "$(wc -l <"$T_ROOT/handled")" "handled in all, after the retry"
	# Results gone (gc): the state forgets them.
	touch -d '3 days ago' "$s/done/r1.json"
	"$KART" -s "$s" gc --older-than 1d || fail "gc"
	PATH=$KART_BUILD:$PATH "$c" "$s" "$st" "$h" || fail "kart-consume after gc"
	assert_eq "r2 r3 r4" "$(sort "$st" | tr '\n' ' ' | sed 's/ $//')" "the state after gc"
	assert_eq "state.lock" "$(ls "$T_ROOT" | grep '^state\.')" "kart-consume leaves only its lock file"
}

# ---- completions, man pages, kart.conf.example ----------------------------------------------

# The verbs kart --help lists.
verbs() { "$KART" --help | awk '/^commands:/ { c = 1; next } c && /^$/ { exit } c { print $1 }'; }

test_completions() {
	local v s out
	for v in $(verbs); do
		grep -qw -- "$v" "$ROOT/contrib/completions/kart.bash" || fail "kart.bash: no verb $v"
		grep -q "'$v:" "$ROOT/contrib/completions/_kart" || fail "_kart: no verb $v"
	done
	s=$(mkspool)
	echo true >"$s/new/queuedtask"
	out=$(bash -c '
		. "$1/contrib/completions/kart.bash"
		COMP_WORDS=(kart st); COMP_CWORD=1; _kart; echo "${COMPREPLY[*]}"
		COMP_WORDS=(kart -s "$2" wait ""); COMP_CWORD=4; _kart; echo "${COMPREPLY[*]}"
		COMP_WORDS=(kart status --st); COMP_CWORD=2; _kart; echo "${COMPREPLY[*]}"
		COMP_WORDS=(kart worker --log-format ""); COMP_CWORD=3; _kart; echo "${COMPREPLY[*]}"
	' _ "$ROOT" "$s" 2>&1)
	assert_eq "status
queuedtask
--state
logfmt json text" "$out" "bash completions"
	zsh -n "$ROOT/contrib/completions/_kart" || fail "_kart: zsh syntax"
	out=$(zsh -f -c 'autoload -Uz compinit && compinit -u -D 2>/dev/null
		fpath=($1 $fpath); autoload -Uz _kart; whence -w _kart' _ "$ROOT/contrib/completions" 2>&1)
	assert_match "_kart: function" "$out" "zsh loads _kart"
	# zsh completes as a user would see it: each line typed in an
	# interactive zsh on a pseudo-terminal, TAB, then the line printed.
	cat >"$T_ROOT/complete.zsh" <<'ZSH'
zmodload zsh/zpty
setopt extendedglob
dir=$1; shift
zpty z zsh -f -i
zpty -w z "bindkey -e; fpath=($dir \$fpath); autoload -Uz compinit; compinit -u -D; PS1='> '; unsetopt BEEP; print READY\$((1+1))"
zpty -r -m z out '*READY2*'
for line in "$@"; do
	zpty -w -n z "$line"$'\t'
	zpty -w z $'\C-aprint -r -- X$((6*7)) \C-e Y$((6*7))'
	zpty -r -m z out '*X42 *Y42*'
	out=${out##*X42 }
	print -r -- "${${out%%Y42*}%% ##}"
done
zpty -d z
ZSH
	out=$(cd "$T_ROOT" && env -u KART_SPOOL PATH="$KART_BUILD:$PATH" timeout 30 zsh -f "$T_ROOT/complete.zsh" \
		"$ROOT/contrib/completions" 'kart sta' 'kart status --st' 'kart worker --log-format j' \
		"kart -s $s wait q" "kart --spool $s cat q" 'kart wait q' 2>&1)
	assert_eq "kart status
kart status --state
kart worker --log-format json
kart -s $s wait queuedtask
kart --spool $s cat queuedtask
kart wait q" "$out" "zsh completions"
	out=$(cd "$T_ROOT" && KART_SPOOL=$s timeout 30 zsh -f "$T_ROOT/complete.zsh" "$ROOT/contrib/completions" \
		'kart cancel q' 'kart retry q' 2>&1)
	assert_eq "kart cancel queuedtask
kart retry q" "$out" "zsh completions from \$KART_SPOOL (retry: finished tasks only)"
}

test_man_pages_render_cleanly() {
	local f out v o
	for f in kart.1 kart-worker.8 kart.conf.5 kart-spool.5 kart-task.5; do
		[ -e "$ROOT/docs/$f" ] || { fail "no docs/$f"; continue; }
		out=$(groff -man -Tutf8 -ww -z "$ROOT/docs/$f" 2>&1)
		assert_eq "" "$out" "groff -ww on $f"
		out=$(MANWIDTH=80 man --warnings -E UTF-8 -l "$ROOT/docs/$f" 2>&1 >/dev/null)
		assert_eq "" "$out" "man --warnings -l $f"
		out=$(MANWIDTH=80 man -l "$ROOT/docs/$f" 2>/dev/null | grep -c .)
		[ "$out" -gt 20 ] || fail "man -l $f rendered $out lines"
		# mandoc's linter is stricter than groff (an empty paragraph, a
		# missing date); contrib/install-deps installs it.
		if command -v mandoc >/dev/null; then
			out=$(mandoc -Tlint -W warning "$ROOT/docs/$f" 2>&1)
			assert_eq "" "$out" "mandoc -Tlint on $f"
		else
			skip "no mandoc to lint $f (contrib/install-deps installs it)"
		fi
	done
	# kart(1) names every verb, and every option of every verb.
	local page
	page=$(MANWIDTH=200 man -l "$ROOT/docs/kart.1" 2>/dev/null)
	local sec
	for v in $(verbs); do
		grep -q "^   kart $v" <<<"$page" || fail "kart(1): no section for kart $v"
		# ... and its exit codes, in its own section.
		grep -Eq "Exit +status: +0" <<<"$(sed -n "/^   kart $v/,/^   kart [a-z]\|^[A-Z]/p" <<<"$page")" ||
			fail "kart(1), kart $v: no exit status"
		# Its section cut once, then each option looked for in it by
		# the shell: no sed and grep per option.
		sec=$(sed -n "/^   kart $v/,/^   kart [a-z]/p" <<<"$page")
		for o in $("$KART" "$v" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
			[ "$o" = --help ] && continue
			[[ $sec == *"$o"* ]] || fail "kart(1), kart $v: no $o"
		done
	done
}

# The keys src/policy/policy_conf.c knows: the rows of its key table, each
# ROW("section", "key", ...), and the per-lane keys of conf_limit.
conf_keys() {
	{
		sed -n '/^static const struct conf_key conf_keys\[\] = {/,/^};/p' "$ROOT/src/policy/policy_conf.c" |
			grep -o '^	[A-Z_]*("[a-z_.]*", "[a-z_]*"' | sed 's/.*"\(.*\)"$/\1/'
		sed -n '/^static int conf_limit/,/^}/p' "$ROOT/src/policy/policy_conf.c" |
			grep -o 'strcmp(key, "[a-z_]*")' | sed 's/.*"\(.*\)".*/\1/'
	} | sort -u
}

test_conf_example_and_man_name_every_key() {
	local k ex=$ROOT/contrib/kart.conf.example
	[ -n "$(conf_keys)" ] || { fail "no keys found in src/policy/policy_conf.c"; return; }
	for k in $(conf_keys); do
		grep -q "^#$k = " "$ex" || fail "kart.conf.example: no $k"
		grep -q "^\.BI\? $k \|^\.BR $k \|[ ,]$k " "$ROOT/docs/kart.conf.5" || fail "kart.conf(5): no $k"
	done
	# Every key set at once, as the example shows it, is a valid policy.
	local s
	s=$(mkspool)
	sed -n 's/^#\(\[[a-z.]*\]\)$/\1/p; s/^#\([a-z_]* = .*\)$/\1/p' "$ex" >"$s/kart.conf"
	[ "$(grep -c ' = ' "$s/kart.conf")" -ge "$(conf_keys | wc -l)" ] || fail "fewer settings than keys"
	KART_BACKEND=none timeout 30 "$KART" -s "$s" worker --drain >>"$s.worker.log" 2>&1 ||
		fail "the example, uncommented, is refused: $(grep -i 'line\|policy' "$s.worker.log" | tail -2)"
	# ... and a bad one is not: the test can fail.
	echo 'bogus_key = 1' >>"$s/kart.conf"
	KART_BACKEND=none timeout 30 "$KART" -s "$s" worker --drain >/dev/null 2>&1 &&
		fail "a kart.conf with an unknown key was accepted"
}

# The directives src/spool/task.c parses ("net" and every key=): the rows
# of its directive table, each ROW("key", ...).
task_directives() {
	sed -n '/^static const struct directive directives\[\] = {/,/^};/p' "$ROOT/src/spool/task.c" |
		grep -o '^	[A-Z0-9_]*("[a-z_]*"' | sed 's/.*"\(.*\)"$/\1/' | sort -u
}
# The items of a section of a man page's source: the words .B/.BI/.BR
# tag paragraphs start with, up to an "=".
man_items() {
	sed -n "/^\.SH $2\$/,/^\.SH /p" "$ROOT/docs/$1" | awk 'p && /^\.BI? |^\.BR / { print $2 } { p = /^\.TP/ }' |
		sed 's/=.*//' | sort -u
}

# kart-task(5) is the task format as the worker reads it: the directives
# it lists are the ones src/spool/task.c parses, each is accepted in a real
# task, and the sandbox environment it promises is the one a task sees.
test_task_man_names_every_directive() {
	have_bwrap || { skip "bwrap cannot make a sandbox here"; return; }
	local parsed documented s
	parsed=$(task_directives | paste -sd' ')
	documented=$(man_items kart-task.5 DIRECTIVES | paste -sd' ')
	[ -n "$parsed" ] || { fail "no directives found in src/spool/task.c"; return; }
	assert_eq "$parsed" "$documented" "directives: src/spool/task.c against kart-task(5)"
	local d
	for d in $(task_directives); do
		grep -q "\b$d\b" <<<"$(sed -n '/^`timeout=DUR`/,/^$/p' "$ROOT/README.md")" ||
			[ "$d" = name ] || fail "README's directive list: no $d"
	done
	# Every documented directive but net (granted by the policy, see
	# confine.sh) in one task, run in the real sandbox.
	s=$(mkspool)
	{
		printf '#!/bin/sh\n#kart: timeout=30s memory=256M pids=64 cpu=0.5 lane=batch\n'
		printf '#kart: priority=1 retries=1 output=1M name=dirs kill_grace=2s label=all\n'
		printf 'env | cut -d= -f1 | grep -vx PWD | sort | paste -sd" "\n'
		printf 'echo "$KART_TASK_ID $KART_ATTEMPT $(pwd) $(ls -A | wc -l)"\n'
		printf 'echo kept >"$KART_OUTDIR/f"\n'
	} >"$s/new/d1"
	drain "$s"
	[ -e "$s/done/d1.json" ] || { fail "no result"; return; }
	assert_eq ok "$(field "$s" d1 .status)" "every directive accepted (error: $(field "$s" d1 .error))"
	assert_eq dirs "$(field "$s" d1 .name)" "name="
	# The variables the first bullet of THE SANDBOX names (PWD is the
	# shell's own), and the values the page gives them.
	local env_doc
	env_doc=$(sed -n '/^\.SH THE SANDBOX/,/^\.IP/d; /^an environment that is cleared/,/^\.IP/p' \
		"$ROOT/docs/kart-task.5" | grep -o '^\.BR\? [A-Z][A-Z_]*' | awk '{ print $2 }' | sort | paste -sd' ')
	[ -n "$env_doc" ] || { fail "kart-task(5): no environment found"; return; }
	assert_eq "$env_doc" "$(sed -n 1p "$s/done/d1.stdout")" "the task's environment against kart-task(5)"
	assert_eq "d1 1 /work 0" "$(sed -n 2p "$s/done/d1.stdout")" "KART_TASK_ID, KART_ATTEMPT, the empty /work"
	assert_eq kept "$(cat "$s/done/d1.out/f" 2>/dev/null)" "a file in \$KART_OUTDIR, kept in done/ID.out/"
}

# OPS_ONLY=REGEX: run only the matching tests (when working on one).
if [ -n "${OPS_ONLY:-}" ]; then
	for f in $(declare -F | awk '{print $3}' | grep '^test_' | grep -Ev -- "$OPS_ONLY"); do unset -f "$f"; done
fi
run_tests
