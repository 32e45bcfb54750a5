/* worker_int.h - what the worker's files share: the task, the worker,
 * the helper threads' queues, and one section of prototypes per file.
 * Nothing here is for the rest of kart (worker.h is). */
#ifndef KART_WORKER_INT_H
#define KART_WORKER_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <time.h>
#include <linux/filter.h>

#include "cgroup.h"
#include "confine.h"
#include "credfwd.h"
#include "outdir.h"
#include "prioq.h"
#include "result.h"
#include "rlimits.h"
#include "run.h"
#include "sandbox.h"
#include "seccomp.h"
#include "spool.h"
#include "strset.h"
#include "task.h"
#include "worker.h"
#include "worker_control.h"
#include "worker_sched.h"

struct backend;
struct hook;

/* ---- the task lifecycle ------------------------------------------------ */

/* A task's states and the events that move it, in the order of a life.
 * What each event does in each state is transitions[][] in
 * worker_state.c, the one place that says it; docs/DESIGN.md prints it
 * (test_lifecycle keeps the two equal). A new state is a row there, a
 * new event a column, and a name in tstate_names or tevent_names. */
enum tstate {
	TS_CLAIMED,    /* first (a task is made zeroed): in cur/W/, not running: being
		       * prepared, or its spawn failed */
	TS_SPAWNING,   /* with its backend's spawn */
	TS_RUNNING,
	TS_STOPPING,   /* sent SIGTERM (a timeout, a cancel), its kill grace running */
	TS_KILLING,    /* sent SIGKILL */
	TS_DRAINING,   /* reaped; its leaf emptying, what is left of it may still run */
	TS_DYING,      /* reaped; its leaf killed at once (cgroup.kill): nothing of it runs
		       * again while the kernel tears it down */
	TS_ENDED,      /* nothing of its run is left, its slot free: its result made */
	TS_COMMITTING, /* with the commit thread (out of w->tasks) */
	TS_PUBLISHING, /* its result could not be published: retried */
	TS_FREED,      /* its life is over: freed by the action that led here */
	TS__N
};
enum tevent {
	TE_NONE,          /* no event: what an action returns when none follows */
	TE_SPAWN,         /* prepared: handed to its backend's spawn */
	TE_SPAWNED,       /* back from it, its process running */
	TE_SPAWN_FAILED,  /* back from it, not started */
	TE_EXIT,          /* its process ended (pidfd) */
	TE_TIMEOUT,       /* its deadline passed (the timeout, or the kill grace) */
	TE_CANCEL,        /* kart cancel asked */
	TE_GRACE_OVER,    /* the shutdown's grace ran out */
	TE_LEAF_KILLED,   /* its leaf was killed at once: nothing of the run executes again */
	TE_LEAF_EMPTY,    /* nothing of the run is left in its leaf (or it had none) */
	TE_RESULT,        /* its result is made, to be published */
	TE_RETRY_KEPT,    /* retry_on took another attempt: its task file is back in new/ */
	TE_REQUEUE,       /* its attempt is void (the shutdown, its output lost): run it again */
	TE_COMMITTED,     /* back from the commit thread, published */
	TE_COMMIT_FAILED, /* back from it, not published */
	TE_AGAIN,         /* its time to look again came, or its leaf changed */
	TE_GIVE_UP,       /* its publish cannot succeed (commit_failed) */
	TE_DETACH,        /* the worker stops, and its backend's run goes on without it */
	TE_GIVE_BACK,     /* its backend did not start it, blaming it for nothing */
	TE__N
};
enum tend { END_NATURAL, END_TIMEOUT, END_CANCEL, END_REQUEUE };

/* SRC_BACKEND: a backend's descriptor (a task's pidfd and pipes, with
 * the backends that run a local child), handed to its ready(). */
enum srckind { SRC_INOTIFY, SRC_SIGNAL, SRC_TIMER, SRC_BACKEND, SRC_WATCHDOG, SRC_HOOK, SRC_HELPER };

