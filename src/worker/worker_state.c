/* worker_state.c - the task state machine: transitions[][], the one
 * place that says what each event does in each state, and task_event,
 * the one setter of a task's state. The actions themselves are steps of
 * a task's life (worker_task.c); this file only says which runs when. */
#define _GNU_SOURCE
#include "worker_int.h"

/* What each event does in each state, and the state it leads to
 * (s6-supervise's actions table): every change of a task's state is made
 * here, in task_event, and nowhere else. An event a state has no entry
 * for does nothing. The state is entered before the action runs: an
 * action that ends the task's life frees it, one whose outcome is not
 * known in advance raises the next event itself (stop_begin: TIMEOUT
 * when SIGTERM cannot be sent; task_ended: LEAF_EMPTY; task_complete:
 * RESULT). */
enum taction {
	TA_NONE,
	TA_SPAWN,          /* its slot counted, handed to its backend's spawn */
	TA_STARTED,        /* its pidfd and pipes watched; what was kept applied */
	TA_UNSPAWN,        /* its slot given back; refused (RESULT) */
	TA_KEEP,           /* kept for when it runs (the first only) */
	TA_REAP,           /* reaped, its leaf killed; LEAF_EMPTY once that is empty */
	TA_STOP_TIMEOUT,   /* SIGTERM, end: timeout */
	TA_STOP_CANCEL,    /* SIGTERM, end: cancelled */
	TA_KILL,           /* SIGKILL, its end kept */
	TA_KILL_REQUEUE,   /* SIGKILL, end: re-queue */
	TA_DRAIN_LOOK,     /* its leaf looked at again */
	TA_COMPLETE,       /* the result (RESULT), or the re-queue */
	TA_PUBLISH,        /* handed to the commit thread */
	TA_DONE,           /* logged, on_done run, freed */
	TA_RETRY_LATER,    /* its task file kept for a retry_on attempt (RESULT if it cannot be), freed */
	TA_COMMIT_FAILED,  /* retried later (or re-run, finished lost, or left for recovery) */
	TA_ABANDON,        /* left in cur/W/ for recovery, freed */
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
	},
	/* Not ours to kill yet: a cancel or the grace's end waits for it. */
	[TS_SPAWNING] = {
		[TE_SPAWNED] = {TA_STARTED, TS_RUNNING},
		[TE_SPAWN_FAILED] = {TA_UNSPAWN, TS_CLAIMED},
		[TE_CANCEL] = {TA_KEEP, TS_SPAWNING},
		[TE_GRACE_OVER] = {TA_KEEP, TS_SPAWNING},
	},
	[TS_RUNNING] = {
		[TE_EXIT] = {TA_REAP, TS_DRAINING},
		[TE_TIMEOUT] = {TA_STOP_TIMEOUT, TS_STOPPING},
		[TE_CANCEL] = {TA_STOP_CANCEL, TS_STOPPING},
		[TE_GRACE_OVER] = {TA_KILL_REQUEUE, TS_KILLING},
	},
	/* TE_TIMEOUT here is the end of its kill grace; a shutdown's grace
	 * ending kills it too, keeping its end (it is not re-queued). */
	[TS_STOPPING] = {
		[TE_EXIT] = {TA_REAP, TS_DRAINING},
		[TE_TIMEOUT] = {TA_KILL, TS_KILLING},
		[TE_GRACE_OVER] = {TA_KILL, TS_KILLING},
	},
	[TS_KILLING] = {
		[TE_EXIT] = {TA_REAP, TS_DRAINING},
	},
	[TS_DRAINING] = {
		[TE_RETRY] = {TA_DRAIN_LOOK, TS_DRAINING},
		[TE_LEAF_EMPTY] = {TA_COMPLETE, TS_DRAINING},
		[TE_RESULT] = {TA_PUBLISH, TS_COMMITTING},
		/* retry_on matched its attempt: the task file is back in
		 * new/ for a later attempt (sched_retry), this one is done. */
		[TE_RETRY_LATER] = {TA_RETRY_LATER, TS_DRAINING},
	},
	[TS_COMMITTING] = {
		[TE_COMMITTED] = {TA_DONE, TS_COMMITTING},
		[TE_COMMIT_FAILED] = {TA_COMMIT_FAILED, TS_PUBLISHING},
	},
	[TS_PUBLISHING] = {
		[TE_RETRY] = {TA_PUBLISH, TS_COMMITTING},
		[TE_GRACE_OVER] = {TA_ABANDON, TS_PUBLISHING},
	},
};

static const char *const tstate_names[TS__N] = {
	[TS_CLAIMED] = "CLAIMED", [TS_SPAWNING] = "SPAWNING", [TS_RUNNING] = "RUNNING",
	[TS_STOPPING] = "STOPPING", [TS_KILLING] = "KILLING", [TS_DRAINING] = "DRAINING",
	[TS_COMMITTING] = "COMMITTING", [TS_PUBLISHING] = "PUBLISHING",
};

