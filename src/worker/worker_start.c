/* worker_start.c - starting a claimed task: read again, the policy's
 * checks (whom it runs as), then its backend's prepare (its limits,
 * directories, filter and command line: src/backend/), and its spawn
 * (start_claimed, step by step). */
#define _GNU_SOURCE
#include <fcntl.h>

#include "worker_int.h"
#include "backend.h"

/* Looked at again in our directory, since it may have changed after it
 * was seen in new/: false when it does not start (given back, rejected,
 * or gone). */
static bool claim_look(struct worker *w, const char *name, struct inspect *ins)
{
	task_inspect_open(w->wdir, name, w->pol, ins);
	if (ins->kind == INSPECT_BUSY) {
		/* A writer opened it between our look and the claim: give it
		 * back and wait for its close. */
		struct claim_meta m = {.attempt = 1};
		_cleanup_close_ int fd = openat(w->wdir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0)
			(void)claim_meta_get(fd, name, &m);
		if (spool_requeue(w->sp, w->wdir, name, &m) < 0)
			logmsg("%s: cannot give back to new/: %s", name, strerror(errno));
		return false;
	}
	if (ins->kind == INSPECT_REJECT) {
		finish_unrun(w, name, "rejected", ins->error);
		return false;
	}
	/* Whom it runs as is decided here, at the claim, as in consider():
	 * USER:NAME runs as USER or not at all, whatever it waited for. */
	if (ins->kind == INSPECT_OK && w->sp->drop >= 0 && strchr(name, ':') &&
	    !spool_prefix_owner_ok(name, ins->uid)) {
		inspect_close(ins);
		finish_unrun(w, name, "rejected",
			     "the task came from the drop directory of another user than the one it "
			     "would run as: a task runs only as the user who dropped it");
		return false;
	}
	return ins->kind == INSPECT_OK;
}

/* `kart cancel` found it here just after our claim: it never runs, and
 * its result says so (true). */
static bool claim_cancelled(struct worker *w, const char *name)
{
	char creq[512];
	struct stat cst;
	if (spool_name_cancel(creq, sizeof creq, name) < 0 ||
	    fstatat(w->wdir, creq, &cst, AT_SYMLINK_NOFOLLOW) < 0)
		return false;
	char id[256];
	int r = spool_finish_unrun(w->sp, w->wdir, name, "cancelled",
				   "cancelled by kart cancel before it ran", w->id, id, sizeof id);
	if (r < 0)
		logmsg("%s: cannot write its result: %s", name, strerror(-r));
	else
		log_task("finished", id, "cancelled", -1, NULL);
	if (r == 0)
		hook_run(w, id);
	return true;
}

/* The task as the worker keeps it, from its inspected file: the
 * policy's defaults filled in, linked into w->tasks, every descriptor
 * -1. It holds ufd, its unique= key's lock. */
static struct task *task_new(struct worker *w, const char *name, struct inspect *ins, int *ufd,
			     int64_t arrived_ms)
{
	struct task *t = xcalloc(1, sizeof *t);
	t->name = xstrdup(name);
	t->spec = ins->spec;
	/* No timeout given: the policy's default, and never beyond its
	 * ceiling. */
	if (t->spec.timeout_s < 0)
		t->spec.timeout_s = w->pol->timeout_default_s;
	if (t->spec.timeout_s < 0 || (w->pol->timeout_max_s >= 0 && t->spec.timeout_s > w->pol->timeout_max_s))
		t->spec.timeout_s = w->pol->timeout_max_s;
	if (t->spec.kill_grace_s < 0)
		t->spec.kill_grace_s = w->pol->kill_grace_s;
	limits_apply_defaults(&t->spec, w->pol);
	t->be = w->be;
	t->engine_oom = -1;
	t->leaf.wd = -1;
	t->uniq_fd = steal_fd(ufd);
	t->scr.fd[SCR_WORK] = t->scr.fd[SCR_TMP] = t->scr.fd[SCR_OUT] = -1;
	t->fwd = (struct credfwd)CREDFWD_INIT;
	t->outdir.mfd = t->outdir.mv.src = t->outdir.mv.dst = -1;
	cg_files_init(&t->leaf.files);
	t->uid = ins->uid;
	t->run.out.file = t->run.err.file = -1;
	t->run.pidfd = t->run.status_pipe = t->run.out.pipe = t->run.err.pipe = -1;
	t->next = w->tasks;
	w->tasks = t;
	if (ins->fd >= 0) /* the task file, opened by task_inspect */
		(void)claim_meta_get(ins->fd, name, &t->meta);
	/* From here on it is the spool's record of the task: readable by its
	 * owner (and root) alone, like its output (and its env= values are
	 * the submitter's). */
	if (ins->fd >= 0 && !ins->recorded && (ins->mode & 077) && fchmod(ins->fd, ins->mode & 07700) < 0)
		logmsg("%s: cannot make the task file its submitter's alone: %s", name, strerror(errno));
	t->submitted_ms = t->meta.submitted_ms ? t->meta.submitted_ms : arrived_ms;
	t->started_ms = now_realtime_ms();
	return t;
}

