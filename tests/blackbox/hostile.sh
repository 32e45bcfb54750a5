# The hostile input battery (tests/torture/hostile.sh) as part of make
# check, with a short RENAME_EXCHANGE race; `make torture` runs 5000 rounds.
# And a hostile member of a shared spool writing everything she can
# (member_writes_everything; `make torture` runs it long).
. "$(dirname "$0")/../lib.sh"

# The accounts of member_writes_everything: kh35, after KART_TEST_USER_TAG.
U_TAG=${KART_TEST_USER_TAG:-}kh35
U_ALICE=${U_TAG}alice U_MALLORY=${U_TAG}mallory U_BOB=${U_TAG}bob G_KART=${U_TAG}kart
U_IN="$U_ALICE $U_MALLORY $U_BOB" U_OUT=

test_hostile_battery() {
	[ "$(id -u)" = 0 ] || { skip "the battery needs root (other users' files, device nodes)"; return; }
	local out
	out=$(HOSTILE_RACE=${KART_HOSTILE_RACE:-300} KART=$KART bash "$ROOT/tests/torture/hostile.sh" 2>&1) ||
		fail "$(tail -n 8 <<<"$out")"
	local last; last=$(tail -n 1 <<<"$out")
	echo "    $last"
	assert_match "^[1-9][0-9]* hostile inputs rejected with reasons, [0-9]+ race rounds, canary opened 0 times, 0 failures$" \
		"$last" "hostile summary"
}

# snapshot DIR: every entry under DIR, its type, size, mode, owner,
# inode and content hash, sorted.
snapshot() {
	(cd "$1" && find . -printf '%p %y %s %m %U %i\n' | sort && find . -type f -exec md5sum {} + | sort)
}

