/* worker_leaf.c - the per-task cgroup leaf: made, kept for the next run,
 * drained after the run. */
#define _GNU_SOURCE
#include <sys/inotify.h>

#include "worker_int.h"

static bool drain_done(struct worker *w, struct task *t, bool empty, bool late);

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

/* ---- leaves kept for the next run ----------------------------------------- */

/* A leaf's mkdir and rmdir cost the loop about 45 us per task: kernfs
 * makes and unmakes every one of its files. A leaf that is only the
 * unified directory of a task without limits holds no state but
 * cpu.stat's counters, which only grow: once the kernel says it is
 * empty it is as good as new. So it is kept for the next task without
 * limits, which is born in it (CLONE_INTO_CGROUP), and whose CPU times
 * count from the reading the last run ended with. A leaf with a limit or
 * a controller's counters (memory.peak, memory.events) is never kept;
 * nor one that was ever sent a kill (cg_leaf_reusable says why;
 * test_killed_leaf_not_kept). Most runs of backend none leave nothing to
 * kill; bwrap's often do.
 * Kept leaves are removed as soon as the worker has nothing to run, and
 * at exit; a crash's are swept like any leaf of a dead worker. */
#define KEPT_MAX 4
static struct kept_leaf {
	struct cg_leaf leaf;
	struct cg_cpu end;
	struct cg_files files; /* open, for the next task born in it */
} leaves_kept[KEPT_MAX];
static size_t nkept;

static bool no_limits(const struct task *t)
{
	return !t->spec.memory && !t->spec.pids && !t->spec.cpu_milli;
}

/* After the run, its leaf empty and its usage read: keep it? */
static bool leaf_keep(struct task *t)
{
	if (nkept == KEPT_MAX || !no_limits(t) || !cg_leaf_reusable(&t->cg) ||
	    t->cg_end.user_us < 0 || t->cg_end.system_us < 0 || t->cgu.memory_peak >= 0 ||
	    t->cgu.oom_kills >= 0)
		return false;
	leaves_kept[nkept++] = (struct kept_leaf){t->cg, t->cg_end, t->cgf};
	t->cg.used = 0; /* the task's no more */
	cg_files_init(&t->cgf);
	return true;
}

void leaves_drop(void)
{
	while (nkept > 0) {
		struct cg_leaf *l = &leaves_kept[--nkept].leaf;
		cg_files_close(&leaves_kept[nkept].files);
		int r = cg_leaf_remove(l);
		if (r < 0)
			logmsg("cannot remove the cgroup %s: %s", l->path[CG_UNIFIED], strerror(-r));
	}
}

/* The leaf's files kept with the task, or NULL where none are kept
 * (fd_budget: then the spawn opened the directory for itself only). */
static struct cg_files *task_files(struct task *t) { return t->cgf.dir >= 0 ? &t->cgf : NULL; }

/* The usage of the run: what the leaf counted since the run began. */
static void task_usage(struct task *t)
{
	(void)cg_usage_read(&t->cg, &t->cgu, task_files(t));
	t->cg_end = (struct cg_cpu){t->cgu.cpu_user_us, t->cgu.cpu_system_us};
	if (t->cgu.cpu_user_us >= 0 && t->cgu.cpu_system_us >= 0) {
		t->cgu.cpu_user_us -= t->cg_base.user_us;
		t->cgu.cpu_system_us -= t->cg_base.system_us;
	}
	for (int i = 0; i < CG_PSI__N; i++) {
		t->cg_end.pressure[i] = t->cgu.pressure[i];
		if (t->cg_base.pressure[i] >= 0 && t->cgu.pressure[i] >= t->cg_base.pressure[i])
			t->cgu.pressure[i] -= t->cg_base.pressure[i];
		else
			t->cgu.pressure[i] = -1;
	}
}

