/* worker_leaf.c - the per-task cgroup leaf: taken from a pool made and
 * renewed ahead of time, drained after the run. */
#define _GNU_SOURCE
#include <sys/inotify.h>

#include "backend.h"
#include "worker_int.h"

static bool drain_done(struct worker *w, struct task *t, bool empty, bool late);
static void drain_again(struct task *t);

/* The host's cgroups, looked at once, at the first task (on v2 the
 * worker may move itself into a leaf of its own then). */
static struct cg_host cg_host;
static int cg_host_state; /* 0: not looked at, 1: usable, -1: none */

static bool cg_usable(struct worker *w)
{
	if (w->pol->cgroup == CGROUP_OFF)
		return false;
	if (!cg_host_state) {
		/* The parent is resolved once: a SIGHUP does not move it. */
		const char *parent = w->pol->cgroup_parent;
		int r = cg_host_init(&cg_host, NULL, NULL, parent);
		cg_host_state = r == 0 && cg_host.mode != CG_MODE_NONE ? 1 : -1;
		logmsg("cgroups: %s%s%s", r < 0 ? strerror(-r) : cg_mode_name(cg_host.mode),
		       parent[0] ? ", parent " : "", parent);
	}
	return cg_host_state > 0;
}

/* Kill and remove the leaves of workers that are gone. */
void sweep_leaves(struct worker *w)
{
	static bool sweep_failed;
	if (!cg_usable(w))
		return;
	int n = 0, r = cg_sweep(&cg_host, &n);
	if (r < 0 && !sweep_failed)
		logmsg("cgroups: removing stale leaves: %s", strerror(-r));
	sweep_failed = r < 0;
	if (n)
		logmsg("cgroups: removed %d stale leaves of dead workers", n);
}

/* ---- the pool: leaves made and renewed ahead of time ---------------------
 *
 * A leaf made, written and removed for each task costs it kernfs's making
 * and unmaking of every file of each directory (three on v1; docs/
 * PERFORMANCE.md, "Kept leaves"), and one made at the claim delays the start. So leaves come
 * from a pool that a thread of their own keeps: a task takes one whose
 * limits are its own (or has the values that differ written), and after
 * the run, once the kernel says it is empty and its usage is read, the
 * leaf goes back to the thread, which renews it for the next run
 * (cg_leaf_renew: the peaks reset, the growing counters taken as the
 * next base) or removes it: never one that was sent a kill, that held an
 * OOM kill, that was frozen or stopped (kart pause), or that the kernel
 * would not say empty (that one is left where it is). The thread also
 * makes new leaves, with the limits the last task asked for, while fewer
 * than a slot's worth are ready or on their way back; it holds at most
 * two per slot. Only where descriptors are kept across runs (fd_budget):
 * otherwise each task makes its leaf and removes it in the loop. The
 * pool's leaves are removed at exit; a crash's are swept like any leaf of
 * a dead worker. */
struct pooled {
	struct pooled *next;
	bool dead; /* to be removed, not renewed */
	int tries; /* renewals put off (-EAGAIN) */
	int64_t again_mono; /* cooling: when to try again */
	struct cg_leaf leaf;
	struct cg_files files;
};

/* A leaf that still holds what its run's kernel objects were charged is
 * tried again this long after, a few times, before it goes. */
#define COOL_MS 50
#define COOL_TRIES 4

