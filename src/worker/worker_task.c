/* worker_task.c - a task's life once it is made: its record, a run's
 * end, its result, stopping and killing it, pause and cancel, its free.
 * Which step runs when is the state table's (worker_state.c); starting
 * it is worker_start.c's. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>

#include "worker_int.h"
#include "backend.h"
#include "outcome.h"

#include <sched.h>

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
	r->engine_key = t->be->name;
	r->engine_json = t->be->result_json ? t->be->result_json(t) : NULL;
	r->network = t->spec.net;
	if (t->leaf.cg.mode != CG_MODE_NONE) {
		/* Limits as applied: only a leaf applies them. */
		r->cgroup = cg_mode_name(t->leaf.cg.mode);
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
	 * (acct_task_cred); otherwise it is looked up here. */
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
	memset(t->scr.dir, 0, sizeof t->scr.dir);
	task_free(w, t);
}

/* The worker stops while its backend's run goes on without it (backend.h
 * detach): left in cur/W/ with its run record, for the next life of this
 * worker, or a peer, to follow (TA_DETACH: its state holds no slot). */
void detach(struct worker *w, struct task *t)
{
	logmsg("%s: the worker stops; its run goes on, left in cur/%s/ to be followed again", t->name,
	       w->id);
	memset(t->scr.dir, 0, sizeof t->scr.dir);
	task_free(w, t);
}

/* The result of a claimed task that will not run but has a full record
 * (refused). */
static void result_unstarted(struct worker *w, struct task *t, const char *status,
			     const char *refusal, const char *error)
{
	/* Its leaf, if one was made, goes with it; it applied nothing. */
	task_cgroup_end(t);
	t->leaf.cg.mode = CG_MODE_NONE;
	memset(&t->rl, 0, sizeof t->rl);
	fill_result(w, t);
	t->res.status = status;
	t->res.refusal = refusal;
	t->res.error = error;
	t->res.started_ms = 0;
	t->res.finished_ms = now_realtime_ms();
}

void finish_unstarted(struct worker *w, struct task *t, const char *status,
		      const char *refusal, const char *error)
{
	result_unstarted(w, t, status, refusal, error);
	task_event(w, t, TE_RESULT);
}

void finish_refused(struct worker *w, struct task *t, const char *refusal,
		    const char *error)
{
	finish_unstarted(w, t, "refused", refusal, error);
}

/* ---- ending a task ----------------------------------------------------------- */

/* Reaped, and its leaf killed: LEAF_EMPTY where nothing of it is left;
 * else it waits for the leaf to empty (DRAINING), and where cgroup.kill
 * SIGKILLed all of it at once, nothing of the run executes another
 * instruction: LEAF_KILLED, its slot free now, not once the kernel has
 * finished tearing it down (bwrap's namespaces can take several ms). */
enum tevent task_ended(struct worker *w, struct task *t)
{
	t->be->reap(w, t);
	if (!drain_begin(w, t))
		return TE_LEAF_EMPTY;
	return t->leaf.atomic ? TE_LEAF_KILLED : TE_NONE;
}

/* Its attempt is void (interrupted by the shutdown, or its output could
 * not be made durable): back into new/ for its next attempt, and no
 * result; freed. A run its backend lost (lost_run: a node failed) is
 * counted as a dead worker's claim is (spool_recover_claim): lost once
 * its attempts pass retries=. */
