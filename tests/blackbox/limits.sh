#!/bin/bash
# Black-box: memory, pids and cpu limits enforced for real by the task's
# cgroup leaf, through the real worker; the leaf kills daemonized
# grandchildren and goes away with its task (without blocking the loop);
# a limit that cannot be set up (or a leaf that cannot be joined) refuses
# the task. [limits] cgroup = require|auto|off, defaults and ceilings from
# kart.conf, the rlimit fallback and the rlimits every task gets, the PID
# namespace taking the tree down without a cgroup, a dead worker's leaves
# killed before its claims are re-queued, and the cgroup facts of kart
# doctor and kart setup-cgroup.
. "$(dirname "$0")/../lib.sh"

# ---- local helpers ---------------------------------------------------------

# What sandbox.cgroup must say on this host.
host_mode() { [ -e /sys/fs/cgroup/cgroup.controllers ] && echo v2 || echo v1; }

have_cgroups() {
	[ "$(id -u)" = 0 ] || { skip "needs root or a delegated cgroup"; return 1; }
	[ -e /sys/fs/cgroup/cgroup.controllers ] || [ -d /sys/fs/cgroup/memory ] ||
		{ skip "no cgroup filesystem at /sys/fs/cgroup"; return 1; }
}

have_sandbox() {
	have_bwrap || { skip "bwrap cannot build a sandbox here"; return 1; }
	have_cgroups
}

# Leaf directories of the worker with pid $1, in every hierarchy.
leaves_of() { find /sys/fs/cgroup -maxdepth 6 -type d -name "kart.$1.*" 2>/dev/null; }

has_result() { [ -e "$1/done/$2.json" ]; }

# drain_pid SPOOL [ENV=VAL...]: a --drain worker in the background; sets
# DPID to its pid (leaf names carry it), waits for its end.
drain_pid() {
	local s=$1; shift
	env "$@" "$KART" -s "$s" worker --drain >>"$s.worker.log" 2>&1 &
	DPID=$!
	T_PIDS+=("$DPID")
	local end=$((SECONDS + 120))
	while kill -0 "$DPID" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.05; done
	wait "$DPID" || fail "worker --drain exited $? (log: $(tail -3 "$s.worker.log"))"
}

# A sleep no other test runs: a marker for pgrep.
marker() { echo $((4000000 + RANDOM * 32 + $$ % 32)); }

# ---- memory ------------------------------------------------------------------

test_memory_hog_is_oom() {
	have_sandbox || return
	local s; s=$(mkspool)
	# tail keeps everything it reads when no newline comes.
	printf '#!/bin/sh\n#kart: memory=64M timeout=60s\nhead -c 512M /dev/zero | tail\n' \
		>"$s/new/hog"
	printf '#!/bin/sh\necho next\n' >"$s/new/next"
	drain_pid "$s"
	has_result "$s" hog || { fail "no result for hog"; return; }
	assert_eq oom "$(field "$s" hog .status)" "status of a 64M task allocating 512M"
	assert_eq "$(host_mode)" "$(field "$s" hog .sandbox.cgroup)" sandbox.cgroup
	assert_eq 67108864 "$(field "$s" hog .limits.memory_bytes)" limits.memory_bytes
	local peak; peak=$(field "$s" hog .usage.memory_peak_bytes)
	[[ $peak =~ ^[0-9]+$ ]] && [ "$peak" -gt 0 ] && [ "$peak" -le $((64 << 20)) ] ||
		fail "usage.memory_peak_bytes '$peak' not within (0, 64M]"
	assert_match 'memory limit' "$(field "$s" hog .error)" "error names the limit"
	# The worker went on.
	assert_eq ok "$(field "$s" next .status)" "the task after the hog"
	assert_eq "" "$(leaves_of "$DPID")" "leaves left after the run"
}

# A task that stays under its limit is not oom, and its peak is measured.
test_memory_under_limit_ok() {
	have_sandbox || return
	local s; s=$(mkspool)
	printf '#!/bin/sh\n#kart: memory=256M\nhead -c 32M /dev/zero | tail | wc -c\n' >"$s/new/small"
	drain_pid "$s"
	assert_eq ok "$(field "$s" small .status)" status
	assert_eq "33554432" "$(tr -d ' \n' <"$s/done/small.stdout")" "output"
	local peak; peak=$(field "$s" small .usage.memory_peak_bytes)
	[[ $peak =~ ^[0-9]+$ ]] && [ "$peak" -ge $((32 << 20)) ] ||
		fail "usage.memory_peak_bytes '$peak' below the 32M held"
}

# The two paths side by side: each test below runs on this host (v1, or
# hybrid) in make check and on a pure v2 host in the v2 tier (tests/vm),
# and says what each mode must give.

# "oom" is the kernel's count of OOM kills in the task's leaf (v2:
# memory.events, v1: memory.oom_control), never a guess from the way the
# task ended: a task under a memory limit that SIGKILLs itself, or exits
# with 137, is not oom.
test_oom_only_on_the_kernels_word() {
	have_sandbox || return
	local s; s=$(mkspool)
	printf '#!/bin/sh\n#kart: memory=64M timeout=120s\nhead -c 512M /dev/zero | tail\n' >"$s/new/hog"
	printf '#!/bin/sh\n#kart: memory=64M\nkill -9 $$\n' >"$s/new/selfkill"
	printf '#!/bin/sh\n#kart: memory=64M\nexit 137\n' >"$s/new/exit137"
	drain_pid "$s"
	assert_eq oom "$(field "$s" hog .status)" "a 64M task allocating 512M"
	assert_eq "$(host_mode)" "$(field "$s" hog .sandbox.cgroup)" "hog: sandbox.cgroup"
	assert_match 'the kernel killed [1-9][0-9]* process' "$(field "$s" hog .error)" \
		"the error gives the kernel's count"
	assert_eq killed "$(field "$s" selfkill .status)" "SIGKILL under a memory limit, no OOM"
	assert_eq SIGKILL "$(field "$s" selfkill .signal)" "its signal"
	assert_eq failed "$(field "$s" exit137 .status)" "exit 137 under a memory limit, no OOM"
	assert_eq 137 "$(field "$s" exit137 .exit_code)" "its exit code"
}

# memory_peak_bytes with and without a limit. Two processes hold 24M each
# at once. With a limit the leaf's memory controller counts them together
# (v2 memory.peak, v1 memory.max_usage_in_bytes): at least 48M. Without a
# memory= line the same: a v2 leaf has the controller (enabled for every
# leaf), and on v1 every task gets a memory leaf of its own ([limits]
# leaf_memory, on by default), so the figure is the leaf's, never the
# largest single process's (which would be below 48M).
test_memory_peak_with_and_without_limit() {
	have_cgroups || return
	local s t; s=$(mkspool)
	t='for i in 1 2; do dd if=/dev/zero bs=24M count=1 2>/dev/null | sleep %s & done; wait\n'
	printf "#!/bin/sh\n#kart: memory=256M\n$t" "$(slow 3)" >"$s/new/limited"
	printf "#!/bin/sh\n$t" "$(slow 3)" >"$s/new/unlimited"
	drain_pid "$s" KART_BACKEND=none
	local lp up; lp=$(field "$s" limited .usage.memory_peak_bytes)
	up=$(field "$s" unlimited .usage.memory_peak_bytes)
	assert_eq ok "$(field "$s" limited .status)" "limited: status"
	assert_eq ok "$(field "$s" unlimited .status)" "unlimited: status"
	[[ $lp =~ ^[0-9]+$ && $up =~ ^[0-9]+$ ]] || { fail "peaks not numbers: '$lp' '$up'"; return; }
	[ "$lp" -ge $((48 << 20)) ] && [ "$lp" -le $((256 << 20)) ] ||
		fail "with a limit: memory_peak_bytes $lp not within [48M, 256M]"
	[ "$up" -ge $((48 << 20)) ] && [ "$up" -le $((512 << 20)) ] ||
		fail "$(host_mode), without memory=: memory_peak_bytes $up not within [48M, 512M] (the leaf's)"
}

