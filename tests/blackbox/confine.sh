# Confinement from the outside: Landlock in the launcher (bwrap and backend
# none), running as the submitter, root tasks, credentials for network
# tasks only, and the on_done hook.
. "$(dirname "$0")/../lib.sh"

# The kernel's Landlock ABI, as kart doctor sees it ("unsupported" if none).
# Under make check-valgrind, from the same kart run natively (KART_NATIVE):
# valgrind has no landlock_create_ruleset. The launcher, which applies the
# ruleset, never runs under valgrind.
LL_ABI=$("${KART_NATIVE:-$KART}" doctor --json 2>/dev/null | jq -r .landlock_abi)

need_landlock() {
	[[ $LL_ABI =~ ^[0-9]+$ ]] || skip "this kernel has no Landlock ($LL_ABI)"
}
need_root() {
	[ "$(id -u)" = 0 ] || skip "running tasks as their submitter needs a root worker"
}
need_bwrap() { have_bwrap || skip "bwrap cannot build a sandbox here"; }

# A spool that other users can reach (mktemp makes 0700 directories).
open_spool() {
	chmod 755 "$T_ROOT" "$1"
}

# The ABI that confined the task is in the result; "off" when off; the
# ruleset is really there: "/" cannot be listed under it, and can without.
test_landlock_abi_in_result() {
	need_bwrap || return
	need_landlock || return
	local s; s=$(mkspool)
	local t='#!/bin/sh\nls / >/dev/null 2>&1 && echo listed || echo denied\n'
	printf "$t" >"$s/new/auto"
	drain "$s"
	printf "$t" >"$s/new/enforced"
	KART_LANDLOCK=enforce drain "$s"
	printf "$t" >"$s/new/off"
	KART_LANDLOCK=off drain "$s"
	assert_eq "$LL_ABI" "$(field "$s" auto .sandbox.landlock)" "auto (the default): the ABI"
	assert_eq "$LL_ABI" "$(field "$s" enforced .sandbox.landlock)" "enforce: the ABI"
	assert_eq number "$(field "$s" enforced '.sandbox.landlock | type')" "the ABI is a JSON number"
	assert_eq off "$(field "$s" off .sandbox.landlock)" "KART_LANDLOCK=off"
	assert_eq denied "$(cat "$s/done/enforced.stdout")" "under Landlock, / is not readable"
	assert_eq listed "$(cat "$s/done/off.stdout")" "without Landlock, / is readable"
	local id
	for id in auto enforced off; do assert_eq ok "$(field "$s" "$id" .status)" "$id status"; done
}

# Fault injection: a kernel without Landlock (ENOSYS from the probe) and
# a ruleset that fails to apply (EPERM from landlock_restrict_self).
test_landlock_unavailable_or_failing() {
	need_bwrap || return
	need_landlock || return
	command -v strace >/dev/null || { skip "no strace for fault injection"; return; }
	local s; s=$(mkspool)
	local nosys='inject=landlock_create_ruleset:error=ENOSYS'
	printf '#!/bin/sh\necho ran\n' >"$s/new/enforce-nosys"
	KART_LANDLOCK=enforce timeout 120 strace -f -qq -o /dev/null -e trace=landlock_create_ruleset \
		-e "$nosys" "$KART" -s "$s" worker --drain >>"$s.worker.log" 2>&1
	printf '#!/bin/sh\necho ran\n' >"$s/new/auto-nosys"
	KART_LANDLOCK=auto timeout 120 strace -f -qq -o /dev/null -e trace=landlock_create_ruleset \
		-e "$nosys" "$KART" -s "$s" worker --drain >>"$s.worker.log" 2>&1
	printf '#!/bin/sh\necho ran\n' >"$s/new/restrict-eperm"
	timeout 120 strace -f -qq -o /dev/null -e trace=landlock_restrict_self \
		-e inject=landlock_restrict_self:error=EPERM "$KART" -s "$s" worker --drain \
		>>"$s.worker.log" 2>&1
	assert_eq refused "$(field "$s" enforce-nosys .status)" "enforce without Landlock"
	assert_eq landlock_unavailable "$(field "$s" enforce-nosys .refusal)" "its refusal"
	assert_eq "" "$(cat "$s/done/enforce-nosys.stdout")" "it never ran"
	assert_eq ok "$(field "$s" auto-nosys .status)" "auto without Landlock runs"
	assert_eq unsupported "$(field "$s" auto-nosys .sandbox.landlock)" "and says so"
	assert_eq ran "$(cat "$s/done/auto-nosys.stdout")" "auto output"
	assert_eq refused "$(field "$s" restrict-eperm .status)" "a ruleset that fails"
	assert_eq landlock_failed "$(field "$s" restrict-eperm .refusal)" "its refusal"
	assert_match "landlock_restrict_self" "$(field "$s" restrict-eperm .error)" "error says which step"
	assert_eq "" "$(cat "$s/done/restrict-eperm.stdout")" "it never ran"
}

