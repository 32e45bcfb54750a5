/* sync_pg.c - the PostgreSQL backend of kart sync (libpq). */
#define _GNU_SOURCE
#include "sync.h"

#include "util.h"

#ifndef HAVE_PQ
struct sync_db *sync_pg_open(const char *url, char *err, size_t errlen)
{
	(void)url;
	snprintf(err, errlen, "built without PostgreSQL (install libpq-dev and rebuild)");
	return NULL;
}
#else
#include <libpq-fe.h>

/* Rows of a full scan go in multi-row upserts of this many. */
enum { PG_BATCH = 200 };

struct pg {
	struct sync_db db;
	PGconn *c;
	struct sync_row buf[PG_BATCH];
	int nbuf;
	bool prepared[PG_BATCH + 1]; /* scanN statements made */
};

static char *pg_upsert_sql(int rows, bool seen);

static int pg_fail(struct pg *p, const char *what, PGresult *res)
{
	const char *m = res ? PQresultErrorMessage(res) : "";
	if (!m || !*m)
		m = PQerrorMessage(p->c);
	snprintf(p->db.err, sizeof p->db.err, "postgres: %s: %.*s", what,
		 (int)strcspn(m, "\n"), m);
	if (res)
		PQclear(res);
	return -1;
}

static int pg_check(struct pg *p, PGresult *res, const char *what)
{
	ExecStatusType st = PQresultStatus(res);
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
		return pg_fail(p, what, res);
	PQclear(res);
	return 0;
}

static int pg_exec(struct pg *p, const char *sql)
{
	return pg_check(p, PQexec(p->c, sql), sql);
}

/* The rows buffered by a full scan, in one statement that also records
 * their ids in the session's `seen` table. */
static int pg_flush(struct pg *p)
{
	if (!p->nbuf)
		return 0;
	const char *vals[PG_BATCH * ARRAY_SIZE(((struct sync_row *)0)->v)];
	size_t k = 0;
	for (int i = 0; i < p->nbuf; i++)
		for (size_t j = 0; j < sync_ncols; j++)
			vals[k++] = p->buf[i].v[j];
	char name[32];
	snprintf(name, sizeof name, "scan%d", p->nbuf);
	if (!p->prepared[p->nbuf]) {
		/* First batch of this size on this connection. */
		_cleanup_free_ char *sql = pg_upsert_sql(p->nbuf, true);
		if (pg_check(p, PQprepare(p->c, name, sql, 0, NULL), "prepare") < 0)
			return -1;
		p->prepared[p->nbuf] = true;
	}
	PGresult *res = PQexecPrepared(p->c, name, (int)k, vals, NULL, NULL, 0);
	for (int i = 0; i < p->nbuf; i++)
		sync_row_clear(&p->buf[i]);
	p->nbuf = 0;
	return pg_check(p, res, "upsert");
}

static const char *pg_type(enum sync_type t)
{
	switch (t) {
	case COL_INT: return "bigint";
	case COL_REAL: return "double precision";
	case COL_JSON: return "jsonb";
	default: return "text";
	}
}