int task_cgroup(struct worker *w, struct task *t, char *err, size_t errlen)
{
	static unsigned seq;
	if (!cg_usable(w)) {
		snprintf(err, errlen, "no usable cgroup filesystem on this host");
		return -ENODEV;
	}
	if (nkept > 0 && no_limits(t)) {
		struct kept_leaf *k = &leaves_kept[--nkept];
		t->cg = k->leaf;
		t->cg_base = k->end;
		t->cgf = k->files;
		return 0;
	}
	t->cg_base = (struct cg_cpu){0, 0, {0}};
	/* Leaves of workers killed -9 are swept at start-up and when a dead
	 * peer is recovered (peer_dead), before its claims can run again:
	 * not here, where it would cost a scan of every hierarchy per task. */
	char leaf[64];
	snprintf(leaf, sizeof leaf, "kart.%d.%u", (int)getpid(), ++seq);
	struct cg_limits lim = {.memory = t->spec.memory, .pids = t->spec.pids,
				.cpu_milli = t->spec.cpu_milli, .memory_peak = w->pol->leaf_memory};
	return cg_leaf_create(&cg_host, &t->cg, leaf, &lim, err, errlen);
}

int join_leaf(pid_t pid, void *arg)
{
	struct leaf_join *lj = arg;
	return lj->rj.born ? cg_join_born(lj->leaf, pid) : cg_join(lj->leaf, pid);
}

/* Kill whatever is left in the task's leaf (daemons included), read
 * what it used, remove it. */
void task_cgroup_end(struct task *t)
{
	if (!t->cg.used)
		return;
	int r = cg_leaf_kill(&t->cg, 2000);
	if (r < 0)
		logmsg("%s: its cgroup is not empty after the kill: %s", t->name, strerror(-r));
	task_usage(t);
	if ((r = cg_leaf_remove(&t->cg)) < 0)
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

static bool drain_step(struct worker *w, struct task *t)
{
	bool late = now_mono_ms() >= t->drain_end;
	bool empty = !cg_leaf_populated(&t->cg, task_files(t));
	if (!empty) {
		if (!late) {
			if (!t->cg_atomic)
				(void)cg_leaf_kill_start(&t->cg); /* what forked since */
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
	if (!t->cgu_read) {
		task_usage(t);
		t->cgu_read = true;
	}
	if (t->cg_wd >= 0) {
		(void)inotify_rm_watch(w->ino, t->cg_wd);
		t->cg_wd = -1;
	}
	if (empty && leaf_keep(t)) {
		t->cg_empty = true;
		return true;
	}
	int r = cg_leaf_remove_nowait(&t->cg);
	if (r == -EBUSY && !late)
		return false; /* the kernel still lets go of the dead */
	/* The kernel removes only an empty leaf: nothing of the run lives. */
	t->cg_empty = r == 0;
	if (r < 0)
		logmsg("%s: cannot remove its cgroup: %s", t->name, strerror(-r));
	return true;
}

/* Returns true when the task waits in TS_DRAINING for its leaf to
 * empty. */
bool drain_begin(struct worker *w, struct task *t)
{
	if (!t->cg.used)
		return false;
	t->drain_end = now_mono_ms() + DRAIN_GIVE_UP_MS;
	if (!cg_leaf_populated(&t->cg, task_files(t))) {
		/* Most runs leave nothing behind their reaped process: then
		 * there is nothing to kill. (Its rmdir may still be refused
		 * for a moment: then it waits below like any other.) */
		if (drain_done(w, t, true, false))
			return false;
	} else {
		t->cg_atomic = cg_leaf_kill_start(&t->cg) == 1;
		if (drain_step(w, t))
			return false;
	}
	char ev[CG_PATH_MAX + 32];
	if (cg_leaf_events(&t->cg, ev, sizeof ev) == 0)
		t->cg_wd = inotify_add_watch(w->ino, ev, IN_MODIFY);
	/* It may have emptied before the watch existed. */
	if (drain_step(w, t))
		return false;
	t->retry_mono = now_mono_ms() + (t->cg_wd >= 0 ? DRAIN_POLL_MS : DRAIN_POLL_FAST_MS);
	return true;
}

/* Another look: true once the leaf is empty (or given up on). */
bool drain_poll(struct worker *w, struct task *t)
{
	if (drain_step(w, t))
		return true;
	t->retry_mono = now_mono_ms() + (t->cg_wd >= 0 ? DRAIN_POLL_MS : DRAIN_POLL_FAST_MS);
	return false;
}

/* An inotify event on a watch of ours? The draining task it is for, whose
 * TE_AGAIN the loop fires: the leaf reports, the state table acts. */
struct task *drain_event(struct worker *w, int wd)
{
	for (struct task *t = w->tasks; t; t = t->next)
		if ((t->state == TS_DRAINING || t->state == TS_DYING) && t->cg_wd == wd)
			return t;
	return NULL;
}
