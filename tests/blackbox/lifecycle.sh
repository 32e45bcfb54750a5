#!/bin/bash
# Black-box: a task's life in the spool. Cancel (queued, running,
# finished), --drain, a worker killed with -9 (recovery by a peer and by a
# restart under the same id, re-queue and `lost`), SIGTERM (graceful and
# past the grace period), and several workers racing on one spool.
. "$(dirname "$0")/../lib.sh"

# ---- local helpers ---------------------------------------------------------

now_ms() { date +%s%3N; }

# put_task SPOOL NAME BODY: the maildir way, staged in tmp/ then renamed.
put_task() {
	local s=$1 n=$2
	printf '%s\n' "$3" >"$s/tmp/.$n.stage" && mv "$s/tmp/.$n.stage" "$s/new/$n" ||
		fail "cannot queue $n"
}

has_result() { [ -e "$1/done/$2.json" ]; }
n_results() { find "$1/done" -maxdepth 1 -name '[!.]*.json' | wc -l; }
# Task files (not dot-files) left in new/ or in any cur/<worker>/.
queued_files() { find "$1/new" -mindepth 1 -maxdepth 1 ! -name '.*' | sort; }
claimed_files() { find "$1/cur" -mindepth 2 -maxdepth 2 ! -name '.*' | sort; }
# running_at_least SPOOL N: kart status counts N or more tasks running.
running_at_least() {
	[ "$("$KART" -s "$1" status --json | jq '[.[] | select(.state == "running")] | length')" -ge "$2" ]
}


# ---- cancel ------------------------------------------------------------------

test_cancel_queued() {
	local s id out rc
	s=$(mkspool)
	id=$("$KART" -s "$s" submit --name never -- echo should-not-run)
	assert_eq never "$id" "submit id"
	assert_file "$s/new/never"
	out=$("$KART" -s "$s" cancel never 2>&1); rc=$?
	assert_eq 0 "$rc" "kart cancel of a queued task: exit status (output: $out)"
	has_result "$s" never || { fail "no done/never.json after cancel"; return; }
	assert_eq cancelled "$(field "$s" never .status)" "status"
	assert_eq null "$(field "$s" never .started_at)" "started_at of a task that never ran"
	assert_eq null "$(field "$s" never .exit_code)" "exit_code of a task that never ran"
	local bytes
	bytes=$(field "$s" never '.stdout.bytes // 0')
	assert_eq 0 "$bytes" "stdout bytes of a cancelled queued task"
	if [ -e "$s/done/never.stdout" ]; then
		assert_eq "" "$(cat "$s/done/never.stdout")" "stdout file of a cancelled queued task"
	fi
	assert_no_file "$s/new/never"
	assert_eq "" "$(claimed_files "$s")" "claims left in cur/ after cancel"
	assert_eq "" "$(ls -A "$s/cur")" "cur/ after cancel (its own claim directory is removed)"
	timeout 20 "$KART" -s "$s" wait --timeout 5 never >/dev/null 2>&1; rc=$?
	assert_eq 130 "$rc" "kart wait on a cancelled task"
	# A worker started afterwards must not run it or record it again.
	drain "$s" --id after
	assert_eq 1 "$(n_results "$s")" "results after a drain following the cancel"
	assert_eq cancelled "$(field "$s" never .status)" "status after a later worker"
	assert_eq "" "$(cat "$s/done/never.stdout" 2>/dev/null)" "stdout after a later worker"
}

# One kart cancel with several ids: each queued task is cancelled and
# none of them ever runs.
test_cancel_several_queued() {
	local s out rc id
	s=$(mkspool)
	for id in c1 c2 c3; do
		"$KART" -s "$s" submit --name $id -- echo should-not-run >/dev/null || fail "submit $id"
	done
	out=$("$KART" -s "$s" cancel c1 c3 2>&1); rc=$?
	assert_eq 0 "$rc" "kart cancel c1 c3: exit status (output: $out)"
	for id in c1 c3; do
		has_result "$s" $id || { fail "no result for $id after cancel"; continue; }
		assert_eq cancelled "$(field "$s" $id .status)" "$id status"
		assert_eq null "$(field "$s" $id .started_at)" "$id started_at"
	done
	assert_file "$s/new/c2"
	drain "$s"
	assert_eq ok "$(field "$s" c2 .status)" "c2, not cancelled, runs"
	for id in c1 c3; do
		assert_eq cancelled "$(field "$s" $id .status)" "$id status after a drain"
		assert_eq "" "$(cat "$s/done/$id.stdout" 2>/dev/null)" "$id never ran"
	done
	assert_eq 3 "$(n_results "$s")" "results"
}

