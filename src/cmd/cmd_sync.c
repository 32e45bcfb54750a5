/* kart sync - mirror the spool into SQLite or PostgreSQL. */
#define _GNU_SOURCE

#include "cmd.h"
#include "opts.h"
#include "sync.h"
#include "util.h"

static const struct opts_help help = {
	"usage: kart [-s SPOOL] sync sqlite DB [--follow] [--verbose]\n"
	"       kart [-s SPOOL] sync postgres URL [--follow] [--verbose]\n"
	"\n"
	"Mirror every task of the spool (queued, running, finished) into the table\n"
	"`tasks` of a database, one row per id, upserted; rows of tasks no longer\n"
	"in the spool (removed by kart gc) are kept with state `gone`. The schema\n"
	"is created and migrated by kart (docs/SYNC.md). Running it again gives\n"
	"the same table.\n",
	"exit status: 0; 1 if the database or the spool fails; 2 usage error\n",
};

int cmd_sync(struct ctx *c, int argc, char **argv)
{
	struct sync_opts o = {0};
	const struct opt opts[] = {
		OPT_BOOL('f', "follow", &o.follow,
			 "then keep the table current (inotify on new/, cur/, done/) until SIGINT or "
			 "SIGTERM; postgres: reconnect with backoff and rescan after a lost connection"),
		OPT_BOOL('v', "verbose", &o.verbose, "a line per full pass on stderr"),
		OPT_END(),
	};
	struct opts_rest rest;
	opts_parse("sync", argc, argv, opts, &help, 0, &rest);
	if (rest.argc != 2)
		return usage_error("sync", "give a database: sqlite DB or postgres URL");
	const char *kind = rest.argv[0];
	o.target = rest.argv[1];
	struct sync_db *(*open_db)(const char *, char *, size_t);
	if (strcmp(kind, "sqlite") == 0)
		open_db = sync_sqlite_open;
	else if (strcmp(kind, "postgres") == 0 || strcmp(kind, "postgresql") == 0)
		open_db = o.reopen = sync_pg_open;
	else
		return usage_error("sync", "'%s': not a database kind (sqlite, postgres)", kind);
	struct spool *sp = &c->sp;
	char err[512];
	struct sync_db *db = open_db(o.target, err, sizeof err);
	if (!db) {
		fprintf(stderr, "kart sync: %s\n", err);
		spool_close(sp);
		return 1;
	}
	int r = sync_run(sp, &db, &o);
	if (db)
		db->ops->close(db);
	spool_close(sp);
	return r < 0 ? 1 : 0;
}