static struct {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool started, quit;
	struct pooled *ready, *back; /* newest first */
	struct pooled *cool;         /* renewals put off, in the order they were */
	size_t nready, nback, ncool;
	size_t want;               /* ready or on their way back: the slots */
	struct cg_limits hint;     /* what new leaves get: the last task's limits */
	bool fresh_failed;         /* the last new leaf could not be made */
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* cg_host changes when a v2 parent is prepared: one leaf made or fitted at
 * a time, by the thread or the loop. */
static pthread_mutex_t host_mu = PTHREAD_MUTEX_INITIALIZER;

static void leaf_name(char *name, size_t len)
{
	static unsigned seq;
	snprintf(name, len, "kart.%d.%u", (int)getpid(), __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
}

static int leaf_make(struct cg_leaf *l, const struct cg_limits *lim, char *err, size_t errlen)
{
	char name[64];
	leaf_name(name, sizeof name);
	pthread_mutex_lock(&host_mu);
	int r = cg_leaf_create(&cg_host, l, name, lim, err, errlen);
	pthread_mutex_unlock(&host_mu);
	return r;
}

/* A leaf's name for the log: one of its directories. */
static const char *leaf_path(const struct cg_leaf *l)
{
	for (int s = 0; s < CG__SLOTS; s++)
		if (l->path[s][0])
			return l->path[s];
	return "(none)";
}

static void pooled_remove(struct pooled *p)
{
	cg_files_close(&p->files);
	int r = cg_leaf_remove(&p->leaf);
	if (r < 0)
		logmsg("cannot remove the cgroup %s: %s", leaf_path(&p->leaf), strerror(-r));
	free(p);
}

static int pooled_renew(struct pooled *p)
{
	char name[64];
	leaf_name(name, sizeof name);
	pthread_mutex_lock(&host_mu);
	int r = cg_leaf_renew(&cg_host, &p->leaf, &p->files, name);
	pthread_mutex_unlock(&host_mu);
	return r;
}

static bool pool_short(void)
{
	return pool.nready + pool.nback + pool.ncool < pool.want && !pool.fresh_failed;
}

/* The descriptors the spawn will want (the unified directory, the v1
 * tasks files), opened here rather than at the claim. */
static void pooled_prime(struct pooled *p)
{
	int fds[CG__SLOTS];
	(void)cg_files_dir(&p->leaf, &p->files);
	(void)cg_leaf_join_fds(&p->leaf, &p->files, fds, CG__SLOTS);
}

static void *pool_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&pool.mu);
	for (;;) {
		struct pooled *p = pool.back;
		if (!p && pool.cool && (pool.quit || pool.cool->again_mono <= now_mono_ms())) {
			p = pool.cool;
			pool.cool = p->next;
			pool.ncool--;
			p->next = NULL;
			pool.back = p;
			pool.nback++;
		}
		if (p) {
			pool.back = p->next;
			pool.nback--;
			bool keep = !p->dead && !pool.quit && pool.nready < 2 * pool.want;
			pthread_mutex_unlock(&pool.mu);
			int r = keep ? pooled_renew(p) : 0;
			if (r == -EAGAIN && ++p->tries < COOL_TRIES) {
				pthread_mutex_lock(&pool.mu);
				p->again_mono = now_mono_ms() + COOL_MS;
				struct pooled **q = &pool.cool;
				while (*q)
					q = &(*q)->next;
				p->next = NULL;
				*q = p;
				pool.ncool++;
				continue;
			}
			if (r < 0) {
				keep = false;
				if (r != -ESTALE && r != -EAGAIN)
					logmsg("cannot renew the cgroup %s for the next task: %s",
					       leaf_path(&p->leaf), strerror(-r));
			}
			if (keep)
				pooled_prime(p);
			pthread_mutex_lock(&pool.mu);
			if (keep) {
				p->tries = 0;
				p->next = pool.ready;
				pool.ready = p;
				pool.nready++;
			} else {
				pthread_mutex_unlock(&pool.mu);
				pooled_remove(p);
				pthread_mutex_lock(&pool.mu);
			}
			continue;
		}
		if (pool.quit && !pool.cool)
			break;
		if (!pool.quit && pool_short()) {
			struct cg_limits lim = pool.hint;
			pthread_mutex_unlock(&pool.mu);
			char err[256];
			p = xcalloc(1, sizeof *p);
			cg_files_init(&p->files);
			int r = leaf_make(&p->leaf, &lim, err, sizeof err);
			if (r == 0)
				pooled_prime(p);
			pthread_mutex_lock(&pool.mu);
			if (r == 0) {
				p->next = pool.ready;
				pool.ready = p;
				pool.nready++;
			} else {
				/* The task that needs one makes it, and says why not. */
				pool.fresh_failed = true;
				free(p);
			}
			continue;
		}
		if (pool.cool) {
			/* CLOCK_MONOTONIC: the condition's clock (pool_start). */
			int64_t at = pool.cool->again_mono;
			struct timespec ts = {.tv_sec = at / 1000, .tv_nsec = (at % 1000) * 1000000};
			(void)pthread_cond_timedwait(&pool.cv, &pool.mu, &ts);
		} else
			pthread_cond_wait(&pool.cv, &pool.mu);
	}
	pthread_mutex_unlock(&pool.mu);
	return NULL;
}

