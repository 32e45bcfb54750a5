#!/bin/bash
# Black-box: the command line (contract section 4). Help and usage errors,
# init, submit, status, wait, cat, and the order in which a worker takes
# tasks (priority, arrival, lanes).
. "$(dirname "$0")/../lib.sh"

# ---- local helpers ---------------------------------------------------------

now_ms() { date +%s%3N; }
has_result() { [ -e "$1/done/$2.json" ]; }
# has_line REGEX TEXT WHAT: some line of TEXT matches REGEX (grep -E).
has_line() { printf '%s\n' "$2" | grep -Eq -- "$1" || fail "$3: no line matches /$1/ in: $2"; }
n_queued() { find "$1/new" -mindepth 1 -maxdepth 1 ! -name '.*' | wc -l; }


# A usage error: exit 2, one line on stderr that says something.
assert_usage_error() { # what ARGS...
	local what=$1; shift
	run_cmd "$@"
	assert_eq 2 "$RC" "$what: exit status"
	[ -n "$ERR" ] || fail "$what: nothing on stderr"
	assert_eq 1 "$(printf '%s\n' "$ERR" | wc -l)" "$what: lines on stderr ('$ERR')"
}


# ---- help, version, usage errors -------------------------------------------------

test_help_and_version() {
	run_cmd --help
	assert_eq 0 "$RC" "kart --help: exit status"
	assert_match "usage: kart" "$OUT" "kart --help"
	run_cmd -h
	assert_eq 0 "$RC" "kart -h: exit status"
	run_cmd --version
	assert_eq 0 "$RC" "kart --version: exit status"
	assert_match "^kart [0-9]+\.[0-9]+" "$OUT" "kart --version"
	local v
	for v in init submit worker status wait cat cancel hold release edit pause resume doctor; do
		run_cmd "$v" --help
		assert_eq 0 "$RC" "kart $v --help: exit status"
		has_line "^usage: kart .*$v" "$OUT" "kart $v --help: a usage line"
	done
	# Help needs no spool.
	run_cmd -s /nonexistent/spool status --help
	assert_eq 0 "$RC" "kart -s MISSING status --help"
}

test_usage_errors() {
	local s
	s=$(mkspool)
	assert_usage_error "no command" -s "$s"
	assert_usage_error "unknown verb" -s "$s" frobnicate
	assert_usage_error "unknown global option" --frobnicate status
	assert_usage_error "unknown option of status" -s "$s" status --frobnicate
	assert_usage_error "unknown option of submit" -s "$s" submit --frobnicate -- true
	assert_usage_error "unknown option of worker" -s "$s" worker --frobnicate
	assert_usage_error "unknown option of wait" -s "$s" wait --frobnicate x
	assert_usage_error "unknown option of cat" -s "$s" cat --frobnicate x
	assert_usage_error "wait without an id" -s "$s" wait
	assert_usage_error "cancel without an id" -s "$s" cancel
	assert_usage_error "hold without an id" -s "$s" hold
	assert_usage_error "release without an id" -s "$s" release
	assert_usage_error "edit without an id" -s "$s" edit
	assert_usage_error "pause without an id" -s "$s" pause
	assert_usage_error "pause --all with an id" -s "$s" pause --all x
	assert_usage_error "resume --freeze" -s "$s" resume --all --freeze
	assert_usage_error "worker --slots 0" -s "$s" worker --slots 0
	assert_eq 0 "$(n_queued "$s")" "tasks queued by usage errors"
	# No -s and no KART_SPOOL.
	assert_usage_error "no spool (status)" status
	assert_usage_error "no spool (submit)" submit -- true
	assert_usage_error "no spool (worker)" worker --drain
}

test_kart_spool_env() {
	local s
	s=$(mkspool)
	OUT=$(KART_SPOOL=$s timeout 20 "$KART" submit --name viaenv -- true); RC=$?
	assert_eq 0 "$RC" "submit with KART_SPOOL: exit status"
	assert_eq viaenv "$OUT" "submit with KART_SPOOL: id"
	assert_file "$s/new/viaenv"
	OUT=$(KART_SPOOL=$s timeout 20 "$KART" status viaenv); RC=$?
	assert_eq 0 "$RC" "status with KART_SPOOL"
	assert_match "^viaenv	queued" "$OUT" "status with KART_SPOOL"
	# -s wins over KART_SPOOL.
	local other
	other=$(mkspool)
	OUT=$(KART_SPOOL=$other timeout 20 "$KART" -s "$s" submit --name viaflag -- true)
	assert_file "$s/new/viaflag"
	assert_no_file "$other/new/viaflag"
}

