/* cgroup.h - one cgroup leaf per task: create it and write its limits,
 * put the task's first process in it, read what the task used, kill
 * whatever is left in it and remove it.
 *
 * Two layouts. v2: one directory, under a delegated parent (the
 * worker's own cgroup, or KART_CGROUP_PARENT). v1 / hybrid: one
 * directory per hierarchy (memory, pids, cpu, cpuacct, freezer) under
 * the worker's own cgroup in each, plus one in the controller-less
 * cgroup2 mount (ROOT/unified) where it exists, for cgroup.kill and
 * cpu.stat.
 *
 * Two files: cgroup_host.c finds the host's mode and the leaves'
 * parents; cgroup.c, above it, makes and ends the leaves (and sweeps and
 * probes with them). One section below per file.
 *
 * Every function returns 0 or -errno and prints nothing. The root of
 * the cgroupfs is a parameter: the unit tests run on a tree of plain
 * files (`fake`). */
#ifndef KART_CGROUP_H
#define KART_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CG_ROOT_DEFAULT "/sys/fs/cgroup"
#define CG_PATH_MAX 1024
#define CG_CPU_PERIOD_US 100000

enum cg_mode { CG_MODE_NONE, CG_MODE_V1, CG_MODE_V2 };

/* Where a leaf has a directory. In v2 only CG_UNIFIED is used. */
enum cg_slot { CG_UNIFIED, CG_MEMORY, CG_PIDS, CG_CPU, CG_CPUACCT, CG_FREEZER, CG__SLOTS };

/* v2 controllers, as a mask. */
enum { CG_CTL_MEMORY = 1, CG_CTL_PIDS = 2, CG_CTL_CPU = 4 };

struct cg_host {
	enum cg_mode mode;
	bool fake;          /* plain files: control files are created on write
			     * and every write is appended; no signal is sent */
	char root[CG_PATH_MAX];
	/* The parent of the leaves, per slot; "" where there is none. */
	char parent[CG__SLOTS][CG_PATH_MAX];
	/* v1 hierarchies mounted together (cpu,cpuacct): the slot whose
	 * directory this one shares, or -1. */
	int alias[CG__SLOTS];
	bool memsw;         /* v1: memory.memsw.* exists (swap accounting) */
	/* v2: the worker's own cgroup is the parent (it may have to move
	 * itself out of it: no internal processes). */
	bool self_in_parent;
	bool prepared;      /* v2: every delegated controller enabled in the parent */
	unsigned avail;     /* v2: controllers delegated to the parent */
	unsigned ctls;      /* v2: controllers enabled for the leaves */
	int enable_err;     /* v2: why enabling one failed (-errno), or 0 */
};

struct cg_limits {
	uint64_t memory;    /* bytes; 0: none */
	int64_t pids;       /* 0: none */
	uint32_t cpu_milli; /* thousandths of a core; 0: none */
	/* Count the task's memory even with no limit: on v1, a memory leaf
	 * of its own (a new one counts from 0), where the hierarchy is
	 * there; its absence is no error. v2 counts in the unified leaf. */
	bool memory_peak;
};

/* The pressure stall totals of a cgroup2 directory (its *.pressure
 * files; a hybrid host's controller-less unified leaf has them too). */
enum cg_psi { CG_PSI_CPU_SOME, CG_PSI_CPU_FULL, CG_PSI_MEMORY_SOME, CG_PSI_MEMORY_FULL,
	      CG_PSI_IO_SOME, CG_PSI_IO_FULL, CG_PSI__N };

/* The counters that only grow: a run's share is what they grew by. */
struct cg_count {
	int64_t cpu_user_us, cpu_system_us, oom_kills; /* -1: unknown */
	int64_t pressure[CG_PSI__N];                   /* -1: unknown */
};

struct cg_leaf {
	enum cg_mode mode;  /* kept after removal: what the task ran under */
	bool fake;
	unsigned used;      /* slots (1 << enum cg_slot) with a directory */
	bool killed;        /* a kill was sent to it (cg_leaf_kill*) */
	struct cg_limits lim; /* the values written in it (0: none) */
	/* The counters when the run began (0 in a new leaf; a renewed one's
	 * last reading), and as cg_usage_read last read them. */
	struct cg_count base, last;
	int64_t pids_peak_last; /* pids.peak at that reading; -1: unknown */
	char path[CG__SLOTS][CG_PATH_MAX];
};

