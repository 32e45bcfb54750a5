/* sync_sqlite.c - the SQLite backend of kart sync: WAL, prepared
 * statements, upserts keyed by id. */
#define _GNU_SOURCE
#include "sync.h"

#include "util.h"

#ifndef HAVE_SQLITE
struct sync_db *sync_sqlite_open(const char *path, char *err, size_t errlen)
{
	(void)path;
	snprintf(err, errlen, "built without SQLite (install libsqlite3-dev and rebuild)");
	return NULL;
}
#else
#include <sqlite3.h>

struct sq {
	struct sync_db db;
	sqlite3 *h;
	sqlite3_stmt *upsert, *seen, *gone;
};

static int fail(struct sq *q, const char *what)
{
	snprintf(q->db.err, sizeof q->db.err, "sqlite: %s: %s", what, sqlite3_errmsg(q->h));
	return -1;
}

static int exec(struct sq *q, const char *sql)
{
	char *msg = NULL;
	if (sqlite3_exec(q->h, sql, NULL, NULL, &msg) != SQLITE_OK) {
		snprintf(q->db.err, sizeof q->db.err, "sqlite: %s", msg ? msg : sqlite3_errmsg(q->h));
		sqlite3_free(msg);
		return -1;
	}
	return 0;
}

static int sq_begin(struct sync_db *db) { return exec((struct sq *)db, "BEGIN IMMEDIATE"); }
static int sq_commit(struct sync_db *db) { return exec((struct sq *)db, "COMMIT"); }

static int step(struct sq *q, sqlite3_stmt *st, const char *what)
{
	int rc = sqlite3_step(st);
	(void)sqlite3_reset(st);
	(void)sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE ? 0 : fail(q, what);
}

static int sq_upsert(struct sync_db *db, const struct sync_row *r, bool scan)
{
	struct sq *q = (struct sq *)db;
	for (size_t i = 0; i < sync_ncols; i++) {
		const char *v = r->v[i];
		int idx = (int)i + 1, rc;
		if (!v)
			rc = sqlite3_bind_null(q->upsert, idx);
		else if (sync_cols[i].type == COL_INT)
			rc = sqlite3_bind_int64(q->upsert, idx, strtoll(v, NULL, 10));
		else if (sync_cols[i].type == COL_REAL)
			rc = sqlite3_bind_double(q->upsert, idx, strtod(v, NULL));
		else
			rc = sqlite3_bind_text(q->upsert, idx, v, -1, SQLITE_STATIC);
		if (rc != SQLITE_OK)
			return fail(q, "bind");
	}
	if (step(q, q->upsert, "upsert") < 0)
		return -1;
	if (!scan)
		return 0;
	if (sqlite3_bind_text(q->seen, 1, r->v[0], -1, SQLITE_STATIC) != SQLITE_OK)
		return fail(q, "bind");
	return step(q, q->seen, "seen");
}

static int sq_scan_begin(struct sync_db *db) { return exec((struct sq *)db, "DELETE FROM temp.seen"); }

static int sq_scan_end(struct sync_db *db, long *gone)
{
	struct sq *q = (struct sq *)db;
	if (exec(q, "UPDATE tasks SET state = 'gone' WHERE state <> 'gone' "
		    "AND id NOT IN (SELECT id FROM temp.seen)") < 0)
		return -1;
	*gone = sqlite3_changes(q->h);
	return exec(q, "DELETE FROM temp.seen");
}

static int sq_gone(struct sync_db *db, const char *id)
{
	struct sq *q = (struct sq *)db;
	if (sqlite3_bind_text(q->gone, 1, id, -1, SQLITE_STATIC) != SQLITE_OK)
		return fail(q, "bind");
	return step(q, q->gone, "gone");
}

static void sq_close(struct sync_db *db)
{
	struct sq *q = (struct sq *)db;
	sqlite3_finalize(q->upsert);
	sqlite3_finalize(q->seen);
	sqlite3_finalize(q->gone);
	sqlite3_close(q->h);
	free(q);
}

static const struct sync_ops sq_ops = {
	.begin = sq_begin, .commit = sq_commit, .upsert = sq_upsert,
	.scan_begin = sq_scan_begin, .scan_end = sq_scan_end, .gone = sq_gone,
	.close = sq_close,
};

static const char *sq_type(enum sync_type t)
{
	switch (t) {
	case COL_INT: return "INTEGER";
	case COL_REAL: return "REAL";
	default: return "TEXT";
	}
}

