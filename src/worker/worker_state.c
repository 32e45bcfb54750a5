/* worker_state.c - the task state machine: transitions[][], the one
 * place that says what each event does in each state, and task_event,
 * the one setter of a task's state. The actions themselves are steps of
 * a task's life (worker_task.c); this file only says which runs when. */
#define _GNU_SOURCE
#include "worker_int.h"
#include "backend.h"

/* What each event does in each state, and the state it leads to
 * (s6-supervise's actions table): every change of a task's state is made
 * here, in task_event, and nowhere else. An event a state has no entry
 * for does nothing. The state is entered before the action runs: an
 * action that ends the task's life frees it (FREED), one whose outcome
 * is not known in advance returns the event that follows (stop_begin:
 * TIMEOUT when SIGTERM cannot be sent; task_ended: LEAF_EMPTY;
 * task_complete: REQUEUE, RETRY_KEPT or RESULT), and task_event acts on
 * it next, in the same loop: one event per turn, no action within
 * another. */
enum taction {
	TA_NONE,
	TA_SPAWN,          /* handed to its backend's spawn */
	TA_STARTED,        /* watched; what was kept applied (that event next) */
	TA_UNSPAWN,        /* its refusal made (RESULT next), or none (GIVE_BACK next) */
	TA_KEEP,           /* kept for when it runs (the first only) */
	TA_REAP,           /* reaped, its leaf killed (LEAF_EMPTY next; LEAF_KILLED where
			    * cgroup.kill killed the rest at once) */
	TA_LET_GO,         /* nothing: the state it enters holds no slot */
	TA_STOP_TIMEOUT,   /* SIGTERM, end: timeout (TIMEOUT next where none can be sent) */
	TA_STOP_CANCEL,    /* SIGTERM, end: cancelled (the same) */
	TA_KILL,           /* SIGKILL, its end kept */
	TA_KILL_REQUEUE,   /* SIGKILL, end: re-queue */
	TA_DRAIN_LOOK,     /* its leaf looked at again (LEAF_EMPTY next once it is) */
	TA_COMPLETE,       /* its result made, retry_on asked (REQUEUE, RETRY_KEPT or
			    * RESULT next) */
	TA_PUBLISH,        /* handed to the commit thread */
	TA_DONE,           /* logged, on_done run, freed */
	TA_FREE,           /* freed: its task file is back in new/ for retry_on */
	TA_REQUEUE,        /* its task file back in new/ for its next attempt, freed */
	TA_COMMIT_FAILED,  /* retried later (REQUEUE next where its output failed,
			    * GRACE_OVER where the worker stops, GIVE_UP where it cannot be) */
	TA_ABANDON,        /* left in cur/W/ for recovery, freed */
	TA_LOST,           /* finished lost, its publish given up, freed */
	TA_DETACH,         /* its run left going and its claim for recovery, freed */
	TA_GIVE_BACK,      /* back into new/ unrun, its attempt unchanged, freed */
	TA__N
};

struct tstep {
	enum taction act;
	enum tstate next;
};

static const struct tstep transitions[TS__N][TE__N] = {
	[TS_CLAIMED] = {
		[TE_SPAWN] = {TA_SPAWN, TS_SPAWNING},
		[TE_RESULT] = {TA_PUBLISH, TS_COMMITTING},
		[TE_GIVE_BACK] = {TA_GIVE_BACK, TS_FREED},
	},
	/* Not ours to kill yet: a cancel or the grace's end waits for it. */
	[TS_SPAWNING] = {
		[TE_SPAWNED] = {TA_STARTED, TS_RUNNING},
		[TE_SPAWN_FAILED] = {TA_UNSPAWN, TS_CLAIMED},
		[TE_CANCEL] = {TA_KEEP, TS_SPAWNING},
		[TE_GRACE_OVER] = {TA_KEEP, TS_SPAWNING},
		[TE_DETACH] = {TA_KEEP, TS_SPAWNING},
	},
	[TS_RUNNING] = {
		[TE_EXIT] = {TA_REAP, TS_DRAINING},
		[TE_TIMEOUT] = {TA_STOP_TIMEOUT, TS_STOPPING},
		[TE_CANCEL] = {TA_STOP_CANCEL, TS_STOPPING},
		[TE_GRACE_OVER] = {TA_KILL_REQUEUE, TS_KILLING},
		[TE_DETACH] = {TA_DETACH, TS_FREED},
	},
	/* TE_TIMEOUT here is the end of its kill grace; a shutdown's grace
	 * ending kills it too, keeping its end (it is not re-queued). */
	[TS_STOPPING] = {
		[TE_EXIT] = {TA_REAP, TS_DRAINING},
		[TE_TIMEOUT] = {TA_KILL, TS_KILLING},
		[TE_GRACE_OVER] = {TA_KILL, TS_KILLING},
		[TE_DETACH] = {TA_DETACH, TS_FREED},
	},
	[TS_KILLING] = {
		[TE_EXIT] = {TA_REAP, TS_DRAINING},
		[TE_DETACH] = {TA_DETACH, TS_FREED},
	},
	[TS_DRAINING] = {
		[TE_AGAIN] = {TA_DRAIN_LOOK, TS_DRAINING},
		[TE_LEAF_KILLED] = {TA_LET_GO, TS_DYING},
		[TE_LEAF_EMPTY] = {TA_COMPLETE, TS_ENDED},
	},
	[TS_DYING] = {
		[TE_AGAIN] = {TA_DRAIN_LOOK, TS_DYING},
		[TE_LEAF_EMPTY] = {TA_COMPLETE, TS_ENDED},
	},
	[TS_ENDED] = {
		[TE_RESULT] = {TA_PUBLISH, TS_COMMITTING},
		[TE_RETRY_KEPT] = {TA_FREE, TS_FREED},
		[TE_REQUEUE] = {TA_REQUEUE, TS_FREED},
	},
	[TS_COMMITTING] = {
		[TE_COMMITTED] = {TA_DONE, TS_FREED},
		[TE_COMMIT_FAILED] = {TA_COMMIT_FAILED, TS_PUBLISHING},
	},
	[TS_PUBLISHING] = {
		[TE_AGAIN] = {TA_PUBLISH, TS_COMMITTING},
		[TE_REQUEUE] = {TA_REQUEUE, TS_FREED},
		[TE_GRACE_OVER] = {TA_ABANDON, TS_FREED},
		[TE_GIVE_UP] = {TA_LOST, TS_FREED},
	},
};