# cgroup.kill against the kill loop of kernels without it: a task leaves
# a daemon in its leaf (backend none: no PID namespace to end it). The
# first leaf is emptied by cgroup.kill; for the second, strace makes the
# first open of its cgroup.kill fail, and the worker falls back to
# freezing the leaf (v2 cgroup.freeze; v1 freezer.state, and cgroup.freeze
# of the unified leaf where there is one), killing what it lists, and
# thawing. Both daemons are gone when their results are there. Each task
# waits for the test to have found its leaf (the daemon's, from the pool)
# and to have strace watch it.
# trace_worker LOG ARGS...: strace on the worker's openat calls; sets SP.
trace_worker() {
	local log=$1; shift
	strace -f -qq -o "$log" -p "$WPID" -e trace=openat "$@" &
	SP=$!
	T_PIDS+=("$SP")
	wait_until 10 traced_by "$WPID"
}
untrace_worker() {
	kill "$SP" 2>/dev/null; wait "$SP" 2>/dev/null
	wait_until 10 eval '! traced_by "$WPID"'
}
test_kill_loop_without_cgroup_kill() {
	have_cgroups || return
	command -v strace >/dev/null || { skip "no strace for fault injection"; return; }
	local s m cg u f pid i l=(); s=$(mkspool); m=$(marker)
	KART_BACKEND=none KART_LANDLOCK=off start_worker "$s"
	for i in 1 2; do
		printf '#!/bin/sh\n#kart: pids=50\nsetsid sleep %s </dev/null >/dev/null 2>&1 &\n' "$((m + i))" >"$s/tmp/d$i"
		printf 'until [ -e %s ]; do sleep 0.05; done\n' "$s.go$i" >>"$s/tmp/d$i"
		mv "$s/tmp/d$i" "$s/new/d$i"
		wait_until 10 eval 'pid=$(pgrep -f "^sleep $((m + i))\$")' ||
			{ fail "d$i: the daemon never started"; stop_worker "$WPID"; return; }
		cg=$(sed -n 's/^0:://p' "/proc/$pid/cgroup")
		if [ "$(host_mode)" = v2 ]; then u=/sys/fs/cgroup$cg f=$u; else
			u=/sys/fs/cgroup/unified$cg
			f=/sys/fs/cgroup/freezer$(sed -n 's/^[0-9]*:freezer://p' "/proc/$pid/cgroup")
		fi
		l[i]=${cg##*/}
		if [ $i = 1 ]; then
			trace_worker "$s.strace$i" -P "$u/cgroup.kill"
		else
			trace_worker "$s.strace$i" -P "$u/cgroup.kill" -P "$u/cgroup.freeze" \
				-P "$f/freezer.state" -e inject=openat:error=EACCES:when=1
		fi || { fail "strace never attached"; untrace_worker; stop_worker "$WPID"; return; }
		touch "$s.go$i"
		wait_until 30 has_result "$s" "d$i" || fail "no result for d$i"
		untrace_worker
		assert_eq ok "$(field "$s" "d$i" .status)" "d$i: status"
	done
	local left; left=$(pgrep -f "^sleep ($((m + 1))|$((m + 2)))\$")
	[ -z "$left" ] || { fail "a daemon outlived its task: $left"; kill -9 $left; }
	grep -q "${l[1]}/cgroup.kill\", O_WRONLY|O_CLOEXEC) = [0-9]" "$s.strace1" ||
		fail "the first leaf was not emptied by cgroup.kill: $(head -5 "$s.strace1")"
	grep -q "${l[2]}/cgroup.kill.*(INJECTED)" "$s.strace2" ||
		fail "the second leaf's cgroup.kill never failed (test premise): $(head -5 "$s.strace2")"
	grep -qE "${l[2]}/(cgroup.freeze|freezer.state)\", O_WRONLY\|O_CLOEXEC\) = [0-9]" "$s.strace2" ||
		fail "the second leaf was never frozen by the kill loop: $(cat "$s.strace2")"
	stop_worker "$WPID"
	assert_eq "" "$(leaves_of "$WPID")" "leaves left"
}

# An unprivileged worker (nobody) with no cgroup delegated to it, on any
# host: it cannot make a leaf, so a task asking for memory= is refused
# (never run uncapped), and a plain task runs without a leaf and says so.
test_unprivileged_worker_without_delegation() {
	[ "$(id -u)" = 0 ] || { skip "needs root (to start a worker as nobody)"; return; }
	command -v setpriv >/dev/null || { skip "setpriv (util-linux) is missing"; return; }
	have_bwrap || { skip "bwrap cannot build a sandbox here"; return; }
	local s bin=$T_ROOT/nobody-bin; s=$(mkspool); open_spool "$s"
	# Where nobody can run them (kart finds kart-launch beside it).
	mkdir -p "$bin" && cp "$KART" "$KART_BUILD/kart-launch" "$bin/" && chmod 755 "$bin"
	printf '#!/bin/sh\n#kart: memory=64M\necho ran\n' >"$s/new/mem"
	printf '#!/bin/sh\necho ran\n' >"$s/new/plain"
	chown -R nobody "$s"
	timeout "$(slow 120)" setpriv --reuid=nobody --regid=nogroup --clear-groups -- \
		"$bin/kart" -s "$s" worker --drain >>"$s.worker.log" 2>&1 ||
		{ fail "the worker as nobody exited $? ($(tail -3 "$s.worker.log"))"; return; }
	assert_eq refused "$(field "$s" mem .status)" "memory= with no writable cgroup"
	assert_eq cgroup_setup_failed "$(field "$s" mem .refusal)" "its refusal"
	assert_eq null "$(field "$s" mem .stdout.path)" "it never ran"
	assert_eq ok "$(field "$s" plain .status)" "a plain task ($(field "$s" plain .error))"
	assert_eq none "$(field "$s" plain .sandbox.cgroup)" "its sandbox.cgroup"
	assert_eq ran "$(cat "$s/done/plain.stdout")" "its output"
}

# ---- pids --------------------------------------------------------------------

test_fork_bomb_contained() {
	have_sandbox || return
	local s; s=$(mkspool)
	# A timeout long enough (times KART_TEST_SLOW) that the bomb still
	# runs when it is looked at, even in the v2 tier's emulated guest on a
	# busy host; it is cancelled once looked at.
	cat >"$s/new/bomb" <<EOT
#!/bin/sh
#kart: pids=32 timeout=$(slow 15)s
bomb() { bomb | bomb & }
bomb
while :; do :; done
EOT
	start_worker "$s"
	wait_until 10 is_running "$s" bomb || { fail "bomb never ran"; return; }
	# While it runs: its pids leaf holds it at 32, and it did push.
	# (The one the bomb is in: the pool holds others, empty.) Waited for,
	# not slept for: in the emulated guest the bomb takes its time.
	local d max cur events
	bomb_leaf() {
		leaves_of "$WPID" | while read -r x; do
			[ -e "$x/pids.max" ] && [ "$(cat "$x/pids.current")" -gt 1 ] &&
				[ "$(sed -n 's/^max //p' "$x/pids.events")" -gt 0 ] && echo "$x"; done | head -1
	}
	has_bomb_leaf() { [ -n "$(bomb_leaf)" ]; }
	wait_until 30 has_bomb_leaf 2>/dev/null || true
	d=$(bomb_leaf)
	[ -n "$d" ] || d=$(leaves_of "$WPID" | while read -r x; do
		[ -e "$x/pids.max" ] && [ "$(cat "$x/pids.current")" -gt 1 ] && echo "$x"; done | head -1)
	if [ -z "$d" ]; then
		fail "no pids leaf for worker $WPID while the bomb runs"
	else
		max=$(cat "$d/pids.max"); cur=$(cat "$d/pids.current")
		events=$(sed -n 's/^max //p' "$d/pids.events")
		assert_eq 32 "$max" "pids.max of the leaf"
		[ "$cur" -le 32 ] || fail "pids.current $cur above 32"
		[ "${events:-0}" -gt 0 ] || fail "pids.events max=${events:-?}: the bomb never hit the limit"
	fi
	# (On a starved guest its timeout may have come first.)
	"$KART" -s "$s" cancel bomb >/dev/null 2>&1 || has_result "$s" bomb || fail "kart cancel of the bomb"
	wait_until 20 has_result "$s" bomb || { fail "no result for the bomb"; return; }
	assert_ne ok "$(field "$s" bomb .status)" "status of the fork bomb"
	assert_eq 32 "$(field "$s" bomb .limits.pids)" limits.pids
	kill -0 "$WPID" 2>/dev/null || { fail "the worker died with the bomb"; return; }
	printf '#!/bin/sh\necho after\n' >"$s/tmp/next" && mv "$s/tmp/next" "$s/new/next"
	wait_until 20 has_result "$s" next || { fail "the task after the bomb never ended"; return; }
	assert_eq ok "$(field "$s" next .status)" "the task after the bomb"
	assert_eq after "$(cat "$s/done/next.stdout")" "its output"
	kill -TERM "$WPID"
	wait "$WPID"
	assert_eq "" "$(leaves_of "$WPID")" "leaves left after the bomb"
}

# ---- cpu ---------------------------------------------------------------------

test_cpu_quota() {
	have_sandbox || return
	local s; s=$(mkspool)
	cat >"$s/new/spin" <<'EOT'
#!/usr/bin/env python3
#kart: cpu=0.25
import time
end = time.time() + 4
while time.time() < end:
    pass
EOT
	drain_pid "$s"
	assert_eq ok "$(field "$s" spin .status)" "status"
	assert_eq 0.25 "$(field "$s" spin .limits.cpu)" limits.cpu
	local u sy d
	u=$(field "$s" spin .usage.cpu_user_ms); sy=$(field "$s" spin .usage.cpu_system_ms)
	d=$(field "$s" spin .duration_ms)
	[[ $u =~ ^[0-9]+$ && $sy =~ ^[0-9]+$ && $d =~ ^[0-9]+$ ]] ||
		{ fail "usage/duration not numbers: user=$u system=$sy duration=$d"; return; }
	[ "$d" -ge 4000 ] || fail "duration_ms $d: it did not spin 4 s"
	# At most ~30% of the wall time; and it did use its share.
	[ $(((u + sy) * 100)) -le $((35 * d)) ] ||
		fail "cpu=0.25 used $((u + sy)) ms of CPU in $d ms (more than 35%)"
	[ $(((u + sy) * 100)) -ge $((10 * d)) ] ||
		fail "cpu=0.25 used only $((u + sy)) ms in $d ms: usage not measured?"
}

# ---- stragglers and leaves -----------------------------------------------------

# A daemonized grandchild (own session, reparented away) of a task that
# ends ok, and of one that times out, is gone when the result is there.
# Backend none has no PID namespace: there only the cgroup can do it.
daemon_case() { # BACKEND
	local s m1 m2; s=$(mkspool); m1=$(marker); m2=$((m1 + 1))
	printf '#!/bin/sh\nsetsid sleep %s </dev/null >/dev/null 2>&1 &\necho started\n' "$m1" \
		>"$s/new/okd"
	printf '#!/bin/sh\n#kart: timeout=2s\nsetsid sleep %s </dev/null >/dev/null 2>&1 &\nsleep 100\n' \
		"$m2" >"$s/new/tod"
	drain_pid "$s" KART_BACKEND="$1"
	assert_eq ok "$(field "$s" okd .status)" "$1: status of the daemonizing task"
	assert_eq timeout "$(field "$s" tod .status)" "$1: status of the timed-out task"
	assert_eq "$(host_mode)" "$(field "$s" okd .sandbox.cgroup)" "$1: sandbox.cgroup"
	local left; left=$(pgrep -f "^sleep ($m1|$m2)\$")
	[ -z "$left" ] || { fail "$1: daemonized grandchildren survived: $left"; kill -9 $left; }
	assert_eq "" "$(leaves_of "$DPID")" "$1: leaves left after the run"
}

test_daemon_gone_backend_none() {
	have_cgroups || return
	daemon_case none
}

test_daemon_gone_backend_bwrap() {
	have_sandbox || return
	daemon_case bwrap
}

# Without a cgroup (cgroup = off) bwrap's PID namespace still takes the
# whole tree down with the task: its init dies, and the kernel kills
# every process left in the namespace.
test_daemon_gone_without_cgroup() {
	have_bwrap || { skip "bwrap cannot build a sandbox here"; return; }
	local s m1 m2; s=$(mkspool); m1=$(marker); m2=$((m1 + 1))
	printf '#!/bin/sh\nsetsid sleep %s </dev/null >/dev/null 2>&1 &\necho started\n' "$m1" \
		>"$s/new/okd"
	printf '#!/bin/sh\n#kart: timeout=2s\nsetsid sleep %s </dev/null >/dev/null 2>&1 &\nsleep 100\n' \
		"$m2" >"$s/new/tod"
	drain_pid "$s" KART_CGROUP=off
	assert_eq ok "$(field "$s" okd .status)" "status of the daemonizing task"
	assert_eq timeout "$(field "$s" tod .status)" "status of the timed-out task"
	assert_eq none "$(field "$s" okd .sandbox.cgroup)" "sandbox.cgroup under cgroup = off"
	assert_eq bwrap "$(field "$s" okd .sandbox.backend)" "sandbox.backend"
	local left; left=$(pgrep -f "^sleep ($m1|$m2)\$")
	[ -z "$left" ] || { fail "daemonized grandchildren survived: $left"; kill -9 $left; }
}

# Cancel and shutdown end a task through the same leaf.
test_daemon_gone_cancel_and_shutdown() {
	have_cgroups || return
	local s m1 m2; s=$(mkspool); m1=$(marker); m2=$((m1 + 1))
	printf '#!/bin/sh\nsetsid sleep %s </dev/null >/dev/null 2>&1 &\nsleep 100\n' "$m1" \
		>"$s/new/victim"
	KART_BACKEND=none KART_TERM_GRACE=0 start_worker "$s"
	wait_until 10 is_running "$s" victim || { fail "victim never ran"; return; }
	wait_until 5 pgrep -f "^sleep $m1\$" >/dev/null || fail "the daemon never started"
	"$KART" -s "$s" cancel victim >/dev/null || fail "kart cancel"
	wait_until 10 has_result "$s" victim || { fail "no result after cancel"; return; }
	assert_eq cancelled "$(field "$s" victim .status)" "status after cancel"
	local left; left=$(pgrep -f "^sleep $m1\$")
	[ -z "$left" ] || { fail "cancel: the daemon survived: $left"; kill -9 $left; }

	printf '#!/bin/sh\nsetsid sleep %s </dev/null >/dev/null 2>&1 &\nsleep 100\n' "$m2" \
		>"$s/tmp/t2" && mv "$s/tmp/t2" "$s/new/stopped"
	wait_until 10 is_running "$s" stopped || { fail "second task never ran"; return; }
	wait_until 5 pgrep -f "^sleep $m2\$" >/dev/null || fail "the second daemon never started"
	kill -TERM "$WPID"
	wait "$WPID"
	left=$(pgrep -f "^sleep $m2\$")
	[ -z "$left" ] || { fail "shutdown: the daemon survived: $left"; kill -9 $left; }
	assert_eq "" "$(leaves_of "$WPID")" "leaves left after cancel and shutdown"
}

# A worker killed -9 leaves its leaves (and, without a PID namespace, a
# daemon in them); the next worker to start a task kills and removes them.
test_dead_worker_leaves_swept() {
	have_cgroups || return
	local s m old; s=$(mkspool); m=$(marker)
	printf '#!/bin/sh\n#kart: retries=0\nsetsid sleep %s </dev/null >/dev/null 2>&1 &\nsleep 100\n' \
		"$m" >"$s/new/orphan"
	KART_BACKEND=none start_worker "$s"
	old=$WPID
	wait_until 10 is_running "$s" orphan || { fail "orphan never ran"; return; }
	wait_until 5 pgrep -f "^sleep $m\$" >/dev/null || { fail "the daemon never started"; return; }
	kill -9 "$old"
	wait "$old" 2>/dev/null
	[ -n "$(leaves_of "$old")" ] || fail "no leaves left by the killed worker (test premise)"
	pgrep -f "^sleep $m\$" >/dev/null || fail "the daemon died with its worker (test premise)"
	printf '#!/bin/sh\necho next\n' >"$s/new/next"
	drain_pid "$s" KART_BACKEND=none
	assert_eq ok "$(field "$s" next .status)" "the next worker's task"
	assert_eq lost "$(field "$s" orphan .status)" "the dead worker's task"
	local left; left=$(pgrep -f "^sleep $m\$")
	[ -z "$left" ] || { fail "the dead worker's daemon survived: $left"; kill -9 $left; }
	assert_eq "" "$(leaves_of "$old")" "leaves of the dead worker"
}

# The leaves exist while tasks run (this test sees them). After the tasks,
# what is left is the pool's: every leaf empty, at most two per slot; and
# nothing once the worker is gone.
test_leaves_removed() {
	have_cgroups || return
	local s l n=0; s=$(mkspool)
	printf '#!/bin/sh\nsleep 2\n' >"$s/new/a"
	printf '#!/bin/sh\nexit 3\n' >"$s/new/b"
	KART_BACKEND=none start_worker "$s"
	wait_until 10 is_running "$s" a || { fail "a never ran"; return; }
	local during; during=$(leaves_of "$WPID")
	[ -n "$during" ] || fail "no leaf for worker $WPID while a task runs"
	wait_until 20 has_result "$s" a || fail "no result for a"
	wait_until 20 has_result "$s" b || fail "no result for b"
	assert_eq failed "$(field "$s" b .status)" "status of exit 3"
	for l in $(leaves_of "$WPID"); do
		[ -z "$(cat "$l/cgroup.procs")" ] || fail "a leaf still holds a process after the tasks: $l"
		case $l in /sys/fs/cgroup/pids/*) ;; *) n=$((n + 1)) ;; esac
	done
	# 3 fast slots and 1 batch slot: 8 leaves at most, in two v1
	# hierarchies and the unified one (v2: one).
	[ "$n" -le 24 ] || fail "$n leaf directories for 4 slots"
	stop_worker "$WPID"
	assert_eq "" "$(leaves_of "$WPID")" "leaves left after the worker"
}

# ---- leaves reused --------------------------------------------------------
#
# A leaf goes back to the worker's pool after its run and serves the next
# run (cg_leaf_renew), with its limits rewritten where they differ. The
# tasks below are run one at a time on one slot (run_next): the leaf of
# the last run, renewed, is the one the next task takes unless a leaf
# with its very limits is ready, so each test says which task it expects
# in which task's leaf, and checks it. Their shells use builtins alone
# (one process), so that a leaf is reused on v2 too, where pids.peak
# cannot be reset and a leaf that held more than one process is not.

# READ_LEAF: lines of sh, builtins alone, that print the name of the
# task's leaf (its unified one on a hybrid host), then "memory N" and
# "pids N": the limits in its own leaf's files.
READ_LEAF='while IFS=: read -r n c p; do case $c in
memory) m=/sys/fs/cgroup/memory$p/memory.limit_in_bytes ;; pids) q=/sys/fs/cgroup/pids$p/pids.max ;; "") u=$p ;;
esac; done </proc/self/cgroup
if [ -e /sys/fs/cgroup/cgroup.controllers ]; then m=/sys/fs/cgroup$u/memory.max q=/sys/fs/cgroup$u/pids.max; fi
echo "${u##*/}"; read -r v <"$m"; echo "memory $v"; read -r v <"$q"; echo "pids $v"'

# reuse_worker: a worker on one slot, backend none, Landlock off (the
# tasks read /sys); sets RS (its spool) and WPID.
reuse_worker() {
	RS=$(mkspool)
	KART_BACKEND=none KART_LANDLOCK=off start_worker "$RS" --slots 1 --batch-slots 1
}

# run_next ID LINES...: queue task ID (#!/bin/sh, then LINES), wait for
# its result.
run_next() {
	local id=$1; shift
	printf '#!/bin/sh\n' >"$RS/tmp/$id"
	printf '%s\n' "$@" >>"$RS/tmp/$id"
	mv "$RS/tmp/$id" "$RS/new/$id"
	wait_until 60 has_result "$RS" "$id" || fail "no result for $id"
	# The leaf goes back to the pool after the result, renewed by the
	# pool's thread; the next task takes the newest ready leaf. A moment
	# for the renewal, or the next one may take another leaf of the pool
	# (in_leaf_of's premise): 2 s where leaves are reused (0.5 s was too
	# short once under make check's load, after a task that held 128M).
	if [ -z "${RN_WAIT:-}" ]; then
		RN_WAIT=0.5
		leaves_reused && RN_WAIT=2
	fi
	sleep "$RN_WAIT"
}

# leaf_of ID: the name of the leaf task ID ran in (its first line).
leaf_of() { head -1 "$RS/done/$1.stdout" 2>/dev/null; }

# Does this kernel let a leaf be reused? v1: yes. v2: only where a
# memory.peak can be reset (Linux 6.12; the v2 tier's guest runs an older
# one): there every task gets a new leaf, made ahead of time.
leaves_reused() {
	[ "$(host_mode)" = v1 ] && return 0
	local d=/sys/fs/cgroup/kart-probe.$$ r=1
	mkdir "$d" 2>/dev/null || return 1
	{ echo reset >"$d/memory.peak"; } 2>/dev/null && r=0
	rmdir "$d"
	return $r
}

# in_leaf_of A B: task B ran in the leaf task A ran in, where leaves are
# reused (else in another: a new one).
in_leaf_of() {
	[ -n "$(leaf_of "$1")" ] || { fail "$1 did not print its leaf"; return 1; }
	if ! leaves_reused; then
		[ "$(leaf_of "$1")" != "$(leaf_of "$2")" ] ||
			fail "$2 ran in $1's leaf, which this kernel cannot renew: $(leaf_of "$2")"
		return 0
	fi
	[ "$(leaf_of "$1")" = "$(leaf_of "$2")" ] ||
		{ fail "$2 did not get $1's leaf (test premise): $(leaf_of "$1") then $(leaf_of "$2")"; return 1; }
}

# A reused leaf reports the run's own peaks, not those of the run before:
# memory (v1: memory.max_usage_in_bytes written 0; v2: memory.peak reset
# through the descriptor that reads it) and pids (never reset: a v1 leaf
# whose run had more than one process gets a new pids directory; on v2 such
# a leaf is not reused at all).
test_reused_leaf_reports_its_own_peaks() {
	have_cgroups || return
	reuse_worker
	# One process holding 96M (dd's buffer).
	run_next big "$READ_LEAF" 'exec dd if=/dev/zero of=/dev/null bs=96M count=1 2>/dev/null'
	run_next small "$READ_LEAF"
	# Twelve processes at once.
	run_next many "$READ_LEAF" 'for i in 1 2 3 4 5 6 7 8 9 10 11; do sleep 1 & done; wait'
	run_next small2 "$READ_LEAF"
	local t
	for t in big small many small2; do
		assert_eq ok "$(field "$RS" $t .status)" "$t: status ($(field "$RS" $t .error))"
	done
	local bp sp; bp=$(field "$RS" big .usage.memory_peak_bytes); sp=$(field "$RS" small .usage.memory_peak_bytes)
	[ "$bp" -ge $((96 << 20)) ] || fail "big: memory_peak_bytes $bp below the 96M it held"
	in_leaf_of big small &&
		{ [ "$sp" -lt $((16 << 20)) ] || fail "small, in big's leaf: memory_peak_bytes $sp (big's?)"; }
	assert_eq 1 "$(field "$RS" small .usage.pids_peak)" "small: pids_peak"
	local mp; mp=$(field "$RS" many .usage.pids_peak)
	[ "$mp" -ge 12 ] || fail "many: pids_peak $mp, below the 12 processes it ran"
	if [ "$(host_mode)" = v1 ]; then
		in_leaf_of many small2
	else
		[ "$(leaf_of many)" != "$(leaf_of small2)" ] ||
			fail "v2: small2 reused the leaf of a run of 12 processes (its pids.peak cannot be reset)"
	fi
	assert_eq 1 "$(field "$RS" small2 .usage.pids_peak)" "small2: pids_peak"
	stop_worker "$WPID"
	assert_eq "" "$(leaves_of "$WPID")" "leaves left"
}

# After an OOM kill, the next task in that slot is not oom: the leaf that
# held the kill is removed, never reused, and no count carries over.
test_oom_not_carried_to_the_next_task() {
	have_cgroups || return
	reuse_worker
	# One process growing without bound (tail keeps what has no newline).
	run_next hog '#kart: memory=64M' "$READ_LEAF" 'exec tail /dev/zero'
	assert_eq oom "$(field "$RS" hog .status)" "hog: status"
	local i
	for i in 1 2 3; do
		run_next next$i '#kart: memory=64M' "$READ_LEAF" 'exec dd if=/dev/zero of=/dev/null bs=8M count=1 2>/dev/null'
		assert_eq ok "$(field "$RS" next$i .status)" "next$i, after the OOM: status ($(field "$RS" next$i .error))"
		[ "$(leaf_of next$i)" != "$(leaf_of hog)" ] || fail "next$i ran in the leaf that held the OOM kill"
	done
	in_leaf_of next1 next2
	stop_worker "$WPID"
}

# A leaf reused by a task with other limits holds that task's limits, in
# its files and in what the kernel does: memory up (128M held under 256M,
# in the leaf of a 64M task), memory down (128M under 48M is an OOM kill,
# in the leaf of the 256M task), pids down (8 forks under 4, in the leaf
# of a task of 200: refused) and up (8 forks under 300, in the leaf of a
# task of 5).
test_limits_not_carried_between_tasks() {
	have_cgroups || return
	reuse_worker
	local dd='exec dd if=/dev/zero of=/dev/null bs=128M count=1 2>/dev/null'
	local forks='for i in 1 2 3 4 5 6 7 8; do sleep 1 & done; wait'
	run_next lo '#kart: memory=64M pids=20' "$READ_LEAF"
	run_next hi '#kart: memory=256M pids=200' "$READ_LEAF" "$dd"
	run_next lo2 '#kart: memory=48M pids=200' "$READ_LEAF" "$dd"
	run_next pa '#kart: memory=256M pids=200' "$READ_LEAF"
	run_next pd '#kart: memory=256M pids=4' "$READ_LEAF" "$forks"
	run_next pb '#kart: memory=256M pids=5' "$READ_LEAF"
	run_next pc '#kart: memory=256M pids=300' "$READ_LEAF" "$forks"
	local t want
	for t in lo:64M:20 hi:256M:200 lo2:48M:200 pa:256M:200 pd:256M:4 pb:256M:5 pc:256M:300; do
		IFS=: read -r t m p <<<"$t"
		want=$((${m%M} << 20))
		assert_eq "memory $want" "$(sed -n 2p "$RS/done/$t.stdout")" "$t: memory limit in its leaf"
		assert_eq "pids $p" "$(sed -n 3p "$RS/done/$t.stdout")" "$t: pids limit in its leaf"
	done
	in_leaf_of lo hi
	assert_eq ok "$(field "$RS" hi .status)" "hi: 128M under 256M, in lo's leaf (64M)"
	in_leaf_of hi lo2
	assert_eq oom "$(field "$RS" lo2 .status)" "lo2: 128M under 48M, in hi's leaf (256M)"
	in_leaf_of pa pd
	grep -qi "fork" "$RS/done/pd.stderr" 2>/dev/null ||
		fail "pd: pids=4 in pa's leaf (200), yet 8 forks were not refused"
	in_leaf_of pb pc
	[ ! -s "$RS/done/pc.stderr" ] || fail "pc: pids=300 in pb's leaf (5), yet: $(head -2 "$RS/done/pc.stderr")"
	assert_eq ok "$(field "$RS" pc .status)" "pc: status"
	stop_worker "$WPID"
	assert_eq "" "$(leaves_of "$WPID")" "leaves left"
}

# A reused leaf's CPU times count from its own run: a task that burns
# about half a second of CPU, then one that does not, in its leaf.
test_reused_leaf_counts_cpu_from_its_run() {
	have_cgroups || return
	reuse_worker
	run_next burn "$READ_LEAF" 'i=0; while [ $i -lt 400000 ]; do i=$((i + 1)); done'
	run_next c "$READ_LEAF"
	in_leaf_of burn c
	local bu cu; bu=$(field "$RS" burn .usage.cpu_user_ms); cu=$(field "$RS" c .usage.cpu_user_ms)
	[ "$bu" -ge 150 ] || fail "burn: cpu_user_ms $bu, expected its loop's (>= 150)"
	# The leaf's total would be burn's and more. Not a fixed bound: under
	# software emulation c's own shell takes 40 ms, and more under load.
	[ $((cu * 2)) -lt "$bu" ] || fail "c: cpu_user_ms $cu, burn's $bu: c counts burn's time too (the leaf's total)"
	stop_worker "$WPID"
	assert_eq "" "$(leaves_of "$WPID")" "leaves left"
}

# A leaf that had to be killed (its task left a process behind) is not
# reused: a process born into a leaf that was once sent cgroup.kill is
# killed at birth by this kernel. Nor one whose task was paused (frozen).
test_killed_leaf_not_kept() {
	have_cgroups || return
	reuse_worker
	run_next daemon "$READ_LEAF" 'sleep 300 &'
	run_next last "$READ_LEAF" 'echo ran'
	assert_match "ran" "$(cat "$RS/done/last.stdout")" "last ran"
	[ "$(leaf_of daemon)" != "$(leaf_of last)" ] || fail "last ran in the daemon's leaf, which was killed"
	# Frozen by kart pause, thawed by kart resume: its leaf goes too.
	printf '#!/bin/sh\n%s\n%s\n' "$READ_LEAF" 'i=0; while [ $i -lt 300000 ]; do i=$((i + 1)); done' \
		>"$RS/tmp/paused" && mv "$RS/tmp/paused" "$RS/new/paused"
	wait_until 10 is_running "$RS" paused || { fail "paused never ran"; stop_worker "$WPID"; return; }
	"$KART" -s "$RS" pause paused >/dev/null || fail "kart pause"
	sleep 0.3
	"$KART" -s "$RS" resume paused >/dev/null || fail "kart resume"
	wait_until 60 has_result "$RS" paused || fail "no result for paused"
	assert_ne 0 "$(field "$RS" paused .paused_ms)" "paused: paused_ms (test premise)"
	run_next after "$READ_LEAF"
	[ "$(leaf_of paused)" != "$(leaf_of after)" ] || fail "after ran in the leaf of a paused task"
	stop_worker "$WPID"
}

# The pool's thread removes the leaves it cannot reuse, off the loop: an
# rmdir the kernel refuses for a moment (EBUSY while it lets go of the
# dead) is tried again, and nothing is left at the worker's exit. strace
# makes the first rmdir of the worker's life fail so; the task runs two
# processes at once, so that after it a directory goes (v1: its pids
# leaf, for a new one; v2: its leaf).
test_leaf_rmdir_busy_waited() {
	have_cgroups || return
	command -v strace >/dev/null || { skip "strace is missing"; return; }
	local s; s=$(mkspool)
	KART_BACKEND=none start_worker "$s"
	strace -f -qq -o "$s.strace" -e trace=rmdir -e inject=rmdir:error=EBUSY:when=1 -p "$WPID" &
	local sp=$!
	T_PIDS+=("$sp")
	wait_until 10 traced_by "$WPID" || { fail "strace never attached"; return; }
	printf '#!/bin/sh\n#kart: pids=50\nsleep 0.2 & wait\necho done\n' >"$s/tmp/b" && mv "$s/tmp/b" "$s/new/b"
	wait_until 20 has_result "$s" b || fail "no result for b"
	wait_until 10 grep -q 'rmdir(.*= 0$' "$s.strace" || fail "the rmdir was not tried again"
	kill "$sp"; wait "$sp" 2>/dev/null
	grep -q 'rmdir(.*EBUSY (Device or resource busy) (INJECTED)' "$s.strace" ||
		fail "no rmdir was made to fail (test premise): $(head -3 "$s.strace")"
	assert_eq ok "$(field "$s" b .status)" "status ($(field "$s" b .error))"
	stop_worker "$WPID"
	assert_eq "" "$(leaves_of "$WPID")" "leaves left after the retry"
}

# ---- refusal -----------------------------------------------------------------

# Where the leaf cannot be made, a task with a limit never runs without
# it; a task without limits runs, and says it had no cgroup.
test_refused_without_cgroup() {
	have_cgroups || return
	local s; s=$(mkspool)
	printf '#!/bin/sh\n#kart: memory=64M\necho ran\n' >"$s/new/mem"
	printf '#!/bin/sh\n#kart: pids=10\necho ran\n' >"$s/new/pids"
	printf '#!/bin/sh\necho ran\n' >"$s/new/plain"
	drain_pid "$s" KART_BACKEND=none KART_CGROUP_PARENT=/kart-no-such-parent-$$
	for t in mem pids; do
		assert_eq refused "$(field "$s" $t .status)" "$t: status with no cgroup"
		assert_eq cgroup_setup_failed "$(field "$s" $t .refusal)" "$t: refusal"
		assert_eq null "$(field "$s" $t .stdout.path)" "$t: never ran"
		assert_eq null "$(field "$s" $t .limits.memory_bytes)" "$t: no limit applied"
	done
	assert_match 'kart-no-such-parent' "$(field "$s" mem .error)" "the error names the parent"
	assert_eq ok "$(field "$s" plain .status)" "a task without limits"
	assert_eq none "$(field "$s" plain .sandbox.cgroup)" "its sandbox.cgroup"
	assert_eq ran "$(cat "$s/done/plain.stdout")" "its output"
}

# ---- [limits] cgroup = require | auto | off, and the rlimit fallback --------------

# A spool that nobody (uid 65534) can reach: a root worker runs nobody's
# task files as nobody, and bwrap (as nobody) binds them.
open_spool() { chmod 755 "$T_ROOT" "$1"; }

# Without a cgroup, pids= is RLIMIT_NPROC, set by kart-launch inside the
# sandbox. It binds a task that runs as nobody: of 100 forks, fewer than
# 32 succeed and the next one fails with EAGAIN. The kernel never applies
# RLIMIT_NPROC to uid 0 (even in bwrap's user namespace with every
# capability dropped: kart-launch probes it), so a root task asking for
# pids= is refused rather than run unbounded.
test_cgroup_off_pids_by_rlimit() {
	[ "$(id -u)" = 0 ] || { skip "needs root (to run a task as nobody)"; return; }
	have_bwrap || { skip "bwrap cannot build a sandbox here"; return; }
	local s; s=$(mkspool); open_spool "$s"
	cat >"$s/tmp/count" <<'EOT'
#!/usr/bin/env python3
#kart: pids=32 timeout=30s
import os, time
kids, err = [], None
for i in range(100):
    try:
        pid = os.fork()
    except OSError as e:
        err = e.errno
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    kids.append(pid)
print(len(kids), err)
for k in kids:
    os.kill(k, 9)
    os.waitpid(k, 0)
EOT
	cp "$s/tmp/count" "$s/tmp/root-count"
	chown nobody "$s/tmp/count"
	mv "$s/tmp/count" "$s/new/count"
	mv "$s/tmp/root-count" "$s/new/root-count"
	drain_pid "$s" KART_CGROUP=off
	assert_eq ok "$(field "$s" count .status)" "nobody's counting task ($(field "$s" count .error))"
	assert_eq none "$(field "$s" count .sandbox.cgroup)" "sandbox.cgroup under cgroup = off"
	assert_eq 32 "$(field "$s" count .limits.pids)" "limits.pids: RLIMIT_NPROC applied"
	local n e; read -r n e <"$s/done/count.stdout"
	[[ $n =~ ^[0-9]+$ ]] && [ "$n" -gt 0 ] && [ "$n" -lt 32 ] ||
		fail "forks that succeeded under pids=32: '$n' (not within 1..31)"
	assert_eq 11 "$e" "errno of the failing fork (EAGAIN)"
	assert_eq refused "$(field "$s" root-count .status)" "a root task asking pids= without a cgroup"
	assert_eq cgroup_setup_failed "$(field "$s" root-count .refusal)" "its refusal"
	assert_match 'root' "$(field "$s" root-count .error)" "the error says why (root)"
	assert_eq null "$(field "$s" root-count .stdout.path)" "it never ran"
	# Only once the limit is shown to hold: a real fork bomb, as nobody,
	# is contained, and the worker goes on to the next task.
	[ "${n:-100}" -lt 32 ] 2>/dev/null || return
	printf '#!/bin/sh\n#kart: pids=32 timeout=4s\nbomb() { bomb | bomb & }\nbomb\nsleep 2\necho survived\n' \
		>"$s/tmp/bomb"
	chown nobody "$s/tmp/bomb"; mv "$s/tmp/bomb" "$s/new/bomb"
	printf '#!/bin/sh\necho next\n' >"$s/tmp/next"; chown nobody "$s/tmp/next"
	mv "$s/tmp/next" "$s/new/next"
	drain_pid "$s" KART_CGROUP=off
	# Its own shell may die of a failed fork too (dash exits on one):
	# what matters is that it ended, within its limits, and that the
	# worker and the next task go on.
	assert_match '^(ok|failed|timeout)$' "$(field "$s" bomb .status)" "the fork bomb under RLIMIT_NPROC ($(field "$s" bomb .error))"
	assert_match 'fork' "$(cat "$s/done/bomb.stderr")" "the bomb's forks failed"
	assert_eq ok "$(field "$s" next .status)" "the task after the bomb"
}

# cpu= cannot fall back (no rlimit is a rate); memory= only with
# KART_RLIMIT_USE_AS=1, and then limits.memory_bytes says so.
test_cgroup_off_cpu_memory() {
	[ "$(id -u)" = 0 ] || { skip "needs root (to run a task as nobody)"; return; }
	local s; s=$(mkspool); open_spool "$s"
	printf '#!/bin/sh\n#kart: cpu=0.5\necho ran\n' >"$s/new/cpu"
	printf '#!/bin/sh\n#kart: memory=64M\necho ran\n' >"$s/new/mem"
	drain_pid "$s" KART_CGROUP=off KART_BACKEND=none
	for t in cpu mem; do
		assert_eq refused "$(field "$s" $t .status)" "$t= without a cgroup"
		assert_eq cgroup_setup_failed "$(field "$s" $t .refusal)" "$t: refusal"
	done
	assert_match 'rate' "$(field "$s" cpu .error)" "cpu: the error says why"
	assert_match 'KART_RLIMIT_USE_AS' "$(field "$s" mem .error)" "memory: the error says how"
	# With RLIMIT_AS allowed: 64M of address space; 512M cannot be had.
	printf '#!/usr/bin/env python3\n#kart: memory=64M\ntry:\n    b = bytearray(512 << 20)\n    print("got it")\nexcept MemoryError:\n    print("MemoryError")\n' \
		>"$s/tmp/as"; chown nobody "$s/tmp/as"; mv "$s/tmp/as" "$s/new/as"
	drain_pid "$s" KART_CGROUP=off KART_BACKEND=none KART_RLIMIT_USE_AS=1
	assert_eq ok "$(field "$s" as .status)" "memory= by RLIMIT_AS ($(field "$s" as .error))"
	assert_eq 67108864 "$(field "$s" as .limits.memory_bytes)" "limits.memory_bytes: RLIMIT_AS"
	assert_eq none "$(field "$s" as .sandbox.cgroup)" "sandbox.cgroup"
	assert_eq MemoryError "$(cat "$s/done/as.stdout")" "512M under a 64M RLIMIT_AS"
}

# The rlimits every task gets, read by the task itself from
# /proc/self/limits (kart-launch sets them inside the sandbox): core files
# 0, and with a timeout a CPU-time backstop of timeout x cores + 1 s. In a
# leaf, memory= is the cgroup's alone: no RLIMIT_AS. Without a cgroup,
# pids=N is RLIMIT_NPROC = N.
limit_of() { # FILE "Max ..." -> the soft limit
	awk -v k="$2" 'index($0, k) == 1 { print substr($0, length(k) + 1) }' "$1" | awk '{ print $1 }'
}
test_rlimits_inside_the_sandbox() {
	[ "$(id -u)" = 0 ] || { skip "needs root (to run a task as nobody)"; return; }
	have_sandbox || return
	local s n; s=$(mkspool); open_spool "$s"; n=$(getconf _NPROCESSORS_ONLN)
	printf '#!/bin/sh\n#kart: timeout=30s memory=256M\ncat /proc/self/limits\n' >"$s/new/leaf"
	printf '#!/bin/sh\ncat /proc/self/limits\n' >"$s/new/untimed"
	# The worker itself may dump core: what the task has is kart's doing.
	(ulimit -S -c unlimited 2>/dev/null || ulimit -S -c "$(ulimit -H -c)"; drain_pid "$s")
	assert_eq ok "$(field "$s" leaf .status)" "leaf: status ($(field "$s" leaf .error))"
	assert_eq "$(host_mode)" "$(field "$s" leaf .sandbox.cgroup)" "leaf: sandbox.cgroup"
	local L=$s/done/leaf.stdout
	assert_eq 0 "$(limit_of "$L" "Max core file size")" "leaf: RLIMIT_CORE"
	# The default kill grace (5s) runs on past the timeout.
	assert_eq $((35 * n + 1)) "$(limit_of "$L" "Max cpu time")" "leaf: RLIMIT_CPU backstop ((30 s + 5 s grace) x $n cores + 1)"
	assert_eq unlimited "$(limit_of "$L" "Max address space")" "leaf: no RLIMIT_AS under a cgroup"
	assert_eq 0 "$(limit_of "$s/done/untimed.stdout" "Max core file size")" "untimed: RLIMIT_CORE"
	assert_eq $((3605 * n + 1)) "$(limit_of "$s/done/untimed.stdout" "Max cpu time")" "untimed: the backstop of the default timeout ((1h + 5 s grace) x $n cores + 1)"
	# Without a cgroup (run as nobody, whom RLIMIT_NPROC binds).
	printf '#!/bin/sh\n#kart: timeout=30s pids=40\ncat /proc/self/limits\n' >"$s/tmp/off"
	chown nobody "$s/tmp/off"; mv "$s/tmp/off" "$s/new/off"
	(ulimit -S -c unlimited 2>/dev/null || ulimit -S -c "$(ulimit -H -c)"; drain_pid "$s" KART_CGROUP=off)
	assert_eq ok "$(field "$s" off .status)" "off: status ($(field "$s" off .error))"
	assert_eq none "$(field "$s" off .sandbox.cgroup)" "off: sandbox.cgroup"
	local O=$s/done/off.stdout
	assert_eq 40 "$(limit_of "$O" "Max processes")" "off: pids=40 is RLIMIT_NPROC"
	assert_eq 0 "$(limit_of "$O" "Max core file size")" "off: RLIMIT_CORE"
	assert_eq $((35 * n + 1)) "$(limit_of "$O" "Max cpu time")" "off: RLIMIT_CPU backstop"
	assert_eq unlimited "$(limit_of "$O" "Max address space")" "off: no RLIMIT_AS without KART_RLIMIT_USE_AS"
}

# cgroup = require: where no leaf can be made, even a task without any
# limit is refused; where one can, it runs in it.
test_cgroup_require() {
	have_cgroups || return
	local s; s=$(mkspool)
	printf '[limits]\ncgroup = require\n' >"$s/kart.conf"
	printf '#!/bin/sh\necho ran\n' >"$s/new/plain"
	drain_pid "$s" KART_BACKEND=none KART_CGROUP_PARENT=/kart-no-such-parent-$$
	assert_eq refused "$(field "$s" plain .status)" "a plain task under cgroup = require, no parent"
	assert_eq cgroup_setup_failed "$(field "$s" plain .refusal)" "its refusal"
	assert_match 'require' "$(field "$s" plain .error)" "the error names the policy"
	assert_match 'kart-no-such-parent' "$(field "$s" plain .error)" "and the parent"
	assert_eq null "$(field "$s" plain .stdout.path)" "it never ran"
	printf '#!/bin/sh\necho ran\n' >"$s/new/plain2"
	drain_pid "$s" KART_BACKEND=none
	assert_eq ok "$(field "$s" plain2 .status)" "the same under a usable parent"
	assert_eq "$(host_mode)" "$(field "$s" plain2 .sandbox.cgroup)" "it ran in a leaf"
}

# A parent that exists but cannot be written (mounted read-only in the
# worker's mount namespace: as root, no mode bit would stop a mkdir).
# cgroup = require refuses even a plain task; under auto a task with a
# limit is refused and a plain one runs without a leaf, saying so.
ro_parent_drain() { # SPOOL PARENT ENV=VAL...
	local s=$1 p=$2; shift 2
	local dirs=() h
	if [ -e /sys/fs/cgroup/cgroup.controllers ]; then
		dirs=("/sys/fs/cgroup$p")
	else
		for h in memory pids cpu cpuacct freezer unified; do
			[ -d "/sys/fs/cgroup/$h" ] && dirs+=("/sys/fs/cgroup/$h$p")
		done
	fi
	mkdir -p "${dirs[@]}" || { fail "cannot make the parent $p"; return 1; }
	env "$@" KART_CGROUP_PARENT="$p" unshare -m --propagation private sh -c '
		k=$1 s=$2; shift 2
		for d; do mount --bind -o ro "$d" "$d" || exit 99; done
		exec "$k" -s "$s" worker --drain' sh "$KART" "$s" "${dirs[@]}" >>"$s.worker.log" 2>&1
	local rc=$?
	rmdir "${dirs[@]}" 2>/dev/null
	[ "$rc" = 0 ] || fail "worker --drain in its mount namespace exited $rc ($(tail -3 "$s.worker.log"))"
}
test_cgroup_unwritable_parent() {
	have_cgroups || return
	command -v unshare >/dev/null || { skip "no unshare(1)"; return; }
	local s p=/kart-ro-parent-$$-$RANDOM; s=$(mkspool)
	printf '#!/bin/sh\necho ran\n' >"$s/new/plain"
	printf '[limits]\ncgroup = require\n' >"$s/kart.conf"
	ro_parent_drain "$s" "$p" KART_BACKEND=none || return
	assert_eq refused "$(field "$s" plain .status)" "cgroup = require, parent read-only"
	assert_eq cgroup_setup_failed "$(field "$s" plain .refusal)" "its refusal"
	assert_match 'Read-only file system' "$(field "$s" plain .error)" "the error says why"
	assert_match "$p" "$(field "$s" plain .error)" "and names the parent"
	assert_eq null "$(field "$s" plain .stdout.path)" "it never ran"
	rm -f "$s/kart.conf"
	printf '#!/bin/sh\n#kart: memory=64M\necho ran\n' >"$s/new/mem"
	printf '#!/bin/sh\necho ran\n' >"$s/new/plain2"
	ro_parent_drain "$s" "$p" KART_BACKEND=none || return
	assert_eq refused "$(field "$s" mem .status)" "auto: memory= with a read-only parent"
	assert_eq cgroup_setup_failed "$(field "$s" mem .refusal)" "its refusal"
	assert_eq null "$(field "$s" mem .stdout.path)" "it never ran uncapped"
	assert_eq ok "$(field "$s" plain2 .status)" "auto: a plain task runs"
	assert_eq none "$(field "$s" plain2 .sandbox.cgroup)" "and its result says it had no cgroup"
	assert_eq ran "$(cat "$s/done/plain2.stdout")" "its output"
}

# The leaf is made, but the task's process cannot be put in it: refused
# as cgroup_join_failed, and it never ran. The fault: strace, attached to
# the worker, fails the child's write into the `tasks` file of its pids
# leaf (on v1 the child joins its v1 leaves itself, by descriptors the
# worker opened; on pure v2 it is born in its leaf by clone3 and nothing
# is written). Its leaf comes from the pool the worker made ahead of
# time: each of the pool's pids leaves is watched. Then the next task
# runs.
test_cgroup_join_failed_refused() {
	have_cgroups || return
	command -v strace >/dev/null || { skip "no strace for fault injection"; return; }
	[ ! -e /sys/fs/cgroup/cgroup.controllers ] && [ -d /sys/fs/cgroup/pids ] ||
		{ skip "needs a v1 pids hierarchy (the child joins it by its tasks file)"; return; }
	local s sp d paths=(); s=$(mkspool)
	KART_BACKEND=none start_worker "$s"
	wait_until 10 eval '[ "$(leaves_of "$WPID" | grep -c "^/sys/fs/cgroup/pids/")" -ge 3 ]' ||
		{ fail "the pool never held 3 pids leaves (test premise)"; stop_worker "$WPID"; return; }
	for d in $(leaves_of "$WPID" | grep '^/sys/fs/cgroup/pids/'); do paths+=(-P "$d/tasks"); done
	strace -f -qq -o "$s.strace" -p "$WPID" -e trace=write "${paths[@]}" \
		-e inject=write:error=EACCES &
	sp=$!
	T_PIDS+=("$sp")
	wait_until 10 traced_by "$WPID" || { fail "strace never attached"; kill "$sp"; return; }
	printf '#!/bin/sh\n#kart: pids=10\necho ran\n' >"$s/tmp/j" && mv "$s/tmp/j" "$s/new/j"
	wait_until 20 has_result "$s" j || { fail "no result for j"; kill "$sp"; return; }
	assert_eq refused "$(field "$s" j .status)" "status when the join fails"
	assert_eq cgroup_join_failed "$(field "$s" j .refusal)" "refusal"
	assert_match 'could not be put in its cgroup: Permission denied' "$(field "$s" j .error)" "error"
	assert_eq null "$(field "$s" j .stdout.path)" "it never ran"
	assert_eq null "$(field "$s" j .limits.pids)" "no limit is claimed"
	grep -q 'write(.*"0", 1).*INJECTED' "$s.strace" || fail "the fault was never injected (test premise)"
	kill "$sp"; wait "$sp" 2>/dev/null
	wait_until 10 eval '! traced_by "$WPID"'
	printf '#!/bin/sh\n#kart: pids=10\necho ran\n' >"$s/tmp/k" && mv "$s/tmp/k" "$s/new/k"
	wait_until 20 has_result "$s" k || fail "no result for the next task"
	assert_eq ok "$(field "$s" k .status)" "the next task"
	assert_eq ran "$(cat "$s/done/k.stdout")" "its output"
	stop_worker "$WPID"
	assert_eq "" "$(leaves_of "$WPID")" "leaves left"
}

# Defaults from kart.conf fill in what a task does not ask for, per lane,
# and are written for real (the task reads its own leaf's limit).
test_memory_default_applied() {
	have_cgroups || return
	local s; s=$(mkspool)
	printf '[limits]\nmemory_default = 96M\npids_default = 40\n[lane.batch]\nmemory_default = 48M\n' \
		>"$s/kart.conf"
	local rd='if [ -e /sys/fs/cgroup/cgroup.controllers ]; then cat /sys/fs/cgroup$(sed -n "s/^0:://p" /proc/self/cgroup)/memory.max; else cat /sys/fs/cgroup/memory$(sed -n "s/^[0-9]*:memory://p" /proc/self/cgroup)/memory.limit_in_bytes; fi'
	printf '#!/bin/sh\n%s\n' "$rd" >"$s/new/dflt"
	printf '#!/bin/sh\n#kart: lane=batch\n%s\n' "$rd" >"$s/new/batch"
	printf '#!/bin/sh\n#kart: memory=200M\n%s\n' "$rd" >"$s/new/own"
	# Landlock off: the task reads /sys.
	drain_pid "$s" KART_BACKEND=none KART_LANDLOCK=off
	assert_eq 100663296 "$(field "$s" dflt .limits.memory_bytes)" "limits.memory_bytes from memory_default"
	assert_eq 40 "$(field "$s" dflt .limits.pids)" "limits.pids from pids_default"
	assert_eq 100663296 "$(cat "$s/done/dflt.stdout")" "the limit in the task's own leaf"
	assert_eq 50331648 "$(field "$s" batch .limits.memory_bytes)" "lane batch: its own default"
	assert_eq 50331648 "$(cat "$s/done/batch.stdout")" "lane batch: in its leaf"
	assert_eq 209715200 "$(field "$s" own .limits.memory_bytes)" "the task's own memory= wins"
}

# The built-in defaults on a shared machine, with no kart.conf limits:
# a timeout of 1h (here met through a lower ceiling, to which the
# built-in default yields: `sleep infinity` ends as timeout), memory an
# equal share of the host per slot, 512 pids, a 256M /tmp and /work; each
# written for real, each shown in the result's limits; and one line,
# [limits] defaults = none, turns them off for a personal spool.
test_safe_defaults() {
	have_sandbox || return
	local s; s=$(mkspool)
	printf '[sandbox]\nallow_root = yes\n[limits]\ntimeout_max = 3s\n' >"$s/kart.conf"
	printf '#!/bin/sh\nsleep infinity\n' >"$s/new/forever"
	local rd='if [ -e /sys/fs/cgroup/cgroup.controllers ]; then d=/sys/fs/cgroup$(sed -n "s/^0:://p" /proc/self/cgroup); cat $d/memory.max $d/pids.max; else cat /sys/fs/cgroup/memory$(sed -n "s/^[0-9]*:memory://p" /proc/self/cgroup)/memory.limit_in_bytes /sys/fs/cgroup/pids$(sed -n "s/^[0-9]*:pids://p" /proc/self/cgroup)/pids.max; fi'
	printf '#!/bin/sh\n%s\n' "$rd" >"$s/new/leaf"
	local t0=$SECONDS
	drain_pid "$s" KART_LANDLOCK=off KART_BACKEND=none
	assert_eq timeout "$(field "$s" forever .status)" "sleep infinity under the default timeout"
	assert_eq 3 "$(field "$s" forever .limits.timeout_s)" "the default yields to timeout_max"
	[ $((SECONDS - t0)) -lt 30 ] || fail "the drain took $((SECONDS - t0))s"
	local mem share; mem=$(( $(awk '/^MemTotal/ {print $2}' /proc/meminfo) * 1024 ))
	share=$(field "$s" leaf .limits.memory_bytes)
	# The host's memory as sysinfo counts it, per slot (3 + 1): within 1 %.
	[ "$share" -gt $((mem / 4 * 99 / 100)) ] && [ "$share" -le $((mem / 4 * 101 / 100)) ] ||
		fail "memory_default $share is not a quarter of the host's $mem"
	assert_eq 512 "$(field "$s" leaf .limits.pids)" "limits.pids"
	assert_eq 3 "$(field "$s" leaf .limits.timeout_s)" "limits.timeout_s"
	local got; got=$(tr '\n' ' ' <"$s/done/leaf.stdout")
	case "$got" in
	"$share 512 "|"$((share / 4096 * 4096)) 512 ") ;;
	*) fail "the leaf holds '$got', expected '$share 512'" ;;
	esac
	# /tmp and /work are bwrap's tmpfs, of 256M each: 300M does not
	# fit, 200M does.
	printf '[sandbox]\nallow_root = yes\n' >"$s/kart.conf"
	printf '#!/bin/sh\nhead -c 200M /dev/zero >/tmp/a && echo fits; head -c 300M /dev/zero >/work/b 2>/dev/null || echo full\n' >"$s/new/tmp"
	drain_pid "$s"
	assert_eq ok "$(field "$s" tmp .status)" "tmp: status ($(field "$s" tmp .error))"
	assert_eq "fits full" "$(tr '\n' ' ' <"$s/done/tmp.stdout" | sed 's/ $//')" "/tmp and /work of 256M"
	# One line relaxes them all.
	local p; p=$(mkspool)
	printf '[sandbox]\nallow_root = yes\n[limits]\ndefaults = none\n' >"$p/kart.conf"
	printf '#!/bin/sh\necho ran\n' >"$p/new/free"
	drain_pid "$p" KART_BACKEND=none
	assert_eq "null null null" "$(field "$p" free '"\(.limits.timeout_s) \(.limits.memory_bytes) \(.limits.pids)"')" \
		"defaults = none: no limit applied"
}

