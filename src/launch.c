/* kart-launch - the first program of a task, inside the sandbox.
 *
 *   kart-launch --status-fd=N -- PROGRAM [ARG...]
 *
 * It stays as the task's parent so that the worker learns exactly how the
 * task ended ("exit N" or "signal N" on the status fd) where bwrap would
 * only report 128+N. The task itself inherits no descriptor but 0, 1, 2:
 * in particular not the run's lock, which is what tells recovery that a
 * run is still alive. Confinement steps that must happen inside the
 * sandbox (rlimits, Landlock) belong here, before the fork. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void say(int fd, const char *msg)
{
	size_t len = strlen(msg);
	while (len) {
		ssize_t n = write(fd, msg, len);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return;
		}
		msg += n;
		len -= (size_t)n;
	}
}

static void close_from(int lowfd)
{
	if (syscall(SYS_close_range, lowfd, ~0U, 0) == 0)
		return;
	for (int fd = lowfd; fd < 65536; fd++)
		(void)close(fd);
}

int main(int argc, char **argv)
{
	int status_fd = -1, i;
	for (i = 1; i < argc; i++) {
		if (strncmp(argv[i], "--status-fd=", 12) == 0)
			status_fd = atoi(argv[i] + 12);
		else if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		} else {
			fprintf(stderr, "kart-launch: unknown option %s\n", argv[i]);
			return 127;
		}
	}
	if (i >= argc) {
		fprintf(stderr, "kart-launch: no program given\n");
		return 127;
	}
	sigset_t all;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	signal(SIGPIPE, SIG_DFL);

	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "kart-launch: fork: %s\n", strerror(errno));
		return 127;
	}
	if (pid == 0) {
		/* Die with the launcher: without a PID namespace (backend none)
		 * this is what ties the task to its run. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		close_from(3);
		execv(argv[i], argv + i);
		fprintf(stderr, "kart-launch: cannot run %s: %s\n", argv[i], strerror(errno));
		_exit(127);
	}
	/* The launcher keeps its descriptors: among them the run's lock,
	 * held for as long as the task lives. */
	if (status_fd >= 0)
		say(status_fd, "start\n");
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return 127;
	char msg[32];
	if (WIFEXITED(st))
		snprintf(msg, sizeof msg, "exit %d\n", WEXITSTATUS(st));
	else
		snprintf(msg, sizeof msg, "signal %d\n", WTERMSIG(st));
	if (status_fd >= 0)
		say(status_fd, msg);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
