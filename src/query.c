/* query.c - see query.h. */
#define _GNU_SOURCE
#include "query.h"

#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>

#include "util.h"

/* When an entry got where it is: a rename into new/ or cur/ sets ctime;
 * a result's JSON is written just before its rename into done/. */
static int64_t stat_ms(int dirfd, const char *name, bool ctime)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	const struct timespec *ts = ctime ? &st.st_ctim : &st.st_mtim;
	return (int64_t)ts->tv_sec * 1000 + ts->tv_nsec / 1000000;
}

int query_load(struct spool *sp, const char *id, json_t **out)
{
	char p[512];
	_cleanup_free_ char *buf = NULL;
	size_t len;
	if (pathfmt(p, sizeof p, "%s.json", id) < 0)
		return -ENAMETOOLONG;
	int r = read_file_at(sp->done, p, 1 << 20, &buf, &len);
	if (r < 0)
		return r;
	json_error_t je;
	*out = json_loadb(buf, len, 0, &je);
	return *out ? 0 : -EBADMSG;
}

int query_done(struct spool *sp, const char *id, struct qinfo *q)
{
	char p[512];
	json_t *o;
	int r = query_load(sp, id, &o);
	if (r < 0)
		return r;
	(void)pathfmt(p, sizeof p, "%s.json", id);
	q->state = Q_DONE;
	q->since_ms = stat_ms(sp->done, p, false);
	const char *s = json_string_value(json_object_get(o, "status"));
	snprintf(q->status, sizeof q->status, "%s", s ? s : "?");
	json_t *ec = json_object_get(o, "exit_code");
	q->exit_code = json_is_integer(ec) ? (int)json_integer_value(ec) : -1;
	const char *sig = json_string_value(json_object_get(o, "signal"));
	q->signal = sig ? signal_from_name(sig) : 0;
	if (q->signal < 0)
		q->signal = 0;
	const char *op = json_string_value(json_object_get(json_object_get(o, "stdout"), "path"));
	const char *ep = json_string_value(json_object_get(json_object_get(o, "stderr"), "path"));
	snprintf(q->out_path, sizeof q->out_path, "%s", op ? op : "");
	snprintf(q->err_path, sizeof q->err_path, "%s", ep ? ep : "");
	json_decref(o);
	return 0;
}

static bool exists_at(int dirfd, const char *name)
{
	struct stat st;
	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

int query_id(struct spool *sp, const char *id, struct qinfo *q)
{
	memset(q, 0, sizeof *q);
	q->exit_code = -1;
	/* Look in the order tasks move (new, cur, done), so that one in
	 * motion is seen somewhere, and report the furthest place found:
	 * done/ID.json, then cur/W/ID, then new/ID (spool-layout §8). A
	 * finishing task writes its result before it leaves cur/ (and a new/
	 * entry of a finished id will finish under another one): done/ wins. */
	bool plain = id[0] != '.' && !strchr(id, '/');
	bool queued = plain && exists_at(sp->new, id);
	int64_t qsince = queued ? stat_ms(sp->new, id, true) : 0;
	char worker[sizeof q->worker];
	bool running = plain && spool_find_claim(sp, id, worker, sizeof worker);
	int r = query_done(sp, id, q);
	if (r != -ENOENT)
		return r;
	memset(q, 0, sizeof *q);
	q->exit_code = -1;
	if (running) {
		q->state = Q_RUNNING;
		snprintf(q->worker, sizeof q->worker, "%s", worker);
		char p[512];
		if (pathfmt(p, sizeof p, "%s/%s", q->worker, id) == 0)
			q->since_ms = stat_ms(sp->cur, p, true);
	} else if (queued) {
		q->state = Q_QUEUED;
		q->since_ms = qsince;
	} else {
		q->state = Q_UNKNOWN;
	}
	return 0;
}

struct qent {
	char *id;
	char *worker; /* cur/ entries */
	int64_t since_ms;
};

struct qlist {
	struct qent *v;
	size_t n, cap;
};

static void qlist_add(struct qlist *l, const char *id, const char *worker, int64_t since)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 256;
		l->v = xrealloc(l->v, l->cap * sizeof *l->v);
	}
	l->v[l->n++] = (struct qent){xstrdup(id), worker ? xstrdup(worker) : NULL, since};
}

