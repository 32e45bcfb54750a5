# Between users: a shared spool laid out by contrib/systemd/kart.tmpfiles,
# real accounts (alice and mallory in the spool's group, bob outside it),
# two root workers, and the attacks of issue 26 tried as written. See
# docs/RELIABILITY.md, "Between users".
. "$(dirname "$0")/../lib.sh"

# The accounts' prefix: kt26, after KART_TEST_USER_TAG if set (tests/lib.sh).
U_TAG=${KART_TEST_USER_TAG:-}kt26
U_ALICE=${U_TAG}alice U_MALLORY=${U_TAG}mallory U_BOB=${U_TAG}bob G_KART=${U_TAG}kart
U_IN="$U_ALICE $U_MALLORY" U_OUT=$U_BOB

# Two root workers on $S.
two_workers() {
	start_worker "$S" --id w1
	W1=$WPID
	start_worker "$S" --id w2
	W2=$WPID
	wait_until 20 grep -q 'worker w2 on' "$S.worker.log" &&
		wait_until 20 grep -q 'worker w1 on' "$S.worker.log" ||
		{ fail "workers did not start: $(tail -3 "$S.worker.log")"; return 1; }
}

stop_workers() { stop_worker "$W1"; stop_worker "$W2"; }

setup() { shared_spool && two_workers; }

# result ID JQ: a field of done/ID.json, once it is there.
result() {
	wait_until 30 test -e "$S/done/$1.json" || { echo "(no result for $1)"; return; }
	jq -r "$2" "$S/done/$1.json"
}

# Nothing in done/ ran as uid $1 with output containing $2.
never_ran_as() {
	local uid=$1 mark=$2 f
	for f in "$S"/done/*.json; do
		[ -e "$f" ] || continue
		if [ "$(jq -r .submitter.uid "$f")" = "$uid" ] && [ "$(jq -r .status "$f")" != rejected ] &&
			grep -qs "$mark" "${f%.json}.stdout"; then
			fail "ran as uid $uid: $f: $(head -c 200 "${f%.json}.stdout")"
		fi
	done
}

# ---- 1. a drop proves who dropped it ----------------------------------------------------

# kart submit and a plain cp into one's own drop directory both run as
# their submitter, under USER:NAME; the layout is what tmpfiles made.
test_drop_runs_as_dropper() {
	setup || return
	local out auid id
	auid=$(id -u "$U_ALICE")
	out=$(as "$U_ALICE" kart submit --name hello -- id -un) || fail "alice cannot submit: $out"
	assert_eq "$U_ALICE:hello" "$out" "kart submit's id"
	assert_eq "ok $auid" "$(result "$U_ALICE:hello" '"\(.status) \(.submitter.uid)"')" "result"
	assert_eq "$U_ALICE" "$(cat "$S/done/$U_ALICE:hello.stdout" 2>/dev/null)" "ran as alice"
	assert_eq hello "$(jq -r .name "$S/done/$U_ALICE:hello.json")" "the result's name"
	assert_eq "drwx------ $U_ALICE" "$(stat -c '%A %U' "$S/drop/$U_ALICE")" "alice's drop directory"
	# One plain file operation from any language: write, then rename in.
	as "$U_ALICE" sh -c "umask 077; printf '#!/bin/sh\necho plain \$(id -un)\n' >$S/drop/$U_ALICE/.p &&
		mv $S/drop/$U_ALICE/.p $S/drop/$U_ALICE/plain" || fail "alice's plain drop"
	assert_eq "ok plain $U_ALICE" \
		"$(result "$U_ALICE:plain" .status) $(cat "$S/done/$U_ALICE:plain.stdout" 2>/dev/null)" "plain drop"
	# The shipped clients follow the same rule.
	out=$(printf '#!/bin/sh\nid -un\n' | as "$U_ALICE" python3 "$ROOT/contrib/clients/kart_submit.py" "$S" - py) ||
		fail "kart_submit.py: $out"
	assert_eq "$U_ALICE:py" "$out" "kart_submit.py's id"
	out=$(printf '#!/bin/sh\nid -un\n' | as "$U_ALICE" sh "$ROOT/contrib/clients/kart-submit.sh" "$S" sh) ||
		fail "kart-submit.sh: $out"
	assert_eq "$U_ALICE:sh" "$out" "kart-submit.sh's id"
	for id in py sh; do
		assert_eq "ok $U_ALICE" "$(result "$U_ALICE:$id" .status) $(cat "$S/done/$U_ALICE:$id.stdout" 2>/dev/null)" \
			"client $id"
	done
	# new/ is the workers' alone now.
	as "$U_MALLORY" sh -c "echo id >$S/new/x" 2>/dev/null && fail "mallory wrote into new/"
	stop_workers
}

# Break 3 as written: alice's build.sh in a shared project directory
# mallory can write (setgid 2775); mallory moves it (0644), and writes
# her code into it first (0664), into wherever she can: it never runs as
# alice. The same through a hard link staged in tmp/.
test_mv_of_anothers_file_never_runs_as_them() {
	setup || return
	local auid proj=$T_ROOT/proj
	auid=$(id -u "$U_ALICE")
	mkdir -p "$proj" && chgrp "$G_KART" "$proj" && chmod 2775 "$proj"
	as "$U_ALICE" sh -c "printf '#!/bin/sh\necho PWNED \$(id -un)\n' >$proj/build.sh; chmod 0644 $proj/build.sh"
	as "$U_ALICE" sh -c "printf '#!/bin/sh\necho alice-own\n' >$proj/b664.sh; chmod 0664 $proj/b664.sh"
	as "$U_ALICE" sh -c "printf '#!/bin/sh\necho alice-own\n' >$proj/hl.sh; chmod 0664 $proj/hl.sh"
	# mallory's drop directory, made as kart submit makes it.
	as "$U_MALLORY" kart submit --name m0 -- true >/dev/null || fail "mallory cannot submit"
	local md=$S/drop/$U_MALLORY
	# a. mv of the 0644 file: into new/ (refused by the kernel), into her drop.
	as "$U_MALLORY" mv "$proj/build.sh" "$S/new/build.sh" 2>/dev/null && fail "mallory moved into new/"
	as "$U_MALLORY" mv "$proj/build.sh" "$md/build.sh" || fail "mallory's mv into her drop"
	# b. the 0664 file, with her code written in first.
	as "$U_MALLORY" sh -c "printf '#!/bin/sh\necho PWNED \$(id -un)\n' >$proj/b664.sh && mv $proj/b664.sh $md/b664.sh" ||
		fail "mallory's write-and-mv"
	# c. the tmp/ hard link: staged in tmp/, linked into her drop, her code
	# written in; then alice's and the tmp/ names go.
	as "$U_MALLORY" sh -c "ln $proj/hl.sh $S/tmp/hl && ln $S/tmp/hl $md/hl && printf '#!/bin/sh\necho PWNED \$(id -un)\n' >$S/tmp/hl" ||
		fail "mallory's hard links"
	as "$U_ALICE" rm -f "$proj/hl.sh"
	as "$U_MALLORY" rm -f "$S/tmp/hl" 2>/dev/null # sticky tmp/: it is alice's file
	# (rejected at once if a worker saw 3 links; else held busy while
	# tmp/ has a link, until kart gc removes it after 36 h:)
	rm -f "$S/tmp/hl"
	local id
	for id in build.sh b664.sh hl; do
		assert_eq rejected "$(result "$U_MALLORY:$id" .status)" "$id: status"
	done
	assert_match "owned by uid $auid, but it is in drop/$U_MALLORY" \
		"$(jq -r .error "$S/done/$U_MALLORY:build.sh.json")" "build.sh: the reason"
	assert_match "writable by others than its owner" \
		"$(jq -r .error "$S/done/$U_MALLORY:b664.sh.json")" "b664.sh: the reason"
	# A rejection cut short by a crash is re-queued into new/ as
	# mallory:NAME, still alice's file: rejected there too.
	as "$U_ALICE" sh -c "printf '#!/bin/sh\necho PWNED \$(id -un)\n' >$proj/rq.sh; chmod 0644 $proj/rq.sh"
	mv "$proj/rq.sh" "$S/new/$U_MALLORY:rq"
	assert_eq rejected "$(result "$U_MALLORY:rq" .status)" "re-queued rejection: status"
	[ -n "${KART_TEST_VERBOSE:-}" ] && for id in build.sh b664.sh hl; do
		echo "    $U_MALLORY:$id: $(jq -c '[.status, .submitter.uid, .error]' "$S/done/$U_MALLORY:$id.json")"
	done
	never_ran_as "$auid" PWNED
	stop_workers
}

# A drop directory squatted under alice's name is never trusted for her
# and does not block her: the worker moves it away, and kart submit goes
# on. mallory's file in it never runs, as anyone.
test_squatted_drop_directory() {
	shared_spool || return
	local auid
	auid=$(id -u "$U_ALICE")
	as "$U_MALLORY" sh -c "mkdir -m 0777 $S/drop/$U_ALICE && printf '#!/bin/sh\necho PWNED\n' >$S/drop/$U_ALICE/sq && chmod 0644 $S/drop/$U_ALICE/sq" ||
		fail "mallory's squat"
	two_workers || return
	wait_until 10 test ! -e "$S/drop/$U_ALICE" || fail "the squat is still in drop/"
	assert_match "drop/$U_ALICE: owned by uid $(id -u "$U_MALLORY"), not by the user of that name" \
		"$(cat "$S.worker.log")" "the worker's log"
	local out
	out=$(as "$U_ALICE" kart submit --name after -- id -un) || fail "alice blocked: $out"
	assert_eq "ok $U_ALICE" "$(result "$U_ALICE:after" .status) $(cat "$S/done/$U_ALICE:after.stdout" 2>/dev/null)" \
		"alice's task after the squat"
	ls "$S/done" | grep -q sq && fail "mallory's file in the squat was taken as a task"
	never_ran_as "$auid" PWNED
	stop_workers
}

# A drop on its way into new/ (new/.hoist.UID.USER:NAME, spool-layout
# README §6) holds its id: alice's next submit of that name takes NAME.2.
test_hoisted_drop_holds_its_id() {
	shared_spool || return
	local auid id
	auid=$(id -u "$U_ALICE")
	printf '#!/bin/sh\ntrue\n' >"$S/new/.hoist.$auid.$U_ALICE:H"
	id=$(as "$U_ALICE" kart submit --name H -- true 2>/dev/null) || fail "alice's submit"
	assert_eq "$U_ALICE:H.2" "$id" "the id beside a hoist in progress"
}

# A squat alice cannot even open (mallory's 0700 directory under her
# name: EACCES before any fstat, spool-layout README §6) is a squat all
# the same: her kart submit waits for a worker to move it, then drops.
test_unreadable_squat_waits() {
	shared_spool || return
	as "$U_MALLORY" mkdir -m 0700 "$S/drop/$U_ALICE" || fail "mallory's squat"
	as "$U_ALICE" kart submit --name behind -- id -un >"$T_ROOT/behind.out" 2>"$T_ROOT/behind.err" &
	local sub=$!
	sleep 0.5
	two_workers || return
	wait_gone 20 "$sub"
	assert_eq "0 $U_ALICE:behind" "$RC $(cat "$T_ROOT/behind.out")" "alice's submit behind the squat ($(cat "$T_ROOT/behind.err"))"
	assert_eq "ok $U_ALICE" "$(result "$U_ALICE:behind" .status) $(cat "$S/done/$U_ALICE:behind.stdout" 2>/dev/null)" \
		"alice's task"
	stop_workers
}

# A new/ that others may write (a layout made by hand, or the old one):
# a member's file put straight there is rejected, with where to drop it.
test_shared_new_rejects_members_files() {
	shared_spool || return
	chmod 3770 "$S/new"
	as "$U_MALLORY" sh -c "printf '#!/bin/sh\necho hi\n' >$S/new/direct; chmod 0644 $S/new/direct"
	two_workers || return
	assert_eq rejected "$(result direct .status)" "status"
	assert_match "drop it into drop/USER/ \(or use kart submit\)" "$(jq -r .error "$S/done/direct.json")" "reason"
	stop_workers
}

# ---- 2. owner-only output -----------------------------------------------------------------

# every_read USER: everything of alice's task $1 that USER can read, as text.
every_read() {
	local u=$1 id=$2
	as "$u" sh -c "cat $S/cur/*/'$id' $S/cur/*/.'$id'.stdout $S/cur/*/.'$id'.stderr $S/cur/*/.'$id'.out/* \
		$S/done/'$id'.json $S/done/'$id'.stdout $S/done/'$id'.stderr $S/done/'$id'.task $S/done/'$id'.out/* \
		$S/drop/$U_ALICE/* $S/new/'$id'; kart cat '$id'; kart status --json '$id'" 2>/dev/null
}

# Break 5 as written: bob (not in the group) and mallory (in it) read
# nothing of alice's while her task runs, and after; alice reads it all.
test_output_readable_by_its_submitter_alone() {
	setup || return
	local id=$U_ALICE:sec u got
	as "$U_ALICE" sh -c "printf '#!/bin/sh\necho SECRET-out\necho SECRET-err >&2\necho SECRET-art >\"\$KART_OUTDIR/a\"\nsleep 3\n# SECRET-task\n' |
		kart submit --name sec -" >/dev/null || fail "alice cannot submit"
	wait_until 20 sh -c "cat $S/cur/*/.'$id'.stdout 2>/dev/null | grep -q SECRET" || fail "not running"
	for u in "$U_MALLORY" "$U_BOB"; do
		got=$(every_read "$u" "$id")
		assert_eq "" "$(grep -o 'SECRET[a-z-]*' <<<"$got" | sort -u | tr '\n' ' ')" "$u while it runs"
	done
	assert_eq "ok" "$(result "$id" .status)" "status"
	for u in "$U_MALLORY" "$U_BOB"; do
		got=$(every_read "$u" "$id")
		assert_eq "" "$(grep -o 'SECRET[a-z-]*' <<<"$got" | sort -u | tr '\n' ' ')" "$u after"
	done
	[ -n "${KART_TEST_VERBOSE:-}" ] && ls -la "$S/done" "$S/done/$id.out" | sed 's/^/    /'
	got=$(every_read "$U_ALICE" "$id")
	assert_eq "SECRET-art SECRET-err SECRET-out SECRET-task " \
		"$(grep -o 'SECRET[a-z-]*' <<<"$got" | sort -u | tr '\n' ' ')" "alice reads her own"
	stop_workers
}

