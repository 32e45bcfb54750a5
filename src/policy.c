/* policy.c - the effective policy: safe defaults, the host's capacity as
 * ceilings, then KART_* environment overrides. A bad override is an error
 * naming the variable, never a silent fallback. */
#define _GNU_SOURCE
#include "policy.h"

#include <ctype.h>
#include <limits.h>
#include <fcntl.h>
#include <pwd.h>
#include <grp.h>
#include <jansson.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "outdir.h"
#include "space.h"
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

static int set_net_uids(struct policy *pol, const char *v, char *err, size_t errlen,
			const char *where)
{
	_cleanup_free_ char *copy = xstrdup(v);
	char *save = NULL;
	pol->net_all = false;
	pol->n_net_uids = 0;
	for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
		long long u;
		if (strcmp(t, "*") == 0) {
			pol->net_all = true;
			continue;
		}
		if (parse_int(t, 0, UINT32_MAX - 1, &u) < 0)
			return ERR(-1, "%s: '%s' is not a uid", where, t);
		if (pol->n_net_uids >= (int)ARRAY_SIZE(pol->net_uids))
			return ERR(-1, "%s: more than %zu uids", where, ARRAY_SIZE(pol->net_uids));
		pol->net_uids[pol->n_net_uids++] = (uid_t)u;
	}
	return 0;
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

static bool env_name_ok(const char *s)
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
static bool bind_path_ok(const char *s)
{
	if (s[0] != '/' || !s[1] || strlen(s) >= PATH_MAX)
		return false;
	for (const char *c = s; *c; c++)
		if (*c == '/' && c[1] == '.' && (!c[2] || c[2] == '/' || (c[2] == '.' && (!c[3] || c[3] == '/'))))
			return false;
	return true;
}

enum plist_kind { PL_PATHS, PL_ENV, PL_ENV_PAT, PL_ARGS };

static int set_plist(struct plist *l, const char *v, enum plist_kind kind, char *err, size_t errlen,
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

static int parse_bool(const char *v, bool *out)
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

/* ---- [kind.NAME] ------------------------------------------------------ */

bool kind_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n >= KIND_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == '-'))
			return false;
	return true;
}

const struct kind *policy_kind(const struct policy *pol, const char *name)
{
	for (int i = 0; i < pol->n_kinds; i++)
		if (strcmp(pol->kinds[i].name, name) == 0)
			return &pol->kinds[i];
	return NULL;
}

const struct kind *policy_kind_by_ext(const struct policy *pol, const char *fname)
{
	size_t fl = strlen(fname);
	for (int i = 0; i < pol->n_kinds; i++)
		for (int j = 0; j < pol->kinds[i].n_ext; j++) {
			const char *e = pol->kinds[i].ext[j];
			size_t el = strlen(e);
			if (fl > el && strcmp(fname + fl - el, e) == 0)
				return &pol->kinds[i];
		}
	return NULL;
}

/* The names the sandbox sets for a kind's task: a credential cannot
 * replace them. */
static bool env_name_kind_reserved(const char *s)
{
	static const char *const set[] = {"PATH", "HOME", "TMPDIR", "LANG", "KART_TASK_ID",
					  "KART_ATTEMPT", "KART_OUTDIR", "KART_LLM_ENDPOINT",
					  "KART_LLM_MODEL", "KART_LLM_SOCKET"};
	for (size_t i = 0; i < ARRAY_SIZE(set); i++)
		if (strcmp(s, set[i]) == 0)
			return true;
	return false;
}

static int kind_open(struct policy *pol, const char *name, char *err, size_t errlen,
		     const char *where)
{
	if (!kind_name_ok(name))
		return ERR(-1, "%s: [kind.%s]: a kind's name is 1 to %d of a-z 0-9 _ -", where, name,
			   KIND_NAME_MAX - 1);
	if (policy_kind(pol, name))
		return 0; /* a second [kind.NAME] adds to the first */
	if (pol->n_kinds >= KIND_MAX)
		return ERR(-1, "%s: more than %d [kind.*] sections", where, KIND_MAX);
	struct kind *k = &pol->kinds[pol->n_kinds++];
	memset(k, 0, sizeof *k);
	memcpy(k->name, name, strlen(name) + 1); /* checked: it fits */
	return 0;
}

