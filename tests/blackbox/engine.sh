# Backend container against a real Docker engine (backends.sh tests the
# same behaviours through tests/fake/docker). The script starts a dockerd
# of its own (tests/engine-lib.sh), imports an image made of the host's
# static busybox (and python3, for the escape battery), points the docker
# CLI and the worker at it with DOCKER_HOST, and stops it at the end, on
# failure too. Needs the packages docker.io and
# busybox-static (contrib/install-deps); without them, or where the
# engine cannot start, every case skips with the reason (a failure under
# KART_MUST_WORK=1). test_engine_task_binds makes a user of its own,
# kt25buser, and removes it.
. "$(dirname "$0")/../lib.sh"

E_DIR=$T_ROOT/engine
E_IMG=kart-test:latest
E_WHY=
E_PID=

. "$ROOT/tests/engine-lib.sh"
E_USER=kt25buser
E_MADE_USER=
# The submitter made by test_engine_task_binds, home and all.
user_cleanup() {
	[ -n "$E_MADE_USER" ] || return 0
	pkill -9 -u "$E_USER" 2>/dev/null
	userdel -r "$E_USER" 2>/dev/null
	E_MADE_USER=
}
trap 'in_main_shell || exit; engine_stop; user_cleanup; _cleanup' EXIT
trap 'exit 143' TERM INT HUP

need_engine() {
	[ -n "$E_WHY" ] && { skip "no real engine: $E_WHY"; return 1; }
	E_T0=$SECONDS
}