struct task;
struct src {
	enum srckind kind;
	struct task *t;
	const struct backend *be; /* SRC_BACKEND: whose */
};

/* A task's scratch directories with backend none (struct task's scr). */
enum scr_dir { SCR_WORK, SCR_TMP, SCR_OUT, SCR_NDIRS };

/* A task's parts, each owned by the file that uses it (the task's own
 * fields, below, are the record and the state machine's). */

/* worker_scratch.c's: the run's directories in the claim directory. */
struct task_scratch {
	/* Backend none: its work, tmp and $KART_OUTDIR directories (indexed
	 * by enum scr_dir), spares used under their own names (scratch_dir);
	 * "" once handed on. */
	char dir[SCR_NDIRS][24];
	/* and the change time each had as a spare, when it was older than
	 * the run (scratch_dir); {0, 0} if not */
	struct timespec ct[SCR_NDIRS];
	int fd[SCR_NDIRS]; /* and an O_PATH descriptor of each, or -1 */
	bool retired;      /* its work and tmp directories are gone (a spare, or removed) */
};

/* outdir.h's, for the task: its $KART_OUTDIR's tmpfs, or -1; once the
 * run is over, the copy the commit thread hands to the mover first
 * (mv.src >= 0). */
struct task_outdir {
	int mfd;
	struct outdir_move mv;
};

/* worker_commit.c's: how its result's commit went. */
struct task_commit {
	int err;                  /* 0: published; else -errno of the failed step */
	bool output;              /* the failure was an fsync of its output */
	int tries;                /* publishes failed so far (commit_failed) */
	struct json_pending jpend; /* its JSON, staged and not yet committed */
};

/* With a helper thread (the commit thread from publish(), a spawn
 * thread from its backend's spawn, until it hands the task back the
 * loop does not touch it): its link in the thread's queues, and the
 * event the thread has for it when it hands it back (worker_ev.c's
 * helper_back, worker.c's helper_done). */
struct task_back {
	struct task *next;
	enum tevent ev;
};

/* A task's cgroup leaf, worker_leaf.c's alone: the leaf, what was read
 * from it after the run, and its drain. */
struct task_leaf {
	struct cg_leaf cg;    /* cg.mode != NONE: it ran in this leaf */
	struct cg_usage use;  /* read from the leaf after the run (use_read) */
	bool use_read;
	int wd;               /* draining: watch on the leaf's cgroup.events, or -1 */
	bool atomic;          /* draining: cgroup.kill was sent (else kill again) */
	int64_t settle_end;   /* draining: no kill before then (0: sent, or none to send) */
	int64_t drain_end;    /* draining: give up waiting then */
	bool empty;           /* the leaf was removed: nothing of the run is alive */
	struct cg_files files; /* its files, kept open with it (files_kept) */
	bool files_kept;      /* descriptors kept across runs: the leaf is the pool's */
};