test_cancel_running() {
	local s id out rc t0 t1 mark=$((900 + $$ % 97))
	s=$(mkspool)
	# The background child proves the whole tree goes, not just the shell.
	put_task "$s" sleeper "#!/bin/sh
sleep $mark.5 &
sleep 600"
	start_worker "$s" --id wc
	local w=$WPID
	wait_until 20 is_running "$s" sleeper || { fail "sleeper never reported running"; stop_worker "$w"; return; }
	# The task has got to its sleep once its background child is there.
	wait_until 10 pgrep -f "sleep $mark.5" >/dev/null || fail "the task's background child never started"
	t0=$(now_ms)
	out=$(timeout "$(slow 30)" "$KART" -s "$s" cancel sleeper 2>&1); rc=$?
	assert_eq 0 "$rc" "kart cancel of a running task: exit status (output: $out)"
	wait_until 10 has_result "$s" sleeper || fail "no result within 10s of cancel"
	t1=$(now_ms)
	if has_result "$s" sleeper; then
		assert_eq cancelled "$(field "$s" sleeper .status)" "status"
		local d
		d=$(field "$s" sleeper .duration_ms)
		# Ended by the cancel, not by its own end (600 s); the bounds are
		# wide for the v2 tier's emulated guest on a busy host.
		[[ $d =~ ^[0-9]+$ ]] && [ "$d" -lt 300000 ] || fail "duration_ms '$d' not well under 600 s"
		[ $((t1 - t0)) -lt $(($(slow 10) * 1000)) ] || fail "cancel took $((t1 - t0)) ms"
	fi
	child_gone() { ! pgrep -f "sleep $mark.5" >/dev/null; }
	if ! wait_until 2 child_gone; then
		fail "the task's background child survived the cancel"
		pkill -9 -f "sleep $mark.5"
	fi
	# The worker goes on.
	id=$("$KART" -s "$s" submit --name next -- echo after-cancel)
	assert_eq next "$id" "id of the next task"
	wait_until 20 has_result "$s" next || fail "the worker did not run the next task after a cancel"
	has_result "$s" next && assert_eq ok "$(field "$s" next .status)" "next task status"
	kill -0 "$w" 2>/dev/null || fail "worker died"
	stop_worker "$w"
	assert_eq 0 "$RC" "worker exit status after SIGTERM"
}

# Cancel a task that waits in new/ while a worker is busy and already
# knows about it: it never runs, and the worker goes on.
test_cancel_queued_with_busy_worker() {
	local s w out rc
	s=$(mkspool)
	put_task "$s" blocker "#!/bin/sh
sleep 30"
	start_worker "$s" --id wq --slots 1 --batch-slots 1
	w=$WPID
	wait_until 20 is_running "$s" blocker || { fail "blocker never ran"; stop_worker "$w"; return; }
	put_task "$s" waiting "#!/bin/sh
echo ran"
	sleep 0.3
	out=$(timeout 30 "$KART" -s "$s" cancel waiting 2>&1); rc=$?
	assert_eq 0 "$rc" "cancel of a queued task a worker waits to run ($out)"
	has_result "$s" waiting && assert_eq cancelled "$(field "$s" waiting .status)" "status"
	out=$(timeout 30 "$KART" -s "$s" cancel blocker 2>&1); rc=$?
	assert_eq 0 "$rc" "cancel of the running blocker ($out)"
	put_task "$s" after "#!/bin/sh
echo after"
	wait_until 20 has_result "$s" after || fail "the worker did not go on after the cancels"
	has_result "$s" after && assert_eq ok "$(field "$s" after .status)" "status of the next task"
	assert_eq "" "$(cat "$s/done/waiting.stdout" 2>/dev/null)" "stdout of the cancelled queued task"
	assert_eq 3 "$(n_results "$s")" "results"
	stop_worker "$w"
	assert_eq 0 "$RC" "worker exit status"
	assert_eq "" "$(ls -A "$s/cur")" "cur/ after everything stopped"
}

