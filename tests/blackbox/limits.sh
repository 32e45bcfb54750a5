#!/bin/bash
# Black-box: memory, pids and cpu limits enforced for real by the task's
# cgroup leaf, through the real worker; the leaf kills daemonized
# grandchildren and goes away with its task; a limit that cannot be set
# up refuses the task.
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
is_running() { "$KART" -s "$1" status "$2" 2>/dev/null | grep -q "^$2	running"; }

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

# ---- pids --------------------------------------------------------------------

test_fork_bomb_contained() {
	have_sandbox || return
	local s; s=$(mkspool)
	cat >"$s/new/bomb" <<'EOT'
#!/bin/sh
#kart: pids=32 timeout=4s
bomb() { bomb | bomb & }
bomb
while :; do :; done
EOT
	start_worker "$s"
	wait_until 10 is_running "$s" bomb || { fail "bomb never ran"; return; }
	sleep 1.5
	# While it runs: its pids leaf holds it at 32, and it did push.
	local d max cur events
	d=$(leaves_of "$WPID" | while read -r x; do [ -e "$x/pids.max" ] && echo "$x"; done | head -1)
	if [ -z "$d" ]; then
		fail "no pids leaf for worker $WPID while the bomb runs"
	else
		max=$(cat "$d/pids.max"); cur=$(cat "$d/pids.current")
		events=$(sed -n 's/^max //p' "$d/pids.events")
		assert_eq 32 "$max" "pids.max of the leaf"
		[ "$cur" -le 32 ] || fail "pids.current $cur above 32"
		[ "${events:-0}" -gt 0 ] || fail "pids.events max=${events:-?}: the bomb never hit the limit"
	fi
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

# The leaves exist while tasks run (this test sees them) and are gone after.
test_leaves_removed() {
	have_cgroups || return
	local s; s=$(mkspool)
	printf '#!/bin/sh\nsleep 2\n' >"$s/new/a"
	printf '#!/bin/sh\nexit 3\n' >"$s/new/b"
	KART_BACKEND=none start_worker "$s"
	wait_until 10 is_running "$s" a || { fail "a never ran"; return; }
	local during; during=$(leaves_of "$WPID")
	[ -n "$during" ] || fail "no leaf for worker $WPID while a task runs"
	wait_until 20 has_result "$s" a || fail "no result for a"
	wait_until 20 has_result "$s" b || fail "no result for b"
	assert_eq failed "$(field "$s" b .status)" "status of exit 3"
	assert_eq "" "$(leaves_of "$WPID")" "leaves left after the tasks"
	kill -TERM "$WPID"
	wait "$WPID"
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

run_tests
