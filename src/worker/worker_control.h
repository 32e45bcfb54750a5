/* worker_control.h - the worker's half of kart pause and resume: a
 * running task's whole tree frozen and its clock stopped while
 * cur/W/.NAME.pause exists, and no claim while new/.paused exists.
 * Requests are files (a level, not a message): what the worker finds on
 * disk is what it does, whatever it missed while it was not looking. */
#ifndef KART_WORKER_CONTROL_H
#define KART_WORKER_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgroup.h"
#include "run.h"

/* cur/W/.stalled: why this worker's backend cannot take tasks now (its
 * engine does not answer), one line, for kart status and kart doctor;
 * gone once it can. Its tasks wait, nothing is blamed on them. */
#define WCTL_STALLED ".stalled"

/* Each live worker of cur/ with such a note: fn(worker id, its line). */
struct spool;
void wctl_stalled(struct spool *sp, void (*fn)(const char *worker, const char *why, void *arg), void *arg);

/* How a paused task is held still. */
enum pause_how {
	PAUSE_NONE,   /* not paused */
	PAUSE_FREEZE, /* its cgroup leaf frozen (cgroup.freeze, or the v1 freezer) */
	PAUSE_STOP,   /* SIGSTOP to each process its leaf lists, or to its group */
};

struct pause_state {
	enum pause_how how;
	int64_t since_mono; /* paused since (monotonic ms) */
	int64_t left_ms;    /* what was left of its timeout then; -1: none */
	int64_t total_ms;   /* time paused over the run, the current pause not counted */
};

/* Is entry ".NAME.pause"? Then NAME into name. */
bool wctl_pause_entry(const char *entry, char *name, size_t len);
/* Does cur/W/.NAME.pause exist (wdir: the claim directory)? */
bool wctl_pause_wanted(int wdir, const char *name);
/* Hold a run of the worker's children still: its leaf frozen, else
 * SIGSTOP to each process the leaf lists, or to its process group. How
 * (PAUSE_FREEZE, PAUSE_STOP), or -errno: nothing to freeze it by (no
 * leaf and no process group). */
int wctl_freeze(const struct cg_leaf *cg, const struct run *r);
/* Let it go again, as it was held. */
void wctl_thaw(enum pause_how how, const struct cg_leaf *cg, const struct run *r);
/* Paused (how the backend holds it): *deadline_mono (0: none) is taken
 * off the clock. */
void wctl_clock_stop(struct pause_state *ps, enum pause_how how, int64_t *deadline_mono);
/* Resumed: the rest of its timeout back on the clock. */
void wctl_clock_start(struct pause_state *ps, int64_t *deadline_mono);
/* Time paused over the run, the current pause included. */
int64_t wctl_paused_ms(const struct pause_state *ps);
/* The worker's answer, for kart pause and kart status: .NAME.paused
 * exists while the run is frozen. */
void wctl_ack(int wdir, const char *name, bool paused);
/* A pause refused (err < 0): cur/W/.NAME.nopause holds why, for kart
 * pause to say; err 0 removes it. */
void wctl_refuse(int wdir, const char *name, int err);
/* Is the spool paused (new/.paused: kart pause --all)? */
bool wctl_spool_paused(int newdir);
#define WCTL_SPOOL_PAUSED ".paused"

/* ---- requests through a drop directory (a shared spool) ----------------
 * On a shared spool only workers write new/ and cur/: a user asks a
 * worker, with a file in their own drop directory, which proves who asks
 * (spool-layout README §8, WORKER §8): drop/USER/.ctl.VERB.NAME, for the task USER:NAME.
 * VERB: hold, release, pause, resume, cancel (an empty file), edit (the
 * new text). The worker does it and removes the request: its removal is
 * the answer, and the spool's state says how it went. */
#define WCTL_REQ_PREFIX ".ctl."
struct policy;
/* Is entry a request? */
bool wctl_drop_entry(const char *entry);
/* Do the request dropfd/entry of the owner (uid) of drop/dname/. me and
 * wdir: the worker's id and claim directory (a queued task's cancel is
 * finished there). */
void wctl_drop_request(struct spool *sp, const struct policy *pol, const char *me, int wdir,
		       int dropfd, const char *dname, uid_t uid, const char *entry);

#endif