static const char *const tstate_names[TS__N] = {
	[TS_CLAIMED] = "CLAIMED", [TS_SPAWNING] = "SPAWNING", [TS_RUNNING] = "RUNNING",
	[TS_STOPPING] = "STOPPING", [TS_KILLING] = "KILLING", [TS_DRAINING] = "DRAINING",
	[TS_DYING] = "DYING", [TS_ENDED] = "ENDED", [TS_COMMITTING] = "COMMITTING", [TS_PUBLISHING] = "PUBLISHING",
	[TS_FREED] = "FREED",
};

static const char *const tevent_names[TE__N] = {
	[TE_NONE] = "", [TE_SPAWN] = "SPAWN", [TE_SPAWNED] = "SPAWNED",
	[TE_SPAWN_FAILED] = "SPAWN_FAILED", [TE_EXIT] = "EXIT", [TE_TIMEOUT] = "TIMEOUT",
	[TE_CANCEL] = "CANCEL", [TE_GRACE_OVER] = "GRACE_OVER", [TE_LEAF_KILLED] = "LEAF_KILLED",
	[TE_LEAF_EMPTY] = "LEAF_EMPTY",
	[TE_RESULT] = "RESULT", [TE_RETRY_KEPT] = "RETRY_KEPT", [TE_REQUEUE] = "REQUEUE",
	[TE_COMMITTED] = "COMMITTED", [TE_COMMIT_FAILED] = "COMMIT_FAILED", [TE_AGAIN] = "AGAIN",
	[TE_GIVE_UP] = "GIVE_UP",
	[TE_DETACH] = "DETACH", [TE_GIVE_BACK] = "GIVE_BACK",
};

static const char *const taction_names[TA__N] = {
	[TA_NONE] = "", [TA_SPAWN] = "spawn", [TA_STARTED] = "watch it",
	[TA_UNSPAWN] = "refuse it", [TA_KEEP] = "keep the event",
	[TA_REAP] = "reap, kill the leaf", [TA_LET_GO] = "let go", [TA_STOP_TIMEOUT] = "SIGTERM (end: timeout)",
	[TA_STOP_CANCEL] = "SIGTERM (end: cancelled)", [TA_KILL] = "SIGKILL",
	[TA_KILL_REQUEUE] = "SIGKILL (end: re-queue)", [TA_DRAIN_LOOK] = "look at the leaf",
	[TA_COMPLETE] = "make the result", [TA_PUBLISH] = "publish",
	[TA_DONE] = "log, on_done, free", [TA_FREE] = "free",
	[TA_REQUEUE] = "back into new/, free", [TA_COMMIT_FAILED] = "retry later",
	[TA_ABANDON] = "leave for recovery, free", [TA_LOST] = "finish lost, free",
	[TA_DETACH] = "leave it going, free",
	[TA_GIVE_BACK] = "back into new/ unrun, free",
};

/* The states that hold a slot of the task's lane: from its spawn until
 * nothing of its run can execute (w->used, w->nrunning). And the
 * commit thread's (w->ncommit). Both counted in enter() alone, as a
 * task's state changes. */
static const bool holds_slot[TS__N] = {
	[TS_SPAWNING] = true, [TS_RUNNING] = true, [TS_STOPPING] = true,
	[TS_KILLING] = true, [TS_DRAINING] = true,
};

