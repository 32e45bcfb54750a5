/* kart-launch - the first program of a task, inside the sandbox.
 *
 *   kart-launch --status-fd=N [--seccomp-fd=N] [--landlock=off|auto|enforce] [--tcp]
 *               [--ro PATH]... [--rw PATH]... [--rlimit-{nproc,as,cpu,core}=N]...
 *               -- PROGRAM [ARG...]
 *   kart-launch --job=DIR --job-id=ID ...   (a batch system's job: launch_job.c)
 *
 * It stays as the task's parent so that the worker learns exactly how the
 * task ended ("exit N" or "signal N" on the status fd) where bwrap would
 * only report 128+N, and what the task's tree used ("usage ..." just
 * before: bwrap's own figures are bwrap's, and it leaves without reaping
 * the namespace). The task itself inherits no descriptor but 0, 1, 2:
 * in particular not the run's lock, which is what tells recovery that a
 * run is still alive. Confinement steps that must happen inside the
 * sandbox (rlimits, capabilities, Landlock) belong here, before the fork;
 * they are in confine.c, which the worker also runs itself for backend
 * none (there is no launcher there: the task is exec'd directly). */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "confine.h"
#include "launch_job.h"

static void close_from(int lowfd)
{
	if (syscall(SYS_close_range, lowfd, ~0U, 0) == 0)
		return;
	for (int fd = lowfd; fd < 65536; fd++)
		(void)close(fd);
}

/* The worker's compiled filter, read from fd (bwrap's --seccomp reads
 * its own; this is for a launcher given --seccomp-fd). */
static int read_filter(int fd, struct sock_fprog *fp)
{
	static struct sock_filter prog[BPF_MAXINSNS];
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, (char *)prog + len, sizeof prog - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "kart-launch: seccomp: reading fd %d: %s\n", fd, strerror(errno));
			return -1;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len == sizeof prog) {
			fprintf(stderr, "kart-launch: seccomp: the filter is too long\n");
			return -1;
		}
	}
	(void)close(fd);
	if (len == 0 || len % sizeof prog[0]) {
		fprintf(stderr, "kart-launch: seccomp: a filter of %zu bytes\n", len);
		return -1;
	}
	fp->len = (unsigned short)(len / sizeof prog[0]);
	fp->filter = prog;
	return 0;
}

/* The worker's SIGTERM (a timeout, a cancel) is for the task, and all of
 * it: everything else in the sandbox's pid namespace (kill(-1) spares the
 * namespace's init and us), daemons that left the task's session
 * included. We stay, to report how the task ended. */
static volatile sig_atomic_t termed;

/* kill(-1) is for a pid namespace of the sandbox's own, where we are its
 * first process or the one after its init (bwrap); anywhere else it
 * would reach every process we may signal. */
static bool own_pid_ns(void)
{
	return getpid() <= 2;
}

static void pass_term(int sig)
{
	int e = errno;
	termed = 1;
	if (own_pid_ns())
		(void)kill(-1, sig);
	errno = e;
}

/* The task is over: what is left of its tree (daemons, orphans, which
 * came to us as the subreaper) is killed, as the namespace's end would
 * kill it a moment later, and reaped, so that RUSAGE_CHILDREN counts
 * them. Bounded: a process stuck in the kernel is not waited for. */
static void reap_rest(void)
{
	if (own_pid_ns())
		(void)kill(-1, SIGKILL); /* as pass_term: spares init and us */
	for (int i = 0; i < 500; i++) {
		pid_t p;
		while ((p = waitpid(-1, NULL, WNOHANG)) > 0)
			;
		if (p < 0 && errno != EINTR)
			return; /* ECHILD: all reaped */
		nanosleep(&(struct timespec){0, 2000000}, NULL);
	}
}

/* "usage USER_US SYSTEM_US MAXRSS_KB READ_BYTES WRITE_BYTES": the reaped
 * tree's (getrusage), I/O from our /proc/self/io, which the kernel
 * grows by each reaped child's; "-" where unknown. */
