/* worker.c - one event loop (epoll over inotify, a signalfd, per-task
 * pidfds and output pipes, and one timerfd) driving each task through a
 * small state machine.
 *
 * inotify is only a doorbell: every event, an overflow and the start-up
 * all lead to looking at the directory itself. Nothing here polls: with
 * nothing running the timer is disarmed and the loop sleeps. */
#define _GNU_SOURCE
#include "worker.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/xattr.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <jansson.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "caps.h"
#include "cgroup.h"
#include "confine.h"
#include "container.h"
#include "rlimits.h"
#include "log.h"
#include "result.h"
#include "binds.h"
#include "run.h"
#include "sandbox.h"
#include "seccomp.h"
#include "space.h"
#include "task.h"
#include "util.h"
#include "worker_control.h"

/* ---- the task lifecycle ------------------------------------------------ */

/* TS_STOPPING: sent SIGTERM (a timeout, a cancel), its kill grace running. */
enum tstate { TS_RUNNING, TS_KILLING, TS_PUBLISHING, TS_DRAINING, TS_SPAWNING, TS_STOPPING, TS__N };
enum tevent { TE_EXIT, TE_TIMEOUT, TE_CANCEL, TE_GRACE_OVER, TE__N };
enum tend { END_NATURAL, END_TIMEOUT, END_CANCEL, END_REQUEUE };

/* What each event does in each state (s6-supervise's actions table). */
enum taction { TA_NONE, TA_FINISH, TA_STOP_TIMEOUT, TA_STOP_CANCEL, TA_KILL_REQUEUE, TA_KILL,
	       TA_ABANDON };
static const enum taction transitions[TS__N][TE__N] = {
	[TS_RUNNING] = {[TE_EXIT] = TA_FINISH, [TE_TIMEOUT] = TA_STOP_TIMEOUT,
			[TE_CANCEL] = TA_STOP_CANCEL, [TE_GRACE_OVER] = TA_KILL_REQUEUE},
	/* TE_TIMEOUT here is the end of its kill grace; a shutdown's grace
	 * ending kills it too, keeping its end (it is not re-queued). */
	[TS_STOPPING] = {[TE_EXIT] = TA_FINISH, [TE_TIMEOUT] = TA_KILL, [TE_GRACE_OVER] = TA_KILL},
	[TS_KILLING] = {[TE_EXIT] = TA_FINISH},
	[TS_PUBLISHING] = {[TE_GRACE_OVER] = TA_ABANDON},
	[TS_DRAINING] = {TA_NONE}, /* reaped; its leaf is emptying */
	[TS_SPAWNING] = {TA_NONE}, /* with a spawn thread: see task_event */
};

enum srckind { SRC_INOTIFY, SRC_SIGNAL, SRC_TIMER, SRC_PIDFD, SRC_STDOUT, SRC_STDERR, SRC_WATCHDOG, SRC_HOOK,
	       SRC_COMMIT, SRC_SPAWN };

struct task;
struct src {
	enum srckind kind;
	struct task *t;
};

struct cg_cpu {
	int64_t user_us, system_us;
};

struct task {
	struct task *next;
	char *name;
	struct task_spec spec;
	struct claim_meta meta;
	enum tstate state;
	enum tend end;
	uid_t uid;
	int64_t submitted_ms, started_ms, deadline_mono; /* deadline 0: none */
	bool term_sent;      /* a timeout or cancel sent SIGTERM first */
	struct pause_state pause; /* kart pause: frozen, its clock stopped */
	int64_t retry_mono; /* publishing failed: try again then */
	struct run run;
	struct run_end rend;
	struct cg_leaf cg;   /* cg.mode != NONE: it ran in this leaf */
	struct cg_usage cgu; /* read from the leaf after the run */
	struct rl_plan rl;   /* the rlimits kart-launch sets (no leaf: the fallback) */
	int cg_wd;           /* draining: watch on the leaf's cgroup.events, or -1 */
	bool cg_atomic;      /* draining: cgroup.kill was sent (else kill again) */
	bool cgu_read;
	bool cg_empty;       /* its leaf was removed: nothing of the run is alive */
	struct cg_cpu cg_base; /* the leaf's CPU times when the run began (a kept leaf's) */
	struct cg_cpu cg_end;  /* and when it ended */
	struct cg_files cgf;   /* its leaf's files, kept open with it (leaf_keep) */
	bool slot_freed;     /* draining after cgroup.kill: its slot is free */
	bool scratch_retired; /* its work and tmp directories are gone (a spare, or removed) */
	/* Backend none: its work, tmp and $KART_OUTDIR directories, spares
	 * used under their own names (scratch_dir); "" once handed on. */
	char scr[3][24];
	/* and the change time each had as a spare, when it was older than
	 * the run (scratch_dir); {0, 0} if not */
	struct timespec scr_ct[3];
	int scr_fd[3]; /* and an O_PATH descriptor of each, or -1 */
	uid_t run_uid;       /* whom it ran as: owner of its scratch directories */
	int64_t drain_end;   /* draining: give up waiting then */
	bool seccomp;        /* its sandbox was handed the filter */
	int pending_ev;      /* spawning: TE_CANCEL or TE_GRACE_OVER + 1, for when it runs */
	char cname[160];     /* backend container: its container, or "" */
	int coom;            /* and its OOMKilled, read before its removal: 1, 0, -1 unknown */
	struct src s_pid, s_out, s_err;
	struct result res;
	char idbuf[256];
	char user[256], errbuf[1024]; /* storage for res.user, res.error */
	char home[TASK_BIND_PATH_MAX]; /* its HOME where a bind holds it, or "" */
	/* With the commit thread (from publish() until it hands the task
	 * back, the loop does not touch it): */
	struct task *cnext;
	int commit_err;     /* 0: published; else -errno of the failed step */
	bool commit_output; /* the failure was an fsync of its output */
	struct json_pending jpend; /* its JSON, staged and not yet committed */
};

/* ---- the commit thread: results made durable off the event loop --------
 *
 * Publishing a result costs four fsyncs (stdout, stderr, the JSON, done/).
 * Done in the loop, they stalled claiming and spawning for every slot. The
 * loop hands finished tasks to this thread, which takes all that have
 * queued up, stages each result (outputs fsynced, id reserved, JSON
 * written and fsynced), fsyncs done/ once for the batch (group commit),
 * then removes each claim, and hands them back through an eventfd. The
 * order of steps per task, and so every crash state, is unchanged
 * (spool-layout §7). The thread touches only the spool and the tasks it
 * was given. */
/* A thread beside the loop (the commit thread, the spawn threads): its
 * lock and condition over its queues, and the eventfd through which it
 * hands work back to the loop. */
struct helper {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool quit, started;
	int efd;
	struct src src;
};

struct commit {
	struct helper h;
	struct task *todo, *done; /* linked by cnext */
	struct spool *sp;
	int wdir;
	int writes_max; /* results written before their fsyncs, at most (under h.mu) */
};

/* Results written at once before their fsyncs (json_pending): enough
 * for the disk to take them together, few enough descriptors (one where
 * the worker keeps none across runs, fd_budget). */
#define COMMIT_WRITES_MAX 16

/* Everything of a result but the fsync of done/: the outputs fsynced,
 * the entries linked, the JSON written and fsynced. Up to
 * writes_max at a time, each step for all of them before the
 * next: the outputs' data and then the JSONs' are sent to the disk
 * together, and each fsync mostly finds its writes done (drains of
 * 2,000 tasks here: about 200 us a result one after the other, about 70
 * in groups; docs/PERFORMANCE.md, ninth pass). */
static void commit_stage(struct commit *c, struct task *batch, int writes_max)
{
	for (struct task *first = batch, *end; first; first = end) {
		end = first;
		for (int n = 0; end && n < writes_max; n++, end = end->cnext) {
			end->commit_err = 0;
			end->commit_output = false;
			end->jpend = JSON_PENDING_NONE;
			if (end->run.out.file >= 0)
				(void)sync_file_range(end->run.out.file, 0, 0, SYNC_FILE_RANGE_WRITE);
			if (end->run.err.file >= 0)
				(void)sync_file_range(end->run.err.file, 0, 0, SYNC_FILE_RANGE_WRITE);
		}
		for (struct task *t = first; t != end; t = t->cnext) {
			int files[] = {t->run.out.file, t->run.err.file};
			for (int i = 0; i < 2 && !t->commit_err; i++)
				if (files[i] >= 0 && fsync(files[i]) < 0) {
					/* Never report done on a failed fsync. */
					t->commit_err = -errno;
					t->commit_output = true;
				}
			if (!t->commit_err)
				t->commit_err = spool_finish_stage(c->sp, c->wdir, t->name, true,
								   &t->res, t->idbuf, sizeof t->idbuf,
								   &t->jpend);
		}
		for (struct task *t = first; t != end; t = t->cnext)
			if (!t->commit_err)
				t->commit_err = spool_json_commit(c->sp, &t->jpend);
	}
}

/* One fsync of done/ for every result staged, then the claims go. */
static void commit_finish(struct commit *c, struct task *batch)
{
	bool any = false;
	for (struct task *t = batch; t; t = t->cnext)
		any |= !t->commit_err;
	if (any && fsync(c->sp->done) < 0) {
		/* Every result of the batch is in doubt: each is retried,
		 * and a retry writes its entries anew (spool_finish). */
		int e = -errno;
		for (struct task *t = batch; t; t = t->cnext)
			if (!t->commit_err)
				t->commit_err = e;
	}
	for (struct task *t = batch; t; t = t->cnext)
		if (!t->commit_err)
			t->commit_err = spool_finish_complete(
				c->sp, c->wdir, t->name, true, t->idbuf,
				(t->scratch_retired ? SCRATCH_RUN_GONE : 0) |
					(t->res.outdir_gone ? SCRATCH_OUT_GONE : 0));
}

/* A group commit takes what is queued, and what is queued while it
 * stages that (a result's fsync waits on the disk, and tasks end
 * meanwhile), up to this many, before its one fsync of done/. */
#define COMMIT_GROUP_MAX 64

static void *commit_main(void *arg)
{
	struct commit *c = arg;
	pthread_mutex_lock(&c->h.mu);
	for (;;) {
		while (!c->todo && !c->h.quit)
			pthread_cond_wait(&c->h.cv, &c->h.mu);
		if (!c->todo)
			break;
		struct task *all = NULL, **tail = &all;
		int n = 0;
		while (c->todo && n < COMMIT_GROUP_MAX) {
			/* Oldest first (the list is pushed at its head). */
			struct task *batch = NULL;
			for (struct task *t = c->todo, *nx; t; t = nx) {
				nx = t->cnext;
				t->cnext = batch;
				batch = t;
				n++;
			}
			c->todo = NULL;
			int wm = c->writes_max; /* the loop's to change (SIGHUP) */
			pthread_mutex_unlock(&c->h.mu);
			commit_stage(c, batch, wm);
			*tail = batch;
			while (*tail)
				tail = &(*tail)->cnext;
			pthread_mutex_lock(&c->h.mu);
		}
		pthread_mutex_unlock(&c->h.mu);
		commit_finish(c, all);
		pthread_mutex_lock(&c->h.mu);
		*tail = c->done;
		c->done = all;
		uint64_t one = 1;
		(void)!write(c->h.efd, &one, sizeof one);
	}
	pthread_mutex_unlock(&c->h.mu);
	return NULL;
}

/* ---- the spawn threads: the child's set-up off the event loop -----------
 *
 * From clone to exec the spawned child runs in our memory, and the thread
 * that cloned it sleeps (run.c, spawn_vm). That time is the child's
 * set-up, its confinement with backend none (Landlock, seccomp), the
 * first half of its execve, and the scheduler's delays in between: about
 * 0.5 ms per task here, which capped the loop near 1,100 tasks/s while a
 * core sat idle. A v1 join (cgroup.procs) waits 5-11 ms more. So the
 * loop prepares everything, then hands the spawn to a spawn thread
 * (SPAWN_THREADS of them take jobs from one queue) and goes on; the task
 * waits in TS_SPAWNING, holding its slot, and comes back through an
 * eventfd. A spawn thread touches only its job, its task's run and cgroup
 * leaf, and nothing the loop reads while a task spawns. Each has its own
 * stack for spawn_vm's children, and a child's PDEATHSIG follows the
 * thread that cloned it: all of them live as long as the loop. */
struct spawn_job {
	struct spawn_job *next;
	struct task *t;
	struct strv argv, envp;
	char *cwd;
	bool pgroup, use_join, use_cred, is_direct;
	uint64_t cap;
	int ufd, sfd, rc;
	int ifd; /* backend container: the CLI's stdin (container_env_input), or -1 */
	bool ufd_owned; /* else ufd is the task's (t->cgf) */
	struct run_cred cred;
	struct confine conf;
	bool inherit;		 /* for a thread that holds the outer half */
	struct run_direct direct;
	/* The task's binds, opened in the spawn thread as the submitter
	 * (bcred; use_bcred false: as the worker, who is the submitter). */
	bool use_bcred;
	struct run_cred bcred;
	const char *spool;
	int bind_rc; /* binds_open's: -EACCES rejects the task */
	char bind_err[640];
	int umask;
	struct leaf_join {
		struct run_join rj;
		const struct cg_leaf *leaf;
	} lj;
};

/* Two: while one sleeps through a child's set-up, the other starts the
 * next task (drains of 3,000 tasks with backend none, one against two in
 * turns: +5-9 %, and the cores' idle time from 11 % to 7 %). */
#define SPAWN_THREADS 2

/* Backend none has SPAWN_THREADS more, started at its first task, that
 * each load the outer half of the split filter (seccomp.h) on themselves.
 * Every child they clone is born under it, shared and not copied, and
 * loads only the seven instructions of the inner half before its exec:
 * the whole program's load (its JIT, the action cache filled by running
 * it for every syscall number, and its free at exit) cost each task
 * about 0.1 ms of CPU here (docs/PERFORMANCE.md, seventh pass). The
 * outer half lets clone3 through, so these threads can still clone
 * into a cgroup; the inner half refuses it to the task. They take only
 * jobs of backend none (nothing else may be born under that filter);
 * one whose load failed spawns with the whole program, as the others
 * do. */
struct spawner {
	struct helper h; /* the first thread; its lock, condition and eventfd serve all */
	pthread_t more[SPAWN_THREADS - 1];
	int nmore;
	struct spawn_job *todo, *done; /* todo in order; done pushed at its head */
	int wdir;
	pthread_cond_t cvf;		/* the filtered threads' */
	struct spawn_job *todof;	/* their queue, in order */
	pthread_t fth[SPAWN_THREADS];
	int nf;
	const struct sock_fprog *outer, *inner; /* what they load, what their children do */
};

static void spawn_loop(struct spawner *sp, bool filtered, bool holds_outer)
{
	pthread_mutex_lock(&sp->h.mu);
	struct spawn_job **q = filtered ? &sp->todof : &sp->todo;
	pthread_cond_t *cv = filtered ? &sp->cvf : &sp->h.cv;
	for (;;) {
		while (!*q && !sp->h.quit)
			pthread_cond_wait(cv, &sp->h.mu);
		struct spawn_job *j = *q;
		if (!j)
			break;
		*q = j->next;
		pthread_mutex_unlock(&sp->h.mu);
		struct task *t = j->t;
		if (holds_outer && j->inherit)
			j->direct.filter = sp->inner;
		/* Opened here, off the loop: a path on a slow disk stalls
		 * this thread alone. */
		struct binds_opened bo = {.n = 0};
		j->bind_rc = binds_open(&t->spec, j->use_bcred ? &j->bcred : NULL, j->spool, &bo,
					j->bind_err, sizeof j->bind_err);
		struct run_extra x = {.fds = bo.fd, .nfds = j->is_direct ? 0 : bo.n,
				      .fd_base = SANDBOX_BIND_FD, .umask = j->umask};
		/* Backend none binds nothing: its cwd= is entered by the
		 * descriptor that was checked, not by the path. */
		char fdcwd[64];
		const char *cwd = j->cwd;
		if (j->is_direct && t->spec.cwd >= 0 && bo.n > t->spec.cwd) {
			snprintf(fdcwd, sizeof fdcwd, "/proc/self/fd/%d", bo.fd[t->spec.cwd]);
			cwd = fdcwd;
		}
		char lockname[NAME_MAX + 8];
		if (pathfmt(lockname, sizeof lockname, ".%s.lock", t->name) < 0)
			lockname[0] = '\0'; /* the child fails "run lock" */
		j->rc = j->bind_rc < 0 ? j->bind_rc
			: run_spawn_join(&t->run, j->argv.v, j->envp.v, sp->wdir, lockname, -1, -1, j->cap,
					 cwd, j->pgroup, j->use_join ? &j->lj.rj : NULL,
					 j->use_cred ? &j->cred : NULL, j->sfd, j->ifd,
					 j->is_direct ? &j->direct : NULL, &x);
		binds_close(&bo);
		pthread_mutex_lock(&sp->h.mu);
		j->next = sp->done;
		sp->done = j;
		uint64_t one = 1;
		(void)!write(sp->h.efd, &one, sizeof one);
	}
	pthread_mutex_unlock(&sp->h.mu);
}

static void *spawn_main(void *arg)
{
	spawn_loop(arg, false, false);
	return NULL;
}

static void *spawn_main_filtered(void *arg)
{
	struct spawner *sp = arg;
	/* This thread alone: no_new_privs and a filter are per thread. */
	bool held = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
		    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, sp->outer) == 0;
	if (!held)
		logmsg("seccomp: a spawn thread cannot load the outer filter (%s); its tasks "
		       "load the whole program", strerror(errno));
	spawn_loop(sp, true, held);
	return NULL;
}

/* ---- candidates: tasks seen in new/, ordered by priority then arrival -- */

struct cand {
	char *name;
	int prio;
	uint64_t turn; /* its submitter's turn (fair_turn): round-robin within a priority */
	int64_t arrived_ms;
	uint64_t seq;
	uid_t uid;
};

struct heap {
	struct cand *v;
	size_t n, cap;
};

static bool cand_less(const struct cand *a, const struct cand *b)
{
	if (a->prio != b->prio)
		return a->prio < b->prio;
	if (a->turn != b->turn)
		return a->turn < b->turn;
	if (a->arrived_ms != b->arrived_ms)
		return a->arrived_ms < b->arrived_ms;
	return a->seq < b->seq;
}

static void heap_push(struct heap *h, struct cand c)
{
	if (h->n == h->cap) {
		h->cap = h->cap ? h->cap * 2 : 64;
		h->v = xrealloc(h->v, h->cap * sizeof *h->v);
	}
	size_t i = h->n++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!cand_less(&c, &h->v[p]))
			break;
		h->v[i] = h->v[p];
		i = p;
	}
	h->v[i] = c;
}

static struct cand heap_pop(struct heap *h)
{
	struct cand top = h->v[0], last = h->v[--h->n];
	size_t i = 0;
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		const struct cand *best = &last;
		if (l < h->n && cand_less(&h->v[l], best))
			m = l, best = &h->v[l];
		if (r < h->n && cand_less(&h->v[r], best))
			m = r;
		if (m == i)
			break;
		h->v[i] = h->v[m];
		i = m;
	}
	if (h->n)
		h->v[i] = last;
	return top;
}

/* ---- fairness between submitters ---------------------------------------
 *
 * Round-robin across submitters within a lane and a priority (start-time
 * fair queueing): each task queued gets its submitter's next turn, never
 * earlier than the turn now being served. One user's 3,000 queued tasks
 * hold turns 1..3000; another's task, queued while turn 5 is served,
 * gets turn 5 and runs next, not after the 3,000. */
struct fair_user {
	uid_t uid;
	uint64_t last_turn; /* the last turn given to its tasks */
	int running;        /* its tasks running now, for [limits] slots_per_user */
};

struct fair {
	struct fair_user *v;
	size_t n, cap;
	uint64_t now; /* the turn of the task last claimed */
};

static struct fair_user *fair_get(struct fair *f, uid_t uid)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->v[i].uid == uid)
			return &f->v[i];
	if (f->n == f->cap) {
		f->cap = f->cap ? f->cap * 2 : 16;
		f->v = xrealloc(f->v, f->cap * sizeof *f->v);
	}
	f->v[f->n] = (struct fair_user){.uid = uid};
	return &f->v[f->n++];
}

static uint64_t fair_turn(struct fair *f, uid_t uid)
{
	struct fair_user *u = fair_get(f, uid);
	u->last_turn = u->last_turn + 1 > f->now ? u->last_turn + 1 : f->now;
	return u->last_turn;
}

/* ---- a set of names (what new/ entries we already know about) --------- */

