/* worker_sched.h - the worker's side of issue 20's scheduling: tasks of
 * new/ that wait for a time (not_before=, or a retry's delay), and the
 * automatic retry of an attempt (retry_on=). The rules themselves are
 * in sched.h; the spool's side in spool.h (spool_retry). */
#ifndef KART_WORKER_SCHED_H
#define KART_WORKER_SCHED_H

#include <stddef.h>
#include <stdint.h>

struct inspect;

/* Names of new/ that wait, earliest first. An entry is a doorbell, not
 * a record: when it rings the file is looked at again (it may have
 * gone, or been re-queued with another time). */
struct sched_ent {
	int64_t at_ms; /* CLOCK_REALTIME, ms */
	char *name;
};
struct sched_queue {
	struct sched_ent *v;
	size_t n, cap;
};

void sched_queue_push(struct sched_queue *q, int64_t at_ms, const char *name);
/* The earliest time waited for; 0 when nothing waits. */
int64_t sched_queue_next(const struct sched_queue *q);
/* The first name due at now_ms (caller frees), or NULL. */
char *sched_queue_pop_due(struct sched_queue *q, int64_t now_ms);
void sched_queue_free(struct sched_queue *q);

/* When a task seen in new/ may start: the later of its not_before= and
 * a pending retry's time (user.kart). 0: at once. */
int64_t sched_not_before(const struct inspect *ins);

/* The CLOCK_MONOTONIC time (ms) for a wall-clock one, as the timerfd
 * takes it; at least now. A wall clock set later shifts it (the queue
 * looks at the wall clock again when it rings). */
int64_t sched_mono_for(int64_t at_real_ms);

#endif
