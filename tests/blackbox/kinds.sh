# Task kinds from the outside: [kind.NAME] in kart.conf maps kind=NAME or
# a file extension to a runner inside the real bwrap sandbox; the llm
# kind's runner (kart-llm, from the build tree, so bound into the
# sandbox) against a mock OpenAI-compatible server on 127.0.0.1; the
# kind's credential reaching its tasks only.
. "$(dirname "$0")/../lib.sh"

need_bwrap() { have_bwrap || skip "bwrap cannot build a sandbox here"; }
need_python() {
	[ -x /usr/bin/python3 ] || skip "no /usr/bin/python3 (contrib/install-deps installs it)"
}

KEY=sk-kinds-$RANDOM-$RANDOM-5d0c
MOCK_LOG=$T_ROOT/mock.log
MOCK_PORT=

# The fake chat-completions endpoint (tests/fake/llm-endpoint.py): 401
# without "Bearer $KEY"; the answer is "answer to [PROMPT]".
start_mock() {
	[ -n "$MOCK_PORT" ] && return 0
	/usr/bin/python3 "$ROOT/tests/fake/llm-endpoint.py" "$KEY" "$T_ROOT/mock.port" "$MOCK_LOG" \
		2>>"$T_ROOT/mock.err" &
	T_PIDS+=("$!")
	wait_until 10 test -s "$T_ROOT/mock.port" || { fail "the mock server did not start"; return 1; }
	MOCK_PORT=$(cat "$T_ROOT/mock.port")
}

# kind_conf SPOOL [NET-UIDS]: python and llm kinds (llm's runner left to
# the default: the build tree's kart-llm); network for NET-UIDS if given.
kind_conf() {
	{
		printf '[kind.python]\nrunner = /usr/bin/python3\nextensions = .py\n'
		llm_kind "$MOCK_PORT"
		printf '[network]\ncred_env = KINDS_GENERAL_TOKEN\n'
		[ -n "${2:-}" ] && printf 'allow_uids = %s\n' "$2"
	} >"$1/kart.conf"
}

# llm_spool: what an llm test needs (bwrap, python3, the mock server), and
# a spool whose policy has the kinds, with network for us: LLM_SPOOL.
llm_spool() {
	need_bwrap || return
	need_python || return
	start_mock || return
	LLM_SPOOL=$(mkspool)
	kind_conf "$LLM_SPOOL" "$(id -u)"
}

# A plain prompt, by its .prompt extension: the answer is the task's
# stdout; the request carried the key, the policy's model and no
# directive line; the key is in no result and no log.
test_llm_prompt_answer() {
	llm_spool || return
	local s=$LLM_SPOOL
	printf 'What is 2+2?\n' >"$T_ROOT/q.prompt"
	local id; id=$("$KART" -s "$s" submit --timeout 60 "$T_ROOT/q.prompt")
	KART_LLM_API_KEY=$KEY KINDS_GENERAL_TOKEN=general drain "$s"
	assert_eq ok "$(field "$s" "$id" .status)" "status ($(field "$s" "$id" .error); $(cat "$s/done/$id.stderr" 2>/dev/null))"
	assert_eq "answer to [What is 2+2?]" "$("$KART" -s "$s" cat "$id")" "kart cat: the answer"
	assert_eq bwrap "$(field "$s" "$id" .sandbox.backend)" "run in the bwrap sandbox"
	assert_eq true "$(field "$s" "$id" .sandbox.network)" "the kind's net = yes gave it network"
	# The build tree's kart-llm ran under Landlock, by its own rule.
	local abi; abi=$("${KART_NATIVE:-$KART}" doctor --json 2>/dev/null | jq -r .landlock_abi)
	if [[ $abi =~ ^[0-9]+$ ]]; then
		assert_eq "$abi" "$(field "$s" "$id" .sandbox.landlock)" "Landlock applied"
	else
		skip "no Landlock here ($abi): the runner's own Landlock rule goes unchecked"
	fi
	local req; req=$(tail -1 "$MOCK_LOG")
	assert_eq true "$(jq -r .auth_ok <<<"$req")" "Authorization: Bearer with the key"
	assert_eq mock-model "$(jq -r .body.model <<<"$req")" "the policy's model"
	assert_eq "What is 2+2?" "$(jq -r '.body.messages[-1].content' <<<"$req")" "the prompt, without the #kart: line"
	grep -rl -e "$KEY" "$s/done" "$s.worker.log" && fail "the key is in a result or the log"
	true
}