static int conf_kind(struct policy *pol, const char *name, const char *key, const char *val,
		     char *err, size_t errlen, const char *where)
{
	struct kind *k = (struct kind *)policy_kind(pol, name);
	if (!k)
		return ERR(-1, "%s: [kind.%s] is not open", where, name);
	if (strcmp(key, "runner") == 0) {
		if (!bind_path_ok(val) || strlen(val) >= sizeof k->runner || strpbrk(val, " \t"))
			return ERR(-1, "%s: runner = %s: not an absolute path to a program (under %zu "
				   "bytes, without spaces, . or ..)", where, val, sizeof k->runner);
		snprintf(k->runner, sizeof k->runner, "%s", val);
	} else if (strcmp(key, "extensions") == 0 || strcmp(key, "credentials") == 0) {
		bool ext = key[0] == 'e';
		_cleanup_free_ char *copy = xstrdup(val);
		char *save = NULL;
		int *n = ext ? &k->n_ext : &k->n_cred;
		*n = 0;
		for (char *t = strtok_r(copy, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
			if (*n >= (ext ? KIND_EXT_MAX : KIND_CRED_MAX))
				return ERR(-1, "%s: %s: more than %d", where, key,
					   ext ? KIND_EXT_MAX : KIND_CRED_MAX);
			if (ext) {
				bool ok = t[0] == '.' && t[1] && strlen(t) < sizeof k->ext[0];
				for (const char *c = t + 1; ok && *c; c++)
					ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
					     (*c >= '0' && *c <= '9') || *c == '_' || *c == '-' || *c == '.';
				if (!ok)
					return ERR(-1, "%s: extensions: '%s' is not an extension (.py: a dot, "
						   "then up to %zu of A-Z a-z 0-9 _ - .)", where, t,
						   sizeof k->ext[0] - 2);
				snprintf(k->ext[(*n)++], sizeof k->ext[0], "%s", t);
			} else {
				if (!env_name_ok(t) || strlen(t) >= sizeof k->cred[0])
					return ERR(-1, "%s: credentials: '%s' is not a variable name", where, t);
				if (env_name_kind_reserved(t))
					return ERR(-1, "%s: credentials: '%s' is set by the sandbox itself",
						   where, t);
				snprintf(k->cred[(*n)++], sizeof k->cred[0], "%s", t);
			}
		}
	} else if (strcmp(key, "net") == 0) {
		if (parse_bool(val, &k->net) < 0)
			return ERR(-1, "%s: net = %s: not yes or no", where, val);
	} else if (strcmp(key, "endpoint") == 0 || strcmp(key, "model") == 0) {
		bool ep = key[0] == 'e';
		size_t cap = ep ? sizeof k->endpoint : sizeof k->model;
		if (strlen(val) >= cap || strpbrk(val, " \t"))
			return ERR(-1, "%s: %s = %s: longer than %zu bytes, or with a space", where, key, val,
				   cap - 1);
		if (ep && strncmp(val, "http://", 7) != 0 && strncmp(val, "https://", 8) != 0)
			return ERR(-1, "%s: endpoint = %s: not an http:// or https:// URL", where, val);
		snprintf(ep ? k->endpoint : k->model, cap, "%s", val);
	} else {
		return ERR(-1, "%s: unknown key '%s' in section [kind.%s] (known: runner, extensions, net, "
			   "credentials, endpoint, model)", where, key, name);
	}
	return 0;
}

/* After the whole file: every kind has a runner (llm: our kart-llm by
 * default), no extension names two kinds, a kind's credential is
 * neither passed to every task nor to every network task, and it has
 * an endpoint, to which the worker's forwarder adds it (credfwd.h): no
 * task is ever handed it. */
static int kinds_check(struct policy *pol, const char *fname, char *err, size_t errlen)
{
	for (int i = 0; i < pol->n_kinds; i++) {
		struct kind *k = &pol->kinds[i];
		if (!k->runner[0] && strcmp(k->name, "llm") == 0)
			find_libexec("kart-llm", k->runner, sizeof k->runner);
		if (!k->runner[0])
			return ERR(-1, "%s: [kind.%s] has no runner", fname, k->name);
		for (int j = 0; j < k->n_ext; j++)
			for (int m = i + 1; m < pol->n_kinds; m++)
				for (int e = 0; e < pol->kinds[m].n_ext; e++)
					if (strcmp(pol->kinds[m].ext[e], k->ext[j]) == 0)
						return ERR(-1, "%s: extension %s is in both [kind.%s] and "
							   "[kind.%s]", fname, k->ext[j], k->name,
							   pol->kinds[m].name);
		for (int j = 0; j < k->n_cred; j++)
			if (plist_has(&pol->env_pass, k->cred[j]) || plist_has(&pol->cred_env, k->cred[j]))
				return ERR(-1, "%s: %s is a credential of [kind.%s] and also in %s", fname,
					   k->cred[j], k->name,
					   plist_has(&pol->env_pass, k->cred[j]) ? "[sandbox] env_pass"
										 : "[network] cred_env");
		if (k->n_cred && !k->endpoint[0])
			return ERR(-1, "%s: [kind.%s] has credentials but no endpoint: they are added to the "
				   "requests the worker forwards there, never handed to a task", fname,
				   k->name);
	}
	return 0;
}

static int cgroup_use_parse(const char *v, enum cgroup_use *out)
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

/* memory/pids/cpu _default/_max, in [limits] (into pol's own fields) or
 * [lane.fast] / [lane.batch]. Returns 1 if key is one of them, 0 if not,
 * -1 on a bad value. */
static int conf_limit(struct policy *pol, const char *sec, const char *key, const char *val,
		      char *err, size_t errlen, const char *where)
{
	struct lane_limits *ll, top;
	bool is_top = strcmp(sec, "limits") == 0;
	if (is_top) {
		top = (struct lane_limits){pol->memory_default, pol->memory_max, pol->pids_default,
					   pol->pids_max, pol->cpu_default_milli, pol->cpu_max_milli};
		ll = &top;
	} else if (strcmp(sec, "lane.fast") == 0) {
		ll = &pol->lane[0];
	} else if (strcmp(sec, "lane.batch") == 0) {
		ll = &pol->lane[1];
	} else {
		return 0;
	}
	bool dflt = strstr(key, "_default") != NULL;
	uint64_t sz;
	long long n;
	uint32_t m;
	if (strcmp(key, "memory_default") == 0 || strcmp(key, "memory_max") == 0) {
		if (parse_size(val, &sz) < 0 || sz == 0)
			return ERR(-1, "%s: %s = %s: not a size (512K, 256M, 2G)", where, key, val);
		*(dflt ? &ll->memory_default : &ll->memory_max) = sz;
	} else if (strcmp(key, "pids_default") == 0 || strcmp(key, "pids_max") == 0) {
		if (parse_int(val, 1, INT32_MAX, &n) < 0)
			return ERR(-1, "%s: %s = %s: not a number from 1", where, key, val);
		*(dflt ? &ll->pids_default : &ll->pids_max) = n;
	} else if (strcmp(key, "cpu_default") == 0 || strcmp(key, "cpu_max") == 0) {
		if (parse_cpu_milli(val, &m) < 0 || m == 0)
			return ERR(-1, "%s: %s = %s: not a number of cores (0.5, 2)", where, key, val);
		*(dflt ? &ll->cpu_default_milli : &ll->cpu_max_milli) = m;
	} else {
		return 0;
	}
	if (is_top) {
		pol->memory_default = top.memory_default;
		pol->memory_max = top.memory_max;
		pol->pids_default = top.pids_default;
		pol->pids_max = top.pids_max;
		pol->cpu_default_milli = top.cpu_default_milli;
		pol->cpu_max_milli = top.cpu_max_milli;
	}
	return 1;
}

/* Groups by name or number; a name that does not resolve is an error,
 * not a grant silently dropped. */
/* [limits] defaults = none: a personal spool, where no default limit
 * guards other users. What kart.conf sets after the line still holds. */
static void defaults_none(struct policy *pol)
{
	pol->timeout_default_s = -1;
	pol->memory_default = 0;
	pol->pids_default = 0;
	pol->tmpfs_size = 0;
	pol->builtin_timeout = pol->builtin_memory = pol->builtin_pids = false;
	pol->leaf_memory = false;
}

static int set_net_gids(struct policy *pol, const char *v, char *err, size_t errlen,
			const char *where)
{
	_cleanup_free_ char *copy = xstrdup(v);
	char *save = NULL;
	pol->n_net_gids = 0;
	for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
		long long g;
		gid_t gid;
		if (parse_int(t, 0, UINT32_MAX - 1, &g) == 0) {
			gid = (gid_t)g;
		} else {
			struct group gr, *gp = NULL;
			char buf[4096];
			if (getgrnam_r(t, &gr, buf, sizeof buf, &gp) != 0 || !gp)
				return ERR(-1, "%s: '%s' is not a group", where, t);
			gid = gp->gr_gid;
		}
		if (pol->n_net_gids >= (int)ARRAY_SIZE(pol->net_gids))
			return ERR(-1, "%s: more than %zu groups", where, ARRAY_SIZE(pol->net_gids));
		pol->net_gids[pol->n_net_gids++] = gid;
	}
	return 0;
}

