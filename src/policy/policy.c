/* policy.c - the bottom of the policy's files: its values (backends,
 * cgroup use, lists, yes/no, variable names, paths to bind, the
 * container's command, image and denied options), checked alike for
 * kart.conf and KART_*, and what the worker asks of a loaded policy
 * (lane limits, variable names, network and priority grants). It calls
 * none of policy_kind.c, policy_conf.c, policy_load.c: they call it. */
#define _GNU_SOURCE
#include "policy_int.h"

#include <ctype.h>
#include <limits.h>
#include <pwd.h>
#include <grp.h>
#include <unistd.h>

#include "util.h"

#include "config.h" /* LIBEXECDIR, written by the Makefile */

const char *backend_name(enum backend_id b)
{
	return b == BACKEND_NONE	? "none"
	       : b == BACKEND_CONTAINER ? "container"
	       : b == BACKEND_SLURM	? "slurm"
					: "bwrap";
}

int backend_parse(const char *s)
{
	if (strcmp(s, "bwrap") == 0)
		return BACKEND_BWRAP;
	if (strcmp(s, "none") == 0)
		return BACKEND_NONE;
	if (strcmp(s, "container") == 0)
		return BACKEND_CONTAINER;
	if (strcmp(s, "slurm") == 0)
		return BACKEND_SLURM;
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

bool env_name_ok(const char *s)
{
	if (!*s || (*s >= '0' && *s <= '9'))
		return false;
	for (; *s; s++)
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
		      *s == '_'))
			return false;
	return true;
}

/* Set by the sandbox itself: a policy cannot pass or replace them. */
static bool env_name_reserved(const char *s)
{
	return strcmp(s, "PATH") == 0 || strcmp(s, "HOME") == 0 || strcmp(s, "TMPDIR") == 0 ||
	       strcmp(s, "LANG") == 0 || strncmp(s, "KART_", 5) == 0;
}

/* An absolute path with no "." or ".." component, not "/" itself. */
bool bind_path_ok(const char *s)
{
	if (s[0] != '/' || !s[1] || strlen(s) >= PATH_MAX)
		return false;
	for (const char *c = s; *c; c++)
		if (*c == '/' && c[1] == '.' && (!c[2] || c[2] == '/' || (c[2] == '.' && (!c[3] || c[3] == '/'))))
			return false;
	return true;
}


int set_plist(struct plist *l, const char *v, enum plist_kind kind, char *err, size_t errlen,
	      const char *where, const char *key)
{
	_cleanup_free_ char *copy = xstrdup(v);
	char *save = NULL;
	size_t used = 0;
	memset(l, 0, sizeof *l);
	for (char *t = strtok_r(copy, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
		if (kind == PL_PATHS && !bind_path_ok(t))
			return ERR(-1, "%s: %s: '%s' is not an absolute path (without . or .., not /)", where,
				   key, t);
		if (kind == PL_ENV && !env_name_ok(t))
			return ERR(-1, "%s: %s: '%s' is not a variable name", where, key, t);
		if (kind == PL_ENV_PAT) {
			/* A name, or a prefix and '*'. */
			size_t tl = strlen(t);
			char nm[256];
			snprintf(nm, sizeof nm, "%.*s", (int)(tl && t[tl - 1] == '*' ? tl - 1 : tl), t);
			if (tl >= sizeof nm || (nm[0] && !env_name_ok(nm)) || (!nm[0] && tl != 1))
				return ERR(-1, "%s: %s: '%s' is not a variable name (or PREFIX*)", where, key, t);
		}
		if (kind == PL_ENV && env_name_reserved(t))
			return ERR(-1, "%s: %s: '%s' is set by the sandbox itself", where, key, t);
		const char *why = kind == PL_ARGS ? container_arg_denied(t) : NULL;
		if (why)
			return ERR(-1, "%s: %s: '%s' refused: %s", where, key, t, why);
		size_t len = strlen(t) + 1;
		if (used + len + 1 > sizeof l->buf)
			return ERR(-1, "%s: %s: the list is longer than %zu bytes", where, key, sizeof l->buf - 1);
		memcpy(l->buf + used, t, len);
		used += len;
		l->n++;
	}
	return 0;
}

int parse_bool(const char *v, bool *out)
{
	static const char *const yes[] = {"yes", "true", "on", "1"}, *const no[] = {"no", "false", "off", "0"};
	for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
		if (strcmp(v, yes[i]) == 0)
			return *out = true, 0;
		if (strcmp(v, no[i]) == 0)
			return *out = false, 0;
	}
	return -1;
}

/* A word of kart.conf copied into dst: letters, digits and the
 * characters in extra only, not empty, not an option, within len. */
static int word_set(char *dst, size_t len, const char *v, const char *extra)
{
	if (!*v || v[0] == '-' || strlen(v) >= len)
		return -1;
	for (const char *c = v; *c; c++)
		if (!isalnum((unsigned char)*c) && !strchr(extra, *c))
			return -1;
	snprintf(dst, len, "%s", v);
	return 0;
}

/* The container CLI: a bare name (found in PATH when run) or an
 * absolute path; never anything a shell would read. */
int container_cmd_set(struct policy *pol, const char *v)
{
	if (v[0] != '/' && strchr(v, '/'))
		return -1;
	return word_set(pol->container_cmd, sizeof pol->container_cmd, v, "/._+-");
}

/* A Slurm name (a partition, an account): its own characters only. */
int slurm_name_set(char *dst, size_t len, const char *v)
{
	return word_set(dst, len, v, "._-");
}

