#!/bin/bash
# Black-box: kart sync and kart feed. The mirror in a real SQLite database
# (checked with python3's sqlite3 module and the sqlite3 CLI) against
# `kart status --json`; idempotence; --follow, its catching up after a
# kill -9, and rows marked gone when kart gc removes results.
. "$(dirname "$0")/../lib.sh"

# The CLI waits for the follower's write transactions.
sq() { sqlite3 -cmd '.timeout 5000' "$@"; }
have_feature() { "$KART" --version | grep -q "features:.* $1\b"; }
need_sqlite() {
	have_feature sync-sqlite ||
		{ skip "kart built without SQLite (libsqlite3-dev missing when it was built)"; return 1; }
	command -v sqlite3 >/dev/null ||
		{ skip "the sqlite3 CLI is not installed (contrib/install-deps installs it)"; return 1; }
}

# submit_n SPOOL N PREFIX: N tasks; every 7th one fails with exit 3.
submit_n() {
	local i
	for ((i = 0; i < $2; i++)); do
		if ((i % 7 == 3)); then
			"$KART" -s "$1" submit --name "$3$i" -- sh -c 'exit 3' >/dev/null
		else
			"$KART" -s "$1" submit --name "$3$i" -- true >/dev/null
		fi || fail "submit $3$i"
	done
}
# run_n SPOOL N PREFIX: submit_n, then a backend none worker drains them.
run_n() {
	submit_n "$@"
	KART_BACKEND=none drain "$1"
}

# Version 3's columns, the receipt's, and ALTER TABLE's clauses to drop them.
V3_COLS="io_read_bytes io_write_bytes pids_peak psi_cpu_some_us psi_cpu_full_us psi_memory_some_us psi_memory_full_us psi_io_some_us psi_io_full_us cpu_efficiency memory_efficiency"
v3_drop() { local c; for c in $V3_COLS; do printf 'ALTER TABLE tasks DROP COLUMN %s; ' "$c"; done; }

# mirrored DB N: a spool of N finished tasks (run_n), mirrored once into
# the SQLite file DB; sets MS.
mirrored() {
	MS=$(mkspool)
	run_n "$MS" "$2" t
	"$KART" -s "$MS" sync sqlite "$1" || fail "first sync"
}

# mirror_diff SPOOL DB: the differences between `kart status --json` and
# the table's rows that are not gone (empty when they agree). DB is a
# SQLite file or a postgresql:// URL.
sel="SELECT id, state, coalesce(status, ''), coalesce(CAST(exit_code AS text), ''), coalesce(worker, ''), coalesce(result->>'id', '') FROM tasks WHERE state <> 'gone'"
table_rows() {
	case $1 in
	postgresql://*) psql -X -q -At -F $'\t' "$1" -c "$sel" ;;
	*) sq -separator $'\t' "$1" "$sel" ;;
	esac
}
mirror_diff() {
	"$KART" -s "$1" status --json >"$T_ROOT/status.json" || { echo "status failed"; return; }
	table_rows "$2" >"$T_ROOT/rows.tsv" || { echo "cannot read the table"; return; }
	python3 - "$T_ROOT/status.json" "$T_ROOT/rows.tsv" <<'PY'
import json, sys
st = {e["id"]: e for e in json.load(open(sys.argv[1]))}
rows = {}
for l in open(sys.argv[2]):
    r = l.rstrip("\n").split("\t")
    rows[r[0]] = r
out = []
for i in sorted(set(st) | set(rows)):
    s, r = st.get(i), rows.get(i)
    if not s or not r:
        out.append(f"{i}: status {'has' if s else 'lacks'} it, the table {'has' if r else 'lacks'} it")
        continue
    mine = r[2] if r[1] == "done" else r[1]
    ec = s.get("exit_code")
    want = (s["state"], s.get("worker") or "", "" if ec is None else str(ec))
    got = (mine, r[4] if r[1] == "running" else "", r[3] if r[1] == "done" else "")
    if want != got:
        out.append(f"{i}: status says {want}, the table {got}")
    if r[1] == "done" and r[5] != i:
        out.append(f"{i}: raw result JSON of another task ({r[5]})")
for l in out[:10]:
    print(l)
PY
}

# rows DB WHERE: the number of rows matching.
rows() {
	case $1 in
	postgresql://*) psql -X -q -At "$1" -c "SELECT count(*) FROM tasks WHERE $2" ;;
	*) sq "$1" "SELECT count(*) FROM tasks WHERE $2" ;;
	esac
}
rows_eq() { [ "$(rows "$1" "$2")" = "$3" ]; }

