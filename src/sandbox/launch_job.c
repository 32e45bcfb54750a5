/* launch_job.c - kart-launch --job=DIR: a task's run as the first
 * program of a batch system's job, on one of its nodes, as the submitter.
 *
 *   kart-launch --job=DIR --stage-owner=UID --job-id=ID [--node=NAME] [--env=NAME]...
 *
 * The worker left in DIR (its stage, on a filesystem the nodes share)
 * the sandbox's command line and environment and the files it binds
 * (DIR/launch: NUL-separated "job NAME", "fd N MODE PATH", "real N PATH",
 * "arg VALUE", "env NAME=VALUE" records); this runs it as the worker
 * would have, with $KART_OUTDIR in DIR/out, the task's stdout and stderr
 * in DIR/job, and says how it went in DIR/job/status. DIR and what it
 * reads there are the worker's (UID's, from the batch script, which only
 * Slurm holds): the submitter this runs as writes only DIR/out and
 * DIR/job, and can rename DIR among their own stage directories, so DIR
 * is refused unless UID owns it and no one else can write it, and launch
 * names this very DIR; everything else is opened from DIR's descriptor
 * through directories of UID's alone (no inode number is compared: a
 * shared filesystem may number them its own way on each host), and bwrap
 * binds descriptors.
 *
 * Once per attempt, whatever the batch system does: its first act is the
 * link DIR/run -> ID, made atomically; a job that finds it made (a
 * second submission whose first was thought lost, a requeue) runs
 * nothing. The batch system sends its SIGTERM (a time limit, a cancel)
 * to the job's first program only: this passes it to the launcher in
 * the sandbox, which passes it to everything there, as the worker does
 * locally. The job's cgroup is gone once the job ends, so its memory
 * peak and CPU time are read here, last. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launch_job.h"
#include "proctree.h"
#include "sandbox.h"

#define LAUNCH_MAX (1 << 20)
#define FDS_MAX 96
#define HIGH_FD 200 /* the files to hand down are opened above every target */

static volatile sig_atomic_t got_term;