# The long form of -s, with and without '='; like -s it wins over KART_SPOOL.
test_spool_long_option() {
	local s other
	s=$(mkspool)
	run_cmd --spool "$s" submit --name longopt -- true
	assert_eq 0 "$RC" "--spool DIR submit: exit status ($ERR)"
	assert_eq longopt "$OUT" "--spool DIR submit: id"
	assert_file "$s/new/longopt"
	run_cmd --spool="$s" status longopt
	assert_eq 0 "$RC" "--spool=DIR status: exit status ($ERR)"
	assert_match "^longopt	queued" "$OUT" "--spool=DIR status"
	other=$(mkspool)
	OUT=$(KART_SPOOL=$other timeout 20 "$KART" --spool "$s" submit --name viaspool -- true)
	assert_file "$s/new/viaspool"
	assert_no_file "$other/new/viaspool"
	assert_usage_error "--spool without a value" --spool
}

# ---- init ---------------------------------------------------------------------------

test_init_idempotent() {
	local s=$T_ROOT/fresh-spool d
	run_cmd -s "$s" init
	assert_eq 0 "$RC" "init of a new spool: exit status ($ERR)"
	for d in tmp new cur done; do
		[ -d "$s/$d" ] || fail "init did not create $d/"
	done
	run_cmd -s "$s" submit --name keep -- true
	assert_eq 0 "$RC" "submit into the new spool"
	run_cmd -s "$s" init
	assert_eq 0 "$RC" "init again: exit status ($ERR)"
	assert_file "$s/new/keep"
	for d in tmp new cur done; do
		[ -d "$s/$d" ] || fail "$d/ gone after a second init"
	done
	run_cmd -s "$s/new/keep" init
	assert_ne 0 "$RC" "init over a regular file"
}

# ---- wait ------------------------------------------------------------------------------

test_wait_exit_codes() {
	local s w t0 el
	s=$(mkspool)
	start_worker "$s" --id ww
	w=$WPID
	"$KART" -s "$s" submit --name good -- true >/dev/null
	"$KART" -s "$s" submit --name seven -- sh -c 'exit 7' >/dev/null
	"$KART" -s "$s" submit --name segv -- sh -c 'kill -SEGV $$' >/dev/null
	# Exit codes here; how soon wait wakes up is checked below with nap.
	local id
	for id in good seven segv; do
		wait_until 30 has_result "$s" $id || fail "$id: no result within 30s"
	done

	run_cmd -s "$s" wait --timeout 30 good
	assert_eq 0 "$RC" "wait on a task exiting 0"
	run_cmd -s "$s" wait --timeout 30 seven
	assert_eq 7 "$RC" "wait on a task exiting 7"
	has_result "$s" seven && assert_eq failed "$(field "$s" seven .status)" "status of exit 7"
	run_cmd -s "$s" wait --timeout 30 segv
	assert_eq 139 "$RC" "wait on a task killed by SIGSEGV"
	if has_result "$s" segv; then
		assert_eq killed "$(field "$s" segv .status)" "status of a SIGSEGV task"
		assert_eq SIGSEGV "$(field "$s" segv .signal)" "signal of a SIGSEGV task"
		assert_eq null "$(field "$s" segv .exit_code)" "exit_code of a SIGSEGV task"
	fi
	run_cmd -s "$s" wait --timeout 30 good seven
	assert_eq 1 "$RC" "wait on two tasks, one failed"
	run_cmd -s "$s" wait --timeout 30 good good
	assert_eq 0 "$RC" "wait on two ok tasks"
	run_cmd -s "$s" wait --timeout 5 nosuch
	assert_eq 125 "$RC" "wait on an unknown id"
	run_cmd -s "$s" wait --timeout 5 good nosuch
	assert_eq 125 "$RC" "wait on a known and an unknown id"

	# wait returns as soon as the result lands.
	"$KART" -s "$s" submit --name nap -- sleep 1 >/dev/null
	t0=$(now_ms)
	RUN_TIMEOUT=15 run_cmd -s "$s" wait nap
	el=$(($(now_ms) - t0))
	assert_eq 0 "$RC" "wait on a task sleeping 1s"
	has_result "$s" nap || fail "wait returned before the result existed"
	# From the result's writing to wait's return (the claim, the spawn
	# and the sleep are the machine's; under load they take their time).
	local landed; landed=$(stat -c %.3Y "$s/done/nap.json" | tr -d .)
	[ $((t0 + el - landed)) -lt 2000 ] || fail "wait returned $((t0 + el - landed)) ms after the result was written"
	[ "$el" -ge 1000 ] || fail "wait returned ${el} ms after the submit of a 1 s task"
	stop_worker "$w"
}

