#!/bin/bash
# Black-box: fairness between submitters on one spool. The next task is
# taken round-robin across submitters within a lane and a priority, so
# one user's thousands of queued tasks do not make another's wait for
# them all; [limits] slots_per_user caps one submitter's running tasks;
# a priority below 0 from a user the policy does not name is clamped to 0.
. "$(dirname "$0")/../lib.sh"

U1=kt27a U2=kt27b
_fair_cleanup() {
	userdel "$U1" 2>/dev/null
	userdel "$U2" 2>/dev/null
	_cleanup
}
trap 'in_main_shell || exit; _fair_cleanup' EXIT

have_users() {
	[ "$(id -u)" = 0 ] || { skip "needs root (tasks of two users)"; return 1; }
	for u in "$U1" "$U2"; do
		id "$u" >/dev/null 2>&1 || useradd -M -N -s /usr/sbin/nologin "$u" ||
			{ fail "cannot create user $u"; return 1; }
	done
}

# A spool the two users can reach (the worker runs their tasks as them).
user_spool() {
	local s; s=$(mkspool)
	chmod 755 "$T_ROOT" "$s"
	echo "$s"
}

# queue SPOOL USER NAME BODY: a task file owned by USER, put into new/.
queue() {
	printf '#!/bin/sh\n%s\n' "$4" >"$1/tmp/$3"
	chown "$2" "$1/tmp/$3"
	mv "$1/tmp/$3" "$1/new/$3"
}

# One user queues 3,000 trivial tasks; another's single task, queued
# once the worker is busy with them, starts within a few seconds, while
# most of the first user's are still queued. The figure is printed (and
# kept in docs/PERFORMANCE.md, "Turns between submitters").
test_one_user_does_not_starve_another() {
	have_users || return
	have_bwrap || { skip "bwrap cannot build a sandbox here"; return; }
	local s i n=3000; s=$(user_spool)
	for ((i = 1; i <= n; i++)); do printf '#!/bin/sh\ntrue\n' >"$s/tmp/a$i"; done
	chown "$U1" "$s"/tmp/a*
	mv "$s"/tmp/a* "$s/new/"
	start_worker "$s" --id w1
	wait_until 60 test -e "$s/done/a1.json" || { fail "the first task never finished"; return; }
	sleep 1
	queue "$s" "$U2" b "true"
	# A priority far below 0 from a user the policy does not name.
	queue "$s" "$U1" jump "#kart: priority=-1000000
true"
	wait_until 60 test -e "$s/done/b.json" || { fail "b never ran ($(ls "$s/done" | grep -c json) results)"; return; }
	local done_a; done_a=$(ls "$s/done" | grep -c '^a.*\.json$')
	local jumped=no; [ -e "$s/done/jump.json" ] && jumped=yes
	stop_worker "$WPID"
	local wait_ms before; wait_ms=$(field "$s" b .wait_ms)
	# How many of U1's tasks started while b waited: a count, not a
	# time, so that a loaded machine's slow spawns do not fail it. Three
	# slots, and a turn each: a few at most.
	before=$(python3 - "$s/done" <<'PY'
import datetime, glob, json, sys
ms = lambda t: datetime.datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() * 1000
b = json.load(open(sys.argv[1] + "/b.json"))
end = ms(b["started_at"])
start = end - b["wait_ms"]
print(sum(1 for f in glob.glob(sys.argv[1] + "/a*.json") if start < ms(json.load(open(f))["started_at"]) < end))
PY
)
	echo "    $U2's task waited ${wait_ms} ms behind $U1's $n queued tasks ($done_a of them done by then, $before started while it waited)"
	assert_eq ok "$(field "$s" b .status)" "b's status"
	[ "${before:-99}" -le 6 ] || fail "$before of $U1's tasks started while b waited (${wait_ms} ms): b did not get the next turn"
	[ "$done_a" -lt $((n / 2)) ] || fail "$done_a of $n tasks were done before b: the test proves nothing"
	grep -q "jump: priority=-1000000 clamped to 0" "$s.worker.log" || fail "no word of the clamped priority"
	assert_eq no "$jumped" "a clamped priority=-1000000 jumped the queue"
}

# Root (and the users and groups of priority_allow) keep a priority below
# 0: with one slot, the named user's urgent task runs before a queue of
# plain ones queued earlier.
test_priority_allow_named() {
	have_users || return
	local s; s=$(user_spool)
	printf '[limits]\npriority_allow = %s\n' "$U2" >"$s/kart.conf"
	queue "$s" "$U1" p1 "true"
	queue "$s" "$U1" p2 "true"
	queue "$s" "$U1" p3 "true"
	queue "$s" "$U2" urgent "#kart: priority=-5
true"
	queue "$s" "$U1" clamped "#kart: priority=-5
true"
	KART_BACKEND=none drain "$s" --slots 1 --batch-slots 1
	local order; order=$(jq -r '"\(.started_at) \(.id)"' "$s"/done/*.json | sort | awk '{print $2}' | tr '\n' ' ')
	assert_eq urgent "${order%% *}" "the named user's priority=-5 runs first (order: $order)"
	assert_eq "clamped " "$(echo "$order" | grep -o 'clamped $')" "the other user's priority=-5 runs in its turn, last"
}

# slots_per_user = 1: of three slots, one user holds one at a time; the
# other user's task runs beside it.
test_slots_per_user() {
	have_users || return
	local s; s=$(user_spool)
	printf '[limits]\nslots_per_user = 1\n' >"$s/kart.conf"
	local i
	for i in 1 2 3; do queue "$s" "$U1" s$i "sleep 1"; done
	queue "$s" "$U2" other "sleep 1"
	KART_BACKEND=none drain "$s" --slots 3 --batch-slots 1
	local t
	for t in s1 s2 s3 other; do assert_eq ok "$(field "$s" $t .status)" "$t: status"; done
	# U1's runs never overlap: each starts after the one before ended.
	local spans; spans=$(jq -r 'select(.id | startswith("s")) | "\(.started_at) \(.finished_at)"' "$s"/done/*.json | sort)
	local prev_end="" a b
	while read -r a b; do
		[ -z "$prev_end" ] || [[ "$a" > "$prev_end" ]] || [ "$a" = "$prev_end" ] ||
			fail "$U1 ran two tasks at once: one started $a before another ended $prev_end"
		prev_end=$b
	done <<<"$spans"
	# and the other user's task did not wait for them all.
	local ob; ob=$(field "$s" other .started_at)
	local last; last=$(jq -r 'select(.id == "s3" or .id == "s2" or .id == "s1") | .started_at' "$s"/done/*.json | sort | tail -1)
	[[ "$ob" < "$last" ]] || fail "$U2's task started at $ob, after all of $U1's ($last)"
}

run_tests
