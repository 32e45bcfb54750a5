#!/bin/bash
# bench/guest.sh - bench/run as the v2 guest runs a test script (bench/vm
# names it in the guest's cases): in the guest's tmpfs, its results into
# the scratch share. Sizes for software emulation, 10 to 20 times slower:
# only the ratios of the pairs in turns count.
set -u
here=$(cd "$(dirname "$0")" && pwd)
export KART=$KART_B/kart BENCH_OUT=/run/out/bench BENCH_QUICK=1
export BENCH_N=${BENCH_N:-100} BENCH_SIZES=${BENCH_SIZES:-100} BENCH_SCALE=${BENCH_SCALE:-1000}
export BENCH_LAT_N=${BENCH_LAT_N:-20} BENCH_STRACE_N=${BENCH_STRACE_N:-10}
export BENCH_PAIRS=${BENCH_PAIRS:-2} BENCH_BWRAP_PAIRS=${BENCH_BWRAP_PAIRS:-2} BENCH_BWRAP_N=${BENCH_BWRAP_N:-30}
export BENCH_SUBMIT_PAIRS=${BENCH_SUBMIT_PAIRS:-3} BENCH_SUBMIT_N=${BENCH_SUBMIT_N:-30}
export BENCH_EXTRAS_N=${BENCH_EXTRAS_N:-100}
if bash "$here/run"; then st=PASS; else st=FAIL; fi
echo "$st test_${KART_TEST_CASE:-run}" >>"${KART_TEST_RESULTS:-/dev/null}"
[ "$st" = PASS ]
