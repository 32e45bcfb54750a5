#!/bin/bash
# Black-box: tasks that wait for their time (not_before=, kart submit --at
# and --in), automatic retry (retry_on=, retries=, retry_delay=), and a
# worker killed with -9 while they wait: nothing is lost, nothing runs early.
. "$(dirname "$0")/../lib.sh"

ms_of() { date -d "$1" +%s%3N; }
now_ms() { date +%s%3N; }
# cpu_ticks PID: user + system time of the process (all its threads), in ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
has_result() { [ -e "$1/done/$2.json" ]; }
n_results() { find "$1/done" -maxdepth 1 -name '[!.]*.json' | wc -l; }
# retry_pending SPOOL NAME: re-queued to wait for a retry (user.kart).
retry_pending() { getfattr -n user.kart --only-values "$1/new/$2" 2>/dev/null | grep -q not_before=; }

# --in 5s: not started before, started soon after, the idle worker
# spends no CPU meanwhile (a timerfd, no polling), and a worker killed
# -9 while it waits loses nothing: the time is in the task file, and the
# next worker keeps it.
test_in_waits_idle_kill9() {
	local s t0 ta tn nb st t1 t2 t3
	s=$(mkspool)
	t0=$(now_ms)
	"$KART" -s "$s" submit --no-cwd --in 5s --name later -- echo once >/dev/null 2>&1 || { fail "submit --in"; return; }
	ta=$(now_ms)
	nb=$(ms_of "$(sed -n 's/^#kart: not_before=\([^ ]*\).*/\1/p' "$s/new/later")")
	# 5 s after the moment kart submit read the clock: between its start
	# and its return (on a loaded machine these are far apart).
	[ $((nb - t0)) -ge 4900 ] && [ $((nb - ta)) -le 5100 ] ||
		fail "not_before is $((nb - t0)) ms after the submit began, $((nb - ta)) after it returned, not 5000"
	assert_match "^later	scheduled	20[0-9-]+T" "$("$KART" -s "$s" status later)" "kart status of a waiting task"
	start_worker "$s" --id idle
	local w=$WPID
	sleep 0.3
	t1=$(cpu_ticks "$w")
	sleep 1
	t2=$(cpu_ticks "$w")
	t3=$(now_ms)
	# One tick is 10 ms: a loop that polled would take more in 1 s. (On
	# a machine so loaded that the time came within the window, the run
	# counts too: then only the start time below is checked.)
	if [ "$t3" -lt "$nb" ]; then
		[ $((t2 - t1)) -le 1 ] || fail "the worker took $((t2 - t1)) ticks of CPU while the task waited"
	fi
	kill -9 "$w"
	wait_gone 5 "$w"
	if [ "$(now_ms)" -lt "$nb" ]; then
		has_result "$s" later && fail "the task finished before its time"
		assert_file "$s/new/later"
	fi
	tn=$(now_ms)
	start_worker "$s" --id next
	wait_until 10 has_result "$s" later || { fail "no result 10 s after its time"; stop_worker "$WPID"; return; }
	stop_worker "$WPID"
	assert_eq ok "$(field "$s" later .status)" "status"
	st=$(ms_of "$(field "$s" later .started_at)")
	[ "$st" -ge "$nb" ] || fail "started $((nb - st)) ms before its not_before"
	# From its time, or from the next worker's start where that came
	# later (a loaded machine): a worker that waited for nothing.
	[ "$tn" -gt "$nb" ] && nb=$tn
	[ $((st - nb)) -le $(($(slow 2) * 1000)) ] || fail "started $((st - nb)) ms after its not_before (or the next worker's start)"
	assert_eq 1 "$(n_results "$s")" "results"
	assert_eq once "$("$KART" -s "$s" cat later 2>/dev/null)" "its output"
}

# --at HH:MM: the next such time (a minute ago is tomorrow's), shown by
# kart status; bad times are usage errors. (A time past runs at once:
# test_retry_exit3_backoff_kill9.)
test_at_hhmm() {
	local s out hhmm nb ahead
	s=$(mkspool)
	hhmm=$(date -d '-1 minute' +%H:%M)
	"$KART" -s "$s" submit --no-cwd --at "$hhmm" --name tomorrow -- echo early >/dev/null 2>&1 || { fail "submit --at HH:MM"; return; }
	out=$("$KART" -s "$s" status --json tomorrow | jq -r '.[0] | .state + " " + .not_before')
	nb=$(ms_of "${out#* }")
	assert_eq scheduled "${out%% *}" "kart status --json of --at $hhmm"
	# About 23h59m ahead (a clock change aside).
	ahead=$(( (nb - $(now_ms)) / 60000 ))
	[ "$ahead" -ge 1370 ] && [ "$ahead" -le 1500 ] || fail "--at $hhmm is $ahead minutes ahead"
	# unique=: while it is scheduled, another of its key is not queued.
	"$KART" -s "$s" submit --no-cwd --at "$hhmm" --unique=nightly --name n1 -- true >/dev/null 2>&1 || fail "submit n1"
	run_cmd -s "$s" submit --no-cwd --unique=nightly --name n2 -- true
	assert_eq "0 n1" "$RC $OUT" "a second --unique=nightly: exit status and the id printed"
	assert_match "unique=nightly: n1 is already scheduled; not queued again" "$ERR" "its note"
	assert_no_file "$s/new/n2"
	run_cmd -s "$s" submit --no-cwd --at 24:00 -- true
	assert_eq 2 "$RC" "--at 24:00: exit status ($ERR)"
	run_cmd -s "$s" submit --no-cwd --in soon -- true
	assert_eq 2 "$RC" "--in soon: exit status ($ERR)"
}

