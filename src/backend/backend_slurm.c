/* backend_slurm.c - each task a job of a Slurm cluster: the worker
 * claims it as always, and its run is a batch job that runs kart-launch
 * --job on a node, in the same bwrap sandbox, seccomp filter and
 * Landlock ruleset a local run gets, from a stage directory the worker
 * and the nodes share ([slurm] stage); the spool stays on the worker's
 * disk. Slurm holds the limits (memory= is --mem, cpu= --cpus-per-task,
 * timeout= --time and --signal; pids= is kart-launch's RLIMIT_NPROC),
 * kart keeps its own clock for the timeout and its own retries.
 *
 * The job is the claim's: its name and stage are written into the claim
 * (claim_meta.run) before it can exist, and its id once known, so that
 * a worker that finds the claim after a crash (this one again, or a
 * peer) follows the job instead of starting the task again; a run goes
 * on when the worker stops (struct backend's detach). slurm_thread.c
 * does everything that blocks; this is the loop's side. */
#define _GNU_SOURCE
#include "slurm.h"

#include <ctype.h>
#include <sys/inotify.h>
#include <sys/random.h>

#include "launch_job.h"

extern const struct backend backend_slurm;

/* ---- the stage and the job's words -------------------------------------------- */

/* The spool's directory in the stage: kart-HASH of this host and the
 * spool's path, the same for every worker of the spool. */
static void stage_key(const char *spool, char *key, size_t len)
{
	char host[256] = "", real[PATH_MAX];
	(void)gethostname(host, sizeof host - 1);
	if (!realpath(spool, real))
		snprintf(real, sizeof real, "%s", spool);
	uint64_t h = 1469598103934665603ULL;
	for (const char *s[] = {host, ":", real}, **p = s; p < s + 3; p++)
		for (const unsigned char *c = (const unsigned char *)*p; *c; c++)
			h = (h ^ *c) * 1099511628211ULL;
	snprintf(key, len, "kart-%016llx", (unsigned long long)h);
}

