/* policy_conf.c - reading SPOOL/kart.conf into a policy: the INI
 * reader, the table of its keys and each key's setter. The values'
 * checks are policy.c's, [kind.NAME] is policy_kind.c's. */
#define _GNU_SOURCE
#include "policy_int.h"

#include <limits.h>
#include <pwd.h>
#include <grp.h>

#include "outdir.h"
#include "space.h"
#include "util.h"

/* A row of the key table. Most keys are a bool, a size, a number in a
 * range or a list, read by the generic setters into the field at off (as
 * nginx's ngx_conf_set_*_slot); the others have a setter of their own. */
struct conf_key;
typedef int conf_setter(struct policy *pol, const struct conf_key *ck, const char *val,
			char *err, size_t errlen, const char *where);
struct conf_key {
	const char *sec, *key;
	conf_setter *set;
	size_t off;            /* the field in struct policy */
	long long min, max;    /* key_number: the range */
	bool wide;             /* key_number: a uint64_t, not an int */
	enum plist_kind words; /* key_list: what each word must be */
};

int set_net_uids(struct policy *pol, const char *v, char *err, size_t errlen, const char *where)
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

/* A group by number or name. A name that does not resolve is an error,
 * not a grant silently dropped. */
static int gid_parse(const char *s, gid_t *out)
{
	long long n;
	struct group gr, *gp = NULL;
	char buf[4096];
	if (parse_int(s, 0, UINT32_MAX - 1, &n) == 0)
		*out = (gid_t)n;
	else if (getgrnam_r(s, &gr, buf, sizeof buf, &gp) == 0 && gp)
		*out = gp->gr_gid;
	else
		return -1;
	return 0;
}

/* [network] allow_groups: groups by name or number. */
static int set_net_gids(struct policy *pol, const struct conf_key *ck, const char *v, char *err,
			size_t errlen, const char *where)
{
	(void)ck;
	_cleanup_free_ char *copy = xstrdup(v);
	char *save = NULL;
	pol->n_net_gids = 0;
	for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
		gid_t gid;
		if (gid_parse(t, &gid) < 0)
			return ERR(-1, "%s: '%s' is not a group", where, t);
		if (pol->n_net_gids >= (int)ARRAY_SIZE(pol->net_gids))
			return ERR(-1, "%s: more than %zu groups", where, ARRAY_SIZE(pol->net_gids));
		pol->net_gids[pol->n_net_gids++] = gid;
	}
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
		pol->memory_max_set |= strcmp(key, "memory_max") == 0;
		pol->cpu_max_set |= strcmp(key, "cpu_max") == 0;
		pol->memory_default = top.memory_default;
		pol->memory_max = top.memory_max;
		pol->pids_default = top.pids_default;
		pol->pids_max = top.pids_max;
		pol->cpu_default_milli = top.cpu_default_milli;
		pol->cpu_max_milli = top.cpu_max_milli;
	}
	return 1;
}

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

/* [limits] priority_allow: users (by name or uid) and @groups. A name
 * that does not resolve is an error, not a grant silently dropped. */