test_optional_build_and_version() {
	assert_match '^features: backend-bwrap backend-container backend-none' "$("$KART" --version | sed -n 2p)" \
		"kart --version lists features"
	have_feature sync-sqlite || skip "kart built without SQLite" || return
	# The core alone: no sqlite3 or libpq, the sync verb says why.
	# Both builds compile every object, and the test is about which
	# libraries are built in, not about the code made: every core at
	# once, and -Og (about half of -O2's compile time) with warnings
	# no errors: -Og meets other warnings than the -O2 build under test
	# (-Werror is that build's check, not this one's).
	local b=$T_ROOT/core mk
	mk=(make -s -j"$(nproc)" -C "$ROOT" B="$b" CFLAGS="-Og -Wno-error")
	"${mk[@]}" HAVE_SQLITE= HAVE_PQ= "$b/kart" "$b/kart-sync" >"$T_ROOT/core.log" 2>&1 ||
		{ fail "core-only build: $(tail -3 "$T_ROOT/core.log")"; return; }
	assert_eq "features: backend-bwrap backend-container backend-none" "$("$b/kart" --version | sed -n 2p)" \
		"core-only features"
	ldd "$b/kart" | grep -qE 'libsqlite3|libpq' && fail "core-only kart links sqlite3 or libpq"
	local s; s=$(mkspool)
	"$b/kart" -s "$s" sync sqlite "$T_ROOT/x.db" 2>"$T_ROOT/err"
	assert_eq 1 $? "sync without SQLite exits"
	assert_match 'built without SQLite' "$(cat "$T_ROOT/err")" "the reason"
	"$b/kart" submit --to postgres postgresql://127.0.0.1:1/x -- true 2>"$T_ROOT/err"
	assert_eq 1 $? "submit --to postgres without libpq exits"
	assert_match 'built without PostgreSQL' "$(cat "$T_ROOT/err")" "the reason"
	# The same build directory, the libraries found again: no object
	# kept from the build without them.
	"${mk[@]}" "$b/kart" "$b/kart-sync" >"$T_ROOT/full.log" 2>&1 ||
		{ fail "full build: $(tail -3 "$T_ROOT/full.log")"; return; }
	assert_eq "$("$KART" --version | sed -n 2p)" "$("$b/kart" --version | sed -n 2p)" \
		"features after a core-only build in the same directory"
	"$b/kart" -s "$s" sync sqlite "$T_ROOT/x.db" || fail "sync after the rebuild exited $?"
}

test_sqlite_mirror_equality() {
	need_sqlite || return
	local s db=$T_ROOT/eq.db
	s=$(mkspool)
	run_n "$s" 300 t
	submit_n "$s" 20 q # queued
	# A running task: a claim in a live-looking worker directory.
	mkdir "$s/cur/w1" && printf '#!/bin/sh\n' >"$s/cur/w1/r1"
	"$KART" -s "$s" sync sqlite "$db" || fail "kart sync exited $?"
	local d; d=$(mirror_diff "$s" "$db")
	[ -z "$d" ] || fail "mirror differs: $d"
	rows_eq "$db" "state = 'done'" 300 || fail "done rows: $(rows "$db" "state = 'done'")"
	rows_eq "$db" "status = 'failed' AND exit_code = 3" 43 || fail "failed rows"
	rows_eq "$db" "state = 'queued'" 20 || fail "queued rows"
	rows_eq "$db" "state = 'running' AND worker = 'w1'" 1 || fail "running row"
	# Paths, times, usage, the raw document.
	assert_eq "done/t0.stdout|ok|1" "$(sq "$db" "SELECT stdout_path, status, attempt FROM tasks WHERE id = 't0'")" "t0's row"
	rows_eq "$db" "state = 'done' AND (finished_at IS NULL OR duration_ms IS NULL OR json_extract(result, '\$.status') <> status)" 0 ||
		fail "done rows lack times or their JSON"
	assert_eq "3" "$(sq "$db" "SELECT max(version) FROM schema_version")" "schema version"
	assert_eq "wal" "$(sq "$db" "PRAGMA journal_mode")" "journal mode"
}

