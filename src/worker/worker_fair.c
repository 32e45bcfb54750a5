/* worker_fair.c - a queued name's place: its submitter's fair turn and
 * its priority as allowed, and its push onto its lane's heap. Below the
 * queue (consider) and after= (a released name), which both queue. */
#define _GNU_SOURCE
#include "worker_int.h"

static struct fair_user *fair_get(struct fair *f, uid_t uid)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->v[i].uid == uid)
			return &f->v[i];
	if (f->n == f->cap) {
		f->cap = f->cap ? f->cap * 2 : 16;
		f->v = xrealloc(f->v, f->cap * sizeof *f->v);
	}
	f->v[f->n] = (struct fair_user){.uid = uid};
	return &f->v[f->n++];
}

uint64_t fair_turn(struct fair *f, uid_t uid)
{
	struct fair_user *u = fair_get(f, uid);
	u->last_turn = u->last_turn + 1 > f->now ? u->last_turn + 1 : f->now;
	return u->last_turn;
}

/* A priority below 0 goes ahead of everyone's work: only for the users
 * and groups [limits] priority_allow names. Others are clamped to 0 (the
 * task runs, in its turn), and the log says so once per task seen. */
int cand_priority(struct worker *w, const char *name, const struct inspect *ins)
{
	int p = ins->spec.priority;
	if (p >= 0 || policy_priority_allowed(w->pol, ins->uid))
		return p;
	logmsg("%s: priority=%d clamped to 0: uid %u is not in [limits] priority_allow", name, p,
	       (unsigned)ins->uid);
	return 0;
}

/* A task released from waiting on after= (worker_wait.c), queued as
 * consider would have: it was looked at when it was filed, and is
 * again at its claim. */
void queue_cand(struct worker *w, const char *name, enum lane lane, int prio, uid_t uid,
		int64_t arrived_ms)
{
	strset_put(&w->known, name, K_QUEUED);
	prioq_push(&w->heap[lane], (struct cand){.name = xstrdup(name), .prio = prio,
						 .turn = fair_turn(&w->fair, uid),
						 .arrived_ms = arrived_ms, .seq = w->seq++, .uid = uid});
}
