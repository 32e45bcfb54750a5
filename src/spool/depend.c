/* depend.c - after=: the waiting set, and upstreams looked up in the
 * spool. See depend.h. */
#define _GNU_SOURCE
#include "depend.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "query.h"
#include "spool.h"
#include "strset.h"
#include "util.h"

/* ---- the waiting set ---------------------------------------------------
 *
 * One node per name that waits or is waited on. A waiting name keeps
 * every upstream it still waits on (ups: the edges a cycle would run
 * along), but is filed in one list only, its first upstream's: released
 * by that result, it is looked at again and filed under the next one.
 * So a release costs the length of one list, and nothing is ever
 * unlinked from a second one. */

struct dnode {
	const char *name;   /* its entry's in the set */
	char **ups;         /* what this name waits on; NULL: it does not */
	int nups;
	void *data;         /* the caller's, while it waits */
	char **waiters;     /* names filed under this one */
	size_t nw, capw;
	unsigned mark;      /* cycle search: visited in search number mark */
};

struct depwait {
	struct strset set; /* every name, its dnode (strset_getp) */
	size_t nwaiting;
	unsigned search;
};

struct depwait *depwait_new(void) { return xcalloc(1, sizeof(struct depwait)); }

static void node_clear_ups(struct dnode *e)
{
	for (int i = 0; i < e->nups; i++)
		free(e->ups[i]);
	free(e->ups);
	free(e->data);
	e->ups = NULL;
	e->data = NULL;
	e->nups = 0;
}

void depwait_free(struct depwait *d)
{
	if (!d)
		return;
	STRSET_EACH(&d->set, x) {
		struct dnode *e = x->p;
		node_clear_ups(e);
		for (size_t k = 0; k < e->nw; k++)
			free(e->waiters[k]);
		free(e->waiters);
		free(e);
	}
	strset_free(&d->set);
	free(d);
}

static struct dnode *dget(const struct depwait *d, const char *name)
{
	return strset_getp(&d->set, name);
}

static struct dnode *dput(struct depwait *d, const char *name)
{
	struct dnode *e = dget(d, name);
	if (e)
		return e;
	e = xcalloc(1, sizeof *e);
	e->name = strset_putp(&d->set, name, e);
	return e;
}

/* A node neither waiting nor waited on is dropped. */
static void dgc(struct depwait *d, const char *name)
{
	struct dnode *e = dget(d, name);
	if (!e || e->ups || e->nw)
		return;
	free(e->waiters);
	free(e);
	strset_del(&d->set, name);
}

/* Does `from` wait, through the set, on target? The path found is
 * written into path (from first), NUL-terminated at *off. Depth-first,
 * each node once per search. */
static bool reaches(struct depwait *d, const char *from, const char *target, char *path,
		    size_t len, size_t *off)
{
	size_t at = *off;
	int w = snprintf(path + at, at < len ? len - at : 0, " -> %s", from);
	if (w > 0)
		*off = at + (size_t)w < len ? at + (size_t)w : len ? len - 1 : 0;
	if (strcmp(from, target) == 0)
		return true;
	struct dnode *e = dget(d, from);
	if (e && e->mark != d->search) {
		e->mark = d->search;
		for (int i = 0; i < e->nups; i++)
			if (reaches(d, e->ups[i], target, path, len, off))
				return true;
	}
	*off = at;
	if (at < len)
		path[at] = '\0';
	return false;
}

static void unfile(struct depwait *d, struct dnode *e)
{
	if (!e->ups)
		return;
	/* Taken out of its first upstream's list, where it was filed. */
	struct dnode *u = dget(d, e->ups[0]);
	for (size_t k = 0; u && k < u->nw; k++)
		if (strcmp(u->waiters[k], e->name) == 0) {
			free(u->waiters[k]);
			u->waiters[k] = u->waiters[--u->nw];
			break;
		}
	char first[TASK_NAME_MAX + 1];
	snprintf(first, sizeof first, "%s", e->ups[0]);
	node_clear_ups(e);
	d->nwaiting--;
	if (u)
		dgc(d, first);
}