# [worker] results = group: alice's result and outputs are readable by
# the spool's group too (mallory), while her task runs and after; still
# not by bob, outside it; her task file and artifacts stay hers. The
# default (owner) is the test above.
test_results_group_readable_by_policy() {
	shared_spool || return
	printf "[worker]\nresults = group\n" >"$S/kart.conf"
	two_workers || return
	local id=$U_ALICE:grp got
	as "$U_ALICE" sh -c "printf '#!/bin/sh\necho SECRET-out\necho SECRET-err >&2\necho SECRET-art >\"\$KART_OUTDIR/a\"\nsleep 2\n# SECRET-task\n' |
		kart submit --no-cwd --name grp -" >/dev/null || fail "alice cannot submit"
	wait_until 20 sh -c "cat $S/cur/*/.'$id'.stdout 2>/dev/null | grep -q SECRET" || fail "not running"
	got=$(as "$U_MALLORY" sh -c "cat $S/cur/*/.'$id'.stdout" 2>/dev/null)
	assert_eq "SECRET-out" "$got" "mallory (the group) reads the running capture"
	assert_eq "" "$(every_read "$U_BOB" "$id" | grep -o 'SECRET[a-z-]*' | sort -u | tr '\n' ' ')" "bob while it runs"
	assert_eq "ok" "$(result "$id" .status)" "status"
	got=$(every_read "$U_MALLORY" "$id")
	assert_eq "SECRET-err SECRET-out " "$(grep -o 'SECRET[a-z-]*' <<<"$got" | sort -u | tr '\n' ' ')" \
		"mallory after: the result and outputs, not the task file or artifacts"
	assert_eq "ok" "$(as "$U_MALLORY" jq -r .status "$S/done/$id.json" 2>&1)" "mallory reads the JSON"
	assert_eq "" "$(every_read "$U_BOB" "$id" | grep -o 'SECRET[a-z-]*' | sort -u | tr '\n' ' ')" "bob after"
	stop_workers
}

# kart status across users shows each their own; root sees all. The cron
# walkthrough (contrib/cron/kart-consume) works for each user over their
# own results, and for root over all.
test_status_and_consume_per_user() {
	setup || return
	as "$U_ALICE" kart submit --name st -- echo alice-out >/dev/null || fail "alice cannot submit"
	as "$U_MALLORY" kart submit --name st -- echo mallory-out >/dev/null || fail "mallory cannot submit"
	result "$U_ALICE:st" .status >/dev/null
	result "$U_MALLORY:st" .status >/dev/null
	local out
	out=$(as "$U_MALLORY" kart status 2>&1)
	[ -n "${KART_TEST_VERBOSE:-}" ] && echo "    mallory's status: $out"
	assert_match "$U_MALLORY:st" "$out" "mallory's status lists her task"
	[[ $out == *"$U_ALICE:st"* ]] && fail "mallory's status lists alice's task: $out"
	out=$("$KART" -s "$S" status 2>&1)
	assert_match "$U_ALICE:st" "$out" "root's status lists alice's"
	assert_match "$U_MALLORY:st" "$out" "root's status lists mallory's"
	# The cron walkthrough, for alice over hers (a backslash in an id
	# included), and for root over all.
	as "$U_ALICE" kart submit --name 'back\slash' -- echo bs >/dev/null || fail "alice's back\\slash"
	result "$U_ALICE:back\slash" .status >/dev/null
	local h=$T_ROOT/consume-handler c=$ROOT/contrib/cron/kart-consume
	mkdir -p "$T_ROOT/ac" && chown "$U_ALICE" "$T_ROOT/ac"
	printf '#!/bin/sh\nhead -c 0 "$1" && echo "$KART_ID $KART_STATUS" >>"$(dirname "$STATE")/handled"\n' >"$h"
	chmod 755 "$h"
	as "$U_ALICE" env STATE="$T_ROOT/ac/state" "$c" "$S" "$T_ROOT/ac/state" "$h" || fail "alice's kart-consume"
	assert_eq "$U_ALICE:back\slash ok|$U_ALICE:st ok" "$(sort "$T_ROOT/ac/handled" | paste -sd'|')" "alice's kart-consume"
	mkdir -p "$T_ROOT/rc"
	STATE=$T_ROOT/rc/state PATH=$KART_BUILD:$PATH "$c" "$S" "$T_ROOT/rc/state" "$h" || fail "root's kart-consume"
	assert_eq 3 "$(grep -c ' ok$' "$T_ROOT/rc/handled")" "root's kart-consume handles all"
	stop_workers
}

# ---- 3. no lock or open by others stops a task ------------------------------------------

# flock_loop USER FILE...: as USER, open and flock (shared) each FILE
# given, then every task file and capture it can in new/ and cur/*/, and
# hold them all; sets FLP. It has FILEs held once "ready" is logged.
flock_loop() {
	local u=$1; shift
	as "$u" python3 -c '
import fcntl, glob, os, sys, time
held = {}
def grab(p):
    if p in held:
        return
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        held[p] = fd
        print("held", p, flush=True)
    except OSError:
        pass
for p in sys.argv[2:]:
    grab(p)
print("ready", flush=True)
end = time.time() + 120
while time.time() < end:
    for p in glob.glob(sys.argv[1] + "/new/*") + glob.glob(sys.argv[1] + "/cur/*/*") + \
            glob.glob(sys.argv[1] + "/cur/*/.*"):
        grab(p)
    time.sleep(0.002)
' "$S" "$@" >"$T_ROOT/flock.$u.log" 2>&1 &
	FLP=$!
	T_PIDS+=("$FLP")
	wait_until 10 grep -q ready "$T_ROOT/flock.$u.log" || fail "the flock loop did not start: $(cat "$T_ROOT/flock.$u.log")"
}

