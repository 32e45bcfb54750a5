# tests/slurm-lib.sh - a Slurm cluster of one's own, for the Slurm
# backend's tests (tests/blackbox/slurm.sh). Source it, set S_DIR (a new
# directory, under a parent the test users can traverse), then
# slurm_start (0, with SLURM_CONF exported and S_UP saying what runs; or
# 1 with S_WHY saying why not); slurm_stop at the end, from a trap, on
# failure too: it leaves no daemon, no job and no cgroup behind.
#
# Everything is private to S_DIR: munged (its own key and socket),
# MariaDB (its data on a tmpfs that only its own mount namespace sees:
# nothing to unmount), slurmdbd, slurmctld and slurmd, each with its own
# ports (free ones, asked of the kernel), state, spool, pid and log
# files. The node's name is unique to the run (kt$$): Debian builds Slurm
# for several slurmds a host, so the node's cgroups are
# /sys/fs/cgroup/<controller>/slurm_<node>/uid_<uid>/job_<id>/step_<step>,
# and two runs side by side do not meet there. The host's cgroup
# hierarchies are used as they are, never mounted or changed.
#
# The plugins, chosen for a hybrid cgroup v1 host (and kept for v2):
#   proctrack/cgroup + task/cgroup, ConstrainRAMSpace and ConstrainSwapSpace:
#     a job over its --mem is killed by the kernel and ends OUT_OF_MEMORY;
#   jobacct_gather/cgroup: MaxRSS, TotalCPU in sacct;
#   accounting_storage/slurmdbd over MariaDB (S_ACCT=dbd, the default):
#     sacct with State, ExitCode, MaxRSS, TotalCPU, Elapsed; or
#     S_ACCT=none: accounting_storage/none, and only jobcomp/filetxt's
#     record (sacct -c: State, ExitCode, Elapsed; no MaxRSS, no TotalCPU),
#     as at a site without slurmdbd; a second faster to start;
#   preempt/partition_prio, PreemptMode=CANCEL: a job of the partition
#     $S_PART_URGENT preempts one of $S_PART (PREEMPTED).
#
#   S_KILLWAIT  KillWait, the grace between SIGTERM and SIGKILL (default 5;
#               Slurm's own default is 30)
#   S_MSG_TIMEOUT MessageTimeout: how long a client tries a slurmctld that
#               does not answer (default 4; Slurm's own default is 10)
#   S_ACCT      dbd (default) or none
#   S_TWO_NODES 1: slurm.conf has a second node, $S_NODE2, down until
#               slurm_second_node boots it in a QEMU guest (tests/vm)
#   S_SHARE_CPUS N: a third partition, $S_PART_MANY, of up to N jobs a CPU
#               (OverSubscribe=FORCE:N): trivial jobs side by side on a
#               small host; the other two stay as they are (preemption)
#   S_FAST      1: SchedulerParameters=batch_sched_delay=0, the scheduler
#               starts batch jobs as they come (Slurm's default waits up
#               to 3 s to start them in groups)
# After slurm_start: S_NODE (the node's name), S_PART, S_PART_URGENT, S_PART_MANY,
# S_CTLD_PORT, S_SLURMD_PORT, S_START_S (seconds it took), S_CGROUP
# (v1 or v2).

S_DIR=${S_DIR:-} S_WHY= S_UP= S_NODE= S_NODE2= S_NODES= S_PART=kart S_PART_URGENT=kart-urgent
S_PART_MANY=kart-many
S_KILLWAIT=${S_KILLWAIT:-5} S_MSG_TIMEOUT=${S_MSG_TIMEOUT:-4} S_ACCT=${S_ACCT:-dbd} S_TWO_NODES=${S_TWO_NODES:-}
S_SHARE_CPUS=${S_SHARE_CPUS:-1} S_FAST=${S_FAST:-}
S_CTLD_PORT= S_SLURMD_PORT= S_DBD_PORT= S_NODE2_PORT= S_START_S= S_CGROUP=
S_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Daemons, as "NAME:PID" (pids of this shell's children).
S_DAEMONS=()

# s_ports N: N free TCP ports on 127.0.0.1, all held open at once so that
# they differ; another program may take one before the daemon binds it,
# which the daemon's start then reports.
s_ports() {
	/usr/bin/python3 -c '
import socket, sys
s = [socket.socket() for _ in range(int(sys.argv[1]))]
for x in s:
    x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))' "$1"
}