/* An image reference: registry/name:tag@digest characters only. */
int container_image_set(struct policy *pol, const char *v)
{
	return word_set(pol->container_image, sizeof pol->container_image, v, "/._:@-");
}

/* The engine options that kart's own hardening depends on, by their
 * long name (docker's and podman's CLIs take no abbreviations), and why.
 * A name with a value after '=' is denied only with that value. */
static const struct {
	const char *name, *value, *why;
} denied_args[] = {
	{"privileged", NULL, "it gives the container every capability and device"},
	{"cap-add", NULL, "kart drops every capability"},
	{"security-opt", NULL, "kart sets no-new-privileges and its own seccomp profile"},
	{"network", NULL, "kart sets the network (none, or the engine's default with net)"},
	{"net", NULL, "kart sets the network (none, or the engine's default with net)"},
	{"network-alias", NULL, "kart sets the network"},
	{"add-host", NULL, "kart sets the network"},
	{"pid", NULL, "the container keeps its own PID namespace"},
	{"ipc", NULL, "the container keeps its own IPC namespace"},
	{"uts", NULL, "the container keeps its own UTS namespace"},
	{"pod", NULL, "the container shares no namespace with others"},
	{"userns", "host", "the container keeps the engine's user namespace"},
	{"cgroupns", "host", "the container keeps its own cgroup namespace"},
	{"cgroup-parent", NULL, "the engine places the container"},
	{"volume", NULL, "kart mounts only the task, its work directory and $KART_OUTDIR"},
	{"volumes-from", NULL, "kart mounts only the task, its work directory and $KART_OUTDIR"},
	{"mount", NULL, "kart mounts only the task, its work directory and $KART_OUTDIR"},
	{"tmpfs", NULL, "kart mounts only the task, its work directory and $KART_OUTDIR"},
	{"read-only", NULL, "the root stays read-only"},
	{"read-only-tmpfs", NULL, "the root stays read-only"},
	{"rootfs", NULL, "the root is the policy's image"},
	{"image-volume", NULL, "kart mounts only the task, its work directory and $KART_OUTDIR"},
	{"device", NULL, "the container gets no host device"},
	{"device-cgroup-rule", NULL, "the container gets no host device"},
	{"gpus", NULL, "the container gets no host device"},
	{"user", NULL, "the task runs as its submitter"},
	{"group-add", NULL, "the task runs as its submitter"},
	{"passwd-entry", NULL, "the task runs as its submitter"},
	{"memory", NULL, "the task's limits are kart's"},
	{"memory-swap", NULL, "the task's limits are kart's"},
	{"memory-reservation", NULL, "the task's limits are kart's"},
	{"kernel-memory", NULL, "the task's limits are kart's"},
	{"oom-kill-disable", NULL, "the task's limits are kart's"},
	{"oom-score-adj", NULL, "the task's limits are kart's"},
	{"pids-limit", NULL, "the task's limits are kart's"},
	{"cpus", NULL, "the task's limits are kart's"},
	{"cpu-quota", NULL, "the task's limits are kart's"},
	{"cpu-period", NULL, "the task's limits are kart's"},
	{"cpu-shares", NULL, "the task's limits are kart's"},
	{"sysctl", NULL, "the kernel's settings are not the task's"},
	{"env", NULL, "the task's environment is kart's"},
	{"env-file", NULL, "the task's environment is kart's"},
	{"env-host", NULL, "the task's environment is kart's"},
	{"env-merge", NULL, "the task's environment is kart's"},
	{"unsetenv", NULL, "the task's environment is kart's"},
	{"preserve-fds", NULL, "the task holds none of the worker's descriptors"},
	{"name", NULL, "kart names the container (recovery finds it by name and label)"},
	{"label", NULL, "kart labels the container (recovery finds it by its label)"},
	{"label-file", NULL, "kart labels the container (recovery finds it by its label)"},
	{"replace", NULL, "kart names the container"},
	{"rm", NULL, "kart removes the container once it has read its state"},
	{"cidfile", NULL, "the CLI writes no file on the host"},
	{"entrypoint", NULL, "the command is the task's"},
	{"workdir", NULL, "the task starts in its work directory"},
	{"interactive", NULL, "kart sets the container's standard streams"},
	{"tty", NULL, "kart sets the container's standard streams"},
	{"attach", NULL, "kart sets the container's standard streams"},
	{"detach", NULL, "the CLI must live as long as the container"},
	{"restart", NULL, "a task runs once per attempt"},
	{"systemd", NULL, "the task is the container's only program"},
};

const char *container_arg_denied(const char *arg)
{
	if (strncmp(arg, "--", 2) != 0 || !isalpha((unsigned char)arg[2]))
		return "not a long option (write --name or --name=value, one word)";
	const char *name = arg + 2, *eq = strchr(name, '=');
	size_t n = eq ? (size_t)(eq - name) : strlen(name);
	for (size_t i = 0; i < ARRAY_SIZE(denied_args); i++) {
		if (strlen(denied_args[i].name) != n || strncmp(name, denied_args[i].name, n) != 0)
			continue;
		/* --opt VALUE as two words is refused above: the value is
		 * always after '='. */
		if (!denied_args[i].value || (eq && strcmp(eq + 1, denied_args[i].value) == 0))
			return denied_args[i].why;
		if (!eq)
			return "write the value after '=' (--name=value)";
	}
	return NULL;
}