static const char *const tevent_names[TE__N] = {
	[TE_SPAWN] = "SPAWN", [TE_SPAWNED] = "SPAWNED", [TE_SPAWN_FAILED] = "SPAWN_FAILED",
	[TE_EXIT] = "EXIT", [TE_TIMEOUT] = "TIMEOUT", [TE_CANCEL] = "CANCEL",
	[TE_GRACE_OVER] = "GRACE_OVER", [TE_LEAF_EMPTY] = "LEAF_EMPTY", [TE_RESULT] = "RESULT",
	[TE_COMMITTED] = "COMMITTED", [TE_COMMIT_FAILED] = "COMMIT_FAILED", [TE_RETRY] = "RETRY",
	[TE_RETRY_LATER] = "RETRY_LATER",
};

static const char *const taction_names[TA__N] = {
	[TA_NONE] = "", [TA_SPAWN] = "spawn", [TA_STARTED] = "watch it",
	[TA_UNSPAWN] = "free its slot, refuse it", [TA_KEEP] = "keep the event",
	[TA_REAP] = "reap, kill the leaf", [TA_STOP_TIMEOUT] = "SIGTERM (end: timeout)",
	[TA_STOP_CANCEL] = "SIGTERM (end: cancelled)", [TA_KILL] = "SIGKILL",
	[TA_KILL_REQUEUE] = "SIGKILL (end: re-queue)", [TA_DRAIN_LOOK] = "look at the leaf",
	[TA_COMPLETE] = "make the result, or re-queue", [TA_PUBLISH] = "publish",
	[TA_DONE] = "log, on_done, free", [TA_RETRY_LATER] = "keep for a retry, free", [TA_COMMIT_FAILED] = "retry later, or lost",
	[TA_ABANDON] = "leave for recovery, free",
};

/* The table as docs/DESIGN.md prints it: a row per state, a column per
 * event; "action → STATE" where the state changes. */
void task_table_markdown(FILE *f)
{
	fputs("| state \\ event |", f);
	for (int e = 0; e < TE__N; e++)
		fprintf(f, " `%s` |", tevent_names[e]);
	fputs("\n|---|", f);
	for (int e = 0; e < TE__N; e++)
		fputs("---|", f);
	fputc('\n', f);
	for (int st = 0; st < TS__N; st++) {
		fprintf(f, "| `%s` |", tstate_names[st]);
		for (int e = 0; e < TE__N; e++) {
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

void task_event(struct worker *w, struct task *t, enum tevent ev)
{
	/* A cancel, a timeout or a stop ends a paused task as any other:
	 * thawed first, so that its SIGTERM is heard and nothing is left
	 * frozen. */
	if (t->pause.how != PAUSE_NONE)
		task_thaw(w, t);
	const struct tstep *x = &transitions[t->state][ev];
	if (x->act == TA_NONE)
		return;
	t->state = x->next;
	switch (x->act) {
	case TA_NONE:
	case TA__N:
		return;
	case TA_SPAWN:
		w->used[t->spec.lane]++;
		w->nrunning++;
		t->be->spawn(w, t);
		return;
	case TA_STARTED:
		task_started(w, t);
		return;
	case TA_UNSPAWN:
		w->used[t->spec.lane]--;
		w->nrunning--;
		spawn_refuse(w, t);
		return;
	case TA_KEEP:
		if (!t->pending) {
			t->pending = true;
			t->pending_ev = ev;
		}
		return;
	case TA_REAP:
		if (!task_ended(w, t)) {
			task_event(w, t, TE_LEAF_EMPTY);
			return;
		}
		/* Draining: its slot may be free already (cgroup.kill). */
		w->freed = true;
		return;
	case TA_DRAIN_LOOK:
		if (drain_poll(w, t))
			task_event(w, t, TE_LEAF_EMPTY);
		return;
	case TA_COMPLETE:
		/* Exits last: the task is published or freed. */
		task_complete(w, t);
		w->freed = true;
		return;
	case TA_PUBLISH:
		publish(w, t);
		return;
	case TA_DONE:
		w->ncommit--;
		log_task("finished", t->idbuf, t->res.status,
			 t->res.started_ms ? t->res.finished_ms - t->res.started_ms : -1, t->res.error);
		run_hook(w, t->idbuf);
		task_free(w, t);
		return;
	case TA_RETRY_LATER:
		if (!sched_retry(w, t))
			task_event(w, t, TE_RESULT);
		return;
	case TA_COMMIT_FAILED:
		w->ncommit--;
		commit_failed(w, t);
		return;
	case TA_ABANDON:
		abandon(w, t);
		return;
	case TA_STOP_TIMEOUT:
		t->end = END_TIMEOUT;
		stop_begin(w, t);
		return;
	case TA_STOP_CANCEL:
		t->end = END_CANCEL;
		stop_begin(w, t);
		return;
	case TA_KILL_REQUEUE:
		t->end = END_REQUEUE;
		kill_now(w, t);
		return;
	case TA_KILL:
		kill_now(w, t);
		return;
	}
}