# Break 1 as written: alice keeps her task files 0644 in a project
# directory; mallory opens and flocks each of them, and runs a flock loop
# over every file she can open in new/ and cur/. None of alice's tasks is
# blocked (0 of 6). A worker killed with -9 while mallory holds alice's
# running task file locked still has its claim re-queued, and run by the
# other worker.
test_flock_loop_blocks_nothing() {
	setup || return
	local i n=0 proj=$T_ROOT/proj files=()
	mkdir -p "$proj" && chgrp "$G_KART" "$proj" && chmod 2775 "$proj"
	as "$U_ALICE" kart submit --name f0 -- true >/dev/null || fail "alice cannot submit"
	for i in 1 2 3 4 5 6 k; do
		as "$U_ALICE" sh -c "umask 022; printf '#!/bin/sh\n[ \"\$KART_ATTEMPT\" = 1 ] && [ $i = k ] && sleep 60\necho ran $i \$KART_ATTEMPT\n' >$proj/f$i"
		files+=("$proj/f$i")
	done
	flock_loop "$U_MALLORY" "${files[@]}"
	assert_eq 7 "$(grep -c "^held $proj/" "$T_ROOT/flock.$U_MALLORY.log")" "alice's files mallory holds locked"
	for i in 1 2 3 4 5 6; do
		as "$U_ALICE" mv "$proj/f$i" "$S/drop/$U_ALICE/f$i"
	done
	for i in 1 2 3 4 5 6; do
		[ "$(result "$U_ALICE:f$i" .status)" = ok ] && n=$((n + 1))
	done
	assert_eq 6 "$n" "alice's tasks that ran, of 6, under mallory's locks"
	# The worker killed under her lock: re-queued, run by the other.
	as "$U_ALICE" mv "$proj/fk" "$S/drop/$U_ALICE/k"
	local w
	wait_until 20 sh -c "ls $S/cur/*/.'$U_ALICE:k'.lock >/dev/null 2>&1" || fail "k never ran"
	w=$(basename "$(dirname "$(ls "$S"/cur/*/".$U_ALICE:k.lock" | head -1)")")
	local wp=$W2
	[ "$w" = w1 ] && wp=$W1
	kill -9 "$wp"
	wait_gone 10 "$wp" # (reaped here, quietly)
	assert_eq "ok ran k 2" "$(result "$U_ALICE:k" .status) $(cat "$S/done/$U_ALICE:k.stdout" 2>/dev/null)" \
		"k after its worker's kill -9, under mallory's lock"
	kill "$FLP" 2>/dev/null
	[ -n "${KART_TEST_VERBOSE:-}" ] && echo "    mallory held $(grep -c held "$T_ROOT/flock.$U_MALLORY.log") files open and locked"
	stop_workers 2>/dev/null
}

# ---- 4. ids that stay with their submitter -----------------------------------------------

# Break 4 as written, five rounds, two workers: the moment alice's
# `report` is claimed, mallory drops her own `report`, and one named
# after alice's id; alice's `kart wait report && kart cat report` (and
# with the full id) always prints her own output.
test_id_squat_two_workers() {
	setup || return
	as "$U_MALLORY" kart submit --name m0 -- true >/dev/null || fail "mallory cannot submit"
	local r out id
	for r in 1 2 3 4 5; do
		id=$(as "$U_ALICE" kart submit --name "report$r" -- sh -c "sleep 0.5; echo alice-$r") ||
			fail "alice cannot submit"
		assert_eq "$U_ALICE:report$r" "$id" "round $r: the id kart submit printed"
		wait_until 20 sh -c "ls $S/cur/*/'$id' >/dev/null 2>&1 || test -e '$S/done/$id.json'"
		as "$U_MALLORY" sh -c "cd $S/drop/$U_MALLORY && printf '#!/bin/sh\necho forged\n' >.a && mv .a report$r &&
			printf '#!/bin/sh\necho forged\n' >.b && mv .b '$id'"
		out=$(as "$U_ALICE" sh -c "kart wait report$r >/dev/null && kart cat report$r" 2>&1)
		assert_eq "alice-$r" "$out" "round $r: alice's wait && cat report$r"
		out=$(as "$U_ALICE" sh -c "kart wait '$id' >/dev/null && kart cat '$id'" 2>&1)
		assert_eq "alice-$r" "$out" "round $r: alice's wait && cat $id"
	done
	result "$U_MALLORY:report5" .status >/dev/null
	result "$U_MALLORY:$U_ALICE:report5" .status >/dev/null
	assert_eq "forged" "$(as "$U_MALLORY" kart cat "report5")" "mallory's own report5"
	as "$U_MALLORY" kart cat "$U_ALICE:report5" >/dev/null 2>&1 && fail "mallory read alice's report5"
	stop_workers
}

# ---- 5. credentials that never touch a submitter's process ---------------------------------

# Break 2 as written: alice runs an llm task (a workflow of 3 steps
# against the fake endpoint, 0.3 s an answer) while a poller of hers,
# started before she submits and stopped after the result, reads every
# /proc/*/environ and /proc/*/cmdline it can, over and over. It never
# sees the key; it did see the runner's own environment (so it looked
# where the key used to be). mallory, who can read the forwarder's
# command line, cannot connect to alice's socket. And the task works end
# to end through the worker's forwarder: the endpoint got the key in
# Authorization on every request, the runner got each answer.
test_llm_key_never_reaches_the_submitter() {
	[ -x /usr/bin/python3 ] || { skip "no /usr/bin/python3 (contrib/install-deps installs it)"; return; }
	shared_spool || return
	local key=sk-users-$RANDOM$RANDOM-$RANDOM-9f1e log=$T_ROOT/llm.log port
	FAKE_LLM_KEY=$key /usr/bin/python3 "$ROOT/tests/fake/llm-endpoint.py" - "$T_ROOT/llm.port" "$log" 0.3 \
		2>>"$T_ROOT/llm.err" &
	T_PIDS+=("$!")
	wait_until 10 test -s "$T_ROOT/llm.port" || { fail "the fake endpoint did not start"; return; }
	port=$(cat "$T_ROOT/llm.port")
	{
		llm_kind "$port"
		printf '[network]\nallow_uids = %s\n' "$(id -u "$U_ALICE")"
	} >"$S/kart.conf"
	export KART_LLM_API_KEY=$key
	two_workers
	local rc=$?
	unset KART_LLM_API_KEY
	[ $rc = 0 ] || return
	# The poller: each distinct environ and cmdline it reads, once, NUL-
	# separated in a file of its own; "ready" once it has been round.
	local dump=$T_ROOT/poll/dump stop=$T_ROOT/poll.stop
	mkdir -p "$T_ROOT/poll" && chown "$U_ALICE" "$T_ROOT/poll" && chmod 0700 "$T_ROOT/poll"
	as "$U_ALICE" /usr/bin/python3 -c '
import hashlib, os, sys
dump, stop = sys.argv[1:3]
seen, rounds, reads = set(), 0, 0
with open(dump + ".data", "wb") as out:
    while True:
        last = os.path.exists(stop)
        for p in os.listdir("/proc"):
            if not p.isdigit() or int(p) == os.getpid():
                continue
            for f in ("environ", "cmdline"):
                try:
                    with open("/proc/%s/%s" % (p, f), "rb") as fh:
                        b = fh.read()
                except OSError:
                    continue
                reads += 1
                h = hashlib.sha1(b).digest()
                if h not in seen:
                    seen.add(h)
                    out.write(("%s %s " % (p, f)).encode() + b + b"\n\0")
        rounds += 1
        if rounds == 1:
            print("ready", flush=True)
        if last:
            break
print("rounds %d reads %d" % (rounds, reads), flush=True)
' "$dump" "$stop" >"$dump.log" 2>&1 &
	local pp=$!
	T_PIDS+=("$pp")
	wait_until 20 grep -q ready "$dump.log" || { fail "the poller did not start: $(cat "$dump.log")"; return; }
	local id
	id=$(printf '#kart: kind=llm timeout=60s\n{"steps": [{"prompt": "one"}, {"prompt": "two {{previous}}"},
{"prompt": "three {{previous}}"}]}\n' |
		as "$U_ALICE" kart submit --no-cwd --name ask -) || fail "alice cannot submit: $id"
	# mallory finds alice's socket in her forwarder's command line (all
	# may read it) while the task runs: she cannot connect to it.
	assert_eq denied "$(as "$U_MALLORY" /usr/bin/python3 -c '
import glob, socket, sys, time
end = time.time() + 20
while time.time() < end:
    for c in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            a = open(c, "rb").read().decode(errors="replace").split("\0")
        except OSError:
            continue
        i = [n for n, x in enumerate(a) if x.endswith("/kart-credfwd")]
        if i and len(a) > i[0] + 2 and sys.argv[1] in a[i[0] + 2]:
            try:
                socket.socket(socket.AF_UNIX).connect(a[i[0] + 1])
                print("connected")
            except PermissionError:
                print("denied")
            except OSError as e:
                print("error", e)
            sys.exit()
    time.sleep(0.01)
print("no forwarder seen")
' ":$port/" 2>&1)" "mallory connects to alice's forwarder"
	assert_eq ok "$(result "$U_ALICE:ask" .status)" \
		"status ($(jq -r .error "$S/done/$U_ALICE:ask.json" 2>/dev/null); $(as "$U_ALICE" kart cat --stderr "$U_ALICE:ask" 2>&1))"
	touch "$stop"
	wait_gone 30 "$pp" || fail "the poller did not stop"
	[ -n "${KART_TEST_VERBOSE:-}" ] && echo "    poller: $(tail -1 "$dump.log"), $(tr -cd '\0' <"$dump.data" | wc -c) distinct reads kept"
	# It looked while the task ran: it read the runner's own environment,
	# where the key used to be, or, where a bwrap task runs in the
	# worker's namespaces (its bounded $KART_OUTDIR, outdir.c) and alice
	# may not read that environment at all, the forwarder's command line,
	# which lives exactly as long as the task. (kinds.sh
	# credentials_only_through_the_forwarder reads the runner's
	# environment from inside: no key there either.)
	grep -aq -e "KART_TASK_ID=$U_ALICE:ask" -e "kart-credfwd" "$dump.data" ||
		fail "the poller never saw the running task: it proves nothing ($(tail -1 "$dump.log"))"
	if grep -aq -e "$key" "$dump.data"; then
		fail "the poller read the key: $(tr '\0' '\n' <"$dump.data" | grep -a -e "$key" | sort | uniq -c | cut -c1-120)"
	fi
	# End to end through the forwarder.
	assert_eq "answer to [three answer to [two answer to [one]]]" \
		"$(as "$U_ALICE" kart cat "$U_ALICE:ask")" "the runner's answer"
	assert_eq "3 3" "$(jq -rs '"\(length) \([.[] | select(.auth_ok)] | length)"' "$log")" \
		"requests the endpoint got, and with the key in Authorization"
	grep -rqs -e "$key" "$S/done" "$S.worker.log" && fail "the key is in a result or the log"
	stop_workers
}

