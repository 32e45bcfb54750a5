#!/bin/bash
# Build the libFuzzer targets (clang, ASan+UBSan) and run each for
# FUZZ_SECONDS (default 5) on a copy of its seed corpus in tests/fuzz/corpus/.
# Prints: "K fuzz executions, 0 crashes". A crash leaves its input in
# FUZZ_OUT (default: a temporary directory, printed) and exits 1.
#   FUZZ_B        build directory (default /tmp/kart-fuzz-build)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
secs=${FUZZ_SECONDS:-5}
b=${FUZZ_B:-/tmp/kart-fuzz-build}
out=${FUZZ_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/kart-fuzz.XXXXXX")}
command -v clang >/dev/null || { echo "fuzz: clang is not installed" >&2; exit 77; }
mkdir -p "$b" "$out"
cd "$root" || exit 1
flags="-g -O1 -std=gnu11 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -I$b $(for d in src/*/; do printf -- "-iquote %s " "$d"; done) $(pkg-config --cflags jansson libseccomp libcap)"
libs="$(pkg-config --libs jansson libseccomp libcap)"
printf '#define LIBEXECDIR "/usr/local/libexec/kart"\n' >"$b/config.h"
objs=()
# The library's sources as the Makefile finds them (LIB_SRC), so that a
# new file is never missing here.
srcs=$(make -s lib-sources)
[ -n "$srcs" ] || { echo "fuzz: no LIB_SRC in the Makefile" >&2; exit 1; }
# Compiled a core at a time (make check runs this: the ASan objects are
# most of its time).
jobs=$(nproc 2>/dev/null || echo 2) pids=()
for f in $srcs; do
	f=$(basename "$f" .c)
	if [ "${#pids[@]}" -ge "$jobs" ]; then
		wait "${pids[0]}" || exit 1
		pids=("${pids[@]:1}")
	fi
	clang $flags -c -o "$b/$f.o" "$(ls src/*/$f.c)" &
	pids+=($!)
	objs+=("$b/$f.o")
done
for p in "${pids[@]}"; do wait "$p" || exit 1; done
total=0 crashes=0
for t in task policy result; do
	clang $flags -fsanitize=fuzzer -o "$b/fuzz_$t" "tests/fuzz/fuzz_$t.c" "${objs[@]}" $libs ||
		{ echo "fuzz: cannot link fuzz_$t" >&2; exit 1; }
	mkdir -p "$out/$t.corpus"
	cp "tests/fuzz/corpus/$t/"* "$out/$t.corpus/" 2>/dev/null
	log=$out/$t.log
	ASAN_OPTIONS=detect_leaks=0 "$b/fuzz_$t" -max_total_time="$secs" -max_len=8192 \
		-artifact_prefix="$out/$t-" "$out/$t.corpus" >"$log" 2>&1
	rc=$?
	n=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -n 1)
	if [ "$rc" -ne 0 ] || [ -z "$n" ]; then
		crashes=$((crashes + 1))
		echo "fuzz_$t: crash (rc $rc): $(grep -m1 -E 'ERROR|runtime error' "$log")" >&2
		echo "  input and log kept in $out" >&2
		n=$(grep -o '#[0-9]*' "$log" | tail -n 1 | tr -d '#')
	fi
	echo "fuzz_$t: ${n:-0} executions" >&2
	total=$((total + ${n:-0}))
done
[ "$crashes" -eq 0 ] && [ -z "${FUZZ_OUT:-}" ] && rm -rf "$out"
echo "$total fuzz executions, $crashes crashes"
[ "$crashes" -eq 0 ]
