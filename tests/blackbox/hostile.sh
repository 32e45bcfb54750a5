# The hostile input battery (tests/torture/hostile.sh) as part of make
# check, with a short RENAME_EXCHANGE race; `make torture` runs 5000 rounds.
. "$(dirname "$0")/../lib.sh"

test_hostile_battery() {
	[ "$(id -u)" = 0 ] || { skip "the battery needs root (other users' files, device nodes)"; return; }
	local out
	out=$(HOSTILE_RACE=${KART_HOSTILE_RACE:-300} KART=$KART bash "$ROOT/tests/torture/hostile.sh" 2>&1) ||
		fail "$(tail -n 8 <<<"$out")"
	local last; last=$(tail -n 1 <<<"$out")
	echo "    $last"
	assert_match "^[1-9][0-9]* hostile inputs rejected with reasons, [0-9]+ race rounds, canary opened 0 times, 0 failures$" \
		"$last" "hostile summary"
}

run_tests