# Ids reserved between users (spool-layout README §5, §6): alice's
# concurrent submits of one name, against two workers, each get the id
# they printed; mallory can squat a reservation name of alice's (alice
# then gets the next id, and it is hers), but cannot remove one of hers
# (ids/ is sticky), and nothing of hers is ever under alice's id.
test_ids_reserved_between_users() {
	setup || return
	assert_eq "drwxrws--T" "$(stat -c %A "$S/ids")" "ids/ as tmpfiles makes it"
	as "$U_MALLORY" ln -s 1 "$S/ids/$U_ALICE:squat" || fail "mallory's squat"
	as "$U_ALICE" ln -s 2 "$S/ids/$U_ALICE:keep" || fail "alice's own link"
	as "$U_MALLORY" rm -f "$S/ids/$U_ALICE:keep" 2>/dev/null
	[ -L "$S/ids/$U_ALICE:keep" ] || fail "mallory removed a reservation of alice's"
	local id p i log=$T_ROOT/ids26 pids=()
	id=$(as "$U_ALICE" kart submit --name squat -- echo alice-squat) || fail "alice's submit"
	assert_eq "$U_ALICE:squat.2" "$id" "past mallory's squat"
	for p in 1 2 3; do
		(for i in 1 2; do
			as "$U_ALICE" kart submit --name same -- echo "alice-$p-$i" >"$log.$p.$i" 2>/dev/null
		done) &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait_gone 120 "$p" || fail "a submitter hangs"; done
	assert_eq "alice-squat" "$(result "$id" .status >/dev/null; cat "$S/done/$id.stdout" 2>/dev/null)" "$id"
	for p in 1 2 3; do
		for i in 1 2; do
			id=$(cat "$log.$p.$i")
			assert_match "^$U_ALICE:same(\.[0-9]+)?\$" "$id" "an id of alice's"
			result "$id" .status >/dev/null
			assert_eq "alice-$p-$i" "$(as "$U_ALICE" kart cat "$id" 2>&1)" "$id is alice-$p-$i's"
		done
	done
	stop_workers
	assert_eq "$U_ALICE:keep $U_ALICE:squat" "$(ls "$S/ids" | xargs)" "only the hand-made links are left"
}

# A link mallory makes at ids/alice:NAME reserves nothing (ids/ is every
# member's to write): alice's plain drop of that name keeps it, and so
# does her task already running when mallory sees it in cur/ and makes
# the link; alice's kart wait and her after= find it. (Before: each was
# finished as alice:NAME.2, her kart wait NAME timed out and her
# downstream waited for ever.)
test_ids_squat_moves_no_running_task() {
	setup || return
	local d=$S/drop/$U_ALICE
	as "$U_ALICE" kart submit --name first -- true >/dev/null || fail "alice's first submit"
	as "$U_MALLORY" ln -s 1 "$S/ids/$U_ALICE:plain" || fail "mallory's squat before the drop"
	as "$U_ALICE" sh -c "printf '#!/bin/sh\necho alice-plain\n' >$d/.p && mv $d/.p $d/plain" ||
		fail "alice's plain drop"
	as "$U_ALICE" sh -c "printf '#!/bin/sh\nsleep 3; echo alice-up\n' >$d/.u && mv $d/.u $d/up &&
		printf '#!/bin/sh\n#kart: after=$U_ALICE:up\necho alice-down\n' >$d/.d && mv $d/.d $d/down" ||
		fail "alice's drops"
	wait_until 20 sh -c "ls '$S'/cur/*/ | grep -qx '$U_ALICE:up'" || fail "alice's up never ran"
	as "$U_MALLORY" ln -s 1 "$S/ids/$U_ALICE:up" || fail "mallory's squat of the running task"
	as "$U_ALICE" kart wait --timeout 20 plain up down >/dev/null 2>&1 || fail "alice's kart wait plain up down"
	local id
	for id in plain up down; do
		assert_eq "ok alice-$id" "$(result "$U_ALICE:$id" .status) $(as "$U_ALICE" kart cat "$id" 2>&1)" \
			"alice's $id under its own id"
	done
	[ -e "$S/done/$U_ALICE:up.2.json" ] && fail "alice's up was moved to up.2"
	stop_workers
}

# ---- 6. smaller holes ------------------------------------------------------------------------

# A user.kart set by the submitter (attempt 999999, submitted in 1970)
# does not reach the result: the spool's record starts at the drop.
test_forged_record_ignored() {
	setup || return
	command -v setfattr >/dev/null || { skip "setfattr (attr) is missing"; return; }
	as "$U_ALICE" kart submit --name x0 -- true >/dev/null || fail "alice cannot submit"
	as "$U_ALICE" sh -c "cd $S/drop/$U_ALICE && printf '#!/bin/sh\necho hi\n' >.x &&
		setfattr -n user.kart -v \"\$(printf 'attempt=999999\nsubmitted=1000\nid=')\" .x && mv .x forged" ||
		fail "alice's forged attribute"
	assert_eq ok "$(result "$U_ALICE:forged" .status)" "status"
	assert_eq 1 "$(jq -r .attempt "$S/done/$U_ALICE:forged.json")" "attempt"
	assert_ne 1970 "$(jq -r .submitted_at "$S/done/$U_ALICE:forged.json" | cut -c1-4)" "submitted_at"
	stop_workers
}

# ---- 7. after the drop, the task is the worker's (issue 35) ------------------------------

# mallory's edit racer: as mallory, watch tmp/ for an edit temp of hers
# (the worker used to stage a member's edit there, chowned to her) and
# rename alice's file over it. Prints "swapped NAME" if it ever could.
# It races until STOP exists (the edited task has its result: nothing is
# left to stage) or for SECONDS at most.
edit_racer() { # VICTIM SECONDS STOP
	as "$U_MALLORY" python3 -c '
import os, sys, time
tmp, victim, me = sys.argv[1], sys.argv[2], os.getuid()
end = time.time() + float(sys.argv[3])
while time.time() < end and not os.path.exists(sys.argv[4]):
    for n in os.listdir(tmp):
        if not n.startswith(".edit."):
            continue
        try:
            if os.lstat(os.path.join(tmp, n)).st_uid != me:
                continue
            os.rename(victim, os.path.join(tmp, n))
            print("swapped", n, flush=True)
            sys.exit(0)
        except OSError:
            pass
print("no swap", flush=True)
' "$S/tmp" "$@"
}

# Break 1 as written: mallory's task waits (after=) while she edits it
# with a 15 MB text; her racer renames alice's 0644 file (from a setgid
# project directory) over the temp the edit is staged in. Before: the
# swapped-in file was queued under mallory's id and ran as alice, and
# mallory read its output. Now the edit is staged where no member can
# reach it: four rounds, alice's code never runs, mallory's edit lands.
test_edit_never_hands_a_member_the_task() {
	setup || return
	local auid r proj=$T_ROOT/proj ed=$T_ROOT/grow.sh swaps=0
	auid=$(id -u "$U_ALICE")
	mkdir -p "$proj" && chgrp "$G_KART" "$proj" && chmod 2775 "$proj"
	# The editor: mallory's 15 MB of comments, and a mark of the edit.
	printf '#!/bin/sh\nprintf "echo edited\\n" >>"$1"\nyes "# padding padding padding padding" | head -c 15000000 >>"$1"\n' >"$ed"
	chmod 755 "$ed"
	for r in 1 2 3 4; do
		as "$U_ALICE" sh -c "printf '#!/bin/sh\necho PWNED \$(id -un)\n' >$proj/b$r.sh; chmod 0644 $proj/b$r.sh"
		as "$U_MALLORY" kart submit --no-cwd --name "m0-$r" -- sleep 4 >/dev/null || fail "round $r: mallory's m0"
		printf '#!/bin/sh\necho mine\n' | as "$U_MALLORY" kart submit --no-cwd --name "m1-$r" --after "$U_MALLORY:m0-$r" - \
			>/dev/null || fail "round $r: mallory's m1"
		edit_racer "$proj/b$r.sh" 30 "$T_ROOT/racer.$r.stop" >"$T_ROOT/racer.$r" 2>&1 &
		local rp=$!
		T_PIDS+=("$rp")
		as "$U_MALLORY" env VISUAL="$ed" kart edit "$U_MALLORY:m1-$r" >/dev/null 2>&1
		# Raced until m1 has its result, not the racer's whole 30 s.
		result "$U_MALLORY:m1-$r" .status >/dev/null
		touch "$T_ROOT/racer.$r.stop"
		wait_gone 40 "$rp"
		grep -q swapped "$T_ROOT/racer.$r" && swaps=$((swaps + 1))
		[ -n "${KART_TEST_VERBOSE:-}" ] && echo "    round $r: $(cat "$T_ROOT/racer.$r"), m1: $(jq -c '[.status, .submitter.uid]' "$S/done/$U_MALLORY:m1-$r.json") $(head -c 60 "$S/done/$U_MALLORY:m1-$r.stdout" 2>/dev/null)"
		assert_eq "$(id -u "$U_MALLORY")" "$(jq -r .submitter.uid "$S/done/$U_MALLORY:m1-$r.json")" "round $r: m1's submitter"
	done
	echo "    racer swaps: $swaps of 4"
	# Not vacuous: the edits went in (their mark), as mallory.
	assert_eq "ok edited" "$(result "$U_MALLORY:m1-4" .status) $(grep -x edited "$S/done/$U_MALLORY:m1-4.stdout" 2>/dev/null)" \
		"mallory's own edit"
	never_ran_as "$auid" PWNED
	stop_workers
}

# Break 2 as written: mallory sets user.kart on her own running task
# (hold=./../../../../victim/victim: a result filed outside the spool,
# over a root-owned victim.stdout; hold=alice:nightly: her result under
# alice's id). Before: root replaced victim.stdout and made victim.json,
# and alice's `kart wait nightly` exited 0. Now her running task is the
# worker's file: she can set nothing on it, and nothing outside the
# spool changes.
test_member_cannot_mark_her_hoisted_task() {
	setup || return
	local v=$T_ROOT/victim id w f
	mkdir -p "$v/victim.out" && echo ORIGINAL >"$v/victim.stdout" && echo keep >"$v/victim.out/k"
	local before
	before=$(cd "$v" && find . -printf '%p %s %i\n' | sort)
	# Dropped by a plain rename (no reservation in ids/, whose id would
	# win over hold=).
	as "$U_MALLORY" kart submit --no-cwd --name m0 -- true >/dev/null || fail "mallory cannot submit"
	for id in trav steal; do
		as "$U_MALLORY" sh -c "cd $S/drop/$U_MALLORY && printf '#!/bin/sh\nsleep 3; echo mallory\n' >.$id && mv .$id $id" ||
			fail "mallory cannot drop $id"
	done
	for id in trav steal; do
		wait_until 20 sh -c "ls $S/cur/*/'$U_MALLORY:$id' >/dev/null 2>&1" || fail "$id never ran"
	done
	f=$(ls "$S"/cur/*/"$U_MALLORY:trav" 2>/dev/null | head -1)
	as "$U_MALLORY" setfattr -n user.kart -v "$(printf 'attempt=1\nsubmitted=1\nid=\nhold=./../../../../victim/victim')" "$f" 2>/dev/null &&
		echo "    mallory set user.kart on $f"
	f=$(ls "$S"/cur/*/"$U_MALLORY:steal" 2>/dev/null | head -1)
	as "$U_MALLORY" setfattr -n user.kart -v "$(printf 'attempt=1\nsubmitted=1\nid=\nhold=%s:nightly' "$U_ALICE")" "$f" 2>/dev/null &&
		echo "    mallory set user.kart on $f"
	for id in trav steal; do
		assert_eq ok "$(result "$U_MALLORY:$id" .status)" "mallory's $id"
	done
	[ -n "${KART_TEST_VERBOSE:-}" ] && { ls -la "$v"; ls "$S/done"; tail -5 "$S.worker.log"; }
	assert_eq "$before" "$(cd "$v" && find . -printf '%p %s %i\n' | sort)" "the victim directory outside the spool"
	assert_eq ORIGINAL "$(cat "$v/victim.stdout")" "victim.stdout"
	assert_no_file "$S/done/$U_ALICE:nightly.json"
	as "$U_ALICE" timeout 5 kart wait nightly >/dev/null 2>&1 && fail "alice's kart wait nightly exited 0"
	stop_workers
}