# Backend none has no namespaces: Landlock is all the filesystem
# confinement there is. With it, writes outside the work dir, the private
# TMPDIR and $KART_OUTDIR fail, even for a root task; without it they
# succeed (that is what none does not protect).
test_none_is_confined_by_landlock_only() {
	need_landlock || return
	local s; s=$(mkspool)
	local outside=$T_ROOT/outside
	mkdir -p "$outside"
	cat >"$T_ROOT/probe.sh" <<EOF
#!/bin/sh
w() { if (echo x >"\$1") 2>/dev/null; then echo "\$2=written"; else echo "\$2=denied"; fi; }
w ./in-work work
w "\$TMPDIR/in-tmp" tmpdir
w "\$KART_OUTDIR/kept" outdir
w ../in-claim-dir claim-dir
w "$outside/host-file" outside
w /tmp/kart-confine-\$\$ host-tmp
w "$s/new/injected" spool-new
w /etc/kart-confine-probe etc
if ls "$s/done" >/dev/null 2>&1; then echo spool-read=read; else echo spool-read=denied; fi
if cat /etc/passwd >/dev/null 2>&1; then echo etc-passwd=read; else echo etc-passwd=denied; fi
EOF
	# Twice, one after the other: the second runs in the first's
	# directories, kept as spares, its rules made from the descriptors
	# the worker keeps of them.
	cp "$T_ROOT/probe.sh" "$s/new/ll"
	KART_BACKEND=none KART_LANDLOCK=enforce drain "$s"
	{ printf '#!/bin/sh\n#kart: priority=1\n'; tail -n +2 "$T_ROOT/probe.sh"; } >"$s/new/ll1"
	{ printf '#!/bin/sh\n#kart: priority=2\n'; tail -n +2 "$T_ROOT/probe.sh"; } >"$s/new/ll2"
	KART_BACKEND=none KART_LANDLOCK=enforce drain "$s" --slots 1 --batch-slots 1
	local out want t
	for t in ll ll1 ll2; do
		out=$(cat "$s/done/$t.stdout")
		assert_eq ok "$(field "$s" $t .status)" "$t: status under none+Landlock"
		assert_eq none "$(field "$s" $t .sandbox.backend)" "$t: backend"
		assert_eq "$LL_ABI" "$(field "$s" $t .sandbox.landlock)" "$t: landlock ABI under none"
		for want in work=written tmpdir=written outdir=written claim-dir=denied outside=denied \
			host-tmp=denied spool-new=denied etc=denied spool-read=denied etc-passwd=read; do
			grep -qxF "$want" <<<"$out" || fail "$t: none+Landlock: expected $want in: $out"
		done
	done
	assert_no_file "$outside/host-file"
	assert_no_file "$s/new/injected"
	assert_eq x "$(cat "$s/done/ll.out/kept" 2>/dev/null)" "\$KART_OUTDIR kept"
	assert_eq x "$(cat "$s/done/ll2.out/kept" 2>/dev/null)" "ll2: \$KART_OUTDIR kept"
	# The same task without Landlock: none protects nothing of this.
	cp "$T_ROOT/probe.sh" "$s/new/noll"
	KART_BACKEND=none KART_LANDLOCK=off drain "$s"
	out=$(cat "$s/done/noll.stdout")
	assert_eq off "$(field "$s" noll .sandbox.landlock)" "landlock off under none"
	assert_match "outside=written" "$out" "none without Landlock writes outside"
	assert_match "spool-read=read" "$out" "none without Landlock reads the spool"
	assert_match "claim-dir=written" "$out" "none without Landlock writes into the claim directory"
	rm -f "$s/new/injected" /etc/kart-confine-probe /tmp/kart-confine-* "$s"/cur/*/in-claim-dir
	# No scratch directory is left behind.
	assert_eq "" "$(ls -A "$s/cur"/* 2>/dev/null | grep -v '^\.lock$')" "claim dirs empty"
}

# A task is cut off from the worker's terminal even without Landlock.
# Run by hand in a terminal (here: under script(1)), the worker gives each
# task of backend none a session of its own, without that terminal; bwrap
# does the same for its tasks (--new-session). Where the worker has no
# terminal (systemd, cron, a script; here: setsid -w), a task of backend
# none has a process group of its own, to be signalled with its tree, and
# stays in the worker's session: no scheduler autogroup is made for it.
test_terminal_cut_off() {
	command -v script >/dev/null || { skip "no script(1) to give the worker a terminal"; return; }
	local s; s=$(mkspool)
	local t='#!/bin/sh\nset -- $(sed "s/.*) //" /proc/$$/stat)\n'
	t+='echo "pgrp=$([ "$3" = $$ ] && echo own || echo other)"\n'
	t+='echo "session=$([ "$4" = $$ ] && echo own || echo other) tty=$5"\n'
	t+='if (: </dev/tty) 2>/dev/null; then echo devtty=opened; else echo devtty=denied; fi\n'
	printf "$t" >"$s/new/term"
	KART_BACKEND=none KART_LANDLOCK=off timeout "$(slow 120)" \
		script -qec "$KART -s $s worker --drain" /dev/null </dev/null >>"$s.worker.log" 2>&1 ||
		fail "worker under script(1) exited $?"
	printf "$t" >"$s/new/noterm"
	KART_BACKEND=none KART_LANDLOCK=off timeout "$(slow 120)" \
		setsid -w "$KART" -s "$s" worker --drain >>"$s.worker.log" 2>&1 ||
		fail "worker under setsid -w exited $?"
	local want=$'pgrp=own\nsession=own tty=0\ndevtty=denied'
	assert_eq "$want" "$(cat "$s/done/term.stdout")" "none, the worker in a terminal"
	want=$'pgrp=own\nsession=other tty=0\ndevtty=denied'
	assert_eq "$want" "$(cat "$s/done/noterm.stdout")" "none, the worker without a terminal"
	if have_bwrap; then
		printf "$t" >"$s/new/bwrap"
		KART_LANDLOCK=off timeout "$(slow 120)" \
			script -qec "$KART -s $s worker --drain" /dev/null </dev/null >>"$s.worker.log" 2>&1 ||
			fail "worker (bwrap) under script(1) exited $?"
		assert_match "tty=0" "$(cat "$s/done/bwrap.stdout")" "bwrap, the worker in a terminal"
		assert_match "devtty=denied" "$(cat "$s/done/bwrap.stdout")" "bwrap: /dev/tty"
	else
		skip "bwrap cannot build a sandbox here" || true
	fi
	local id
	for id in term noterm; do assert_eq ok "$(field "$s" $id .status)" "$id status"; done
}

# Under none+Landlock a task without `net` cannot connect over TCP, even
# to 127.0.0.1 (there is no network namespace to stop it).
test_none_tcp_denied_without_net() {
	need_landlock || return
	[ "$LL_ABI" -ge 4 ] || { skip "Landlock ABI $LL_ABI has no network rules"; return; }
	local s; s=$(mkspool)
	local port=$((20000 + RANDOM % 20000))
	python3 -c "import socket,sys,time
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', $port)); s.listen(8); time.sleep(60)" &
	local lp=$!
	T_PIDS+=("$lp")
	# Listening before the tasks run (a loaded host starts Python slowly).
	wait_until 30 grep -qi "^ *[0-9]*: 0100007F:$(printf %04X "$port") 00000000:0000 0A" /proc/net/tcp ||
		{ fail "the listener on 127.0.0.1:$port did not start"; return; }
	local probe="import socket
try:
    socket.create_connection(('127.0.0.1', $port), 2); print('connected')
except OSError as e:
    print('refused', e.errno)"
	printf '#!/usr/bin/python3\n%s\n' "$probe" >"$s/new/nonet"
	printf '#!/usr/bin/python3\n#kart: net\n%s\n' "$probe" >"$s/new/withnet"
	printf '[network]\nallow_uids = %s\n' "$(id -u)" >"$s/kart.conf"
	KART_BACKEND=none KART_LANDLOCK=enforce drain "$s"
	kill "$lp" 2>/dev/null
	assert_eq "refused 13" "$(cat "$s/done/nonet.stdout")" "TCP connect without net: EACCES"
	assert_eq connected "$(cat "$s/done/withnet.stdout")" "TCP connect with net"
}

# From Landlock ABI 6 the ruleset scopes abstract unix sockets and
# signals. Under backend none, with no namespaces, that is all that stops
# a task from connecting to the host's abstract socket or signalling a
# host process of its own uid; with Landlock off, both work.
test_none_landlock_scopes() {
	need_landlock || return
	[ "$LL_ABI" -ge 6 ] || { skip "Landlock ABI $LL_ABI has no scoping"; return; }
	local s; s=$(mkspool)
	local abs=kart-scope-$$-$RANDOM
	python3 -c "import socket, time
a = socket.socket(socket.AF_UNIX); a.bind('\0$abs'); a.listen(8); time.sleep(120)" &
	T_PIDS+=("$!")
	sleep 120 &
	local sp=$!
	T_PIDS+=("$sp")
	wait_until 10 grep -q "@$abs\$" /proc/net/unix || { fail "the abstract listener did not start"; return; }
	cat >"$T_ROOT/scope.py" <<EOF
#!/usr/bin/python3
import errno, os, socket
try:
    socket.socket(socket.AF_UNIX).connect("\\0$abs"); print("unix=connected")
except OSError as e:
    print("unix=" + errno.errorcode[e.errno])
try:
    os.kill($sp, 0); print("signal=sent")
except OSError as e:
    print("signal=" + errno.errorcode[e.errno])
EOF
	cp "$T_ROOT/scope.py" "$s/new/scoped"
	KART_BACKEND=none KART_LANDLOCK=enforce drain "$s"
	cp "$T_ROOT/scope.py" "$s/new/unscoped"
	KART_BACKEND=none KART_LANDLOCK=off drain "$s"
	assert_eq "$LL_ABI" "$(field "$s" scoped .sandbox.landlock)" "the ABI that confined it"
	assert_eq "unix=EPERM
signal=EPERM" "$(cat "$s/done/scoped.stdout")" "under Landlock ABI $LL_ABI ($(cat "$s/done/scoped.stderr"))"
	assert_eq "unix=connected
signal=sent" "$(cat "$s/done/unscoped.stdout")" "Landlock off ($(cat "$s/done/unscoped.stderr"))"
	kill -0 "$sp" 2>/dev/null || fail "the host process is gone"
}

# Backend none has no bwrap to drop capabilities: kart-launch (and, for
# a task run as its submitter, the worker's child before setuid) does.
# Neither a root task nor nobody's holds any, not even in the bounding set
# (uid 0 would get that back at execve); both no_new_privs.
test_none_task_has_no_capabilities() {
	need_root || return
	local s; s=$(mkspool)
	open_spool "$s"
	cat >"$T_ROOT/caps.sh" <<'EOF'
#!/bin/sh
grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status | tr -d '\t'
EOF
	cp "$T_ROOT/caps.sh" "$s/new/root-task"
	cp "$T_ROOT/caps.sh" "$s/new/nobody-task"
	chown nobody "$s/new/nobody-task"
	KART_BACKEND=none drain "$s"
	local id k
	for id in root-task nobody-task; do
		assert_eq ok "$(field "$s" "$id" .status)" "$id status ($(field "$s" "$id" .error))"
		assert_eq none "$(field "$s" "$id" .sandbox.backend)" "$id backend"
		for k in CapInh CapPrm CapEff CapBnd CapAmb; do
			assert_eq "$k:0000000000000000" "$(grep "^$k:" "$s/done/$id.stdout")" "$id: $k"
		done
		assert_eq NoNewPrivs:1 "$(grep ^NoNewPrivs: "$s/done/$id.stdout")" "$id: no_new_privs"
	done
	assert_eq 0 "$(field "$s" root-task .submitter.uid)" "the root task ran as root"
	assert_eq 65534 "$(field "$s" nobody-task .submitter.uid)" "nobody's task ran as nobody"
}

# A root worker keeps, in every thread, the capabilities docs/SECURITY.md
# lists and no other, in its permitted, effective and bounding sets.
test_root_worker_drops_capabilities() {
	need_root || return
	local s; s=$(mkspool)
	# cap_chown, dac_override, fowner, kill, setgid, setuid, setpcap,
	# lease, setfcap: bits 0 1 3 5 6 7 8 28 31.
	local want=00000000900001eb
	start_worker "$s"
	wait_until 20 grep -q "capabilities kept" "$s.worker.log" || { fail "no start-up line"; return; }
	# A task, so that whatever threads the worker starts exist.
	printf '#!/bin/sh\necho x\n' >"$s/new/t"
	wait_until 20 test -e "$s/done/t.json" || fail "no result"
	local task k n=0
	for task in /proc/"$WPID"/task/*; do
		n=$((n + 1))
		for k in CapPrm CapEff CapBnd; do
			assert_eq "$want" "$(awk -v k="$k:" '$1 == k {print $2}' "$task/status")" \
				"worker thread ${task##*/}: $k"
		done
		for k in CapInh CapAmb; do
			assert_eq 0000000000000000 "$(awk -v k="$k:" '$1 == k {print $2}' "$task/status")" \
				"worker thread ${task##*/}: $k"
		done
	done
	[ "$n" -ge 2 ] || fail "the worker's threads: $n, expected the main and the commit thread"
	assert_match "capabilities kept: cap_chown,cap_dac_override,cap_fowner,cap_kill,cap_setgid,cap_setuid,cap_setpcap,cap_lease,cap_setfcap" \
		"$(cat "$s.worker.log")" "the kept set is logged"
	stop_worker "$WPID"
}

