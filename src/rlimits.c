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

int limits_fallback(const struct task_spec *spec, const struct rl_host *host, struct rl_plan *out,
		    char *err, size_t errlen)
{
	char o[64];
	limits_always(spec, host, out);
	if (spec->cpu_milli) {
		origin(o, sizeof o, "cpu=", spec->line_cpu);
		snprintf(err, errlen, "%s needs a cgroup: no rlimit can limit a rate", o);
		return -1;
	}
	if (spec->memory && !host->use_as && host->soft_memory && spec->line_memory <= 0) {
		/* a built-in default: applied only where something holds it */
	} else if (spec->memory) {
		if (!host->use_as) {
			origin(o, sizeof o, "memory=", spec->line_memory);
			snprintf(err, errlen,
				 "%s needs a cgroup (RLIMIT_AS stands in only with KART_RLIMIT_USE_AS=1)",
				 o);
			return -1;
		}
		out->as = spec->memory;
	}
	if (spec->pids && !host->nproc_binds && host->soft_pids && spec->line_pids <= 0) {
		/* as above */
	} else if (spec->pids) {
		if (!host->nproc_binds) {
			origin(o, sizeof o, "pids=", spec->line_pids);
			snprintf(err, errlen,
				 "%s needs a cgroup: the task runs as root, which RLIMIT_NPROC does not bind",
				 o);
			return -1;
		}
		out->nproc = spec->pids;
	}
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