enum kstate { K_QUEUED = 1, K_BUSY, K_DEFERRED };

struct kent {
	struct kent *next;
	enum kstate st;
	char name[];
};

struct kset {
	struct kent **b;
	size_t nb, n;
};

static size_t khash(const char *s)
{
	size_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static struct kent **kset_find(struct kset *k, const char *name)
{
	if (!k->nb)
		return NULL;
	struct kent **pp = &k->b[khash(name) & (k->nb - 1)];
	for (; *pp; pp = &(*pp)->next)
		if (strcmp((*pp)->name, name) == 0)
			return pp;
	return NULL;
}

static enum kstate kset_get(struct kset *k, const char *name)
{
	struct kent **pp = kset_find(k, name);
	return pp ? (*pp)->st : 0;
}

static void kset_put(struct kset *k, const char *name, enum kstate st)
{
	struct kent **pp = kset_find(k, name);
	if (pp) {
		(*pp)->st = st;
		return;
	}
	if (k->n + 1 > k->nb) {
		size_t nb = k->nb ? k->nb * 2 : 1024;
		struct kent **b = xcalloc(nb, sizeof *b);
		for (size_t i = 0; i < k->nb; i++)
			for (struct kent *e = k->b[i], *nx; e; e = nx) {
				nx = e->next;
				size_t j = khash(e->name) & (nb - 1);
				e->next = b[j];
				b[j] = e;
			}
		free(k->b);
		k->b = b;
		k->nb = nb;
	}
	size_t len = strlen(name);
	struct kent *e = xmalloc(sizeof *e + len + 1);
	memcpy(e->name, name, len + 1);
	e->st = st;
	size_t j = khash(name) & (k->nb - 1);
	e->next = k->b[j];
	k->b[j] = e;
	k->n++;
}

static void kset_del(struct kset *k, const char *name)
{
	struct kent **pp = kset_find(k, name);
	if (!pp)
		return;
	struct kent *e = *pp;
	*pp = e->next;
	free(e);
	k->n--;
}

/* ---- the worker ---------------------------------------------------------- */

struct peer {
	int wd;
	char *name;
};

/* drop/<user>/: a directory only its owner writes, so its owner is who
 * dropped each file in it. fd pins the directory that was checked. */
struct drop {
	int wd, fd;
	uid_t uid;
	dev_t dev;
	ino_t ino;
	char *name;
};

struct worker {
	struct spool *sp;
	struct policy *pol;
	const char *id;
	int slots[LANE__N], used[LANE__N];
	/* The descriptor budget (fd_budget), set at start and when a SIGHUP changes the slots: */
	rlim_t nofile;            /* RLIMIT_NOFILE's soft limit, raised where the slots want more */
	rlim_t nofile_task;       /* the one it was at start, for the tasks, where raised; else 0 */
	bool keep_fds;            /* descriptors kept across runs (spares', leaves') */
	bool budgeted;            /* fd_budget has run once */
	int backlog_max;          /* results waiting for the commit thread, at most */
	bool drain, stopping;
	bool spool_paused;   /* new/.paused: claim nothing (kart pause --all) */
	int64_t grace_mono;
	int64_t timer_at;         /* what the timerfd is armed for (0: disarmed) */
	unsigned long long bset;  /* our bounding set, read once after the drop */
	int64_t recover_mono; /* retry recovery of busy claims then */
	char **own_busy;      /* our own claims from an earlier life, still held by its runs */
	size_t nown_busy;
	int wdir, lockfd, ep, ino, sig, tfd;
	int wd_new, wd_wdir, wd_cur, wd_tmp;
	/* A shared spool's drop/ and the drop directories in it (drop_seen);
	 * new/'s owner and whether others may write it (consider). */
	int wd_drop;
	struct drop *drops;
	size_t ndrops;
	bool new_shared;
	uid_t new_uid;
	struct peer *peers;
	size_t npeers;
	struct src s_ino, s_sig, s_timer;
	struct heap heap[LANE__N];
	struct fair fair;
	struct kset known;
	size_t nbusy, ndeferred;
	/* A close is reported before the writer's write access is dropped
	 * (fsnotify_close runs early in __fput), so a lease tried on the
	 * event can still fail: busy names are looked at again a few times,
	 * with backoff, after each event that left one busy. */
	int64_t busy_mono;
	int busy_step;
	bool busy_seen; /* consider() just found a name busy */
	uint64_t seq;
	struct task *tasks; /* claimed and not yet published */
	int nrunning;
	char **deferred;
	struct hook *hooks; /* on_done hooks still running */
	int nhooks;
	const struct worker_opts *opts;
	struct seccomp_prog scmp; /* built once; scmp.bpf NULL: it failed, */
	char scmp_err[256];       /* and why: every task is refused */
	struct seccomp_prog scmp_outer, scmp_inner; /* the same, split (spawner); or NULL */
	/* The same three as the kernel takes them. Once built they are never
	 * rebuilt (only a filter that failed is, at SIGHUP): spawns point at
	 * them for the worker's life. */
	struct sock_fprog fp_whole, fp_outer, fp_inner;
	char *scmp_json;          /* the same, as a container runtime's profile */
	char clabel[96];          /* backend container: kart.worker=<this> */
	unsigned long cseq;
	struct commit commit;
	int ncommit; /* tasks with the commit thread */
	struct spawner spawner;
	bool held_stale; /* SIGHUP: the held Landlock paths are opened again */
	int wd_etc;      /* the watch on /etc (etc_gen); -1: none, nothing of /etc held */
	bool space_low;     /* below [worker] min_free: nothing new is claimed */
	int64_t space_mono; /* while so, with tasks waiting: look again then */
};

static void ep_add(struct worker *w, int fd, struct src *s)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};
	if (epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		die("epoll_ctl: %s", strerror(errno));
}

static void ep_del(struct worker *w, int fd)
{
	if (fd >= 0)
		(void)epoll_ctl(w->ep, EPOLL_CTL_DEL, fd, NULL);
}

/* ---- the on_done hook ----------------------------------------------------- */

/* At most this many hooks run at once; one more waits for the oldest,
 * which bounds the worker's children at the cost of a (rare) pause. */
#define HOOKS_MAX 16

struct hook {
	struct hook *next;
	pid_t pid;
	int pidfd;
	struct src s;
	char what[200]; /* for the log */
};

