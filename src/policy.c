/* policy.c - the effective policy: safe defaults, the host's capacity as
 * ceilings, then kart.conf (policy_conf.c), then KART_* environment
 * overrides. A bad override is an error naming the variable, never a
 * silent fallback. Then what the worker asks of it, and its JSON. */
#define _GNU_SOURCE
#include "policy_int.h"

#include <limits.h>
#include <fcntl.h>
#include <pwd.h>
#include <grp.h>
#include <jansson.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "util.h"

#include "config.h" /* LIBEXECDIR, written by the Makefile */

const char *backend_name(enum backend b)
{
	return b == BACKEND_NONE ? "none" : b == BACKEND_CONTAINER ? "container" : "bwrap";
}

int backend_parse(const char *s)
{
	if (strcmp(s, "bwrap") == 0)
		return BACKEND_BWRAP;
	if (strcmp(s, "none") == 0)
		return BACKEND_NONE;
	if (strcmp(s, "container") == 0)
		return BACKEND_CONTAINER;
	return -1;
}

const char *cgroup_use_name(enum cgroup_use c)
{
	return c == CGROUP_REQUIRE ? "require" : c == CGROUP_OFF ? "off" : "auto";
}

int cgroup_use_parse(const char *v, enum cgroup_use *out)
{
	if (strcmp(v, "auto") == 0)
		*out = CGROUP_AUTO;
	else if (strcmp(v, "require") == 0)
		*out = CGROUP_REQUIRE;
	else if (strcmp(v, "off") == 0)
		*out = CGROUP_OFF;
	else
		return -1;
	return 0;
}

void find_libexec(const char *name, char *out, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			/* Beside the binary: a build tree, or a bin/ that holds both. */
			if (pathfmt(out, len, "%s/%s", self, name) == 0 && access(out, X_OK) == 0)
				return;
		}
	}
	if (pathfmt(out, len, "%s/%s", LIBEXECDIR, name) < 0)
		out[0] = '\0';
}

const char *plist_next(const struct plist *l, const char *prev)
{
	const char *p = prev ? prev + strlen(prev) + 1 : l->buf;
	if (!l->n || p >= l->buf + sizeof l->buf || !*p)
		return NULL;
	return p;
}

bool plist_has(const struct plist *l, const char *s)
{
	for (const char *e = NULL; (e = plist_next(l, e));)
		if (strcmp(e, s) == 0)
			return true;
	return false;
}

void policy_lane_limits(const struct policy *pol, int lane, struct lane_limits *out)
{
	const struct lane_limits *l = &pol->lane[lane ? 1 : 0];
	out->memory_default = l->memory_default ? l->memory_default : pol->memory_default;
	out->memory_max = l->memory_max ? l->memory_max : pol->memory_max;
	out->pids_default = l->pids_default ? l->pids_default : pol->pids_default;
	out->pids_max = l->pids_max ? l->pids_max : pol->pids_max;
	out->cpu_default_milli = l->cpu_default_milli ? l->cpu_default_milli : pol->cpu_default_milli;
	out->cpu_max_milli = l->cpu_max_milli ? l->cpu_max_milli : pol->cpu_max_milli;
}

void policy_env_names(const struct policy *pol,
		      void (*fn)(const char *name, const char *where, void *arg), void *arg)
{
	for (const char *e = NULL; (e = plist_next(&pol->env_pass, e));)
		fn(e, "[sandbox] env_pass", arg);
	for (const char *e = NULL; (e = plist_next(&pol->cred_env, e));)
		fn(e, "[network] cred_env", arg);
	for (int i = 0; i < pol->n_kinds; i++)
		for (int j = 0; j < pol->kinds[i].n_cred; j++)
			fn(pol->kinds[i].cred[j], "[kind] cred", arg);
}

static bool uid_in_groups(uid_t uid, const gid_t *gids, int ngids);

bool policy_net_allowed(const struct policy *pol, uid_t uid)
{
	if (pol->net_all)
		return true;
	for (int i = 0; i < pol->n_net_uids; i++)
		if (pol->net_uids[i] == uid)
			return true;
	return uid_in_groups(uid, pol->net_gids, pol->n_net_gids);
}

bool policy_priority_allowed(const struct policy *pol, uid_t uid)
{
	if (uid == 0)
		return true;
	for (int i = 0; i < pol->n_prio_uids; i++)
		if (pol->prio_uids[i] == uid)
			return true;
	return uid_in_groups(uid, pol->prio_gids, pol->n_prio_gids);
}

static bool uid_in_groups(uid_t uid, const gid_t *gids, int ngids)
{
	if (ngids == 0)
		return false;
	/* The submitter's groups, as the system database has them now. */
	struct passwd pw, *pp = NULL;
	char buf[4096];
	if (getpwuid_r(uid, &pw, buf, sizeof buf, &pp) != 0 || !pp)
		return false;
	gid_t groups[256];
	int n = ARRAY_SIZE(groups);
	if (getgrouplist(pp->pw_name, pp->pw_gid, groups, &n) < 0)
		n = ARRAY_SIZE(groups); /* more than that: check the first ones */
	for (int i = 0; i < n; i++)
		for (int j = 0; j < ngids; j++)
			if (groups[i] == gids[j])
				return true;
	return false;
}
