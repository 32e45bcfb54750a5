#!/usr/bin/env python3
"""Submit a task to a Kartikeya spool, the maildir way, with the standard
library only. What `kart submit` does (see spool-layout/README.md, §3):

  1. create a file in SPOOL/tmp/ with O_EXCL, under a name no one else
     can pick (time, pid, random);
  2. write the task, fsync it, close it;
  3. rename it into SPOOL/new/ with renameat2(RENAME_NOREPLACE): an
     existing queued task of that name is never replaced; on EEXIST try
     NAME.2, NAME.3, ...;
  4. fsync SPOOL/new/, so the rename survives a power failure.

On a shared spool (new/ is not ours alone) steps 3 and 4 use our own
drop directory SPOOL/drop/USER/ instead of new/, and the id is USER:NAME
(spool-layout/README.md, "Shared spools"): see drop_target().

A task is queued the moment step 3 succeeds; a worker never sees a
half-written file, because nothing is ever written in new/.

    kart_submit.py SPOOL FILE|- [NAME]      prints the id

As a module: submit(spool, data, name=None) -> id.
"""
import ctypes
import errno
import os
import pwd
import secrets
import socket
import sys
import time

RENAME_NOREPLACE = 1  # linux/fs.h
NAME_MAX = 190        # task names are at most 200 bytes; leave room for .N

_libc = ctypes.CDLL(None, use_errno=True)


def _renameat2(olddirfd, old, newdirfd, new):
    """renameat2(..., RENAME_NOREPLACE): Python has no wrapper for it."""
    fn = getattr(_libc, "renameat2", None)  # glibc >= 2.28
    if fn is None:
        raise OSError(errno.ENOSYS, "renameat2 is not available")
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(olddirfd, os.fsencode(old), newdirfd, os.fsencode(new), RENAME_NOREPLACE) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), new)


def unique_name():
    """A maildir-style name: seconds, microseconds and pid, random, host."""
    now = time.time_ns()
    host = socket.gethostname().replace("/", "_").replace(":", "_") or "host"
    return "%d.M%dP%d_%s.%s" % (now // 10**9, now // 1000 % 10**6, os.getpid(),
                                secrets.token_hex(4), host)[:NAME_MAX]


def _taken(spool, name):
    """The id of a finished task is its name unless done/ has it: skip a
    name that a worker runs (cur/*/NAME) or has finished (done/), as kart
    submit does, so that the id printed is the id of the result."""
    done = os.path.join(spool, "done")
    if any(os.path.lexists(os.path.join(done, name + s)) for s in (".json", ".task")):
        return True
    cur = os.path.join(spool, "cur")
    return any(not w.startswith(".") and os.path.lexists(os.path.join(cur, w, name))
               for w in os.listdir(cur))


def drop_target(spool):
    """Where to publish: (directory, id prefix). new/ when it is ours and
    only its owner writes it (a single-user spool, or root); else our own
    drop/USER/, made 0700 if missing, where a worker takes a file we own
    as ours and queues it as USER:NAME."""
    new = os.path.join(spool, "new")
    st = os.stat(new)
    me = os.geteuid()
    drop = os.path.join(spool, "drop")
    if (st.st_uid == me and not st.st_mode & 0o022) or not os.path.isdir(drop):
        return new, ""
    try:
        user = pwd.getpwuid(me).pw_name
    except KeyError:
        user = str(me)
    d = os.path.join(drop, user)
    for _ in range(50):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass
        st = os.lstat(d)
        if os.path.stat.S_ISDIR(st.st_mode) and st.st_uid == me:
            if st.st_mode & 0o7777 != 0o700:
                os.chmod(d, 0o700)  # writable by us alone, or nothing in it runs
            return d, user + ":"
        time.sleep(0.1)  # a squat under our name: a worker moves it away
    raise PermissionError(errno.EPERM, "not ours (is a worker running?)", d)


def submit(spool, data, name=None):
    name = name or unique_name()
    if name.startswith(".") or "/" in name or any(ord(c) < 0x20 or ord(c) == 0x7f for c in name) \
            or not 0 < len(name.encode()) <= NAME_MAX:
        raise ValueError("not a task name: %r" % name)
    target, prefix = drop_target(spool)
    tmpdir = os.open(os.path.join(spool, "tmp"), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    newdir = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        while True:
            tmpname = "%d.%d.%s" % (time.time_ns() // 10**6, os.getpid(), secrets.token_hex(8))
            try:
                fd = os.open(tmpname, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC |
                             os.O_NOFOLLOW, 0o600, dir_fd=tmpdir)
                break
            except FileExistsError:
                continue
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)  # a failed fsync is a failed submit: never retried
            finally:
                os.close(fd)
            for n in range(1, 1000):
                cand = name if n == 1 else "%s.%d" % (name, n)
                if _taken(spool, prefix + cand) or (prefix and (
                        os.path.lexists(os.path.join(target, cand)) or
                        os.path.lexists(os.path.join(spool, "new", prefix + cand)))):
                    continue
                try:
                    _renameat2(tmpdir, tmpname, newdir, cand)
                except FileExistsError:
                    continue
                except OSError as e:
                    if e.errno not in (errno.EINVAL, errno.ENOSYS):
                        raise
                    # No RENAME_NOREPLACE here: look, then rename, as
                    # kart submit does (a link+unlink that died between
                    # the two would leave a task workers wait on for ever).
                    if os.path.lexists(os.path.join(target, cand)):
                        continue
                    os.rename(tmpname, cand, src_dir_fd=tmpdir, dst_dir_fd=newdir)
                os.fsync(newdir)
                return prefix + cand
            raise FileExistsError(errno.EEXIST, "no free name", name)
        except BaseException:
            try:
                os.unlink(tmpname, dir_fd=tmpdir)
            except FileNotFoundError:
                pass
            raise
    finally:
        os.close(tmpdir)
        os.close(newdir)


def main(argv):
    if len(argv) not in (3, 4):
        print("usage: kart_submit.py SPOOL FILE|- [NAME]", file=sys.stderr)
        return 2
    spool, path = argv[1], argv[2]
    if path == "-":
        data = sys.stdin.buffer.read()
    else:
        with open(path, "rb") as f:
            data = f.read()
    try:
        print(submit(spool, data, argv[3] if len(argv) == 4 else None))
    except (OSError, ValueError) as e:
        print("kart_submit.py: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