test_wait_timeout_queued() {
	local s t0 el
	s=$(mkspool)
	"$KART" -s "$s" submit --name stuck -- true >/dev/null
	t0=$(now_ms)
	run_cmd -s "$s" wait --timeout 1 stuck
	el=$(($(now_ms) - t0))
	assert_eq 124 "$RC" "wait --timeout 1 on a queued task"
	[ "$el" -ge 900 ] || fail "wait --timeout 1 returned after ${el} ms"
	[ "$el" -lt 5000 ] || fail "wait --timeout 1 returned after ${el} ms"
	assert_file "$s/new/stuck"
	assert_usage_error "wait --timeout abc" -s "$s" wait --timeout abc stuck
}

# kart wait sleeps on an inotify watch of done/ with no timeout, waking
# only for events there (each file of a result is one), never on a timer.
test_wait_does_not_poll() {
	command -v strace >/dev/null || { skip "strace is not installed"; return; }
	local s sp; s=$(mkspool)
	"$KART" -s "$s" submit --name later -- true >/dev/null
	strace -qq -o "$T_ROOT/wait.strace" \
		-e trace=inotify_add_watch,poll,ppoll,select,pselect6,epoll_wait,nanosleep,clock_nanosleep \
		"$KART" -s "$s" wait later >/dev/null 2>&1 &
	sp=$!
	T_PIDS+=("$sp")
	wait_until 5 grep -qs inotify_add_watch "$T_ROOT/wait.strace" || fail "no inotify_add_watch"
	sleep 1 # a poller would have looked a few times by now
	KART_BACKEND=none drain "$s"
	wait_gone 10 "$sp" || fail "wait did not return once the result landed"
	assert_eq 0 "$RC" "wait's exit status"
	local tr; tr=$(cat "$T_ROOT/wait.strace")
	assert_match "inotify_add_watch\(.*\"$s/done\", .*IN_MOVED_TO.*\) = [0-9]+" "$tr" \
		"an inotify watch on done/"
	local waits; waits=$(grep -cE '^(poll|ppoll|select|pselect6|epoll_wait)\(' <<<"$tr")
	[ "$waits" -ge 1 ] || fail "wait never blocked on the watch: $tr"
	grep -E '^(poll|ppoll)\(' <<<"$tr" | grep -vE ', -1\)|NULL, NULL, 8\)' | grep -q . &&
		fail "wait blocks with a timeout: $(grep -E '^(poll|ppoll)' <<<"$tr" | head -2)"
	grep -qE '^(clock_)?nanosleep\(' <<<"$tr" && fail "wait sleeps: $(grep -E 'nanosleep' <<<"$tr" | head -2)"
	grep -E '^(poll|ppoll)\(' <<<"$tr" | grep -qE '\) += 0( |$)' &&
		fail "a wait ended with nothing to read (a timeout): it polls"
	true
}

# ---- status ------------------------------------------------------------------------------