# Break 4 as written: alice's unique= task leaves its key's lock; mallory
# holds a flock on every lock file she can open in cur/ (and below), in a
# loop; alice's next task with the key must run, not end `cancelled`.
# The locks are the workers' alone now (cur/.uniq/, 0700), and gone once
# the result is written.
test_unique_key_cannot_be_blocked() {
	setup || return
	as "$U_ALICE" kart submit --no-cwd --name u1 --unique=nightly -- echo first >/dev/null || fail "alice's u1"
	assert_eq ok "$(result "$U_ALICE:u1" .status)" "u1"
	as "$U_MALLORY" python3 -c '
import fcntl, glob, os, sys, time
held, end = {}, time.time() + 40
while time.time() < end:
    for p in glob.glob(sys.argv[1] + "/cur/.uniq*") + glob.glob(sys.argv[1] + "/cur/.uniq*/*"):
        if p in held:
            continue
        try:
            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            held[p] = fd
            print("held", p, flush=True)
        except OSError:
            pass
    time.sleep(0.005)
' "$S" >"$T_ROOT/uniq.log" 2>&1 &
	local lp=$!
	T_PIDS+=("$lp")
	sleep 1
	as "$U_ALICE" kart submit --no-cwd --name u2 --unique=nightly -- echo second >/dev/null || fail "alice's u2"
	assert_eq "ok" "$(result "$U_ALICE:u2" .status)" "u2 under mallory's locks ($(jq -r .error "$S/done/$U_ALICE:u2.json" 2>/dev/null))"
	kill "$lp" 2>/dev/null
	[ -n "${KART_TEST_VERBOSE:-}" ] && echo "    mallory held: $(grep -c held "$T_ROOT/uniq.log")"
	assert_eq "" "$(find "$S/cur" -maxdepth 2 -name '*uniq*' -type f)" "key locks left behind"
	stop_workers
}

# The two denials of service under the defaults: mallory fills every
# slot of both workers with --timeout 30d tasks. A shared spool's
# defaults bound her: the longest timeout is 24 h (her 30 d task is
# rejected, naming the ceiling), and she holds half of a worker's slots
# at most, so alice's task runs at once.
test_shared_defaults_bound_a_member() {
	setup || return
	local i t0
	# kart submit reads the same default and refuses; a hostile member
	# drops the file past it, and the worker rejects it.
	assert_match "timeout=2592000s is above the policy's ceiling of 86400s" \
		"$(as "$U_MALLORY" kart submit --no-cwd --timeout 30d --name long0 -- sleep 60 2>&1 >/dev/null)" \
		"kart submit --timeout 30d"
	as "$U_MALLORY" sh -c "cd $S/drop/$U_MALLORY && printf '#!/bin/sh\n#kart: timeout=30d\nsleep 60\n' >.l && mv .l long" ||
		fail "mallory's 30d drop"
	for i in 1 2 3 4 5 6 7 8; do
		as "$U_MALLORY" kart submit --no-cwd --name "hog$i" -- sleep 40 >/dev/null || fail "mallory's hog$i"
	done
	wait_until 20 sh -c "[ \$(ls $S/cur/*/ | grep -c '^$U_MALLORY:') -ge 2 ]" || fail "mallory's tasks never ran"
	sleep 2
	t0=$SECONDS
	as "$U_ALICE" kart submit --no-cwd --name quick -- echo hi >/dev/null || fail "alice's submit"
	wait_until 20 test -e "$S/done/$U_ALICE:quick.json" || fail "alice's task did not run within 20 s beside mallory's"
	[ -n "${KART_TEST_VERBOSE:-}" ] && echo "    alice's task after $((SECONDS - t0)) s; mallory running: $(ls "$S"/cur/*/ | grep -c "^$U_MALLORY:")"
	assert_eq rejected "$(result "$U_MALLORY:long" .status)" "mallory's --timeout 30d"
	assert_match "timeout" "$(jq -r .error "$S/done/$U_MALLORY:long.json" 2>/dev/null)" "the reason names the ceiling"
	as "$U_MALLORY" sh -c 'for i in 1 2 3 4 5 6 7 8; do kart cancel hog$i; done' >/dev/null 2>&1
	stop_workers
}

# The hoist's window: between the worker's rename of her drop into new/
# (the name .hoist.UID.USER:NAME is known) and its chown, the file is
# still hers, and she may hard-link it into tmp/. Then root's task file
# had a name of hers: bytes outside her share (and read for ever). The
# window is made certain, not raced for: a fanotify permission gate on
# new/ holds each worker's open of a hoisted lnI (the open the chown is
# made through) until her tmp/mlnI is there, so she links every drop.
# Each is rejected, and what her name holds is her own file or empty.
test_hoist_keeps_no_name_of_hers() {
	setup || return
	local won i f n=10 uid gate=$T_ROOT/gate.log gp
	uid=$(id -u "$U_MALLORY")
	as "$U_MALLORY" kart submit --no-cwd --name m0 -- true >/dev/null || fail "mallory cannot submit"
	python3 - "$S" ".hoist.$uid.$U_MALLORY:ln" "$(slow 10)" >"$gate" 2>&1 <<'PY' &
import ctypes, os, struct, sys, time
S, dot, limit = sys.argv[1], sys.argv[2], float(sys.argv[3])
libc = ctypes.CDLL(None, use_errno=True)
libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p]
# FAN_CLASS_CONTENT|FAN_CLOEXEC; FAN_OPEN_PERM|FAN_EVENT_ON_CHILD on new/
fan = libc.fanotify_init(0x4 | 0x1, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
if fan < 0 or libc.fanotify_mark(fan, 1, 0x10000 | 0x08000000, -100, f"{S}/new".encode()) < 0:
    sys.exit("fanotify: " + os.strerror(ctypes.get_errno()))
print("ready", flush=True)
while True:
    buf, off = os.read(fan, 4096), 0
    while off + 24 <= len(buf):
        size, _, _, _, _, fd, _ = struct.unpack_from("IBBHQii", buf, off)
        off += size
        if fd < 0:
            continue
        name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
        if name.startswith(dot):
            t, end = f"{S}/tmp/mln{name[len(dot):]}", time.monotonic() + limit
            while not os.path.lexists(t) and time.monotonic() < end:
                time.sleep(0.001)
            print("held", name, "linked" if os.path.lexists(t) else "timeout", flush=True)
        os.write(fan, struct.pack("iI", fd, 1))  # FAN_ALLOW
        os.close(fd)
PY
	gp=$!
	T_PIDS+=("$gp")
	wait_until 10 grep -q ready "$gate" || {
		kill "$gp" 2>/dev/null
		stop_workers
		skip "no fanotify permission gate on new/ (CONFIG_FANOTIFY_ACCESS_PERMISSIONS, CAP_SYS_ADMIN): $(cat "$gate")"
		return
	}
	won=$(as "$U_MALLORY" python3 - "$S" "$U_MALLORY" "$n" "$(slow 10)" <<'PY'
import os, sys, time
S, user, n, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
uid, d, won = os.getuid(), f"{S}/drop/{user}", 0
for i in range(n):
    with open(f"{d}/.ln{i}", "w") as f:
        f.write("#!/bin/sh\necho ran\n" + "#" * 4000 + "\n")
    src, dst = f"{S}/new/.hoist.{uid}.{user}:ln{i}", f"{S}/tmp/mln{i}"
    os.rename(f"{d}/.ln{i}", f"{d}/ln{i}")
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            os.link(src, dst)
            won += 1
            break
        except FileNotFoundError:
            time.sleep(0.001)
        except PermissionError:
            break
print(won)
PY
)
	[ -n "${KART_TEST_VERBOSE:-}" ] && echo "    mallory linked $won of $n hoisted files; $(grep -c held "$gate") opens held"
	# The premise: the gate held each hoist until her link was there.
	assert_eq "$n" "$won" "hoisted files mallory linked while the worker was held before its chown"
	assert_eq "$n" "$(grep ' linked$' "$gate" | cut -d' ' -f2 | sort -u | wc -l)" \
		"hoists held until her link ($(grep -v ' linked$' "$gate" | head -3))"
	# One wait for all the results: 30 s in all, not 30 s a drop.
	wait_until 30 sh -c "[ \$(ls '$S/done' | grep -c '^$U_MALLORY:ln[0-9]*\.json\$') -ge $n ]"
	for ((i = 0; i < n; i++)); do
		f=$S/tmp/mln$i
		assert_eq "rejected true" "$(jq -r '"\(.status) \(.error | test("link"))"' "$S/done/$U_MALLORY:ln$i.json" 2>&1)" \
			"ln$i, which mallory linked as tmp/mln$i: status, and whether the error names the link"
		[ -e "$f" ] && { [ "$(stat -c %U "$f")" = "$U_MALLORY" ] || [ "$(stat -c %s "$f")" = 0 ]; } ||
			fail "tmp/mln$i: root's task file under mallory's name, $(stat -c '%U %s bytes' "$f" 2>&1)"
	done
	kill "$gp" 2>/dev/null
	stop_workers
}

