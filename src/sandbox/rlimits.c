/* rlimits.c - defaults and the rlimit fallback (see rlimits.h). */
#define _GNU_SOURCE
#include "rlimits.h"

void limits_apply_defaults(struct task_spec *spec, const struct policy *pol)
{
	struct lane_limits ll;
	policy_lane_limits(pol, spec->lane, &ll);
	if (!spec->memory)
		spec->memory = ll.memory_default;
	if (!spec->pids)
		spec->pids = ll.pids_default;
	if (!spec->cpu_milli)
		spec->cpu_milli = ll.cpu_default_milli;
}

/* Where a limit came from, for the error: the task's line or the policy. */
static void origin(char *buf, size_t len, const char *item, int line)
{
	if (line > 0)
		snprintf(buf, len, "line %d: %s", line, item);
	else
		snprintf(buf, len, "%s (the policy's default)", item);
}

void limits_always(const struct task_spec *spec, const struct rl_host *host, struct rl_plan *out)
{
	memset(out, 0, sizeof *out);
	out->core0 = true;
	/* The kill grace runs on past the timeout: a backstop that fired
	 * in it would take the clean-up's time away. */
	int64_t wall = spec->timeout_s + (spec->kill_grace_s > 0 ? spec->kill_grace_s : 0);
	if (spec->timeout_s > 0)
		out->cpu_s = wall * (host->ncpu > 0 ? host->ncpu : 1) + 1;
}

/* One limit without a cgroup: its rlimit stands in where it binds. A
 * built-in default (soft, from no line of the task) is dropped where it
 * does not, and one the task asked for is refused, saying why. Returns
 * 1 to set the rlimit, 0 to leave it, -1 refused. */
static int rlimit_stands_in(bool set, bool binds, bool soft, int line, const char *item,
			    const char *why, char *err, size_t errlen)
{
	char o[64];
	if (!set || binds)
		return set;
	if (soft && line <= 0)
		return 0; /* applied only where something holds it */
	origin(o, sizeof o, item, line);
	snprintf(err, errlen, "%s needs a cgroup%s", o, why);
	return -1;
}

int limits_fallback(const struct task_spec *spec, const struct rl_host *host, struct rl_plan *out,
		    char *err, size_t errlen)
{
	int r;
	limits_always(spec, host, out);
	if (rlimit_stands_in(spec->cpu_milli, false, false, spec->line_cpu, "cpu=",
			     ": no rlimit can limit a rate", err, errlen) < 0)
		return -1;
	r = rlimit_stands_in(spec->memory, host->use_as, host->soft_memory, spec->line_memory,
			     "memory=", " (RLIMIT_AS stands in only with KART_RLIMIT_USE_AS=1)", err,
			     errlen);
	if (r < 0)
		return -1;
	if (r)
		out->as = spec->memory;
	r = rlimit_stands_in(spec->pids, host->nproc_binds, host->soft_pids, spec->line_pids, "pids=",
			     ": the task runs as root, which RLIMIT_NPROC does not bind", err, errlen);
	if (r < 0)
		return -1;
	if (r)
		out->nproc = spec->pids;
	return 0;
}

void limits_launch_opts(const struct rl_plan *p, struct strv *opts)
{
	if (p->nproc)
		strv_addf(opts, "--rlimit-nproc=%lld", (long long)p->nproc);
	if (p->as)
		strv_addf(opts, "--rlimit-as=%llu", (unsigned long long)p->as);
	if (p->cpu_s)
		strv_addf(opts, "--rlimit-cpu=%lld", (long long)p->cpu_s);
	if (p->core0)
		strv_add(opts, "--rlimit-core=0");
	if (p->nofile)
		strv_addf(opts, "--rlimit-nofile=%llu", (unsigned long long)p->nofile);
}