# The policy's binds, in a real sandbox, under bwrap and under none with
# Landlock: a ro_binds path is readable and not writable, a rw_binds path
# is writable (the host sees the file), and nothing else of the host is.
test_binds_ro_and_rw() {
	need_landlock || return
	local be s ro=$T_ROOT/ro-bind rw=$T_ROOT/rw-bind other=$T_ROOT/not-bound
	mkdir -p "$ro" "$rw" "$other"
	echo from-host >"$ro/file"
	echo other >"$other/file"
	cat >"$T_ROOT/binds.sh" <<EOF
#!/bin/sh
cat "$ro/file" 2>/dev/null || echo ro-unreadable
(echo x >"$ro/new") 2>/dev/null && echo ro-written || echo ro-denied
(echo x >"$rw/new-\$KART_TASK_ID") 2>/dev/null && echo rw-written || echo rw-denied
cat "$other/file" 2>/dev/null || echo other-unreadable
EOF
	for be in bwrap none; do
		[ "$be" = bwrap ] && { have_bwrap || { skip "bwrap cannot build a sandbox here"; return; }; }
		s=$(mkspool)
		printf '[sandbox]\nro_binds = %s\nrw_binds = %s\nlandlock = enforce\n' "$ro" "$rw" >"$s/kart.conf"
		cp "$T_ROOT/binds.sh" "$s/new/$be"
		KART_BACKEND=$be drain "$s"
		assert_eq ok "$(field "$s" "$be" .status)" "$be: status ($(field "$s" "$be" .error))"
		assert_eq "from-host
ro-denied
rw-written
other-unreadable" "$(cat "$s/done/$be.stdout")" "$be: what the task could do"
		assert_no_file "$ro/new"
		assert_eq x "$(cat "$rw/new-$be" 2>/dev/null)" "$be: the rw_binds file on the host"
	done
}

