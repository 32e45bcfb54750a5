/* rlimits.h - which of a task's memory, pids and cpu limits hold, and how:
 * the policy's per-lane defaults, and the rlimit fallback for a task that
 * runs without a cgroup leaf (no delegation, or [limits] cgroup = off).
 *
 * Pure: no I/O, unit-tested. The worker decides, kart-launch applies the
 * rlimits inside the sandbox just before the task's exec.
 *
 * What an rlimit can and cannot stand in for:
 *   pids=N    RLIMIT_NPROC = N. It counts processes per *uid*, in the
 *             task's user namespace: under bwrap that is the sandbox
 *             (its init and the launcher count too, as in a cgroup);
 *             under backend none it is every process of the worker's uid
 *             on the host. The kernel never applies it to uid 0 of the
 *             host (nor to CAP_SYS_RESOURCE/CAP_SYS_ADMIN): a task that
 *             runs as root gets no NPROC limit, so pids= is refused there.
 *   memory=N  RLIMIT_AS = N only with KART_RLIMIT_USE_AS=1 ([limits]
 *             rlimit_as = yes): address space is not memory, and runtimes
 *             that reserve large virtual areas (Go, Java, V8, ASan) fail
 *             under it. Otherwise memory= is refused.
 *   cpu=N     nothing: no rlimit is a rate. Refused.
 * Always: RLIMIT_CORE = 0; and with a timeout, RLIMIT_CPU = timeout x
 * cores as a backstop (a process cannot use more CPU than that before the
 * wall clock has run out anyway). */
#ifndef KART_RLIMITS_H
#define KART_RLIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"
#include "task.h"
#include "util.h"

/* Give a task that names no memory=, pids= or cpu= its lane's default. */
void limits_apply_defaults(struct task_spec *spec, const struct policy *pol);

/* rlimits for kart-launch; 0: not set. */
struct rl_plan {
	uint64_t as;    /* RLIMIT_AS, bytes */
	int64_t nproc;  /* RLIMIT_NPROC */
	int64_t cpu_s;  /* RLIMIT_CPU, seconds: a backstop */
	bool core0;     /* RLIMIT_CORE = 0 */
	uint64_t nofile; /* RLIMIT_NOFILE's soft limit given back: the worker's
			  * own at its start, which it raised (0: untouched) */
};

/* Where the fallback stands. */
struct rl_host {
	bool use_as;      /* RLIMIT_AS allowed for memory= */
	bool nproc_binds; /* RLIMIT_NPROC binds the uid the task runs as */
	int ncpu;
	/* The task's memory or pids is the policy's built-in default (not
	 * its own line, not kart.conf's): where nothing can hold it, it is
	 * dropped (the result's limits say null), not a reason to refuse. */
	bool soft_memory, soft_pids;
};

/* The rlimits for a task with no cgroup leaf. Returns 0, or -1 with err
 * naming the limit nothing can enforce (the task is then refused). */
int limits_fallback(const struct task_spec *spec, const struct rl_host *host, struct rl_plan *out,
		    char *err, size_t errlen);

/* The rlimits every task gets, also in a leaf (core, the CPU backstop). */
void limits_always(const struct task_spec *spec, const struct rl_host *host, struct rl_plan *out);

/* kart-launch's options for plan: --rlimit-nproc=N --rlimit-as=N
 * --rlimit-cpu=N --rlimit-core=0 --rlimit-nofile=N (each only where
 * set; nofile sets the soft limit alone). */
void limits_launch_opts(const struct rl_plan *p, struct strv *opts);

#endif