/* Create the schema, or bring an older one up to SYNC_SCHEMA_VERSION. */
static int migrate(struct sq *q)
{
	if (exec(q, "BEGIN IMMEDIATE; CREATE TABLE IF NOT EXISTS schema_version "
		    "(version INTEGER NOT NULL)") < 0)
		return -1;
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(q->h, "SELECT max(version) FROM schema_version", -1, &st, NULL) != SQLITE_OK)
		return fail(q, "schema_version");
	int v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
	sqlite3_finalize(st);
	if (v > SYNC_SCHEMA_VERSION) {
		snprintf(q->db.err, sizeof q->db.err,
			 "schema version %d is newer than this kart's (%d)", v, SYNC_SCHEMA_VERSION);
		(void)exec(q, "ROLLBACK");
		return -1;
	}
	if (v < 1) {
		/* A new mirror: every column of this version at once. */
		_cleanup_free_ char *ddl = xstrdup("CREATE TABLE tasks (id TEXT PRIMARY KEY NOT NULL");
		for (size_t i = 1; i < sync_ncols; i++) {
			char *n = xasprintf("%s, %s %s%s", ddl, sync_cols[i].name, sq_type(sync_cols[i].type),
					    i == 2 ? " NOT NULL" : "");
			free(ddl);
			ddl = n;
		}
		char *n = xasprintf("%s); CREATE INDEX tasks_state ON tasks (state, status);"
				    "CREATE INDEX tasks_name ON tasks (name);"
				    "CREATE INDEX tasks_finished ON tasks (finished_at);"
				    "INSERT INTO schema_version VALUES (%d)", ddl, SYNC_SCHEMA_VERSION);
		free(ddl);
		ddl = n;
		if (exec(q, ddl) < 0)
			return -1;
		v = SYNC_SCHEMA_VERSION;
	}
	/* An older mirror: each later version's columns, added in order
	 * (version 2: not_before, waiting_on, attempts, paused_ms; version
	 * 3: the receipt's io_*, pids_peak, psi_* and *_efficiency). */
	for (; v < SYNC_SCHEMA_VERSION; v++) {
		size_t end = v + 1 < SYNC_SCHEMA_VERSION ? sync_since[v] : sync_ncols;
		for (size_t i = sync_since[v - 1]; i < end; i++) {
			_cleanup_free_ char *alter = xasprintf("ALTER TABLE tasks ADD COLUMN %s %s",
							      sync_cols[i].name, sq_type(sync_cols[i].type));
			if (exec(q, alter) < 0)
				return -1;
		}
		_cleanup_free_ char *ins = xasprintf("INSERT INTO schema_version VALUES (%d)", v + 1);
		if (exec(q, ins) < 0)
			return -1;
	}
	return exec(q, "COMMIT");
}

static int prepare(struct sq *q)
{
	_cleanup_free_ char *cols = xstrdup(sync_cols[0].name), *qs = xstrdup("?"),
			    *set = xstrdup("");
	for (size_t i = 1; i < sync_ncols; i++) {
		char *a = xasprintf("%s, %s", cols, sync_cols[i].name);
		char *b = xasprintf("%s, ?", qs);
		char *c = xasprintf("%s%s%s = excluded.%s", set, i > 1 ? ", " : "", sync_cols[i].name,
				    sync_cols[i].name);
		free(cols), free(qs), free(set);
		cols = a, qs = b, set = c;
	}
	_cleanup_free_ char *sql = xasprintf("INSERT INTO tasks (%s) VALUES (%s) ON CONFLICT (id) "
					     "DO UPDATE SET %s",
					     cols, qs, set);
	if (sqlite3_prepare_v3(q->h, sql, -1, SQLITE_PREPARE_PERSISTENT, &q->upsert, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v3(q->h, "INSERT OR IGNORE INTO temp.seen VALUES (?)", -1,
			       SQLITE_PREPARE_PERSISTENT, &q->seen, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v3(q->h, "UPDATE tasks SET state = 'gone' WHERE id = ? AND state <> 'gone'",
			       -1, SQLITE_PREPARE_PERSISTENT, &q->gone, NULL) != SQLITE_OK)
		return fail(q, "prepare");
	return 0;
}

struct sync_db *sync_sqlite_open(const char *path, char *err, size_t errlen)
{
	struct sq *q = xcalloc(1, sizeof *q);
	q->db.ops = &sq_ops;
	int rc = sqlite3_open_v2(path, &q->h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
	if (rc != SQLITE_OK)
		(void)fail(q, path);
	/* WAL: readers go on while we write; NORMAL is durable at each
	 * checkpoint, and the mirror can always be rebuilt from the spool. */
	else if (sqlite3_busy_timeout(q->h, 10000) != SQLITE_OK ||
		 exec(q, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
			 "CREATE TEMP TABLE seen (id TEXT PRIMARY KEY)") < 0 ||
		 migrate(q) < 0 || prepare(q) < 0)
		;
	else
		return &q->db;
	snprintf(err, errlen, "%s", q->db.err);
	sq_close(&q->db);
	return NULL;
}
#endif