# espool: a spool whose policy runs tasks in the busybox image.
espool() {
	local s; s=$(mkspool)
	chmod 755 "$T_ROOT" "$s"
	printf '[worker]\nbackend = container\n[container]\ncommand = docker\nimage = %s\n' \
		"${1:-$E_IMG}" >"$s/kart.conf"
	echo "$s"
}
# as_nobody SPOOL ID: queue $SPOOL/tmp/ID as a task of nobody.
as_nobody() { chown nobody:nogroup "$1/tmp/$2" && mv "$1/tmp/$2" "$1/new/$2"; }
# kart's containers on the test engine, running or not.
containers() { docker ps --all --filter label=kart.worker --format '{{.Names}}'; }
# Called last by each case: it also says how long the case took.
no_container_left() {
	wait_until 10 sh -c '[ -z "$(docker ps --all --quiet)" ]' ||
		fail "containers left${1:+ ($1)}: $(docker ps --all --format '{{.Names}} {{.Status}}')"
	echo "    nothing left in docker ps -a${1:+ $1} ($((SECONDS - E_T0))s)"
}
# A task's wait for the test: until the test puts "go" in its
# $KART_OUTDIR (a host directory), at most 30 s. go SPOOL ID says go.
WAIT_GO='i=0; until [ -e "$KART_OUTDIR/go" ] || [ $i -ge 300 ]; do sleep 0.1; i=$((i + 1)); done; rm -f "$KART_OUTDIR/go"'
go() { local d; for d in "$1"/cur/*/."$2".out; do touch "$d/go"; done; }
# wait_container: the name of kart's one running container, once it runs.
wait_container() {
	CNAME=
	wait_until 20 eval 'CNAME=$(docker ps --filter label=kart.worker --format "{{.Names}}"); [ -n "$CNAME" ]'
}
insp() { docker inspect --format "$1" "$CNAME"; }

# The hardened profile as the engine recorded it, a task of nobody's
# outputs, exit status and artifacts, and what the task sees from inside.
test_engine_profile() {
	need_engine || return
	local s; s=$(espool)
	cat >"$s/tmp/prof" <<-'EOF'
	#!/bin/sh
	#kart: memory=64M pids=32 cpu=0.5 timeout=60s
	echo out-line; echo err-line >&2
	id -u; id -g
	grep -E '^(NoNewPrivs|Seccomp|CapEff|CapBnd):' /proc/self/status
	touch /etc/kart-x 2>/dev/null && echo wrote-root
	touch /bin/kart-x 2>/dev/null && echo wrote-bin
	ls /sys/class/net
	echo kept >"$KART_OUTDIR/a.txt"; echo "$PWD $HOME $KART_TASK_ID $KART_ATTEMPT" >"$KART_OUTDIR/env"
	EOF
	printf '%s\nexit 3\n' "$WAIT_GO" >>"$s/tmp/prof"
	as_nobody "$s" prof
	start_worker "$s"
	wait_container || { fail "no container ran: $(tail -3 "$s.worker.log")"; stop_worker "$WPID"; return; }
	assert_match '^kart-[0-9a-f]{16}\.[A-Za-z0-9_-]+-[0-9]+-1$' "$CNAME" "container name"
	# One inspect, while it runs: the engine's record of it.
	local j; j=$(docker inspect "$CNAME" | jq '.[0]')
	q() { echo "$j" | jq -c "$1"; }
	assert_eq true "$(q .HostConfig.ReadonlyRootfs)" "read-only rootfs"
	assert_eq '["ALL"]' "$(q .HostConfig.CapDrop)" "CapDrop"
	assert_eq null "$(q .HostConfig.CapAdd)" "CapAdd"
	assert_eq false "$(q .HostConfig.Privileged)" "Privileged"
	assert_eq true "$(q '.HostConfig.SecurityOpt | index("no-new-privileges") != null')" \
		"no-new-privileges in SecurityOpt"
	# The engine keeps the profile's text: ours, with keyctl denied.
	local prof; prof=$(echo "$j" | jq -r '.HostConfig.SecurityOpt[] | select(startswith("seccomp=")) | ltrimstr("seccomp=")')
	assert_eq SCMP_ACT_ALLOW "$(echo "$prof" | jq -r .defaultAction)" "seccomp profile defaultAction"
	assert_eq 1 "$(echo "$prof" | jq '[.syscalls[] | select(.names | index("keyctl")) | .errnoRet] | .[0]')" \
		"seccomp profile: keyctl EPERM"
	assert_eq '"none"' "$(q .HostConfig.NetworkMode)" "NetworkMode"
	assert_eq 67108864 "$(q .HostConfig.Memory)" "Memory"
	assert_eq 67108864 "$(q .HostConfig.MemorySwap)" "MemorySwap (no swap)"
	assert_eq 32 "$(q .HostConfig.PidsLimit)" "PidsLimit"
	assert_eq 500000000 "$(q .HostConfig.NanoCpus)" "NanoCpus"
	assert_eq '"65534:65534"' "$(q .Config.User)" "User (the submitter)"
	assert_eq '"kart"' "$(q .Config.Hostname)" "Hostname"
	assert_eq '"/work"' "$(q .Config.WorkingDir)" "WorkingDir"
	assert_match '^"[0-9a-f]{16}\.' "$(q '.Config.Labels["kart.worker"]')" "label kart.worker"
	assert_eq "\"$E_IMG\"" "$(q .Config.Image)" "image"
	assert_eq 3 "$(q '.Mounts | length')" "three mounts"
	assert_eq '[["/run/kart/out",true],["/run/kart/task",false],["/work",true]]' \
		"$(q '[.Mounts[] | [.Destination, .RW]] | sort_by(.[0])')" "mounts: the task read-only"
	go "$s" prof
	wait_until 30 test -e "$s/done/prof.json" || fail "no result"
	stop_worker "$WPID"
	assert_eq failed "$(field "$s" prof .status)" "status"
	assert_eq 3 "$(field "$s" prof .exit_code)" "exit_code"
	assert_eq container "$(field "$s" prof .sandbox.backend)" "sandbox.backend"
	assert_eq 65534 "$(field "$s" prof .submitter.uid)" "submitter.uid"
	assert_eq "out-line
65534
65534
CapEff:	0000000000000000
CapBnd:	0000000000000000
NoNewPrivs:	1
Seccomp:	2
lo" "$(cat "$s/done/prof.stdout")" "stdout: ids, no privileges, read-only root, loopback only"
	assert_eq err-line "$(cat "$s/done/prof.stderr")" "stderr"
	assert_eq kept "$(cat "$s/done/prof.out/a.txt" 2>/dev/null)" "\$KART_OUTDIR artifact"
	assert_eq "/work /work prof 1" "$(cat "$s/done/prof.out/env" 2>/dev/null)" "cwd, HOME, id, attempt"
	no_container_left
}

# The tasks that need no worker of their own run in one drain, three at
# a time (batch_run, once, by whichever of these cases comes first): the
# engine's round trips overlap on a loaded machine.
B_SPOOL=
batch_run() {
	[ -n "$B_SPOOL" ] && return
	B_SPOOL=$(espool)
	local s=$B_SPOOL
	# The wall clock counts the container's creation: enough for a
	# loaded machine to get it started. A shell as the container's
	# PID 1 ignores SIGTERM: kill_grace=1s, not the default 5 s of
	# waiting for nothing, before the SIGKILL (here and below).
	printf '#!/bin/sh\n#kart: timeout=10s kill_grace=1s\necho started; sleep 60\n' >"$s/new/slow"
	# A string that doubles until the limit stops it.
	printf '#!/bin/sh\n#kart: memory=32M\na=x; while :; do a="$a$a"; done\necho survived\n' >"$s/new/hog"
	printf '#!/bin/sh\n#kart: memory=1M\necho never\n' >"$s/new/tiny"
	drain "$s" --slots 3
}

# Wall clock: the CLI is killed, then the container by name; nothing is
# left in docker ps -a. Cancel, the same, in a running worker.
test_engine_timeout_and_cancel() {
	need_engine || return
	batch_run
	local s=$B_SPOOL
	assert_eq timeout "$(field "$s" slow .status)" "timeout: status"
	assert_eq started "$(cat "$s/done/slow.stdout")" "timeout: it ran"
	no_container_left "after the timeout"
	printf '#!/bin/sh\n#kart: kill_grace=1s\necho started; sleep 60\n' >"$s/new/long"
	start_worker "$s"
	wait_container || { fail "cancel: no container ran"; stop_worker "$WPID"; return; }
	run_cmd -s "$s" cancel long
	assert_eq 0 "$RC" "kart cancel ($ERR)"
	wait_until 30 test -e "$s/done/long.json" || fail "cancel: no result"
	assert_eq cancelled "$(field "$s" long .status)" "cancel: status"
	no_container_left "after the cancel"
	grep -q "container kill/rm $CNAME" "$s.worker.log" && fail "kill/rm of $CNAME failed: $(grep "$CNAME" "$s.worker.log")"
	stop_worker "$WPID"
}

# kart pause holds the container itself still (the engine's pause: its
# cgroup frozen), not only the CLI that started it; resume lets it go on;
# a cancel of a paused task thaws and kills it, and nothing is left.
ticks() { cat "$1"/cur/*/."$2".out/n 2>/dev/null; }
test_engine_pause() {
	need_engine || return
	local s a b; s=$(espool)
	printf '#!/bin/sh\n#kart: kill_grace=1s\ni=0; while :; do i=$((i + 1)); echo $i >"$KART_OUTDIR/n"; sleep 0.1; done\n' >"$s/new/tick"
	start_worker "$s"
	wait_container || { fail "no container ran"; stop_worker "$WPID"; return; }
	wait_until 20 sh -c "[ \"\$(cat $s/cur/*/.tick.out/n 2>/dev/null)\" -gt 2 ]" || fail "the task does not count"
	run_cmd -s "$s" pause tick
	assert_eq 0 "$RC" "kart pause ($OUT $ERR)"
	assert_eq true "$(insp '{{.State.Paused}}')" "the engine says the container is paused"
	a=$(ticks "$s" tick); sleep 1.5; b=$(ticks "$s" tick)
	assert_eq "$a" "$b" "the count while paused"
	run_cmd -s "$s" resume tick
	assert_eq 0 "$RC" "kart resume ($ERR)"
	assert_eq false "$(insp '{{.State.Paused}}')" "the engine says it runs again"
	wait_until 10 sh -c "[ \"\$(cat $s/cur/*/.tick.out/n 2>/dev/null)\" -gt $b ]" || fail "the count did not go on after resume"
	run_cmd -s "$s" pause tick
	assert_eq 0 "$RC" "kart pause, again ($ERR)"
	run_cmd -s "$s" cancel tick
	assert_eq 0 "$RC" "kart cancel of the paused task ($ERR)"
	wait_until 30 test -e "$s/done/tick.json" || fail "cancel: no result"
	assert_eq cancelled "$(field "$s" tick .status)" "status"
	stop_worker "$WPID"
	no_container_left
}