# Two workers finish the same cut-short hoist (a dot name left in new/,
# as by a worker killed after its first rename; every scan of new/ meets
# it). The rename out of the dot name is by name: a worker that looked at
# the file and stalled must not then move on the next drop of that name,
# which the other worker hoisted under the same dot name after finishing
# the first, and which is still hers (not yet taken). A fanotify gate
# holds the first worker's open of the file until that next hoist's open,
# then lets it go, and watches what reaches a task's name under new/ and
# cur/. Only one worker at a time may finish a hoist (cur/.hoist): then
# the other waits for the held one, and the gate lets it go after 3 s.
test_hoist_finished_by_one_worker() {
	shared_spool || return
	local uid dot gate=$T_ROOT/gate-once.log gp dp f n
	uid=$(id -u "$U_MALLORY")
	dot=.hoist.$uid.$U_MALLORY:twice
	as "$U_MALLORY" sh -c "mkdir -m 700 $S/drop/$U_MALLORY && cd $S/drop/$U_MALLORY && printf '#!/bin/sh\necho first\n' >.t && mv .t twice" ||
		fail "mallory's first drop"
	mv "$S/drop/$U_MALLORY/twice" "$S/new/$dot" || { fail "the cut-short hoist (test premise)"; return; }
	python3 - "$S" "$dot" "$U_MALLORY:twice" "$(slow 3)" "$(slow 15)" >"$gate" 2>&1 <<'PY' &
import ctypes, os, select, struct, sys, time
S, dot, final, serial, limit = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
libc = ctypes.CDLL(None, use_errno=True)
libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p]
fan = libc.fanotify_init(0x4 | 0x1, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
if fan < 0 or libc.fanotify_mark(fan, 1, 0x10000 | 0x08000000, -100, f"{S}/new".encode()) < 0:
    sys.exit("fanotify: " + os.strerror(ctypes.get_errno()))
print("ready", flush=True)
def allow(fd):
    os.write(fan, struct.pack("iI", fd, 1))
    os.close(fd)
first = second = None
t0 = released = None
seen = set()
while True:
    now = time.monotonic()
    if first and released is None and (second or now - t0 > (limit if os.path.lexists(f"{S}/new/{final}") else serial)):
        print("released first", "at the next hoist" if second else f"after {now - t0:.1f} s", flush=True)
        allow(first[0])
        released = now
    if released is not None:
        for d in [f"{S}/new"] + [f"{S}/cur/{w}" for w in os.listdir(f"{S}/cur") if not w.startswith(".")]:
            for n in os.listdir(d) if os.path.isdir(d) else []:
                try:
                    u = os.lstat(f"{d}/{n}").st_uid
                except FileNotFoundError:
                    continue
                if n.startswith(final) and (n, u) not in seen:
                    seen.add((n, u))
                    print("seen", d[len(S) + 1:] + "/" + n, u, flush=True)
        if second and now - released > 2:
            allow(second)
            second = None
    if not select.select([fan], [], [], 0.005)[0]:
        continue
    buf, off = os.read(fan, 4096), 0
    while off + 24 <= len(buf):
        size, _, _, _, _, fd, pid = struct.unpack_from("IBBHQii", buf, off)
        off += size
        if fd < 0:
            continue
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) == dot:
            ino = os.fstat(fd).st_ino
            if first is None:
                first, t0 = (fd, ino), time.monotonic()
                print("held first", pid, flush=True)
                continue
            if ino != first[1] and released is None:
                second = fd
                print("held the next hoist", pid, flush=True)
                continue
            print("opened by", pid, "same" if ino == first[1] else "next", flush=True)
        allow(fd)
PY
	gp=$!
	T_PIDS+=("$gp")
	wait_until 10 grep -qs ready "$gate" || {
		kill "$gp" 2>/dev/null
		skip "no fanotify permission gate on new/ (CONFIG_FANOTIFY_ACCESS_PERMISSIONS, CAP_SYS_ADMIN): $(cat "$gate")"
		return
	}
	# Both scan new/ at their start, and meet the dot name.
	start_worker "$S" --id w1
	W1=$WPID
	start_worker "$S" --id w2
	W2=$WPID
	# Mallory's next drop of the same name, once the first has its name.
	as "$U_MALLORY" sh -c "i=0; while [ \$i -lt $(slow 600) ] && ! ls -d $S/new/$U_MALLORY:twice $S/cur/*/$U_MALLORY:twice $S/done/$U_MALLORY:twice.json 2>/dev/null | grep -q .; do
		sleep 0.05; i=\$((i + 1)); done
		cd $S/drop/$U_MALLORY && printf '#!/bin/sh\necho second\n' >.t && mv .t twice" &
	dp=$!
	T_PIDS+=("$dp")
	wait_until 10 grep -q "held first" "$gate" || fail "no worker opened the cut-short hoist (test premise): $(cat "$gate")"
	wait_until 40 sh -c "[ \$(ls '$S/done' | grep -c '^$U_MALLORY:twice[.0-9]*\.json\$') -ge 2 ]" ||
		fail "not two results for mallory's two drops: $(ls "$S/done")"
	wait "$dp"
	[ -n "${KART_TEST_VERBOSE:-}" ] && sed 's/^/    gate: /' "$gate"
	grep -q "^released first" "$gate" || fail "the gate never let the held worker go: $(cat "$gate")"
	# What reached a task's name was the worker's file, never hers.
	f=$(grep "^seen .* $uid\$" "$gate")
	[ -z "$f" ] || fail "a file of mallory's (not yet the worker's) under a task's name, moved there by the stalled worker: $f"
	local outs=
	for f in "$S/done/$U_MALLORY:twice"*.json; do
		[ -e "$f" ] || continue
		assert_eq "ok $uid" "$(jq -r '"\(.status) \(.submitter.uid)"' "$f")" "${f##*/}"
		outs+="$(cat "${f%.json}.stdout" 2>/dev/null) "
	done
	assert_eq "first second " "$(echo $outs | tr ' ' '\n' | sort | tr '\n' ' ')" "what mallory's two tasks printed"
	kill "$gp" 2>/dev/null
	stop_workers
}

# A file copied into drop/ 0644 (an env= value in it): once it is
# queued, nobody but alice and root reads it, and alice can change
# nothing about it (bytes, mode, attributes, ACL, name): it is the
# worker's. A file of alice's that mallory drops is rejected as
# mallory's, the result naming whose file it was.
test_queued_task_is_the_workers() {
	setup || return
	local auid muid f id=$U_ALICE:held proj=$T_ROOT/proj
	auid=$(id -u "$U_ALICE") muid=$(id -u "$U_MALLORY")
	as "$U_ALICE" kart submit --no-cwd --name first -- true >/dev/null || fail "alice cannot submit"
	as "$U_ALICE" sh -c "cd $S/drop/$U_ALICE && printf '#!/bin/sh\n#kart: not_before=2099-01-01T00:00:00Z env=TOKEN=SECRET-env\necho hi\n' >.h && chmod 0644 .h && mv .h held" ||
		fail "alice's 0644 drop"
	wait_until 20 test -e "$S/new/$id" || fail "not queued"
	f=$S/new/$id
	[ -n "${KART_TEST_VERBOSE:-}" ] && echo "    $(stat -c '%A %U' "$f")"
	as "$U_MALLORY" cat "$f" >/dev/null 2>&1 && fail "mallory reads alice's queued task"
	as "$U_BOB" cat "$f" >/dev/null 2>&1 && fail "bob reads alice's queued task"
	as "$U_ALICE" cat "$f" | grep -q SECRET-env || fail "alice cannot read her own queued task"
	as "$U_ALICE" sh -c "echo x >>'$f'" 2>/dev/null && fail "alice wrote her queued task"
	as "$U_ALICE" chmod 0666 "$f" 2>/dev/null && fail "alice chmod'ed her queued task"
	as "$U_ALICE" setfattr -n user.kart -v "hold=x" "$f" 2>/dev/null && fail "alice set user.kart on her queued task"
	as "$U_ALICE" setfattr -n user.kart.submitter -v "uid=0" "$f" 2>/dev/null && fail "alice set the record on her queued task"
	as "$U_ALICE" setfattr -n system.posix_acl_access -v 0sAgAAAAEABgD/////AgAGAOoDAAAEAAQA/////xAABgD/////IAAAAP////8= "$f" 2>/dev/null &&
		fail "alice set an ACL on her queued task"
	as "$U_ALICE" mv "$f" "$S/tmp/stolen" 2>/dev/null && fail "alice renamed her queued task"
	assert_eq "root" "$(stat -c %U "$f")" "the queued file's owner"
	kart -s "$S" cancel "$id" >/dev/null 2>&1
	# alice's file dropped by mallory: rejected, as mallory's drop.
	mkdir -p "$proj" && chgrp "$G_KART" "$proj" && chmod 2775 "$proj"
	as "$U_ALICE" sh -c "printf '#!/bin/sh\necho hi\n' >$proj/a.sh; chmod 0644 $proj/a.sh"
	as "$U_MALLORY" kart submit --no-cwd --name m0 -- true >/dev/null || fail "mallory cannot submit"
	as "$U_MALLORY" mv "$proj/a.sh" "$S/drop/$U_MALLORY/a" || fail "mallory's mv"
	assert_eq "rejected $muid" "$(result "$U_MALLORY:a" '"\(.status) \(.submitter.uid)"')" "the rejection's submitter"
	assert_match "owned by uid $auid" "$(jq -r .error "$S/done/$U_MALLORY:a.json")" "whose file it was"
	stop_workers
}

# small_spool MB: the shared spool moved onto a tmpfs of its own of MB
# megabytes (its layout and modes kept), so that a member can fill it.
small_spool() {
	local m=$T_ROOT/small
	mkdir -p "$m" && mount -t tmpfs -o "size=$1m,mode=0755" tmpfs "$m" ||
		{ skip "cannot mount a tmpfs (needs CAP_SYS_ADMIN)"; return 1; }
	SMALL=$m
	cp -a "$S/." "$m/" || { fail "cannot copy the spool's layout"; return 1; }
	S=$m
}
small_spool_gone() { [ -n "${SMALL:-}" ] && umount -l "$SMALL" 2>/dev/null; SMALL=; }

