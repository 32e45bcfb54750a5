/* prioq.c - a binary heap of candidates (prioq.h). */
#include "prioq.h"

#include "util.h"

bool prioq_less(const struct cand *a, const struct cand *b)
{
	if (a->prio != b->prio)
		return a->prio < b->prio;
	if (a->turn != b->turn)
		return a->turn < b->turn;
	if (a->arrived_ms != b->arrived_ms)
		return a->arrived_ms < b->arrived_ms;
	return a->seq < b->seq;
}

void prioq_push(struct prioq *h, struct cand c)
{
	if (h->n == h->cap) {
		h->cap = h->cap ? h->cap * 2 : 64;
		h->v = xrealloc(h->v, h->cap * sizeof *h->v);
	}
	size_t i = h->n++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!prioq_less(&c, &h->v[p]))
			break;
		h->v[i] = h->v[p];
		i = p;
	}
	h->v[i] = c;
}

struct cand prioq_pop(struct prioq *h)
{
	struct cand top = h->v[0], last = h->v[--h->n];
	size_t i = 0;
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		const struct cand *best = &last;
		if (l < h->n && prioq_less(&h->v[l], best))
			m = l, best = &h->v[l];
		if (r < h->n && prioq_less(&h->v[r], best))
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