# A root worker runs a task as the owner of its file: nobody's task is
# uid 65534 inside and out (its files, what it may read).
# An account made while the worker runs counts at the next task: the
# worker keeps what it looked up until its watch on /etc sees a change
# (here a line appended in place, as a script might), not for its
# 5-second TTL. The account goes again afterwards.
test_account_added_while_running() {
	need_root || return
	local uid=4242 s line
	getent passwd "$uid" >/dev/null && { skip "uid $uid has an account here"; return; }
	s=$(mkspool)
	open_spool "$s"
	KART_BACKEND=none start_worker "$s"
	printf '#!/bin/sh\nid -u\n' >"$s/tmp/before" && chown "$uid" "$s/tmp/before" &&
		mv "$s/tmp/before" "$s/new/before"
	wait_until 20 test -e "$s/done/before.json" || fail "no result for before"
	assert_eq refused "$(field "$s" before .status)" "a task of a uid without an account"
	line="kart-test-$uid:x:$uid:$uid::/nonexistent:/usr/sbin/nologin"
	echo "$line" >>/etc/passwd
	printf '#!/bin/sh\nid -u\n' >"$s/tmp/after" && chown "$uid" "$s/tmp/after" &&
		mv "$s/tmp/after" "$s/new/after"
	wait_until 20 test -e "$s/done/after.json" || fail "no result for after"
	sed -i "/^kart-test-$uid:/d" /etc/passwd
	stop_worker "$WPID"
	assert_eq ok "$(field "$s" after .status)" "after the account was added ($(field "$s" after .error))"
	assert_eq "$uid" "$(cat "$s/done/after.stdout")" "it ran as its submitter"
	assert_eq "" "$(grep "^kart-test-$uid:" /etc/passwd)" "the account is gone again"
}

# The switch to the submitter fails in a backend none child (setresuid
# made to fail with strace): the task never runs, and the result says
# why, refusal setuid_failed, from the child's status lines (which it
# writes into the worker's memory, as it shares it until its exec).
test_none_setuid_failure_refused() {
	need_root || return
	command -v strace >/dev/null || { skip "no strace for fault injection"; return; }
	local s; s=$(mkspool)
	open_spool "$s"
	printf '#!/bin/sh\necho ran\n' >"$s/new/su"
	chown nobody "$s/new/su"
	KART_BACKEND=none timeout 60 strace -f -qq -o "$s.strace" -e trace=setresuid \
		-e inject=setresuid:error=EPERM:when=1 "$KART" -s "$s" worker --drain >>"$s.worker.log" 2>&1 ||
		fail "worker under strace exited $?: $(tail -3 "$s.worker.log")"
	grep -q 'setresuid(.*(INJECTED)' "$s.strace" || { fail "no setresuid was made to fail (test premise)"; return; }
	assert_eq refused "$(field "$s" su .status)" "status"
	assert_eq setuid_failed "$(field "$s" su .refusal)" "refusal"
	assert_match "could not run as its submitter: setuid" "$(field "$s" su .error)" "error"
	assert_eq "" "$(cat "$s/done/su.stdout" 2>/dev/null)" "the task never ran"
}