static void on_term(int sig)
{
	(void)sig;
	got_term = 1;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int fail(const char *what, int e)
{
	fprintf(stderr, "kart-launch: %s: %s\n", what, strerror(e));
	return 127;
}

/* Of the worker's making: owned by owner, of type fmt, writable by no
 * one else. */
static bool worker_s(const struct stat *st, unsigned long owner, mode_t fmt)
{
	return (st->st_mode & S_IFMT) == fmt && st->st_uid == owner && !(st->st_mode & 022);
}

/* A small file of DIR, the worker's, NUL-terminated: its length, or
 * -errno (-EPERM: not the worker's). */
static ssize_t read_at(int dfd, const char *name, unsigned long owner, char *buf, size_t len)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0 || !worker_s(&st, owner, S_IFREG)) {
		close(fd);
		return -EPERM;
	}
	size_t n = 0;
	while (n < len - 1) {
		ssize_t k = read(fd, buf + n, len - 1 - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	close(fd);
	buf[n] = '\0';
	return (ssize_t)n;
}

/* PATH, relative to DIR, opened through directories of the worker's
 * alone (owner's, writable by no one else): the submitter can rename
 * nothing on the way, so the name leads to what the worker made there.
 * -EPERM: a directory on the way is not the worker's. */
static int open_below(int dfd, const char *path, int flags, unsigned long owner)
{
	char buf[PATH_MAX], *p = buf, *slash;
	if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
		return -ENAMETOOLONG;
	int cur = dfd, e = 0;
	while ((slash = strchr(p, '/'))) {
		*slash = '\0';
		struct stat st;
		int next = openat(cur, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		e = next < 0 ? -errno : fstat(next, &st) < 0 ? -errno : worker_s(&st, owner, S_IFDIR) ? 0 : -EPERM;
		if (cur != dfd)
			close(cur);
		cur = next;
		if (e < 0) {
			if (next >= 0)
				close(next);
			return e;
		}
		p = slash + 1;
	}
	int fd = openat(cur, p, flags | O_NOFOLLOW);
	e = errno;
	if (cur != dfd)
		close(cur);
	return fd < 0 ? -e : fd;
}

/* A number from a cgroup file, or -1. */
static long long cg_num(const char *path, const char *key)
{
	char buf[4096];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	const char *p = buf;
	if (key) {
		size_t kl = strlen(key);
		for (p = buf; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
			if (strncmp(p, key, kl) == 0 && p[kl] == ' ')
				break;
		if (!p)
			return -1;
		p += kl + 1;
	}
	return strtoll(p, NULL, 10);
}

/* What the job's cgroup (ours, and the sandbox's: bwrap makes none)
 * counted: its memory peak in bytes and CPU times in microseconds, -1
 * each where it cannot be read (v1 or v2). */
static void cg_usage(long long *peak, long long *user_us, long long *sys_us)
{
	char cg[8192], p[PATH_MAX];
	*peak = *user_us = *sys_us = -1;
	int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, cg, sizeof cg - 1);
	close(fd);
	if (n <= 0)
		return;
	cg[n] = '\0';
	for (char *l = strtok(cg, "\n"); l; l = strtok(NULL, "\n")) {
		char *c1 = strchr(l, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		const char *ctl = c1 + 1, *path = c2 + 1;
		if (strcmp(ctl, "") == 0) { /* v2 */
			if (*peak < 0) {
				snprintf(p, sizeof p, "/sys/fs/cgroup%s/memory.peak", path);
				*peak = cg_num(p, NULL);
			}
			if (*user_us < 0) {
				snprintf(p, sizeof p, "/sys/fs/cgroup%s/cpu.stat", path);
				*user_us = cg_num(p, "user_usec");
				*sys_us = cg_num(p, "system_usec");
			}
		} else if (strcmp(ctl, "memory") == 0) {
			snprintf(p, sizeof p, "/sys/fs/cgroup/memory%s/memory.max_usage_in_bytes", path);
			*peak = cg_num(p, NULL);
		} else if (strstr(ctl, "cpuacct")) {
			static const char *const mnt[] = {"cpuacct", "cpu,cpuacct", "cpuacct,cpu"};
			for (size_t i = 0; i < sizeof mnt / sizeof *mnt && *user_us < 0; i++) {
				snprintf(p, sizeof p, "/sys/fs/cgroup/%s%s/cpuacct.usage_user", mnt[i], path);
				long long u = cg_num(p, NULL);
				snprintf(p, sizeof p, "/sys/fs/cgroup/%s%s/cpuacct.usage_sys", mnt[i], path);
				long long s = cg_num(p, NULL);
				if (u >= 0 && s >= 0)
					*user_us = u / 1000, *sys_us = s / 1000;
			}
		}
	}
}

/* One record's fields, in the NUL-separated text: NULL past its end. */
static const char *field(const char **p, const char *end)
{
	if (*p >= end)
		return NULL;
	const char *f = *p;
	*p += strlen(f) + 1;
	return f;
}

struct handed {
	int target, fd;
};

int launch_job_main(int argc, char **argv)
{
	const char *dir = NULL, *job = NULL, *node = "", *owner_arg = NULL;
	const char *pass[16];
	int npass = 0;
	for (int i = 1; i < argc; i++) {
		if (strncmp(argv[i], "--job=", 6) == 0)
			dir = argv[i] + 6;
		else if (strncmp(argv[i], "--job-id=", 9) == 0)
			job = argv[i] + 9;
		else if (strncmp(argv[i], "--stage-owner=", 14) == 0)
			owner_arg = argv[i] + 14;
		else if (strncmp(argv[i], "--node=", 7) == 0)
			node = argv[i] + 7;
		else if (strncmp(argv[i], "--env=", 6) == 0 && npass < 16)
			pass[npass++] = argv[i] + 6;
		else {
			fprintf(stderr, "kart-launch: --job: unknown option %s\n", argv[i]);
			return 127;
		}
	}
	char *oe = NULL;
	unsigned long owner = owner_arg ? strtoul(owner_arg, &oe, 10) : 0;
	if (!dir || dir[0] != '/' || !job || !*job || strchr(job, '/') || !owner_arg || !*owner_arg || *oe) {
		fprintf(stderr, "kart-launch: --job=DIR (absolute), --stage-owner=UID and --job-id=ID are needed\n");
		return 127;
	}
	/* Gone: its task was finished or given back while this job waited
	 * (a submission thought lost): nothing to run. */
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return fail(dir, errno);
	struct stat dst;
	if (fstat(dfd, &dst) < 0 || !worker_s(&dst, owner, S_IFDIR)) {
		fprintf(stderr, "kart-launch: %s is not the stage its worker (uid %lu) made, or others "
				"can write it: not run\n", dir, owner);
		return 127;
	}
	/* Once per attempt: the first job to link it runs the task. */
	if (symlinkat(job, dfd, JOB_RUN) < 0) {
		int e = errno;
		char who[64] = "";
		ssize_t k = readlinkat(dfd, JOB_RUN, who, sizeof who - 1);
		who[k > 0 ? k : 0] = '\0';
		if (e == EEXIST) {
			fprintf(stderr, "kart-launch: this attempt was started already, by job %s: "
					"not run again\n", who);
			return 0;
		}
		return fail("the stage's run link", e);
	}

	static char text[LAUNCH_MAX];
	ssize_t tl = read_at(dfd, JOB_LAUNCH, owner, text, sizeof text);
	if (tl == -EPERM) {
		fprintf(stderr, "kart-launch: %s/" JOB_LAUNCH " is not its worker's (uid %lu), or others "
				"can write it: not run\n", dir, owner);
		return 127;
	}
	if (tl < 0)
		return fail("the stage's launch file", (int)-tl);
	char *args[1024], *envs[1024];
	int na = 0, ne = 0;
	struct handed fds[FDS_MAX];
	int nfd = 0;
	/* The variables passed from the job's own environment first: the
	 * task's env= cannot set them. */
	for (int i = 0; i < npass && ne < 1000; i++) {
		const char *v = getenv(pass[i]);
		if (v && asprintf(&envs[ne], "%s=%s", pass[i], v) > 0)
			ne++;
	}
	int status[2];
	if (pipe2(status, O_CLOEXEC) < 0)
		return fail("pipe", errno);
	fds[nfd++] = (struct handed){SANDBOX_STATUS_FD, status[1]};
	struct {
		int target;
		const char *path;
	} reals[FDS_MAX];
	int nreal = 0;
	bool named = false;
	for (const char *p = text, *end = text + tl, *kind; (kind = field(&p, end));) {
		if (strcmp(kind, "job") == 0) {
			/* Another of the submitter's stage directories renamed to
			 * this one's name would run that job's task here. */
			const char *v = field(&p, end);
			if (!v || strcmp(v, strrchr(dir, '/') + 1)) {
				fprintf(stderr, "kart-launch: %s holds the stage of job %s, not its own: not run\n",
					dir, v ? v : "?");
				return 127;
			}
			named = true;
		} else if (strcmp(kind, "real") == 0) {
			const char *num = field(&p, end), *v = field(&p, end);
			if (!v || nreal >= FDS_MAX) {
				fprintf(stderr, "kart-launch: the stage's launch file is malformed\n");
				return 127;
			}
			reals[nreal].target = atoi(num);
			reals[nreal++].path = v;
		} else if (strcmp(kind, "arg") == 0 || strcmp(kind, "env") == 0) {
			const char *v = field(&p, end);
			bool arg = kind[0] == 'a';
			if (!v || (arg ? na : ne) >= 1000) {
				fprintf(stderr, "kart-launch: the stage's launch file is malformed\n");
				return 127;
			}
			if (arg)
				args[na++] = (char *)v;
			else
				envs[ne++] = (char *)v;
		} else if (strcmp(kind, "fd") == 0) {
			const char *num = field(&p, end), *mode = field(&p, end), *path = field(&p, end);
			int target = num ? atoi(num) : -1;
			if (!path || target < 3 || target >= HIGH_FD || nfd >= FDS_MAX) {
				fprintf(stderr, "kart-launch: the stage's launch file is malformed\n");
				return 127;
			}
			int flags = O_CLOEXEC | (mode[0] == 'r' ? O_RDONLY : O_PATH) |
				    (mode[0] == 'd' ? O_DIRECTORY : 0);
			int fd = path[0] == '/' ? open(path, flags) : open_below(dfd, path, flags, owner);
			if (path[0] == '/' && fd < 0)
				fd = -errno;
			if (fd == -EPERM && path[0] != '/') {
				/* Through a directory the submitter could rename in (an
				 * older worker's stage kept $KART_OUTDIR in job/). */
				fprintf(stderr, "kart-launch: %s/%s lies in a directory its worker (uid %lu) did not "
						"make, or others can write: not run\n", dir, path, owner);
				return 127;
			}
			if (fd < 0) {
				fprintf(stderr, "kart-launch: %s: %s\n", path, strerror(-fd));
				return 127;
			}
			fds[nfd++] = (struct handed){target, fd};
		} else {
			fprintf(stderr, "kart-launch: the stage's launch file is malformed\n");
			return 127;
		}
	}
	if (na == 0 || !named) {
		fprintf(stderr, "kart-launch: the stage's launch file has no command, or names no job\n");
		return 127;
	}
	/* A bind opened here again by its path: where the worker's check
	 * led, or nothing (the submitter may have put a symlink on it). */
	for (int k = 0; k < nreal; k++) {
		char proc[64], real[PATH_MAX];
		int i = 0;
		while (i < nfd && fds[i].target != reals[k].target)
			i++;
		snprintf(proc, sizeof proc, "/proc/self/fd/%d", i < nfd ? fds[i].fd : -1);
		ssize_t n = i < nfd ? readlink(proc, real, sizeof real - 1) : -1;
		real[n > 0 ? n : 0] = '\0';
		if (strcmp(real, reals[k].path)) {
			fprintf(stderr, "kart-launch: a bind leads to %s on this node, not to %s, where it "
					"was checked: not run\n", real[0] ? real : "nothing", reals[k].path);
			return 127;
		}
	}
	args[na] = NULL;
	envs[ne] = NULL;
	/* Above every target, so that handing them down clobbers none. */
	for (int i = 0; i < nfd; i++) {
		int h = fcntl(fds[i].fd, F_DUPFD_CLOEXEC, HIGH_FD);
		if (h < 0)
			return fail("fcntl", errno);
		close(fds[i].fd);
		fds[i].fd = h;
	}
	int out = openat(dfd, JOB_STDOUT, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	int err = openat(dfd, JOB_STDERR, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (out < 0 || err < 0 || in < 0)
		return fail("the stage's stdout and stderr", errno);

	struct sigaction sa = {.sa_handler = on_term};
	sigemptyset(&sa.sa_mask);
	const int terms[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2};
	for (size_t i = 0; i < sizeof terms / sizeof *terms; i++)
		sigaction(terms[i], &sa, NULL);
	int64_t start = now_ms();
	pid_t pid = fork();
	if (pid < 0)
		return fail("fork", errno);
	if (pid == 0) {
		struct sigaction dfl = {.sa_handler = SIG_DFL};
		for (size_t i = 0; i < sizeof terms / sizeof *terms; i++)
			sigaction(terms[i], &dfl, NULL);
		if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
			_exit(127);
		int top = 2;
		for (int i = 0; i < nfd; i++) {
			if (dup2(fds[i].fd, fds[i].target) < 0)
				_exit(127);
			if (fds[i].target > top)
				top = fds[i].target;
		}
		syscall(SYS_close_range, top + 1, ~0U, 0);
		execve(args[0], args, envs);
		fprintf(stderr, "kart-launch: cannot run %s: %s\n", args[0], strerror(errno));
		_exit(127);
	}
	close(status[1]);
	int st = 0;
	bool passed = false;
	for (;;) {
		if (got_term && !passed) {
			/* To the launcher in the sandbox, which passes it on; bwrap
			 * itself would die of it, and the sandbox at once. Before
			 * there is a launcher, there is nothing to be polite to. */
			passed = true;
			if (proc_signal_below(pid, strrchr(SANDBOX_LAUNCH, '/') + 1, SIGTERM) < 0)
				kill(pid, SIGKILL);
		}
		if (waitpid(pid, &st, 0) == pid)
			break;
		if (errno != EINTR)
			return fail("waitpid", errno);
	}
	int64_t end = now_ms();
	long long peak, user_us, sys_us;
	cg_usage(&peak, &user_us, &sys_us);

	/* The launcher's own lines, as the worker reads them locally. */
	char report[1024];
	size_t rn = 0;
	fcntl(status[0], F_SETFL, O_NONBLOCK);
	while (rn < sizeof report - 1) {
		ssize_t k = read(status[0], report + rn, sizeof report - 1 - rn);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		rn += (size_t)k;
	}
	report[rn] = '\0';
	int wfd = openat(dfd, JOB_OWN "/status.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (wfd < 0)
		return fail("the stage's status", errno);
	dprintf(wfd, "job=%s\nnode=%s\nstart_ms=%lld\nend_ms=%lld\nwrapper=%d\nmemory_peak=%lld\n"
		     "cpu_user_us=%lld\ncpu_system_us=%lld\n--\n%s",
		job, node, (long long)start, (long long)end, st, peak, user_us, sys_us, report);
	if (fsync(wfd) < 0 || close(wfd) < 0 || renameat(dfd, JOB_OWN "/status.tmp", dfd, JOB_STATUS) < 0)
		return fail("the stage's status", errno);
	(void)fsync(dfd);
	/* The task's own status, for the batch system's record. */
	const char *e = strstr(report, "exit ");
	const char *s = strstr(report, "signal ");
	if (e && (e == report || e[-1] == '\n'))
		return atoi(e + 5) & 0xff;
	if (s && (s == report || s[-1] == '\n'))
		return 128 + (atoi(s + 7) & 0x7f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
