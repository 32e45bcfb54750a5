/* bench/lat: submission-to-first-instruction latency, one task at a time.
 *
 *   lat spool SPOOL STAMP N GAP_MS PREFIX
 *	For each sample: write SPOOL/tmp/PREFIXi (#!STAMP), read
 *	CLOCK_REALTIME, rename(2) it into SPOOL/new/, wait for
 *	done/PREFIXi.json with inotify on done/ (no polling), read
 *	done/PREFIXi.stdout: the time at which the task's first instruction
 *	ran (STAMP prints it). Then GAP_MS of idleness, so that each task
 *	meets an idle worker.
 *   lat exec N GAP_MS ARGV...
 *	The same without kart: read CLOCK_REALTIME, posix_spawn ARGV (stdout
 *	a pipe; fds 3 and 4 /dev/null, as kart-launch's status and lock fds),
 *	read its stdout, the time STAMP printed.
 *   lat par N P ARGV...
 *	ARGV run N times, P at a time (fork and exec, as xargs -P P), stdout and
 *	stderr to /dev/null, fds 3 and 4 as above; prints nothing (the
 *	caller times it).
 * With LAT_FD10=FILE in the environment, each child gets FILE opened
 * afresh at descriptor 10: bwrap's --seccomp 10 reads a file to its end,
 * so that one description cannot be shared.
 *
 * Prints one line per sample: T0 STAMP (ns, CLOCK_REALTIME). A sample that
 * fails is reported on stderr and counted in the exit status. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static unsigned long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
}

static void gap(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Read all of fd (at most a line's worth is expected) and parse it. */
static int read_stamp(int fd, unsigned long long *out)
{
	char buf[128];
	size_t used = 0;
	for (;;) {
		ssize_t r = read(fd, buf + used, sizeof buf - 1 - used);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0 || (used += (size_t)r) == sizeof buf - 1)
			break;
	}
	buf[used] = '\0';
	char *end;
	errno = 0;
	*out = strtoull(buf, &end, 10);
	return (end == buf || errno) ? -1 : 0;
}

static int run_spool(const char *spool, const char *stamp, long n, long gap_ms, const char *prefix)
{
	char path[4096], body[4200];
	snprintf(path, sizeof path, "%s/tmp", spool);
	int tmpd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	snprintf(path, sizeof path, "%s/new", spool);
	int newd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	snprintf(path, sizeof path, "%s/done", spool);
	int doned = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int in = inotify_init1(IN_CLOEXEC);
	if (tmpd < 0 || newd < 0 || doned < 0 || in < 0 ||
	    inotify_add_watch(in, path, IN_MOVED_TO | IN_CREATE) < 0) {
		fprintf(stderr, "lat: %s: %s\n", spool, strerror(errno));
		return 1;
	}
	int blen = snprintf(body, sizeof body, "#!%s\n", stamp);
	int failed = 0;
	char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
	for (long i = 0; i < n; i++) {
		char name[256], want[300];
		snprintf(name, sizeof name, "%s%ld", prefix, i);
		snprintf(want, sizeof want, "%s.json", name);
		int fd = openat(tmpd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0 || write(fd, body, (size_t)blen) != blen || close(fd) < 0) {
			fprintf(stderr, "lat: tmp/%s: %s\n", name, strerror(errno));
			return 1;
		}
		unsigned long long t0 = now_ns();
		if (renameat(tmpd, name, newd, name) < 0) {
			fprintf(stderr, "lat: rename %s: %s\n", name, strerror(errno));
			return 1;
		}
		int seen = 0;
		while (!seen) {
			struct pollfd p = {in, POLLIN, 0};
			int r = poll(&p, 1, 60000);
			if (r == 0) {
				fprintf(stderr, "lat: no result for %s after 60 s\n", name);
				return 1;
			}
			if (r < 0) {
				if (errno == EINTR)
					continue;
				perror("lat: poll");
				return 1;
			}
			ssize_t len = read(in, buf, sizeof buf);
			if (len < 0 && errno == EINTR)
				continue;
			if (len < 0) {
				perror("lat: read");
				return 1;
			}
			for (char *q = buf; q < buf + len;) {
				struct inotify_event *ev = (struct inotify_event *)q;
				if (ev->mask & IN_Q_OVERFLOW)
					seen |= faccessat(doned, want, F_OK, 0) == 0;
				else if (ev->len && strcmp(ev->name, want) == 0)
					seen = 1;
				q += sizeof *ev + ev->len;
			}
		}
		snprintf(path, sizeof path, "%s.stdout", name);
		unsigned long long ts;
		fd = openat(doned, path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || read_stamp(fd, &ts) < 0) {
			fprintf(stderr, "lat: done/%s: no time stamp (task not ok?)\n", path);
			failed++;
		} else {
			printf("%llu %llu\n", t0, ts);
		}
		if (fd >= 0)
			close(fd);
		gap(gap_ms);
	}
	return failed != 0;
}