# A cancel request is for one run: a later task of the same name that
# lands in new/ (a plain cp) runs normally.
test_cancel_then_same_name() {
	local s w rc
	s=$(mkspool)
	start_worker "$s" --id wn
	w=$WPID
	put_task "$s" dup "#!/bin/sh
sleep 30"
	wait_until 20 is_running "$s" dup || { fail "dup never ran"; stop_worker "$w"; return; }
	timeout 30 "$KART" -s "$s" cancel dup >/dev/null 2>&1; rc=$?
	assert_eq 0 "$rc" "cancel of the first dup"
	wait_until 10 has_result "$s" dup || fail "no result for the first dup"
	put_task "$s" dup "#!/bin/sh
echo second"
	wait_until 20 has_result "$s" dup.2 || fail "no result dup.2 for the second dup"
	if has_result "$s" dup.2; then
		assert_eq ok "$(field "$s" dup.2 .status)" "status of the second task named dup"
		assert_eq dup "$(field "$s" dup.2 .name)" "name of the second"
		assert_eq second "$("$KART" -s "$s" cat dup.2)" "stdout of the second"
	fi
	assert_eq cancelled "$(field "$s" dup .status)" "the first dup's result is untouched"
	stop_worker "$w"
}

test_cancel_finished() {
	local s out rc
	s=$(mkspool)
	"$KART" -s "$s" submit --name quick -- true >/dev/null
	drain "$s"
	assert_eq ok "$(field "$s" quick .status)" "status before the cancel"
	out=$("$KART" -s "$s" cancel quick 2>&1); rc=$?
	assert_eq 1 "$rc" "cancel of a finished task: exit status"
	assert_match "already finished" "$out" "cancel of a finished task: message"
	assert_eq ok "$(field "$s" quick .status)" "status after the refused cancel"
}

test_cancel_unknown() {
	local s rc
	s=$(mkspool)
	"$KART" -s "$s" cancel nosuch >/dev/null 2>&1; rc=$?
	assert_eq 1 "$rc" "cancel of an unknown id: exit status"
	assert_eq 0 "$(n_results "$s")" "results after cancelling an unknown id"
}

# ---- drain -------------------------------------------------------------------

test_drain_five() {
	local s i rc
	s=$(mkspool)
	for i in 1 2 3 4 5; do
		"$KART" -s "$s" submit --name "d$i" -- echo "$i" >/dev/null
	done
	timeout 60 "$KART" -s "$s" worker --drain >>"$s.worker.log" 2>&1; rc=$?
	assert_eq 0 "$rc" "worker --drain exit status"
	assert_eq 5 "$(n_results "$s")" "results after --drain"
	for i in 1 2 3 4 5; do
		has_result "$s" "d$i" && assert_eq ok "$(field "$s" "d$i" .status)" "d$i status"
	done
	assert_eq "" "$(queued_files "$s")" "new/ after --drain"
	assert_eq "" "$(ls -A "$s/cur")" "cur/ after --drain"
}

test_drain_empty_spool_exits() {
	local s rc t0
	s=$(mkspool)
	t0=$SECONDS
	timeout 20 "$KART" -s "$s" worker --drain >>"$s.worker.log" 2>&1; rc=$?
	assert_eq 0 "$rc" "worker --drain on an empty spool"
	[ $((SECONDS - t0)) -lt 10 ] || fail "--drain on an empty spool took $((SECONDS - t0))s"
}

# ---- kill -9 of the worker ----------------------------------------------------

# crash_run SPOOL NAME BODY ID: run NAME under worker ID, kill -9 it once
# the task runs. Returns 1 if it never ran.
crash_run() {
	local s=$1 n=$2 body=$3 wid=$4
	put_task "$s" "$n" "$body"
	start_worker "$s" --id "$wid"
	local w=$WPID
	if ! wait_until 20 is_running "$s" "$n"; then
		fail "$n never reported running under $wid"
		kill -9 "$w"
		return 1
	fi
	sleep 0.3
	{
		kill -9 "$w"
		wait_gone 10 "$w"
	} 2>/dev/null # no "Killed" job notice
	assert_eq 137 "$RC" "worker $wid killed with -9"
	has_result "$s" "$n" && fail "$n has a result although its worker was killed mid-run"
	return 0
}