# usage.memory_peak_bytes is the task's own leaf's count, with or without
# a memory limit: four processes each holding 64 MiB at once peak near
# 256 MiB (the largest process's RSS, what rusage gives, is a quarter of
# it). Within 10 %, with no memory= in the task: under the default policy
# (its memory default), and on a spool with no defaults, where the leaf
# counts without any limit (leaf_memory = yes; on cgroup v1 a memory leaf
# of its own).
test_memory_peak_without_memory_directive() {
	have_sandbox || return
	local s p; s=$(mkspool); p=$(mkspool)
	printf '[limits]\ndefaults = none\nleaf_memory = yes\n' >"$p/kart.conf"
	local body='#!/bin/sh
for i in 1 2 3 4; do (head -c 64M /dev/zero; sleep 2) | tail -c 70M >/dev/null & done
wait'
	printf '%s\n' "$body" >"$s/new/four"
	printf '%s\n' "$body" >"$p/new/four"
	drain_pid "$s" KART_BACKEND=none
	drain_pid "$p" KART_BACKEND=none
	local sp want=$((256 * 1048576)) peak lim
	for sp in "$s" "$p"; do
		assert_eq ok "$(field "$sp" four .status)" "four: status ($(field "$sp" four .error))"
		peak=$(field "$sp" four .usage.memory_peak_bytes)
		lim=$(field "$sp" four .limits.memory_bytes)
		echo "    memory_peak_bytes $peak for 4 x 64 MiB held at once (limits.memory_bytes $lim)"
		[ "$peak" -ge $((want * 90 / 100)) ] && [ "$peak" -le $((want * 110 / 100)) ] ||
			fail "memory_peak_bytes $peak is not within 10 % of $want (limit $lim)"
	done
	assert_eq null "$(field "$p" four .limits.memory_bytes)" "no memory limit on the spool without defaults"
}

