/* depend.c - after=: the waiting set, and upstreams looked up in the
 * spool. See depend.h. */
#define _GNU_SOURCE
#include "depend.h"

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
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
 * unlinked from a second one.
 *
 * The graph is the members' to shape (issue 35: a 130,000-task chain
 * overflowed every worker's stack, and a chain of 16,000 filed in order
 * took 8 s). So a walk of it is a loop with stacks of its own, never a
 * recursion; it runs only where a cycle can close (the name being filed
 * is waited on already, nin); it goes both ways at once, up from the
 * new upstreams and down from the name's dependants, and stops when
 * either side has nothing left, so it costs the smaller side (a chain
 * filed in any order: about N log N in all); and it follows at most
 * after_max names. */

struct dnode {
	const char *name;   /* its entry's in the set */
	char **ups;         /* what this name waits on; NULL: it does not */
	int nups;
	void *data;         /* the caller's, while it waits */
	char **waiters;     /* names filed under this one */
	size_t nw, capw;
	char **deps;        /* names filed with this one among their ups;
			     * some may be stale (checked where used) */
	size_t nd, capd;
	size_t nin;         /* how many filed names have it among their ups */
	unsigned depth;     /* filed: 1 + its deepest filed upstream's */
	unsigned mark_up, mark_down;  /* the last walk that reached it, each way */
	struct dnode *via_up, *via_down; /* and from where (a cycle's path) */
};

struct depwait {
	struct strset set; /* every name, its dnode (strset_getp) */
	size_t nwaiting;
	unsigned search;
	unsigned max;      /* after_max */
	uint64_t steps;    /* names looked at by filing, in all */
};

struct depwait *depwait_new(void)
{
	struct depwait *d = xcalloc(1, sizeof(struct depwait));
	d->max = DEPWAIT_MAX_DEFAULT;
	return d;
}

void depwait_set_max(struct depwait *d, unsigned max) { d->max = max ? max : DEPWAIT_MAX_DEFAULT; }

uint64_t depwait_steps(const struct depwait *d) { return d->steps; }

static void node_clear_ups(struct dnode *e)
{
	for (int i = 0; i < e->nups; i++)
		free(e->ups[i]);
	free(e->ups);
	free(e->data);
	e->ups = NULL;
	e->data = NULL;
	e->nups = 0;
	e->depth = 0;
}

static void node_clear_deps(struct dnode *e)
{
	for (size_t k = 0; k < e->nd; k++)
		free(e->deps[k]);
	free(e->deps);
	e->deps = NULL;
	e->nd = e->capd = 0;
}

static void node_free(struct dnode *e)
{
	node_clear_ups(e);
	node_clear_deps(e);
	for (size_t k = 0; k < e->nw; k++)
		free(e->waiters[k]);
	free(e->waiters);
	free(e);
}

void depwait_free(struct depwait *d)
{
	if (!d)
		return;
	STRSET_EACH(&d->set, x) node_free(x->p);
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
	if (!e || e->ups || e->nw || e->nin)
		return;
	strset_del(&d->set, name);
	node_free(e);
}

/* x's edges leave the graph: each upstream is waited on once less (its
 * deps entry goes stale, and goes at its next compaction). */
static void edges_drop(struct depwait *d, char **ups, int n)
{
	for (int i = 0; i < n; i++) {
		struct dnode *u = dget(d, ups[i]);
		if (u && u->nin) {
			u->nin--;
			dgc(d, ups[i]);
		}
	}
}

/* Is the deps entry `name` of u live: filed, with u among its ups? */
static struct dnode *dep_live(const struct depwait *d, const struct dnode *u, const char *name)
{
	struct dnode *x = dget(d, name);
	for (int i = 0; x && i < x->nups; i++)
		if (strcmp(x->ups[i], u->name) == 0)
			return x;
	return NULL;
}

/* u's deps, once stale entries are most of them: the live ones, each
 * once (the mark of a search of its own). */
static void deps_compact(struct depwait *d, struct dnode *u)
{
	size_t o = 0;
	d->search++;
	for (size_t k = 0; k < u->nd; k++) {
		struct dnode *x = dep_live(d, u, u->deps[k]);
		if (x && x->mark_down != d->search) {
			x->mark_down = d->search;
			u->deps[o++] = u->deps[k];
		} else {
			free(u->deps[k]);
		}
	}
	u->nd = o;
}

