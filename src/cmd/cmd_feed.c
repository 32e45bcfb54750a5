/* kart feed - PostgreSQL as the queue between hosts; this host's spool is
 * the local executor. Claims rows (FOR UPDATE SKIP LOCKED) up to the free
 * slots, publishes them into new/ as kart submit does, writes each result
 * back as it lands in done/, and renews a lease on what it holds; rows
 * whose lease ran out (a dead feeder) go back to the queue. At least once:
 * see docs/SYNC.md. */
#define _GNU_SOURCE
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>

#include "cmd.h"
#include "opts.h"
#include "termsafe.h"
#include "util.h"

static const struct opts_help help = {
	"usage: kart [-s SPOOL] feed postgres URL [--slots N] [--id ID] [--lease SECONDS]\n"
	"                                         [--verbose]\n"
	"\n"
	"Take tasks from the table `queue` of a PostgreSQL database (created if\n"
	"missing; filled by kart submit, to postgres, or by a plain INSERT, see\n"
	"docs/SYNC.md), run them through this spool's workers, and write each\n"
	"result back. Runs until SIGINT or SIGTERM. Several feeders, one per\n"
	"host, may share one queue.\n",
	"exit status: 0 on SIGINT or SIGTERM; 1 on a failure; 2 usage error\n",
};

#ifndef HAVE_PQ
int cmd_feed(struct ctx *c, int argc, char **argv)
{
	(void)c;
	const struct opt opts[] = {OPT_END()};
	struct opts_rest rest;
	if (asks_help(argc, argv))
		opts_parse("feed", argc, argv, opts, &help, 0, &rest);
	fprintf(stderr, "kart feed: built without PostgreSQL (install libpq-dev and rebuild)\n");
	return 1;
}

int feed_submit(const char *url, const char *name, const char *lane, const char *task, size_t len)
{
	(void)url, (void)name, (void)lane, (void)task, (void)len;
	fprintf(stderr, "kart submit: --to postgres: built without PostgreSQL "
			"(install libpq-dev and rebuild)\n");
	return 1;
}
#else
#include <libpq-fe.h>

static const char schema[] =
	"BEGIN; SELECT pg_advisory_xact_lock(4242429);"
	"CREATE TABLE IF NOT EXISTS queue ("
	" id bigserial PRIMARY KEY,"
	" name text NOT NULL,"
	" body bytea NOT NULL,"
	" lane text,"
	" state text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'claimed', 'done')),"
	" host text, local_id text, lease_until timestamptz,"
	" attempts integer NOT NULL DEFAULT 0,"
	" submitted_at timestamptz NOT NULL DEFAULT now(),"
	" claimed_at timestamptz, finished_at timestamptz,"
	" status text, exit_code integer, result jsonb);"
	"CREATE INDEX IF NOT EXISTS queue_queued ON queue (id) WHERE state = 'queued';"
	"CREATE INDEX IF NOT EXISTS queue_claimed ON queue (host) WHERE state = 'claimed';"
	"COMMIT";

struct feed {
	struct spool sp;
	PGconn *c;
	const char *url, *me;
	char lease[32];
	int slots;
	bool verbose;
};

/* Whose messages: kart feed, or kart submit --to. */
static const char *prog = "kart feed";

static bool ok(PGresult *res, const char *what)
{
	ExecStatusType st = PQresultStatus(res);
	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
		return true;
	const char *m = PQresultErrorMessage(res);
	fprintf(stderr, "%s: %s: %.*s\n", prog, what, (int)strcspn(m, "\n"), m);
	return false;
}

/* A statement whose rows we do not need. */
static bool run(struct feed *f, const char *what, const char *sql, int n, const char *const *v)
{
	PGresult *res = PQexecParams(f->c, sql, n, NULL, v, NULL, NULL, 0);
	bool r = ok(res, what);
	PQclear(res);
	return r;
}

static bool connect_db(struct feed *f)
{
	if (f->c)
		PQfinish(f->c);
	f->c = PQconnectdb(f->url);
	if (PQstatus(f->c) != CONNECTION_OK) {
		const char *m = PQerrorMessage(f->c);
		fprintf(stderr, "%s: connect: %.*s\n", prog, (int)strcspn(m, "\n"), m);
		return false;
	}
	PGresult *res = PQexec(f->c, "SET client_min_messages = warning");
	PQclear(res);
	res = PQexec(f->c, schema);
	bool r = ok(res, "schema");
	PQclear(res);
	return r;
}