int depwait_add(struct depwait *d, const char *name, const char *const *ups, int n,
		const void *data, size_t dlen, char *cycle, size_t cyclen)
{
	if (cyclen)
		cycle[0] = '\0';
	struct dnode *e = dget(d, name);
	if (e && e->ups)
		unfile(d, e);
	/* A cycle closes only through a name that waits already: ups[i]
	 * leads back to name. The search starts afresh for each upstream. */
	for (int i = 0; i < n; i++) {
		char path[1024];
		size_t off = 0;
		path[0] = '\0';
		d->search++;
		if (reaches(d, ups[i], name, path, sizeof path, &off)) {
			if (cyclen)
				snprintf(cycle, cyclen, "%s%s", name, path);
			e = dget(d, name);
			if (e)
				dgc(d, name);
			return -ELOOP;
		}
	}
	e = dput(d, name);
	e->ups = xcalloc((size_t)n, sizeof *e->ups);
	for (int i = 0; i < n; i++)
		e->ups[i] = xstrdup(ups[i]);
	e->nups = n;
	if (dlen) {
		e->data = xmalloc(dlen);
		memcpy(e->data, data, dlen);
	}
	struct dnode *u = dput(d, ups[0]);
	if (u->nw == u->capw) {
		u->capw = u->capw ? u->capw * 2 : 4;
		u->waiters = xrealloc(u->waiters, u->capw * sizeof *u->waiters);
	}
	u->waiters[u->nw++] = xstrdup(name);
	d->nwaiting++;
	return 0;
}

size_t depwait_release(struct depwait *d, const char *id, depwait_fn fn, void *arg)
{
	struct dnode *u = dget(d, id);
	if (!u || !u->nw)
		return 0;
	/* Taken whole first, each waiter's upstreams and data with it: fn
	 * may file a name again, under this id too. */
	struct taken {
		char **ups;
		int nups;
		void *data;
	} *t = xcalloc(u->nw, sizeof *t);
	char **w = u->waiters;
	size_t nw = u->nw, n = 0;
	u->waiters = NULL;
	u->nw = u->capw = 0;
	for (size_t k = 0; k < nw; k++) {
		struct dnode *e = dget(d, w[k]);
		if (e && e->ups && strcmp(e->ups[0], id) == 0) {
			t[k] = (struct taken){e->ups, e->nups, e->data};
			e->ups = NULL;
			e->data = NULL;
			e->nups = 0;
			d->nwaiting--;
			dgc(d, w[k]);
			n++;
		}
	}
	dgc(d, id);
	for (size_t k = 0; k < nw; k++) {
		if (t[k].ups && fn)
			fn(arg, w[k], (const char *const *)t[k].ups, t[k].nups, t[k].data);
		for (int i = 0; i < t[k].nups; i++)
			free(t[k].ups[i]);
		free(t[k].ups);
		free(t[k].data);
		free(w[k]);
	}
	free(t);
	free(w);
	return n;
}

void depwait_each_upstream(const struct depwait *d, void (*fn)(void *arg, const char *id), void *arg)
{
	STRSET_EACH(&d->set, x) {
		const struct dnode *e = x->p;
		if (e->nw)
			fn(arg, e->name);
	}
}

const char *depwait_on(const struct depwait *d, const char *name)
{
	struct dnode *e = dget(d, name);
	return e && e->ups ? e->ups[0] : NULL;
}

size_t depwait_count(const struct depwait *d) { return d->nwaiting; }

/* ---- upstreams in the spool -------------------------------------------- */

#define DEP_CACHE_SLOTS 1024

struct dep_cache_ent {
	char *id;
	bool ok;
	uid_t uid;
	char status[32];
};

struct dep_cache {
	struct dep_cache_ent e[DEP_CACHE_SLOTS];
};

struct dep_cache *dep_cache_new(void) { return xcalloc(1, sizeof(struct dep_cache)); }

void dep_cache_free(struct dep_cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < DEP_CACHE_SLOTS; i++)
		free(c->e[i].id);
	free(c);
}

/* done/ID.json, read: 1 with status and submitter, 0 when there is no
 * result, -errno when one cannot be read (kept waiting: never decided
 * on what could not be read). */
static int result_of(struct spool *sp, struct dep_cache *c, const char *id, char *status,
		     size_t slen, uid_t *uid)
{
	struct dep_cache_ent *ce = c ? &c->e[strset_hash(id) & (DEP_CACHE_SLOTS - 1)] : NULL;
	if (ce && ce->id && strcmp(ce->id, id) == 0) {
		snprintf(status, slen, "%s", ce->status);
		*uid = ce->uid;
		return 1;
	}
	json_t *o;
	int r = query_load(sp, id, &o);
	if (r == -ENOENT || r == -ENAMETOOLONG)
		return 0;
	if (r < 0)
		return r;
	const char *s = json_string_value(json_object_get(o, "status"));
	json_t *ju = json_object_get(json_object_get(o, "submitter"), "uid");
	snprintf(status, slen, "%s", s ? s : "?");
	*uid = json_is_integer(ju) ? (uid_t)json_integer_value(ju) : (uid_t)-1;
	json_decref(o);
	if (ce) {
		free(ce->id);
		ce->id = xstrdup(id);
		snprintf(ce->status, sizeof ce->status, "%s", status);
		ce->uid = *uid;
	}
	return 1;
}

