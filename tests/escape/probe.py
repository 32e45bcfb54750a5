# tests/escape/probe.py - the escape battery's task. It runs as a real
# task inside the real sandbox (tests/blackbox/escape.sh puts a "#!" line
# and `P = json.loads(...)`, what the host knows, in front of it) and
# tries, one by one, what a task must not be able to do. Each attempt
# prints one line:
#
#   PROBE <name> blocked (<how it failed>)
#   PROBE <name> ESCAPED (<what it got>)
#
# A probe that cannot tell prints ESCAPED: the battery fails closed. The
# host side checks its own evidence too (listeners, files).
import ctypes
import errno
import os
import signal
import socket
import struct
import sys
import time

P = globals().get("P") or {}
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NONCE = P.get("nonce", "x")


def say(name, escaped, how):
    print("PROBE %s %s (%s)" % (name, "ESCAPED" if escaped else "blocked", how), flush=True)


def probe(name):
    """Run fn as probe `name`; an exception the probe did not expect
    counts as blocked only when it is an OSError (the attempt failed)."""
    def wrap(fn):
        try:
            fn(name)
        except OSError as e:
            say(name, False, "%s: %s" % (type(e).__name__, os.strerror(e.errno or 0)))
        except Exception as e:  # a bug in the probe: not a pass
            say(name, True, "probe error %s: %s" % (type(e).__name__, e))
        return fn
    return wrap


def sysc(nr, *args):
    """A raw syscall: (result, errno)."""
    ctypes.set_errno(0)
    a = [ctypes.c_long(x) if isinstance(x, int) else x for x in args]
    r = libc.syscall(ctypes.c_long(nr), *a)
    return r, ctypes.get_errno()


def ename(e):
    return errno.errorcode.get(e, str(e))


def syscall_probe(name, nr, *args, want=None):
    """ESCAPED if the call succeeds, or (want given) if it fails with
    another errno than the filter's: then it reached the kernel."""
    r, e = sysc(nr, *args)
    if r >= 0:
        say(name, True, "returned %d" % r)
        if r > 2 and name not in ("sys_clone_newuser", "sys_personality"):
            try:
                os.close(r)
            except OSError:
                pass
    elif want is not None and e != want:
        say(name, True, "reached the kernel: %s, not the filter's %s" % (ename(e), ename(want)))
    else:
        say(name, False, ename(e))


# x86_64 numbers
NR = dict(ioctl=16, ptrace=101, personality=135, mount=165, keyctl=250, add_key=248,
          request_key=249, unshare=272, perf_event_open=298, bpf=321, userfaultfd=323,
          io_uring_setup=425, clone=56, clone3=435, setns=308, fsopen=430, open_tree=428,
          kexec_load=246, init_module=175, pivot_root=155, process_vm_readv=310,
          open_by_handle_at=304, socket=41)
CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWPID = 0x10000000, 0x20000, 0x40000000, 0x20000000
TIOCSTI = 0x5412

# ---- network -----------------------------------------------------------------


@probe("net_tcp_connect_loopback")
def _(name):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect(("127.0.0.1", P["tcp_port"]))
    s.sendall(("escape %s\n" % NONCE).encode())
    # Our own network namespace has a loopback of its own: only an
    # answer from the host's listener proves an escape.
    data = s.recv(100)
    say(name, b"kart-listener" in data, "connected, got %r" % data[:40])


@probe("net_tcp_connect_host_ip")
def _(name):
    if not P.get("host_ip"):
        say(name, True, "the test gave no host address")
        return
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect((P["host_ip"], P["tcp_port"]))
    say(name, True, "connected to %s" % P["host_ip"])


@probe("net_udp_send")
def _(name):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    s.sendto(("escape %s" % NONCE).encode(), ("127.0.0.1", P["udp_port"]))
    try:
        data, _ = s.recvfrom(100)
    except (socket.timeout, OSError) as e:
        say(name, False, "sent into the sandbox's own loopback, no answer from the host: %s" % e)
        return
    say(name, b"kart-listener" in data, "answer %r" % data[:40])


@probe("net_udp_send_host_ip")
def _(name):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(("escape %s" % NONCE).encode(), (P["host_ip"], P["udp_port"]))
    say(name, True, "a datagram left for %s" % P["host_ip"])


@probe("net_abstract_unix")
def _(name):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect("\0" + P["abstract"])
    say(name, True, "connected to the host's @%s" % P["abstract"])


