/* backend_local.c - what the backends that run a task as a child of the
 * worker share (backend_local.h). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>

#include "backend_local.h"

void local_start_close(struct local_start *s)
{
	if (s->sfd >= 0)
		close(s->sfd);
	s->sfd = -1;
}

int local_refuse(struct backend_start *b, const char *refusal, const char *error)
{
	b->why = (struct backend_refusal){"refused", refusal, error};
	return -1;
}

int local_refuse_err(struct task *t, struct local_start *s, const char *refusal)
{
	snprintf(t->errbuf, sizeof t->errbuf, "%s", s->err);
	return local_refuse(s->b, refusal, t->errbuf);
}

/* ---- limits ---------------------------------------------------------------- */

static void builtin_soft(const struct policy *pol, const struct task_spec *spec, struct rl_host *rh)
{
	int l = spec->lane ? 1 : 0;
	rh->soft_memory = memory_builtin(pol, spec);
	rh->soft_pids = pol->builtin_pids && !pol->lane[l].pids_default && spec->line_pids <= 0;
}

/* Every task gets a leaf where the host has cgroups: it is what kills a
 * daemonized grandchild for sure, and measures the task. Without one
 * (cgroup = auto), rlimits stand in where they can, and a task without
 * limits runs as sandbox.cgroup "none". */
int local_limits(struct worker *w, struct task *t, struct backend_start *b)
{
	char cgerr[200], rlerr[160];
	/* Read once (sysconf reads /sys for it each time). */
	static long ncpu;
	if (!ncpu)
		ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	/* Uid 0 of the host is exempt from RLIMIT_NPROC. */
	struct rl_host rh = {.use_as = w->pol->rlimit_as, .nproc_binds = t->run_uid != 0,
			     .ncpu = ncpu > 0 ? (int)ncpu : 1};
	builtin_soft(w->pol, &t->spec, &rh);
	if (w->pol->cgroup == CGROUP_OFF) {
		snprintf(cgerr, sizeof cgerr, "cgroups are off in the policy");
	} else if (task_cgroup(w, t, cgerr, sizeof cgerr) == 0) {
		limits_always(&t->spec, &rh, &t->rl);
		return 0;
	}
	if (w->pol->cgroup == CGROUP_REQUIRE) {
		snprintf(t->errbuf, sizeof t->errbuf,
			 "the policy requires a cgroup for every task (cgroup = require): %.180s",
			 cgerr);
		return local_refuse(b, "cgroup_setup_failed", t->errbuf);
	}
	if (limits_fallback(&t->spec, &rh, &t->rl, rlerr, sizeof rlerr) < 0) {
		snprintf(t->errbuf, sizeof t->errbuf, "%.120s; no cgroup: %.120s", rlerr, cgerr);
		return local_refuse(b, "cgroup_setup_failed", t->errbuf);
	}
	if (w->pol->cgroup != CGROUP_OFF)
		logmsg("%s: runs without a cgroup%s: %s", t->name,
		       t->rl.as || t->rl.nproc ? " (rlimits stand in)" : "", cgerr);
	return 0;
}

/* ---- directories ------------------------------------------------------------ */

/* No clean-up of scratch entries here: finish, re-queue and recovery
 * remove them, the captures are truncated, and a leftover directory is
 * removed by scratch_dir. The capture files are made at the first byte
 * (capture_file): a silent run allocates no inode for them. */
int local_outdir(struct worker *w, struct task *t, struct local_start *s, bool here)
{
	const char *name = s->b->name;
	char *outdir = here ? t->scr.dir[SCR_OUT] : s->outname;
	if ((!here && spool_name_scratch(s->outname, sizeof s->outname, name, SCRATCH_OUT) < 0) ||
	    scratch_dir(w, outdir, here, 0700, t->run_uid, s->b->gid, &s->out_owned, &t->scr.ct[SCR_OUT],
			&t->scr.fd[SCR_OUT]) < 0 ||
	    pathfmt(s->taskpath, sizeof s->taskpath, "%s/cur/%s/%s", w->sp->path, w->id, name) < 0 ||
	    pathfmt(s->outhost, sizeof s->outhost, "%s/cur/%s/%s", w->sp->path, w->id, outdir) < 0 ||
	    (!here && pathfmt(s->workdir, sizeof s->workdir, "%s/cur/%s/.%s.work", w->sp->path, w->id, name) < 0))
		return local_refuse(s->b, "sandbox_setup_failed",
				    "cannot prepare the task's output files in the claim directory");
	if (here)
		snprintf(s->outname, sizeof s->outname, "%s", outdir);
	return 0;
}

