#!/bin/bash
# tests/blackbox/outdir.sh at the issue's sizes (OUTDIR_LONG=1): 400,000
# files and a 25,000-deep tree in $KART_OUTDIR, bounded; a 100,000-file
# copy that holds up no other user's result.
here=$(cd "$(dirname "$0")" && pwd)
export KART_TEST_RESULTS
KART_TEST_RESULTS=$(mktemp "${TMPDIR:-/tmp}/kart-results.XXXXXX")
trap 'rm -f "$KART_TEST_RESULTS"' EXIT
OUTDIR_LONG=1 KART_TEST_CASE="${KART_TEST_CASE:-long_sizes_bounded long_copy_off_the_commit_thread}" \
	bash "$here/../blackbox/outdir.sh"
p=$(grep -c '^PASS' "$KART_TEST_RESULTS"); f=$(grep -c '^FAIL' "$KART_TEST_RESULTS")
s=$(grep -c '^SKIP' "$KART_TEST_RESULTS")
echo "outdir: $p passed, $f failed, $s skipped"
[ "$f" -eq 0 ] && [ "$p" -gt 0 ]
