/* worker_task.c - a task's life once it is made: its record, a run's
 * end, its result, stopping and killing it, pause and cancel, its free.
 * Which step runs when is the state table's (worker_state.c); starting
 * it is worker_start.c's. */
#define _GNU_SOURCE
#include "worker_int.h"
#include "outcome.h"

struct task *find_task(struct worker *w, const char *name)
{
	for (struct task *t = w->tasks; t; t = t->next)
		if (strcmp(t->name, name) == 0)
			return t;
	return NULL;
}

void scan_cancels(struct worker *w)
{
	for (struct task *t = w->tasks; t; t = t->next) {
		char p[512];
		struct stat st;
		if (spool_name_cancel(p, sizeof p, t->name) == 0 &&
		    fstatat(w->wdir, p, &st, AT_SYMLINK_NOFOLLOW) == 0)
			task_event(w, t, TE_CANCEL);
	}
}

void task_thaw(struct worker *w, struct task *t)
{
	(void)t->be->pause(w, t, false);
	wctl_clock_start(&t->pause, &t->deadline_mono);
	wctl_ack(w->wdir, t->name, false);
	log_task("resumed", t->name, NULL, -1, NULL);
}

void task_pause_look(struct worker *w, struct task *t)
{
	bool want = wctl_pause_wanted(w->wdir, t->name);
	if (want && t->pause.how == PAUSE_NONE && t->state == TS_RUNNING) {
		int r = t->be->pause(w, t, true);
		if (r < 0) {
			/* The refusal is an answer too, with its reason: kart
			 * pause says it rather than wait for one that never
			 * comes. It goes with the claim's scratch entries. */
			logmsg("%s: cannot pause it: %s", t->name, strerror(-r));
			wctl_refuse(w->wdir, t->name, r);
			return;
		}
		wctl_clock_stop(&t->pause, (enum pause_how)r, &t->deadline_mono);
		wctl_refuse(w->wdir, t->name, 0);
		wctl_ack(w->wdir, t->name, true);
		log_task("paused", t->name, NULL, -1, NULL);
	} else if (!want && t->pause.how != PAUSE_NONE) {
		task_thaw(w, t);
	}
}

void scan_pauses(struct worker *w)
{
	for (struct task *t = w->tasks; t; t = t->next)
		task_pause_look(w, t);
	bool was = w->spool_paused;
	w->spool_paused = wctl_spool_paused(w->sp->new);
	if (was != w->spool_paused)
		logmsg("spool %s: %s", w->spool_paused ? "paused" : "resumed",
		       w->spool_paused ? "no more claims until kart resume --all" : "claiming again");
}

/* ---- a task's record ------------------------------------------------------- */

static void fill_result(struct worker *w, struct task *t)
{
	struct result *r = &t->res;
	result_init(r);
	r->id = t->name;
	r->name = t->spec.name[0] ? t->spec.name : t->name;
	r->kind = t->spec.kind[0] ? t->spec.kind : NULL;
	r->worker = w->id;
	r->lane = lane_name(t->spec.lane);
	r->attempt = t->meta.attempt;
	r->submitted_ms = t->submitted_ms;
	r->started_ms = t->started_ms;
	r->timeout_s = t->spec.timeout_s;
	r->kill_grace_s = t->spec.kill_grace_s;
	r->label = t->spec.label[0] ? t->spec.label : NULL;
	r->backend = t->be->name;
	r->network = t->spec.net;
	if (t->cg.mode != CG_MODE_NONE) {
		/* Limits as applied: only a leaf applies them. */
		r->cgroup = cg_mode_name(t->cg.mode);
		r->memory = t->spec.memory;
		r->pids = t->spec.pids;
		r->cpu_milli = t->spec.cpu_milli;
	} else if (t->be->engine_limits) {
		/* The engine applies them (the container's --memory,
		 * --pids-limit, --cpus). */
		r->memory = t->spec.memory;
		r->pids = t->spec.pids;
		r->cpu_milli = t->spec.cpu_milli;
	} else {
		/* No leaf: what the rlimit fallback holds (see rlimits.h). */
		r->memory = t->rl.as;
		r->pids = t->rl.nproc;
	}
	r->uid = t->uid;
	/* A root worker named the account when it switched to it
	 * (task_cred); otherwise it is looked up here. */
	if (!t->user[0]) {
		const struct acct *a = acct_get(t->uid);
		if (a->found)
			snprintf(t->user, sizeof t->user, "%s", a->name);
	}
	if (t->user[0])
		r->user = t->user;
	r->task = &t->spec;
	r->home = t->home[0] ? t->home : t->be->work;
	/* Its /work (backend none: its spare), and HOME where that was it. */
	r->work_discarded = t->spec.cwd < 0 || !t->home[0];
}

