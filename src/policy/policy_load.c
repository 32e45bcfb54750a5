/* policy_load.c - the effective policy: safe defaults, the host's
 * capacity as ceilings, then kart.conf (policy_conf.c), then KART_*
 * environment overrides. A bad override is an error naming the
 * variable, never a silent fallback. Then the checks before the worker
 * starts, and the policy's JSON. */
#define _GNU_SOURCE
#include "policy_int.h"

#include <limits.h>
#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "depend.h"
#include "util.h"

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

/* zeroed: pol is all zero already (a process's first read into the
 * memo, in .bss): the pages it leaves unwritten are never touched. */
static int policy_read(struct policy *pol, bool zeroed, const char *spool_dir, char *err,
		       size_t errlen)
{
	struct sysinfo si;
	const char *v;
	if (!zeroed)
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
	pol->after_max = DEPWAIT_MAX_DEFAULT;
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
	/* A shared spool's members (worker_quota.c): a tenth of the disk,
	 * and 10,000 entries, each in tmp/ and their drop directory. */
	pol->drop_max_pct = 10;
	pol->drop_max_files = 10000;
	pol->slots_per_user_auto = true;
	snprintf(pol->bwrap, sizeof pol->bwrap, "bwrap");
	snprintf(pol->container_cmd, sizeof pol->container_cmd, "docker");
	pol->container_seccomp = true;
	pol->slurm_poll_ms = 5000;
	pol->slurm_receipt_ms = 20000;
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
			return ERR(-1, "KART_BACKEND=%s: not a backend (bwrap, container, none or slurm)", v);
		pol->backend = (enum backend_id)b;
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
		if (strcmp(v, "none") == 0)
			pol->timeout_max_s = -1;
		else if (parse_duration_s(v, &pol->timeout_max_s) < 0)
			return ERR(-1, "KART_TIMEOUT_MAX=%s: not a duration or none", v);
		pol->timeout_max_set = true;
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
	/* A shared spool (drop/: kart.tmpfiles) bounds each member unless
	 * kart.conf says otherwise: no task holds a slot for more than a day
	 * (and slots_per_user, once the worker knows its slots). */
	if (spool_dir) {
		char p[4096];
		struct stat st;
		pol->shared = pathfmt(p, sizeof p, "%s/drop", spool_dir) == 0 && lstat(p, &st) == 0 &&
			      S_ISDIR(st.st_mode);
	}
	if (pol->shared && !pol->timeout_max_set)
		pol->timeout_max_s = 24 * 3600;
	if (!pol->shared)
		pol->slots_per_user_auto = false;
	if (pol->backend == BACKEND_SLURM) {
		/* Its tasks run on the nodes: this host's memory and cores are
		 * no ceiling of theirs, nor its share a default (Slurm's
		 * partitions have their own); what was set stays. */
		if (!pol->memory_max_set)
			pol->memory_max = UINT64_MAX;
		if (!pol->cpu_max_set)
			pol->cpu_max_milli = UINT32_MAX;
		pol->builtin_memory = false;
	}
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

/* The last policy read in this process, and what it was read from: a
 * command reads it up to five times (kart submit: the cwd, a low spool,
 * a network grant, ...), each a dozen system calls. */
static struct {
	bool ok, conf;     /* conf: there was a kart.conf, of identity st */
	bool used;         /* pol was written: no longer all zero */
	char dir[4096];
	struct stat st;
	char env[8192];    /* the KART_* variables it saw */
	struct policy pol;
} memo;

/* The environment's KART_* variables, one after the other: false when
 * they do not fit. */
static bool env_key(char *out, size_t len)
{
	extern char **environ;
	size_t o = 0;
	out[0] = '\0';
	for (char **e = environ; e && *e; e++) {
		if (strncmp(*e, "KART_", 5) != 0)
			continue;
		size_t l = strlen(*e);
		if (o + l + 2 > len)
			return false;
		memcpy(out + o, *e, l);
		o += l;
		out[o++] = '\n';
		out[o] = '\0';
	}
	return true;
}

static bool conf_stat(const char *spool_dir, struct stat *st)
{
	char path[4096];
	return spool_dir && pathfmt(path, sizeof path, "%s/kart.conf", spool_dir) == 0 &&
	       stat(path, st) == 0;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Whether the memo holds for spool_dir; *k is what it is keyed by now,
 * for memo_keep after a new read. */
struct memo_key {
	bool conf, keyed;
	struct stat st;
	const char *dir;
	char env[sizeof memo.env];
};

static bool memo_hit(const char *spool_dir, struct memo_key *k)
{
	k->st = (struct stat){0};
	k->conf = conf_stat(spool_dir, &k->st);
	k->dir = spool_dir ? spool_dir : "";
	k->keyed = env_key(k->env, sizeof k->env);
	return memo.ok && k->keyed && strcmp(memo.dir, k->dir) == 0 && memo.conf == k->conf &&
	       (!k->conf || same_file(&memo.st, &k->st)) && strcmp(memo.env, k->env) == 0;
}

static void memo_keep(const struct memo_key *k)
{
	if (!k->keyed || strlen(k->dir) >= sizeof memo.dir)
		return;
	memcpy(memo.env, k->env, sizeof k->env);
	memo.conf = k->conf;
	memo.st = k->st;
	snprintf(memo.dir, sizeof memo.dir, "%s", k->dir);
	memo.ok = true;
}

int policy_load(struct policy *pol, const char *spool_dir, char *err, size_t errlen)
{
	struct memo_key k;
	if (memo_hit(spool_dir, &k)) {
		*pol = memo.pol;
		return 0;
	}
	memo.ok = false;
	int r = policy_read(pol, false, spool_dir, err, errlen);
	if (r == 0) {
		memo.pol = *pol;
		memo.used = true;
		memo_keep(&k);
	}
	return r;
}

const struct policy *policy_get(const char *spool_dir, char *err, size_t errlen)
{
	struct memo_key k;
	if (memo_hit(spool_dir, &k))
		return &memo.pol;
	memo.ok = false;
	bool zeroed = !memo.used;
	memo.used = true;
	if (policy_read(&memo.pol, zeroed, spool_dir, err, errlen) < 0)
		return NULL;
	memo_keep(&k);
	return &memo.pol;
}

void policy_forget(void) { memo.ok = false; }

int policy_prepare(struct policy *pol, const char *spool_dir, char *err, size_t errlen)
{
	char cand[PATH_MAX];
	if ((pol->backend == BACKEND_BWRAP || pol->backend == BACKEND_SLURM) && !strchr(pol->bwrap, '/')) {
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

/* The stage is a directory, and neither holds the spool nor lies in it:
 * the spool stays on the worker's local disk, and what the nodes write
 * never lands in it. */
static int slurm_check(const struct policy *pol, const char *spool_dir, char *err, size_t errlen)
{
	struct stat st, sp;
	if (!pol->slurm_stage[0])
		return ERR(-1, "backend slurm needs a stage: set [slurm] stage in kart.conf to a "
			   "directory this host and every node see at the same path");
	if (stat(pol->slurm_stage, &st) < 0)
		return ERR(-1, "[slurm] stage = %s: %s", pol->slurm_stage, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return ERR(-1, "[slurm] stage = %s: not a directory", pol->slurm_stage);
	if (!spool_dir)
		return 0;
	char rs[PATH_MAX], rp[PATH_MAX];
	if (!realpath(pol->slurm_stage, rs) || !realpath(spool_dir, rp) || stat(rp, &sp) < 0)
		return 0;
	size_t ls = strlen(rs), lp = strlen(rp);
	if ((lp >= ls && strncmp(rp, rs, ls) == 0 && (rp[ls] == '/' || !rp[ls] || ls == 1)) ||
	    (ls > lp && strncmp(rs, rp, lp) == 0 && rs[lp] == '/'))
		return ERR(-1, "[slurm] stage = %s and the spool %s overlap: the spool stays on this "
			   "host's local disk, and the stage is a directory of the shared filesystem "
			   "outside it", pol->slurm_stage, spool_dir);
	return 0;
}

int policy_backend_check(const struct policy *pol, const char *spool_dir, char *err,
			 size_t errlen)
{
	if (pol->backend == BACKEND_CONTAINER && !pol->container_image[0])
		return ERR(-1, "backend container needs an image: set [container] image in kart.conf "
			   "(or KART_CONTAINER_IMAGE)");
	if (pol->backend == BACKEND_SLURM)
		return slurm_check(pol, spool_dir, err, errlen);
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
	json_object_set_new(lim, "after_max", json_integer(pol->after_max));
	json_t *kinds = json_object();
	for (int i = 0; i < pol->n_kinds; i++) {
		const struct kind *k = &pol->kinds[i];
		json_t *ext = json_array(), *cred = json_array();
		for (int j = 0; j < k->n_ext; j++)
			json_array_append_new(ext, json_string(k->ext[j]));
		for (int j = 0; j < k->n_cred; j++)
			json_array_append_new(cred, json_string(k->cred[j]));
		json_object_set_new(kinds, k->name,
				    json_pack("{s:s, s:o, s:b, s:o, s:o, s:o, s:o, s:o}", "runner", k->runner,
					      "extensions", ext, "net", k->net, "credentials", cred,
					      "endpoint", k->endpoint[0] ? json_string(k->endpoint) : json_null(),
					      "endpoint_uid", k->endpoint_uid >= 0 ? json_integer(k->endpoint_uid)
										  : json_null(),
					      "endpoint_socket", k->endpoint_socket[0]
								 ? json_string(k->endpoint_socket)
								 : json_null(),
					      "model", k->model[0] ? json_string(k->model) : json_null()));
	}
	json_object_set_new(o, "kinds", kinds);
	json_object_set_new(json_object_get(o, "worker"), "results",
			    json_string(pol->results_group ? "group" : "owner"));
	json_object_set_new(json_object_get(o, "worker"), "min_free",
			    json_pack("{s:I, s:i}", "bytes", (json_int_t)pol->min_free_bytes,
				      "percent", (int)pol->min_free_pct));
	json_object_set_new(lim, "slots_per_user", json_integer(pol->slots_per_user));
	json_object_set_new(lim, "shared", json_boolean(pol->shared));
	json_object_set_new(lim, "drop_max_bytes",
			    json_pack("{s:I, s:i}", "bytes", (json_int_t)pol->drop_max_bytes,
				      "percent", (int)pol->drop_max_pct));
	json_object_set_new(lim, "drop_max_files", json_integer((json_int_t)pol->drop_max_files));
	json_object_set_new(json_object_get(o, "sandbox"), "allow_unsandboxed",
			    json_boolean(pol->allow_unsandboxed));
	json_object_set_new(o, "container",
			    json_pack("{s:s, s:o, s:b, s:o}", "command", pol->container_cmd, "image",
				      pol->container_image[0] ? json_string(pol->container_image)
							      : json_null(),
				      "seccomp", pol->container_seccomp, "extra_args",
				      plist_json(&pol->container_extra)));
	json_object_set_new(
		o, "slurm",
		json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:I, s:I}", "stage",
			  pol->slurm_stage[0] ? json_string(pol->slurm_stage) : json_null(), "shared",
			  plist_json(&pol->slurm_shared), "partition",
			  pol->slurm_partition[1][0] ? json_string(pol->slurm_partition[1]) : json_null(),
			  "partition_fast",
			  pol->slurm_partition[0][0] ? json_string(pol->slurm_partition[0]) : json_null(),
			  "account", pol->slurm_account[0] ? json_string(pol->slurm_account) : json_null(),
			  "bin", pol->slurm_bin[0] ? json_string(pol->slurm_bin) : json_null(), "poll_ms",
			  (json_int_t)pol->slurm_poll_ms, "receipt_wait_ms",
			  (json_int_t)pol->slurm_receipt_ms));
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