# Past its memory limit the kernel kills the task; the runtime's
# OOMKilled makes it certain.
test_engine_oom() {
	need_engine || return
	batch_run
	local s=$B_SPOOL
	assert_eq oom "$(field "$s" hog .status)" "status"
	assert_match 'runtime reports it OOM-killed' "$(field "$s" hog .error)" "error (certain, not probable)"
	assert_eq "" "$(cat "$s/done/hog.stdout" 2>/dev/null)" "nothing after the kill"
	no_container_left
}

# The engine cannot make the container (exit 125): refused, the engine's
# own message kept, nothing left.
test_engine_exit_125_refused() {
	need_engine || return
	batch_run
	local s=$B_SPOOL
	assert_eq refused "$(field "$s" tiny .status)" "status"
	assert_eq sandbox_setup_failed "$(field "$s" tiny .refusal)" "refusal"
	assert_match 'status 125' "$(field "$s" tiny .error)" "error"
	assert_match 'Minimum memory limit' "$(cat "$s/done/tiny.stderr" 2>/dev/null)" "the engine's message"
	no_container_left
}

# A worker killed -9 mid-task: its container runs on. The next worker
# removes it by its label before the claim runs again.
test_engine_recovery_removes_orphan() {
	need_engine || return
	local s; s=$(espool)
	printf '#!/bin/sh\nif [ "$KART_ATTEMPT" = 1 ]; then echo first; sleep 60; fi\necho second\n' >"$s/new/orph"
	start_worker "$s" --id w1
	wait_container || { fail "the task did not start"; stop_worker "$WPID"; return; }
	local orphan=$CNAME lbl
	lbl=$(docker inspect --format '{{index .Config.Labels "kart.worker"}}' "$orphan")
	{ kill -9 "$WPID"; wait_gone 10 "$WPID"; } 2>/dev/null
	sleep 0.5
	assert_eq true "$(docker inspect --format '{{.State.Running}}' "$orphan" 2>&1)" \
		"the container outlives its worker"
	drain "$s" --id w1
	assert_eq ok "$(field "$s" orph .status)" "status after recovery"
	assert_eq 2 "$(field "$s" orph .attempt)" "attempt"
	assert_eq second "$(cat "$s/done/orph.stdout")" "the re-run"
	grep -q 'removed 1 container(s) left by worker w1' "$s.worker.log" ||
		fail "no sweep logged: $(tail -5 "$s.worker.log")"
	# The sweep came before the re-run: the orphan was gone when the
	# second container was created.
	# --until is in whole seconds: one more, or what happened within
	# this second is not listed yet.
	local gone made until=$(($(date +%s) + 1))
	gone=$(docker events --since 0 --until "$until" --filter "container=$orphan" \
		--filter event=destroy --format '{{.TimeNano}}' | head -1)
	made=$(docker events --since 0 --until "$until" --filter "label=kart.worker=$lbl" \
		--filter event=create --format '{{.TimeNano}} {{.Actor.Attributes.name}}' |
		awk -v o="$orphan" '$2 != o {print $1; exit}')
	[ -n "$lbl" ] && [ -n "$gone" ] && [ -n "$made" ] && [ "$gone" -lt "$made" ] ||
		fail "the orphan was not destroyed before the re-run was created ($gone, $made)"
	no_container_left
}