# crash_recover NAME DIRECTIVES RECOVERER STATUS ATTEMPT: on a fresh
# spool (set in CR_SPOOL), NAME (DIRECTIVES, if any, in its header) is run
# by w1, killed -9 while it runs; its claim stays in cur/w1/; then a
# --drain worker with the id RECOVERER. The first attempt never ends by
# itself (no time for a run to finish before the kill), a later one
# prints made-it at once. Then NAME has exactly one result, of STATUS and
# ATTEMPT, and no task file is left in new/ or cur/. Returns 1 without a
# result.
crash_recover() {
	local s n=$1
	s=$(mkspool)
	CR_SPOOL=$s
	crash_run "$s" "$n" "#!/bin/sh${2:+
$2}
if [ \"\$KART_ATTEMPT\" = 1 ]; then sleep 30; fi
echo made-it" w1 || return 1
	assert_file "$s/cur/w1/$n"
	drain "$s" --id "$3"
	has_result "$s" "$n" || { fail "no result for $n after recovery by $3"; return 1; }
	assert_eq "$4" "$(field "$s" "$n" .status)" "status after recovery by $3"
	assert_eq "$5" "$(field "$s" "$n" .attempt)" "attempt after recovery by $3"
	assert_eq 1 "$(n_results "$s")" "results for $n (exactly one)"
	assert_eq "" "$(claimed_files "$s")" "task files left in cur/"
	assert_eq "" "$(queued_files "$s")" "task files left in new/"
}

test_kill9_recovered_by_peer() {
	crash_recover crashy "" w2 ok 2 || return
	local s=$CR_SPOOL
	assert_eq w2 "$(field "$s" crashy .worker)" "worker of the second run"
	assert_eq made-it "$("$KART" -s "$s" cat crashy)" "stdout of the second run"
	[ -d "$s/cur/w1" ] && fail "the dead worker's cur/w1 was not removed"
	return 0
}

# A worker killed at its exit, between unlinking its .lock and removing its
# directory, leaves cur/W empty and lock-less: a peer removes it. One that
# still holds something is left alone (rmdir refuses it).
test_lockless_dead_dir_removed() {
	local s; s=$(mkspool)
	mkdir "$s/cur/gone" "$s/cur/full"
	: >"$s/cur/full/keepme"
	drain "$s" --id w2
	[ -d "$s/cur/gone" ] && fail "an empty lock-less cur/gone was left"
	assert_file "$s/cur/full/keepme"
}

# A dead worker's directory that holds no claim, only scratch left by a
# kill between a finish or re-queue and the removal of its scratch: the
# peer that recovers it removes it all. A claim is never taken for scratch.
test_dead_dir_with_stale_scratch_removed() {
	local s; s=$(mkspool)
	mkdir -p "$s/cur/dead/.gone.work/sub" "$s/cur/dead/.gone.out" "$s/cur/dead/.spare.7"
	: >"$s/cur/dead/.lock"
	echo partial >"$s/cur/dead/.gone.stdout"
	: >"$s/cur/dead/.other.cancel"
	mkdir -p "$s/cur/held/.x.work"
	: >"$s/cur/held/.lock"
	printf '#!/bin/sh
echo recovered
' >"$s/cur/held/x"
	drain "$s" --id w2
	[ -e "$s/cur/dead" ] && fail "the dead worker's directory was left: $(ls -A "$s/cur/dead")"
	assert_eq ok "$(field "$s" x .status)" "the other dead worker's claim was re-queued and ran"
	assert_eq recovered "$(cat "$s/done/x.stdout")" "its output"
	[ -e "$s/cur/held" ] && fail "cur/held was left after its claim was recovered: $(ls -A "$s/cur/held")"
	true
}

