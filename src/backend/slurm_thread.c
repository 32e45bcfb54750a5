/* slurm_thread.c - the thread that talks to Slurm for the loop: submits
 * each job (after its run record is durable in the claim), watches all
 * of them with one squeue call at a time, reads each one's stage when it
 * ends, waits a while for sacct's record, and sends kart's signals
 * (scancel, scontrol). Everything it does blocks, none of it in the
 * loop. A job's stage directory is the worker's, made by the worker;
 * what it reads or writes in the submitter's parts of it (job/, the
 * inputs' copies) it does as the submitter, in a child (as binds.c
 * opens a task's binds). */
#define _GNU_SOURCE
#include "slurm.h"

#include <ctype.h>
#include <dirent.h>
#include <inttypes.h>
#include <poll.h>

#include "launch_job.h"

struct slurm slurm = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .efd = -1};


/* Between two polls at least, and the first look at a job (ms). */
#define POLL_MIN 250
/* A failed submission or lookup waits this much more each time, up to
 * BACKOFF_MAX (slurmctld down, or not taking jobs). */
#define BACKOFF_MIN 1000
#define BACKOFF_MAX 60000
#define CMD_TIMEOUT 60000
#define IDS_PER_CALL 1000

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
	pid_t pid = fork();
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
static void oneline(char *s)
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
static bool ctld_down(const char *err)
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
static void stalled(const char *why)
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
	stalled(why);
	pthread_mutex_unlock(&slurm.mu);
}

static void unstalled(void)
{
	if (slurm.stalled[0]) {
		slurm.stalled[0] = '\0';
		slurm.stalled_ms = 0;
		slurm.stalled_told = false;
		doorbell();
	}
}

/* ---- the loop's side of the hand-back ---------------------------------- */

static void back(struct sjob *j, enum sj_back b)
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

void slurm_kick(void)
{
	pthread_cond_signal(&slurm.cv);
}

/* The loop let go of j while the thread held it: for the loop to free. */
static void let_go(struct sjob *j)
{
	j->next = slurm.dead;
	slurm.dead = j;
	doorbell();
}

/* ---- as the submitter ------------------------------------------------------ */

/* fn in a child that has become the job's submitter (with as_user; else
 * the worker, who is the submitter), its words in msg (NUL-terminated):
 * fn's exit status, or -1. As binds.c: a child that drops uid, gid and
 * groups for good cannot leak them into the worker's threads. */
typedef int child_fn(const struct sjob *j, void *arg, int msgfd);