struct task {
	struct task *next;
	char *name;
	struct task_spec spec;
	struct claim_meta meta;
	uid_t uid;
	int64_t submitted_ms, started_ms;
	/* The state machine's (worker_state.c, worker_task.c). */
	enum tstate state;
	enum tend end;
	int64_t deadline_mono; /* its timeout, or its kill grace; 0: none */
	bool term_sent;        /* a timeout or cancel sent SIGTERM first */
	int64_t retry_mono;    /* publishing failed, or its leaf drains: look again then */
	struct {
		bool on;           /* spawning: an event came, kept for when it runs */
		enum tevent ev;
	} kept;
	/* The backend it started under (a SIGHUP may name another for the
	 * next tasks), and that backend's own state for it (backend.h). */
	const struct backend *be;
	void *be_task;
	int engine_oom;        /* backend.h engine_limits: the engine's OOM kill, 1, 0, -1 unknown,
				* 2 its job's state (outcome.h ENGINE_OOM_STATE) */
	bool lost_run;         /* its backend lost the run (a node failed): re-queued as a dead
				* worker's claim is, lost past retries= (errbuf: why) */
	uid_t run_uid;         /* whom it ran as: owner of its scratch directories */
	bool seccomp;          /* its sandbox was handed the filter */
	int uniq_fd;           /* unique=: its key's lock (worker_sched.h), or -1 */
	struct pause_state pause; /* kart pause: frozen, its clock stopped (worker_control.c) */
	/* A run of the worker's child (backend_local.c's; its captures,
	 * worker_capture.c's): its pidfd and pipes, what the loop watches
	 * them by, its spawn job until the spawn is back, and how it ended. */
	struct run run;
	struct src s_pid, s_out, s_err;
	struct spawn_job *job;
	struct run_end rend;
	/* Its limits: worker_leaf.c's leaf, and rlimits.h's plan where
	 * there is none (the fallback kart-launch sets). */
	struct task_leaf leaf;
	struct rl_plan rl;
	struct task_scratch scr;
	struct task_outdir outdir;
	struct credfwd fwd;  /* its kind's credential forwarder (credfwd.h) */
	struct task_back back;
	struct task_commit commit;
	/* Its record. */
	struct result res;
	char idbuf[256];
	char user[256], errbuf[1024]; /* storage for res.user, res.error */
	char home[TASK_BIND_PATH_MAX]; /* its HOME where a bind holds it, or "" */
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
 * (spool-layout WORKER §6). The thread touches only the spool and the tasks it
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
	struct task *done; /* handed back, newest first, linked by back.next (under mu) */
};

struct commit {
	struct helper h;
	struct task *todo; /* linked by back.next */
	struct spool *sp;
	int wdir;
	int writes_max; /* results written before their fsyncs, at most (under h.mu) */
	/* $KART_OUTDIR copies, off this thread (outdir.h): tasks with the
	 * mover (under h.mu), which come back into todo */
	struct outdir_mover mover;
	int moving;
};

/* Results written at once before their fsyncs (json_pending): enough
 * for the disk to take them together, few enough descriptors (one where
 * the worker keeps none across runs, fd_budget). */
#define COMMIT_WRITES_MAX 16

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
	int ifd; /* the CLI's stdin (backend container: container_env_input), or -1 */
	bool ufd_owned; /* else ufd is the task's (t->leaf.files) */
	struct run_cred cred;
	struct confine conf;
	bool inherit;		 /* for a thread that holds the outer half */
	struct run_direct direct;
	/* The task's binds, opened in the spawn thread as the submitter
	 * (bcred; use_bcred false: as the worker, who is the submitter). */
	bool use_bcred;
	struct run_cred bcred;
	const char *spool;
	bool spool_masked; /* the sandbox covers it: a bind above it may be (binds.h) */
	int bind_rc; /* binds_open's: -EACCES rejects the task */
	char bind_err[640];
	int umask;
	/* $KART_OUTDIR's tmpfs, mounted here by the holder (outdir.h: a
	 * mount and its reply take about 0.4 ms, not the loop's); the child
	 * then joins the holder's namespaces first (outdir_join) */
	bool outdir, join_ns;
	struct outdir_ns *ons;
	char outpath[PATH_MAX];
	uint64_t obytes, ofiles;
	uid_t ouid;
	gid_t ogid;
	int userns, mntns;
	/* after=: the upstreams' outputs, opened in done/ (sandbox.h
	 * struct sandbox_input), handed down after the binds. */
	int in_fd[2 * TASK_AFTER_MAX];
	int n_in_fd;
	struct leaf_join {
		struct run_join rj;
		const struct cg_leaf *leaf;
		int self[CG__SLOTS]; /* rj.self_fds (leaf_join_setup) */
	} lj;
};

/* Two: while one sleeps through a child's set-up, the other starts the
 * next task (docs/PERFORMANCE.md, "Two spawn threads"). */
#define SPAWN_THREADS 2

