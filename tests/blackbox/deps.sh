# after=ID[,ID...] (kart submit --after): a task waits for its upstreams'
# results, runs with their kept output bound read-only under
# $KART_INPUTS/ID/ when all ended ok, and is skipped (and its own
# dependants after it) when one did not. Unknown ids, cycles and other
# users' tasks are rejected; a worker killed while tasks wait loses none.
# See spool-layout README §5.
. "$(dirname "$0")/../lib.sh"

U_TAG=${KART_TEST_USER_TAG:-}d20
U_ALICE=${U_TAG}alice U_MALLORY=${U_TAG}mallory G_KART=${U_TAG}kart
U_IN="$U_ALICE $U_MALLORY"

# sub SPOOL ARGS...: kart submit, no cwd; prints the id.
sub() {
	local s=$1; shift
	"$KART" -s "$s" submit --no-cwd "$@" 2>/dev/null
}

# A three-step pipeline passes a file through $KART_INPUTS: each step
# reads its upstream's artifacts and stdout, cannot write them, and sees
# nothing of an upstream it did not name. kart status says waiting, and
# on what, until the upstream has its result.
test_pipeline_passes_data() {
	have_bwrap || { skip "bwrap cannot run here"; return; }
	local s a b c
	s=$(mkspool)
	a=$(sub "$s" --name step1 -- sh -c 'echo raw >"$KART_OUTDIR/data"; echo from-step1')
	b=$(sub "$s" --name step2 --after "$a" -- sh -c '
		in=$KART_INPUTS/step1
		tr a-z A-Z <"$in/out/data" >"$KART_OUTDIR/data"
		echo "stdout1=$(cat "$in/stdout")"
		echo spoiled >"$in/out/data" 2>/dev/null && echo WROTE-INPUT
		echo spoiled >"$in/out/new" 2>/dev/null && echo WROTE-INPUT
		echo spoiled >"$in/stdout" 2>/dev/null && echo WROTE-INPUT
		true')
	c=$(sub "$s" --name step3 --after "$b" -- sh -c '
		cat "$KART_INPUTS/step2/out/data"
		ls "$KART_INPUTS"
		[ -e /run/kart/inputs/step1 ] && echo SEES-STEP1
		ls / | grep -qx spool && echo SEES-SPOOL
		true')
	assert_eq "step1 step2 step3" "$a $b $c" "ids"
	assert_eq "step2	waiting	step1" "$("$KART" -s "$s" status step2)" "status before any run"
	assert_eq '["step2"]' "$("$KART" -s "$s" status --json step3 | jq -c '.[0].waiting_on')" \
		"status --json of step3"
	drain "$s"
	local id
	for id in step1 step2 step3; do
		assert_eq ok "$(field "$s" "$id" .status)" "$id's status ($(field "$s" "$id" .error))"
	done
	assert_eq "stdout1=from-step1" "$(cat "$s/done/step2.stdout")" "step2 read step1's stdout"
	assert_eq "raw" "$(cat "$s/done/step1.out/data")" "step1's artifact untouched"
	assert_eq "RAW
step2" "$(cat "$s/done/step3.stdout")" "step3 read step2's artifact, and saw only step2"
	[ -e "$s/done/step1.out/new" ] && fail "step2 created a file in step1's artifacts"
}

# A failed middle step: everything downstream of it is skipped, two
# levels down, each naming its own upstream and its status; nothing waits.
test_failed_middle_skips_downstream() {
	local s
	s=$(mkspool)
	sub "$s" --name top -- true >/dev/null
	sub "$s" --name mid --after top -- sh -c 'echo ran-mid; exit 3' >/dev/null
	sub "$s" --name low --after mid -- sh -c 'echo ran-low' >/dev/null
	sub "$s" --name lower --after low,top -- sh -c 'echo ran-lower' >/dev/null
	sub "$s" --name side --after top -- true >/dev/null
	drain "$s"
	assert_eq "ok failed skipped skipped ok" \
		"$(for i in top mid low lower side; do field "$s" $i .status; done | tr '\n' ' ' | sed 's/ $//')" \
		"statuses"
	assert_match "upstream mid ended failed" "$(field "$s" low .error)" "low's error"
	assert_match "upstream low ended skipped" "$(field "$s" lower .error)" "lower's error"
	assert_eq "null null" "$(field "$s" low .started_at) $(field "$s" lower .stdout.path)" "never ran"
	run_cmd -s "$s" wait lower
	assert_eq 76 "$RC" "kart wait on a skipped task"
}

# An id that does not exist when the worker first reads the task: the
# task is rejected, naming it (kart submit refuses it first). Two tasks
# copied in naming each other: one is rejected for the cycle, the other
# skipped; a task naming itself is rejected. Nothing waits for ever.
test_unknown_upstream_rejected() {
	local s
	s=$(mkspool)
	run_cmd -s "$s" submit --no-cwd --after nosuch -- true
	assert_eq 1 "$RC" "kart submit --after nosuch"
	assert_match "nosuch: no such task" "$ERR" "its message"
	printf '#!/bin/sh\n#kart: after=nosuch\ntrue\n' >"$s/new/orphan"
	printf '#!/bin/sh\n#kart: after=cyc2\ntrue\n' >"$s/new/cyc1"
	printf '#!/bin/sh\n#kart: after=cyc1\ntrue\n' >"$s/new/cyc2"
	printf '#!/bin/sh\n#kart: after=self\ntrue\n' >"$s/new/self"
	drain "$s"
	assert_eq rejected "$(field "$s" orphan .status)" "orphan"
	assert_match "after=nosuch: no such task" "$(field "$s" orphan .error)" "orphan's error"
	assert_match "names the task itself" "$(field "$s" self .error)" "self's error"
	local st
	st=$(for i in cyc1 cyc2; do field "$s" $i .status; done | sort | tr '\n' ' ')
	assert_eq "rejected skipped " "$st" "the cycle's two tasks"
	assert_match "closes a cycle" "$(jq -r 'select(.status == "rejected") | .error' "$s"/done/cyc?.json)" \
		"the cycle's error"
}

# kill -9 of the worker while tasks wait: nothing of the waiting is on
# disk but the task files, so the next worker reads them again; every
# task runs once, in order.
test_kill9_while_waiting() {
	local s a
	s=$(mkspool)
	sub "$s" --name k1 -- sh -c 'sleep 1; echo one >"$KART_OUTDIR/o"' >/dev/null
	sub "$s" --name k2 --after k1 -- sh -c 'cat "$KART_INPUTS/k1/out/o"' >/dev/null
	sub "$s" --name k3 --after k2 -- sh -c 'cat "$KART_INPUTS/k2/stdout"' >/dev/null
	start_worker "$s" --id d20a
	wait_until 20 is_running "$s" k1 || fail "k1 did not start"
	kill -9 "$WPID"
	wait_gone 10 "$WPID"
	assert_eq "k2	waiting	k1" "$("$KART" -s "$s" status k2)" "k2 after the kill"
	assert_file "$s/new/k3"
	drain "$s" --id d20b
	assert_eq "ok ok ok" "$(for i in k1 k2 k3; do field "$s" $i .status; done | tr '\n' ' ' | sed 's/ $//')" \
		"statuses after the restart"
	assert_eq "one" "$(cat "$s/done/k3.stdout" 2>/dev/null)" "the data went through"
	assert_eq "1 1" "$(field "$s" k2 .attempt) $(field "$s" k3 .attempt)" "the waiting ones ran once"
	assert_eq 0 "$(ls "$s/new" | wc -l)" "new/ is empty"
}

# ---- between users --------------------------------------------------------

# On a shared spool, alice's pipeline names her own task by its plain
# name and reads it; mallory naming alice's task (by kart submit, and by
# a file dropped by hand) is rejected, and never sees alice's output.
test_other_users_task_rejected() {
	shared_spool || return
	start_worker "$S" --id d20w
	local out
	out=$(as "$U_ALICE" kart submit --no-cwd --name secret -- \
		sh -c 'echo alice-secret-42 >"$KART_OUTDIR/s"; echo alice-stdout-42') ||
		fail "alice's submit: $out"
	out=$(as "$U_ALICE" kart submit --no-cwd --name use --after secret -- \
		sh -c 'cat "$KART_INPUTS/'"$U_ALICE"':secret/out/s"') || fail "alice's --after: $out"
	assert_eq "$U_ALICE:use" "$out" "alice's dependant"
	out=$(as "$U_MALLORY" kart submit --no-cwd --name steal --after "$U_ALICE:secret" -- \
		sh -c 'cat "$KART_INPUTS"/*/out/s "$KART_INPUTS"/*/stdout; echo tried') ||
		fail "mallory's submit: $out"
	as "$U_MALLORY" sh -c "umask 077; printf '#!/bin/sh\n#kart: after=$U_ALICE:use\ncat \$KART_INPUTS/*/stdout\n' \
		>$S/drop/$U_MALLORY/.d && mv $S/drop/$U_MALLORY/.d $S/drop/$U_MALLORY/drop" ||
		fail "mallory's drop"
	wait_until 30 test -e "$S/done/$U_MALLORY:drop.json" -a -e "$S/done/$U_MALLORY:steal.json" -a \
		-e "$S/done/$U_ALICE:use.json" || fail "no results: $(ls "$S/done")"
	assert_eq ok "$(field "$S" "$U_ALICE:use" .status)" "alice's own pipeline"
	assert_eq "alice-secret-42" "$(cat "$S/done/$U_ALICE:use.stdout" 2>/dev/null)" "alice read her input"
	local id
	for id in steal drop; do
		assert_eq rejected "$(field "$S" "$U_MALLORY:$id" .status)" "mallory's $id"
		assert_match "is not a task of the submitter" "$(field "$S" "$U_MALLORY:$id" .error)" \
			"mallory's $id: the error"
		grep -rqsE 'alice-(secret|stdout)-42' "$S/done/$U_MALLORY:$id".* && fail "mallory's $id saw alice's output"
	done
	stop_worker "$WPID"
}

# ---- issue 35, break 3: a member's graph sets no worker's recursion ------

# drop_chain USER N CMD0: USER drops c0 (running CMD0), then c1..cN, each
# after the one before, into drop/USER/ in that order, as fast as
# python writes them (a worker hoists them into new/ in that order).
drop_chain() {
	as "$1" python3 - "$S/drop/$1" "$1" "$2" "$3" <<'PY'
import os, sys
d, user, n, cmd0 = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
for k in range(n + 1):
    body = "#!/bin/sh\n"
    body += "#kart: after=%s:c%d\n" % (user, k - 1) if k else ""
    body += (cmd0 if k == 0 else "true") + "\n"
    t = os.path.join(d, ".t")
    with open(t, "w") as f:
        f.write(body)
    os.rename(t, os.path.join(d, "c%d" % k))
PY
}

# Break 3 as written: mallory drops a chain, each task after the one
# before, on a shared spool, and every worker reads it again at each
# start (here after a kill -9). The graph's walk is a loop: a worker
# with a 512 KiB stack starts on a chain of 20,000 (one frame per link
# overflowed it). And filing the chain costs a count of names looked at
# that grows as N (in the order of arrival) to N ln N (the worker hoists
# a batch of drops in directory order), the worker's log says how many,
# where each task used to walk all of the chain before it (N^2/2: 8 s
# for 16,000). DEPS_CHAIN sets the length (tests/torture/deps.sh: the
# issue's 130,000).
test_deep_chain_restart() {
	shared_spool || return
	local n=${DEPS_CHAIN:-20000} m=$U_MALLORY line steps t0
	printf '[limits]\nafter_max = %d\n' $((n + 10)) >"$S/kart.conf"
	start_worker "$S" --id d35a
	local wa=$WPID
	as "$m" kart submit --no-cwd --name m0 -- true >/dev/null || fail "mallory cannot submit"
	drop_chain "$m" "$n" "sleep 600" || fail "mallory's chain"
	wait_until $((60 + n / 200)) sh -c "[ -z \"\$(ls '$S/drop/$m')\" ]" ||
		fail "the chain was not hoisted: $(ls "$S/drop/$m" | wc -l) left"
	kill -9 "$wa"
	wait_gone 10 "$wa"
	t0=$SECONDS
	(ulimit -s 512 && exec "$KART" -s "$S" worker --id d35b) >>"$S.worker.log" 2>&1 &
	local wb=$!
	T_PIDS+=("$wb")
	wait_until $((60 + n / 200)) sh -c "grep -q 'after=: $n tasks wait' '$S.worker.log' || ! kill -0 $wb" ||
		fail "the worker did not file the chain: $(tail -2 "$S.worker.log")"
	kill -0 "$wb" 2>/dev/null || { fail "the worker died on a chain of $n (512 KiB stack)"; return; }
	line=$(grep -o "after=: $n tasks wait; [0-9]* names looked at" "$S.worker.log" | tail -1)
	steps=$(echo "$line" | awk '{print $5}')
	[ -n "$steps" ] && [ "$steps" -le $((20 * n)) ] ||
		fail "filing $n cost '$steps' names looked at (at most $((20 * n)))"
	echo "    chain of $n: $line; started in about $((SECONDS - t0)) s"
	assert_eq "waiting" "$("$KART" -s "$S" status "$m:c$n" | cut -f2)" "the chain's last"
	kill -9 "$wb"
}

# after_max bounds a chain (kart.conf(5)): the task that would wait
# behind more than after_max others is rejected, naming it; its own
# dependant is skipped; the chain up to it runs.
test_after_max_bounds_a_chain() {
	shared_spool || return
	local m=$U_MALLORY k
	printf '[limits]\nafter_max = 5\n' >"$S/kart.conf"
	start_worker "$S" --id d35c
	as "$m" kart submit --no-cwd --name m0 -- true >/dev/null || fail "mallory cannot submit"
	drop_chain "$m" 7 "sleep 3" || fail "mallory's chain"
	wait_until 60 test -e "$S/done/$m:c7.json" || fail "no result for c7: $(ls "$S/done")"
	assert_eq rejected "$(field "$S" "$m:c6" .status)" "c6, sixth in the chain"
	assert_match "more than after_max \(5\)" "$(field "$S" "$m:c6" .error)" "c6's error"
	assert_eq skipped "$(field "$S" "$m:c7" .status)" "c7, after c6"
	for k in 1 2 3 4 5; do
		wait_until 30 test -e "$S/done/$m:c$k.json"
		assert_eq ok "$(field "$S" "$m:c$k" .status)" "c$k"
	done
	stop_worker "$WPID"
}

run_tests
