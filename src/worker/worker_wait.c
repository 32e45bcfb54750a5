/* worker_wait.c - after=: tasks of new/ waiting on other tasks' results,
 * released by each result, and a run's inputs opened in done/. The
 * lookups and the waiting set are depend.c's; this is what the worker
 * does with them. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/inotify.h>

#include "worker_int.h"

#include "depend.h"
#include "spool.h"

/*
 * A task of new/ whose after= names an id without a result is filed in
 * w->after.wait under that id, and its name is K_WAITING in w->known; nothing
 * changes on disk. done/ is watched while any waits: a result's JSON
 * (IN_CREATE of a link, IN_MOVED_TO of a rename) releases the tasks
 * filed under its id, each looked at again (consider), one list per
 * result and never a scan of new/. An overflow looks every id waited on
 * up again. One that ended otherwise than ok gets the waiting task
 * claimed and finished `skipped`, whose own result releases its own
 * dependants in turn: the skip runs down the graph. See
 * spool-layout WORKER §3. */

/* A waiting task as it was filed: what consider would queue it with. */
struct dep_filed {
	enum lane lane;
	int prio, line;
	uid_t uid;
	int64_t arrived_ms;
	/* What each upstream it is filed with must end (after=,
	 * after_any=, after_fail=), in the order filed. */
	enum after_mode modes[TASK_AFTER_MAX];
};

/* Watch done/ before any lookup that may find an upstream pending, so
 * that its result, however soon, rings. */
static int dep_watch(struct worker *w)
{
	char p[PATH_MAX];
	if (w->after.wd_done >= 0)
		return 0;
	if (pathfmt(p, sizeof p, "%s/done", w->sp->path) < 0)
		return -ENAMETOOLONG;
	w->after.wd_done = inotify_add_watch(w->ino, p, IN_CREATE | IN_MOVED_TO | IN_ONLYDIR);
	return w->after.wd_done < 0 ? -errno : 0;
}

/* Nothing waits: results no longer concern us (each costs events). */
static void dep_unwatch(struct worker *w)
{
	if (w->after.wd_done >= 0 && depwait_count(w->after.wait) == 0) {
		(void)inotify_rm_watch(w->ino, w->after.wd_done);
		w->after.wd_done = -1;
	}
}

/* What a lookup decided, done: true when it may be queued now; else it
 * is filed as waiting (with f, kept for its release), or finished
 * skipped (its upstream did not end ok) or rejected (no such upstream,
 * another user's, a cycle). */
static bool dep_decide(struct worker *w, const char *name, struct dep_check *dc,
		       const struct dep_filed *f)
{
	char why[600];
	int r;
	switch (dc->v) {
	case DEP_READY:
		return true;
	case DEP_WAIT: {
		struct dep_filed g = *f;
		memcpy(g.modes, dc->pending_mode, sizeof g.modes);
		depwait_set_max(w->after.wait, w->pol->after_max);
		r = depwait_add(w->after.wait, name, dc->pending, dc->npending, &g, sizeof g, why, sizeof why);
		if (r == 0) {
			strset_put(&w->known, name, K_WAITING);
			return false;
		}
		if (r == -ELOOP)
			snprintf(dc->why, sizeof dc->why,
				 "line %d: after= closes a cycle (%.500s): none of them could ever run",
				 f->line, why);
		else
			snprintf(dc->why, sizeof dc->why,
				 "line %d: after=: %.300s; a longer pipeline needs a higher after_max in "
				 "kart.conf", f->line, why);
		finish_from_new(w, name, "rejected", dc->why);
		return false;
	}
	case DEP_SKIP:
		finish_from_new(w, name, "skipped", dc->why);
		return false;
	case DEP_REJECT:
		finish_from_new(w, name, "rejected", dc->why);
		return false;
	}
	return false;
}

/* consider's step for a task with after=: true when it may be queued
 * now; else it waits (filed), or is finished skipped or rejected. */
