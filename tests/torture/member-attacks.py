#!/usr/bin/env python3
# member-attacks.py SPOOL OUTSIDE ALICE SECONDS CHAIN LOG - a hostile
# member of a shared spool (run as her: hostile.sh's
# member_writes_everything) writes every path and attribute she can with
# hostile values, over and over, for SECONDS: tmp/, ids/, drop/, her own
# drop directory (tasks with hostile directives, requests, xattrs, ACLs,
# links, FIFOs, trees, a deep after= chain of CHAIN tasks), and each file
# the worker made of hers (queued copies, claims, results). Each attempt
# that should be refused and was not is counted; the counts, one JSON
# object, go to LOG. The caller checks that nothing of alice's changed,
# nothing outside the spool changed and no worker died.
import errno, fcntl, json, os, stat, sys, time

spool, outside, alice, seconds, chain, log = sys.argv[1:7]
seconds, chain = float(seconds), int(chain)
me = os.getuid()
import pwd
mname = pwd.getpwuid(me).pw_name
tmp, ids, drop = spool + "/tmp", spool + "/ids", spool + "/drop"
mine = drop + "/" + mname
counts = {"tries": 0, "wrote_workers_file": [], "errors": 0}
held = []  # descriptors kept open and locked: the flocks must block nothing


def attempt(fn, *a):
    counts["tries"] += 1
    try:
        return fn(*a)
    except OSError:
        return None


def drop_task(name, body, mode=0o600, xattrs=(), acl=None):
    """A task dropped as a client would: written under a dot name, then
    renamed in whole."""
    st = mine + "/.s" + str(os.getpid())
    try:
        fd = os.open(st, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        os.write(fd, body.encode() if isinstance(body, str) else body)
        for k, v in xattrs:
            attempt(os.setxattr, fd, k, v)
        if acl:
            attempt(os.setxattr, fd, "system.posix_acl_access", acl)
        os.fchmod(fd, mode)
        os.close(fd)
        os.rename(st, mine + "/" + name)
    except OSError:
        counts["errors"] += 1


def pwn(marker="PWNED"):
    return "#!/bin/sh\necho %s $(id -un)\n" % marker


def acl_others_write(uid):
    # user::rw- user:UID:rw- group::--- mask::rw- other::---
    import struct
    e = [(1, 6, 0xFFFFFFFF), (2, 6, uid), (4, 0, 0xFFFFFFFF), (0x10, 6, 0xFFFFFFFF), (0x20, 0, 0xFFFFFFFF)]
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *x) for x in e)


auid = pwd.getpwnam(alice).pw_uid
esc = "\x1b[2J\x1b]0;owned\x07\x1b[32m" + alice + ":payroll ok\x1b[0m"
# Enough ../ to reach / from anywhere in the spool, then the outside.
trav = "./" + "../" * 24 + os.path.relpath(outside, "/") + "/victim"
traversals = [trav, trav[2:], alice + ":nightly", "..", ".", "x/../../y"]

os.makedirs(mine, mode=0o700, exist_ok=True)
os.chmod(mine, 0o700)

# ---- once: a deep after= chain, built forward (each names the last) ----
first = "chain0"
drop_task(first, "#!/bin/sh\n#kart: timeout=60s\nsleep 3\n")
time.sleep(1)
for i in range(1, chain):
    drop_task("chain%d" % i, "#!/bin/sh\n#kart: after=%s:chain%d\ntrue\n" % (mname, i - 1))