/* Stopping, and its result still cannot be published (a full disk, an
 * I/O error) when the grace period is over: left in cur/W/ just as a
 * crash leaves it, for recovery to publish, not retried for ever. */
void abandon(struct worker *w, struct task *t)
{
	logmsg("%s: its result could not be published before the stop; left in cur/%s/ for recovery",
	       t->name, w->id);
	memset(t->scr, 0, sizeof t->scr);
	task_free(w, t);
}

/* A claimed task that will not run but has a full record (refused). */
void finish_unstarted(struct worker *w, struct task *t, const char *status,
		      const char *refusal, const char *error)
{
	/* Its leaf, if one was made, goes with it; it applied nothing. */
	task_cgroup_end(t);
	t->cg.mode = CG_MODE_NONE;
	memset(&t->rl, 0, sizeof t->rl);
	fill_result(w, t);
	t->res.status = status;
	t->res.refusal = refusal;
	t->res.error = error;
	t->res.started_ms = 0;
	t->res.finished_ms = now_realtime_ms();
	task_event(w, t, TE_RESULT);
}

void finish_refused(struct worker *w, struct task *t, const char *refusal,
		    const char *error)
{
	finish_unstarted(w, t, "refused", refusal, error);
}

/* ---- ending a task ----------------------------------------------------------- */

/* Reaped, and its leaf killed: true while it waits for the leaf to
 * empty (TS_DRAINING). */
bool task_ended(struct worker *w, struct task *t)
{
	t->be->reap(w, t);
	if (drain_begin(w, t)) {
		/* cgroup.kill has SIGKILLed all of it at once: nothing of the
		 * run executes another instruction, so the slot is free now,
		 * not once the kernel has finished tearing it down (bwrap's
		 * namespaces can take several ms). */
		if (t->cg_atomic) {
			w->used[t->spec.lane]--;
			w->nrunning--;
			t->slot_freed = true;
		}
		return true;
	}
	return false;
}

/* Interrupted by the shutdown: back into new/ for its next attempt, and
 * no result; freed. */
static void task_requeue(struct worker *w, struct task *t)
{
	t->meta.attempt++;
	if (t->meta.submitted_ms == 0)
		t->meta.submitted_ms = t->submitted_ms;
	int r = spool_requeue(w->sp, w->wdir, t->name, &t->meta);
	if (r < 0)
		logmsg("%s: cannot re-queue: %s (left for recovery)", t->name, strerror(-r));
	else
		logmsg("%s: interrupted by shutdown, re-queued (attempt %d next)", t->name,
		       t->meta.attempt);
	task_free(w, t);
}

/* What the run used, as its backend tells. */
static void result_usage(struct task *t, struct result *r)
{
	struct backend_usage u;
	t->be->usage(t, &u);
	r->paused_ms = wctl_paused_ms(&t->pause);
	r->cpu_user_ms = u.cpu_user_ms;
	r->cpu_system_ms = u.cpu_system_ms;
	r->memory_peak = u.memory_peak;
}

/* The result's status, from what was observed (outcome.c decides). */
static void result_outcome(struct worker *w, struct task *t, struct result *r)
{
	struct observed o = {
		.end = t->end == END_TIMEOUT ? OUTCOME_TIMEOUT
		       : t->end == END_CANCEL ? OUTCOME_CANCEL : OUTCOME_NATURAL,
		.run = &t->rend,
		.backend = t->be->name,
		.term_sent = t->term_sent,
		.timeout_s = t->spec.timeout_s,
		.kill_grace_s = t->spec.kill_grace_s >= 0 ? t->spec.kill_grace_s : w->pol->kill_grace_s,
		.leaf = t->cg.mode != CG_MODE_NONE,
		.oom_kills = t->cgu.oom_kills,
		.engine = t->be->engine_limits,
		.memory = t->spec.memory,
		.memory_builtin = memory_builtin(w->pol, &t->spec),
		.engine_oom = t->engine_oom,
	};
	outcome_decide(&o, t->seccomp, r, t->errbuf, sizeof t->errbuf);
}

/* Its stdout and stderr as the result describes them. */
static void result_streams(struct worker *w, struct task *t, struct result *r)
{
	capture_loss(w, t);
	struct capture *caps[] = {&t->run.out, &t->run.err};
	struct result_stream *rs[] = {&r->out, &r->err};
	for (int i = 0; i < 2; i++) {
		rs[i]->bytes = caps[i]->bytes;
		rs[i]->truncated = caps[i]->truncated;
		rs[i]->lost_bytes = caps[i]->lost;
		/* A run's result always has both files, empty or not. */
		rs[i]->captured = true;
		rs[i]->unmade = caps[i]->file < 0 && !caps[i]->truncated;
	}
}

