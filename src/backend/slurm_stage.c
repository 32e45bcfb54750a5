/* slurm_stage.c - a Slurm job's stage directory: the worker's part
 * (JOBNAME/: the task, its launch description, the filter, the inputs'
 * directories), made by the worker, and the submitter's (the user
 * directory, out/, job/, the inputs' copies), touched only from a child
 * with the submitter's rights on files (stage_as_submitter). slurm_thread.c calls
 * these as it submits, collects and removes jobs. */
#define _GNU_SOURCE
#include "slurm.h"

#include <dirent.h>
#include <linux/capability.h>

#include "launch_job.h"


int stage_as_submitter(const struct sjob *j, child_fn *fn, void *arg, char *msg, size_t msglen)
{
	int p[2];
	msg[0] = '\0';
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		/* Her rights on files (fsuid, fsgid, groups) and no
		 * capability, but root's real and saved ids: with hers, she
		 * could SIGSTOP this child and so hold up the thread that
		 * waits for it, everyone's. */
		const struct run_cred *c = &j->cred;
		struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
		struct __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3] = {{0}};
		if (j->as_user &&
		    (syscall(SYS_setgroups, (size_t)c->ngroups, c->groups) < 0 ||
		     (syscall(SYS_setfsgid, c->gid), syscall(SYS_setfsuid, c->uid),
		      (uid_t)syscall(SYS_setfsuid, (uid_t)-1) != c->uid ||
		      (gid_t)syscall(SYS_setfsgid, (gid_t)-1) != c->gid) ||
		     (c->uid != 0 && syscall(SYS_capset, &h, none) < 0)))
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

int stage_say(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int stage_say(int fd, const char *fmt, ...)
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
 * the submitter's JOB_OUT ($KART_OUTDIR) and JOB_OWN (its output, its
 * status) in it, which she can fill but not rename, the directory being
 * the worker's. Made by the worker itself, in STAGE/KEY/UID,
 * which is the submitter's: what it opened there is checked to be what
 * it made. The launch file comes later (stage_seal). */
int stage_make(const struct sjob *j, int task_fd, char *why, size_t len)
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
	for (size_t i = 0; i < ARRAY_SIZE(own) && j->as_user; i++)
		if (fchownat(dfd, own[i], uid, gid, AT_SYMLINK_NOFOLLOW) < 0) {
			snprintf(why, len, "cannot give %.300s/%s to uid %u: %s", j->dir, own[i], (unsigned)uid,
				 strerror(errno));
			return -1;
		}
	return 0;
}

/* The stage made whole: its launch file, written aside and renamed
 * into place, after stage_make and stage_fill and before sbatch. A
 * stage without it never had a job: a worker that died making it left
 * it so (stage_sealed). */
int stage_seal(const struct sjob *j, char *why, size_t len)
{
	_cleanup_close_ int dfd = open(j->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		snprintf(why, len, "cannot open %.300s: %s", j->dir, strerror(errno));
		return -1;
	}
	_cleanup_close_ int lfd = openat(dfd, "." JOB_LAUNCH, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400);
	bool wrote = lfd >= 0 && fchmod(lfd, 0444) == 0 && write_all(lfd, j->launch, j->launch_len) == 0;
	for (size_t i = 0; i < j->reals.n && wrote; i++)
		wrote = write_all(lfd, j->reals.v[i], strlen(j->reals.v[i]) + 1) == 0;
	if (!wrote || renameat2(dfd, "." JOB_LAUNCH, dfd, JOB_LAUNCH, RENAME_NOREPLACE) < 0) {
		snprintf(why, len, "cannot write %.300s/" JOB_LAUNCH ": %s", j->dir, strerror(errno));
		return -1;
	}
	return 0;
}

bool stage_sealed(const struct sjob *j)
{
	char p[PATH_MAX];
	struct stat st;
	return pathfmt(p, sizeof p, "%s/" JOB_LAUNCH, j->dir) == 0 && lstat(p, &st) == 0;
}

/* after='s outputs, copied by the submitter into the stage's copies
 * of theirs (their reading rights, as a local run's). */
