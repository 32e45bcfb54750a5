/* slurm_thread.c - the thread that talks to Slurm for the loop: submits
 * each job (after its run record is durable in the claim), watches all
 * of them with one squeue call at a time, reads each one's stage when it
 * ends, waits a while for sacct's record, and sends kart's signals
 * (scancel, scontrol). Everything it does blocks, none of it in the
 * loop. A job's stage directory is the worker's, made by the worker;
 * what it reads or writes in the submitter's parts of it (out/, job/,
 * the inputs' copies) it does with the submitter's rights on files, in a
 * child (stage_as_submitter). */
#define _GNU_SOURCE
#include "slurm.h"

#include <ctype.h>
#include <dirent.h>
#include <inttypes.h>
#include <poll.h>
#include <sys/inotify.h>

#include "launch_job.h"

struct slurm slurm = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .efd = -1,
		      .ifd = -1, .ino_wake = -1};



/* ---- commands ------------------------------------------------------------ */

/* Start one command: its pid, with its stdin written (small: a batch
 * script) and its stdout and stderr pipes in c; -1 with c->err set. */
static pid_t cmd_start(const char *bin, struct slurm_run *c)
{
	char path[PATH_MAX];
	if (bin && bin[0] ? pathfmt(path, sizeof path, "%s/%s", bin, c->argv[0]) < 0
			  : find_in_path(c->argv[0], path, sizeof path) < 0) {
		if (c->err)
			snprintf(c->err, c->errlen, "%s: not found (set [slurm] bin)", c->argv[0]);
		return -1;
	}
	int pin[2] = {-1, -1}, pout[2], perr[2];
	if (pipe2(pout, O_CLOEXEC) < 0)
		return -1;
	if (pipe2(perr, O_CLOEXEC) < 0 || (c->in && pipe2(pin, O_CLOEXEC) < 0)) {
		close(pout[0]);
		close(pout[1]);
		return -1;
	}
	/* Our SLURM_CONF, if any, and no other variable of ours (sbatch
	 * hands its environment to the job, which builds the task's own). */
	char conf[PATH_MAX + 16] = "";
	const char *ce = getenv("SLURM_CONF");
	if (ce && *ce)
		snprintf(conf, sizeof conf, "SLURM_CONF=%s", ce);
	char *env[] = {"PATH=/usr/bin:/bin", "LANG=C", "LC_ALL=C", conf[0] ? conf : NULL, NULL};
	/* vfork: the worker's address space is not copied for each
	 * sbatch, squeue and sacct (a fork of it cost more than sbatch's
	 * own start). The child makes system calls only, and the worker
	 * has no signal handlers to run in it (a signalfd takes them). */
	pid_t pid = vfork();
	if (pid == 0) {
		/* Never outlives the worker's thread: a submission the
		 * worker did not see through is looked up by name later. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		int dn = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (dup2(c->in ? pin[0] : dn, 0) < 0 || dup2(pout[1], 1) < 0 || dup2(perr[1], 2) < 0)
			_exit(127);
		(void)syscall(SYS_close_range, 3, ~0U, 0);
		execve(path, c->argv, env);
		_exit(127);
	}
	close(pout[1]);
	close(perr[1]);
	if (c->in)
		close(pin[0]);
	if (pid < 0) {
		close(pout[0]);
		close(perr[0]);
		if (c->in)
			close(pin[1]);
		return -1;
	}
	if (c->in) {
		(void)write_all(pin[1], c->in, strlen(c->in));
		close(pin[1]);
	}
	c->fd[0] = pout[0];
	c->fd[1] = perr[0];
	return pid;
}

void slurm_cmds(const char *bin, struct slurm_run *c, int n, int timeout_ms)
{
	pid_t pid[SLURM_RUNS_MAX];
	struct pollfd pf[2 * SLURM_RUNS_MAX];
	size_t got[2 * SLURM_RUNS_MAX];
	if (n > SLURM_RUNS_MAX)
		n = SLURM_RUNS_MAX;
	for (int i = 0; i < n; i++) {
		if (c[i].out && c[i].outlen)
			c[i].out[0] = '\0';
		if (c[i].err && c[i].errlen)
			c[i].err[0] = '\0';
		c[i].fd[0] = c[i].fd[1] = -1;
		pid[i] = cmd_start(bin, &c[i]);
		for (int k = 0; k < 2; k++) {
			pf[2 * i + k] = (struct pollfd){.fd = c[i].fd[k], .events = POLLIN};
			got[2 * i + k] = 0;
		}
	}
	int64_t end = now_mono_ms() + timeout_ms;
	bool timed_out = false;
	for (;;) {
		bool open = false;
		for (int i = 0; i < 2 * n; i++)
			open = open || pf[i].fd >= 0;
		if (!open)
			break;
		int64_t left = end - now_mono_ms();
		if (left <= 0) {
			timed_out = true;
			break;
		}
		int r = poll(pf, (nfds_t)(2 * n), (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			timed_out = r == 0;
			break;
		}
		for (int i = 0; i < 2 * n; i++) {
			if (pf[i].fd < 0 || !pf[i].revents)
				continue;
			struct slurm_run *x = &c[i / 2];
			char *buf = i % 2 ? x->err : x->out;
			size_t len = i % 2 ? x->errlen : x->outlen;
			char tmp[8192];
			ssize_t k = read(pf[i].fd, tmp, sizeof tmp);
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0) {
				close(pf[i].fd);
				pf[i].fd = -1;
				continue;
			}
			size_t take = (size_t)k;
			if (!buf || !len)
				take = 0;
			else if (got[i] + take > len - 1)
				take = len - 1 - got[i];
			if (take)
				memcpy(buf + got[i], tmp, take);
			got[i] += take;
			if (buf && len)
				buf[got[i]] = '\0';
		}
	}
	for (int i = 0; i < 2 * n; i++)
		if (pf[i].fd >= 0)
			close(pf[i].fd);
	for (int i = 0; i < n; i++) {
		c[i].rc = -1;
		if (pid[i] < 0)
			continue;
		if (timed_out)
			(void)kill(pid[i], SIGKILL);
		int st;
		while (waitpid(pid[i], &st, 0) < 0 && errno == EINTR)
			;
		if (timed_out && c[i].err)
			snprintf(c[i].err, c[i].errlen, "%s did not answer within %ds", c[i].argv[0],
				 timeout_ms / 1000);
		else if (WIFEXITED(st))
			c[i].rc = WEXITSTATUS(st);
	}
}

int slurm_cmd(const char *bin, char *const argv[], const char *in, char *out, size_t outlen,
	      char *err, size_t errlen, int timeout_ms)
{
	struct slurm_run c = {.argv = argv, .in = in, .out = out, .outlen = outlen, .err = err,
			      .errlen = errlen};
	slurm_cmds(bin, &c, 1, timeout_ms);
	return c.rc;
}

/* A command's stderr, one line, for a log or a note. */
void slurm_oneline(char *s)
{
	for (char *p = s; *p; p++)
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = ' ';
	size_t l = strlen(s);
	while (l && s[l - 1] == ' ')
		s[--l] = '\0';
}

/* Slurm's controller did not answer (down, starting, overloaded): the
 * task is not to blame, and the call is tried again later. */
bool slurm_ctld_down(const char *err)
{
	static const char *const words[] = {
		"Unable to contact slurm controller", "Socket timed out", "Zero Bytes were transmitted",
		"Connection refused", "Communication connection failure", "temporarily unable",
		"Resource temporarily unavailable", "did not answer", "backup controller",
		"Transport endpoint", "Connection reset", "No route to host",
	};
	for (size_t i = 0; i < ARRAY_SIZE(words); i++)
		if (strcasestr(err, words[i]))
			return true;
	return false;
}

/* sbatch refused the job for what the task asked (a partition, more
 * than a node has): the task is refused, with Slurm's words. Anything
 * else is taken for the cluster's state, and tried again. */
static bool sbatch_refused(const char *err)
{
	static const char *const words[] = {
		"Invalid partition", "Invalid account", "Invalid qos", "node configuration is not available",
		"Memory specification can not be satisfied", "time limit is invalid",
		"partition configuration not available", "More processors requested",
		"Node count specification invalid", "Invalid generic resource", "Invalid user id",
		"Invalid group id", "not permitted", "Invalid job array", "Batch job submission failed: Invalid",
	};
	for (size_t i = 0; i < ARRAY_SIZE(words); i++)
		if (strcasestr(err, words[i]))
			return true;
	return false;
}

static void doorbell(void)
{
	uint64_t one = 1;
	(void)!write(slurm.efd, &one, sizeof one);
}

/* Under mu. The loop writes the note (cur/W/.stalled) at its next tick. */
void slurm_stalled(const char *why)
{
	if (strcmp(slurm.stalled, why)) {
		snprintf(slurm.stalled, sizeof slurm.stalled, "%.500s", why);
		slurm.stalled_told = false;
		if (!slurm.stalled_ms)
			slurm.stalled_ms = now_realtime_ms();
		doorbell();
	}
}

/* The same, from outside the lock. */
static void stalled_out(const char *why)
{
	pthread_mutex_lock(&slurm.mu);
	slurm_stalled(why);
	pthread_mutex_unlock(&slurm.mu);
}

void slurm_unstalled(void)
{
	if (slurm.stalled[0]) {
		slurm.stalled[0] = '\0';
		slurm.stalled_ms = 0;
		slurm.stalled_told = false;
		doorbell();
	}
}

/* ---- the loop's side of the hand-back ---------------------------------- */

void slurm_back(struct sjob *j, enum sj_back b)
{
	j->back |= 1u << b;
	if (!j->queued_back) {
		j->queued_back = true;
		j->back_next = NULL;
		*slurm.back_tail = j;
		slurm.back_tail = &j->back_next;
	}
	doorbell();
}

/* Every thread looks again: each takes what is its own. */
void slurm_kick(void)
{
	pthread_cond_broadcast(&slurm.cv);
}

/* The loop let go of j while the thread held it: for the loop to free. */
void slurm_let_go(struct sjob *j)
{
	j->next = slurm.dead;
	slurm.dead = j;
	doorbell();
}

/* ---- submitting ------------------------------------------------------------ */

/* The claim's run record: "slurm JNAME KEY ID" (ID "-" until known),
 * durable before the job can exist, and again once its id is known. */
int slurm_record(struct sjob *j, int *keep)
{
	int fd = openat(slurm.w->wdir, j->name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct claim_meta m;
	if (fd < 0 || claim_meta_get(fd, j->name, &m) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return -e;
	}
	char id[32] = "-";
	if (j->id > 0)
		snprintf(id, sizeof id, "%lld", j->id);
	snprintf(m.run, sizeof m.run, "slurm %s %s %s", j->jname, j->key, id);
	int r = claim_meta_set(fd, &m);
	if (r < 0 || !keep)
		close(fd);
	else
		*keep = fd; /* made durable (fsync) by the caller, before sbatch */
	return r;
}

/* Is path at or below dir (both absolute, resolved)? */
static bool path_under(const char *path, const char *dir)
{
	char real[PATH_MAX];
	if (realpath(dir, real))
		dir = real;
	size_t l = strlen(dir);
	while (l > 1 && dir[l - 1] == '/')
		l--;
	return strncmp(path, dir, l) == 0 && (path[l] == '/' || path[l] == '\0' || l == 1);
}

/* Its binds, opened as the submitter (as a local run's), each on the
 * shared filesystem: the nodes bind the same paths. */
static int binds_shared(struct sjob *j, char *why, size_t len)
{
	const struct task_spec *spec = j->spec;
	if (!spec->n_binds)
		return 0;
	struct binds_opened bo;
	char err[640];
	/* Nothing on a node covers the spool (masks_spool is false): a bind
	 * above it is refused, as kart submit refuses it. */
	int r = binds_open(spec, j->as_user ? &j->cred : NULL, slurm.w->sp->path, false, &bo, err,
			   sizeof err);
	if (r < 0) {
		snprintf(why, len, "%.600s", err);
		return r == -EACCES ? -EACCES : -EIO;
	}
	for (int i = 0; i < bo.n && r == 0; i++) {
		char p[64], real[PATH_MAX];
		snprintf(p, sizeof p, "/proc/self/fd/%d", bo.fd[i]);
		ssize_t n = readlink(p, real, sizeof real - 1);
		if (n <= 0)
			continue;
		real[n] = '\0';
		/* kart-launch checks that its own open of the path, on the
		 * node, leads there too (a symlink swapped in meanwhile
		 * would lead anywhere the submitter can open). */
		strv_add(&j->reals, "real");
		strv_addf(&j->reals, "%d", SANDBOX_BIND_FD + i);
		strv_add(&j->reals, real);
		bool ok = false;
		const struct plist *sh = &slurm.pol->slurm_shared;
		const char *e = NULL;
		if (!sh->n)
			ok = path_under(real, slurm.pol->slurm_stage);
		while (!ok && (e = plist_next(sh, e)))
			ok = path_under(real, e);
		if (!ok) {
			snprintf(why, len,
				 "%s=%.200s is not on the filesystem the nodes share (%.200s): a job on "
				 "another node could not see it; [slurm] shared lists those paths",
				 spec->binds[i].mode == BIND_RO ? "ro" : spec->binds[i].mode == BIND_CWD ? "cwd"
													 : "bind",
				 spec->binds[i].path, sh->n ? "[slurm] shared" : slurm.pol->slurm_stage);
			r = -EACCES;
		}
	}
	binds_close(&bo);
	return r;
}

static void refuse(struct sjob *j, const char *status, const char *refusal, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void refuse(struct sjob *j, const char *status, const char *refusal, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(j->why, sizeof j->why, fmt, ap);
	va_end(ap);
	j->why_status = status;
	j->why_refusal = refusal;
	j->refused = true;
}

/* Job names are seen by every user of the cluster: only a job of the
 * task's own user is its (squeue, then sacct for one gone from it). */
/* squeue's and sacct's filters for j's jobs: its name, its user. */
static void job_filters(const struct sjob *j, char opt[160], char user[40])
{
	snprintf(opt, 160, "--name=%s", j->jname);
	snprintf(user, 40, "--user=%u", (unsigned)(j->as_user ? j->cred.uid : geteuid()));
}

int slurm_ids(const struct sjob *j, long long *ids, int max, char *why, size_t len)
{
	char out[4096], err[1024], opt[160], user[40];
	job_filters(j, opt, user);
	char *const sq[] = {"squeue", "-h", "-t", "all", opt, user, "-o", "%i", NULL};
	int rc = slurm_cmd(slurm.bin, sq, NULL, out, sizeof out, err, sizeof err, CMD_TIMEOUT);
	if (rc != 0) {
		slurm_oneline(err);
		snprintf(why, len, "squeue: %.600s", err[0] ? err : "failed");
		return -1;
	}
	int n = 0;
	for (char *p = out, *e; *p && n < max; p = e) {
		long long v = strtoll(p, &e, 10);
		if (e == p)
			break;
		if (v > 0)
			ids[n++] = v;
		while (*e == '\n' || *e == ' ')
			e++;
	}
	if (!n && slurm.accounting) {
		char since[64];
		time_t t0 = (time_t)(j->claimed_ms / 1000) - 3600;
		struct tm tm;
		localtime_r(&t0, &tm);
		strftime(since, sizeof since, "--starttime=%Y-%m-%dT%H:%M:%S", &tm);
		char *const sa[] = {"sacct", "-n", "-X", "-P", opt, user, since, "-o", "JobID", NULL};
		if (slurm_cmd(slurm.bin, sa, NULL, out, sizeof out, err, sizeof err, CMD_TIMEOUT) == 0)
			for (char *p = out, *e; *p && n < max; p = e) {
				long long v = strtoll(p, &e, 10);
				if (e == p)
					break;
				if (v > 0)
					ids[n++] = v;
				while (*e && *e != '\n')
					e++;
				while (*e == '\n')
					e++;
			}
	}
	return n;
}

int slurm_job_ours(const struct sjob *j, long long id)
{
	long long ids[16];
	char why[700];
	int n = slurm_ids(j, ids, 16, why, sizeof why);
	for (int i = 0; i < n; i++)
		if (ids[i] == id)
			return 1;
	if (n >= 0 && slurm.accounting) {
		/* Not among those squeue lists (it forgets ended jobs after
		 * MinJobAge, and its list is cut at 16): that very id, of this
		 * name and user, asked of the accounting. */
		char out[1024], err[1024], jid[32], opt[160], user[40];
		snprintf(jid, sizeof jid, "%lld", id);
		job_filters(j, opt, user);
		char *const sa[] = {"sacct", "-n", "-X", "-P", "-j", jid, opt, user, "-o", "JobID", NULL};
		if (slurm_cmd(slurm.bin, sa, NULL, out, sizeof out, err, sizeof err, CMD_TIMEOUT) == 0)
			return strtoll(out, NULL, 10) == id;
		slurm_oneline(err);
		snprintf(why, sizeof why, "sacct: %.600s", err[0] ? err : "failed");
		n = -1;
	}
	if (n < 0) {
		if (!j->ask_next) /* once, not at each try */
			logmsg("%s: its stage names job %lld, and whether that is one of its jobs Slurm did "
			       "not say (%s): nothing is decided until it does", j->name, id, why);
		return -1;
	}
	return 0;
}

void slurm_ask_later(struct sjob *j, int r)
{
	if (r >= 0) {
		j->ask_next = j->ask_wait = 0;
		return;
	}
	int64_t most = BACKOFF_MAX(slurm.pol->slurm_poll_ms);
	if (most < 30000)
		most = 30000;
	j->ask_wait = !j->ask_wait ? BACKOFF_MIN : j->ask_wait * 2 > most ? most : j->ask_wait * 2;
	j->ask_next = now_mono_ms() + j->ask_wait;
}

/* A job of this name Slurm knows, the one holding the attempt where
 * several do (a submission thought lost, then made again): its id, 0
 * if none, -1 when Slurm did not answer (why). The others are
 * cancelled: at most one of them could run the task anyway. */
static long long lookup(struct sjob *j, char *why, size_t len)
{
	long long ids[16];
	int n = slurm_ids(j, ids, 16, why, len);
	if (n <= 0)
		return n;
	/* The one that took the attempt, where one did: the stage's run
	 * link is the submitter's to write, so only one of these. */
	char msg[4096];
	struct gather g = {-1, -1, -1};
	long long keep = ids[0];
	for (int i = 1; i < n; i++)
		if (ids[i] < keep)
			keep = ids[i];
	if (n > 1 && stage_as_submitter(j, stage_read, &g, msg, sizeof msg) == 0 && strncmp(msg, "run ", 4) == 0)
		for (int i = 0; i < n; i++)
			if (ids[i] == atoll(msg + 4))
				keep = ids[i];
	for (int i = 0; i < n; i++)
		if (ids[i] != keep) {
			char id[32];
			snprintf(id, sizeof id, "%lld", ids[i]);
			char *const sc[] = {"scancel", id, NULL};
			(void)slurm_cmd(slurm.bin, sc, NULL, NULL, 0, NULL, 0, CMD_TIMEOUT);
			logmsg("%s: job %s is a second job of its attempt: cancelled", j->name, id);
		}
	return keep;
}

/* A new stage for j: its record in the claim first (from then on a job
 * may exist: any later try looks first), then the stage made, filled
 * and sealed. true: submit it. */
static bool stage_new(struct sjob *j, int *rec)
{
	char why[700];
	int r = slurm_record(j, rec);
	if (r < 0) {
		refuse(j, "refused", "sandbox_setup_failed", "cannot record its job in the claim (user.kart): %s",
		       strerror(-r));
		return false;
	}
	j->adopt = true;
	if ((r = binds_shared(j, why, sizeof why)) < 0) {
		refuse(j, r == -EACCES ? "rejected" : "refused", r == -EACCES ? NULL : "sandbox_setup_failed", "%s",
		       why);
		return false;
	}
	if (stage_user_dir(j, why, sizeof why) < 0) {
		refuse(j, "refused", "sandbox_setup_failed", "%s", why);
		return false;
	}
	_cleanup_close_ int tfd = openat(slurm.w->wdir, j->name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (tfd < 0) {
		refuse(j, "refused", "sandbox_setup_failed", "cannot open its claim: %s", strerror(errno));
		return false;
	}
	j->staged = true;
	if (stage_make(j, tfd, why, sizeof why) < 0) {
		refuse(j, "refused", "sandbox_setup_failed", "the stage: %s", why);
		return false;
	}
	char msg[1024];
	int rc = j->n_in ? stage_as_submitter(j, stage_fill, NULL, msg, sizeof msg) : 0;
	if (rc != 0) {
		refuse(j, "refused", "sandbox_setup_failed", "the stage: %s",
		       msg[0] ? msg : rc == 3 ? "cannot become the submitter" : "failed");
		return false;
	}
	if (stage_seal(j, why, sizeof why) < 0) {
		refuse(j, "refused", "sandbox_setup_failed", "the stage: %s", why);
		return false;
	}
	return true;
}

/* One job of a batch, up to its submission: recorded (the claim kept
 * open in *rec, to be made durable) and staged, or found again. True
 * when sbatch is to submit it now; else it is settled for now (refused,
 * found, or waiting: Slurm did not answer). */
static bool submit_prepare(struct sjob *j, int *rec)
{
	char why[700];
	char cancel[512];
	struct stat st;
	/* kart cancel before it was ever submitted: nothing to stop. */
	if (!j->adopt && spool_name_cancel(cancel, sizeof cancel, j->name) == 0 &&
	    fstatat(slurm.w->wdir, cancel, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		refuse(j, "cancelled", NULL, "cancelled by kart cancel before it was submitted");
		return false;
	}
	if (!j->adopt)
		return stage_new(j, rec);
	if (j->id > 0) {
		j->phase = SJ_WATCH; /* its id is known: followed */
		return false;
	}
	long long id = lookup(j, why, sizeof why);
	if (id < 0) {
		stalled_out(why);
		j->submit_next = now_mono_ms() + BACKOFF_MIN;
		return false;
	}
	if (id > 0) {
		j->id = id;
		(void)slurm_record(j, NULL);
		j->phase = SJ_WATCH;
		return false;
	}
	/* No such job: submitted now, from the stage it has; unless kart
	 * cancel came meanwhile. */
	j->staged = true;
	if (spool_name_cancel(cancel, sizeof cancel, j->name) == 0 &&
	    fstatat(slurm.w->wdir, cancel, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		refuse(j, "cancelled", NULL, "cancelled by kart cancel before it was submitted");
		return false;
	}
	if (access(j->dir, F_OK) < 0 && errno == ENOENT) {
		refuse(j, NULL, NULL, "its stage is gone: never submitted");
		return false;
	}
	if (!stage_sealed(j) && j->launch && strcmp(j->key, slurm.key) == 0) {
		/* Its last life died making the stage, before any sbatch:
		 * no job of it was submitted, nor can be. */
		int r = stage_remove(j);
		if (r < 0) {
			refuse(j, "refused", "sandbox_setup_failed",
			       "its stage %.300s, left unfinished by a worker that died, cannot be removed: %s",
			       j->dir, strerror(-r));
			return false;
		}
		logmsg("%s: its stage was left unfinished (no job of it was submitted): made again", j->name);
		return stage_new(j, rec);
	}
	return true;
}

/* sbatch's answer for one job of the batch. */
static void submit_done(struct sjob *j, int rc, const char *out, char *err)
{
	char why[700];
	slurm_oneline(err);
	long long id = rc == 0 ? strtoll(out, NULL, 10) : 0;
	if (rc == 0 && id > 0) {
		j->id = id;
		/* Not made durable: lost with the host, the name finds it. */
		int r = slurm_record(j, NULL);
		if (r < 0)
			logmsg("%s: cannot record job %lld in the claim: %s (found again by its name)",
			       j->name, id, strerror(-r));
		j->phase = SJ_WATCH;
		return;
	}
	if (rc >= 0 && !(rc > 0 && sbatch_refused(err))) {
		/* Submitted or not: looked up by name next time. */
		snprintf(why, sizeof why, "%s: %.600s",
			 slurm_ctld_down(err) ? "slurmctld does not answer to sbatch" : "sbatch failed",
			 rc == 0 ? "no job id printed (looked up by its name)" : err);
		stalled_out(why);
		j->submit_next = now_mono_ms() + BACKOFF_MIN;
		return;
	}
	if (rc < 0) {
		snprintf(why, sizeof why, "sbatch: %.600s", err[0] ? err : "could not run");
		stalled_out(why);
		j->submit_next = now_mono_ms() + BACKOFF_MIN;
		return;
	}
	refuse(j, "refused", "sandbox_setup_failed", "Slurm refused the job: %.400s", err);
}

/* A batch of the queue: each recorded and staged, the records made
 * durable together (one journal commit for all), then one sbatch each,
 * all at once. */
static void submit_batch(struct sjob **v, int n)
{
	int rec[SLURM_RUNS_MAX];
	bool go[SLURM_RUNS_MAX];
	struct strv av[SLURM_RUNS_MAX];
	struct slurm_run c[SLURM_RUNS_MAX];
	char out[SLURM_RUNS_MAX][256], err[SLURM_RUNS_MAX][1024];
	int k = 0, idx[SLURM_RUNS_MAX];
	bool down = false;
	for (int i = 0; i < n; i++) {
		rec[i] = -1;
		go[i] = false;
		struct sjob *j = v[i];
		bool finding = j->adopt && j->id <= 0;
		if (down && finding) {
			/* Slurm did not answer the last lookup (each takes its
			 * timeout, seconds): the others wait with it. */
			j->submit_next = now_mono_ms() + BACKOFF_MIN;
			continue;
		}
		go[i] = submit_prepare(j, &rec[i]);
		down = down || (finding && !go[i] && !j->refused && j->id <= 0 && j->submit_next > now_mono_ms());
	}
	for (int i = 0; i < n; i++) {
		if (rec[i] < 0)
			continue;
		if (go[i] && fsync(rec[i]) < 0) {
			refuse(v[i], "refused", "sandbox_setup_failed",
			       "cannot make its job's record durable in the claim: %s", strerror(errno));
			go[i] = false;
		}
		close(rec[i]);
	}
	for (int i = 0; i < n; i++) {
		if (!go[i])
			continue;
		av[k] = (struct strv){0};
		strv_add(&av[k], "sbatch");
		for (size_t a = 0; a < v[i]->args.n; a++)
			strv_add(&av[k], v[i]->args.v[a]);
		c[k] = (struct slurm_run){.argv = av[k].v, .in = v[i]->script, .out = out[k],
					  .outlen = sizeof out[k], .err = err[k], .errlen = sizeof err[k]};
		idx[k++] = i;
	}
	if (k)
		slurm_cmds(slurm.bin, c, k, CMD_TIMEOUT);
	for (int m = 0; m < k; m++) {
		submit_done(v[idx[m]], c[m].rc, out[m], err[m]);
		strv_free(&av[m]);
	}
}

/* ---- the thread ---------------------------------------------------------------- */

/* A batch of the queue that is due (SLURM_RUNS_MAX at most), or the
 * time the next one is; submitted, and the outcome handed back. */
static bool submit_due(int64_t now, int64_t *next)
{
	struct sjob *batch[SLURM_RUNS_MAX];
	int nb = 0;
	for (struct sjob *j = slurm.jobs; j && nb < SLURM_RUNS_MAX; j = j->next) {
		/* One to stop is never submitted (watch_control_one's). */
		if (j->phase != SJ_SUBMIT || j->gone || j->busy || (j->handed && j->want_stop))
			continue;
		int64_t at = j->submit_next > slurm.submit_next ? j->submit_next : slurm.submit_next;
		if (at <= now)
			batch[nb++] = j;
		else if (!*next || at < *next)
			*next = at;
	}
	if (!nb)
		return false;
	for (int i = 0; i < nb; i++)
		batch[i]->busy = true;
	pthread_mutex_unlock(&slurm.mu);
	submit_batch(batch, nb);
	pthread_mutex_lock(&slurm.mu);
	bool failed = false, worked = false;
	for (int i = 0; i < nb; i++) {
		struct sjob *s = batch[i];
		s->busy = false;
		if (s->gone) {
			slurm_let_go(s);
		} else if (s->refused) {
			/* Out of the queue: refused, or given back; one the loop
			 * already runs ends so (reap: its refusal). */
			s->phase = SJ_DONE;
			slurm_back(s, s->handed ? SB_ENDED : SB_UNSPAWNED);
		} else {
			/* Submitted, or recorded and waiting for Slurm: either way
			 * the loop runs it from here (a cancel or a stop reaches
			 * it then), holding its slot. */
			if (!s->handed) {
				s->handed = true;
				slurm_back(s, SB_SUBMITTED);
			}
			if (s->phase == SJ_WATCH)
				worked = true;
			else
				failed = true;
		}
	}
	if (worked) {
		if (!failed)
			slurm_unstalled();
		slurm.poll_every = POLL_MIN;
		if (slurm.poll_next > now_mono_ms() + POLL_MIN)
			slurm.poll_next = now_mono_ms() + POLL_MIN;
	}
	/* Slurm did not take one: the queue waits, longer each time, up to
	 * [slurm] poll. */
	int64_t most = BACKOFF_MAX(slurm.pol->slurm_poll_ms);
	slurm.backoff = !failed ? 0 : !slurm.backoff ? BACKOFF_MIN
				 : slurm.backoff * 2 > most ? most
							     : slurm.backoff * 2;
	slurm.submit_next = failed ? now_mono_ms() + slurm.backoff : 0;
	return true;
}

/* Three threads, each one thing at a time, the most pressing first,
 * then asleep until the next is due or the loop kicks: "slurm" sends
 * kart's signals and submits (sbatch: the slowest command); "slurm-poll"
 * polls squeue and waits for sacct's receipts; "slurm-disk" reads an
 * ended job's stage and removes stages. Each waits for Slurm apart: a
 * batch of sbatch calls delays no job's end, and a job's end no
 * submission. A job is one thread's at a time (its phase; busy while
 * worked on outside the lock). */
enum role { ROLE_SUBMIT, ROLE_WATCH, ROLE_STAGE, ROLE__N };
static const char *const role_name[ROLE__N] = {"slurm", "slurm-poll", "slurm-disk"};

/* The role's next thing, done (true), or the time it is due in *next
 * (0: nothing to wait for). Under mu. */
static bool role_step(enum role r, int64_t now, int64_t *next)
{
	if (r == ROLE_SUBMIT) {
		if (slurm.stopping) {
			/* Those not submitted go back to new/; one that may have
			 * a job (its record is written) stays, for the next life. */
			for (struct sjob *j = slurm.jobs; j; j = j->next)
				if (j->phase == SJ_SUBMIT && !j->gone && !j->busy && !j->handed) {
					j->phase = j->adopt ? SJ_WATCH : SJ_DONE;
					if (!j->adopt)
						refuse(j, NULL, NULL, "the worker stops");
					j->handed = j->adopt;
					slurm_back(j, j->adopt ? SB_SUBMITTED : SB_UNSPAWNED);
				}
		}
		if (watch_control_one() || submit_due(now, next))
			return true;
		/* A stop that waits for Slurm's answer (stop_unsubmitted). */
		for (struct sjob *j = slurm.jobs; j; j = j->next)
			if (j->phase == SJ_SUBMIT && j->handed && j->want_stop && !j->gone && j->ask_next > now &&
			    (!*next || j->ask_next < *next))
				*next = j->ask_next;
		return false;
	}
	bool watching = false, waiting = false;
	struct sjob *c = NULL;
	int64_t ask = 0; /* the next collect that waits for Slurm's answer */
	for (struct sjob *j = slurm.jobs; j; j = j->next) {
		watching = watching || (j->phase == SJ_WATCH && j->id > 0 && !j->gone);
		waiting = waiting || (j->phase == SJ_RECEIPT && !j->gone);
		if (j->phase != SJ_COLLECT || j->gone || j->busy)
			continue;
		if (j->ask_next > now)
			ask = !ask || j->ask_next < ask ? j->ask_next : ask;
		else if (!c)
			c = j;
	}
	if (r == ROLE_STAGE) {
		if (c) {
			watch_collect(c);
			return true;
		}
		if (watch_remove_one())
			return true;
		*next = ask;
		return false;
	}
	if (watching && now >= slurm.poll_next) {
		slurm.poll_last = now;
		watch_poll();
		slurm.poll_next = now_mono_ms() + slurm.poll_every;
		return true;
	}
	if (waiting && now >= slurm.receipt_next) {
		watch_receipts();
		slurm.receipt_next = now_mono_ms() + 500;
		return true;
	}
	if (watching)
		*next = slurm.poll_next;
	if (waiting && (!*next || slurm.receipt_next < *next))
		*next = slurm.receipt_next;
	return false;
}

static void *thread_main(void *arg)
{
	enum role r = (enum role)(intptr_t)arg;
	pthread_mutex_lock(&slurm.mu);
	while (!slurm.quit) {
		int64_t next = 0;
		if (role_step(r, now_mono_ms(), &next)) {
			/* What it did may be another's to go on with (a job
			 * submitted is polled, one ended is read). */
			pthread_cond_broadcast(&slurm.cv);
			continue;
		}
		if (!next) {
			pthread_cond_wait(&slurm.cv, &slurm.mu);
			continue;
		}
		int64_t wait = next - now_mono_ms();
		if (wait <= 0)
			continue;
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += wait / 1000;
		ts.tv_nsec += (wait % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&slurm.cv, &slurm.mu, &ts);
	}
	pthread_mutex_unlock(&slurm.mu);
	return NULL;
}

/* The stage's word that a job ended, at once: kart-launch renames
 * job/status into place as its last act. Read where the stage is a
 * local filesystem (a node's writes over NFS make no event here, and
 * the polls alone follow those jobs). */
static void *ino_main(void *arg)
{
	(void)arg;
	char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
	struct pollfd pf[2] = {{.fd = slurm.ifd, .events = POLLIN}, {.fd = slurm.ino_wake, .events = POLLIN}};
	for (;;) {
		if (poll(pf, 2, -1) < 0 && errno != EINTR)
			break;
		if (pf[1].revents)
			break;
		ssize_t n = read(slurm.ifd, buf, sizeof buf);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0) {
			/* Not polled again in a loop: the polls go on alone. */
			logmsg("reading the Slurm jobs' inotify: %s: their ends are found by the polls alone",
			       n < 0 ? strerror(errno) : "no event");
			pthread_mutex_lock(&slurm.mu);
			slurm.ino_gone = true; /* no more watches made */
			pthread_mutex_unlock(&slurm.mu);
			break;
		}
		pthread_mutex_lock(&slurm.mu);
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *e = (const struct inotify_event *)p;
			p += sizeof *e + e->len;
			if (e->mask & IN_Q_OVERFLOW)
				watch_status_seen(-1);
			else if (e->len && strcmp(e->name, strrchr(JOB_STATUS, '/') + 1) == 0)
				watch_status_seen(e->wd);
		}
		pthread_mutex_unlock(&slurm.mu);
	}
	return NULL;
}

void slurm_thread_start(struct worker *w)
{
	slurm.w = w;
	slurm.back_tail = &slurm.back;
	slurm.poll_every = POLL_MIN;
	slurm.stalled_told = true; /* nothing to stage_say yet */
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_destroy(&slurm.cv);
	pthread_cond_init(&slurm.cv, &ca);
	pthread_condattr_destroy(&ca);
	for (int r = 0; r < ROLE__N; r++) {
		if (pthread_create(&slurm.th[r], NULL, thread_main, (void *)(intptr_t)r) != 0)
			die("cannot start the Slurm thread %s", role_name[r]);
		thread_name(slurm.th[r], role_name[r]);
	}
	/* Without inotify, the polls alone. */
	slurm.ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	slurm.ino_wake = slurm.ifd >= 0 ? eventfd(0, EFD_CLOEXEC) : -1;
	if (slurm.ino_wake < 0 || pthread_create(&slurm.ino_th, NULL, ino_main, NULL) != 0) {
		if (slurm.ifd >= 0)
			close(slurm.ifd);
		if (slurm.ino_wake >= 0)
			close(slurm.ino_wake);
		slurm.ifd = slurm.ino_wake = -1;
	} else {
		thread_name(slurm.ino_th, "slurm-ino");
	}
	slurm.started = true;
}

void slurm_thread_stop(void)
{
	if (!slurm.started)
		return;
	pthread_mutex_lock(&slurm.mu);
	slurm.quit = true;
	pthread_cond_broadcast(&slurm.cv);
	pthread_mutex_unlock(&slurm.mu);
	for (int r = 0; r < ROLE__N; r++)
		pthread_join(slurm.th[r], NULL);
	if (slurm.ino_wake >= 0) {
		(void)eventfd_write(slurm.ino_wake, 1);
		pthread_join(slurm.ino_th, NULL);
		close(slurm.ino_wake);
		close(slurm.ifd);
		slurm.ifd = slurm.ino_wake = -1;
	}
	slurm.started = false;
}
