/* proctree.c - a process below another, found by its name (proctree.h). */
#define _GNU_SOURCE
#include "proctree.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A small /proc file, NUL-terminated: its length, or -1. */
static ssize_t proc_read(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

/* The children of pid, from /proc (CONFIG_PROC_CHILDREN): up to max. */
static int children_of(pid_t pid, pid_t *out, int max)
{
	char p[64], text[4096];
	snprintf(p, sizeof p, "/proc/%d/task/%d/children", (int)pid, (int)pid);
	if (proc_read(p, text, sizeof text) < 0)
		return 0;
	int n = 0;
	for (char *s = text, *end; *s && n < max; s = end) {
		long v = strtol(s, &end, 10);
		if (end == s)
			break;
		if (v > 0)
			out[n++] = (pid_t)v;
	}
	return n;
}

static bool comm_is(pid_t pid, const char *comm)
{
	char p[64], text[64];
	snprintf(p, sizeof p, "/proc/%d/comm", (int)pid);
	ssize_t n = proc_read(p, text, sizeof text);
	if (n <= 0)
		return false;
	if (text[n - 1] == '\n')
		text[n - 1] = '\0';
	return strcmp(text, comm) == 0;
}

/* sig to pid through a pidfd, its name checked again once pinned: a pid
 * that was recycled after the look gets nothing. */
static int signal_pinned(pid_t pid, const char *comm, int sig)
{
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd < 0)
		return -errno;
	int r = !comm_is(pid, comm) ? -ESRCH
		: syscall(SYS_pidfd_send_signal, pfd, sig, NULL, 0) < 0 ? -errno : 0;
	close(pfd);
	return r;
}

int proc_signal_below(pid_t root, const char *comm, int sig)
{
	pid_t level[16], next[16];
	int n = root > 0 ? 1 : 0;
	level[0] = root;
	for (int depth = 0; depth < 3 && n; depth++) {
		int m = 0;
		for (int i = 0; i < n; i++) {
			if (depth && comm_is(level[i], comm))
				return signal_pinned(level[i], comm, sig);
			m += children_of(level[i], next + m, (int)(sizeof next / sizeof *next) - m);
		}
		memcpy(level, next, (size_t)m * sizeof *next);
		n = m;
	}
	return -ESRCH;
}