int local_workdir(struct worker *w, struct task *t, struct local_start *s)
{
	char wd[512];
	bool owned = false;
	const struct run_cred *cred = &s->b->cred;
	if (spool_name_scratch(wd, sizeof wd, s->b->name, SCRATCH_WORK) < 0 ||
	    scratch_dir(w, wd, false, 0700, t->run_uid, s->b->gid, &owned, NULL, NULL) < 0 ||
	    (s->b->as_user && !owned &&
	     fchownat(w->wdir, wd, cred->uid, cred->gid, AT_SYMLINK_NOFOLLOW) < 0))
		return local_refuse(s->b, "sandbox_setup_failed", "cannot create the work directory");
	return 0;
}

/* A private TMPDIR too: the host's /tmp is everyone's. */
int local_workdirs_here(struct worker *w, struct task *t, struct local_start *s)
{
	const char *wd = t->scr.dir[SCR_WORK], *td = t->scr.dir[SCR_TMP];
	const struct run_cred *cred = &s->b->cred;
	bool own_w = false, own_t = false;
	if (scratch_dir(w, t->scr.dir[SCR_WORK], true, 0700, t->run_uid, s->b->gid, &own_w,
			&t->scr.ct[SCR_WORK], &t->scr.fd[SCR_WORK]) < 0 ||
	    scratch_dir(w, t->scr.dir[SCR_TMP], true, 0700, t->run_uid, s->b->gid, &own_t,
			&t->scr.ct[SCR_TMP], &t->scr.fd[SCR_TMP]) < 0 ||
	    pathfmt(s->workdir, sizeof s->workdir, "%s/cur/%s/%s", w->sp->path, w->id, wd) < 0 ||
	    pathfmt(s->tmpdir, sizeof s->tmpdir, "%s/cur/%s/%s", w->sp->path, w->id, td) < 0 ||
	    (s->b->as_user &&
	     ((!own_w && fchownat(w->wdir, wd, cred->uid, cred->gid, AT_SYMLINK_NOFOLLOW) < 0) ||
	      (!own_t && fchownat(w->wdir, td, cred->uid, cred->gid, AT_SYMLINK_NOFOLLOW) < 0))))
		return local_refuse(s->b, "sandbox_setup_failed", "cannot create the work directory");
	return 0;
}

int local_outdir_give(struct worker *w, struct task *t, struct local_start *s)
{
	const struct run_cred *cred = &s->b->cred;
	if (!s->bounded && s->b->as_user && !s->out_owned &&
	    fchownat(w->wdir, s->outname, cred->uid, cred->gid, AT_SYMLINK_NOFOLLOW) < 0) {
		snprintf(t->errbuf, sizeof t->errbuf, "cannot give $KART_OUTDIR to uid %u: %s",
			 (unsigned)cred->uid, strerror(errno));
		return local_refuse(s->b, "sandbox_setup_failed", t->errbuf);
	}
	return 0;
}

/* ---- the filter, the command line, the job ---------------------------------- */

int local_filter(struct worker *w, struct task *t, struct local_start *s, enum local_filter how)
{
	s->want_scmp = how != LOCAL_FILTER_OFF;
	bool want_fd = how == LOCAL_FILTER_FD || how == LOCAL_FILTER_JSON;
	s->sfd = how == LOCAL_FILTER_JSON
			 ? (w->flt.json ? memfd_sealed("kart-seccomp.json", w->flt.json, strlen(w->flt.json))
					 : -EINVAL)
		 : how == LOCAL_FILTER_FD ? (w->flt.whole.bpf ? seccomp_prog_fd(&w->flt.whole) : -EINVAL)
					  : -1;
	if (s->want_scmp && (want_fd ? s->sfd < 0 : !w->flt.whole.bpf)) {
		snprintf(t->errbuf, sizeof t->errbuf, "the seccomp filter %s: %.180s",
			 w->flt.whole.bpf ? "cannot be handed to the sandbox" : "could not be built",
			 w->flt.whole.bpf ? strerror(-s->sfd) : w->flt.err);
		return local_refuse(s->b, "seccomp_failed", t->errbuf);
	}
	t->seccomp = s->want_scmp;
	return 0;
}

