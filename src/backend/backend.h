/* backend.h - where a task's run happens: one interface, one file per
 * implementation (backend_bwrap.c, backend_none.c, backend_container.c),
 * chosen when the worker starts (and again when a SIGHUP's policy names
 * another), as OpenSMTPD's queue_backend.c picks its backend and calls
 * through struct queue_backend. The worker's state machine calls these
 * operations and knows no backend by name; a backend keeps its per-task
 * state behind t->be_task, opaque to the worker. A new backend is a file
 * here and a row in backend.c's table (and its name in policy.c).
 *
 * A backend calls down into the worker's shared mechanisms (the cgroup
 * leaf, scratch directories, the spawn threads, output capture) and
 * never up into the state machine: it raises no event of a task's from
 * inside an operation the machine called. Completion comes back through
 * the loop: from a descriptor the backend registered (ready), or from
 * its timer (tick), where it may fire the task's EXIT itself. */
#ifndef KART_BACKEND_H
#define KART_BACKEND_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "policy.h"
#include "result.h"
#include "run.h"

struct worker;
struct task;
struct src;
struct dep_inputs;

/* Why a task is refused before it runs (prepare, or a spawn that
 * failed): its result's status ("refused", or "rejected" where the task
 * asked for what it may not have), refusal and error (which may point
 * into the task's errbuf). */
struct backend_refusal {
	const char *status, *refusal, *error;
};

/* What the worker hands prepare: the task's name, whom it runs as (the
 * policy's checks are made), and after='s inputs, opened in done/. */
struct backend_start {
	const char *name;
	struct run_cred cred;
	int as_user;           /* > 0 as the submitter (cred), 0 as the worker */
	gid_t gid;             /* as_user: cred's; else -1 */
	struct dep_inputs *di;
	/* The claim's record of a run of this backend's (claim_meta.run)
	 * that an earlier life of this worker, or a dead peer, started: the
	 * run is found again, never started anew while it may exist (and
	 * di is empty: its inputs went with it); NULL for a new run. */
	const char *adopt;
	struct backend_refusal why; /* out: why, when prepare returns -1 */
};

/* What a run used, as far as the backend can tell: each field
 * USAGE_UNKNOWN where it cannot (the result says null). Per family of
 * fields (result.h), where it was measured, or else why not (literals:
 * the result's usage.measured_by and usage.why_null). */
#define USAGE_UNKNOWN (-1)
struct backend_usage {
	int64_t cpu_user_ms, cpu_system_ms;
	int64_t memory_peak;                /* bytes */
	int64_t io_read_bytes, io_write_bytes;
	int64_t pids_peak;
	/* When the run itself began and ended (ms since the epoch), where the
	 * backend knows better than the worker (a job that waited in its
	 * engine's queue, whose end was learnt later) */
	int64_t started_ms, finished_ms;
	/* cgroup2 pressure stall totals over the run, in microseconds */
	int64_t psi_us[PSI__N];
	/* "cgroup" (the task's leaf), "launcher" (kart-launch, the task's
	 * parent in the sandbox), "process" (the task the worker exec'd
	 * and reaped) */
	const char *by[UF__N];
	const char *why[UF__N];
};
void backend_usage_init(struct backend_usage *u);
/* What the task's parent saw of its tree (run.h's run_use: kart-launch's
 * report, or a direct child's wait4): CPU, memory peak, I/O, each where
 * known; a backend's own measure (a cgroup) then replaces what it has. */
void backend_usage_from_run(struct backend_usage *u, const struct run_use *p);

/* What this host gives the backend's tasks, for kart doctor. */
struct backend_probe {
	bool ok;             /* false: every task would fail, or run with less than asked */
	bool bounded_outdir; /* $KART_OUTDIR is bounded while the task runs */
	char outdir_why[256]; /* else why not */
	json_t *facts;       /* its own keys of kart doctor's report, or NULL */
};

struct backend {
	const char *name; /* as kart.conf and the result say it */
	/* Properties of the backend, read by the worker (never its name): */
	/* Memory, pids and cpu are held by the engine it drives, not by a
	 * leaf of kart's: the result gives them as asked, and an engine's
	 * word on an OOM kill is taken (outcome.c). */
	bool engine_limits;
	/* Its sandbox covers the spool under a bind above it (an empty
	 * read-only mount): kart submit lets such a bind through. */
	bool masks_spool;
	/* The task's private work directory as the task sees it (its HOME
	 * where no bind of its own holds one), for the result; NULL: a path
	 * of the host's, not said. */
	const char *work;
	/* Its runs go on without the worker (a batch system's jobs): at a
	 * stop a run is left going, its claim kept in cur/W/ with its record
	 * (claim_meta.run) for the next life of this worker, or a peer, to
	 * follow (TE_DETACH); never killed nor re-queued for a stop. */
	bool detach;
	/* A run waits in its engine's queue after its spawn: the timeout's
	 * clock starts when the backend says the run began (task_run_began),
	 * not at the spawn. */
	bool queued;
	/* The first word of its claims' run records (claim_meta.run), or
	 * NULL: it keeps none. */
	const char *run_word;