# The second denial of service: one file of mallory's in the
# group-writable tmp/ takes the spool's filesystem below min_free, which
# stopped all claiming. On a shared spool a member's bytes in tmp/ and
# her drop directory are bounded (drop_max_bytes: by default a tenth of
# the filesystem), and below min_free only the members over their share
# are held back: alice's task runs, mallory's waits.
test_member_cannot_fill_the_spool() {
	shared_spool || return
	small_spool 48 || return
	printf '[worker]\nmin_free = 44M\n' >"$S/kart.conf"
	two_workers || { small_spool_gone; return; }
	as "$U_ALICE" kart submit --no-cwd --name a0 -- true >/dev/null || fail "alice cannot submit"
	# a. mallory holds 6 MB (3 MB of output, 3 MB in tmp/: within her
	# 4.8 MB of tmp/), over her share of the spool (4.8 MB), and the
	# spool is below min_free: her next task waits, alice's runs.
	as "$U_MALLORY" kart submit --no-cwd --name m0 -- head -c 3000000 /dev/urandom >/dev/null ||
		fail "mallory cannot submit"
	result "$U_MALLORY:m0" .status >/dev/null
	as "$U_MALLORY" sh -c "head -c 3000000 /dev/urandom >$S/tmp/fill" || fail "mallory's fill"
	[ -n "${KART_TEST_VERBOSE:-}" ] && df -h "$S" | tail -1 | sed 's/^/    /'
	as "$U_MALLORY" kart submit --no-cwd --name m1 -- echo mallory >/dev/null || fail "mallory's m1"
	as "$U_ALICE" kart submit --no-cwd --name a1 -- echo alice >/dev/null || fail "alice's a1 (the spool full)"
	wait_until 20 test -e "$S/done/$U_ALICE:a1.json" || fail "alice's task did not run below min_free"
	[ -e "$S/done/$U_MALLORY:m1.json" ] && fail "mallory's task ran although she holds more than her share"
	# b. Beyond her share of tmp/: the newest of her files goes, even
	# held open, and the disk comes back.
	as "$U_MALLORY" sh -c "head -c 30000000 /dev/zero >$S/tmp/big" 2>/dev/null
	wait_until 20 test ! -e "$S/tmp/big" || fail "mallory's 30 MB in tmp/ is still there"
	[ -e "$S/tmp/fill" ] || fail "her older file, within her share, was removed too"
	rm -f "$S/tmp/fill"
	assert_eq ok "$(result "$U_MALLORY:m1" .status)" "mallory's m1 once there is room"
	[ -n "${KART_TEST_VERBOSE:-}" ] && grep -h 'share\|min_free\|claiming' "$S.worker.log" 2>/dev/null | sed 's/^/    /'
	stop_workers
	small_spool_gone
}

# ---- issue 35: what a member chose never reaches a terminal raw -----------------------------

# no_raw_controls FILE WHAT: FILE is valid UTF-8 with no control a
# terminal acts on but tab and newline: no C0, DEL, C1, bidi control or
# line separator (termsafe.h's list).
no_raw_controls() {
	python3 - "$1" "$2" <<'PY' || fail "$2: $(head -c 300 "$1" | od -c | head -5)"
import sys
data = open(sys.argv[1], 'rb').read()
try:
    text = data.decode('utf-8')
except UnicodeDecodeError as e:
    print(f"    {sys.argv[2]}: not UTF-8 at byte {e.start}", file=sys.stderr); sys.exit(1)
bad = sorted({f"U+{ord(c):04X}" for c in text
              if (ord(c) < 0x20 and c not in '\t\n') or 0x7f <= ord(c) <= 0x9f
              or ord(c) in (0x061c, 0x200e, 0x200f) or 0x2028 <= ord(c) <= 0x202e
              or 0x2066 <= ord(c) <= 0x2069})
if bad:
    print(f"    {sys.argv[2]}: raw {' '.join(bad)}", file=sys.stderr); sys.exit(1)
PY
}

# Break 5 as written: mallory drops two tasks whose names clear the
# screen, retitle the window, print a fake green line and reverse text:
# one with ESC and BEL (claimed under that raw name, then rejected, its
# result filed with each control as '_'), one with the valid C1 CSI (U+009B), NEL (U+0085) and U+202E,
# which runs and fails. Root's kart status (text, --json, --ndjson, by
# glob), watch (--events, --json, --all), wait, cat, cancel and retry,
# and the workers' log, print no raw control: the names show escaped.
test_names_reach_no_terminal_raw() {
	setup || return
	local esc c1 o=$T_ROOT/term35 f escid
	esc=$'pay\e[2J\e]0;owned\a\e[32malice:payroll ok\e[0m'
	escid=$U_MALLORY:${esc//[$'\e\a']/_}
	c1=$'c1\xc2\x9b2J\xc2\x85\xe2\x80\xaellorayap\xe2\x81\xa6'
	mkdir -p "$o"
	"$KART" -s "$S" watch --events >"$o/watch" 2>&1 &
	local wp=$! ; T_PIDS+=("$wp")
	"$KART" -s "$S" watch --events --json >"$o/watch.json" 2>&1 &
	local wj=$! ; T_PIDS+=("$wj")
	# Each watches done/, cur/ and the workers' directories (not a sleep:
	# on a loaded machine they start late).
	watching() { [ "$(cat /proc/"$1"/fdinfo/* 2>/dev/null | grep -c '^inotify wd:')" -ge 4 ]; }
	wait_until 10 watching "$wp" && wait_until 10 watching "$wj" || fail "kart watch set no inotify watches (test premise)"
	as "$U_MALLORY" kart submit --name m0 -- true >/dev/null || fail "mallory cannot submit"
	as "$U_MALLORY" sh -c 'd=$1/drop/$2; printf "#!/bin/sh\n#kart: label=l%%1b%%5b2J\nexit 3\n" >"$d/.t" &&
		cp "$d/.t" "$d/.u" && mv "$d/.t" "$d/$3" && mv "$d/.u" "$d/$4"' sh "$S" "$U_MALLORY" "$esc" "$c1" ||
		fail "mallory's drops"
	assert_eq rejected "$(result "$escid" .status)" "the ESC name: status"
	assert_eq failed "$(result "$U_MALLORY:$c1" .status)" "the C1 name: status"
	wait_until 10 grep -q 'failed' "$o/watch" || fail "watch --events did not see it finish"
	wait_until 10 grep -q '"finished"' "$o/watch.json"
	kill "$wp" "$wj" 2>/dev/null
	"$KART" -s "$S" status >"$o/status" 2>&1
	"$KART" -s "$S" status "$U_MALLORY:*" >"$o/status.glob" 2>&1
	"$KART" -s "$S" status --json >"$o/status.json" 2>&1
	"$KART" -s "$S" status --ndjson >"$o/status.ndjson" 2>&1
	"$KART" -s "$S" watch --all --json >"$o/watch.all.json" 2>&1 &
	local wa=$! ; T_PIDS+=("$wa")
	"$KART" -s "$S" watch --all >"$o/watch.all" 2>&1 &
	local wt=$! ; T_PIDS+=("$wt")
	"$KART" -s "$S" wait "$escid" "$U_MALLORY:$c1" >"$o/wait" 2>&1
	"$KART" -s "$S" wait "$U_MALLORY:$c1" >"$o/wait.one" 2>&1
	"$KART" -s "$S" cat "$U_MALLORY:$c1.9" >"$o/cat" 2>&1
	"$KART" -s "$S" cancel "$U_MALLORY:$c1" >"$o/cancel" 2>&1
	"$KART" -s "$S" retry "$U_MALLORY:$esc" "$escid" >"$o/retry" 2>&1
	"$KART" -s "$S" status "$esc" >"$o/status.unknown" 2>&1
	wait_until 10 grep -qF '\u009b' "$o/watch.all"
	wait_until 10 grep -qF 'c1' "$o/watch.all.json"
	kill "$wa" "$wt" 2>/dev/null
	cp "$S.worker.log" "$o/worker.log"
	for f in "$o"/*; do no_raw_controls "$f" "root's ${f##*/}"; done
	# The names were printed, escaped: the test saw them.
	grep -qF 'pay\x1b[2J\x1b]0;owned\x07' "$o/watch" || fail "watch --events: no escaped ESC claim: $(cat -v "$o/watch")"
	grep -qF 'c1\u009b2J\u0085\u202ellorayap\u2066' "$o/status" || fail "status: no escaped C1 name"
	for f in watch watch.all wait cat cancel status.glob; do
		grep -qF '\u009b' "$o/$f" || fail "$f: no escaped C1 name: $(cat -v "$o/$f" | head -5)"
	done
	grep -qF 'claimed' "$o/watch" || fail "watch --events: no claim line"
	# JSON means the exact names.
	assert_eq "$U_MALLORY:$c1" "$(jq -r --arg id "$U_MALLORY:$c1" '.[] | select(.id == $id) | .id' "$o/status.json")" \
		"status --json: the C1 name, exactly"
	assert_eq 1 "$(jq -c --arg id "$U_MALLORY:$c1" 'select(.id == $id and .event == "claimed")' "$o/watch.json" | wc -l)" \
		"watch --events --json: the C1 name's claim"
	stop_workers
}

# ---- issue 35, break 6: the key goes to a proven endpoint alone -------------------------

# squat MODE WHERE OUT [CERT KEY]: as mallory, listen where the endpoint
# should be (tcp PORT, tls PORT, unix PATH) and write into OUT each
# request that arrives (an empty one: a connection that sent nothing),
# answering a chat completion; prints the port (or "ready").
squat() {
	as "$U_MALLORY" /usr/bin/python3 -c '
import os, socket, ssl, sys
mode, where, out = sys.argv[1:4]
if mode == "unix":
    s = socket.socket(socket.AF_UNIX)
    s.bind(where)
    os.chmod(where, 0o777)
else:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(where)))
s.listen(16)
if mode == "tls":
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[4], sys.argv[5])
print("ready" if mode == "unix" else s.getsockname()[1], flush=True)
body = b"{\"choices\": [{\"message\": {\"content\": \"squatted\"}}]}"
while True:
    c, _ = s.accept()
    data = b""
    try:
        if mode == "tls":
            c = ctx.wrap_socket(c, server_side=True)
        c.settimeout(5)
        while b"\r\n\r\n" not in data:
            d = c.recv(65536)
            if not d:
                break
            data += d
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    except Exception as e:
        data += ("(%s)" % type(e).__name__).encode()
    finally:
        c.close()
    with open(out, "ab") as f:
        f.write(b"request: " + data + b"\n")
' "$@"
}

