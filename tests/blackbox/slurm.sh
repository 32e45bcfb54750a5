# The test Slurm (tests/slurm-lib.sh): a cluster of one node of its own,
# started from scratch for this script and stopped at its end, on failure
# too. These cases prove the harness, and the facts the Slurm backend is
# built on: a job submitted by root with --uid runs as that user, is found
# again by its name, ends OUT_OF_MEMORY over its --mem, TIMEOUT after the
# --signal it asked for, CANCELLED by scancel, NODE_FAIL when its node
# goes down, PREEMPTED by a job of a higher partition; scontrol suspend
# stops it and resume goes on; bwrap runs inside it. Needs the packages
# munge, slurmctld, slurmd, slurm-client, slurmdbd and mariadb-server-core
# (contrib/install-deps); without them, or where Slurm cannot start,
# every case skips with the reason (a failure under KART_MUST_WORK=1).
# The submitter is a real account: ${KART_TEST_USER_TAG}s39sub.
# S_SWEEP=1 adds test_slurm_backend_sweep (the worker killed at each call
# around sbatch) and S_LONG=1 Slurm's own time limit to the harness case
# (make torture sets both: minutes more).
# KART_TEST_SLURM_VM=1 (make torture sets it) adds test_slurm_second_node
# (a second node in the QEMU guest of tests/vm) and
# test_slurm_second_node_kart (kart's tasks on both nodes, the guest's
# node stopped mid-run): minutes of software emulation, which at make
# check's load once left the guest's node without a task for 300 s.
. "$(dirname "$0")/../lib.sh"

U_TAG=${KART_TEST_USER_TAG:-}s39
U_SUB=${U_TAG}sub G_KART=${U_TAG}kart
U_OTH=${U_TAG}oth
U_IN="$U_SUB $U_OTH"

S_DIR=$T_ROOT/slurm
. "$ROOT/tests/slurm-lib.sh"
[ "${KART_TEST_SLURM_VM:-0}" = 1 ] && S_TWO_NODES=1
# kart's tasks go to a partition of up to 8 jobs a CPU: the cases run
# their tasks side by side on a small host. (Not S_FAST: with
# batch_sched_delay=0 the harness's 1-minute job met its time limit at 27 s.)
S_SHARE_CPUS=8
trap 'in_main_shell || exit; slurm_stop; _cleanup' EXIT
trap 'exit 143' TERM INT HUP

need_slurm() {
	[ -n "$S_WHY" ] && { skip "no test Slurm: $S_WHY"; return 1; }
	users_make || return 1
	S_T0=$SECONDS
}
took() { echo "    ($((SECONDS - S_T0))s)"; }

# submit NAME [SBATCH-ARGS...] -- SCRIPT: a job of U_SUB's on the node
# $S_ON (default $S_NODE), its output in $S_DIR/jobs/ID.out; prints its
# id. --gid: without it, a job of sbatch --uid runs with root's group.
# --no-requeue: a job on a node that fails ends NODE_FAIL instead of going
# back to the queue (the Slurm default, JobRequeue=1).
submit() {
	local name=$1; shift
	local args=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
	shift
	sbatch --parsable --uid="$U_SUB" --gid="$U_SUB" --job-name="$name" --no-requeue \
		--nodelist="${S_ON:-$S_NODE}" --output="$S_DIR/jobs/%j.out" --chdir="$S_DIR/jobs" \
		"${args[@]}" --wrap="$1"
}
# sq ID FIELD: squeue's FIELD (%T: the state) of the job, while it is known.
sq() { squeue -h -j "$1" -o "$2" 2>/dev/null; }
# acct_state ID: the job's State in sacct, without " by UID".
acct_state() { sacct -n -X -P -j "$1" -o State 2>/dev/null | head -1 | cut -d' ' -f1; }
# wait_acct ID STATE SECONDS: sacct says STATE; else a failure with what
# squeue and sacct said.
wait_acct() {
	if ! wait_until "$3" sh -c '[ "$(sacct -n -X -P -j "$1" -o State 2>/dev/null | head -1 | cut -d" " -f1)" = "$2" ]' sh "$1" "$2"; then
		fail "job $1: sacct State is not $2 after $3s: sacct '$(sacct -n -X -P -j "$1" -o State,ExitCode 2>&1 | tr '\n' ' ')' squeue '$(sq "$1" %T)'"
		return 1
	fi
}
# ticks FILE: its number of lines (0 before the job makes it).
ticks() { cat "$1" 2>/dev/null | wc -l; }

