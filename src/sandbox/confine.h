/* confine.h - the confinement steps a task gets just before its exec.
 *
 * kart-launch's command line (sandbox.c builds it), parsed, and its steps:
 * rlimits, capabilities, Landlock, seccomp. Two callers run them. Under
 * bwrap, kart-launch runs them inside the sandbox and forks the task. With
 * backend none, the worker parses the same command line and the child it
 * spawns runs the same steps and execs the task itself (run.c): one exec
 * per task instead of two.
 *
 * libc only (kart-launch is linked statically), and confine_apply makes
 * system calls only, with no allocation and no lock: it may run in a child
 * that shares the worker's memory (run.c's spawn_vm). */
#ifndef KART_CONFINE_H
#define KART_CONFINE_H

#include <stdbool.h>
#include <stddef.h>

#include "landlock.h"

struct sock_fprog;

struct confine {
	int status_fd;	/* --status-fd=N, or -1 */
	int seccomp_fd; /* --seccomp-fd=N, or -1 */
	int ll_mode;	/* --landlock=off|auto|enforce */
	bool tcp;	/* --tcp: TCP allowed through Landlock */
	struct ll_path *paths; /* --ro PATH / --rw PATH, in order */
	size_t npaths;
	struct confine_rl {
		bool set;
		unsigned long long v;
	} rl[5]; /* --rlimit-{nproc,as,cpu,core,nofile}=N */
	char **prog; /* PROGRAM [ARG...], NULL-terminated (argv's own tail) */
	/* The caller's bounding set, if it knows it (the worker reads its
	 * own once): only those capabilities are dropped, instead of asking
	 * the kernel about each of the 41 or so. */
	bool bset_known;
	unsigned long long bset;
	/* Status lines into this memory instead of status_fd (the worker's
	 * child that shares its memory until the exec: no pipe needed). */
	struct confine_mem *status_mem;
};

struct confine_mem {
	char text[240];
	unsigned short len;
};

/* Parse kart-launch's arguments (argv[0] is the launcher). 0, or -1 with
 * err naming the bad argument. c->paths is allocated: confine_free. */
int confine_parse(int argc, char **argv, struct confine *c, char *err, size_t errlen);
void confine_free(struct confine *c);

/* The steps, in order: rlimits, capabilities, Landlock (at this ABI: >0,
 * or what ll_abi returned), and the filter if one is given (under
 * no_new_privs). Status lines ("landlock ...") go to c->status_fd; a
 * failure's message goes to stderr, prefixed with who. 0, or -1: the task
 * must not run. */
int confine_apply(const struct confine *c, int abi, const struct sock_fprog *filter,
		  const char *who);

/* write(2) all of msg, on EINTR again; errors ignored. */
void confine_say(int fd, const char *msg);
/* msg as a status line: to c->status_mem if set, else to c->status_fd. */
void confine_status(const struct confine *c, const char *msg);
/* Append msg to m, as much of it as fits. */
void confine_mem_say(struct confine_mem *m, const char *msg);

/* A process's storage I/O from /proc/PID/io (the kernel's per-task I/O
 * accounting, which adds each reaped child's to its parent's): bytes it
 * made be read from storage, and written (write_bytes less the
 * cancelled_write_bytes of pages truncated before they were written). */
struct proc_io {
	long long read_bytes, write_bytes;
};
/* Read fd (an open /proc/PID/io) from its start: 0, or -1. */
int proc_io_read(int fd, struct proc_io *io);

#endif