static int run_exec(long n, long gap_ms, char **argv)
{
	int failed = 0;
	for (long i = 0; i < n; i++) {
		int p[2];
		if (pipe2(p, O_CLOEXEC) < 0) {
			perror("lat: pipe");
			return 1;
		}
		posix_spawn_file_actions_t fa;
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_adddup2(&fa, p[1], 1);
		posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
		posix_spawn_file_actions_addopen(&fa, 3, "/dev/null", O_WRONLY, 0);
		posix_spawn_file_actions_addopen(&fa, 4, "/dev/null", O_RDONLY, 0);
		if (getenv("LAT_FD10"))
			posix_spawn_file_actions_addopen(&fa, 10, getenv("LAT_FD10"), O_RDONLY, 0);
		pid_t pid;
		unsigned long long t0 = now_ns();
		int e = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
		posix_spawn_file_actions_destroy(&fa);
		close(p[1]);
		if (e) {
			fprintf(stderr, "lat: %s: %s\n", argv[0], strerror(e));
			return 1;
		}
		unsigned long long ts;
		int ok = read_stamp(p[0], &ts) == 0;
		close(p[0]);
		int st;
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (!ok || !WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "lat: sample %ld: no time stamp or exit status %d\n", i, st);
			failed++;
		} else {
			printf("%llu %llu\n", t0, ts);
		}
		gap(gap_ms);
	}
	return failed != 0;
}

/* fork and exec, as xargs does (not posix_spawn's vfork: the floor is
 * what xargs -P would cost, the descriptor aside). */
static int run_par(long n, long p, char **argv)
{
	long started = 0, running = 0, failed = 0;
	const char *fd10 = getenv("LAT_FD10");
	while (started < n || running > 0) {
		if (started < n && running < p) {
			pid_t pid = fork();
			if (pid < 0) {
				perror("lat: fork");
				return 1;
			}
			if (pid == 0) {
				int nul = open("/dev/null", O_RDWR);
				if (nul < 0 || dup2(nul, 1) < 0 || dup2(nul, 2) < 0 || dup2(nul, 3) < 0 ||
				    dup2(nul, 4) < 0)
					_exit(126);
				if (fd10) {
					int f = open(fd10, O_RDONLY);
					if (f < 0 || (f != 10 && dup2(f, 10) < 0))
						_exit(126);
				}
				execv(argv[0], argv);
				_exit(127);
			}
			started++, running++;
			continue;
		}
		int st;
		if (wait(&st) < 0) {
			if (errno == EINTR)
				continue;
			perror("lat: wait");
			return 1;
		}
		running--;
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			failed++;
	}
	if (failed)
		fprintf(stderr, "lat: %ld of %ld runs failed\n", failed, n);
	return failed != 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 7 && strcmp(argv[1], "spool") == 0)
		return run_spool(argv[2], argv[3], strtol(argv[4], NULL, 10), strtol(argv[5], NULL, 10),
				 argv[6]);
	if (argc >= 5 && strcmp(argv[1], "exec") == 0)
		return run_exec(strtol(argv[2], NULL, 10), strtol(argv[3], NULL, 10), argv + 4);
	if (argc >= 5 && strcmp(argv[1], "par") == 0)
		return run_par(strtol(argv[2], NULL, 10), strtol(argv[3], NULL, 10), argv + 4);
	fprintf(stderr, "usage: %s spool SPOOL STAMP N GAP_MS PREFIX\n"
			"       %s exec N GAP_MS ARGV...\n"
			"       %s par N P ARGV...\n", argv[0], argv[0], argv[0]);
	return 2;
}
