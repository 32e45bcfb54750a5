/* depend.h - after=ID[,ID...]: what a task waits on, and the tasks
 * waiting on each id.
 *
 * Nothing of it is on disk: a waiting task is an ordinary file in new/,
 * and its after= line is the whole record. A worker that reads one
 * looks its upstreams up (dep_check) and, while one has no result,
 * files it here under that upstream's id (depwait_add). When a result
 * appears in done/ (the worker's watch), the tasks filed under that id
 * are handed back to be looked at again (depwait_release): one lookup
 * per result, never a scan of new/. A worker that dies loses only this
 * memory; the next one to read new/ builds it again. See
 * spool-layout WORKER §3. */
#ifndef KART_DEPEND_H
#define KART_DEPEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "task.h"

struct spool;

/* ---- the waiting set (pure: no I/O) ---- */

struct depwait;
struct depwait *depwait_new(void);
void depwait_free(struct depwait *d);
/* after_max (kart.conf(5)): how deep a chain of waiting tasks may be,
 * and how many names one walk of the graph may follow. 0: the default. */
#define DEPWAIT_MAX_DEFAULT 1000
void depwait_set_max(struct depwait *d, unsigned max);
/* Names looked at so far by every add, an operation count: a chain of
 * N filed in order costs N, in any order about N ln N at most, and no
 * add more than after_max + 16. */
uint64_t depwait_steps(const struct depwait *d);

/* name waits on the ids ups[0..n) (those without a result yet; n >= 1).
 * It is filed under ups[0] alone, and looked at again once that one has
 * its result; data (dlen bytes, copied) is the caller's, handed back
 * then. Returns 0; or, with nothing filed and why saying why:
 * -ELOOP when one of ups waits, through the set, on name itself (why:
 * the path, "a -> b -> a"); -E2BIG when name would wait behind a chain
 * of more than after_max waiting names, or when looking for a cycle
 * would follow more than after_max names. Filing a name again replaces
 * what it waited on. */
int depwait_add(struct depwait *d, const char *name, const char *const *ups, int n,
		const void *data, size_t dlen, char *why, size_t whylen);
/* id has its result: each name filed under id leaves the set and is
 * passed to fn with what it waited on (ups[0] is id) and its data; fn
 * may file it again. Returns how many. */
typedef void (*depwait_fn)(void *arg, const char *name, const char *const *ups, int n,
			   const void *data);
size_t depwait_release(struct depwait *d, const char *id, depwait_fn fn, void *arg);
/* Every id some name is filed under (after a lost notification: each
 * is looked up again). fn may not change the set: collect, then release. */
void depwait_each_upstream(const struct depwait *d, void (*fn)(void *arg, const char *id),
			   void *arg);
/* Is name filed? What it is filed under, or NULL. */
const char *depwait_on(const struct depwait *d, const char *name);
size_t depwait_count(const struct depwait *d);

/* ---- looking upstreams up in the spool ---- */

enum dep_verdict {
	DEP_READY,  /* every upstream ended ok: the task may run */
	DEP_WAIT,   /* some have no result yet: pending[] */
	DEP_SKIP,   /* one ended otherwise: never run, status skipped */
	DEP_REJECT, /* one does not exist, is another user's, or is itself */
};

struct dep_check {
	enum dep_verdict v;
	const char *pending[TASK_AFTER_MAX]; /* DEP_WAIT: into spec->after */
	enum after_mode pending_mode[TASK_AFTER_MAX]; /* what each of them must end */
	int npending;
	char why[640]; /* DEP_SKIP, DEP_REJECT: the result's error */
};

/* Results seen, by id: a result is never rewritten, so what was read
 * once holds (a cache of the worker's; NULL: none). */
struct dep_cache;
struct dep_cache *dep_cache_new(void);
void dep_cache_free(struct dep_cache *c);

/* Look up every id of spec->after for the task self, submitted by uid:
 * its result in done/ (status, submitter), else where it waits or runs
 * (new/, every cur/W/, its drop directory), in the order tasks move, twice
 * before it is called missing (a re-queue moves backwards). An upstream
 * decides by its mode (spec->after_mode): after= it must end ok,
 * after_any= anyhow, after_fail= otherwise than ok (Slurm's afterok,
 * afterany, afternotok). The first upstream that decides names itself
 * in why. */
void dep_check(struct spool *sp, struct dep_cache *c, const char *self,
	       const struct task_spec *spec, uid_t uid, struct dep_check *out);
/* The same over ids[0..n), each with its mode (modes; NULL: all after=),
 * of line `line` (a task released from the waiting set: what it still
 * waited on). out->pending points into ids. */
void dep_check_ids(struct spool *sp, struct dep_cache *c, const char *const *ids,
		   const enum after_mode *modes, int n, int line, uid_t uid, struct dep_check *out);
/* after=, after_any= or after_fail=: the directive of a mode. */
const char *dep_mode_key(enum after_mode m);

/* An upstream's id as a result names it: a finished one, of uid, with
 * status ok. Used by the worker at the start of a run to open its
 * inputs: 0, or -ENOENT / -EPERM / -ECANCELED (not ok). */
int dep_upstream_ok(struct spool *sp, struct dep_cache *c, const char *id, uid_t uid);

#endif