# retry_on=exit=3 retries=2 retry_delay=1s: three runs, 1 s then 2 s
# apart, every attempt in the result's `attempts`, the earlier outputs
# kept; the final result is the third's. The worker is killed -9 during
# the first delay: the schedule is in the spool (the re-queued file's
# not_before), and the next worker keeps it.
test_retry_exit3_backoff_kill9() {
	local s f1 s2 f2 s3 i
	s=$(mkspool)
	printf '#!/bin/sh\n#kart: retry_on=exit=3 retries=2 retry_delay=1s\necho "run $KART_ATTEMPT"\nexit 3\n' >"$T_ROOT/e3.sh"
	"$KART" -s "$s" submit --no-cwd --name e3 "$T_ROOT/e3.sh" >/dev/null 2>&1 || { fail "submit"; return; }
	start_worker "$s" --id before
	wait_until 10 retry_pending "$s" e3 || { fail "never re-queued for its retry"; kill -9 "$WPID"; return; }
	kill -9 "$WPID"
	wait_gone 5 "$WPID"
	local st0 nb0
	st0=$("$KART" -s "$s" status e3)
	nb0=$(getfattr -n user.kart --only-values "$s/new/e3" 2>/dev/null | sed -n 's/^not_before=//p')
	# (Unless the machine was so slow that the delay had passed.)
	[ "$(now_ms)" -ge "${nb0:-0}" ] || assert_match "^e3	scheduled	" "$st0" "kart status during the delay"
	# Not matched: exit 4 is final at once, and says so in `attempts`.
	"$KART" -s "$s" submit --no-cwd --retry-on exit=3 --retries 2 --name e4 -- sh -c 'exit 4' >/dev/null 2>&1 || { fail "submit e4"; return; }
	# Matched, then ok: a retry that helps.
	"$KART" -s "$s" submit --no-cwd --retry-on failed --name flaky -- sh -c '[ "$KART_ATTEMPT" -ge 2 ]' >/dev/null 2>&1 || { fail "submit flaky"; return; }
	# --at a time past: at once.
	"$KART" -s "$s" submit --no-cwd --at "$(date -u -d '-1 hour' +%Y-%m-%dT%H:%M:%SZ)" --name past -- echo ran >/dev/null 2>&1 || { fail "submit --at past"; return; }
	drain "$s" --id after
	assert_eq ran "$("$KART" -s "$s" cat past 2>/dev/null)" "output of the past --at"
	assert_eq failed "$(field "$s" e3 .status)" "e3 status"
	assert_eq 3 "$(field "$s" e3 .attempt)" "e3 attempt"
	assert_eq "1 2 3" "$(field "$s" e3 '[.attempts[].attempt] | join(" ")')" "e3 attempts"
	assert_eq "3 3 3" "$(field "$s" e3 '[.attempts[].exit_code] | join(" ")')" "e3 exit codes"
	f1=$(ms_of "$(field "$s" e3 '.attempts[0].finished_at')")
	s2=$(ms_of "$(field "$s" e3 '.attempts[1].started_at')")
	f2=$(ms_of "$(field "$s" e3 '.attempts[1].finished_at')")
	s3=$(ms_of "$(field "$s" e3 '.attempts[2].started_at')")
	# The first delay spans the kill and the restart: at least 1 s.
	[ $((s2 - f1)) -ge 1000 ] || fail "first delay $((s2 - f1)) ms, under 1 s"
	[ $((s3 - f2)) -ge 2000 ] && [ $((s3 - f2)) -lt 3900 ] || fail "second delay $((s3 - f2)) ms, not ~2 s (doubled)"
	assert_eq "$(field "$s" e3 .started_at)" "$(field "$s" e3 '.attempts[2].started_at')" "the final result is the last attempt's"
	for i in 1 2; do
		assert_eq "run $i" "$(cat "$s/$(field "$s" e3 ".attempts[$((i - 1))].stdout.path")")" "attempt $i's stdout, kept"
	done
	assert_eq "run 3" "$("$KART" -s "$s" cat e3)" "the final stdout"
	assert_eq "failed 1 1" "$(field "$s" e4 '"\(.status) \(.attempt) \(.attempts | length)"')" "exit 4, not in retry_on"
	assert_eq "ok 2" "$(field "$s" flaky '"\(.status) \(.attempt)"')" "a task that succeeds on its retry"
	assert_eq 4 "$(n_results "$s")" "results (no result per attempt)"
}