/* Whom it runs as (the policy's checks): -1 when the task was finished
 * refused. */
static int start_who(struct worker *w, struct task *t, struct backend_start *s)
{
	const char *refusal = NULL;
	s->as_user = acct_task_cred(w, t, &s->cred, &refusal);
	s->gid = s->as_user > 0 ? s->cred.gid : (gid_t)-1;
	if (s->as_user < 0) {
		finish_refused(w, t, refusal, t->errbuf);
		return -1;
	}
	t->run_uid = s->as_user ? s->cred.uid : geteuid();
	return 0;
}

/* The claim is in our directory: start it, step by step. A step that
 * refuses the task finishes it (finish_refused), and the start ends
 * there. */
void start_claimed(struct worker *w, const char *name, int64_t arrived_ms)
{
	__attribute__((cleanup(inspect_close))) struct inspect ins;
	if (!claim_look(w, name, &ins) || claim_cancelled(w, name))
		return;
	/* after=: its upstreams' outputs, opened now (or it ends here). */
	__attribute__((cleanup(dep_inputs_free))) struct dep_inputs di = {.nfd = 0};
	if (ins.spec.n_after && deps_start(w, name, &ins, &di) < 0)
		return;
	_cleanup_close_ int ufd = -1;
	if (sched_claimed(w, name, &ins, &ufd))
		return;
	struct task *t = task_new(w, name, &ins, &ufd, arrived_ms);
	struct backend_start s = {.name = name, .di = &di};
	if (start_who(w, t, &s) < 0)
		return;
	if (t->be->prepare(w, t, &s) < 0) {
		finish_unstarted(w, t, s.why.status, s.why.refusal, s.why.error);
		return;
	}
	task_event(w, t, TE_SPAWN);
}

int start_adopted(struct worker *w, const char *name, int be, const char *run)
{
	__attribute__((cleanup(inspect_close))) struct inspect ins;
	task_inspect_open(w->wdir, name, w->pol, &ins);
	if (ins.kind != INSPECT_OK) {
		logmsg("%s: its run goes on, but the claim cannot be read again now (%s): looked at "
		       "again later", name, ins.kind == INSPECT_BUSY ? "open for writing" : ins.error);
		return -1;
	}
	__attribute__((cleanup(dep_inputs_free))) struct dep_inputs di = {.nfd = 0};
	int ufd = -1;
	struct task *t = task_new(w, name, &ins, &ufd, now_realtime_ms());
	t->be = backend_use(w, (enum backend_id)be);
	struct backend_start s = {.name = name, .di = &di, .adopt = run};
	if (start_who(w, t, &s) < 0)
		return 0;
	if (t->be->prepare(w, t, &s) < 0) {
		finish_unstarted(w, t, s.why.status, s.why.refusal, s.why.error);
		return 0;
	}
	logmsg("%s: its run goes on: followed again", name);
	task_event(w, t, TE_SPAWN);
	/* kart cancel while no worker was there: kept until it is found. */
	char creq[512];
	struct stat cst;
	if (spool_name_cancel(creq, sizeof creq, name) == 0 &&
	    fstatat(w->wdir, creq, &cst, AT_SYMLINK_NOFOLLOW) == 0)
		task_event(w, t, TE_CANCEL);
	return 0;
}