test_status() {
	local s w out js
	s=$(mkspool)
	"$KART" -s "$s" submit --name o1 -- true >/dev/null
	"$KART" -s "$s" submit --name f1 -- sh -c 'exit 3' >/dev/null
	run_cmd -s "$s" status o1
	assert_eq 0 "$RC" "status of a queued task: exit status"
	assert_match "^o1	queued" "$OUT" "status of a queued task"
	run_cmd -s "$s" status --json o1
	assert_eq queued "$(jq -r '.[0].state' <<<"$OUT")" "status --json of a queued task"
	drain "$s"

	"$KART" -s "$s" submit --name r1 -- sleep 30 >/dev/null
	start_worker "$s" --id wstat --slots 1 --batch-slots 1
	w=$WPID
	wait_until 20 is_running "$s" r1 || fail "r1 never ran"
	"$KART" -s "$s" submit --name q1 -- true >/dev/null
	sleep 0.3
	run_cmd -s "$s" status q1
	assert_match "^q1	queued" "$OUT" "q1 waits while the only fast slot is busy"

	run_cmd -s "$s" status
	assert_eq 0 "$RC" "status of all: exit status"
	out=$OUT
	has_line "^o1	ok" "$out" "status of all: o1"
	has_line "^f1	failed	3" "$out" "status of all: f1"
	has_line "^r1	running	wstat" "$out" "status of all: r1"
	has_line "^q1	queued" "$out" "status of all: q1"
	assert_eq 4 "$(printf '%s\n' "$out" | grep -c .)" "lines of status of all"

	run_cmd -s "$s" status --json
	assert_eq 0 "$RC" "status --json of all: exit status"
	js=$OUT
	jq -e 'type == "array" and length == 4 and all(.[]; has("id") and has("state"))' \
		<<<"$js" >/dev/null || fail "status --json: not an array of 4 {id, state}: $js"
	assert_eq ok "$(jq -r '.[] | select(.id == "o1") | .state' <<<"$js")" "json o1"
	assert_eq failed "$(jq -r '.[] | select(.id == "f1") | .state' <<<"$js")" "json f1"
	assert_eq 3 "$(jq -r '.[] | select(.id == "f1") | .exit_code' <<<"$js")" "json f1 exit_code"
	assert_eq running "$(jq -r '.[] | select(.id == "r1") | .state' <<<"$js")" "json r1"
	assert_eq wstat "$(jq -r '.[] | select(.id == "r1") | .worker' <<<"$js")" "json r1 worker"
	assert_eq queued "$(jq -r '.[] | select(.id == "q1") | .state' <<<"$js")" "json q1"

	run_cmd -s "$s" status --json r1 o1
	assert_eq "running ok" "$(jq -r '[.[].state] | join(" ")' <<<"$OUT")" "status --json r1 o1"

	run_cmd -s "$s" status nosuch
	assert_eq 1 "$RC" "status of an unknown id: exit status"
	[ -n "$ERR" ] || fail "status of an unknown id: nothing on stderr"
	run_cmd -s "$s" status --json o1 nosuch
	assert_eq 1 "$RC" "status --json with an unknown id: exit status"
	jq -e 'type == "array"' <<<"$OUT" >/dev/null || fail "status --json with an unknown id: not JSON: $OUT"

	"$KART" -s "$s" cancel r1 >/dev/null 2>&1
	wait_until 20 has_result "$s" q1 || fail "q1 did not run after r1 was cancelled"
	wait_until 10 has_result "$s" r1 || fail "no result for r1 after its cancel"
	run_cmd -s "$s" status r1
	assert_match "^r1	cancelled" "$OUT" "status of a cancelled task"
	stop_worker "$w"
}

# ---- cat ------------------------------------------------------------------------------------

test_cat() {
	local s
	s=$(mkspool)
	"$KART" -s "$s" submit --name both -- sh -c 'echo out-text; echo err-text >&2' >/dev/null
	run_cmd -s "$s" cat both
	assert_eq 1 "$RC" "cat of a queued task: exit status"
	drain "$s"
	run_cmd -s "$s" cat both
	assert_eq 0 "$RC" "cat: exit status"
	assert_eq out-text "$OUT" "cat"
	run_cmd -s "$s" cat --stderr both
	assert_eq 0 "$RC" "cat --stderr: exit status"
	assert_eq err-text "$OUT" "cat --stderr"
	run_cmd -s "$s" cat nosuch
	assert_eq 1 "$RC" "cat of an unknown id: exit status"
	# Exact bytes, trailing newline included.
	assert_eq "$(printf 'out-text\n' | od -c)" "$("$KART" -s "$s" cat both | od -c)" "cat, byte for byte"
}

