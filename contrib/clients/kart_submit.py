#!/usr/bin/env python3
"""A Kartikeya client with the standard library only: submit a task, read
its state, wait for its result. It follows spool-layout/README.md:

submit (spool-layout README section 5, what `kart submit` does), so
that the id printed is the id of the result:
  1. create a file in SPOOL/tmp/ with O_EXCL; its inode number is INO;
  2. for ID = NAME, NAME.2, NAME.3, ...: reserve ID with
     symlink(INO, SPOOL/ids/ID), on EEXIST the next ID; then if ID is in
     new/ (or new/.held.ID), any cur/*/ or done/ (.task, .json,
     .attempts), looked at in that order, unlink the reservation and take
     the next ID;
  3. write the task into the file, with `#kart: name=NAME` (the value
     %XX-escaped, section 3) after the #! line when ID is not NAME, so
     that the result's name is NAME; fsync it, close it; fsync ids/;
  4. rename it into SPOOL/new/ID with renameat2(RENAME_NOREPLACE): a queued
     task of that name is never replaced; on EEXIST, unlink the
     reservation and go back to 2 with the next ID;
  5. fsync SPOOL/new/. The worker gives the result the id ID, and removes
     the reservation once the result is written.

wait (section 7): an inotify watch on done/ (IN_MOVED_TO, IN_CREATE), then
look for done/ID.json, and again after every event; polling where inotify
cannot be had.

On a shared spool (new/ is not ours alone) steps 4 and 5 use our own
drop directory SPOOL/drop/USER/ instead of new/, and the id (reserved as
ids/USER:NAME) is USER:NAME (spool-layout README §6):
see drop_target().

A task is queued the moment step 4 succeeds; a worker never sees a
half-written file, because nothing is ever written in new/.

    kart_submit.py [-C DIR] [--bind PATH] [--ro PATH] [-e NAME[=VALUE]]
                   SPOOL FILE|- [NAME]      submit; prints the id
    kart_submit.py wait SPOOL ID [SECONDS]  prints the result (JSON); exit 1
                                            on a timeout
    kart_submit.py status SPOOL ID          prints queued, running, the
                                            result's status, or unknown
    kart_submit.py result SPOOL ID          prints the result, or exits 1

The task's files and environment, as kart submit takes them (kart-task(5),
cwd=, bind=, ro=, env=), each path made absolute and resolved here: -C DIR
runs it in DIR, --bind PATH and --ro PATH bind PATH read-write or
read-only, -e NAME=VALUE (or -e NAME, the value from ours) sets a
variable. Unlike kart submit, which runs a task in the directory it is
submitted from, these add no cwd= unless asked: the task runs in a
private /work, discarded at its end. The directives go after the file's
own (the last of a repeated one wins).

As a module:
    s = Spool(path)
    id = s.submit(data, name=None, cwd=None, binds=(), ro=(), env=None)
                                     # data: str (UTF-8) or bytes; env: a dict
                                     # cwd=None: the private /work
    s.status(id); s.result(id)       # result: a dict, or None if unfinished
    s.wait(id, timeout=None)         # the result; TimeoutError
and submit(spool, data, name=None) -> id, as before.
"""
import ctypes
import errno
import json
import os
import pwd
import secrets
import select
import sys
import time

RENAME_NOREPLACE = 1  # linux/fs.h
NAME_MAX = 200        # bytes; keep names to 190 so that NAME.N fits
IN_CREATE, IN_MOVED_TO, IN_Q_OVERFLOW = 0x100, 0x80, 0x4000
IN_CLOEXEC = 0o2000000

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


def pct_encode(value):
    """A directive value, escaped (spool-layout README §3): %XX for '%',
    space, tab, '#', bytes below 0x20 and 0x7f; every other byte as is."""
    raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    out = bytearray()
    for b in raw:
        if b in (0x25, 0x20, 0x09, 0x23) or b < 0x20 or b == 0x7f:
            out += b"%%%02X" % b
        else:
            out.append(b)
    return bytes(out)


