# A short chaos run (tests/torture/chaos.sh) as part of make check: workers
# on one spool killed with SIGKILL and stopped/continued at random while
# tasks arrive; then exactly one result per task. `make torture` runs the
# long version (CHAOS_N=2000).
. "$(dirname "$0")/../lib.sh"

test_chaos_short() {
	local out
	out=$(CHAOS_N=${KART_CHAOS_N:-200} CHAOS_TIMEOUT=120 KART=$KART bash "$ROOT/tests/torture/chaos.sh" 2>&1) ||
		fail "the invariant broke: $(tail -n 8 <<<"$out")"
	local last; last=$(grep '^chaos:' <<<"$out" | tail -n 1)
	echo "    $last"
	assert_match "^chaos: [1-9][0-9]* tasks, [0-9]+ workers, [0-9]+ kill -9, [0-9]+ stop/cont, [0-9]+ re-runs \(attempt>1\), 0 lost, 0 duplicates, 0 run twice unflagged, 0 left behind, 0 invalid JSON, 0 not ok$" \
		"$last" "chaos summary"
}

run_tests