# Schema version 2: the states of scheduling and live control, with the
# time, the ids waited on and every attempt, agreeing with kart status;
# and a version 1 mirror (its four columns dropped, its version set to 1)
# migrated in place, then filled by the next pass.
test_sqlite_v2_states_and_migration() {
	need_sqlite || return
	local s db=$T_ROOT/v2.db
	s=$(mkspool)
	"$KART" -s "$s" submit --name flaky --retry-on failed --retries 1 -- sh -c 'exit 1' >/dev/null || fail "submit flaky"
	KART_BACKEND=none drain "$s"
	"$KART" -s "$s" submit --name up -- true >/dev/null || fail "submit up"
	"$KART" -s "$s" submit --name later --in 1h -- true >/dev/null || fail "submit later"
	"$KART" -s "$s" submit --name down --after up -- true >/dev/null || fail "submit down"
	"$KART" -s "$s" submit --name kept --hold -- true >/dev/null || fail "submit --hold"
	"$KART" -s "$s" sync sqlite "$db" || fail "kart sync exited $?"
	local d; d=$(mirror_diff "$s" "$db")
	[ -z "$d" ] || fail "mirror differs: $d"
	local cols="state, coalesce(not_before, '') <> '', coalesce(waiting_on, ''), coalesce(json_array_length(attempts), 0), coalesce(paused_ms, -1)"
	assert_eq "scheduled|1||0|-1" "$(sq "$db" "SELECT $cols FROM tasks WHERE id = 'later'")" "the scheduled row"
	assert_eq "waiting|0|up|0|-1" "$(sq "$db" "SELECT $cols FROM tasks WHERE id = 'down'")" "the waiting row"
	assert_eq "held|0||0|-1" "$(sq "$db" "SELECT $cols FROM tasks WHERE id = 'kept'")" "the held row"
	assert_eq "done|0||2|0" "$(sq "$db" "SELECT $cols FROM tasks WHERE id = 'flaky'")" "the retried row"
	# Back to version 1, then a pass: the columns come back, filled.
	sq "$db" "ALTER TABLE tasks DROP COLUMN not_before; ALTER TABLE tasks DROP COLUMN waiting_on;
		ALTER TABLE tasks DROP COLUMN attempts; ALTER TABLE tasks DROP COLUMN paused_ms; $(v3_drop)
		DELETE FROM schema_version; INSERT INTO schema_version VALUES (1)" || fail "cannot make a version 1 mirror"
	assert_eq "1" "$(sq "$db" "SELECT max(version) FROM schema_version")" "made version 1"
	"$KART" -s "$s" sync sqlite "$db" || fail "kart sync of a version 1 mirror exited $?"
	assert_eq "1 2 3" "$(sq "$db" "SELECT version FROM schema_version ORDER BY version" | xargs)" "migrated to 3"
	assert_eq "waiting|0|up|0|-1" "$(sq "$db" "SELECT $cols FROM tasks WHERE id = 'down'")" "the waiting row, migrated"
	assert_eq "done|0||2|0" "$(sq "$db" "SELECT $cols FROM tasks WHERE id = 'flaky'")" "the retried row, migrated"
}

# Schema version 3: the receipt's columns, as the result says them (null
# where it does); a version 2 mirror gets them, filled by the next pass.
test_sqlite_v3_receipt_and_migration() {
	need_sqlite || return
	local s db=$T_ROOT/v3.db cols row want
	s=$(mkspool)
	"$KART" -s "$s" submit --name rc --no-cwd --memory 512M -- sh -c 'dd if=/dev/zero of=$KART_OUTDIR/f bs=64k count=16 conv=fsync 2>/dev/null' >/dev/null || fail "submit rc"
	KART_BACKEND=none drain "$s"
	cols="io_read_bytes, io_write_bytes, coalesce(pids_peak, 'null'), coalesce(psi_cpu_some_us, 'null'), cpu_efficiency, memory_efficiency"
	want=$(jq -r '[.usage.io_read_bytes, .usage.io_write_bytes, (.usage.pids_peak // "null"), (.usage.psi_cpu_some_us // "null"), .efficiency.cpu, .efficiency.memory] | map(tostring) | join("|")' "$s/done/rc.json")
	assert_match '^[0-9]+\|[0-9]+\|' "$want" "the result's receipt"
	"$KART" -s "$s" sync sqlite "$db" || fail "kart sync exited $?"
	row=$(sq "$db" "SELECT $cols FROM tasks WHERE id = 'rc'")
	assert_eq "$want" "$row" "the receipt's columns"
	sq "$db" "$(v3_drop) DELETE FROM schema_version; INSERT INTO schema_version VALUES (1); INSERT INTO schema_version VALUES (2)" ||
		fail "cannot make a version 2 mirror"
	"$KART" -s "$s" sync sqlite "$db" || fail "kart sync of a version 2 mirror exited $?"
	assert_eq "1 2 3" "$(sq "$db" "SELECT version FROM schema_version ORDER BY version" | xargs)" "migrated to 3"
	assert_eq "$want" "$(sq "$db" "SELECT $cols FROM tasks WHERE id = 'rc'")" "the receipt's columns, migrated"
}

