/* worker_sched.h - the worker's side of issue 20's scheduling: tasks of
 * new/ that wait for a time (not_before=, or a retry's delay), and the
 * automatic retry of an attempt (retry_on=). The rules themselves are
 * in sched.h; the spool's side in spool.h (spool_retry). */
#ifndef KART_WORKER_SCHED_H
#define KART_WORKER_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "prioq.h"

struct inspect;

/* Names of new/ that wait, earliest first. An entry is a doorbell, not
 * a record: when it rings the file is looked at again (it may have
 * gone, or been re-queued with another time). A heap of prioq.h's,
 * keyed by the time (CLOCK_REALTIME, ms) alone. */
struct sched_queue {
	struct prioq h;
	uint64_t seq;
};

void sched_queue_push(struct sched_queue *q, int64_t at_ms, const char *name);
/* The earliest time waited for; 0 when nothing waits. */
int64_t sched_queue_next(const struct sched_queue *q);
/* The first name due at now_ms (caller frees), or NULL. */
char *sched_queue_pop_due(struct sched_queue *q, int64_t now_ms);
/* Every entry of name goes (its file is looked at afresh). */
void sched_queue_forget(struct sched_queue *q, const char *name);
void sched_queue_free(struct sched_queue *q);

/* When a task seen in new/ may start: the later of its not_before= and
 * a pending retry's time (user.kart). 0: at once. */
int64_t sched_not_before(const struct inspect *ins);

/* The CLOCK_MONOTONIC time (ms) for a wall-clock one, as the timerfd
 * takes it; at least now. A wall clock set later shifts it (the queue
 * looks at the wall clock again when it rings). */
int64_t sched_mono_for(int64_t at_real_ms);

/* unique=KEY: tasks of new/ with a key, as this worker has seen them
 * (queued or scheduled). Which of two is the one: the earlier arrived
 * (ctime, then name), the same answer on every worker. */
struct uniq_ent {
	uid_t uid;
	char *key, *name;
	int64_t arrived_ms;
};
struct uniq_index {
	struct uniq_ent *v;
	size_t n;
};
void uniq_add(struct uniq_index *u, uid_t uid, const char *key, const char *name, int64_t arrived_ms);
void uniq_forget(struct uniq_index *u, const char *name);
void uniq_free(struct uniq_index *u);
/* Another task of (uid, key) still in new/ (newfd), or NULL; entries
 * whose file has gone are forgotten on the way. */
const struct uniq_ent *uniq_other(struct uniq_index *u, int newfd, uid_t uid, const char *key,
				  const char *name);
/* Does (a_ms, a) come before (b_ms, b)? */
bool uniq_first(int64_t a_ms, const char *a, int64_t b_ms, const char *b);

/* The running one holds its key's lock: cur/.uniq/UID.HASH, flock'ed by
 * its worker from claim to result, then removed. cur/.uniq/ is the
 * workers' alone (0700): a lock a member could open, she could hold, and
 * every later task of that key would end `cancelled` (issue 35). The
 * kernel drops a lock when the worker dies: a file left then is stale,
 * removed by the next look. uniq_lock: the locked fd, -EWOULDBLOCK when
 * some worker holds it, or another -errno (then nobody can tell). */
int uniq_lock(int curfd, uid_t uid, const char *key);
/* Its result is written: the key is free. Removes the lock file (while
 * it still holds it: a lock taken later on a removed file would hold
 * nothing, so uniq_lock looks again) and closes fd. */
void uniq_unlock(int curfd, uid_t uid, const char *key, int fd);
/* Held by some worker (this one included)? */
bool uniq_held(int curfd, uid_t uid, const char *key);

#endif
