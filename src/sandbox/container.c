/* container.c - host-side calls of backend container's CLI. */
#define _GNU_SOURCE
#include "container.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <linux/magic.h>
#include <unistd.h>

#include "util.h"

void container_label(const char *spool_path, const char *worker_id, char *out, size_t len)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (const unsigned char *p = (const unsigned char *)spool_path; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	char id[48];
	size_t n = 0;
	for (const char *c = worker_id; *c && n < sizeof id - 1; c++)
		id[n++] = (char)((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
					 (*c >= '0' && *c <= '9') || *c == '_' || *c == '-'
				 ? *c
				 : '_');
	id[n] = '\0';
	snprintf(out, len, "%016llx.%s", (unsigned long long)h, id);
}

void container_name(const char *label, unsigned long seq, char *out, size_t len)
{
	snprintf(out, len, "kart-%s-%d-%lu", label, (int)getpid(), seq);
}

int host_run(char *const argv[], char *out, size_t len, int timeout_ms)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		if (host_child_setup(p[1]) < 0)
			_exit(127);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	size_t n = 0;
	int64_t end = now_mono_ms() + timeout_ms;
	bool timed_out = false;
	for (;;) {
		int64_t left = end - now_mono_ms();
		if (left <= 0) {
			timed_out = true;
			break;
		}
		struct pollfd pf = {.fd = p[0], .events = POLLIN};
		int r = poll(&pf, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			timed_out = r == 0;
			break;
		}
		char buf[4096];
		ssize_t k = read(p[0], buf, sizeof buf);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		size_t take = (size_t)k;
		if (len && n + take > len - 1)
			take = len - 1 - n;
		if (out && take)
			memcpy(out + n, buf, take);
		n += take;
	}
	close(p[0]);
	if (out && len)
		out[n] = '\0';
	if (timed_out)
		(void)kill(pid, SIGKILL);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (timed_out || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

int container_oom_killed(const struct policy *pol, const char *name, int timeout_ms)
{
	char *const argv[] = {(char *)pol->container_cmd, "inspect", "--format",
			      "{{.State.OOMKilled}}", (char *)name, NULL};
	char out[64];
	if (host_run(argv, out, sizeof out, timeout_ms) != 0)
		return -1;
	if (strncmp(out, "true", 4) == 0)
		return 1;
	if (strncmp(out, "false", 5) == 0)
		return 0;
	return -1;
}

int container_sweep(const struct policy *pol, const char *label, const char *keep, int timeout_ms)
{
	char filter[256];
	snprintf(filter, sizeof filter, "label=kart.worker=%s", label);
	char *const ps[] = {(char *)pol->container_cmd, "ps", "--all", "--filter", filter,
			    "--format", "{{.Names}}", NULL};
	char out[16384];
	if (host_run(ps, out, sizeof out, timeout_ms) != 0)
		return -1;
	/* rm --force NAME...: one call for all of them. */
	struct strv rm = {0};
	strv_add(&rm, pol->container_cmd);
	strv_add(&rm, "rm");
	strv_add(&rm, "--force");
	int n = 0;
	char *save = NULL;
	for (char *c = strtok_r(out, " \t\n", &save); c; c = strtok_r(NULL, " \t\n", &save)) {
		/* Only names of ours (container_name), never an option. */
		if (strncmp(c, "kart-", 5) != 0 ||
		    strspn(c, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
			    strlen(c))
			continue;
		if (keep && strncmp(c, keep, strlen(keep)) == 0)
			continue;
		strv_add(&rm, c);
		n++;
	}
	int r = n ? host_run(rm.v, NULL, 0, timeout_ms) : 0;
	strv_free(&rm);
	return r == 0 ? n : -1;
}

void container_facts(const char *cmd, struct engine_facts *f)
{
	memset(f, 0, sizeof *f);
	char out[256] = "";
	char *const v[] = {(char *)cmd, "--version", NULL};
	if (host_run(v, out, sizeof out, 10000) == 0 &&
	    sscanf(out, "podman version %d.%d", &f->major, &f->minor) >= 1)
		f->podman = true;
	if (f->podman) {
		char *const i[] = {(char *)cmd, "info", "--format", "{{.Host.OCIRuntime.Name}}", NULL};
		if (host_run(i, out, sizeof out, 20000) == 0) {
			out[strcspn(out, "\n")] = '\0';
			(void)pathfmt(f->runtime, sizeof f->runtime, "%s", out);
		}
	}
	f->rootless = geteuid() != 0;
	struct statfs sf;
	f->cgroup_unified = statfs("/sys/fs/cgroup", &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC;
	_cleanup_free_ char *ctl = NULL;
	if (!f->cgroup_unified &&
	    read_file_at(AT_FDCWD, "/sys/fs/cgroup/unified/cgroup.controllers", 4096, &ctl, NULL) == 0) {
		ctl[strcspn(ctl, "\n")] = '\0';
		f->hybrid_controllers = ctl[0] != '\0';
		snprintf(f->hybrid_list, sizeof f->hybrid_list, "%s", ctl);
	}
	struct rlimit rl;
	f->nofile_hard = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY
				 ? (long long)rl.rlim_max : -1;
	f->nproc_hard = getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_max != RLIM_INFINITY
				? (long long)rl.rlim_max : -1;
}

/* The value of --NAME=VALUE in extra_args, or NULL. */
static const char *extra_value(const struct policy *pol, const char *prefix)
{
	const char *v = NULL;
	size_t l = strlen(prefix);
	for (const char *a = NULL; (a = plist_next(&pol->container_extra, a));)
		if (strncmp(a, prefix, l) == 0)
			v = a + l; /* the last one counts, as with the CLI */
	return v;
}

/* Podman's default ulimits, which it sets whatever the host allows
 * (containers.conf default_ulimits, rootful): a hard limit below them
 * needs CAP_SYS_RESOURCE to raise, and the container fails to start. */
#define PODMAN_NOFILE 1048576LL
#define PODMAN_NPROC 4194304LL

static int problem(struct engine_problem *out, int n, bool fatal, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int problem(struct engine_problem *out, int n, bool fatal, const char *fmt, ...)
{
	if (n >= ENGINE_PROBLEMS_MAX)
		return n;
	va_list ap;
	va_start(ap, fmt);
	out[n].fatal = fatal;
	vsnprintf(out[n].what, sizeof out[n].what, fmt, ap);
	va_end(ap);
	return n + 1;
}

/* A --ulimit=NAME=SOFT[:HARD] of extra_args: its hard value, or -1. */
static long long ulimit_hard(const struct policy *pol, const char *name)
{
	long long hard = -1;
	size_t l = strlen(name);
	for (const char *a = NULL; (a = plist_next(&pol->container_extra, a));) {
		if (strncmp(a, "--ulimit=", 9) != 0 || strncmp(a + 9, name, l) != 0 || a[9 + l] != '=')
			continue;
		const char *v = a + 9 + l + 1, *colon = strchr(v, ':');
		hard = strtoll(colon ? colon + 1 : v, NULL, 10);
	}
	return hard;
}

int container_problems(const struct engine_facts *f, const struct policy *pol,
		       struct engine_problem *out)
{
	int n = 0;
	const char *rt = extra_value(pol, "--runtime=");
	if (!rt)
		rt = f->runtime;
	static const struct {
		const char *name;
		long long podman_default;
	} lims[] = {{"nofile", PODMAN_NOFILE}, {"nproc", PODMAN_NPROC}};
	for (size_t i = 0; i < ARRAY_SIZE(lims); i++) {
		long long host = i == 0 ? f->nofile_hard : f->nproc_hard;
		long long asked = ulimit_hard(pol, lims[i].name);
		if (asked >= 0 && host >= 0 && asked > host && !f->rootless)
			n = problem(out, n, true,
				    "extra_args asks --ulimit %s up to %lld, above this host's hard limit "
				    "of %lld: raising it needs CAP_SYS_RESOURCE, and every container "
				    "fails to start",
				    lims[i].name, asked, host);
		else if (f->podman && !f->rootless && asked < 0 && host >= 0 &&
			 host < lims[i].podman_default)
			n = problem(out, n, true,
				    "podman sets %s to %lld in every container, above this host's hard "
				    "limit of %lld, which it cannot raise without CAP_SYS_RESOURCE: every "
				    "container fails to start; add --ulimit=%s=%lld:%lld to [container] "
				    "extra_args",
				    lims[i].name, lims[i].podman_default, host, lims[i].name, host, host);
	}
	if (!f->podman)
		return n;
	if (strcmp(rt, "crun") == 0 && f->hybrid_controllers)
		n = problem(out, n, true,
			    "podman's runtime crun refuses hybrid cgroups where cgroup2 holds "
			    "controllers (here: %s; \"drop all controllers from cgroupv2\"): every "
			    "container fails; use runc (--runtime=runc in [container] extra_args) or "
			    "a host with one cgroup hierarchy",
			    f->hybrid_list);
	if (f->rootless && !f->cgroup_unified)
		n = problem(out, n, true,
			    "rootless podman on cgroup v1 applies no limit (memory, pids, cpus are "
			    "ignored): tasks would run without the limits they ask; run the worker "
			    "as root, or on a cgroup v2 host");
	if (f->major > 0 && f->major < 5)
		n = problem(out, n, false,
			    "podman %d.%d reports no OOM kill (conmon writes its oom marker where "
			    "podman does not look, fixed in podman 5): a task killed at its memory "
			    "limit is called \"probably out of memory\", never certain",
			    f->major, f->minor);
	return n;
}
