/* policy.h - what the host allows: defaults, ceilings, grants, backend.
 * Built-in safe defaults and the host's own capacity (cores, memory),
 * then SPOOL/kart.conf, then KART_* environment overrides. */
#ifndef KART_POLICY_H
#define KART_POLICY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "landlock.h"

/* A list from kart.conf ("a, b, c"): n NUL-terminated strings back to
 * back, held inline so that a policy is copied with `=`. */
#define PLIST_BYTES 4096
struct plist {
	int n;
	char buf[PLIST_BYTES];
};

enum backend_id { BACKEND_BWRAP, BACKEND_NONE, BACKEND_CONTAINER, BACKEND_SLURM };

/* [limits] cgroup: require (a task without its leaf is refused), auto
 * (without one, the rlimit fallback), off (never a cgroup). */
enum cgroup_use { CGROUP_AUTO, CGROUP_REQUIRE, CGROUP_OFF };

/* The defaults and ceilings for memory, pids and cpu in one lane. */
struct lane_limits {
	uint64_t memory_default, memory_max; /* 0: none / no ceiling set */
	int64_t pids_default, pids_max;
	uint32_t cpu_default_milli, cpu_max_milli;
};

/* [kind.NAME]: a task kind and the runner that runs its task files.
 * Chosen by the directive kind=NAME, or by the file's extension when it
 * has no #! line (task.c: task_resolve_kind). */
#define KIND_MAX 16
#define KIND_NAME_MAX 32 /* [a-z0-9_-], 1 to 31 bytes */
#define KIND_EXT_MAX 8
#define KIND_CRED_MAX 8
struct kind {
	char name[KIND_NAME_MAX];
	char runner[256];      /* absolute; like a #! interpreter, under 256 bytes */
	char ext[KIND_EXT_MAX][16]; /* ".py" */
	int n_ext;
	bool net;              /* the kind needs network: granted, or rejected */
	/* Worker variables passed to tasks of this kind only, with network. */
	char cred[KIND_CRED_MAX][64];
	int n_cred;
	char endpoint[512];    /* $KART_LLM_ENDPOINT; "" unset */
	char model[128];       /* $KART_LLM_MODEL; "" unset */
	/* Who the forwarder may hand the credential to over http://: the
	 * uid whose socket must hold the other end (-1 unset), reached at
	 * a port of this host or at endpoint_socket ("" : by TCP). */
	long long endpoint_uid;
	char endpoint_socket[108];
};

