#!/usr/bin/python3 -I
"""kart-llm - the runner of the `llm` task kind, inside the sandbox.

    kart-llm TASK-FILE

The task file is a prompt (plain text), or a workflow of prompt steps:
JSON when its first character (after the directive lines) is '{',

    {"model": "m", "system": "You are terse.",
     "steps": [{"prompt": "Name a prime."},
               {"prompt": "Double {{previous}}.", "system": "...", "model": "..."}]}

or the same in a small subset of YAML when it has a line "steps:" and
every line at the left margin is "model:", "system:" or "steps:" (a
leading "---" and # comment lines are allowed):

    model: m
    system: You are terse.
    steps:
      - prompt: Name a prime.
      - prompt: |
          Double {{previous}}.
          Say only the number.
        model: m2

Values are plain text to the end of the line, "double-quoted" (JSON
escapes), 'single-quoted', or a | block of the lines indented below.

Each step is one POST $KART_LLM_ENDPOINT/chat/completions (the OpenAI
chat API). With $KART_LLM_SOCKET (a kind with credentials), it goes to
that Unix socket, where the worker's forwarder adds the key and sends it
on to the endpoint: the key is never in this process. Without it, it
goes to the endpoint itself, with Authorization: Bearer
$KART_LLM_API_KEY if that is set (a runner used outside kart);
{{previous}} in a prompt is the answer of the step before. The last
answer goes to stdout, a line per step to stderr. Exit 0 on success;
1 on an HTTP, network or answer-format error; 2 on a bad task file or a
missing endpoint; each with one line on stderr saying what went wrong.
Standard library only; https works.
"""
import http.client
import json
import os
import socket
import sys
import urllib.parse
import urllib.error
import urllib.request

TIMEOUT_S = 600  # per request; the task's own timeout= still applies


def die(code, msg):
    print("kart-llm: " + msg, file=sys.stderr)
    sys.exit(code)


def prompt_text(text):
    """The task file without its #! line and #kart: directive lines (the
    worker's, in the leading comment block); other lines are kept."""
    out, head = [], True
    for n, line in enumerate(text.split("\n")):
        if head and line.startswith("#"):
            body = line[1:].lstrip(" \t").rstrip("\r")
            if (n == 0 and line.startswith("#!")) or body.startswith("kart:") or body == "allow_net":
                continue
        else:
            head = False
        out.append(line)
    return "\n".join(out).strip()


def opt_str(obj, key, where):
    v = obj.get(key)
    if v is not None and not isinstance(v, str):
        die(2, "%s: \"%s\" must be a string" % (where, key))
    return v


YAML_KEYS = ("model", "system", "steps")


def is_yaml(text):
    lines = [l for l in text.split("\n") if l.strip() and not l.lstrip().startswith("#")]
    if lines and lines[0].strip() == "---":
        lines = lines[1:]
    top = [l for l in lines if not l[0].isspace()]
    return ("steps:" in (l.rstrip() for l in top)
            and all(l.split(":", 1)[0] in YAML_KEYS and ":" in l for l in top))


def yaml_value(v, lines, i, indent, n):
    """The value after "key:" on line n: a scalar, or a | block of the
    lines after it indented more than indent. Returns (value, next line)."""
    v = v.strip()
    if v in ("|", "|-"):
        block = []
        while i < len(lines) and (not lines[i].strip() or
                                  len(lines[i]) - len(lines[i].lstrip(" ")) > indent):
            block.append(lines[i])
            i += 1
        while block and not block[-1].strip():
            block.pop()
        if not block:
            die(2, "line %d: an empty | block" % n)
        cut = min(len(l) - len(l.lstrip(" ")) for l in block if l.strip())
        return "\n".join(l[cut:] for l in block), i
    if v.startswith('"'):
        try:
            val = json.loads(v)
        except ValueError:
            die(2, "line %d: a bad \"quoted\" value" % n)
        return val, i
    if v.startswith("'"):
        if len(v) < 2 or not v.endswith("'"):
            die(2, "line %d: a bad 'quoted' value" % n)
        return v[1:-1].replace("''", "'"), i
    return v, i


def yaml_workflow(text):
    lines = text.split("\n")
    wf, steps, item, item_indent = {}, None, None, 0
    i = 0
    while i < len(lines):
        raw, n = lines[i], i + 1
        i += 1
        if not raw.strip() or raw.lstrip().startswith("#") or (n == 1 and raw.strip() == "---"):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        body = raw.strip()
        if indent == 0:
            key, _, v = body.partition(":")
            if key == "steps":
                if v.strip():
                    die(2, "line %d: \"steps:\" takes a list below it" % n)
                steps, item = [], None
                wf["steps"] = steps
                continue
            wf[key], i = yaml_value(v, lines, i, 0, n)
            continue
        if steps is None:
            die(2, "line %d: indented, but not under \"steps:\"" % n)
        if body.startswith("- "):
            item, item_indent = {}, indent
            steps.append(item)
            body, indent = body[2:].strip(), indent + 2
        elif item is None or indent <= item_indent:
            die(2, "line %d: expected \"- prompt: ...\" under \"steps:\"" % n)
        key, sep, v = body.partition(":")
        if not sep or key not in ("prompt", "model", "system"):
            die(2, "line %d: expected prompt:, model: or system:" % n)
        item[key], i = yaml_value(v, lines, i, indent, n)
    return wf