test_sqlite_idempotent() {
	need_sqlite || return
	local s db=$T_ROOT/idem.db
	s=$(mkspool)
	run_n "$s" 40 t
	submit_n "$s" 5 q
	"$KART" -s "$s" sync sqlite "$db" || fail "first sync"
	sq "$db" .dump >"$T_ROOT/dump1"
	"$KART" -s "$s" sync sqlite "$db" || fail "second sync"
	sq "$db" .dump >"$T_ROOT/dump2"
	cmp -s "$T_ROOT/dump1" "$T_ROOT/dump2" || fail "second run changed the table: $(diff "$T_ROOT/dump1" "$T_ROOT/dump2" | head -5)"
	# A fresh database gives the same rows.
	"$KART" -s "$s" sync sqlite "$T_ROOT/idem2.db" || fail "fresh sync"
	assert_eq "$(sq "$db" 'SELECT * FROM tasks ORDER BY id' | md5sum)" \
		"$(sq "$T_ROOT/idem2.db" 'SELECT * FROM tasks ORDER BY id' | md5sum)" "fresh mirror"
}

# A mirror made by a newer kart (a higher schema_version) is refused,
# untouched, never migrated backwards.
test_sqlite_newer_schema_refused() {
	need_sqlite || return
	local s db=$T_ROOT/newer.db
	mirrored "$db" 3
	s=$MS
	sq "$db" 'INSERT INTO schema_version VALUES (99)'
	sq "$db" .dump >"$T_ROOT/newer1"
	run_n "$s" 2 u
	run_cmd -s "$s" sync sqlite "$db"
	assert_eq 1 "$RC" "exit status"
	assert_match 'schema version 99 is newer than this kart' "$ERR" "message"
	sq "$db" .dump >"$T_ROOT/newer2"
	cmp -s "$T_ROOT/newer1" "$T_ROOT/newer2" || fail "the newer mirror was changed"
}

