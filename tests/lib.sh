# tests/lib.sh - helpers for black-box tests. Each test script sources it,
# defines functions named test_*, and ends with `run_tests`. Every test
# drives the real build/kart on a real temporary spool.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# KART_B: the build directory under test (make check B=... sets it).
KART_BUILD=$(cd "$ROOT" && cd "${KART_B:-build}" && pwd)
# A test's `env -i` keeps the sanitizers' settings (make check-asan):
# without them a sanitized kart run as another user reports leaks kept on
# purpose, and logs where the end-of-run scan does not look.
SAN_ENV=()
[ -n "${ASAN_OPTIONS:-}" ] && SAN_ENV+=("ASAN_OPTIONS=$ASAN_OPTIONS")
[ -n "${UBSAN_OPTIONS:-}" ] && SAN_ENV+=("UBSAN_OPTIONS=$UBSAN_OPTIONS")
KART=$KART_BUILD/kart
export PATH=$KART_BUILD:$PATH
unset KART_SPOOL KART_BACKEND KART_NET_UIDS KART_TERM_GRACE KART_KILL_GRACE KART_TIMEOUT_MAX
unset KART_LANDLOCK
unset KART_CGROUP KART_CGROUP_PARENT KART_RLIMIT_USE_AS
# The tests run as root and submit root-owned task files; a root worker
# refuses those unless the policy allows them. confine.sh tests the refusal.
export KART_ALLOW_ROOT=yes
# KART_TEST_SLOW=N multiplies the helpers' time bounds (wait_until, drain,
# run_cmd, wait_gone, stop_worker): make check-valgrind sets it, since kart
# under valgrind is 20-50 times slower. 1 (the default) for make check.
KART_TEST_SLOW=${KART_TEST_SLOW:-1}
# slow N: N seconds, times KART_TEST_SLOW.
slow() { echo $(($1 * KART_TEST_SLOW)); }
T_ROOT=$(mktemp -d "${TMPDIR:-/tmp}/kart-test.XXXXXX")
T_PIDS=()
# in_main_shell: this is the test script itself, not one of its forks. A
# background job (cmd &) is a fork of bash until its exec, and a signal
# in that window (a test's kill -TERM of a worker it just started) makes
# the fork run the script's EXIT trap: every EXIT trap starts with
# `in_main_shell || exit`, or the fork would remove T_ROOT under the test.
in_main_shell() { [ "${BASHPID:-$$}" = "$$" ]; }
_cleanup() {
	local p
	in_main_shell || return 0
	for p in "${T_PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$T_ROOT"
	users_cleanup
}
trap _cleanup EXIT

_T_CUR="" _T_FAILED=0
# Record a failure of the current test with a reason; the test goes on.
fail() { echo "    FAIL: $*" >&2; _T_FAILED=1; }
# Skip the current test with a reason; under KART_MUST_WORK=1 a skip is a failure.
skip() {
	if [ "${KART_MUST_WORK:-0}" = 1 ]; then
		fail "would skip, but KART_MUST_WORK=1: $*"
		return 1
	fi
	echo "    SKIP: $*" >&2
	_T_FAILED=2
	return 1
}

assert_eq() { # expected actual what
	[ "$1" == "$2" ] || fail "$3: expected '$1', got '$2'"
}
assert_ne() { [ "$1" != "$2" ] || fail "$3: did not expect '$2'"; }
assert_file() { [ -e "$1" ] || fail "missing: $1"; }
assert_no_file() { [ ! -e "$1" ] && [ ! -L "$1" ] || fail "should not exist: $1"; }
assert_match() { # regex string what
	[[ $2 =~ $1 ]] || fail "$3: '$2' does not match /$1/"
}

# A fresh spool; prints its path.
mkspool() {
	local s
	s=$(mktemp -d "$T_ROOT/spool.XXXXXX")
	"$KART" -s "$s" init || fail "kart init $s"
	echo "$s"
}

# start_worker SPOOL [ARGS...]: a background worker; sets WPID.
start_worker() {
	local s=$1; shift
	"$KART" -s "$s" worker "$@" >>"$s.worker.log" 2>&1 &
	WPID=$!
	T_PIDS+=("$WPID")
}

# wait_until TIMEOUT_S CMD...: retry CMD every 50ms until it succeeds.
# traced_by PID: a tracer (strace -p) is attached to PID.
traced_by() { [ "$(sed -n 's/^TracerPid:[[:space:]]*//p' "/proc/$1/status")" != 0 ]; }