# s_daemon NAME CMD...: CMD in the background, in S_DIR (a daemon's cwd
# is its stepds' too: never a directory a test may remove), its stderr
# in log/NAME.err.
s_daemon() {
	local name=$1; shift
	(cd "$S_DIR" && exec "$@") </dev/null >>"$S_DIR/log/$name.err" 2>&1 &
	S_DAEMONS+=("$name:$!")
}

# s_alive NAME: the daemon NAME still runs.
s_alive() {
	local d
	for d in "${S_DAEMONS[@]}"; do
		[ "${d%%:*}" = "$1" ] && kill -0 "${d#*:}" 2>/dev/null && return 0
	done
	return 1
}

# s_wait NAME SECONDS WHAT CMD...: until CMD succeeds; S_WHY names the
# daemon NAME and the end of its log when it dies or the time runs out.
s_wait() {
	local name=$1 t=$2 what=$3 end; shift 3
	end=$((SECONDS + t))
	until "$@" >/dev/null 2>&1; do
		if ! s_alive "$name" || [ $SECONDS -ge $end ]; then
			local log=$S_DIR/log/$name.log
			[ -s "$log" ] || log=$S_DIR/log/$name.err
			S_WHY="$name: $what ($(s_alive "$name" && echo "not within ${t}s" || echo "it exited")): $(grep -v 'pmix\|MPI\|mpi/' "$log" 2>/dev/null | tail -2 | tr '\n' ' ')"
			return 1
		fi
		sleep 0.05
	done
}

# slurm_conf DIR CTLD-ADDR: slurm.conf and cgroup.conf in DIR, for the
# nodes in S_NODES ("NAME:ADDR:PORT:CPUS:MEMORY_MB" each), reaching
# slurmctld at CTLD-ADDR.
slurm_conf() {
	local dir=$1 ctld=$2 n name addr port cpus mem names=
	mkdir -p "$dir"
	{
		cat <<-EOF
		# Written by tests/slurm-lib.sh for one test run.
		ClusterName=kart
		SlurmctldHost=$(hostname -s)($ctld)
		SlurmctldPort=$S_CTLD_PORT
		SlurmdPort=$S_SLURMD_PORT
		SlurmUser=root
		SlurmdUser=root
		AuthType=auth/munge
		CredType=cred/munge
		AuthInfo=socket=$S_DIR/munge/socket
		StateSaveLocation=$S_DIR/state
		SlurmdSpoolDir=$S_DIR/spool/%n
		SlurmctldPidFile=$S_DIR/run/slurmctld.pid
		SlurmdPidFile=$S_DIR/run/slurmd.%n.pid
		SlurmctldLogFile=$S_DIR/log/slurmctld.log
		SlurmdLogFile=$S_DIR/log/slurmd.%n.log
		SlurmctldDebug=info
		SlurmdDebug=info
		MailProg=/bin/true
		MpiDefault=none
		ProctrackType=proctrack/cgroup
		TaskPlugin=task/cgroup
		JobAcctGatherType=jobacct_gather/cgroup
		JobCompType=jobcomp/filetxt
		JobCompLoc=$S_DIR/log/jobcomp.txt
		SchedulerType=sched/backfill
		SelectType=select/cons_tres
		SelectTypeParameters=CR_Core_Memory
		DefMemPerCPU=256
		PreemptType=preempt/partition_prio
		PreemptMode=CANCEL
		ReturnToService=2
		KillWait=$S_KILLWAIT
		# A client gives up on a slurmctld that is down after this
		# (Slurm's default, 10 s, is each command's wait in the tests
		# that stop it).
		MessageTimeout=$S_MSG_TIMEOUT
		# The guest node's slurm.conf differs from this one by
		# SlurmctldHost's address.
		DebugFlags=NO_CONF_HASH
		EOF
		[ "$S_FAST" = 1 ] && echo "SchedulerParameters=batch_sched_delay=0"
		if [ "$S_ACCT" = dbd ]; then
			cat <<-EOF
			AccountingStorageType=accounting_storage/slurmdbd
			AccountingStorageHost=127.0.0.1
			AccountingStoragePort=$S_DBD_PORT
			# To slurmdbd, the munge socket is named here, not by AuthInfo.
			AccountingStoragePass=$S_DIR/munge/socket
			EOF
		else
			echo "AccountingStorageType=accounting_storage/none"
		fi
		for n in $S_NODES; do
			IFS=: read -r name addr port cpus mem <<<"$n"
			echo "NodeName=$name NodeAddr=$addr Port=$port CPUs=$cpus RealMemory=$mem State=UNKNOWN"
			names=${names:+$names,}$name
		done
		echo "PartitionName=$S_PART Nodes=$names Default=YES MaxTime=INFINITE State=UP PriorityTier=1"
		echo "PartitionName=$S_PART_URGENT Nodes=$names MaxTime=INFINITE State=UP PriorityTier=2"
		[ "$S_SHARE_CPUS" -gt 1 ] 2>/dev/null &&
			echo "PartitionName=$S_PART_MANY Nodes=$names MaxTime=INFINITE State=UP PriorityTier=1 OverSubscribe=FORCE:$S_SHARE_CPUS"
	} >"$dir/slurm.conf"
	cat >"$dir/cgroup.conf" <<-EOF
	CgroupPlugin=autodetect
	CgroupAutomount=no
	# A pure cgroup v2 host without systemd (the QEMU guest): Slurm makes
	# its own scope.
	IgnoreSystemd=yes
	ConstrainCores=yes
	ConstrainRAMSpace=yes
	ConstrainSwapSpace=yes
	AllowedSwapSpace=0
	EOF
}

