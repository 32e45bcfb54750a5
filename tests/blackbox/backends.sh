# Backend container, through tests/fake/docker (which records every call,
# and can fail as an engine does), and the guard on backend none. The same
# behaviours against a real Docker engine: engine.sh.
. "$(dirname "$0")/../lib.sh"

FAKE=$ROOT/tests/fake/docker

# cspool: a spool whose policy selects the fake CLI; SPOOL.docker holds its
# records (FD).
cspool() {
	local s; s=$(mkspool)
	mkdir -p "$s.docker"
	cat >"$s/kart.conf" <<-CONF
	[worker]
	backend = container
	[container]
	command = $FAKE
	image = registry.example/kart-task:1
	CONF
	echo "$s"
}
# The argv of the `run` call that started NAME's container.
run_argv() { grep -lx -- "--name" "$FD"/calls/*.argv | xargs grep -l -x -- run | head -1; }
# arg_after FILE OPT: the values that follow OPT in an argv record.
arg_after() { awk -v o="$2" 'p {print; p=0} $0 == o {p=1}' "$1"; }
dcall() { grep -c -x -- "$1" "$FD/calls.log"; }

# The isolation profile, option by option, and the task's outputs.
test_container_profile() {
	local s; s=$(cspool); FD=$s.docker
	printf '#!/bin/sh\n#kart: memory=64M pids=32 cpu=0.5\necho in-container; echo $KART_TASK_ID $HOME\necho kept >$KART_OUTDIR/a.txt\n' >"$s/new/prof"
	FAKE_DOCKER_DIR=$FD drain "$s"
	assert_eq ok "$(field "$s" prof .status)" "status"
	assert_eq container "$(field "$s" prof .sandbox.backend)" "sandbox.backend"
	assert_eq true "$(field "$s" prof .sandbox.seccomp)" "sandbox.seccomp"
	assert_eq 67108864 "$(field "$s" prof .limits.memory_bytes)" "limits.memory_bytes"
	# The engine's cgroup, not kart's: what the worker reaped is the CLI,
	# whose figures are not the task's. Null, and why.
	assert_eq "null null null" "$(field "$s" prof '[.usage.cpu_user_ms, .usage.memory_peak_bytes, .efficiency.memory] | map(tostring) | join(" ")')" "usage and efficiency"
	assert_match 'container engine ran the task' "$(field "$s" prof .usage.why_null.cpu)" "why usage is null"
	assert_eq "in-container" "$(head -1 "$s/done/prof.stdout")" "stdout"
	assert_eq "prof /work" "$(sed -n 2p "$s/done/prof.stdout")" "KART_TASK_ID and HOME"
	local a; a=$(run_argv)
	[ -n "$a" ] || { fail "no run call recorded"; return; }
	assert_eq run "$(head -1 "$a")" "the subcommand"
	local o
	grep -qx -- --read-only "$a" || fail "no --read-only"
	# Removed by kart once its state is read, not by the engine.
	! grep -qx -- --rm "$a" || fail "--rm given"
	assert_eq ALL "$(arg_after "$a" --cap-drop)" "--cap-drop"
	assert_eq "no-new-privileges
seccomp=/dev/fd/5" "$(arg_after "$a" --security-opt)" "--security-opt"
	assert_eq none "$(arg_after "$a" --network)" "--network (no net)"
	assert_eq 67108864 "$(arg_after "$a" --memory)" "--memory"
	assert_eq 67108864 "$(arg_after "$a" --memory-swap)" "--memory-swap (no swap)"
	assert_eq 32 "$(arg_after "$a" --pids-limit)" "--pids-limit"
	assert_eq 0.500 "$(arg_after "$a" --cpus)" "--cpus"
	assert_eq "0:0" "$(arg_after "$a" --user)" "--user"
	assert_match '^/tmp:rw,nosuid,nodev,size=[0-9]+$' "$(arg_after "$a" --tmpfs)" "--tmpfs (bounded)"
	assert_eq /work "$(arg_after "$a" --workdir)" "--workdir"
	# Three mounts: the task read-only, its work dir, its $KART_OUTDIR.
	local m; m=$(arg_after "$a" --mount)
	assert_eq 3 "$(echo "$m" | wc -l)" "number of mounts"
	assert_match "^type=bind,source=$s/cur/[^,]+/prof,target=/run/kart/task,readonly$" \
		"$(echo "$m" | sed -n 1p)" "the task file, read-only"
	assert_match "^type=bind,source=$s/cur/[^,]+/\.prof\.work,target=/work$" \
		"$(echo "$m" | sed -n 2p)" "the work dir"
	assert_match "^type=bind,source=$s/cur/[^,]+/\.prof\.out,target=/run/kart/out$" \
		"$(echo "$m" | sed -n 3p)" "the output dir"
	# The image, then the task's own command line, last.
	assert_eq "registry.example/kart-task:1
/bin/sh
/run/kart/task" "$(tail -3 "$a")" "image and command"
	assert_match '^kart-[0-9a-f]{16}\.[A-Za-z0-9_-]+-[0-9]+-1$' "$(arg_after "$a" --name)" "unique name"
	# Our filter, as a runtime's JSON profile.
	local p=${a%.argv}.seccomp
	assert_eq SCMP_ACT_ALLOW "$(jq -r .defaultAction "$p")" "profile defaultAction"
	assert_eq 1 "$(jq '[.syscalls[] | select(.names | index("keyctl")) | .errnoRet] | .[0]' "$p")" \
		"keyctl denied with EPERM"
	assert_eq 38 "$(jq '[.syscalls[] | select(.names == ["clone3"]) | .errnoRet] | .[0]' "$p")" \
		"clone3 gets ENOSYS"
	assert_eq 268435456 "$(jq '[.syscalls[] | select(.names == ["unshare"]) | .args[0].value] | map(select(. == 268435456)) | .[0]' "$p")" \
		"unshare(CLONE_NEWUSER) denied"
	assert_eq kept "$(cat "$s/done/prof.out/a.txt" 2>/dev/null)" "\$KART_OUTDIR kept"
	[ -z "$(ls -A "$FD/state")" ] || fail "a container is left: $(ls "$FD/state")"
}

# Credentials go by name: the value reaches a network task through the
# CLI's environment, never argv; a task without network gets no name.
test_container_secret_not_in_argv() {
	local s; s=$(cspool); FD=$s.docker
	printf '[network]\nallow_uids = 0\ncred_env = DEPLOY_TOKEN\n' >>"$s/kart.conf"
	printf '#!/bin/sh\n#kart: net\necho "token=$DEPLOY_TOKEN"\n' >"$s/new/withnet"
	printf '#!/bin/sh\necho "token=$DEPLOY_TOKEN"\n' >"$s/new/nonet"
	DEPLOY_TOKEN=s3cr3t-4711 FAKE_DOCKER_DIR=$FD drain "$s"
	assert_eq "token=s3cr3t-4711" "$(cat "$s/done/withnet.stdout")" "the net task has it"
	assert_eq "token=" "$(cat "$s/done/nonet.stdout")" "the task without net has not"
	! grep -rq s3cr3t-4711 "$FD"/calls/*.argv || fail "the secret's value is in an argv"
	! grep -q s3cr3t-4711 "$s/done/withnet.json" || fail "the secret's value is in the result"
	! grep -q s3cr3t-4711 "$s.worker.log" || fail "the secret's value is in the log"
	local a b
	a=$(grep -l -x KART_TASK_ID=withnet "$FD"/calls/*.argv | head -1)
	b=$(grep -l -x KART_TASK_ID=nonet "$FD"/calls/*.argv | head -1)
	# Not even by name: an engine records an --env NAME's value. The
	# CLI's stdin carries it to the container's shell.
	! grep -q DEPLOY_TOKEN "$a" "$b" || fail "DEPLOY_TOKEN named in argv"
	grep -qx -- --interactive "$a" || fail "net task: no --interactive"
	! grep -qx -- --interactive "$b" || fail "task without net: --interactive (nothing to read)"
	! grep -qx -- --network "$a" || fail "net task: --network given (should be the engine's default)"
}

# Wall clock: the CLI is killed, then the container by name; what ran in
# it (in a session of its own, as a container outlives its CLI) is gone.
test_container_timeout_kills_by_name() {
	local s; s=$(cspool); FD=$s.docker
	local mark=kart-ctimeout-$$-$RANDOM
	# a unique argv to find the "container" by
	printf '#!/bin/bash\n#kart: timeout=1s\nexec -a %s sleep 60\n' "$mark" >"$s/new/slow"
	FAKE_DOCKER_DIR=$FD drain "$s"
	assert_eq timeout "$(field "$s" slow .status)" "status"
	local name; name=$(arg_after "$(run_argv)" --name)
	wait_until 10 bash -c "grep -qx 'rm --force $name' '$FD/calls.log'" ||
		fail "no rm --force by name: $(cat "$FD/calls.log")"
	assert_eq 1 "$(dcall "kill --signal TERM $name")" "SIGTERM by name first (the kill grace), once"
	assert_eq 1 "$(dcall "kill $name")" "kill by name, once"
	wait_until 10 bash -c "! pgrep -f '^$mark' >/dev/null" || fail "the container's process survived"
}

# A timeout's SIGTERM reaches the container through the runtime: its
# trap runs, and the status it chose is kept.
test_container_timeout_sigterm_first() {
	local s; s=$(cspool); FD=$s.docker
	printf '#!/bin/bash\n#kart: timeout=1s kill_grace=10s\ntrap "echo cleaned; exit 3" TERM\nsleep 60 & wait\n' >"$s/new/trap"
	FAKE_DOCKER_DIR=$FD drain "$s"
	assert_eq timeout "$(field "$s" trap .status)" "status"
	assert_eq 3 "$(field "$s" trap .exit_code)" "the exit status it chose within the grace"
	assert_match cleaned "$(cat "$s/done/trap.stdout")" "its trap ran"
}

# The engine cannot make the container (exit 125): refused, and what it
# may have left goes by name.
test_container_failure_cleans_up() {
	local s; s=$(cspool); FD=$s.docker
	printf '#!/bin/sh\necho never\n' >"$s/new/bad"
	FAKE_DOCKER_FAIL=1 FAKE_DOCKER_DIR=$FD drain "$s"
	assert_eq refused "$(field "$s" bad .status)" "status"
	assert_eq sandbox_setup_failed "$(field "$s" bad .refusal)" "refusal"
	assert_match 'container exited with status 125' "$(field "$s" bad .error)" "error"
	assert_match 'cannot create container' "$(cat "$s/done/bad.stderr")" "the CLI's message is kept"
	local name; name=$(arg_after "$(run_argv)" --name)
	wait_until 10 bash -c "grep -qx 'rm --force $name' '$FD/calls.log'" || fail "no rm --force $name"
}

# Exit 137 under a memory limit: OOM, certain when the runtime says so
# (read before kart removes the container), called probable when its
# state cannot be read, not OOM when the runtime says no.
test_container_oom() {
	local s; s=$(cspool); FD=$s.docker
	printf '#!/bin/sh\n#kart: memory=64M\nkill -9 $$\n' >"$s/new/m1"
	FAKE_DOCKER_INSPECT_FAIL=1 FAKE_DOCKER_DIR=$FD drain "$s"
	assert_eq oom "$(field "$s" m1 .status)" "probable: status"
	assert_match '^probably out of memory: exit status 137' "$(field "$s" m1 .error)" "probable: error"
	printf '#!/bin/sh\n#kart: memory=64M\nkill -9 $$\n' >"$s/new/m2"
	FAKE_DOCKER_OOMKILLED=true FAKE_DOCKER_DIR=$FD drain "$s"
	assert_eq oom "$(field "$s" m2 .status)" "reported: status"
	assert_match 'runtime reports it OOM-killed' "$(field "$s" m2 .error)" "reported: error"
	printf '#!/bin/sh\n#kart: memory=64M\nkill -9 $$\n' >"$s/new/m3"
	FAKE_DOCKER_OOMKILLED=false FAKE_DOCKER_DIR=$FD drain "$s"
	assert_ne oom "$(field "$s" m3 .status)" "the runtime says no: not oom"
	assert_eq 137 "$(field "$s" m3 .exit_code)" "the runtime says no: exit_code"
	[ -z "$(ls -A "$FD/state")" ] || fail "a container is left: $(ls "$FD/state")"
	printf '#!/bin/sh\nkill -9 $$\n' >"$s/new/nolimit"
	FAKE_DOCKER_DIR=$FD drain "$s"
	# (only the built-in share of the host's memory: not a limit a kill -9 blames)
	assert_eq failed "$(field "$s" nolimit .status)" "no memory limit: plain exit 137"
	assert_eq 137 "$(field "$s" nolimit .exit_code)" "exit_code"
}

# A worker killed -9 mid-task: its CLI dies with it, its container does
# not. The next worker removes it by label before the claim runs again.
test_container_recovery_removes_orphan() {
	local s; s=$(cspool); FD=$s.docker
	local mark=kart-corphan-$$-$RANDOM
	printf '#!/bin/bash\n[ "$KART_ATTEMPT" = 1 ] && exec -a %s sleep 60\npgrep -f "^%s" >/dev/null && echo overlap\necho second\n' "$mark" "$mark" >"$s/new/orph"
	FAKE_DOCKER_DIR=$FD start_worker "$s" --id w1
	wait_until 20 pgrep -f "^$mark" >/dev/null || { fail "the task did not start"; return; }
	kill -9 "$WPID"
	wait_gone 10 "$WPID"
	pgrep -f "^$mark" >/dev/null || fail "the emulated container should outlive its CLI"
	FAKE_DOCKER_DIR=$FD drain "$s" --id w1
	assert_eq ok "$(field "$s" orph .status)" "status after recovery"
	assert_eq 2 "$(field "$s" orph .attempt)" "attempt"
	assert_eq second "$(cat "$s/done/orph.stdout")" "the re-run (alone: the orphan gone first)"
	! pgrep -f "^$mark" >/dev/null || fail "the orphaned container survived recovery"
	grep -q '^rm --force kart-' "$FD/calls.log" || fail "no rm --force of the orphan"
}

# No image: the worker does not start, and says why.
test_container_needs_image() {
	local s; s=$(cspool); FD=$s.docker
	sed -i '/^image/d' "$s/kart.conf"
	run_cmd -s "$s" worker --drain
	assert_eq 1 "$RC" "exit status"
	assert_match 'needs an image' "$ERR" "message"
	run_cmd -s "$s" doctor --json
	assert_eq 1 "$RC" "doctor exit status"
	assert_eq false "$(echo "$OUT" | jq .backend_allowed.ok)" "doctor backend_allowed"
}

# kart doctor with command = podman (a stand-in that answers as podman
# 4.3 with crun does: podman is not installed here): what will not work
# on this host and why, each from the host's own facts.
test_doctor_podman() {
	local s; s=$(mkspool)
	local p=$T_ROOT/podman
	cat >"$p" <<-'EOF'
	#!/bin/sh
	case "$1 $2 $3" in
	"--version  ") echo "podman version 4.3.1" ;;
	"version --format "*) echo 4.3.1 ;;
	"info --format "*) echo crun ;;
	*) exit 125 ;;
	esac
	EOF
	chmod 755 "$p"
	printf '[worker]\nbackend = container\n[container]\ncommand = %s\nimage = kart-test:1\n' "$p" >"$s/kart.conf"
	run_cmd -s "$s" doctor --json
	local j=$OUT
	assert_eq podman "$(echo "$j" | jq -r .container.cli)" "cli"
	assert_eq true "$(echo "$j" | jq .container.works)" "the engine answers"
	probs() { echo "$j" | jq -r ".container.problems[] | select(.detail | test(\"$1\")) | .fatal"; }
	assert_eq false "$(probs 'podman 4.3 reports no OOM kill')" "OOM note (not fatal)"
	local want_rc=0 ctl
	ctl=$(cat /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null)
	if [ "$(stat -f -c %T /sys/fs/cgroup)" != cgroup2fs ] && [ -n "$ctl" ]; then
		assert_eq true "$(probs 'crun refuses hybrid cgroups')" "crun on hybrid cgroups ($ctl)"
		want_rc=1
	else
		assert_eq "" "$(probs 'crun refuses')" "no hybrid cgroups: no crun problem"
	fi
	local hard; hard=$(ulimit -Hn)
	if [ "$hard" != unlimited ] && [ "$hard" -lt 1048576 ]; then
		assert_eq true "$(probs "--ulimit=nofile=$hard:$hard")" "nofile hard limit $hard"
		want_rc=1
	fi
	assert_eq "$want_rc" "$RC" "doctor exit status"
	# With the issue's workaround in extra_args, runc and the ulimits:
	# only the OOM note is left.
	printf 'extra_args = --runtime=runc --ulimit=nofile=%s:%s --ulimit=nproc=%s:%s\n' \
		"$hard" "$hard" "$(ulimit -Hu)" "$(ulimit -Hu)" >>"$s/kart.conf"
	run_cmd -s "$s" doctor --json
	assert_eq "false" "$(echo "$OUT" | jq -c '[.container.problems[].fatal] | unique | .[]')" \
		"only what is not fatal: $(echo "$OUT" | jq -c .container.problems)"
}

# The hosted-posture gate: backend none on a spool others can submit to.
test_none_refused_on_shared_spool() {
	local s; s=$(mkspool)
	chmod 1777 "$s/new" "$s/tmp"
	printf '#!/bin/sh\necho ran\n' >"$s/new/t"
	KART_BACKEND=none run_cmd -s "$s" worker --drain
	assert_eq 1 "$RC" "worker exit status"
	assert_match 'backend none refused: .*/new is writable by everyone' "$ERR" "message"
	assert_file "$s/new/t"
	KART_BACKEND=none run_cmd -s "$s" doctor --json
	assert_eq 1 "$RC" "doctor exit status"
	assert_eq false "$(echo "$OUT" | jq .backend_allowed.ok)" "doctor backend_allowed.ok"
	chmod 2770 "$s/new"
	chmod 700 "$s/tmp"
	KART_BACKEND=none run_cmd -s "$s" worker --drain
	assert_match 'writable by its group' "$ERR" "group-writable new/"
	# Deliberately allowed: it runs.
	printf '[sandbox]\nallow_unsandboxed = yes\n' >"$s/kart.conf"
	KART_BACKEND=none drain "$s"
	assert_eq ok "$(field "$s" t .status)" "allowed: status"
	assert_eq none "$(field "$s" t .sandbox.backend)" "allowed: backend"
	# A private spool needs no allowance.
	local p; p=$(mkspool)
	printf '#!/bin/sh\necho ran\n' >"$p/new/t"
	KART_BACKEND=none drain "$p"
	assert_eq ok "$(field "$p" t .status)" "private spool: status"
}