static void hook_reap(struct worker *w, struct hook *h, bool block)
{
	int st;
	pid_t r;
	while ((r = waitpid(h->pid, &st, block ? 0 : WNOHANG)) < 0 && errno == EINTR)
		;
	if (r == 0)
		return; /* not yet: the pidfd fires again */
	if (r > 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		logmsg("%s: %s %d", h->what, WIFEXITED(st) ? "exited with status" : "killed by signal",
		       WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	if (h->pidfd >= 0) {
		ep_del(w, h->pidfd);
		close(h->pidfd);
		h->pidfd = -1;
	}
	/* Freed by hooks_sweep, after the epoll batch that may still name
	 * its source. */
	h->pid = 0;
	w->nhooks--;
}

static void hooks_sweep(struct worker *w)
{
	for (struct hook **pp = &w->hooks; *pp;) {
		struct hook *h = *pp;
		if (h->pid) {
			pp = &h->next;
			continue;
		}
		*pp = h->next;
		free(h);
	}
}

/* Run a program on the host, outside any sandbox, with the worker's own
 * environment, stdin /dev/null and its output in the worker's log; then
 * argv2, if given, once argv has ended. Not waited for here: its pidfd
 * is in the event loop. */
static void spawn_host(struct worker *w, char *const argv[], char *const argv2[],
		       const char *what)
{
	if (w->nhooks >= HOOKS_MAX) {
		struct hook *oldest = NULL;
		for (struct hook *h = w->hooks; h; h = h->next)
			if (h->pid)
				oldest = h;
		hook_reap(w, oldest, true);
	}
	pid_t pid = fork();
	if (pid < 0) {
		logmsg("%s: fork: %s", what, strerror(errno));
		return;
	}
	if (pid == 0) {
		/* Its output goes to the worker's log. */
		if (host_child_setup(2) < 0)
			_exit(127);
		if (argv2) {
			pid_t first = fork();
			if (first == 0) {
				execv(argv[0], argv);
				_exit(127);
			}
			while (first > 0 && waitpid(first, NULL, 0) < 0 && errno == EINTR)
				;
			argv = argv2;
		}
		execv(argv[0], argv);
		_exit(127);
	}
	struct hook *h = xcalloc(1, sizeof *h);
	snprintf(h->what, sizeof h->what, "%.190s", what);
	h->pid = pid;
	h->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	h->s = (struct src){SRC_HOOK, NULL};
	h->next = w->hooks;
	w->hooks = h;
	w->nhooks++;
	if (h->pidfd < 0) {
		h->pidfd = -1;
		hook_reap(w, h, true);
		return;
	}
	ep_add(w, h->pidfd, &h->s);
}

/* The policy's on_done program, with the result's path as its one
 * argument (argv: no shell ever sees the task's name). */
static void run_hook(struct worker *w, const char *id)
{
	char path[PATH_MAX], what[PATH_MAX + 32];
	if (!w->pol->on_done[0])
		return;
	if (pathfmt(path, sizeof path, "%s/done/%s.json", w->sp->path, id) < 0)
		return;
	char *const argv[] = {w->pol->on_done, path, NULL};
	snprintf(what, sizeof what, "on_done hook %.200s", w->pol->on_done);
	spawn_host(w, argv, NULL, what);
}

/* The polite half: the runtime passes SIGTERM to the container's init. */
static bool container_term(struct worker *w, struct task *t)
{
	char what[256];
	if (!t->cname[0])
		return false;
	char *const k[] = {w->pol->container_cmd, "kill", "--signal", "TERM", t->cname, NULL};
	snprintf(what, sizeof what, "container kill --signal TERM %.160s", t->cname);
	spawn_host(w, k, NULL, what);
	return true;
}

/* Backend container: the container goes by its name, whatever became of
 * the CLI that started it (killed on a timeout, or failed): kill, then
 * remove (one that never got to run is only removed). One that ended by
 * itself is only removed (no --rm: its state is read first). */
static void container_kill(struct worker *w, struct task *t, bool ended)
{
	char what[256];
	if (!t->cname[0])
		return;
	char *const k[] = {w->pol->container_cmd, "kill", t->cname, NULL};
	char *const rm[] = {w->pol->container_cmd, "rm", "--force", t->cname, NULL};
	snprintf(what, sizeof what, "container %s %.160s", ended ? "rm" : "kill/rm", t->cname);
	spawn_host(w, ended ? rm : k, ended ? NULL : rm, what);
	t->cname[0] = '\0';
}

static void on_hook(struct worker *w, struct src *s)
{
	for (struct hook *h = w->hooks; h; h = h->next)
		if (&h->s == s && h->pid) {
			hook_reap(w, h, false);
			return;
		}
}

/* The worker stops: its hooks get the grace period, then SIGKILL. */
static void hooks_finish(struct worker *w)
{
	int64_t end = now_mono_ms() + (int64_t)w->pol->term_grace_s * 1000;
	for (;;) {
		hooks_sweep(w);
		struct hook *h = w->hooks;
		if (!h)
			return;
		bool late = now_mono_ms() >= end;
		if (late)
			(void)kill(h->pid, SIGKILL);
		hook_reap(w, h, late);
		if (h->pid)
			usleep(20000);
	}
}

static void finish_rejected(struct worker *w, const char *name, const char *why)
{
	char id[256];
	int r = spool_finish_unrun(w->sp, w->wdir, name, "rejected", why, w->id, id, sizeof id);
	if (r < 0)
		logmsg("%s: cannot write its rejected result: %s (left in cur/%s/ for recovery)",
		       name, strerror(-r), w->id);
	else
		log_task("finished", id, "rejected", -1, why);
	if (r == 0)
		run_hook(w, id);
}

/* Take an entry of new/ that is not a runnable task (hostile, invalid)
 * and give it its `rejected` result. Rejection takes no slot. */
static void reject_from_new(struct worker *w, const char *name, const char *why)
{
	int r = spool_claim(w->sp, w->wdir, name);
	if (r == -ENOENT)
		return; /* another worker has it */
	if (r < 0) {
		logmsg("%s: cannot claim for rejection: %s", name, strerror(-r));
		return;
	}
	finish_rejected(w, name, why);
}

/* new/NAME has two links. A link() publish has two until its writer
 * unlinks the tmp/ name: busy until then (IN_DELETE in tmp/ rings).
 * Scanning tmp/ takes time, and the writer may unlink at any moment of
 * it, so "not found" alone proves nothing: the inode is held by an
 * O_PATH descriptor and its link count read again after the scan. Still
 * two links then, the second one stayed in place through the whole scan
 * and was not in tmp/: a hard link from elsewhere, rejected. Down to one,
 * the writer unlinked while we looked: inspect the entry afresh. A tmp/
 * that cannot be read leaves the entry busy, never rejected. */
static void link_publish_look(struct worker *w, const char *name, struct inspect *ins)
{
	for (int round = 0; round < 3 && ins->kind == INSPECT_REJECT && ins->nlink == 2; round++) {
		_cleanup_close_ int fd = openat(w->sp->new, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0) {
			if (errno == ENOENT)
				ins->kind = INSPECT_GONE;
			else
				ins->kind = INSPECT_BUSY;
			return;
		}
		if (st.st_dev == ins->dev && st.st_ino == ins->ino && st.st_nlink == 2) {
			int r = spool_tmp_holds(w->sp, st.st_dev, st.st_ino);
			if (r != 0) {
				if (r < 0)
					logmsg("%s: cannot read tmp/ (%s): held as busy", name,
					       strerror(-r));
				ins->kind = INSPECT_BUSY;
				return;
			}
			if (fstat(fd, &st) < 0) {
				ins->kind = INSPECT_BUSY;
				return;
			}
			if (st.st_nlink == 2)
				return; /* rejected: the other link is not a publish */
		}
		task_inspect(w->sp->new, name, w->pol, ins);
	}
}

static void drop_key(struct worker *w, const char *key);

/* Look at one entry of new/ and file it. */
/* A priority below 0 goes ahead of everyone's work: only for the users
 * and groups [limits] priority_allow names. Others are clamped to 0 (the
 * task runs, in its turn), and the log says so once per task seen. */
static int cand_priority(struct worker *w, const char *name, const struct inspect *ins)
{
	int p = ins->spec.priority;
	if (p >= 0 || policy_priority_allowed(w->pol, ins->uid))
		return p;
	logmsg("%s: priority=%d clamped to 0: uid %u is not in [limits] priority_allow", name, p,
	       (unsigned)ins->uid);
	return 0;
}

static void consider(struct worker *w, const char *name)
{
	if (name[0] == '/') { /* "/DROP/NAME": an entry of a drop directory */
		drop_key(w, name);
		return;
	}
	enum kstate ks = kset_get(&w->known, name);
	if (ks == K_QUEUED || ks == K_DEFERRED)
		return;
	struct inspect ins;
	task_inspect(w->sp->new, name, w->pol, &ins);
	if (ins.kind == INSPECT_REJECT && ins.nlink == 2)
		link_publish_look(w, name, &ins);
	switch (ins.kind) {
	case INSPECT_IGNORE:
		return;
	case INSPECT_GONE:
		if (ks == K_BUSY) {
			kset_del(&w->known, name);
			w->nbusy--;
		}
		return;
	case INSPECT_BUSY:
		if (ks != K_BUSY) {
			kset_put(&w->known, name, K_BUSY);
			w->nbusy++;
		}
		w->busy_seen = true;
		return;
	case INSPECT_REJECT:
		if (ks == K_BUSY) {
			kset_del(&w->known, name);
			w->nbusy--;
		}
		reject_from_new(w, name, ins.error);
		return;
	case INSPECT_OK:
		break;
	}
	/* Where others may write new/, anyone could have moved in a file
	 * of anyone's: only root's and new/'s owner's are taken (a member
	 * drops into drop/USER/, from where the worker moves it here). */
	if (w->new_shared && ins.uid != 0 && ins.uid != w->new_uid) {
		if (ks == K_BUSY) {
			kset_del(&w->known, name);
			w->nbusy--;
		}
		reject_from_new(w, name,
				"new/ is writable by others than its owner, so who put this file there "
				"cannot be known, and it would run as its owner: drop it into "
				"drop/USER/ (or use kart submit)");
		return;
	}
	/* USER:NAME came from drop/USER/ and is USER's, or was claimed from
	 * there for rejection and re-queued by a recovery: never run as
	 * someone else. */
	if (w->sp->drop >= 0 && strchr(name, ':') && !spool_prefix_owner_ok(name, ins.uid)) {
		if (ks == K_BUSY) {
			kset_del(&w->known, name);
			w->nbusy--;
		}
		reject_from_new(w, name,
				"the task came from the drop directory of another user than its "
				"file's owner: a task runs only as the user who dropped it");
		return;
	}
	if (ks == K_BUSY)
		w->nbusy--;
	kset_put(&w->known, name, K_QUEUED);
	heap_push(&w->heap[ins.spec.lane], (struct cand){.name = xstrdup(name),
							 .prio = cand_priority(w, name, &ins),
							 .turn = fair_turn(&w->fair, ins.uid),
							 .arrived_ms = ins.arrived_ms,
							 .seq = w->seq++,
							 .uid = ins.uid});
}

struct seen {
	char *name;
	struct timespec ct;
};

static int seen_cmp(const void *a, const void *b)
{
	const struct seen *x = a, *y = b;
	if (x->ct.tv_sec != y->ct.tv_sec)
		return x->ct.tv_sec < y->ct.tv_sec ? -1 : 1;
	if (x->ct.tv_nsec != y->ct.tv_nsec)
		return x->ct.tv_nsec < y->ct.tv_nsec ? -1 : 1;
	return strcmp(x->name, y->name);
}

static void hoist_finish(struct worker *w, const char *dot);

static void new_mode(struct worker *w)
{
	struct stat st;
	if (fstat(w->sp->new, &st) == 0) {
		w->new_shared = (st.st_mode & 022) != 0;
		w->new_uid = st.st_uid;
	}
}

static void scan_new(struct worker *w)
{
	new_mode(w);
	_cleanup_close_ int d = openat(w->sp->new, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = d >= 0 ? fdopendir(d) : NULL;
	if (!dir) {
		logmsg("scan new/: %s", strerror(errno));
		return;
	}
	d = -1;
	/* In order of arrival: each is given its submitter's next turn
	 * (fair_turn), so one user's tasks keep their order among themselves. */
	struct seen *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(dir))) {
		if (de->d_name[0] == '.') {
			if (strncmp(de->d_name, ".hoist.", 7) == 0)
				hoist_finish(w, de->d_name); /* a move from drop/ cut short */
			continue;
		}
		struct stat st;
		if (fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			st.st_ctim = (struct timespec){0, 0}; /* gone, or not ours to know: consider says */
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			v = xrealloc(v, cap * sizeof *v);
		}
		v[n++] = (struct seen){xstrdup(de->d_name), st.st_ctim};
	}
	closedir(dir);
	qsort(v, n, sizeof *v, seen_cmp);
	for (size_t i = 0; i < n; i++) {
		consider(w, v[i].name);
		free(v[i].name);
	}
	free(v);
}

/* ---- drop/: the file's owner is who dropped it -----------------------------
 *
 * On a shared spool new/ is written by the workers alone, and each member
 * drops into drop/USER/, a directory that only USER can write (0700,
 * owned by USER). A file in it was put there by USER (or root), so it may
 * run as USER, if USER owns it and nobody else can write it. The worker
 * moves such a file into new/ as USER:NAME, in two renames: first to
 * new/.hoist.UID.USER:NAME, where nobody but the workers can touch it and
 * it is looked at again (the same checks, on what arrived), then to its
 * name. A crash between them leaves the dot name, which the next scan of
 * new/ by any worker finishes (the uid it must have is in the name). A
 * drop/ entry whose owner is not the user of its name is a squat: it is
 * moved into tmp/ (which kart gc empties), so it never blocks that user.
 * See spool-layout/README.md, "Shared spools". */

static struct drop *drop_find(struct worker *w, const char *name, int wd)
{
	for (size_t i = 0; i < w->ndrops; i++)
		if (name ? strcmp(w->drops[i].name, name) == 0 : w->drops[i].wd == wd)
			return &w->drops[i];
	return NULL;
}

static void drop_forget(struct worker *w, struct drop *d)
{
	(void)inotify_rm_watch(w->ino, d->wd);
	(void)close(d->fd);
	free(d->name);
	*d = w->drops[--w->ndrops];
}

/* Reject a drop entry: claimed straight from the drop directory into our
 * claim directory (it never passes through new/), then given its result. */
static void drop_reject(struct worker *w, int dirfd, const char *name, const char *claim,
			const char *why)
{
	if (renameat2(dirfd, name, w->wdir, claim, RENAME_NOREPLACE) < 0) {
		if (errno != ENOENT)
			logmsg("%s: cannot claim for rejection: %s", claim, strerror(errno));
		return;
	}
	finish_rejected(w, claim, why);
}

/* new/.hoist.UID.USER:NAME: check what arrived, then give it its name. */
static void hoist_finish(struct worker *w, const char *dot)
{
	char *end;
	errno = 0;
	unsigned long uid = strtoul(dot + 7, &end, 10);
	if (errno || end == dot + 7 || *end != '.' || !end[1])
		return;
	const char *final = end + 1;
	struct stat st;
	if (fstatat(w->sp->new, dot, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return; /* another worker finished it */
	if (!S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_uid != (uid_t)uid || (st.st_mode & 022)) {
		char why[256];
		snprintf(why, sizeof why,
			 "the file that arrived from the drop directory of uid %lu is not a regular file "
			 "of that uid with one link, writable by its owner alone", uid);
		drop_reject(w, w->sp->new, dot, final, why);
		return;
	}
	/* The spool's record (attempt, submitted) starts here: whatever
	 * user.kart the submitter set on their file before dropping it is
	 * not ours, and goes (issue 26: a forged attempt and submitted_at). */
	int fd = openat(w->sp->new, dot, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd >= 0) {
		struct stat fst;
		if (fstat(fd, &fst) == 0 && fst.st_ino == st.st_ino && fst.st_dev == st.st_dev &&
		    fremovexattr(fd, KART_XATTR) < 0 && errno != ENODATA && errno != ENOTSUP)
			logmsg("%s: cannot remove the submitter's %s: %s", final, KART_XATTR, strerror(errno));
		close(fd);
	}
	char dst[TASK_NAME_MAX + 16];
	for (int n = 1; n < 1000; n++) {
		if ((n == 1 ? pathfmt(dst, sizeof dst, "%s", final)
			    : pathfmt(dst, sizeof dst, "%s.%d", final, n)) < 0)
			break;
		if (renameat2(w->sp->new, dot, w->sp->new, dst, RENAME_NOREPLACE) == 0)
			return; /* its IN_MOVED_TO brings it to consider() */
		if (errno != EEXIST)
			break;
	}
	if (errno != ENOENT)
		drop_reject(w, w->sp->new, dot, final, "no free name in new/ for it");
}

/* One entry of a drop directory: wait for its writer, reject it, or move
 * it into new/. */
static void drop_consider(struct worker *w, struct drop *d, const char *name, const char *key)
{
	enum kstate ks = kset_get(&w->known, key);
	struct inspect ins;
	task_inspect(d->fd, name, w->pol, &ins);
	if (ins.kind == INSPECT_REJECT && ins.nlink == 2 && spool_tmp_holds(w->sp, ins.dev, ins.ino))
		ins.kind = INSPECT_BUSY;
	if (ins.kind == INSPECT_IGNORE)
		return;
	if (ins.kind == INSPECT_BUSY) {
		if (ks != K_BUSY) {
			kset_put(&w->known, key, K_BUSY);
			w->nbusy++;
		}
		w->busy_seen = true;
		return;
	}
	if (ks == K_BUSY) {
		kset_del(&w->known, key);
		w->nbusy--;
	}
	if (ins.kind == INSPECT_GONE)
		return;
	char final[TASK_NAME_MAX * 2], dot[NAME_MAX + 1], why[700] = "";
	struct stat dst;
	if (pathfmt(final, sizeof final, "%s:%s", d->name, name) < 0)
		snprintf(final, sizeof final, "%s:_", d->name);
	if (fstat(d->fd, &dst) < 0 || (dst.st_mode & 022))
		snprintf(why, sizeof why,
			 "drop/%s is writable by others than its owner, so who put this file there "
			 "cannot be known (chmod 700 drop/%s)", d->name, d->name);
	else if (ins.kind == INSPECT_REJECT)
		snprintf(why, sizeof why, "%s", ins.error);
	else if (ins.uid != d->uid)
		snprintf(why, sizeof why,
			 "the file is owned by uid %u, but it is in drop/%s, the drop directory of uid "
			 "%u: a task runs only as the user who dropped it into their own drop directory",
			 (unsigned)ins.uid, d->name, (unsigned)d->uid);
	else if (strlen(final) > TASK_NAME_MAX ||
		 pathfmt(dot, sizeof dot, ".hoist.%u.%s", (unsigned)d->uid, final) < 0)
		snprintf(why, sizeof why, "the name %s is longer than %d bytes", final, TASK_NAME_MAX);
	if (why[0]) {
		drop_reject(w, d->fd, name, final, why);
		return;
	}
	if (renameat2(d->fd, name, w->sp->new, dot, RENAME_NOREPLACE) < 0) {
		if (errno != ENOENT)
			logmsg("drop/%s/%s: cannot move it into new/: %s", d->name, name, strerror(errno));
		return;
	}
	hoist_finish(w, dot);
}

static void drop_key(struct worker *w, const char *key)
{
	const char *sl = strchr(key + 1, '/');
	char dname[NAME_MAX + 1];
	struct drop *d = NULL;
	if (sl && (size_t)(sl - key - 1) < sizeof dname) {
		memcpy(dname, key + 1, (size_t)(sl - key - 1));
		dname[sl - key - 1] = '\0';
		d = drop_find(w, dname, -1);
	}
	if (d) {
		drop_consider(w, d, sl + 1, key);
	} else if (kset_get(&w->known, key) == K_BUSY) {
		kset_del(&w->known, key);
		w->nbusy--;
	}
}

static void drop_entry(struct worker *w, struct drop *d, const char *name)
{
	char key[NAME_MAX * 2 + 3];
	/* kart hold, edit, pause ... of a user of a shared spool. */
	if (wctl_drop_entry(name)) {
		wctl_drop_request(w->sp, w->pol, w->id, w->wdir, d->fd, d->name, d->uid, name);
		return;
	}
	if (name[0] == '.' || pathfmt(key, sizeof key, "/%s/%s", d->name, name) < 0)
		return;
	drop_consider(w, d, name, key);
}

static void drop_scan(struct worker *w, struct drop *d)
{
	struct strv names = {0};
	if (dir_names(d->fd, ".", &names) < 0)
		return;
	for (size_t i = 0; i < names.n; i++)
		drop_entry(w, d, names.v[i]);
	strv_free(&names);
}

/* An entry of drop/ itself: a drop directory to watch, or a squat. */
static void drop_seen(struct worker *w, const char *name)
{
	struct stat st;
	if (name[0] == '.')
		return;
	struct drop *d = drop_find(w, name, -1);
	if (fstatat(w->sp->drop, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (d)
			drop_forget(w, d);
		return;
	}
	if (d && d->dev == st.st_dev && d->ino == st.st_ino)
		return;
	if (d)
		drop_forget(w, d);
	if (!S_ISDIR(st.st_mode) || !spool_drop_name_ok(name, st.st_uid)) {
		/* Squatted, or not a directory: out of that user's way. */
		static unsigned seq;
		char to[64];
		snprintf(to, sizeof to, ".drop.%lld.%d.%u", (long long)now_realtime_ms(), getpid(), seq++);
		if (renameat2(w->sp->drop, name, w->sp->tmp, to, RENAME_NOREPLACE) == 0)
			logmsg("drop/%s: owned by uid %u, not by the user of that name (or not a "
			       "directory): moved to tmp/%s", name, (unsigned)st.st_uid, to);
		else if (errno != ENOENT)
			logmsg("drop/%s: owned by uid %u, not by the user of that name: cannot move it "
			       "away: %s", name, (unsigned)st.st_uid, strerror(errno));
		return;
	}
	int fd = openat(w->sp->drop, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat fst;
	if (fd < 0 || fstat(fd, &fst) < 0 || fst.st_dev != st.st_dev || fst.st_ino != st.st_ino) {
		if (fd >= 0)
			close(fd); /* it changed: the event of the change brings it back */
		return;
	}
	char p[64];
	snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
	int wd = inotify_add_watch(w->ino, p, IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE | IN_ONLYDIR |
					       IN_MOVE_SELF | IN_DELETE_SELF);
	if (wd < 0) {
		logmsg("drop/%s: inotify watch: %s", name, strerror(errno));
		close(fd);
		return;
	}
	w->drops = xrealloc(w->drops, (w->ndrops + 1) * sizeof *w->drops);
	d = &w->drops[w->ndrops++];
	*d = (struct drop){.wd = wd, .fd = fd, .uid = fst.st_uid, .dev = fst.st_dev,
			   .ino = fst.st_ino, .name = xstrdup(name)};
	drop_scan(w, d);
}

static void scan_drops(struct worker *w)
{
	if (w->wd_drop < 0)
		return;
	struct strv names = {0};
	if (dir_names(w->sp->drop, ".", &names) < 0)
		return;
	for (size_t i = 0; i < names.n; i++)
		drop_seen(w, names.v[i]);
	strv_free(&names);
	for (size_t i = 0; i < w->ndrops; i++)
		drop_scan(w, &w->drops[i]);
}

#define BUSY_RECHECK_FIRST_MS 2
#define BUSY_RECHECK_STEPS 10 /* 2 ms doubling: the last look ~1 s after the event */

/* An event left a name busy: look again soon, then less often. */
static void busy_arm(struct worker *w)
{
	w->busy_step = 0;
	w->busy_mono = now_mono_ms() + BUSY_RECHECK_FIRST_MS;
}

static void busy_recheck(struct worker *w)
{
	size_t n = 0;
	char **names = xcalloc(w->nbusy ? w->nbusy : 1, sizeof *names);
	for (size_t i = 0; i < w->known.nb; i++)
		for (struct kent *e = w->known.b[i]; e; e = e->next)
			if (e->st == K_BUSY && n < w->nbusy)
				names[n++] = xstrdup(e->name);
	w->busy_seen = false;
	for (size_t i = 0; i < n; i++) {
		consider(w, names[i]);
		free(names[i]);
	}
	free(names);
	w->busy_mono = 0;
	if (w->busy_seen && ++w->busy_step < BUSY_RECHECK_STEPS)
		w->busy_mono = now_mono_ms() + ((int64_t)BUSY_RECHECK_FIRST_MS << w->busy_step);
}

static struct task *find_task(struct worker *w, const char *name)
{
	for (struct task *t = w->tasks; t; t = t->next)
		if (strcmp(t->name, name) == 0)
			return t;
	return NULL;
}

static void task_event(struct worker *w, struct task *t, enum tevent ev);

static void scan_cancels(struct worker *w)
{
	for (struct task *t = w->tasks; t; t = t->next) {
		char p[512];
		struct stat st;
		if (pathfmt(p, sizeof p, ".%s.cancel", t->name) == 0 &&
		    fstatat(w->wdir, p, &st, AT_SYMLINK_NOFOLLOW) == 0)
			task_event(w, t, TE_CANCEL);
	}
}

/* kart pause / resume: do what cur/W/.NAME.pause says (worker_control.c). */
static void arm_timer(struct worker *w);

static void task_thaw(struct worker *w, struct task *t)
{
	wctl_resume(&t->pause, &t->cg, &t->run, &t->deadline_mono);
	wctl_ack(w->wdir, t->name, false);
	log_task("resumed", t->name, NULL, -1, NULL);
}

static void task_pause_look(struct worker *w, struct task *t)
{
	bool want = wctl_pause_wanted(w->wdir, t->name);
	if (want && t->pause.how == PAUSE_NONE && t->state == TS_RUNNING) {
		int r = wctl_pause(&t->pause, &t->cg, &t->run, &t->deadline_mono);
		if (r < 0) {
			logmsg("%s: cannot pause it: %s", t->name, strerror(-r));
			return;
		}
		wctl_ack(w->wdir, t->name, true);
		log_task("paused", t->name, NULL, -1, NULL);
	} else if (!want && t->pause.how != PAUSE_NONE) {
		task_thaw(w, t);
	}
	arm_timer(w);
}

static void scan_pauses(struct worker *w)
{
	for (struct task *t = w->tasks; t; t = t->next)
		task_pause_look(w, t);
	bool was = w->spool_paused;
	w->spool_paused = wctl_spool_paused(w->sp->new);
	if (was != w->spool_paused)
		logmsg("spool %s: %s", w->spool_paused ? "paused" : "resumed",
		       w->spool_paused ? "no more claims until kart resume --all" : "claiming again");
}

/* ---- peers: other workers' claim directories ---------------------------- */

static void peer_dead(void *arg, const char *peer);

static void recover_peer(struct worker *w, const char *peer)
{
	int busy = 0, rq = 0, lost = 0;
	if (strcmp(peer, w->id) == 0)
		return;
	int r = spool_recover_peer(w->sp, w->pol, peer, w->id, peer_dead, w, &busy, &rq, &lost);
	if (r < 0)
		logmsg("recover cur/%s: %s", peer, strerror(-r));
	else if (r > 0 && (rq || lost || busy))
		logmsg("recovered dead worker %s: %d re-queued, %d lost, %d still busy", peer, rq,
		       lost, busy);
	if (busy > 0 && !w->recover_mono)
		w->recover_mono = now_mono_ms() + 200;
}

static void undefer(struct worker *w);

/* Our own claims left by an earlier life under this id: recover each
 * once the processes of its old run are gone (its run lock is free). */
static void recover_own(struct worker *w)
{
	size_t keep = 0;
	bool moved = false;
	if (w->nown_busy)
		peer_dead(w, w->id); /* the earlier life's leaves, as for a dead peer */
	for (size_t i = 0; i < w->nown_busy; i++) {
		enum recover_kind k = spool_recover_claim(w->sp, w->pol, w->wdir, w->own_busy[i], w->id);
		if (k == RECOVER_BUSY || k == RECOVER_ERROR) {
			w->own_busy[keep++] = w->own_busy[i];
			continue;
		}
		moved = true;
		logmsg("%s: recovered from an earlier run of worker %s (%s)", w->own_busy[i], w->id,
		       k == RECOVER_LOST ? "lost" : k == RECOVER_REQUEUED ? "re-queued" : "finished");
		free(w->own_busy[i]);
	}
	w->nown_busy = keep;
	if (keep && !w->recover_mono)
		w->recover_mono = now_mono_ms() + 200;
	if (moved)
		undefer(w);
}

static void watch_peer(struct worker *w, const char *peer)
{
	char p[PATH_MAX];
	if (strcmp(peer, w->id) == 0 || peer[0] == '.')
		return;
	if (pathfmt(p, sizeof p, "%s/cur/%s", w->sp->path, peer) < 0)
		return;
	/* A worker's lock file is open for writing for its whole life;
	 * its close (at death) is the doorbell to try its lock. */
	int wd = inotify_add_watch(w->ino, p, IN_CLOSE_WRITE | IN_ONLYDIR | IN_DONT_FOLLOW);
	if (wd < 0)
		return;
	for (size_t i = 0; i < w->npeers; i++)
		if (w->peers[i].wd == wd)
			return;
	w->peers = xrealloc(w->peers, (w->npeers + 1) * sizeof *w->peers);
	w->peers[w->npeers++] = (struct peer){.wd = wd, .name = xstrdup(peer)};
}

static void scan_peers(struct worker *w)
{
	struct strv names = {0};
	if (dir_names(w->sp->cur, ".", &names) < 0)
		return;
	for (size_t i = 0; i < names.n; i++) {
		if (strcmp(names.v[i], w->id) == 0)
			continue;
		watch_peer(w, names.v[i]);
		recover_peer(w, names.v[i]);
	}
	strv_free(&names);
}

/* ---- starting a task ------------------------------------------------------ */

/* ---- accounts: looked up once per uid, not once per task ----------------
 *
 * Each lookup reads /etc/passwd and /etc/group through NSS (a dozen system
 * calls, twice per task). An entry is kept while both files keep their
 * inode, size and mtime, and for at most ACCT_TTL_MS in any case, for NSS
 * sources that are not files. */
#define ACCT_SLOTS 16
#define ACCT_TTL_MS 5000

struct acct {
	uid_t uid;
	bool used, found, too_many;
	int64_t at_mono;
	char name[256];
	gid_t gid;
	int ngroups;
	gid_t groups[RUN_CRED_GROUPS_MAX];
	char home[TASK_BIND_PATH_MAX];
};

static struct acct accts[ACCT_SLOTS];
static unsigned acct_next;
static struct stat acct_pw, acct_gr;
/* Counted up at every change in /etc the worker's watch sees; -1: there
 * is no watch, and /etc/passwd and /etc/group are looked at each time.
 * What was read from /etc (accounts, held paths) notes the count it was
 * read at, and is good while it is the same. */
static long etc_gen = -1, acct_gen = -2;

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

static const struct acct *acct_get(uid_t uid)
{
	if (etc_gen < 0 || etc_gen != acct_gen) {
		struct stat pw, gr;
		if (stat("/etc/passwd", &pw) < 0)
			memset(&pw, 0, sizeof pw);
		if (stat("/etc/group", &gr) < 0)
			memset(&gr, 0, sizeof gr);
		if (!same_file(&pw, &acct_pw) || !same_file(&gr, &acct_gr)) {
			memset(accts, 0, sizeof accts);
			acct_pw = pw;
			acct_gr = gr;
		}
		acct_gen = etc_gen;
	}
	int64_t now = now_mono_ms();
	struct acct *a = NULL;
	for (int i = 0; i < ACCT_SLOTS; i++)
		if (accts[i].used && accts[i].uid == uid) {
			a = &accts[i];
			if (now - a->at_mono < ACCT_TTL_MS)
				return a;
			break;
		}
	if (!a)
		a = &accts[acct_next++ % ACCT_SLOTS];
	memset(a, 0, sizeof *a);
	a->used = true;
	a->uid = uid;
	a->at_mono = now;
	struct passwd p, *pp = NULL;
	char buf[4096];
	if (getpwuid_r(uid, &p, buf, sizeof buf, &pp) != 0 || !pp)
		return a;
	a->found = true;
	snprintf(a->name, sizeof a->name, "%s", pp->pw_name);
	snprintf(a->home, sizeof a->home, "%s", pp->pw_dir ? pp->pw_dir : "");
	a->gid = pp->pw_gid;
	a->ngroups = RUN_CRED_GROUPS_MAX;
	if (getgrouplist(pp->pw_name, pp->pw_gid, a->groups, &a->ngroups) < 0)
		a->too_many = true;
	return a;
}

static void fill_result(struct worker *w, struct task *t)
{
	struct result *r = &t->res;
	result_init(r);
	r->id = t->name;
	r->name = t->spec.name[0] ? t->spec.name : t->name;
	r->kind = t->spec.kind[0] ? t->spec.kind : NULL;
	r->worker = w->id;
	r->lane = lane_name(t->spec.lane);
	r->attempt = t->meta.attempt;
	r->submitted_ms = t->submitted_ms;
	r->started_ms = t->started_ms;
	r->timeout_s = t->spec.timeout_s;
	r->kill_grace_s = t->spec.kill_grace_s;
	r->label = t->spec.label[0] ? t->spec.label : NULL;
	r->backend = backend_name(w->pol->backend);
	r->network = t->spec.net;
	if (t->cg.mode != CG_MODE_NONE) {
		/* Limits as applied: only a leaf applies them. */
		r->cgroup = cg_mode_name(t->cg.mode);
		r->memory = t->spec.memory;
		r->pids = t->spec.pids;
		r->cpu_milli = t->spec.cpu_milli;
	} else if (w->pol->backend == BACKEND_CONTAINER) {
		/* The engine applies them (--memory, --pids-limit, --cpus). */
		r->memory = t->spec.memory;
		r->pids = t->spec.pids;
		r->cpu_milli = t->spec.cpu_milli;
	} else {
		/* No leaf: what the rlimit fallback holds (see rlimits.h). */
		r->memory = t->rl.as;
		r->pids = t->rl.nproc;
	}
	r->uid = t->uid;
	/* A root worker named the account when it switched to it
	 * (task_cred); otherwise it is looked up here. */
	if (!t->user[0]) {
		const struct acct *a = acct_get(t->uid);
		if (a->found)
			snprintf(t->user, sizeof t->user, "%s", a->name);
	}
	if (t->user[0])
		r->user = t->user;
	r->task = &t->spec;
	r->home = t->home[0] ? t->home : (w->pol->backend == BACKEND_NONE ? NULL : SANDBOX_WORK);
	/* Its /work (backend none: its spare), and HOME where that was it. */
	r->work_discarded = t->spec.cwd < 0 || !t->home[0];
}

static void arm_timer(struct worker *w);

/* Out of w->tasks, if it is there. */
static void task_unlink(struct worker *w, struct task *t)
{
	for (struct task **pp = &w->tasks; *pp; pp = &(*pp)->next)
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	t->next = NULL;
}

static void task_free(struct worker *w, struct task *t)
{
	task_unlink(w, t);
	/* Backend none's directories that were not retired (a refusal, a
	 * re-queue, a run whose leaf was not seen empty): removed by name,
	 * as spool_clean_scratch does the others. One the commit moved into
	 * done/ is not there any more. */
	for (int i = 0; i < 3; i++) {
		if (t->scr[i][0])
			(void)rm_rf_at(w->wdir, t->scr[i]);
		if (t->scr_fd[i] >= 0)
			close(t->scr_fd[i]);
	}
	if (t->run.out.file >= 0)
		close(t->run.out.file);
	if (t->run.err.file >= 0)
		close(t->run.err.file);
	cg_files_close(&t->cgf);
	free(t->name);
	free(t);
}

/* Publish a task's result: handed to the commit thread, and out of the
 * loop's hands (and of w->tasks) until it comes back (commit_done). */
static void publish(struct worker *w, struct task *t)
{
	task_unlink(w, t);
	w->ncommit++;
	pthread_mutex_lock(&w->commit.h.mu);
	t->cnext = w->commit.todo;
	w->commit.todo = t;
	pthread_mutex_unlock(&w->commit.h.mu);
	/* After the unlock: the thread woken does not block at once on the
	 * lock we hold (two futex calls fewer per hand-over). */
	pthread_cond_signal(&w->commit.h.cv);
}

static void undefer(struct worker *w);
static void dispatch(struct worker *w);

/* Results the commit thread may have queued before the loop starts no
 * more tasks (a slot is free again before its result is durable). With
 * backend none the loop can run tasks faster than one thread can fsync
 * their results: without a bound the queue, and the worker's memory
 * (about 2.5 KiB a task), would grow with the backlog in new/. */
#define COMMIT_BACKLOG_MAX 256

/* The open files the worker wants, and what it does with fewer, decided
 * at start, and again when a SIGHUP changes the slots:
 * - the slots want 16 each and 256 besides. Descriptors kept across a run
 *   (a spare's, a leaf's: scratch_dir, struct cg_files) save calls per
 *   task but hold about 6 more per running task: kept only there, else a
 *   worker of many slots under a limit of 1,024 would meet EMFILE where
 *   it did not before (and the commit thread writes one result at a
 *   time);
 * - each result waiting for the commit thread holds its output files,
 *   two descriptors: the backlog is held to what the limit leaves beside
 *   the slots, one at the least;
 * - a soft limit under all of that is raised up to the hard limit, as
 *   systemd asks of a service that needs more than its default 1,024
 *   (the hard limit there is 524,288); the tasks get the one we started
 *   with back (rl_plan.nofile), as if run directly. So the two above
 *   bite only where the hard limit is too low. */
static void fd_budget(struct worker *w)
{
	rlim_t slots = (rlim_t)16 * (rlim_t)(w->slots[LANE_FAST] + w->slots[LANE_BATCH]) + 256;
	rlim_t all = slots + 2 * COMMIT_BACKLOG_MAX;
	struct rlimit nf;
	if (getrlimit(RLIMIT_NOFILE, &nf) < 0)
		nf.rlim_cur = nf.rlim_max = 1024;
	w->nofile = nf.rlim_cur;
	if (nf.rlim_cur != RLIM_INFINITY && nf.rlim_cur < all && nf.rlim_max > nf.rlim_cur) {
		rlim_t was = nf.rlim_cur;
		nf.rlim_cur = nf.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &nf) == 0) {
			w->nofile = nf.rlim_cur;
			w->nofile_task = was;
			if (nf.rlim_cur == RLIM_INFINITY)
				logmsg("open files limit raised from %llu to unlimited; tasks get %llu",
				       (unsigned long long)was, (unsigned long long)was);
			else
				logmsg("open files limit raised from %llu to %llu (the hard limit); "
				       "tasks get %llu",
				       (unsigned long long)was, (unsigned long long)nf.rlim_cur,
				       (unsigned long long)was);
		}
	}
	bool inf = w->nofile == RLIM_INFINITY, kept = w->keep_fds;
	w->keep_fds = inf || w->nofile >= slots;
	if (!w->keep_fds && (kept || !w->budgeted))
		logmsg("open files limit %llu: below 16 a slot and 256 besides; no descriptors are kept "
		       "across runs and results are written one at a time (more system calls per "
		       "task)",
		       (unsigned long long)w->nofile);
	w->budgeted = true;
	w->backlog_max = inf || w->nofile >= all ? COMMIT_BACKLOG_MAX
			 : w->nofile > slots + 2  ? (int)((w->nofile - slots) / 2)
						  : 1;
	/* Short of descriptors, one result's files open at a time. */
	if (w->commit.h.started) {
		pthread_mutex_lock(&w->commit.h.mu);
		w->commit.writes_max = w->keep_fds ? COMMIT_WRITES_MAX : 1;
		pthread_mutex_unlock(&w->commit.h.mu);
	}
}

/* Stopping, and its result still cannot be published (a full disk, an
 * I/O error) when the grace period is over: left in cur/W/ just as a
 * crash leaves it, for recovery to publish, not retried for ever. */
static void abandon(struct worker *w, struct task *t)
{
	logmsg("%s: its result could not be published before the stop; left in cur/%s/ for recovery",
	       t->name, w->id);
	memset(t->scr, 0, sizeof t->scr);
	task_free(w, t);
}

/* Tasks back from the commit thread: published, or to be tried again (a
 * full disk, an I/O error: a task is never dropped), or, when its output
 * could not be made durable, run again. */
static void commit_done(struct worker *w)
{
	uint64_t x;
	(void)!read(w->commit.h.efd, &x, sizeof x);
	pthread_mutex_lock(&w->commit.h.mu);
	struct task *list = w->commit.done;
	w->commit.done = NULL;
	pthread_mutex_unlock(&w->commit.h.mu);
	for (struct task *t = list, *nx; t; t = nx) {
		nx = t->cnext;
		w->ncommit--;
		if (t->commit_output) {
			logmsg("%s: fsync of its output failed: %s; re-queued", t->name,
			       strerror(-t->commit_err));
			t->end = END_REQUEUE;
			t->meta.attempt++;
			(void)spool_requeue(w->sp, w->wdir, t->name, &t->meta);
			task_free(w, t);
		} else if (t->commit_err && w->stopping && !w->grace_mono) {
			logmsg("%s: cannot publish its result: %s", t->name, strerror(-t->commit_err));
			abandon(w, t);
		} else if (t->commit_err) {
			logmsg("%s: cannot publish its result: %s; retrying", t->name,
			       strerror(-t->commit_err));
			t->state = TS_PUBLISHING;
			t->retry_mono = now_mono_ms() + 1000;
			t->res.id = t->name;
			t->next = w->tasks;
			w->tasks = t;
		} else {
			log_task("finished", t->idbuf, t->res.status,
				 t->res.started_ms ? t->res.finished_ms - t->res.started_ms : -1,
				 t->res.error);
			run_hook(w, t->idbuf);
			task_free(w, t);
		}
	}
	(void)notify_statusf("%d running", w->nrunning);
	/* A task of the same name may wait for this one's claim to go. */
	undefer(w);
	dispatch(w);
	/* A retry's time (dispatch, which arms it too, does nothing once
	 * the worker is stopping). */
	arm_timer(w);
}

/* Start a helper thread, which wakes the loop through h->efd (src kind).
 * Every signal stays blocked in it: it inherits the mask the signalfd
 * needs. */
/* "kart-commit", "kart-spawn": what ps -L, top -H and perf show, and how
 * the tests find the commit thread to slow or kill it. */
static void thread_name(pthread_t th, const char *what)
{
	char name[16];
	snprintf(name, sizeof name, "kart-%s", what);
	(void)pthread_setname_np(th, name);
}

static void helper_start(struct worker *w, struct helper *h, void *(*fn)(void *), void *arg,
			 enum srckind kind, const char *what)
{
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cv, NULL);
	if ((h->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		die("eventfd: %s", strerror(errno));
	int e = pthread_create(&h->th, NULL, fn, arg);
	if (e)
		die("cannot start the %s thread: %s", what, strerror(e));
	thread_name(h->th, what);
	h->started = true;
	h->src = (struct src){kind, NULL};
	ep_add(w, h->efd, &h->src);
}

/* Ask it to quit once its queue is empty, and wait for it. */
static void helper_stop(struct helper *h)
{
	if (!h->started)
		return;
	pthread_mutex_lock(&h->mu);
	h->quit = true;
	pthread_cond_signal(&h->cv);
	pthread_mutex_unlock(&h->mu);
	pthread_join(h->th, NULL);
	h->started = false;
	close(h->efd);
}

static void commit_start(struct worker *w)
{
	struct commit *c = &w->commit;
	c->sp = w->sp;
	c->wdir = w->wdir;
	c->writes_max = w->keep_fds ? COMMIT_WRITES_MAX : 1; /* as fd_budget */
	/* JSON objects are made in both threads: jansson's hash seed is
	 * set once, here, before there are two. */
	json_object_seed(0);
	helper_start(w, &c->h, commit_main, c, SRC_COMMIT, "commit");
}

static void commit_stop(struct worker *w) { helper_stop(&w->commit.h); }

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
static void sweep_leaves(struct worker *w)
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

/* Recovery holds a dead peer's lock: nothing of its runs may survive
 * (a daemon of backend none is outside any PID namespace) before its
 * claims are re-queued. */
/* Backend container: the containers of a dead worker (or of this
 * worker's earlier life: all but this life's) run on without their CLI;
 * they go before its claims run again. Bounded, and in the loop: it
 * happens only when a worker has died. */
static void sweep_containers(struct worker *w, const char *peer)
{
	if (w->pol->backend != BACKEND_CONTAINER)
		return;
	char label[96], keep[160];
	container_label(w->sp->path, peer, label, sizeof label);
	/* This life's names start so (container_name). */
	snprintf(keep, sizeof keep, "kart-%s-%d-", w->clabel, (int)getpid());
	int n = container_sweep(w->pol, label, strcmp(peer, w->id) == 0 ? keep : NULL, 30000);
	if (n < 0)
		logmsg("%s: cannot list the containers of worker %s", w->pol->container_cmd, peer);
	else if (n)
		logmsg("removed %d container(s) left by worker %s", n, peer);
}

static void peer_dead(void *arg, const char *peer)
{
	sweep_leaves(arg);
	sweep_containers(arg, peer);
}

/* ---- Landlock's system paths, held open ----------------------------------- */

/* Backend none: the child builds each task's Landlock ruleset, and for
 * every path an open, a stat and a close were about a third of its rules'
 * cost. The system's paths (/usr, the /lib links, /proc, the devices, the
 * directories of /etc a program needs) are the same for every task, so
 * the loop opens each once, O_PATH and close-on-exec, and the child, which
 * has a copy of our descriptors, adds its rule from the descriptor.
 * Directories and devices are held; and the regular files directly in
 * /etc (not symlinks), while an inotify watch on /etc says none of its
 * entries was made, removed or renamed since they were opened: a file
 * like /etc/passwd is replaced by rename, and a descriptor held past
 * that would keep the old one in the rule. The policy's binds are never
 * held (a symlink to a release flipped by a deploy must count at the
 * next task), nor the task's own paths. Held paths are opened again
 * every minute (a mount can move), at SIGHUP and, for the files, after
 * a change in /etc, at a moment when no child is between its clone and
 * its exec with the old numbers; until then a task's child opens the
 * files itself. */
#define HELD_MAX 64
#define HELD_TTL_MS 60000
static struct held_path {
	char *path;
	int fd;   /* -1: not held (not there, or not one of the kinds held): the child opens it */
	bool dir;
	bool watched; /* an entry of /etc itself, which the watch on /etc sees change */
	bool covered; /* beneath a held directory (real paths), or not there: no rule of its own */
	char *real;   /* a held directory's real path, for that comparison */
} held[HELD_MAX];
static size_t nheld;
static int64_t held_since;
static long held_gen = -1; /* etc_gen when they were opened */
/* sandbox.c lists the same paths in the same order for every task: what
 * the path at each position came to last time (NULL: not held), so that
 * a task's lookups are one string comparison each. */
static struct held_memo {
	char *path;
	const struct held_path *h;
} held_memo[HELD_MAX];

static void held_drop(void)
{
	for (size_t i = 0; i < nheld; i++) {
		if (held[i].fd >= 0)
			close(held[i].fd);
		free(held[i].path);
		free(held[i].real);
	}
	nheld = 0;
	for (size_t i = 0; i < HELD_MAX; i++) {
		free(held_memo[i].path);
		held_memo[i] = (struct held_memo){NULL, NULL};
	}
}

static bool any_spawning(const struct worker *w)
{
	for (const struct task *t = w->tasks; t; t = t->next)
		if (t->state == TS_SPAWNING)
			return true;
	return false;
}

static const struct held_path *held_get(const struct worker *w, const char *path)
{
	for (size_t i = 0; i < nheld; i++)
		if (strcmp(held[i].path, path) == 0)
			return &held[i];
	if (nheld == HELD_MAX)
		return NULL;
	struct held_path *h = &held[nheld];
	*h = (struct held_path){.fd = -1};
	/* An entry of /etc itself (what the watch sees), never by a link. */
	bool etc_file = w->wd_etc >= 0 && strncmp(path, "/etc/", 5) == 0 && !strchr(path + 5, '/');
	h->watched = etc_file;
	h->fd = open(path, O_PATH | O_CLOEXEC | (etc_file ? O_NOFOLLOW : 0));
	/* Not there (/libx32 on most hosts): no rule to make, and no open
	 * per task to find that out; held paths are looked at again within
	 * a minute, and /etc's at its next change. */
	h->covered = h->fd < 0 && errno == ENOENT;
	struct stat st;
	bool link = h->fd >= 0 && fstat(h->fd, &st) == 0 && S_ISLNK(st.st_mode);
	if (link) {
		/* A link of /etc: only if where it leads is covered (below),
		 * which the watch sees change as the link is made anew. */
		close(h->fd);
		h->fd = open(path, O_PATH | O_CLOEXEC);
	}
	if (h->fd >= 0 && (fstat(h->fd, &st) < 0 ||
			   !(S_ISDIR(st.st_mode) || S_ISCHR(st.st_mode) ||
			     ((etc_file || link) && S_ISREG(st.st_mode))))) {
		close(h->fd);
		h->fd = -1;
	}
	h->dir = h->fd >= 0 && S_ISDIR(st.st_mode);
	/* Where it really is, beneath a directory held before it? The
	 * system's paths are all read-only rules: one beneath another adds
	 * nothing. */
	char proc[64], real[PATH_MAX];
	ssize_t rl = -1;
	if (h->fd >= 0) {
		snprintf(proc, sizeof proc, "/proc/self/fd/%d", h->fd);
		rl = readlink(proc, real, sizeof real - 1);
	}
	if (rl > 0) {
		real[rl] = '\0';
		for (size_t i = 0; i < nheld && !h->covered; i++) {
			size_t l = held[i].real ? strlen(held[i].real) : 0;
			h->covered = l && !held[i].covered && strncmp(real, held[i].real, l) == 0 &&
				     (real[l] == '/' || (l == 1 && real[0] == '/'));
		}
		if (h->dir)
			h->real = xstrdup(real);
	}
	if (link && !h->covered && h->fd >= 0) {
		close(h->fd); /* not held: the child opens it, by its link */
		h->fd = -1;
	}
	h->path = xstrdup(path);
	return &held[nheld++];
}

static bool in_plist(const struct plist *l, const char *p)
{
	for (const char *e = NULL; (e = plist_next(l, e));)
		if (strcmp(e, p) == 0)
			return true;
	return false;
}

/* One of the system's paths, and not one the policy names? */
static bool held_system(const struct policy *pol, const char *p)
{
	static const char *const sys[] = {"/usr",	"/bin",	     "/sbin",	   "/lib",
					  "/lib32",	"/lib64",    "/libx32",	   "/proc",
					  "/dev/null", "/dev/zero", "/dev/full", "/dev/random",
					  "/dev/urandom"};
	bool yes = strncmp(p, "/etc/", 5) == 0;
	for (size_t i = 0; !yes && i < ARRAY_SIZE(sys); i++)
		yes = strcmp(p, sys[i]) == 0;
	return yes && !in_plist(&pol->ro_binds, p) && !in_plist(&pol->rw_binds, p) &&
	       !in_plist(&pol->cred_files, p);
}

/* Fill in the held descriptors of a task's rules. */
static void held_apply(struct worker *w, struct confine *c)
{
	int64_t now = now_mono_ms();
	if ((nheld && now - held_since >= HELD_TTL_MS) || w->held_stale || held_gen != etc_gen) {
		if (any_spawning(w))
			goto use; /* their children have the old numbers: later */
		held_drop();
		w->held_stale = false;
	}
	if (!nheld) {
		held_since = now;
		held_gen = etc_gen;
	}
use:;
	/* An entry of /etc changed since: until they are opened again, the
	 * child opens the paths of /etc itself. */
	bool etc_stale = held_gen != etc_gen;
	for (size_t i = 0; i < c->npaths; i++) {
		const char *p = c->paths[i].path;
		const struct held_path *h;
		struct held_memo *m = i < HELD_MAX ? &held_memo[i] : NULL;
		if (m && m->path && strcmp(m->path, p) == 0) {
			h = m->h;
		} else {
			h = held_system(w->pol, p) ? held_get(w, p) : NULL;
			if (m) {
				free(m->path);
				*m = (struct held_memo){xstrdup(p), h};
			}
		}
		if (!h || (h->watched && etc_stale))
			continue;
		if (h->fd < 0 && h->covered && !c->paths[i].writable) {
			c->paths[i].held = c->paths[i].covered = true; /* absent */
			c->paths[i].fd = -1;
		} else if (h->fd >= 0) {
			c->paths[i].held = true;
			c->paths[i].fd = h->fd;
			c->paths[i].dir = h->dir;
			/* (a writable rule is never read-only's to cover) */
			c->paths[i].covered = h->covered && !c->paths[i].writable;
		}
	}
}

/* The rules for a task's own paths from descriptors the child has: its
 * directories, the spares' (scratch_dir). No open, stat and close of
 * each by path. (The task file is opened by path: the run lock is a
 * file of its own now, .NAME.lock.) */
static void task_paths_held(const struct task *t, struct confine *c, const char *task,
			    const char *const dirs[3])
{
	(void)task;
	for (size_t i = 0; i < c->npaths; i++) {
		struct ll_path *p = &c->paths[i];
		if (p->held)
			continue;
		for (int k = 0; k < 3; k++)
			if (t->scr_fd[k] >= 0 && strcmp(p->path, dirs[k]) == 0) {
				*p = (struct ll_path){.path = p->path, .writable = p->writable, .held = true,
						      .dir = true, .fd = t->scr_fd[k]};
				break;
			}
	}
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

static void leaves_drop(void)
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
}

static int task_cgroup(struct worker *w, struct task *t, char *err, size_t errlen)
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
	t->cg_base = (struct cg_cpu){0, 0};
	/* Leaves of workers killed -9 are swept at start-up and when a dead
	 * peer is recovered (peer_dead), before its claims can run again:
	 * not here, where it would cost a scan of every hierarchy per task. */
	char leaf[64];
	snprintf(leaf, sizeof leaf, "kart.%d.%u", (int)getpid(), ++seq);
	struct cg_limits lim = {.memory = t->spec.memory, .pids = t->spec.pids,
				.cpu_milli = t->spec.cpu_milli, .memory_peak = w->pol->leaf_memory};
	return cg_leaf_create(&cg_host, &t->cg, leaf, &lim, err, errlen);
}

static int join_leaf(pid_t pid, void *arg)
{
	struct leaf_join *lj = arg;
	return lj->rj.born ? cg_join_born(lj->leaf, pid) : cg_join(lj->leaf, pid);
}

/* Kill whatever is left in the task's leaf (daemons included), read
 * what it used, remove it. */
static void task_cgroup_end(struct task *t)
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

/* A claimed task that will not run but has a full record (refused). */
static void finish_unstarted(struct worker *w, struct task *t, const char *status,
			     const char *refusal, const char *error)
{
	/* Its leaf, if one was made, goes with it; it applied nothing. */
	task_cgroup_end(t);
	t->cg.mode = CG_MODE_NONE;
	memset(&t->rl, 0, sizeof t->rl);
	fill_result(w, t);
	t->res.status = status;
	t->res.refusal = refusal;
	t->res.error = error;
	t->res.started_ms = 0;
	t->res.finished_ms = now_realtime_ms();
	publish(w, t);
}

static void finish_refused(struct worker *w, struct task *t, const char *refusal,
			   const char *error)
{
	finish_unstarted(w, t, "refused", refusal, error);
}

/* Is the task's memory or pids the built-in default of the policy (and
 * not its lane's own, nor the task's line)? Then it yields where nothing
 * can hold it. */
static bool memory_builtin(const struct policy *pol, const struct task_spec *spec)
{
	return pol->builtin_memory && !pol->lane[spec->lane ? 1 : 0].memory_default &&
	       spec->line_memory <= 0;
}

static void builtin_soft(const struct policy *pol, const struct task_spec *spec, struct rl_host *rh)
{
	int l = spec->lane ? 1 : 0;
	rh->soft_memory = memory_builtin(pol, spec);
	rh->soft_pids = pol->builtin_pids && !pol->lane[l].pids_default && spec->line_pids <= 0;
}

/* The task's leaf, or else the rlimit fallback, as [limits] cgroup says.
 * A limit is never dropped: where neither can hold it, the task is
 * refused. Returns 0 to go on, -1 when the task was finished refused. */
static int task_limits(struct worker *w, struct task *t, uid_t run_uid)
{
	char cgerr[200], rlerr[160];
	/* Read once (sysconf reads /sys for it each time). */
	static long ncpu;
	if (!ncpu)
		ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	/* Uid 0 of the host is exempt from RLIMIT_NPROC. */
	struct rl_host rh = {.use_as = w->pol->rlimit_as, .nproc_binds = run_uid != 0,
			     .ncpu = ncpu > 0 ? (int)ncpu : 1};
	builtin_soft(w->pol, &t->spec, &rh);
	if (w->pol->cgroup == CGROUP_OFF) {
		snprintf(cgerr, sizeof cgerr, "cgroups are off in the policy");
	} else if (task_cgroup(w, t, cgerr, sizeof cgerr) == 0) {
		limits_always(&t->spec, &rh, &t->rl);
		return 0;
	}
	if (w->pol->cgroup == CGROUP_REQUIRE) {
		snprintf(t->errbuf, sizeof t->errbuf,
			 "the policy requires a cgroup for every task (cgroup = require): %.180s",
			 cgerr);
		finish_refused(w, t, "cgroup_setup_failed", t->errbuf);
		return -1;
	}
	if (limits_fallback(&t->spec, &rh, &t->rl, rlerr, sizeof rlerr) < 0) {
		snprintf(t->errbuf, sizeof t->errbuf, "%.120s; no cgroup: %.120s", rlerr, cgerr);
		finish_refused(w, t, "cgroup_setup_failed", t->errbuf);
		return -1;
	}
	if (w->pol->cgroup != CGROUP_OFF)
		logmsg("%s: runs without a cgroup%s: %s", t->name,
		       t->rl.as || t->rl.nproc ? " (rlimits stand in)" : "", cgerr);
	return 0;
}

/* Readable by the submitter and root alone, while it runs and after
 * (renamed into done/ as it is). */
static int open_capture(struct worker *w, const char *name, const char *sfx, uid_t reader)
{
	char p[512];
	if (pathfmt(p, sizeof p, ".%s.%s", name, sfx) < 0)
		return -ENAMETOOLONG;
	int fd = openat(w->wdir, p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	int r = grant_read(fd, reader, false);
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

/* Make the capture file once there is something to put in it. If it
 * cannot be made, the output is read and dropped, and marked truncated. */
static void capture_file(struct worker *w, struct task *t, struct capture *c, const char *sfx)
{
	int n = 0;
	if (c->file >= 0 || c->pipe < 0 || ioctl(c->pipe, FIONREAD, &n) < 0 || n <= 0)
		return;
	int fd = open_capture(w, t->name, sfx, spool_reader(w->sp, t->name, t->uid));
	if (fd < 0) {
		logmsg("%s: cannot create its %s file: %s; output dropped", t->name, sfx,
		       strerror(-fd));
		c->cap = c->bytes;
		c->truncated = true;
		c->werr = -fd;
		return;
	}
	c->file = fd;
}

/* An output pipe is ready: what is in it goes to the capture file. A
 * pipe polls EPOLLIN only while it holds data: hung up without it, it
 * is at its end, and no read is needed to say so (most runs write
 * nothing). */
static void on_capture(struct worker *w, struct task *t, struct capture *c, const char *sfx,
		       uint32_t events)
{
	if (!(events & EPOLLIN) && (events & EPOLLHUP)) {
		ep_del(w, c->pipe);
		capture_close(c);
		return;
	}
	capture_file(w, t, c, sfx);
	if (capture_pump(c) == 1) {
		ep_del(w, c->pipe);
		capture_close(c);
	}
}

/* ---- spare scratch directories ---------------------------------------- */

/* ext4 without a journal gives a new inode only after skipping every
 * inode freed in the last minute, or six while its inode table block is
 * not yet written back (find_inode_bit, recently_deleted): with
 * a mkdir and an rmdir per task, allocation cost grows with throughput
 * and was half the worker's CPU. So an emptied scratch directory is kept
 * as cur/W/.spare.N and renamed into place for the next run of the same
 * uid, but only when nothing of its run can be alive (the kernel removed
 * its leaf) and it carries nothing its task could have set on it: no
 * extended attribute (ACLs included) and the inode flags and project of
 * a directory we made ourselves. Mode and owner are set again. Spares
 * are removed at start-up, by recovery, and at exit. */
#define SPARES_MAX 64
static struct spare {
	unsigned n;
	uid_t uid;
	gid_t gid;   /* its group and mode when it was kept: */
	mode_t mode; /* a change back is made only when needed */
	struct timespec ct; /* and its change time then */
	int fd;             /* an O_PATH descriptor of it, or -1 */
} spares[SPARES_MAX];
static size_t nspares;
static unsigned spare_seq;
static int fresh_state; /* 0: not looked at; 1: fresh_* hold a new directory's; -1: no reuse */
static unsigned fresh_flags, fresh_projid, fresh_xflags;

/* Does a directory's change time on the spool's filesystem move with
 * every change made to it? On the local filesystems that keep one as
 * POSIX says, yes; a FUSE server, say, may not keep it at all. */
static bool ctime_trusted(struct worker *w)
{
	static int known; /* 0: not looked at; 1: trusted; -1: not */
	struct statfs sf;
	if (!known)
		known = fstatfs(w->wdir, &sf) == 0 &&
				(sf.f_type == EXT4_SUPER_MAGIC || sf.f_type == XFS_SUPER_MAGIC ||
				 sf.f_type == BTRFS_SUPER_MAGIC || sf.f_type == TMPFS_MAGIC ||
				 sf.f_type == F2FS_SUPER_MAGIC)
			? 1
			: -1;
	return known > 0;
}

/* Is a change time ct (as the filesystem wrote it, truncated to its
 * granularity g) older than anything done from now on can leave? A
 * change at T >= now is stamped at least floor_g(now) > now - g, so ct
 * must be below now - g. g divides ct's nanoseconds (a power of ten up
 * to a second); with none, g is taken as 2 s. */
static bool ctime_before_now(struct timespec ct)
{
	struct timespec now;
	if (clock_gettime(CLOCK_REALTIME_COARSE, &now) < 0)
		return false;
	int64_t g = 2000000000, a = ct.tv_nsec, b = 1000000000;
	if (a) {
		while (b) { /* gcd(ns, 10^9) >= g */
			int64_t r = a % b;
			a = b;
			b = r;
		}
		g = a;
	}
	return (int64_t)ct.tv_sec * 1000000000 + ct.tv_nsec + g <
	       (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

static int dir_attrs(int d, unsigned *flags, unsigned *projid, unsigned *xflags)
{
	int f = 0;
	struct fsxattr fx;
	if (ioctl(d, FS_IOC_GETFLAGS, &f) < 0 || ioctl(d, FS_IOC_FSGETXATTR, &fx) < 0)
		return -1;
	*flags = (unsigned)f;
	*projid = fx.fsx_projid;
	*xflags = fx.fsx_xflags;
	return 0;
}

/* A scratch directory for a run as uid, made or taken from the spares
 * (one of the mode asked first: no chmod). inplace (backend none): it is
 * used under the name it has, written to name (24 bytes at least), a
 * spare's or a new one named like a spare: no rename into place, nor out
 * of it at the end; its path reaches the task in its environment, and
 * nothing else needs to know whose it is. Else it is made or renamed to
 * cur/W/name, a leftover of that name (a clean-up that failed) removed
 * first. *owned: a spare that is uid's and gid's already (no chown). */
static int scratch_dir(struct worker *w, char *name, bool inplace, mode_t mode, uid_t uid, gid_t gid,
		       bool *owned, struct timespec *ct, int *dfd)
{
	*owned = false;
	if (ct)
		*ct = (struct timespec){0, 0};
	if (dfd)
		*dfd = -1;
	if (!w->keep_fds)
		dfd = NULL; /* none kept (fd_budget) */
	static mode_t um = (mode_t)-1;
	if (um == (mode_t)-1) {
		um = umask(022);
		(void)umask(um);
	}
	size_t pick = nspares;
	for (size_t i = nspares; i-- > 0;)
		if (spares[i].uid == uid && (pick == nspares || spares[i].mode == (mode & ~um))) {
			pick = i;
			if (spares[i].mode == (mode & ~um))
				break;
		}
	if (pick < nspares) {
		struct spare k = spares[pick];
		spares[pick] = spares[--nspares];
		char sp[24];
		snprintf(sp, sizeof sp, ".spare.%u", k.n);
		if (inplace)
			strcpy(name, sp);
		/* Its descriptor goes with it where it keeps its name. */
		if (dfd && inplace)
			*dfd = k.fd;
		else if (k.fd >= 0)
			close(k.fd);
		if (inplace || renameat2(w->wdir, sp, w->wdir, name, RENAME_NOREPLACE) == 0) {
			*owned = k.gid == gid;
			if (k.mode == (mode & ~um)) {
				/* Unchanged since it was checked, and its change
				 * time older than anything the run can do to it
				 * (the filesystem stamps with the coarse clock, or
				 * a finer one): scratch_retire needs no more than
				 * that time to know the run left it as it was. A
				 * chmod or a chown of ours makes it newer, and the
				 * full check is made. */
				if (ct && inplace && k.ct.tv_sec && ctime_trusted(w) && ctime_before_now(k.ct))
					*ct = k.ct;
				return 0;
			}
			if (fchmodat(w->wdir, name, mode & ~um, 0) == 0)
				return 0;
			*owned = false;
			(void)rm_rf_at(w->wdir, name);
		} else
			(void)rm_rf_at(w->wdir, sp);
		if (dfd && *dfd >= 0) {
			close(*dfd);
			*dfd = -1;
		}
	}
	if (inplace)
		snprintf(name, 24, ".spare.%u", ++spare_seq);
	if (mkdirat(w->wdir, name, mode) < 0) {
		int e = -errno;
		if (inplace) {
			name[0] = '\0'; /* nothing to remove later */
			return e;
		}
		if (e != -EEXIST)
			return e;
		(void)rm_rf_at(w->wdir, name);
		if (mkdirat(w->wdir, name, mode) < 0)
			return -errno;
	}
	if (!fresh_state) {
		/* What a directory of ours looks like, for scratch_retire. */
		_cleanup_close_ int d = openat(w->wdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		fresh_state = d >= 0 && dir_attrs(d, &fresh_flags, &fresh_projid, &fresh_xflags) == 0 ? 1 : -1;
	}
	/* Kept with it while it is a spare: the child makes its Landlock
	 * rule from it (task_paths_held), without a walk of the path. */
	if (dfd && inplace)
		*dfd = openat(w->wdir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return 0;
}

/* Empty a run's scratch directory and keep it as a spare, or remove it.
 * keep_full: a directory with something in it stays as it is (the run's
 * $KART_OUTDIR, which spool_finish moves beside the result). Returns
 * true when it is gone from its name. */
static bool scratch_retire(struct worker *w, const struct task *t, const char *name, bool keep_full,
			   const struct timespec *ct, int *dfd)
{
	int nofd = -1;
	if (!dfd)
		dfd = &nofd;
	bool reuse = t->cg_empty && fresh_state > 0 && nspares < SPARES_MAX;
	struct stat st;
	unsigned sn;
	char tail;
	/* A spare used in place whose change time is the one it had before
	 * the run (scratch_dir): no entry was made in it or removed, and no
	 * attribute, flag, mode or owner was changed, since each of those
	 * sets it anew. Still empty and clean: one stat instead of seven
	 * calls. */
	if (reuse && ct && ct->tv_sec && sscanf(name, ".spare.%u%c", &sn, &tail) == 1 &&
	    (*dfd >= 0 ? fstat(*dfd, &st) : fstatat(w->wdir, name, &st, AT_SYMLINK_NOFOLLOW)) == 0 &&
	    S_ISDIR(st.st_mode) &&
	    st.st_uid == t->run_uid && st.st_ctim.tv_sec == ct->tv_sec && st.st_ctim.tv_nsec == ct->tv_nsec) {
		spares[nspares++] = (struct spare){sn, t->run_uid, st.st_gid, st.st_mode & 07777, st.st_ctim, *dfd};
		*dfd = -1;
		return true;
	}
	_cleanup_close_ int d = reuse ? openat(w->wdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
	unsigned fl, pj, xf;
	char xl[1];
	if (d < 0 || fstat(d, &st) < 0 || st.st_uid != t->run_uid || flistxattr(d, xl, 0) != 0 ||
	    dir_attrs(d, &fl, &pj, &xf) < 0 || fl != fresh_flags || pj != fresh_projid ||
	    xf != fresh_xflags)
		reuse = false;
	if (!reuse) {
		if (!keep_full) /* else spool_finish removes it, or moves it if full */
			return rm_rf_at(w->wdir, name) == 0;
		return false;
	}
	/* Most runs leave it empty: one getdents64 says so. */
	char buf[4096] __attribute__((aligned(8)));
	long n = syscall(SYS_getdents64, d, buf, sizeof buf);
	bool empty = n > 0 && (size_t)n < sizeof buf / 2;
	for (long off = 0; empty && off < n;) {
		const char *nm = buf + off + 19; /* struct linux_dirent64: d_name */
		off += *(unsigned short *)(buf + off + 16);
		if (strcmp(nm, ".") && strcmp(nm, ".."))
			empty = false;
	}
	if (!empty) {
		if (keep_full)
			return false;
		_cleanup_close_ int dd = openat(d, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		DIR *dir = dd >= 0 ? fdopendir(dd) : NULL;
		if (!dir)
			return rm_rf_at(w->wdir, name) == 0;
		dd = -1;
		struct dirent *de;
		while ((de = readdir(dir)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
			    rm_rf_at(dirfd(dir), de->d_name) < 0)
				reuse = false;
		closedir(dir);
	}
	char sp[32];
	if (sscanf(name, ".spare.%u%c", &sn, &tail) == 1) {
		/* scratch_dir's in place: a spare already, by its name */
		if (reuse) {
			/* Emptied: its change time is the one after that
			 * (unknown: the full check next time). */
			struct stat now;
			struct timespec ct_now = st.st_ctim;
			if (!empty)
				ct_now = fstat(d, &now) == 0 ? now.st_ctim : (struct timespec){0, 0};
			spares[nspares++] =
				(struct spare){sn, t->run_uid, st.st_gid, st.st_mode & 07777, ct_now, *dfd};
			*dfd = -1;
			return true;
		}
	} else {
		snprintf(sp, sizeof sp, ".spare.%u", sn = ++spare_seq);
		if (reuse && renameat2(w->wdir, name, w->wdir, sp, RENAME_NOREPLACE) == 0) {
			/* Renamed: a change time unknown (never used in place). */
			spares[nspares++] = (struct spare){sn, t->run_uid, st.st_gid, st.st_mode & 07777, {0, 0}, -1};
			return true;
		}
	}
	return rm_rf_at(w->wdir, name) == 0;
}

/* Spares are ours for this life only: every .spare.N goes at start-up (a
 * crash's) and at exit (backend none's run directories are named so, and
 * one its clean-up could not remove is not in spares[]). */
static void spares_drop(struct worker *w)
{
	_cleanup_close_ int d = openat(w->wdir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = d >= 0 ? fdopendir(d) : NULL;
	if (!dir)
		return;
	d = -1;
	struct dirent *de;
	while ((de = readdir(dir)))
		if (strncmp(de->d_name, ".spare.", 7) == 0)
			(void)rm_rf_at(dirfd(dir), de->d_name);
	closedir(dir);
	for (size_t i = 0; i < nspares; i++)
		if (spares[i].fd >= 0)
			close(spares[i].fd);
	nspares = 0;
}

/* A root worker runs each task as the owner of its file, as atd and cron
 * do. Returns 1 with c filled; 0 when the worker is not root (the task
 * runs as the worker's user); -1 with t->errbuf and *refusal set when it
 * must not run. */
static int task_cred(struct worker *w, struct task *t, struct run_cred *c, const char **refusal)
{
	if (geteuid() != 0)
		return 0;
	if (t->uid == 0 && !w->pol->allow_root) {
		*refusal = "root_not_allowed";
		snprintf(t->errbuf, sizeof t->errbuf,
			 "task file owned by root; the policy does not allow root tasks "
			 "([sandbox] allow_root)");
		return -1;
	}
	*refusal = "setuid_failed";
	const struct acct *a = acct_get(t->uid);
	if (!a->found) {
		snprintf(t->errbuf, sizeof t->errbuf,
			 "the task file's owner (uid %u) has no account on this host",
			 (unsigned)t->uid);
		return -1;
	}
	if (a->too_many) {
		snprintf(t->errbuf, sizeof t->errbuf, "user %.64s is in more than %d groups",
			 a->name, RUN_CRED_GROUPS_MAX);
		return -1;
	}
	snprintf(t->user, sizeof t->user, "%s", a->name);
	c->uid = t->uid;
	c->gid = a->gid;
	c->ngroups = a->ngroups;
	memcpy(c->groups, a->groups, (size_t)a->ngroups * sizeof *c->groups);
	return 1;
}

/* The claim is in our directory: look at it again (it may have changed
 * since it was seen in new/) and start it. */
static void spawn_job_free(struct spawn_job *j)
{
	confine_free(&j->conf);
	strv_free(&j->argv);
	strv_free(&j->envp);
	free(j->cwd);
	if (j->sfd >= 0)
		close(j->sfd);
	if (j->ifd >= 0)
		close(j->ifd);
	if (j->ufd_owned && j->ufd >= 0)
		close(j->ufd);
	free(j);
}

static void spawn_finish(struct worker *w, struct spawn_job *j);
static void spawner_start_filtered(struct worker *w);
static void arm_timer(struct worker *w);

static void start_claimed(struct worker *w, const char *name, int64_t arrived_ms)
{
	__attribute__((cleanup(inspect_close))) struct inspect ins;
	task_inspect_open(w->wdir, name, w->pol, &ins);
	if (ins.kind == INSPECT_BUSY) {
		/* A writer opened it between our look and the claim: give it
		 * back and wait for its close. */
		struct claim_meta m = {.attempt = 1};
		_cleanup_close_ int fd = openat(w->wdir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0)
			(void)claim_meta_get(fd, &m);
		if (spool_requeue(w->sp, w->wdir, name, &m) < 0)
			logmsg("%s: cannot give back to new/: %s", name, strerror(errno));
		return;
	}
	if (ins.kind == INSPECT_REJECT) {
		finish_rejected(w, name, ins.error);
		return;
	}
	if (ins.kind != INSPECT_OK)
		return;
	/* `kart cancel` found it here just after our claim: it never runs. */
	char creq[512];
	struct stat cst;
	if (pathfmt(creq, sizeof creq, ".%s.cancel", name) == 0 &&
	    fstatat(w->wdir, creq, &cst, AT_SYMLINK_NOFOLLOW) == 0) {
		char id[256];
		int r = spool_finish_unrun(w->sp, w->wdir, name, "cancelled",
					   "cancelled by kart cancel before it ran", w->id, id, sizeof id);
		if (r < 0)
			logmsg("%s: cannot write its result: %s", name, strerror(-r));
		else
			log_task("finished", id, "cancelled", -1, NULL);
		if (r == 0)
			run_hook(w, id);
		return;
	}

	struct task *t = xcalloc(1, sizeof *t);
	t->name = xstrdup(name);
	t->spec = ins.spec;
	/* No timeout given: the policy's default, and never beyond its
	 * ceiling. */
	if (t->spec.timeout_s < 0)
		t->spec.timeout_s = w->pol->timeout_default_s;
	if (t->spec.timeout_s < 0 || (w->pol->timeout_max_s >= 0 && t->spec.timeout_s > w->pol->timeout_max_s))
		t->spec.timeout_s = w->pol->timeout_max_s;
	if (t->spec.kill_grace_s < 0)
		t->spec.kill_grace_s = w->pol->kill_grace_s;
	limits_apply_defaults(&t->spec, w->pol);
	t->cg_wd = -1;
	t->scr_fd[0] = t->scr_fd[1] = t->scr_fd[2] = -1;
	cg_files_init(&t->cgf);
	t->uid = ins.uid;
	t->run.out.file = t->run.err.file = -1;
	t->run.pidfd = t->run.status_pipe = t->run.out.pipe = t->run.err.pipe = -1;
	t->next = w->tasks;
	w->tasks = t;
	if (ins.fd >= 0) /* the task file, opened by task_inspect */
		(void)claim_meta_get(ins.fd, &t->meta);
	/* From here on it is the spool's record of the task: readable by its
	 * owner (and root) alone, like its output (and its env= values are
	 * the submitter's). */
	if (ins.fd >= 0 && (ins.mode & 077) && fchmod(ins.fd, ins.mode & 07700) < 0)
		logmsg("%s: cannot make the task file its submitter's alone: %s", name, strerror(errno));
	t->submitted_ms = t->meta.submitted_ms ? t->meta.submitted_ms : arrived_ms;
	t->started_ms = now_realtime_ms();

	struct run_cred cred;
	const char *refusal = NULL;
	int as_user = task_cred(w, t, &cred, &refusal);
	gid_t gid = as_user > 0 ? cred.gid : (gid_t)-1; /* scratch_dir's, to compare */
	if (as_user < 0) {
		finish_refused(w, t, refusal, t->errbuf);
		return;
	}

	/* Every task gets a leaf where the host has cgroups: it is what kills
	 * a daemonized grandchild for sure, and measures the task. Without
	 * one (cgroup = auto), rlimits stand in where they can, and a task
	 * without limits runs as sandbox.cgroup "none". */
	t->run_uid = as_user ? cred.uid : geteuid();
	/* Backend container: the engine applies the limits (its own
	 * cgroups); the CLI we run needs no leaf. */
	bool container = w->pol->backend == BACKEND_CONTAINER;
	if (!container && task_limits(w, t, t->run_uid) < 0)
		return;

	/* No clean-up of scratch entries here: finish, re-queue and
	 * recovery remove them, the captures are truncated, and a leftover
	 * directory is removed by scratch_dir. */
	/* The capture files are made at the first byte (capture_file): a
	 * silent run allocates no inode for them. */
	char outname[512], workdir[PATH_MAX], taskpath[PATH_MAX], outhost[PATH_MAX];
	bool own_o = false, own_w = false, own_t = false;
	/* Backend none runs in spares under their own names (scratch_dir):
	 * no rename per directory into place and back. */
	bool inplace = w->pol->backend == BACKEND_NONE;
	char *outdir = inplace ? t->scr[2] : outname;
	if ((!inplace && pathfmt(outname, sizeof outname, ".%s.out", name) < 0) ||
	    scratch_dir(w, outdir, inplace, 0700, t->run_uid, gid, &own_o, &t->scr_ct[2],
			&t->scr_fd[2]) < 0 ||
	    pathfmt(taskpath, sizeof taskpath, "%s/cur/%s/%s", w->sp->path, w->id, name) < 0 ||
	    pathfmt(outhost, sizeof outhost, "%s/cur/%s/%s", w->sp->path, w->id, outdir) < 0 ||
	    (!inplace && pathfmt(workdir, sizeof workdir, "%s/cur/%s/.%s.work", w->sp->path, w->id, name) < 0)) {
		finish_refused(w, t, "sandbox_setup_failed",
			       "cannot prepare the task's output files in the claim directory");
		return;
	}
	char tmpdir[PATH_MAX];
	if (container) {
		/* Its /work, bound into the container; /tmp is the engine's
		 * tmpfs. */
		char wd[512];
		if (pathfmt(wd, sizeof wd, ".%s.work", name) < 0 ||
		    scratch_dir(w, wd, false, 0700, t->run_uid, gid, &own_w, NULL, NULL) < 0 ||
		    (as_user && !own_w &&
		     fchownat(w->wdir, wd, cred.uid, cred.gid, AT_SYMLINK_NOFOLLOW) < 0)) {
			finish_refused(w, t, "sandbox_setup_failed", "cannot create the work directory");
			return;
		}
	} else if (inplace) {
		/* A private TMPDIR too: the host's /tmp is everyone's. */
		const char *wd = t->scr[0], *td = t->scr[1];
		if (scratch_dir(w, t->scr[0], true, 0700, t->run_uid, gid, &own_w, &t->scr_ct[0],
				&t->scr_fd[0]) < 0 ||
		    scratch_dir(w, t->scr[1], true, 0700, t->run_uid, gid, &own_t, &t->scr_ct[1],
				&t->scr_fd[1]) < 0 ||
		    pathfmt(workdir, sizeof workdir, "%s/cur/%s/%s", w->sp->path, w->id, wd) < 0 ||
		    pathfmt(tmpdir, sizeof tmpdir, "%s/cur/%s/%s", w->sp->path, w->id, td) < 0 ||
		    (as_user && ((!own_w && fchownat(w->wdir, wd, cred.uid, cred.gid, AT_SYMLINK_NOFOLLOW) < 0) ||
				 (!own_t && fchownat(w->wdir, td, cred.uid, cred.gid, AT_SYMLINK_NOFOLLOW) < 0)))) {
			finish_refused(w, t, "sandbox_setup_failed", "cannot create the work directory");
			return;
		}
	}
	/* $KART_OUTDIR is the submitter's to write; the worker moves it. */
	if (as_user && !own_o && fchownat(w->wdir, outdir, cred.uid, cred.gid, AT_SYMLINK_NOFOLLOW) < 0) {
		snprintf(t->errbuf, sizeof t->errbuf, "cannot give $KART_OUTDIR to uid %u: %s",
			 (unsigned)cred.uid, strerror(errno));
		finish_refused(w, t, "sandbox_setup_failed", t->errbuf);
		return;
	}

	/* Every task gets the filter: one that cannot be handed over
	 * refuses the task, which never runs without it. Backend container:
	 * as a JSON profile, unless the policy says the runtime takes none. */
	bool want_scmp = !container || w->pol->container_seccomp;
	bool none = w->pol->backend == BACKEND_NONE;
	/* Backend none hands over no descriptor: the child loads the
	 * filter from our memory (no launcher). */
	bool want_fd = want_scmp && !none;
	_cleanup_close_ int sfd = !want_fd ? -1
			      : container ? (w->scmp_json ? memfd_sealed("kart-seccomp.json", w->scmp_json,
									 strlen(w->scmp_json))
							  : -EINVAL)
			      : w->scmp.bpf ? seccomp_prog_fd(&w->scmp) : -EINVAL;
	if (want_scmp && (want_fd ? sfd < 0 : !w->scmp.bpf)) {
		snprintf(t->errbuf, sizeof t->errbuf, "the seccomp filter %s: %.180s",
			 w->scmp.bpf ? "cannot be handed to the sandbox" : "could not be built",
			 w->scmp.bpf ? strerror(-sfd) : w->scmp_err);
		finish_refused(w, t, "seccomp_failed", t->errbuf);
		return;
	}

	struct strv argv = {0}, envp = {0}, lopts = {0};
	char err[256], *input = NULL;
	t->rl.nofile = w->nofile_task;
	limits_launch_opts(&t->rl, &lopts);
	if (container)
		container_name(w->clabel, ++w->cseq, t->cname, sizeof t->cname);
	const struct acct *ha = acct_get(t->run_uid);
	struct sandbox_req req = {.pol = w->pol, .spec = &t->spec, .task_path = taskpath,
				  .home = ha->found ? ha->home : NULL,
				  .seccomp = want_scmp,
				  .work_dir = workdir, .out_dir = outhost, .task_id = name,
				  .tmp_dir = w->pol->backend == BACKEND_NONE ? tmpdir : NULL,
				  .host_env = environ,
				  .attempt = t->meta.attempt, .launch_opts = lopts.v,
				  .container_name = t->cname, .container_label = w->clabel,
				  .run_uid = t->run_uid, .run_gid = as_user ? cred.gid : getegid(),
				  .input = &input};
	int built = sandbox_build(&req, &argv, &envp, err, sizeof err);
	strv_free(&lopts);
	/* The policy's variables, for the container's shell to read: in
	 * a sealed memfd, never on disk. */
	int ifd = -1;
	if (built == 0 && input) {
		size_t il = strlen(input);
		ifd = memfd_sealed("kart-env", input, il);
		explicit_bzero(input, il);
		if (ifd < 0) {
			built = -1;
			snprintf(err, sizeof err, "cannot pass the policy's variables: %s", strerror(-ifd));
		}
	}
	free(input);
	const char *home = sandbox_home(&req);
	snprintf(t->home, sizeof t->home, "%s", home ? home : "");
	if (built < 0) {
		strv_free(&argv);
		strv_free(&envp);
		finish_refused(w, t, "sandbox_setup_failed", err);
		return;
	}
	struct spawn_job *j = xcalloc(1, sizeof *j);
	j->ifd = ifd;
	j->t = t;
	j->argv = argv;
	j->envp = envp;
	j->lj = (struct leaf_join){.rj = {.fn = join_leaf, .cgroup_fd = -1}, .leaf = &t->cg};
	j->lj.rj.arg = &j->lj;
	j->ufd_owned = !w->keep_fds;
	j->ufd = !t->cg.used ? -1 : j->ufd_owned ? cg_leaf_unified_fd(&t->cg) : cg_files_dir(&t->cg, &t->cgf);
	j->lj.rj.cgroup_fd = j->ufd >= 0 ? j->ufd : -1;
	/* Only a unified leaf (no v1 limits to join): birth in it is all. */
	j->lj.rj.born_is_enough = j->ufd >= 0 && !(t->cg.used & ~(1u << CG_UNIFIED));
	j->use_join = t->cg.used != 0;
	j->cap = t->spec.output ? t->spec.output : w->pol->output_default;
	j->cwd = none ? xstrdup(workdir) : NULL;
	/* The container CLI runs as the worker (it needs the engine's
	 * socket); the container runs as the submitter (--user). */
	j->pgroup = none || container;
	j->use_cred = as_user && !container;
	if (j->use_cred)
		j->cred = cred;
	j->sfd = sfd;
	sfd = -1;
	j->use_bcred = as_user > 0;
	if (j->use_bcred)
		j->bcred = cred;
	j->spool = w->sp->path;
	j->umask = t->spec.umask >= 0 ? t->spec.umask : 022;
	/* Backend none: kart-launch's command line, run by the spawned
	 * child itself, which then execs the task (confine.h). */
	if (none) {
		if (confine_parse((int)j->argv.n, j->argv.v, &j->conf, err, sizeof err) < 0) {
			spawn_job_free(j);
			finish_refused(w, t, "sandbox_setup_failed", err);
			return;
		}
		/* Asked once: a kernel's Landlock ABI does not change. */
		static int abi;
		if (j->conf.ll_mode != LL_MODE_OFF && !abi)
			abi = ll_abi();
		if (j->conf.ll_mode != LL_MODE_OFF) {
			held_apply(w, &j->conf);
			task_paths_held(t, &j->conf, taskpath, (const char *[]){workdir, tmpdir, outhost});
		}
		j->is_direct = true;
		j->conf.bset_known = true;
		j->conf.bset = w->bset;
		j->direct = (struct run_direct){.c = &j->conf, .abi = abi};
		if (want_scmp) {
			j->direct.filter = &w->fp_whole;
			/* Born under the outer half: only where nothing is left
			 * to do between the clone and the child's own steps (no
			 * v1 join, which needs a fork of its own). */
			/* (Not a task with binds: their opener forks, which that
			 * filter is not made for.) */
			j->inherit = w->scmp_inner.bpf && (!j->use_join || j->lj.rj.born_is_enough) &&
				     !t->spec.n_binds;
		}
	}
	t->seccomp = want_scmp;
	t->state = TS_SPAWNING;
	w->used[t->spec.lane]++;
	w->nrunning++;
	if (j->inherit && !w->spawner.nf)
		spawner_start_filtered(w);
	bool f = j->inherit && w->spawner.nf;
	pthread_mutex_lock(&w->spawner.h.mu);
	struct spawn_job **tail = f ? &w->spawner.todof : &w->spawner.todo;
	while (*tail)
		tail = &(*tail)->next;
	*tail = j;
	pthread_mutex_unlock(&w->spawner.h.mu);
	pthread_cond_signal(f ? &w->spawner.cvf : &w->spawner.h.cv); /* as in publish */
}

/* A spawn came back: the task runs, or it is refused. */
static void spawn_finish(struct worker *w, struct spawn_job *j)
{
	struct task *t = j->t;
	int r = j->rc;
	int join_err = j->lj.rj.err;
	int bind_rc = j->bind_rc;
	if (bind_rc < 0)
		snprintf(t->errbuf, sizeof t->errbuf, "%s", j->bind_err);
	spawn_job_free(j);
	if (r < 0) {
		w->used[t->spec.lane]--;
		w->nrunning--;
		t->run.out.file = t->run.err.file = -1;
		if (bind_rc == -EACCES) {
			/* A path its submitter may not have: the task file asked
			 * for what it cannot get, as with a ceiling. */
			finish_unstarted(w, t, "rejected", NULL, t->errbuf);
		} else if (bind_rc < 0) {
			finish_refused(w, t, "sandbox_setup_failed", t->errbuf);
		} else if (r == -ECANCELED) {
			snprintf(t->errbuf, sizeof t->errbuf,
				 "the task's process could not be put in its cgroup: %s",
				 strerror(-join_err));
			finish_refused(w, t, "cgroup_join_failed", t->errbuf);
		} else
			finish_refused(w, t, "sandbox_setup_failed", "cannot start the task's process");
		return;
	}
	t->state = TS_RUNNING;
	t->s_pid = (struct src){SRC_PIDFD, t};
	t->s_out = (struct src){SRC_STDOUT, t};
	t->s_err = (struct src){SRC_STDERR, t};
	ep_add(w, t->run.pidfd, &t->s_pid);
	ep_add(w, t->run.out.pipe, &t->s_out);
	ep_add(w, t->run.err.pipe, &t->s_err);
	if (t->spec.timeout_s > 0)
		t->deadline_mono = now_mono_ms() + t->spec.timeout_s * 1000;
	log_task("started", t->name, NULL, -1, NULL);
	(void)notify_statusf("%d running", w->nrunning);
	/* Cancelled, or the shutdown's grace ran out, while it spawned. */
	if (t->pending_ev)
		task_event(w, t, (enum tevent)(t->pending_ev - 1));
	else
		task_pause_look(w, t); /* kart pause while it spawned */
}

static void spawn_done(struct worker *w)
{
	uint64_t x;
	(void)!read(w->spawner.h.efd, &x, sizeof x);
	pthread_mutex_lock(&w->spawner.h.mu);
	struct spawn_job *list = w->spawner.done;
	w->spawner.done = NULL;
	pthread_mutex_unlock(&w->spawner.h.mu);
	/* Oldest first (pushed at the head). */
	struct spawn_job *rev = NULL;
	for (struct spawn_job *j = list, *nx; j; j = nx) {
		nx = j->next;
		j->next = rev;
		rev = j;
	}
	for (struct spawn_job *j = rev, *nx; j; j = nx) {
		nx = j->next;
		spawn_finish(w, j);
	}
	undefer(w);
	dispatch(w);
	arm_timer(w);
}

/* The threads that hold the outer half, at the first task that wants
 * them; none if they cannot start (the others serve). */
static void spawner_start_filtered(struct worker *w)
{
	struct spawner *sp = &w->spawner;
	sp->outer = &w->fp_outer;
	sp->inner = &w->fp_inner;
	for (int i = 0; i < SPAWN_THREADS; i++) {
		int e = pthread_create(&sp->fth[sp->nf], NULL, spawn_main_filtered, sp);
		if (e) {
			logmsg("cannot start a spawn thread: %s", strerror(e));
			break;
		}
		thread_name(sp->fth[sp->nf], "spawn");
		sp->nf++;
	}
}

static void spawner_start(struct worker *w)
{
	struct spawner *sp = &w->spawner;
	sp->wdir = w->wdir;
	pthread_cond_init(&sp->cvf, NULL);
	helper_start(w, &sp->h, spawn_main, sp, SRC_SPAWN, "spawn");
	for (int i = 0; i < SPAWN_THREADS - 1; i++) {
		int e = pthread_create(&sp->more[i], NULL, spawn_main, sp);
		if (e)
			die("cannot start a spawn thread: %s", strerror(e));
		thread_name(sp->more[i], "spawn");
		sp->nmore++;
	}
}

/* After the loop: every spawn has come back (they count as running). */
static void spawner_stop(struct worker *w)
{
	struct spawner *sp = &w->spawner;
	if (sp->h.started) {
		pthread_mutex_lock(&sp->h.mu);
		sp->h.quit = true;
		pthread_cond_broadcast(&sp->h.cv);
		pthread_cond_broadcast(&sp->cvf);
		pthread_mutex_unlock(&sp->h.mu);
	}
	for (int i = 0; i < sp->nmore; i++)
		pthread_join(sp->more[i], NULL);
	sp->nmore = 0;
	for (int i = 0; i < sp->nf; i++)
		pthread_join(sp->fth[i], NULL);
	sp->nf = 0;
	helper_stop(&sp->h);
}

/* Fill free slots from the candidates, best first. */
/* Tasks of uid holding a slot (spawning, running, or draining with its
 * slot not yet given back). */
static int user_running(const struct worker *w, uid_t uid)
{
	int n = 0;
	for (const struct task *t = w->tasks; t; t = t->next)
		if (t->uid == uid && t->state != TS_PUBLISHING && !t->slot_freed)
			n++;
	return n;
}

/* [limits] slots_per_user: a candidate whose submitter has that many
 * running waits in capped (dispatch puts it back), and the next one is
 * looked at. Past CAPPED_MAX set aside, the lane waits for this round: a
 * queue of one user's thousands is not sorted again on every dispatch. */
#define CAPPED_MAX 256
static bool user_at_cap(struct worker *w, struct cand *c, struct heap *capped)
{
	if (!w->pol->slots_per_user || user_running(w, c->uid) < w->pol->slots_per_user)
		return false;
	if (capped->n == capped->cap) {
		capped->cap = capped->cap ? capped->cap * 2 : 16;
		capped->v = xrealloc(capped->v, capped->cap * sizeof *capped->v);
	}
	capped->v[capped->n++] = *c;
	return true;
}

/* Below [worker] min_free nothing new is claimed: a task started now
 * could store neither its output nor its result. Looked at only when
 * there is a task to claim, and again on the timer only while stopped
 * with tasks waiting, so an idle worker still costs nothing. Said once
 * each way. */
#define SPACE_RECHECK_MS 1000
static bool space_ok(struct worker *w)
{
	struct space sp;
	if (!w->pol->min_free_bytes && !w->pol->min_free_pct)
		return true;
	if (space_check(w->sp->root, w->pol->min_free_bytes, w->pol->min_free_pct, &sp) < 0)
		return true; /* not known: as before there was a check */
	if (sp.low != w->space_low) {
		char why[700];
		space_describe(&sp, w->sp->path, why, sizeof why);
		logmsg(sp.low ? "claiming nothing new: %s" : "claiming again: %s", why);
	}
	w->space_low = sp.low;
	w->space_mono = sp.low ? now_mono_ms() + SPACE_RECHECK_MS : 0;
	return !sp.low;
}

static bool any_claimable(const struct worker *w)
{
	for (int l = 0; l < LANE__N; l++)
		if (w->used[l] < w->slots[l] && w->heap[l].n)
			return true;
	return false;
}

static void dispatch(struct worker *w)
{
	if (w->stopping || w->spool_paused)
		return;
	w->space_mono = 0;
	if (w->ncommit < w->backlog_max && any_claimable(w) && !space_ok(w)) {
		arm_timer(w);
		return;
	}
	for (int l = 0; l < LANE__N; l++) {
		struct heap capped = {0};
		while (w->used[l] < w->slots[l] && w->heap[l].n && w->ncommit < w->backlog_max &&
		       capped.n < CAPPED_MAX) {
			struct cand c = heap_pop(&w->heap[l]);
			if (user_at_cap(w, &c, &capped))
				continue;
			if (c.turn > w->fair.now)
				w->fair.now = c.turn;
			int r = spool_claim(w->sp, w->wdir, c.name);
			if (r == -EEXIST) {
				/* We are running a task of the same name: it waits
				 * in new/ until that one has finished. */
				kset_put(&w->known, c.name, K_DEFERRED);
				w->deferred = xrealloc(w->deferred, (w->ndeferred + 1) * sizeof(char *));
				w->deferred[w->ndeferred++] = c.name;
				continue;
			}
			kset_del(&w->known, c.name);
			if (r == 0)
				log_task("claimed", c.name, NULL, -1, NULL);
			if (r == 0)
				start_claimed(w, c.name, c.arrived_ms);
			else if (r != -ENOENT)
				logmsg("%s: claim failed: %s", c.name, strerror(-r));
			free(c.name);
		}
		/* Back in their places, for when their submitter's tasks end. */
		for (size_t i = 0; i < capped.n; i++)
			heap_push(&w->heap[l], capped.v[i]);
		free(capped.v);
	}
	arm_timer(w);
}

static void undefer(struct worker *w)
{
	size_t n = w->ndeferred;
	char **d = w->deferred;
	w->deferred = NULL;
	w->ndeferred = 0;
	for (size_t i = 0; i < n; i++) {
		kset_del(&w->known, d[i]);
		consider(w, d[i]);
		free(d[i]);
	}
	free(d);
}

/* ---- ending a task ----------------------------------------------------------- */

/* The leaf after the run: killed, then watched until it is empty (no
 * waiting in the loop: other tasks are claimed and finished meanwhile).
 * cgroup.events raises IN_MODIFY when "populated" changes; the timer is
 * a fallback, and the only way where there is no unified directory. */
#define DRAIN_POLL_MS 250
#define DRAIN_POLL_FAST_MS 20
#define DRAIN_GIVE_UP_MS 10000

static void task_complete(struct worker *w, struct task *t);
static void arm_timer(struct worker *w);

/* One look: true once the leaf is empty (or given up on), its usage
 * read and its directories removed. */
static bool drain_done(struct worker *w, struct task *t, bool empty, bool late);

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

/* Returns true when the task waits in TS_DRAINING for its leaf. */
static bool drain_begin(struct worker *w, struct task *t)
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
	t->state = TS_DRAINING;
	t->retry_mono = now_mono_ms() + (t->cg_wd >= 0 ? DRAIN_POLL_MS : DRAIN_POLL_FAST_MS);
	return true;
}

static void undefer(struct worker *w);
static void dispatch(struct worker *w);

static void drain_poll(struct worker *w, struct task *t)
{
	if (!drain_step(w, t)) {
		t->retry_mono = now_mono_ms() + (t->cg_wd >= 0 ? DRAIN_POLL_MS : DRAIN_POLL_FAST_MS);
		arm_timer(w);
		return;
	}
	task_complete(w, t);
	undefer(w);
	dispatch(w);
}

/* An inotify event on a watch of ours? */
static bool drain_event(struct worker *w, int wd)
{
	for (struct task *t = w->tasks; t; t = t->next)
		if (t->state == TS_DRAINING && t->cg_wd == wd) {
			drain_poll(w, t);
			return true;
		}
	return false;
}

/* Backend container: no launcher reports from inside, so the CLI's own
 * status says how it went. docker, podman and nerdctl all exit 125 when
 * the container could not be made or started, and otherwise with the
 * container's status (126 and 127 are the task's, as with a shell). */
static void container_end(struct worker *w, struct task *t)
{
	struct run_end *e = &t->rend;
	int st = e->wrapper_status;
	bool clean = WIFEXITED(st) && WEXITSTATUS(st) != 125;
	if (clean) {
		e->started = e->exited = true;
		e->exit_code = WEXITSTATUS(st);
	} else if (WIFSIGNALED(st)) {
		e->started = true;
		e->signal = WTERMSIG(st);
	}
	/* SIGKILL under a memory limit: the runtime says whether it was the
	 * limit, read before the removal takes the container's state. */
	t->coom = 0;
	if (clean && t->end == END_NATURAL && e->exit_code == 137 && t->spec.memory)
		t->coom = container_oom_killed(w->pol, t->cname, 5000);
	/* Whatever ended the CLI other than its container's exit (a kill of
	 * ours, a failure), the container is killed by name; removed in
	 * every case. */
	container_kill(w, t, clean && t->end == END_NATURAL);
}

static void task_ended(struct worker *w, struct task *t)
{
	struct run_end *e = &t->rend;
	ep_del(w, t->run.pidfd);
	ep_del(w, t->run.out.pipe);
	ep_del(w, t->run.err.pipe);
	/* What is still in the pipes is read by run_collect. */
	capture_file(w, t, &t->run.out, "stdout");
	capture_file(w, t, &t->run.err, "stderr");
	if (run_collect(&t->run, e) < 0)
		logmsg("%s: wait: %s", t->name, strerror(errno));
	run_close(&t->run);
	if (w->pol->backend == BACKEND_CONTAINER)
		container_end(w, t);
	if (drain_begin(w, t)) {
		/* cgroup.kill has SIGKILLed all of it at once: nothing of the
		 * run executes another instruction, so the slot is free now,
		 * not once the kernel has finished tearing it down (bwrap's
		 * namespaces can take several ms). */
		if (t->cg_atomic) {
			w->used[t->spec.lane]--;
			w->nrunning--;
			t->slot_freed = true;
		}
		return; /* task_complete once its leaf is empty */
	}
	task_complete(w, t);
}

/* A timeout's or a cancel's result: which signal ended it, or the exit
 * status it chose within its kill grace. */
static void stop_result(struct worker *w, struct task *t, struct result *r)
{
	const struct run_end *e = &t->rend;
	char why[80], how[120];
	if (t->end == END_TIMEOUT)
		snprintf(why, sizeof why, "the wall-clock timeout of %llds passed",
			 (long long)t->spec.timeout_s);
	else
		snprintf(why, sizeof why, "cancelled by kart cancel while running");
	int64_t g = t->spec.kill_grace_s >= 0 ? t->spec.kill_grace_s : w->pol->kill_grace_s;
	if (e->exited) {
		r->exit_code = e->exit_code;
		snprintf(how, sizeof how, "after SIGTERM it exited with status %d", e->exit_code);
	} else {
		r->signal = e->signal ? e->signal : SIGKILL;
		if (!t->term_sent)
			snprintf(how, sizeof how, "ended by %s", signal_name(r->signal));
		else if (r->signal == SIGKILL)
			snprintf(how, sizeof how, "SIGTERM, then SIGKILL after the kill grace of %llds",
				 (long long)g);
		else if (r->signal == SIGTERM)
			snprintf(how, sizeof how, "SIGTERM ended it");
		else
			snprintf(how, sizeof how, "after SIGTERM, %s ended it", signal_name(r->signal));
	}
	snprintf(t->errbuf, sizeof t->errbuf, "%s: %s", why, how);
	r->error = t->errbuf;
}

/* The run is reaped and its leaf gone: the result (or the re-queue). */
static const char *errno_name(int e)
{
	switch (e) {
	case ENOSPC: return "ENOSPC";
	case EDQUOT: return "EDQUOT";
	case EIO: return "EIO";
	case EFBIG: return "EFBIG";
	case EROFS: return "EROFS";
	default: return "errno";
	}
}

/* Output the spool could not store is said in the result, never passed
 * off as complete: the task's status stays its own, and the error says
 * what was lost and why, naming the filesystem, so the host is blamed
 * and not the task. */
static void capture_loss(struct worker *w, struct task *t)
{
	const struct capture *caps[] = {&t->run.out, &t->run.err};
	static const char *const names[] = {"stdout", "stderr"};
	struct result *r = &t->res;
	char *buf = t->errbuf;
	const size_t len = sizeof t->errbuf;
	for (int i = 0; i < 2; i++) {
		const struct capture *c = caps[i];
		if (!c->werr)
			continue;
		struct statfs sf;
		char fs[32] = "unknown";
		if (fstatfs(w->sp->root, &sf) == 0)
			space_fs_name((unsigned long)sf.f_type, fs, sizeof fs);
		char why[600];
		snprintf(why, sizeof why,
			 "%s: %llu bytes of output were lost: the spool's filesystem (%s, holding %s) "
			 "refused the write: %s (%s)",
			 names[i], (unsigned long long)c->lost, fs, w->sp->path, strerror(c->werr),
			 errno_name(c->werr));
		/* After the error the outcome gave, if any, not instead of it. */
		if (!r->error)
			buf[0] = '\0';
		else if (r->error != buf)
			snprintf(buf, len, "%s", r->error);
		size_t used = strlen(buf);
		snprintf(buf + used, len - used, "%s%s", used ? "; " : "", why);
		r->error = buf;
	}
}

static void task_complete(struct worker *w, struct task *t)
{
	struct run_end *e = &t->rend;
	if (!t->slot_freed) {
		w->used[t->spec.lane]--;
		w->nrunning--;
	}

	if (t->end == END_REQUEUE) {
		t->meta.attempt++;
		if (t->meta.submitted_ms == 0)
			t->meta.submitted_ms = t->submitted_ms;
		int r = spool_requeue(w->sp, w->wdir, t->name, &t->meta);
		if (r < 0)
			logmsg("%s: cannot re-queue: %s (left for recovery)", t->name, strerror(-r));
		else
			logmsg("%s: interrupted by shutdown, re-queued (attempt %d next)", t->name,
			       t->meta.attempt);
		task_free(w, t);
		return;
	}

	fill_result(w, t);
	struct result *r = &t->res;
	/* bwrap loads it before the launcher runs, and the launcher (backend
	 * none) before it says "start": a started task ran under it. */
	r->seccomp = t->seccomp && e->started;
	if (t->rend.landlock[0])
		r->landlock = t->rend.landlock; /* what the launcher applied */
	char *errbuf = t->errbuf;
	const size_t errlen = sizeof t->errbuf;
	r->finished_ms = now_realtime_ms();
	r->paused_ms = wctl_paused_ms(&t->pause);
	r->cpu_user_ms = e->ru.ru_utime.tv_sec * 1000 + e->ru.ru_utime.tv_usec / 1000;
	r->cpu_system_ms = e->ru.ru_stime.tv_sec * 1000 + e->ru.ru_stime.tv_usec / 1000;
	r->memory_peak = (int64_t)e->ru.ru_maxrss * 1024;
	if (t->cg.mode != CG_MODE_NONE) {
		/* The leaf counts the whole tree, reaped by us or not. */
		if (t->cgu.cpu_user_us >= 0 && t->cgu.cpu_system_us >= 0) {
			r->cpu_user_ms = t->cgu.cpu_user_us / 1000;
			r->cpu_system_ms = t->cgu.cpu_system_us / 1000;
		}
		if (t->cgu.memory_peak >= 0)
			r->memory_peak = t->cgu.memory_peak;
	}
	if (t->end == END_TIMEOUT || t->end == END_CANCEL) {
		r->status = t->end == END_TIMEOUT ? "timeout" : "cancelled";
		stop_result(w, t, r);
	} else if (!e->started && e->refusal) {
		/* A confinement step the policy requires failed (Landlock,
		 * the switch to the submitter): the task never ran. */
		r->status = "refused";
		r->refusal = e->refusal;
		r->error = e->refusal_why;
		if (strcmp(e->refusal, "landlock_unavailable") == 0)
			r->landlock = "unsupported";
	} else if (!e->started) {
		r->status = "refused";
		r->refusal = "sandbox_setup_failed";
		int st = e->wrapper_status;
		snprintf(errbuf, errlen,
			 "the sandbox could not be built (%s %s %d); its message is in stderr",
			 backend_name(w->pol->backend), WIFEXITED(st) ? "exited with status" : "got signal",
			 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		r->error = errbuf;
	} else if (e->exited) {
		r->exit_code = e->exit_code;
		r->status = e->exit_code == 0 ? "ok" : "failed";
	} else {
		r->status = "killed";
		r->signal = e->signal ? e->signal : SIGKILL;
		snprintf(errbuf, errlen, "ended by %s", signal_name(r->signal));
		r->error = errbuf;
	}
	if (t->end == END_NATURAL && e->started && t->cg.mode != CG_MODE_NONE &&
	    t->cgu.oom_kills > 0) {
		/* The kernel's count, not a guess from SIGKILL or exit 137. */
		r->status = "oom";
		if (t->spec.memory)
			snprintf(errbuf, errlen, "the memory limit of %llu bytes was hit: "
				 "the kernel killed %lld process(es)",
				 (unsigned long long)t->spec.memory, (long long)t->cgu.oom_kills);
		else
			snprintf(errbuf, errlen, "out of memory: the kernel killed %lld process(es)",
				 (long long)t->cgu.oom_kills);
		r->error = errbuf;
	}
	/* Not under the built-in share of the host's memory: too large a
	 * limit to make a SIGKILL a probable OOM. */
	if (t->end == END_NATURAL && e->exited && e->exit_code == 137 &&
	    w->pol->backend == BACKEND_CONTAINER && t->spec.memory &&
	    !memory_builtin(w->pol, &t->spec)) {
		/* Backend container: the runtime's OOMKilled (container_end);
		 * where it could not be read, SIGKILL under a memory limit is
		 * called a probable OOM. */
		int oom = t->coom;
		if (oom != 0) {
			r->status = "oom";
			snprintf(errbuf, errlen,
				 oom > 0 ? "the memory limit of %llu bytes was hit: the container "
					   "runtime reports it OOM-killed"
					 : "probably out of memory: exit status 137 (SIGKILL) under a "
					   "memory limit of %llu bytes; the runtime's OOMKilled state "
					   "could not be read",
				 (unsigned long long)t->spec.memory);
			r->error = errbuf;
		}
	}
	capture_loss(w, t);
	struct capture *caps[] = {&t->run.out, &t->run.err};
	struct result_stream *rs[] = {&r->out, &r->err};
	for (int i = 0; i < 2; i++) {
		rs[i]->bytes = caps[i]->bytes;
		rs[i]->truncated = caps[i]->truncated;
		rs[i]->lost_bytes = caps[i]->lost;
		/* A run's result always has both files, empty or not. */
		rs[i]->captured = true;
		rs[i]->unmade = caps[i]->file < 0 && !caps[i]->truncated;
	}
	/* The outputs are fsynced by the commit thread, first. */
	/* The work directory of backend none goes, whatever the outcome;
	 * an empty $KART_OUTDIR too (a full one is kept with the result). */
	char p[512];
	/* The commit thread measures a full $KART_OUTDIR against this. */
	r->artifacts_max = w->pol->artifacts_max;
	t->scratch_retired = true;
	if (t->scr[0][0] || t->scr[2][0]) {
		/* Backend none's, by their names: each gone is forgotten. */
		for (int i = 0; i < 2; i++) {
			bool gone = !t->scr[i][0] || scratch_retire(w, t, t->scr[i], false, &t->scr_ct[i], &t->scr_fd[i]);
			t->scratch_retired &= gone;
			if (gone)
				t->scr[i][0] = '\0';
		}
		r->outdir_gone = !t->scr[2][0] || scratch_retire(w, t, t->scr[2], true, &t->scr_ct[2], &t->scr_fd[2]);
		if (r->outdir_gone)
			t->scr[2][0] = '\0';
		else
			r->outdir_scratch = t->scr[2]; /* the commit moves or removes it */
	} else {
		static const char *const gone[] = {"work", "tmp"};
		for (size_t i = 0; i < ARRAY_SIZE(gone); i++)
			t->scratch_retired &= pathfmt(p, sizeof p, ".%s.%s", t->name, gone[i]) == 0 &&
					      scratch_retire(w, t, p, false, NULL, NULL);
		r->outdir_gone = pathfmt(p, sizeof p, ".%s.out", t->name) == 0 &&
				 scratch_retire(w, t, p, true, NULL, NULL);
	}
	publish(w, t);
}

static void kill_now(struct worker *w, struct task *t)
{
	t->state = TS_KILLING;
	run_kill(&t->run);
	/* The CLI is not the container: that goes by name (its --rm then
	 * removes it). */
	container_kill(w, t, false);
}

/* SIGTERM to the whole of the task, not to what holds it together (bwrap,
 * the container CLI): false where that cannot be done. */
static bool term_tree(struct worker *w, struct task *t)
{
	switch (w->pol->backend) {
	case BACKEND_CONTAINER:
		return container_term(w, t);
	case BACKEND_BWRAP:
		/* Its comm is the name of the path bwrap execs it by. */
		return run_term_launcher(&t->run, strrchr(SANDBOX_LAUNCH, '/') + 1) == 0;
	case BACKEND_NONE:
		break;
	}
	/* The leaf lists what left the process group too; once is enough
	 * (a shell's trap would run twice). */
	if (t->cg.mode == CG_MODE_NONE || cg_leaf_signal(&t->cg, SIGTERM) <= 0)
		run_term(&t->run);
	return true;
}

/* A timeout or a cancel: SIGTERM, and SIGKILL once the kill grace has
 * passed (TE_TIMEOUT in TS_STOPPING), as `timeout -k` and systemd do.
 * Its end comes when the task's main process ends; what it leaves
 * behind is killed then. */
static void stop_begin(struct worker *w, struct task *t)
{
	int64_t g = t->spec.kill_grace_s >= 0 ? t->spec.kill_grace_s : w->pol->kill_grace_s;
	if (g <= 0 || !term_tree(w, t)) {
		if (g > 0)
			logmsg("%s: cannot find the task to send SIGTERM: killed at once", t->name);
		kill_now(w, t);
		return;
	}
	t->term_sent = true;
	t->state = TS_STOPPING;
	t->deadline_mono = now_mono_ms() + g * 1000;
}

static void task_event(struct worker *w, struct task *t, enum tevent ev)
{
	/* A cancel, a timeout or a stop ends a paused task as any other:
	 * thawed first, so that its SIGTERM is heard and nothing is left
	 * frozen. */
	if (t->pause.how != PAUSE_NONE)
		task_thaw(w, t);
	if (t->state == TS_SPAWNING) {
		/* Not ours to kill yet: done once it is back (spawn_finish). */
		if ((ev == TE_CANCEL || ev == TE_GRACE_OVER) && !t->pending_ev)
			t->pending_ev = (int)ev + 1;
		return;
	}
	switch (transitions[t->state][ev]) {
	case TA_NONE:
		return;
	case TA_FINISH:
		task_ended(w, t);
		undefer(w);
		dispatch(w);
		return;
	case TA_ABANDON:
		abandon(w, t);
		return;
	case TA_STOP_TIMEOUT:
		t->end = END_TIMEOUT;
		stop_begin(w, t);
		return;
	case TA_STOP_CANCEL:
		t->end = END_CANCEL;
		stop_begin(w, t);
		return;
	case TA_KILL_REQUEUE:
		t->end = END_REQUEUE;
		break;
	case TA_KILL:
		break;
	}
	kill_now(w, t);
}

/* ---- time ------------------------------------------------------------------- */

static void arm_timer(struct worker *w)
{
	int64_t next = 0;
#define EARLIER(x) \
	do { \
		if ((x) && (!next || (x) < next)) \
			next = (x); \
	} while (0)
	for (struct task *t = w->tasks; t; t = t->next) {
		if (t->state == TS_RUNNING || t->state == TS_STOPPING)
			EARLIER(t->deadline_mono);
		if (t->state == TS_PUBLISHING || t->state == TS_DRAINING)
			EARLIER(t->retry_mono);
	}
	if (w->stopping && (w->nrunning || w->tasks))
		EARLIER(w->grace_mono);
	EARLIER(w->recover_mono);
	EARLIER(w->busy_mono);
	EARLIER(w->space_mono);
#undef EARLIER
	struct itimerspec its = {0};
	if (next) {
		its.it_value.tv_sec = next / 1000;
		its.it_value.tv_nsec = (next % 1000) * 1000000;
	}
	/* Nothing pending: disarmed, and an idle worker sleeps for good.
	 * Several calls per task compute the same time: set it once. */
	if (next == w->timer_at)
		return;
	w->timer_at = next;
	(void)timerfd_settime(w->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void on_timer(struct worker *w)
{
	uint64_t x;
	if (read(w->tfd, &x, sizeof x) < 0 && errno != EAGAIN)
		logmsg("timerfd: %s", strerror(errno));
	w->timer_at = 0; /* it fired: disarmed (arm_timer at the end sets it again) */
	int64_t now = now_mono_ms();
	for (struct task *t = w->tasks, *nx; t; t = nx) {
		nx = t->next;
		if ((t->state == TS_RUNNING || t->state == TS_STOPPING) && t->deadline_mono &&
		    t->deadline_mono <= now)
			task_event(w, t, TE_TIMEOUT);
		else if (t->state == TS_PUBLISHING && t->retry_mono <= now)
			publish(w, t);
		else if (t->state == TS_DRAINING && t->retry_mono <= now)
			drain_poll(w, t);
	}
	if (w->stopping && w->grace_mono && w->grace_mono <= now) {
		for (struct task *t = w->tasks, *nx; t; t = nx) {
			nx = t->next; /* an abandoned task is freed */
			task_event(w, t, TE_GRACE_OVER);
		}
		w->grace_mono = 0;
	}
	if (w->recover_mono && w->recover_mono <= now) {
		w->recover_mono = 0;
		recover_own(w);
		scan_peers(w);
	}
	if (w->busy_mono && w->busy_mono <= now) {
		busy_recheck(w);
		dispatch(w);
	}
	if (w->space_mono && w->space_mono <= now)
		dispatch(w);
	arm_timer(w);
}

/* ---- inotify and signals -------------------------------------------------- */

static void on_inotify(struct worker *w)
{
	char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool rescan = false, peers = false;
	for (bool more = true; more;) {
		ssize_t n = read(w->ino, buf, sizeof buf);
		if (n <= 0)
			break;
		/* Room was left for another event: the queue was empty (and
		 * the fd is level-triggered: what comes later wakes us). */
		more = (size_t)n > sizeof buf - sizeof(struct inotify_event) - NAME_MAX - 1;
		/* A change in /etc first: a task these events start must not
		 * get a held file that was replaced before them. */
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;
			p += sizeof *ev + ev->len;
			if (w->wd_etc >= 0 && (ev->wd == w->wd_etc || (ev->mask & IN_Q_OVERFLOW)))
				etc_gen++; /* (without a watch it stays -1) */
		}
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;
			p += sizeof *ev + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) {
				rescan = peers = true;
				continue;
			}
			struct drop *dd = w->ndrops ? drop_find(w, NULL, ev->wd) : NULL;
			if (dd) {
				if (ev->mask & (IN_MOVE_SELF | IN_DELETE_SELF | IN_IGNORED))
					drop_forget(w, dd);
				else if (ev->len && !rescan) {
					w->busy_seen = false;
					drop_entry(w, dd, ev->name);
					if (w->busy_seen && (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO)))
						busy_arm(w);
				}
				continue;
			}
			if (ev->len && ev->wd == w->wd_drop) {
				if (!rescan)
					drop_seen(w, ev->name);
				continue;
			}
			if (!ev->len && drain_event(w, ev->wd))
				continue;
			if (!ev->len)
				continue;
			if (ev->wd == w->wd_new && strcmp(ev->name, WCTL_SPOOL_PAUSED) == 0) {
				scan_pauses(w);
			} else if (ev->wd == w->wd_new) {
				if (!rescan && !(ev->mask & IN_DELETE)) {
					w->busy_seen = false;
					consider(w, ev->name);
					if (w->busy_seen && (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO)))
						busy_arm(w);
				}
			} else if (ev->wd == w->wd_tmp) {
				if (w->nbusy) /* a link() publisher's tmp/ name went */
					busy_arm(w);
			} else if (ev->wd == w->wd_wdir) {
				size_t l = strlen(ev->name);
				char pn[TASK_NAME_MAX + 1];
				if (ev->name[0] == '.' && l > 8 && strcmp(ev->name + l - 7, ".cancel") == 0) {
					ev->name[l - 7] = '\0';
					struct task *t = find_task(w, ev->name + 1);
					if (t)
						task_event(w, t, TE_CANCEL);
				} else if (wctl_pause_entry(ev->name, pn, sizeof pn)) {
					struct task *t = find_task(w, pn);
					if (t)
						task_pause_look(w, t);
				}
			} else if (ev->wd == w->wd_cur) {
				watch_peer(w, ev->name);
			} else if (strcmp(ev->name, ".lock") == 0) {
				for (size_t i = 0; i < w->npeers; i++)
					if (w->peers[i].wd == ev->wd)
						recover_peer(w, w->peers[i].name);
			}
		}
	}
	if (rescan) {
		scan_new(w);
		scan_drops(w);
		scan_cancels(w);
		scan_pauses(w);
	}
	if (peers)
		scan_peers(w);
	dispatch(w);
}

static void begin_stop(struct worker *w, const char *why)
{
	if (w->stopping) {
		/* A second request: no more grace. */
		w->grace_mono = now_mono_ms();
	} else {
		w->stopping = true;
		w->grace_mono = now_mono_ms() + (int64_t)w->pol->term_grace_s * 1000;
		/* A paused task would not finish in the grace: killed and
		 * queued again now, thawed first (task_event). */
		for (struct task *t = w->tasks, *nx; t; t = nx) {
			nx = t->next;
			if (t->pause.how != PAUSE_NONE)
				task_event(w, t, TE_GRACE_OVER);
		}
		logmsg("%s: no more claims; %d running task(s) get %ds to finish", why, w->nrunning,
		       w->pol->term_grace_s);
		(void)notify_send("STOPPING=1");
	}
	arm_timer(w);
}

static void build_seccomp(struct worker *w);

struct env_gap {
	char names[512];
	size_t len;
};

static void env_gap_add(const char *name, const char *where, void *arg)
{
	struct env_gap *g = arg;
	(void)where;
	if (getenv(name))
		return;
	/* Two kinds may name one variable: say it once. */
	size_t n = strlen(name);
	for (const char *p = g->names; (p = strstr(p, name)); p += n)
		if ((p == g->names || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
			return;
	int k = snprintf(g->names + g->len, sizeof g->names - g->len, "%s%s", g->len ? " " : "", name);
	if (k > 0 && (size_t)k < sizeof g->names - g->len)
		g->len += (size_t)k;
}

/* The policy passes these from our environment, which is the one we
 * started with: a reload cannot give us a variable, so say which lack. */
static void log_env_missing(const struct policy *pol, const char *when)
{
	struct env_gap g = {.len = 0};
	g.names[0] = '\0';
	policy_env_names(pol, env_gap_add, &g);
	if (g.len)
		logmsg("%s: the policy passes variables this worker's environment lacks: %s (they "
		       "come from the worker's environment at its start: set them there and "
		       "restart it; kart doctor lists them)", when, g.names);
}

static void on_signal(struct worker *w)
{
	struct signalfd_siginfo si;
	while (read(w->sig, &si, sizeof si) == sizeof si) {
		switch (si.ssi_signo) {
		case SIGTERM:
		case SIGINT:
			begin_stop(w, si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
			break;
		case SIGHUP: {
			struct policy np;
			char err[600];
			if (policy_load(&np, w->sp->path, err, sizeof err) < 0) {
				logmsg("SIGHUP: policy NOT reloaded, the previous one stays in force: %s",
				       err);
				break;
			}
			/* The launcher and the sandbox program were resolved at
			 * start-up, from the worker's own PATH: a reload does not
			 * move them (a bwrap still unresolved, under another
			 * backend then, is resolved now). */
			memcpy(np.bwrap, w->pol->bwrap, sizeof np.bwrap);
			memcpy(np.launcher, w->pol->launcher, sizeof np.launcher);
			if (policy_prepare(&np, w->sp->path, err, sizeof err) < 0) {
				logmsg("SIGHUP: policy NOT reloaded, the previous one stays in force: %s",
				       err);
				break;
			}
			*w->pol = np;
			w->held_stale = true;
			for (int l = 0; l < LANE__N; l++)
				if (w->opts->slots[l] == 0)
					w->slots[l] = np.slots[l];
			logmsg("SIGHUP: policy reloaded (backend %s, slots fast=%d batch=%d)",
			       backend_name(np.backend), w->slots[0], w->slots[1]);
			log_env_missing(w->pol, "SIGHUP");
			/* More slots may want more descriptors than at start. */
			fd_budget(w);
			/* No policy setting shapes the filter: rebuilt only if it failed. */
			if (!w->scmp.bpf)
				build_seccomp(w);
			dispatch(w);
			break;
		}
		default:
			break;
		}
	}
}

static bool only_lock_left(int wdir)
{
	DIR *d = opendir_at(wdir, ".");
	if (!d)
		return false;
	bool only = true;
	struct dirent *de;
	while (only && (de = readdir(d)))
		only = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		       strcmp(de->d_name, ".lock") == 0;
	closedir(d);
	return only;
}

static bool idle_and_empty(struct worker *w)
{
	return w->nrunning == 0 && !w->tasks && w->heap[0].n == 0 && w->heap[1].n == 0 &&
	       w->nbusy == 0 && w->ndeferred == 0 && w->nown_busy == 0 && w->ncommit == 0 &&
	       !w->recover_mono; /* a dead peer's claim waits for its old run to go */
}

/* A filter that cannot be built is logged once and refuses every task
 * (refusal seccomp_failed) until a SIGHUP builds it. */
static void build_seccomp(struct worker *w)
{
	int r = seccomp_prog_build(&w->scmp, w->scmp_err, sizeof w->scmp_err);
	if (r < 0)
		logmsg("seccomp: the filter could not be built, every task will be refused: %s",
		       w->scmp_err);
	else
		logmsg("seccomp: %d rules, %zu instructions", w->scmp.nrules, w->scmp.len / 8);
	char err[256];
	if (r == 0 && !w->scmp_inner.bpf &&
	    seccomp_prog_build_split(&w->scmp_outer, &w->scmp_inner, err, sizeof err) < 0) {
		seccomp_prog_free(&w->scmp_outer);
		logmsg("seccomp: no split filter (%s): each task loads the whole program", err);
	}
	w->fp_whole = seccomp_prog_fprog(&w->scmp);
	w->fp_outer = seccomp_prog_fprog(&w->scmp_outer);
	w->fp_inner = seccomp_prog_fprog(&w->scmp_inner);
	if (!w->scmp_json && !(w->scmp_json = seccomp_profile_json()))
		logmsg("seccomp: the container profile could not be made");
}

/* What the worker still holds when it stops: freed, so that valgrind
 * (make check-valgrind) reports only memory lost while it ran. */
static void worker_release(struct worker *w)
{
	for (int l = 0; l < LANE__N; l++) {
		for (size_t i = 0; i < w->heap[l].n; i++)
			free(w->heap[l].v[i].name);
		free(w->heap[l].v);
	}
	for (size_t i = 0; i < w->known.nb; i++)
		for (struct kent *e = w->known.b[i], *nx; e; e = nx) {
			nx = e->next;
			free(e);
		}
	free(w->known.b);
	for (size_t i = 0; i < w->npeers; i++)
		free(w->peers[i].name);
	free(w->peers);
	for (size_t i = 0; i < w->nown_busy; i++)
		free(w->own_busy[i]);
	free(w->own_busy);
	for (size_t i = 0; i < w->ndeferred; i++)
		free(w->deferred[i]);
	free(w->deferred);
	for (struct hook *h = w->hooks, *nx; h; h = nx) {
		nx = h->next;
		free(h);
	}
	seccomp_prog_free(&w->scmp);
	seccomp_prog_free(&w->scmp_outer);
	seccomp_prog_free(&w->scmp_inner);
	free(w->scmp_json);
	w->scmp_json = NULL;
}

int worker_main(struct spool *sp, struct policy *pol, const struct worker_opts *opts)
{
	struct worker w = {.sp = sp, .pol = pol, .id = opts->id, .drain = opts->drain, .opts = opts};
	char p[PATH_MAX];
	for (int l = 0; l < LANE__N; l++)
		w.slots[l] = opts->slots[l] > 0 ? opts->slots[l] : pol->slots[l];
	fd_budget(&w);

	int r = spool_worker_open(sp, w.id, &w.wdir, &w.lockfd);
	if (r == -EBUSY)
		die("worker id '%s' is in use by a live worker (cur/%s/.lock is held)", w.id, w.id);
	if (r < 0)
		die("cannot open cur/%s/: %s", w.id, strerror(-r));

	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGIO); /* lease breaks: never the default (fatal) action */
	sigaddset(&mask, SIGPIPE);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		die("sigprocmask: %s", strerror(errno));
	sigdelset(&mask, SIGIO);
	sigdelset(&mask, SIGPIPE);
	w.sig = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	w.ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	w.ep = epoll_create1(EPOLL_CLOEXEC);
	w.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (w.sig < 0 || w.ino < 0 || w.ep < 0 || w.tfd < 0)
		die("event loop set-up: %s", strerror(errno));

	/* The watch first, then the scans: nothing that lands in between
	 * can be missed. */
	if (pathfmt(p, sizeof p, "%s/new", sp->path) < 0 ||
	    (w.wd_new = inotify_add_watch(w.ino, p, IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE |
							     IN_ONLYDIR | IN_DONT_FOLLOW)) < 0)
		die("inotify watch on %s: %s", p, strerror(errno));
	new_mode(&w);
	w.wd_drop = -1;
	if (sp->drop >= 0 && w.new_shared)
		logmsg("new/ is writable by others than its owner: files there not owned by root or "
		       "new/'s owner are rejected, and drop/ is not looked at; make new/ 0755 "
		       "(see kart.tmpfiles)");
	else if (sp->drop >= 0 &&
		 (pathfmt(p, sizeof p, "%s/drop", sp->path) < 0 ||
		  (w.wd_drop = inotify_add_watch(w.ino, p, IN_CREATE | IN_MOVED_TO | IN_ONLYDIR |
								   IN_DONT_FOLLOW)) < 0))
		die("inotify watch on %s: %s", p, strerror(errno));
	if (pathfmt(p, sizeof p, "%s/tmp", sp->path) < 0 ||
	    (w.wd_tmp = inotify_add_watch(w.ino, p, IN_DELETE | IN_MOVED_FROM | IN_ONLYDIR)) < 0)
		die("inotify watch on %s: %s", p, strerror(errno));
	if (pathfmt(p, sizeof p, "%s/cur/%s", sp->path, w.id) < 0 ||
	    (w.wd_wdir = inotify_add_watch(w.ino, p, IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_ONLYDIR)) < 0)
		die("inotify watch on %s: %s", p, strerror(errno));
	if (pathfmt(p, sizeof p, "%s/cur", sp->path) < 0 ||
	    (w.wd_cur = inotify_add_watch(w.ino, p, IN_CREATE | IN_MOVED_TO | IN_ONLYDIR)) < 0)
		die("inotify watch on %s: %s", p, strerror(errno));

	/* Held files of /etc (held_get) are good while this says nothing. */
	/* And the accounts are looked up again only after a change there
	 * (acct_get): IN_MODIFY too, for a file written in place. */
	w.wd_etc = inotify_add_watch(w.ino, "/etc",
				     IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY |
					     IN_ONLYDIR);
	etc_gen = w.wd_etc >= 0 ? 0 : -1;
	if (w.wd_etc < 0)
		logmsg("no inotify watch on /etc (%s): each task's child opens its files", strerror(errno));

	w.s_ino = (struct src){SRC_INOTIFY, NULL};
	w.s_sig = (struct src){SRC_SIGNAL, NULL};
	w.s_timer = (struct src){SRC_TIMER, NULL};
	ep_add(&w, w.ino, &w.s_ino);
	ep_add(&w, w.sig, &w.s_sig);
	ep_add(&w, w.tfd, &w.s_timer);

	/* Start-up is done: compile the tasks' filter once, then give up
	 * every capability the work from here on does not need. */
	build_seccomp(&w);
	unsigned long long kept;
	char cerr[256];
	if (caps_drop_worker(&kept, cerr, sizeof cerr) < 0)
		die("dropping capabilities: %s", cerr);
	if (kept) {
		char names[512];
		caps_mask_names(kept, names, sizeof names);
		logmsg("capabilities kept: %s", names);
	}
	/* What a task's child must drop from the bounding set (confine.c). */
	for (int c = 0; c < 64; c++) {
		int in = prctl(PR_CAPBSET_READ, c, 0, 0, 0);
		if (in < 0)
			break;
		if (in == 1)
			w.bset |= 1ULL << c;
	}

	/* Our own claims from an earlier life under this id, then dead
	 * peers', then the queue; first, what dead workers left running in
	 * their cgroups. */
	sweep_leaves(&w);
	container_label(sp->path, w.id, w.clabel, sizeof w.clabel);
	sweep_containers(&w, w.id);
	spares_drop(&w);
	int rq = 0, lost = 0;
	{
		_cleanup_close_ int d = openat(w.wdir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		DIR *dir = d >= 0 ? fdopendir(d) : NULL;
		struct dirent *de;
		if (dir) {
			d = -1;
			while ((de = readdir(dir))) {
				if (de->d_name[0] == '.')
					continue;
				w.own_busy = xrealloc(w.own_busy, (w.nown_busy + 1) * sizeof(char *));
				w.own_busy[w.nown_busy++] = xstrdup(de->d_name);
			}
			closedir(dir);
		}
		recover_own(&w);
	}
	(void)rq;
	(void)lost;
	scan_peers(&w);
	scan_drops(&w);
	scan_pauses(&w);
	scan_new(&w);
	logmsg("worker %s on %s: backend %s, slots fast=%d batch=%d", w.id, sp->path,
	       backend_name(pol->backend), w.slots[0], w.slots[1]);
	log_env_missing(pol, "start");
	(void)notify_send("READY=1\nSTATUS=waiting for tasks");
	struct src s_wdog = {SRC_WATCHDOG, NULL};
	_cleanup_close_ int wdog = notify_watchdog_fd();
	if (wdog >= 0)
		ep_add(&w, wdog, &s_wdog);
	/* After the capabilities were dropped: they are per thread, and the
	 * commit thread inherits what the loop kept. */
	commit_start(&w);
	spawner_start(&w);
	dispatch(&w);

	for (;;) {
		if (w.stopping && w.nrunning == 0 && !w.tasks && !w.ncommit)
			break;
		if (w.drain && idle_and_empty(&w)) {
			/* Events may still be in flight: look once more. */
			scan_drops(&w);
			scan_new(&w);
			dispatch(&w);
			if (idle_and_empty(&w))
				break;
		}
		if (nkept && w.nrunning == 0 && w.heap[0].n == 0 && w.heap[1].n == 0)
			leaves_drop(); /* nothing to run: no leaf is kept */
		hooks_sweep(&w);
		struct epoll_event evs[32];
		int n = epoll_wait(w.ep, evs, 32, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("epoll_wait: %s", strerror(errno));
		}
		/* Exits last: finishing frees a task that other events of this
		 * batch may still name (so the second pass reads no src). */
		struct task *exited[32];
		int nexited = 0;
		for (int i = 0; i < n; i++) {
			struct src *s = evs[i].data.ptr;
			switch (s->kind) {
			case SRC_INOTIFY: on_inotify(&w); break;
			case SRC_SIGNAL: on_signal(&w); break;
			case SRC_TIMER: on_timer(&w); break;
			case SRC_WATCHDOG: notify_watchdog(wdog); break;
			case SRC_PIDFD: exited[nexited++] = s->t; break;
			case SRC_HOOK: on_hook(&w, s); break;
			case SRC_COMMIT: commit_done(&w); break;
			case SRC_SPAWN: spawn_done(&w); break;
			case SRC_STDOUT:
				on_capture(&w, s->t, &s->t->run.out, "stdout", evs[i].events);
				break;
			case SRC_STDERR:
				on_capture(&w, s->t, &s->t->run.err, "stderr", evs[i].events);
				break;
			}
		}
		for (int i = 0; i < nexited; i++)
			task_event(&w, exited[i], TE_EXIT);
	}
	spawner_stop(&w);
	commit_stop(&w);
	hooks_finish(&w);
	spares_drop(&w);
	leaves_drop();
	held_drop();
	/* Leave nothing behind: our claim directory goes if it is empty. A
	 * claim still in it (a re-queue that failed) keeps the .lock, which
	 * our exit unlocks: that is what lets a peer recover it (§11). */
	if (only_lock_left(w.wdir)) {
		(void)unlinkat(w.wdir, ".lock", 0);
		if (unlinkat(sp->cur, w.id, AT_REMOVEDIR) < 0 && errno != ENOENT &&
		    errno != ENOTEMPTY)
			logmsg("cannot remove cur/%s: %s", w.id, strerror(errno));
	} else
		logmsg("cur/%s still holds claims: left for recovery", w.id);
	logmsg("worker %s stopped", w.id);
	worker_release(&w);
	return 0;
}