/* Our rows: results that landed go back; the count still unfinished. */
static int report(struct feed *f)
{
	const char *v[2] = {f->me};
	PGresult *res = PQexecParams(f->c, "SELECT id::text, local_id FROM queue "
					   "WHERE state = 'claimed' AND host = $1",
				     1, NULL, v, NULL, NULL, 0);
	if (!ok(res, "our rows")) {
		PQclear(res);
		return -1;
	}
	int pending = 0;
	for (int i = 0; i < PQntuples(res); i++) {
		const char *qid = PQgetvalue(res, i, 0), *lid = PQgetvalue(res, i, 1);
		char jn[512];
		_cleanup_free_ char *doc = NULL;
		size_t len;
		if (pathfmt(jn, sizeof jn, "%s.json", lid) < 0 ||
		    read_file_at(f->sp.done, jn, 1 << 20, &doc, &len) < 0) {
			if (spool_id_taken(&f->sp, lid)) {
				pending++;
				continue;
			}
			/* Claimed but never published (a crash in between, and
			 * we are that feeder restarted): back to the queue. */
			const char *u[2] = {qid, f->me};
			if (!run(f, "give back", "UPDATE queue SET state = 'queued', host = NULL, "
						 "local_id = NULL, lease_until = NULL "
						 "WHERE id = $1::bigint AND host = $2", 2, u)) {
				PQclear(res);
				return -1;
			}
			continue;
		}
		const char *u[3] = {qid, f->me, doc};
		/* Only while the row is still ours: a lease that ran out gave
		 * it to another host, whose result counts. */
		if (!run(f, "result", "UPDATE queue SET state = 'done', finished_at = now(), "
				      "result = $3::jsonb, status = $3::jsonb->>'status', "
				      "exit_code = ($3::jsonb->>'exit_code')::integer "
				      "WHERE id = $1::bigint AND host = $2 AND state = 'claimed'",
			 3, u)) {
			PQclear(res);
			return -1;
		}
		if (f->verbose)
			fprintf(stderr, "kart feed: %s (row %s) finished\n", lid, qid);
	}
	PQclear(res);
	return pending;
}

/* The row's wanted lane as a directive, right after the #! line (or
 * first), so that a lane= of the body's own, further down, still wins. */
static size_t with_lane(const char *b, size_t len, const char *lane, const char *qid, char **out)
{
	char line[64];
	int ll = 0;
	if (lane && *lane) {
		if (strlen(lane) > 32 || lane[strspn(lane, "abcdefghijklmnopqrstuvwxyz0123456789_-")]) {
			_cleanup_free_ char *sl = term_safe(lane);
			fprintf(stderr, "%s: row %s: lane '%.128s' ignored: not a lane name\n", prog, qid, sl);
		} else
			ll = snprintf(line, sizeof line, "#kart: lane=%s\n", lane);
	}
	size_t split = 0;
	if (ll && len >= 2 && b[0] == '#' && b[1] == '!') {
		const char *nl = memchr(b, '\n', len);
		split = nl ? (size_t)(nl - b) + 1 : len;
	}
	*out = xmalloc(len + (size_t)ll + 2);
	size_t o = 0;
	memcpy(*out, b, split);
	o = split;
	if (split && b[split - 1] != '\n')
		(*out)[o++] = '\n';
	memcpy(*out + o, line, (size_t)ll);
	o += (size_t)ll;
	memcpy(*out + o, b + split, len - split);
	return o + len - split;
}

/* Claim up to n queued rows and publish each into new/. The claim is
 * committed first: a crash before the publish leaves a row whose lease
 * runs out; the other order could run a task no row owns. */
static int claim(struct feed *f, int n)
{
	char lim[16];
	snprintf(lim, sizeof lim, "%d", n);
	const char *v[3] = {f->me, f->lease, lim};
	PGresult *res = PQexecParams(
		f->c,
		"UPDATE queue SET state = 'claimed', host = $1, attempts = attempts + 1, "
		"claimed_at = now(), lease_until = now() + $2::interval, "
		"local_id = 'q' || id || '.' || (attempts + 1) "
		"WHERE id IN (SELECT id FROM queue WHERE state = 'queued' ORDER BY id "
		"LIMIT $3::integer FOR UPDATE SKIP LOCKED) RETURNING id::text, local_id, body, lane",
		3, NULL, v, NULL, NULL, 1);
	if (!ok(res, "claim")) {
		PQclear(res);
		return -1;
	}
	int got = PQntuples(res);
	for (int i = 0; i < got; i++) {
		char qid[32], lid[256], id[256];
		snprintf(qid, sizeof qid, "%.*s", PQgetlength(res, i, 0), PQgetvalue(res, i, 0));
		snprintf(lid, sizeof lid, "%.*s", PQgetlength(res, i, 1), PQgetvalue(res, i, 1));
		_cleanup_free_ char *body = NULL;
		size_t blen = with_lane(PQgetvalue(res, i, 2), (size_t)PQgetlength(res, i, 2),
					PQgetisnull(res, i, 3) ? NULL : PQgetvalue(res, i, 3), qid, &body);
		int r = spool_submit(&f->sp, lid, body, blen, NULL, id, sizeof id);
		if (r < 0) {
			fprintf(stderr, "kart feed: row %s: cannot queue: %s\n", qid, strerror(-r));
			const char *u[2] = {qid, f->me};
			(void)run(f, "give back", "UPDATE queue SET state = 'queued', host = NULL, "
						  "local_id = NULL, lease_until = NULL "
						  "WHERE id = $1::bigint AND host = $2",
				  2, u);
			continue;
		}
		if (strcmp(id, lid) != 0) {
			const char *u[2] = {qid, id};
			(void)run(f, "local id", "UPDATE queue SET local_id = $2 WHERE id = $1::bigint", 2, u);
		}
		if (f->verbose)
			fprintf(stderr, "kart feed: row %s queued as %s\n", qid, id);
	}
	PQclear(res);
	return got;
}