static int set_prio_allow(struct policy *pol, const struct conf_key *ck, const char *v, char *err,
			  size_t errlen, const char *where)
{
	(void)ck;
	_cleanup_free_ char *copy = xstrdup(v);
	char *save = NULL;
	pol->n_prio_uids = pol->n_prio_gids = 0;
	for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
		long long n;
		char buf[4096];
		if (t[0] == '@') {
			gid_t gid;
			if (gid_parse(t + 1, &gid) < 0)
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

/* ---- one key of kart.conf ---------------------------------------------- */

/* The field's offset, and a compile error where it is not of that type:
 * a row cannot write a bool's setter into a size. */
#define FIELD_IS(f, type) __builtin_types_compatible_p(__typeof__(((struct policy *)0)->f), type)
#define FIELD(f, type) (offsetof(struct policy, f) + 0 * sizeof(char[FIELD_IS(f, type) ? 1 : -1]))
#define FIELD_AT(pol, ck, type) ((type *)((char *)(pol) + (ck)->off))

static int key_bool(struct policy *pol, const struct conf_key *ck, const char *val, char *err,
		    size_t errlen, const char *where)
{
	if (parse_bool(val, FIELD_AT(pol, ck, bool)) < 0)
		return ERR(-1, "%s: %s = %s: not yes or no", where, ck->key, val);
	return 0;
}

static int key_size(struct policy *pol, const struct conf_key *ck, const char *val, char *err,
		    size_t errlen, const char *where)
{
	uint64_t sz;
	if (parse_size(val, &sz) < 0 || sz == 0)
		return ERR(-1, "%s: %s = %s: not a size (512K, 256M, 2G)", where, ck->key, val);
	*FIELD_AT(pol, ck, uint64_t) = sz;
	return 0;
}

static int key_number(struct policy *pol, const struct conf_key *ck, const char *val, char *err,
		      size_t errlen, const char *where)
{
	long long n;
	if (parse_int(val, ck->min, ck->max, &n) < 0)
		return ERR(-1, "%s: %s = %s: not a number from %lld to %lld", where, ck->key, val,
			   ck->min, ck->max);
	if (ck->wide)
		*FIELD_AT(pol, ck, uint64_t) = (uint64_t)n;
	else
		*FIELD_AT(pol, ck, int) = (int)n;
	return 0;
}

static int key_list(struct policy *pol, const struct conf_key *ck, const char *val, char *err,
		    size_t errlen, const char *where)
{
	return set_plist(FIELD_AT(pol, ck, struct plist), val, ck->words, err, errlen, where, ck->key);
}

/* kill_grace, kill_grace_max */
static int key_grace(struct policy *pol, const struct conf_key *ck, const char *val, char *err,
		     size_t errlen, const char *where)
{
	int64_t d;
	if (parse_duration_s(val, &d) < 0 || d > 3600)
		return ERR(-1, "%s: %s = %s: not a duration up to 1h (0, 5s, 1m)", where, ck->key, val);
	*FIELD_AT(pol, ck, int64_t) = d;
	return 0;
}

/* timeout_default, timeout_max (which may be none: no ceiling, also on
 * a shared spool) */
static int key_timeout(struct policy *pol, const struct conf_key *ck, const char *val, char *err,
		       size_t errlen, const char *where)
{
	int64_t d;
	bool max = FIELD_AT(pol, ck, int64_t) == &pol->timeout_max_s;
	if (max && strcmp(val, "none") == 0)
		d = -1;
	else if (parse_duration_s(val, &d) < 0 || d == 0)
		return ERR(-1, "%s: %s = %s: not a duration (90, 90s, 5m, 2h)%s", where, ck->key, val,
			   max ? " or none" : "");
	*FIELD_AT(pol, ck, int64_t) = d;
	if (max)
		pol->timeout_max_set = true;
	else
		pol->builtin_timeout = false;
	return 0;
}

static int key_slots_per_user(struct policy *pol, const struct conf_key *ck, const char *val,
			      char *err, size_t errlen, const char *where)
{
	long long n;
	if (parse_int(val, 0, 4096, &n) < 0)
		return ERR(-1, "%s: %s = %s: not a number from 0 to 4096", where, ck->key, val);
	pol->slots_per_user = (int)n;
	pol->slots_per_user_auto = false;
	return 0;
}

static int key_drop_max_bytes(struct policy *pol, const struct conf_key *ck, const char *val,
			      char *err, size_t errlen, const char *where)
{
	if (strcmp(val, "none") == 0) {
		pol->drop_max_bytes = 0;
		pol->drop_max_pct = 0;
		return 0;
	}
	if (min_free_parse(val, &pol->drop_max_bytes, &pol->drop_max_pct) < 0)
		return ERR(-1, "%s: %s = %s: not a size, a percentage or both (1G, 10%%), or none",
			   where, ck->key, val);
	return 0;
}

static int key_term_grace(struct policy *pol, const struct conf_key *ck, const char *val, char *err,
			  size_t errlen, const char *where)
{
	int64_t d;
	if (parse_duration_s(val, &d) < 0 || d > 3600)
		return ERR(-1, "%s: %s = %s: not a duration up to 1h", where, ck->key, val);
	pol->term_grace_s = (int)d;
	return 0;
}

static int key_defaults(struct policy *pol, const struct conf_key *ck, const char *val, char *err,
			size_t errlen, const char *where)
{
	if (strcmp(val, "none") == 0)
		defaults_none(pol);
	else if (strcmp(val, "shared") != 0)
		return ERR(-1, "%s: %s = %s: not shared or none", where, ck->key, val);
	return 0;
}

static int key_cgroup(struct policy *pol, const struct conf_key *ck, const char *val, char *err,
		      size_t errlen, const char *where)
{
	if (cgroup_use_parse(val, &pol->cgroup) < 0)
		return ERR(-1, "%s: %s = %s: not require, auto or off", where, ck->key, val);
	return 0;
}

static int key_cgroup_parent(struct policy *pol, const struct conf_key *ck, const char *val,
			     char *err, size_t errlen, const char *where)
{
	if (val[0] != '/' || strlen(val) >= sizeof pol->cgroup_parent)
		return ERR(-1, "%s: %s = %s: not a cgroup path (/kart.slice)", where, ck->key, val);
	snprintf(pol->cgroup_parent, sizeof pol->cgroup_parent, "%s", val);
	return 0;
}

static int key_backend(struct policy *pol, const struct conf_key *ck, const char *val, char *err,
		       size_t errlen, const char *where)
{
	int b = backend_parse(val);
	if (b < 0)
		return ERR(-1, "%s: %s = %s: not a backend (bwrap, container, none or slurm)", where, ck->key,
			   val);
	pol->backend = (enum backend_id)b;
	return 0;
}

static int key_min_free(struct policy *pol, const struct conf_key *ck, const char *val, char *err,
			size_t errlen, const char *where)
{
	if (min_free_parse(val, &pol->min_free_bytes, &pol->min_free_pct) < 0)
		return ERR(-1, "%s: %s = %s: not a size, a percentage or both (64M, 1%%)", where,
			   ck->key, val);
	return 0;
}

static int key_results(struct policy *pol, const struct conf_key *ck, const char *val, char *err,
		       size_t errlen, const char *where)
{
	if (strcmp(val, "owner") && strcmp(val, "group"))
		return ERR(-1, "%s: %s = %s: not owner or group", where, ck->key, val);
	pol->results_group = val[0] == 'g';
	return 0;
}

static int key_net_uids(struct policy *pol, const struct conf_key *ck, const char *val, char *err,
			size_t errlen, const char *where)
{
	(void)ck;
	return set_net_uids(pol, val, err, errlen, where);
}

static int key_landlock(struct policy *pol, const struct conf_key *ck, const char *val, char *err,
			size_t errlen, const char *where)
{
	int m = ll_mode_parse(val);
	if (m < 0)
		return ERR(-1, "%s: %s = %s: not a mode (auto, enforce or off)", where, ck->key, val);
	pol->landlock = (enum ll_mode)m;
	return 0;
}

static int key_container_cmd(struct policy *pol, const struct conf_key *ck, const char *val,
			     char *err, size_t errlen, const char *where)
{
	if (container_cmd_set(pol, val) < 0)
		return ERR(-1, "%s: %s = %s: not a program name or an absolute path", where, ck->key,
			   val);
	return 0;
}

static int key_container_image(struct policy *pol, const struct conf_key *ck, const char *val,
			       char *err, size_t errlen, const char *where)
{
	if (container_image_set(pol, val) < 0)
		return ERR(-1, "%s: %s = %s: not an image reference", where, ck->key, val);
	return 0;
}

static int key_slurm_stage(struct policy *pol, const struct conf_key *ck, const char *val,
			   char *err, size_t errlen, const char *where)
{
	if (!bind_path_ok(val) || strlen(val) >= sizeof pol->slurm_stage)
		return ERR(-1, "%s: %s = %s: not an absolute path (a directory every node sees at that path)",
			   where, ck->key, val);
	snprintf(pol->slurm_stage, sizeof pol->slurm_stage, "%s", val);
	return 0;
}

static int key_slurm_bin(struct policy *pol, const struct conf_key *ck, const char *val,
			 char *err, size_t errlen, const char *where)
{
	if (!bind_path_ok(val) || strlen(val) >= sizeof pol->slurm_bin)
		return ERR(-1, "%s: %s = %s: not an absolute path (the directory of sbatch)", where,
			   ck->key, val);
	snprintf(pol->slurm_bin, sizeof pol->slurm_bin, "%s", val);
	return 0;
}

/* partition (both lanes, or the batch lane where partition_fast is
 * set), partition_fast, account: a name of Slurm's. */
static int key_slurm_name(struct policy *pol, const struct conf_key *ck, const char *val,
			  char *err, size_t errlen, const char *where)
{
	char *dst = (char *)pol + ck->off;
	if (slurm_name_set(dst, 128, val) < 0)
		return ERR(-1, "%s: %s = %s: not a Slurm name (letters, digits, '.', '_', '-')", where,
			   ck->key, val);
	return 0;
}

static int key_slurm_ms(struct policy *pol, const struct conf_key *ck, const char *val,
			char *err, size_t errlen, const char *where)
{
	int64_t s;
	if (parse_duration_s(val, &s) < 0 || s < 1 || s > 3600)
		return ERR(-1, "%s: %s = %s: not a duration from 1s to 1h", where, ck->key, val);
	*(int64_t *)((char *)pol + ck->off) = s * 1000;
	return 0;
}

static int key_on_done(struct policy *pol, const struct conf_key *ck, const char *val, char *err,
		       size_t errlen, const char *where)
{
	if (!bind_path_ok(val))
		return ERR(-1, "%s: %s = %s: not an absolute path to a program", where, ck->key, val);
	snprintf(pol->on_done, sizeof pol->on_done, "%s", val);
	return 0;
}

#define BOOL(s, k, f) {s, k, key_bool, FIELD(f, bool), 0, 0, false, 0}
#define SIZE(s, k, f) {s, k, key_size, FIELD(f, uint64_t), 0, 0, false, 0}
#define INT(s, k, f, lo, hi) {s, k, key_number, FIELD(f, int), lo, hi, false, 0}
#define COUNT(s, k, f, lo, hi) {s, k, key_number, FIELD(f, uint64_t), lo, hi, true, 0}
#define LIST(s, k, f, w) {s, k, key_list, FIELD(f, struct plist), 0, 0, false, w}
#define OWN(s, k, fn) {s, k, fn, 0, 0, 0, false, 0}
#define OWN_AT(s, k, fn, f, type) {s, k, fn, FIELD(f, type), 0, 0, false, 0}

/* Every key of kart.conf but [limits]'s and [lane.*]'s memory, pids and
 * cpu (conf_limit) and [kind.NAME]'s (policy_kind.c). */
static const struct conf_key conf_keys[] = {
	OWN("worker", "backend", key_backend),
	INT("worker", "slots", slots[0], 0, 4096),
	INT("worker", "batch_slots", slots[1], 0, 4096),
	OWN("worker", "term_grace", key_term_grace),
	OWN("worker", "min_free", key_min_free),
	OWN("worker", "results", key_results),
	INT("worker", "retries", retries_default, 0, 100),

	OWN("limits", "defaults", key_defaults),
	BOOL("limits", "leaf_memory", leaf_memory),
	OWN("limits", "priority_allow", set_prio_allow),
	OWN("limits", "slots_per_user", key_slots_per_user),
	OWN("limits", "drop_max_bytes", key_drop_max_bytes),
	COUNT("limits", "drop_max_files", drop_max_files, 0, 100000000),
	OWN("limits", "cgroup", key_cgroup),
	OWN("limits", "cgroup_parent", key_cgroup_parent),
	BOOL("limits", "rlimit_as", rlimit_as),
	OWN_AT("limits", "kill_grace", key_grace, kill_grace_s, int64_t),
	OWN_AT("limits", "kill_grace_max", key_grace, kill_grace_max_s, int64_t),
	OWN_AT("limits", "timeout_default", key_timeout, timeout_default_s, int64_t),
	OWN_AT("limits", "timeout_max", key_timeout, timeout_max_s, int64_t),
	SIZE("limits", "output_default", output_default),
	SIZE("limits", "output_max", output_max),
	SIZE("limits", "task_max", task_max_bytes),
	SIZE("limits", "artifacts_max", artifacts_max),
	COUNT("limits", "artifacts_files", artifacts_files, 1, 100000000),
	INT("limits", "artifacts_depth", artifacts_depth, 1, OUTDIR_DEPTH_MAX),
	INT("limits", "after_max", after_max, 1, 10000000),

	OWN("network", "allow_uids", key_net_uids),
	OWN("network", "allow_groups", set_net_gids),
	LIST("network", "cred_env", cred_env, PL_ENV),
	LIST("network", "cred_files", cred_files, PL_PATHS),

	OWN("sandbox", "landlock", key_landlock),
	BOOL("sandbox", "allow_root", allow_root),
	SIZE("sandbox", "tmpfs_size", tmpfs_size),
	LIST("sandbox", "ro_binds", ro_binds, PL_PATHS),
	LIST("sandbox", "rw_binds", rw_binds, PL_PATHS),
	BOOL("sandbox", "task_binds", task_binds),
	LIST("sandbox", "task_bind_roots", task_bind_roots, PL_PATHS),
	LIST("sandbox", "env_deny", env_deny, PL_ENV_PAT),
	LIST("sandbox", "env_pass", env_pass, PL_ENV),
	BOOL("sandbox", "allow_unsandboxed", allow_unsandboxed),

	OWN("container", "command", key_container_cmd),
	OWN("container", "image", key_container_image),
	LIST("container", "extra_args", container_extra, PL_ARGS),
	BOOL("container", "seccomp", container_seccomp),

	OWN("slurm", "stage", key_slurm_stage),
	LIST("slurm", "shared", slurm_shared, PL_PATHS),
	OWN_AT("slurm", "partition", key_slurm_name, slurm_partition[1], char[128]),
	OWN_AT("slurm", "partition_fast", key_slurm_name, slurm_partition[0], char[128]),
	OWN_AT("slurm", "account", key_slurm_name, slurm_account, char[128]),
	OWN("slurm", "bin", key_slurm_bin),
	OWN_AT("slurm", "poll", key_slurm_ms, slurm_poll_ms, int64_t),
	OWN_AT("slurm", "receipt_wait", key_slurm_ms, slurm_receipt_ms, int64_t),

	OWN("hooks", "on_done", key_on_done),
};
#undef BOOL
#undef SIZE
#undef INT
#undef COUNT
#undef LIST
#undef OWN
#undef OWN_AT

/* One key of kart.conf: [sec] key = val. */
static int conf_set(struct policy *pol, const char *sec, const char *key, const char *val,
		    char *err, size_t errlen, const char *where)
{
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
	for (size_t i = 0; i < ARRAY_SIZE(conf_keys); i++)
		if (strcmp(conf_keys[i].sec, sec) == 0 && strcmp(conf_keys[i].key, key) == 0)
			return conf_keys[i].set(pol, &conf_keys[i], val, err, errlen, where);
	return ERR(-1, "%s: unknown key '%s' in section [%s]", where, key, sec);
}

/* A section holds keys of the table, or is a lane's. */
static bool section_known(const char *sec)
{
	if (strcmp(sec, "lane.fast") == 0 || strcmp(sec, "lane.batch") == 0)
		return true;
	for (size_t i = 0; i < ARRAY_SIZE(conf_keys); i++)
		if (strcmp(conf_keys[i].sec, sec) == 0)
			return true;
	return false;
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
			if (!section_known(sec))
				return ERR(-1, "%s: unknown section [%s] (known: worker, limits, lane.fast, "
					   "lane.batch, network, sandbox, container, slurm, hooks, kind.NAME)", where, sec);
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
	/* A credential must not reach tasks without network. */
	for (const char *e = NULL; (e = plist_next(&pol->cred_env, e));)
		if (plist_has(&pol->env_pass, e))
			return ERR(-1, "%s: %s is both in [sandbox] env_pass and in [network] cred_env", fname,
				   e);
	return kinds_check(pol, fname, err, errlen);
}