int local_sandbox(struct worker *w, struct task *t, struct local_start *s, local_builder *build)
{
	struct strv lopts = {0};
	char *input = NULL;
	const struct backend_start *b = s->b;
	gid_t run_gid = b->as_user ? b->cred.gid : getegid();
	t->rl.nofile = w->fds.nofile_task;
	limits_launch_opts(&t->rl, &lopts);
	const struct acct *ha = acct_get(t->run_uid);
	if (credfwd_open(&t->fwd, w->pol, &t->spec, t->run_uid, run_gid, s->err, sizeof s->err) < 0) {
		strv_free(&lopts);
		return local_refuse_err(t, s, "sandbox_setup_failed");
	}
	struct sandbox_req req = {.pol = w->pol, .spec = &t->spec, .task_path = s->taskpath,
				  .home = ha->found ? ha->home : NULL,
				  .seccomp = s->want_scmp,
				  .work_dir = s->workdir, .out_dir = s->outhost, .task_id = b->name,
				  .tmp_dir = s->tmpdir[0] ? s->tmpdir : NULL,
				  .host_env = environ,
				  .attempt = t->meta.attempt, .launch_opts = lopts.v,
				  .container_name = s->container_name, .container_label = s->container_label,
				  .run_uid = t->run_uid, .run_gid = run_gid,
				  .input = &input,
				  .cred_socket = t->fwd.path[0] ? t->fwd.path : NULL,
				  .inputs = b->di->in, .n_inputs = t->spec.n_after, .in_dir = b->di->in_dir,
				  .mask = s->mask};
	int built = build(&req, &s->argv, &s->envp, s->err, sizeof s->err);
	strv_free(&lopts);
	/* The policy's variables, for the container's shell to read: in
	 * a sealed memfd, never on disk. */
	s->ifd = -1;
	if (built == 0 && input) {
		size_t il = strlen(input);
		s->ifd = memfd_sealed("kart-env", input, il);
		explicit_bzero(input, il);
		if (s->ifd < 0) {
			built = -1;
			snprintf(s->err, sizeof s->err, "cannot pass the policy's variables: %s",
				 strerror(-s->ifd));
		}
	}
	free(input);
	const char *home = sandbox_home(&req);
	snprintf(t->home, sizeof t->home, "%s", home ? home : "");
	if (built < 0) {
		strv_free(&s->argv);
		strv_free(&s->envp);
		return local_refuse_err(t, s, "sandbox_setup_failed");
	}
	return 0;
}

struct spawn_job *local_job(struct worker *w, struct task *t, struct local_start *s)
{
	const struct backend_start *b = s->b;
	struct spawn_job *j = xcalloc(1, sizeof *j);
	j->ifd = s->ifd;
	j->t = t;
	j->argv = s->argv;
	j->envp = s->envp;
	j->lj = (struct leaf_join){.rj = {.fn = join_leaf, .cgroup_fd = -1}, .leaf = &t->leaf.cg};
	j->lj.rj.arg = &j->lj;
	j->ufd_owned = !w->fds.keep;
	j->ufd = !t->leaf.cg.used ? -1 : j->ufd_owned ? cg_leaf_unified_fd(&t->leaf.cg) : cg_files_dir(&t->leaf.cg, &t->leaf.files);
	j->lj.rj.cgroup_fd = j->ufd >= 0 ? j->ufd : -1;
	leaf_join_setup(t, &j->lj, j->ufd);
	j->use_join = t->leaf.cg.used != 0;
	j->cap = t->spec.output ? t->spec.output : w->pol->output_default;
	j->sfd = steal_fd(&s->sfd);
	j->use_bcred = b->as_user > 0;
	if (j->use_bcred)
		j->bcred = b->cred;
	j->spool = w->sp->path;
	j->spool_masked = s->mask != NULL;
	j->umask = t->spec.umask >= 0 ? t->spec.umask : 022;
	if ((j->outdir = s->bounded)) {
		j->ons = &w->ons;
		snprintf(j->outpath, sizeof j->outpath, "%s", s->outhost);
		j->obytes = w->pol->artifacts_max;
		j->ofiles = w->pol->artifacts_files;
		j->ouid = t->run_uid;
		j->ogid = b->as_user ? b->cred.gid : getegid();
		j->userns = w->ons.userns;
		j->mntns = w->ons.mntns;
	}
	/* The inputs' descriptors go with the job (bwrap binds them). */
	memcpy(j->in_fd, b->di->fd, (size_t)b->di->nfd * sizeof *b->di->fd);
	j->n_in_fd = b->di->nfd;
	b->di->nfd = 0;
	t->job = j;
	return j;
}