# reload_then_run SPOOL BACKEND LOG-PATTERN: with the worker $WPID
# running, write a policy of that backend, SIGHUP, wait for the log line,
# then run one task t to its result.
reload_then_run() {
	local s=$1
	wait_until 10 grep -q 'worker .* on ' "$s.worker.log" || { fail "worker did not start"; return 1; }
	printf '[worker]\nbackend = %s\n' "$2" >"$s/kart.conf"
	kill -HUP "$WPID"
	wait_until 10 grep -q "$3" "$s.worker.log" ||
		fail "no '$3' after SIGHUP: $(tail -2 "$s.worker.log")"
	printf '#!/bin/sh\necho ran\n' >"$s/new/t"
	wait_until 20 test -e "$s/done/t.json" || { fail "no result"; return 1; }
}

# SIGHUP to backend none on a shared spool is not taken.
test_none_reload_refused_on_shared_spool() {
	local s; s=$(mkspool)
	chmod 1777 "$s/new"
	start_worker "$s"
	reload_then_run "$s" none 'SIGHUP: policy NOT reloaded.*backend none refused' &&
		assert_eq bwrap "$(field "$s" t .sandbox.backend)" "still bwrap"
	stop_worker "$WPID"
}

# SIGHUP from backend none to bwrap: bwrap, never resolved under none,
# is found in PATH then, and the next task runs under it.
test_reload_none_to_bwrap() {
	local s; s=$(mkspool)
	printf '[worker]\nbackend = none\n' >"$s/kart.conf"
	start_worker "$s"
	if reload_then_run "$s" bwrap 'SIGHUP: policy reloaded (backend bwrap'; then
		assert_eq ok "$(field "$s" t .status)" "status"
		assert_eq bwrap "$(field "$s" t .sandbox.backend)" "backend"
	fi
	stop_worker "$WPID"
}

