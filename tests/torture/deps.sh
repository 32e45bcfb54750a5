#!/bin/bash
# tests/blackbox/deps.sh's deep chain at the issue's size (issue 35,
# break 3): mallory's chain of 130,000 tasks, each after the one before,
# read again by a restarted worker with a 512 KiB stack; filing it costs
# a count of names looked at that grows as N ln N at most.
here=$(cd "$(dirname "$0")" && pwd)
export KART_TEST_RESULTS
KART_TEST_RESULTS=$(mktemp "${TMPDIR:-/tmp}/kart-results.XXXXXX")
trap 'rm -f "$KART_TEST_RESULTS"' EXIT
DEPS_CHAIN=${DEPS_CHAIN:-130000} KART_TEST_CASE="${KART_TEST_CASE:-deep_chain_restart}" \
	bash "$here/../blackbox/deps.sh"
p=$(grep -c '^PASS' "$KART_TEST_RESULTS"); f=$(grep -c '^FAIL' "$KART_TEST_RESULTS")
s=$(grep -c '^SKIP' "$KART_TEST_RESULTS")
echo "deps: $p passed, $f failed, $s skipped"
[ "$f" -eq 0 ] && [ "$p" -gt 0 ]