# Values of the policy's variables reach the task, but neither argv nor
# the engine's record of the container (Args, Cmd, Env) holds them.
test_engine_secret_not_recorded() {
	need_engine || return
	local s; s=$(espool)
	printf '[sandbox]\nenv_pass = DEPLOY_TOKEN\n[network]\nallow_uids = 0\ncred_env = NET_TOKEN\n' >>"$s/kart.conf"
	printf '#!/bin/sh\n#kart: net\necho "dep=$DEPLOY_TOKEN net=$NET_TOKEN"\n%s\n' "$WAIT_GO" >"$s/new/withnet"
	printf '#!/bin/sh\necho "dep=$DEPLOY_TOKEN net=$NET_TOKEN"\n%s\n' "$WAIT_GO" >"$s/new/nonet"
	DEPLOY_TOKEN="dep'\"s3cr3t 4711" NET_TOKEN=net-s3cr3t-0815 start_worker "$s" --slots 2
	local seen=0 rec
	# Both wait for go: both are inspected while they run.
	wait_until 40 eval '[ "$(docker ps --filter label=kart.worker --quiet | wc -l)" -ge 2 ]' ||
		fail "two containers did not start: $(tail -3 "$s.worker.log")"
	for CNAME in $(docker ps --filter label=kart.worker --format '{{.Names}}'); do
		rec=$(docker inspect --format '{{json .Args}} {{json .Config.Cmd}} {{json .Config.Env}} {{json .Config.Entrypoint}}' "$CNAME") || continue
		seen=$((seen + 1))
		case $rec in *s3cr3t*) fail "a secret's value in docker inspect of $CNAME: $rec" ;; esac
	done
	assert_eq 2 "$seen" "containers inspected"
	go "$s" withnet
	go "$s" nonet
	wait_until 30 test -e "$s/done/withnet.json" -a -e "$s/done/nonet.json" || fail "no results"
	stop_worker "$WPID"
	assert_eq "dep=dep'\"s3cr3t 4711 net=net-s3cr3t-0815" "$(cat "$s/done/withnet.stdout")" "the net task has both"
	assert_eq "dep=dep'\"s3cr3t 4711 net=" "$(cat "$s/done/nonet.stdout")" "the task without net has only env_pass"
	! grep -q s3cr3t "$s.worker.log" "$s"/done/*.json || fail "a secret's value in the log or a result"
	no_container_left
}

# The escape battery (tests/escape/probe.py) as a task of nobody in the
# container (the image holds the host's python3, only what the probes
# load). The probes that only mean something for bwrap's layout
# of the host (the launcher, the spool, a neighbour task in the same
# worker) run too: they must find nothing.
test_engine_escape_battery() {
	need_engine || return
	local s; s=$(espool)
	local nonce; nonce=$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
	local secret=$T_ROOT/secret marker=/tmp/kart-escape-marker.$nonce
	echo "secret-$nonce" >"$secret"; chmod 600 "$secret"
	echo "host-tmp-$nonce" >"$marker"
	local canary_name=ESCAPE_CANARY_$nonce
	env "$canary_name=canary-$nonce" "$KART" -s "$s" worker --slots 2 >>"$s.worker.log" 2>&1 &
	local wpid=$!
	T_PIDS+=("$wpid")
	# A neighbour: another task of nobody in the same worker, in its own
	# container, with a file in its work directory and its $KART_OUTDIR.
	local ntag=neighbour-$nonce
	printf '#!/bin/sh\n#kart: timeout=110s kill_grace=1s\necho %s >./mark\necho %s >"$KART_OUTDIR/mark"\nexec /usr/bin/python3 -c "import time; time.sleep(100)" %s\n' \
		"$ntag" "$ntag" "$ntag" >"$s/tmp/neighbour"
	as_nobody "$s" neighbour
	wait_container || { fail "the neighbour did not start: $(tail -3 "$s.worker.log")"; rm -f "$marker"; return; }
	local npid nout
	npid=$(docker inspect --format '{{.State.Pid}}' "$CNAME")
	nout=$(echo "$s"/cur/*/.neighbour.out)
	wait_until 10 test -s "$nout/mark" || fail "the neighbour's mark is not at $nout/mark"
	local hip
	hip=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9]+(\.[0-9]+){3}$' | grep -v '^127\.' | head -1)
	local params
	params=$(jq -cn --arg spool "$s" --arg home /root --arg secret "$secret" \
		--arg marker "$marker" --argjson wpid "$wpid" --argjson tcp 9 --argjson udp 9 \
		--arg abs "kart-escape-$nonce" --arg hip "${hip:-192.0.2.1}" \
		--arg cn "$canary_name" --arg cv "canary-$nonce" --arg nonce "$nonce" \
		--argjson npid "${npid:-0}" --arg nout "$nout" --arg ntag "$ntag" \
		'{spool:$spool, worker_home:$home, secret:$secret, tmp_marker:$marker,
		  worker_pid:$wpid, tcp_port:$tcp, udp_port:$udp, abstract:$abs, host_ip:$hip,
		  canary_name:$cn, canary_value:$cv, nonce:$nonce,
		  neighbour_pid:$npid, neighbour_out:$nout, neighbour_tag:$ntag}')
	{
		printf '#!/usr/bin/python3\n#kart: timeout=90s\nimport json\n'
		printf 'P = json.loads(%s)\n' "$(jq -Rn --arg p "$params" '$p')"
		cat "$ROOT/tests/escape/probe.py"
	} >"$s/tmp/escape"
	as_nobody "$s" escape
	wait_until 100 test -e "$s/done/escape.json" || fail "no result within 100s"
	kill -0 "$npid" 2>/dev/null || fail "the neighbour did not outlive the probes"
	"$KART" -s "$s" cancel neighbour >/dev/null || fail "kart cancel neighbour"
	wait_until 30 test -e "$s/done/neighbour.json" || fail "no result for the neighbour"
	stop_worker "$wpid"
	rm -f "$marker"
	local out=$s/done/escape.stdout
	assert_eq ok "$(field "$s" escape .status)" "status ($(head -c 300 "$s/done/escape.stderr" 2>/dev/null))"
	grep -q '^PROBES DONE$' "$out" || fail "probe.py did not run to its end"
	local tried escaped
	tried=$(grep -c '^PROBE ' "$out")
	# abi_i386 with SIGSEGV: this kernel runs no int 0x80 at all (no IA32
	# emulation), as escape.sh finds under bwrap; no system call was
	# made. Said, not counted; status 0 (a call made) still fails.
	grep -q '^PROBE abi_i386 ESCAPED (int 0x80 getpid: status 11)$' "$out" &&
		echo "    abi_i386: SIGSEGV, the kernel has no IA32 emulation (not counted as an escape)"
	escaped=$(grep -E '^PROBE [a-z0-9_]+ ESCAPED ' "$out" |
		grep -vx 'PROBE abi_i386 ESCAPED (int 0x80 getpid: status 11)')
	[ -z "$escaped" ] || fail "escapes: $escaped"
	[ "$tried" -ge 50 ] || fail "only $tried probes reported"
	echo "    escape battery [container, task of nobody]: $tried probes tried, $(printf '%s' "$escaped" | grep -c .) escapes"
	no_container_left
}

