/* run.h - spawn one task and collect how it ended. The event loop owns
 * the descriptors registered here (pidfd, output pipes). */
#ifndef KART_RUN_H
#define KART_RUN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

struct capture {
	int pipe;  /* read end, -1 once at EOF */
	int file;  /* destination in the claim directory */
	uint64_t bytes, cap;
	bool truncated;
};

struct run {
	pid_t pid;
	int pidfd;
	int status_pipe; /* the launcher's "start" / "exit N" / "signal N" */
	bool pgroup;     /* killable as a process group (backend none) */
	struct capture out, err;
};

/* Everything the child needs is prepared by the caller: argv/envp, the
 * claim directory, the task file's name in it (for the run lock), the
 * output files and the working directory (NULL: stay). */
int run_spawn(struct run *r, char *const argv[], char *const envp[], int wdir, const char *name,
	      int out_file, int err_file, uint64_t cap, const char *cwd, bool own_pgroup);

/* An optional step between fork and exec: the child waits on a pipe
 * until fn(child's pid) has run in the parent, so that the task runs not
 * one instruction of its own before, e.g., it is in its cgroup. */
struct run_join {
	int (*fn)(pid_t pid, void *arg); /* 0 or -errno */
	void *arg;
	int err; /* out: fn's error, when run_spawn_join returns -ECANCELED */
};
/* run_spawn with a join step (join NULL: exactly run_spawn). If the
 * step fails the child is killed and reaped before it execs, and the
 * result is -ECANCELED with join->err set. */
int run_spawn_join(struct run *r, char *const argv[], char *const envp[], int wdir,
		   const char *name, int out_file, int err_file, uint64_t cap, const char *cwd,
		   bool own_pgroup, struct run_join *join);

/* Move what is readable from a capture pipe into its file, up to the
 * cap; beyond it, read and discard. Returns 0, or 1 at EOF. */
int capture_pump(struct capture *c);

void run_kill(struct run *r);

struct run_end {
	bool started;      /* the launcher ran: the sandbox was built */
	bool exited;       /* the task exited (exit_code valid) */
	int exit_code;
	int signal;        /* the task was killed by this signal */
	int wrapper_status; /* raw wait status of the spawned process */
	struct rusage ru;
};

/* Reap the exited process and read the launcher's report. */
int run_collect(struct run *r, struct run_end *end);

void run_close(struct run *r);

#endif