	/* ---- the worker's life (NULL: nothing to do) ----------------------- */
	/* kart doctor: what the host gives it (no worker needed). */
	void (*probe)(const struct policy *pol, struct backend_probe *p);
	/* Once, the first time the worker uses it: what it keeps for the
	 * worker's life, and what an earlier life of this worker left. */
	void (*start)(struct worker *w);
	/* At the worker's exit, for each backend started. */
	void (*stop)(struct worker *w);
	/* The worker begins to stop: what it holds of runs not started yet
	 * comes back (unspawned; why.status NULL: back to new/, unrun). */
	void (*stopping)(struct worker *w);
	/* A dead worker's runs (peer; this worker's own id: its earlier
	 * life's), before any of its claims is re-queued. Asked of every
	 * backend, started by this worker or not: a claim may be another
	 * backend's. 0, or -EBUSY where a run of that worker may still go:
	 * its claims stay where they are, and recovery is tried again. */
	int (*sweep)(struct worker *w, const char *peer, bool started);
	/* Its timer: the monotonic ms it wants a tick at (0: none), set
	 * into the loop's one timerfd before each wait; then tick. */
	int64_t (*next_mono)(struct worker *w);
	void (*tick)(struct worker *w, int64_t now);

	/* ---- a task's run -------------------------------------------------- */
	/* Everything the task's start needs, in the loop: its limits, its
	 * directories, its command line, its per-task state. 0, or -1 with
	 * s->why set: the task is refused (never run with less). */
	int (*prepare)(struct worker *w, struct task *t, struct backend_start *s);
	/* Start it, off the loop: the loop later gets SPAWNED or
	 * SPAWN_FAILED for it (a helper thread's hand-back). */
	void (*spawn)(struct worker *w, struct task *t);
	/* Back from its spawn, running: watch for its end. */
	void (*started)(struct worker *w, struct task *t);
	/* Back from its spawn, not started: why it is refused (status NULL:
	 * it was never started and goes back to new/ as it came). */
	void (*unspawned)(struct worker *w, struct task *t, struct backend_refusal *why);
	/* One of its descriptors is ready (a struct src of kind SRC_BACKEND
	 * it registered, s->t its task or NULL): true when s->t's run has
	 * ended (the loop fires EXIT after the batch's other events). */
	bool (*ready)(struct worker *w, struct src *s, uint32_t events);
	/* SIGTERM to the whole of the task, not to what holds it together
	 * (false: it cannot be sent, only a kill is left), or SIGKILL. */
	bool (*signal)(struct worker *w, struct task *t, int sig);
	/* kart pause: hold the whole run still (on) and let it go again.
	 * On: how (enum pause_how) or -errno; off: 0. */
	int (*pause)(struct worker *w, struct task *t, bool on);
	/* Its run ended: how (t->rend; t->engine_oom), and it unwatched. */
	void (*reap)(struct worker *w, struct task *t);
	/* What it used, once its leaf (if any) is drained. */
	void (*usage)(const struct task *t, struct backend_usage *u);
	/* Its own part of the task's result (an object under its name: what
	 * its engine says of the run), JSON text it keeps; NULL: none. */
	const char *(*result_json)(const struct task *t);
	/* At the task's free: its per-task state let go. */
	void (*cleanup)(struct worker *w, struct task *t);
};

/* The backend for the policy's choice. */
const struct backend *backend_get(enum backend_id b);
/* The same, started for this worker if it was not (the worker's start,
 * and a SIGHUP that names another): the backend of the tasks that start
 * from now on. A task keeps the one it started with (t->be). */
const struct backend *backend_use(struct worker *w, enum backend_id b);
void backend_stop_all(struct worker *w);
/* The worker begins to stop: each started backend's stopping. */
void backend_stopping_all(struct worker *w);
/* The backend whose run a claim's record names (claim_meta.run), or -1. */
int backend_of_run(const char *run);
/* Every backend's sweep (recovery): 0, or -EBUSY from any of them. */
int backend_sweep(struct worker *w, const char *peer);
/* The backends' timers, for the loop's. */
int64_t backend_next_mono(struct worker *w);
void backend_tick(struct worker *w, int64_t now);

/* Can bwrap build a sandbox here (kart doctor says it whatever the
 * backend; backend bwrap's probe needs it)? why: if not, why. */
bool bwrap_works(const char *bwrap, char *why, size_t len);

#endif