/* ---- the run ------------------------------------------------------------------ */

/* Handed to a spawn thread (the loop would sleep from the clone to the
 * child's exec): a job born under the outer filter to one that holds
 * it. */
void local_spawn(struct worker *w, struct task *t)
{
	struct spawn_job *j = t->job;
	if (j->inherit && !w->spawner.nfiltered)
		spawner_start_filtered(w);
	bool f = j->inherit && w->spawner.nfiltered;
	pthread_mutex_lock(&w->spawner.h.mu);
	struct spawn_job **tail = f ? &w->spawner.todo_filtered : &w->spawner.todo;
	while (*tail)
		tail = &(*tail)->next;
	*tail = j;
	pthread_mutex_unlock(&w->spawner.h.mu);
	pthread_cond_signal(f ? &w->spawner.cv_filtered : &w->spawner.h.cv); /* as in publish */
}

/* Back from a spawn thread, its process running: its pidfd and pipes
 * watched, its kind's forwarder started (tied to the run's pidfd). */
void local_started(struct worker *w, struct task *t)
{
	spawn_job_free(t->job);
	t->job = NULL;
	t->s_pid = (struct src){SRC_BACKEND, t, t->be};
	t->s_out = (struct src){SRC_BACKEND, t, t->be};
	t->s_err = (struct src){SRC_BACKEND, t, t->be};
	ep_add(w, t->run.pidfd, &t->s_pid);
	ep_add(w, t->run.out.pipe, &t->s_out);
	ep_add(w, t->run.err.pipe, &t->s_err);
	int r = credfwd_start(&t->fwd, t->run.pidfd, environ);
	if (r < 0)
		logmsg("%s: cannot start its kind's credential forwarder: %s", t->name, strerror(-r));
}

/* Back from a spawn thread, not started: refused, or rejected where a
 * bind asked for what its submitter may not have. */
void local_unspawned(struct worker *w, struct task *t, struct backend_refusal *why)
{
	struct spawn_job *j = t->job;
	t->job = NULL;
	/* run_spawn_join cleared the run: no capture file is ours. */
	t->run.out.file = t->run.err.file = -1;
	int r = j->rc;
	int join_err = j->lj.rj.err;
	int bind_rc = j->bind_rc;
	if (bind_rc < 0)
		snprintf(t->errbuf, sizeof t->errbuf, "%s", j->bind_err);
	if (j->outdir && (bind_rc == -EPIPE || bind_rc == -ECONNRESET) && outdir_ns_ok(&w->ons)) {
		logmsg("the $KART_OUTDIR holder is gone: from now on $KART_OUTDIR is measured when "
		       "each task ends");
		outdir_ns_lost(&w->ons);
	}
	spawn_job_free(j);
	if (bind_rc == -EACCES) {
		/* A path its submitter may not have: the task file asked
		 * for what it cannot get, as with a ceiling. */
		*why = (struct backend_refusal){"rejected", NULL, t->errbuf};
	} else if (bind_rc < 0) {
		*why = (struct backend_refusal){"refused", "sandbox_setup_failed", t->errbuf};
	} else if (r == -ECANCELED) {
		snprintf(t->errbuf, sizeof t->errbuf,
			 "the task's process could not be put in its cgroup: %s", strerror(-join_err));
		*why = (struct backend_refusal){"refused", "cgroup_join_failed", t->errbuf};
	} else
		*why = (struct backend_refusal){"refused", "sandbox_setup_failed",
						"cannot start the task's process"};
}

/* Its pidfd (the run ended), or an output pipe ready. */
bool local_ready(struct worker *w, struct src *s, uint32_t events)
{
	struct task *t = s->t;
	if (s == &t->s_pid)
		return true;
	if (s == &t->s_out)
		on_capture(w, t, &t->run.out, SCRATCH_STDOUT, events);
	else
		on_capture(w, t, &t->run.err, SCRATCH_STDERR, events);
	return false;
}

