/* worker_enforce.c - what this worker can hold of a task's memory=,
 * pids= and cpu=, and which of the variables the policy passes its
 * environment lacks, published in its claim directory (cur/WID/.enforced)
 * so that kart submit can refuse, before it queues, what no live worker
 * could run, in the worker's own words (kart-spool(5)).
 *
 *   kart-enforced 1
 *   memory no memory= needs a cgroup (...); no cgroup: ...
 *   pids nonroot pids= needs a cgroup: the task runs as root, ...
 *   cpu yes
 *   lacks API_TOKEN OTHER
 *
 * yes: held for every task; nonroot: held for a task that does not run
 * as root (RLIMIT_NPROC stands in); no: refused, the rest of the line is
 * why, as the task's result would say it. */
#define _GNU_SOURCE
#include <fcntl.h>

#include "backend.h"
#include "worker_int.h"

/* The host's cgroups, probed once at the worker's start, before any task
 * has a leaf (the probe's leaves are kart.PID.0 to 3, names a task's leaf
 * could have later): a SIGHUP re-reads the policy, never the host. Not
 * probed (cgroups off at the start): nothing is said of the limits, and
 * kart submit takes the worker for able. */
static struct cg_probe probed;
static bool probed_once, started;

static void line_lacks(const char *name, const char *where, void *arg)
{
	(void)where;
	struct strv *l = arg;
	if (!getenv(name))
		strv_add(l, name);
}

/* One limit's line: item is "memory=", ... */
static void limit_line(FILE *f, const char *key, bool leaf_holds, bool rlimit, bool nonroot_only,
		       const char *item, const char *rl_why, const struct policy *pol, const char *cgerr)
{
	if (leaf_holds || (rlimit && !nonroot_only && pol->cgroup != CGROUP_REQUIRE))
		fprintf(f, "%s yes\n", key);
	else if (pol->cgroup == CGROUP_REQUIRE)
		fprintf(f, "%s no the policy requires a cgroup for every task (cgroup = require): %.180s\n",
			key, cgerr);
	else if (rlimit)
		fprintf(f, "%s nonroot %s needs a cgroup%s; no cgroup: %.120s\n", key, item, rl_why, cgerr);
	else
		fprintf(f, "%s no %s needs a cgroup%s; no cgroup: %.120s\n", key, item, rl_why, cgerr);
}

void enforce_publish(struct worker *w)
{
	const struct policy *pol = w->pol;
	if (!started && pol->cgroup != CGROUP_OFF) {
		(void)cg_probe(NULL, pol->cgroup_parent[0] ? pol->cgroup_parent : NULL, &probed);
		probed_once = true;
	}
	started = true;
	bool engine = w->be && w->be->engine_limits;
	bool leaf = pol->cgroup != CGROUP_OFF && probed.leaf;
	const char *cgerr = pol->cgroup == CGROUP_OFF ? "cgroups are off in the policy"
			    : probed.err[0]			 ? probed.err
								 : "no cgroup leaf can be made here";
	char tmp[64], text[4096];
	struct strv lacks = {0};
	policy_env_names(pol, line_lacks, &lacks);
	FILE *f = fmemopen(text, sizeof text, "w");
	if (!f)
		return;
	fprintf(f, "kart-enforced 1\n");
	if (probed_once || pol->cgroup == CGROUP_OFF || engine) {
		limit_line(f, "memory", engine || (leaf && probed.memory), pol->rlimit_as, false, "memory=",
			   " (RLIMIT_AS stands in only with KART_RLIMIT_USE_AS=1)", pol, cgerr);
		limit_line(f, "pids", engine || (leaf && probed.pids), true, true, "pids=",
			   ": the task runs as root, which RLIMIT_NPROC does not bind", pol, cgerr);
		limit_line(f, "cpu", engine || (leaf && probed.cpu), false, false, "cpu=",
			   ": no rlimit can limit a rate", pol, cgerr);
	}
	fprintf(f, "lacks");
	for (size_t i = 0; i < lacks.n; i++)
		fprintf(f, " %s", lacks.v[i]);
	fprintf(f, "\n");
	strv_free(&lacks);
	long len = ftell(f);
	fclose(f);
	if (len <= 0 || (size_t)len >= sizeof text)
		return;
	/* Whole or not at all: a reader sees the old file or the new one. */
	snprintf(tmp, sizeof tmp, "%s.%d", SPOOL_ENFORCED, (int)getpid());
	_cleanup_close_ int fd = openat(w->wdir, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || fchmod(fd, 0644) < 0 || write_all(fd, text, (size_t)len) < 0 ||
	    renameat(w->wdir, tmp, w->wdir, SPOOL_ENFORCED) < 0) {
		logmsg("cannot publish what this worker enforces (cur/%s/%s): %s", w->id, SPOOL_ENFORCED,
		       strerror(errno));
		(void)unlinkat(w->wdir, tmp, 0);
	}
}

void enforce_withdraw(struct worker *w)
{
	(void)unlinkat(w->wdir, SPOOL_ENFORCED, 0);
}