@probe("net_interfaces")
def _(name):
    ifs = sorted(n for _, n in socket.if_nameindex())
    say(name, ifs not in ([], ["lo"]), "interfaces: %s" % ",".join(ifs))


# ---- filesystem: writes --------------------------------------------------------


def try_write(name, path):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, b"escaped\n")
    os.close(fd)
    say(name, True, "wrote %s" % path)


for _n, _d in (("fs_write_etc", "/etc"), ("fs_write_usr", "/usr"), ("fs_write_root", ""),
               ("fs_write_var", "/var"), ("fs_write_usr_bin", "/usr/bin")):
    probe(_n)(lambda name, d=_d: try_write(name, "%s/kart-escape-%s" % (d, NONCE)))


@probe("fs_write_task_file")
def _(name):
    fd = os.open("/run/kart/task", os.O_WRONLY | os.O_APPEND)
    say(name, True, "opened its own task file for writing (fd %d)" % fd)


@probe("fs_write_launcher")
def _(name):
    fd = os.open("/run/kart/launch", os.O_WRONLY)
    say(name, True, "opened the launcher for writing (fd %d)" % fd)


# ---- filesystem: reads ---------------------------------------------------------


def try_list(name, path):
    entries = os.listdir(path)
    say(name, True, "listed %s: %s" % (path, ",".join(sorted(entries)[:8])))


@probe("fs_read_spool")
def _(name):
    try_list(name, P["spool"])


@probe("fs_read_spool_done")
def _(name):
    try_list(name, P["spool"] + "/done")


@probe("fs_read_worker_home")
def _(name):
    try_list(name, P["worker_home"])


@probe("fs_read_root_home")
def _(name):
    try_list(name, "/root")


@probe("fs_read_secret")
def _(name):
    with open(P["secret"], "rb") as f:
        data = f.read(100)
    say(name, True, "read %d bytes of the worker's secret" % len(data))


@probe("fs_read_host_tmp")
def _(name):
    with open(P["tmp_marker"], "rb") as f:
        data = f.read(100)
    say(name, True, "read the host's /tmp marker: %r" % data[:20])


@probe("fs_read_shadow")
def _(name):
    with open("/etc/shadow", "rb") as f:
        data = f.read(10)
    say(name, True, "read %d bytes of /etc/shadow" % len(data))


@probe("fs_read_host_proc_root")
def _(name):
    # /proc/1/root is the sandbox's pid 1: only the host's / gives the spool.
    path = "/proc/1/root" + P["spool"]
    os.listdir(path)
    say(name, True, "reached the spool through %s" % path)


# ---- other processes -----------------------------------------------------------


def worker_cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None


@probe("proc_see_worker")
def _(name):
    seen = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            c = worker_cmdline(int(d))
            if c and " worker" in c and "kart" in c:
                seen.append("%s: %s" % (d, c[:60]))
    c = worker_cmdline(P["worker_pid"])
    if c and "kart" in c:
        seen.append("%d: %s" % (P["worker_pid"], c[:60]))
    say(name, bool(seen), "; ".join(seen) if seen else
        "no kart worker among %d pids" % sum(1 for d in os.listdir("/proc") if d.isdigit()))


@probe("proc_signal_worker")
def _(name):
    pid = P["worker_pid"]
    os.kill(pid, 0)
    c = worker_cmdline(pid)
    if c is not None and "kart" not in c:
        say(name, False, "pid %d here is a sandbox process (%s), not the worker" % (pid, c[:40]))
        return
    # SIGURG is ignored by default: proof of reach without harm.
    os.kill(pid, signal.SIGURG)
    say(name, True, "signalled pid %d" % pid)


@probe("proc_see_neighbour")
def _(name):
    tag = P["neighbour_tag"]
    seen = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            c = worker_cmdline(int(d))
            if c and tag in c:
                seen.append("%s: %s" % (d, c[:60]))
    c = worker_cmdline(P["neighbour_pid"])
    if c and tag in c:
        seen.append("%d: %s" % (P["neighbour_pid"], c[:60]))
    say(name, bool(seen), "; ".join(seen) if seen else "no process of the neighbour task")


@probe("proc_signal_neighbour")
def _(name):
    pid = P["neighbour_pid"]
    if pid <= 0:
        say(name, True, "the test gave no neighbour pid")
        return
    os.kill(pid, 0)
    c = worker_cmdline(pid)
    if c is not None and P["neighbour_tag"] not in c:
        say(name, False, "pid %d here is a sandbox process (%s), not the neighbour" % (pid, c[:40]))
        return
    os.kill(pid, signal.SIGURG)  # ignored by default: proof of reach without harm
    say(name, True, "signalled the neighbour, pid %d" % pid)