# s_db: MariaDB in a mount namespace of its own, its data on a tmpfs there
# (on disk, its set-up's thousand fdatasyncs cost seconds), no system
# tables (--skip-grant-tables: mariadb-install-db is a second of CPU, and
# slurmdbd needs no grants), no network: its socket is in run/, which
# only root reaches (libmariadb finds it by MYSQL_UNIX_PORT).
s_db() {
	local o="--innodb-log-file-size=4M --innodb-buffer-pool-size=32M --innodb-flush-log-at-trx-commit=0
		--innodb-doublewrite=0 --innodb-flush-method=nosync --skip-log-bin --skip-name-resolve"
	mkdir -p "$S_DIR/db"
	# shellcheck disable=SC2086
	s_daemon mariadb unshare -m --propagation private sh -c '
		d=$1; shift
		mount -t tmpfs -o size=512m,mode=0700 kart-slurm-db "$d/db" && mkdir "$d/db/data" &&
		exec mariadbd --no-defaults --user=root --datadir="$d/db/data" --socket="$d/run/mariadb.sock" \
			--pid-file="$d/run/mariadb.pid" --skip-networking --skip-grant-tables \
			--log-error="$d/log/mariadb.log" "$@"' sh "$S_DIR" $o
}

# s_dbd: slurmdbd, once MariaDB takes connections (its socket appears
# then). slurmctld registers the cluster itself.
s_dbd() {
	s_wait mariadb 60 "MariaDB did not start" test -S "$S_DIR/run/mariadb.sock" || return 1
	cat >"$S_DIR/etc/slurmdbd.conf" <<-EOF
	AuthType=auth/munge
	AuthInfo=socket=$S_DIR/munge/socket
	DbdHost=localhost
	DbdAddr=127.0.0.1
	DbdPort=$S_DBD_PORT
	SlurmUser=root
	LogFile=$S_DIR/log/slurmdbd.log
	PidFile=$S_DIR/run/slurmdbd.pid
	DebugLevel=info
	StorageType=accounting_storage/mysql
	StorageHost=localhost
	StorageUser=root
	StorageLoc=kart_acct
	EOF
	chmod 0600 "$S_DIR/etc/slurmdbd.conf"
	s_daemon slurmdbd env MYSQL_UNIX_PORT="$S_DIR/run/mariadb.sock" slurmdbd -D
	# It listens once its tables are made.
	s_wait slurmdbd 30 "slurmdbd did not listen" s_listens "$S_DBD_PORT"
}

# s_listens PORT: something takes connections on 127.0.0.1:PORT.
s_listens() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