def workflow(text):
    if not text:
        die(2, "the task file holds no prompt")
    if is_yaml(text):
        wf = yaml_workflow(text)
    elif not text.startswith("{"):
        return {"steps": [{"prompt": text}]}
    else:
        try:
            wf = json.loads(text)
        except ValueError as e:
            die(2, "the workflow is not valid JSON: %s" % e)
    if not isinstance(wf, dict):
        die(2, "the workflow must be a JSON object")
    opt_str(wf, "model", "the workflow")
    opt_str(wf, "system", "the workflow")
    steps = wf.get("steps")
    if not isinstance(steps, list) or not steps:
        die(2, "the workflow needs \"steps\": a non-empty list of {\"prompt\": ...}")
    for i, st in enumerate(steps, 1):
        where = "step %d" % i
        if not isinstance(st, dict) or not isinstance(st.get("prompt"), str) or not st["prompt"]:
            die(2, "%s: needs \"prompt\": a non-empty string" % where)
        opt_str(st, "model", where)
        opt_str(st, "system", where)
    return wf


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over the forwarder's Unix socket; the Host is the endpoint's."""

    def __init__(self, path, host, timeout):
        super().__init__(host, timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def post_unix(path, url, body, headers):
    """(status, reason, raw body) of POST url, sent through the socket."""
    u = urllib.parse.urlsplit(url)
    c = UnixHTTPConnection(path, u.netloc, TIMEOUT_S)
    try:
        c.request("POST", u.path + ("?" + u.query if u.query else ""), body=body, headers=headers)
        r = c.getresponse()
        return r.status, r.reason, r.read()
    finally:
        c.close()


def complete(url, key, model, system, prompt, sock=None):
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": prompt})
    body = {"messages": messages}
    if model:
        body["model"] = model
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    if sock:
        try:
            status, reason, raw = post_unix(sock, url, json.dumps(body).encode(), headers)
        except (OSError, http.client.HTTPException) as e:
            die(1, "POST %s (through %s): %s" % (url, sock, e))
        if status // 100 != 2:
            detail = raw[:2000].decode("utf-8", "replace").strip().replace("\n", " ")
            die(1, "POST %s: HTTP %d %s%s" % (url, status, reason, ": " + detail[:500] if detail else ""))
        return answer_of(url, raw)
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers,
                                 method="POST")
    # No proxy from the environment: the sandbox clears it anyway.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=TIMEOUT_S) as r:
            raw = r.read()
    except urllib.error.HTTPError as e:
        detail = e.read(2000).decode("utf-8", "replace").strip().replace("\n", " ")
        die(1, "POST %s: HTTP %d %s%s" % (url, e.code, e.reason, ": " + detail[:500] if detail else ""))
    except (urllib.error.URLError, OSError) as e:
        die(1, "POST %s: %s" % (url, getattr(e, "reason", e)))
    return answer_of(url, raw)


def answer_of(url, raw):
    try:
        content = json.loads(raw)["choices"][0]["message"]["content"]
        if not isinstance(content, str):
            raise TypeError
    except (ValueError, KeyError, IndexError, TypeError):
        die(1, "POST %s: the answer is not a chat completion: %r" % (url, raw[:300]))
    return content


def main():
    if len(sys.argv) != 2:
        die(2, "usage: kart-llm TASK-FILE")
    try:
        with open(sys.argv[1], encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        die(2, "%s: %s" % (sys.argv[1], e))
    wf = workflow(prompt_text(text))
    endpoint = os.environ.get("KART_LLM_ENDPOINT", "")
    if not endpoint.startswith(("http://", "https://")):
        die(2, "no endpoint: $KART_LLM_ENDPOINT is %r (kart.conf: [kind.llm] endpoint = URL)"
            % endpoint)
    url = endpoint.rstrip("/") + "/chat/completions"
    sock = os.environ.get("KART_LLM_SOCKET", "")
    key = "" if sock else os.environ.get("KART_LLM_API_KEY", "")
    answer = ""
    steps = wf["steps"]
    for i, st in enumerate(steps, 1):
        model = st.get("model") or wf.get("model") or os.environ.get("KART_LLM_MODEL", "")
        system = st.get("system") or wf.get("system")
        answer = complete(url, key, model, system, st["prompt"].replace("{{previous}}", answer),
                          sock)
        print("kart-llm: step %d/%d: %d characters" % (i, len(steps), len(answer)),
              file=sys.stderr)
    sys.stdout.write(answer if answer.endswith("\n") else answer + "\n")


if __name__ == "__main__":
    main()