test_output_cap() {
	local s f n
	s=$(mkspool)
	f=$T_ROOT/big.sh
	printf '%s\n' '#!/bin/sh' '#kart: output=1K' \
		'head -c 102400 /dev/zero | tr "\0" x' 'echo small >&2' >"$f"
	"$KART" -s "$s" submit --name big "$f" >/dev/null
	drain "$s"
	has_result "$s" big || { fail "no result for big"; return; }
	assert_eq ok "$(field "$s" big .status)" "status of a task over its output cap"
	assert_eq 1024 "$(field "$s" big .stdout.bytes)" "stdout.bytes"
	assert_eq true "$(field "$s" big .stdout.truncated)" "stdout.truncated"
	assert_eq false "$(field "$s" big .stderr.truncated)" "stderr.truncated"
	n=$("$KART" -s "$s" cat big | wc -c)
	assert_eq 1024 "$n" "bytes printed by kart cat"
	assert_eq 1024 "$(stat -c %s "$s/$(field "$s" big .stdout.path)")" "size of the stdout file"
	assert_eq small "$("$KART" -s "$s" cat --stderr big)" "stderr under the cap"
}

# Without output=, each stream is capped at 8 MiB.
test_output_cap_default() {
	local s
	s=$(mkspool)
	printf '%s\n' '#!/bin/sh' 'head -c 9437184 /dev/zero | tr "\0" x' 'head -c 100 /dev/zero | tr "\0" y >&2' \
		>"$s/new/huge"
	KART_BACKEND=none drain "$s"
	has_result "$s" huge || { fail "no result for huge"; return; }
	assert_eq ok "$(field "$s" huge .status)" "status of a task over the default cap"
	assert_eq "8388608 true" "$(field "$s" huge '"\(.stdout.bytes) \(.stdout.truncated)"')" "stdout at the default cap"
	assert_eq "100 false" "$(field "$s" huge '"\(.stderr.bytes) \(.stderr.truncated)"')" "stderr under the cap"
	assert_eq 8388608 "$(stat -c %s "$s/done/huge.stdout")" "size of the stdout file"
}

# ---- submit -----------------------------------------------------------------------------------

test_submit_options() {
	local s line2
	s=$(mkspool)
	run_cmd -s "$s" submit --name NAME --timeout 5s --priority 3 --lane batch -- echo hi
	assert_eq 0 "$RC" "submit with options: exit status ($ERR)"
	assert_eq NAME "$OUT" "submit prints the id"
	assert_file "$s/new/NAME"
	assert_eq '#!/bin/sh' "$(sed -n 1p "$s/new/NAME")" "first line of the task file"
	line2=$(sed -n 2p "$s/new/NAME")
	assert_match '^# ?kart:' "$line2" "second line is a directive line"
	assert_match '(^|[ :])timeout=5s( |$)' "$line2" "timeout directive"
	assert_match '(^|[ :])priority=3( |$)' "$line2" "priority directive"
	assert_match '(^|[ :])lane=batch( |$)' "$line2" "lane directive"

	run_cmd -s "$s" submit --name NAME --timeout 5s --priority 3 --lane batch -- echo hi
	assert_eq 0 "$RC" "second submit with the same name"
	assert_eq NAME.2 "$OUT" "the second submit's id"
	drain "$s" --batch-slots 1
	has_result "$s" NAME || { fail "no result for NAME"; return; }
	has_result "$s" NAME.2 || { fail "no result for NAME.2"; return; }
	assert_eq NAME "$(field "$s" NAME .id)" "id of the first"
	assert_eq NAME "$(field "$s" NAME .name)" "name of the first"
	assert_eq NAME.2 "$(field "$s" NAME.2 .id)" "id of the second"
	assert_eq NAME "$(field "$s" NAME.2 .name)" "name of the second"
	assert_eq ok "$(field "$s" NAME.2 .status)" "status of the second"
	assert_eq batch "$(field "$s" NAME .lane)" "lane from --lane"
	assert_eq 5 "$(field "$s" NAME .limits.timeout_s)" "limits.timeout_s from --timeout"
	assert_eq hi "$("$KART" -s "$s" cat NAME.2)" "stdout of the second"

	# Reusing a name whose result exists also gets a fresh id.
	run_cmd -s "$s" submit --name NAME -- echo third
	assert_eq NAME.3 "$OUT" "id of a third submit"
}

