#!/usr/bin/python3 -I
"""kart-credfwd - the credential forwarder of one task of a kind with
credentials (kart.conf(5), [kind.NAME] credentials and endpoint).

    kart-credfwd SOCKET ENDPOINT UID VIA   (started by the worker, never by hand)

    fd 0  the credential's value (a sealed memfd), read once, then closed
    fd 3  a listening Unix socket, SOCKET on the host, bound into the
          task's sandbox (the runner finds it in $KART_LLM_SOCKET)
    fd 4  a pidfd of the task's process: when it ends, so does this

Each HTTP request read from the socket is sent to ENDPOINT (http or
https) with "Authorization: Bearer VALUE" added, and the answer is
streamed back, ending with the connection. The task never holds the
value: this process runs as the worker (root on a shared spool), so no
process of the submitter can read it (/proc/PID/environ, /proc/PID/mem).

The value goes only to a peer proven to be the service: over https, one
whose certificate verifies for the endpoint's host; over http://, one
whose socket belongs to UID (kart.conf(5) endpoint_uid): VIA, a Unix
socket path (reached through directories only root or UID can change,
no symlink followed, then SO_PEERCRED), or else the endpoint's port,
which must be on this host (the other end of the very connection,
looked up in /proc/net/tcp{,6}: whoever binds the port while the
service is down is found out, and no second connection is made after
the look). A peer not proven gets nothing, and the task a 502 saying
why.

Only the policy's endpoint is reached: the request's target must
normalise to a path under the endpoint's own path (no scheme or host;
no "." or ".." segment, none empty; no ";" parameters, so no "..;"; no
escape of "/", "\\", ".", ";", "%", a control or a non-ASCII byte),
the host is always the endpoint's, and redirects are passed back, never
followed. Headers are read strictly: CRLF line ends, no folded line (a
line that starts with a space or a tab: one header to us, another to
the next parser), token names, no control byte. A request that breaks a
rule gets 400, 403, 411 or 413 and is not forwarded.

Python's standard library only, like kart-llm: a memory-safe parser of
the task's bytes in the one process that holds the key, and https
without a TLS library in kart itself.
"""
import http.client
import os
import re
import select
import signal
import socket
import ssl
import stat
import struct
import sys
import threading
import time
import urllib.parse

CONN_MAX = 16            # requests served at once; more get 503
BODY_MAX = 64 << 20      # a request body, at most (streamed, not held)
READ_TIMEOUT_S = 60      # for the task to send its request
UPSTREAM_TIMEOUT_S = 600 # per request, as kart-llm's; the task's timeout= still applies
HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
       "upgrade", "host", "authorization", "proxy-authorization", "content-length"}
METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}


def log(msg):
    try:
        sys.stderr.write("kart-credfwd: %s\n" % msg)
        sys.stderr.flush()
    except OSError:
        pass