/* Backend none has SPAWN_THREADS more, started at its first task, that
 * each load the outer half of the split filter (seccomp.h) on themselves.
 * Every child they clone is born under it, shared and not copied, and
 * loads only the seven instructions of the inner half before its exec:
 * the whole program's load (its JIT, the action cache filled by running
 * it for every syscall number, and its free at exit) is paid once per
 * thread instead of once per task (docs/PERFORMANCE.md, "The filter
 * in two halves"). The
 * outer half lets clone3 through, so these threads can still clone
 * into a cgroup; the inner half refuses it to the task. They take only
 * jobs of backend none (nothing else may be born under that filter);
 * one whose load failed spawns with the whole program, as the others
 * do. */
struct spawner {
	struct helper h; /* the first thread; its lock, condition and eventfd serve all */
	pthread_t more[SPAWN_THREADS - 1];
	int nmore;
	struct spawn_job *todo; /* in order */
	int wdir;
	pthread_cond_t cv_filtered;		/* the filtered threads' */
	struct spawn_job *todo_filtered;	/* their queue, in order */
	pthread_t filtered_th[SPAWN_THREADS]; /* the filtered threads, nfiltered of them */
	int nfiltered;
	const struct sock_fprog *outer, *inner; /* what they load, what their children do */
};

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

/* ---- the worker ---------------------------------------------------------- */

/* What the worker knows of a name of new/ (w->known, a strset).
 * K_SCHEDULED: it waits for its time (w->sched, worker_sched.c);
 * K_WAITING: its after= names an id without a result (worker_wait.c). */
enum kstate { K_QUEUED = 1, K_BUSY, K_DEFERRED, K_SCHEDULED, K_WAITING };

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

/* The descriptor budget (worker.c's fd_budget), set at start and when a
 * SIGHUP changes the slots. */
struct fd_budget {
	rlim_t nofile;      /* RLIMIT_NOFILE's soft limit, raised where the slots want more */
	rlim_t nofile_task; /* the one it was at start, for the tasks, where raised; else 0 */
	bool keep;          /* descriptors kept across runs (spares', leaves') */
	bool budgeted;      /* fd_budget has run once */
	int backlog_max;    /* results waiting for the commit thread, at most */
};

/* The tasks' seccomp filter, built once (worker.c's build_seccomp), handed
 * over by the backends. */
struct filters {
	struct seccomp_prog whole; /* whole.bpf NULL: it failed, */
	char err[256];             /* and why: every task is refused */
	struct seccomp_prog outer, inner; /* the same, split (spawner); or NULL */
	/* The same three as the kernel takes them. Once built they are never
	 * rebuilt (only a filter that failed is, at SIGHUP): spawns point at
	 * them for the worker's life. */
	struct sock_fprog fp_whole, fp_outer, fp_inner;
	char *json;                /* the same, as a container runtime's profile */
};

/* worker_peer.c's: other workers, and recovery of a dead one's claims. */
struct peers {
	struct peer *v;
	size_t n;
	char **own;           /* our own claims from an earlier life, still held by its runs */
	size_t nown;
	int64_t recover_mono; /* retry recovery of busy claims then */
};