# commit_tid PID: the worker's commit thread (named kart-commit), or nothing.
commit_tid() { grep -lx kart-commit /proc/"$1"/task/*/comm 2>/dev/null | head -1 | cut -d/ -f5; }

wait_until() {
	local t; t=$(slow "$1"); shift
	local end=$((SECONDS + t))
	while ! "$@"; do
		[ $SECONDS -ge $end ] && return 1
		sleep 0.05
	done
}

# field SPOOL ID JQ-FILTER: a field of done/ID.json.
field() { jq -r "$3" "$1/done/$2.json"; }
# is_running SPOOL ID: kart status says the task runs.
is_running() { "$KART" -s "$1" status "$2" 2>/dev/null | grep -q "^$2	running"; }

# drain SPOOL [ARGS...]: run a worker until new/ is empty and nothing runs.
drain() {
	local s=$1; shift
	timeout "$(slow 120)" "$KART" -s "$s" worker --drain "$@" >>"$s.worker.log" 2>&1 ||
		fail "worker --drain exited $? (log: $(tail -3 "$s.worker.log"))"
}

# run_cmd ARGS...: run kart; sets RC, OUT (stdout) and ERR (stderr).
run_cmd() {
	local ef
	ef=$(mktemp "$T_ROOT/err.XXXXXX")
	OUT=$(timeout "$(slow "${RUN_TIMEOUT:-60}")" "$KART" "$@" 2>"$ef")
	RC=$?
	ERR=$(cat "$ef")
	rm -f "$ef"
}

# wait_gone TIMEOUT PID: bounded wait for a background job; sets RC to its
# exit status (or "timeout").
wait_gone() {
	local end=$((SECONDS + $(slow "$1"))) st
	while kill -0 "$2" 2>/dev/null; do
		st=$(awk '{print $3}' "/proc/$2/stat" 2>/dev/null)
		[ "$st" = Z ] && break
		if [ $SECONDS -ge $end ]; then
			RC=timeout
			return 1
		fi
		sleep 0.05
	done
	{ wait "$2"; } 2>/dev/null
	RC=$?
}

# stop_worker PID: SIGTERM, bounded wait, then SIGKILL if it hangs.
stop_worker() {
	kill -TERM "$1" 2>/dev/null
	if ! wait_gone 20 "$1"; then
		fail "worker $1 did not exit within $(slow 20)s of SIGTERM"
		kill -9 "$1" 2>/dev/null
	fi
}

have_bwrap() {
	bwrap --unshare-all --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib \
		--symlink usr/lib64 /lib64 --proc /proc --dev /dev /bin/true 2>/dev/null
}

# ---- real accounts on a shared spool -------------------------------------
# The scripts between users (deps.sh, outdir.sh, users.sh, control.sh) name
# their accounts before they call users_make: G_KART, the spool's group;
# U_IN, the accounts in it; U_OUT, accounts outside it. Each script names
# them with a prefix of its own, after $KART_TEST_USER_TAG if set (for
# runs side by side). The accounts are made once per run, removed at exit.
G_KART= U_IN= U_OUT= U_MADE=0

users_cleanup() {
	[ "$U_MADE" = 1 ] || return 0
	local u
	for u in $U_IN $U_OUT; do
		pkill -9 -u "$u" 2>/dev/null
		userdel "$u" 2>/dev/null
	done
	groupdel "$G_KART" 2>/dev/null
	return 0
}

# users_make: the accounts, at the first call of a run. Where one of
# these names is taken (a killed run's), it fails; the exit trap removes
# them all the same.
users_make() {
	[ "$(id -u)" = 0 ] || { skip "needs root (real users, a root worker)"; return 1; }
	command -v setpriv >/dev/null && command -v useradd >/dev/null ||
		{ skip "setpriv or useradd is missing"; return 1; }
	[ "$U_MADE" = 1 ] && return 0
	U_MADE=1
	local u
	groupadd "$G_KART" || { fail "groupadd $G_KART"; return 1; }
	for u in $U_IN; do
		useradd -M -d / -s /bin/sh -U -G "$G_KART" "$u" || { fail "useradd $u"; return 1; }
	done
	for u in $U_OUT; do
		useradd -M -d / -s /bin/sh -U "$u" || { fail "useradd $u"; return 1; }
	done
	chmod 0755 "$T_ROOT"
}

# as USER CMD...: run CMD as USER with their groups, in /, on the spool $S.
as() {
	local u=$1; shift
	(cd / && env -i "${SAN_ENV[@]}" PATH="$KART_BUILD:/usr/bin:/bin" KART_SPOOL="$S" HOME=/ \
		setpriv --reuid="$u" --regid="$u" --init-groups -- "$@")
}

# tmpfiles_spool: the spool as contrib/systemd/kart.tmpfiles lays it out:
# its `d` lines, read by a small parser, with /var/spool/kart moved under
# $T_ROOT and the group kart renamed to G_KART. Sets S. A root worker runs
# a shared spool's tasks in bwrap, so it skips where bwrap cannot run.
tmpfiles_spool() {
	have_bwrap || { skip "bwrap cannot run here (a shared spool's tasks need it)"; return 1; }
	S=$T_ROOT/var/spool/kart
	rm -rf "$T_ROOT/var"
	local type path mode user group rest n=0
	while read -r type path mode user group rest; do
		case $type in d) ;; *) continue ;; esac
		path=$T_ROOT${path}
		[ "$group" = kart ] && group=$G_KART
		mkdir -p "$path" && chown "$user:$group" "$path" && chmod "$mode" "$path" ||
			{ fail "tmpfiles: $path"; return 1; }
		n=$((n + 1))
	done < <(grep -v '^#' "$ROOT/contrib/systemd/kart.tmpfiles")
	[ "$n" -ge 5 ] || { fail "kart.tmpfiles: only $n directories"; return 1; }
	chmod 0755 "$T_ROOT/var" "$T_ROOT/var/spool"
}

# shared_spool: the accounts and a fresh shared spool $S.
shared_spool() { users_make && tmpfiles_spool; }

# llm_kind PORT: the [kind.llm] section of a kart.conf whose endpoint is
# the fake one (tests/fake/llm-endpoint.py) listening on 127.0.0.1:PORT,
# run by us (endpoint_uid: the forwarder sends the key to our port alone).
llm_kind() {
	cat <<EOF
[kind.llm]
extensions = .prompt
net = yes
credentials = KART_LLM_API_KEY
endpoint = http://127.0.0.1:$1/v1
endpoint_uid = $(id -u)
model = mock-model
EOF
}

# Each case prints its time ("    (Ns)") after it: where make check's
# minutes go, case by case.
run_tests() {
	local f t0
	for f in $(declare -F | awk '{print $3}' | grep '^test_'); do
		# KART_TEST_CASE="a b": only the named cases (without test_).
		case " ${KART_TEST_CASE:-${f#test_}} " in *" ${f#test_} "*) ;; *) continue ;; esac
		_T_FAILED=0
		echo "  - ${f#test_}"
		t0=$SECONDS
		$f
		echo "    ($((SECONDS - t0))s)"
		case $_T_FAILED in
		0) echo "PASS $f" >>"$KART_TEST_RESULTS" ;;
		2) echo "SKIP $f" >>"$KART_TEST_RESULTS" ;;
		*) echo "FAIL $f" >>"$KART_TEST_RESULTS"; echo "  x ${f#test_} FAILED" ;;
		esac
	done
}

# Every command the tests run (tests/commands) is here, or each missing one
# fails by its package's name ("contrib/install-deps lacks attr (for
# getfattr)"), before a test meets a shell's "not found" deep inside a
# task. The tests that do not need it still run. tests/run checks once for
# all the scripts (tests/deps-guard) and sets KART_NEED_CHECKED.
if [ -z "${KART_NEED_CHECKED:-}" ]; then
	while IFS= read -r _need; do
		echo "    FAIL: $_need" >&2
		echo "FAIL need: $_need" >>"${KART_TEST_RESULTS:-/dev/stdout}"
	done < <("$ROOT/tests/need" tests)
	unset _need
fi

# readme_block NAME: the ```sh block after <!-- ops: NAME --> in README.md
# (the walkthroughs ops.sh and firsthour.sh run as typed).
readme_block() {
	awk -v m="<!-- ops: $1 -->" '
		$0 == m { found = 1; next }
		found && /^```sh$/ { inblock = 1; next }
		inblock && /^```$/ { exit }
		inblock { print }' "$ROOT/README.md"
}
