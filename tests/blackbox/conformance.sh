# Conformance: the protocol of spool-layout/README.md, checked through
# every client kart ships (kart submit, contrib/clients/kart_submit.py,
# kart-submit.sh, kart_submit.mjs). Each scenario is written once against
# the adapters of tests/conformance/clients.sh and run for each client.
#
# The same-name race fails on a printed id that is not the result's id,
# and on a wait by that id that returns another submission's result.
# KART_CONFORMANCE_LONG=1: the race at 8 processes x 25 submits, for each
# client alone (tests/torture/ids.sh, in make torture).
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/conformance/clients.sh"

export KART_BACKEND=none KART_LANDLOCK=off

# A task that prints TOKEN.
token_task() { printf '#!/bin/sh\necho "%s"\n' "$1"; }

# stdout_of SPOOL JSON: the stdout of the result whose JSON is given.
stdout_of() {
	local p; p=$(jq -r '.stdout.path // empty' <<<"$2" 2>/dev/null)
	[ -n "$p" ] && cat "$1/$p"
}

# Names with spaces, '#', '%' and non-ASCII: the first submit's id is the
# name, the second's NAME.2, and both results keep the name.
test_unicode_and_spaced_names() {
	local c s name ids=()
	s=$(mkspool)
	for c in $(conf_clients); do
		name="$c é ü 名 a b#%41 x"
		ids+=("$(token_task "$c one" | c_submit "$c" "$s" "$name")") || fail "$c: first submit"
		ids+=("$(token_task "$c two" | c_submit "$c" "$s" "$name")") || fail "$c: second submit"
		c_submit "$c" "$s" ".dot" </dev/null >/dev/null 2>&1 && fail "$c: took a name starting with '.'"
		c_submit "$c" "$s" "a/b" </dev/null >/dev/null 2>&1 && fail "$c: took a name with '/'"
	done
	drain "$s"
	local i=0 id1 id2
	for c in $(conf_clients); do
		name="$c é ü 名 a b#%41 x" id1=${ids[i]} id2=${ids[i + 1]}
		i=$((i + 2))
		assert_eq "$name" "$id1" "$c: first id"
		assert_eq "$name.2" "$id2" "$c: second id"
		assert_eq "ok ok" "$(field "$s" "$id1" .status 2>/dev/null) $(field "$s" "$id2" .status 2>/dev/null)" \
			"$c: statuses ($(jq -r .error "$s/done/$id2.json" 2>/dev/null))"
		assert_eq "$name|$name" "$(field "$s" "$id1" .name 2>/dev/null)|$(field "$s" "$id2" .name 2>/dev/null)" "$c: names kept"
		assert_eq "$c one $c two" "$(cat "$s/done/$id1.stdout" 2>/dev/null) $(cat "$s/done/$id2.stdout" 2>/dev/null)" "$c: each ran its own"
	done
}

# Every place a task can be takes its id (spool-layout README §5 step
# 2): a held task (new/.held.ID) and the earlier attempts of a retry
# (done/ID.attempts/, left by a crashed retry) too; a client that looked
# only at new/ID, cur/ and done/ID.task/.json printed an id another task
# would finish under.
test_every_taken_place() {
	local c s id
	s=$(mkspool)
	for c in $(conf_clients); do
		# A copied-in task, held: no reservation speaks for it.
		token_task held >"$s/new/.held.held-$c"
		mkdir "$s/done/retried-$c.attempts"
		id=$(token_task two | c_submit "$c" "$s" "held-$c") || fail "$c: submit beside a held task"
		assert_eq "held-$c.2" "$id" "$c: the id beside a held task"
		id=$(token_task two | c_submit "$c" "$s" "retried-$c") || fail "$c: submit beside a retry"
		assert_eq "retried-$c.2" "$id" "$c: the id beside a retry's attempts"
	done
}