@probe("fs_read_neighbour_files")
def _(name):
    # Its $KART_OUTDIR on the host, and its work directory and output
    # through its /proc entry (host pid).
    npid = P["neighbour_pid"]
    got, how = [], []
    for path in (P["neighbour_out"] + "/mark", "/proc/%d/cwd/mark" % npid,
                 "/proc/%d/root/run/kart/out/mark" % npid):
        try:
            with open(path, "rb") as f:
                if P["neighbour_tag"].encode() in f.read(200):
                    got.append(path)
                else:
                    how.append("%s: not the neighbour's" % path)
        except OSError as e:
            how.append("%s: %s" % (path, os.strerror(e.errno or 0)))
    say(name, bool(got), "read %s" % ", ".join(got) if got else "; ".join(how))


@probe("proc_ptrace_pid1")
def _(name):
    r, e = sysc(NR["ptrace"], 16, 1, 0, 0)  # PTRACE_ATTACH to the sandbox's pid 1
    if r == 0:
        sysc(NR["ptrace"], 17, 1, 0, 0)  # PTRACE_DETACH
    say(name, r == 0, "attached" if r == 0 else ename(e))


@probe("proc_ptrace_traceme")
def _(name):
    pid = os.fork()
    if pid == 0:
        r, _ = sysc(NR["ptrace"], 0, 0, 0, 0)
        os._exit(0 if r == 0 else 1)
    _, st = os.waitpid(pid, 0)
    ok = os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0
    say(name, ok, "PTRACE_TRACEME %s" % ("worked" if ok else "failed"))


@probe("proc_launcher_fds")
def _(name):
    # The launcher holds the status pipe and the run lock, bwrap what it
    # inherited: a task that could open them could forge its own outcome,
    # and what it could even name (inotify, epoll, signalfd, lock files)
    # would be the worker's leaking. Every descriptor of every other
    # process: readlink, then open for reading and for writing.
    got, tried = [], 0
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            fds = os.listdir("/proc/%s/fd" % d)
        except OSError:
            fds = [str(n) for n in range(0, 16)] + ["251", "252", "253", "254", "255"]
        for fd in fds:
            path = "/proc/%s/fd/%s" % (d, fd)
            tried += 1
            try:
                got.append("%s -> %s" % (path, os.readlink(path)))
            except OSError:
                pass
            for mode in (os.O_RDONLY, os.O_WRONLY):
                try:
                    f = os.open(path, mode | os.O_NONBLOCK)
                    os.close(f)
                    got.append("%s opened (%s)" % (path, "w" if mode else "r"))
                except OSError:
                    pass
    say(name, bool(got), "; ".join(got[:6]) if got else
        "no other process's descriptor named or opened (%d tried)" % tried)


# ---- privileges -----------------------------------------------------------------


def status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


ST = status()
for _k in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"):
    probe("priv_" + _k.lower())(
        lambda name, k=_k: say(name, int(ST.get(k, "ffff"), 16) != 0, "%s %s" % (k, ST.get(k))))
probe("priv_no_new_privs")(
    lambda name: say(name, ST.get("NoNewPrivs") != "1", "NoNewPrivs %s" % ST.get("NoNewPrivs")))
probe("priv_seccomp_mode")(
    lambda name: say(name, ST.get("Seccomp") != "2", "Seccomp %s" % ST.get("Seccomp")))


# ---- syscalls --------------------------------------------------------------------


@probe("sys_unshare_user")
def _(name):
    syscall_probe(name, NR["unshare"], CLONE_NEWUSER, want=errno.EPERM)


@probe("sys_unshare_mount")
def _(name):
    syscall_probe(name, NR["unshare"], CLONE_NEWNS, want=errno.EPERM)


@probe("sys_unshare_net")
def _(name):
    syscall_probe(name, NR["unshare"], CLONE_NEWNET, want=errno.EPERM)


@probe("sys_clone_newuser")
def _(name):
    r, e = sysc(NR["clone"], CLONE_NEWUSER | signal.SIGCHLD, 0, 0, 0, 0)
    if r == 0:
        os._exit(0)  # the child, in a new user namespace
    if r > 0:
        os.waitpid(r, 0)
        say(name, True, "a child in a new user namespace")
    else:
        say(name, e != errno.EPERM, ename(e))