test_runs_as_submitter() {
	need_root || return
	need_bwrap || return
	local s; s=$(mkspool)
	open_spool "$s"
	local secret=$T_ROOT/root-only
	printf 'top secret\n' >"$secret"; chmod 600 "$secret"
	printf '[sandbox]\nro_binds = %s\n' "$secret" >"$s/kart.conf"
	local t='#!/bin/sh\nid -u; id -g\necho mine >"$KART_OUTDIR/made-by"\ncat %s 2>/dev/null || echo unreadable\n'
	printf "$t" "$secret" >"$s/new/by-nobody"
	chown nobody "$s/new/by-nobody"
	printf "$t" "$secret" >"$s/new/by-root"
	drain "$s"
	local id; id=$(printf '%s\n%s' 65534 "$(id -g nobody)")
	assert_eq ok "$(field "$s" by-nobody .status)" "nobody's task status ($(field "$s" by-nobody .error))"
	assert_eq "$id
unreadable" "$(cat "$s/done/by-nobody.stdout")" "nobody's task: its ids; root's file unreadable"
	assert_eq 65534 "$(field "$s" by-nobody .submitter.uid)" submitter.uid
	assert_eq nobody "$(field "$s" by-nobody .submitter.user)" submitter.user
	# Kept beside the result as the worker's copy (the submitter reads
	# it, cannot change it: outdir.sh), whoever made it.
	assert_eq "0 mine" "$(stat -c %u "$s/done/by-nobody.out/made-by") $(cat "$s/done/by-nobody.out/made-by")" \
		"its \$KART_OUTDIR file, kept, is the worker's"
	assert_eq "0
0
top secret" "$(cat "$s/done/by-root.stdout")" "a root task (allowed) runs as root"
	assert_eq 0 "$(stat -c %u "$s/done/by-root.out/made-by")" "root's file"
}

# A task's work, tmp and $KART_OUTDIR directories are reused for the next
# task of the same submitter (kept as spares, not made anew), and what
# the first did to their mode is undone: the next one gets 0700, 0700 and
# 0700 (its output is its submitter's alone), owned by its submitter;
# another submitter never gets them.
test_scratch_reused_and_reset() {
	need_root || return
	local s; s=$(mkspool)
	open_spool "$s"
	local dirs='. "$TMPDIR" "$KART_OUTDIR"'
	printf '#!/bin/sh\n#kart: priority=1\nstat -c %%i %s | sort -n\nchmod 777 %s\n' "$dirs" "$dirs" \
		>"$s/new/a"
	printf '#!/bin/sh\n#kart: priority=2\nstat -c %%i %s | sort -n\nstat -c "%%a %%u" %s\n' \
		"$dirs" "$dirs" >"$s/new/b"
	chown nobody "$s/new/a" "$s/new/b"
	printf '#!/bin/sh\n#kart: priority=3\nstat -c %%i %s | sort -n\nstat -c "%%a %%u" %s\n' \
		"$dirs" "$dirs" >"$s/new/c"
	KART_BACKEND=none drain "$s" --slots 1 --batch-slots 1
	local t
	for t in a b c; do
		assert_eq ok "$(field "$s" $t .status)" "$t: status ($(field "$s" $t .error))"
	done
	local ia ib ic
	ia=$(head -3 "$s/done/a.stdout") ib=$(head -3 "$s/done/b.stdout") ic=$(head -3 "$s/done/c.stdout")
	assert_eq "$ia" "$ib" "b ran in a's three directories (kept as spares)"
	assert_eq "700 65534
700 65534
700 65534" "$(tail -3 "$s/done/b.stdout")" "b's directories: modes reset after a's chmod 777, nobody's"
	[ "$(comm -12 <(echo "$ia") <(echo "$ic"))" = "" ] ||
		fail "root's task c got a directory of nobody's task: $ia / $ic"
	assert_eq "700 0
700 0
700 0" "$(tail -3 "$s/done/c.stdout")" "c's directories: root's own"
}

# Backend none, a spare kept and used again: the worker knows the run
# left it as it was by its change time alone (scratch_dir,
# scratch_retire), since every change to a directory sets that anew. The
# attack: task p1, in p0's spares, sets an extended attribute on its work
# directory, an inode flag on $TMPDIR and the mode of $KART_OUTDIR, and
# hides an empty file in the work directory; p2, the next task of the
# same user, sees none of it in any of its three (a spare may come back
# as another of the three).
test_spare_changes_seen() {
	need_root || return
	local s; s=$(mkspool)
	open_spool "$s"
	local dirs='. "$TMPDIR" "$KART_OUTDIR"'
	KART_BACKEND=none start_worker "$s" --slots 1 --batch-slots 1
	local n
	for n in p0 p1 p2; do
		case $n in
		p0) printf '#!/bin/sh\nstat -c %%i %s\n' "$dirs" ;;
		p1) printf '#!/bin/sh\nstat -c %%i %s\n%s\n%s\n%s\n%s\n' "$dirs" \
			"python3 -c 'import os; os.setxattr(\".\", \"user.kart_test\", b\"1\")' && echo xattr" \
			'chattr +A "$TMPDIR" && echo flag' 'chmod 777 "$KART_OUTDIR" && echo mode' \
			': >.hidden && echo hidden' ;;
		p2) printf '#!/bin/sh\nstat -c %%i %s\nfor d in %s; do getfattr -d -m - "$d" 2>&1; lsattr -d "$d" | cut -d" " -f1; stat -c %%a "$d"; ls -A "$d"; done\n' \
			"$dirs" "$dirs" ;;
		esac >"$s/tmp/$n"
		chown nobody "$s/tmp/$n"
		mv "$s/tmp/$n" "$s/new/$n"
		wait_until 20 test -e "$s/done/$n.json" || { fail "no result for $n"; return; }
		assert_eq ok "$(field "$s" $n .status)" "$n: status ($(field "$s" $n .error))"
		# Older than a tick of the coarse clock the filesystem stamps with.
		sleep 0.2
	done
	stop_worker "$WPID"
	assert_eq "$(head -3 "$s/done/p0.stdout" | sort -n)" "$(head -3 "$s/done/p1.stdout" | sort -n)" \
		"p1 ran in p0's three directories, kept as spares (test premise)"
	assert_eq "xattr flag mode hidden" "$(tail -n +4 "$s/done/p1.stdout" | tr '\n' ' ' | sed 's/ $//')" \
		"what p1 changed (test premise)"
	local out; out=$(tail -n +4 "$s/done/p2.stdout")
	assert_eq "--------------e-------