# One case for the whole harness, its jobs side by side. Slurm's time
# limit costs a minute at least (it counts in minutes and checks about
# every 30 s): that job only with S_LONG=1 (make torture).
test_slurm_harness() {
	need_slurm || return
	local out=$S_DIR/jobs uid gid name to= id oom su j x n0 n1

	# TIMEOUT, with the signal asked for before it: USR1 to the batch
	# shell (B:) 30 s before the limit of 1 minute, then TERM at the
	# limit and KILL KillWait later. The script outlives both signals.
	[ "${S_LONG:-0}" != 1 ] || to=$(submit kart-timeout --time=1 --signal=B:USR1@30 --mem=32M -- '
		trap "echo usr1 \$(date +%s)" USR1
		trap "echo term \$(date +%s)" TERM
		echo start $(date +%s)
		while :; do sleep 0.2; done') || { fail "sbatch of the timeout job"; return; }

	# Who runs the job, and where.
	uid=$(id -u "$U_SUB") gid=$(id -g "$U_SUB")
	name=kart-id-$$
	id=$(submit "$name" --mem=64M --cpus-per-task=1 --time=1 -- '
		echo "who $(id -u) $(id -g)"
		echo "job $SLURM_JOB_ID $SLURMD_NODENAME $SLURM_JOB_NAME"
		python3 -c "b = bytearray(24 << 20); import time; t = time.process_time()
while time.process_time() - t < 1: pass"') || { fail "sbatch of the identity job"; return; }
	assert_match '^[0-9]+$' "$id" "sbatch --parsable prints the job id alone"
	# Found by its name, as a worker that lost sbatch's answer would.
	assert_eq "$id" "$(squeue -h --name="$name" -o %i)" "squeue --name finds the job"

	# Over its --mem: the kernel kills it, Slurm says OUT_OF_MEMORY.
	oom=$(submit kart-oom --mem=32M --time=1 -- 'python3 -c "b = bytearray(256 << 20)"; echo "after $?"') ||
		{ fail "sbatch of the oom job"; return; }

	if wait_acct "$id" COMPLETED 60; then
		x=$(cat "$out/$id.out")
		assert_match "who $uid $gid" "$x" "the job runs as the submitter"
		assert_match "job $id $S_NODE $name" "$x" "SLURM_JOB_ID, SLURMD_NODENAME, SLURM_JOB_NAME in the job"
		assert_eq "$U_SUB" "$(stat -c %U "$out/$id.out")" "the owner of the job's output"
		# The job's name reaches slurmdbd after its state may (a
		# placeholder record named "allocation" first): waited for.
		wait_until 15 sh -c '[ "$(sacct -n -X -P --name="$1" -S now-1hour -o JobID)" = "$2" ]' sh "$name" "$id"
		assert_eq "$id" "$(sacct -n -X -P --name="$name" -S now-1hour -o JobID)" "sacct --name finds the job"
		# The batch step's accounting, from jobacct_gather/cgroup: CPU
		# time read at its end; MaxRSS sampled (JobAcctGatherFrequency,
		# 30 s), so 0 for a job this short.
		x=$(sacct -n -P -j "$id.batch" -o MaxRSS,TotalCPU,Elapsed,ExitCode)
		assert_match '^[0-9]+K?\|00:0[1-9]\.[0-9]+\|00:00:[0-9]+\|0:0$' "$x" \
			"the batch step's MaxRSS, TotalCPU (1 s at least), Elapsed, ExitCode"
	fi
	if wait_acct "$oom" OUT_OF_MEMORY 60; then
		assert_eq 0:125 "$(sacct -n -X -P -j "$oom" -o ExitCode)" "ExitCode of a job killed for its memory"
		x=$(cat "$out/$oom.out")
		assert_match 'oom-kill' "$x" "slurmstepd's word in the job's output"
		# The kernel killed python3; the script went on, and exited 0.
		assert_match 'after 137' "$x" "the script outlived its killed child"
	fi

	# scontrol suspend stops every process of the job; resume goes on.
	su=$(submit kart-suspend --mem=32M --time=2 -- 'while :; do echo tick; sleep 0.2; done') ||
		{ fail "sbatch of the suspend job"; return; }
	wait_until 60 sh -c '[ "$(cat "$1" 2>/dev/null | wc -l)" -ge 3 ]' sh "$out/$su.out" ||
		fail "the suspend job did not tick"
	scontrol suspend "$su" || fail "scontrol suspend $su"
	assert_eq SUSPENDED "$(sq "$su" %T)" "squeue's state after scontrol suspend"
	# slurmstepd sends SIGTSTP, and SIGSTOP a second or two later.
	sleep 3
	n0=$(ticks "$out/$su.out")
	sleep 1.5
	n1=$(ticks "$out/$su.out")
	assert_eq "$n0" "$n1" "no tick while suspended"
	scontrol resume "$su" || fail "scontrol resume $su"
	assert_eq RUNNING "$(sq "$su" %T)" "squeue's state after scontrol resume"
	wait_until 10 sh -c '[ "$(cat "$1" | wc -l)" -gt "$2" ]' sh "$out/$su.out" "$n1" ||
		fail "no tick after resume"

	# scancel: SIGTERM to the job's processes, then CANCELLED.
	scancel "$su" || fail "scancel $su"
	wait_acct "$su" CANCELLED 30

	# The timeout job, last: USR1 first, then TERM, then the end.
	if [ -n "$to" ] && wait_acct "$to" TIMEOUT 180; then
		x=$(cat "$out/$to.out")
		assert_match 'usr1 [0-9]+' "$x" "the --signal's USR1 reached the batch shell"
		assert_match 'term [0-9]+' "$x" "TERM at the time limit reached the batch shell"
		local t_u t_t
		t_u=$(sed -n 's/^usr1 //p' "$out/$to.out" | head -1)
		t_t=$(sed -n 's/^term //p' "$out/$to.out" | head -1)
		[ -n "$t_u" ] && [ -n "$t_t" ] && [ "$t_u" -lt "$t_t" ] ||
			fail "USR1 ($t_u) came before TERM ($t_t)"
		assert_match 'DUE TO TIME LIMIT' "$x" "slurmstepd's word in the job's output"
	fi
	took
}

# A job on a node that goes down ends NODE_FAIL (with --no-requeue).
test_slurm_node_fail() {
	need_slurm || return
	local j
	j=$(submit kart-nodefail --mem=32M --time=2 -- 'sleep 120') || { fail "sbatch"; return; }
	wait_until 30 sh -c '[ "$(squeue -h -j "$1" -o %T)" = RUNNING ]' sh "$j" || fail "job $j did not start"
	scontrol update nodename="$S_NODE" state=down reason=kart-test || fail "scontrol update state=down"
	wait_acct "$j" NODE_FAIL 30
	# ReturnToService=2 brings it back when slurmd next answers, which may
	# be a ping away (SlurmdTimeout/3): an admin's resume, for the cases after.
	wait_until 5 s_node_up "$S_NODE" || scontrol update nodename="$S_NODE" state=resume 2>/dev/null
	wait_until 30 s_node_up "$S_NODE" || fail "the node did not come back: $(sinfo -h -N -o '%N %T %E')"
	took
}

# A job of $S_PART_URGENT (PriorityTier 2) that needs the cores takes them
# from the jobs of $S_PART: PREEMPTED (PreemptMode=CANCEL).
test_slurm_preempted() {
	need_slurm || return
	local low=() j u n cpus
	cpus=$(sinfo -h -N -n "$S_NODE" -p "$S_PART" -o %c)
	for ((n = 0; n < cpus; n++)); do
		j=$(submit kart-low --mem=32M --time=2 -- 'sleep 120') || { fail "sbatch"; return; }
		low+=("$j")
	done
	wait_until 30 sh -c '[ "$(squeue -h -t RUNNING -n kart-low -o %i | wc -l)" = "$1" ]' sh "$cpus" ||
		fail "the low jobs did not all start: $(squeue -h -o '%i %T %r')"
	u=$(submit kart-urgent --partition="$S_PART_URGENT" --mem=32M --time=1 -- 'true') || { fail "sbatch"; return; }
	# One of them, the scheduler's choice.
	wait_until 60 sh -c 'for j; do [ "$(sacct -n -X -P -j "$j" -o State)" = PREEMPTED ] && exit 0; done; exit 1' sh "${low[@]}" ||
		fail "no low job PREEMPTED: $(sacct -n -X -P -j "$(IFS=,; echo "${low[*]}")" -o JobID,State | tr '\n' ' ')"
	wait_acct "$u" COMPLETED 60
	for j in "${low[@]}"; do scancel "$j" 2>/dev/null; done
	took
}

# bwrap in a job, as the job's user, unprivileged: the sandbox the backend
# runs tasks in on the node.
test_slurm_bwrap_in_job() {
	need_slurm || return
	have_bwrap || { skip "bwrap cannot run here"; return; }
	local j
	j=$(submit kart-bwrap --mem=128M --time=1 -- '
		bwrap --unshare-all --ro-bind / / true; echo "bwrap $?"
		bwrap --unshare-all --die-with-parent --ro-bind / / --proc /proc --dev /dev sh -c "echo inside \$(id -u)"') ||
		{ fail "sbatch"; return; }
	wait_acct "$j" COMPLETED 60 || return
	assert_match 'bwrap 0' "$(cat "$S_DIR/jobs/$j.out")" "bwrap --unshare-all --ro-bind / / true, in a job"
	assert_match "inside $(id -u "$U_SUB")" "$(cat "$S_DIR/jobs/$j.out")" "a shell in bwrap, in a job, as its user"
	took
}

# The second node boots in the guest, registers, and runs a job of the
# submitter's there, as the submitter, in bwrap; its output, written in
# the guest, is the host's file; a job of two nodes runs on both.
second_node() {
	need_slurm || return
	local j x
	if ! slurm_second_node; then
		fail "no second node: $S_WHY"
		return
	fi
	echo "    $S_NODE2 up after $((SECONDS - S_T0))s"
	j=$(S_ON=$S_NODE2 submit kart-node2 --mem=64M --time=5 -- '
		echo "who $(id -u) $SLURMD_NODENAME"
		bwrap --unshare-all --ro-bind / / true && echo bwrap-ok') || { fail "sbatch"; return; }
	wait_acct "$j" COMPLETED 300 || return
	x=$(cat "$S_DIR/jobs/$j.out")
	assert_match "who $(id -u "$U_SUB") $S_NODE2" "$x" "the job ran on $S_NODE2 as the submitter"
	assert_match bwrap-ok "$x" "bwrap in a job on $S_NODE2"
	assert_eq "$U_SUB" "$(stat -c %U "$S_DIR/jobs/$j.out")" "the owner of the output the guest wrote"
	j=$(S_ON="$S_NODE,$S_NODE2" submit kart-both --nodes=2 --mem=64M --time=5 -- 'echo "$SLURM_JOB_NODELIST"') ||
		{ fail "sbatch"; return; }
	wait_acct "$j" COMPLETED 300 &&
		assert_eq "$S_NODE,$S_NODE2" "$(cat "$S_DIR/jobs/$j.out")" "a job of two nodes"
	took
}
[ "$S_TWO_NODES" = 1 ] && test_slurm_second_node() { second_node; }

# kart's tasks through Slurm on both nodes (more than this host's node
# takes at once: 16 jobs, and the guest's 3 by their memory), each
# marking its attempt and node and leaving its node's name in
# $KART_OUTDIR; the first to reach the guest ends at once (its whole
# round trip: the stage written there, the result read here), the others
# wait; then the guest's node is stopped mid-run: its tasks are
# re-queued, attempt counted, and end ok. The guest's share (9p) numbers
# inodes its own way: nothing in the stage may rest on them.
second_node_kart() {
	need_slurm || return
	if ! s_node_up "$S_NODE2" && ! slurm_second_node; then
		fail "no second node: $S_WHY"
		return
	fi
	ks_spool || return
	ks_worker
	local ids=() i id n2=() x q
	for ((i = 0; i < 22; i++)); do
		id=$(ks_submit --name "n$i" --bind "$SHARED" -- sh -c \
			"echo \$KART_ATTEMPT \$SLURMD_NODENAME >>$SHARED/node.n$i; echo \$SLURMD_NODENAME >\$KART_OUTDIR/ran-on
			echo out on \$SLURMD_NODENAME; [ \$KART_ATTEMPT -gt 1 ] && exit
			[ \$SLURMD_NODENAME = $S_NODE2 ] && mkdir $SHARED/quick 2>/dev/null && echo n$i >$SHARED/quick/who && exit
			sleep 60") ||
			{ fail "kart submit n$i"; stop_worker "$KW"; return; }
		ids+=("$id")
	done
	wait_until 300 test -s "$SHARED/quick/who" ||
		{ fail "no task ran on $S_NODE2: $(squeue -h -o '%i %T %N %r' | sort | uniq -c | head -5 | tr '\n' ' '); nodes: $(sinfo -h -N -o '%N %T %E' | tr '\n' ' ')"; stop_worker "$KW"; return; }
	q=$(cat "$SHARED/quick/who") && id=${ids[${q#n}]}
	# Its result, from the guest's stage; and another task there, which
	# takes its place, to be there when the node goes down.
	ks_done 120 "$id" || { stop_worker "$KW"; return; }
	assert_eq "ok 1 $S_NODE2" "$(ks_field "$id" '"\(.status) \(.attempt) \(.slurm.nodes)"')" "$q: ended on $S_NODE2 (status, attempt, node)"
	assert_eq "out on $S_NODE2" "$(cat "$S/done/$id.stdout" 2>/dev/null)" "$q: its stdout, written on $S_NODE2"
	assert_eq "$S_NODE2" "$(cat "$S/done/$id.out/ran-on" 2>/dev/null)" "$q: its \$KART_OUTDIR, written on $S_NODE2"
	wait_until 120 sh -c 'grep -ls " $1$" "$2"/node.n* | grep -qvx "$2/node.$3"' sh "$S_NODE2" "$SHARED" "$q" ||
		fail "no other task ran on $S_NODE2"
	for ((i = 0; i < 22; i++)); do
		[ "n$i" != "$q" ] && grep -qs " $S_NODE2$" "$SHARED/node.n$i" && n2+=("${ids[$i]}")
	done
	wait_until 60 sh -c 'grep -qs " $1$" "$2"/node.n*' sh "$S_NODE" "$SHARED" || fail "no task ran on $S_NODE"
	echo "    ${#n2[@]} task(s) on $S_NODE2, $(grep -ls " $S_NODE$" "$SHARED"/node.n* | wc -l) on $S_NODE"
	scontrol update nodename="$S_NODE2" state=down reason=kart-test || fail "scontrol update $S_NODE2 state=down"
	ks_done 600 "${ids[@]}" || { stop_worker "$KW"; return; }
	local bad=0
	for id in "${ids[@]}"; do [ "$(ks_field "$id" .status)" = ok ] || bad=$((bad + 1)); done
	assert_eq 0 "$bad" "tasks not ok after $S_NODE2 went down"
	for id in "${n2[@]}"; do
		x=$(tr '\n' ' ' <"$SHARED/node.${id#*:}")
		assert_match "^1 $S_NODE2 2 " "$x" "${id#*:}: its first attempt on $S_NODE2, then again"
		assert_eq 2 "$(ks_field "$id" .attempt)" "${id#*:}: the attempt counted"
		assert_match 'NODE_FAIL' "$(grep -F "${id#*:}: its Slurm job" "$S.worker.log" | head -1)" "${id#*:}: why it was re-queued"
	done
	stop_worker "$KW"
	took
}
[ "$S_TWO_NODES" = 1 ] && test_slurm_second_node_kart() { second_node_kart; }

# ---- backend slurm ---------------------------------------------------------
# A shared spool (tests/lib.sh) whose root worker runs each task as a job
# of the test Slurm, as its submitter ($U_SUB), staged in $STAGE; $SHARED
# is a directory tasks may bind (on the "shared" filesystem: this host's,
# which is the node's). Sets S, STAGE, SHARED.
ks_spool() {
	need_slurm || return 1
	tmpfiles_spool || return 1
	STAGE=$T_ROOT/stage SHARED=$T_ROOT/shared
	rm -rf "$STAGE" "$SHARED"
	mkdir -p "$STAGE" "$SHARED" && chmod 0755 "$STAGE" && chmod 1777 "$SHARED"
	cat >"$S/kart.conf" <<-EOF
	[worker]
	backend = slurm
	slots = 128
	[slurm]
	stage = $STAGE
	shared = $STAGE, $SHARED
	partition = $S_PART_MANY
	poll = 1s
	receipt_wait = 5s
	EOF
}
# ks_worker [ID]: the worker (KW its pid), once it has its claim directory.
ks_worker() {
	start_worker "$S" --id "${1:-ws}"
	KW=$WPID
	wait_until 30 test -e "$S/cur/${1:-ws}/.lock" || fail "the worker did not start: $(tail -3 "$S.worker.log")"
}
# ks_submit ARGS...: kart submit as $U_SUB; prints the id.
ks_submit() { as "$U_SUB" kart submit --no-cwd "$@"; }
# ks_done SECONDS ID...: every ID has its result.
ks_done() {
	local t=$1 i; shift
	for i; do
		wait_until "$t" test -e "$S/done/$i.json" ||
			{ fail "no result for $i within ${t}s: $(tail -3 "$S.worker.log" | tr '\n' ' ')"; return 1; }
	done
}
# ks_field ID FILTER
ks_field() { jq -r "$2" "$S/done/$1.json" 2>/dev/null; }

# 100 tasks through Slurm, each result right: its status and exit code,
# its output, run as its submitter in a job of its own on the node, with
# SLURM_JOB_ID and the node's name; every job its own.
test_slurm_backend_tasks() {
	ks_spool || return
	ks_worker
	local ids=() i id uid
	uid=$(id -u "$U_SUB")
	# The first by kart submit (it makes drop/$U_SUB/), the others written
	# there by the submitter, as a client may: one process for all.
	id=$(ks_submit --name t0 -- sh -c 'echo t0 $(id -u) $SLURM_JOB_ID $SLURMD_NODENAME') ||
		{ fail "kart submit t0"; return; }
	ids+=("$id")
	as "$U_SUB" sh -c '
		for i in $(seq 1 99); do
			code=0; [ $((i % 10)) = 3 ] && code=3
			printf "#!/bin/sh\necho t$i \$(id -u) \$SLURM_JOB_ID \$SLURMD_NODENAME\nexit $code\n" >"$1/.t$i" &&
				mv "$1/.t$i" "$1/t$i" || exit 1
		done' sh "$S/drop/$U_SUB" || { fail "writing tasks into drop/$U_SUB"; return; }
	for ((i = 1; i < 100; i++)); do ids+=("$U_SUB:t$i"); done
	ks_done 180 "${ids[@]}" || return
	# One jq for all: id, status, exit code, job id, backend.
	local bad=0 st want out job jobs=() line
	declare -A res
	while IFS=$'\t' read -r id line; do res[$id]=$line; done < <(
		cd "$S/done" && jq -r '[.id, ([.status, (.exit_code | tostring), (.slurm.job_id | tostring),
			.sandbox.backend] | join(" "))] | @tsv' "${ids[@]/%/.json}")
	for ((i = 0; i < 100; i++)); do
		id=${ids[$i]}
		read -r st _ job _ <<<"${res[$id]:-}"
		want=ok
		[ $((i % 10)) = 3 ] && want="failed"
		out=$(<"$S/done/$id.stdout")
		if [ "${res[$id]:-}" != "$want $([ "$want" = ok ] && echo 0 || echo 3) $job slurm" ] ||
			[ "$out" != "t$i $uid $job $S_NODE" ]; then
			[ $bad -lt 3 ] && fail "t$i: '${res[$id]:-}' (want $want), stdout '$out': $(ks_field "$id" '[.error, .slurm]' | tr -d '\n '); stderr: $(head -c 400 "$S/done/$id.stderr" 2>/dev/null | tr '\n' ' ')"
			bad=$((bad + 1))
		fi
		jobs+=("$job")
	done
	assert_eq 0 "$bad" "tasks whose result is not right"
	assert_eq 100 "$(printf '%s\n' "${jobs[@]}" | sort -u | grep -c '^[0-9][0-9]*$')" "distinct Slurm jobs"
	# Each has sacct's receipt, or says why not (published without it).
	assert_eq 0 "$(cd "$S/done" && jq -s 'map(select((.slurm.receipt == null) != (.slurm.receipt_why != null))) | length' "${ids[@]/%/.json}")" \
		"results with neither a receipt nor why not (or both)"
	# Nothing left behind: the claims and the stage directories go.
	assert_eq "" "$(find "$S/cur" -mindepth 2 -not -name '.*')" "claims left in cur/"
	wait_until 30 sh -c '[ -z "$(find "$1" -mindepth 3 -maxdepth 3)" ]' sh "$STAGE" ||
		fail "stage directories left: $(find "$STAGE" -mindepth 3 -maxdepth 3 | head -3)"
	stop_worker "$KW"
	took
}

# A job's end is known when its launcher renames job/status into place
# (inotify on the stage, this host's filesystem here), not at the next
# squeue look: with [slurm] poll = 30s, the looks at a job come 0.25,
# 0.5, 1, 2, 4, 8 s apart after it is seen running, so the end of one
# that runs 12 s would wait 3.75 s for the next at least; with
# receipt_wait = 1s, its result comes within 2.5 s of its end.
test_slurm_backend_prompt_end() {
	ks_spool || return
	sed -i "s/^poll = .*/poll = 30s/; s/^receipt_wait = .*/receipt_wait = 1s/" "$S/kart.conf"
	ks_worker
	local id lag
	id=$(ks_submit --name p -- sh -c 'sleep 12') || { fail "kart submit"; stop_worker "$KW"; return; }
	ks_done 60 "$id" || { stop_worker "$KW"; return; }
	assert_eq ok "$(ks_field "$id" .status)" "the task's status"
	lag=$(python3 -c '
import datetime, json, os, sys
r = json.load(open(sys.argv[1]))
end = datetime.datetime.fromisoformat(r["finished_at"].replace("Z", "+00:00")).timestamp()
print("%.2f" % (os.stat(sys.argv[1]).st_mtime - end))' "$S/done/$id.json")
	[ -n "${KART_TEST_VERBOSE:-}" ] && echo "    result $lag s after the task ended"
	awk -v l="$lag" 'BEGIN { exit !(l != "" && l < 2.5) }' ||
		fail "the result came $lag s after the task ended (poll = 30s): its end waited for a poll"
	stop_worker "$KW"
	took
}

# ks_job ID: the Slurm job its claim records (user.kart run=), once known.
ks_job() {
	getfattr --only-values -n user.kart "$S"/cur/*/"$1" 2>/dev/null | sed -n 's/^run=slurm [^ ]* [^ ]* \([0-9][0-9]*\)$/\1/p'
}

# Limits as Slurm holds them, each said in the result: memory= (the job's
# cgroup: oom), timeout= (kart's own clock from the job's start: SIGTERM,
# then SIGKILL after the kill grace), cpu= (the job's cpuset), pids= (an
# rlimit in the sandbox); and the receipt: the memory peak from the job's
# cgroup (sacct says 0 for a job this short), sacct's record.
test_slurm_backend_limits() {
	ks_spool || return
	# The receipt is asserted: slurmdbd, loaded, may lag by seconds.
	sed -i 's/^receipt_wait = .*/receipt_wait = 20s/' "$S/kart.conf"
	ks_worker
	local oom to term cpu pids rc
	oom=$(ks_submit --name oom --memory 48M -- python3 -c 'b = bytearray(256 << 20); print("survived")') || return
	to=$(ks_submit --name to --timeout 3s --kill-grace 2s -- sh -c 'trap "echo term" TERM; while :; do sleep 0.2; done') || return
	term=$(ks_submit --name term --timeout 2s -- sleep 60) || return
	cpu=$(ks_submit --name cpu --cpu 1 -- nproc) || return
	pids=$(ks_submit --name pids --pids 12 -- python3 -c '
import os
n = 0
try:
    while n < 64:
        if os.fork() == 0:
            import time; time.sleep(5); os._exit(0)
        n += 1
except OSError as e:
    print("forks", n, e.errno)
else:
    print("forks", n)') || return
	rc=$(ks_submit --name rc --memory 256M -- python3 -c '
import time
b = bytearray(96 << 20)
for i in range(0, len(b), 4096): b[i] = 1
t = time.process_time()
while time.process_time() - t < 1: pass
print("ok")') || return
	ks_done 120 "$oom" "$to" "$term" "$cpu" "$pids" "$rc" || return
	assert_eq oom "$(ks_field "$oom" .status)" "over memory=48M: status ($(ks_field "$oom" .error))"
	assert_eq OUT_OF_MEMORY "$(ks_field "$oom" .slurm.state)" "over memory=48M: Slurm's state"
	assert_match 'memory limit of 50331648 bytes was hit: slurm reports an OOM kill' "$(ks_field "$oom" .error)" \
		"over memory=48M: error"
	assert_eq 50331648 "$(ks_field "$oom" .limits.memory_bytes)" "limits.memory_bytes"

	assert_eq timeout "$(ks_field "$to" .status)" "past timeout=3s: status"
	assert_match 'timeout of 3s passed: SIGTERM, then SIGKILL after the kill grace of 2s' \
		"$(ks_field "$to" .error)" "past timeout=3s, TERM trapped: error"
	assert_match term "$(cat "$S/done/$to.stdout")" "the task's trap saw SIGTERM"
	local d
	d=$(ks_field "$to" .duration_ms)
	[ "$d" -ge 4500 ] && [ "$d" -lt 20000 ] || fail "timeout=3s + grace 2s: ran ${d}ms (the clock starts when the job does)"
	assert_eq timeout "$(ks_field "$term" .status)" "past timeout=2s: status"
	assert_match 'SIGTERM ended it' "$(ks_field "$term" .error)" "past timeout=2s, TERM not trapped: error"

	assert_eq "ok 1" "$(ks_field "$cpu" .status) $(cat "$S/done/$cpu.stdout")" "cpu=1: the job's CPUs"
	assert_eq 1 "$(ks_field "$cpu" .limits.cpu)" "limits.cpu"

	local f
	f=$(cat "$S/done/$pids.stdout")
	[[ $f =~ ^forks\ ([0-9]+)\ 11$ ]] && [ "${BASH_REMATCH[1]}" -lt 12 ] ||
		fail "pids=12: the forks past it fail with EAGAIN: '$f'"
	assert_eq 12 "$(ks_field "$pids" .limits.pids)" "limits.pids"

	# The receipt: Slurm's record, and the peak the launcher read.
	local peak cpums
	assert_eq ok "$(ks_field "$rc" .status)" "the receipt task"
	peak=$(ks_field "$rc" .usage.memory_peak_bytes)
	[ "$peak" -gt $((96 << 20)) ] 2>/dev/null || fail "usage.memory_peak_bytes $peak: below the 96M the task touched"
	# process_time() counts user and system time: the loop's second is
	# both (a loaded machine moves part of it to system time).
	cpums=$(ks_field "$rc" '.usage.cpu_user_ms + .usage.cpu_system_ms')
	[ "$cpums" -ge 900 ] 2>/dev/null || fail "usage.cpu_user_ms + cpu_system_ms $cpums: a 1 s busy loop"
	assert_eq "$(ks_field "$rc" .slurm.job_id)" "$(ks_field "$rc" .slurm.job_id | grep -E '^[0-9]+$')" slurm.job_id
	assert_eq "$S_PART_MANY $S_NODE COMPLETED 0:0" \
		"$(ks_field "$rc" '[.slurm.partition, .slurm.nodes, .slurm.state, .slurm.exit_code] | join(" ")')" \
		"slurm: partition, nodes, state, exit_code"
	assert_eq null "$(ks_field "$rc" .slurm.receipt_why)" "slurm.receipt_why, with the receipt"
	assert_match '^[0-9]+ [0-9]+ [0-9]+ null$' \
		"$(ks_field "$rc" '[.slurm.receipt.max_rss_bytes, .slurm.receipt.total_cpu_ms, .slurm.receipt.elapsed_s, .slurm.receipt.energy_joules] | map(tostring) | join(" ")')" \
		"slurm.receipt: max_rss_bytes, total_cpu_ms, elapsed_s, energy_joules (none here)"
	# (sacct's TotalCPU misses what runs in bwrap's PID namespace: about
	# 20 ms here for the 1 s loop; the usage above is the job's cgroup's.)
	stop_worker "$KW"
	took
}

# kart cancel is scancel, kart pause and resume are scontrol suspend and
# resume, kart hold keeps a task out of Slurm altogether.
test_slurm_backend_control() {
	ks_spool || return
	ks_worker
	local c p h n0 n1 job
	c=$(ks_submit --name cancel --bind "$SHARED" -- sh -c "echo up >$SHARED/cancel.up; sleep 100") || return
	p=$(ks_submit --name pause --bind "$SHARED" -- sh -c "for i in \$(seq 1 60); do echo \$i >>$SHARED/ticks; sleep 0.2; done") || return
	# (On a shared spool only root holds a task at its submission.)
	h=$("$KART" -s "$S" submit --no-cwd --name held --hold -- echo held-ran) || return
	wait_until 60 test -e "$SHARED/cancel.up" || { fail "the cancel task did not start: $(tail -3 "$S.worker.log")"; return; }
	as "$U_SUB" kart cancel "$c" >/dev/null || fail "kart cancel"
	ks_done 60 "$c" || return
	assert_eq cancelled "$(ks_field "$c" .status)" "a running task cancelled"
	# Its launcher passed SIGTERM on and exited with the task's 143:
	# Slurm says FAILED (or CANCELLED, had it been killed first).
	assert_match '^(FAILED|CANCELLED)' "$(ks_field "$c" .slurm.state)" "its job's state"

	wait_until 60 test -s "$SHARED/ticks" || { fail "the pause task did not start"; return; }
	as "$U_SUB" kart pause "$p" >/dev/null || fail "kart pause"
	job=$(ks_job "$p")
	wait_until 30 sh -c '[ "$(squeue -h -j "$1" -o %T)" = SUSPENDED ]' sh "$job" ||
		fail "job $job not SUSPENDED after kart pause: $(squeue -h -j "$job" -o %T)"
	sleep 3 # TSTP, then STOP 1-2 s later
	n0=$(wc -l <"$SHARED/ticks")
	sleep 2
	n1=$(wc -l <"$SHARED/ticks")
	assert_eq "$n0" "$n1" "ticks while paused"
	as "$U_SUB" kart resume "$p" >/dev/null || fail "kart resume"
	wait_until 30 sh -c '[ "$(wc -l <"$1")" -gt "$2" ]' sh "$SHARED/ticks" "$n1" || fail "no tick after kart resume"
	ks_done 90 "$p" || return
	assert_eq ok "$(ks_field "$p" .status)" "the paused task, resumed"
	[ "$(ks_field "$p" .paused_ms)" -ge 2000 ] 2>/dev/null || fail "paused_ms $(ks_field "$p" .paused_ms)"

	# Held: never claimed, so never a job; released, it runs.
	assert_eq held "$("$KART" -s "$S" status "$h" | cut -f2)" "the held task's state"
	assert_eq "" "$(squeue -h -t all -o %j | grep -- "-held$")" "a job for the held task"
	"$KART" -s "$S" release "$h" >/dev/null || fail "kart release"
	ks_done 60 "$h" || return
	assert_eq "ok held-ran" "$(ks_field "$h" .status) $(cat "$S/done/$h.stdout")" "the released task"
	stop_worker "$KW"
	took
}

# ks_once_tasks N PREFIX: N tasks that each mark their run in $SHARED
# with a file named after its Slurm job (a second job of one, in any
# attempt, makes a second), then sleep; their ids in KS_IDS.
ks_once_tasks() {
	local n=$1 pre=$2 i id
	KS_IDS=()
	for ((i = 0; i < n; i++)); do
		id=$(ks_submit --name "$pre$i" --bind "$SHARED" -- sh -c \
			"echo \$KART_ATTEMPT >$SHARED/ran.$pre$i.\$SLURM_JOB_ID; sleep 4") ||
			{ fail "kart submit $pre$i"; return 1; }
		KS_IDS+=("$id")
	done
}
# ks_once_check PREFIX N: each ran once (one mark), ended ok, on its first
# attempt where its job was submitted before the crash.
ks_once_check() {
	local pre=$1 n=$2 i id bad=0
	for ((i = 0; i < n; i++)); do
		id=${KS_IDS[$i]}
		local marks
		marks=$(ls "$SHARED" | grep -c "^ran\.$pre$i\.")
		if [ "$(ks_field "$id" .status)" != ok ] || [ "$marks" != 1 ]; then
			[ $bad -lt 3 ] && fail "$pre$i: status $(ks_field "$id" .status) ($(ks_field "$id" .error)), $marks run(s): $(ls "$SHARED" | grep "^ran\.$pre$i\." | tr '\n' ' ')"
			bad=$((bad + 1))
		fi
	done
	assert_eq 0 "$bad" "tasks not run exactly once, or not ok"
}

# kill -9 of the worker while its jobs run: the same worker started again
# follows them from their claims' records and runs none twice; then a
# worker of another backend (bwrap, another id) finds a dead Slurm
# worker's claims and follows their jobs too, never running them again
# (a prototype bridge re-queued such a claim and ran its task twice).
test_slurm_backend_crash() {
	ks_spool || return
	ks_worker
	ks_once_tasks 8 a || return
	local first=("${KS_IDS[@]}")
	# Some running, maybe some not yet submitted: killed mid-way.
	wait_until 60 sh -c 'ls "$1" | grep -q "^ran\.a"' sh "$SHARED" || { fail "no task started"; return; }
	kill -9 "$KW"
	wait "$KW" 2>/dev/null
	ks_worker
	KS_IDS=("${first[@]}")
	ks_done 120 "${KS_IDS[@]}" || return
	ks_once_check a 8
	assert_match 'followed again' "$(cat "$S.worker.log")" "the restarted worker followed its jobs"
	kill -9 "$KW"
	wait "$KW" 2>/dev/null

	# A dead Slurm worker's claims, found by a bwrap worker.
	ks_worker wdead
	ks_once_tasks 6 b || return
	local second=("${KS_IDS[@]}")
	wait_until 60 sh -c '[ "$(ls "$1" | grep -c "^ran\.b")" -ge 2 ]' sh "$SHARED" || { fail "no b task started"; return; }
	kill -9 "$KW"
	wait "$KW" 2>/dev/null
	KART_BACKEND=bwrap start_worker "$S" --id wlocal
	KW=$WPID
	KS_IDS=("${second[@]}")
	ks_done 120 "${KS_IDS[@]}" || return
	ks_once_check b 6
	assert_match "was worker wdead's, which died: followed from here" "$(cat "$S.worker.log")" \
		"the bwrap worker followed the dead Slurm worker's jobs"
	assert_eq slurm "$(ks_field "${KS_IDS[0]}" .sandbox.backend)" "the result's backend (a task keeps its own)"
	stop_worker "$KW"
	took
}

# slurmctld stopped: submissions wait (the worker says why, kart status
# and kart doctor show it; nothing is refused), a job already running runs
# on; slurmctld back: everything ends ok. A task cancelled while it could
# not be submitted ends cancelled, never submitted.
test_slurm_backend_ctld() {
	ks_spool || return
	ks_worker
	local long w1 w2 cx
	long=$(ks_submit --name long --bind "$SHARED" -- sh -c "echo up >$SHARED/long.up; sleep 8; echo long-done") || return
	wait_until 60 test -e "$SHARED/long.up" || { fail "the long task did not start"; return; }
	slurm_ctld_stop
	w1=$(ks_submit --name w1 -- echo w1) || return
	w2=$(ks_submit --name w2 -- echo w2) || return
	cx=$(ks_submit --name cx -- echo cx) || return
	wait_until 60 test -e "$S/cur/ws/.stalled" || fail "no stall note (cur/ws/.stalled): $(tail -3 "$S.worker.log")"
	assert_match 'slurmctld does not answer' "$(cat "$S/cur/ws/.stalled" 2>/dev/null)" "the note says why"
	run_cmd -s "$S" status --summary
	assert_match 'waiting	worker ws: slurmctld does not answer' "$OUT" "kart status --summary says why tasks wait"
	run_cmd -s "$S" doctor --json
	assert_match 'slurmctld does not answer' "$(echo "$OUT" | jq -r '.spool.stalled.ws')" "kart doctor says it"
	assert_eq "" "$(ls "$S/done" | grep -E "^$U_SUB:(w1|w2|cx)\.json$")" "a result while slurmctld is down"
	as "$U_SUB" kart cancel "$cx" >/dev/null || fail "kart cancel: $(grep -v event= "$S.worker.log" | tail -6)"
	# A worker killed while stalled leaves its note until the next
	# worker's recovery: kart status and kart doctor speak of live
	# workers only. The same worker again follows its claims.
	kill -9 "$KW"
	wait "$KW" 2>/dev/null
	assert_eq yes "$(test -e "$S/cur/ws/.stalled" && echo yes)" "the dead worker's note is still there"
	run_cmd -s "$S" status --summary
	case $OUT in *"waiting	worker"*) fail "kart status --summary takes a dead worker's note for current: $OUT" ;; esac
	run_cmd -s "$S" doctor --json
	assert_eq null "$(echo "$OUT" | jq -c '.spool.stalled')" "kart doctor on a dead worker's note"
	ks_worker
	slurm_ctld_start || { fail "slurmctld did not start again: $S_WHY"; return; }
	ks_done 120 "$w1" "$w2" "$long" "$cx" || return
	assert_eq "ok ok ok" "$(ks_field "$w1" .status) $(ks_field "$w2" .status) $(ks_field "$long" .status)" \
		"tasks after slurmctld came back"
	assert_match long-done "$(cat "$S/done/$long.stdout")" "the job that ran on through the outage"
	assert_eq cancelled "$(ks_field "$cx" .status)" "the task cancelled while it waited"
	assert_eq null "$(ks_field "$cx" .slurm.job_id)" "its job (never submitted)"
	wait_until 30 sh -c '! test -e "$1"' sh "$S/cur/ws/.stalled" || fail "the stall note stays"
	stop_worker "$KW"
	took
}

# A node that fails, or a job preempted, voids the attempt: re-queued as a
# dead worker's claim is, attempt counted, and it runs again.
test_slurm_backend_requeue() {
	ks_spool || return
	ks_worker
	local nf pre hi
	nf=$(ks_submit --name nf --bind "$SHARED" -- sh -c "echo \$KART_ATTEMPT >>$SHARED/nf.runs; [ \$KART_ATTEMPT -gt 1 ] || sleep 20") || return
	wait_until 60 test -s "$SHARED/nf.runs" || { fail "the task did not start"; return; }
	scontrol update nodename="$S_NODE" state=down reason=kart-test || fail "scontrol update state=down"
	wait_until 60 sh -c 'grep -q "nf: its Slurm job .* ended NODE_FAIL" "$1"' sh "$S.worker.log" ||
		fail "no NODE_FAIL seen: $(tail -3 "$S.worker.log")"
	wait_until 5 s_node_up "$S_NODE" || scontrol update nodename="$S_NODE" state=resume 2>/dev/null
	ks_done 120 "$nf" || return
	assert_eq "ok 2" "$(ks_field "$nf" .status) $(ks_field "$nf" .attempt)" "after its node failed: status, attempt"
	assert_eq "1 2" "$(tr '\n' ' ' <"$SHARED/nf.runs" | sed 's/ $//')" "its runs"

	# A job of the higher partition takes the node's every CPU.
	pre=$(ks_submit --name pre --bind "$SHARED" -- sh -c "echo \$KART_ATTEMPT >>$SHARED/pre.runs; [ \$KART_ATTEMPT -gt 1 ] || sleep 20") || return
	wait_until 60 test -s "$SHARED/pre.runs" || { fail "the task did not start"; return; }
	hi=$(sbatch --parsable --partition="$S_PART_URGENT" --exclusive --mem=32M -t 1 -o /dev/null --wrap 'sleep 2') ||
		{ fail "sbatch of the urgent job"; return; }
	ks_done 120 "$pre" || return
	assert_eq "ok 2" "$(ks_field "$pre" .status) $(ks_field "$pre" .attempt)" "after preemption: status, attempt"
	assert_match 'ended PREEMPTED' "$(cat "$S.worker.log")" "the worker saw it preempted"
	stop_worker "$KW"
	took
}

# kart doctor: Slurm's version, its partitions, the stage, accounting.
# And what a task may not ask: a bind outside the shared filesystem,
# a partition Slurm does not have.
test_slurm_backend_doctor() {
	ks_spool || return
	run_cmd -s "$S" doctor --json
	local d=$OUT
	assert_match '^slurm(-wlm)? 2[0-9]\.' "$(echo "$d" | jq -r .slurm.version)" "slurm.version"
	assert_match "(^| )$S_PART_MANY( |$)" "$(echo "$d" | jq -r '[.slurm.partitions[].name] | join(" ")')" "slurm.partitions"
	assert_eq "$STAGE" "$(echo "$d" | jq -r .slurm.stage.path)" "slurm.stage.path"
	assert_match 'local filesystem' "$(echo "$d" | jq -r .slurm.stage.shared)" "slurm.stage.shared"
	assert_match '^works' "$(echo "$d" | jq -r .slurm.accounting)" "slurm.accounting"
	assert_match 'UP' "$(echo "$d" | jq -r .slurm.controller)" "slurm.controller"

	ks_worker
	local out bad
	mkdir -p "$T_ROOT/private" && chown "$U_SUB" "$T_ROOT/private"
	out=$(ks_submit --name outside --bind "$T_ROOT/private" -- true) || return
	ks_done 60 "$out" || return
	assert_eq rejected "$(ks_field "$out" .status)" "a bind outside [slurm] shared"
	assert_match "bind=$T_ROOT/private is not on the filesystem the nodes share" "$(ks_field "$out" .error)" \
		"its error"
	stop_worker "$KW"
	sed -i "s/^partition = .*/partition = nosuchpart/" "$S/kart.conf"
	ks_worker
	bad=$(ks_submit --name badpart -- true) || return
	ks_done 60 "$bad" || return
	assert_eq refused "$(ks_field "$bad" .status)" "a partition Slurm does not have"
	assert_match 'Slurm refused the job: .*[Ii]nvalid partition' "$(ks_field "$bad" .error)" "its error"
	stop_worker "$KW"
	took
}

# ks_stage ID: the stage directory of the task's job, from its claim's
# record (run=slurm JOBNAME KEY ID), once it has one.
ks_stage() {
	local r
	r=$(getfattr --only-values -n user.kart "$S"/cur/*/"$1" 2>/dev/null | sed -n 's/^run=slurm \([^ ]*\) \([^ ]*\) .*/\2\/'"$(id -u "$U_SUB")"'\/\1/p')
	[ -n "$r" ] && [ -e "$STAGE/$r/launch" ] && echo "$STAGE/$r"
}
# KS_NET: python3 -c "$KS_NET" LAUNCH gives the launch file's bwrap
# --share-net, as an editor would: a new file renamed over the old.
KS_NET='import os, sys
p = sys.argv[1]
t = open(p, "rb").read().replace(b"arg\0--unshare-all\0", b"arg\0--unshare-all\0arg\0--share-net\0", 1)
open(p + ".new", "wb").write(t)
os.rename(p + ".new", p)'
ks_submitted() { local i; for i; do [ -n "$(ks_job "$i")" ] || return 1; done; }
# ks_netdevs FILE: the interfaces /proc/net/dev lists in FILE, but lo.
ks_netdevs() { sed -n 's/^ *\([^ :]*\):.*/\1/p' "$1" 2>/dev/null | grep -vx lo; }

# The stage is the worker's: a submitter who rewrites their own task's
# sandbox description between sbatch and the job's start (the partition
# held down meanwhile) gains nothing the policy did not give: neither by
# editing the launch file in place (sa), nor by putting a copy of their
# own, with --share-net, in place of the job's directory (sb), nor by
# turning a checked bind= into a symbolic link to the host's /proc (sc),
# nor by putting another directory of hers, or a link to it, in place of
# its $KART_OUTDIR (sd: wherever the stage keeps it, out/ or job/out/).
# sa and sb print the network interfaces they see: lo alone, or they
# never ran; sc, whether the host's /proc is at its bind; sd, what its
# $KART_OUTDIR holds, and it writes a file there.
test_slurm_backend_stage_owned() {
	ks_spool || return
	[ -n "$(ks_netdevs /proc/net/dev)" ] || { skip "this host has no interface but lo: a task with network would look the same"; return; }
	scontrol update PartitionName="$S_PART_MANY" State=DOWN || { fail "scontrol: partition down"; return; }
	ks_worker
	local a b c d da db dd x i p swapped=
	as "$U_SUB" mkdir -p "$SHARED/sc-d" "$SHARED/sd-d" "$SHARED/sd-l" && as "$U_SUB" touch "$SHARED/sd-d/sd-hers" "$SHARED/sd-l/sd-hers" ||
		{ fail "mkdir $SHARED/sc-d, sd-d, sd-l"; scontrol update PartitionName="$S_PART_MANY" State=UP; return; }
	a=$(ks_submit --name sa -- cat /proc/net/dev) && b=$(ks_submit --name sb -- cat /proc/net/dev) &&
		c=$(ks_submit --name sc --bind "$SHARED/sc-d" -- sh -c 'echo ran; test -e "$1/self/status" && echo host-proc' sh "$SHARED/sc-d") &&
		d=$(ks_submit --name sd -- sh -c 'ls "$KART_OUTDIR"; echo made >"$KART_OUTDIR/sd-made"') ||
		{ fail "kart submit"; scontrol update PartitionName="$S_PART_MANY" State=UP; return; }
	# Submitted (sbatch printed their ids), and held by the partition.
	wait_until 60 ks_submitted "$a" "$b" "$c" "$d" || fail "not submitted: $(tail -3 "$S.worker.log" | tr '\n' ' ')"
	da=$(ks_stage "$a") db=$(ks_stage "$b") dd=$(ks_stage "$d")
	if [ -z "$da" ] || [ -z "$db" ] || [ -z "$dd" ]; then
		fail "no stage for the held jobs: '$da' '$db' '$dd': $(squeue -h -o '%i %j %T %r' | tr '\n' ' ')"
		scontrol update PartitionName="$S_PART_MANY" State=UP
		stop_worker "$KW"
		return
	fi
	# sa: the launch file itself, as sed -i does it (a new file renamed over).
	as "$U_SUB" python3 -c "$KS_NET" "$da/launch" 2>/dev/null
	# sb: the job's directory renamed away, a copy of the submitter's in its place.
	as "$U_SUB" sh -c 'mv "$1" "$1.x" && mkdir "$1" && cp -r "$1.x/." "$1/" && rm -f "$1/job/run" &&
		python3 -c "$2" "$1/launch"' sh "$db" "$KS_NET" 2>/dev/null
	# sc: its bind, checked at the submission, now a link to /proc.
	as "$U_SUB" sh -c 'mv "$1" "$1.x" && ln -s /proc "$1"' sh "$SHARED/sc-d" || fail "the link at sc's bind"
	# sd: its $KART_OUTDIR moved aside, a directory of hers in its place,
	# else a link to another; she cannot (out/ is in the worker's directory).
	for p in "$dd/out" "$dd/job/out"; do
		[ -d "$p" ] || continue
		as "$U_SUB" sh -c 'mv "$1" "$1.x" && { mv "$2" "$1" || ln -s "$3" "$1"; }' sh "$p" "$SHARED/sd-d" "$SHARED/sd-l" 2>/dev/null &&
			swapped=$p
	done
	x=$(tr '\0' ' ' <"$db/launch" 2>/dev/null)
	assert_match 'share-net' "$x" "the submitter's copy with --share-net is in place (the attack was made)"
	scontrol update PartitionName="$S_PART_MANY" State=UP || fail "scontrol: partition up"
	ks_done 90 "$a" "$b" "$c" "$d" || { stop_worker "$KW"; return; }
	for i in "$a" "$b"; do
		assert_eq "" "$(ks_netdevs "$S/done/$i.stdout" | tr '\n' ' ')" "$i: interfaces the task saw but lo"
	done
	# sa ran as the policy said; sb's copy was refused, not run.
	assert_eq ok "$(ks_field "$a" .status)" "sa's status (its edit refused, the task as submitted)"
	assert_match '[[:space:]]lo:' "$(cat "$S/done/$a.stdout")" "sa printed its interfaces"
	assert_eq "" "$(cat "$S/done/$b.stdout" 2>/dev/null)" "sb's output: the copy did not run"
	[ "$(ks_field "$b" .status)" != ok ] || fail "sb ended ok from the submitter's copy of its stage"
	x=$(cat "$S/done/$c.stdout" 2>/dev/null)
	case $x in *host-proc*) fail "sc saw the host's /proc at its bind (status $(ks_field "$c" .status))" ;; esac
	[ "$(ks_field "$c" .status)" != ok ] || fail "sc ended ok with its bind swapped: '$x'"
	# sd wrote into the directory the worker made, and saw nothing of hers.
	x=$(cat "$S/done/$d.stdout" 2>/dev/null)
	case $x in *sd-hers*) fail "sd's \$KART_OUTDIR was her other directory (status $(ks_field "$d" .status))" ;; esac
	for p in "$SHARED/sd-d" "$SHARED/sd-l"; do
		[ ! -e "$p/sd-made" ] || fail "sd wrote its output into $p"
	done
	if [ -n "$swapped" ]; then
		echo "    sd: her directory was put in place of $swapped"
		[ "$(ks_field "$d" .status)" != ok ] || fail "sd ended ok with its \$KART_OUTDIR swapped"
	else
		assert_eq ok "$(ks_field "$d" .status)" "sd's status (its \$KART_OUTDIR could not be swapped)"
		assert_eq made "$(cat "$S/done/$d.out/sd-made" 2>/dev/null)" "sd's output, from the directory the worker made"
	fi
	stop_worker "$KW"
	took
}

# The stage's job/run (the id of the job that took the attempt) is the
# submitter's link: she points it at another user's job while hers runs,
# then cancels her task. The worker (root) must not take her word for
# which job is her task's: the other job is not cancelled, and her
# result names her own job, not the other's.
test_slurm_backend_run_link_forged() {
	ks_spool || return
	ks_worker
	local v id dd job st
	v=$(sbatch --parsable --uid=65534 --gid=65534 --job-name=victim --partition="$S_PART_MANY" \
		--output=/dev/null --chdir=/ --wrap='sleep 300') || { fail "sbatch the other user's job"; stop_worker "$KW"; return; }
	wait_until 60 sh -c '[ "$(squeue -h -j "$1" -o %T)" = RUNNING ]' sh "$v" ||
		{ fail "the other user's job $v does not run: $(squeue -h -j "$v" -o '%T %r')"; scancel "$v"; stop_worker "$KW"; return; }
	id=$(ks_submit --name forge -- sh -c 'echo up; sleep 6') || { fail "kart submit"; scancel "$v"; stop_worker "$KW"; return; }
	wait_until 60 ks_submitted "$id" || { fail "not submitted: $(tail -3 "$S.worker.log" | tr '\n' ' ')"; scancel "$v"; stop_worker "$KW"; return; }
	dd=$(ks_stage "$id")
	job=$(ks_job "$id")
	wait_until 60 test -L "$dd/job/run" || { fail "job $job never took its attempt ($dd)"; scancel "$v"; stop_worker "$KW"; return; }
	as "$U_SUB" ln -sfn "$v" "$dd/job/run" || fail "her link at job/run"
	assert_eq "$v" "$(readlink "$dd/job/run")" "job/run names the other job (the attack was made)"
	# Her job ends; the worker reads the stage, then she cancels.
	wait_until 60 sh -c '! squeue -h -j "$1" -o %T 2>/dev/null | grep -q .' sh "$job"
	sleep 3
	as "$U_SUB" kart cancel "$id" >/dev/null 2>&1
	ks_done 60 "$id"
	sleep 2
	[ -n "${KART_TEST_VERBOSE:-}" ] && grep -E "forge|job $v" "$S.worker.log" | tail -5
	st=$(squeue -h -j "$v" -o %T 2>/dev/null)
	assert_eq RUNNING "$st" "the other user's job $v after her cancel (sacct: $(acct_state "$v"))"
	[ "$(ks_field "$id" .slurm.job_id)" != "$v" ] || fail "her result names the other user's job $v"
	scancel "$v" 2>/dev/null
	stop_worker "$KW"
	took
}

# ks_two_jobs NAME [SUBMIT-ARGS...]: two jobs of one attempt, as a
# submission thought lost and made again leaves them. The task NAME
# (printing its job, then waiting for a go file in its $KART_OUTDIR, and
# saying "got TERM" on SIGTERM) is submitted while its partition is
# down; kart's job (j1) is held; its own batch script is sbatched once
# more as its submitter under the same job name (j2), which takes the
# attempt once the partition is up. Sets id, dd (its stage), j1, j2.
ks_two_jobs() {
	local name=$1 jn; shift
	scontrol update PartitionName="$S_PART_MANY" State=DOWN || { fail "scontrol: partition down"; stop_worker "$KW"; return 1; }
	id=$(ks_submit --name "$name" "$@" -- sh -c 'trap "echo got TERM; exit 3" TERM; echo "ran in job $SLURM_JOB_ID"; i=0
		while [ ! -e "$KART_OUTDIR/go" ] && [ $i -lt 900 ]; do sleep 0.2; i=$((i + 1)); done; rm -f "$KART_OUTDIR/go"')
	wait_until 60 ks_submitted "$id" || { fail "not submitted: $(tail -3 "$S.worker.log" | tr '\n' ' ')"; scontrol update PartitionName="$S_PART_MANY" State=UP; stop_worker "$KW"; return 1; }
	j1=$(ks_job "$id") dd=$(ks_stage "$id")
	scontrol hold "$j1" || fail "scontrol hold $j1"
	jn=$(squeue -h -j "$j1" -o %j)
	scontrol write batch_script "$j1" "$T_ROOT/$name.sh" >/dev/null || fail "scontrol write batch_script $j1"
	j2=$(sbatch --parsable --uid="$(id -u "$U_SUB")" --gid="$(id -g "$U_SUB")" --job-name="$jn" --partition="$S_PART_MANY" \
		--output=/dev/null --chdir=/ "$T_ROOT/$name.sh") || fail "sbatch the second job"
	scontrol update PartitionName="$S_PART_MANY" State=UP || fail "scontrol: partition up"
	wait_until 60 sh -c '[ "$(readlink "$1/job/run")" = "$2" ]' sh "$dd" "$j2" ||
		{ fail "the second job $j2 never took the attempt: $(readlink "$dd/job/run")"; scancel "$j1" "$j2"; stop_worker "$KW"; return 1; }
}

# Two jobs of one attempt (a submission thought lost and made again;
# here the task's own batch script, sbatched once more as its submitter
# while kart's job is held): the second takes the attempt and runs the
# task, kart's finds it taken and ends. When the worker reads that
# stage, Slurm does not answer whether the job its run link names is one
# of the task's (a wrapper fails squeue --name, as a slurmctld that is
# down does): nothing may be decided then. Before, the worker took the
# link for forged and ended the task from kart's job, while the other
# ran it; now the result waits for Slurm's answer, and comes from the
# job that ran the task, at its end.
test_slurm_backend_run_link_unanswered() {
	ks_spool || return
	local bin=$T_ROOT/slurm-bin flag=$T_ROOT/no-answer c
	mkdir -p "$bin" || { fail "mkdir $bin"; return; }
	for c in sbatch squeue sacct scancel scontrol; do
		printf '#!/bin/sh\ncase "$*" in *--name=*) [ -e %s ] && { echo "slurm_load_jobs error: Unable to contact slurm controller (connect failure)" >&2; exit 1; } ;; esac\nexec %s "$@"\n' \
			"$flag" "$(command -v "$c")" >"$bin/$c" && chmod 0755 "$bin/$c" || { fail "wrapper $bin/$c"; return; }
	done
	printf 'bin = %s\n' "$bin" >>"$S/kart.conf"
	ks_worker
	ks_two_jobs twojobs || return
	: >"$flag"
	scontrol release "$j1" || fail "scontrol release $j1"
	# Kart's job runs, finds the attempt taken, and ends; its stage is
	# read, and asked about, a few times.
	wait_until 60 sh -c '! squeue -h -j "$1" -o %T 2>/dev/null | grep -q .' sh "$j1" ||
		fail "kart's job $j1 did not end: $(squeue -h -j "$j1" -o '%T %r')"
	wait_until 30 grep -q "twojobs: its stage names job $j2, and whether that is one of its jobs Slurm did not say" "$S.worker.log" ||
		fail "the worker never asked Slurm about job $j2 (test premise): $(tail -3 "$S.worker.log" | tr '\n' ' ')"
	sleep 3
	assert_eq "" "$(ls "$S/done/$id.json" 2>/dev/null)" \
		"a result while Slurm did not answer, and job $j2 ran the task ($(ks_field "$id" '[.status, .error, .slurm.job_id] | map(tostring) | join(" ")'))"
	assert_eq RUNNING "$(squeue -h -j "$j2" -o %T)" "job $j2, which runs the task"
	rm -f "$flag"
	wait_until 30 grep -q "found the attempt taken by job $j2: following that one" "$S.worker.log" ||
		fail "the worker did not follow job $j2 once Slurm answered: $(tail -3 "$S.worker.log" | tr '\n' ' ')"
	touch "$dd/out/go" || fail "the task's go file"
	ks_done 60 "$id" || { scancel "$j2"; stop_worker "$KW"; return; }
	assert_eq "ok $j2 ran in job $j2" "$(ks_field "$id" .status) $(ks_field "$id" .slurm.job_id) $(cat "$S/done/$id.stdout")" \
		"the result, from the job that ran the task"
	stop_worker "$KW"
	took
}

# The same two jobs of one attempt, and kart cancel while kart's job
# still waits: the worker stops that job, reads its stage, finds the
# attempt taken by the other, and follows it. The cancel must reach the
# one that runs the task (before, the stop counted as sent, and the
# other job was stopped only at the kill grace's end).
test_slurm_backend_run_link_cancel_follows() {
	ks_spool || return
	ks_worker
	# A kill grace of 90 s: a cancel that reached job 2 only with the
	# grace's end (SIGKILL, as scancel) would not end it within the wait.
	ks_two_jobs twocancel --kill-grace 90s || return
	as "$U_SUB" kart cancel "$id" >/dev/null 2>&1 &
	wait_until 30 grep -q "found the attempt taken by job $j2: following that one" "$S.worker.log" ||
		fail "the worker did not follow job $j2: $(tail -3 "$S.worker.log" | tr '\n' ' ')"
	ks_done 30 "$id" || { touch "$dd/out/go"; ks_done 30 "$id"; }
	assert_eq "cancelled $j2" "$(ks_field "$id" .status) $(ks_field "$id" .slurm.job_id)" \
		"the result of the task cancelled while kart's job $j1 waited and job $j2 ran it"
	# The cancel's SIGTERM, which its trap answered.
	[ -n "${KART_TEST_VERBOSE:-}" ] && grep -E "twocancel" "$S.worker.log" | cut -c1-250
	assert_eq "ran in job $j2,got TERM" "$(paste -sd, "$S/done/$id.stdout")" "what the task printed"
	wait_until 30 sh -c '! squeue -h -j "$1" -o %T 2>/dev/null | grep -q .' sh "$j2" ||
		fail "job $j2 still runs after the cancel: $(squeue -h -j "$j2" -o %T)"
	scancel "$j2" 2>/dev/null
	stop_worker "$KW"
	took
}

# The worker reads and empties a stage in a child that has her rights
# on files; she SIGSTOPs each child of the worker she can (a stage of
# 30000 files of hers keeps one alive long enough), while another user's
# task ends: its result must not wait for her (the thread that collects
# every job's end waits for that child).
test_slurm_backend_stage_child_stopped() {
	ks_spool || return
	ks_worker
	local a b da t0 tries
	# a ends once the stopper runs (a go file in its $KART_OUTDIR).
	a=$(ks_submit --name a -- sh -c 'i=0; while [ ! -e "$KART_OUTDIR/go" ] && [ $i -lt 900 ]; do sleep 0.2; i=$((i + 1)); done; rm -f "$KART_OUTDIR/go"') ||
		{ stop_worker "$KW"; return; }
	wait_until 60 ks_submitted "$a" || { fail "not submitted: $(tail -3 "$S.worker.log" | tr '\n' ' ')"; stop_worker "$KW"; return; }
	da=$(ks_stage "$a")
	as "$U_SUB" python3 -c 'import sys
for i in range(30000): open("%s/f%d" % (sys.argv[1], i), "w").close()' "$da/out" || fail "filling $da/out"
	as "$U_SUB" python3 -c '
import os, sys, signal, time
kw, log, end = sys.argv[1], open(sys.argv[2], "w", buffering=1), time.time() + 60
while time.time() < end:
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()[1] == kw:
                os.kill(int(p), signal.SIGSTOP)
                log.write("stopped %s\n" % p)
        except PermissionError:
            log.write("denied %s\n" % p)
        except Exception:
            pass
' "$KW" "$SHARED/stopper.log" &
	local stopper=$!
	wait_until 10 test -e "$SHARED/stopper.log" || fail "the stopper did not start"
	touch "$da/out/go" || fail "a's go file"
	t0=$SECONDS
	b=$(as "$U_OTH" kart submit --no-cwd --name b -- echo b-ran) || { fail "kart submit as $U_OTH"; }
	ks_done 45 "$b" "$a"
	[ -n "${KART_TEST_VERBOSE:-}" ] && echo "    the other user's result after $((SECONDS - t0)) s; $(sort "$SHARED/stopper.log" | uniq -c | awk '{print $2}' | sort | uniq -c | tr '\n' ' ')"
	tries=$(grep -c . "$SHARED/stopper.log")
	[ "$tries" -gt 0 ] || fail "she found no child of the worker to stop (the attack was not made)"
	assert_eq "ok b-ran" "$(ks_field "$b" .status) $(cat "$S/done/$b.stdout" 2>/dev/null)" "the other user's task, beside her stopped children"
	assert_eq "" "$(grep stopped "$SHARED/stopper.log" | head -3)" "children of the worker she stopped"
	kill "$stopper" 2>/dev/null
	wait "$stopper" 2>/dev/null
	stop_worker "$KW"
	took
}

# job/ is hers: a "status" she renames in there long before her job ends
# (and again, a thousand times) brings the next squeue forward once, and
# for STATUS_SOON_MS at most every POLL_MIN, not for as long as the job
# runs (it polled 86 times in 25 s against 2 without it, [slurm] poll =
# 30s); nor is her result published before Slurm ends the job, nor
# from the fake. Each Slurm command is logged by a wrapper ([slurm] bin).
test_slurm_backend_status_faked() {
	ks_spool || return
	local bin=$T_ROOT/slurm-bin calls=$T_ROOT/slurm-calls c id dd t0 t1 n
	mkdir -p "$bin" && : >"$calls" || { fail "mkdir $bin"; return; }
	for c in sbatch squeue sacct scancel scontrol; do
		printf '#!/bin/sh\necho "$(date +%%s.%%N) %s" >>%s\nexec %s "$@"\n' "$c" "$calls" "$(command -v "$c")" >"$bin/$c" &&
			chmod 0755 "$bin/$c" || { fail "wrapper $bin/$c"; return; }
	done
	sed -i "s/^poll = .*/poll = 30s/" "$S/kart.conf"
	printf 'bin = %s\n' "$bin" >>"$S/kart.conf"
	ks_worker
	# The task ends when the test says so (a file root makes in its
	# $KART_OUTDIR), not after a time: a slow machine must not end it
	# before the look below (a result then is no early one).
	id=$(ks_submit --name faked -- sh -c 'i=0; while [ ! -e "$KART_OUTDIR/go" ] && [ $i -lt 900 ]; do sleep 0.2; i=$((i + 1)); done; rm -f "$KART_OUTDIR/go"; echo real-end') ||
		{ fail "kart submit"; stop_worker "$KW"; return; }
	wait_until 60 ks_submitted "$id" || { fail "not submitted: $(tail -3 "$S.worker.log" | tr '\n' ' ')"; stop_worker "$KW"; return; }
	dd=$(ks_stage "$id")
	wait_until 60 test -L "$dd/job/run" || { fail "job $(ks_job "$id") did not start"; stop_worker "$KW"; return; }
	as "$U_SUB" python3 -c 'import os, sys
d = sys.argv[1] + "/job/"
open(d + "fake", "w").write("job=1\nwrapper=0\n--\nexit 0\n")
for i in range(500):
    os.rename(d + "fake", d + "status")
    os.rename(d + "status", d + "fake")
os.rename(d + "fake", d + "status")' "$dd" || fail "her fake job/status"
	assert_eq "exit 0" "$(tail -1 "$dd/job/status")" "her fake status is in place (the attack was made)"
	sleep 12
	t0=$(date +%s.%N)
	sleep 8
	t1=$(date +%s.%N)
	n=$(awk -v a="$t0" -v b="$t1" '$2 == "squeue" && $1 >= a && $1 < b' "$calls" | wc -l)
	[ -n "${KART_TEST_VERBOSE:-}" ] && echo "    squeue calls from 12 s to 20 s after her fake status: $n"
	[ "$n" -le 5 ] || fail "$n squeue calls in 8 s while her job ran with a fake job/status ([slurm] poll = 30s)"
	assert_eq "" "$(ls "$S/done/$id.json" 2>/dev/null)" "a result before her job ended ($(ks_field "$id" '[.status, .error, .duration_ms] | map(tostring) | join(" ")'))"
	touch "$dd/out/go" || fail "the task's go file in $dd/out"
	ks_done 60 "$id" || { stop_worker "$KW"; return; }
	assert_eq "ok real-end" "$(ks_field "$id" .status) $(cat "$S/done/$id.stdout")" "her result, from her job's real end"
	stop_worker "$KW"
	took
}

# The escape battery (tests/blackbox/escape.sh: tests/escape/probe.py)
# run as a Slurm job, as its submitter (nobody), a neighbour task beside
# it in another job: nothing the local sandbox blocks gets through here;
# the task's environment has SLURM_JOB_ID and SLURMD_NODENAME besides.
test_slurm_backend_escape() {
	need_slurm || return
	local stage=$T_ROOT/esc-stage res out
	mkdir -p "$stage" && chmod 0755 "$stage"
	res=$(mktemp "$T_ROOT/esc.XXXXXX")
	out=$(ESC_BACKEND=slurm ESC_ENV_ALLOWED="SLURM_JOB_ID SLURMD_NODENAME" ESC_CONF="$(printf '[worker]\nbackend = slurm\n[slurm]\nstage = %s\npartition = %s\npoll = 1s' "$stage" "$S_PART_MANY")" \
		KART_TEST_RESULTS=$res KART_TEST_CASE=escape_root_worker_as_submitter \
		bash "$ROOT/tests/blackbox/escape.sh" 2>&1)
	echo "$out" | grep -E 'escape battery \[|FAIL|SKIP' | sed 's/^ */    /'
	grep -q '^PASS test_escape_root_worker_as_submitter' "$res" ||
		fail "the battery as a Slurm job: $(echo "$out" | grep -E 'FAIL|SKIP' | head -5 | tr '\n' ' ')"
	assert_match 'escape battery \[.*\]: [1-9][0-9]* probes tried, 0 escapes' "$out" "the battery's count"
	took
}

# The crash sweep's technique around sbatch: the worker SIGKILLed at
# the Nth call of each system call of its Slurm thread (strace -p on the
# thread named kart-slurm: inject signal=KILL), then started again: each
# task runs exactly once and ends ok. The calls in order of a submission:
# fsetxattr (the run record; its 2nd: the job id), fsync (the record made
# durable), clone (sbatch: the worker makes the stage itself), wait4
# (sbatch back, the job existing and its id not yet recorded), read
# (sbatch's output). About two minutes: only
# with S_SWEEP=1 (make torture).
ks_sweep_point() {
	local sc=$1 n=$2 tid id i
	ks_worker ws
	for ((i = 0; i < 100; i++)); do
		tid=$(grep -lx kart-slurm /proc/"$KW"/task/*/comm 2>/dev/null | head -1 | cut -d/ -f5)
		[ -n "$tid" ] && break
		sleep 0.05
	done
	[ -n "$tid" ] || { fail "no thread named kart-slurm in the worker"; return 1; }
	strace -qq -o /dev/null -e trace="$sc" -e inject="$sc:signal=KILL:when=$n" -p "$tid" 2>/dev/null &
	local st=$!
	wait_until 10 traced_by "$tid" || { fail "strace did not attach"; kill "$st" 2>/dev/null; return 1; }
	id=$(ks_submit --name "w$sc$n" --bind "$SHARED" -- sh -c \
		"echo \$KART_ATTEMPT >$SHARED/ran.w$sc$n.\$SLURM_JOB_ID") || return 1
	SWEEP_IDS+=("$id")
	# Killed at that call, or the call never came: the worker stops.
	if wait_until 20 sh -c '! kill -0 "$1" 2>/dev/null' sh "$KW"; then
		SWEEP_KILLED=$((SWEEP_KILLED + 1))
	else
		kill "$st" 2>/dev/null
		stop_worker "$KW"
	fi
	wait "$KW" 2>/dev/null
	wait "$st" 2>/dev/null
	ks_worker ws
	ks_done 60 "$id" || { stop_worker "$KW"; return 1; }
	stop_worker "$KW"
	[ -z "${SWEEP_DEBUG:-}" ] || { grep -F "w$sc$n" "$S.worker.log" | tail -8; ls "$SHARED"; }
}
slurm_sweep() {
	ks_spool || return
	command -v strace >/dev/null || { fail "strace is missing (contrib/install-deps)"; return; }
	SWEEP_IDS=() SWEEP_KILLED=0
	local sc n i id bad=0 marks
	for sc in ${SWEEP_CALLS:-fsetxattr fsync clone wait4 read}; do
		for n in 1 2 3; do
			ks_sweep_point "$sc" "$n" || return
		done
	done
	for id in "${SWEEP_IDS[@]}"; do
		i=${id#*:}
		marks=$(ls "$SHARED" | grep -c "^ran\.$i\.")
		if [ "$(ks_field "$id" .status)" != ok ] || [ "$marks" != 1 ]; then
			[ $bad -lt 3 ] && fail "$id: status $(ks_field "$id" .status) ($(ks_field "$id" .error)), $marks run(s)"
			bad=$((bad + 1))
		fi
	done
	echo "    ${#SWEEP_IDS[@]} crash points, $SWEEP_KILLED killed the worker, $bad task(s) not run exactly once"
	assert_eq 0 "$bad" "tasks not run exactly once, or not ok"
	# The submitting thread makes only the calls around sbatch (squeue,
	# sacct and the stages have threads of their own): 8 of the 15
	# points come in a task's life; a sweep that kills at fewer than 6
	# missed its calls.
	[ -n "${SWEEP_CALLS:-}" ] || [ "$SWEEP_KILLED" -ge 6 ] || fail "only $SWEEP_KILLED points killed the worker: the sweep missed its calls"
	took
}
[ "${S_SWEEP:-0}" = 1 ] && test_slurm_backend_sweep() { slurm_sweep; }

if slurm_start; then echo "    slurm: $S_UP"; else S_WHY=${S_WHY:-unknown}; fi
run_tests