# Ceilings from kart.conf reject, per lane, naming the line and the ceiling.
test_ceiling_from_conf() {
	local s; s=$(mkspool)
	printf '[limits]\nmemory_max = 128M\n[lane.batch]\npids_max = 10\n' >"$s/kart.conf"
	printf '#!/bin/sh\n#kart: memory=256M\necho ran\n' >"$s/new/big"
	printf '#!/bin/sh\n#kart: lane=batch pids=20\necho ran\n' >"$s/new/many"
	printf '#!/bin/sh\n#kart: pids=20\necho ran\n' >"$s/new/fastmany"
	drain_pid "$s" KART_BACKEND=none
	assert_eq rejected "$(field "$s" big .status)" "memory=256M over memory_max = 128M"
	assert_match 'line 2: memory=256M is above the policy.s ceiling of 128M' \
		"$(field "$s" big .error)" "the error names line and ceiling"
	assert_eq rejected "$(field "$s" many .status)" "pids=20 over lane batch's pids_max = 10"
	assert_match 'ceiling of 10 \(lane batch\)' "$(field "$s" many .error)" "names the lane"
	assert_ne rejected "$(field "$s" fastmany .status)" "pids=20 in lane fast (no such ceiling)"
}

# A worker killed -9 under backend none leaves a daemonized grandchild in
# its leaf. The next worker kills it when it recovers the dead worker's
# claim, before the claim is back in new/. This worker has no slots (it
# only recovers): no task start of its own sweeps for it.
test_dead_worker_daemon_killed_before_requeue() {
	have_cgroups || return
	local s m old; s=$(mkspool); m=$(marker)
	# A parent of its own: any worker sweeps the leaves of dead workers
	# under its parent, and one of another spool on this host (another
	# test's) would take the daemon before this spool's next worker.
	local p=/kart-dw-$$-$RANDOM dirs=() h
	if [ -e /sys/fs/cgroup/cgroup.controllers ]; then
		dirs=("/sys/fs/cgroup$p")
	else
		for h in memory pids cpu cpuacct freezer unified; do
			[ -d "/sys/fs/cgroup/$h" ] && dirs+=("/sys/fs/cgroup/$h$p")
		done
	fi
	mkdir -p "${dirs[@]}" || { fail "cannot make the parent $p"; return; }
	printf '[worker]\nslots = 0\nbatch_slots = 0\n[limits]\ncgroup_parent = %s\n' "$p" >"$s/kart.conf"
	printf '#!/bin/sh\n#kart: retries=1\nsetsid sleep %s </dev/null >/dev/null 2>&1 &\nsleep 100\n' \
		"$m" >"$s/new/orphan"
	KART_BACKEND=none start_worker "$s" --slots 1
	old=$WPID
	wait_until 10 is_running "$s" orphan || { fail "orphan never ran"; return; }
	wait_until 5 pgrep -f "^sleep $m\$" >/dev/null || { fail "the daemon never started"; return; }
	kill -9 "$old"
	wait "$old" 2>/dev/null
	pgrep -f "^sleep $m\$" >/dev/null || fail "the daemon died with its worker (test premise)"
	KART_BACKEND=none start_worker "$s"
	wait_until 10 test -e "$s/new/orphan" || { fail "the claim was never re-queued"; return; }
	local left; left=$(pgrep -f "^sleep $m\$")
	[ -z "$left" ] || { fail "the daemon outlived the re-queue: $left"; kill -9 $left; }
	assert_eq "" "$(leaves_of "$old")" "leaves of the dead worker"
	stop_worker "$WPID"
	rmdir "${dirs[@]}" 2>/dev/null || fail "the parent $p is not empty: $(find "${dirs[@]}" -mindepth 1 -type d)"
}