# A finisher that died inside its redirty of done/ID.task (a publish retry
# after a failed fsync, or recovery making a finish durable) left a third
# link, done/.ID.task.redo. Recovery drops it and completes the finish:
# one result, the claim gone, no second run.
test_recovery_after_redirty_crash() {
	local s; s=$(mkspool)
	mkdir "$s/cur/dead"
	: >"$s/cur/dead/.lock"
	printf '#!/bin/sh\necho should-not-run-again\n' >"$s/cur/dead/fin"
	python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.kart", b"attempt=1\nsubmitted=0\nid=fin\n")' \
		"$s/cur/dead/fin" || { fail "cannot set user.kart"; return; }
	ln "$s/cur/dead/fin" "$s/done/fin.task"
	ln "$s/cur/dead/fin" "$s/done/.fin.task.redo"
	echo done-before >"$s/done/fin.stdout"
	printf '{"id":"fin","name":"fin","status":"ok","attempt":1,"stdout":{"path":"done/fin.stdout","bytes":12,"truncated":false}}\n' \
		>"$s/done/fin.json"
	drain "$s" --id w2
	assert_eq 1 "$(n_results "$s")" "results for fin (exactly one)"
	assert_eq ok "$(field "$s" fin .status)" "status kept"
	assert_no_file "$s/done/.fin.task.redo"
	assert_no_file "$s/cur/dead/fin"
	assert_eq done-before "$(cat "$s/done/fin.stdout")" "the output of the one run"
	assert_eq 1 "$(stat -c %h "$s/done/fin.task")" "links of done/fin.task"
}

# Without a retries= directive a task is re-queued twice: the third
# worker killed under it makes it `lost`, with attempt 3.
test_kill9_default_retries_then_lost() {
	local s wid w
	s=$(mkspool)
	put_task "$s" doomed "#!/bin/sh
sleep 60"
	for wid in d1 d2 d3; do
		start_worker "$s" --id $wid
		w=$WPID
		if ! wait_until 30 is_running "$s" doomed; then
			fail "doomed never reported running under $wid"
			kill -9 "$w"
			return
		fi
		sleep 0.3
		{
			kill -9 "$w"
			wait_gone 10 "$w"
		} 2>/dev/null
		has_result "$s" doomed && { fail "doomed has a result after $wid was killed"; return; }
	done
	drain "$s" --id d4
	has_result "$s" doomed || { fail "no result for doomed after the fourth worker"; return; }
	assert_eq lost "$(field "$s" doomed .status)" "status after three interrupted runs"
	assert_eq 3 "$(field "$s" doomed .attempt)" "attempt of the lost task"
	assert_match "retries=2" "$(field "$s" doomed .error)" "error names the default retries"
	assert_eq 1 "$(n_results "$s")" "results for doomed (exactly one)"
	assert_eq "" "$(claimed_files "$s")" "task files left in cur/"
	assert_eq "" "$(queued_files "$s")" "task files left in new/"
}

test_kill9_retries0_lost() {
	crash_recover fragile "#kart: retries=0" w2 lost 1 || return
	assert_ne null "$(field "$CR_SPOOL" fragile .error)" "error of a lost task"
}

# Restarted under the id of the worker that died: its own claim.
test_kill9_restart_same_id() {
	crash_recover phoenix "" w1 ok 2 || return
	assert_eq made-it "$("$KART" -s "$CR_SPOOL" cat phoenix)" "stdout after restart"
}

# A live worker notices a peer that dies (not only a worker that starts).
test_kill9_noticed_by_running_peer() {
	local s w2
	s=$(mkspool)
	start_worker "$s" --id watcher --slots 1 --batch-slots 1
	w2=$WPID
	# Keep the watcher's only fast slot busy so it cannot take crashy first.
	put_task "$s" hog "#!/bin/sh
sleep 2"
	wait_until 20 is_running "$s" hog || fail "hog never ran"
	crash_run "$s" crashy2 '#!/bin/sh
if [ "$KART_ATTEMPT" = 1 ]; then sleep 30; fi
echo made-it' w1 || { stop_worker "$w2"; return; }
	wait_until 30 has_result "$s" crashy2 || fail "the running peer did not recover crashy2 within 30s"
	if has_result "$s" crashy2; then
		assert_eq ok "$(field "$s" crashy2 .status)" "status"
		assert_eq 2 "$(field "$s" crashy2 .attempt)" "attempt"
	fi
	stop_worker "$w2"
}

# ---- SIGTERM -------------------------------------------------------------------

test_sigterm_lets_task_finish() {
	local s w t0
	s=$(mkspool)
	put_task "$s" patient "#!/bin/sh
sleep 2
echo finished"
	start_worker "$s" --id wt
	w=$WPID
	wait_until 20 is_running "$s" patient || { fail "never ran"; kill -9 "$w"; return; }
	t0=$(now_ms)
	kill -TERM "$w"
	wait_gone 30 "$w" || { fail "worker still alive 30s after SIGTERM"; kill -9 "$w"; return; }
	assert_eq 0 "$RC" "worker exit status after SIGTERM"
	[ $(($(now_ms) - t0)) -ge 800 ] || fail "worker exited before the task could finish"
	has_result "$s" patient || { fail "no result for the task running at SIGTERM"; return; }
	assert_eq ok "$(field "$s" patient .status)" "status"
	assert_eq 1 "$(field "$s" patient .attempt)" "attempt"
	assert_eq finished "$("$KART" -s "$s" cat patient)" "stdout"
	assert_eq "" "$(claimed_files "$s")" "task files left in cur/"
}