void task_requeue(struct worker *w, struct task *t)
{
	int retries = t->spec.retries >= 0 ? t->spec.retries : w->pol->retries_default;
	if (t->lost_run && t->meta.attempt > retries) {
		char why[sizeof t->errbuf + 96];
		snprintf(why, sizeof why, "%s, during attempt %d, and retries=%d allows no more", t->errbuf,
			 t->meta.attempt, retries);
		finish_unrun(w, t->name, "lost", why);
		task_free(w, t);
		return;
	}
	t->meta.attempt++;
	if (t->meta.submitted_ms == 0)
		t->meta.submitted_ms = t->submitted_ms;
	int r = spool_requeue(w->sp, w->wdir, t->name, &t->meta);
	if (r < 0)
		logmsg("%s: cannot re-queue: %s (left for recovery)", t->name, strerror(-r));
	else if (t->lost_run)
		logmsg("%s: %s: re-queued (attempt %d next)", t->name, t->errbuf, t->meta.attempt);
	else if (!t->commit.output) /* else commit_failed said why */
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
	if (u.started_ms > 0 && u.finished_ms >= u.started_ms) {
		r->started_ms = u.started_ms;
		r->finished_ms = u.finished_ms;
	}
	r->io_read_bytes = u.io_read_bytes;
	r->io_write_bytes = u.io_write_bytes;
	r->pids_peak = u.pids_peak;
	memcpy(r->psi_us, u.psi_us, sizeof r->psi_us);
	memcpy(r->usage_by, u.by, sizeof r->usage_by);
	memcpy(r->usage_why, u.why, sizeof r->usage_why);
	/* What it could have used: the CPUs it was let run on (read once;
	 * the worker's affinity, which its tasks inherit). */
	static int ncpu;
	cpu_set_t set;
	if (!ncpu)
		ncpu = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
	r->host_cpus = ncpu;
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
		.leaf = t->leaf.cg.mode != CG_MODE_NONE,
		.oom_kills = t->leaf.use.oom_kills,
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
	t->scr.retired = true;
	if (t->scr.dir[SCR_WORK][0] || t->scr.dir[SCR_OUT][0]) {
		/* Backend none's, by their names: each gone is forgotten. */
		for (int i = 0; i < 2; i++) {
			bool gone = !t->scr.dir[i][0] || scratch_retire(w, t, t->scr.dir[i], false, &t->scr.ct[i], &t->scr.fd[i]);
			t->scr.retired &= gone;
			if (gone)
				t->scr.dir[i][0] = '\0';
		}
		r->outdir_gone = !t->scr.dir[SCR_OUT][0] || scratch_retire(w, t, t->scr.dir[SCR_OUT], true, &t->scr.ct[SCR_OUT], &t->scr.fd[SCR_OUT]);
		if (r->outdir_gone)
			t->scr.dir[SCR_OUT][0] = '\0';
		else
			r->outdir_scratch = t->scr.dir[SCR_OUT]; /* the commit moves or removes it */
		return;
	}
	static const enum scratch_file gone[] = {SCRATCH_WORK, SCRATCH_TMP};
	for (size_t i = 0; i < ARRAY_SIZE(gone); i++)
		t->scr.retired &= spool_name_scratch(p, sizeof p, t->name, gone[i]) == 0 &&
				      scratch_retire(w, t, p, false, NULL, NULL);
	if (t->outdir.mfd >= 0)
		(void)outdir_release(&w->ons, t->outdir.mfd); /* the descriptor keeps it */
	if (t->outdir.mfd >= 0 && !outdir_empty(t->outdir.mfd) &&
	    spool_name_scratch(p, sizeof p, t->name, SCRATCH_OUT) == 0) {
		/* Copied into .NAME.out by the mover, for the commit
		 * thread to move beside the result. */
		t->outdir.mv = (struct outdir_move){
			.src = t->outdir.mfd, .dst_at = w->wdir, .dst = -1,
			.reader = spool_reader(w->sp, t->name, t->uid),
			.c = {.bytes_max = w->pol->artifacts_max, .files_max = w->pol->artifacts_files,
			      .depth_max = w->pol->artifacts_depth},
			.done = outdir_moved, .arg = &w->commit};
		snprintf(t->outdir.mv.dst_name, sizeof t->outdir.mv.dst_name, "%s", p);
		t->outdir.mfd = -1;
		r->outdir_gone = false;
	} else {
		if (t->outdir.mfd >= 0)
			close(t->outdir.mfd); /* nothing in it */
		t->outdir.mfd = -1;
		r->outdir_gone = spool_name_scratch(p, sizeof p, t->name, SCRATCH_OUT) == 0 &&
				 scratch_retire(w, t, p, true, NULL, NULL);
	}
}

/* The run is reaped and its leaf gone: its result, kept for retry_on's
 * next attempt or to be published; or, interrupted, none (REQUEUE). */