static void say_usage(int status_fd, int io_fd, const struct proc_io *io0)
{
	struct rusage ru;
	struct proc_io io1;
	char rd[24] = "-", wr[24] = "-", msg[160];
	if (getrusage(RUSAGE_CHILDREN, &ru) < 0)
		return;
	if (io_fd >= 0 && io0->read_bytes >= 0 && proc_io_read(io_fd, &io1) == 0) {
		long long r = io1.read_bytes - io0->read_bytes, w = io1.write_bytes - io0->write_bytes;
		snprintf(rd, sizeof rd, "%lld", r > 0 ? r : 0);
		snprintf(wr, sizeof wr, "%lld", w > 0 ? w : 0);
	}
	snprintf(msg, sizeof msg, "usage %lld %lld %ld %s %s\n",
		 (long long)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec,
		 (long long)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec, ru.ru_maxrss, rd, wr);
	confine_say(status_fd, msg);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strncmp(argv[1], "--job=", 6) == 0)
		return launch_job_main(argc, argv);
	struct confine c;
	char err[256];
	if (confine_parse(argc, argv, &c, err, sizeof err) < 0) {
		fprintf(stderr, "kart-launch: %s\n", err);
		return 127;
	}
	sigset_t all;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	signal(SIGPIPE, SIG_DFL);

	struct sock_fprog fp;
	if (c.seccomp_fd >= 0 && read_filter(c.seccomp_fd, &fp) < 0)
		return 127;
	/* Opened before Landlock, which may not list /proc; read again
	 * after the task (each read of it is current). */
	int io_fd = open("/proc/self/io", O_RDONLY | O_CLOEXEC);
	struct proc_io io0 = {-1, -1};
	if (io_fd >= 0 && proc_io_read(io_fd, &io0) < 0)
		io0.read_bytes = -1;
	/* Orphans of the task's tree come to us, to be reaped and counted. */
	(void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	/* It confines the launcher too, which from here on only forks,
	 * waits and reports. */
	int abi = c.ll_mode == LL_MODE_OFF ? 0 : ll_abi();
	if (confine_apply(&c, abi, c.seccomp_fd >= 0 ? &fp : NULL, "kart-launch") < 0)
		return 127;
	char **prog = c.prog;
	int status_fd = c.status_fd;
	confine_free(&c);
	/* The task runs as our uid: without this it could open
	 * /proc/<us>/fd/3 and write its own "exit 0". The task's execve
	 * makes it dumpable again; we stay out of its reach. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
		fprintf(stderr, "kart-launch: PR_SET_DUMPABLE: %s\n", strerror(errno));
		return 127;
	}

	struct sigaction sa = {.sa_handler = pass_term, .sa_flags = SA_RESTART};
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTERM, &sa, NULL) < 0) {
		fprintf(stderr, "kart-launch: sigaction: %s\n", strerror(errno));
		return 127;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "kart-launch: fork: %s\n", strerror(errno));
		return 127;
	}
	if (pid == 0) {
		/* Die with the launcher: it is what ties the task to its run. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		/* Not pass_term: a SIGTERM before the exec ends the task. */
		signal(SIGTERM, SIG_DFL);
		if (getppid() != parent)
			_exit(127);
		close_from(3);
		execv(prog[0], prog);
		fprintf(stderr, "kart-launch: cannot run %s: %s\n", prog[0], strerror(errno));
		_exit(127);
	}
	/* The launcher keeps its descriptors: among them the run's lock,
	 * held for as long as the task lives. */
	confine_say(status_fd, "start\n");
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return 127;
	char msg[32];
	if (WIFEXITED(st))
		snprintf(msg, sizeof msg, "exit %d\n", WEXITSTATUS(st));
	else
		snprintf(msg, sizeof msg, "signal %d\n", WTERMSIG(st));
	if (termed) {
		/* A timeout or a cancel: the rest of the tree heard the
		 * SIGTERM too and gets its kill_grace to finish (a daemon's
		 * trap), which the worker's SIGKILL ends. How the task ended
		 * is said first, so that the kill cannot take it. */
		confine_say(status_fd, msg);
		while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
			;
		say_usage(status_fd, io_fd, &io0);
	} else {
		reap_rest();
		say_usage(status_fd, io_fd, &io0);
		confine_say(status_fd, msg);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