/* Its scratch directories once the run is over: the work directory of
 * backend none goes, whatever the outcome; an empty $KART_OUTDIR too
 * (a full one is kept with the result, for the commit thread to move,
 * by way of the mover where it is a tmpfs). */
static void scratch_hand_on(struct worker *w, struct task *t, struct result *r)
{
	char p[512];
	/* The commit thread measures a full $KART_OUTDIR against this. */
	r->artifacts_max = w->pol->artifacts_max;
	t->scratch_retired = true;
	if (t->scr[SCR_WORK][0] || t->scr[SCR_OUT][0]) {
		/* Backend none's, by their names: each gone is forgotten. */
		for (int i = 0; i < 2; i++) {
			bool gone = !t->scr[i][0] || scratch_retire(w, t, t->scr[i], false, &t->scr_ct[i], &t->scr_fd[i]);
			t->scratch_retired &= gone;
			if (gone)
				t->scr[i][0] = '\0';
		}
		r->outdir_gone = !t->scr[SCR_OUT][0] || scratch_retire(w, t, t->scr[SCR_OUT], true, &t->scr_ct[SCR_OUT], &t->scr_fd[SCR_OUT]);
		if (r->outdir_gone)
			t->scr[SCR_OUT][0] = '\0';
		else
			r->outdir_scratch = t->scr[SCR_OUT]; /* the commit moves or removes it */
		return;
	}
	static const enum scratch_file gone[] = {SCRATCH_WORK, SCRATCH_TMP};
	for (size_t i = 0; i < ARRAY_SIZE(gone); i++)
		t->scratch_retired &= spool_name_scratch(p, sizeof p, t->name, gone[i]) == 0 &&
				      scratch_retire(w, t, p, false, NULL, NULL);
	if (t->out_mfd >= 0)
		(void)outdir_release(&w->ons, t->out_mfd); /* the descriptor keeps it */
	if (t->out_mfd >= 0 && !outdir_empty(t->out_mfd) &&
	    spool_name_scratch(p, sizeof p, t->name, SCRATCH_OUT) == 0) {
		/* Copied into .NAME.out by the mover, for the commit
		 * thread to move beside the result. */
		t->mv = (struct outdir_move){
			.src = t->out_mfd, .dst_at = w->wdir, .dst = -1,
			.reader = spool_reader(w->sp, t->name, t->uid),
			.c = {.bytes_max = w->pol->artifacts_max, .files_max = w->pol->artifacts_files,
			      .depth_max = w->pol->artifacts_depth},
			.done = outdir_moved, .arg = &w->commit};
		snprintf(t->mv.dst_name, sizeof t->mv.dst_name, "%s", p);
		t->out_mfd = -1;
		r->outdir_gone = false;
	} else {
		if (t->out_mfd >= 0)
			close(t->out_mfd); /* nothing in it */
		t->out_mfd = -1;
		r->outdir_gone = spool_name_scratch(p, sizeof p, t->name, SCRATCH_OUT) == 0 &&
				 scratch_retire(w, t, p, true, NULL, NULL);
	}
}

/* The run is reaped and its leaf gone: the result (or the re-queue). */
void task_complete(struct worker *w, struct task *t)
{
	if (!t->slot_freed) {
		w->used[t->spec.lane]--;
		w->nrunning--;
	}
	if (t->end == END_REQUEUE) {
		task_requeue(w, t);
		return;
	}
	fill_result(w, t);
	struct result *r = &t->res;
	r->finished_ms = now_realtime_ms();
	result_usage(t, r);
	result_outcome(w, t, r);
	result_streams(w, t, r);
	/* The outputs are fsynced by the commit thread, first. */
	scratch_hand_on(w, t, r);
	task_event(w, t, TE_RETRY_LATER);
}

void kill_now(struct worker *w, struct task *t)
{
	(void)t->be->signal(w, t, SIGKILL);
}

/* A timeout or a cancel: SIGTERM, and SIGKILL once the kill grace has
 * passed (TE_TIMEOUT in TS_STOPPING), as `timeout -k` and systemd do.
 * Its end comes when the task's main process ends; what it leaves
 * behind is killed then. No grace, or no SIGTERM to send: the grace is
 * over at once. */
void stop_begin(struct worker *w, struct task *t)
{
	int64_t g = t->spec.kill_grace_s >= 0 ? t->spec.kill_grace_s : w->pol->kill_grace_s;
	if (g <= 0 || !t->be->signal(w, t, SIGTERM)) {
		if (g > 0)
			logmsg("%s: cannot find the task to send SIGTERM: killed at once", t->name);
		task_event(w, t, TE_TIMEOUT);
		return;
	}
	t->term_sent = true;
	t->deadline_mono = now_mono_ms() + g * 1000;
}