static void deps_add(struct depwait *d, struct dnode *u, const char *name)
{
	if (u->nd >= 2 * u->nin + 8)
		deps_compact(d, u);
	if (u->nd == u->capd) {
		u->capd = u->capd ? 2 * u->capd : 4;
		u->deps = xrealloc(u->deps, u->capd * sizeof *u->deps);
	}
	u->deps[u->nd++] = xstrdup(name);
}

struct walk {
	struct dnode **v;
	size_t n, cap;
};

static void walk_push(struct walk *w, struct dnode *x)
{
	if (w->n == w->cap)
		w->v = xrealloc(w->v, (w->cap = w->cap ? 2 * w->cap : 64) * sizeof *w->v);
	w->v[w->n++] = x;
}

/* The cycle met at m: "target -> ups[i] -> ... -> m -> ... -> target",
 * each arrow "waits on": up from ups[i] to m, then down from m. */
static void cycle_path(const struct dnode *target, const struct dnode *m, char *out, size_t len)
{
	size_t n = 0, o;
	for (const struct dnode *x = m; x; x = x->via_up)
		n++;
	const struct dnode **v = xcalloc(n, sizeof *v);
	size_t k = n;
	for (const struct dnode *x = m; x; x = x->via_up)
		v[--k] = x;
	o = (size_t)snprintf(out, len, "%s", target->name);
	for (size_t i = 0; i < n && o < len; i++)
		o += (size_t)snprintf(out + o, len - o, " -> %s", v[i]->name);
	for (const struct dnode *x = m->via_down; x && o < len; x = x->via_down)
		o += (size_t)snprintf(out + o, len - o, " -> %s", x->name);
	free(v);
}

/* Does one of ups lead, through filed names, back to target (which
 * something waits on)? Up from ups and down from target, a step each
 * in turn, until the two meet (a cycle: 1, its path in why), either
 * side runs out (0), or more than d->max names were looked at
 * (-E2BIG). Each name is looked at once each way. */
static int walk_both(struct depwait *d, struct dnode *target, const char *const *ups, int n,
		     char *why, size_t len)
{
	struct walk up = {0}, down = {0};
	struct dnode *meet = NULL;
	size_t seen = 0;
	int r = 0;
	unsigned s = ++d->search;
	target->mark_down = s;
	target->via_down = NULL;
	walk_push(&down, target);
	for (int i = 0; i < n; i++) {
		struct dnode *u = dget(d, ups[i]);
		if (!u || u->mark_up == s)
			continue;
		u->mark_up = s;
		u->via_up = NULL;
		walk_push(&up, u);
	}
	while (r == 0 && !meet && up.n && down.n) {
		struct dnode *x = up.v[--up.n];
		d->steps++;
		if (x->mark_down == s)
			meet = x;
		for (int k = 0; !meet && k < x->nups; k++) {
			struct dnode *y = dget(d, x->ups[k]);
			if (!y || y->mark_up == s)
				continue;
			y->mark_up = s;
			y->via_up = x;
			walk_push(&up, y);
		}
		x = down.v[--down.n];
		d->steps++;
		if (!meet && x->mark_up == s)
			meet = x;
		for (size_t k = 0; !meet && k < x->nd; k++) {
			struct dnode *y = dep_live(d, x, x->deps[k]);
			if (!y || y->mark_down == s)
				continue;
			y->mark_down = s;
			y->via_down = x;
			walk_push(&down, y);
		}
		if (!meet && (seen += 2) > d->max) {
			snprintf(why, len,
				 "looking for a cycle through it would follow more than after_max (%u) "
				 "tasks", d->max);
			r = -E2BIG;
		}
	}
	if (meet) {
		cycle_path(target, meet, why, len);
		r = 1;
	}
	free(up.v);
	free(down.v);
	return r;
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
	edges_drop(d, e->ups, e->nups);
	node_clear_ups(e);
	d->nwaiting--;
}