struct cg_usage {
	int64_t memory_peak;   /* bytes; -1: unknown */
	int64_t cpu_user_us, cpu_system_us; /* -1: unknown */
	int64_t oom_kills;     /* -1: unknown */
	int64_t pids_peak;     /* the most processes (and threads) at once; -1: unknown */
	int64_t pressure[CG_PSI__N]; /* total= in microseconds; -1: unknown */
	bool unified;          /* the leaf had a cgroup2 directory (where PSI is kept) */
};

/* ---- the host (cgroup_host.c) ----------------------------------------- */

const char *cg_mode_name(enum cg_mode m);

/* Find the mode and the parents. root NULL: CG_ROOT_DEFAULT.
 * self_cgroup: the text of /proc/self/cgroup (NULL: read it). parent:
 * a cgroup path ("/kart.slice") relative to each hierarchy's root, used
 * instead of the worker's own cgroup (NULL or "": none). Returns 0 with
 * mode CG_MODE_NONE when there is no cgroupfs at all. */
int cg_host_init(struct cg_host *h, const char *root, const char *self_cgroup,
		 const char *parent);

/* Parsers, exposed for the unit tests. */
/* "key value" lines (memory.events, cpu.stat, memory.oom_control,
 * cgroup.events): the value of key, or -ENOENT. */
int cg_parse_keyed(const char *text, const char *key, int64_t *out);
/* A single integer (memory.peak, memory.max_usage_in_bytes). */
int cg_parse_int(const char *text, int64_t *out);
/* A *.pressure file: the total= (microseconds) of its line "some" or
 * "full"; -ENOENT where it has no such line (the host's cpu.pressure
 * before 5.13 had no "full"). */
int cg_parse_pressure(const char *text, const char *line, int64_t *total);
/* Controller names in cgroup.controllers / cgroup.subtree_control text. */
unsigned cg_parse_ctls(const char *text);

/* ---- a task's leaf (cgroup.c) ------------------------------------------ */

struct cg_files;

/* Create the leaf `name` and write the limits. A hierarchy a limit needs
 * must work; the others are used where they can be (usage, kill). On
 * failure nothing is left behind and err names the step. */
int cg_leaf_create(struct cg_host *h, struct cg_leaf *l, const char *name,
		   const struct cg_limits *lim, char *err, size_t errlen);

/* Make a leaf made for other limits (a renewed one) hold these: a
 * hierarchy it lacks is made (as name), and only the values that differ
 * are written ("max" or -1 where a limit goes). On failure the leaf is
 * half-way: the caller removes it, and err names the step. */
int cg_leaf_fit(struct cg_host *h, struct cg_leaf *l, const char *name,
		const struct cg_limits *lim, char *err, size_t errlen);

/* Put pid in every directory of the leaf. */
int cg_join(const struct cg_leaf *l, pid_t pid);
/* The same, but for the unified directory, where the child was born. */
int cg_join_born(const struct cg_leaf *l, pid_t pid);
/* Can this emptied leaf serve another run? Never one that was sent a
 * kill: Linux 6.18 (at least) SIGKILLs every process born by
 * CLONE_INTO_CGROUP into a leaf that was once sent cgroup.kill, for
 * good (cgroup_css_set_fork takes the kill sequence of the parent's
 * cgroup, before it has looked up the target, and cgroup_post_fork
 * compares it with the target's, which each kill counted up). Nor one
 * that held an OOM kill since it was new. */
bool cg_leaf_reusable(const struct cg_leaf *l);
/* Make an emptied, reusable leaf as good as new for the next run, its
 * usage of the last run read (cg_usage_read): the memory peak reset
 * (v1 memory.max_usage_in_bytes and memory.failcnt; v2 memory.peak,
 * through f->peak, which the next reading uses), the growing counters
 * taken as the next run's base. pids.peak cannot be reset: a leaf whose
 * peak is above 1 (every run has its first process) gets a new v1 pids
 * directory (as name); on v2 it cannot serve. Nor can one that still
 * holds more memory than a few of the kernel's charge batches (page
 * cache the run left, which the next run's peak would count). 0, or
 * -errno (-ESTALE: not reusable, the caller removes it; -EAGAIN: it still
 * holds memory, which may yet go: try again later). */
int cg_leaf_renew(struct cg_host *h, struct cg_leaf *l, struct cg_files *f, const char *name);
/* A descriptor of the leaf's unified (cgroup v2) directory, for clone3
 * CLONE_INTO_CGROUP, or -errno (none, or a fake tree). */
int cg_leaf_unified_fd(const struct cg_leaf *l);
/* The `tasks` files of its v1 directories, opened (once, kept in f) for
 * the child's own join: a process of one thread that writes "0" there
 * moves itself, which takes no lock of the whole thread group (a pid
 * written to cgroup.procs does, and waits for an RCU grace period).
 * Up to max descriptors into fds, which stay f's; returns how many, or
 * -errno. */