def read_key():
    chunks = []
    while True:
        b = os.read(0, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(0)
    os.open("/dev/null", os.O_RDONLY)  # fd 0 again, never a socket by chance
    return b"".join(chunks).decode("utf-8", "strict")


# A path segment's characters (RFC 3986 pchar) but ";" (Java servlets,
# among others, cut "..;" to "..") and "%" (checked as escapes below).
PCHAR = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,=:@")
# What an escape may not stand for: it would move the path or be read
# twice ("%252e"), or a control, or a non-ASCII byte (an overlong "." in
# a lax UTF-8 decoder).
ESC_BAD = frozenset(b"/\\.;%") | frozenset(range(0x21)) | frozenset(range(0x7f, 0x100))
TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
HEX2 = re.compile(rb"[0-9A-Fa-f]{2}\Z")


def target_ok(target, base):
    """The request's target normalises to a path under the endpoint's."""
    t = target.encode("latin-1")
    path, _, query = t.partition(b"?")
    if not path.startswith(b"/") or any(c < 0x21 or c > 0x7e or c == 0x23 for c in t):
        return False
    segs = path.split(b"/")[1:]
    for i, seg in enumerate(segs):
        if seg in (b".", b"..") or (not seg and i != len(segs) - 1):
            return False
        k = 0
        while k < len(seg):
            if seg[k] == 0x25:  # %XX
                hx = seg[k + 1:k + 3]
                if not HEX2.match(hx) or int(hx, 16) in ESC_BAD:
                    return False
                k += 3
            elif seg[k] in PCHAR:
                k += 1
            else:
                return False
    p = path.decode("ascii")
    return base == "" or p == base or p.startswith(base + "/")


def read_headers(rf):
    """The request's headers as [(name, value)], read strictly, or None:
    each line ends in CRLF; none is folded; NAME: VALUE, NAME a token,
    no control byte in VALUE; at most 100 lines and 64 KiB."""
    out, total = [], 0
    while True:
        line = rf.readline(8193)
        total += len(line)
        if len(line) > 8192 or total > 65536 or len(out) > 100 or not line.endswith(b"\r\n"):
            return None
        line = line[:-2]
        if not line:
            return out
        if line[:1] in (b" ", b"\t"):
            return None  # obs-fold
        name, sep, value = line.partition(b":")
        value = value.strip(b" \t")
        if not sep or not TOKEN.match(name) or any((c < 0x20 and c != 9) or c == 0x7f for c in value):
            return None
        out.append((name.decode("ascii"), value.decode("latin-1")))


class Unproven(OSError):
    """Why the endpoint cannot be proven to be the service."""


def socket_path_fd(path, uid):
    """An O_PATH descriptor of the socket at path, uid's, reached only
    through directories that root or uid alone can change: root's
    forwarder follows no symlink and no name another user could have put
    there to another service's socket (a container engine's, say)."""
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    where = "/"
    try:
        parts = [p for p in path.split("/") if p]
        for i, part in enumerate(parts):
            st = os.fstat(fd)
            if st.st_uid not in (0, uid) or st.st_mode & 0o022:
                raise Unproven("%s can be written by others than root and endpoint_uid" % where)
            flags = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
            nfd = os.open(part, flags | (os.O_DIRECTORY if i < len(parts) - 1 else 0), dir_fd=fd)
            os.close(fd)
            fd = nfd
            where = "/" + "/".join(parts[:i + 1])
        st = os.fstat(fd)
        if not stat.S_ISSOCK(st.st_mode) or st.st_uid != uid:
            raise Unproven("%s is not a socket of endpoint_uid %d" % (path, uid))
        return fd
    except OSError as e:
        os.close(fd)
        if isinstance(e, Unproven):
            raise
        raise Unproven("%s: %s (no symlink is followed)" % (where, os.strerror(e.errno or 0)))


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP to the endpoint over its Unix socket (endpoint_socket),
    connected to the very file socket_path_fd checked."""

    def __init__(self, path, uid, host, timeout):
        super().__init__(host, timeout=timeout)
        self.unix_path, self.uid = path, uid

    def connect(self):
        fd = socket_path_fd(self.unix_path, self.uid)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect("/proc/self/fd/%d" % fd)
        except OSError:
            s.close()
            raise
        finally:
            os.close(fd)
        self.sock = s


def inet(a):
    """(ip, port) of a socket address, an IPv4-mapped one as IPv4."""
    ip = a[0][7:] if a[0].startswith("::ffff:") and "." in a[0] else a[0]
    return ip, a[1]


def proc_addr(field):
    """(ip, port) of an address of /proc/net/tcp{,6}: each 32-bit word of
    the address printed as a number of the host's byte order."""
    h, _, p = field.partition(":")
    raw = b"".join(struct.pack("=I", int(h[i:i + 8], 16)) for i in range(0, len(h), 8))
    ip = socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw)
    return inet((ip, int(p, 16)))