int depwait_add(struct depwait *d, const char *name, const char *const *ups, int n,
		const void *data, size_t dlen, char *why, size_t whylen)
{
	if (whylen)
		why[0] = '\0';
	struct dnode *e = dget(d, name);
	if (e && e->ups)
		unfile(d, e);
	e = dput(d, name);
	unsigned depth = 0;
	int r = 0;
	for (int i = 0; i < n && r == 0; i++) {
		const struct dnode *u = dget(d, ups[i]);
		d->steps++;
		if (strcmp(ups[i], name) == 0) {
			snprintf(why, whylen, "%s -> %s", name, name);
			r = -ELOOP;
		} else if (u && u->depth > depth) {
			depth = u->depth;
		}
	}
	if (r == 0 && depth >= d->max) {
		snprintf(why, whylen, "it would make a chain of more than after_max (%u) waiting tasks",
			 d->max);
		r = -E2BIG;
	}
	/* A cycle closes only through a name something waits on already. */
	if (r == 0 && e->nin) {
		r = walk_both(d, e, ups, n, why, whylen);
		if (r == 1)
			r = -ELOOP;
	}
	if (r < 0) {
		dgc(d, name);
		return r;
	}
	e->ups = xcalloc((size_t)n, sizeof *e->ups);
	for (int i = 0; i < n; i++) {
		struct dnode *u = dput(d, ups[i]);
		e->ups[i] = xstrdup(ups[i]);
		u->nin++;
		deps_add(d, u, name);
	}
	e->nups = n;
	e->depth = depth + 1;
	if (dlen) {
		e->data = xmalloc(dlen);
		memcpy(e->data, data, dlen);
	}
	struct dnode *u = dget(d, ups[0]);
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
			e->depth = 0;
			d->nwaiting--;
			edges_drop(d, t[k].ups, t[k].nups);
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
			snprintf(out->why, sizeof out->why, "line %d: %s=%s names the task itself",
				 spec->line_after, dep_mode_key(spec->after_mode[i]), ids[i]);
			return;
		}
	}
	dep_check_ids(sp, c, ids, spec->after_mode, spec->n_after, spec->line_after, uid, out);
}

const char *dep_mode_key(enum after_mode m)
{
	return m == AFTER_ANY ? "after_any" : m == AFTER_FAIL ? "after_fail" : "after";
}

/* Does an upstream's end let a task with this mode run? */
static bool mode_lets_run(enum after_mode m, const char *status)
{
	bool ok = strcmp(status, "ok") == 0;
	return m == AFTER_ANY || (m == AFTER_OK && ok) || (m == AFTER_FAIL && !ok);
}

void dep_check_ids(struct spool *sp, struct dep_cache *c, const char *const *ids,
		   const enum after_mode *modes, int n, int line, uid_t uid, struct dep_check *out)
{
	int skip = -1, unknown = -1;
	char skip_status[32] = "";
	memset(out, 0, sizeof *out);
	out->v = DEP_READY;
	for (int i = 0; i < n && i < TASK_AFTER_MAX; i++) {
		const char *id = ids[i];
		enum after_mode mode = modes ? modes[i] : AFTER_OK;
		const char *key = dep_mode_key(mode);
		char status[32] = "";
		uid_t owner = (uid_t)-1;
		int r = look(sp, c, id, uid, status, sizeof status, &owner);
		if (r == 0) /* a re-queue moves backwards: one more look */
			r = look(sp, c, id, uid, status, sizeof status, &owner);
		if (r == 0) {
			out->v = DEP_REJECT;
			snprintf(out->why, sizeof out->why,
				 "line %d: %s=%s: no such task (an upstream must exist when the task "
				 "is first read, so that no cycle can form)", line, key, id);
			return;
		}
		if (r > 0 && owner != uid) {
			out->v = DEP_REJECT;
			snprintf(out->why, sizeof out->why,
				 "line %d: %s=%s is not a task of the submitter (uid %u): only one's "
				 "own tasks may be named, their output is theirs", line, key, id,
				 (unsigned)uid);
			return;
		}
		if (r < 0) {
			/* Cannot be told now: wait, and look again at the next
			 * result or overflow. Never decided on a failed read. */
			if (unknown < 0)
				unknown = i;
			out->pending_mode[out->npending] = mode;
			out->pending[out->npending++] = id;
		} else if (r == 1 && !mode_lets_run(mode, status)) {
			if (skip < 0) {
				skip = i;
				snprintf(skip_status, sizeof skip_status, "%s", status);
			}
		} else if (r == 2) {
			out->pending_mode[out->npending] = mode;
			out->pending[out->npending++] = id;
		}
	}
	if (skip >= 0) {
		enum after_mode m = modes ? modes[skip] : AFTER_OK;
		out->v = DEP_SKIP;
		out->npending = 0;
		snprintf(out->why, sizeof out->why, "upstream %s ended %s (%s=%s%s): this task never ran",
			 ids[skip], skip_status, dep_mode_key(m), ids[skip],
			 m == AFTER_FAIL ? ": it runs only if that one did not end ok" : "");
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