# A submit looks at each thing once (docs/PERFORMANCE.md, "kart submit"):
# /proc/locks (the live workers) once, with limits asked or not, and the
# directory it runs in (its cwd=, opened as the worker will) walked once.
test_submit_looks_once() {
	command -v strace >/dev/null || { skip "strace is not installed"; return; }
	local s d tr n
	s=$(mkspool)
	d=$(mktemp -d "$T_ROOT/here.XXXXXX")
	for args in "" "--memory 64M"; do
		# shellcheck disable=SC2086 # the options, split
		(cd "$d" && strace -qq -f -o "$T_ROOT/submit.strace" -e trace=openat,faccessat2,faccessat \
			"$KART" -s "$s" submit $args -- true >/dev/null 2>&1) || { fail "submit $args failed"; return; }
		tr=$(cat "$T_ROOT/submit.strace")
		n=$(grep -c '"/proc/locks"' <<<"$tr")
		assert_eq 1 "$n" "/proc/locks read by one submit ${args:-without options}"
		n=$(grep -cE 'faccessat2?\(.*W_OK' <<<"$tr")
		assert_eq 1 "$n" "the cwd checked for writing by one submit ${args:-without options}"
	done
	assert_match "cwd=$d" "$(cat "$s/new/true.2")" "the task keeps its cwd="
}

# --memory, --pids, --cpu and --net become directives, and the worker
# applies them: the result's limits and sandbox say so.
test_submit_limit_options() {
	local s line2
	s=$(mkspool)
	# kart submit reads the policy: --net needs the grant first.
	printf '[network]\nallow_uids = %s\n' "$(id -u)" >"$s/kart.conf"
	run_cmd -s "$s" submit --name lim --memory 64M --pids 20 --cpu 0.5 --net -- echo limited
	assert_eq 0 "$RC" "submit with limit options: exit status ($ERR)"
	assert_eq lim "$OUT" "submit prints the id"
	line2=$(sed -n 2p "$s/new/lim")
	assert_match '^# ?kart:' "$line2" "second line is a directive line"
	assert_match '(^|[ :])memory=64M( |$)' "$line2" "memory directive"
	assert_match '(^|[ :])pids=20( |$)' "$line2" "pids directive"
	assert_match '(^|[ :])cpu=0\.5( |$)' "$line2" "cpu directive"
	assert_match '(^|[ :])net( |$)' "$line2" "net directive"
	[ "$(id -u)" = 0 ] || { skip "limits need root or a delegated cgroup"; return; }
	have_bwrap || { skip "bwrap cannot build a sandbox here"; return; }
	drain "$s"
	has_result "$s" lim || { fail "no result for lim"; return; }
	assert_eq ok "$(field "$s" lim .status)" "status of lim ($(field "$s" lim .error))"
	assert_eq limited "$("$KART" -s "$s" cat lim)" "stdout of lim"
	assert_eq 67108864 "$(field "$s" lim .limits.memory_bytes)" "limits.memory_bytes from --memory"
	assert_eq 20 "$(field "$s" lim .limits.pids)" "limits.pids from --pids"
	assert_eq 0.5 "$(field "$s" lim .limits.cpu)" "limits.cpu from --cpu"
	assert_eq true "$(field "$s" lim .sandbox.network)" "sandbox.network from --net"
	# Without a grant, --net is rejected, never run without the network.
	# kart submit refuses it at once; a file dropped in new/ is rejected.
	rm -f "$s/kart.conf"
	run_cmd -s "$s" submit --name nonet --net -- echo should-not-run
	assert_eq 1 "$RC" "submit --net without a grant"
	printf '#!/bin/sh\n#kart: net\necho should-not-run\n' >"$s/new/nonet"
	drain "$s"
	has_result "$s" nonet || { fail "no result for nonet"; return; }
	assert_eq rejected "$(field "$s" nonet .status)" "--net without a grant"
	assert_eq null "$(field "$s" nonet .started_at)" "a rejected --net task never started"
}