struct policy {
	enum backend_id backend;
	char conf_path[4096];    /* SPOOL/kart.conf, read or not; "" without a spool */
	int slots[2];            /* per lane: fast, batch */
	uint64_t output_default; /* per stream */
	uint64_t output_max;
	uint64_t task_max_bytes; /* larger task files are rejected */
	uint64_t artifacts_max;  /* $KART_OUTDIR kept only up to this */
	/* and up to this many entries, nested this deep at most; under
	 * bwrap the bytes and entries bound it while the task runs (outdir.h) */
	uint64_t artifacts_files;
	int artifacts_depth;
	/* after=: the deepest chain of waiting tasks, and the most tasks one
	 * look through the graph follows (depend.h) */
	int after_max;
	int retries_default;     /* re-queues after an interrupted run */
	/* [worker] results = group: results and outputs readable by the
	 * spool's group too (else by their submitter and root alone). */
	bool results_group;
	int64_t timeout_default_s; /* -1: none */
	int64_t timeout_max_s;     /* -1: none */
	uint64_t memory_max;       /* ceiling; the host's memory */
	/* [limits] memory_max, cpu_max were set: else the host's, which
	 * backend slurm does not hold its tasks to (they run on the nodes) */
	bool memory_max_set, cpu_max_set;
	int64_t pids_max;
	uint32_t cpu_max_milli;    /* ceiling; the host's cores */
	/* [limits] memory/pids/cpu_default: for a task that asks for none
	 * (0: none). [lane.fast] / [lane.batch]: per lane (0: as [limits]). */
	uint64_t memory_default;
	int64_t pids_default;
	uint32_t cpu_default_milli;
	struct lane_limits lane[2];
	/* The built-in defaults for a shared machine (timeout 1h, memory a
	 * share of the host, 512 pids, 256M tmpfs) still hold, none set in
	 * kart.conf: they yield to a lower ceiling, and memory and pids are
	 * dropped, not refused, where no cgroup or rlimit can hold them.
	 * [limits] defaults = none turns them all off. */
	bool builtin_timeout, builtin_memory, builtin_pids;
	/* Each task's memory counted in its own leaf, limit or not (on v1 a
	 * memory leaf per task, which is then never kept for the next run);
	 * defaults = none leaves it to the limits, for speed. */
	bool leaf_memory;
	/* [limits] priority_allow: who may ask for a priority below 0
	 * (root always); others are clamped to 0. */
	uid_t prio_uids[64];
	int n_prio_uids;
	gid_t prio_gids[64];
	int n_prio_gids;
	/* [limits] slots_per_user: running tasks of one submitter, at most,
	 * per worker (0: no cap). On a shared spool (drop/ exists), unless
	 * set: half the worker's slots, at least 1 (the worker sets it once
	 * its slots are known: slots_per_user_auto). */
	int slots_per_user;
	bool slots_per_user_auto;
	/* timeout_max set by kart.conf or KART_TIMEOUT_MAX ("none" too):
	 * else a shared spool's is 24 h. */
	bool timeout_max_set;
	bool shared;               /* the spool has drop/: its members are bounded */
	/* [limits] drop_max_bytes, drop_max_files: a member's share of the
	 * spool's disk, enforced by the worker on tmp/ and drop/USER/
	 * (worker_quota.c); below min_free, no claim for a member who holds
	 * more than drop_max_bytes in the spool. Bytes: the lesser of a
	 * size and a percentage of the filesystem (0: not set); files: 0,
	 * no bound. Only on a shared spool. */
	uint64_t drop_max_bytes;
	unsigned drop_max_pct;
	uint64_t drop_max_files;
	enum cgroup_use cgroup;    /* [limits] cgroup, KART_CGROUP */
	char cgroup_parent[1024];  /* [limits] cgroup_parent, KART_CGROUP_PARENT; "": own */
	bool rlimit_as;            /* KART_RLIMIT_USE_AS=1: memory= by RLIMIT_AS without a cgroup */
	int term_grace_s;          /* SIGTERM: running tasks get this long */
	int64_t kill_grace_s;      /* [limits] kill_grace: a timeout or cancel's SIGTERM, then SIGKILL */
	int64_t kill_grace_max_s;  /* [limits] kill_grace_max: the directive's ceiling */
	/* [worker] min_free: below the lesser of these (0: not set), a
	 * worker claims nothing new (space.h). */
	uint64_t min_free_bytes;
	unsigned min_free_pct;
	bool net_all;              /* network for every submitter */
	uid_t net_uids[64];
	int n_net_uids;
	gid_t net_gids[64];        /* [network] allow_groups: members of these */
	int n_net_gids;
	char bwrap[4096];
	char launcher[4096];
	/* [sandbox] */
	enum ll_mode landlock;
	bool allow_root;         /* a root worker runs root-owned task files */
	uint64_t tmpfs_size;     /* /tmp and /work (bwrap --size); 0: bwrap's default */
	struct plist ro_binds, rw_binds; /* host paths, bound at the same path */
	struct plist env_pass;   /* worker variables passed into every task */
	/* A task's own cwd=, bind= and ro= (task_binds), only in these trees
	 * (task_bind_roots; none: wherever its submitter can reach), and
	 * the names its env= may not set (env_deny; "NAME" or "PREFIX*"). */
	bool task_binds;
	struct plist task_bind_roots, env_deny;
	/* [network]: only for tasks with network; never in argv, results, logs */
	struct plist cred_env, cred_files;
	/* [hooks] */
	char on_done[4096];      /* run with the result's path after each task */
	struct kind kinds[KIND_MAX]; /* [kind.NAME] */
	int n_kinds;
	/* [sandbox] allow_unsandboxed: backend none even on a spool that
	 * several users can write (see policy_backend_check). */
	bool allow_unsandboxed;
	/* [container]: backend container (docker, podman, nerdctl). */
	char container_cmd[4096];   /* the CLI: a name in PATH or a path */
	char container_image[512];  /* required with backend container */
	bool container_seccomp;     /* hand it our filter as a JSON profile */
	struct plist container_extra; /* extra_args: engine options, each
				       * --name or --name=value, none on
				       * container_arg_denied's list */
	/* [slurm]: backend slurm, each task a job of a Slurm cluster. */
	char slurm_stage[1024];     /* shared by this host and every node; required */
	/* where a task's cwd=, bind= and ro= may be: paths the nodes see
	 * as this host does (none: the stage alone) */
	struct plist slurm_shared;
	char slurm_partition[2][128]; /* per lane (fast, batch); "": as the other, or Slurm's default */
	char slurm_account[128];    /* sbatch --account; "": none */
	char slurm_bin[1024];       /* sbatch, squeue, sacct, scancel, scontrol there; "": PATH */
	int64_t slurm_poll_ms;      /* the longest wait between two looks at the jobs */
	int64_t slurm_receipt_ms;   /* how long a result waits for sacct's record */
};