# SIGHUP to another backend while a task runs: the running one ends
# under the backend it started with (its result says which, and its end
# is that backend's), the next starts under the new one.
test_reload_running_task_keeps_backend() {
	local s; s=$(mkspool)
	printf '[worker]\nbackend = none\n' >"$s/kart.conf"
	start_worker "$s"
	wait_until 10 grep -q 'worker .* on ' "$s.worker.log" || { fail "worker did not start"; return; }
	printf '#!/bin/sh\nsleep 3\necho ran\n' >"$s/new/long"
	wait_until 10 grep -q 'event=started.* id=long' "$s.worker.log" ||
		{ fail "long never started: $(tail -2 "$s.worker.log")"; return; }
	printf '[worker]\nbackend = bwrap\n' >"$s/kart.conf"
	kill -HUP "$WPID"
	wait_until 10 grep -q 'SIGHUP: policy reloaded (backend bwrap' "$s.worker.log" ||
		fail "no reload: $(tail -2 "$s.worker.log")"
	printf '#!/bin/sh\necho ran\n' >"$s/new/next"
	wait_until 20 test -e "$s/done/long.json" -a -e "$s/done/next.json" || fail "no results"
	stop_worker "$WPID"
	assert_eq ok "$(field "$s" long .status)" "long: status ($(field "$s" long .error))"
	assert_eq none "$(field "$s" long .sandbox.backend)" "long: the backend it ran under"
	assert_eq ran "$(cat "$s/done/long.stdout")" "long: its output"
	assert_eq ok "$(field "$s" next .status)" "next: status"
	assert_eq bwrap "$(field "$s" next .sandbox.backend)" "next: the new backend"
}

run_tests