slurm_start() {
	local c ts
	ts=$(date +%s%N)
	[ "$(id -u)" = 0 ] || { S_WHY="needs root (slurmd runs jobs as other users)"; return 1; }
	for c in munged slurmctld slurmd slurmstepd sbatch squeue sacct scontrol scancel sinfo; do
		command -v "$c" >/dev/null || { S_WHY="$c is missing (contrib/install-deps: munge, slurmctld, slurmd, slurm-client)"; return 1; }
	done
	if [ "$S_ACCT" = dbd ]; then
		for c in slurmdbd mariadbd unshare; do
			command -v "$c" >/dev/null || { S_WHY="$c is missing (contrib/install-deps: slurmdbd, mariadb-server-core)"; return 1; }
		done
	fi
	[ -x /usr/bin/python3 ] || { S_WHY="no /usr/bin/python3 (finds free ports)"; return 1; }
	if [ -d /sys/fs/cgroup/freezer ] && [ -d /sys/fs/cgroup/memory ]; then
		S_CGROUP=v1
	elif [ -e /sys/fs/cgroup/cgroup.controllers ]; then
		S_CGROUP=v2
	else
		S_WHY="no cgroup v1 freezer and memory hierarchies, and no cgroup2 at /sys/fs/cgroup"
		return 1
	fi
	[ -n "$S_DIR" ] && mkdir -p "$S_DIR" || { S_WHY="S_DIR is not set, or cannot be made"; return 1; }
	# Job outputs and the munge socket are reached by the test users.
	chmod 0755 "$S_DIR"
	mkdir -p "$S_DIR"/etc "$S_DIR"/munge "$S_DIR"/munge-key "$S_DIR"/state "$S_DIR"/spool \
		"$S_DIR"/log "$S_DIR"/run
	mkdir -p "$S_DIR"/jobs && chmod 1777 "$S_DIR"/jobs
	chmod 0700 "$S_DIR"/munge-key "$S_DIR"/run
	# The variables of an enclosing Slurm job (or a user's defaults) would
	# change what sbatch and squeue do.
	# shellcheck disable=SC2046
	unset $(compgen -e | grep -E '^(SLURM|SBATCH|SALLOC|SRUN|SQUEUE|SACCT|SINFO|SCONTROL)_') 2>/dev/null
	export SLURM_CONF=$S_DIR/etc/slurm.conf
	S_NODE=kt$$
	s_stale
	read -r S_CTLD_PORT S_SLURMD_PORT S_DBD_PORT S_NODE2_PORT < <(s_ports 4)
	[ -n "$S_NODE2_PORT" ] || { S_WHY="cannot find free ports"; return 1; }
	local mem
	mem=$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)
	S_NODES="$S_NODE:127.0.0.1:$S_SLURMD_PORT:$(nproc):$mem"
	if [ "$S_TWO_NODES" = 1 ]; then
		# The guest's: one emulated CPU, 1 GB of which the kernel keeps some.
		S_NODE2=${S_NODE}b
		S_NODES="$S_NODES $S_NODE2:127.0.0.1:$S_NODE2_PORT:1:768"
	fi
	slurm_conf "$S_DIR/etc" 127.0.0.1

	# MariaDB takes longest: it starts first, beside munged.
	[ "$S_ACCT" = dbd ] && s_db
	head -c 1024 /dev/urandom >"$S_DIR/munge-key/key" && chmod 0400 "$S_DIR/munge-key/key"
	# --force: munged, run as root, would refuse to.
	s_daemon munged munged -F --force --key-file="$S_DIR/munge-key/key" \
		--socket="$S_DIR/munge/socket" --pid-file="$S_DIR/run/munged.pid" \
		--log-file="$S_DIR/log/munged.log" --seed-file="$S_DIR/munge-key/seed"
	s_wait munged 10 "munged did not start" test -S "$S_DIR/munge/socket" || return 1
	if [ "$S_ACCT" = dbd ]; then
		s_dbd || return 1
	fi
	s_daemon slurmctld slurmctld -D -i
	s_wait slurmctld 30 "slurmctld did not answer" scontrol ping || return 1
	s_daemon slurmd slurmd -D -N "$S_NODE"
	s_wait slurmd 30 "the node $S_NODE did not come up" s_node_up "$S_NODE" || return 1
	S_START_S=$(( ($(date +%s%N) - ts) / 1000000 ))
	S_START_S=$((S_START_S / 1000)).$(printf '%03d' $((S_START_S % 1000)))
	S_UP="Slurm $(sinfo -V | awk '{print $2}'), cgroup $S_CGROUP, accounting $S_ACCT, node $S_NODE, up in ${S_START_S}s"
}