# A two-step JSON workflow: the first answer is {{previous}} in the
# second prompt; the workflow's system message and model are sent.
test_llm_workflow_two_steps() {
	llm_spool || return
	local s=$LLM_SPOOL
	cat >"$T_ROOT/flow.prompt" <<'EOF'
{"model": "flow-model", "system": "Be terse.",
 "steps": [{"prompt": "Name a colour."},
           {"prompt": "Shorten: {{previous}}"}]}
EOF
	local id; id=$("$KART" -s "$s" submit "$T_ROOT/flow.prompt")
	: >"$MOCK_LOG"
	KART_LLM_API_KEY=$KEY drain "$s"
	assert_eq ok "$(field "$s" "$id" .status)" "status ($(cat "$s/done/$id.stderr" 2>/dev/null))"
	assert_eq "answer to [Shorten: answer to [Name a colour.]]" "$("$KART" -s "$s" cat "$id")" \
		"the second step got the first answer"
	assert_eq 2 "$(wc -l <"$MOCK_LOG")" "one request per step"
	assert_eq "Be terse." "$(jq -r '.body.messages[0].content' <"$MOCK_LOG" | sort -u)" "system message"
	assert_eq flow-model "$(jq -r '.body.model' <"$MOCK_LOG" | sort -u)" "the workflow's model"
	assert_match "step 2/2" "$("$KART" -s "$s" cat --stderr "$id")" "progress on stderr"
}

# The same workflow in kart-llm's YAML subset: a | block, quoting, a
# step's own model.
test_llm_workflow_yaml() {
	llm_spool || return
	local s=$LLM_SPOOL
	cat >"$T_ROOT/flow.prompt" <<'EOF'
---
# two steps
model: flow-model
system: 'Be terse, it''s fine.'
steps:
  - prompt: Name a colour.
  - prompt: |
      Shorten: {{previous}}
      One word.
    model: "step-model"
EOF
	local id; id=$("$KART" -s "$s" submit "$T_ROOT/flow.prompt")
	: >"$MOCK_LOG"
	KART_LLM_API_KEY=$KEY drain "$s"
	assert_eq ok "$(field "$s" "$id" .status)" "status ($(cat "$s/done/$id.stderr" 2>/dev/null))"
	assert_eq "answer to [Shorten: answer to [Name a colour.]
One word.]" "$("$KART" -s "$s" cat "$id")" "the | block, with the first answer in it"
	assert_eq 2 "$(wc -l <"$MOCK_LOG")" "one request per step"
	assert_eq "Be terse, it's fine." "$(jq -r '.body.messages[0].content' <"$MOCK_LOG" | sort -u)" \
		"the system message, 'quoted'"
	assert_eq "flow-model
step-model" "$(jq -r '.body.model' <"$MOCK_LOG")" "the workflow's model, then the step's own"
	# A workflow that breaks the subset is refused, naming the line.
	printf 'steps:\n  - prompt: a\n  - colour: red\n' >"$T_ROOT/bad.prompt"
	id=$("$KART" -s "$s" submit "$T_ROOT/bad.prompt")
	KART_LLM_API_KEY=$KEY drain "$s"
	assert_eq failed "$(field "$s" "$id" .status)" "bad YAML: failed"
	assert_eq 2 "$(field "$s" "$id" .exit_code)" "bad YAML: exit 2"
	assert_match 'line 3: expected prompt:, model: or system:' "$("$KART" -s "$s" cat --stderr "$id")" \
		"bad YAML: the line"
}