struct worker {
	struct spool *sp;
	struct policy *pol;
	const char *id;
	int slots[LANE__N];
	/* Counted by the state machine alone (task_event), as a task's
	 * state changes: the slots held in each lane, in all, and the tasks
	 * with the commit thread. */
	int used[LANE__N], nrunning, ncommit;
	struct fd_budget fds;
	bool drain, stopping;
	bool spool_paused;   /* new/.paused: claim nothing (kart pause --all) */
	int64_t grace_mono;
	int64_t timer_at;         /* what the timerfd is armed for (0: disarmed) */
	unsigned long long bset;  /* our bounding set, read once after the drop */
	struct peers peers;
	int wdir, lockfd, ep, ino, sig, tfd;
	int wd_new, wd_wdir, wd_cur, wd_tmp;
	/* A shared spool's drop/ and the drop directories in it (drop_seen);
	 * new/'s owner and whether others may write it (consider). */
	int wd_drop;
	int hoist_lock; /* cur/.hoist (hoist_lock_open), or -1 */
	struct drop *drops;
	size_t ndrops;
	bool new_shared;
	uid_t new_uid;
	struct src s_ino, s_sig, s_timer, s_wdog;
	int wdog; /* the watchdog's timerfd (sd_notify WATCHDOG), or -1 */
	struct prioq heap[LANE__N];
	struct sched_queue sched; /* K_SCHEDULED names, by time (worker_sched.c) */
	struct uniq_index uniq;   /* queued and scheduled tasks with unique= */
	struct fair fair;
	struct strset known;
	size_t nbusy, ndeferred;
	/* after=: the tasks of new/ waiting on others' results, and the
	 * results read; done/ is watched (wd_done) while any waits
	 * (worker_wait.c's). */
	struct {
		struct depwait *wait;
		struct dep_cache *cache;
		int wd_done;
	} after;
	/* A close is reported before the writer's write access is dropped
	 * (fsnotify_close runs early in __fput), so a lease tried on the
	 * event can still fail: busy names are looked at again a few times,
	 * with backoff, after each event that left one busy. */
	struct {
		int64_t mono;
		int step;
		bool seen; /* consider() just found a name busy */
	} busy;
	uint64_t seq;
	struct task *tasks; /* claimed and not yet published */
	/* A task's slot came free, or its claim went (the state table,
	 * which sits below the queue): the loop undefers and dispatches
	 * before its next wait. */
	bool freed;
	char **deferred;
	struct hook *hooks; /* on_done hooks still running */
	int nhooks;
	const struct worker_opts *opts;
	struct filters flt;
	const struct backend *be; /* the backend new tasks start under (backend_use) */
	struct commit commit;
	struct outdir_ns ons; /* where $KART_OUTDIR is a bounded tmpfs (bwrap) */
	struct spawner spawner;
	bool held_stale; /* SIGHUP: the held Landlock paths are opened again */
	int wd_etc;      /* the watch on /etc (etc_gen); -1: none, nothing of /etc held */
	bool space_low;     /* below [worker] min_free: nothing new is claimed */
	int64_t space_mono; /* while so, with tasks waiting: look again then */
	/* worker_quota.c (a shared spool): a scan of tmp/ and drop/ due then
	 * (0: none); below min_free, the members over their share (claimed
	 * for no more), as measured at share_mono. */
	int64_t quota_mono, share_mono;
	uid_t over[64];
	size_t nover;
};

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

/* One section per file, from the top of the worker down: each file
 * calls only the files below it, save worker_state.c and worker_task.c,
 * the table and its actions, on one floor: task_event runs an action,
 * which returns the next event rather than fire it (test_lifecycle).
 * The backends (src/backend/) sit below worker_task.c. docs/DESIGN.md
 * has the map. */

/* ---- worker.c: the event loop: worker_main, the epoll dispatch, inotify routed by watch,
 * signals, the timer (set before each wait from every file's deadline), the descriptor
 * budget, and the helper threads' hand-back on the loop's side */
void helper_done(struct worker *w, struct helper *h);

/* ---- worker_peer.c: peers: other workers' claim directories, and recovery of a dead one's */
void recover_peer(struct worker *w, const char *peer);
void recover_own(struct worker *w);
/* A claim a backend's sweep moved here from a dead worker, to follow its
 * run at the next look (recover_own). */
void recover_adopt(struct worker *w, const char *name);
void watch_peer(struct worker *w, const char *peer);
void scan_peers(struct worker *w);

/* ---- worker_queue.c: queued tasks: what new/ holds, claiming, deferral, names still busy */
void consider(struct worker *w, const char *name);
void new_mode(struct worker *w);
void scan_new(struct worker *w);
void busy_arm(struct worker *w);
void busy_recheck(struct worker *w);
/* An entry of dirfd with two links (ins): busy while it may be a link()
 * publish in progress, else left rejected. */