static char *append(char *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *append(char *s, const char *fmt, ...)
{
	va_list ap;
	char *t = NULL;
	va_start(ap, fmt);
	if (vasprintf(&t, fmt, ap) < 0)
		abort();
	va_end(ap);
	char *r = xasprintf("%s%s", s ? s : "", t);
	free(s);
	free(t);
	return r;
}

/* INSERT ... VALUES (row), (row) ... ON CONFLICT (id) DO UPDATE; with
 * `seen`, a CTE that also notes the ids. Parameters are typed by cast. */
static char *pg_upsert_sql(int rows, bool seen)
{
	char *cols = NULL, *set = NULL, *vals = NULL;
	for (size_t i = 0; i < sync_ncols; i++) {
		cols = append(cols, "%s%s", i ? ", " : "", sync_cols[i].name);
		if (i)
			set = append(set, "%s%s = excluded.%s", i > 1 ? ", " : "", sync_cols[i].name,
				     sync_cols[i].name);
	}
	for (int r = 0, n = 1; r < rows; r++) {
		vals = append(vals, "%s(", r ? ", " : "");
		for (size_t i = 0; i < sync_ncols; i++)
			vals = append(vals, "%s$%d::%s", i ? ", " : "", n++, pg_type(sync_cols[i].type));
		vals = append(vals, ")");
	}
	char *sql = seen ? xasprintf("WITH v (%s) AS (VALUES %s), s AS (INSERT INTO seen "
				     "SELECT id FROM v ON CONFLICT DO NOTHING) INSERT INTO tasks "
				     "SELECT * FROM v ON CONFLICT (id) DO UPDATE SET %s",
				     cols, vals, set)
			 : xasprintf("INSERT INTO tasks (%s) VALUES %s ON CONFLICT (id) DO UPDATE SET %s",
				     cols, vals, set);
	free(cols), free(set), free(vals);
	return sql;
}

static int pg_begin(struct sync_db *db) { return pg_exec((struct pg *)db, "BEGIN"); }

static int pg_commit(struct sync_db *db)
{
	struct pg *p = (struct pg *)db;
	if (pg_flush(p) < 0) {
		(void)pg_exec(p, "ROLLBACK");
		return -1;
	}
	return pg_exec(p, "COMMIT");
}

static int pg_upsert(struct sync_db *db, const struct sync_row *r, bool scan)
{
	struct pg *p = (struct pg *)db;
	if (!scan) {
		if (pg_flush(p) < 0)
			return -1;
		const char *vals[ARRAY_SIZE(((struct sync_row *)0)->v)];
		for (size_t i = 0; i < sync_ncols; i++)
			vals[i] = r->v[i];
		return pg_check(p, PQexecPrepared(p->c, "upsert", (int)sync_ncols, vals, NULL, NULL, 0),
				"upsert");
	}
	/* One statement cannot update a row twice: a later sighting of an
	 * id in the same batch replaces the earlier, as in order it would. */
	int slot = p->nbuf;
	for (int i = 0; i < p->nbuf; i++)
		if (strcmp(p->buf[i].v[0], r->v[0]) == 0)
			slot = i;
	if (slot < p->nbuf)
		sync_row_clear(&p->buf[slot]);
	else
		p->nbuf++;
	for (size_t i = 0; i < sync_ncols; i++)
		p->buf[slot].v[i] = r->v[i] ? xstrdup(r->v[i]) : NULL;
	return p->nbuf == PG_BATCH ? pg_flush(p) : 0;
}

static int pg_scan_begin(struct sync_db *db) { return pg_exec((struct pg *)db, "TRUNCATE seen"); }

static int pg_scan_end(struct sync_db *db, long *gone)
{
	struct pg *p = (struct pg *)db;
	if (pg_flush(p) < 0)
		return -1;
	PGresult *res = PQexec(p->c, "UPDATE tasks SET state = 'gone' WHERE state <> 'gone' "
				     "AND NOT EXISTS (SELECT 1 FROM seen WHERE seen.id = tasks.id)");
	if (PQresultStatus(res) == PGRES_COMMAND_OK)
		*gone = atol(PQcmdTuples(res));
	if (pg_check(p, res, "gone") < 0)
		return -1;
	return pg_exec(p, "TRUNCATE seen");
}

static int pg_gone(struct sync_db *db, const char *id)
{
	struct pg *p = (struct pg *)db;
	if (pg_flush(p) < 0)
		return -1;
	const char *v[1] = {id};
	return pg_check(p, PQexecPrepared(p->c, "gone", 1, v, NULL, NULL, 0), "gone");
}

static void pg_close(struct sync_db *db)
{
	struct pg *p = (struct pg *)db;
	for (int i = 0; i < p->nbuf; i++)
		sync_row_clear(&p->buf[i]);
	PQfinish(p->c);
	free(p);
}

static const struct sync_ops pg_ops = {
	.begin = pg_begin, .commit = pg_commit, .upsert = pg_upsert,
	.scan_begin = pg_scan_begin, .scan_end = pg_scan_end, .gone = pg_gone,
	.close = pg_close,
};

/* Create or migrate the schema; one migrator at a time (advisory lock). */
static int pg_migrate(struct pg *p)
{
	if (pg_exec(p, "BEGIN; SELECT pg_advisory_xact_lock(4242428); "
		       "CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)") < 0)
		return -1;
	PGresult *res = PQexec(p->c, "SELECT coalesce(max(version), 0) FROM schema_version");
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		return pg_fail(p, "schema_version", res);
	int v = atoi(PQgetvalue(res, 0, 0));
	PQclear(res);
	if (v > SYNC_SCHEMA_VERSION) {
		snprintf(p->db.err, sizeof p->db.err,
			 "schema version %d is newer than this kart's (%d)", v, SYNC_SCHEMA_VERSION);
		(void)pg_exec(p, "ROLLBACK");
		return -1;
	}
	if (v < 1) {
		/* A new mirror: every column of this version at once. */
		char *ddl = xstrdup("CREATE TABLE tasks (id text PRIMARY KEY");
		for (size_t i = 1; i < sync_ncols; i++)
			ddl = append(ddl, ", %s %s%s", sync_cols[i].name, pg_type(sync_cols[i].type),
				     i == 2 ? " NOT NULL" : "");
		ddl = append(ddl, "); CREATE INDEX tasks_state ON tasks (state, status);"
				  "CREATE INDEX tasks_name ON tasks (name);"
				  "CREATE INDEX tasks_finished ON tasks (finished_at);"
				  "INSERT INTO schema_version VALUES (%d)", SYNC_SCHEMA_VERSION);
		int r = pg_exec(p, ddl);
		free(ddl);
		if (r < 0)
			return -1;
		v = SYNC_SCHEMA_VERSION;
	}
	/* An older mirror: each later version's columns, added in order
	 * (version 2: not_before, waiting_on, attempts, paused_ms; version
	 * 3: the receipt's io_*, pids_peak, psi_* and *_efficiency), under
	 * the advisory lock, so two feeds never migrate twice. */
	for (; v < SYNC_SCHEMA_VERSION; v++) {
		size_t end = v + 1 < SYNC_SCHEMA_VERSION ? sync_since[v] : sync_ncols;
		char *ddl = xstrdup("");
		for (size_t i = sync_since[v - 1]; i < end; i++)
			ddl = append(ddl, "ALTER TABLE tasks ADD COLUMN %s %s; ", sync_cols[i].name,
				     pg_type(sync_cols[i].type));
		ddl = append(ddl, "INSERT INTO schema_version VALUES (%d)", v + 1);
		int r = pg_exec(p, ddl);
		free(ddl);
		if (r < 0)
			return -1;
	}
	return pg_exec(p, "COMMIT");
}

struct sync_db *sync_pg_open(const char *url, char *err, size_t errlen)
{
	struct pg *p = xcalloc(1, sizeof *p);
	p->db.ops = &pg_ops;
	p->c = PQconnectdb(url);
	_cleanup_free_ char *one = pg_upsert_sql(1, false);
	if (PQstatus(p->c) != CONNECTION_OK)
		(void)pg_fail(p, "connect", NULL);
	else if (pg_exec(p, "SET client_min_messages = warning") < 0 || pg_migrate(p) < 0 ||
		 pg_exec(p, "CREATE TEMP TABLE seen (id text PRIMARY KEY)") < 0 ||
		 pg_check(p, PQprepare(p->c, "upsert", one, 0, NULL), "prepare") < 0 ||
		 pg_check(p, PQprepare(p->c, "gone", "UPDATE tasks SET state = 'gone' "
						     "WHERE id = $1 AND state <> 'gone'", 0, NULL),
			  "prepare") < 0)
		;
	else
		return &p->db;
	snprintf(err, errlen, "%s", p->db.err);
	pg_close(&p->db);
	return NULL;
}
#endif