# kart-llm's own errors: a wrong key is HTTP 401 (failed, exit 1, said on
# stderr); a workflow that is not JSON is exit 2, said on stderr.
test_llm_errors() {
	llm_spool || return
	local s=$LLM_SPOOL
	printf 'hello\n' >"$s/new/badkey.prompt"
	printf '{"steps": [' >"$s/new/badjson.prompt"
	KART_LLM_API_KEY=wrong-key drain "$s"
	assert_eq failed "$(field "$s" badkey.prompt .status)" "wrong key: failed"
	assert_eq 1 "$(field "$s" badkey.prompt .exit_code)" "wrong key: exit 1"
	assert_match "kart-llm: POST http://127.0.0.1:$MOCK_PORT/v1/chat/completions: HTTP 401" \
		"$(cat "$s/done/badkey.prompt.stderr")" "wrong key: stderr"
	assert_eq "" "$(cat "$s/done/badkey.prompt.stdout" 2>/dev/null)" "wrong key: no answer"
	assert_eq 2 "$(field "$s" badjson.prompt .exit_code)" "bad workflow: exit 2"
	assert_match "not valid JSON" "$(cat "$s/done/badjson.prompt.stderr")" "bad workflow: stderr"
}

# A kind's credential goes through the worker's forwarder, never into
# the sandbox: a kind whose runner is /bin/sh finds no key in its
# environment, only $KART_LLM_SOCKET; through it, a request under the
# endpoint's path reaches the endpoint with the key added (the task's
# own Authorization and Host replaced), and nothing else is forwarded:
# another path, an absolute URL, "..", "%2e%2e", a chunked body, and
# (issue 35) "..;", ";" parameters, an escaped "/" or ".", a double
# escape, a folded header line (" Transfer-Encoding", which the next
# parser may read as its own header), a header name with a space, a
# bare LF, two Content-Lengths. Each
# forwarder ends with its task, however it ends (here also a timeout,
# while the forwarder waits for requests), and takes its socket along.
test_credentials_only_through_the_forwarder() {
	llm_spool || return
	local s=$LLM_SPOOL
	cat >>"$s/kart.conf" <<EOF
[kind.probe]
runner = /bin/sh
net = yes
credentials = KART_LLM_API_KEY
endpoint = http://127.0.0.1:$MOCK_PORT/v1
endpoint_uid = $(id -u)
EOF
	cat >"$s/new/probe" <<'EOF'
#kart: kind=probe timeout=60s
env | sort
exec /usr/bin/python3 -c '
import os, socket
def ask(raw):
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.environ["KART_LLM_SOCKET"])
    s.sendall(raw.encode())
    out = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
    return out.split(b" ")[1].decode()
body = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}"
def post(target, extra=""):
    return ask("POST %s HTTP/1.1\r\n%sContent-Type: application/json\r\n"
               "Content-Length: %d\r\n\r\n%s" % (target, extra, len(body), body))
print("good", post("/v1/chat/completions", "Host: x\r\n"))
print("own-host", post("/v1/chat/completions", "Host: evil.example\r\nAuthorization: Bearer mine\r\n"))
print("other-path", post("/admin/keys"))
print("absolute", post("http://127.0.0.1:1/v1/chat/completions"))
print("dotdot", post("/v1/../admin"))
print("encoded", post("/v1/%2e%2e/admin"))
print("chunked", ask("POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"))
print("dotdot-semi", post("/v1/..;/admin"))
print("params", post("/v1/chat/completions;jsessionid=x"))
print("slash", post("/v1%2Fchat/completions"))
print("dot", post("/v1/%2E/chat/completions"))
print("double", post("/v1/%252e%252e/admin"))
print("folded", post("/v1/chat/completions", "X-A: b\r\n Transfer-Encoding: chunked\r\n"))
print("tab-folded", post("/v1/chat/completions", "X-A: b\r\n\tTransfer-Encoding: chunked\r\n"))
print("spaced-name", post("/v1/chat/completions", "Transfer-Encoding : chunked\r\n"))
print("bare-lf", post("/v1/chat/completions", "X-A: b\nX-B: c\r\n"))
print("two-lengths", post("/v1/chat/completions", "Content-Length: 0\r\n"))
'
EOF
	printf '#kart: kind=probe timeout=1s kill_grace=0\ntest -S "$KART_LLM_SOCKET" && echo has-socket\nsleep 60\n' \
		>"$s/new/sleeper"
	: >"$MOCK_LOG"
	KART_LLM_API_KEY=$KEY drain "$s"
	assert_eq "timeout has-socket" "$(field "$s" sleeper .status) $(cat "$s/done/sleeper.stdout")" "sleeper"
	local out=$s/done/probe.stdout
	assert_eq ok "$(field "$s" probe .status)" "status ($(cat "$s/done/probe.stderr" 2>/dev/null))"
	grep -q "$KEY" "$out" && fail "the key is in the runner's environment"
	assert_eq "KART_LLM_SOCKET=/run/kart/llm.sock" "$(grep '^KART_LLM_SOCKET=' "$out")" "the socket, named"
	assert_eq "good 200|own-host 200|other-path 403|absolute 403|dotdot 403|encoded 403|chunked 411|dotdot-semi 403|params 403|slash 403|dot 403|double 403|folded 400|tab-folded 400|spaced-name 400|bare-lf 400|two-lengths 413" \
		"$(grep -E '^[a-z-]+ [0-9]+$' "$out" | paste -sd'|')" "what the forwarder answered"
	assert_eq "/v1/chat/completions true|/v1/chat/completions true" \
		"$(jq -r '"\(.path) \(.auth_ok)"' "$MOCK_LOG" | paste -sd'|')" "what reached the endpoint"
	# (Functions, not sh -c: a shell's own command line would match.)
	fwd_pids() { grep -lsa ":$MOCK_PORT/v1" /proc/[0-9]*/cmdline | xargs -r grep -lsa kart-credfwd | cut -d/ -f3; }
	no_fwd() { [ -z "$(fwd_pids)" ]; }
	wait_until 10 no_fwd || fail "a forwarder outlived its task: $(fwd_pids)"
	wait_until 10 sh -c '! ls -d /tmp/kart-credfwd.* >/dev/null 2>&1' ||
		fail "a forwarder's socket was left behind: $(ls -d /tmp/kart-credfwd.*)"
}

