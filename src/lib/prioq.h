/* prioq.h - a binary heap of candidates, the least first: by priority,
 * then turn, then arrival, then the order they were seen in (seq, unique,
 * so that no two compare equal). As qmail's prioq.c, one element type,
 * the one its user needs; the worker keeps one per lane. */
#ifndef KART_PRIOQ_H
#define KART_PRIOQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct cand {
	char *name;
	int prio;
	uint64_t turn; /* its submitter's turn (the worker's fair_turn): round-robin within a priority */
	int64_t arrived_ms;
	uint64_t seq;
	uid_t uid;
};

struct prioq {
	struct cand *v;
	size_t n, cap;
};

/* Is a to go before b? */
bool prioq_less(const struct cand *a, const struct cand *b);
void prioq_push(struct prioq *h, struct cand c);
/* The least; h->n must not be 0. */
struct cand prioq_pop(struct prioq *h);

#endif