# Break 6 as written: while the endpoint's server is down, mallory binds
# its port and runs an llm task; also a Unix socket endpoint in a
# directory anyone can write (she puts her own socket there), and an
# https endpoint whose port she holds with a certificate of her own.
# The port forwarders reach her listeners and send nothing: no key, not
# even a request (TLS: the handshake fails); the socket one does not
# connect at all (a path others can change proves nothing). Her tasks
# fail, saying the key was not sent. Then the real server is back on its port, root's, as
# endpoint_uid says, and alice's task gets its answer with the key.
test_llm_key_only_to_the_proven_endpoint() {
	[ -x /usr/bin/python3 ] || { skip "no /usr/bin/python3 (contrib/install-deps installs it)"; return; }
	shared_spool || return
	local key=sk-users35-$RANDOM$RANDOM-$RANDOM log=$T_ROOT/llm35.log port tport ep k
	local mdir=$T_ROOT/m35 run=$T_ROOT/run35
	FAKE_LLM_KEY=$key /usr/bin/python3 "$ROOT/tests/fake/llm-endpoint.py" - "$T_ROOT/llm35.port" "$log" \
		2>>"$T_ROOT/llm35.err" &
	ep=$!
	wait_until 10 test -s "$T_ROOT/llm35.port" || { fail "the fake endpoint did not start"; return; }
	port=$(cat "$T_ROOT/llm35.port")
	kill "$ep"
	wait_gone 10 "$ep"
	mkdir -p "$mdir" "$run" && chown "$U_MALLORY" "$mdir" && chmod 0700 "$mdir" && chmod 1777 "$run"
	as "$U_MALLORY" openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
		-addext subjectAltName=IP:127.0.0.1 -keyout "$mdir/k.pem" -out "$mdir/c.pem" 2>/dev/null ||
		fail "mallory's certificate"
	squat tcp "$port" "$mdir/tcp.got" >"$mdir/tcp.out" 2>&1 &
	T_PIDS+=("$!")
	squat tls 0 "$mdir/tls.got" "$mdir/c.pem" "$mdir/k.pem" >"$mdir/tls.out" 2>&1 &
	T_PIDS+=("$!")
	squat unix "$run/llm.sock" "$mdir/unix.got" >"$mdir/unix.out" 2>&1 &
	T_PIDS+=("$!")
	wait_until 10 test -s "$mdir/tcp.out" -a -s "$mdir/tls.out" -a -s "$mdir/unix.out" ||
		{ fail "mallory's listeners: $(cat "$mdir"/*.out)"; return; }
	tport=$(cat "$mdir/tls.out")
	{
		llm_kind "$port" # endpoint_uid: root's, who runs the real server
		printf '[kind.llms]\nrunner = %s\nnet = yes\ncredentials = KART_LLM_API_KEY\n' "$KART_BUILD/kart-llm"
		printf 'endpoint = https://127.0.0.1:%s/v1\n' "$tport"
		printf '[kind.llmu]\nrunner = %s\nnet = yes\ncredentials = KART_LLM_API_KEY\n' "$KART_BUILD/kart-llm"
		printf 'endpoint = http://localhost/v1\nendpoint_socket = %s\nendpoint_uid = 0\n' "$run/llm.sock"
		printf '[network]\nallow_uids = %s %s\n' "$(id -u "$U_ALICE")" "$(id -u "$U_MALLORY")"
	} >"$S/kart.conf"
	export KART_LLM_API_KEY=$key
	two_workers
	local rc=$?
	unset KART_LLM_API_KEY
	[ $rc = 0 ] || return
	for k in llm llms llmu; do
		printf '#kart: kind=%s timeout=60s\nhello\n' "$k" | as "$U_MALLORY" kart submit --no-cwd --name "q-$k" - \
			>/dev/null || fail "mallory cannot submit her $k task"
	done
	assert_eq failed "$(result "$U_MALLORY:q-llm" .status)" "mallory's llm task"
	assert_match "cannot prove the endpoint: 127.0.0.1 port $port is held by uid $(id -u "$U_MALLORY"), not by endpoint_uid 0; the key was not sent" \
		"$(as "$U_MALLORY" kart cat --stderr "$U_MALLORY:q-llm" 2>&1)" "llm: what her task was told"
	assert_eq failed "$(result "$U_MALLORY:q-llmu" .status)" "mallory's socket task"
	assert_match "cannot prove the endpoint: /tmp can be written by others than root and endpoint_uid; the key was not sent" \
		"$(as "$U_MALLORY" kart cat --stderr "$U_MALLORY:q-llmu" 2>&1)" "llmu: what her task was told"
	assert_eq failed "$(result "$U_MALLORY:q-llms" .status)" "mallory's https task"
	assert_match "cannot prove the endpoint: its certificate does not verify .*; the key was not sent" \
		"$(as "$U_MALLORY" kart cat --stderr "$U_MALLORY:q-llms" 2>&1)" \
		"https: what her task was told"
	# The forwarders did reach her port listeners, and sent them nothing;
	# her socket, in a directory anyone can write, was not even tried.
	for k in tcp tls; do
		grep -q '^request: ' "$mdir/$k.got" 2>/dev/null || fail "$k: no forwarder reached mallory: it proves nothing"
		grep -aq -e "$key" -e Authorization -e POST "$mdir/$k.got" &&
			fail "$k: mallory received: $(head -c 300 "$mdir/$k.got")"
	done
	[ -e "$mdir/unix.got" ] && fail "unix: mallory's socket was connected to: $(head -c 300 "$mdir/unix.got")"
	# The server back on its port, root's (once mallory's listener is
	# gone): the key goes there.
	pkill -u "$U_MALLORY" 2>/dev/null
	local try
	for try in 1 2 3 4 5 6 7 8 9 10; do
		FAKE_LLM_PORT=$port FAKE_LLM_KEY=$key /usr/bin/python3 "$ROOT/tests/fake/llm-endpoint.py" - \
			"$T_ROOT/llm35b.port" "$log" 2>>"$T_ROOT/llm35.err" &
		ep=$!
		T_PIDS+=("$ep")
		wait_until 5 sh -c "test -s '$T_ROOT/llm35b.port' || ! kill -0 $ep"
		[ -s "$T_ROOT/llm35b.port" ] && break
		sleep 0.5
	done
	[ -s "$T_ROOT/llm35b.port" ] || { fail "the fake endpoint did not come back on port $port"; return; }
	printf '#kart: kind=llm timeout=60s\nhello\n' | as "$U_ALICE" kart submit --no-cwd --name q35 - >/dev/null ||
		fail "alice cannot submit"
	assert_eq ok "$(result "$U_ALICE:q35" .status)" "alice's task, the server back"
	assert_eq "answer to [hello]" "$(as "$U_ALICE" kart cat "$U_ALICE:q35")" "alice's answer"
	assert_eq "true" "$(jq -r .auth_ok "$log" | paste -sd' ')" "the key reached the real server, once"
	stop_workers
}

# ---- issue 35: the bind opener holds nothing of the worker's -------------------------------

# The bind opener (a vfork child of the worker, become the submitter)
# held every descriptor of the worker's: mallory's symlink to
# /proc/self/fd/N opened them as her (its log, its spool's directories,
# its tasks' files), bound a readable one (the log) into her task, and
# her task's error named where the others led. Now no magic link is
# followed (openat2, RESOLVE_NO_MAGICLINKS, in the spawn thread as her;
# on an older kernel the child holds its socket alone and stands in "/"
# before it opens anything): each of her tasks
# (fds 0 to 40 and 999, and /proc/self/cwd and root) is rejected, none
# runs, and no error names anything of the worker's, nor tells an open
# descriptor of the worker's from a closed one.
test_bind_opener_holds_nothing_of_the_worker() {
	setup || return
	local d=$T_ROOT/m35fd t id err
	mkdir -p "$d" && chown "$U_MALLORY" "$d" && chmod 0755 "$d"
	as "$U_MALLORY" kart submit --no-cwd --name m0 -- true >/dev/null || fail "mallory cannot submit"
	# Her links and drops by one shell of hers, not two a task.
	as "$U_MALLORY" sh -c 'umask 077; d=$1 drop=$2; shift 2
		for t; do
			case $t in cwd | root) ln -s "/proc/self/$t" "$d/l$t" ;; *) ln -s "/proc/self/fd/$t" "$d/l$t" ;; esac &&
			printf "#!/bin/sh\n#kart: ro=%s\nhead -c 300 %s; ls %s | head -5\n" "$d/l$t" "$d/l$t" "$d/l$t" \
				>"$drop/.t" && mv "$drop/.t" "$drop/fd$t" || { echo "mallory drop fd$t" >&2; exit 1; }
		done' sh "$d" "$S/drop/$U_MALLORY" $(seq 0 40) 999 cwd root || fail "mallory's drops"
	# Their results read by one jq, once all are in.
	local st
	for t in $(seq 0 40) 999 cwd root; do
		wait_until 30 test -e "$S/done/$U_MALLORY:fd$t.json" || fail "fd$t: no result"
	done
	local -A sts ers
	while IFS=$'\t' read -r id st err; do
		sts[$id]=$st ers[$id]=$err
	done < <(cd "$S/done" && jq -r '[input_filename, .status, .error] | @tsv' "$U_MALLORY":fd*.json)
	for t in $(seq 0 40) 999 cwd root; do
		id=$U_MALLORY:fd$t err=${ers[$id.json]:-}
		assert_eq rejected "${sts[$id.json]:-}" "fd$t: status"
		[ -n "$err" ] || fail "fd$t: rejected with no error"
		[ -s "$S/done/$id.stdout" ] && fail "fd$t ran: $(head -c 200 "$S/done/$id.stdout")"
		case $err in
		*"$S"* | *worker.log* | *anon_inode* | *pipe:* | *memfd* | *"leads to /dev"* | *"leads to $T_ROOT"*)
			fail "fd$t: the error names the worker's: $err" ;;
		esac
	done
	# A magic link is never followed: opened as her, by openat2 with
	# RESOLVE_NO_MAGICLINKS (the vforked opener of older kernels closes
	# every descriptor and goes to / first: its errors differ).
	assert_match "cannot be opened as uid [0-9]+: No such file or directory" \
		"$(jq -r .error "$S/done/$U_MALLORY:fd2.json")" "fd2 (the worker's log): its error"
	assert_match "cannot be opened as uid [0-9]+: No such file or directory|is refused: it leads to the root directory" \
		"$(jq -r .error "$S/done/$U_MALLORY:fdcwd.json")" "/proc/self/cwd: its error"
	# Nor which of its descriptors are open: fd 2 (open) and fd 999 (not)
	# say the same (the thread that opens as her may look there, she not).
	assert_eq "$(jq -r .error "$S/done/$U_MALLORY:fd999.json" | sed 's/.*uid [0-9]*: //')" \
		"$(jq -r .error "$S/done/$U_MALLORY:fd2.json" | sed 's/.*uid [0-9]*: //')" \
		"fd2 (open) and fd999 (not): their errors"
	stop_workers
}

run_tests
