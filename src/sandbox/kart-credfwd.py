#!/usr/bin/python3 -I
"""kart-credfwd - the credential forwarder of one task of a kind with
credentials (kart.conf(5), [kind.NAME] credentials and endpoint).

    kart-credfwd SOCKET ENDPOINT      (started by the worker, never by hand)

    fd 0  the credential's value (a sealed memfd), read once, then closed
    fd 3  a listening Unix socket, SOCKET on the host, bound into the
          task's sandbox (the runner finds it in $KART_LLM_SOCKET)
    fd 4  a pidfd of the task's process: when it ends, so does this

Each HTTP request read from the socket is sent to ENDPOINT (http or
https) with "Authorization: Bearer VALUE" added, and the answer is
streamed back, ending with the connection. The task never holds the
value: this process runs as the worker (root on a shared spool), so no
process of the submitter can read it (/proc/PID/environ, /proc/PID/mem).

Only the policy's endpoint is reached: the request's target must be a
path under the endpoint's own path (no scheme or host, no "." or ".."
segment, no "%2e", backslash or control byte), the host is always the
endpoint's, and redirects are passed back, never followed. A request
that breaks a rule gets 400, 403, 411 or 413 and is not forwarded.

Python's standard library only, like kart-llm: a memory-safe parser of
the task's bytes in the one process that holds the key, and https
without a TLS library in kart itself.
"""
import http.client
import os
import select
import signal
import socket
import ssl
import sys
import threading
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


def target_ok(target, base):
    """The request's target is a path under the endpoint's path."""
    if not target.startswith("/") or target.startswith("//"):
        return False
    if any(c in target for c in "\\#") or any(ord(c) < 0x21 or ord(c) == 0x7f for c in target):
        return False
    path = target.split("?", 1)[0]
    if "%2e" in path.lower() or "%2f" in path.lower():
        return False
    if any(seg in (".", "..") for seg in path.split("/")):
        return False
    return path == base or path.startswith(base + "/") or base == ""


def reply(conn, code, reason, text):
    body = ('{"error": {"message": "kart-credfwd: %s"}}\n' % text).encode()
    head = ("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
            "Connection: close\r\n\r\n" % (code, reason, len(body))).encode()
    try:
        conn.sendall(head + body)
    except OSError:
        pass


def serve(conn, ep, key, slots):
    try:
        conn.settimeout(READ_TIMEOUT_S)
        rf = conn.makefile("rb")
        line = rf.readline(8193)
        parts = line.decode("latin-1").rstrip("\r\n").split(" ")
        if len(line) > 8192 or len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return reply(conn, 400, "Bad Request", "not an HTTP/1.x request line")
        method, target = parts[0], parts[1]
        if method not in METHODS:
            return reply(conn, 400, "Bad Request", "method %s is not forwarded" % method[:20])
        try:
            hdrs = http.client.parse_headers(rf)
        except (http.client.HTTPException, ValueError):
            return reply(conn, 400, "Bad Request", "bad headers")
        if not target_ok(target, ep["base"]):
            return reply(conn, 403, "Forbidden", "only paths under %s are forwarded" % (ep["base"] or "/"))
        if hdrs.get("Transfer-Encoding"):
            return reply(conn, 411, "Length Required", "send a Content-Length, not a chunked body")
        try:
            n = int(hdrs.get("Content-Length", "0"))
        except ValueError:
            n = -1
        if n < 0 or n > BODY_MAX:
            return reply(conn, 413, "Payload Too Large", "a body of 0 to %d bytes" % BODY_MAX)
        if ep["https"]:
            up = http.client.HTTPSConnection(ep["host"], ep["port"], timeout=UPSTREAM_TIMEOUT_S,
                                             context=ssl.create_default_context())
        else:
            up = http.client.HTTPConnection(ep["host"], ep["port"], timeout=UPSTREAM_TIMEOUT_S)
        up.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        up.putheader("Host", ep["netloc"])
        for k, v in hdrs.items():
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


def main():
    if len(sys.argv) != 3:
        log("usage: kart-credfwd SOCKET ENDPOINT")
        sys.exit(2)
    sock_path, url = sys.argv[1], sys.argv[2]
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        log("%s: not an http:// or https:// URL" % url)
        sys.exit(2)
    ep = {"url": url, "https": u.scheme == "https", "host": u.hostname,
          "port": u.port or (443 if u.scheme == "https" else 80), "netloc": u.netloc,
          "base": u.path.rstrip("/")}
    key = read_key()
    # A SIGTERM (a service's stop) still removes the socket, below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    lsock = socket.socket(fileno=3)
    done = select.poll()
    done.register(4, select.POLLIN)
    done.register(3, select.POLLIN)
    slots = threading.BoundedSemaphore(CONN_MAX)
    try:
        while True:
            ready = dict(done.poll())
            if 4 in ready:
                break  # the task has ended: so has its forwarder
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
    finally:
        # The socket and its directory (made for this task alone by the
        # worker, root's, 0711): nothing is left behind.
        for f in (lambda: os.unlink(sock_path), lambda: os.rmdir(os.path.dirname(sock_path))):
            try:
                f()
            except OSError:
                pass
        os._exit(0)  # the threads of requests still in flight end with us


if __name__ == "__main__":
    main()