int stage_fill(const struct sjob *j, void *arg, int msg)
{
	(void)arg;
	int r, dfd = open(j->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return stage_say(msg, "cannot open %s: %s", j->dir, strerror(errno));
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
				return stage_say(msg, "cannot copy the output of %s: %s", in->id, strerror(errno));
			struct outdir_copy c = {.depth_max = OUTDIR_DEPTH_MAX};
			if ((r = outdir_copy(src, dst, &c)) < 0 || c.dst_err)
				return stage_say(msg, "cannot copy the output of %s: %s", in->id,
					   strerror(r < 0 ? -r : -c.dst_err));
			close(src);
			close(dst);
		}
		if (in->stdout_fd >= 0) {
			snprintf(p, sizeof p, JOB_INPUTS "/%s/stdout", in->id);
			int src = reopen(in->stdout_fd, O_RDONLY);
			int dst = openat(dfd, p, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
			if (src < 0 || dst < 0 || copy_fd(src, dst, 0, &kept, &more) < 0)
				return stage_say(msg, "cannot copy the stdout of %s: %s", in->id, strerror(errno));
			close(src);
			close(dst);
		}
	}
	return 0;
}

int stage_read(const struct sjob *j, void *arg, int msg)
{
	const struct gather *g = arg;
	int dfd = open(j->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		stage_say(msg, "nodir %s\n", strerror(errno));
		return 0;
	}
	char run[64] = "";
	ssize_t k = readlinkat(dfd, JOB_RUN, run, sizeof run - 1);
	run[k > 0 ? k : 0] = '\0';
	stage_say(msg, "run %s\n", run);
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
		stage_say(msg, "%s %llu %d\n", streams[i], (unsigned long long)kept, more);
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
		stage_say(msg, "status\n%s", buf);
		return 0;
	}
	/* No report: kart-launch's last word, if it left one (it refused
	 * the stage, or could not build the sandbox), for the result. */
	_cleanup_close_ int lfd = openat(dfd, JOB_OWN "/slurm.out", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (lfd >= 0 && fstat(lfd, &st) == 0 && S_ISREG(st.st_mode)) {
		char buf[8192], *said = NULL;
		ssize_t n = pread(lfd, buf, sizeof buf - 1, st.st_size > (off_t)sizeof buf - 1 ? st.st_size - (off_t)sizeof buf + 1 : 0);
		buf[n > 0 ? n : 0] = '\0';
		for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
			if (strncmp(l, "kart-launch: ", 13) == 0)
				said = l;
		if (said)
			stage_say(msg, "said %.*s\n", (int)(strcspn(said, "\n") < 300 ? strcspn(said, "\n") : 300), said);
	}
	return 0;
}

/* At the end, as the submitter: the contents of each directory of theirs
 * in the stage (JOB_OUT, JOB_OWN, the inputs' copies), which the worker never
 * walks (they can move anything of theirs in there). */
static void empty_own(int fd, int depth)
{
	struct stat st;
	DIR *d = fstat(fd, &st) == 0 ? fdopendir(fd) : NULL;
	if (!d) {
		close(fd);
		return;
	}
	/* (The child is her by its fsuid alone: stage_as_submitter.) */
	bool mine = st.st_uid == (uid_t)syscall(SYS_setfsuid, (uid_t)-1);
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

int stage_empty(const struct sjob *j, void *arg, int msg)
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
int stage_rm_own(int pfd, const char *name, int depth)
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
				(void)stage_rm_own(dirfd(d), de->d_name, depth + 1);
		closedir(d);
	} else {
		close(fd);
	}
	return unlinkat(pfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? -errno : 0;
}

int stage_remove(const struct sjob *j)
{
	char udir[PATH_MAX], msg[64];
	snprintf(udir, sizeof udir, "%s", j->dir);
	*strrchr(udir, '/') = '\0';
	_cleanup_close_ int ufd = open(udir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ufd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (stage_as_submitter(j, stage_empty, NULL, msg, sizeof msg) != 0)
		return -EPERM;
	return stage_rm_own(ufd, strrchr(j->dir, '/') + 1, 0);
}

/* STAGE/KEY/UID: the submitter's, made by the worker (as root: no one
 * else can make a name in STAGE/KEY, which is the worker's alone). */
int stage_user_dir(const struct sjob *j, char *why, size_t len)
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

