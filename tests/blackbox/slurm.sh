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
# KART_TEST_SLURM_VM=1 adds test_slurm_second_node: a second node in the
# QEMU guest of tests/vm (two minutes of software emulation; not in make
# check).
. "$(dirname "$0")/../lib.sh"

U_TAG=${KART_TEST_USER_TAG:-}s39
U_SUB=${U_TAG}sub G_KART=${U_TAG}kart
U_IN=$U_SUB

S_DIR=$T_ROOT/slurm
. "$ROOT/tests/slurm-lib.sh"
[ "${KART_TEST_SLURM_VM:-0}" = 1 ] && S_TWO_NODES=1
trap 'slurm_stop; _cleanup' EXIT
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

# One case for the whole harness, its jobs side by side: the time limit
# costs a minute at least (Slurm counts it in minutes and checks it about
# every 30 s), and the other jobs run meanwhile.
test_slurm_harness() {
	need_slurm || return
	local out=$S_DIR/jobs uid gid name to id oom su j x n0 n1

	# TIMEOUT, with the signal asked for before it: USR1 to the batch
	# shell (B:) 30 s before the limit of 1 minute, then TERM at the
	# limit and KILL KillWait later. The script outlives both signals.
	to=$(submit kart-timeout --time=1 --signal=B:USR1@30 --mem=32M -- '
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
	if wait_acct "$to" TIMEOUT 180; then
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

if slurm_start; then echo "    slurm: $S_UP"; else S_WHY=${S_WHY:-unknown}; fi
run_tests
