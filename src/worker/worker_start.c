/* worker_start.c - starting a claimed task: read again, the policy's
 * checks (whom it runs as, its limits), its scratch directories, the
 * seccomp filter and the sandbox's command line, then the job handed to
 * a spawn thread (start_claimed, step by step). */
#define _GNU_SOURCE
#include "worker_int.h"

static void builtin_soft(const struct policy *pol, const struct task_spec *spec, struct rl_host *rh)
{
	int l = spec->lane ? 1 : 0;
	rh->soft_memory = memory_builtin(pol, spec);
	rh->soft_pids = pol->builtin_pids && !pol->lane[l].pids_default && spec->line_pids <= 0;
}

/* The task's leaf, or else the rlimit fallback, as [limits] cgroup says.
 * A limit is never dropped: where neither can hold it, the task is
 * refused. Returns 0 to go on, -1 when the task was finished refused. */
static int task_limits(struct worker *w, struct task *t, uid_t run_uid)
{
	char cgerr[200], rlerr[160];
	/* Read once (sysconf reads /sys for it each time). */
	static long ncpu;
	if (!ncpu)
		ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	/* Uid 0 of the host is exempt from RLIMIT_NPROC. */
	struct rl_host rh = {.use_as = w->pol->rlimit_as, .nproc_binds = run_uid != 0,
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
		finish_refused(w, t, "cgroup_setup_failed", t->errbuf);
		return -1;
	}
	if (limits_fallback(&t->spec, &rh, &t->rl, rlerr, sizeof rlerr) < 0) {
		snprintf(t->errbuf, sizeof t->errbuf, "%.120s; no cgroup: %.120s", rlerr, cgerr);
		finish_refused(w, t, "cgroup_setup_failed", t->errbuf);
		return -1;
	}
	if (w->pol->cgroup != CGROUP_OFF)
		logmsg("%s: runs without a cgroup%s: %s", t->name,
		       t->rl.as || t->rl.nproc ? " (rlimits stand in)" : "", cgerr);
	return 0;
}

/* What the steps of start_claimed hand on to each other: whom the task
 * runs as, its paths on the host, and what its sandbox is given. */
struct start {
	const char *name;
	struct run_cred cred;
	int as_user; /* task_cred's: > 0 as the submitter, 0 as the worker */
	gid_t gid;   /* as_user: the submitter's, scratch_dir's to compare; else -1 */
	bool container, none, bounded, want_scmp;
	char workdir[PATH_MAX], taskpath[PATH_MAX], outhost[PATH_MAX];
	char tmpdir[PATH_MAX]; /* backend none alone */
	int sfd;               /* the seccomp filter handed to the sandbox, or -1 */
	struct dep_inputs *di; /* after=: the upstreams' outputs */
	struct strv argv, envp;
	int ifd; /* backend container: the policy's variables, or -1 */
	char err[256];
};

static void start_close(struct start *s)
{
	if (s->sfd >= 0)
		close(s->sfd);
}

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
		run_hook(w, id);
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
	t->cg_wd = -1;
	t->uniq_fd = steal_fd(ufd);
	t->scr_fd[SCR_WORK] = t->scr_fd[SCR_TMP] = t->scr_fd[SCR_OUT] = -1;
	t->fwd = (struct credfwd)CREDFWD_INIT;
	t->out_mfd = t->mv.src = t->mv.dst = -1;
	cg_files_init(&t->cgf);
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

/* Whom it runs as, and the limits that hold it (the policy's checks):
 * -1 when the task was finished refused. */
static int start_who(struct worker *w, struct task *t, struct start *s)
{
	const char *refusal = NULL;
	s->as_user = task_cred(w, t, &s->cred, &refusal);
	s->gid = s->as_user > 0 ? s->cred.gid : (gid_t)-1;
	if (s->as_user < 0) {
		finish_refused(w, t, refusal, t->errbuf);
		return -1;
	}
	/* Every task gets a leaf where the host has cgroups: it is what kills
	 * a daemonized grandchild for sure, and measures the task. Without
	 * one (cgroup = auto), rlimits stand in where they can, and a task
	 * without limits runs as sandbox.cgroup "none". */
	t->run_uid = s->as_user ? s->cred.uid : geteuid();
	/* Backend container: the engine applies the limits (its own
	 * cgroups); the CLI we run needs no leaf. */
	if (!s->container && task_limits(w, t, t->run_uid) < 0)
		return -1;
	return 0;
}

/* Its directories in the claim directory ($KART_OUTDIR, and its work
 * and tmp where the sandbox does not make them), owned by whom it runs
 * as: -1 when the task was finished refused. */