# The leaf is emptied without blocking the event loop. A process that a
# v1 freezer holds frozen does not die of SIGKILL until it is thawed: the
# task leaves one behind (the test, as root, freezes the task's child in a
# child of its freezer cgroup: the task itself has no capability to), so
# its leaf cannot empty. Meanwhile another task is claimed and finished;
# once thawed, the first task completes too and no leaf is left.
test_drain_does_not_block() {
	have_cgroups || return
	[ -d /sys/fs/cgroup/freezer ] && [ ! -e /sys/fs/cgroup/cgroup.controllers ] ||
		{ skip "needs a v1 freezer (to hold a process past SIGKILL)"; return; }
	local s m sub pid d; s=$(mkspool); m=$(marker)
	cat >"$s/new/stuck" <<EOT
#!/bin/sh
sleep $m &
until [ -e "$s.frozen-$m" ]; do sleep 0.05; done
EOT
	KART_BACKEND=none KART_LANDLOCK=off start_worker "$s"
	wait_until 10 eval 'pid=$(pgrep -f "^sleep $m\$")' || { fail "the task's child never started"; stop_worker "$WPID"; return; }
	d=/sys/fs/cgroup/freezer$(sed -n 's/^[0-9]*:freezer://p' "/proc/$pid/cgroup")/held
	mkdir "$d" && echo "$pid" >"$d/cgroup.procs" && echo FROZEN >"$d/freezer.state" ||
		fail "cannot freeze $pid in $d"
	touch "$s.frozen-$m"
	wait_until 10 has_frozen "$m" || { fail "the held process was never frozen"; thaw_held; stop_worker "$WPID"; return; }
	# (held sits under the task's freezer cgroup: its own leaf when it has
	# one, else the worker's; the unified leaf is what cannot empty.)
	sub=$(find /sys/fs/cgroup/freezer -maxdepth 8 -type d -name held | head -1)
	sleep 0.5 # the task's shell exits; its leaf cannot empty
	printf '#!/bin/sh\necho quick\n' >"$s/tmp/quick" && mv "$s/tmp/quick" "$s/new/quick"
	wait_until 10 has_result "$s" quick || fail "no other task finished while a leaf drained"
	has_result "$s" stuck && fail "stuck has a result although its leaf is not empty: the loop waited for it"
	assert_eq ok "$(field "$s" quick .status)" "the task that ran meanwhile"
	# Thaw: the SIGKILL lands, the leaf empties, stuck completes.
	[ -n "$sub" ] && echo THAWED >"$sub/freezer.state"
	wait_until 5 sh -c "! pgrep -f '^sleep $m\$' >/dev/null" || fail "the held process outlived its thaw"
	[ -n "$sub" ] && rmdir "$sub" 2>/dev/null
	wait_until 15 has_result "$s" stuck || { fail "stuck never completed"; thaw_held; stop_worker "$WPID"; return; }
	assert_eq ok "$(field "$s" stuck .status)" "stuck, once its leaf emptied"
	stop_worker "$WPID"
	thaw_held
	assert_eq "" "$(leaves_of "$WPID")" "leaves left"
}
# Never leave a frozen process behind, whatever happened.
thaw_held() {
	local h
	for h in $(find /sys/fs/cgroup/freezer -maxdepth 8 -type d -name held 2>/dev/null); do
		echo THAWED >"$h/freezer.state"
		wait_until 5 sh -c "! grep -q . '$h/cgroup.procs'"
		rmdir "$h" 2>/dev/null
	done
}
has_frozen() { pgrep -f "^sleep $1\$" >/dev/null &&
	[ "$(cat "$(find /sys/fs/cgroup/freezer -maxdepth 8 -type d -name held 2>/dev/null | head -1)/freezer.state" 2>/dev/null)" = FROZEN ]; }