static void qlist_free(struct qlist *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].id);
		free(l->v[i].worker);
	}
	free(l->v);
}

static int qent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct qent *)a)->id, ((const struct qent *)b)->id);
}

static bool qlist_has(const struct qlist *sorted, const char *id)
{
	struct qent key = {.id = (char *)id};
	return sorted->n && bsearch(&key, sorted->v, sorted->n, sizeof key, qent_cmp);
}

struct listing {
	struct qlist nl, cl, dl; /* new/, cur/W/, done/ */
};

static int list_one(const struct spool_entry *e, void *arg)
{
	struct listing *l = arg;
	switch (e->area) {
	case SPOOL_WALK_NEW: qlist_add(&l->nl, e->id, NULL, stat_ms(e->dirfd, e->name, true)); break;
	case SPOOL_WALK_CUR: qlist_add(&l->cl, e->id, e->worker, stat_ms(e->dirfd, e->name, true)); break;
	case SPOOL_WALK_DONE:
		if (e->id && e->done == DONE_JSON)
			qlist_add(&l->dl, e->id, NULL, 0);
		break;
	}
	return 0;
}

int query_all(struct spool *sp, query_cb cb, void *arg)
{
	/* Every listing is read first, in the order tasks move (new, cur,
	 * done), so that one in motion is seen at least once; then each id
	 * is reported once, in the furthest state it was found in, as
	 * query_id does. */
	struct listing l = {0};
	int r = spool_walk(sp, SPOOL_WALK_NEW | SPOOL_WALK_CUR | SPOOL_WALK_DONE, list_one, &l);
	struct qlist nl = l.nl, cl = l.cl, dl = l.dl;
	if (r < 0)
		goto out;

	qsort(dl.v, dl.n, sizeof *dl.v, qent_cmp);
	struct qlist cs = {0}; /* cur/ ids, sorted, each once */
	for (size_t i = 0; i < cl.n; i++)
		qlist_add(&cs, cl.v[i].id, NULL, 0);
	qsort(cs.v, cs.n, sizeof *cs.v, qent_cmp);
	struct qinfo q;
	for (size_t i = 0; i < nl.n; i++) {
		if (qlist_has(&cs, nl.v[i].id) || qlist_has(&dl, nl.v[i].id))
			continue;
		memset(&q, 0, sizeof q);
		q.state = Q_QUEUED;
		q.exit_code = -1;
		q.since_ms = nl.v[i].since_ms;
		cb(nl.v[i].id, &q, arg);
	}
	/* The same id under two workers' cur/ (a claim and a peer's
	 * recovery of it) is reported once, for the first found. */
	struct qlist seen = {0};
	for (size_t i = 0; i < cl.n; i++) {
		bool dup = false;
		for (size_t j = 0; j < seen.n && !dup; j++)
			dup = strcmp(seen.v[j].id, cl.v[i].id) == 0;
		if (dup || qlist_has(&dl, cl.v[i].id))
			continue;
		qlist_add(&seen, cl.v[i].id, NULL, 0); /* few: the running tasks */
		memset(&q, 0, sizeof q);
		q.state = Q_RUNNING;
		q.exit_code = -1;
		q.since_ms = cl.v[i].since_ms;
		snprintf(q.worker, sizeof q.worker, "%s", cl.v[i].worker);
		cb(cl.v[i].id, &q, arg);
	}
	qlist_free(&seen);
	qlist_free(&cs);
	for (size_t i = 0; i < dl.n; i++) {
		memset(&q, 0, sizeof q);
		if (query_done(sp, dl.v[i].id, &q) == 0)
			cb(dl.v[i].id, &q, arg);
	}
out:
	qlist_free(&nl);
	qlist_free(&cl);
	qlist_free(&dl);
	return r;
}
