/* worker_sched.c - tasks that wait for their time (worker_sched.h). */
#define _GNU_SOURCE
#include "worker_sched.h"

#include "spool.h"
#include "task.h"
#include "util.h"

static bool ent_less(const struct sched_ent *a, const struct sched_ent *b)
{
	return a->at_ms < b->at_ms;
}

void sched_queue_push(struct sched_queue *q, int64_t at_ms, const char *name)
{
	if (q->n == q->cap) {
		q->cap = q->cap ? q->cap * 2 : 64;
		q->v = xrealloc(q->v, q->cap * sizeof *q->v);
	}
	struct sched_ent e = {at_ms, xstrdup(name)};
	size_t i = q->n++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!ent_less(&e, &q->v[p]))
			break;
		q->v[i] = q->v[p];
		i = p;
	}
	q->v[i] = e;
}

int64_t sched_queue_next(const struct sched_queue *q)
{
	return q->n ? q->v[0].at_ms : 0;
}

char *sched_queue_pop_due(struct sched_queue *q, int64_t now_ms)
{
	if (!q->n || q->v[0].at_ms > now_ms)
		return NULL;
	char *name = q->v[0].name;
	struct sched_ent last = q->v[--q->n];
	size_t i = 0;
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		const struct sched_ent *best = &last;
		if (l < q->n && ent_less(&q->v[l], best))
			m = l, best = &q->v[l];
		if (r < q->n && ent_less(&q->v[r], best))
			m = r;
		if (m == i)
			break;
		q->v[i] = q->v[m];
		i = m;
	}
	if (q->n)
		q->v[i] = last;
	return name;
}

void sched_queue_free(struct sched_queue *q)
{
	for (size_t i = 0; i < q->n; i++)
		free(q->v[i].name);
	free(q->v);
	*q = (struct sched_queue){0};
}

int64_t sched_not_before(const struct inspect *ins)
{
	struct claim_meta m;
	claim_meta_parse(ins->kattr, &m);
	return m.not_before_ms > ins->spec.not_before_ms ? m.not_before_ms : ins->spec.not_before_ms;
}

int64_t sched_mono_for(int64_t at_real_ms)
{
	int64_t wait = at_real_ms - now_realtime_ms();
	return now_mono_ms() + (wait > 0 ? wait : 0);
}