# Issue 35, the whole surface: while alice's tasks of every kind run
# (plain, after=, unique=, held and edited, retried), mallory writes
# every path and attribute a member can write in a shared spool with
# hostile values (tests/torture/member-attacks.py: tmp/, ids/, drop/,
# her drop directory's tasks, requests, attributes, ACLs, links, FIFOs,
# trees, floods, a deep after= chain; each file the worker made, hers and
# alice's). The check: every task of alice's ends as it should, under the
# id printed, with her output; nothing outside the spool changes; no
# worker dies; mallory changed no file the worker made, nothing ran as
# alice or root for her, and her share of tmp/ held.
#   MEMBERS_ROUNDS  alice's rounds of tasks (3; make torture: 30)
#   MEMBERS_SECONDS how long mallory attacks (25; make torture: 300)
#   MEMBERS_CHAIN   the after= chain's length (300; make torture: 20000)
test_member_writes_everything() {
	shared_spool || return
	local rounds=${MEMBERS_ROUNDS:-3} secs=${MEMBERS_SECONDS:-25} chain=${MEMBERS_CHAIN:-300}
	local out=$T_ROOT/outside i before auid muid ids=$T_ROOT/alice.ids mlog=$T_ROOT/m/attacks.json
	auid=$(id -u "$U_ALICE") muid=$(id -u "$U_MALLORY")
	# Outside the spool, what traversals aim at: root's and alice's.
	mkdir -p "$out/victim.out" && chmod 0755 "$out" && echo ORIGINAL >"$out/victim.stdout" &&
		echo keep >"$out/victim.out/k" && printf 'alice-secret\n' >"$out/secret" &&
		chown "$U_ALICE" "$out/secret" && chmod 0600 "$out/secret"
	before=$(snapshot "$out")
	mkdir -p "$T_ROOT/m" && chown "$U_MALLORY" "$T_ROOT/m"
	printf '[limits]\ndrop_max_bytes = 20M\ndrop_max_files = 2000\n' >"$S/kart.conf"
	start_worker "$S" --id w1
	local w1=$WPID
	start_worker "$S" --id w2
	local w2=$WPID
	wait_until 20 grep -q 'worker w2 on' "$S.worker.log" && wait_until 20 grep -q 'worker w1 on' "$S.worker.log" ||
		{ fail "workers did not start: $(tail -3 "$S.worker.log")"; return; }
	as "$U_ALICE" kart submit --no-cwd --name first -- true >/dev/null || fail "alice cannot submit"
	as "$U_MALLORY" python3 "$ROOT/tests/torture/member-attacks.py" "$S" "$out" "$U_ALICE" "$secs" "$chain" "$mlog" \
		>"$T_ROOT/mallory.out" 2>&1 &
	local mp=$!
	T_PIDS+=("$mp")
	: >"$ids"
	# (mallory may squat alice's next names in ids/: alice then gets the
	# next id, which is hers, and uses the id printed.)
	for ((i = 1; i <= rounds; i++)); do
		local a up
		a=$(as "$U_ALICE" kart submit --no-cwd --name "p$i" -- echo "alice-p$i") && echo "$a alice-p$i ok" >>"$ids" ||
			fail "alice's p$i"
		up=$(as "$U_ALICE" kart submit --no-cwd --name "a$i" -- sh -c "sleep 0.3; echo alice-a$i") &&
			echo "$up alice-a$i ok" >>"$ids" || fail "alice's a$i"
		a=$(as "$U_ALICE" kart submit --no-cwd --name "b$i" --after "$up" -- sh -c "cat \"\$KART_INPUTS/$up/stdout\"") &&
			echo "$a alice-a$i ok" >>"$ids" || fail "alice's b$i"
		a=$(as "$U_ALICE" kart submit --no-cwd --name "u$i" --unique="key$i" -- echo "alice-u$i") &&
			echo "$a alice-u$i ok" >>"$ids" || fail "alice's u$i"
		# Waiting for a gate, held, edited, released. (The gate lasts 8 s:
		# under mallory's load the three commands below took more than 2.)
		up=$(as "$U_ALICE" kart submit --no-cwd --name "g$i" -- sleep 8) || fail "alice's g$i"
		a=$(as "$U_ALICE" kart submit --no-cwd --name "h$i" --after "$up" -- echo "alice-h$i") || fail "alice's h$i"
		as "$U_ALICE" kart hold "$a" >/dev/null 2>&1 || fail "alice's hold of $a"
		as "$U_ALICE" kart edit --set label=edited "$a" >/dev/null 2>&1 || fail "alice's edit of $a"
		as "$U_ALICE" kart release "$a" >/dev/null 2>&1 || fail "alice's release of $a"
		echo "$a alice-h$i ok" >>"$ids"
		a=$(printf '#!/bin/sh\n#kart: retry_on=failed retries=1\n[ "$KART_ATTEMPT" = 2 ] || exit 1\necho alice-r%s\n' "$i" |
			as "$U_ALICE" kart submit --no-cwd --name "r$i" -) && echo "$a alice-r$i ok" >>"$ids" || fail "alice's r$i"
		sleep 1
	done
	wait_gone $((secs + 120)) "$mp" || fail "mallory's attacks did not end"
	local id want st got
	while read -r id want st; do
		got=$(as "$U_ALICE" sh -c "kart wait --timeout 60s '$id' >/dev/null 2>&1; kart cat '$id'" 2>&1)
		assert_eq "$st $want" "$(jq -r .status "$S/done/$id.json" 2>/dev/null) $got" "alice's $id"
		assert_eq "$auid" "$(jq -r .submitter.uid "$S/done/$id.json" 2>/dev/null)" "$id's submitter"
	done <"$ids"
	[ "$(wc -l <"$ids")" -ge $((6 * rounds)) ] || fail "alice's tasks: only $(wc -l <"$ids")"
	kill -0 "$w1" 2>/dev/null || fail "worker w1 died: $(tail -3 "$S.worker.log")"
	kill -0 "$w2" 2>/dev/null || fail "worker w2 died: $(tail -3 "$S.worker.log")"
	assert_eq "$before" "$(snapshot "$out")" "outside the spool"
	[ -s "$mlog" ] || fail "mallory's attacks left no log: $(tail -3 "$T_ROOT/mallory.out")"
	assert_eq 0 "$(jq -r .n_wrote_workers_file "$mlog" 2>/dev/null)" \
		"files of the worker's mallory changed ($(jq -c .wrote_workers_file "$mlog" 2>/dev/null))"
	# Every result's submitter, read by one jq (a thousand results: not
	# a jq and a grep each; a NUL after each, her names may hold any
	# other byte), and the outputs of the results not hers, by one grep.
	local f u rec files=("$S"/done/*.json) n=0 notm=()
	while IFS= read -r -d '' rec; do
		n=$((n + 1))
		f=${rec%$'\t'*} u=${rec##*$'\t'}
		case ${f##*/} in
		"$U_ALICE":*) [ "$u" = "$auid" ] || fail "${f##*/}: under alice's id, submitter $u" ;;
		*) [ "$u" != "$auid" ] || fail "${f##*/}: alice's as submitter, not under her id" ;;
		esac
		[ "$u" != "$muid" ] && notm+=("${f%.json}.stdout")
	done < <(jq -j 'input_filename + "\t" + (.submitter.uid | tostring) + "\u0000"' "${files[@]}")
	assert_eq "${#files[@]}" "$n" "results whose submitter was read"
	if [ "${#notm[@]}" -gt 0 ]; then
		for f in $(grep -ls PWNED "${notm[@]}"); do fail "mallory's code ran as another uid: ${f##*/}"; done
	fi
	local big
	big=$(find "$S/tmp" -maxdepth 1 -user "$U_MALLORY" -printf '%b\n' | awk '{s += $1 * 512} END {print s + 0}')
	[ "$big" -le $((20 << 20)) ] || fail "mallory holds $big bytes in tmp/, over drop_max_bytes"
	python3 - "$S.worker.log" <<'PY' || fail "raw control characters in the worker's log"
import sys
t = open(sys.argv[1], 'rb').read().decode('utf-8', 'replace')
sys.exit(1 if any((ord(c) < 0x20 and c not in '\t\n') or 0x7f <= ord(c) <= 0x9f for c in t) else 0)
PY
	echo "    mallory: $(jq -c '{rounds, tries, held}' "$mlog" 2>/dev/null); alice: $(wc -l <"$ids") tasks; chain $chain;" \
		"results $(ls "$S/done" | grep -c '\.json$')"
	[ -n "${KART_TEST_VERBOSE:-}" ] && grep -c . "$S.worker.log" | sed 's/^/    log lines: /'
	stop_worker "$w1"
	stop_worker "$w2"
}

run_tests