/* 'text' for a POSIX shell. */
static void sh_quote(struct strv *out, const char *text)
{
	size_t n = 2;
	for (const char *c = text; *c; c++)
		n += *c == '\'' ? 4 : 1;
	char *q = xmalloc(n + 1), *o = q;
	*o++ = '\'';
	for (const char *c = text; *c; c++) {
		if (*c == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else
			*o++ = *c;
	}
	*o++ = '\'';
	*o = '\0';
	strv_add(out, q);
	free(q);
}

/* kart-RANDOM-NAME: found again by name after a crash, unique in the
 * cluster (RANDOM), and the claim's name where it is a plain one. */
static void job_name(const char *name, char *out, size_t len)
{
	unsigned char r[6];
	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
		for (size_t i = 0; i < sizeof r; i++)
			r[i] = (unsigned char)(now_mono_ms() >> (i * 3));
	char tail[41];
	size_t k = 0;
	for (const char *c = name; *c && k < sizeof tail - 1; c++)
		tail[k++] = isalnum((unsigned char)*c) || *c == '.' || *c == '_' || *c == '-' ? *c : '_';
	tail[k] = '\0';
	snprintf(out, len, "kart-%02x%02x%02x%02x%02x%02x-%s", r[0], r[1], r[2], r[3], r[4], r[5], tail);
}

/* The launch file's records (launch_job.c): NUL-separated words. */
static void rec(struct strv *l, const char *a, const char *b, const char *c, const char *d)
{
	const char *w[] = {a, b, c, d};
	for (size_t i = 0; i < ARRAY_SIZE(w) && w[i]; i++)
		strv_add(l, w[i]);
}

static char *words_join(const struct strv *l, size_t *len)
{
	size_t n = 0;
	for (size_t i = 0; i < l->n; i++)
		n += strlen(l->v[i]) + 1;
	char *t = xmalloc(n + 1), *o = t;
	for (size_t i = 0; i < l->n; i++) {
		size_t k = strlen(l->v[i]) + 1;
		memcpy(o, l->v[i], k);
		o += k;
	}
	*len = n;
	return t;
}

/* sbatch's options and the batch script, from the task's limits. */
static void job_args(struct worker *w, struct task *t, struct sjob *j)
{
	const struct policy *pol = w->pol;
	struct strv *a = &j->args;
	strv_add(a, "--parsable");
	strv_addf(a, "--job-name=%s", j->jname);
	strv_addf(a, "--output=%s/" JOB_OWN "/slurm.out", j->dir);
	strv_addf(a, "--chdir=%s/" JOB_OWN, j->dir);
	/* kart re-queues and retries, counting the attempt itself. */
	strv_add(a, "--no-requeue");
	strv_add(a, "--nodes=1");
	strv_add(a, "--ntasks=1");
	if (j->as_user) {
		/* Without --gid the job runs with group 0. */
		strv_addf(a, "--uid=%u", (unsigned)j->cred.uid);
		strv_addf(a, "--gid=%u", (unsigned)j->cred.gid);
	}
	const struct task_spec *s = &t->spec;
	if (s->memory)
		strv_addf(a, "--mem=%lluM", (unsigned long long)((s->memory + (1 << 20) - 1) >> 20));
	if (s->cpu_milli)
		strv_addf(a, "--cpus-per-task=%u", (s->cpu_milli + 999) / 1000);
	if (s->timeout_s > 0) {
		/* kart's own clock TERMs it at timeout= exactly and KILLs it
		 * the kill grace later; Slurm's, in minutes and checked about
		 * every 30 s, only if the worker is gone: USR1 (the launcher
		 * takes it for the time limit) no earlier than timeout= (it
		 * may come up to 60 s before its mark), the limit the grace
		 * later at least. */
		int64_t g = s->kill_grace_s >= 0 ? s->kill_grace_s : pol->kill_grace_s;
		int64_t min = (s->timeout_s + g + 59) / 60 + 1;
		int64_t ahead = min * 60 - s->timeout_s - 60;
		strv_addf(a, "--time=%lld", (long long)min);
		strv_addf(a, "--signal=B:USR1@%lld", (long long)(ahead > 0 ? ahead : 1));
	}
	const char *part = pol->slurm_partition[s->lane ? 1 : 0][0] ? pol->slurm_partition[s->lane ? 1 : 0]
								      : pol->slurm_partition[1];
	if (part[0])
		strv_addf(a, "--partition=%s", part);
	if (pol->slurm_account[0])
		strv_addf(a, "--account=%s", pol->slurm_account);
	struct strv sc = {0};
	strv_add(&sc, "#!/bin/sh\n# kart: its launcher builds the task's sandbox from the stage\nexec ");
	sh_quote(&sc, pol->launcher);
	strv_add(&sc, " ");
	char opt[PATH_MAX + 8];
	snprintf(opt, sizeof opt, "--job=%s", j->dir);
	sh_quote(&sc, opt);
	/* Who must own the stage: the worker (the script is Slurm's copy,
	 * which the submitter cannot change). */
	strv_addf(&sc, " --stage-owner=%u", (unsigned)geteuid());
	strv_add(&sc, " \"--job-id=$SLURM_JOB_ID\" \"--node=$SLURMD_NODENAME\" "
		      "--env=SLURM_JOB_ID --env=SLURMD_NODENAME\n");
	size_t n = 0;
	for (size_t i = 0; i < sc.n; i++)
		n += strlen(sc.v[i]);
	j->script = xmalloc(n + 1);
	j->script[0] = '\0';
	for (size_t i = 0; i < sc.n; i++)
		strcat(j->script, sc.v[i]);
	strv_free(&sc);
}

static struct sjob *sjob_new(struct task *t)
{
	struct sjob *j = xcalloc(1, sizeof *j);
	j->t = t;
	j->wstatus = -1;
	j->out_fd = j->err_fd = -1;
	j->peak = j->cpu_user_us = j->cpu_sys_us = -1;
	j->max_rss = j->total_cpu_ms = j->elapsed_s = j->energy_j = -1;
	for (int i = 0; i < TASK_AFTER_MAX; i++)
		j->in[i].out_fd = j->in[i].stdout_fd = -1;
	snprintf(j->name, sizeof j->name, "%s", t->name);
	j->owner = t->uid;
	j->claimed_ms = now_realtime_ms();
	return j;
}

void sjob_free(struct sjob *j)
{
	if (!j)
		return;
	if (j->iwd > 0 && slurm.ifd >= 0)
		(void)inotify_rm_watch(slurm.ifd, j->iwd);
	strv_free(&j->args);
	strv_free(&j->reals);
	free(j->script);
	free(j->launch);
	free(j->filter);
	free(j->section);
	for (int i = 0; i < j->n_in; i++) {
		if (j->in[i].out_fd >= 0)
			close(j->in[i].out_fd);
		if (j->in[i].stdout_fd >= 0)
			close(j->in[i].stdout_fd);
	}
	if (j->out_fd >= 0)
		close(j->out_fd);
	if (j->err_fd >= 0)
		close(j->err_fd);
	free(j);
}

/* ---- the worker's life ---------------------------------------------------------- */

static void slurm_start(struct worker *w)
{
	const struct policy *pol = w->pol;
	slurm.pol = pol;
	snprintf(slurm.bin, sizeof slurm.bin, "%s", pol->slurm_bin);
	stage_key(w->sp->path, slurm.key, sizeof slurm.key);
	if (pol->slurm_stage[0] &&
	    pathfmt(slurm.stage_key, sizeof slurm.stage_key, "%s/%s", pol->slurm_stage, slurm.key) == 0) {
		/* The worker's own: no one else makes a name in it. */
		struct stat st;
		if (mkdir(slurm.stage_key, 0755) < 0 && errno != EEXIST)
			logmsg("slurm: cannot make %s: %s", slurm.stage_key, strerror(errno));
		else if (lstat(slurm.stage_key, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
			 (st.st_mode & 022))
			logmsg("slurm: %s is not this worker's alone (a directory of uid %u, not writable by "
			       "others): every task will be refused until it is",
			       slurm.stage_key, (unsigned)geteuid());
	}
	/* Asked once: where there is no slurmdbd, no result waits for it. */
	char err[512];
	char *const sa[] = {"sacct", "-n", "-X", "-j", "1", "-o", "JobID", NULL};
	int rc = slurm_cmd(slurm.bin, sa, NULL, NULL, 0, err, sizeof err, 30000);
	slurm.accounting = rc == 0 || !strstr(err, "accounting storage is disabled");
	/* A note of this worker's last life (killed while stalled): this one
	 * writes its own when it stalls. */
	(void)unlinkat(w->wdir, WCTL_STALLED, 0);
	slurm.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (slurm.efd < 0)
		die("eventfd: %s", strerror(errno));
	slurm.src = (struct src){SRC_BACKEND, NULL, &backend_slurm};
	ep_add(w, slurm.efd, &slurm.src);
	slurm_thread_start(w);
	logmsg("slurm: jobs staged in %s%s", slurm.stage_key[0] ? slurm.stage_key : "(no [slurm] stage)",
	       slurm.accounting ? "" : "; no accounting (sacct): results have no receipt");
}

static void slurm_stop(struct worker *w)
{
	slurm_thread_stop();
	ep_del(w, slurm.efd);
	close(slurm.efd);
	slurm.efd = -1;
	(void)unlinkat(w->wdir, WCTL_STALLED, 0);
}

static void slurm_stopping(struct worker *w)
{
	(void)w;
	pthread_mutex_lock(&slurm.mu);
	slurm.stopping = true;
	slurm_kick();
	pthread_mutex_unlock(&slurm.mu);
}

/* A dead worker's claims with a job of ours: moved into this worker's
 * directory and followed from here (not re-queued: the job may run, or
 * have run). Without a stage to follow them from, they stay. */
static int slurm_sweep(struct worker *w, const char *peer, bool started)
{
	(void)started;
	if (strcmp(peer, w->id) == 0)
		return 0;
	_cleanup_close_ int pd = openat(w->sp->cur, peer, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct strv names = {0};
	if (pd < 0 || dir_names(pd, ".", &names) < 0)
		return 0;
	int busy = 0;
	for (size_t i = 0; i < names.n; i++) {
		const char *n = names.v[i];
		_cleanup_close_ int fd = openat(pd, n, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		struct claim_meta m;
		if (fd < 0 || claim_meta_get(fd, n, &m) < 0 || strncmp(m.run, "slurm ", 6) || m.id[0])
			continue;
		if (!w->pol->slurm_stage[0]) {
			logmsg("cur/%s/%s has a Slurm job, which this worker (no [slurm] stage) cannot "
			       "follow: left for a worker with backend slurm",
			       peer, n);
			busy++;
			continue;
		}
		if (renameat2(pd, n, w->wdir, n, RENAME_NOREPLACE) < 0) {
			logmsg("cur/%s/%s: cannot take it over: %s", peer, n, strerror(errno));
			busy++;
			continue;
		}
		/* kart cancel's and kart pause's requests come with it. */
		static const enum scratch_file sf[] = {SCRATCH_CANCEL, SCRATCH_PAUSE};
		for (size_t k = 0; k < ARRAY_SIZE(sf); k++) {
			char s[512];
			if (spool_name_scratch(s, sizeof s, n, sf[k]) == 0)
				(void)renameat(pd, s, w->wdir, s);
		}
		logmsg("%s: its Slurm job (%s) was worker %s's, which died: followed from here", n,
		       m.run + 6, peer);
		recover_adopt(w, n);
	}
	strv_free(&names);
	return busy ? -EBUSY : 0;
}

/* What the thread learnt, for the loop: taken whole under the lock, then
 * each task's events, in the order they happened. */
static bool slurm_ready(struct worker *w, struct src *s, uint32_t events)
{
	(void)w;
	(void)s;
	(void)events;
	uint64_t x;
	(void)!read(slurm.efd, &x, sizeof x);
	/* The events are fired from the tick (backend.h), at once. */
	return false;
}

static int64_t slurm_next_mono(struct worker *w)
{
	(void)w;
	pthread_mutex_lock(&slurm.mu);
	bool now = slurm.back || slurm.dead || !slurm.stalled_told;
	pthread_mutex_unlock(&slurm.mu);
	return now ? now_mono_ms() : 0;
}

/* cur/W/.stalled: why jobs cannot be submitted or watched now, for kart
 * status and kart doctor; gone once they can. */
static void stalled_note(struct worker *w, const char *why, int64_t since_ms)
{
	if (!why[0]) {
		(void)unlinkat(w->wdir, WCTL_STALLED, 0);
		logmsg("slurm: answering again");
		return;
	}
	char since[32], text[700];
	fmt_rfc3339_ms(since_ms, since);
	int n = snprintf(text, sizeof text, "%s (since %s)\n", why, since);
	char tmp[64];
	snprintf(tmp, sizeof tmp, "%s.%d", WCTL_STALLED, (int)getpid());
	int fd = openat(w->wdir, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd >= 0 && write_all(fd, text, (size_t)n) == 0 && close(fd) == 0)
		(void)renameat(w->wdir, tmp, w->wdir, WCTL_STALLED);
	else if (fd >= 0)
		close(fd);
	logmsg("slurm: %s: tasks wait, nothing is blamed on them", why);
}

static void slurm_tick(struct worker *w, int64_t now)
{
	(void)now;
	struct fired {
		struct sjob *j;
		unsigned bits;
	} *v = NULL;
	size_t n = 0, cap = 0;
	char why[512];
	int64_t since = 0;
	bool note = false;
	pthread_mutex_lock(&slurm.mu);
	for (struct sjob *j = slurm.back; j; j = j->back_next) {
		if (n == cap)
			v = xrealloc(v, (cap = cap ? cap * 2 : 16) * sizeof *v);
		v[n++] = (struct fired){j, j->back};
		j->back = 0;
		j->queued_back = false;
	}
	slurm.back = NULL;
	slurm.back_tail = &slurm.back;
	if (!slurm.stalled_told) {
		note = true;
		slurm.stalled_told = true;
		snprintf(why, sizeof why, "%s", slurm.stalled);
		since = slurm.stalled_ms;
	}
	pthread_mutex_unlock(&slurm.mu);
	if (note)
		stalled_note(w, why, since);
	for (size_t i = 0; i < n; i++) {
		struct sjob *j = v[i].j;
		struct task *t = j->t;
		unsigned b = v[i].bits;
		if (!t)
			continue;
		if (b & (1u << SB_UNSPAWNED)) {
			task_event(w, t, TE_SPAWN_FAILED);
			continue;
		}
		if (b & (1u << SB_SUBMITTED))
			task_event(w, t, TE_SPAWNED);
		/* The task may be gone (detached at a stop): its job stays
		 * until the end of the tick, on the dead list. */
		if (j->t != t)
			continue;
		if (b & (1u << SB_BEGAN)) {
			int64_t nowm = now_mono_ms();
			task_run_began(w, t, j->began_mono, now_realtime_ms() - (nowm - j->began_mono));
		}
		if (b & (1u << SB_ENDED))
			task_event(w, t, TE_EXIT);
	}
	free(v);
	pthread_mutex_lock(&slurm.mu);
	struct sjob *dead = slurm.dead;
	slurm.dead = NULL;
	pthread_mutex_unlock(&slurm.mu);
	for (struct sjob *j = dead, *nx; j; j = nx) {
		nx = j->next;
		sjob_free(j);
	}
}

/* ---- a task's run -------------------------------------------------------------- */

static int refuse(struct backend_start *b, struct task *t, const char *refusal, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int refuse(struct backend_start *b, struct task *t, const char *refusal, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(t->errbuf, sizeof t->errbuf, fmt, ap);
	va_end(ap);
	return local_refuse(b, refusal, t->errbuf);
}

/* The sandbox's command line as bwrap's backend builds it, the stage's
 * paths for the claim directory's, into the launch file: the descriptors
 * bwrap takes (the filter, the binds, after='s inputs) are opened by
 * kart-launch --job on the node, as the submitter. */
static int launch_text(struct worker *w, struct task *t, struct backend_start *b, struct sjob *j)
{
	char taskp[PATH_MAX], outp[PATH_MAX], err[256];
	struct strv lopts = {0}, argv = {0}, envp = {0}, l = {0};
	char *input = NULL;
	if (pathfmt(taskp, sizeof taskp, "%s/" JOB_TASK, j->dir) < 0 ||
	    pathfmt(outp, sizeof outp, "%s/" JOB_OUT, j->dir) < 0)
		return refuse(b, t, "sandbox_setup_failed", "the stage's path is too long");
	/* Its limits: Slurm's cgroup holds memory and cpus; pids= is an
	 * rlimit in the sandbox's user namespace (rlimits.h). */
	struct rl_host rh = {.nproc_binds = t->run_uid != 0,
			     .ncpu = t->spec.cpu_milli ? (int)((t->spec.cpu_milli + 999) / 1000) : 1};
	limits_always(&t->spec, &rh, &t->rl);
	bool soft = w->pol->builtin_pids && !w->pol->lane[t->spec.lane ? 1 : 0].pids_default &&
		    t->spec.line_pids <= 0;
	if (t->spec.pids > 0 && t->run_uid == 0 && soft)
		t->spec.pids = 0; /* the built-in default yields where nothing holds it */
	if (t->spec.pids > 0) {
		if (t->run_uid == 0)
			return refuse(b, t, "cgroup_setup_failed",
				      "pids=%lld cannot hold a task that runs as root (RLIMIT_NPROC does not "
				      "bind uid 0), and Slurm counts no pids",
				      (long long)t->spec.pids);
		t->rl.nproc = t->spec.pids;
	}
	t->rl.nofile = w->fds.nofile_task;
	limits_launch_opts(&t->rl, &lopts);
	/* The task file and $KART_OUTDIR by descriptors kart-launch opens
	 * and checks, after the binds' and the inputs': never by a path of
	 * the stage, where the submitter can rename. */
	int task_fd = SANDBOX_BIND_FD + t->spec.n_binds;
	for (int i = 0; i < t->spec.n_after; i++)
		task_fd += !!b->di->in[i].out_path + !!b->di->in[i].stdout_path;
	const struct acct *ha = acct_get(t->run_uid);
	struct sandbox_req req = {.pol = w->pol, .spec = &t->spec, .task_path = taskp,
				  .home = ha->found ? ha->home : NULL, .seccomp = true,
				  .work_dir = j->dir, .out_dir = outp, .task_id = b->name,
				  .host_env = environ, .attempt = t->meta.attempt,
				  .launch_opts = lopts.v, .run_uid = t->run_uid,
				  .run_gid = b->as_user ? b->cred.gid : getegid(), .input = &input,
				  .inputs = b->di->in, .n_inputs = t->spec.n_after,
				  .task_fd = task_fd, .out_fd = task_fd + 1};
	int built = sandbox_bwrap(&req, &argv, &envp, err, sizeof err);
	strv_free(&lopts);
	free(input);
	if (built < 0) {
		strv_free(&argv);
		strv_free(&envp);
		return refuse(b, t, "sandbox_setup_failed", "%s", err);
	}
	const char *home = sandbox_home(&req);
	snprintf(t->home, sizeof t->home, "%s", home ? home : "");
	char num[16];
	/* Which job's stage this is: a stage directory swapped for another
	 * (the submitter's, of another of their jobs) is refused. */
	rec(&l, "job", j->jname, NULL, NULL);
	snprintf(num, sizeof num, "%d", SANDBOX_SECCOMP_FD);
	rec(&l, "fd", num, "r", JOB_FILTER);
	for (int i = 0; i < t->spec.n_binds; i++) {
		snprintf(num, sizeof num, "%d", SANDBOX_BIND_FD + i);
		rec(&l, "fd", num, t->spec.binds[i].mode == BIND_CWD ? "d" : "p", t->spec.binds[i].path);
	}
	int fd = SANDBOX_BIND_FD + t->spec.n_binds;
	for (int i = 0; i < t->spec.n_after; i++) {
		const struct sandbox_input *in = &b->di->in[i];
		char p[PATH_MAX];
		for (int k = 0; k < 2; k++) {
			if (!(k ? in->stdout_path : in->out_path))
				continue;
			snprintf(num, sizeof num, "%d", fd++);
			snprintf(p, sizeof p, "inputs/%s/%s", in->id, k ? "stdout" : "out");
			rec(&l, "fd", num, "p", p);
		}
	}
	snprintf(num, sizeof num, "%d", task_fd);
	rec(&l, "fd", num, "r", JOB_TASK);
	snprintf(num, sizeof num, "%d", task_fd + 1);
	rec(&l, "fd", num, "d", JOB_OUT);
	for (size_t i = 0; i < argv.n; i++)
		rec(&l, "arg", argv.v[i], NULL, NULL);
	for (size_t i = 0; i < envp.n; i++)
		rec(&l, "env", envp.v[i], NULL, NULL);
	j->launch = words_join(&l, &j->launch_len);
	/* It holds env= values: the copies go at once, the text with the job. */
	for (size_t i = 0; i < l.n; i++)
		explicit_bzero(l.v[i], strlen(l.v[i]));
	strv_free(&l);
	strv_free(&argv);
	for (size_t i = 0; i < envp.n; i++)
		explicit_bzero(envp.v[i], strlen(envp.v[i]));
	strv_free(&envp);
	return 0;
}

/* "slurm JNAME KEY ID": the claim's record, into the job (adopt). */
static int from_record(const char *run, struct sjob *j)
{
	char jn[96], key[64], id[32];
	if (sscanf(run, "slurm %95s %63s %31s", jn, key, id) != 3 || strchr(jn, '/') || strchr(key, '/') ||
	    key[0] == '.' || jn[0] == '.')
		return -1;
	snprintf(j->jname, sizeof j->jname, "%s", jn);
	snprintf(j->key, sizeof j->key, "%s", key);
	j->id = strcmp(id, "-") ? atoll(id) : 0;
	return 0;
}

static int slurm_prepare(struct worker *w, struct task *t, struct backend_start *b)
{
	const struct policy *pol = w->pol;
	if (!pol->slurm_stage[0])
		return refuse(b, t, "sandbox_setup_failed",
			      "backend slurm needs [slurm] stage in kart.conf: a directory this host and "
			      "every node see at the same path");
	const struct kind *k = t->spec.kind[0] ? policy_kind(pol, t->spec.kind) : NULL;
	if (k && k->n_cred)
		return refuse(b, t, "sandbox_setup_failed",
			      "kind %s adds credentials through a forwarder on this host, which a job on "
			      "a node cannot reach: not with backend slurm",
			      k->name);
	if (!w->flt.whole.bpf)
		return refuse(b, t, "seccomp_failed", "the seccomp filter could not be built: %.180s",
			      w->flt.err);
	struct sjob *j = sjob_new(t);
	t->be_task = j;
	j->as_user = b->as_user > 0;
	if (j->as_user)
		j->cred = b->cred;
	j->spec = &t->spec;
	t->seccomp = true;
	/* As applied: Slurm gives whole CPUs. */
	if (t->spec.cpu_milli)
		t->spec.cpu_milli = (t->spec.cpu_milli + 999) / 1000 * 1000;
	if (b->adopt) {
		if (from_record(b->adopt, j) < 0)
			return refuse(b, t, "sandbox_setup_failed", "its run record is not one of Slurm's: %.150s",
				      b->adopt);
		j->adopt = j->staged = true;
	} else {
		job_name(t->name, j->jname, sizeof j->jname);
		snprintf(j->key, sizeof j->key, "%s", slurm.key);
	}
	if (pathfmt(j->dir, sizeof j->dir, "%s/%s/%u/%s", pol->slurm_stage, j->key, (unsigned)t->run_uid,
		    j->jname) < 0)
		return refuse(b, t, "sandbox_setup_failed", "the stage's path is too long");
	job_args(w, t, j);
	/* Made for a job followed again too: its stage may have to be made
	 * again (a worker that died making it, submit_prepare). */
	if (launch_text(w, t, b, j) < 0)
		return -1;
	j->filter = xmalloc(w->flt.whole.len);
	memcpy(j->filter, w->flt.whole.bpf, w->flt.whole.len);
	j->filter_len = w->flt.whole.len;
	/* after='s outputs, opened in done/: the thread copies them. */
	for (int i = 0, f = 0; i < t->spec.n_after; i++) {
		const struct sandbox_input *in = &b->di->in[i];
		snprintf(j->in[i].id, sizeof j->in[i].id, "%s", in->id);
		j->in[i].out_fd = in->out_path && f < b->di->nfd ? b->di->fd[f++] : -1;
		j->in[i].stdout_fd = in->stdout_path && f < b->di->nfd ? b->di->fd[f++] : -1;
		j->n_in = i + 1;
	}
	if (t->spec.n_after)
		b->di->nfd = 0; /* ours now */
	j->out_cap = t->spec.output ? t->spec.output : pol->output_default;
	j->art_bytes = pol->artifacts_max ? pol->artifacts_max + 1 : 0;
	j->art_files = pol->artifacts_files ? pol->artifacts_files + 1 : 0;
	j->art_depth = pol->artifacts_depth;
	return 0;
}

static void slurm_spawn(struct worker *w, struct task *t)
{
	(void)w;
	struct sjob *j = t->be_task;
	pthread_mutex_lock(&slurm.mu);
	j->phase = SJ_SUBMIT;
	j->next = slurm.jobs;
	slurm.jobs = j;
	slurm_kick();
	pthread_mutex_unlock(&slurm.mu);
}

static void slurm_started(struct worker *w, struct task *t)
{
	(void)w;
	struct sjob *j = t->be_task;
	if (j->id > 0)
		logmsg("%s: Slurm job %lld (%s)", t->name, j->id, j->jname);
	else
		logmsg("%s: its Slurm job %s is not known yet (Slurm did not answer): it waits", t->name,
		       j->jname);
}

static void slurm_unspawned(struct worker *w, struct task *t, struct backend_refusal *why)
{
	(void)w;
	struct sjob *j = t->be_task;
	snprintf(t->errbuf, sizeof t->errbuf, "%s", j->why);
	*why = (struct backend_refusal){j->why_status, j->why_refusal, t->errbuf};
}

static bool slurm_signal(struct worker *w, struct task *t, int sig)
{
	(void)w;
	struct sjob *j = t->be_task;
	pthread_mutex_lock(&slurm.mu);
	int stop = sig == SIGKILL ? STOP_KILL : STOP_TERM;
	if (stop > j->want_stop)
		j->want_stop = stop;
	slurm_kick();
	pthread_mutex_unlock(&slurm.mu);
	return true;
}

/* scontrol suspend (TSTP, then STOP) is the operator's: a worker that
 * is not root can hold a pending job of its own, not stop a running one. */
static int slurm_pause(struct worker *w, struct task *t, bool on)
{
	(void)w;
	struct sjob *j = t->be_task;
	pthread_mutex_lock(&slurm.mu);
	if (on && j->began_mono && geteuid() != 0) {
		pthread_mutex_unlock(&slurm.mu);
		return -EPERM;
	}
	j->want_pause = on ? 1 : -1;
	slurm_kick();
	pthread_mutex_unlock(&slurm.mu);
	return on ? PAUSE_STOP : 0;
}

char *slurm_section(const struct sjob *j)
{
	json_t *r = json_null();
	if (j->receipt) {
#define OR_NULL(v) ((v) >= 0 ? json_integer(v) : json_null())
		r = json_pack("{s:o, s:o, s:o, s:o}", "max_rss_bytes", OR_NULL(j->max_rss), "total_cpu_ms",
			      OR_NULL(j->total_cpu_ms), "elapsed_s", OR_NULL(j->elapsed_s), "energy_joules",
			      OR_NULL(j->energy_j));
#undef OR_NULL
	}
	char ec[16];
	if (j->exit_code[0])
		snprintf(ec, sizeof ec, "%s", j->exit_code);
	else if (j->wstatus >= 0)
		snprintf(ec, sizeof ec, "%d:%d", WIFEXITED(j->wstatus) ? WEXITSTATUS(j->wstatus) : 0,
			 WIFSIGNALED(j->wstatus) ? WTERMSIG(j->wstatus) : 0);
	else
		ec[0] = '\0';
	json_t *o = json_pack("{s:o, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "job_id",
			      j->id > 0 ? json_integer(j->id) : json_null(), "job_name", j->jname, "partition",
			      j->partition[0] ? json_string(j->partition) : json_null(), "nodes",
			      j->nodes[0] ? json_string(j->nodes) : json_null(), "state",
			      j->state[0] ? json_string(j->state) : json_null(), "exit_code",
			      ec[0] ? json_string(ec) : json_null(), "reason",
			      j->reason[0] ? json_string(j->reason) : json_null(), "receipt", r, "receipt_why",
			      j->receipt || !j->receipt_why ? json_null() : json_string(j->receipt_why));
	char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	return s;
}

/* The job ended and its stage is read (SJ_DONE): the run's end, as a
 * local run's, from the launcher's report and Slurm's state. */
static void slurm_reap(struct worker *w, struct task *t)
{
	(void)w;
	struct sjob *j = t->be_task;
	struct run_end *e = &t->rend;
	memset(e, 0, sizeof *e);
	e->use = (struct run_use){NULL, -1, -1, -1, -1, -1};
	const char *s = j->state;
	if (j->launched) {
		char rep[sizeof j->report];
		snprintf(rep, sizeof rep, "%s", j->report);
		run_status_parse(rep, e, true);
		e->wrapper_status = j->wrapper;
	} else if (j->why[0] && j->end == SE_RAN) {
		e->refusal = "sandbox_setup_failed";
		snprintf(e->refusal_why, sizeof e->refusal_why, "%.255s", j->why);
	} else {
		/* Killed before its launcher could report. */
		e->started = j->began_mono != 0;
		e->signal = SIGKILL;
	}
	t->engine_oom = strncmp(s, "OUT_OF_MEMORY", 13) == 0 ? 2 /* outcome.h ENGINE_OOM_STATE */ : 0;
	bool limit = strncmp(s, "TIMEOUT", 7) == 0 || strstr(j->report, "timelimit");
	if (limit && t->end == END_NATURAL) {
		t->end = END_TIMEOUT;
		t->term_sent = true;
	}
	if (j->end == SE_REQUEUE) {
		t->end = END_REQUEUE;
		t->lost_run = true;
		snprintf(t->errbuf, sizeof t->errbuf, "%s", j->why);
	}
	t->run.out.file = steal_fd(&j->out_fd);
	t->run.err.file = steal_fd(&j->err_fd);
	t->run.out.bytes = j->out_bytes;
	t->run.out.truncated = j->out_trunc;
	t->run.err.bytes = j->err_bytes;
	t->run.err.truncated = j->err_trunc;
	free(j->section);
	j->section = slurm_section(j);
}

/* CPU and memory from the job's cgroup, which counts every process of
 * the job and which kart-launch --job reads on the node last thing
 * before it exits (slurmd removes it then); I/O from the launcher in the
 * sandbox (its report), as under bwrap. sacct's MaxRSS is sampled (0 for
 * a job shorter than JobAcctGatherFrequency): it stays in the result's
 * slurm section, never in usage. */
static void slurm_usage(const struct task *t, struct backend_usage *u)
{
	const struct sjob *j = t->be_task;
	const struct run_use *p = &t->rend.use;
	backend_usage_init(u);
	if (!j)
		return;
	backend_usage_from_run(u, p);
	if (j->cpu_user_us >= 0 && j->cpu_sys_us >= 0) {
		u->cpu_user_ms = j->cpu_user_us / 1000;
		u->cpu_system_ms = j->cpu_sys_us / 1000;
		u->by[UF_CPU] = "cgroup";
	}
	if (j->peak >= 0) {
		u->memory_peak = j->peak;
		u->by[UF_MEMORY] = "cgroup";
	}
	if (j->start_ms > 0 && j->end_ms >= j->start_ms) {
		u->started_ms = j->start_ms;
		u->finished_ms = j->end_ms;
	}
	const char *unread = !j->launched
		? "the job left no report in its stage (it never ran, or was killed before "
		  "kart-launch --job could write one)"
		: NULL;
	if (!u->by[UF_CPU])
		u->why[UF_CPU] = unread ? unread
					: "the job's cgroup counted no CPU time where kart-launch --job "
					  "looked (sacct's TotalCPU is in the result's slurm section)";
	if (!u->by[UF_MEMORY])
		u->why[UF_MEMORY] = unread ? unread
					   : "the job's cgroup kept no memory peak where kart-launch --job "
					     "looked (sacct's MaxRSS is sampled: see the slurm section)";
	if (!u->by[UF_IO])
		u->why[UF_IO] = unread ? unread
				       : "kart-launch in the job's sandbox did not report what the task "
					 "read and wrote";
	u->why[UF_PIDS] = "Slurm's job cgroup has no pids controller, and sacct counts no processes "
			  "(pids= is kart-launch's rlimit there)";
	u->why[UF_PRESSURE] = "sacct keeps no pressure stall information, and the job's cgroup "
			      "is not read for it";
}

static const char *slurm_result_json(const struct task *t)
{
	const struct sjob *j = t->be_task;
	return j ? j->section : NULL;
}

/* Let go: the thread frees it where it still holds it; its stage goes
 * once the claim is gone (a result, a re-queue), and stays with a claim
 * left for recovery (a stop, a crash), which follows the job from it. */
static void slurm_cleanup(struct worker *w, struct task *t)
{
	struct sjob *j = t->be_task;
	if (!j)
		return;
	t->be_task = NULL;
	struct stat st;
	bool claim_gone = fstatat(w->wdir, t->name, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT;
	pthread_mutex_lock(&slurm.mu);
	j->t = NULL;
	if (j->queued_back) {
		for (struct sjob **pp = &slurm.back; *pp; pp = &(*pp)->back_next)
			if (*pp == j) {
				*pp = j->back_next;
				break;
			}
		slurm.back_tail = &slurm.back;
		while (*slurm.back_tail)
			slurm.back_tail = &(*slurm.back_tail)->back_next;
		j->queued_back = false;
	}
	if (claim_gone && j->staged)
		strv_addf(&slurm.rm, "%u %u %s", (unsigned)(j->as_user ? j->cred.uid : geteuid()),
			  (unsigned)(j->as_user ? j->cred.gid : getegid()), j->dir);
	/* Freed by the loop alone, at the end of a tick (one may be
	 * running: it still holds the job), once the thread is done with
	 * it (busy: it puts it there itself). */
	j->gone = true;
	for (struct sjob **pp = &slurm.jobs; *pp; pp = &(*pp)->next)
		if (*pp == j) {
			*pp = j->next;
			break;
		}
	if (!j->busy) {
		j->next = slurm.dead;
		slurm.dead = j;
	}
	slurm_kick();
	pthread_mutex_unlock(&slurm.mu);
}

/* ---- kart doctor ------------------------------------------------------------- */

static void slurm_probe(const struct policy *pol, struct backend_probe *p)
{
	char out[4096], err[1024];
	const char *bin = pol->slurm_bin;
	json_t *f = json_object();
	char *const ver[] = {"sbatch", "--version", NULL};
	int rc = slurm_cmd(bin, ver, NULL, out, sizeof out, err, sizeof err, 15000);
	out[strcspn(out, "\n")] = '\0';
	json_object_set_new(f, "version", rc == 0 ? json_string(out) : json_null());
	if (rc != 0) {
		p->ok = false;
		json_object_set_new(f, "error", json_sprintf("sbatch does not run: %s", err[0] ? err : "not found"));
	}
	char *const ping[] = {"scontrol", "ping", NULL};
	rc = slurm_cmd(bin, ping, NULL, out, sizeof out, err, sizeof err, 15000);
	out[strcspn(out, "\n")] = '\0';
	bool up = rc == 0 && strstr(out, "UP");
	json_object_set_new(f, "controller", json_string(rc == 0 ? out : err[0] ? err : "does not answer"));
	if (!up)
		p->ok = false; /* tasks wait for it: said, not a refusal */
	char *const si[] = {"sinfo", "-h", "-o", "%P|%a|%D|%c|%m|%l", NULL};
	json_t *parts = json_array();
	if (up && slurm_cmd(bin, si, NULL, out, sizeof out, err, sizeof err, 15000) == 0) {
		char *save = NULL;
		for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
			char *v[6] = {0};
			int k = 0;
			for (char *q = l, *bar; k < 6; q = bar + 1) {
				v[k++] = q;
				if (!(bar = strchr(q, '|')))
					break;
				*bar = '\0';
			}
			if (k < 6)
				continue;
			size_t pl = strlen(v[0]);
			bool dflt = pl && v[0][pl - 1] == '*';
			if (dflt)
				v[0][pl - 1] = '\0';
			json_array_append_new(parts, json_pack("{s:s, s:b, s:s, s:i, s:s, s:s, s:s}", "name",
							       v[0], "default", dflt, "state", v[1], "nodes",
							       atoi(v[2]), "cpus", v[3], "memory_mb", v[4],
							       "time_limit", v[5]));
		}
	}
	json_object_set_new(f, "partitions", parts);
	char *const sa[] = {"sacct", "-n", "-X", "-j", "1", "-o", "JobID", NULL};
	rc = up ? slurm_cmd(bin, sa, NULL, NULL, 0, err, sizeof err, 15000) : -1;
	err[strcspn(err, "\n")] = '\0';
	json_object_set_new(f, "accounting",
			    rc == 0 ? json_string("works: results have sacct's receipt")
			    : !up   ? json_null()
				    : json_sprintf("does not work (%s): results have no receipt", err));
	/* The stage: a directory, and on a filesystem the nodes can share
	 * (this host cannot see a node's mounts: it says what it sees). */
	json_t *st = json_object();
	struct statfs sf;
	struct stat sb;
	if (!pol->slurm_stage[0]) {
		json_object_set_new(st, "error", json_string("[slurm] stage is not set"));
		p->ok = false;
	} else if (stat(pol->slurm_stage, &sb) < 0 || statfs(pol->slurm_stage, &sf) < 0) {
		json_object_set_new(st, "error", json_sprintf("%s: %s", pol->slurm_stage, strerror(errno)));
		p->ok = false;
	} else if (!S_ISDIR(sb.st_mode)) {
		json_object_set_new(st, "error", json_sprintf("%s: not a directory", pol->slurm_stage));
		p->ok = false;
	} else {
		unsigned long m = (unsigned long)sf.f_type & 0xffffffffUL;
		const char *fs = space_fs_known(m);
		static const unsigned long shared[] = {0x6969 /* nfs */, 0xff534d42 /* cifs */,
						       0xfe534d42 /* smb2 */, 0x0bd00bd0 /* lustre */,
						       0x47504653 /* gpfs */, 0x00c36400 /* ceph */,
						       0x19830326 /* beegfs */, 0x01021997 /* 9p */,
						       0x65735546 /* fuse */, 0x5346414f /* afs */};
		bool net = false;
		for (size_t i = 0; i < ARRAY_SIZE(shared); i++)
			net = net || m == shared[i];
		json_object_set_new(st, "path", json_string(pol->slurm_stage));
		json_object_set_new(st, "fs", fs ? json_string(fs) : json_sprintf("0x%lx", m));
		json_object_set_new(st, "shared",
				    net ? json_string("a network filesystem: the nodes can mount it")
					: json_string("a local filesystem: only jobs on this host see it, unless "
						      "it is exported to the nodes at the same path"));
	}
	json_object_set_new(f, "stage", st);
	p->facts = json_pack("{s:o}", "slurm", f);
}

const struct backend backend_slurm = {
	.name = "slurm",
	.engine_limits = true,
	.work = SANDBOX_WORK,
	.detach = true,
	.queued = true,
	.run_word = "slurm",
	.probe = slurm_probe,
	.start = slurm_start,
	.stop = slurm_stop,
	.stopping = slurm_stopping,
	.sweep = slurm_sweep,
	.next_mono = slurm_next_mono,
	.tick = slurm_tick,
	.prepare = slurm_prepare,
	.spawn = slurm_spawn,
	.started = slurm_started,
	.unspawned = slurm_unspawned,
	.ready = slurm_ready,
	.signal = slurm_signal,
	.pause = slurm_pause,
	.reap = slurm_reap,
	.usage = slurm_usage,
	.result_json = slurm_result_json,
	.cleanup = slurm_cleanup,
};
