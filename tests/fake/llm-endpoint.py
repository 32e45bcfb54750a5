# tests/fake/llm-endpoint.py - a stand-in for an OpenAI-compatible chat
# endpoint on 127.0.0.1 (tests/blackbox/kinds.sh, users.sh).
#
#   python3 llm-endpoint.py KEY PORTFILE LOG [DELAY-S]
#
# POST /v1/chat/completions: 401 without "Authorization: Bearer KEY";
# else the answer "answer to [PROMPT]", so a step's input shows in the
# next one's output; after DELAY-S seconds (0), to make a task last.
# Every request is a JSON line in LOG: its path, whether the key came,
# its body. The chosen port is written to PORTFILE once it listens.
# KEY "-": $FAKE_LLM_KEY, out of the command line others can read.
# $FAKE_LLM_PORT: listen on that port (a restart on the same one).
import http.server, json, os, sys, time
key, portfile, log = sys.argv[1:4]
key = os.environ["FAKE_LLM_KEY"] if key == "-" else key
delay = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
class H(http.server.BaseHTTPRequestHandler):
    def reply(self, code, obj):
        out = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def do_GET(self):
        with open(log, "a") as f:
            f.write(json.dumps({"path": self.path, "method": "GET",
                                "auth_ok": self.headers.get("Authorization") == "Bearer " + key}) + "\n")
        self.reply(404, {"error": "no such path"})
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"null")
        auth = self.headers.get("Authorization")
        with open(log, "a") as f:
            f.write(json.dumps({"path": self.path, "auth_ok": auth == "Bearer " + key,
                                "body": body}) + "\n")
        if self.path != "/v1/chat/completions":
            return self.reply(404, {"error": "no such path"})
        if auth != "Bearer " + key:
            return self.reply(401, {"error": {"message": "invalid api key"}})
        time.sleep(delay)
        prompt = body["messages"][-1]["content"]
        self.reply(200, {"object": "chat.completion", "choices": [
            {"index": 0, "finish_reason": "stop",
             "message": {"role": "assistant", "content": "answer to [" + prompt + "]"}}]})
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ.get("FAKE_LLM_PORT", "0"))), H)
with open(portfile + ".tmp", "w") as f:
    f.write(str(srv.server_port))
os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