# unique=: 50 racing kart submit --unique, then two workers: one task
# runs; every id printed is that one or a duplicate finished `cancelled`.
# (The workers start after the submits: a submit that came after the one
# run had ended would rightly queue another.)
test_unique_racing_submits() {
	local s i id n_ok=0 n_other=0
	s=$(mkspool)
	for i in $(seq 50); do
		"$KART" -s "$s" submit --no-cwd --unique --name cron -- echo ran \
			>"$T_ROOT/u.$i.id" 2>"$T_ROOT/u.$i.err" &
	done
	wait
	assert_eq 50 "$(cat "$T_ROOT"/u.*.id | wc -l)" "ids printed"
	start_worker "$s" --id u1
	local w1=$WPID
	start_worker "$s" --id u2
	local w2=$WPID
	wait_until 20 sh -c "[ -z \"\$(ls '$s/new')\" ] && [ -z \"\$(find '$s/cur' -mindepth 2 ! -name '.*')\" ]" ||
		fail "tasks left in new/ or cur/"
	stop_worker "$w1"
	stop_worker "$w2"
	for id in $(sort -u "$T_ROOT"/u.*.id); do
		case "$(field "$s" "$id" .status)" in
		ok) n_ok=$((n_ok + 1)) ;;
		cancelled) assert_match "^unique=cron: " "$(field "$s" "$id" .error)" "$id's error"
			n_other=$((n_other + 1)) ;;
		*) fail "$id: $(field "$s" "$id" .status)" ;;
		esac
	done
	assert_eq 1 "$n_ok" "tasks run"
	assert_eq 1 "$(grep -l '^ran$' "$s"/done/*.stdout 2>/dev/null | wc -l)" "outputs 'ran'"
	assert_eq "$(n_results "$s")" "$((n_ok + n_other))" "every result is one of the ids printed"
	grep -q "already queued; not queued again" "$T_ROOT"/u.*.err || fail "no submit said it found the queued one"
}

# The worker's check is the one that counts: two copies with one key
# placed straight into new/ (no kart submit to look first): the first
# runs, the second is cancelled.
test_unique_worker_check() {
	local s
	s=$(mkspool)
	printf '#!/bin/sh\n#kart: unique=nightly\necho $0\n' >"$T_ROOT/n.sh"
	chmod 600 "$T_ROOT/n.sh"
	cp "$T_ROOT/n.sh" "$s/tmp/a" && mv "$s/tmp/a" "$s/new/first"
	sleep 0.02
	cp "$T_ROOT/n.sh" "$s/tmp/b" && mv "$s/tmp/b" "$s/new/second"
	drain "$s"
	assert_eq ok "$(field "$s" first .status)" "the first"
	assert_eq cancelled "$(field "$s" second .status)" "the second, a duplicate"
	assert_match "first" "$(field "$s" second .error)" "the duplicate's error names the first"
}

# A name the worker holds as scheduled is looked at again when its file
# changes (spool-layout WORKER §2: an event on a name is a doorbell): an edit that
# moves not_before= into the past, a hold, an edit and a release, and a
# new file moved in under the name of one cancelled while it waited, all
# run within seconds, not at the old time (an hour away).
test_scheduled_name_looked_at_again() {
	local s past
	s=$(mkspool)
	past=$(date -u -d '-1 minute' +%Y-%m-%dT%H:%M:%SZ)
	for n in edited held cancelled; do
		"$KART" -s "$s" submit --no-cwd --in 1h --name "$n" -- echo "$n ran" >/dev/null 2>&1 || fail "submit $n"
	done
	start_worker "$s" --id sched
	local w=$WPID
	sleep 1 # the worker's start-up scan has seen all three scheduled
	run_cmd -s "$s" edit --set "not_before=$past" edited
	assert_eq 0 "$RC" "edit --set not_before= of a scheduled task ($ERR)"
	wait_until 10 has_result "$s" edited || fail "edited to a time past, still not run 10 s later"
	run_cmd -s "$s" hold held
	assert_eq 0 "$RC" "hold ($ERR)"
	run_cmd -s "$s" edit --set "not_before=$past" held
	assert_eq 0 "$RC" "edit of the held task ($ERR)"
	run_cmd -s "$s" release held
	assert_eq 0 "$RC" "release ($ERR)"
	wait_until 10 has_result "$s" held || fail "held, edited and released, still not run 10 s later"
	run_cmd -s "$s" cancel cancelled
	assert_eq cancelled "$(field "$s" cancelled .status 2>/dev/null)" "the cancelled one ($OUT $ERR)"
	printf '#!/bin/sh\necho fresh\n' >"$s/tmp/fresh"
	chmod 600 "$s/tmp/fresh"
	mv "$s/tmp/fresh" "$s/new/cancelled"
	wait_until 10 has_result "$s" cancelled.2 || fail "a file moved in under a scheduled name, still not run 10 s later"
	stop_worker "$w"
	assert_eq "ok ok ok" "$(field "$s" edited .status) $(field "$s" held .status) $(field "$s" cancelled.2 .status 2>/dev/null)" "statuses"
	assert_eq "fresh" "$(cat "$s/done/cancelled.2.stdout" 2>/dev/null)" "the new file ran"
}

run_tests