test_sqlite_gone() {
	need_sqlite || return
	local s db=$T_ROOT/gone.db
	mirrored "$db" 10
	s=$MS
	# Results written a minute ago (gc goes by the JSON's mtime), rather
	# than a second waited for.
	touch -d '1 minute ago' "$s"/done/*.json
	"$KART" -s "$s" gc --older-than 1s >/dev/null || fail "kart gc"
	submit_n "$s" 2 n
	"$KART" -s "$s" sync sqlite "$db" || fail "sync after gc"
	rows_eq "$db" "state = 'gone'" 10 || fail "gone rows: $(rows "$db" "state = 'gone'")"
	rows_eq "$db" "state = 'gone' AND status IN ('ok', 'failed') AND stdout_path IS NOT NULL" 10 || fail "gone rows keep their last values"
	rows_eq "$db" "state = 'queued'" 2 || fail "queued rows"
}

# wait_mirror SPOOL DB: until the table agrees with kart status (10 s).
mirror_ok() { [ -z "$(mirror_diff "$1" "$2")" ]; }

test_sqlite_follow_and_kill9() {
	need_sqlite || return
	local s db=$T_ROOT/follow.db fp
	s=$(mkspool)
	"$KART" -s "$s" sync sqlite "$db" --follow 2>>"$T_ROOT/follow.log" &
	fp=$!; T_PIDS+=("$fp")
	wait_until 10 test -e "$db" || fail "no database"
	submit_n "$s" 30 a
	wait_until 10 rows_eq "$db" "state = 'queued'" 30 || fail "queued tasks not mirrored: $(rows "$db" 1)"
	KART_BACKEND=none drain "$s"
	wait_until 10 mirror_ok "$s" "$db" || fail "after the run: $(mirror_diff "$s" "$db")"
	rows_eq "$db" "state = 'done'" 30 || fail "done rows"
	kill -9 "$fp"; { wait "$fp"; } 2>/dev/null
	run_n "$s" 20 b
	"$KART" -s "$s" gc --older-than 0s >/dev/null 2>&1 || true
	submit_n "$s" 5 c
	"$KART" -s "$s" sync sqlite "$db" --follow 2>>"$T_ROOT/follow.log" &
	fp=$!; T_PIDS+=("$fp")
	wait_until 10 mirror_ok "$s" "$db" || fail "no catching up: $(mirror_diff "$s" "$db")"
	# b* ran and went while nobody looked: never mirrored, never gone.
	rows_eq "$db" "state = 'gone'" 30 || fail "gone after gc: $(rows "$db" "state = 'gone'")"
	# Running and finishing while followed.
	KART_BACKEND=none drain "$s"
	wait_until 10 mirror_ok "$s" "$db" || fail "after the second run: $(mirror_diff "$s" "$db")"
	"$KART" -s "$s" gc --older-than 0s >/dev/null 2>&1 || true
	wait_until 10 rows_eq "$db" "state = 'gone'" 35 || fail "gone while following: $(rows "$db" "state = 'gone'")"
	kill -TERM "$fp"
	wait_gone 10 "$fp" || fail "follower ignored SIGTERM"
	assert_eq 0 "$RC" "follower exit on SIGTERM"
}

# More events than the kernel queues (fs.inotify.max_queued_events) while
# the follower is stopped: IN_Q_OVERFLOW, and the full pass that follows
# must find the tasks whose events were dropped.
test_sqlite_follow_overflow() {
	need_sqlite || return
	local s db=$T_ROOT/ovf.db fp max
	max=$(cat /proc/sys/fs/inotify/max_queued_events) || { fail "max_queued_events"; return; }
	s=$(mkspool)
	"$KART" -s "$s" sync sqlite "$db" --follow --verbose 2>>"$T_ROOT/ovf.log" &
	fp=$!; T_PIDS+=("$fp")
	wait_until 10 test -e "$db" || { fail "no database"; return; }
	# Its first pass is done (its watches were set before it): only then
	# can a flood of events overflow its queue.
	wait_until 20 grep -q '^kart sync: ' "$T_ROOT/ovf.log" || { fail "no first pass: $(cat "$T_ROOT/ovf.log")"; return; }
	kill -STOP "$fp"
	# Queued entries written straight into new/, each a few events.
	python3 - "$s/new" "$((max + 500))" <<'PY' || fail "making the entries"
import os, sys
for i in range(int(sys.argv[2])):
    with open(os.path.join(sys.argv[1], f"o{i}"), "w") as f:
        f.write("#!/bin/sh\ntrue\n")
PY
	kill -CONT "$fp"
	wait_until 30 rows_eq "$db" "state = 'queued'" "$((max + 500))" ||
		fail "after the overflow: $(rows "$db" "state = 'queued'") of $((max + 500)) queued rows"
	grep -q 'overflowed; rescanning' "$T_ROOT/ovf.log" || fail "no overflow seen: $(tail -3 "$T_ROOT/ovf.log")"
	kill -TERM "$fp"
	wait_gone 10 "$fp" || fail "follower ignored SIGTERM"
}

# A PostgreSQL server of the test's own, on 127.0.0.1 and a free port,
# run as the postgres user (the server refuses root). Sets PG_URL, PG_DIR.
pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }
need_pg() {
	have_feature sync-postgres ||
		{ skip "kart built without PostgreSQL (libpq-dev missing when it was built)"; return 1; }
	[ -x "$(pg_bin)/initdb" ] && command -v psql >/dev/null ||
		{ skip "no PostgreSQL server binaries (contrib/install-deps installs postgresql)"; return 1; }
	local u=postgres
	id -u "$u" >/dev/null 2>&1 || u=nobody
	[ "$(id -u)" = 0 ] || u=$(id -un)
	PG_USER=$u
}
# As root: in a mount namespace of its own with a /dev/null of its own,
# because initdb and the server need a real one and a concurrent job on
# the development host has been seen replacing the host's with a file.
pg_as() {
	if [ "$(id -u)" = 0 ]; then
		unshare -m --propagation private sh -c 'mount --bind "$0" /dev/null && exec "$@"' \
			"$PG_DIR/null" runuser -u "$PG_USER" -- "$@"
	else
		"$@"
	fi
}
pg_start() {
	need_pg || return 1
	pg_stop
	PG_DIR=$(mktemp -d /tmp/kart-pg.XXXXXX)
	chown "$PG_USER" "$PG_DIR"
	if [ "$(id -u)" = 0 ]; then
		mknod -m 666 "$PG_DIR/null" c 1 3 || { fail "mknod"; return 1; }
	fi
	PG_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	pg_as "$(pg_bin)/initdb" -D "$PG_DIR/data" -U kart -A trust -E UTF8 --no-sync >"$PG_DIR/initdb.log" 2>&1 ||
		{ fail "initdb: $(tail -3 "$PG_DIR/initdb.log")"; pg_stop; return 1; }
	pg_ctl_do start || { pg_stop; return 1; }
	PG_URL="postgresql://kart@127.0.0.1:$PG_PORT/postgres?connect_timeout=5"
}
pg_ctl_do() {
	pg_as "$(pg_bin)/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/log" -w -t 30 -m fast \
		-o "-p $PG_PORT -k $PG_DIR -c listen_addresses=127.0.0.1 -c fsync=off" "$1" >/dev/null 2>&1 ||
		{ fail "pg_ctl $1: $(tail -3 "$PG_DIR/log")"; return 1; }
}
pg_stop() {
	[ -n "${PG_DIR:-}" ] || return 0
	[ ! -e "$PG_DIR/data/postmaster.pid" ] ||
		pg_as "$(pg_bin)/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null 2>&1
	rm -rf "$PG_DIR"
	PG_DIR=
}
trap 'in_main_shell || exit; pg_stop; _cleanup' EXIT

test_postgres_mirror_idempotent_gone() {
	pg_start || return
	local s d
	s=$(mkspool)
	run_n "$s" 250 t
	submit_n "$s" 10 q
	mkdir "$s/cur/w1" && printf '#!/bin/sh\n' >"$s/cur/w1/r1"
	"$KART" -s "$s" sync postgres "$PG_URL" || fail "kart sync postgres exited $?"
	d=$(mirror_diff "$s" "$PG_URL")
	[ -z "$d" ] || fail "mirror differs: $d"
	rows_eq "$PG_URL" "state = 'done' AND finished_at IS NOT NULL AND result->>'status' = status" 250 ||
		fail "done rows"
	psql -X -At "$PG_URL" -c 'SELECT * FROM tasks ORDER BY id' >"$T_ROOT/pg1"
	"$KART" -s "$s" sync postgres "$PG_URL" || fail "second sync"
	psql -X -At "$PG_URL" -c 'SELECT * FROM tasks ORDER BY id' >"$T_ROOT/pg2"
	cmp -s "$T_ROOT/pg1" "$T_ROOT/pg2" || fail "second run changed the table"
	touch -d '1 minute ago' "$s"/done/*.json
	"$KART" -s "$s" gc --older-than 1s >/dev/null || fail "kart gc"
	"$KART" -s "$s" sync postgres "$PG_URL" || fail "sync after gc"
	rows_eq "$PG_URL" "state = 'gone'" 250 || fail "gone rows: $(rows "$PG_URL" "state = 'gone'")"
	assert_eq 3 "$(psql -X -At "$PG_URL" -c 'SELECT max(version) FROM schema_version')" "schema version"
	# A version 1 mirror (version 2's and 3's columns dropped) is migrated in place.
	psql -X -q "$PG_URL" -c "ALTER TABLE tasks DROP COLUMN not_before, DROP COLUMN waiting_on,
		DROP COLUMN attempts, DROP COLUMN paused_ms; $(v3_drop) DELETE FROM schema_version;
		INSERT INTO schema_version VALUES (1)" || fail "cannot make a version 1 mirror"
	"$KART" -s "$s" sync postgres "$PG_URL" || fail "sync of a version 1 mirror"
	assert_eq "1 2 3" "$(psql -X -At "$PG_URL" -c 'SELECT version FROM schema_version ORDER BY 1' | xargs)" \
		"migrated to 3"
	assert_eq 4 "$(psql -X -At "$PG_URL" -c "SELECT count(*) FROM information_schema.columns WHERE
		table_name = 'tasks' AND column_name IN ('not_before', 'waiting_on', 'attempts', 'paused_ms')")" \
		"version 2's columns"
	assert_eq 11 "$(psql -X -At "$PG_URL" -c "SELECT count(*) FROM information_schema.columns WHERE
		table_name = 'tasks' AND column_name IN ('$(echo $V3_COLS | sed "s/ /','/g")')")" \
		"version 3's columns"
	pg_stop
}

test_postgres_follow_server_restart() {
	pg_start || return
	local s fp
	s=$(mkspool)
	"$KART" -s "$s" sync postgres "$PG_URL" --follow 2>>"$T_ROOT/pgfollow.log" &
	fp=$!; T_PIDS+=("$fp")
	submit_n "$s" 20 a
	wait_until 10 rows_eq "$PG_URL" "state = 'queued'" 20 2>/dev/null || fail "queued tasks not mirrored"
	KART_BACKEND=none drain "$s"
	wait_until 10 mirror_ok "$s" "$PG_URL" || fail "after the run: $(mirror_diff "$s" "$PG_URL")"
	# The server goes away; work goes on; the server comes back.
	pg_ctl_do stop || return
	# (The connection is dead once the server restarts: the follower
	# reconnects whether or not it tried the server while it was down.)
	run_n "$s" 15 b
	submit_n "$s" 3 c
	pg_ctl_do start || return
	wait_until 20 mirror_ok "$s" "$PG_URL" 2>/dev/null || fail "no catching up: $(mirror_diff "$s" "$PG_URL")"
	grep -q reconnected "$T_ROOT/pgfollow.log" || fail "no reconnect logged: $(tail -3 "$T_ROOT/pgfollow.log")"
	# And it follows on after the reconnect.
	KART_BACKEND=none drain "$s"
	wait_until 10 mirror_ok "$s" "$PG_URL" || fail "after the reconnect: $(mirror_diff "$s" "$PG_URL")"
	rows_eq "$PG_URL" "state = 'done'" 38 || fail "done rows: $(rows "$PG_URL" "state = 'done'")"
	kill -TERM "$fp"
	wait_gone 10 "$fp" || fail "follower ignored SIGTERM"
	pg_stop
}

q() { psql -X -q -At "$PG_URL" -c "$1"; }
# q_ge N SQL: the query's number is at least N (for wait_until).
q_ge() { [ "$(q "$2" 2>/dev/null)" -ge "$1" ] 2>/dev/null; }
test_postgres_feed_two_hosts() {
	pg_start || return
	local a b fa fb wa wb
	a=$(mkspool) b=$(mkspool)
	KART_BACKEND=none start_worker "$a" --id wa; wa=$WPID
	KART_BACKEND=none start_worker "$b" --id wb; wb=$WPID
	"$KART" -s "$a" feed postgres "$PG_URL" --id A --slots 3 --lease 2 2>>"$T_ROOT/feedA.log" &
	fa=$!; T_PIDS+=("$fa")
	wait_until 10 q "SELECT 1 FROM queue LIMIT 0" 2>/dev/null || { fail "no queue table"; return; }
	q "INSERT INTO queue (name, body) SELECT 'job' || g,
	   convert_to(E'#!/bin/sh\nsleep 0.3\necho job ' || g || E'\n', 'UTF8') FROM generate_series(1, 40) g" ||
		fail "insert"
	"$KART" -s "$b" feed postgres "$PG_URL" --id B --slots 3 --lease 2 2>>"$T_ROOT/feedB.log" &
	fb=$!; T_PIDS+=("$fb")
	# The most rows one feeder holds at once, sampled all along: never
	# more than its slots.
	(while :; do
		q "SELECT coalesce(max(c), 0) FROM (SELECT count(*) c FROM queue
		   WHERE state = 'claimed' GROUP BY host) x" 2>/dev/null
		sleep 0.05
	done >"$T_ROOT/held") &
	local sampler=$!; T_PIDS+=("$sampler")
	# Host B dies once it has finished some and holds some.
	wait_until 20 q_ge 2 "SELECT count(*) FROM queue WHERE host = 'B' AND state = 'done'" ||
		fail "B finished nothing: $(tail -3 "$T_ROOT/feedB.log"; tail -3 "$b.worker.log")"
	kill -9 "$wb"
	sleep 1 # its feeder reports what finished before the host went
	kill -9 "$fb"
	{ wait "$wb" "$fb"; } 2>/dev/null
	local held; held=$(q "SELECT count(*) FROM queue WHERE host = 'B' AND state = 'claimed'")
	[ "$held" -ge 1 ] || fail "B held no rows when it died"
	wait_until 60 q_ge 40 "SELECT count(*) FROM queue WHERE state = 'done'" ||
		fail "not all done: $(q "SELECT state, host, count(*) FROM queue GROUP BY 1, 2")"
	kill "$sampler"; { wait "$sampler"; } 2>/dev/null
	[ "$(grep -c . "$T_ROOT/held")" -ge 10 ] || fail "too few samples of the rows held"
	assert_eq 3 "$(sort -n "$T_ROOT/held" | tail -1)" "most rows held by one feeder (--slots 3)"
	assert_eq 0 "$(q "SELECT count(*) FROM queue WHERE status IS DISTINCT FROM 'ok'")" "rows not ok"
	# Recovered: rows B held went back and ran on A, on a second attempt.
	[ "$(q "SELECT count(*) FROM queue WHERE host = 'A' AND attempts = 2")" -ge "$held" ] ||
		fail "B's rows not recovered on A: $(q "SELECT id, host, attempts FROM queue WHERE attempts > 1")"
	# Each task ran to its end exactly once, over both spools.
	local runs; runs=$(cat "$a"/done/q*.json "$b"/done/q*.json | jq -r 'select(.status == "ok") | .id' |
		sed 's/^q\([0-9]*\)\..*/\1/' | sort | uniq -c | awk '$1 != 1' | wc -l)
	assert_eq 0 "$runs" "rows run other than once"
	assert_eq 40 "$(cat "$a"/done/q*.json "$b"/done/q*.json | jq -r 'select(.status == "ok") | .id' | wc -l)" "runs"
	# The result written back is the local result document.
	assert_eq "ok" "$(q "SELECT result->>'status' FROM queue ORDER BY id LIMIT 1")" "result JSON"
	kill -TERM "$fa" "$wa"
	wait_gone 10 "$fa" || fail "feeder ignored SIGTERM"
	stop_worker "$wa"
	pg_stop
}