def name_check(name):
    """The task name rules (spool-layout README §2): None if fine, else why."""
    raw = name.encode("utf-8", "surrogateescape") if isinstance(name, str) else bytes(name)
    if not raw:
        return "empty name"
    if raw[:1] == b".":
        return "starts with '.'"
    if len(raw) > NAME_MAX:
        return "name longer than 200 bytes"
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return "name is not valid UTF-8"
    if any(b < 0x20 or b == 0x7f for b in raw):
        return "name contains a control character"
    if b"/" in raw:
        return "name contains '/'"
    return None


def _directives(cwd=None, binds=(), ro=(), env=None):
    """The #kart: lines of cwd=, bind=, ro= and env= (kart-task(5)): each
    path absolute and resolved, as the worker opens it as us; each value
    escaped."""
    out = []
    for key, paths in (("cwd", [cwd] if cwd is not None else []), ("bind", binds), ("ro", ro)):
        for p in paths:
            real = os.path.realpath(p)
            if not os.path.exists(real):
                raise FileNotFoundError(errno.ENOENT, "no such file or directory", p)
            out.append(b"#kart: " + key.encode() + b"=" + pct_encode(real) + b"\n")
    for k, v in (env or {}).items():
        if not k or k[0].isdigit() or not all(c.isalnum() or c == "_" for c in k) or not k.isascii():
            raise ValueError("not a variable name: %r" % k)
        out.append(b"#kart: env=" + k.encode() + b"=" + pct_encode(v) + b"\n")
    return b"".join(out)


def _with_directives(data, block):
    """data with block at the end of its leading comment block (the #!
    line, directives and comments), as kart submit adds its options: after
    the file's own, and its lines keep their numbers."""
    if not block:
        return data
    off = 0
    while off < len(data):
        nl = data.find(b"\n", off)
        end = len(data) if nl < 0 else nl
        if end == off or data[off:off + 1] != b"#":
            break
        off = len(data) if nl < 0 else nl + 1
    if off and data[off - 1:off] != b"\n":
        block = b"\n" + block
    return data[:off] + block + data[off:]


def _with_name(data, name):
    """data with `#kart: name=NAME` after its #! line (or first)."""
    line = b"#kart: name=" + pct_encode(name) + b"\n"
    if data.startswith(b"#!"):
        nl = data.find(b"\n")
        if nl < 0:
            return data + b"\n" + line
        return data[:nl + 1] + line + data[nl + 1:]
    return line + data