static int as_submitter(const struct sjob *j, child_fn *fn, void *arg, char *msg, size_t msglen)
{
	int p[2];
	msg[0] = '\0';
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		const struct run_cred *c = &j->cred;
		if (j->as_user &&
		    (syscall(SYS_setgroups, (size_t)c->ngroups, c->groups) < 0 ||
		     syscall(SYS_setresgid, c->gid, c->gid, c->gid) < 0 ||
		     syscall(SYS_setresuid, c->uid, c->uid, c->uid) < 0 ||
		     (c->uid != 0 && syscall(SYS_setuid, 0) == 0)))
			_exit(3);
		umask(077);
		_exit(fn(j, arg, p[1]));
	}
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		return -1;
	}
	size_t n = 0;
	for (;;) {
		ssize_t k = read(p[0], msg + n, msglen - 1 - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		n += (size_t)k;
		if (n == msglen - 1)
			break;
	}
	msg[n] = '\0';
	close(p[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int say(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int say(int fd, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n > 0)
		(void)write_all(fd, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
	return 1;
}

/* Copy from into to (up to cap bytes when cap; 0: all): what was kept,
 * and whether there was more. -errno on a failed read or write. */
static int copy_fd(int from, int to, uint64_t cap, uint64_t *kept, bool *more)
{
	char buf[65536];
	*kept = 0;
	*more = false;
	for (;;) {
		ssize_t k = read(from, buf, sizeof buf);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			return 0;
		size_t take = (size_t)k;
		if (cap && *kept + take > cap) {
			take = (size_t)(cap - *kept);
			*more = true;
		}
		if (take && write_all(to, buf, take) < 0)
			return -errno;
		*kept += take;
		if (*more)
			return 0;
	}
}

static int write_file_at(int dfd, const char *name, const void *data, size_t len, mode_t mode)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	int r = write_all(fd, data, len) < 0 ? -errno : 0;
	close(fd);
	return r;
}

/* An O_PATH descriptor opened again for reading, as whoever we are now. */
static int reopen(int pfd, int flags)
{
	char p[64];
	snprintf(p, sizeof p, "/proc/self/fd/%d", pfd);
	return open(p, flags | O_CLOEXEC);
}

/* The stage directory of a job, the worker's (what the job only reads:
 * the task file, the launch file, the filter, after='s inputs), with
 * the submitter's JOB_OWN in it (what the job writes: $KART_OUTDIR, its
 * output, its status). Made by the worker itself, in STAGE/KEY/UID,
 * which is the submitter's: what it opened there is checked to be what
 * it made. The launch file goes last, with the inode of JOB_OUT (which
 * kart-launch checks: the submitter can rename in JOB_OWN). */
static int stage_make(const struct sjob *j, int task_fd, char *why, size_t len)
{
	char udir[PATH_MAX];
	snprintf(udir, sizeof udir, "%s", j->dir);
	*strrchr(udir, '/') = '\0';
	const char *base = strrchr(j->dir, '/') + 1;
	uid_t uid = j->as_user ? j->cred.uid : geteuid();
	gid_t gid = j->as_user ? j->cred.gid : getegid();
	_cleanup_close_ int ufd = open(udir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ufd < 0 || mkdirat(ufd, base, 0700) < 0) {
		snprintf(why, len, "cannot make %.300s: %s", j->dir, strerror(errno));
		return -1;
	}
	_cleanup_close_ int dfd = openat(ufd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (dfd < 0 || fstat(dfd, &st) < 0 || st.st_uid != geteuid() || fchmod(dfd, 0755) < 0) {
		snprintf(why, len, "%.300s is not the directory this worker made", j->dir);
		return -1;
	}
	int r = 0;
	uint64_t kept;
	bool more;
	_cleanup_close_ int tfd = openat(dfd, JOB_TASK, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0500);
	if (tfd < 0 || fchmod(tfd, 0555) < 0 || lseek(task_fd, 0, SEEK_SET) < 0 ||
	    (r = copy_fd(task_fd, tfd, 0, &kept, &more)) < 0) {
		snprintf(why, len, "cannot copy the task file into %.300s: %s", j->dir, strerror(r < 0 ? -r : errno));
		return -1;
	}
	/* The submitter's part: made here, given away once whole. */
	static const char *const own[] = {JOB_OUT, JOB_OWN};
	if ((r = write_file_at(dfd, JOB_FILTER, j->filter, j->filter_len, 0444)) < 0 ||
	    (mkdirat(dfd, JOB_OWN, 0700) < 0 || mkdirat(dfd, JOB_OUT, 0700) < 0 ? (r = -errno) : 0) < 0 ||
	    (j->n_in && (mkdirat(dfd, JOB_INPUTS, 0700) < 0 || fchmodat(dfd, JOB_INPUTS, 0755, 0) < 0))) {
		snprintf(why, len, "cannot write into %.300s: %s", j->dir, strerror(r < 0 ? -r : errno));
		return -1;
	}
	for (int i = 0; i < j->n_in; i++) {
		char p[TASK_NAME_MAX + 16], q[TASK_NAME_MAX + 32];
		const struct sj_input *in = &j->in[i];
		snprintf(p, sizeof p, JOB_INPUTS "/%s", in->id);
		if (mkdirat(dfd, p, 0700) < 0 || fchmodat(dfd, p, 0755, 0) < 0) {
			snprintf(why, len, "cannot make %.300s/%.200s: %s", j->dir, p, strerror(errno));
			return -1;
		}
		/* The copies, filled by the submitter (stage_fill). */
		snprintf(q, sizeof q, "%s/out", p);
		if (in->out_fd >= 0 && (mkdirat(dfd, q, 0700) < 0 ||
					(j->as_user && fchownat(dfd, q, uid, gid, AT_SYMLINK_NOFOLLOW) < 0))) {
			snprintf(why, len, "cannot make %.300s/%.200s: %s", j->dir, q, strerror(errno));
			return -1;
		}
		snprintf(q, sizeof q, "%s/stdout", p);
		int sfd = in->stdout_fd < 0 ? -2
			  : openat(dfd, q, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (sfd == -1 || (sfd >= 0 && j->as_user && fchown(sfd, uid, gid) < 0)) {
			snprintf(why, len, "cannot make %.300s/%.200s: %s", j->dir, q, strerror(errno));
			if (sfd >= 0)
				close(sfd);
			return -1;
		}
		if (sfd >= 0)
			close(sfd);
	}
	struct stat ost;
	if (fstatat(dfd, JOB_OUT, &ost, AT_SYMLINK_NOFOLLOW) < 0) {
		snprintf(why, len, "cannot make %.300s/" JOB_OUT ": %s", j->dir, strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < ARRAY_SIZE(own) && j->as_user; i++)
		if (fchownat(dfd, own[i], uid, gid, AT_SYMLINK_NOFOLLOW) < 0) {
			snprintf(why, len, "cannot give %.300s/%s to uid %u: %s", j->dir, own[i], (unsigned)uid,
				 strerror(errno));
			return -1;
		}
	char ino[96];
	int il = snprintf(ino, sizeof ino, "ino%c%d%c%llu", 0, j->out_target, 0,
			  (unsigned long long)ost.st_ino);
	_cleanup_close_ int lfd = openat(dfd, JOB_LAUNCH, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400);
	bool wrote = lfd >= 0 && fchmod(lfd, 0444) == 0 && write_all(lfd, j->launch, j->launch_len) == 0 &&
		     write_all(lfd, ino, (size_t)il + 1) == 0;
	for (size_t i = 0; i < j->reals.n && wrote; i++)
		wrote = write_all(lfd, j->reals.v[i], strlen(j->reals.v[i]) + 1) == 0;
	if (!wrote) {
		snprintf(why, len, "cannot write %.300s/" JOB_LAUNCH ": %s", j->dir, strerror(errno));
		return -1;
	}
	return 0;
}

/* after='s outputs, copied by the submitter into the stage's copies
 * of theirs (their reading rights, as a local run's). */
static int stage_fill(const struct sjob *j, void *arg, int msg)
{
	(void)arg;
	int r, dfd = open(j->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return say(msg, "cannot open %s: %s", j->dir, strerror(errno));
	uint64_t kept;
	bool more;
	for (int i = 0; i < j->n_in; i++) {
		char p[PATH_MAX];
		const struct sj_input *in = &j->in[i];
		if (in->out_fd >= 0) {
			snprintf(p, sizeof p, JOB_INPUTS "/%s/out", in->id);
			int src = reopen(in->out_fd, O_RDONLY | O_DIRECTORY);
			int dst = openat(dfd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (src < 0 || dst < 0)
				return say(msg, "cannot copy the output of %s: %s", in->id, strerror(errno));
			struct outdir_copy c = {.depth_max = OUTDIR_DEPTH_MAX};
			if ((r = outdir_copy(src, dst, &c)) < 0 || c.dst_err)
				return say(msg, "cannot copy the output of %s: %s", in->id,
					   strerror(r < 0 ? -r : -c.dst_err));
			close(src);
			close(dst);
		}
		if (in->stdout_fd >= 0) {
			snprintf(p, sizeof p, JOB_INPUTS "/%s/stdout", in->id);
			int src = reopen(in->stdout_fd, O_RDONLY);
			int dst = openat(dfd, p, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
			if (src < 0 || dst < 0 || copy_fd(src, dst, 0, &kept, &more) < 0)
				return say(msg, "cannot copy the stdout of %s: %s", in->id, strerror(errno));
			close(src);
			close(dst);
		}
	}
	return 0;
}

/* What the run left in its stage, read as the submitter: the run link,
 * the status, its stdout and stderr into the claim's capture files, its
 * $KART_OUTDIR into the claim's .NAME.out. */
struct gather {
	int out_fd, err_fd, art_fd; /* the claim's files, made by the worker */
};

static int stage_read(const struct sjob *j, void *arg, int msg)
{
	const struct gather *g = arg;
	int dfd = open(j->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		say(msg, "nodir %s\n", strerror(errno));
		return 0;
	}
	char run[64] = "";
	ssize_t k = readlinkat(dfd, JOB_RUN, run, sizeof run - 1);
	run[k > 0 ? k : 0] = '\0';
	say(msg, "run %s\n", run);
	static const char *const streams[] = {JOB_STDOUT, JOB_STDERR};
	const int dst[] = {g->out_fd, g->err_fd};
	for (int i = 0; i < 2; i++) {
		int fd = openat(dfd, streams[i], O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		struct stat st;
		uint64_t kept = 0;
		bool more = false;
		if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && dst[i] >= 0)
			(void)copy_fd(fd, dst[i], j->out_cap, &kept, &more);
		if (fd >= 0)
			close(fd);
		say(msg, "%s %llu %d\n", streams[i], (unsigned long long)kept, more);
	}
	int od = openat(dfd, JOB_OUT, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (od >= 0 && g->art_fd >= 0) {
		struct outdir_copy c = {.bytes_max = j->art_bytes, .files_max = j->art_files,
					.depth_max = j->art_depth};
		(void)outdir_copy(od, g->art_fd, &c);
	}
	int sfd = openat(dfd, JOB_STATUS, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (sfd >= 0 && fstat(sfd, &st) == 0 && S_ISREG(st.st_mode)) {
		char buf[4096];
		ssize_t n = read(sfd, buf, sizeof buf - 1);
		buf[n > 0 ? n : 0] = '\0';
		say(msg, "status\n%s", buf);
	}
	return 0;
}

/* At the end, as the submitter: the contents of each directory of theirs
 * in the stage (JOB_OWN, the inputs' copies), which the worker never
 * walks (they can move anything of theirs in there). */
static void empty_own(int fd, int depth)
{
	struct stat st;
	DIR *d = fstat(fd, &st) == 0 ? fdopendir(fd) : NULL;
	if (!d) {
		close(fd);
		return;
	}
	bool mine = st.st_uid == geteuid();
	for (struct dirent *de; (de = readdir(d));) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (mine) {
			(void)rm_rf_at(dirfd(d), de->d_name);
		} else if (depth < 4) {
			int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0)
				empty_own(sub, depth + 1);
		}
	}
	closedir(d);
}

static int stage_empty(const struct sjob *j, void *arg, int msg)
{
	(void)arg;
	(void)msg;
	int dfd = open(j->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd >= 0)
		empty_own(dfd, 0);
	return 0;
}

/* Then as the worker: its own files and directories; one of anyone
 * else's is only removed empty, never walked. */
static int rm_own(int pfd, const char *name, int depth)
{
	int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && (errno == ENOTDIR || errno == ELOOP))
		return unlinkat(pfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	struct stat st;
	DIR *d = fstat(fd, &st) == 0 && st.st_uid == geteuid() && depth < 8 ? fdopendir(fd) : NULL;
	if (d) {
		for (struct dirent *de; (de = readdir(d));)
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				(void)rm_own(dirfd(d), de->d_name, depth + 1);
		closedir(d);
	} else {
		close(fd);
	}
	return unlinkat(pfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? -errno : 0;
}

/* STAGE/KEY/UID: the submitter's, made by the worker (as root: no one
 * else can make a name in STAGE/KEY, which is the worker's alone). */
static int stage_user_dir(const struct sjob *j, char *why, size_t len)
{
	char udir[PATH_MAX];
	snprintf(udir, sizeof udir, "%s", j->dir);
	*strrchr(udir, '/') = '\0';
	const char *base = strrchr(udir, '/') + 1;
	int kfd = open(slurm.stage_key, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (kfd < 0) {
		snprintf(why, len, "cannot open the stage's %.300s: %s", slurm.stage_key, strerror(errno));
		return -1;
	}
	uid_t uid = j->as_user ? j->cred.uid : geteuid();
	gid_t gid = j->as_user ? j->cred.gid : getegid();
	struct stat st;
	int r = 0;
	if (mkdirat(kfd, base, 0700) == 0) {
		if (j->as_user && fchownat(kfd, base, uid, gid, AT_SYMLINK_NOFOLLOW) < 0) {
			snprintf(why, len, "cannot give %.300s to uid %u: %s", udir, (unsigned)uid, strerror(errno));
			r = -1;
		}
	} else if (errno != EEXIST || fstatat(kfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		   !S_ISDIR(st.st_mode) || st.st_uid != uid || (st.st_mode & 077)) {
		snprintf(why, len, "%.300s is not a directory of uid %u's alone (mode 0700)", udir, (unsigned)uid);
		r = -1;
	}
	close(kfd);
	return r;
}

/* ---- submitting ------------------------------------------------------------ */

/* The claim's run record: "slurm JNAME KEY ID" (ID "-" until known),
 * durable before the job can exist, and again once its id is known. */
static int record(struct sjob *j, int *keep)
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

/* A job of this name Slurm knows, the one holding the attempt where
 * several do (a submission thought lost, then made again): its id, 0
 * if none, -1 when Slurm did not answer (why). The others are
 * cancelled: at most one of them could run the task anyway. */
static long long lookup(struct sjob *j, char *why, size_t len)
{
	char out[4096], err[1024], opt[160], user[40];
	snprintf(opt, sizeof opt, "--name=%s", j->jname);
	/* Job names are seen by every user of the cluster: only a job of
	 * the task's own user is its. */
	snprintf(user, sizeof user, "--user=%u", (unsigned)(j->as_user ? j->cred.uid : geteuid()));
	char *const sq[] = {"squeue", "-h", "-t", "all", opt, user, "-o", "%i", NULL};
	int rc = slurm_cmd(slurm.bin, sq, NULL, out, sizeof out, err, sizeof err, CMD_TIMEOUT);
	if (rc != 0) {
		oneline(err);
		snprintf(why, len, "squeue: %.600s", err[0] ? err : "failed");
		return -1;
	}
	long long ids[16];
	int n = 0;
	for (char *p = out, *e; *p && n < 16; p = e) {
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
			for (char *p = out, *e; *p && n < 16; p = e) {
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
	if (!n)
		return 0;
	/* The one that took the attempt, where one did. */
	char msg[4096];
	struct gather g = {-1, -1, -1};
	long long keep = ids[0];
	for (int i = 1; i < n; i++)
		if (ids[i] < keep)
			keep = ids[i];
	if (n > 1 && as_submitter(j, stage_read, &g, msg, sizeof msg) == 0 && strncmp(msg, "run ", 4) == 0 &&
	    atoll(msg + 4) > 0)
		keep = atoll(msg + 4);
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
	if (!j->adopt) {
		int r = record(j, rec);
		if (r < 0) {
			refuse(j, "refused", "sandbox_setup_failed",
			       "cannot record its job in the claim (user.kart): %s", strerror(-r));
			return false;
		}
		/* From here on a job may exist: any later try looks first. */
		j->adopt = true;
		if ((r = binds_shared(j, why, sizeof why)) < 0) {
			refuse(j, r == -EACCES ? "rejected" : "refused", r == -EACCES ? NULL : "sandbox_setup_failed",
			       "%s", why);
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
		int rc = j->n_in ? as_submitter(j, stage_fill, NULL, msg, sizeof msg) : 0;
		if (rc != 0) {
			refuse(j, "refused", "sandbox_setup_failed", "the stage: %s",
			       msg[0] ? msg : rc == 3 ? "cannot become the submitter" : "failed");
			return false;
		}
		return true;
	}
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
		(void)record(j, NULL);
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
	return true;
}

/* sbatch's answer for one job of the batch. */
static void submit_done(struct sjob *j, int rc, const char *out, char *err)
{
	char why[700];
	oneline(err);
	long long id = rc == 0 ? strtoll(out, NULL, 10) : 0;
	if (rc == 0 && id > 0) {
		j->id = id;
		/* Not made durable: lost with the host, the name finds it. */
		int r = record(j, NULL);
		if (r < 0)
			logmsg("%s: cannot record job %lld in the claim: %s (found again by its name)",
			       j->name, id, strerror(-r));
		j->phase = SJ_WATCH;
		return;
	}
	if (rc >= 0 && !(rc > 0 && sbatch_refused(err))) {
		/* Submitted or not: looked up by name next time. */
		snprintf(why, sizeof why, "%s: %.600s",
			 ctld_down(err) ? "slurmctld does not answer to sbatch" : "sbatch failed",
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
	for (int i = 0; i < n; i++) {
		rec[i] = -1;
		go[i] = submit_prepare(v[i], &rec[i]);
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

/* ---- watching ---------------------------------------------------------------- */

static bool state_final(const char *s)
{
	static const char *const fin[] = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT",
					  "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
					  "DEADLINE", "SPECIAL_EXIT", "REVOKED"};
	for (size_t i = 0; i < ARRAY_SIZE(fin); i++) {
		size_t l = strlen(fin[i]);
		if (strncmp(s, fin[i], l) == 0 && (s[l] == '\0' || s[l] == ' '))
			return true;
	}
	return false;
}

/* [D-]HH:MM:SS, MM:SS or SS (squeue's TimeUsed): seconds, or -1. */
static long long dur_s(const char *s)
{
	long long d = 0, v[3] = {0, 0, 0};
	int n = 0;
	const char *dash = strchr(s, '-');
	if (dash) {
		d = atoll(s);
		s = dash + 1;
	}
	for (char *e; n < 3; s = e + 1) {
		v[n++] = strtoll(s, &e, 10);
		if (*e != ':')
			break;
	}
	long long sec = n == 3 ? v[0] * 3600 + v[1] * 60 + v[2] : n == 2 ? v[0] * 60 + v[1] : v[0];
	return d * 86400 + sec;
}

/* sacct's TotalCPU ([D-][HH:]MM:SS.mmm): ms. */
static long long dur_ms(const char *s)
{
	const char *dot = strchr(s, '.');
	long long ms = dot ? atoll(dot + 1) : 0;
	return dur_s(s) * 1000 + ms;
}

/* 105328K, 12M, 3G, 1234: bytes. */
static long long rss_bytes(const char *s)
{
	char *e;
	double v = strtod(s, &e);
	if (e == s)
		return -1;
	switch (*e) {
	case 'K': v *= 1024; break;
	case 'M': v *= 1024 * 1024; break;
	case 'G': v *= 1024.0 * 1024 * 1024; break;
	case 'T': v *= 1024.0 * 1024 * 1024 * 1024; break;
	default: break;
	}
	return (long long)v;
}

/* Split line at '|' into f (n at most): how many. */
static int fields(char *line, char **f, int n)
{
	int k = 0;
	for (char *p = line; k < n;) {
		f[k++] = p;
		char *bar = strchr(p, '|');
		if (!bar)
			break;
		*bar = '\0';
		p = bar + 1;
	}
	return k;
}

static struct sjob *by_id(long long id)
{
	for (struct sjob *j = slurm.jobs; j; j = j->next)
		if (j->id == id && !j->gone)
			return j;
	return NULL;
}

/* One squeue for every job followed (a thousand ids a call at most);
 * a job it no longer knows is asked of sacct, else its stage says. */
static void poll_jobs(void)
{
	static char out[1 << 20];
	char err[2048];
	struct strv ids = {0};
	char *idlist = NULL;
	size_t len = 0;
	for (struct sjob *j = slurm.jobs; j; j = j->next)
		if (j->phase == SJ_WATCH && j->id > 0 && !j->gone && ids.n < IDS_PER_CALL)
			strv_addf(&ids, "%lld", j->id);
	if (!ids.n)
		return;
	for (size_t i = 0; i < ids.n; i++)
		len += strlen(ids.v[i]) + 1;
	idlist = xmalloc(len + 1);
	idlist[0] = '\0';
	for (size_t i = 0; i < ids.n; i++) {
		strcat(idlist, ids.v[i]);
		if (i + 1 < ids.n)
			strcat(idlist, ",");
	}
	pthread_mutex_unlock(&slurm.mu);
	char *const sq[] = {"squeue", "-h", "-t", "all", "-j", idlist, "-O",
			    "JobID:|,State:|,Reason:|,NodeList:|,Partition:|,TimeUsed:|,exit_code", NULL};
	int rc = slurm_cmd(slurm.bin, sq, NULL, out, sizeof out, err, sizeof err, CMD_TIMEOUT);
	int64_t now = now_mono_ms();
	pthread_mutex_lock(&slurm.mu);
	free(idlist);
	bool none_known = rc == 1 && strstr(err, "Invalid job id");
	if (rc != 0 && !none_known) {
		oneline(err);
		char why[700];
		snprintf(why, sizeof why, "%s: %.600s", ctld_down(err) ? "slurmctld does not answer to squeue" : "squeue failed",
			 err[0] ? err : "no answer");
		stalled(why);
		slurm.poll_every = slurm.poll_every * 2 > BACKOFF_MAX ? BACKOFF_MAX : slurm.poll_every * 2;
		strv_free(&ids);
		return;
	}
	if (!strncmp(slurm.stalled, "squeue", 6))
		unstalled();
	bool changed = false;
	/* Those it did not list: gone from slurmctld (MinJobAge after
	 * their end), or never known to this one. */
	for (size_t i = 0; i < ids.n; i++) {
		struct sjob *j = by_id(atoll(ids.v[i]));
		if (j)
			j->wstatus = -2; /* not seen yet in this answer */
	}
	char *save = NULL;
	for (char *line = none_known ? NULL : strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[7];
		if (fields(line, f, 7) < 7)
			continue;
		for (int k = 0; k < 7; k++) {
			size_t l = strlen(f[k]);
			while (l && f[k][l - 1] == ' ')
				f[k][--l] = '\0';
		}
		struct sjob *j = by_id(atoll(f[0]));
		if (!j || j->phase != SJ_WATCH)
			continue;
		if (strcmp(j->state, f[1]))
			changed = true;
		snprintf(j->state, sizeof j->state, "%s", f[1]);
		snprintf(j->reason, sizeof j->reason, "%s", f[2]);
		if (f[3][0])
			snprintf(j->nodes, sizeof j->nodes, "%s", f[3]);
		snprintf(j->partition, sizeof j->partition, "%s", f[4]);
		j->wstatus = f[6][0] && isdigit((unsigned char)f[6][0]) ? atoi(f[6]) : -1;
		if (!j->began_mono && (strcmp(f[1], "RUNNING") == 0 || state_final(f[1])) && f[3][0]) {
			long long used = dur_s(f[5]);
			j->began_mono = now - (used > 0 ? used * 1000 : 0);
			back(j, SB_BEGAN);
		}
		if (state_final(f[1])) {
			j->phase = SJ_COLLECT;
			j->ended_mono = now;
		}
	}
	for (size_t i = 0; i < ids.n; i++) {
		struct sjob *j = by_id(atoll(ids.v[i]));
		if (j && j->phase == SJ_WATCH && j->wstatus == -2) {
			/* Its stage and sacct say the rest. */
			j->wstatus = -1;
			snprintf(j->state, sizeof j->state, "%s", "UNKNOWN");
			j->phase = SJ_COLLECT;
			j->ended_mono = now;
			changed = true;
		}
	}
	strv_free(&ids);
	slurm.poll_every = changed ? POLL_MIN
			   : slurm.poll_every * 2 > slurm.pol->slurm_poll_ms ? slurm.pol->slurm_poll_ms
									    : slurm.poll_every * 2;
}

/* The attempt taken by no job (the link a job makes first), or the id
 * of the one that took it. */
static int stage_poison(const struct sjob *j, void *arg, int msg)
{
	(void)arg;
	int dfd = open(j->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || symlinkat("0", dfd, JOB_RUN) == 0)
		return 0;
	char run[64] = "";
	ssize_t k = readlinkat(dfd, JOB_RUN, run, sizeof run - 1);
	run[k > 0 ? k : 0] = '\0';
	say(msg, "%s", run);
	return 0;
}

/* Stopped (a cancel) before any submission went through, which Slurm
 * may not have said (it did not answer): the attempt is taken in its
 * stage first, so that a job of it that Slurm accepted unseen runs
 * nothing; or, where such a job took it already, that job is the one
 * stopped. Under mu. */
static void stop_unsubmitted(struct sjob *j)
{
	char msg[64];
	j->busy = true;
	pthread_mutex_unlock(&slurm.mu);
	int rc = as_submitter(j, stage_poison, NULL, msg, sizeof msg);
	pthread_mutex_lock(&slurm.mu);
	j->busy = false;
	if (j->gone) {
		let_go(j);
		return;
	}
	long long taken = rc == 0 ? atoll(msg) : 0;
	if (taken > 0) {
		j->id = taken;
		j->phase = SJ_WATCH; /* its scancel follows */
		return;
	}
	j->phase = SJ_DONE;
	back(j, SB_ENDED);
}

/* kart's signals, pauses and resumptions, as Slurm's commands. */
static bool control_one(void)
{
	for (struct sjob *j = slurm.jobs; j; j = j->next) {
		if (j->phase == SJ_SUBMIT && j->handed && j->want_stop && !j->busy && !j->gone) {
			stop_unsubmitted(j);
			return true;
		}
		if (j->gone || j->id <= 0 || j->phase != SJ_WATCH)
			continue;
		char id[32], sig[32];
		snprintf(id, sizeof id, "%lld", j->id);
		if (j->want_stop > j->sent_stop) {
			int s = j->want_stop;
			bool pending = !j->began_mono;
			j->sent_stop = s;
			pthread_mutex_unlock(&slurm.mu);
			if (s == STOP_TERM && !pending) {
				/* To the batch script alone, which is the launcher:
				 * it passes it into the sandbox. */
				char *const sc[] = {"scancel", "--batch", "--signal=TERM", id, NULL};
				(void)slurm_cmd(slurm.bin, sc, NULL, NULL, 0, NULL, 0, CMD_TIMEOUT);
			} else {
				if (!pending) {
					snprintf(sig, sizeof sig, "--signal=KILL");
					char *const sk[] = {"scancel", "--full", sig, id, NULL};
					(void)slurm_cmd(slurm.bin, sk, NULL, NULL, 0, NULL, 0, CMD_TIMEOUT);
				}
				char *const sc[] = {"scancel", id, NULL};
				(void)slurm_cmd(slurm.bin, sc, NULL, NULL, 0, NULL, 0, CMD_TIMEOUT);
			}
			pthread_mutex_lock(&slurm.mu);
			slurm.poll_every = POLL_MIN;
			slurm.poll_next = 0;
			return true;
		}
		if (j->want_pause) {
			int p = j->want_pause;
			bool held = j->held;
			j->want_pause = 0;
			pthread_mutex_unlock(&slurm.mu);
			char err[1024];
			char *const su[] = {"scontrol", p > 0 ? "suspend" : held ? "release" : "resume", id, NULL};
			int rc = slurm_cmd(slurm.bin, su, NULL, NULL, 0, err, sizeof err, CMD_TIMEOUT);
			bool hold = false;
			if (rc != 0 && p > 0 && strstr(err, "pending")) {
				/* Not started yet: held instead, so that it does not. */
				char *const sh[] = {"scontrol", "hold", id, NULL};
				rc = slurm_cmd(slurm.bin, sh, NULL, NULL, 0, err, sizeof err, CMD_TIMEOUT);
				hold = rc == 0;
			}
			if (rc != 0) {
				oneline(err);
				logmsg("%s: scontrol %s %s: %s", j->name, su[1], id, err);
			}
			pthread_mutex_lock(&slurm.mu);
			if (p > 0)
				j->held = hold;
			else
				j->held = false;
			return true;
		}
	}
	return false;
}

/* The end of a job: its stage, read as the submitter. */
static void collect(struct sjob *j)
{
	char p[512], msg[8192];
	j->busy = true;
	pthread_mutex_unlock(&slurm.mu);
	struct gather g = {-1, -1, -1};
	/* The claim's capture files, as a local run's (open_capture). */
	uid_t reader = spool_reader(slurm.w->sp, j->name, j->owner);
	static const enum scratch_file sf[] = {SCRATCH_STDOUT, SCRATCH_STDERR};
	int *fds[] = {&g.out_fd, &g.err_fd};
	for (int i = 0; i < 2; i++)
		if (spool_name_scratch(p, sizeof p, j->name, sf[i]) == 0 &&
		    (*fds[i] = openat(slurm.w->wdir, p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
				      0600)) >= 0 &&
		    spool_result_grant(slurm.w->sp, *fds[i], reader) < 0) {
			close(*fds[i]);
			*fds[i] = -1;
		}
	/* $KART_OUTDIR's copy: the submitter's, as backend none's. */
	if (spool_name_scratch(p, sizeof p, j->name, SCRATCH_OUT) == 0) {
		(void)rm_rf_at(slurm.w->wdir, p);
		if (mkdirat(slurm.w->wdir, p, 0700) == 0 &&
		    (!j->as_user || fchownat(slurm.w->wdir, p, j->cred.uid, j->cred.gid, AT_SYMLINK_NOFOLLOW) == 0))
			g.art_fd = openat(slurm.w->wdir, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	int rc = as_submitter(j, stage_read, &g, msg, sizeof msg);
	if (g.art_fd >= 0)
		close(g.art_fd);
	pthread_mutex_lock(&slurm.mu);
	j->busy = false;
	if (j->gone) {
		if (g.out_fd >= 0)
			close(g.out_fd);
		if (g.err_fd >= 0)
			close(g.err_fd);
		let_go(j);
		return;
	}
	long long token = 0;
	char *status = NULL;
	bool nodir = rc != 0 || strncmp(msg, "nodir", 5) == 0;
	for (char *l = msg, *nl; l && *l; l = nl) {
		nl = strchr(l, '\n');
		if (nl)
			*nl++ = '\0';
		unsigned long long b;
		int m;
		if (strncmp(l, "run ", 4) == 0)
			token = atoll(l + 4);
		else if (sscanf(l, JOB_STDOUT " %llu %d", &b, &m) == 2)
			j->out_bytes = b, j->out_trunc = m;
		else if (sscanf(l, JOB_STDERR " %llu %d", &b, &m) == 2)
			j->err_bytes = b, j->err_trunc = m;
		else if (strcmp(l, "status") == 0) {
			status = nl;
			break;
		}
	}
	if (token > 0 && token != j->id) {
		/* Another job of this attempt ran it (a submission thought
		 * lost): that one is followed from here on. */
		logmsg("%s: job %lld found the attempt taken by job %lld: following that one", j->name,
		       j->id, token);
		j->id = token;
		j->began_mono = 0;
		j->phase = SJ_WATCH;
		j->state[0] = '\0';
		if (g.out_fd >= 0)
			close(g.out_fd);
		if (g.err_fd >= 0)
			close(g.err_fd);
		return;
	}
	j->out_fd = g.out_fd;
	j->err_fd = g.err_fd;
	j->launched = status != NULL;
	if (status) {
		for (char *l = status, *nl; l && *l; l = nl) {
			nl = strchr(l, '\n');
			if (nl)
				*nl++ = '\0';
			if (strcmp(l, "--") == 0) {
				snprintf(j->report, sizeof j->report, "%s", nl ? nl : "");
				break;
			}
			sscanf(l, "start_ms=%" SCNd64, &j->start_ms);
			sscanf(l, "end_ms=%" SCNd64, &j->end_ms);
			sscanf(l, "wrapper=%d", &j->wrapper);
			sscanf(l, "memory_peak=%lld", &j->peak);
			sscanf(l, "cpu_user_us=%lld", &j->cpu_user_us);
			sscanf(l, "cpu_system_us=%lld", &j->cpu_sys_us);
			if (strncmp(l, "node=", 5) == 0 && l[5])
				snprintf(j->nodes, sizeof j->nodes, "%s", l + 5);
		}
	}
	const char *s = j->state;
	bool node_lost = strncmp(s, "NODE_FAIL", 9) == 0 || strncmp(s, "BOOT_FAIL", 9) == 0 ||
			 strncmp(s, "PREEMPTED", 9) == 0 || strncmp(s, "REVOKED", 7) == 0;
	j->end = SE_RAN;
	/* The task's own exit, not a signal of the job's end (a node that
	 * fails, a preemption: TERM, then KILL). */
	bool exited = status && j->report[0] && strstr(j->report, "exit ") && !strstr(j->report, "signal ");
	if ((node_lost && !exited) || (!status && strcmp(s, "UNKNOWN") == 0 && !nodir)) {
		/* Its node went (or Slurm lost it) before the run reported:
		 * the attempt is void, as a dead worker's. */
		j->end = SE_REQUEUE;
		snprintf(j->why, sizeof j->why, "its Slurm job %lld ended %s%s%.200s before it could report",
			 j->id, s, j->nodes[0] ? " on " : "", j->nodes);
	} else if (!status && !token && !j->sent_stop && strncmp(s, "CANCELLED", 9) != 0) {
		snprintf(j->why, sizeof j->why,
			 "Slurm job %lld ended %s%s%.40s without starting kart-launch: is the stage "
			 "shared with the nodes, kart at the same path? See %.300s/" JOB_OWN "/slurm.out",
			 j->id, s, j->nodes[0] ? " on " : "", j->nodes, j->dir);
	}
	if (slurm.accounting && j->id > 0) {
		j->phase = SJ_RECEIPT;
	} else {
		j->phase = SJ_DONE;
		back(j, SB_ENDED);
	}
}

/* sacct's record of every job that waits for it: complete once the job
 * line is the job's (not slurmdbd's placeholder) and final, with its
 * batch step's where it ran; else the wait goes on, receipt_wait at most. */
static void receipts(void)
{
	static char out[1 << 20];
	char err[1024];
	struct strv ids = {0};
	int64_t now = now_mono_ms();
	for (struct sjob *j = slurm.jobs; j; j = j->next)
		if (j->phase == SJ_RECEIPT && !j->gone && ids.n < IDS_PER_CALL)
			strv_addf(&ids, "%lld", j->id);
	if (!ids.n)
		return;
	size_t len = 0;
	for (size_t i = 0; i < ids.n; i++)
		len += strlen(ids.v[i]) + 1;
	char *idlist = xmalloc(len + 1);
	idlist[0] = '\0';
	for (size_t i = 0; i < ids.n; i++) {
		strcat(idlist, ids.v[i]);
		if (i + 1 < ids.n)
			strcat(idlist, ",");
	}
	pthread_mutex_unlock(&slurm.mu);
	char *const sa[] = {"sacct", "-n", "-P", "-j", idlist, "-o",
			    "JobID,JobName,State,ExitCode,MaxRSS,TotalCPU,ElapsedRaw,ConsumedEnergyRaw,NodeList,Partition",
			    NULL};
	int rc = slurm_cmd(slurm.bin, sa, NULL, out, sizeof out, err, sizeof err, CMD_TIMEOUT);
	pthread_mutex_lock(&slurm.mu);
	free(idlist);
	if (rc != 0 && strstr(err, "accounting storage is disabled"))
		slurm.accounting = false;
	char *save = NULL;
	for (char *line = rc == 0 ? strtok_r(out, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
		char *f[10];
		if (fields(line, f, 10) < 10)
			continue;
		char *dot = strchr(f[0], '.');
		struct sjob *j = by_id(atoll(f[0]));
		if (!j || j->phase != SJ_RECEIPT)
			continue;
		if (!dot) {
			if (strcmp(f[1], j->jname) || !state_final(f[2]))
				continue;
			j->receipt = true;
			snprintf(j->exit_code, sizeof j->exit_code, "%s", f[3]);
			j->total_cpu_ms = f[5][0] ? dur_ms(f[5]) : -1;
			j->elapsed_s = f[6][0] ? atoll(f[6]) : -1;
			if (f[7][0] && atoll(f[7]) > 0)
				j->energy_j = atoll(f[7]);
			if (!j->partition[0])
				snprintf(j->partition, sizeof j->partition, "%s", f[9]);
			/* Never started (cancelled pending): no step to wait for. */
			if (strcmp(f[8], "None assigned") == 0 || !j->began_mono)
				j->phase = SJ_DONE;
		} else if (j->receipt && strcmp(dot + 1, "batch") == 0 && state_final(f[2])) {
			long long rss = f[4][0] ? rss_bytes(f[4]) : -1;
			if (rss > j->max_rss)
				j->max_rss = rss;
			if (f[7][0] && atoll(f[7]) > 0)
				j->energy_j = atoll(f[7]);
			j->phase = SJ_DONE;
		}
		if (j->phase == SJ_DONE)
			back(j, SB_ENDED);
	}
	for (size_t i = 0; i < ids.n; i++) {
		struct sjob *j = by_id(atoll(ids.v[i]));
		if (j && j->phase == SJ_RECEIPT && now - j->ended_mono > slurm.pol->slurm_receipt_ms) {
			j->phase = SJ_DONE;
			back(j, SB_ENDED);
		}
	}
	strv_free(&ids);
}

/* Stage directories of tasks that are over, removed as their submitter. */
static bool remove_one(void)
{
	if (!slurm.rm.n)
		return false;
	char *e = slurm.rm.v[--slurm.rm.n];
	pthread_mutex_unlock(&slurm.mu);
	struct sjob j = {.as_user = false};
	unsigned uid, gid;
	int off = 0;
	char msg[64];
	if (sscanf(e, "%u %u %n", &uid, &gid, &off) >= 2 && off > 0) {
		snprintf(j.dir, sizeof j.dir, "%s", e + off);
		j.as_user = uid != geteuid();
		/* Its own directory: no supplementary group is needed. */
		j.cred = (struct run_cred){.uid = uid, .gid = gid};
		char udir[PATH_MAX];
		snprintf(udir, sizeof udir, "%s", j.dir);
		*strrchr(udir, '/') = '\0';
		_cleanup_close_ int ufd = open(udir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int r = as_submitter(&j, stage_empty, NULL, msg, sizeof msg) != 0 ? -EPERM
			: ufd < 0 ? -errno : rm_own(ufd, strrchr(j.dir, '/') + 1, 0);
		if (r < 0)
			logmsg("cannot remove the stage directory %s: %s", j.dir, strerror(-r));
	}
	free(e);
	pthread_mutex_lock(&slurm.mu);
	return true;
}

/* ---- the thread ---------------------------------------------------------------- */

/* A batch of the queue that is due (SLURM_RUNS_MAX at most), or the
 * time the next one is; submitted, and the outcome handed back. */
static bool submit_due(int64_t now, int64_t *next)
{
	struct sjob *batch[SLURM_RUNS_MAX];
	int nb = 0;
	for (struct sjob *j = slurm.jobs; j && nb < SLURM_RUNS_MAX; j = j->next) {
		if (j->phase != SJ_SUBMIT || j->gone)
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
			let_go(s);
		} else if (s->refused) {
			/* Out of the queue: refused, or given back; one the loop
			 * already runs ends so (reap: its refusal). */
			s->phase = SJ_DONE;
			back(s, s->handed ? SB_ENDED : SB_UNSPAWNED);
		} else {
			/* Submitted, or recorded and waiting for Slurm: either way
			 * the loop runs it from here (a cancel or a stop reaches
			 * it then), holding its slot. */
			if (!s->handed) {
				s->handed = true;
				back(s, SB_SUBMITTED);
			}
			if (s->phase == SJ_WATCH)
				worked = true;
			else
				failed = true;
		}
	}
	if (worked) {
		if (!failed)
			unstalled();
		slurm.poll_every = POLL_MIN;
		if (slurm.poll_next > now_mono_ms() + POLL_MIN)
			slurm.poll_next = now_mono_ms() + POLL_MIN;
	}
	/* Slurm did not take one: the queue waits, longer each time, up to
	 * a minute. */
	slurm.backoff = !failed ? 0 : !slurm.backoff ? BACKOFF_MIN
				 : slurm.backoff * 2 > BACKOFF_MAX ? BACKOFF_MAX
								    : slurm.backoff * 2;
	slurm.submit_next = failed ? now_mono_ms() + slurm.backoff : 0;
	return true;
}

/* One thing at a time, the most pressing first: kart's signals, a poll
 * that is due, a batch of submissions, an ended job's stage, sacct's
 * receipts, a stage to remove; then sleep until the next is due, or the
 * loop kicks. */
static void *thread_main(void *arg)
{
	(void)arg;
	int64_t receipt_next = 0;
	pthread_mutex_lock(&slurm.mu);
	while (!slurm.quit) {
		int64_t now = now_mono_ms(), next = 0;
		if (slurm.stopping) {
			/* Those not submitted go back to new/; one that may have
			 * a job (its record is written) stays, for the next life. */
			for (struct sjob *j = slurm.jobs; j; j = j->next)
				if (j->phase == SJ_SUBMIT && !j->gone && !j->busy && !j->handed) {
					j->phase = j->adopt ? SJ_WATCH : SJ_DONE;
					if (!j->adopt)
						refuse(j, NULL, NULL, "the worker stops");
					j->handed = j->adopt;
					back(j, j->adopt ? SB_SUBMITTED : SB_UNSPAWNED);
				}
		}
		if (control_one())
			continue;
		bool watching = false, waiting = false;
		struct sjob *c = NULL;
		for (struct sjob *j = slurm.jobs; j; j = j->next) {
			watching = watching || (j->phase == SJ_WATCH && j->id > 0 && !j->gone);
			waiting = waiting || (j->phase == SJ_RECEIPT && !j->gone);
			if (!c && j->phase == SJ_COLLECT && !j->gone)
				c = j;
		}
		if (watching && now >= slurm.poll_next) {
			poll_jobs();
			slurm.poll_next = now_mono_ms() + slurm.poll_every;
			continue;
		}
		if (submit_due(now, &next))
			continue;
		if (c) {
			collect(c);
			continue;
		}
		if (waiting && now >= receipt_next) {
			receipts();
			receipt_next = now_mono_ms() + 500;
			continue;
		}
		if (remove_one())
			continue;
		if (watching && (!next || slurm.poll_next < next))
			next = slurm.poll_next;
		if (waiting && (!next || receipt_next < next))
			next = receipt_next;
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

void slurm_thread_start(struct worker *w)
{
	slurm.w = w;
	slurm.back_tail = &slurm.back;
	slurm.poll_every = POLL_MIN;
	slurm.stalled_told = true; /* nothing to say yet */
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_destroy(&slurm.cv);
	pthread_cond_init(&slurm.cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&slurm.th, NULL, thread_main, NULL) != 0)
		die("cannot start the Slurm thread");
	thread_name(slurm.th, "slurm");
	slurm.started = true;
}

void slurm_thread_stop(void)
{
	if (!slurm.started)
		return;
	pthread_mutex_lock(&slurm.mu);
	slurm.quit = true;
	pthread_cond_signal(&slurm.cv);
	pthread_mutex_unlock(&slurm.mu);
	pthread_join(slurm.th, NULL);
	slurm.started = false;
}