test_sigterm_grace_requeues() {
	local s w t0 el
	s=$(mkspool)
	put_task "$s" stubborn '#!/bin/sh
if [ "$KART_ATTEMPT" = 1 ]; then sleep 30; fi
echo "attempt $KART_ATTEMPT"'
	export KART_TERM_GRACE=1
	start_worker "$s" --id wg
	unset KART_TERM_GRACE
	w=$WPID
	wait_until 20 is_running "$s" stubborn || { fail "never ran"; kill -9 "$w"; return; }
	sleep 0.3
	t0=$(now_ms)
	kill -TERM "$w"
	wait_gone 20 "$w" || { fail "worker alive 20s after SIGTERM with grace 1s"; kill -9 "$w"; return; }
	el=$(($(now_ms) - t0))
	assert_eq 0 "$RC" "worker exit status after SIGTERM"
	[ "$el" -lt 6000 ] || fail "worker took ${el} ms to stop with KART_TERM_GRACE=1"
	[ "$el" -ge 700 ] || fail "worker stopped after ${el} ms: no grace given"
	has_result "$s" stubborn && fail "a task interrupted by shutdown got a result ($(field "$s" stubborn .status))"
	assert_file "$s/new/stubborn"
	assert_eq "" "$(claimed_files "$s")" "task files left in cur/"
	drain "$s" --id wg2
	has_result "$s" stubborn || { fail "no result after the re-queue"; return; }
	assert_eq ok "$(field "$s" stubborn .status)" "status of the second run"
	assert_eq 2 "$(field "$s" stubborn .attempt)" "attempt of the second run"
	assert_eq "attempt 2" "$("$KART" -s "$s" cat stubborn)" "the second run sees KART_ATTEMPT=2"
	assert_eq 1 "$(n_results "$s")" "results (exactly one)"
}

# ---- racing workers ------------------------------------------------------------

# A worker started without --slots or --batch-slots runs three fast
# tasks and one batch task at a time; the rest wait in new/.
test_default_slots() {
	local s i w running
	s=$(mkspool)
	for i in 1 2 3 4 5; do
		put_task "$s" f$i "#!/bin/sh
sleep 60"
	done
	for i in 1 2; do
		put_task "$s" b$i "#!/bin/sh
#kart: lane=batch
sleep 60"
	done
	start_worker "$s" --id wdef
	w=$WPID
	wait_until 30 running_at_least "$s" 4 || fail "fewer than 4 tasks ever ran at once"
	sleep 1 # a fifth would have started by now
	running=$("$KART" -s "$s" status --json | jq -r '[.[] | select(.state == "running") | .id] | sort | join(" ")')
	assert_eq 4 "$(wc -w <<<"$running")" "tasks running at once ($running)"
	assert_eq 3 "$(grep -o 'f[0-9]' <<<"$running" | wc -l)" "fast tasks running at once ($running)"
	assert_eq 1 "$(grep -o 'b[0-9]' <<<"$running" | wc -l)" "batch tasks running at once ($running)"
	assert_eq 3 "$(queued_files "$s" | wc -l)" "tasks still queued"
	"$KART" -s "$s" cancel f1 f2 f3 f4 f5 b1 b2 >/dev/null 2>&1
	stop_worker "$w"
}