/* Every signal stays blocked in it, as in the loop that starts it. */
static void pool_start(void)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_destroy(&pool.cv);
	pthread_cond_init(&pool.cv, &ca);
	pthread_condattr_destroy(&ca);
	int e = pthread_create(&pool.th, NULL, pool_main, NULL);
	if (e) {
		logmsg("cannot start the thread of the cgroup leaves: %s; each task makes its own",
		       strerror(e));
		return;
	}
	thread_name(pool.th, "leaf");
	pool.started = true;
}

/* What a task's leaf holds: its limits, defaults applied. */
static struct cg_limits lim_of(const struct worker *w, const struct task_spec *spec)
{
	return (struct cg_limits){.memory = spec->memory, .pids = spec->pids,
				  .cpu_milli = spec->cpu_milli, .memory_peak = w->pol->leaf_memory};
}

/* At start-up: the pool's first leaves are made before the first task
 * comes, with the limits of a task that asks for none. None for a
 * backend whose engine holds the limits (it makes no leaf). */
void leaves_start(struct worker *w)
{
	if (w->be->engine_limits || !w->fds.keep || !cg_usable(w))
		return;
	struct task_spec spec = {.lane = LANE_FAST};
	limits_apply_defaults(&spec, w->pol);
	pool.hint = lim_of(w, &spec);
	pool.want = (size_t)w->slots[LANE_FAST] + (size_t)w->slots[LANE_BATCH];
	pool_start();
}

static bool lim_eq(const struct cg_limits *a, const struct cg_limits *b)
{
	return a->memory == b->memory && a->pids == b->pids && a->cpu_milli == b->cpu_milli &&
	       a->memory_peak == b->memory_peak;
}

/* A ready leaf, one with these limits where there is one; NULL: none. */
static struct pooled *pool_take(const struct cg_limits *lim, size_t want)
{
	pthread_mutex_lock(&pool.mu);
	if (!lim_eq(&pool.hint, lim))
		pool.fresh_failed = false; /* other limits may do */
	pool.hint = *lim;
	pool.want = want;
	struct pooled **pp = &pool.ready;
	for (struct pooled **q = &pool.ready; *q; q = &(*q)->next)
		if (lim_eq(&(*q)->leaf.lim, lim)) {
			pp = q;
			break;
		}
	struct pooled *p = *pp;
	if (p) {
		*pp = p->next;
		pool.nready--;
	}
	if (pool_short())
		pthread_cond_signal(&pool.cv);
	pthread_mutex_unlock(&pool.mu);
	return p;
}

/* The leaf of a task back to the thread: renewed or removed there. */
static void pool_give(struct cg_leaf *l, struct cg_files *f, bool dead)
{
	struct pooled *p = xcalloc(1, sizeof *p);
	p->leaf = *l;
	p->files = *f;
	p->dead = dead;
	l->used = 0; /* the task's no more */
	cg_files_init(f);
	pthread_mutex_lock(&pool.mu);
	p->next = pool.back;
	pool.back = p;
	pool.nback++;
	pthread_cond_signal(&pool.cv);
	pthread_mutex_unlock(&pool.mu);
}

/* After the run, its leaf empty and its usage read: back to the pool.
 * False where there is no pool (the caller removes it). */
static bool leaf_back(struct task *t)
{
	if (!pool.started || !t->leaf.files_kept)
		return false;
	/* A pause froze it, or stopped what it held. */
	bool paused = t->pause.how != PAUSE_NONE || t->pause.since_mono;
	pool_give(&t->leaf.cg, &t->leaf.files, paused || !cg_leaf_reusable(&t->leaf.cg));
	return true;
}

void leaves_drop(void)
{
	if (!pool.started)
		return;
	pthread_mutex_lock(&pool.mu);
	pool.quit = true;
	pthread_cond_signal(&pool.cv);
	pthread_mutex_unlock(&pool.mu);
	pthread_join(pool.th, NULL);
	pool.started = pool.quit = false;
	while (pool.ready) {
		struct pooled *p = pool.ready;
		pool.ready = p->next;
		pooled_remove(p);
	}
	pool.nready = 0;
}

/* The leaf's files kept with the task, or NULL where none are kept
 * (fd_budget: then the spawn opened the directory for itself only). */