# slurm_ctld_stop: slurmctld alone stops (its jobs run on under slurmd);
# slurm_ctld_start starts it again on its saved state. 0, or 1 with S_WHY.
slurm_ctld_stop() {
	local d keep=()
	for d in "${S_DAEMONS[@]}"; do
		if [ "${d%%:*}" = slurmctld ]; then
			kill -TERM "${d#*:}" 2>/dev/null
			s_reap "${d#*:}"
		else
			keep+=("$d")
		fi
	done
	S_DAEMONS=("${keep[@]}")
}
slurm_ctld_start() {
	s_daemon slurmctld slurmctld -D -i
	s_wait slurmctld 60 "slurmctld did not answer again" scontrol ping
}

# s_node_up NODE: the node is idle or allocated (registered, not down).
s_node_up() {
	case $(sinfo -h -N -n "$1" -o %T 2>/dev/null) in
	idle*|mixed*|allocated*) return 0 ;;
	esac
	return 1
}

# slurm_second_node: boots the node $S_NODE2 (slurm_start with
# S_TWO_NODES=1) in the QEMU guest of tests/vm, software emulation, and
# waits until slurmctld has it (a minute or two); slurm_stop stops it.
# The guest (tests/vm/slurm-node) shares the host's root read-only and
# the parent of S_DIR (S_SHARE, the test's directory) read-write at the
# same path: a file a test puts there is seen by jobs on both nodes.
# Users must exist before it boots (the guest caches /etc/passwd).
# 0, or 1 with S_WHY.
slurm_second_node() {
	local c cache kernel vm=$S_DIR/vm share=${S_SHARE:-$(dirname "$S_DIR")}
	[ -n "$S_NODE2" ] || { S_WHY="no second node in slurm.conf (slurm_start without S_TWO_NODES=1)"; return 1; }
	for c in qemu-system-x86_64 cpio; do
		command -v "$c" >/dev/null || { S_WHY="$c is missing (contrib/install-deps)"; return 1; }
	done
	[ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 ||
		{ S_WHY="no static /bin/busybox (package busybox-static)"; return 1; }
	cache=$("$S_ROOT/tests/vm/setup") || { S_WHY="tests/vm/setup could not fetch the guest's kernel"; return 1; }
	[ -e "$cache/modules/virtio_net.ko" ] ||
		{ S_WHY="the guest's kernel ($cache) has no virtio_net module: an older cache, kept offline"; return 1; }
	kernel=$cache/vmlinux
	[ -e "$kernel" ] || kernel=$cache/vmlinuz
	mkdir -p "$vm"/initramfs/bin "$vm"/initramfs/dev "$vm"/initramfs/proc "$vm"/initramfs/sys \
		"$vm"/initramfs/newroot
	cp /bin/busybox "$vm/initramfs/bin/busybox"
	cp "$S_ROOT/tests/vm/init" "$vm/initramfs/init"
	cp -r "$cache/modules" "$vm/initramfs/modules"
	(cd "$vm/initramfs" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) >"$vm/initramfs.cpio" ||
		{ S_WHY="cpio could not pack the guest's initramfs"; return 1; }
	# The guest reaches slurmctld through QEMU's gateway to the host's
	# loopback; its slurm.conf says so, and differs in nothing else.
	slurm_conf "$S_DIR/etc/guest" 10.0.2.2
	{
		printf 'S_DIR=%q\nS_SHARE=%q\nS_NODE2=%q\n' "$S_DIR" "$share" "$S_NODE2"
		printf 'GUEST_CONF=%q\n' "$S_DIR/etc/guest/slurm.conf"
	} >"$vm/env"
	# The guest numbers the share's inodes its own way (9p: not the
	# host's numbers), as a node of a cluster may: nothing kart-launch
	# checks in the stage rests on them.
	s_daemon qemu qemu-system-x86_64 \
		-accel tcg,thread=multi -cpu max -smp 1 -m 1024 \
		-nodefaults -no-reboot -display none -monitor none \
		-serial "file:$S_DIR/log/qemu.log" \
		-kernel "$kernel" -initrd "$vm/initramfs.cpio" \
		-append "console=ttyS0 panic=-1 loglevel=4 kartvm.init=$S_ROOT/tests/vm/slurm-node kartslurm.env=$vm/env" \
		-virtfs "local,path=/,mount_tag=root,security_model=none,readonly=on,multidevs=remap" \
		-virtfs "local,path=$share,mount_tag=share,security_model=none,multidevs=warn" \
		-netdev "user,id=n0,hostfwd=tcp:127.0.0.1:$S_NODE2_PORT-:$S_NODE2_PORT" \
		-device virtio-net-pci,netdev=n0
	s_wait qemu 600 "the node $S_NODE2 did not come up in the guest" s_node_up "$S_NODE2" || {
		S_WHY="$S_WHY; its log: $(tail -3 "$S_DIR/log/vm-$S_NODE2.log" 2>/dev/null | tr '\n' ' ')"
		return 1
	}
}

# s_stale: the cgroups a killed run left (slurm_kt<pid>, its pid gone),
# where no process is left in them. Another run's, alive, is not touched.
s_stale() {
	local d n
	for d in /sys/fs/cgroup/*/slurm_kt[0-9]*; do
		[ -d "$d" ] || continue
		n=${d##*/slurm_kt}
		n=${n%b}
		kill -0 "$n" 2>/dev/null && continue
		find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	return 0
}

