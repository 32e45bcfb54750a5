/* run.h - spawn one task and collect how it ended. The event loop owns
 * the descriptors registered here (pidfd, output pipes). */
#ifndef KART_RUN_H
#define KART_RUN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "confine.h"

struct capture {
	int pipe;  /* read end, -1 once at EOF */
	int file;  /* destination in the claim directory */
	uint64_t bytes, cap;
	bool truncated;
	/* The file refused a write (ENOSPC, EDQUOT, EIO): the errno, and
	 * what was read and dropped since. The pipe is drained all the same,
	 * so a full disk never stops or kills the task. */
	int werr;
	uint64_t lost;
};

struct run {
	pid_t pid;
	int pidfd;
	int status_pipe; /* the launcher's "start" / "exit N" / "signal N" */
	bool pgroup;     /* killable as a process group (backend none) */
	bool direct;     /* the task itself was exec'd (run_direct): its own wait status */
	struct capture out, err;
	/* A direct child that shared our memory until its exec wrote its
	 * status lines here, not into status_pipe (-1 then). */
	bool stmem_used;
	struct confine_mem stmem;
};

/* An optional step between fork and exec: the child waits on a pipe
 * until fn(child's pid) has run in the parent, so that the task runs not
 * one instruction of its own before, e.g., it is in its cgroup. */
struct run_join {
	int (*fn)(pid_t pid, void *arg); /* 0 or -errno */
	void *arg;
	int err; /* out: fn's error, when run_spawn_join returns -ECANCELED */
	/* A cgroup v2 directory to start the child in (clone3
	 * CLONE_INTO_CGROUP: no migration, whose write to cgroup.procs
	 * waits for an RCU grace period, 5-11 ms here), or -1. born (out)
	 * says it worked; fn still runs (for the v1 hierarchies) before the
	 * child goes on. */
	int cgroup_fd;
	bool born;
	/* Being born in cgroup_fd (where there is one) and joining self_fds
	 * is all the join there is: fn is not called, and the child is
	 * spawned sharing our memory (CLONE_VM|CLONE_VFORK) where that
	 * works. */
	bool born_is_enough;
	/* v1 hierarchies the child joins itself, before anything else: it
	 * writes "0" into each of these `tasks` files (cgroup.h,
	 * cg_leaf_join_fds). If one refuses, the child exits before it
	 * execs and err says why. A child that cannot share our memory is
	 * joined by fn instead. */
	const int *self_fds;
	int nself;
};
/* Who the task runs as, when the worker is root: the child takes these
 * groups, gid and uid after its descriptors and the run lock are in
 * place, before it execs. Resolved by the caller (getgrouplist is not
 * async-signal-safe). */
#define RUN_CRED_GROUPS_MAX 256
struct run_cred {
	uid_t uid;
	gid_t gid;
	int ngroups;
	gid_t groups[RUN_CRED_GROUPS_MAX];
};

/* Backend none: no launcher. The child runs kart-launch's steps itself
 * (confine.h: the same command line, parsed by the caller), then execs
 * the task, which is then our child and holds the run lock (fd 4). The
 * status pipe gets the same lines but "exit N" and "signal N": the wait
 * status is the task's own (run_collect). */
struct confine;
struct sock_fprog;
struct run_direct {
	const struct confine *c;
	int abi;			/* ll_abi(), asked once by the caller */
	const struct sock_fprog *filter; /* NULL: none */
};

/* What else the child takes: descriptors at fixed numbers from
 * fd_base on (the task's binds, SANDBOX_BIND_FD), and its umask. */
struct run_extra {
	const int *fds;
	int nfds, fd_base;
	int umask; /* -1: keep ours */
	/* join_ns: into these namespaces first (outdir.h: where the task's
	 * $KART_OUTDIR is mounted), before any descriptor is moved */
	bool join_ns;
	int userns_fd, mntns_fd;
};

/* A spawn, configured field by field and then run (minijail's way):
 * everything the child needs is prepared by the caller. Start from
 * RUN_REQ_INIT, whose descriptors are -1 ("none"); a NULL pointer is
 * "none" too. */
struct run_req {
	char *const *argv, *const *envp;
	int wdir;                        /* the claim directory */
	const char *name;                /* the task file's name in it (the run lock) */
	int out_file, err_file;          /* the capture files, or -1: made at the first byte */
	uint64_t cap;                    /* bytes kept of each stream (0: no cap) */
	const char *cwd;                 /* NULL: stay */
	bool own_pgroup;
	/* A step between fork and exec: if it fails the child is killed
	 * and reaped before it execs, and the result is -ECANCELED with
	 * join->err set. */
	struct run_join *join;
	/* A user to become. If the child cannot, it reports "setuid-failed
	 * WHAT" on the status pipe and exits 125 (run_end says so). */
	const struct run_cred *cred;
	int seccomp_fd;                  /* handed to the child as SANDBOX_SECCOMP_FD */
	int stdin_fd;                    /* -1: /dev/null */
	const struct run_direct *direct; /* NULL: exec argv; else confine, exec the task */
	const struct run_extra *extra;
};
#define RUN_REQ_INIT {.wdir = -1, .out_file = -1, .err_file = -1, .seccomp_fd = -1, .stdin_fd = -1}

int run_spawn_join(struct run *r, const struct run_req *q);

/* Move what is readable from a capture pipe into its file, up to the
 * cap; beyond it, read and discard. Returns 0, or 1 at EOF (or an
 * error). The pipe stays open: the caller takes it out of its epoll set
 * first, then capture_close()s it. Closing a descriptor does not remove
 * it from an epoll set while a forked child still holds a copy, and the
 * stale entry would name a freed task. */
int capture_pump(struct capture *c);
void capture_close(struct capture *c);

void run_kill(struct run *r);
/* The polite half of a kill: SIGTERM to a direct child's process group
 * (or to it alone). */
void run_term(struct run *r);
/* Under bwrap: SIGTERM to the launcher (the process named comm below
 * bwrap), which passes it to everything in the sandbox's pid namespace.
 * -ESRCH where it cannot be found (then only a kill is left). */
int run_term_launcher(struct run *r, const char *comm);

struct run_end {
	bool started;      /* the launcher ran: the sandbox was built */
	bool exited;       /* the task exited (exit_code valid) */
	int exit_code;
	int signal;        /* the task was killed by this signal */
	int wrapper_status; /* raw wait status of the spawned process */
	struct rusage ru;
	/* What the task's tree used as its parent saw it: kart-launch's
	 * "usage" line (by "launcher"), or a direct child's wait4 and
	 * /proc/PID/io read before it was reaped (by "process"); by NULL:
	 * no such report (the spawned process was not the task's parent,
	 * or the launcher was killed first). -1: not known. */
	struct run_use {
		const char *by;
		int64_t user_us, system_us, maxrss_kb, read_bytes, write_bytes;
	} use;
	/* The launcher's Landlock report: an ABI number, "off" or
	 * "unsupported" ("" if it said nothing). */
	char landlock[16];
	/* Set when the task did not start because a confinement step
	 * failed: "landlock_unavailable", "landlock_failed" or
	 * "setuid_failed", with the reason. */
	const char *refusal;
	char refusal_why[256];
};

/* Reap the exited process and read the launcher's report. */
int run_collect(struct run *r, struct run_end *end);
/* The launcher's report (its status lines, NUL-terminated; cut up in
 * place) into end: what run_collect reads, and a batch system's job
 * hands back in its stage. */
void run_status_parse(char *buf, struct run_end *end, bool launcher);

void run_close(struct run *r);

#endif