rnd = 0
end = time.time() + seconds
while time.time() < end:
    rnd += 1
    # ---- her drop directory: tasks whose directives and attributes lie ----
    for i, d in enumerate([
        "after=%s:nightly" % alice, "after=" + trav.replace("/", "%2F"), "after=%2e%2e%2fx",
        "name=" + trav.replace("/", "%2F"), "name=%s:stolen" % alice, "unique=" + "k" * 3000,
        "unique=../../x", "cwd=/root", "bind=/etc", "ro=" + outside, "env=LD_PRELOAD=/tmp/x.so",
        "kind=..%2F..%2Fbin%2Fsh", "timeout=30d", "label=%1b%5b2J", "after=%s:chain%d" % (mname, chain - 1),
        "retries=1000 retry_on=failed", "priority=-1000",
    ]):
        drop_task("d%d-%d" % (rnd, i), "#!/bin/sh\n#kart: %s\necho PWNED $(id -un)\nexit 1\n" % d)
    # Forged records on her own drop: ignored (the worker makes its own).
    drop_task("rec%d" % rnd, pwn(), xattrs=[
        ("user.kart", ("attempt=1\nid=%s\nhold=%s\n" % (traversals[rnd % 6], traversals[rnd % 6])).encode()),
        ("user.kart.submitter", b"uid=0\nfrom=1\n")])
    drop_task("rec%da" % rnd, pwn(), xattrs=[("user.kart.submitter", ("uid=%d\n" % auid).encode())])
    # An ACL letting alice write: the group bits show it, rejected.
    drop_task("acl%d" % rnd, pwn(), acl=acl_others_write(auid))
    drop_task("esc%d%s" % (rnd, esc.replace("/", "_")), pwn())
    drop_task("w%d" % rnd, pwn(), mode=0o666)
    # Links, FIFOs, trees, huge files, dot files in her drop.
    attempt(os.symlink, outside + "/victim.stdout", mine + "/sym%d" % rnd)
    attempt(os.symlink, "/etc/shadow", mine + "/shadow%d" % rnd)
    attempt(os.mkfifo, mine + "/fifo%d" % rnd)
    attempt(os.mkdir, mine + "/dir%d" % rnd)
    attempt(os.link, mine + "/.hl", mine + "/hl%d" % rnd) if os.path.exists(mine + "/.hl") else \
        attempt(lambda: open(mine + "/.hl", "w").write(pwn()))
    p = mine + "/deep%d" % rnd
    for k in range(40):
        if attempt(os.mkdir, p) is None and not os.path.isdir(p):
            break
        p += "/d"
    attempt(lambda: open(mine + "/.hidden%d" % rnd, "wb").write(b"\0" * 65536))
    if rnd % 5 == 1:
        drop_task("huge%d" % rnd, b"#!/bin/sh\n" + b"#" * (17 << 20))
    # Requests: for ids that are not hers, for names no task has, huge edits.
    for n in [alice + ":x", "..", esc[:20], "nothing%d" % rnd]:
        for verb in ["cancel", "hold", "release", "pause", "resume", "edit", "bogus"]:
            q = mine + "/.ctl.%s.%s" % (verb, n.replace("/", "_"))
            attempt(lambda: open(q, "w").write(pwn() if verb == "edit" else ""))
    attempt(lambda: open(mine + "/.ctl.edit.d%d-0" % rnd, "wb").write(b"#!/bin/sh\n" + b"#" * (17 << 20)))
    # ---- drop/ itself: squats, files, links ----
    for n in ["%sbob" % alice[:-5], "eve%d" % rnd, "root", "0"]:
        attempt(os.mkdir, drop + "/" + n, 0o777)
    attempt(os.symlink, outside, drop + "/lnk%d" % rnd)
    attempt(lambda: open(drop + "/file%d" % rnd, "w").write("x"))
    # ---- tmp/: names of the spool's, others' prefixes, escapes, floods ----
    for n in [alice + ":x%d" % rnd, ".edit.%d.1" % rnd, ".copy.%d.%s:x" % (auid, alice), ".hoist.%d.%s:y" % (auid, alice),
              esc.replace("/", "_") + str(rnd), "n" * 250]:
        attempt(lambda: open(tmp + "/" + n, "w").write(pwn()))
    attempt(os.symlink, outside + "/victim.stdout", tmp + "/sym%d" % rnd)
    attempt(os.mkfifo, tmp + "/fifo%d" % rnd)
    for k in range(300):
        attempt(lambda: open(tmp + "/flood%d.%d" % (rnd, k), "w").close())
    if rnd % 3 == 1 and len(held) < 900:
        # Over her share of tmp/, held open while she writes on.
        try:
            f = open(tmp + "/big%d" % rnd, "wb")
            f.write(b"\0" * (24 << 20))
            f.flush()
            held.append(f)
        except OSError:
            counts["errors"] += 1
    # ---- ids/: squats of alice's names, hostile targets, not links ----
    for n, t in [(alice + ":a%d" % (rnd + 1), "1"), (mname + ":t%d" % rnd, trav),
                 (mname + ":n%d" % rnd, "9" * 40), (alice + ":b%d" % rnd, "")]:
        attempt(os.symlink, t, ids + "/" + n)
    attempt(os.mkdir, ids + "/" + alice + ":c%d" % rnd)
    attempt(os.mkfifo, ids + "/" + alice + ":f%d" % rnd)
    try:  # the inode of a queued task of alice's, under an id of hers
        for n in os.listdir(spool + "/new"):
            if n.startswith(alice + ":"):
                attempt(os.symlink, str(os.lstat(spool + "/new/" + n).st_ino), ids + "/" + n + ".9")
    except OSError:
        pass
    # ---- every file the worker made of hers, and alice's: change nothing ----
    for d in [spool + "/new", spool + "/done"] + [spool + "/cur/" + w for w in os.listdir(spool + "/cur")]:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for n in names:
            p = d + "/" + n
            # Her own file on its way in (new/.hoist.UID.ID), before the
            # worker's copy takes its place: hers until then, by design.
            hers = d.endswith("/new") and n.startswith(".hoist.")
            for how, fn in [("write", lambda: os.close(os.open(p, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK))),
                            ("xattr", lambda: os.setxattr(p, "user.kart", b"hold=" + trav.encode(), follow_symlinks=False)),
                            ("record", lambda: os.setxattr(p, "user.kart.submitter", b"uid=0\n", follow_symlinks=False)),
                            ("chmod", lambda: os.chmod(p, 0o666, follow_symlinks=False)),
                            ("rename", lambda: os.rename(p, tmp + "/stolen." + n))]:
                counts["tries"] += 1
                try:
                    fn()
                    if not hers:
                        counts["wrote_workers_file"].append("%s %s" % (how, p))
                except (OSError, NotImplementedError):
                    pass  # (NotImplementedError: chmod of a symlink, which Linux has not)
            # And hold every one she can open, locked (as many as her
            # descriptors allow).
            if len(held) > 800:
                continue
            try:
                fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                held.append(fd)
            except OSError:
                pass
    # Rename races in tmp/: her own files over each other.
    for k in range(50):
        attempt(os.rename, tmp + "/flood%d.%d" % (rnd, k), tmp + "/flood%d.%d" % (rnd, k + 1))
    time.sleep(0.2)

with open(log, "w") as f:
    json.dump({"rounds": rnd, "tries": counts["tries"], "errors": counts["errors"],
               "wrote_workers_file": counts["wrote_workers_file"][:20],
               "n_wrote_workers_file": len(counts["wrote_workers_file"]), "held": len(held)}, f)