bool deps_ready(struct worker *w, const char *name, const struct inspect *ins)
{
	int r = dep_watch(w);
	if (r < 0) {
		/* Without the watch a result would go unseen: retried at the
		 * next look (busy), never decided blind. */
		logmsg("%s: cannot watch done/ (%s): its after= is looked at again later", name,
		       strerror(-r));
		strset_put(&w->known, name, K_BUSY);
		w->nbusy++;
		w->busy.seen = true;
		return false;
	}
	struct dep_check dc;
	dep_check(w->sp, w->after.cache, name, &ins->spec, ins->uid, &dc);
	/* consider has counted a busy one out already: not known from here
	 * on, unless filed as waiting. */
	strset_del(&w->known, name);
	/* No unwatch here: a release looks at thousands in a row, and the
	 * watch goes at the end of it (dep_result), or at the next result. */
	/* What consider would queue it with, kept for its release (its
	 * priority looked up only for one that waits). */
	struct dep_filed f = {.line = ins->spec.line_after};
	if (dc.v == DEP_WAIT)
		f = (struct dep_filed){.lane = ins->spec.lane, .prio = cand_priority(w, name, ins),
				       .uid = ins->uid, .arrived_ms = ins->arrived_ms,
				       .line = ins->spec.line_after};
	return dep_decide(w, name, &dc, &f);
}

/* A name released by a result: what it still waited on is looked up
 * (the result just read is in the cache), and it is queued, filed again,
 * skipped or rejected. Its file is not read again here: it was when it
 * was filed, and is at its claim (deps_start), which a file that went
 * meanwhile never reaches. 10,000 released by one result cost that many
 * lookups in the cache, not that many reads of new/. */
static void dep_again(void *arg, const char *name, const char *const *ups, int n,
		      const void *data)
{
	struct worker *w = arg;
	const struct dep_filed *f = data;
	if (strset_get(&w->known, name) != K_WAITING)
		return; /* no longer ours to release */
	strset_del(&w->known, name);
	struct dep_check dc;
	dep_check_ids(w->sp, w->after.cache, ups, f->modes, n, f->line, f->uid, &dc);
	if (dep_decide(w, name, &dc, f))
		queue_cand(w, name, f->lane, f->prio, f->uid, f->arrived_ms);
}

static int64_t thread_cpu_ms(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
		return 0;
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* done/NAME appeared: if it is a result, its waiters are looked at. */
void dep_result(struct worker *w, const char *fname)
{
	size_t l = strlen(fname);
	if (fname[0] == '.' || l <= 5 || strcmp(fname + l - 5, ".json") != 0)
		return;
	char id[NAME_MAX + 1];
	snprintf(id, sizeof id, "%.*s", (int)(l - 5), fname);
	int64_t t0 = now_mono_ms(), c0 = thread_cpu_ms();
	size_t n = depwait_release(w->after.wait, id, dep_again, w);
	if (n >= 100) /* for bench/deps: the loop's wall time, and its CPU */
		logmsg("after=: %zu tasks waiting on %s released in %lld ms (CPU %lld ms)", n, id,
		       (long long)(now_mono_ms() - t0), (long long)(thread_cpu_ms() - c0));
	dep_unwatch(w);
}

/* A look at all of new/ is done: how many wait, and what filing them
 * has cost so far (names looked at: depend.h; tests/blackbox/deps.sh
 * holds a deep chain's start-up to it). */
void dep_scanned(struct worker *w)
{
	if (depwait_count(w->after.wait))
		logmsg("after=: %zu tasks wait; %llu names looked at", depwait_count(w->after.wait),
		       (unsigned long long)depwait_steps(w->after.wait));
}

/* After an overflow: every id waited on, looked up again. */
static void dep_collect(void *arg, const char *id)
{
	strv_add(arg, id);
}

void dep_recheck(struct worker *w)
{
	struct strv ids = {0};
	depwait_each_upstream(w->after.wait, dep_collect, &ids);
	for (size_t i = 0; i < ids.n; i++) {
		char p[NAME_MAX + 8];
		struct stat st;
		if (pathfmt(p, sizeof p, "%s.json", ids.v[i]) == 0 &&
		    fstatat(w->sp->done, p, &st, 0) == 0)
			dep_result(w, p);
	}
	strv_free(&ids);
}

void dep_inputs_free(struct dep_inputs *di)
{
	for (int i = 0; i < di->nfd; i++)
		close(di->fd[i]);
	for (int i = 0; i < di->npath; i++)
		free(di->path[i]);
	di->nfd = di->npath = 0;
}

/* One of done/ID.out (dir) and done/ID.stdout (a file): 1 opened, 0 it
 * has none, -errno. */
static int dep_open(struct worker *w, struct dep_inputs *di, const char *id, bool dir,
		    const char **host)
{
	char n[NAME_MAX + 1], p[PATH_MAX];
	struct stat st;
	if (pathfmt(n, sizeof n, "%s.%s", id, dir ? "out" : "stdout") < 0 ||
	    pathfmt(p, sizeof p, "%s/done/%s", w->sp->path, n) < 0)
		return -ENAMETOOLONG;
	int fd = openat(w->sp->done, n, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(fd, &st) < 0 || (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))) {
		int e = errno;
		close(fd);
		return -(e ? e : EINVAL);
	}
	di->fd[di->nfd++] = fd;
	*host = di->path[di->npath++] = xstrdup(p);
	return 1;
}