def tcp_owner(local, remote):
    """The uid of this host's TCP socket at local, connected to remote."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            try:
                if len(f) > 7 and proc_addr(f[1]) == local and proc_addr(f[2]) == remote:
                    return int(f[7])
            except (ValueError, OSError):
                continue
    return None


def unproven(sock, ep):
    """Why the other end of sock, connected, is not the endpoint's
    service, or "" when it is. Over https the handshake has verified its
    certificate already."""
    if ep["https"]:
        return ""
    if sock.family == socket.AF_UNIX:
        _, uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                        struct.calcsize("3i")))
        where = ep["via"]
    else:
        # This connection's other end: the socket the service accepted
        # it on, created with its listener's owner. It exists as soon as
        # the handshake is done on that side: looked for a few times.
        here, there = inet(sock.getsockname()), inet(sock.getpeername())
        uid = None
        for _ in range(40):
            uid = tcp_owner(there, here)
            if uid is not None:
                break
            time.sleep(0.005)
        where = "%s port %d" % there
        if uid is None:
            return ("%s is not a socket of this host: an http:// endpoint elsewhere cannot be "
                    "proven (use https)" % where)
    if uid != ep["uid"]:
        return "%s is held by uid %d, not by endpoint_uid %d" % (where, uid, ep["uid"])
    return ""


def reply(conn, code, reason, text):
    body = ('{"error": {"message": "kart-credfwd: %s"}}\n' % text).encode()
    head = ("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
            "Connection: close\r\n\r\n" % (code, reason, len(body))).encode()
    try:
        conn.sendall(head + body)
    except OSError:
        pass


def drain(rf, n):
    """The request's body, read and dropped before a refusal: a client
    still sending it would meet a closed socket (EPIPE) instead of the
    answer that says why."""
    try:
        while n > 0:
            b = rf.read(min(n, 65536))
            if not b:
                return
            n -= len(b)
    except OSError:
        pass


def serve(conn, ep, key, slots):
    try:
        conn.settimeout(READ_TIMEOUT_S)
        rf = conn.makefile("rb")
        line = rf.readline(8193)
        parts = line.decode("latin-1")[:-2].split(" ")
        if len(line) > 8192 or not line.endswith(b"\r\n") or len(parts) != 3 or \
                not parts[2].startswith("HTTP/1."):
            return reply(conn, 400, "Bad Request", "not an HTTP/1.x request line")
        method, target = parts[0], parts[1]
        if method not in METHODS:
            return reply(conn, 400, "Bad Request", "method %s is not forwarded" % method[:20])
        hdrs = read_headers(rf)
        if hdrs is None:
            return reply(conn, 400, "Bad Request", "bad headers (a folded line, a control byte, "
                         "a bare LF, or a name that is no token)")
        if not target_ok(target, ep["base"]):
            return reply(conn, 403, "Forbidden", "only paths under %s are forwarded" % (ep["base"] or "/"))
        names = [k.lower() for k, _ in hdrs]
        if "transfer-encoding" in names:
            return reply(conn, 411, "Length Required", "send a Content-Length, not a chunked body")
        lens = [v for k, v in hdrs if k.lower() == "content-length"]
        n = int(lens[0]) if len(lens) == 1 and lens[0].isdigit() else 0 if not lens else -1
        if n < 0 or n > BODY_MAX:
            return reply(conn, 413, "Payload Too Large", "one Content-Length of 0 to %d bytes" % BODY_MAX)
        if ep["https"]:
            up = http.client.HTTPSConnection(ep["host"], ep["port"], timeout=UPSTREAM_TIMEOUT_S,
                                             context=ssl.create_default_context())
        elif ep["via"]:
            up = UnixHTTPConnection(ep["via"], ep["uid"], ep["netloc"], UPSTREAM_TIMEOUT_S)
        else:
            up = http.client.HTTPConnection(ep["host"], ep["port"], timeout=UPSTREAM_TIMEOUT_S)
        try:
            up.connect()  # and, for https, the certificate verified
            why = unproven(up.sock, ep)
        except ssl.SSLCertVerificationError as e:
            why = "its certificate does not verify (%s)" % e.verify_message
        except Unproven as e:
            why = str(e)
        except (OSError, http.client.HTTPException) as e:
            drain(rf, n)
            return reply(conn, 502, "Bad Gateway", "%s: %s" % (ep["url"], type(e).__name__))
        if why:
            up.close()
            log("%s: not sent: %s" % (ep["url"], why))
            drain(rf, n)
            return reply(conn, 502, "Bad Gateway",
                         "cannot prove the endpoint: %s; the key was not sent" % why)
        up.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        up.putheader("Host", ep["netloc"])
        for k, v in hdrs:
            if k.lower() not in HOP:
                up.putheader(k, v)
        if key:
            up.putheader("Authorization", "Bearer " + key)
        if n or method in ("POST", "PUT", "PATCH"):
            up.putheader("Content-Length", str(n))
        try:
            up.endheaders()
            # Passed on as it comes: a body costs this process (root's,
            # outside the task's cgroup) 64 KiB at most, whatever its size.
            while n > 0:
                b = rf.read(min(n, 65536))
                if not b:
                    return reply(conn, 400, "Bad Request", "the body ended early")
                up.send(b)
                n -= len(b)
            r = up.getresponse()
        except (OSError, http.client.HTTPException) as e:
            return reply(conn, 502, "Bad Gateway", "%s: %s" % (ep["url"], type(e).__name__))
        out = ["HTTP/1.1 %d %s" % (r.status, r.reason)]
        for k, v in r.getheaders():
            if k.lower() not in HOP:
                out.append("%s: %s" % (k, v))
        out.append("Connection: close")
        conn.settimeout(UPSTREAM_TIMEOUT_S)
        conn.sendall(("\r\n".join(out) + "\r\n\r\n").encode("latin-1", "replace"))
        while True:
            b = r.read1(65536) if method != "HEAD" else b""
            if not b:
                break
            conn.sendall(b)
        up.close()
    except Exception as e:  # one request's failure is that request's alone
        log("a request failed: %s" % type(e).__name__)
    finally:
        try:
            conn.close()
        except OSError:
            pass
        slots.release()


def forward(args):
    """Serve the task's requests until it ends; the exit status."""
    if len(args) != 4:
        log("usage: kart-credfwd SOCKET ENDPOINT UID VIA")
        return 2
    url, uid, via = args[1:4]
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname or not uid.lstrip("-").isdigit():
        log("%s %s: not an http:// or https:// URL and a uid" % (url, uid))
        return 2
    ep = {"url": url, "https": u.scheme == "https", "host": u.hostname,
          "port": u.port or (443 if u.scheme == "https" else 80), "netloc": u.netloc,
          "base": u.path.rstrip("/"), "uid": int(uid), "via": via}
    if not ep["https"] and ep["uid"] < 0:
        log("%s: an http:// endpoint needs endpoint_uid: the key would go to whoever holds "
            "the port" % url)
        return 2
    key = read_key()
    lsock = socket.socket(fileno=3)
    done = select.poll()
    done.register(4, select.POLLIN)
    done.register(3, select.POLLIN)
    slots = threading.BoundedSemaphore(CONN_MAX)
    while True:
        ready = dict(done.poll())
        if 4 in ready:
            return 0  # the task has ended: so has its forwarder
        if 3 in ready:
            try:
                conn, _ = lsock.accept()
            except OSError:
                continue
            if not slots.acquire(blocking=False):
                reply(conn, 503, "Service Unavailable", "more than %d requests at once" % CONN_MAX)
                conn.close()
                continue
            threading.Thread(target=serve, args=(conn, ep, key, slots), daemon=True).start()


def main():
    # A SIGTERM (a service's stop) still removes the socket, below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    rc = 1
    try:
        rc = forward(sys.argv[1:])
    finally:
        # The socket and its directory (made for this task alone by the
        # worker, root's, 0711): nothing is left behind, whatever ended us.
        if len(sys.argv) > 1:
            for f in (lambda: os.unlink(sys.argv[1]), lambda: os.rmdir(os.path.dirname(sys.argv[1]))):
                try:
                    f()
                except OSError:
                    pass
        os._exit(rc)  # the threads of requests still in flight end with us


if __name__ == "__main__":
    main()