# The kind's credential reaches tasks of that kind only: a shell task
# with net, and a python task with net, see the general [network]
# cred_env but not KART_LLM_API_KEY.
test_shell_net_task_never_sees_llm_key() {
	llm_spool || return
	local s=$LLM_SPOOL
	printf '#!/bin/sh\n#kart: net\nenv\n' >"$s/new/shell-net"
	printf 'import os\nfor k, v in os.environ.items(): print(k + "=" + v)\n' >"$s/new/py-net.py"
	printf '#kart: net\n' | cat - "$s/new/py-net.py" >"$T_ROOT/p" && mv "$T_ROOT/p" "$s/new/py-net.py"
	printf 'hi\n' >"$s/new/llm.prompt"
	KART_LLM_API_KEY=$KEY KINDS_GENERAL_TOKEN=general drain "$s"
	local id
	for id in shell-net py-net.py; do
		assert_eq ok "$(field "$s" "$id" .status)" "$id status ($(cat "$s/done/$id.stderr" 2>/dev/null))"
		assert_eq true "$(field "$s" "$id" .sandbox.network)" "$id has network"
		grep -q '^KINDS_GENERAL_TOKEN=general$' "$s/done/$id.stdout" ||
			fail "$id: the general [network] credential should reach a net task"
		grep -q "$KEY" "$s/done/$id.stdout" && fail "$id: the llm kind's key reached it"
		grep -q '^KART_LLM_' "$s/done/$id.stdout" && fail "$id: a KART_LLM_ variable reached it"
	done
	assert_eq ok "$(field "$s" llm.prompt .status)" "the llm task, same worker, has the key"
}

# Without a network grant, an llm task is rejected, by extension or by
# kind=, saying the kind needs network; it never runs.
test_llm_without_net_grant_rejected() {
	need_python || return
	start_mock || return
	local s; s=$(mkspool)
	kind_conf "$s"
	printf 'hello\n' >"$s/new/q.prompt"
	printf '#!/bin/sh\n#kart: timeout=1m\n#kart: kind=llm\nhello\n' >"$s/new/q2"
	: >"$MOCK_LOG"
	KART_LLM_API_KEY=$KEY drain "$s"
	assert_eq rejected "$(field "$s" q.prompt .status)" "by extension: rejected"
	assert_match "kind llm, which needs network, but the policy grants no network to uid $(id -u)" \
		"$(field "$s" q.prompt .error)" "by extension: the error"
	assert_eq rejected "$(field "$s" q2 .status)" "by kind=: rejected"
	assert_match "^line 3: kind=llm needs network" "$(field "$s" q2 .error)" "by kind=: the error names the line"
	assert_eq 0 "$(wc -l <"$MOCK_LOG")" "no request was made"
}