700
--------------e-------
700
--------------e-------
700" "$out" "p2: its directories' attributes, flags, modes and entries"
}

# Backend none: the system's directories and devices in each task's
# Landlock ruleset are opened once by the worker and held (the child adds
# its rule from the descriptor), files like /etc/passwd are opened for
# each task, and a SIGHUP opens the held ones again. What the task may
# and may not reach is the same.
test_none_system_paths_held() {
	need_landlock || return
	need_root || return
	local s; s=$(mkspool)
	open_spool "$s"
	local t='#!/bin/sh\ntest -x /usr/bin/env && echo usr\nhead -c 1 /dev/zero | wc -c\ncat /etc/passwd >/dev/null && echo passwd\ncat /etc/hosts >/dev/null && echo hosts\ncat /etc/shadow >/dev/null 2>&1 && echo shadow || echo no-shadow\ncat /etc/localtime >/dev/null && echo localtime\n/bin/true && echo bin\n'
	[ -L /etc/localtime ] && [ -L /bin ] || { skip "needs /etc/localtime a link into /usr and a merged /usr (/bin a link)"; return; }
	KART_BACKEND=none start_worker "$s"
	strace -f -qq -o "$s.strace" -e trace=openat -p "$WPID" &
	local sp=$!
	T_PIDS+=("$sp")
	wait_until 10 traced_by "$WPID" || { fail "strace never attached"; return; }
	local i
	for i in 1 2 3; do printf "$t" >"$s/tmp/h$i" && mv "$s/tmp/h$i" "$s/new/h$i"; done
	for i in 1 2 3; do wait_until 20 test -e "$s/done/h$i.json" || fail "no result for h$i"; done
	# /etc/hosts replaced by rename, as package managers and editors do
	# (the same text): the held one is not the file any more.
	cp -p /etc/hosts "/etc/.kart-hosts.$$" && mv "/etc/.kart-hosts.$$" /etc/hosts ||
		{ fail "cannot replace /etc/hosts (test premise)"; return; }
	printf "$t" >"$s/tmp/h4" && mv "$s/tmp/h4" "$s/new/h4"
	wait_until 20 test -e "$s/done/h4.json" || fail "no result for h4"
	kill -HUP "$WPID"
	wait_until 10 grep -q "SIGHUP: policy reloaded" "$s.worker.log" || fail "no reload logged"
	printf "$t" >"$s/tmp/h5" && mv "$s/tmp/h5" "$s/new/h5"
	wait_until 20 test -e "$s/done/h5.json" || fail "no result for h5"
	kill "$sp"; wait "$sp" 2>/dev/null
	stop_worker "$WPID"
	for i in 1 2 3 4 5; do
		assert_eq ok "$(field "$s" h$i .status)" "h$i: status ($(field "$s" h$i .error))"
		assert_eq "usr
1
passwd
hosts
no-shadow
localtime
bin" "$(cat "$s/done/h$i.stdout")" "h$i: what it reached"
	done
	# The call's start: strace may split it ("<unfinished ...>").
	local usr='openat(AT_FDCWD, "/usr", O_RDONLY|O_CLOEXEC|O_PATH'
	local pw='openat(AT_FDCWD, "/etc/passwd", O_RDONLY'
	assert_eq 3 "$(grep -F "$usr" "$s.strace" | awk -v w="$WPID" '$1 == w' | wc -l)" \
		"/usr opened by the worker's loop: once, again after the change in /etc (all held paths are), and after SIGHUP"
	assert_eq 0 "$(grep -F "$usr" "$s.strace" | awk -v w="$WPID" '$1 != w' | wc -l)" \
		"/usr opened by a task's child"
	assert_eq 3 "$(grep -F "$pw" "$s.strace" | grep -F O_NOFOLLOW | awk -v w="$WPID" '$1 == w' | wc -l)" \
		"/etc/passwd held by the loop: opened once, again after the change in /etc, and after SIGHUP"
	assert_eq 0 "$(grep -F "$pw" "$s.strace" | grep -F O_PATH | awk -v w="$WPID" '$1 != w' | wc -l)" \
		"/etc/passwd opened for its rule by a task's child"
	# Paths beneath a held directory need no rule of their own: /bin is
	# /usr/bin, /etc/localtime leads into /usr/share/zoneinfo. No child
	# opens them for a rule, nor a system path that is not there.
	local p
	for p in /bin /etc/localtime /libx32; do
		assert_eq 0 "$(grep -F "openat(AT_FDCWD, \"$p\", O_RDONLY|O_CLOEXEC|O_PATH" "$s.strace" |
			awk -v w="$WPID" '$1 != w' | wc -l)" "$p opened for a rule by a task's child"
	done
}

