#!/bin/bash
# Black-box: the escape battery. tests/escape/probe.py runs as a real task
# through the real worker and bwrap, and tries what a task must not be
# able to do: reach the network, write the system, read the spool, the
# worker's home, a secret and the host's /tmp, see or signal the worker
# or a neighbour task running beside it (same owner, same worker), read
# the neighbour's files,
# hold capabilities, create namespaces, use the syscalls container
# runtimes block, push input into a terminal, find the worker's
# environment or descriptors. Each probe prints "PROBE name blocked (...)"
# or "PROBE name ESCAPED (...)"; any ESCAPED, any probe missing from the
# output, and any trace on the host side (listener log, files) fails.
#
# ESC_CONF: lines added to each battery's kart.conf, ESC_BACKEND the
# backend its results must name (default bwrap), ESC_ENV_ALLOWED the
# variables that backend gives a task besides the contract's: slurm.sh
# runs the battery so, as a job of its test Slurm (backend slurm).
#
# Run four ways: a root worker running a root task (allow_root), a root
# worker running a task as its submitter (nobody), the same with the task
# in a host directory of its own (cwd=, bound), and an unprivileged
# worker (nobody). Each prints "escape battery [...]: N probes tried, E
# escapes".
. "$(dirname "$0")/../lib.sh"

PROBE_PY=$ROOT/tests/escape/probe.py

# Every probe probe.py must report (kept in step with it by hand: a probe
# that silently stops running is a failure here, not a pass).
PROBES=(
	net_tcp_connect_loopback net_tcp_connect_host_ip net_udp_send net_udp_send_host_ip
	net_abstract_unix net_interfaces
	fs_write_etc fs_write_usr fs_write_root fs_write_var fs_write_usr_bin fs_write_task_file
	fs_write_launcher
	fs_read_spool fs_read_spool_done fs_read_worker_home fs_read_root_home fs_read_secret
	fs_read_host_tmp fs_read_shadow fs_read_host_proc_root
	proc_see_worker proc_signal_worker proc_ptrace_pid1 proc_ptrace_traceme proc_launcher_fds
	proc_see_neighbour proc_signal_neighbour fs_read_neighbour_files
	priv_capeff priv_capprm priv_capinh priv_capbnd priv_capamb priv_no_new_privs
	priv_seccomp_mode
	sys_unshare_user sys_unshare_mount sys_unshare_net sys_clone_newuser sys_clone3 sys_keyctl
	sys_add_key sys_request_key sys_io_uring_setup sys_userfaultfd sys_perf_event_open sys_bpf
	sys_mount sys_fsopen sys_open_tree sys_setns sys_personality sys_kexec_load
	sys_open_by_handle_at sys_socket_vsock sys_socket_netlink_sock_diag sys_socket_netlink_audit
	sys_socket_netlink_uevent abi_i386 abi_x32
	tty_open tty_tiocsti_std tty_tiocsti_own_pty
	leak_environment leak_fds
)

ESC_TOTAL_TRIED=0 ESC_TOTAL_ESCAPES=0

# Whether this kernel runs i386 calls at all, asked on the host with no
# filter: one booted without IA32 emulation answers int 0x80 with
# SIGSEGV, and the abi_i386 probe then accepts SIGSEGV inside too.
# Prints true or false.
host_i386() {
	/usr/bin/python3 - <<'EOF'
import ctypes, mmap, os, signal
pid = os.fork()
if pid == 0:
    m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    m.write(b"\xb8\x14\x00\x00\x00\xcd\x80\xc3")  # getpid through int 0x80
    r = ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(m)))()
    os._exit(0 if r == os.getpid() else 1)
st = os.waitpid(pid, 0)[1]
segv = os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGSEGV
print("false" if segv else "true")
EOF
}
HOST_I386=$(host_i386)

can_run() {
	have_bwrap || { skip "bwrap cannot build a sandbox here"; return 1; }
	[ "$(id -u)" = 0 ] || { skip "needs root (a root worker, and setpriv to nobody)"; return 1; }
	id nobody >/dev/null 2>&1 || { skip "no user nobody"; return 1; }
	command -v setpriv >/dev/null || { skip "setpriv (util-linux) is missing"; return 1; }
	[ -x /usr/bin/python3 ] || { skip "/usr/bin/python3 is missing (the probes are Python)"; return 1; }
}