@probe("sys_clone3")
def _(name):
    # The filter answers ENOSYS; the kernel would say EINVAL (size 0).
    syscall_probe(name, NR["clone3"], 0, 0, want=errno.ENOSYS)


@probe("sys_keyctl")
def _(name):
    syscall_probe(name, NR["keyctl"], 0, -3, 0)  # KEYCTL_GET_KEYRING_ID, session keyring


@probe("sys_add_key")
def _(name):
    syscall_probe(name, NR["add_key"], b"user", ("kart-escape-" + NONCE).encode(), b"x", 1, -3)


@probe("sys_request_key")
def _(name):
    syscall_probe(name, NR["request_key"], b"user", b"kart-escape", 0, 0, want=errno.EPERM)


@probe("sys_io_uring_setup")
def _(name):
    params = ctypes.create_string_buffer(120)
    syscall_probe(name, NR["io_uring_setup"], 4, params)


@probe("sys_userfaultfd")
def _(name):
    syscall_probe(name, NR["userfaultfd"], os.O_CLOEXEC | 1)  # UFFD_USER_MODE_ONLY


@probe("sys_perf_event_open")
def _(name):
    attr = bytearray(128)
    struct.pack_into("=IIQ", attr, 0, 1, 128, 1)  # PERF_TYPE_SOFTWARE, size, TASK_CLOCK
    struct.pack_into("=Q", attr, 40, (1 << 5) | (1 << 6))  # exclude_kernel, exclude_hv
    buf = ctypes.create_string_buffer(bytes(attr), 128)
    syscall_probe(name, NR["perf_event_open"], buf, 0, -1, -1, 0)


@probe("sys_bpf")
def _(name):
    # BPF_MAP_CREATE of a small array map
    attr = ctypes.create_string_buffer(struct.pack("=IIII", 2, 4, 4, 1) + bytes(112))
    syscall_probe(name, NR["bpf"], 0, attr, 128)


@probe("sys_mount")
def _(name):
    syscall_probe(name, NR["mount"], b"none", b"/tmp", b"tmpfs", 0, 0)


@probe("sys_fsopen")
def _(name):
    syscall_probe(name, NR["fsopen"], b"tmpfs", 0, want=errno.EPERM)


@probe("sys_open_tree")
def _(name):
    syscall_probe(name, NR["open_tree"], -100, b"/", 1, want=errno.EPERM)  # OPEN_TREE_CLONE


@probe("sys_setns")
def _(name):
    fd = os.open("/proc/self/ns/net", os.O_RDONLY)
    syscall_probe(name, NR["setns"], fd, 0, want=errno.EPERM)
    os.close(fd)


@probe("sys_personality")
def _(name):
    r, e = sysc(NR["personality"], 0x0040000)  # ADDR_NO_RANDOMIZE
    if r >= 0:
        sysc(NR["personality"], 0)
    say(name, r >= 0, "ADDR_NO_RANDOMIZE %s" % ("set" if r >= 0 else ename(e)))


@probe("sys_kexec_load")
def _(name):
    syscall_probe(name, NR["kexec_load"], 0, 0, 0, 0, want=errno.EPERM)


@probe("sys_open_by_handle_at")
def _(name):
    syscall_probe(name, NR["open_by_handle_at"], -100, 0, 0, want=errno.EPERM)


# Socket families (issue 35): vsock reaches the hypervisor; netlink but
# its route protocol reaches the host: sock_diag lists every socket of
# the host with its owner, audit, uevents.
@probe("sys_socket_vsock")
def _(name):
    syscall_probe(name, NR["socket"], 40, socket.SOCK_STREAM, 0, want=errno.EPERM)


@probe("sys_socket_netlink_sock_diag")
def _(name):
    syscall_probe(name, NR["socket"], 16, socket.SOCK_DGRAM, 4, want=errno.EPERM)


@probe("sys_socket_netlink_audit")
def _(name):
    syscall_probe(name, NR["socket"], 16, socket.SOCK_RAW, 9, want=errno.EPERM)


@probe("sys_socket_netlink_uevent")
def _(name):
    syscall_probe(name, NR["socket"], 16, socket.SOCK_DGRAM, 15, want=errno.EPERM)


def in_child_code(code):
    """Run machine code in a child; its wait status."""
    pid = os.fork()
    if pid == 0:
        import mmap
        m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        m.write(code)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
        fn = ctypes.CFUNCTYPE(ctypes.c_long)(addr)
        r = fn()
        os._exit(0 if r > 0 else 1)
    return os.waitpid(pid, 0)[1]