/* after=, at the claim: each upstream still ended ok (a result is never
 * rewritten, but kart gc may have taken one) and its outputs are
 * opened. 0: run it with di; -1: finished or given back here. */
int deps_start(struct worker *w, const char *name, const struct inspect *ins,
	       struct dep_inputs *di)
{
	struct dep_check dc;
	dep_check(w->sp, w->after.cache, name, &ins->spec, ins->uid, &dc);
	if (dc.v == DEP_SKIP || dc.v == DEP_REJECT) {
		finish_unrun(w, name, dc.v == DEP_SKIP ? "skipped" : "rejected", dc.why);
		return -1;
	}
	if (dc.v == DEP_WAIT) {
		/* Back to new/, its attempt unchanged: it waits there. */
		struct claim_meta m = {.attempt = 1};
		if (ins->fd >= 0)
			(void)claim_meta_get(ins->fd, name, &m);
		if (spool_requeue(w->sp, w->wdir, name, &m) < 0)
			logmsg("%s: cannot give back to new/: %s", name, strerror(errno));
		return -1;
	}
	for (int i = 0; i < ins->spec.n_after; i++) {
		const char *id = ins->spec.after[i];
		di->in[i].id = id;
		int r = dep_open(w, di, id, true, &di->in[i].out_path);
		if (r >= 0)
			r = dep_open(w, di, id, false, &di->in[i].stdout_path);
		if (r < 0) {
			char why[700];
			snprintf(why, sizeof why, "cannot open the output of upstream %s in done/: %s",
				 id, strerror(-r));
			dep_inputs_free(di);
			finish_unrun(w, name, "refused", why);
			return -1;
		}
	}
	return 0;
}

/* Backend none has no mounts: $KART_INPUTS is a directory of links in
 * the run's work directory (a spare of the submitter's, emptied when
 * the run ends), ID/out and ID/stdout pointing into done/; Landlock lets
 * the run read those and nothing else of done/. */
int dep_links(struct worker *w, struct dep_inputs *di, const char *work, int n)
{
	char p[PATH_MAX];
	if (pathfmt(di->in_dir, sizeof di->in_dir, "%s/cur/%s/%s/.kart-inputs", w->sp->path, w->id,
		    work) < 0 ||
	    pathfmt(p, sizeof p, "%s/.kart-inputs", work) < 0)
		return -ENAMETOOLONG;
	if (mkdirat(w->wdir, p, 0755) < 0 && errno != EEXIST)
		return -errno;
	for (int i = 0; i < n; i++) {
		const struct sandbox_input *in = &di->in[i];
		if (pathfmt(p, sizeof p, "%s/.kart-inputs/%s", work, in->id) < 0)
			return -ENAMETOOLONG;
		if (mkdirat(w->wdir, p, 0755) < 0 && errno != EEXIST)
			return -errno;
		const char *src[2] = {in->out_path, in->stdout_path};
		for (int k = 0; k < 2; k++) {
			if (!src[k])
				continue;
			if (pathfmt(p, sizeof p, "%s/.kart-inputs/%s/%s", work, in->id,
				    k ? "stdout" : "out") < 0)
				return -ENAMETOOLONG;
			if (symlinkat(src[k], w->wdir, p) < 0 && errno != EEXIST)
				return -errno;
		}
	}
	return 0;
}