# An unknown kind is rejected with an error naming the line; kart submit
# --kind adds the directive, and refuses a name that cannot be a kind.
test_unknown_kind_rejected() {
	local s; s=$(mkspool)
	kind_conf "$s"
	printf '#!/bin/sh\n#kart: kind=cobol\necho ran\n' >"$s/new/cobol"
	# kart submit refuses an unknown kind before it queues, in the
	# worker's words (the file copied in above is the worker's to reject).
	run_cmd -s "$s" submit --kind fortran -- echo ran
	assert_eq 1 "$RC" "submit --kind fortran: refused"
	assert_match "with the options: kind=fortran is not a kind of the policy \(known: python, llm\)" "$ERR" \
		"kart submit says why"
	assert_eq "" "$(ls "$s/new" | grep -v cobol)" "nothing queued"
	run_cmd -s "$s" submit --kind 'Bad!' -- echo ran
	assert_eq 2 "$RC" "--kind with a bad name: usage error"
	assert_match "--kind Bad!" "$ERR" "the usage error names it"
	drain "$s"
	assert_eq rejected "$(field "$s" cobol .status)" "unknown kind: rejected"
	assert_match "^line 2: kind=cobol is not a kind of the policy \(known: python, llm\)" \
		"$(field "$s" cobol .error)" "the error names the line and the known kinds"
	assert_eq "" "$(cat "$s/done/cobol.stdout" 2>/dev/null)" "it never ran"
}

# The python kind: by .py extension (no #! line), by kind= (which wins
# over a #! line) and by kart submit --kind; a #! line wins over the
# extension. Under bwrap and under backend none.
test_python_by_extension_and_kind() {
	need_bwrap || return
	need_python || return
	local s backend; s=$(mkspool)
	kind_conf "$s"
	local py='import sys, os; print(os.path.basename(sys.executable), sys.argv[0])'
	for backend in bwrap none; do
		printf '%s\n' "$py" >"$s/new/ext-$backend.py"
		printf '#!/bin/sh\n#kart: kind=python\n%s\n' "$py" >"$s/new/kind-$backend"
		printf '#!/bin/sh\necho shell $0\n' >"$s/new/sh-$backend.py"
		KART_BACKEND=$backend drain "$s"
	done
	printf '%s\n' "$py" >"$T_ROOT/plain"
	local id; id=$("$KART" -s "$s" submit --kind python "$T_ROOT/plain")
	drain "$s"
	for backend in bwrap none; do
		assert_eq "$backend" "$(field "$s" "ext-$backend.py" .sandbox.backend)" "backend $backend"
		assert_match "^python3(\.[0-9]+)? " "$(cat "$s/done/ext-$backend.py.stdout")" ".py without #! ($backend)"
		assert_match "^python3(\.[0-9]+)? " "$(cat "$s/done/kind-$backend.stdout")" "kind=python over #!/bin/sh ($backend)"
		assert_match "^shell " "$(cat "$s/done/sh-$backend.py.stdout")" "#!/bin/sh over .py ($backend)"
		assert_eq python "$(field "$s" "ext-$backend.py" .kind)" "the result's kind ($backend)"
		assert_eq python "$(field "$s" "kind-$backend" .kind)" "the result's kind, by kind= ($backend)"
		assert_eq null "$(field "$s" "sh-$backend.py" .kind)" "no kind, no field ($backend)"
	done
	assert_match "^python3(\.[0-9]+)? " "$("$KART" -s "$s" cat "$id")" "kart submit --kind python"
}