/* [limits] priority_allow: users (by name or uid) and @groups. A name
 * that does not resolve is an error, not a grant silently dropped. */
static int set_prio_allow(struct policy *pol, const char *v, char *err, size_t errlen,
			  const char *where)
{
	_cleanup_free_ char *copy = xstrdup(v);
	char *save = NULL;
	pol->n_prio_uids = pol->n_prio_gids = 0;
	for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
		long long n;
		char buf[4096];
		if (t[0] == '@') {
			struct group gr, *gp = NULL;
			gid_t gid;
			if (parse_int(t + 1, 0, UINT32_MAX - 1, &n) == 0)
				gid = (gid_t)n;
			else if (getgrnam_r(t + 1, &gr, buf, sizeof buf, &gp) == 0 && gp)
				gid = gp->gr_gid;
			else
				return ERR(-1, "%s: '%s' is not a group", where, t + 1);
			if (pol->n_prio_gids >= (int)ARRAY_SIZE(pol->prio_gids))
				return ERR(-1, "%s: more than %zu groups", where, ARRAY_SIZE(pol->prio_gids));
			pol->prio_gids[pol->n_prio_gids++] = gid;
			continue;
		}
		struct passwd pw, *pp = NULL;
		uid_t uid;
		if (parse_int(t, 0, UINT32_MAX - 1, &n) == 0)
			uid = (uid_t)n;
		else if (getpwnam_r(t, &pw, buf, sizeof buf, &pp) == 0 && pp)
			uid = pp->pw_uid;
		else
			return ERR(-1, "%s: '%s' is not a user", where, t);
		if (pol->n_prio_uids >= (int)ARRAY_SIZE(pol->prio_uids))
			return ERR(-1, "%s: more than %zu users", where, ARRAY_SIZE(pol->prio_uids));
		pol->prio_uids[pol->n_prio_uids++] = uid;
	}
	return 0;
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
static int container_cmd_set(struct policy *pol, const char *v)
{
	if (v[0] != '/' && strchr(v, '/'))
		return -1;
	return word_set(pol->container_cmd, sizeof pol->container_cmd, v, "/._+-");
}

/* An image reference: registry/name:tag@digest characters only. */
static int container_image_set(struct policy *pol, const char *v)
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

