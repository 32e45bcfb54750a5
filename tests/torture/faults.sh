#!/bin/bash
# The fault cases of tests/blackbox/faults.sh at long sizes: every fsync of
# a worker's task made to fail with EIO in turn (up to 40), 2000 tasks
# through an inotify overflow, 1500 through the start-up race, 10,000
# link()+unlink() publishes against two workers.
here=$(cd "$(dirname "$0")" && pwd)
export KART_TEST_RESULTS
KART_TEST_RESULTS=$(mktemp "${TMPDIR:-/tmp}/kart-results.XXXXXX")
trap 'rm -f "$KART_TEST_RESULTS"' EXIT
FAULTS_LONG=1 bash "$here/../blackbox/faults.sh"
p=$(grep -c '^PASS' "$KART_TEST_RESULTS"); f=$(grep -c '^FAIL' "$KART_TEST_RESULTS")
s=$(grep -c '^SKIP' "$KART_TEST_RESULTS")
echo "faults: $p passed, $f failed, $s skipped"
[ "$f" -eq 0 ]