/* The leaf lists what left the process group too; once is enough (a
 * shell's trap would run twice). */
bool local_term(struct worker *w, struct task *t)
{
	(void)w;
	if (t->leaf.cg.mode == CG_MODE_NONE || cg_leaf_signal(&t->leaf.cg, SIGTERM) <= 0)
		run_term(&t->run);
	return true;
}

void local_kill(struct worker *w, struct task *t)
{
	(void)w;
	run_kill(&t->run);
}

int local_pause(struct worker *w, struct task *t, bool on)
{
	(void)w;
	if (on)
		return wctl_freeze(&t->leaf.cg, &t->run);
	wctl_thaw(t->pause.how, &t->leaf.cg, &t->run);
	return 0;
}

/* Reaped: what is still in the pipes is read by run_collect. */
void local_reap(struct worker *w, struct task *t)
{
	ep_del(w, t->run.pidfd);
	ep_del(w, t->run.out.pipe);
	ep_del(w, t->run.err.pipe);
	capture_file(w, t, &t->run.out, SCRATCH_STDOUT);
	capture_file(w, t, &t->run.err, SCRATCH_STDERR);
	if (run_collect(&t->run, &t->rend) < 0)
		logmsg("%s: wait: %s", t->name, strerror(errno));
	run_close(&t->run);
}

/* CPU and memory: the leaf counts the whole tree, reaped by anyone or
 * not, and wins where it measured; else what the task's parent saw of
 * its tree (run.h's run_use: kart-launch's report, or a direct child's
 * wait4). I/O is the parent's always: a cgroup charges a buffered write
 * when it is written back, after the run (v2), or to no group (v1). */
_Static_assert((int)CG_PSI__N == (int)PSI__N, "the pressure totals, in one order");
void local_usage(const struct task *t, struct backend_usage *u)
{
	const struct run_use *p = &t->rend.use;
	const struct cg_usage *c = &t->leaf.use;
	bool leaf = t->leaf.cg.mode != CG_MODE_NONE;
	backend_usage_init(u);
	backend_usage_from_run(u, p);
	if (leaf && c->cpu_user_us >= 0 && c->cpu_system_us >= 0) {
		u->cpu_user_ms = c->cpu_user_us / 1000;
		u->cpu_system_ms = c->cpu_system_us / 1000;
		u->by[UF_CPU] = "cgroup";
	}
	if (leaf && c->memory_peak >= 0) {
		u->memory_peak = c->memory_peak;
		u->by[UF_MEMORY] = "cgroup";
	}
	if (leaf && c->pids_peak >= 0) {
		u->pids_peak = c->pids_peak;
		u->by[UF_PIDS] = "cgroup";
	}
	for (int i = 0; leaf && i < PSI__N; i++)
		if ((u->psi_us[i] = c->pressure[i]) >= 0)
			u->by[UF_PRESSURE] = "cgroup";
	const char *unreported = "kart-launch did not report what the task used (the sandbox "
				 "was killed before the task ended)";
	if (!u->by[UF_CPU])
		u->why[UF_CPU] = leaf ? "its cgroup leaf counted no CPU time" : unreported;
	if (!u->by[UF_MEMORY])
		u->why[UF_MEMORY] = leaf ? "its cgroup leaf kept no memory peak" : unreported;
	if (!u->by[UF_IO])
		u->why[UF_IO] = !p->by ? unreported
				: "the kernel's per-task I/O accounting could not be read "
				  "(/proc/PID/io; CONFIG_TASK_IO_ACCOUNTING)";
	if (!u->by[UF_PIDS])
		u->why[UF_PIDS] = !leaf ? "no cgroup leaf (only a cgroup counts processes at once)"
				  : "its cgroup leaf has no pids.peak (the kernel keeps none)";
	if (!u->by[UF_PRESSURE])
		u->why[UF_PRESSURE] =
			!leaf ? "no cgroup leaf (pressure stall information is a cgroup2 directory's)"
			: !c->unified
				? "its cgroup leaf has no cgroup2 directory, where pressure stall "
				  "information is kept"
				: "the kernel keeps no pressure stall information (CONFIG_PSI, psi=0)";
}