void link_publish_look(struct worker *w, int dirfd, const char *name, struct inspect *ins);
void dispatch(struct worker *w);
void undefer(struct worker *w);
/* The timer rang (sched_next_mono): the names whose time came, looked at
 * again (true: dispatch). */
bool sched_ring(struct worker *w);

/* ---- worker_drop.c: drop/: a shared spool's per-user drop directories, moved into new/ */
struct drop *drop_find(struct worker *w, const char *name, int wd);
void drop_forget(struct worker *w, struct drop *d);
void hoist_finish(struct worker *w, const char *dot);
void hoist_lock_open(struct worker *w);
/* Reject dirfd/name, an entry of the drop directory of uid (or its move
 * into new/): claimed straight into our claim directory as claim (it
 * never passes through new/), made the worker's if it is the dropper's
 * own (a member keeps no object she can write in done/), its bytes kept
 * only with keep and up to task_max, then given its result. */
void drop_reject(struct worker *w, int dirfd, const char *name, const char *claim, const char *why,
		 uid_t uid, bool keep);
void drop_key(struct worker *w, const char *key);
void drop_entry(struct worker *w, struct drop *d, const char *name);
void drop_seen(struct worker *w, const char *name);
void scan_drops(struct worker *w);

/* ---- worker_quota.c: a shared spool's bounds on each member: slots, tmp/ and drop/, min_free */
/* slots_per_user where kart.conf leaves it to the shared spool: half the
 * slots, at least 1 (at start, and after SIGHUP). */
void quota_policy(struct worker *w);
/* Something arrived in tmp/ or a drop directory: a scan soon. */
void quota_note(struct worker *w);
/* Each member's entries in tmp/ and their drop directory beyond
 * drop_max_bytes or drop_max_files: the newest rejected or removed. */
void quota_scan(struct worker *w);
/* Below min_free: measure who holds more than their share (over[]). */
void quota_shares(struct worker *w);
bool quota_over(const struct worker *w, uid_t uid);

/* ---- worker_start.c: starting a claimed task: read again, whom it runs as, its backend's
 * prepare, then its spawn */
void start_claimed(struct worker *w, const char *name, int64_t arrived_ms);
/* A claim with a run record (claim_meta.run) of backend be: a task
 * again, its run followed. 0, or -1 when it cannot be read now (left
 * for the next look). */
int start_adopted(struct worker *w, const char *name, int be, const char *run);

/* ---- worker_state.c: the task state machine: transitions[][] and task_event, the one
 * setter of a task's state, one event per turn */
void task_event(struct worker *w, struct task *t, enum tevent ev);
void task_table_markdown(FILE *f);
/* Its state holds a slot of its lane (w->used, w->nrunning: counted as
 * the state changes, nowhere else). */
bool task_holds_slot(const struct task *t);

/* ---- worker_task.c: a task's life once it is made: its record, a run's end, its result,
 * stop and kill, pause and cancel, its free */
struct task *find_task(struct worker *w, const char *name);
void scan_cancels(struct worker *w);
/* kart pause / resume: do what cur/W/.NAME.pause says; scan_pauses
 * does it for every task, and reads new/.paused. */
void task_pause_look(struct worker *w, struct task *t);
void scan_pauses(struct worker *w);
void abandon(struct worker *w, struct task *t);
void detach(struct worker *w, struct task *t);
/* Its backend says the run began (backend.h queued): its timeout's clock
 * starts at began_mono, its start is began_ms. */
void task_run_began(struct worker *w, struct task *t, int64_t began_mono, int64_t began_ms);
void finish_unstarted(struct worker *w, struct task *t, const char *status,
		      const char *refusal, const char *error);
void finish_refused(struct worker *w, struct task *t, const char *refusal,
		    const char *error);
/* The actions of the state table, run by task_event alone (each named
 * in worker_state.c's enum taction): each returns the event that
 * follows, or TE_NONE, and never calls task_event. */