# A task's cwd= and ro= (issue 10) reach the container as -v mounts at
# the same path, and nothing else does; what its submitter (a real user,
# not root) could not open is rejected before any container is made.
test_engine_task_binds() {
	need_engine || return
	command -v useradd >/dev/null && command -v runuser >/dev/null ||
		{ skip "useradd or runuser is missing"; return; }
	if id "$E_USER" >/dev/null 2>&1; then # left by a killed run
		pkill -9 -u "$E_USER" 2>/dev/null
		userdel -r "$E_USER" 2>/dev/null
	fi
	useradd -m -s /bin/sh "$E_USER" || { fail "useradd $E_USER"; return; }
	E_MADE_USER=1
	local h=/home/$E_USER uid gid s t0 priv=$T_ROOT/kt25b-private
	uid=$(id -u "$E_USER"); gid=$(id -g "$E_USER")
	chmod 0700 "$h"
	s=$(espool)
	# A shared spool (kart.tmpfiles): new/ the workers', a drop
	# directory per user; the task ids are USER:NAME.
	mkdir -m 1770 "$s/drop" && chgrp "$gid" "$s/drop" "$s/tmp" && chmod 3770 "$s/tmp" ||
		{ fail "the shared spool"; return; }
	local bid=$E_USER:binds pid=$E_USER:priv
	# A root-owned directory the user can neither read nor write.
	mkdir -p "$priv" && chmod 0700 "$priv" && echo private >"$priv/f"
	u() { runuser -u "$E_USER" -- env -i "${SAN_ENV[@]}" PATH="$KART_BUILD:/usr/bin:/bin" HOME="$h" sh -c 'cd "$HOME" && "$@"' _ "$@"; }
	u mkdir -p proj ref
	u sh -c 'echo ref-data >ref/in.txt'
	u sh -c "cat >binds.task" <<-EOF
	#!/bin/sh
	id -u; id -g; pwd
	echo made >made.txt
	cat $h/ref/in.txt
	touch $h/ref/new 2>/dev/null && echo wrote-ro || echo ro-refused
	$WAIT_GO
	EOF
	printf '#!/bin/sh\n#kart: ro=%s\ncat %s/f\n' "$priv" "$priv" | u sh -c "cat >priv.task"
	# kart submit refuses it at once, naming the path; dropped by hand
	# (as any client may), the worker's own check as the submitter
	# rejects it. (Queued before the worker starts.)
	u kart -s "$s" submit --name priv --no-cwd priv.task >/dev/null 2>"$T_ROOT/sub.err" &&
		fail "kart submit took a ro= its submitter cannot read"
	assert_match "ro=$priv: uid $uid has no read" "$(cat "$T_ROOT/sub.err")" "kart submit's refusal"
	u sh -c "mkdir -p -m 0700 '$s/drop/$E_USER' && cp priv.task '$s/tmp/priv.$$' && mv '$s/tmp/priv.$$' '$s/drop/$E_USER/priv'" ||
		fail "the drop of priv by hand"
	u kart -s "$s" submit --name binds -C "$h/proj" --ro "$h/ref" binds.task >/dev/null 2>"$T_ROOT/sub.err" ||
		fail "submit binds: $(cat "$T_ROOT/sub.err")"
	t0=$(date +%s)
	start_worker "$s" --slots 2
	wait_container || { fail "no container ran: $(tail -3 "$s.worker.log")"; stop_worker "$WPID"; return; }
	# The engine's record, while it runs: the two binds at their own
	# paths (the ro= one read-only), the three of every task, no more.
	local j; j=$(docker inspect "$CNAME" | jq '.[0]')
	q() { echo "$j" | jq -c "$1"; }
	assert_eq "[\"$h/proj:$h/proj\",\"$h/ref:$h/ref:ro\"]" "$(q '.HostConfig.Binds | sort')" "HostConfig.Binds"
	assert_eq "[[\"$h/proj\",\"$h/proj\",true],[\"$h/ref\",\"$h/ref\",false],[\"/run/kart/out\",true],[\"/run/kart/task\",false],[\"/work\",true]]" \
		"$(q "[.Mounts[] | if (.Destination | startswith(\"$h\")) then [.Source, .Destination, .RW] else [.Destination, .RW] end] | sort_by(.[0])")" \
		"mounts: the task's two and the fixed three"
	assert_eq "\"$h/proj\"" "$(q .Config.WorkingDir)" "WorkingDir: cwd="
	assert_eq "\"$uid:$gid\"" "$(q .Config.User)" "User: the submitter"
	go "$s" "$bid"
	wait_until 30 test -e "$s/done/$bid.json" -a -e "$s/done/$pid.json" || fail "no results"
	stop_worker "$WPID"
	assert_eq ok "$(field "$s" "$bid" .status)" "status ($(field "$s" "$bid" .error))"
	assert_eq "$uid
$gid
$h/proj
ref-data
ro-refused" "$(cat "$s/done/$bid.stdout")" "stdout: the submitter's ids, cwd=, ro= read but not written"
	assert_eq "made $E_USER" "$(cat "$h/proj/made.txt" 2>/dev/null) $(stat -c %U "$h/proj/made.txt" 2>/dev/null)" \
		"the file written in cwd= is on the host, the submitter's"
	assert_no_file "$h/ref/new"
	assert_eq rejected "$(field "$s" "$pid" .status)" "the private directory: status"
	assert_match "ro=$priv: uid $uid has no read" "$(field "$s" "$pid" .error)" "the private directory: error"
	assert_eq "" "$(cat "$s/done/$pid.stdout" 2>/dev/null)" "the private directory: never ran"
	# One container was made in all, the task's with the binds.
	assert_eq "$CNAME" "$(docker events --since "$t0" --until "$(date +%s)" --filter event=create \
		--filter label=kart.worker --format '{{.Actor.Attributes.name}}')" "containers created"
	no_container_left
	user_cleanup
}

if engine_start; then echo "    engine: $E_UP"; else E_WHY=${E_WHY:-unknown}; fi
run_tests