# A root-owned task is refused unless the policy allows root tasks.
test_root_task_refused_unless_allowed() {
	need_root || return
	need_bwrap || return
	local s; s=$(mkspool)
	printf '#!/bin/sh\necho ran\n' >"$s/new/denied"
	KART_ALLOW_ROOT= drain "$s"
	assert_eq refused "$(field "$s" denied .status)" status
	assert_eq root_not_allowed "$(field "$s" denied .refusal)" refusal
	assert_match "task file owned by root; the policy does not allow root tasks" \
		"$(field "$s" denied .error)" error
	assert_eq "" "$(cat "$s/done/denied.stdout" 2>/dev/null)" "it never ran"
	printf '[sandbox]\nallow_root = yes\n' >"$s/kart.conf"
	printf '#!/bin/sh\necho ran\n' >"$s/new/allowed"
	KART_ALLOW_ROOT= drain "$s"
	assert_eq ok "$(field "$s" allowed .status)" "allowed by kart.conf"
	# The environment overrides the file.
	printf '#!/bin/sh\necho ran\n' >"$s/new/env-no"
	KART_ALLOW_ROOT=no drain "$s"
	assert_eq root_not_allowed "$(field "$s" env-no .refusal)" "KART_ALLOW_ROOT=no wins"
}

# Credentials (a variable, a file) reach a network task only, never a
# task without network, and never the result, the log or any argv.
test_credentials_only_for_net() {
	need_bwrap || return
	local s; s=$(mkspool)
	local tok=tok-5f1e0c9a-$RANDOM filetok=file-8b2d4e-$RANDOM
	printf '%s\n' "$filetok" >"$T_ROOT/netrc"; chmod 644 "$T_ROOT/netrc"
	cat >"$s/kart.conf" <<EOF
[sandbox]
env_pass = CONFINE_PASS
[network]
allow_uids = $(id -u)
cred_env = CONFINE_TOKEN
cred_files = $T_ROOT/netrc
EOF
	local body='echo "token=${CONFINE_TOKEN:-none}"; echo "pass=${CONFINE_PASS:-none}"
cat '"$T_ROOT"'/netrc 2>/dev/null || echo nofile
cat /proc/[0-9]*/cmdline 2>/dev/null | tr "\\0" " "; echo
(echo x >>'"$T_ROOT"'/netrc) 2>/dev/null && echo cred-written || echo cred-read-only'
	printf '#!/bin/sh\n#kart: net\n%s\n' "$body" >"$s/new/net"
	printf '#!/bin/sh\n%s\n' "$body" >"$s/new/nonet"
	CONFINE_TOKEN=$tok CONFINE_PASS=visible drain "$s"
	local net nonet
	net=$(cat "$s/done/net.stdout"); nonet=$(cat "$s/done/nonet.stdout")
	assert_eq ok "$(field "$s" net .status)" "net status ($(field "$s" net .error))"
	assert_eq ok "$(field "$s" nonet .status)" "nonet status"
	assert_eq "token=$tok" "$(sed -n 1p <<<"$net")" "the variable reaches the net task"
	assert_eq "$filetok" "$(sed -n 3p <<<"$net")" "the file reaches the net task"
	assert_eq "token=none" "$(sed -n 1p <<<"$nonet")" "no variable without net"
	assert_eq "nofile" "$(sed -n 3p <<<"$nonet")" "no file without net"
	assert_eq "pass=visible" "$(sed -n 2p <<<"$net")" "env_pass reaches the net task"
	assert_eq "pass=visible" "$(sed -n 2p <<<"$nonet")" "env_pass reaches every task"
	assert_eq cred-read-only "$(tail -n 1 <<<"$net")" "the credential file is bound read-only"
	assert_eq "$filetok" "$(cat "$T_ROOT/netrc")" "the credential file is unchanged on the host"
	# The argv of everything in the sandbox (bwrap, launcher) is clean.
	[[ $net == *"/run/kart/launch"* ]] || fail "the net task should see the launcher's argv"
	[[ $(sed -n '4,$p' <<<"$net") == *"$tok"* ]] && fail "the token is in an argv"
	grep -rl -e "$tok" -e "$filetok" "$s/done"/*.json && fail "a credential is in a result"
	grep -l -e "$tok" -e "$filetok" "$s.worker.log" && fail "a credential is in the worker log"
	true
}

# on_done runs once per task, outside the sandbox, after the result is
# published, with its path as the one argument (no shell in between).
test_on_done_hook() {
	local s; s=$(mkspool)
	local log=$T_ROOT/hook.log
	cat >"$T_ROOT/hook.sh" <<EOF
#!/bin/sh
[ \$# = 1 ] || { echo "argc=\$#" >>"$log"; exit 1; }
if [ -f "\$1" ]; then st=published; else st=missing; fi
printf '%s %s\n' "\$st" "\$1" >>"$log"
EOF
	chmod 755 "$T_ROOT/hook.sh"
	printf '[hooks]\non_done = %s\n' "$T_ROOT/hook.sh" >"$s/kart.conf"
	printf '#!/bin/sh\necho fine\n' >"$s/new/good"
	printf '#!/bin/sh\nexit 3\n' >"$s/new/bad"
	printf '#!/bin/sh\n#kart: bogus=1\n' >"$s/new/invalid"
	local odd='odd $(touch pwned) ; name'
	printf '#!/bin/sh\necho odd\n' >"$s/new/$odd"
	(cd "$T_ROOT" && KART_BACKEND=none drain "$s")
	wait_until 10 test "$(wc -l <"$log" 2>/dev/null)" -ge 4 || fail "hook did not run 4 times"
	sleep 0.3
	assert_eq 4 "$(wc -l <"$log")" "one run per task"
	local id
	for id in good bad invalid "$odd"; do
		assert_eq 1 "$(grep -cxF "published $s/done/$id.json" "$log")" "hook for '$id'"
	done
	assert_no_file "$T_ROOT/pwned"
	assert_no_file "$s/pwned"
	assert_eq rejected "$(field "$s" invalid .status)" "the invalid one is rejected"
}

# kart doctor shows the effective policy (file, then environment);
# credentials by name only. A bad [sandbox] line stops the worker.
test_doctor_shows_policy() {
	local s; s=$(mkspool)
	cat >"$s/kart.conf" <<EOF
[sandbox]
landlock = enforce
tmpfs_size = 64M
ro_binds = /opt
[network]
cred_env = CONFINE_TOKEN
[hooks]
on_done = /bin/true
[limits]
memory_default = 64M
memory_max = 2G
[lane.batch]
memory_max = 1G
pids_default = 50
cpu_max = 0.5
EOF
	local out
	out=$(CONFINE_TOKEN=doctor-secret-$$ KART_ALLOW_ROOT=no "$KART" -s "$s" doctor --json)
	# The limits per lane as they apply: [lane.batch] over [limits] (and
	# over the built-in pids default, 512).
	assert_eq "67108864 2147483648 512" \
		"$(jq -r '.policy.limits.lanes.fast | "\(.memory_default) \(.memory_max) \(.pids_default)"' <<<"$out")" \
		"lane fast: memory_default memory_max pids_default"
	assert_eq "67108864 1073741824 50 0.5" \
		"$(jq -r '.policy.limits.lanes.batch | "\(.memory_default) \(.memory_max) \(.pids_default) \(.cpu_max)"' <<<"$out")" \
		"lane batch: memory_default memory_max pids_default cpu_max"
	assert_eq enforce "$(jq -r .policy.sandbox.landlock <<<"$out")" "policy.sandbox.landlock"
	assert_eq false "$(jq -r .policy.sandbox.allow_root <<<"$out")" "KART_ALLOW_ROOT=no shown"
	assert_eq 67108864 "$(jq -r .policy.sandbox.tmpfs_size <<<"$out")" tmpfs_size
	assert_eq '["/opt"]' "$(jq -c .policy.sandbox.ro_binds <<<"$out")" ro_binds
	assert_eq '["CONFINE_TOKEN"]' "$(jq -c .policy.network.cred_env <<<"$out")" cred_env
	assert_eq /bin/true "$(jq -r .policy.hooks.on_done <<<"$out")" on_done
	[[ $out == *doctor-secret* ]] && fail "kart doctor shows a credential's value"
	out=$(KART_LANDLOCK=off "$KART" -s "$s" doctor --json)
	assert_eq off "$(jq -r .policy.sandbox.landlock <<<"$out")" "KART_LANDLOCK overrides the file"
	printf '[sandbox]\nlandlock = sometimes\n' >"$s/kart.conf"
	out=$(timeout 10 "$KART" -s "$s" worker --drain 2>&1); local rc=$?
	assert_eq 1 "$rc" "a bad [sandbox] line stops the worker"
	assert_match "kart.conf line 2: landlock = sometimes" "$out" "the error names the line"
}

# Network by group: a member of an allowed group gets it, others do not.
test_net_granted_by_group() {
	[ "$(id -u)" = 0 ] || { skip "needs a root worker to run tasks as nobody"; return; }
	local s; s=$(mkspool)
	local g; g=$(id -gn nobody)
	open_spool "$s"
	printf '[network]\nallow_groups = %s\n' "$g" >"$s/kart.conf"
	printf '#!/bin/sh\n#kart: net\necho x\n' >"$s/new/member"
	chown nobody "$s/new/member"
	printf '#!/bin/sh\n#kart: net\necho x\n' >"$s/new/outsider"
	drain "$s"
	assert_eq ok "$(field "$s" member .status)" "nobody, in group $g ($(field "$s" member .error))"
	assert_eq true "$(field "$s" member .sandbox.network)" "network granted by group"
	assert_eq rejected "$(field "$s" outsider .status)" "root is not in group $g"
	printf '[network]\nallow_groups = no-such-group-kart\n' >"$s/kart.conf"
	local out; out=$(timeout 10 "$KART" -s "$s" worker --drain 2>&1)
	assert_match "line 2: 'no-such-group-kart' is not a group" "$out" "an unknown group stops the worker"
}

# Backend none runs no launcher: the child the worker spawns confines
# itself (the same steps as kart-launch) and execs the task. The task is
# then the worker's own child; it holds 0, 1, 2 and the run lock (fd 4,
# its claim) and nothing else; the claim is locked while it runs; and it
# dies with the worker (PDEATHSIG). Under kart-launch its parent would be
# the launcher, and it would not hold fd 4.
test_none_task_exec_directly() {
	need_root || return
	local s; s=$(mkspool)
	open_spool "$s"
	printf '#!/bin/sh\necho "pid $$ ppid $PPID"\nexec sleep 60\n' >"$s/t"
	chown nobody "$s/t"
	mv "$s/t" "$s/new/t"
	KART_BACKEND=none start_worker "$s"
	wait_until 20 sh -c "grep -qs '^pid' $s/cur/*/.t.stdout" ||
		{ fail "the task did not start: $(tail -3 "$s.worker.log")"; return; }
	local pid ppid
	read -r _ pid _ ppid <"$(ls "$s"/cur/*/.t.stdout)"
	assert_eq "$WPID" "$ppid" "the task's parent is the worker"
	assert_eq "" "$(pgrep -x kart-launch -P "$WPID")" "no kart-launch between the worker and the task"
	wait_until 10 grep -qx sleep "/proc/$pid/comm" || { fail "the task did not exec sleep"; return; }
	local claim fds fd
	claim=$(ls -d "$s"/cur/*/.t.lock)
	fds=$(ls /proc/"$pid"/fd | sort -n | tr '\n' ' ')
	assert_eq "0 1 2 4 " "$fds" "the task's descriptors"
	assert_eq "$claim" "$(readlink "/proc/$pid/fd/4")" "fd 4 is the claim's run lock"
	flock -n "$claim" true && fail "the claim is not locked while the task runs"
	flock -n "$(dirname "$claim")/t" true || fail "the task file itself is locked (others could block it)"
	kill -9 "$WPID"
	wait_gone 10 "$WPID"
	wait_until 10 sh -c "! kill -0 $pid 2>/dev/null" || fail "the task outlived its worker"
	flock -n "$claim" true || fail "the claim is still locked with the task gone"
}

run_tests