int cg_leaf_join_fds(const struct cg_leaf *l, struct cg_files *f, int *fds, int max);

/* Kill every process in the leaf and wait (at most timeout_ms) until it
 * is empty. Returns -ETIMEDOUT if something is still in it. */
int cg_leaf_kill(struct cg_leaf *l, int timeout_ms);

/* Send sig (SIGTERM: the polite half of a kill) to each process the
 * leaf lists, a daemon that left its process group included; returns
 * how many. Not a kill: nothing is marked, the leaf stays reusable. */
int cg_leaf_signal(const struct cg_leaf *l, int sig);

/* Freeze (on) or thaw every process of the leaf: cgroup.freeze of its
 * unified directory, else freezer.state of its v1 freezer one. -ENODEV
 * when it has neither (the caller stops them by signal). A frozen leaf
 * still takes cgroup.kill; a v1 freezer's must be thawed for a kill to
 * land, which cg_leaf_kill's freeze_kill does. */
int cg_leaf_freeze(const struct cg_leaf *l, bool on);

/* The same in steps, for an event loop that must not wait: send the
 * kill (cgroup.kill where there is one: returns 1; else freeze and kill
 * what is listed: returns 0, and it is to be sent again at each retry),
 * then wait for cg_leaf_populated() to say false. cgroup.events of the
 * unified directory, where there is one, raises IN_MODIFY when it
 * changes: cg_leaf_events() gives its path (-ENOENT: none, poll). */
int cg_leaf_kill_start(struct cg_leaf *l);

/* Descriptors of a leaf's unified directory and of the files read after
 * every run, kept by a caller that runs task after task in one leaf:
 * each is opened once, on first use, and read again with pread at 0
 * (kernfs shows the current values). -1: not open. The calls that take
 * one take NULL for "open by path, keep nothing". */
struct cg_files {
	int dir, events, cpu_stat;
	int peak;              /* memory.peak (v2: reset through it) or memory.max_usage_in_bytes */
	int oom;               /* memory.events or memory.oom_control */
	int pids_peak;
	int tasks[CG__SLOTS];  /* v1: each directory's `tasks` (cg_leaf_join_fds) */
};
void cg_files_init(struct cg_files *f);
void cg_files_close(struct cg_files *f);
/* The unified directory's descriptor (for CLONE_INTO_CGROUP), or -errno.
 * It stays f's: the caller does not close it. */
int cg_files_dir(const struct cg_leaf *l, struct cg_files *f);
/* Is anything of the run still in the leaf? */
bool cg_leaf_populated(const struct cg_leaf *l, struct cg_files *f);
int cg_leaf_events(const struct cg_leaf *l, char *path, size_t len);
/* cg_leaf_remove without waiting: one rmdir each; -EBUSY: try later. */
int cg_leaf_remove_nowait(struct cg_leaf *l);

/* What the leaf's processes used, read after they are gone: the growing
 * counters less the leaf's base, the peaks since the leaf was made or
 * renewed. */
int cg_usage_read(struct cg_leaf *l, struct cg_usage *u, struct cg_files *f);

/* rmdir each directory (retrying briefly while the kernel lets go of
 * dying tasks); l->used is cleared for each one removed. */
int cg_leaf_remove(struct cg_leaf *l);

/* Kill and remove the leaves left by workers that are gone (killed -9,
 * crashed): "kart.<pid>.<seq>" whose pid no longer exists, is a zombie
 * or is exiting. Sets *removed to how many directories went. */
int cg_sweep(struct cg_host *h, int *removed);

/* What a worker here could do (kart doctor, kart setup-cgroup): make a
 * leaf under the parent, and write each limit in one. Probed for real:
 * leaves "kart.<pid>.0".."3" are made and removed. On v2 this is what the
 * first task does: the probing process may move itself into the worker
 * leaf of its own cgroup. */
struct cg_probe {
	enum cg_mode mode;
	bool hybrid;                /* v1 hierarchies plus a cgroup2 mount */
	char parent[CG_PATH_MAX];   /* v2: the parent; v1: the memory one */
	unsigned avail, enabled;    /* v2: delegated / enabled controllers;
				     * v1: the hierarchies present */
	bool leaf;                  /* a leaf could be made */
	bool memory, pids, cpu;     /* each limit could be written */
	bool kill;                  /* the unified leaf has cgroup.kill */
	char err[512];              /* the first failure, "" if none */
};
int cg_probe(const char *root, const char *parent, struct cg_probe *out);

#endif