# A listener on every host address: TCP and UDP on one port pair, and an
# abstract unix socket. It answers "kart-listener" and logs whatever
# reaches it. Sets L_TCP, L_UDP, L_LOG, L_PID; it ends itself after 300s.
start_listener() {
	local dir=$1 abs=$2
	L_LOG=$dir/listener.log
	: >"$L_LOG"
	/usr/bin/python3 - "$dir/ports" "$L_LOG" "$abs" <<'EOF' &
import selectors, signal, socket, sys
signal.alarm(300)
ports, log, abs_name = sys.argv[1:4]
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("0.0.0.0", 0)); t.listen(16)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("0.0.0.0", 0))
a = socket.socket(socket.AF_UNIX); a.bind("\0" + abs_name); a.listen(4)
sel = selectors.DefaultSelector()
for s in (t, u, a):
    sel.register(s, selectors.EVENT_READ)
with open(ports + ".tmp", "w") as f:
    f.write("%d %d\n" % (t.getsockname()[1], u.getsockname()[1]))
import os; os.rename(ports + ".tmp", ports)
def note(msg):
    with open(log, "a") as f:
        f.write(msg + "\n")
while True:
    for key, _ in sel.select():
        s = key.fileobj
        if s is u:
            data, peer = u.recvfrom(200)
            note("udp from %s: %r" % (peer, data)); u.sendto(b"kart-listener", peer)
        else:
            c, peer = s.accept()
            note("%s from %r" % ("tcp" if s is t else "unix", peer))
            try:
                c.sendall(b"kart-listener\n")
            except OSError:
                pass
            c.close()
EOF
	L_PID=$!
	T_PIDS+=("$L_PID")
	wait_until 20 test -s "$dir/ports" || { fail "the listener did not start"; return 1; }
	read -r L_TCP L_UDP <"$dir/ports"
}

host_ip() {
	local ip
	ip=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9]+(\.[0-9]+){3}$' | grep -v '^127\.' | head -1)
	echo "${ip:-127.0.0.1}"
}