test_submit_stdin() {
	local s body
	s=$(mkspool)
	body=$'#!/bin/sh\necho from-stdin'
	OUT=$(printf '%s\n' "$body" | timeout 20 "$KART" -s "$s" submit --no-cwd -); RC=$?
	assert_eq 0 "$RC" "submit -: exit status"
	assert_ne "" "$OUT" "submit - prints an id"
	[ -n "$OUT" ] && [ -f "$s/new/$OUT" ] || { fail "no task file for '$OUT'"; return; }
	assert_eq "$body" "$(cat "$s/new/$OUT")" "the queued file is what came on stdin"
	local id=$OUT
	drain "$s"
	assert_eq ok "$(field "$s" "$id" .status)" "status of the stdin task"
	assert_eq from-stdin "$("$KART" -s "$s" cat "$id")" "stdout of the stdin task"

	# A file argument, with --name: the body is kept and the name is used.
	printf '#!/bin/sh\necho from-file\n' >"$T_ROOT/t.sh"
	run_cmd -s "$s" submit --name filed "$T_ROOT/t.sh"
	assert_eq filed "$OUT" "submit FILE --name"
	assert_match "echo from-file" "$(cat "$s/new/filed" 2>/dev/null)" "the queued file"
}

test_submit_bad_values() {
	local s
	s=$(mkspool)
	assert_usage_error "--timeout abc" -s "$s" submit --timeout abc -- true
	assert_usage_error "--lane nope" -s "$s" submit --lane nope -- true
	assert_usage_error "--priority x" -s "$s" submit --priority x -- true
	assert_usage_error "--memory lots" -s "$s" submit --memory lots -- true
	assert_usage_error "no task" -s "$s" submit
	assert_eq 0 "$(n_queued "$s")" "tasks queued by bad submits"
	assert_eq "" "$(ls -A "$s/tmp")" "files left in tmp/ by bad submits"
}

# ---- order: priority, arrival, lanes -----------------------------------------------------------

test_priority_order() {
	local s a b c
	s=$(mkspool)
	"$KART" -s "$s" submit --name p5 --priority 5 -- sleep 0.05 >/dev/null
	"$KART" -s "$s" submit --name pm1 --priority -1 -- sleep 0.05 >/dev/null
	"$KART" -s "$s" submit --name p0 --priority 0 -- sleep 0.05 >/dev/null
	KART_BACKEND=none drain "$s" --slots 1 --batch-slots 1
	a=$(field "$s" pm1 .started_at)
	b=$(field "$s" p0 .started_at)
	c=$(field "$s" p5 .started_at)
	[[ $a < $b ]] || fail "priority -1 ($a) did not start before priority 0 ($b)"
	[[ $b < $c ]] || fail "priority 0 ($b) did not start before priority 5 ($c)"
	local f
	f=$(field "$s" pm1 .finished_at)
	[[ $f < $b || $f == "$b" ]] || fail "with one slot, p0 started ($b) before pm1 finished ($f)"
}