# kart submit --to postgres URL: a row with the name, the wanted lane and
# the options as directives in the body; no spool needed; a feeder runs it.
test_postgres_submit_to() {
	pg_start || return
	local a fa wa r1 r2 r3 r4 r5
	r1=$(env -u KART_SPOOL "$KART" submit --to postgres "$PG_URL" --name hello --timeout 30 --lane batch \
		-- sh -c 'echo hi from the queue') || { fail "submit --to postgres exited $?"; return; }
	assert_match '^[0-9]+$' "$r1" "prints the row id"
	assert_eq "hello|batch|queued" "$(q "SELECT name, lane, state FROM queue WHERE id = $r1")" "the row"
	assert_match '#kart: timeout=30 lane=batch' "$(q "SELECT convert_from(body, 'UTF8') FROM queue WHERE id = $r1")" \
		"directives in the body"
	r2=$(printf '#!/bin/sh\necho from stdin\n' | env -u KART_SPOOL "$KART" submit --to "$PG_URL" --name piped -) ||
		fail "submit --to URL - exited $?"
	assert_eq "#!/bin/sh
echo from stdin" "$(q "SELECT convert_from(body, 'UTF8') FROM queue WHERE id = $r2")" "the body from stdin, as bytes"
	# A plain INSERT's wanted lane; a lane= in the body still wins.
	r4=$(q "INSERT INTO queue (name, body, lane) VALUES ('lanecol', convert_to(E'#!/bin/sh\ntrue\n', 'UTF8'), 'batch') RETURNING id")
	r5=$(q "INSERT INTO queue (name, body, lane) VALUES ('laneboth', convert_to(E'#!/bin/sh\n#kart: lane=fast\ntrue\n', 'UTF8'), 'batch') RETURNING id")
	env -u KART_SPOOL "$KART" submit --to postgres 2>"$T_ROOT/err" -- true
	assert_eq 2 $? "--to postgres without a URL"
	"$KART" submit --to mysql://x -- true 2>/dev/null
	assert_eq 2 $? "--to another database"
	r3=$("$KART" submit --to postgres "postgresql://kart@127.0.0.1:1/postgres?connect_timeout=2" -- true 2>"$T_ROOT/err3")
	assert_eq 1 $? "no server"
	assert_match '^kart submit: connect' "$(cat "$T_ROOT/err3")" "the reason"
	[ -z "$r3" ] || fail "printed an id without a server: $r3"
	a=$(mkspool)
	KART_BACKEND=none start_worker "$a" --id wa; wa=$WPID
	"$KART" -s "$a" feed postgres "$PG_URL" --id A --slots 2 2>>"$T_ROOT/feedS.log" &
	fa=$!; T_PIDS+=("$fa")
	wait_until 20 q_ge 4 "SELECT count(*) FROM queue WHERE state = 'done' AND status = 'ok'" ||
		fail "not run: $(q "SELECT id, state, status FROM queue")"
	assert_eq "hi from the queue" "$(cat "$a/done/q$r1.1.stdout")" "the task's output"
	assert_eq "30 batch" "$(jq -r '"\(.limits.timeout_s) \(.lane)"' "$a/done/q$r1.1.json")" "its directives"
	assert_eq "batch" "$(jq -r .lane "$a/done/q$r4.1.json")" "the row's lane"
	assert_eq "fast" "$(jq -r .lane "$a/done/q$r5.1.json")" "the body's lane over the row's"
	kill -TERM "$fa"
	wait_gone 10 "$fa" || fail "feeder ignored SIGTERM"
	stop_worker "$wa"
	pg_stop
}