class Spool:
    def __init__(self, path):
        self.path = os.fspath(path)

    def _p(self, *parts):
        return os.path.join(self.path, *parts)

    def _running_on(self, id):
        """The worker whose cur/ holds id, or None."""
        try:
            workers = os.listdir(self._p("cur"))
        except FileNotFoundError:
            return None
        for w in workers:
            if not w.startswith(".") and os.path.lexists(self._p("cur", w, id)):
                return w
        return None

    def id_taken(self, id):
        """As kart submit checks, in the order tasks move (spool-layout
        README section 5): new/ (and held), every cur/*/, then done/."""
        if os.path.lexists(self._p("new", id)) or os.path.lexists(self._p("new", ".held." + id)):
            return True
        if self._running_on(id):
            return True
        return any(os.path.lexists(self._p("done", id + s)) for s in (".task", ".json", ".attempts"))

    def _ids(self, name):
        yield name
        for n in range(2, 1000000):
            yield "%s.%d" % (name, n)

    def submit(self, data, name=None, cwd=None, binds=(), ro=(), env=None):
        """Queue data (str or bytes) as a task; return its id. cwd, binds,
        ro and env as kart submit's -C, --bind, --ro and -e (env: a dict);
        without cwd the task runs in a private /work."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        elif not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError("data must be str or bytes, not %s" % type(data).__name__)
        data = _with_directives(bytes(data), _directives(cwd, binds, ro, env))
        name = "task" if name is None else name
        if isinstance(name, bytes):
            name = name.decode("utf-8")
        why = name_check(name)
        if why:
            raise ValueError("not a task name: %r (%s)" % (name, why))
        # On a shared spool: our own drop/USER/, and ids USER:NAME.
        target, prefix = drop_target(self.path)

        def taken(cand):
            # A drop moves through new/.hoist.UID.ID on its way (section 6).
            return (prefix != "" and (
                os.path.lexists(os.path.join(target, cand)) or
                os.path.lexists(self._p("new", ".hoist.%d.%s%s" % (os.geteuid(), prefix, cand))))
            ) or self.id_taken(prefix + cand)
        tmpdir = os.open(self._p("tmp"), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        newdir = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        idsdir = self._ids_dir()
        rid = None  # the id reserved in ids/, while it is ours to give back

        def release():
            if rid is not None:
                try:
                    os.unlink(rid, dir_fd=idsdir)
                except FileNotFoundError:
                    pass
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
                ino = str(os.fstat(fd).st_ino)  # what the reservation names
            finally:
                os.close(fd)
            try:
                written = None  # what the file holds: None, data, or data with name=
                for cand in self._ids(name):
                    if len(cand.encode()) > NAME_MAX:
                        raise FileExistsError(errno.EEXIST, "no free id", name)
                    rid = None
                    if idsdir is not None:
                        # An id seen taken needs no reservation; the look
                        # after the reservation is the one that counts.
                        if taken(cand):
                            continue
                        # Reserve first: symlink() fails when anyone holds it.
                        try:
                            os.symlink(ino, prefix + cand, dir_fd=idsdir)
                            rid = prefix + cand
                        except FileExistsError:
                            continue
                        except PermissionError:
                            pass  # ids/ not ours to write: no reservation
                    # Then look (a finisher links done/ID.task, then
                    # looks at ids/: one of us sees the other).
                    if taken(cand):
                        release()
                        rid = None
                        continue
                    named = prefix + cand != name
                    if written != named:
                        body = _with_name(data, name) if named else data
                        # The same file (the same inode), rewritten.
                        wfd = os.open(tmpname, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW,
                                      dir_fd=tmpdir)
                        try:
                            view = memoryview(body)
                            while view:
                                view = view[os.write(wfd, view):]
                            os.fsync(wfd)  # a failed fsync is a failed submit: never retried
                        finally:
                            os.close(wfd)
                        written = named
                    if rid is not None:
                        os.fsync(idsdir)  # the reservation is on disk before the task
                    try:
                        _renameat2(tmpdir, tmpname, newdir, cand)
                    except FileExistsError:
                        release()  # a task copied in under that name keeps it
                        rid = None
                        continue
                    except OSError as e:
                        if e.errno not in (errno.EINVAL, errno.ENOSYS):
                            raise
                        # No RENAME_NOREPLACE here: look, then rename,
                        # as kart submit does.
                        if os.path.lexists(os.path.join(target, cand)):
                            release()
                            rid = None
                            continue
                        os.rename(tmpname, cand, src_dir_fd=tmpdir, dst_dir_fd=newdir)
                    rid = None  # published: the worker removes it with the result
                    os.fsync(newdir)
                    return prefix + cand
                raise FileExistsError(errno.EEXIST, "no free id", name)
            except BaseException:
                release()
                try:
                    os.unlink(tmpname, dir_fd=tmpdir)
                except FileNotFoundError:
                    pass
                raise
        finally:
            os.close(tmpdir)
            os.close(newdir)
            if idsdir is not None:
                os.close(idsdir)

    def _ids_dir(self):
        """SPOOL/ids/ (section 5), made if missing where we may (a spool
        made before it existed); None where there is none."""
        for attempt in (0, 1):
            try:
                return os.open(self._p("ids"), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW |
                               os.O_CLOEXEC)
            except FileNotFoundError:
                if attempt:
                    return None
                try:
                    os.mkdir(self._p("ids"), 0o755)
                except (FileExistsError, PermissionError):
                    pass
        return None

    def result(self, id):
        """done/ID.json as a dict, or None while the task is not finished."""
        try:
            with open(self._p("done", id + ".json"), "rb") as f:
                return json.load(f)
        except FileNotFoundError:
            return None

    def status(self, id):
        """queued, running, the result's status, or unknown: the furthest
        place found, looking in the order tasks move (section 7)."""
        queued = os.path.lexists(self._p("new", id))
        running = self._running_on(id)
        r = self.result(id)
        if r is not None:
            return r.get("status", "?")
        if running:
            return "running"
        return "queued" if queued else "unknown"

    def wait(self, id, timeout=None):
        """The result of id once it exists; TimeoutError after timeout
        seconds (None: no limit)."""
        end = None if timeout is None else time.monotonic() + timeout
        fd = _inotify_done(self._p("done"))
        try:
            while True:
                r = self.result(id)
                if r is not None:
                    return r
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError("no result for %s within %ss" % (id, timeout))
                step = 0.2 if fd < 0 else (left if left is not None else None)
                if fd < 0:
                    time.sleep(min(step, left) if left is not None else step)
                    continue
                ready, _, _ = select.select([fd], [], [], step)
                if ready:
                    os.read(fd, 65536)  # any event: look again
        finally:
            if fd >= 0:
                os.close(fd)


def _inotify_done(path):
    """An inotify descriptor watching path for results, or -1."""
    try:
        fd = _libc.inotify_init1(IN_CLOEXEC)
        if fd < 0:
            return -1
        if _libc.inotify_add_watch(fd, os.fsencode(path), IN_MOVED_TO | IN_CREATE) < 0:
            os.close(fd)
            return -1
        return fd
    except AttributeError:
        return -1


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


def submit(spool, data, name=None, **files):
    return Spool(spool).submit(data, name, **files)


def main(argv):
    usage = ("usage: kart_submit.py [-C DIR] [--bind PATH] [--ro PATH] [-e NAME[=VALUE]]\n"
             "                      SPOOL FILE|- [NAME]\n"
             "       kart_submit.py wait SPOOL ID [SECONDS]\n"
             "       kart_submit.py status SPOOL ID\n"
             "       kart_submit.py result SPOOL ID")
    try:
        if len(argv) >= 2 and argv[1] in ("wait", "status", "result"):
            if len(argv) not in (4, 5) or (argv[1] != "wait" and len(argv) != 4):
                print(usage, file=sys.stderr)
                return 2
            s = Spool(argv[2])
            if argv[1] == "status":
                print(s.status(argv[3]))
                return 0
            if argv[1] == "result":
                r = s.result(argv[3])
                if r is None:
                    print("kart_submit.py: %s: no result" % argv[3], file=sys.stderr)
                    return 1
            else:
                r = s.wait(argv[3], float(argv[4]) if len(argv) == 5 else None)
            print(json.dumps(r, ensure_ascii=False))
            return 0
        # Options anywhere, as kart submit's; -- ends them.
        args, files, env = [], {"binds": [], "ro": []}, {}
        rest = iter(argv[1:])
        for a in rest:
            if a == "--":
                args.extend(rest)
                break
            if a in ("-C", "--cwd", "--bind", "--ro", "-e", "--env"):
                v = next(rest, None)
                if v is None:
                    print("kart_submit.py: %s needs a value\n%s" % (a, usage), file=sys.stderr)
                    return 2
                if a in ("-C", "--cwd"):
                    files["cwd"] = v
                elif a in ("-e", "--env"):
                    k, eq, val = v.partition("=")
                    if not eq and k not in os.environ:
                        print("kart_submit.py: -e %s: give NAME=VALUE, or NAME of a variable "
                              "that is set" % k, file=sys.stderr)
                        return 2
                    env[k] = val if eq else os.environ[k]
                else:
                    files["binds" if a == "--bind" else "ro"].append(v)
            elif a.startswith("-") and a != "-":
                print("kart_submit.py: unknown option %s\n%s" % (a, usage), file=sys.stderr)
                return 2
            else:
                args.append(a)
        if len(args) not in (2, 3):
            print(usage, file=sys.stderr)
            return 2
        spool, path = args[0], args[1]
        if path == "-":
            data, base = sys.stdin.buffer.read(), "stdin"
        else:
            with open(path, "rb") as f:
                data = f.read()
            base = os.path.basename(path)
            if name_check(base):
                base = "task"  # as kart submit: a path that is no task name
        print(Spool(spool).submit(data, args[2] if len(args) == 3 else base, env=env, **files))
    except TimeoutError as e:
        print("kart_submit.py: %s" % e, file=sys.stderr)
        return 1
    except (OSError, ValueError) as e:
        print("kart_submit.py: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