# s_cgroup_kill NODE: kills every process in the node's cgroups (the
# stepds and the jobs, which outlive slurmd), thawing them first (a frozen
# v1 task does not die before it thaws), until none is left; then removes
# the cgroups, deepest first.
s_cgroup_kill() {
	local dirs=() d p pids i
	for d in /sys/fs/cgroup/freezer/slurm_"$1" /sys/fs/cgroup/system.slice/"$1"_slurmstepd.scope; do
		[ -d "$d" ] && dirs+=("$d")
	done
	for ((i = 0; i < 40 && ${#dirs[@]} > 0; i++)); do
		pids=$(find "${dirs[@]}" -name cgroup.procs -exec cat {} + 2>/dev/null)
		[ -n "$pids" ] || break
		find "${dirs[@]}" -name freezer.state 2>/dev/null | while read -r d; do echo THAWED >"$d"; done 2>/dev/null
		for p in $pids; do kill -9 "$p" 2>/dev/null; done
		sleep 0.05
	done
	for d in /sys/fs/cgroup/*/slurm_"$1" /sys/fs/cgroup/system.slice/"$1"_slurmstepd.scope; do
		[ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	return 0
}

slurm_stop() {
	[ ${#S_DAEMONS[@]} -gt 0 ] || return 0
	local d pid end n
	# The jobs and their slurmstepds first: a slurmd asked to stop waits
	# for its jobs to end, which takes KillWait and more.
	for n in $S_NODES; do s_cgroup_kill "${n%%:*}"; done
	# Slurm's daemons together; munged and MariaDB after them.
	for d in "${S_DAEMONS[@]}"; do
		case ${d%%:*} in munged|mariadb) ;; *) kill -TERM "${d#*:}" 2>/dev/null ;; esac
	done
	for d in "${S_DAEMONS[@]}"; do
		case ${d%%:*} in munged|mariadb) continue ;; esac
		s_reap "${d#*:}"
	done
	# What a dying slurmd may have started meanwhile.
	for n in $S_NODES; do s_cgroup_kill "${n%%:*}"; done
	for d in "${S_DAEMONS[@]}"; do
		case ${d%%:*} in munged|mariadb) kill -TERM "${d#*:}" 2>/dev/null ;; esac
	done
	for d in "${S_DAEMONS[@]}"; do s_reap "${d#*:}"; done
	S_DAEMONS=()
}

# s_reap PID: a bounded wait for a daemon told to stop, then SIGKILL.
s_reap() {
	local end=$((SECONDS + 10))
	while kill -0 "$1" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.05; done
	kill -9 "$1" 2>/dev/null
	{ wait "$1"; } 2>/dev/null
}