test_two_workers_race() {
	local s i n wa wb wc ids want
	s=$(mkspool)
	export KART_BACKEND=none
	start_worker "$s" --slots 3
	wa=$WPID
	start_worker "$s" --slots 3
	wb=$WPID
	unset KART_BACKEND
	start_worker "$s" --slots 2
	wc=$WPID
	sleep 0.3
	want=$(mktemp "$T_ROOT/want.XXXXXX")
	for i in $(seq -w 1 300); do
		n=r$i
		printf '#!/bin/sh\necho %s\n' "$n" >"$s/tmp/.$n"
		mv "$s/tmp/.$n" "$s/new/$n"
		echo "$n" >>"$want"
	done
	local end=$((SECONDS + 90))
	while [ "$(n_results "$s")" -lt 300 ] && [ $SECONDS -lt $end ]; do sleep 0.2; done
	sleep 0.5 # anything extra (a duplicate) would land now
	assert_eq 300 "$(n_results "$s")" "results"
	# Every result a JSON object: one python3 for all 300, not a jq each.
	local bad
	bad=$(python3 - "$s"/done/*.json <<'PY'
import json, sys
for f in sys.argv[1:]:
    try:
        ok = isinstance(json.load(open(f)), dict)
    except ValueError:
        ok = False
    if not ok:
        print(f)
PY
)
	[ -z "$bad" ] || fail "not valid JSON: $(head -5 <<<"$bad" | tr '\n' ' ')"
	ids=$(jq -r .id "$s"/done/*.json 2>/dev/null | sort)
	assert_eq "$(sort "$want")" "$ids" "the set of ids equals the set submitted"
	assert_eq "" "$(jq -r 'select(.status != "ok") | "\(.id) \(.status)"' "$s"/done/*.json)" "non-ok results"
	assert_eq "" "$(jq -r 'select(.attempt != 1) | "\(.id) \(.attempt)"' "$s"/done/*.json)" "attempt != 1"
	# (mapfile, a builtin: no process per task)
	local wrong=0 id got
	while read -r id; do
		got=()
		[ -e "$s/done/$id.stdout" ] && mapfile -t got <"$s/done/$id.stdout"
		[ "${#got[@]}" = 1 ] && [ "${got[0]}" = "$id" ] || {
			wrong=$((wrong + 1))
			[ $wrong -le 5 ] && fail "$id: stdout is '${got[*]}'"
		}
	done <"$want"
	assert_eq 0 "$wrong" "tasks whose stdout is not their own name"
	assert_eq "" "$(queued_files "$s")" "task files left in new/"
	assert_eq "" "$(claimed_files "$s")" "task files left in cur/*/"
	for w in "$wa" "$wb" "$wc"; do
		stop_worker "$w"
		[ "$RC" = 0 ] || fail "worker $w exited $RC after SIGTERM; log: $(grep -v ': re-queued\|^$' "$s.worker.log" | tail -5)"
	done
}

# Workers started at the same moment on one spool must all come up: one
# worker's look at a peer's claim directory (is it dead?) must not break a
# peer that is still creating and locking it.
all_up_or_dead() { # LOG PID...
	local log=$1 p
	shift
	for p; do
		kill -0 "$p" 2>/dev/null || continue
		[ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" = Z ] && continue
		grep -q "worker [^ ]*\.$p on " "$log" || return 1
	done
}

test_workers_start_together() {
	local s round j w dead=0 bad=0 pids
	s=$(mkspool)
	export KART_BACKEND=none
	for round in $(seq 1 20); do
		pids=()
		for j in $(seq 1 10); do
			start_worker "$s"
			pids+=("$WPID")
		done
		# Every one either announced itself (its signals are set up) or died.
		wait_until 20 all_up_or_dead "$s.worker.log" "${pids[@]}" ||
			fail "round $round: workers neither up nor dead after 20s"
		for w in "${pids[@]}"; do
			kill -0 "$w" 2>/dev/null || dead=$((dead + 1))
		done
		kill -TERM "${pids[@]}" 2>/dev/null
		for w in "${pids[@]}"; do
			wait_gone 20 "$w" || kill -9 "$w" 2>/dev/null
			[ "$RC" = 0 ] || bad=$((bad + 1))
		done
	done
	unset KART_BACKEND
	assert_eq 0 "$dead" "workers (of 200, started 10 at a time) that died at start"
	assert_eq 0 "$bad" "workers (of 200) that did not exit 0 on SIGTERM"
	[ "$dead$bad" = 00 ] ||
		fail "their log: $(grep -v 'stopped$\|slots fast\|SIGTERM' "$s.worker.log" | sed 's/[0-9][0-9]*/N/g' | sort | uniq -c)"
	assert_eq "" "$(ls -A "$s/cur")" "cur/ after every worker stopped"
}

# The spawn runs off the event loop (worker_spawn.c, the spawn thread): while a
# task's child is stuck before its exec (strace holds its execve for 4 s),
# the loop still claims the next task, and a cancel of the stuck one is
# kept until it runs, then applied. With the spawn in the loop, nothing
# is claimed until that exec is done.
# hold_spawn SPOOL NAME SCRIPT: with the worker $WPID running, strace
# holds every execve of its children for 4 s; submit NAME and wait until
# its child is in the held execve. Sets SP, strace's pid.
hold_spawn() {
	local s=$1
	wait_until 10 sh -c "ls $s/cur/*/.lock" >/dev/null 2>&1 || { fail "no worker"; return 1; }
	strace -f -qq -o /dev/null -p "$WPID" -e trace=execve -e inject=execve:delay_enter=4000000 &
	SP=$!
	T_PIDS+=("$SP")
	wait_until 10 traced_by "$WPID" || { fail "strace never attached"; kill "$SP"; return 1; }
	printf '%s\n' "$3" >"$s/tmp/$2" && mv "$s/tmp/$2" "$s/new/$2"
	wait_until 5 sh -c "ls $s/cur/*/$2" >/dev/null 2>&1 ||
		{ fail "$2 was not claimed"; kill "$SP"; return 1; }
	sleep 0.3 # its child is in the held execve now
}
test_spawn_off_the_loop() {
	command -v strace >/dev/null || { skip "no strace to hold an exec"; return; }
	local s sp; s=$(mkspool)
	KART_BACKEND=none start_worker "$s"
	# A cancel that waited for the spawn is sent when the exec is done:
	# a first line could beat it, a line after a second must not.
	hold_spawn "$s" a "$(printf '#!/bin/sh\nsleep 1\necho a')" || return
	sp=$SP
	local t0=$SECONDS cp
	# kart cancel waits for the task's end: in the background.
	"$KART" -s "$s" cancel a >"$T_ROOT/cancel.out" 2>&1 &
	cp=$!
	printf '#!/bin/sh\necho b\n' >"$s/tmp/b" && mv "$s/tmp/b" "$s/new/b"
	wait_until 2 sh -c "ls $s/cur/*/b" >/dev/null 2>&1 ||
		fail "b was not claimed while a's exec was held"
	assert_eq "" "$(ls "$s/done")" "no result while a's exec is held (test premise)"
	wait_gone 30 "$cp"
	assert_eq 0 "$RC" "kart cancel a ($(cat "$T_ROOT/cancel.out"))"
	wait_until 30 test -e "$s/done/b.json" || { fail "no result for b"; kill "$sp"; return; }
	kill "$sp"; wait "$sp" 2>/dev/null
	assert_eq cancelled "$(field "$s" a .status)" "a, cancelled while it spawned"
	assert_eq "" "$(cat "$s/done/a.stdout")" "a never got to run its script"
	assert_eq ok "$(field "$s" b .status)" "b"
	[ $((SECONDS - t0)) -ge 2 ] || fail "the exec was not held (test premise)"
	stop_worker "$WPID"
}

# A shutdown whose grace runs out while a task is still spawning (strace
# holds its execve for 4 s, the grace is 1 s): the re-queue is kept for
# when it runs, then applied. The task goes back to new/ unrun, with no
# result, and the worker exits cleanly.
test_shutdown_while_spawning() {
	command -v strace >/dev/null || { skip "no strace to hold an exec"; return; }
	local s sp; s=$(mkspool)
	export KART_TERM_GRACE=1
	KART_BACKEND=none start_worker "$s" --id ws
	unset KART_TERM_GRACE
	hold_spawn "$s" h "$(printf '#!/bin/sh\necho "attempt $KART_ATTEMPT"')" || return
	sp=$SP
	kill -TERM "$WPID"
	wait_gone 30 "$WPID" || { fail "worker alive 30 s after SIGTERM"; kill -9 "$WPID"; kill "$sp"; return; }
	assert_eq 0 "$RC" "worker exit status"
	kill "$sp" 2>/dev/null; wait "$sp" 2>/dev/null
	has_result "$s" h && fail "a task interrupted while spawning got a result ($(field "$s" h .status))"
	assert_file "$s/new/h"
	assert_eq "" "$(claimed_files "$s")" "task files left in cur/"
	drain "$s" --id ws2
	assert_eq ok "$(field "$s" h .status)" "the re-queued task, run again"
	assert_eq "attempt 2" "$("$KART" -s "$s" cat h)" "its second attempt"
}

run_tests