static int start_scratch(struct worker *w, struct task *t, struct start *s)
{
	const char *name = s->name;
	char outname[512];
	bool own_o = false, own_w = false, own_t = false;
	const struct run_cred *cred = &s->cred;
	/* No clean-up of scratch entries here: finish, re-queue and
	 * recovery remove them, the captures are truncated, and a leftover
	 * directory is removed by scratch_dir. */
	/* The capture files are made at the first byte (capture_file): a
	 * silent run allocates no inode for them. */
	/* Backend none runs in spares under their own names (scratch_dir):
	 * no rename per directory into place and back. */
	bool inplace = s->none;
	char *outdir = inplace ? t->scr[SCR_OUT] : outname;
	if ((!inplace && spool_name_scratch(outname, sizeof outname, name, SCRATCH_OUT) < 0) ||
	    scratch_dir(w, outdir, inplace, 0700, t->run_uid, s->gid, &own_o, &t->scr_ct[SCR_OUT],
			&t->scr_fd[SCR_OUT]) < 0 ||
	    pathfmt(s->taskpath, sizeof s->taskpath, "%s/cur/%s/%s", w->sp->path, w->id, name) < 0 ||
	    pathfmt(s->outhost, sizeof s->outhost, "%s/cur/%s/%s", w->sp->path, w->id, outdir) < 0 ||
	    (!inplace && pathfmt(s->workdir, sizeof s->workdir, "%s/cur/%s/.%s.work", w->sp->path, w->id, name) < 0)) {
		finish_refused(w, t, "sandbox_setup_failed",
			       "cannot prepare the task's output files in the claim directory");
		return -1;
	}
	if (s->container) {
		/* Its /work, bound into the container; /tmp is the engine's
		 * tmpfs. */
		char wd[512];
		if (spool_name_scratch(wd, sizeof wd, name, SCRATCH_WORK) < 0 ||
		    scratch_dir(w, wd, false, 0700, t->run_uid, s->gid, &own_w, NULL, NULL) < 0 ||
		    (s->as_user && !own_w &&
		     fchownat(w->wdir, wd, cred->uid, cred->gid, AT_SYMLINK_NOFOLLOW) < 0)) {
			finish_refused(w, t, "sandbox_setup_failed", "cannot create the work directory");
			return -1;
		}
	} else if (inplace) {
		/* A private TMPDIR too: the host's /tmp is everyone's. */
		const char *wd = t->scr[SCR_WORK], *td = t->scr[SCR_TMP];
		if (scratch_dir(w, t->scr[SCR_WORK], true, 0700, t->run_uid, s->gid, &own_w, &t->scr_ct[SCR_WORK],
				&t->scr_fd[SCR_WORK]) < 0 ||
		    scratch_dir(w, t->scr[SCR_TMP], true, 0700, t->run_uid, s->gid, &own_t, &t->scr_ct[SCR_TMP],
				&t->scr_fd[SCR_TMP]) < 0 ||
		    pathfmt(s->workdir, sizeof s->workdir, "%s/cur/%s/%s", w->sp->path, w->id, wd) < 0 ||
		    pathfmt(s->tmpdir, sizeof s->tmpdir, "%s/cur/%s/%s", w->sp->path, w->id, td) < 0 ||
		    (s->as_user && ((!own_w && fchownat(w->wdir, wd, cred->uid, cred->gid, AT_SYMLINK_NOFOLLOW) < 0) ||
				    (!own_t && fchownat(w->wdir, td, cred->uid, cred->gid, AT_SYMLINK_NOFOLLOW) < 0)))) {
			finish_refused(w, t, "sandbox_setup_failed", "cannot create the work directory");
			return -1;
		}
	}
	/* Under bwrap, a tmpfs of its own on it, bounded while the task
	 * runs (outdir.h), mounted by the spawn thread: the directory under
	 * it stays the worker's. Else $KART_OUTDIR is the submitter's to
	 * write; the worker moves it. */
	s->bounded = w->pol->backend == BACKEND_BWRAP && outdir_ns_ok(&w->ons);
	if (!s->bounded && s->as_user && !own_o &&
	    fchownat(w->wdir, outdir, cred->uid, cred->gid, AT_SYMLINK_NOFOLLOW) < 0) {
		snprintf(t->errbuf, sizeof t->errbuf, "cannot give $KART_OUTDIR to uid %u: %s",
			 (unsigned)cred->uid, strerror(errno));
		finish_refused(w, t, "sandbox_setup_failed", t->errbuf);
		return -1;
	}
	return 0;
}