/* One round: renew our leases, free the expired, report, claim. */
static bool round_trip(struct feed *f)
{
	const char *v[2] = {f->me, f->lease};
	if (!run(f, "renew", "UPDATE queue SET lease_until = now() + $2::interval "
			     "WHERE state = 'claimed' AND host = $1", 2, v) ||
	    !run(f, "expire", "UPDATE queue SET state = 'queued', host = NULL, local_id = NULL, "
			      "lease_until = NULL WHERE state = 'claimed' AND lease_until < now()",
		 0, NULL))
		return false;
	int pending = report(f);
	if (pending < 0)
		return false;
	if (pending < f->slots && claim(f, f->slots - pending) < 0)
		return false;
	return true;
}

/* kart submit --to postgres URL: one row, queued; the body as bytes. */
int feed_submit(const char *url, const char *name, const char *lane, const char *task, size_t len)
{
	struct feed f = {.url = url};
	prog = "kart submit";
	if (len > INT_MAX) {
		fprintf(stderr, "%s: the task is too large\n", prog);
		return 1;
	}
	if (!connect_db(&f)) {
		PQfinish(f.c);
		return 1;
	}
	const char *v[3] = {name, task, lane};
	const int lens[3] = {0, (int)len, 0}, fmts[3] = {0, 1, 0};
	PGresult *res = PQexecParams(f.c, "INSERT INTO queue (name, body, lane) "
					  "VALUES ($1, $2::bytea, $3) RETURNING id::text",
				     3, NULL, v, lens, fmts, 0);
	int rc = 1;
	if (ok(res, "queue")) {
		printf("%s\n", PQgetvalue(res, 0, 0));
		rc = 0;
	}
	PQclear(res);
	PQfinish(f.c);
	return rc;
}

int cmd_feed(struct ctx *c, int argc, char **argv)
{
	struct feed f = {.slots = (int)sysconf(_SC_NPROCESSORS_ONLN)};
	int lease_s = 30;
	char host[256] = "localhost";
	(void)gethostname(host, sizeof host - 1);
	f.me = host;
	const struct opt opts[] = {
		OPT_INT(0, "slots", &f.slots, "N", "hold at most N unfinished tasks (default: the cores)",
			1, 100000),
		OPT_STRING(0, "id", &f.me, "ID",
			   "this feeder's name in the queue (default: the host name); a feeder "
			   "restarted under its id takes back its rows"),
		OPT_INT(0, "lease", &lease_s, "SECONDS",
			"a claim lives this long without renewal (default 30); the feeder renews it "
			"every third of that", 1, 86400),
		OPT_BOOL('v', "verbose", &f.verbose, "a line per claim and result on stderr"),
		OPT_END(),
	};
	struct opts_rest rest;
	opts_parse("feed", argc, argv, opts, &help, 0, &rest);
	if (rest.argc != 2 || (strcmp(rest.argv[0], "postgres") != 0 &&
			       strcmp(rest.argv[0], "postgresql") != 0))
		return usage_error("feed", "give the queue: postgres URL");
	f.url = rest.argv[1];
	snprintf(f.lease, sizeof f.lease, "%d seconds", lease_s);
	ctx_open_spool(c, &f.sp);

	_cleanup_close_ int sfd = stop_signalfd();
	_cleanup_close_ int ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	char p[64];
	snprintf(p, sizeof p, "/proc/self/fd/%d", f.sp.done);
	if (sfd < 0 || ifd < 0 || inotify_add_watch(ifd, p, IN_MOVED_TO | IN_CREATE) < 0) {
		fprintf(stderr, "kart feed: %s\n", strerror(errno));
		spool_close(&f.sp);
		return 1;
	}
	/* Renew well inside the lease; a result wakes us at once (inotify). */
	int tick_ms = (int)(lease_s * 1000 / 3), backoff_ms = 100;
	bool up = connect_db(&f);
	for (;;) {
		if (up && !round_trip(&f))
			up = false;
		int wait_ms = tick_ms;
		if (!up) {
			wait_ms = backoff_ms;
			backoff_ms = backoff_ms * 2 > 5000 ? 5000 : backoff_ms * 2;
		}
		struct pollfd pf[2] = {{.fd = sfd, .events = POLLIN}, {.fd = ifd, .events = POLLIN}};
		if (poll(pf, 2, wait_ms) < 0 && errno != EINTR)
			break;
		if (pf[0].revents & POLLIN)
			break;
		char buf[4096];
		while (read(ifd, buf, sizeof buf) > 0)
			; /* a doorbell: the round looks at our rows itself */
		if (!up && (up = connect_db(&f)))
			backoff_ms = 100;
	}
	PQfinish(f.c);
	spool_close(&f.sp);
	return 0;
}
#endif