static struct cg_files *task_files(struct task *t) { return t->leaf.files_kept ? &t->leaf.files : NULL; }

/* The usage of the run: what the leaf counted since the run began. */
static void task_usage(struct task *t) { (void)cg_usage_read(&t->leaf.cg, &t->leaf.use, task_files(t)); }

int task_cgroup(struct worker *w, struct task *t, char *err, size_t errlen)
{
	if (!cg_usable(w)) {
		snprintf(err, errlen, "no usable cgroup filesystem on this host");
		return -ENODEV;
	}
	struct cg_limits lim = lim_of(w, &t->spec);
	t->leaf.files_kept = w->fds.keep;
	if (w->fds.keep) {
		if (!pool.started)
			pool_start();
		struct pooled *p = pool.started ? pool_take(&lim, (size_t)w->slots[LANE_FAST] +
								  (size_t)w->slots[LANE_BATCH])
						: NULL;
		if (p) {
			t->leaf.cg = p->leaf;
			t->leaf.files = p->files;
			free(p);
			if (lim_eq(&t->leaf.cg.lim, &lim))
				return 0;
			char name[64];
			leaf_name(name, sizeof name);
			pthread_mutex_lock(&host_mu);
			int r = cg_leaf_fit(&cg_host, &t->leaf.cg, name, &lim, err, errlen);
			pthread_mutex_unlock(&host_mu);
			if (r == 0)
				return 0;
			/* Half-way to other limits: never run in it. */
			pool_give(&t->leaf.cg, &t->leaf.files, true);
		}
	}
	/* Leaves of workers killed -9 are swept at start-up and when a dead
	 * peer is recovered (peer_dead), before its claims can run again:
	 * not here, where it would cost a scan of every hierarchy per task. */
	int r = leaf_make(&t->leaf.cg, &lim, err, errlen);
	if (r == 0 && pool.started) {
		pthread_mutex_lock(&pool.mu);
		pool.fresh_failed = false; /* it works again */
		pthread_mutex_unlock(&pool.mu);
	}
	return r;
}

/* The descriptors of the child's join (run.h, struct run_join): born in
 * the unified leaf (ufd, or -1), and joined to the v1 ones by itself, by
 * descriptors kept with the task; where none are kept, joined by the
 * spawn thread after a fork. */
void leaf_join_setup(struct task *t, struct leaf_join *lj, int ufd)
{
	bool uni = t->leaf.cg.used & (1u << CG_UNIFIED);
	int n = 0;
	if (t->leaf.cg.used & ~(1u << CG_UNIFIED))
		n = t->leaf.files_kept ? cg_leaf_join_fds(&t->leaf.cg, &t->leaf.files, lj->self, CG__SLOTS) : -1;
	lj->rj.self_fds = lj->self;
	lj->rj.nself = n > 0 ? n : 0;
	lj->rj.born_is_enough = n >= 0 && (!uni || ufd >= 0);
}

int join_leaf(pid_t pid, void *arg)
{
	struct leaf_join *lj = arg;
	return lj->rj.born ? cg_join_born(lj->leaf, pid) : cg_join(lj->leaf, pid);
}

/* Kill whatever is left in the task's leaf (daemons included), read
 * what it used, remove it (or give it back to the pool: a leaf no
 * process was in is as it was). */
void task_cgroup_end(struct task *t)
{
	if (!t->leaf.cg.used)
		return;
	int r = 0;
	if (cg_leaf_populated(&t->leaf.cg, task_files(t)) && (r = cg_leaf_kill(&t->leaf.cg, 2000)) < 0)
		logmsg("%s: its cgroup is not empty after the kill: %s", t->name, strerror(-r));
	task_usage(t);
	if (r == 0 && leaf_back(t))
		return;
	if ((r = cg_leaf_remove(&t->leaf.cg)) < 0)
		logmsg("%s: cannot remove its cgroup: %s", t->name, strerror(-r));
}

/* ---- the leaf after the run ----------------------------------------------- */

/* The leaf after the run: killed, then watched until it is empty (no
 * waiting in the loop: other tasks are claimed and finished meanwhile).
 * cgroup.events raises IN_MODIFY when "populated" changes; the timer is
 * a fallback, and the only way where there is no unified directory. */