test_postgres_feed_server_restart() {
	pg_start || return
	local a fa wa
	a=$(mkspool)
	KART_BACKEND=none start_worker "$a" --id wa; wa=$WPID
	"$KART" -s "$a" feed postgres "$PG_URL" --id A --slots 2 --lease 10 2>>"$T_ROOT/feedR.log" &
	fa=$!; T_PIDS+=("$fa")
	wait_until 10 q "SELECT 1 FROM queue LIMIT 0" 2>/dev/null || { fail "no queue table"; return; }
	q "INSERT INTO queue (name, body) SELECT 'j' || g,
	   convert_to(E'#!/bin/sh\nsleep 0.4\n', 'UTF8') FROM generate_series(1, 6) g" || fail "insert"
	wait_until 10 q_ge 1 "SELECT count(*) FROM queue WHERE state = 'claimed'" || fail "nothing claimed"
	pg_ctl_do stop || return
	# Results land meanwhile: until every task handed to the spool has
	# its result (each takes 0.4 s; no more are claimed while the
	# server is down).
	spool_idle() { [ -z "$(find "$1/new" "$1/cur" -mindepth 1 -type f ! -name '.*' ! -path '*/.*')" ]; }
	wait_until 10 spool_idle "$a" || fail "tasks still queued or running: $(find "$a/new" "$a/cur" -type f ! -name '.*')"
	pg_ctl_do start || return
	wait_until 30 q_ge 6 "SELECT count(*) FROM queue WHERE state = 'done' AND status = 'ok'" ||
		fail "not all done after the restart: $(q "SELECT state, count(*) FROM queue GROUP BY 1")"
	assert_eq 6 "$(find "$a/done" -name 'q*.json' | wc -l)" "local runs"
	kill -TERM "$fa"
	wait_gone 10 "$fa" || fail "feeder ignored SIGTERM"
	stop_worker "$wa"
	pg_stop
}

run_tests