bool task_holds_slot(const struct task *t)
{
	return holds_slot[t->state];
}

/* The table as docs/DESIGN.md prints it: a row per state, a column per
 * event (TE_NONE is no event); "action → STATE" where the state
 * changes. */
void task_table_markdown(FILE *f)
{
	fputs("| state \\ event |", f);
	for (int e = 0; e < TE__N; e++)
		if (e != TE_NONE)
			fprintf(f, " `%s` |", tevent_names[e]);
	fputs("\n|---|", f);
	for (int e = 0; e < TE__N; e++)
		if (e != TE_NONE)
			fputs("---|", f);
	fputc('\n', f);
	for (int st = 0; st < TS__N; st++) {
		fprintf(f, "| `%s`%s |", tstate_names[st], holds_slot[st] ? " (slot)" : "");
		for (int e = 0; e < TE__N; e++) {
			if (e == TE_NONE)
				continue;
			const struct tstep *x = &transitions[st][e];
			if (x->act == TA_NONE)
				fputs(" – |", f);
			else if ((int)x->next == st)
				fprintf(f, " %s |", taction_names[x->act]);
			else
				fprintf(f, " %s → `%s` |", taction_names[x->act], tstate_names[x->next]);
		}
		fputc('\n', f);
	}
}

/* One cell's action; the state is entered already. What it returns is
 * the event that follows (TE_NONE: none), which task_event acts on next:
 * an action never calls task_event itself (test_lifecycle holds it). One
 * that frees the task returns TE_NONE. */
static enum tevent act(struct worker *w, struct task *t, enum taction a, enum tevent ev)
{
	switch (a) {
	case TA_NONE:
	case TA__N:
		break;
	case TA_SPAWN:
		t->be->spawn(w, t);
		break;
	case TA_STARTED:
		return task_started(w, t);
	case TA_UNSPAWN:
		return spawn_refuse(w, t);
	case TA_KEEP:
		if (!t->kept.on) {
			t->kept.on = true;
			t->kept.ev = ev;
		}
		break;
	case TA_REAP:
		return task_ended(w, t);
	case TA_LET_GO:
		break;
	case TA_DRAIN_LOOK:
		return drain_poll(w, t) ? TE_LEAF_EMPTY : TE_NONE;
	case TA_COMPLETE:
		return task_complete(w, t);
	case TA_PUBLISH:
		publish(w, t);
		break;
	case TA_DONE:
		log_task("finished", t->idbuf, t->res.status,
			 t->res.started_ms ? t->res.finished_ms - t->res.started_ms : -1, t->res.error);
		hook_run(w, t->idbuf);
		task_free(w, t);
		break;
	case TA_FREE:
		task_free(w, t);
		break;
	case TA_REQUEUE:
		task_requeue(w, t);
		break;
	case TA_COMMIT_FAILED:
		return commit_failed(w, t);
	case TA_ABANDON:
		abandon(w, t);
		break;
	case TA_LOST:
		publish_lost(w, t);
		break;
	case TA_DETACH:
		detach(w, t);
		break;
	case TA_GIVE_BACK:
		give_back(w, t);
		break;
	case TA_STOP_TIMEOUT:
		t->end = END_TIMEOUT;
		return stop_begin(w, t);
	case TA_STOP_CANCEL:
		t->end = END_CANCEL;
		return stop_begin(w, t);
	case TA_KILL_REQUEUE:
		t->end = END_REQUEUE;
		kill_now(w, t);
		break;
	case TA_KILL:
		kill_now(w, t);
		break;
	}
	return TE_NONE;
}

/* A task enters a state: what the state holds is counted here. A slot
 * given back, or a task freed (its claim gone: a namesake may be
 * waiting), has the loop undefer and dispatch at the top of its next
 * turn (w->freed). */
static void enter(struct worker *w, struct task *t, enum tstate next)
{
	if (holds_slot[t->state] != holds_slot[next]) {
		int d = holds_slot[next] ? 1 : -1;
		w->used[t->spec.lane] += d;
		w->nrunning += d;
		w->freed |= d < 0;
	}
	w->ncommit += (next == TS_COMMITTING) - (t->state == TS_COMMITTING);
	w->freed |= next == TS_FREED;
	t->state = next;
}

/* One event per turn: its cell's action runs, and the event it returns
 * is the next turn's, until none follows. */
void task_event(struct worker *w, struct task *t, enum tevent ev)
{
	while (ev != TE_NONE) {
		/* A cancel, a timeout or a stop ends a paused task as any
		 * other: thawed first, so that its SIGTERM is heard and
		 * nothing is left frozen. */
		if (t->pause.how != PAUSE_NONE)
			task_thaw(w, t);
		const struct tstep *x = &transitions[t->state][ev];
		if (x->act == TA_NONE)
			return;
		enter(w, t, x->next);
		ev = act(w, t, x->act, ev);
	}
}