enum tevent task_complete(struct worker *w, struct task *t)
{
	if (t->end == END_REQUEUE)
		return TE_REQUEUE;
	fill_result(w, t);
	struct result *r = &t->res;
	r->finished_ms = now_realtime_ms();
	result_usage(t, r);
	result_outcome(w, t, r);
	result_streams(w, t, r);
	/* The outputs are fsynced by the commit thread, first. */
	scratch_hand_on(w, t, r);
	return sched_retry(w, t) ? TE_RETRY_KEPT : TE_RESULT;
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
enum tevent stop_begin(struct worker *w, struct task *t)
{
	int64_t g = t->spec.kill_grace_s >= 0 ? t->spec.kill_grace_s : w->pol->kill_grace_s;
	if (g <= 0 || !t->be->signal(w, t, SIGTERM)) {
		if (g > 0)
			logmsg("%s: cannot find the task to send SIGTERM: killed at once", t->name);
		return TE_TIMEOUT;
	}
	t->term_sent = true;
	t->deadline_mono = now_mono_ms() + g * 1000;
	return TE_NONE;
}

/* Back from its spawn, its process running: what was kept for it while
 * it spawned follows. */
enum tevent task_started(struct worker *w, struct task *t)
{
	t->be->started(w, t);
	if (t->spec.timeout_s > 0 && !t->be->queued)
		t->deadline_mono = now_mono_ms() + t->spec.timeout_s * 1000;
	log_task("started", t->name, NULL, -1, NULL);
	(void)notify_statusf("%d running", w->nrunning);
	/* Cancelled, or the shutdown's grace ran out, while it spawned. */
	if (t->kept.on) {
		t->kept.on = false;
		return t->kept.ev;
	}
	task_pause_look(w, t); /* kart pause while it spawned */
	return TE_NONE;
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

/* Retries back off from 1 s to a minute, and are logged at the 1st,
 * 2nd, 4th... try; one that cannot succeed gives up after PUBLISH_TRIES. */
#define PUBLISH_TRIES 5
#define PUBLISH_RETRY_MAX_MS 60000

void publish_lost(struct worker *w, struct task *t)
{
	char why[400], id[256];
	snprintf(why, sizeof why, "its result could not be published in %d tries: %s; its outputs are "
		 "not kept", t->commit.tries, strerror(-t->commit.err));
	/* What failed may be one of them; and a finish begun goes as
	 * recovery undoes one, so that the claim finishes anew. */
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
	hook_run(w, id);
	task_free(w, t);
}

void task_run_began(struct worker *w, struct task *t, int64_t began_mono, int64_t began_ms)
{
	(void)w;
	t->started_ms = began_ms;
	if (t->state != TS_RUNNING || t->spec.timeout_s <= 0)
		return;
	int64_t d = began_mono + t->spec.timeout_s * 1000;
	if (t->pause.how != PAUSE_NONE) /* its clock runs again at the resume */
		t->pause.left_ms = d > t->pause.since_mono ? d - t->pause.since_mono : 0;
	else
		t->deadline_mono = d > 0 ? d : 1;
}

/* Back from the commit thread, not published: retried (a full disk, an
 * I/O error: a task is never dropped), or, when its output could not be
 * made durable, run again (REQUEUE); left for recovery once the worker
 * stops (GRACE_OVER); given up when it cannot succeed (GIVE_UP). */
enum tevent commit_failed(struct worker *w, struct task *t)
{
	if (t->commit.output) {
		logmsg("%s: fsync of its output failed: %s; re-queued", t->name,
		       strerror(-t->commit.err));
		t->end = END_REQUEUE;
		return TE_REQUEUE;
	}
	if (w->stopping && !w->grace_mono) {
		logmsg("%s: cannot publish its result: %s", t->name, strerror(-t->commit.err));
		return TE_GRACE_OVER;
	}
	int n = ++t->commit.tries;
	if (!host_fault(-t->commit.err) && n >= PUBLISH_TRIES)
		return TE_GIVE_UP;
	if ((n & (n - 1)) == 0)
		logmsg("%s: cannot publish its result: %s; retrying (try %d)", t->name,
		       strerror(-t->commit.err), n);
	t->retry_mono = now_mono_ms() + (n < 7 ? 1000LL << (n - 1) : PUBLISH_RETRY_MAX_MS);
	t->res.id = t->name;
	t->next = w->tasks;
	w->tasks = t;
	return TE_NONE;
}

/* Back from its spawn, not started (TE_SPAWN_FAILED): its backend says
 * why it is refused (or rejected); its result is made (RESULT follows),
 * or, where it says nothing, it is given back (GIVE_BACK). */
enum tevent spawn_refuse(struct worker *w, struct task *t)
{
	struct backend_refusal why;
	t->be->unspawned(w, t, &why);
	if (!why.status)
		return TE_GIVE_BACK; /* never started: nothing to say of it */
	result_unstarted(w, t, why.status, why.refusal, why.error);
	return TE_RESULT;
}

/* Its backend did not start it and blames it for nothing (the engine is
 * not there, the worker stops): back to new/ as it came, its attempt
 * unchanged; freed. */
void give_back(struct worker *w, struct task *t)
{
	int r = spool_requeue(w->sp, w->wdir, t->name, &t->meta);
	if (r < 0)
		logmsg("%s: cannot give back to new/: %s (left for recovery)", t->name, strerror(-r));
	task_free(w, t);
}

/* Is the task's memory or pids the built-in default of the policy (and
 * not its lane's own, nor the task's line)? Then it yields where nothing
 * can hold it. */
bool memory_builtin(const struct policy *pol, const struct task_spec *spec)
{
	return pol->builtin_memory && !pol->lane[spec->lane ? 1 : 0].memory_default &&
	       spec->line_memory <= 0;
}
