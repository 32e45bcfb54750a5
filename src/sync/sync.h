/* sync.h - mirror the spool into a SQL table (kart sync). The spool stays
 * the database; the table is a copy that can always be rebuilt from it.
 * sync.c reads the spool and runs the loop; a backend (sync_sqlite.c,
 * sync_pg.c) only stores rows. The schema is in docs/SYNC.md. */
#ifndef KART_SYNC_H
#define KART_SYNC_H

#include <stdbool.h>
#include <stddef.h>

#include "spool.h"

#define SYNC_SCHEMA_VERSION 3

enum sync_type { COL_TEXT, COL_INT, COL_REAL, COL_JSON };

struct sync_col {
	const char *name;
	enum sync_type type;
};

/* The columns of table `tasks`, in order; the first is the key (id). */
extern const struct sync_col sync_cols[];
extern const size_t sync_ncols;
/* sync_since[v - 1]: the first column that schema version v + 1 added
 * (each later version's columns follow its predecessor's). */
extern const size_t sync_since[];

/* One row: each value as text (as the JSON or the spool gives it), or
 * NULL for SQL NULL. Backends convert by the column's type. */
struct sync_row {
	char *v[48];
};
void sync_row_clear(struct sync_row *r);

/* A storage backend. Each call returns 0 or -1 with a message in err;
 * after -1 the follow loop closes the connection and opens it again
 * (with backoff), then rescans everything. */
struct sync_db {
	const struct sync_ops *ops;
	char err[512];
};
struct sync_ops {
	/* A transaction. */
	int (*begin)(struct sync_db *db);
	int (*commit)(struct sync_db *db);
	/* Insert or update by id. `scan`: part of a full scan (remember the
	 * id, for scan_end). */
	int (*upsert)(struct sync_db *db, const struct sync_row *r, bool scan);
	/* A full scan: forget the ids remembered; then mark every row not
	 * remembered (and not gone yet) gone. */
	int (*scan_begin)(struct sync_db *db);
	int (*scan_end)(struct sync_db *db, long *gone);
	/* One id that is nowhere in the spool any more. */
	int (*gone)(struct sync_db *db, const char *id);
	void (*close)(struct sync_db *db);
};

/* Open (create, migrate) the mirror. NULL with a message in err. */
struct sync_db *sync_sqlite_open(const char *path, char *err, size_t errlen);
struct sync_db *sync_pg_open(const char *url, char *err, size_t errlen);

struct sync_opts {
	bool follow;
	bool verbose;
	/* Reopen the database after a failure (postgres; NULL: give up). */
	struct sync_db *(*reopen)(const char *target, char *err, size_t errlen);
	const char *target;
};

/* One full pass, then (follow) keep the table current until SIGINT or
 * SIGTERM. *dbp may be replaced on a reconnect. Returns 0 or -1 (message
 * printed). */
int sync_run(struct spool *sp, struct sync_db **dbp, const struct sync_opts *o);

#endif