/* The seccomp filter in the form the sandbox takes it: every task gets
 * it, and one that cannot be handed over refuses the task, which never
 * runs without it (-1: finished refused). */
static int start_filter(struct worker *w, struct task *t, struct start *s)
{
	/* Backend container: as a JSON profile, unless the policy says the
	 * runtime takes none. */
	s->want_scmp = !s->container || w->pol->container_seccomp;
	/* Backend none hands over no descriptor: the child loads the
	 * filter from our memory (no launcher). */
	bool want_fd = s->want_scmp && !s->none;
	s->sfd = !want_fd ? -1
		 : s->container ? (w->scmp_json ? memfd_sealed("kart-seccomp.json", w->scmp_json,
							       strlen(w->scmp_json))
						: -EINVAL)
		 : w->scmp.bpf ? seccomp_prog_fd(&w->scmp) : -EINVAL;
	if (s->want_scmp && (want_fd ? s->sfd < 0 : !w->scmp.bpf)) {
		snprintf(t->errbuf, sizeof t->errbuf, "the seccomp filter %s: %.180s",
			 w->scmp.bpf ? "cannot be handed to the sandbox" : "could not be built",
			 w->scmp.bpf ? strerror(-s->sfd) : w->scmp_err);
		finish_refused(w, t, "seccomp_failed", t->errbuf);
		return -1;
	}
	return 0;
}

/* The sandbox's command line and environment (sandbox.c), with what it
 * binds: the credential forwarder, after='s inputs, the policy's
 * variables in a sealed memfd (-1: finished refused). */
static int start_sandbox(struct worker *w, struct task *t, struct start *s)
{
	struct strv lopts = {0};
	char *input = NULL;
	gid_t run_gid = s->as_user ? s->cred.gid : getegid();
	t->rl.nofile = w->nofile_task;
	limits_launch_opts(&t->rl, &lopts);
	if (s->container)
		container_name(w->clabel, ++w->cseq, t->cname, sizeof t->cname);
	const struct acct *ha = acct_get(t->run_uid);
	if (credfwd_open(&t->fwd, w->pol, &t->spec, t->run_uid, run_gid, s->err, sizeof s->err) < 0) {
		strv_free(&lopts);
		finish_refused(w, t, "sandbox_setup_failed", s->err);
		return -1;
	}
	struct sandbox_req req = {.pol = w->pol, .spec = &t->spec, .task_path = s->taskpath,
				  .home = ha->found ? ha->home : NULL,
				  .seccomp = s->want_scmp,
				  .work_dir = s->workdir, .out_dir = s->outhost, .task_id = s->name,
				  .tmp_dir = s->none ? s->tmpdir : NULL,
				  .host_env = environ,
				  .attempt = t->meta.attempt, .launch_opts = lopts.v,
				  .container_name = t->cname, .container_label = w->clabel,
				  .run_uid = t->run_uid, .run_gid = run_gid,
				  .input = &input,
				  .cred_socket = t->fwd.path[0] ? t->fwd.path : NULL,
				  .inputs = s->di->in, .n_inputs = t->spec.n_after, .in_dir = s->di->in_dir};
	if (s->none && t->spec.n_after) {
		int lr = dep_links(w, s->di, t->scr[SCR_WORK], t->spec.n_after);
		if (lr < 0) {
			strv_free(&lopts);
			snprintf(t->errbuf, sizeof t->errbuf, "cannot link the inputs of after=: %s",
				 strerror(-lr));
			finish_refused(w, t, "sandbox_setup_failed", t->errbuf);
			return -1;
		}
	}
	int built = sandbox_build(&req, &s->argv, &s->envp, s->err, sizeof s->err);
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
		finish_refused(w, t, "sandbox_setup_failed", s->err);
		return -1;
	}
	return 0;
}

/* Backend none: kart-launch's command line, run by the spawned child
 * itself, which then execs the task (confine.h); -1 when it cannot be
 * read (the job is the caller's to free, the task to refuse). */