#define DRAIN_POLL_MS 250
#define DRAIN_POLL_FAST_MS 20
#define DRAIN_GIVE_UP_MS 10000
/* What the reaped process leaves may be on its way out by itself: bwrap's
 * pid 1, which the monitor does not wait for, often is. It gets this long
 * before the kill, which would leave the leaf unfit for another run. */
#define DRAIN_SETTLE_MS 20

static bool drain_step(struct worker *w, struct task *t)
{
	int64_t now = now_mono_ms();
	bool late = now >= t->leaf.drain_end;
	bool empty = !cg_leaf_populated(&t->leaf.cg, task_files(t));
	if (!empty) {
		if (!late) {
			if (t->leaf.settle_end && now < t->leaf.settle_end)
				return false;
			if (t->leaf.settle_end) {
				t->leaf.settle_end = 0;
				t->leaf.atomic = cg_leaf_kill_start(&t->leaf.cg) == 1;
			} else if (!t->leaf.atomic)
				(void)cg_leaf_kill_start(&t->leaf.cg); /* what forked since */
			return false;
		}
		logmsg("%s: its cgroup is not empty %ds after the kill", t->name,
		       DRAIN_GIVE_UP_MS / 1000);
	}
	return drain_done(w, t, empty, late);
}

/* One look: true once the leaf is empty (or given up on), its usage
 * read and its directories removed. */
static bool drain_done(struct worker *w, struct task *t, bool empty, bool late)
{
	if (!t->leaf.use_read) {
		task_usage(t);
		t->leaf.use_read = true;
	}
	if (t->leaf.wd >= 0) {
		(void)inotify_rm_watch(w->ino, t->leaf.wd);
		t->leaf.wd = -1;
	}
	/* Empty: nothing of the run is alive (a task leaves its leaf after
	 * it has let go of its files and its cwd). */
	if (empty && leaf_back(t)) {
		t->leaf.empty = true;
		return true;
	}
	int r = cg_leaf_remove_nowait(&t->leaf.cg);
	if (r == -EBUSY && !late)
		return false; /* the kernel still lets go of the dead */
	/* The kernel removes only an empty leaf: nothing of the run lives. */
	t->leaf.empty = r == 0;
	if (r < 0)
		logmsg("%s: cannot remove its cgroup: %s", t->name, strerror(-r));
	return true;
}

/* Returns true when the task waits in TS_DRAINING for its leaf to
 * empty. */
bool drain_begin(struct worker *w, struct task *t)
{
	if (!t->leaf.cg.used)
		return false;
	t->leaf.drain_end = now_mono_ms() + DRAIN_GIVE_UP_MS;
	if (!cg_leaf_populated(&t->leaf.cg, task_files(t))) {
		/* Most runs leave nothing behind their reaped process: then
		 * there is nothing to kill. (Its rmdir may still be refused
		 * for a moment: then it waits below like any other.) */
		if (drain_done(w, t, true, false))
			return false;
	} else {
		t->leaf.settle_end = now_mono_ms() + DRAIN_SETTLE_MS;
	}
	char ev[CG_PATH_MAX + 32];
	if (cg_leaf_events(&t->leaf.cg, ev, sizeof ev) == 0)
		t->leaf.wd = inotify_add_watch(w->ino, ev, IN_MODIFY);
	/* It may have emptied before the watch existed. */
	if (drain_step(w, t))
		return false;
	drain_again(t);
	return true;
}

/* When to look again without an event: at the end of the settling, then
 * by the timer. */
static void drain_again(struct task *t)
{
	t->retry_mono = t->leaf.settle_end ? t->leaf.settle_end
				      : now_mono_ms() + (t->leaf.wd >= 0 ? DRAIN_POLL_MS : DRAIN_POLL_FAST_MS);
}

/* Another look: true once the leaf is empty (or given up on). */
bool drain_poll(struct worker *w, struct task *t)
{
	if (drain_step(w, t))
		return true;
	drain_again(t);
	return false;
}

/* An inotify event on a watch of ours? The draining task it is for, whose
 * TE_AGAIN the loop fires: the leaf reports, the state table acts. */
struct task *drain_event(struct worker *w, int wd)
{
	for (struct task *t = w->tasks; t; t = t->next)
		if ((t->state == TS_DRAINING || t->state == TS_DYING) && t->leaf.wd == wd)
			return t;
	return NULL;
}
