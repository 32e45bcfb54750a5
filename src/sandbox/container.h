/* container.h - what backend container needs besides its command line
 * (sandbox.c): names for containers that recovery can find again, and
 * the CLI calls made on the host outside a task's run (inspect, the
 * removal of a dead worker's containers). */
#ifndef KART_CONTAINER_H
#define KART_CONTAINER_H

#include <stdbool.h>
#include <stddef.h>

#include "policy.h"

/* The label value that names one worker of one spool:
 * "<16 hex digits of the spool's path>.<worker id>", with anything in the
 * id that a label or name may not hold made '_'. */
void container_label(const char *spool_path, const char *worker_id, char *out, size_t len);

/* A fresh name for one attempt: "kart-<label>-<pid>-<seq>". */
void container_name(const char *label, unsigned long seq, char *out, size_t len);

/* CMD inspect: whether the runtime recorded an OOM kill of the
 * container. 1 yes, 0 no, -1 not known (gone, as --rm makes it, or the
 * CLI failed or took longer than timeout_ms). */
int container_oom_killed(const struct policy *pol, const char *name, int timeout_ms);

/* Kill and remove every container, running or not, that carries the
 * label kart.worker=LABEL (but those whose names start with keep, if
 * given): what is left of a dead worker's runs, before its claims run
 * again. Returns how many were removed, or -1 when the CLI could not
 * list or remove them. */
int container_sweep(const struct policy *pol, const char *label, const char *keep,
		    int timeout_ms);

/* What kart doctor learns of the engine and the host (container_facts),
 * and what it concludes (container_problems, pure, unit-tested). */
struct engine_facts {
	bool podman;             /* `CMD --version` says "podman version" */
	int major, minor;        /* its version; 0.0 if not known */
	char runtime[32];        /* podman's OCI runtime (crun, runc), "" if not known */
	bool rootless;           /* the worker is not root */
	bool cgroup_unified;     /* /sys/fs/cgroup is cgroup2 alone */
	bool hybrid_controllers; /* v1 mounted, and cgroup2 beside it holds controllers */
	char hybrid_list[128];   /* and which */
	long long nofile_hard;   /* this process's hard limits (-1: unlimited) */
	long long nproc_hard;
};
struct engine_problem {
	bool fatal; /* every task would fail, or run without what it asked */
	char what[400];
};
#define ENGINE_PROBLEMS_MAX 8

/* Ask CMD (a path) and the host. */
void container_facts(const char *cmd, struct engine_facts *f);

/* What will not work with these facts and the policy's extra_args, and
 * why: up to ENGINE_PROBLEMS_MAX into out. Returns how many. */
int container_problems(const struct engine_facts *f, const struct policy *pol,
		       struct engine_problem *out);

/* Run argv (argv[0] a path) with stdin /dev/null and stdout into out
 * (NUL-terminated, truncated to len), stderr to ours; waits at most
 * timeout_ms, then kills it. Returns its exit status (0-255), or -1. */
int host_run(char *const argv[], char *out, size_t len, int timeout_ms);

#endif