static int job_direct(struct worker *w, struct task *t, struct start *s, struct spawn_job *j)
{
	if (confine_parse((int)j->argv.n, j->argv.v, &j->conf, s->err, sizeof s->err) < 0)
		return -1;
	/* Asked once: a kernel's Landlock ABI does not change. */
	static int abi;
	if (j->conf.ll_mode != LL_MODE_OFF && !abi)
		abi = ll_abi();
	if (j->conf.ll_mode != LL_MODE_OFF) {
		held_apply(w, &j->conf);
		task_paths_held(t, &j->conf, s->taskpath,
				(const char *[]){s->workdir, s->tmpdir, s->outhost});
	}
	j->is_direct = true;
	j->conf.bset_known = true;
	j->conf.bset = w->bset;
	j->direct = (struct run_direct){.c = &j->conf, .abi = abi};
	if (s->want_scmp) {
		j->direct.filter = &w->fp_whole;
		/* Born under the outer half: only where nothing is left
		 * to do between the clone and the child's own steps (no
		 * v1 join, which needs a fork of its own). */
		/* (Not a task with binds: their opener forks, which that
		 * filter is not made for.) */
		j->inherit = w->scmp_inner.bpf && (!j->use_join || j->lj.rj.born_is_enough) &&
			     !t->spec.n_binds;
	}
	return 0;
}

/* The spawn thread's job: everything the child's set-up needs, so that
 * the thread touches nothing of the loop's (NULL: finished refused). */
static struct spawn_job *start_job(struct worker *w, struct task *t, struct start *s)
{
	struct spawn_job *j = xcalloc(1, sizeof *j);
	j->ifd = s->ifd;
	j->t = t;
	j->argv = s->argv;
	j->envp = s->envp;
	j->lj = (struct leaf_join){.rj = {.fn = join_leaf, .cgroup_fd = -1}, .leaf = &t->cg};
	j->lj.rj.arg = &j->lj;
	j->ufd_owned = !w->keep_fds;
	j->ufd = !t->cg.used ? -1 : j->ufd_owned ? cg_leaf_unified_fd(&t->cg) : cg_files_dir(&t->cg, &t->cgf);
	j->lj.rj.cgroup_fd = j->ufd >= 0 ? j->ufd : -1;
	/* Only a unified leaf (no v1 limits to join): birth in it is all. */
	j->lj.rj.born_is_enough = j->ufd >= 0 && !(t->cg.used & ~(1u << CG_UNIFIED));
	j->use_join = t->cg.used != 0;
	j->cap = t->spec.output ? t->spec.output : w->pol->output_default;
	j->cwd = s->none ? xstrdup(s->workdir) : NULL;
	/* The container CLI runs as the worker (it needs the engine's
	 * socket); the container runs as the submitter (--user). */
	j->pgroup = s->none || s->container;
	j->use_cred = s->as_user && !s->container;
	if (j->use_cred)
		j->cred = s->cred;
	j->sfd = steal_fd(&s->sfd);
	j->use_bcred = s->as_user > 0;
	if (j->use_bcred)
		j->bcred = s->cred;
	j->spool = w->sp->path;
	j->umask = t->spec.umask >= 0 ? t->spec.umask : 022;
	if ((j->outdir = s->bounded)) {
		j->ons = &w->ons;
		snprintf(j->outpath, sizeof j->outpath, "%s", s->outhost);
		j->obytes = w->pol->artifacts_max;
		j->ofiles = w->pol->artifacts_files;
		j->ouid = t->run_uid;
		j->ogid = s->as_user ? s->cred.gid : getegid();
		j->userns = w->ons.userns;
		j->mntns = w->ons.mntns;
	}
	/* The inputs' descriptors go with the job (bwrap binds them). */
	memcpy(j->in_fd, s->di->fd, (size_t)s->di->nfd * sizeof *s->di->fd);
	j->n_in_fd = s->di->nfd;
	s->di->nfd = 0;
	if (s->none && job_direct(w, t, s, j) < 0) {
		spawn_job_free(j);
		finish_refused(w, t, "sandbox_setup_failed", s->err);
		return NULL;
	}
	return j;
}

/* Handed to a spawn thread (the loop would sleep from the clone to the
 * child's exec): a job born under the outer filter to one that holds
 * it. */
static void start_spawn(struct worker *w, struct task *t, struct spawn_job *j, bool seccomp)
{
	t->seccomp = seccomp;
	t->job = j;
	task_event(w, t, TE_SPAWN);
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

/* The claim is in our directory: start it, step by step. A step that
 * refuses the task finishes it itself (finish_refused), and the start
 * ends there. */
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
	__attribute__((cleanup(start_close))) struct start s = {
		.name = name, .sfd = -1, .di = &di, .ifd = -1,
		.container = w->pol->backend == BACKEND_CONTAINER,
		.none = w->pol->backend == BACKEND_NONE};
	if (start_who(w, t, &s) < 0 || start_scratch(w, t, &s) < 0 || start_filter(w, t, &s) < 0 ||
	    start_sandbox(w, t, &s) < 0)
		return;
	struct spawn_job *j = start_job(w, t, &s);
	if (j)
		start_spawn(w, t, j, s.want_scmp);
}