@probe("abi_i386")
def _(name):
    st = in_child_code(b"\xb8\x14\x00\x00\x00\xcd\x80\xc3")  # mov eax,20 (getpid); int 0x80; ret
    killed = os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGSYS
    if not killed and P.get("host_i386") is False and os.WIFSIGNALED(st) \
            and os.WTERMSIG(st) == signal.SIGSEGV:
        # The host side found that this kernel answers int 0x80 with
        # SIGSEGV unfiltered too: the call never ran, here or anywhere.
        say(name, False, "int 0x80 getpid: SIGSEGV, as on the host (no i386 calls in this kernel)")
        return
    say(name, not killed, "int 0x80 getpid: %s" % ("SIGSYS" if killed else "status %d" % st))


@probe("abi_x32")
def _(name):
    pid = os.fork()
    if pid == 0:
        sysc(0x40000000 | 39)
        os._exit(0)
    st = os.waitpid(pid, 0)[1]
    killed = os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGSYS
    say(name, not killed, "x32 getpid: %s" % ("SIGSYS" if killed else "status %d" % st))


# ---- the terminal ------------------------------------------------------------------


@probe("tty_open")
def _(name):
    fd = os.open("/dev/tty", os.O_RDWR)
    say(name, True, "opened /dev/tty (fd %d)" % fd)


@probe("tty_tiocsti_std")
def _(name):
    c = ctypes.c_char(b"x")
    worked = []
    for fd in (0, 1, 2):
        for req in (TIOCSTI, (1 << 32) | TIOCSTI):
            r, e = sysc(NR["ioctl"], fd, req, ctypes.byref(c))
            if r == 0 or e not in (errno.EPERM,):
                worked.append("fd %d req %#x: %s" % (fd, req, "ok" if r == 0 else ename(e)))
    say(name, bool(worked), "; ".join(worked) if worked else "EPERM on 0, 1, 2")


@probe("tty_tiocsti_own_pty")
def _(name):
    # A terminal of our own, made our controlling tty: the kernel would
    # let us push input into it; the filter must not.
    import pty
    pid = os.fork()
    if pid == 0:
        try:
            master, slave = pty.openpty()
            os.setsid()
            sname = os.ttyname(slave)
            fd = os.open(sname, os.O_RDWR)  # becomes the controlling tty
            c = ctypes.c_char(b"x")
            r, e = sysc(NR["ioctl"], fd, TIOCSTI, ctypes.byref(c))
            os._exit(0 if r == 0 else (10 if e == errno.EPERM else 11))
        except OSError:
            os._exit(12)
    st = os.waitpid(pid, 0)[1]
    code = os.WEXITSTATUS(st) if os.WIFEXITED(st) else -1
    say(name, code in (0, 11), {0: "TIOCSTI pushed a byte", 10: "EPERM", 11: "reached the tty driver",
                                12: "no pty to try"}.get(code, "status %d" % st))


# ---- leaks -------------------------------------------------------------------------


@probe("leak_environment")
def _(name):
    with open("/proc/self/environ", "rb") as f:
        raw = f.read()
    bad = []
    if P["canary_value"].encode() in raw or P["canary_name"].encode() in raw:
        bad.append("the worker's canary")
    for kv in raw.split(b"\0"):
        k = kv.partition(b"=")[0].decode(errors="replace")
        if k == "PWD" and kv == b"PWD=" + os.getcwd().encode():
            continue  # bwrap --chdir sets it
        if kv == b"HOSTNAME=kart":
            continue  # a container engine sets it from --hostname
        if k and k not in ("PATH", "HOME", "TMPDIR", "LANG") and not k.startswith("KART_") and \
                k not in P.get("env_allowed", []):
            bad.append(k)
    say(name, bool(bad), "leaked: %s" % ",".join(bad) if bad else "only the contract's variables")


@probe("leak_fds")
def _(name):
    fds = sorted(int(x) for x in os.listdir("/proc/self/fd"))
    extra = []
    for fd in fds:
        if fd in (0, 1, 2):
            continue
        try:
            extra.append("%d -> %s" % (fd, os.readlink("/proc/self/fd/%d" % fd)))
        except FileNotFoundError:
            pass  # the listing's own descriptor, closed since
    say(name, bool(extra), "extra: %s" % "; ".join(extra) if extra else
        "only 0, 1, 2 (and the listing's own) among %s" % fds)


print("PROBES DONE", flush=True)
