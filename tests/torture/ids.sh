#!/bin/bash
# Ids a client can know, at length: for each client kart ships (kart
# submit, the Python, sh and Node clients), 8 processes x 25 submits of
# one name against two workers; every printed id must be its own result's
# (spool-layout README §5). Prints the figures per client.
here=$(cd "$(dirname "$0")" && pwd)
export KART_TEST_RESULTS
KART_TEST_RESULTS=$(mktemp "${TMPDIR:-/tmp}/kart-results.XXXXXX")
trap 'rm -f "$KART_TEST_RESULTS"' EXIT
KART_CONFORMANCE_LONG=1 KART_TEST_CASE=same_name_race bash "$here/../blackbox/conformance.sh"
p=$(grep -c '^PASS' "$KART_TEST_RESULTS"); f=$(grep -c '^FAIL' "$KART_TEST_RESULTS")
s=$(grep -c '^SKIP' "$KART_TEST_RESULTS")
echo "ids: $p passed, $f failed, $s skipped"
[ "$f" -eq 0 ] && [ "$p" -gt 0 ]
