# A short crash-point sweep (tests/torture/crash-sweep.sh) as part of
# make check: SIGKILL of submit and of the worker (its loop and its
# commit thread) at the first calls of each spool syscall, then recovery
# and the invariant. `make torture` runs the long version.
. "$(dirname "$0")/../lib.sh"

test_crash_points_short_sweep() {
	command -v strace >/dev/null || { skip "strace is not installed"; return; }
	local out
	# The retry and after= sweeps (retry, deps) only in make torture: each of its points
	# drains several tasks, too long for make check's budget.
	out=$(SWEEP_MAX=${KART_SWEEP_MAX:-4} SWEEP_RETRY=0 SWEEP_PARTS="submit worker commit" KART=$KART \
		bash "$ROOT/tests/torture/crash-sweep.sh" 2>&1) ||
		fail "the invariant broke: $(grep -v '^submit:\|^worker:' <<<"$out" | tail -15)"
	local last; last=$(tail -n 1 <<<"$out")
	echo "    $last"
	assert_match "^[1-9][0-9]* crash points survived, 0 tasks lost, 0 run twice unflagged, 0 other violations$" \
		"$last" "sweep summary"
	# The commit thread's publish steps were reached, not only the loop's.
	local sc
	for sc in fsync renameat2 linkat; do
		grep -q "^commit: $sc: [1-9]" <<<"$out" ||
			fail "no $sc of the commit thread was killed: $(grep '^commit:' <<<"$out" | tr '\n' ' ')"
	done
}

run_tests
