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

run_tests