/* Upstream id, one look: 1 done (status, owner), 2 pending (owner),
 * 0 absent, -errno unknown. */
static int look(struct spool *sp, struct dep_cache *c, const char *id, uid_t uid, char *status,
		size_t slen, uid_t *owner)
{
	/* done/ first (the common case: a release), then in the order tasks
	 * move, done/ again last, so that one moving is seen at least once. */
	int r = result_of(sp, c, id, status, slen, owner);
	if (r != 0)
		return r;
	r = spool_id_pending(sp, id, uid, owner);
	if (r != 0)
		return r < 0 ? r : 2;
	return result_of(sp, c, id, status, slen, owner);
}

void dep_check(struct spool *sp, struct dep_cache *c, const char *self,
	       const struct task_spec *spec, uid_t uid, struct dep_check *out)
{
	const char *ids[TASK_AFTER_MAX];
	for (int i = 0; i < spec->n_after; i++) {
		ids[i] = spec->after[i];
		if (strcmp(ids[i], self) == 0) {
			memset(out, 0, sizeof *out);
			out->v = DEP_REJECT;
			snprintf(out->why, sizeof out->why,
				 "line %d: after=%s names the task itself", spec->line_after, ids[i]);
			return;
		}
	}
	dep_check_ids(sp, c, ids, spec->n_after, spec->line_after, uid, out);
}

void dep_check_ids(struct spool *sp, struct dep_cache *c, const char *const *ids, int n,
		   int line, uid_t uid, struct dep_check *out)
{
	int skip = -1, unknown = -1;
	char skip_status[32] = "";
	memset(out, 0, sizeof *out);
	out->v = DEP_READY;
	for (int i = 0; i < n && i < TASK_AFTER_MAX; i++) {
		const char *id = ids[i];
		char status[32] = "";
		uid_t owner = (uid_t)-1;
		int r = look(sp, c, id, uid, status, sizeof status, &owner);
		if (r == 0) /* a re-queue moves backwards: one more look */
			r = look(sp, c, id, uid, status, sizeof status, &owner);
		if (r == 0) {
			out->v = DEP_REJECT;
			snprintf(out->why, sizeof out->why,
				 "line %d: after=%s: no such task (an upstream must exist when the task "
				 "is first read, so that no cycle can form)", line, id);
			return;
		}
		if (r > 0 && owner != uid) {
			out->v = DEP_REJECT;
			snprintf(out->why, sizeof out->why,
				 "line %d: after=%s is not a task of the submitter (uid %u): only one's "
				 "own tasks may be named, their output is theirs", line, id,
				 (unsigned)uid);
			return;
		}
		if (r < 0) {
			/* Cannot be told now: wait, and look again at the next
			 * result or overflow. Never decided on a failed read. */
			if (unknown < 0)
				unknown = i;
			out->pending[out->npending++] = id;
		} else if (r == 1 && strcmp(status, "ok") != 0) {
			if (skip < 0) {
				skip = i;
				snprintf(skip_status, sizeof skip_status, "%s", status);
			}
		} else if (r == 2) {
			out->pending[out->npending++] = id;
		}
	}
	if (skip >= 0) {
		out->v = DEP_SKIP;
		out->npending = 0;
		snprintf(out->why, sizeof out->why,
			 "upstream %s ended %s (after=%s): this task never ran", ids[skip],
			 skip_status, ids[skip]);
	} else if (out->npending) {
		out->v = DEP_WAIT;
	}
}

int dep_upstream_ok(struct spool *sp, struct dep_cache *c, const char *id, uid_t uid)
{
	char status[32];
	uid_t owner;
	int r = result_of(sp, c, id, status, sizeof status, &owner);
	if (r < 0)
		return r;
	if (r == 0)
		return -ENOENT;
	if (owner != uid)
		return -EPERM;
	return strcmp(status, "ok") == 0 ? 0 : -ECANCELED;
}