/* Back from a spawn thread, its process running. */
void task_started(struct worker *w, struct task *t)
{
	t->be->started(w, t);
	if (t->spec.timeout_s > 0)
		t->deadline_mono = now_mono_ms() + t->spec.timeout_s * 1000;
	log_task("started", t->name, NULL, -1, NULL);
	(void)notify_statusf("%d running", w->nrunning);
	/* Cancelled, or the shutdown's grace ran out, while it spawned. */
	if (t->pending) {
		t->pending = false;
		task_event(w, t, t->pending_ev);
	} else
		task_pause_look(w, t); /* kart pause while it spawned */
}

/* A fault of the host, which passes (a full or failing disk, a quota,
 * a filesystem remounted read-only for a while): a publish is retried
 * as long as it lasts. Any other failure (a name in done/ that is not
 * what the protocol makes, a name too long) recurs at each try. */
static bool host_fault(int e)
{
	return e == ENOSPC || e == EDQUOT || e == EIO || e == EROFS || e == ENOMEM || e == EAGAIN ||
	       e == EINTR || e == EMFILE || e == ENFILE;
}

/* A publish that cannot succeed: after PUBLISH_TRIES, the task is
 * finished `lost`, the reason in its error, without the outputs that
 * would not go (one of them may be what fails); if even that cannot be
 * written, it is left for recovery as a stop leaves it. Retries back off
 * from 1 s to a minute, and are logged at the 1st, 2nd, 4th... try. */
#define PUBLISH_TRIES 5
#define PUBLISH_RETRY_MAX_MS 60000
static void publish_lost(struct worker *w, struct task *t)
{
	char why[400], id[256];
	snprintf(why, sizeof why, "its result could not be published in %d tries: %s; its outputs are "
		 "not kept", t->publish_tries, strerror(-t->commit_err));
	spool_clean_scratch(w->wdir, t->name, 0);
	int r = spool_finish_undo(w->sp, w->wdir, t->name);
	if (r >= 0)
		r = spool_finish_unrun(w->sp, w->wdir, t->name, "lost", why, w->id, id, sizeof id);
	if (r < 0) {
		logmsg("%s: %s, nor its lost result: %s", t->name, why, strerror(-r));
		abandon(w, t);
		return;
	}
	log_task("finished", id, "lost", -1, why);
	run_hook(w, id);
	task_free(w, t);
}

/* Back from the commit thread, not published: retried (a full disk, an
 * I/O error: a task is never dropped), or, when its output could not be
 * made durable, run again; left for recovery once the worker stops; a
 * publish that fails otherwise gives up (publish_lost). */
void commit_failed(struct worker *w, struct task *t)
{
	if (t->commit_output) {
		logmsg("%s: fsync of its output failed: %s; re-queued", t->name,
		       strerror(-t->commit_err));
		t->end = END_REQUEUE;
		t->meta.attempt++;
		(void)spool_requeue(w->sp, w->wdir, t->name, &t->meta);
		task_free(w, t);
	} else if (w->stopping && !w->grace_mono) {
		logmsg("%s: cannot publish its result: %s", t->name, strerror(-t->commit_err));
		abandon(w, t);
	} else if (!host_fault(-t->commit_err) && ++t->publish_tries >= PUBLISH_TRIES) {
		publish_lost(w, t);
	} else {
		int n = host_fault(-t->commit_err) ? ++t->publish_tries : t->publish_tries;
		int64_t wait = n < 8 ? 1000LL << (n - 1) : PUBLISH_RETRY_MAX_MS;
		if ((n & (n - 1)) == 0)
			logmsg("%s: cannot publish its result: %s; retrying (try %d)", t->name,
			       strerror(-t->commit_err), n);
		t->retry_mono = now_mono_ms() + (wait < PUBLISH_RETRY_MAX_MS ? wait : PUBLISH_RETRY_MAX_MS);
		t->res.id = t->name;
		t->next = w->tasks;
		w->tasks = t;
	}
}

/* Back from its spawn, not started (TE_SPAWN_FAILED): its backend says
 * why it is refused (or rejected). */
void spawn_refuse(struct worker *w, struct task *t)
{
	struct backend_refusal why;
	t->be->unspawned(w, t, &why);
	finish_unstarted(w, t, why.status, why.refusal, why.error);
}

/* Is the task's memory or pids the built-in default of the policy (and
 * not its lane's own, nor the task's line)? Then it yields where nothing
 * can hold it. */
bool memory_builtin(const struct policy *pol, const struct task_spec *spec)
{
	return pol->builtin_memory && !pol->lane[spec->lane ? 1 : 0].memory_default &&
	       spec->line_memory <= 0;
}