/* One key of kart.conf: "section.key" = value. */
static int conf_set(struct policy *pol, const char *sec, const char *key, const char *val,
		    char *err, size_t errlen, const char *where)
{
	char k[128];
	long long n;
	int64_t d;
	uint64_t sz;
	snprintf(k, sizeof k, "%s.%s", sec, key);
	if (strncmp(sec, "kind.", 5) == 0)
		return conf_kind(pol, sec + 5, key, val, err, errlen, where);
	int lim = conf_limit(pol, sec, key, val, err, errlen, where);
	if (lim != 0) {
		/* A lane's own default overrides a built-in one there only. */
		if (strcmp(sec, "limits") == 0 && strcmp(key, "memory_default") == 0)
			pol->builtin_memory = false;
		else if (strcmp(sec, "limits") == 0 && strcmp(key, "pids_default") == 0)
			pol->builtin_pids = false;
		return lim < 0 ? -1 : 0;
	}
	if (strcmp(k, "limits.defaults") == 0) {
		if (strcmp(val, "none") == 0) {
			defaults_none(pol);
		} else if (strcmp(val, "shared") != 0) {
			return ERR(-1, "%s: defaults = %s: not shared or none", where, val);
		}
	} else if (strcmp(k, "limits.leaf_memory") == 0) {
		if (parse_bool(val, &pol->leaf_memory) < 0)
			return ERR(-1, "%s: leaf_memory = %s: not yes or no", where, val);
	} else if (strcmp(k, "limits.priority_allow") == 0) {
		return set_prio_allow(pol, val, err, errlen, where);
	} else if (strcmp(k, "limits.slots_per_user") == 0) {
		if (parse_int(val, 0, 4096, &n) < 0)
			return ERR(-1, "%s: slots_per_user = %s: not a number from 0 to 4096", where, val);
		pol->slots_per_user = (int)n;
	} else if (strcmp(k, "limits.cgroup") == 0) {
		if (cgroup_use_parse(val, &pol->cgroup) < 0)
			return ERR(-1, "%s: cgroup = %s: not require, auto or off", where, val);
	} else if (strcmp(k, "limits.cgroup_parent") == 0) {
		if (val[0] != '/' || strlen(val) >= sizeof pol->cgroup_parent)
			return ERR(-1, "%s: cgroup_parent = %s: not a cgroup path (/kart.slice)", where, val);
		snprintf(pol->cgroup_parent, sizeof pol->cgroup_parent, "%s", val);
	} else if (strcmp(k, "limits.rlimit_as") == 0) {
		if (parse_bool(val, &pol->rlimit_as) < 0)
			return ERR(-1, "%s: rlimit_as = %s: not yes or no", where, val);
	} else if (strcmp(k, "worker.backend") == 0) {
		int b = backend_parse(val);
		if (b < 0)
			return ERR(-1, "%s: backend = %s: not a backend (bwrap, container or none)", where,
				   val);
		pol->backend = (enum backend)b;
	} else if (strcmp(k, "worker.slots") == 0 || strcmp(k, "worker.batch_slots") == 0) {
		if (parse_int(val, 0, 4096, &n) < 0)
			return ERR(-1, "%s: %s = %s: not a number from 0 to 4096", where, key, val);
		pol->slots[key[0] == 'b' ? 1 : 0] = (int)n;
	} else if (strcmp(k, "worker.term_grace") == 0) {
		if (parse_duration_s(val, &d) < 0 || d > 3600)
			return ERR(-1, "%s: term_grace = %s: not a duration up to 1h", where, val);
		pol->term_grace_s = (int)d;
	} else if (strcmp(k, "worker.min_free") == 0) {
		if (min_free_parse(val, &pol->min_free_bytes, &pol->min_free_pct) < 0)
			return ERR(-1, "%s: min_free = %s: not a size, a percentage or both (64M, 1%%)",
				   where, val);
	} else if (strcmp(k, "worker.results") == 0) {
		if (strcmp(val, "owner") && strcmp(val, "group"))
			return ERR(-1, "%s: results = %s: not owner or group", where, val);
		pol->results_group = val[0] == 'g';
	} else if (strcmp(k, "worker.retries") == 0) {
		if (parse_int(val, 0, 100, &n) < 0)
			return ERR(-1, "%s: retries = %s: not a number from 0 to 100", where, val);
		pol->retries_default = (int)n;
	} else if (strcmp(k, "limits.kill_grace") == 0 || strcmp(k, "limits.kill_grace_max") == 0) {
		if (parse_duration_s(val, &d) < 0 || d > 3600)
			return ERR(-1, "%s: %s = %s: not a duration up to 1h (0, 5s, 1m)", where, key, val);
		if (key[10] == '\0')
			pol->kill_grace_s = d;
		else
			pol->kill_grace_max_s = d;
	} else if (strcmp(k, "limits.timeout_default") == 0 || strcmp(k, "limits.timeout_max") == 0) {
		if (parse_duration_s(val, &d) < 0 || d == 0)
			return ERR(-1, "%s: %s = %s: not a duration (90, 90s, 5m, 2h)", where, key, val);
		if (key[8] == 'd') {
			pol->timeout_default_s = d;
			pol->builtin_timeout = false;
		} else
			pol->timeout_max_s = d;
	} else if (strcmp(k, "limits.output_default") == 0 || strcmp(k, "limits.output_max") == 0 ||
		   strcmp(k, "limits.task_max") == 0 || strcmp(k, "limits.artifacts_max") == 0) {
		if (parse_size(val, &sz) < 0 || sz == 0)
			return ERR(-1, "%s: %s = %s: not a size (512K, 256M, 2G)", where, key, val);
		if (strcmp(key, "output_default") == 0)
			pol->output_default = sz;
		else if (strcmp(key, "output_max") == 0)
			pol->output_max = sz;
		else if (strcmp(key, "artifacts_max") == 0)
			pol->artifacts_max = sz;
		else
			pol->task_max_bytes = sz;
	} else if (strcmp(k, "limits.artifacts_files") == 0) {
		if (parse_int(val, 1, 100000000, &n) < 0)
			return ERR(-1, "%s: artifacts_files = %s: not a number from 1 to 100000000", where, val);
		pol->artifacts_files = (uint64_t)n;
	} else if (strcmp(k, "limits.artifacts_depth") == 0) {
		if (parse_int(val, 1, OUTDIR_DEPTH_MAX, &n) < 0)
			return ERR(-1, "%s: artifacts_depth = %s: not a number from 1 to %d", where, val,
				   OUTDIR_DEPTH_MAX);
		pol->artifacts_depth = (int)n;
	} else if (strcmp(k, "network.allow_uids") == 0) {
		return set_net_uids(pol, val, err, errlen, where);
	} else if (strcmp(k, "network.allow_groups") == 0) {
		return set_net_gids(pol, val, err, errlen, where);
	} else if (strcmp(k, "network.cred_env") == 0) {
		return set_plist(&pol->cred_env, val, PL_ENV, err, errlen, where, key);
	} else if (strcmp(k, "network.cred_files") == 0) {
		return set_plist(&pol->cred_files, val, PL_PATHS, err, errlen, where, key);
	} else if (strcmp(k, "sandbox.landlock") == 0) {
		int m = ll_mode_parse(val);
		if (m < 0)
			return ERR(-1, "%s: landlock = %s: not a mode (auto, enforce or off)", where, val);
		pol->landlock = (enum ll_mode)m;
	} else if (strcmp(k, "sandbox.allow_root") == 0) {
		if (parse_bool(val, &pol->allow_root) < 0)
			return ERR(-1, "%s: allow_root = %s: not yes or no", where, val);
	} else if (strcmp(k, "sandbox.tmpfs_size") == 0) {
		if (parse_size(val, &sz) < 0 || sz == 0)
			return ERR(-1, "%s: tmpfs_size = %s: not a size (512K, 256M, 2G)", where, val);
		pol->tmpfs_size = sz;
	} else if (strcmp(k, "sandbox.ro_binds") == 0) {
		return set_plist(&pol->ro_binds, val, PL_PATHS, err, errlen, where, key);
	} else if (strcmp(k, "sandbox.rw_binds") == 0) {
		return set_plist(&pol->rw_binds, val, PL_PATHS, err, errlen, where, key);
	} else if (strcmp(k, "sandbox.task_binds") == 0) {
		if (parse_bool(val, &pol->task_binds) < 0)
			return ERR(-1, "%s: task_binds = %s: not yes or no", where, val);
	} else if (strcmp(k, "sandbox.task_bind_roots") == 0) {
		return set_plist(&pol->task_bind_roots, val, PL_PATHS, err, errlen, where, key);
	} else if (strcmp(k, "sandbox.env_deny") == 0) {
		return set_plist(&pol->env_deny, val, PL_ENV_PAT, err, errlen, where, key);
	} else if (strcmp(k, "sandbox.env_pass") == 0) {
		return set_plist(&pol->env_pass, val, PL_ENV, err, errlen, where, key);
	} else if (strcmp(k, "sandbox.allow_unsandboxed") == 0) {
		if (parse_bool(val, &pol->allow_unsandboxed) < 0)
			return ERR(-1, "%s: allow_unsandboxed = %s: not yes or no", where, val);
	} else if (strcmp(k, "container.command") == 0) {
		if (container_cmd_set(pol, val) < 0)
			return ERR(-1, "%s: command = %s: not a program name or an absolute path", where,
				   val);
	} else if (strcmp(k, "container.image") == 0) {
		if (container_image_set(pol, val) < 0)
			return ERR(-1, "%s: image = %s: not an image reference", where, val);
	} else if (strcmp(k, "container.extra_args") == 0) {
		return set_plist(&pol->container_extra, val, PL_ARGS, err, errlen, where, key);
	} else if (strcmp(k, "container.seccomp") == 0) {
		if (parse_bool(val, &pol->container_seccomp) < 0)
			return ERR(-1, "%s: seccomp = %s: not yes or no", where, val);
	} else if (strcmp(k, "hooks.on_done") == 0) {
		if (!bind_path_ok(val))
			return ERR(-1, "%s: on_done = %s: not an absolute path to a program", where, val);
		snprintf(pol->on_done, sizeof pol->on_done, "%s", val);
	} else {
		return ERR(-1, "%s: unknown key '%s' in section [%s]", where, key, sec);
	}
	return 0;
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	char *e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

int policy_parse_conf(struct policy *pol, const char *text, const char *fname, char *err,
		      size_t errlen)
{
	_cleanup_free_ char *copy = xstrdup(text);
	char sec[64] = "";
	int lineno = 0;
	char *save = NULL;
	for (char *p = copy, *line; (line = strsep(&p, "\n"));) {
		char where[512];
		lineno++;
		snprintf(where, sizeof where, "%s line %d", fname, lineno);
		line = trim(line);
		if (!p && !*line)
			break;
		if (!*line || *line == '#' || *line == ';')
			continue;
		if (*line == '[') {
			char *end = strchr(line, ']');
			if (!end || end[1] || end - line - 1 >= (long)sizeof sec)
				return ERR(-1, "%s: malformed section header '%s'", where, line);
			*end = '\0';
			snprintf(sec, sizeof sec, "%s", trim(line + 1));
			if (strncmp(sec, "kind.", 5) == 0) {
				if (kind_open(pol, sec + 5, err, errlen, where) < 0)
					return -1;
				continue;
			}
			if (strcmp(sec, "worker") && strcmp(sec, "limits") && strcmp(sec, "network") &&
			    strcmp(sec, "sandbox") && strcmp(sec, "hooks") && strcmp(sec, "lane.fast") &&
			    strcmp(sec, "lane.batch") && strcmp(sec, "container"))
				return ERR(-1, "%s: unknown section [%s] (known: worker, limits, lane.fast, "
					   "lane.batch, network, sandbox, container, hooks, kind.NAME)", where, sec);
			continue;
		}
		char *eq = strchr(line, '=');
		if (!eq)
			return ERR(-1, "%s: expected 'key = value', got '%s'", where, line);
		if (!*sec)
			return ERR(-1, "%s: '%s' is outside any section", where, line);
		*eq = '\0';
		char *key = trim(line), *val = trim(eq + 1);
		if (!*val)
			return ERR(-1, "%s: %s has no value", where, key);
		if (conf_set(pol, sec, key, val, err, errlen, where) < 0)
			return -1;
	}
	(void)save;
	/* A credential must not reach tasks without network. */
	for (const char *e = NULL; (e = plist_next(&pol->cred_env, e));)
		if (plist_has(&pol->env_pass, e))
			return ERR(-1, "%s: %s is both in [sandbox] env_pass and in [network] cred_env", fname,
				   e);
	return kinds_check(pol, fname, err, errlen);
}

/* The built-in defaults, once kart.conf and the environment are read:
 * memory is an equal share of the host's per slot, so that every slot
 * full at once still fits; each yields to a lower ceiling (a built-in
 * value is never the reason a task is rejected). */
static void builtin_defaults_fit(struct policy *pol, uint64_t host_memory)
{
	if (pol->builtin_memory) {
		int slots = pol->slots[0] + pol->slots[1];
		pol->memory_default = host_memory / (uint64_t)(slots > 0 ? slots : 1);
	}
	if (pol->builtin_timeout && pol->timeout_max_s > 0 && pol->timeout_default_s > pol->timeout_max_s)
		pol->timeout_default_s = pol->timeout_max_s;
	for (int l = 0; l < 2; l++) {
		struct lane_limits ll;
		policy_lane_limits(pol, l, &ll);
		if (pol->builtin_memory && !pol->lane[l].memory_default && ll.memory_default > ll.memory_max)
			pol->lane[l].memory_default = ll.memory_max;
		if (pol->builtin_pids && !pol->lane[l].pids_default && ll.pids_default > ll.pids_max)
			pol->lane[l].pids_default = ll.pids_max;
	}
}

int policy_load(struct policy *pol, const char *spool_dir, char *err, size_t errlen)
{
	struct sysinfo si;
	const char *v;
	memset(pol, 0, sizeof *pol);
	pol->backend = BACKEND_BWRAP;
	pol->slots[0] = 3;
	pol->slots[1] = 1;
	pol->output_default = 8ull << 20;
	pol->output_max = 1ull << 30;
	/* $KART_OUTDIR is RAM while the task runs (a tmpfs, outdir.h), as
	 * /tmp is: the same 256M. */
	pol->artifacts_max = 256ull << 20;
	pol->artifacts_files = 10000;
	pol->artifacts_depth = 32;
	pol->task_max_bytes = 16ull << 20;
	pol->retries_default = 2;
	pol->timeout_max_s = -1;
	pol->memory_max = sysinfo(&si) == 0 ? (uint64_t)si.totalram * si.mem_unit : UINT64_MAX;
	const uint64_t host_memory = pol->memory_max;
	pol->pids_max = 4194304;
	/* Safe on a shared machine (Slurm's MaxTime and DefMemPerCPU,
	 * systemd's DefaultTasksMax): one task cannot hold a slot for ever,
	 * nor take the memory, the pids or the RAM-backed /tmp of the others.
	 * The memory share is set below, once the slots are known. */
	pol->timeout_default_s = 3600;
	pol->pids_default = 512;
	pol->tmpfs_size = 256ull << 20;
	pol->builtin_timeout = pol->builtin_memory = pol->builtin_pids = true;
	pol->leaf_memory = true;
	pol->memory_default = 0; /* builtin_defaults_fit sets it */
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	pol->cpu_max_milli = (uint32_t)(ncpu > 0 ? ncpu : 1) * 1000;
	pol->term_grace_s = 10;
	/* As systemd's TimeoutStopSec and `timeout -k`: time to clean up. */
	pol->kill_grace_s = 5;
	pol->kill_grace_max_s = 300;
	pol->min_free_bytes = 64ull << 20;
	pol->min_free_pct = 1;
	snprintf(pol->bwrap, sizeof pol->bwrap, "bwrap");
	snprintf(pol->container_cmd, sizeof pol->container_cmd, "docker");
	pol->container_seccomp = true;
	pol->task_binds = true;
	/* What would run code of the task's choosing in every program it
	 * starts, and the names the sandbox sets. */
	(void)set_plist(&pol->env_deny, "LD_PRELOAD LD_LIBRARY_PATH LD_AUDIT KART_*", PL_ENV_PAT,
			err, errlen, "defaults", "env_deny");
	find_libexec("kart-launch", pol->launcher, sizeof pol->launcher);

	if (spool_dir) {
		char path[4096];
		_cleanup_free_ char *text = NULL;
		if (pathfmt(path, sizeof path, "%s/kart.conf", spool_dir) < 0)
			return ERR(-1, "%s/kart.conf: path too long", spool_dir);
		snprintf(pol->conf_path, sizeof pol->conf_path, "%s", path);
		/* One byte more than allowed: a longer file is an error, not
		 * a policy cut short (mid-line, a grant could change). */
		size_t len = 0;
		int r = read_file_at(AT_FDCWD, path, (1 << 20) + 1, &text, &len);
		if (r < 0 && r != -ENOENT)
			return ERR(-1, "%s: cannot read: %s", path, strerror(-r));
		if (r == 0 && len > 1 << 20)
			return ERR(-1, "%s: larger than 1M", path);
		if (r == 0 && policy_parse_conf(pol, text, path, err, errlen) < 0)
			return -1;
	}

	if ((v = getenv("KART_BACKEND")) && *v) {
		int b = backend_parse(v);
		if (b < 0)
			return ERR(-1, "KART_BACKEND=%s: not a backend (bwrap, container or none)", v);
		pol->backend = (enum backend)b;
	}
	if ((v = getenv("KART_CONTAINER_CMD")) && *v && container_cmd_set(pol, v) < 0)
		return ERR(-1, "KART_CONTAINER_CMD=%s: not a program name or an absolute path", v);
	if ((v = getenv("KART_CONTAINER_IMAGE")) && *v && container_image_set(pol, v) < 0)
		return ERR(-1, "KART_CONTAINER_IMAGE=%s: not an image reference", v);
	if ((v = getenv("KART_ALLOW_UNSANDBOXED")) && *v && parse_bool(v, &pol->allow_unsandboxed) < 0)
		return ERR(-1, "KART_ALLOW_UNSANDBOXED=%s: not yes or no", v);
	if ((v = getenv("KART_BWRAP")) && *v) {
		if (strlen(v) >= sizeof pol->bwrap)
			return ERR(-1, "KART_BWRAP: path too long");
		snprintf(pol->bwrap, sizeof pol->bwrap, "%s", v);
	}
	if ((v = getenv("KART_TERM_GRACE")) && *v) {
		int64_t s;
		if (parse_duration_s(v, &s) < 0 || s > 3600)
			return ERR(-1, "KART_TERM_GRACE=%s: not a duration up to 1h", v);
		pol->term_grace_s = (int)s;
	}
	if ((v = getenv("KART_KILL_GRACE")) && *v) {
		if (parse_duration_s(v, &pol->kill_grace_s) < 0 || pol->kill_grace_s > 3600)
			return ERR(-1, "KART_KILL_GRACE=%s: not a duration up to 1h", v);
	}
	if ((v = getenv("KART_TIMEOUT_MAX")) && *v) {
		if (parse_duration_s(v, &pol->timeout_max_s) < 0)
			return ERR(-1, "KART_TIMEOUT_MAX=%s: not a duration", v);
	}
	if ((v = getenv("KART_NET_UIDS")) && *v && set_net_uids(pol, v, err, errlen, "KART_NET_UIDS") < 0)
		return -1;
	if ((v = getenv("KART_LANDLOCK")) && *v) {
		int m = ll_mode_parse(v);
		if (m < 0)
			return ERR(-1, "KART_LANDLOCK=%s: not a mode (auto, enforce or off)", v);
		pol->landlock = (enum ll_mode)m;
	}
	if ((v = getenv("KART_ALLOW_ROOT")) && *v && parse_bool(v, &pol->allow_root) < 0)
		return ERR(-1, "KART_ALLOW_ROOT=%s: not yes or no", v);
	if ((v = getenv("KART_CGROUP")) && *v && cgroup_use_parse(v, &pol->cgroup) < 0)
		return ERR(-1, "KART_CGROUP=%s: not require, auto or off", v);
	if ((v = getenv("KART_CGROUP_PARENT")) && *v) {
		if (strlen(v) >= sizeof pol->cgroup_parent)
			return ERR(-1, "KART_CGROUP_PARENT: path too long");
		snprintf(pol->cgroup_parent, sizeof pol->cgroup_parent, "%s", v);
	}
	if ((v = getenv("KART_RLIMIT_USE_AS")) && *v)
		pol->rlimit_as = strcmp(v, "1") == 0;
	builtin_defaults_fit(pol, host_memory);
	/* A default above its ceiling would reject every task that takes it. */
	for (int l = 0; l < 2; l++) {
		struct lane_limits ll;
		const char *ln = l ? "batch" : "fast";
		policy_lane_limits(pol, l, &ll);
		if (ll.memory_default > ll.memory_max)
			return ERR(-1, "lane %s: memory_default is above memory_max", ln);
		if (ll.pids_default > ll.pids_max)
			return ERR(-1, "lane %s: pids_default is above pids_max", ln);
		if (ll.cpu_default_milli > ll.cpu_max_milli)
			return ERR(-1, "lane %s: cpu_default is above cpu_max", ln);
	}
	return 0;
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

int policy_prepare(struct policy *pol, const char *spool_dir, char *err, size_t errlen)
{
	char cand[PATH_MAX];
	if (pol->backend == BACKEND_BWRAP && !strchr(pol->bwrap, '/')) {
		if (find_in_path(pol->bwrap, cand, sizeof cand) < 0)
			return ERR(-1, "bwrap not found in PATH; install bubblewrap, or set "
				   "KART_BACKEND=none for trusted tasks");
		snprintf(pol->bwrap, sizeof pol->bwrap, "%s", cand);
	}
	if (pol->backend == BACKEND_CONTAINER) {
		if (find_in_path(pol->container_cmd, cand, sizeof cand) < 0)
			return ERR(-1, "backend container: %s not found in PATH; set [container] command "
				   "in kart.conf", pol->container_cmd);
		snprintf(pol->container_cmd, sizeof pol->container_cmd, "%s", cand);
	}
	return policy_backend_check(pol, spool_dir, err, errlen);
}

int policy_backend_check(const struct policy *pol, const char *spool_dir, char *err,
			 size_t errlen)
{
	if (pol->backend == BACKEND_CONTAINER && !pol->container_image[0])
		return ERR(-1, "backend container needs an image: set [container] image in kart.conf "
			   "(or KART_CONTAINER_IMAGE)");
	if (pol->backend != BACKEND_NONE || pol->allow_unsandboxed || !spool_dir)
		return 0;
	/* The hosted posture: where other users can submit, backend none
	 * would run their programs as the worker, unconfined but for
	 * Landlock. Only a deliberate allow_unsandboxed permits that. */
	static const char *const dirs[] = {"new", "tmp"};
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		char p[4096];
		struct stat st;
		if (pathfmt(p, sizeof p, "%s/%s", spool_dir, dirs[i]) < 0 || stat(p, &st) < 0)
			continue;
		if (st.st_mode & (S_IWGRP | S_IWOTH))
			return ERR(-1, "backend none refused: %s is writable by %s (mode %04o), so several "
				   "users can submit, and their tasks would run unsandboxed; use "
				   "backend bwrap, or set [sandbox] allow_unsandboxed = yes deliberately",
				   p, st.st_mode & S_IWOTH ? "everyone" : "its group",
				   (unsigned)(st.st_mode & 07777));
	}
	return 0;
}

static json_t *plist_json(const struct plist *l)
{
	json_t *a = json_array();
	for (const char *e = NULL; (e = plist_next(l, e));)
		json_array_append_new(a, json_string(e));
	return a;
}

char *policy_describe(const struct policy *pol)
{
	json_t *uids = json_array();
	if (pol->net_all)
		json_array_append_new(uids, json_string("*"));
	for (int i = 0; i < pol->n_net_uids; i++)
		json_array_append_new(uids, json_integer(pol->net_uids[i]));
	json_t *gids = json_array();
	for (int i = 0; i < pol->n_net_gids; i++)
		json_array_append_new(gids, json_integer(pol->net_gids[i]));
	json_t *o = json_pack(
		"{s:s, s:{s:i, s:i, s:i, s:i}, s:{s:o, s:o, s:I, s:I, s:I}, "
		"s:{s:s, s:b, s:o, s:o, s:o, s:o, s:b, s:o, s:o}, s:{s:o, s:o, s:o, s:o}, s:{s:o}}",
		"backend", backend_name(pol->backend),
		"worker", "slots", pol->slots[0], "batch_slots", pol->slots[1], "retries",
		pol->retries_default, "term_grace_s", pol->term_grace_s,
		"limits", "timeout_default_s",
		pol->timeout_default_s < 0 ? json_null() : json_integer(pol->timeout_default_s),
		"timeout_max_s", pol->timeout_max_s < 0 ? json_null() : json_integer(pol->timeout_max_s),
		"output_default", (json_int_t)pol->output_default, "artifacts_max",
		(json_int_t)pol->artifacts_max, "output_max",
		(json_int_t)pol->output_max,
		"sandbox", "landlock", ll_mode_name(pol->landlock), "allow_root", pol->allow_root,
		"tmpfs_size", pol->tmpfs_size ? json_integer((json_int_t)pol->tmpfs_size) : json_null(),
		"ro_binds", plist_json(&pol->ro_binds), "rw_binds", plist_json(&pol->rw_binds),
		"env_pass", plist_json(&pol->env_pass), "task_binds", pol->task_binds,
		"task_bind_roots", plist_json(&pol->task_bind_roots), "env_deny", plist_json(&pol->env_deny),
		"network", "allow_uids", uids, "allow_groups", gids, "cred_env", plist_json(&pol->cred_env), "cred_files",
		plist_json(&pol->cred_files),
		"hooks", "on_done", pol->on_done[0] ? json_string(pol->on_done) : json_null());
	if (!o)
		return NULL;
	json_t *lim = json_object_get(o, "limits");
	json_object_set_new(lim, "artifacts_files", json_integer((json_int_t)pol->artifacts_files));
	json_object_set_new(lim, "artifacts_depth", json_integer(pol->artifacts_depth));
	json_t *kinds = json_object();
	for (int i = 0; i < pol->n_kinds; i++) {
		const struct kind *k = &pol->kinds[i];
		json_t *ext = json_array(), *cred = json_array();
		for (int j = 0; j < k->n_ext; j++)
			json_array_append_new(ext, json_string(k->ext[j]));
		for (int j = 0; j < k->n_cred; j++)
			json_array_append_new(cred, json_string(k->cred[j]));
		json_object_set_new(kinds, k->name,
				    json_pack("{s:s, s:o, s:b, s:o, s:o, s:o}", "runner", k->runner,
					      "extensions", ext, "net", k->net, "credentials", cred,
					      "endpoint", k->endpoint[0] ? json_string(k->endpoint) : json_null(),
					      "model", k->model[0] ? json_string(k->model) : json_null()));
	}
	json_object_set_new(o, "kinds", kinds);
	json_object_set_new(json_object_get(o, "worker"), "results",
			    json_string(pol->results_group ? "group" : "owner"));
	json_object_set_new(json_object_get(o, "worker"), "min_free",
			    json_pack("{s:I, s:i}", "bytes", (json_int_t)pol->min_free_bytes,
				      "percent", (int)pol->min_free_pct));
	json_object_set_new(json_object_get(o, "sandbox"), "allow_unsandboxed",
			    json_boolean(pol->allow_unsandboxed));
	json_object_set_new(o, "container",
			    json_pack("{s:s, s:o, s:b, s:o}", "command", pol->container_cmd, "image",
				      pol->container_image[0] ? json_string(pol->container_image)
							      : json_null(),
				      "seccomp", pol->container_seccomp, "extra_args",
				      plist_json(&pol->container_extra)));
	/* Each lane's defaults and ceilings as they apply ([lane.*] over
	 * [limits]); null: no default. cpu in cores, as in a result. */
	json_t *lanes = json_object();
	for (int i = 0; i < 2; i++) {
		struct lane_limits l;
		policy_lane_limits(pol, i, &l);
#define OR_NULL(v, j) ((v) ? (j) : json_null())
		json_object_set_new(
			lanes, i ? "batch" : "fast",
			json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "memory_default",
				  OR_NULL(l.memory_default, json_integer((json_int_t)l.memory_default)),
				  "memory_max", OR_NULL(l.memory_max, json_integer((json_int_t)l.memory_max)),
				  "pids_default", OR_NULL(l.pids_default, json_integer(l.pids_default)),
				  "pids_max", OR_NULL(l.pids_max, json_integer(l.pids_max)),
				  "cpu_default", OR_NULL(l.cpu_default_milli, json_real(l.cpu_default_milli / 1000.0)),
				  "cpu_max", OR_NULL(l.cpu_max_milli, json_real(l.cpu_max_milli / 1000.0))));
#undef OR_NULL
	}
	json_object_set_new(json_object_get(o, "limits"), "lanes", lanes);
	char *t = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	return t;
}