# A runner outside /usr and outside /tmp (which tasks may read anyway):
# bound at its own path under bwrap, and run under Landlock by its own
# rule, with either backend.
test_runner_outside_system_dirs() {
	need_bwrap || return
	local abi; abi=$("${KART_NATIVE:-$KART}" doctor --json 2>/dev/null | jq -r .landlock_abi)
	[[ $abi =~ ^[0-9]+$ ]] || { skip "this kernel has no Landlock ($abi)"; return; }
	local dir; dir=$(mktemp -d /var/tmp/kart-kinds.XXXXXX) || { fail "mktemp in /var/tmp"; return; }
	trap 'in_main_shell || exit; _cleanup; rm -rf "'"$dir"'"' EXIT
	chmod 755 "$dir"
	printf '#!/bin/sh\necho "runner $0"\nexec /bin/sh "$1"\n' >"$dir/run-sh"
	chmod 755 "$dir/run-sh"
	local s backend; s=$(mkspool)
	printf '[kind.mine]\nrunner = %s/run-sh\nextensions = .mine\n' "$dir" >"$s/kart.conf"
	for backend in bwrap none; do
		printf 'echo task $KART_TASK_ID\n' >"$s/new/$backend.mine"
		KART_BACKEND=$backend KART_LANDLOCK=enforce drain "$s"
		assert_eq ok "$(field "$s" "$backend.mine" .status)" "$backend: status ($(cat "$s/done/$backend.mine.stderr" 2>/dev/null))"
		assert_eq "$abi" "$(field "$s" "$backend.mine" .sandbox.landlock)" "$backend: under Landlock"
		assert_eq "runner $dir/run-sh
task $backend.mine" "$(cat "$s/done/$backend.mine.stdout" 2>/dev/null)" "$backend: the runner ran the task"
	done
	rm -rf "$dir"
}

# A runner missing on the host: the bwrap sandbox cannot be built, and
# the task is refused, never run some other way.
test_missing_runner_refused() {
	need_bwrap || return
	local s; s=$(mkspool)
	printf '[kind.ghost]\nrunner = %s/no-such-runner\nextensions = .ghost\n' "$T_ROOT" >"$s/kart.conf"
	printf 'echo ran\n' >"$s/new/t.ghost"
	drain "$s"
	assert_eq refused "$(field "$s" t.ghost .status)" "status"
	assert_eq sandbox_setup_failed "$(field "$s" t.ghost .refusal)" "refusal"
	assert_eq "" "$(cat "$s/done/t.ghost.stdout" 2>/dev/null)" "it never ran"
}

# kart doctor shows the kinds of the effective policy (credentials by
# name only); a bad [kind.*] line stops the worker, naming the line.
test_doctor_shows_kinds() {
	local s; s=$(mkspool)
	kind_conf "$s"
	local out
	out=$(KART_LLM_API_KEY=$KEY "$KART" -s "$s" doctor --json)
	assert_eq /usr/bin/python3 "$(jq -r .policy.kinds.python.runner <<<"$out")" "python runner"
	assert_eq '[".py"]' "$(jq -c .policy.kinds.python.extensions <<<"$out")" "python extensions"
	# (Under make check-valgrind the kart that runs is a copy beside a link
	# to the build's kart-llm: the same file.)
	assert_eq "$(readlink -f "$KART_BUILD/kart-llm")" \
		"$(readlink -f "$(jq -r .policy.kinds.llm.runner <<<"$out")")" "llm: the built kart-llm by default"
	assert_eq true "$(jq -r .policy.kinds.llm.net <<<"$out")" "llm needs net"
	assert_eq '["KART_LLM_API_KEY"]' "$(jq -c .policy.kinds.llm.credentials <<<"$out")" "credentials by name"
	assert_eq mock-model "$(jq -r .policy.kinds.llm.model <<<"$out")" "model"
	[[ $out == *"$KEY"* ]] && fail "kart doctor shows the key"
	assert_eq true "$(jq -r .policy.kinds.llm.runner_found <<<"$out")" "the built kart-llm is found"
	assert_eq true "$(jq -r .policy.kinds.llm.forwarder_found <<<"$out")" "the built kart-credfwd is found"
	printf '[kind.ghost]\nrunner = %s/no-such-runner\n' "$T_ROOT" >"$s/kart.conf"
	run_cmd -s "$s" doctor --json
	assert_eq 1 "$RC" "kart doctor fails with a runner that is not there"
	assert_eq false "$(jq -r .policy.kinds.ghost.runner_found <<<"$OUT")" "and says which"
	printf '[kind.ruby]\nrunner = /usr/bin/ruby\ninterpreter = yes\n' >"$s/kart.conf"
	out=$(timeout 10 "$KART" -s "$s" worker --drain 2>&1); local rc=$?
	assert_ne 0 "$rc" "a worker with a bad [kind.ruby] exits non-zero"
	assert_match "kart.conf line 3: unknown key 'interpreter' in section \[kind.ruby\]" "$out" "names the line"
}

run_tests
