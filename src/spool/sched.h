/* sched.h - when a task may start, and whether it starts again: the
 * times of not_before= (kart submit --at, --in) and the rules of
 * retry_on= and retry_delay=. Pure, apart from the local time zone that
 * HH:MM is read in; unit-tested (tests/unit/test_sched.c). */
#ifndef KART_SCHED_H
#define KART_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* RFC 3339, "2026-12-01T02:00:00Z", "2026-12-01 02:00:00.5+01:00": ms
 * since the epoch. 0, or -EINVAL (not RFC 3339) / -ERANGE (not a real
 * date, or before 1970 or after 9999). */
int sched_parse_rfc3339(const char *s, int64_t *ms);

/* "HH:MM": the next such local time after now_ms (today's if it is
 * still ahead, else tomorrow's). 0, or -EINVAL. */
int sched_parse_hhmm(const char *s, int64_t now_ms, int64_t *ms);

/* kart submit --at: RFC 3339 or HH:MM. */
int sched_parse_at(const char *s, int64_t now_ms, int64_t *ms);

/* retry_on=failed,timeout,oom,exit=N: which outcomes are tried again.
 * `failed` is any non-zero exit; exit=N only that one. */
enum { RETRY_FAILED = 1, RETRY_TIMEOUT = 2, RETRY_OOM = 4 };
#define RETRY_EXITS_MAX 16
struct retry_on {
	unsigned mask;
	int nexits;
	int exits[RETRY_EXITS_MAX];
};

/* 0, or -1 with why (a static string) naming the bad item. */
int sched_parse_retry_on(const char *s, struct retry_on *out, const char **why);
static inline bool sched_retry_set(const struct retry_on *r) { return r->mask || r->nexits; }

/* Does an attempt that ended with status (and exit_code, -1 for none)
 * call for another? */
bool sched_retry_matches(const struct retry_on *r, const char *status, int exit_code);

/* Whether attempt `attempt`, which ended so, is followed by another:
 * retry_on= names the outcome, and retries= (the same limit as a dead
 * worker's re-queues: one counter, `attempt`) allows one more. */
bool sched_retry_due(const struct retry_on *r, const char *status, int exit_code, int attempt,
		     int retries);

/* The longest wait between two attempts. */
#define RETRY_DELAY_CAP_MS (3600 * 1000LL)
/* The wait before attempt `next` (2, 3, ...) that follows an automatic
 * retry: base, doubled for each attempt after the second, at most 1 h;
 * base 0 is at once. */
int64_t sched_retry_delay_ms(int64_t base_ms, int next);

#endif