# kart doctor --json: the cgroup facts, probed; exit non-zero when the
# policy's requirement (cgroup = require) cannot be met.
test_doctor_cgroup() {
	have_cgroups || return
	local s out rc; s=$(mkspool)
	out=$("$KART" -s "$s" doctor --json); rc=$?
	assert_eq "$(host_mode)" "$(jq -r '.cgroup.mode | sub("hybrid"; "v1")' <<<"$out")" ".cgroup.mode"
	assert_eq true "$(jq -r .cgroup.leaf <<<"$out")" ".cgroup.leaf (a leaf was made)"
	assert_eq "true true true" "$(jq -r '[.cgroup.limits.memory, .cgroup.limits.pids, .cgroup.limits.cpu] | map(tostring) | join(" ")' <<<"$out")" ".cgroup.limits"
	assert_match 'memory' "$(jq -c .cgroup.controllers <<<"$out")" ".cgroup.controllers"
	assert_eq boolean "$(jq -r '.cgroup.kill | type' <<<"$out")" ".cgroup.kill"
	assert_eq auto "$(jq -r .cgroup.policy <<<"$out")" ".cgroup.policy"
	printf '[limits]\ncgroup = require\n' >"$s/kart.conf"
	out=$(KART_CGROUP_PARENT=/kart-no-such-parent-$$ "$KART" -s "$s" doctor --json); rc=$?
	assert_eq 1 "$rc" "doctor's exit under cgroup = require with a bad parent"
	assert_eq false "$(jq -r .cgroup.leaf <<<"$out")" ".cgroup.leaf"
	assert_eq false "$(jq -r .ok <<<"$out")" ".ok"
	assert_match 'require' "$(jq -r .cgroup.requirements <<<"$out")" ".cgroup.requirements"
	out=$(bash -c 'echo $$; exec "$0" -s "$1" doctor --json' "$KART" "$s"); rc=$?
	local dpid; dpid=$(head -1 <<<"$out"); out=$(tail -n +2 <<<"$out")
	assert_eq 0 "$rc" "doctor's exit under cgroup = require with a usable parent"
	assert_eq true "$(jq -r .cgroup.leaf <<<"$out")" ".cgroup.leaf with the worker's own cgroup"
	assert_eq met "$(jq -r .cgroup.requirements <<<"$out")" "require met"
	assert_eq "" "$(leaves_of "$dpid")" "the probe's leaves are gone"
}

# kart setup-cgroup: 0 when the worker could make leaves and write each
# limit here, 1 with the reason when not, 2 on a usage error.
test_setup_cgroup() {
	have_cgroups || return
	local out rc
	out=$("$KART" setup-cgroup 2>&1); rc=$?
	assert_eq 0 "$rc" "setup-cgroup where delegation works ($out)"
	assert_match 'Delegate=memory pids cpu' "$out" "it shows the drop-in"
	assert_match 'delegation: ok' "$out" "it checked"
	out=$(KART_CGROUP_PARENT=/kart-no-such-parent-$$ "$KART" setup-cgroup --check 2>&1); rc=$?
	assert_eq 1 "$rc" "setup-cgroup --check with no usable parent"
	assert_match 'delegation: MISSING' "$out" "it says what is missing"
	"$KART" setup-cgroup --no-such-option 2>/dev/null; rc=$?
	assert_eq 2 "$rc" "a usage error"
}

run_tests