test_fifo_among_equals() {
	local s n prev="" cur order=""
	s=$(mkspool)
	# Names not in alphabetical order, so that a sort by name fails.
	for n in charlie alpha delta bravo echo; do
		"$KART" -s "$s" submit --name "$n" -- sleep 0.05 >/dev/null
		sleep 0.02
	done
	KART_BACKEND=none drain "$s" --slots 1 --batch-slots 1
	order=$(jq -r '"\(.started_at) \(.id)"' "$s"/done/*.json | sort | awk '{print $2}' | tr '\n' ' ')
	assert_eq "charlie alpha delta bravo echo " "$order" "order of equal-priority tasks"
}

test_lanes() {
	local s w
	s=$(mkspool)
	start_worker "$s" --id wl --slots 1 --batch-slots 1
	w=$WPID
	"$KART" -s "$s" submit --name slow --lane batch -- sleep 20 >/dev/null
	wait_until 20 is_running "$s" slow || { fail "slow never ran"; stop_worker "$w"; return; }
	"$KART" -s "$s" submit --name slow2 --lane batch -- sleep 20 >/dev/null
	"$KART" -s "$s" submit --name quick -- echo quick >/dev/null
	wait_until 10 has_result "$s" quick || fail "a fast task did not finish while the batch lane was busy"
	is_running "$s" slow || fail "slow is no longer running when quick finished"
	if has_result "$s" quick; then
		assert_eq fast "$(field "$s" quick .lane)" "lane of quick"
	fi
	# The batch lane has one slot: the second batch task waits.
	run_cmd -s "$s" status slow2
	assert_match "^slow2	queued" "$OUT" "a second batch task with --batch-slots 1"
	"$KART" -s "$s" cancel slow slow2 >/dev/null 2>&1
	has_result "$s" slow && assert_eq batch "$(field "$s" slow .lane)" "lane of slow"
	stop_worker "$w"
}

# Each id once, in the furthest state it is found in (spool-layout README §7):
# done/ID.json over cur/W/ID over new/ID. The mid-finish state (claim still
# in cur/, JSON already in done/) reads as the result's status.
test_status_each_id_once() {
	local s; s=$(mkspool)
	printf 'true\n' >"$T_ROOT/t.sh"
	"$KART" -s "$s" submit --name X "$T_ROOT/t.sh" >/dev/null
	KART_BACKEND=none drain "$s"
	mkdir "$s/cur/wz" "$s/cur/wy"
	cp "$T_ROOT/t.sh" "$s/cur/wz/X"   # mid-finish
	cp "$T_ROOT/t.sh" "$s/new/X"      # a new entry of a finished id
	cp "$T_ROOT/t.sh" "$s/cur/wy/R"; cp "$T_ROOT/t.sh" "$s/new/R"
	cp "$T_ROOT/t.sh" "$s/new/Q"
	assert_eq "Q queued
R running
X ok" "$("$KART" -s "$s" status --json | jq -r '.[] | "\(.id) \(.state)"' | sort)" "status --json"
	assert_eq "Q queued
R running
X ok" "$("$KART" -s "$s" status | cut -f1,2 | tr '\t' ' ' | sort)" "status"
	assert_eq "X	ok	0" "$("$KART" -s "$s" status X)" "status X in the mid-finish state"
	# No worker holds cur/wy/.lock: its claim waits for a worker to start.
	assert_eq "R	running	(worker wy is gone; re-queued when a worker starts)" \
		"$("$KART" -s "$s" status R)" "status R, in cur/ and new/"
	assert_eq 3 "$("$KART" -s "$s" status --summary --json | jq .total)" "summary total"
}

# A name with a space (and '%', '#'): name= is %XX-escaped, so the
# second submit is 'NAME.2' with the name kept, and a retry too.
test_spaced_name_submit_and_retry() {
	local s id1 id2 id3 n='a b#50%'
	s=$(mkspool)
	printf 'echo hi\n' >"$T_ROOT/t.sh"
	id1=$("$KART" -s "$s" submit --name "$n" "$T_ROOT/t.sh") || fail "first submit"
	id2=$("$KART" -s "$s" submit --name "$n" "$T_ROOT/t.sh") || fail "second submit"
	assert_eq "$n|$n.2" "$id1|$id2" "ids"
	assert_match "^#kart: name=a%20b%2350%25$" "$(head -1 "$s/new/$id2")" "the name= line"
	KART_BACKEND=none drain "$s"
	assert_eq "ok $n" "$(field "$s" "$id2" '"\(.status) \(.name)"')" "second result"
	id3=$("$KART" -s "$s" retry "$id1") || fail "retry"
	assert_eq "$n.3" "$id3" "retry's id"
	KART_BACKEND=none drain "$s"
	assert_eq "ok $n" "$(field "$s" "$id3" '"\(.status) \(.name)"')" "retry's result"
	run_cmd -s "$s" submit --name .x "$T_ROOT/t.sh"
	assert_eq 2 "$RC" "--name .x: a usage error"
	assert_match "starts with '.'" "$ERR" "--name .x: why"
}

run_tests
