# A short libFuzzer run (tests/fuzz/run.sh) of each target as part of make
# check: the directive parser and name check, the kart.conf parser, the
# result reader. `make fuzz` runs them longer (FUZZ_SECONDS=300).
. "$(dirname "$0")/../lib.sh"

test_fuzz_short() {
	command -v clang >/dev/null || { skip "clang is not installed"; return; }
	local out
	out=$(FUZZ_SECONDS=${KART_FUZZ_SECONDS:-3} FUZZ_B=$KART_BUILD/fuzz bash "$ROOT/tests/fuzz/run.sh" 2>&1) ||
		fail "$(tail -n 8 <<<"$out")"
	local last; last=$(tail -n 1 <<<"$out")
	echo "    $last"
	assert_match "^[1-9][0-9]* fuzz executions, 0 crashes$" "$last" "fuzz summary"
}

run_tests
