# A short crash-point sweep (tests/torture/crash-sweep.sh) as part of
# make check: SIGKILL of submit and of the worker (its loop and its
# commit thread) at the first calls of each spool syscall, then recovery
# and the invariant. `make torture` runs the long version.
. "$(dirname "$0")/../lib.sh"

test_crash_points_short_sweep() {
	command -v strace >/dev/null || { skip "strace is not installed"; return; }
	local out part p rc=0 pids=()
	# The retry and after= sweeps (retry, deps) only in make torture: each of its points
	# drains several tasks, too long for make check's budget.
	# The three sweeps share nothing (each sweep-script run has a work
	# directory of its own): they run at once, and their figures are
	# added up.
	for part in submit worker commit; do
		SWEEP_MAX=${KART_SWEEP_MAX:-4} SWEEP_RETRY=0 SWEEP_PARTS=$part KART=$KART \
			bash "$ROOT/tests/torture/crash-sweep.sh" >"$T_ROOT/sweep.$part" 2>&1 &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	out=$(cat "$T_ROOT"/sweep.submit "$T_ROOT"/sweep.worker "$T_ROOT"/sweep.commit)
	[ "$rc" = 0 ] || fail "the invariant broke: $(grep -v '^submit:\|^worker:\|^commit:' <<<"$out" | tail -15)"
	# One summary of the three: "N crash points survived, N tasks lost, ...".
	local last
	last=$(for part in submit worker commit; do tail -n 1 "$T_ROOT/sweep.$part"; done |
		awk '{ p += $1; l += $5; t += $8; b += $12 } END {
			printf "%d crash points survived, %d tasks lost, %d run twice unflagged, %d other violations\n", p, l, t, b }')
	echo "    $last"
	for part in submit worker commit; do
		assert_match "^[1-9][0-9]* crash points survived" "$(tail -n 1 "$T_ROOT/sweep.$part")" "$part sweep summary"
	done
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