/* ---- policy.c: the values, and what the worker asks --------------------- */

/* What holds in lane (0 fast, 1 batch): its own values, else [limits]. */
void policy_lane_limits(const struct policy *pol, int lane, struct lane_limits *out);

bool policy_net_allowed(const struct policy *pol, uid_t uid);
/* Each variable the policy passes from the worker's environment into
 * tasks ([sandbox] env_pass, [network] cred_env, [kind.NAME] cred), once,
 * with where it is named: fn(name, where, arg). */
void policy_env_names(const struct policy *pol,
		      void (*fn)(const char *name, const char *where, void *arg), void *arg);
bool policy_priority_allowed(const struct policy *pol, uid_t uid);

/* Iterate: for (const char *s = NULL; (s = plist_next(l, s));) */
const char *plist_next(const struct plist *l, const char *prev);
bool plist_has(const struct plist *l, const char *s);

const char *backend_name(enum backend_id b);
/* "bwrap", "none", "container" or "slurm"; -1 for anything else. */
int backend_parse(const char *s);
const char *cgroup_use_name(enum cgroup_use c);

/* A helper program of ours (kart-launch, kart-sync): beside the running
 * binary (a build tree, or a bin/ that holds both), else in LIBEXECDIR. */
void find_libexec(const char *name, char *out, size_t len);

/* Why an [container] extra_args word may not be given to the engine
 * (it would undo or bypass what kart sets: privileges, capabilities,
 * seccomp, the network, namespaces, mounts, devices, the user, limits,
 * the command), or NULL when it may. */
const char *container_arg_denied(const char *arg);

/* ---- policy_kind.c: [kind.NAME] ----------------------------------------- */

bool kind_name_ok(const char *s);
/* The kind called name, or the one whose extensions match the end of
 * file name fname; NULL if none. */
const struct kind *policy_kind(const struct policy *pol, const char *name);
const struct kind *policy_kind_by_ext(const struct policy *pol, const char *fname);

/* ---- policy_conf.c: SPOOL/kart.conf ------------------------------------- */

/* Parse kart.conf text into pol (over whatever pol holds). */
int policy_parse_conf(struct policy *pol, const char *text, const char *fname, char *err,
		      size_t errlen);

/* ---- policy_load.c: the effective policy -------------------------------- */

/* Fill pol from defaults, spool_dir/kart.conf (if spool_dir is given and
 * the file exists) and the environment. On an unreadable file, a bad
 * line or a bad override returns -1 with err naming the file and line or
 * the variable; never falls back silently to defaults. */
int policy_load(struct policy *pol, const char *spool_dir, char *err, size_t errlen);
/* The same policy, not copied (90 KB): read-only, valid until the next
 * policy_load, policy_get or policy_forget of the process. NULL: err. */
const struct policy *policy_get(const char *spool_dir, char *err, size_t errlen);
/* policy_load reads a spool's policy once per process while its
 * kart.conf is the same, unchanged file; this makes the next call read
 * everything again (the host's memory and cores too: a SIGHUP). */
void policy_forget(void);

/* Ready to run tasks: the backend's program (bwrap given by name, the
 * container CLI) resolved from PATH, then policy_backend_check. A bwrap
 * given as a path is taken as given: if it cannot run, each task is
 * refused, saying so. Returns 0, or -1 with err saying what to do. */
int policy_prepare(struct policy *pol, const char *spool_dir, char *err, size_t errlen);
/* Whether the backend may run on this spool: backend container needs an
 * image; backend none is refused on a spool that users other than its
 * owner can write (new/ writable by group or others), unless the policy
 * sets allow_unsandboxed. Returns 0, or -1 with err saying why. */
int policy_backend_check(const struct policy *pol, const char *spool_dir, char *err,
			 size_t errlen);

/* The effective policy as JSON text (kart doctor); caller frees.
 * Credentials appear by name only. */
char *policy_describe(const struct policy *pol);

#endif