void task_thaw(struct worker *w, struct task *t);
enum tevent task_started(struct worker *w, struct task *t);
enum tevent task_ended(struct worker *w, struct task *t);
enum tevent task_complete(struct worker *w, struct task *t);
void task_requeue(struct worker *w, struct task *t);
enum tevent stop_begin(struct worker *w, struct task *t);
void kill_now(struct worker *w, struct task *t);
enum tevent commit_failed(struct worker *w, struct task *t);
/* GIVE_UP: finished lost, the failure named, without its outputs; freed
 * (or left for recovery where even that cannot be written). */
void publish_lost(struct worker *w, struct task *t);
enum tevent spawn_refuse(struct worker *w, struct task *t);
void give_back(struct worker *w, struct task *t);
/* Is the task's memory (or pids) the policy's built-in default, which
 * yields where nothing can hold it? (The result says so.) */
bool memory_builtin(const struct policy *pol, const struct task_spec *spec);

/* after=, when a run starts: what the sandbox is given of each
 * upstream (sandbox.h), and the descriptors of it opened in done/. */
struct dep_inputs {
	struct sandbox_input in[TASK_AFTER_MAX];
	char *path[2 * TASK_AFTER_MAX]; /* the host paths in[] points at */
	int fd[2 * TASK_AFTER_MAX];
	int nfd, npath;
	char in_dir[PATH_MAX]; /* backend none: the links' directory */
};

/* ---- worker_wait.c: after=: tasks waiting on other tasks' results, released by each
 * result; a run's inputs opened in done/ */
bool deps_ready(struct worker *w, const char *name, const struct inspect *ins);
void dep_result(struct worker *w, const char *fname);
void dep_recheck(struct worker *w);
void dep_scanned(struct worker *w);
int deps_start(struct worker *w, const char *name, const struct inspect *ins,
	       struct dep_inputs *di);
void dep_inputs_free(struct dep_inputs *di);
int dep_links(struct worker *w, struct dep_inputs *di, const char *work, int n);

/* ---- worker_sched.c: delayed start, retry, unique keys (issue 20) ---- */
/* consider: true when name was a duplicate of a unique= key (finished
 * `cancelled`) or waits for its time (kept in w->sched): not queued. */
bool sched_consider(struct worker *w, const char *name, const struct inspect *ins);
/* start_claimed: true when the claim was handled here (given back to
 * wait for its time, or a duplicate finished); else *ufd is its key's
 * lock (-1: none), for the task to hold until its result. */
bool sched_claimed(struct worker *w, const char *name, const struct inspect *ins, int *ufd);
/* dispatch: name was claimed; forget it among the keys' queued ones. */
void sched_claim_done(struct worker *w, const char *name);
/* task_complete: true when the attempt is kept and the task's file is
 * back in new/ for its retry (retry_on=). */
bool sched_retry(struct worker *w, struct task *t);
/* The timer: the CLOCK_MONOTONIC ms of the earliest time waited for (0:
 * none); what to do when it rings is the queue's (sched_ring). */
int64_t sched_next_mono(const struct worker *w);

/* ---- worker_spawn.c: the spawn threads: the child's set-up off the event loop */
void spawn_job_free(struct spawn_job *j);
void spawner_start_filtered(struct worker *w);
void spawner_start(struct worker *w);
void spawner_stop(struct worker *w);

/* ---- worker_commit.c: the commit thread: results made durable off the event loop */
void publish(struct worker *w, struct task *t);
void commit_start(struct worker *w);
void commit_stop(struct worker *w);
/* The mover's done(): a task's $KART_OUTDIR copied, back to the commit thread. */
void outdir_moved(struct outdir_move *m);

/* ---- worker_capture.c: a task's stdout and stderr, captured into the claim directory */
void capture_file(struct worker *w, struct task *t, struct capture *c, enum scratch_file kind);
void on_capture(struct worker *w, struct task *t, struct capture *c, enum scratch_file kind,
		uint32_t events);
void capture_loss(struct worker *w, struct task *t);