# run_battery LABEL MODE: MODE is root (root worker, root task), submitter
# (root worker, task owned by nobody) or nobody (the worker runs as nobody).
run_battery() {
	local label=$1 mode=$2
	can_run || return
	local nonce; nonce=$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
	local base=$T_ROOT/esc-$mode
	mkdir -p "$base"
	chmod 755 "$T_ROOT" "$base"
	local wuser=root as=()
	if [ "$mode" = nobody ]; then
		wuser=nobody
		as=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
		chown nobody:nogroup "$base"
	fi
	# The worker's own things the task must not see.
	local home=$base/home secret=$base/secret marker=/tmp/kart-escape-marker.$nonce
	mkdir -p "$home"
	echo "worker-home-$nonce" >"$home/.profile-kart"
	echo "secret-$nonce" >"$secret"
	chmod 600 "$secret"
	chown -R "$wuser" "$home" "$secret"
	echo "host-tmp-$nonce" >"$marker"
	# Binaries where every user can run them (kart finds kart-launch beside it).
	local bin=$base/bin
	mkdir -p "$bin"
	cp "$KART" "$KART_BUILD/kart-launch" "$bin/"
	chmod 755 "$bin" "$bin/kart" "$bin/kart-launch"
	local s=$base/spool
	"${as[@]}" "$bin/kart" -s "$s" init || { fail "kart init as $wuser"; rm -f "$marker"; return; }
	[ -z "${ESC_CONF:-}" ] || printf '%s\n' "$ESC_CONF" >>"$s/kart.conf"

	start_listener "$base" "kart-escape-$nonce" || { rm -f "$marker"; return; }
	local canary_name=ESCAPE_CANARY_$nonce canary_value=canary-value-$nonce
	"${as[@]}" env HOME="$home" "$canary_name=$canary_value" KART_ALLOW_ROOT=yes \
		"$bin/kart" -s "$s" worker --slots 2 >>"$base/worker.log" 2>&1 &
	local wpid=$!
	T_PIDS+=("$wpid")
	# Its claim directory appears once it runs.
	wait_until 20 sh -c 'ls -A "$1/cur" | grep -q .' _ "$s" ||
		fail "the worker did not start: $(tail -3 "$base/worker.log")"

	# A neighbour: another task of the same owner, running beside the
	# probes in the same worker, with a file in its work directory and
	# one in its $KART_OUTDIR (a tmpfs of its own, mounted on its claim
	# directory's .NAME.out in the worker's namespace: the probes try the
	# host path and the neighbour's /proc). Its command line carries a
	# tag the probes look for; its pid is the host's.
	local ntag=neighbour-$nonce
	printf '#!/bin/sh\n#kart: timeout=110s\necho %s >./mark\necho %s >"$KART_OUTDIR/mark"\nexec /usr/bin/python3 -c "import time; time.sleep(100)" %s\n' \
		"$ntag" "$ntag" "$ntag" >"$s/tmp/neighbour"
	[ "$mode" = root ] || chown nobody:nogroup "$s/tmp/neighbour"
	mv "$s/tmp/neighbour" "$s/new/neighbour"
	local npid="" nout
	wait_until 30 eval 'npid=$(pgrep -f -n "time\.sleep\(100\) $ntag\$")' ||
		fail "the neighbour task did not start: $(tail -3 "$base/worker.log")"
	nout=$(echo "$s"/cur/*/.neighbour.out)
	wait_until 10 sh -c 'test -s "$1/mark" || test -s "/proc/$2/root/run/kart/out/mark"' _ "$nout" "$npid" ||
		fail "the neighbour's mark is not in its \$KART_OUTDIR ($nout)"

	# The task: probe.py, with what the host knows in front of it.
	local params
	params=$(jq -cn --arg spool "$s" --arg home "$home" --arg secret "$secret" \
		--arg marker "$marker" --argjson wpid "$wpid" --argjson tcp "$L_TCP" \
		--argjson udp "$L_UDP" --arg abs "kart-escape-$nonce" --arg hip "$(host_ip)" \
		--arg cn "$canary_name" --arg cv "$canary_value" --arg nonce "$nonce" \
		--argjson npid "${npid:-0}" --arg nout "$nout" --arg ntag "$ntag" \
		--argjson i386 "$HOST_I386" \
		--argjson envok "$(printf '%s\n' ${ESC_ENV_ALLOWED:-} | jq -R . | jq -sc 'map(select(. != ""))')" \
		'{host_i386:$i386, spool:$spool, worker_home:$home, secret:$secret, tmp_marker:$marker,
		  worker_pid:$wpid, tcp_port:$tcp, udp_port:$udp, abstract:$abs, host_ip:$hip,
		  canary_name:$cn, canary_value:$cv, nonce:$nonce,
		  neighbour_pid:$npid, neighbour_out:$nout, neighbour_tag:$ntag, env_allowed:$envok}')
	# Mode bound: the task of nobody works in a directory of its own on
	# the host (cwd=), bound read-write: nothing more may be reached.
	local cwdline=""
	if [ "$mode" = bound ]; then
		mkdir -p "$base/work" && chown nobody:nogroup "$base/work"
		cwdline="#kart: cwd=$base/work"
	fi
	{
		printf '#!/usr/bin/python3\n#kart: timeout=90s\n%s\nimport json\n' "$cwdline"
		printf 'P = json.loads(%s)\n' "$(jq -Rn --arg p "$params" '$p')"
		cat "$PROBE_PY"
	} >"$s/tmp/escape"
	[ "$mode" = root ] || chown nobody:nogroup "$s/tmp/escape"
	mv "$s/tmp/escape" "$s/new/escape"
	wait_until 120 test -e "$s/done/escape.json" || fail "no result within 120s"
	kill -0 "$wpid" 2>/dev/null || fail "the worker died during the battery"
	# The neighbour ran on, untouched, until cancelled.
	[ -n "$npid" ] && kill -0 "$npid" 2>/dev/null || fail "the neighbour task did not outlive the probes"
	[ -e "$s/done/neighbour.json" ] && fail "the neighbour ended early: $(jq -c '[.status, .signal]' "$s/done/neighbour.json")"
	"${as[@]}" "$bin/kart" -s "$s" cancel neighbour >/dev/null || fail "kart cancel neighbour"
	wait_until 30 test -e "$s/done/neighbour.json" || fail "no result for the cancelled neighbour"
	assert_eq cancelled "$(jq -r .status "$s/done/neighbour.json" 2>/dev/null)" "the neighbour's status"
	stop_worker "$wpid"
	[ "$RC" = 0 ] || fail "the worker exited $RC after SIGTERM"
	rm -f "$marker"
	kill "$L_PID" 2>/dev/null
	[ -e "$s/done/escape.json" ] || { echo "    worker log:" >&2; tail -5 "$base/worker.log" >&2; return; }

	local j=$s/done/escape.json out=$s/done/escape.stdout
	assert_eq ok "$(jq -r .status "$j")" "status of the probe task ($(head -c 300 "$s/done/escape.stderr"))"
	assert_eq true "$(jq -r .sandbox.seccomp "$j")" sandbox.seccomp
	assert_eq "${ESC_BACKEND:-bwrap}" "$(jq -r .sandbox.backend "$j")" sandbox.backend
	local want_uid=0
	[ "$mode" = root ] || want_uid=$(id -u nobody)
	assert_eq "$want_uid" "$(jq -r .submitter.uid "$j")" "submitter.uid"
	grep -q '^PROBES DONE$' "$out" || fail "probe.py did not run to its end"
	if [ "$mode" = bound ]; then
		assert_eq "$base/work" "$(jq -r .cwd "$j")" "the result's cwd"
	fi

	local p line tried=0 escapes=0
	for p in "${PROBES[@]}"; do
		line=$(grep -E "^PROBE $p (blocked|ESCAPED) " "$out")
		if [ -z "$line" ]; then
			fail "probe $p: no report"
			escapes=$((escapes + 1))
			continue
		fi
		[ "$(printf '%s\n' "$line" | wc -l)" = 1 ] || fail "probe $p: reported more than once"
		tried=$((tried + 1))
		case $line in
		"PROBE $p blocked "*) ;;
		*) fail "$label: $line"; escapes=$((escapes + 1)) ;;
		esac
	done
	# A probe this list does not know is out of step with probe.py.
	local extra
	extra=$(grep '^PROBE ' "$out" | awk '{print $2}' | sort -u |
		grep -vxF -f <(printf '%s\n' "${PROBES[@]}") || true)
	[ -z "$extra" ] || fail "probes unknown to escape.sh: $extra"
	grep -q ' ESCAPED ' "$out" && [ "$escapes" = 0 ] && { fail "an ESCAPED line: $(grep ESCAPED "$out")"; escapes=1; }

	# The host's own evidence.
	if [ -s "$L_LOG" ]; then
		fail "the host listener was reached: $(head -3 "$L_LOG")"
		escapes=$((escapes + 1))
	fi
	local f
	for f in /etc /usr /usr/bin /var ""; do
		if [ -e "$f/kart-escape-$nonce" ]; then
			fail "the task wrote $f/kart-escape-$nonce on the host"
			rm -f "$f/kart-escape-$nonce"
			escapes=$((escapes + 1))
		fi
	done
	echo "    escape battery [$label]: $tried probes tried, $escapes escapes"
	ESC_TOTAL_TRIED=$((ESC_TOTAL_TRIED + tried))
	ESC_TOTAL_ESCAPES=$((ESC_TOTAL_ESCAPES + escapes))
	[ "$tried" = "${#PROBES[@]}" ] || fail "only $tried of ${#PROBES[@]} probes reported"
}

# The filter cannot be handed to a task (its memfd fails): that task is
# refused, seccomp_failed, and never runs without it; the other runs
# under it. Fault injection with strace. (Compiling the filter at start
# makes no system call that could be made to fail; test_seccomp holds
# the compiled program to libseccomp's.)
test_seccomp_fail_closed() {
	have_bwrap || { skip "bwrap cannot build a sandbox here"; return; }
	command -v strace >/dev/null || { skip "strace is missing"; return; }
	local s id ok=0 refused=0
	s=$(mkspool)
	printf '#!/bin/sh\necho ran\n' >"$s/new/a"
	printf '#!/bin/sh\necho ran\n' >"$s/new/b"
	KART_ALLOW_ROOT=yes timeout 120 strace -o "$s.strace" -e trace=memfd_create \
		-e inject=memfd_create:error=EMFILE:when=1 \
		"$KART" -s "$s" worker --drain >>"$s.worker.log" 2>&1 ||
		fail "worker under strace exited $?: $(tail -3 "$s.worker.log")"
	grep -q 'memfd_create("kart-seccomp".*(INJECTED)' "$s.strace" ||
		fail "the filter's memfd was not the one made to fail (test premise): $(head -3 "$s.strace")"
	for id in a b; do
		[ -e "$s/done/$id.json" ] || { fail "no result for $id"; continue; }
		case $(field "$s" "$id" '.status + " " + (.refusal // "-") + " " + (.sandbox.seccomp | tostring)') in
		"ok - true") ok=$((ok + 1)) ;;
		"refused seccomp_failed false")
			refused=$((refused + 1))
			assert_eq "" "$(cat "$s/done/$id.stdout" 2>/dev/null)" "$id output"
			assert_match "seccomp" "$(field "$s" "$id" .error)" "$id error" ;;
		*) fail "$id: $(field "$s" "$id" '[.status, .refusal, .sandbox.seccomp]')" ;;
		esac
	done
	assert_eq "1 1" "$ok $refused" "one task's filter not handed over (ok refused)"
}

# Backend none has no namespaces, but the same filter and no
# capabilities: probe.py's system-call, ABI and privilege probes run as
# backend none tasks (a root task and tasks of nobody, several at once,
# so that each of the spawn threads that hold the outer half of the
# split filter starts some) and each must be blocked. Each task also
# prints how many filters it runs under: 2, the spawn thread's outer
# half and the inner half the child loads (seccomp.h), so that this
# tries the split and not the whole program.
test_none_filter_battery() {
	[ "$(id -u)" = 0 ] || { skip "needs root (tasks of root and of nobody)"; return; }
	[ -x /usr/bin/python3 ] || { skip "/usr/bin/python3 is missing (the probes are Python)"; return; }
	local s; s=$(mkspool)
	chmod 755 "$T_ROOT" "$s" # mktemp's 0700: nobody's tasks must reach their files
	# No limits: a task whose cgroup must be joined after its clone (a v1
	# memory or pids leaf, which the defaults give every task) is spawned
	# with the whole program, not born under the outer half tried here.
	printf '[limits]\ndefaults = none\n' >"$s/kart.conf"
	local id ids=() p line
	for id in r1 n1 n2 n3 r2 n4; do
		{
			printf '#!/usr/bin/python3\nimport re\nP = {"host_i386": %s}\n' \
				"$([ "$HOST_I386" = true ] && echo True || echo False)"
			printf 'print("FILTERS", re.search(r"Seccomp_filters:\\s*(\\d+)", open("/proc/self/status").read()).group(1), flush=True)\n'
			cat "$PROBE_PY"
		} >"$s/tmp/$id"
		[ "${id#n}" != "$id" ] && chown nobody "$s/tmp/$id"
		mv "$s/tmp/$id" "$s/new/$id"
		ids+=("$id")
	done
	KART_BACKEND=none KART_ALLOW_ROOT=yes drain "$s" --slots 3
	local want=() tried=0
	for p in "${PROBES[@]}"; do
		case $p in sys_* | abi_* | priv_* | tty_tiocsti_*) want+=("$p") ;; esac
	done
	for id in "${ids[@]}"; do
		local out=$s/done/$id.stdout
		assert_eq none "$(field "$s" "$id" .sandbox.backend)" "$id backend"
		assert_eq true "$(field "$s" "$id" .sandbox.seccomp)" "$id sandbox.seccomp"
		assert_eq "FILTERS 2" "$(grep '^FILTERS ' "$out")" "$id: filters it runs under"
		grep -q '^PROBES DONE$' "$out" || fail "$id: probe.py did not run to its end"
		for p in "${want[@]}"; do
			line=$(grep -E "^PROBE $p (blocked|ESCAPED) " "$out")
			case $line in
			"PROBE $p blocked "*) tried=$((tried + 1)) ;;
			"") fail "$id: probe $p: no report" ;;
			*) fail "$id (backend none): $line" ;;
			esac
		done
	done
	assert_eq $((${#want[@]} * ${#ids[@]})) "$tried" "probes blocked"
	echo "    backend none: ${#want[@]} probes in each of ${#ids[@]} tasks, $tried blocked"
}

test_escape_root_worker_root_task() { run_battery "root worker, root task" root; }
test_escape_root_worker_as_submitter() { run_battery "root worker, task of nobody" submitter; }
test_escape_root_worker_bound_cwd() { run_battery "root worker, task of nobody in a bound cwd" bound; }
test_escape_unprivileged_worker() { run_battery "unprivileged worker (nobody)" nobody; }

run_tests
echo "    escape battery, all runs: $ESC_TOTAL_TRIED probes tried, $ESC_TOTAL_ESCAPES escapes"
