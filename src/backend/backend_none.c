/* backend_none.c - trusted batch use: no namespaces. The spawned child
 * runs kart-launch's steps itself (rlimits, capabilities, Landlock over
 * the host's paths, seccomp; confine.h), then execs the task, which is
 * the worker's own child: no launcher, no bwrap. Its work, tmp and
 * $KART_OUTDIR directories are spares used under their own names
 * (worker_scratch.c), and Landlock's system paths are held open (worker_held.c). */
#define _GNU_SOURCE
#include <signal.h>

#include "backend_local.h"

/* kart-launch's command line, run by the spawned child itself, which
 * then execs the task (confine.h); -1 when it cannot be read. */
static int job_direct(struct worker *w, struct task *t, struct local_start *s, struct spawn_job *j)
{
	if (confine_parse((int)j->argv.n, j->argv.v, &j->conf, s->err, sizeof s->err) < 0)
		return -1;
	/* Asked once: a kernel's Landlock ABI does not change. */
	static int abi;
	if (j->conf.ll_mode != LL_MODE_OFF && !abi)
		abi = ll_abi();
	if (j->conf.ll_mode != LL_MODE_OFF) {
		held_apply(w, &j->conf);
		held_task_paths(t, &j->conf, s->taskpath,
				(const char *[]){s->workdir, s->tmpdir, s->outhost});
	}
	j->is_direct = true;
	j->conf.bset_known = true;
	j->conf.bset = w->bset;
	j->direct = (struct run_direct){.c = &j->conf, .abi = abi};
	if (s->want_scmp) {
		j->direct.filter = &w->flt.fp_whole;
		/* Born under the outer half: only where nothing is left
		 * to do between the clone and the child's own steps (no
		 * v1 join, which needs a fork of its own). */
		/* (Not a task of another user with binds: their opener
		 * forks, which that filter is not made for. The worker's own
		 * user's are opened in the spawn thread.) */
		j->inherit = w->flt.inner.bpf && (!j->use_join || j->lj.rj.born_is_enough) &&
			     (!t->spec.n_binds || !j->use_bcred);
	}
	return 0;
}

static int none_prepare(struct worker *w, struct task *t, struct backend_start *b)
{
	__attribute__((cleanup(local_start_close))) struct local_start s = LOCAL_START_INIT(b);
	/* Spares under their own names (scratch_dir): no rename per
	 * directory into place and back. The child loads the filter from
	 * our memory: no descriptor to hand over. */
	if (local_limits(w, t, b) < 0 || local_outdir(w, t, &s, true) < 0 ||
	    local_workdirs_here(w, t, &s) < 0 || local_outdir_give(w, t, &s) < 0 ||
	    local_filter(w, t, &s, LOCAL_FILTER_MEMORY) < 0)
		return -1;
	/* No mounts: $KART_INPUTS is a directory of links. */
	int lr = t->spec.n_after ? dep_links(w, b->di, t->scr.dir[SCR_WORK], t->spec.n_after) : 0;
	if (lr < 0) {
		snprintf(t->errbuf, sizeof t->errbuf, "cannot link the inputs of after=: %s", strerror(-lr));
		return local_refuse(b, "sandbox_setup_failed", t->errbuf);
	}
	if (local_sandbox(w, t, &s, sandbox_launch) < 0)
		return -1;
	struct spawn_job *j = local_job(w, t, &s);
	j->cwd = xstrdup(s.workdir);
	j->pgroup = true; /* its tree is killed by its group where there is no leaf */
	if ((j->use_cred = b->as_user > 0))
		j->cred = b->cred;
	if (job_direct(w, t, &s, j) < 0) {
		spawn_job_free(j);
		t->job = NULL;
		return local_refuse_err(t, &s, "sandbox_setup_failed");
	}
	return 0;
}

static bool none_signal(struct worker *w, struct task *t, int sig)
{
	if (sig == SIGKILL) {
		local_kill(w, t);
		return true;
	}
	return local_term(w, t);
}

const struct backend backend_none = {
	.name = "none",
	.work = NULL, /* a spare of the claim directory's */
	.prepare = none_prepare,
	.spawn = local_spawn,
	.started = local_started,
	.unspawned = local_unspawned,
	.ready = local_ready,
	.signal = none_signal,
	.pause = local_pause,
	.reap = local_reap,
	.usage = local_usage,
};