/* ---- worker_leaf.c: the per-task cgroup leaf: taken from a pool made and renewed ahead of
 * time, drained after the run */
void sweep_leaves(struct worker *w);
void leaves_start(struct worker *w);
void leaves_drop(void);
int task_cgroup(struct worker *w, struct task *t, char *err, size_t errlen);
int join_leaf(pid_t pid, void *arg);
void leaf_join_setup(struct task *t, struct leaf_join *lj, int ufd);
void task_cgroup_end(struct task *t);
bool drain_begin(struct worker *w, struct task *t);
bool drain_poll(struct worker *w, struct task *t);
struct task *drain_event(struct worker *w, int wd);

/* ---- worker_enforce.c: what this worker can hold of memory=, pids= and cpu=, and the
 * variables it lacks, published as cur/WID/.enforced for kart submit (at the start, before
 * any task's leaf, and on SIGHUP) */
void enforce_publish(struct worker *w);
/* At its stop: it holds nothing any more. */
void enforce_withdraw(struct worker *w);

/* ---- worker_fair.c: a queued name's place: its submitter's fair turn, its priority, its push */
uint64_t fair_turn(struct fair *f, uid_t uid);
int cand_priority(struct worker *w, const char *name, const struct inspect *ins);
void queue_cand(struct worker *w, const char *name, enum lane lane, int prio, uid_t uid,
		int64_t arrived_ms);

/* ---- worker_end.c: the end of a name that never ran, and of a task's record; it calls
 * nothing of the worker's above it */
/* A claim (in cur/W/) that will not run, finished with its result
 * (rejected, skipped, cancelled, refused before a task was made): no
 * slot taken, the on_done hook run. */
void finish_unrun(struct worker *w, const char *name, const char *status, const char *why);
/* The same for an entry of new/, claimed first (another worker's
 * claim wins). */
void finish_from_new(struct worker *w, const char *name, const char *status, const char *why);
void task_unlink(struct worker *w, struct task *t);
void task_free(struct worker *w, struct task *t);

/* ---- worker_hook.c: programs run on the host: the on_done hook, the container CLI's kill and rm */
void hooks_sweep(struct worker *w);
void hook_spawn_host(struct worker *w, char *const argv[], char *const argv2[],
		const char *what);
void hook_run(struct worker *w, const char *id);
void hook_done(struct worker *w, struct src *s);
void hooks_finish(struct worker *w);
void hooks_release(struct worker *w);

/* ---- worker_acct.c: accounts, looked up once per uid, and the switch to the submitter */
const struct acct *acct_get(uid_t uid);
int acct_task_cred(struct worker *w, struct task *t, struct run_cred *c, const char **refusal);

/* ---- worker_held.c: Landlock's system paths, held open for every task of backend none */
void held_drop(void);
void held_apply(struct worker *w, struct confine *c);
void held_task_paths(const struct task *t, struct confine *c, const char *task,
		     const char *const dirs[SCR_NDIRS]);

/* ---- worker_scratch.c: spare scratch directories, reused from one run to the next */
int scratch_dir(struct worker *w, char *name, bool inplace, mode_t mode, uid_t uid, gid_t gid,
		bool *owned, struct timespec *ct, int *dfd);
bool scratch_retire(struct worker *w, const struct task *t, const char *name, bool keep_full,
		    const struct timespec *ct, int *dfd);
void scratch_spares_drop(struct worker *w);

/* ---- worker_ev.c: what the loop lends the other files: epoll registration, the helper
 * threads and their hand-back on the thread's side; it calls nothing above it */
/* Counted up at every change in /etc (the loop's watch); -1: no watch. */
extern long etc_gen;
void ep_add(struct worker *w, int fd, struct src *s);
void ep_del(struct worker *w, int fd);
void thread_name(pthread_t th, const char *what);
void helper_start(struct worker *w, struct helper *h, void *(*fn)(void *), void *arg,
		  const char *what);
void helper_stop(struct helper *h);
void helper_back(struct helper *h, struct task *t, enum tevent ev);

#endif