# A bad directive is never run: refused at submit (kart submit parses the
# header) or rejected with an error that names the line.
test_bad_directives() {
	local c s id body n ids=()
	local bodies=('#kart: colour=blue' '#kart: name=a%zzb' '#kart: timeout=bogus' '#kart: lane=batch name')
	s=$(mkspool)
	for c in $(conf_clients); do
		for n in 0 1 2 3; do
			body=${bodies[n]}
			if ! id=$(printf '%s\necho ran\n' "$body" | c_submit "$c" "$s" "bad-$c-$n" 2>/dev/null); then
				[ "$c" = kart ] || fail "$c: refused '$body' at submit, which only kart submit does"
				continue
			fi
			[ "$c" = kart ] && fail "kart submit took '$body'"
			ids+=("$c|$body|$id")
		done
	done
	drain "$s"
	local e
	for e in "${ids[@]}"; do
		c=${e%%|*} id=${e##*|} body=${e#*|} body=${body%|*}
		assert_eq rejected "$(field "$s" "$id" .status 2>/dev/null)" "$c: status of '$body'"
		assert_match "^line 1: " "$(field "$s" "$id" .error 2>/dev/null)" "$c: error of '$body'"
		[ -e "$s/done/$id.stdout" ] && fail "$c: '$body' ran"
	done
	[ ${#ids[@]} -ge 3 ] || fail "only ${#ids[@]} bad tasks queued by the clients"
	assert_match "name= " "$(jq -r .error "$s/done/bad-python-0.json" 2>/dev/null)" "the known directives, name= among them"
}

# A writer that takes its time: the client publishes only what is whole.
test_slow_writer() {
	local c s pids=()
	s=$(mkspool)
	start_worker "$s"
	for c in $(conf_clients); do
		{ { printf '#!/bin/sh\necho start\n'; sleep 1; printf 'echo whole\n'; } | c_submit "$c" "$s" "slow-$c" >/dev/null ||
			fail "$c: submit"; } &
		pids+=($!)
	done
	for c in "${pids[@]}"; do wait_gone 60 "$c"; done
	for c in $(conf_clients); do
		wait_until 30 test -e "$s/done/slow-$c.json" || fail "$c: no result"
		assert_eq "start
whole" "$(cat "$s/done/slow-$c.stdout" 2>/dev/null)" "$c: ran whole"
	done
	stop_worker "$WPID"
}

# wait and status in each state: queued, running, finished, the
# mid-finish state (claim in cur/ beside the result), unknown.
test_wait_and_status_each_state() {
	local c s id gate res w
	for c in $(conf_clients); do
		s=$(mkspool)
		gate=$T_ROOT/gate.$c
		id=$(printf '#!/bin/sh\nwhile [ ! -e %s ]; do sleep 0.05; done\necho "gated %s"\n' "$gate" "$c" |
			c_submit "$c" "$s" "gated") || fail "$c: submit"
		assert_eq queued "$(c_status "$c" "$s" "$id")" "$c: status, queued"
		c_wait "$c" "$s" "$id" 0.5 >/dev/null && fail "$c: wait returned while queued"
		start_worker "$s" --id "w-$c"
		w=$WPID
		wait_until 20 test -e "$s/cur/w-$c/$id" || fail "$c: never claimed"
		assert_eq running "$(c_status "$c" "$s" "$id")" "$c: status, running"
		c_wait "$c" "$s" "$id" 0.5 >/dev/null && fail "$c: wait returned while running"
		touch "$gate"
		res=$(c_wait "$c" "$s" "$id" 30) || fail "$c: wait after the gate opened"
		assert_eq "$id ok" "$(jq -r '"\(.id) \(.status)"' <<<"$res" 2>/dev/null)" "$c: wait's result"
		assert_eq "gated $c" "$(stdout_of "$s" "$res")" "$c: wait's result is its own task's"
		assert_eq ok "$(c_status "$c" "$s" "$id")" "$c: status, finished"
		stop_worker "$w"
		# The mid-finish state: the claim still in cur/, the JSON in done/.
		mkdir -p "$s/cur/wz"
		cp "$s/done/$id.task" "$s/cur/wz/$id"
		assert_eq ok "$(c_status "$c" "$s" "$id")" "$c: status, mid-finish"
		assert_eq "$id" "$(c_wait "$c" "$s" "$id" 5 | jq -r .id 2>/dev/null)" "$c: wait, mid-finish"
		assert_eq unknown "$(c_status "$c" "$s" "no-such-$c")" "$c: status, unknown"
	done
}

# race CLIENTS PROCS PER: PROCS processes of each of CLIENTS submit PER
# tasks each, all of one name ("dup two"), at once, on one fresh spool
# with two workers; each task prints its own token. Then, per client:
# every submission has exactly one result; the id each printed is the id
# of its own result (the id is reserved before the task is published,
# spool-layout README §5); and a wait by that id, the client's
# own for a few and done/ID.json for all, returns that task's result.
# Prints one line of figures per client; RACE_WRONG gets the total wrong.
race() {
	local clients=$1 procs=$2 per=$3 c s p i tok pred res got pids=()
	s=$(mkspool)
	start_worker "$s" --id w0
	local w0=$WPID
	start_worker "$s" --id w1
	local w1=$WPID
	local log=$T_ROOT/race.$$.$RANDOM
	for c in $clients; do
		for ((p = 0; p < procs; p++)); do
			(
				for ((i = 0; i < per; i++)); do
					tok="$c.$p.$i"
					pred=$(token_task "$tok" | c_submit "$c" "$s" "dup two") || pred=FAILED
					echo "$tok $pred" >"$log.$c.$p.$i"
				done
			) &
			pids+=($!)
		done
	done
	# Each process makes PER submits in turn: the bound grows with PER.
	for p in "${pids[@]}"; do wait_gone $((60 + 40 * per)) "$p" || fail "a submitter hangs"; done
	cat "$log".* >"$log"
	local n=$((procs * per * $(wc -w <<<"$clients")))
	assert_eq "$n" "$(grep -vc ' FAILED$' "$log")" "submits that printed an id"
	conf_results() { [ "$(find "$s/done" -name 'dup two*.json' | wc -l)" -ge "$n" ]; }
	wait_until 120 conf_results || fail "only $(find "$s/done" -name 'dup two*.json' | wc -l) of $n results"
	stop_worker "$w0"
	stop_worker "$w1"
	# Exactly one result per submission: each token printed once.
	assert_eq "$n" "$(find "$s/done" -name 'dup two*.json' | wc -l)" "results"
	assert_eq "$n" "$(cat "$s"/done/dup\ two*.stdout | sort -u | wc -l)" "distinct tokens in the results"
	assert_eq "" "$(cat "$s"/done/dup\ two*.stdout | sort | uniq -d)" "tokens with two results"
	# Every reservation went with its result.
	assert_eq "" "$(ls -A "$s/ids")" "reservations left in ids/"
	# token -> the id of its result, for every submission at once.
	local map=$log.map
	grep -H . "$s"/done/dup\ two*.stdout | sed 's|^.*/\(dup two[^/]*\)\.stdout:\(.*\)$|\2 \1|' >"$map"
	RACE_WRONG=0
	for c in $clients; do
		local wrong_id=0 wrong_wait=0 subs=0 k=0
		while read -r tok pred; do
			[ "$pred" = FAILED ] && continue
			subs=$((subs + 1))
			got=$(grep -m1 "^$tok " "$map" | cut -d' ' -f2-)
			[ "$got" = "$pred" ] || wrong_id=$((wrong_id + 1))
			# The client's own wait, for a few (each is a process).
			if [ $((k++)) -lt 2 ]; then
				res=$(c_wait "$c" "$s" "$pred" 10)
				assert_eq "$tok" "$(stdout_of "$s" "$res")" "$c: wait $pred returns its own task's result"
			fi
			# A wait by the printed id returns done/PRED.json: its token.
			[ "$(grep -m1 " $pred\$" "$map" | cut -d' ' -f1)" = "$tok" ] || wrong_wait=$((wrong_wait + 1))
		done < <(grep "^$c\." "$log")
		echo "    same-name race ($c$([ "$clients" = "$c" ] && echo " alone")): $procs x $per submits ($subs with an id), $wrong_id printed ids not the result's, $wrong_wait waits by id returned another submission's result" >&2
		assert_eq 0 "$wrong_id" "$c: printed ids that are not the result's"
		assert_eq 0 "$wrong_wait" "$c: waits that returned another submission's result"
		RACE_WRONG=$((RACE_WRONG + wrong_id + wrong_wait))
	done
}

# Several processes of every client submit one name at once, against two
# workers: each printed id is its own result's. KART_CONFORMANCE_LONG=1
# (make torture, tests/torture/ids.sh): each client alone, 8 processes x
# 25 submits.
test_same_name_race() {
	if [ "${KART_CONFORMANCE_LONG:-0}" = 1 ]; then
		local c
		for c in $(conf_clients); do race "$c" 8 25; done
	else
		race "$(conf_clients)" 3 3
	fi
}

# The module interfaces of the Python and Node clients, against a worker:
# a str or bytes body, result() before and after, wait() with a timeout.
test_python_module_api() {
	local s out; s=$(mkspool)
	start_worker "$s"
	out=$(PYTHONPATH=$ROOT/contrib/clients timeout 60 python3 - "$s" <<'EOF' 2>&1
import sys
from kart_submit import Spool, submit
s = Spool(sys.argv[1])
a = s.submit("#!/bin/sh\necho from str é\n", "py str")
b = s.submit(b"echo from bytes\n", "py str")
c = submit(sys.argv[1], "sleep 30\n", "py slow")
try:
    s.submit(12, "x")
    print("no TypeError for an int body")
except TypeError:
    pass
assert s.result("py nothing") is None
try:
    s.wait(c, timeout=0.5)
    print("wait did not time out")
except TimeoutError:
    pass
ra, rb = s.wait(a, 30), s.wait(b, 30)
print(a, "|", b, "|", ra["status"], rb["status"], rb["name"], "|", s.status(a), s.result(b)["id"])
EOF
)
	assert_eq "py str | py str.2 | ok ok py str | ok py str.2" "$out" "python module"
	assert_eq "from str é" "$(cat "$s/done/py str.stdout" 2>/dev/null)" "python: the str body, UTF-8"
	# The slow task goes first: a worker stopped with it running waits
	# out its grace (10 s) before it re-queues it.
	"$KART" -s "$s" cancel "py slow" >/dev/null 2>&1
	stop_worker "$WPID"
}

test_node_module_api() {
	command -v node >/dev/null || { skip "node is not installed (contrib/install-deps installs nodejs)"; return; }
	local s out; s=$(mkspool)
	start_worker "$s"
	out=$(cd "$ROOT/contrib/clients" && timeout 60 node --input-type=module - "$s" <<'EOF' 2>&1
import { Spool, submit } from './kart_submit.mjs';
const s = new Spool(process.argv[2]);
const a = s.submit('#!/bin/sh\necho from string é\n', 'js str');
const b = s.submit(Buffer.from('echo from buffer\n'), 'js str');
const c = submit(process.argv[2], 'sleep 30\n', 'js slow');
try { s.submit(12, 'x'); console.log('no TypeError for a number body'); } catch (e) { if (!(e instanceof TypeError)) throw e; }
if (s.result('js nothing') !== null) console.log('a result for nothing');
try { await s.wait(c, 0.5); console.log('wait did not time out'); } catch (e) { if (e.code !== 'ETIMEDOUT') throw e; }
const ra = await s.wait(a, 30), rb = await s.wait(b, 30);
console.log(`${a} | ${b} | ${ra.status} ${rb.status} ${rb.name} | ${s.status(a)} ${s.result(b).id}`);
process.exit(0);
EOF
)
	assert_eq "js str | js str.2 | ok ok js str | ok js str.2" "$out" "node module"
	assert_eq "from string é" "$(cat "$s/done/js str.stdout" 2>/dev/null)" "node: the string body, UTF-8"
	# No renameat2 in Node: it publishes by link() and unlink() (README §5), which
	# a worker must never take for a hard link.
	command -v strace >/dev/null && {
		strace -f -o "$T_ROOT/node.strace" -e trace=link,linkat,unlink,unlinkat,rename,renameat,renameat2 \
			node "$CONF_NODE" "$s" - traced </dev/null >/dev/null || fail "node client under strace"
		assert_match 'link(at)?\(.*/new/traced"\) = 0' "$(cat "$T_ROOT/node.strace")" "node: link() into new/"
		grep -q 'rename' "$T_ROOT/node.strace" && fail "node client renames (could replace a task)"
	}
	"$KART" -s "$s" cancel "js slow" >/dev/null 2>&1
	stop_worker "$WPID"
}

run_tests
