/* cgroup.c - a cgroup leaf per task (see cgroup.h); the host side is
 * cgroup_host.c, below it. */
#define _GNU_SOURCE
#include "cgroup_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

#include "util.h"

/* ---- files ------------------------------------------------------------------ */

static int read_keyed_kept(int *keep, int dirfd, const char *dir, const char *file, const char *key,
			   int64_t *out)
{
	_cleanup_free_ char *t = NULL;
	int r = cg_read_text_kept(keep, dirfd, dir, file, &t);
	return r < 0 ? r : cg_parse_keyed(t, key, out);
}

static int read_int(const char *dir, const char *file, int64_t *out)
{
	_cleanup_free_ char *t = NULL;
	int r = cg_read_text(dir, file, &t);
	return r < 0 ? r : cg_parse_int(t, out);
}

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Send sig to every pid listed in dir/cgroup.procs; returns how many
 * were listed. The fake tree names no real process: nothing is signalled. */
static int signal_listed(const char *dir, bool fake, int sig)
{
	_cleanup_free_ char *t = NULL;
	if (cg_read_text(dir, "cgroup.procs", &t) < 0)
		return 0;
	int n = 0;
	char *save = NULL;
	for (char *w = strtok_r(t, " \n", &save); w; w = strtok_r(NULL, " \n", &save)) {
		long long pid;
		if (parse_int(w, 1, INT_MAX, &pid) < 0)
			continue;
		n++;
		if (!fake)
			(void)kill((pid_t)pid, sig);
	}
	return n;
}

static int kill_listed(const char *dir, bool fake) { return signal_listed(dir, fake, SIGKILL); }

/* ---- a leaf ---------------------------------------------------------------------- */

static const char *slot_dir(const struct cg_leaf *l, int s)
{
	return l->path[s][0] ? l->path[s] : NULL;
}

/* A directory of the same name left by a dead worker whose pid we now
 * have: empty it and take its place. */
static int make_dir(const char *p, bool fake)
{
	if (mkdir(p, 0755) == 0)
		return 0;
	if (errno != EEXIST)
		return -errno;
	if (fake)
		return 0; /* the test laid it out in advance */
	if (cg_write_file(p, "cgroup.kill", "1", false) < 0)
		(void)kill_listed(p, false);
	for (int i = 0; i < 100; i++) {
		if (rmdir(p) == 0 || errno != EBUSY)
			break;
		sleep_ms(10);
	}
	return mkdir(p, 0755) < 0 ? -errno : 0;
}

static unsigned need_slots(const struct cg_limits *lim)
{
	return (lim->memory ? 1u << CG_MEMORY : 0) | (lim->pids ? 1u << CG_PIDS : 0) |
	       (lim->cpu_milli ? 1u << CG_CPU : 0);
}

static uint64_t cpu_quota_us(uint32_t milli)
{
	uint64_t q = (uint64_t)milli * CG_CPU_PERIOD_US / 1000;
	return q < 1000 ? 1000 : q; /* the kernel's minimum */
}

/* A leaf that failed half-way: no process was ever in it, so it goes;
 * the caller owns nothing either way. */
static void undo(struct cg_leaf *l)
{
	(void)cg_leaf_remove(l);
	l->used = 0;
}

#define STEP(dir, file, call) \
	do { \
		if ((r = (call)) < 0) { \
			snprintf(err, errlen, "%s/%s: %s", dir, file, strerror(-r)); \
			return r; \
		} \
	} while (0)

/* v2: the values of lim that differ from those in the leaf. A new leaf
 * holds none (every file at "max"). */
static int write_v2(struct cg_host *h, struct cg_leaf *l, const struct cg_limits *lim, char *err,
		    size_t errlen)
{
	const char *d = l->path[CG_UNIFIED];
	int r;
	if (lim->memory != l->lim.memory) {
		if (lim->memory)
			STEP(d, "memory.max", cg_writef(d, "memory.max", h->fake, "%llu\n",
						     (unsigned long long)lim->memory));
		else
			STEP(d, "memory.max", cg_write_file(d, "memory.max", "max\n", h->fake));
		if (!lim->memory != !l->lim.memory) {
			/* Without swap accounting in the kernel there is no
			 * file, and nothing to limit. */
			r = cg_write_file(d, "memory.swap.max", lim->memory ? "0\n" : "max\n", h->fake);
			if (r < 0 && r != -ENOENT)
				STEP(d, "memory.swap.max", r);
			/* An OOM kills the whole task, not one arbitrary process. */
			STEP(d, "memory.oom.group",
			     cg_write_file(d, "memory.oom.group", lim->memory ? "1\n" : "0\n", h->fake));
		}
		l->lim.memory = lim->memory;
	}
	if (lim->pids != l->lim.pids) {
		if (lim->pids)
			STEP(d, "pids.max", cg_writef(d, "pids.max", h->fake, "%lld\n", (long long)lim->pids));
		else
			STEP(d, "pids.max", cg_write_file(d, "pids.max", "max\n", h->fake));
		l->lim.pids = lim->pids;
	}
	if (lim->cpu_milli != l->lim.cpu_milli) {
		if (lim->cpu_milli)
			STEP(d, "cpu.max", cg_writef(d, "cpu.max", h->fake, "%llu %d\n",
						  (unsigned long long)cpu_quota_us(lim->cpu_milli),
						  CG_CPU_PERIOD_US));
		else
			STEP(d, "cpu.max", cg_writef(d, "cpu.max", h->fake, "max %d\n", CG_CPU_PERIOD_US));
		l->lim.cpu_milli = lim->cpu_milli;
	}
	l->lim.memory_peak = lim->memory_peak;
	return 0;
}

/* v2: every controller a limit needs is enabled for the leaves. */
static int v2_ready(struct cg_host *h, const struct cg_limits *lim, char *err, size_t errlen)
{
	int r = cg_v2_prepare(h, err, errlen);
	if (r < 0)
		return r;
	unsigned need = (lim->memory ? CG_CTL_MEMORY : 0) | (lim->pids ? CG_CTL_PIDS : 0) |
			(lim->cpu_milli ? CG_CTL_CPU : 0);
	unsigned missing = need & ~h->ctls;
	if (missing) {
		const char *c = (missing & CG_CTL_MEMORY) ? "memory" :
				(missing & CG_CTL_PIDS) ? "pids" : "cpu";
		if (missing & ~h->avail)
			snprintf(err, errlen, "the %s controller is not delegated to %s", c,
				 h->parent[CG_UNIFIED]);
		else
			snprintf(err, errlen, "the %s controller cannot be enabled in %s: %s", c,
				 h->parent[CG_UNIFIED],
				 strerror(h->enable_err ? -h->enable_err : EBUSY));
		return -EOPNOTSUPP;
	}
	return 0;
}

static int create_v2(struct cg_host *h, struct cg_leaf *l, const char *name,
		     const struct cg_limits *lim, char *err, size_t errlen)
{
	int r = v2_ready(h, lim, err, errlen);
	if (r < 0)
		return r;
	char *d = l->path[CG_UNIFIED];
	if ((r = pathfmt(d, CG_PATH_MAX, "%s/%s", h->parent[CG_UNIFIED], name)) < 0 ||
	    (r = make_dir(d, h->fake)) < 0) {
		snprintf(err, errlen, "mkdir %s/%s: %s", h->parent[CG_UNIFIED], name, strerror(-r));
		d[0] = '\0';
		return r;
	}
	l->used = 1u << CG_UNIFIED;
	if ((r = write_v2(h, l, lim, err, errlen)) < 0)
		undo(l);
	return r;
}

/* v1: the directories of the leaf that lim needs and it lacks, as name:
 * one per hierarchy a limit needs, which must work, and the others where
 * they are of use (usage, kill). On failure err says which. */
static int make_v1(struct cg_host *h, struct cg_leaf *l, const char *name,
		   const struct cg_limits *lim, char *err, size_t errlen)
{
	unsigned need = need_slots(lim);
	int r = 0;
	char first_err[CG_PATH_MAX + 64] = "";
	static const int order[] = {CG_MEMORY, CG_PIDS, CG_CPU, CG_CPUACCT, CG_FREEZER, CG_UNIFIED};
	for (size_t i = 0; i < ARRAY_SIZE(order); i++) {
		int s = order[i];
		const char *what = s == CG_UNIFIED ? "unified" : cg_v1_name[s];
		if (l->path[s][0])
			continue; /* there already */
		if (!h->parent[s][0]) {
			if (need & (1u << s)) {
				snprintf(err, errlen, "no %s cgroup hierarchy under %s", what,
					 h->root);
				return -ENODEV;
			}
			continue;
		}
		/* With a unified leaf (cgroup.kill, cpu.stat) a v1 leaf is only
		 * worth its mkdir, writes and rmdir when it holds a limit. */
		if (s != CG_UNIFIED && !(need & (1u << s)) && h->parent[CG_UNIFIED][0] &&
		    !(s == CG_MEMORY && lim->memory_peak))
			continue;
		if (h->alias[s] >= 0) {
			if (l->path[h->alias[s]][0])
				memcpy(l->path[s], l->path[h->alias[s]], CG_PATH_MAX);
			else if (need & (1u << s)) {
				snprintf(err, errlen, "no %s cgroup for the task", what);
				return -ENODEV;
			}
			continue;
		}
		if ((r = pathfmt(l->path[s], CG_PATH_MAX, "%s/%s", h->parent[s], name)) == 0 &&
		    (r = make_dir(l->path[s], h->fake)) == 0) {
			l->used |= 1u << s;
			continue;
		}
		l->path[s][0] = '\0';
		if (need & (1u << s) || !first_err[0])
			snprintf(need & (1u << s) ? err : first_err,
				 need & (1u << s) ? errlen : sizeof first_err, "mkdir %s/%s: %s",
				 h->parent[s], name, strerror(-r));
		if (need & (1u << s))
			return r;
		/* Not needed for a limit: usage and kill do without it. */
	}
	if (!l->used) {
		/* Say which (the parent that does not exist, say). */
		if (first_err[0])
			snprintf(err, errlen, "no cgroup directory could be made: %s", first_err);
		else
			snprintf(err, errlen, "no cgroup directory could be made under %s", h->root);
		return -ENODEV;
	}
	return 0;
}

/* v1: the values of lim that differ from those in the leaf. */
static int write_v1(struct cg_host *h, struct cg_leaf *l, const struct cg_limits *lim, char *err,
		    size_t errlen)
{
	const char *m = l->path[CG_MEMORY], *p = l->path[CG_PIDS], *c = l->path[CG_CPU];
	int r;
	if (lim->memory != l->lim.memory && m[0]) {
		/* memory.memsw.limit_in_bytes is never below the limit: it
		 * goes up first, and down last. -1: no limit. */
		char v[32];
		bool up = !lim->memory || (l->lim.memory && lim->memory > l->lim.memory);
		snprintf(v, sizeof v, lim->memory ? "%llu\n" : "-1\n", (unsigned long long)lim->memory);
		if (h->memsw && up)
			STEP(m, "memory.memsw.limit_in_bytes",
			     cg_write_file(m, "memory.memsw.limit_in_bytes", v, h->fake));
		STEP(m, "memory.limit_in_bytes", cg_write_file(m, "memory.limit_in_bytes", v, h->fake));
		if (h->memsw && !up)
			STEP(m, "memory.memsw.limit_in_bytes",
			     cg_write_file(m, "memory.memsw.limit_in_bytes", v, h->fake));
		l->lim.memory = lim->memory;
	}
	if (lim->pids != l->lim.pids && p[0]) {
		if (lim->pids)
			STEP(p, "pids.max", cg_writef(p, "pids.max", h->fake, "%lld\n", (long long)lim->pids));
		else
			STEP(p, "pids.max", cg_write_file(p, "pids.max", "max\n", h->fake));
		l->lim.pids = lim->pids;
	}
	if (lim->cpu_milli != l->lim.cpu_milli && c[0]) {
		if (lim->cpu_milli && !l->lim.cpu_milli)
			STEP(c, "cpu.cfs_period_us",
			     cg_writef(c, "cpu.cfs_period_us", h->fake, "%d\n", CG_CPU_PERIOD_US));
		if (lim->cpu_milli)
			STEP(c, "cpu.cfs_quota_us",
			     cg_writef(c, "cpu.cfs_quota_us", h->fake, "%llu\n",
				    (unsigned long long)cpu_quota_us(lim->cpu_milli)));
		else
			STEP(c, "cpu.cfs_quota_us", cg_write_file(c, "cpu.cfs_quota_us", "-1\n", h->fake));
		l->lim.cpu_milli = lim->cpu_milli;
	}
	l->lim.memory_peak = lim->memory_peak;
	return 0;
}

static int create_v1(struct cg_host *h, struct cg_leaf *l, const char *name,
		     const struct cg_limits *lim, char *err, size_t errlen)
{
	int r = make_v1(h, l, name, lim, err, errlen);
	if (r == 0)
		r = write_v1(h, l, lim, err, errlen);
	if (r < 0)
		undo(l);
	return r;
}

static bool name_ok(const char *name)
{
	return name[0] && !strchr(name, '/') && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

int cg_leaf_create(struct cg_host *h, struct cg_leaf *l, const char *name,
		   const struct cg_limits *lim, char *err, size_t errlen)
{
	memset(l, 0, sizeof *l);
	l->fake = h->fake;
	l->pids_peak_last = -1;
	if (!name_ok(name)) {
		snprintf(err, errlen, "bad cgroup leaf name");
		return -EINVAL;
	}
	int r;
	if (h->mode == CG_MODE_V2)
		r = create_v2(h, l, name, lim, err, errlen);
	else if (h->mode == CG_MODE_V1)
		r = create_v1(h, l, name, lim, err, errlen);
	else {
		snprintf(err, errlen, "no cgroup filesystem at %s", h->root);
		r = -ENODEV;
	}
	if (r == 0)
		l->mode = h->mode;
	return r;
}

int cg_leaf_fit(struct cg_host *h, struct cg_leaf *l, const char *name,
		const struct cg_limits *lim, char *err, size_t errlen)
{
	if (!name_ok(name)) {
		snprintf(err, errlen, "bad cgroup leaf name");
		return -EINVAL;
	}
	int r;
	if (l->mode == CG_MODE_V2)
		return (r = v2_ready(h, lim, err, errlen)) < 0 ? r : write_v2(h, l, lim, err, errlen);
	if ((r = make_v1(h, l, name, lim, err, errlen)) < 0)
		return r;
	return write_v1(h, l, lim, err, errlen);
}

int cg_join(const struct cg_leaf *l, pid_t pid)
{
	for (int s = 0; s < CG__SLOTS; s++) {
		if (!(l->used & (1u << s)))
			continue;
		int r = cg_writef(l->path[s], "cgroup.procs", l->fake, "%d\n", (int)pid);
		if (r < 0)
			return r;
	}
	return l->used ? 0 : -ENODEV;
}

int cg_join_born(const struct cg_leaf *l, pid_t pid)
{
	for (int s = 0; s < CG__SLOTS; s++) {
		if (s == CG_UNIFIED || !(l->used & (1u << s)))
			continue;
		int r = cg_writef(l->path[s], "cgroup.procs", l->fake, "%d\n", (int)pid);
		if (r < 0)
			return r;
	}
	return 0;
}

bool cg_leaf_reusable(const struct cg_leaf *l)
{
	return !l->killed && l->used && l->last.oom_kills <= l->base.oom_kills;
}

int cg_leaf_unified_fd(const struct cg_leaf *l)
{
	if (l->fake || !(l->used & (1u << CG_UNIFIED)))
		return -ENOENT;
	int fd = open(l->path[CG_UNIFIED], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

void cg_files_init(struct cg_files *f)
{
	f->dir = f->events = f->cpu_stat = f->peak = f->oom = f->pids_peak = -1;
	for (int s = 0; s < CG__SLOTS; s++)
		f->tasks[s] = -1;
}

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

void cg_files_close(struct cg_files *f)
{
	int *fds[] = {&f->dir, &f->events, &f->cpu_stat, &f->peak, &f->oom, &f->pids_peak};
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		close_fd(fds[i]);
	for (int s = 0; s < CG__SLOTS; s++)
		close_fd(&f->tasks[s]);
}

int cg_leaf_join_fds(const struct cg_leaf *l, struct cg_files *f, int *fds, int max)
{
	int n = 0;
	for (int s = 0; s < CG__SLOTS; s++) {
		if (s == CG_UNIFIED || !(l->used & (1u << s)))
			continue;
		if (f->tasks[s] < 0) {
			char p[CG_PATH_MAX + 16];
			int r = pathfmt(p, sizeof p, "%s/tasks", l->path[s]);
			if (r < 0)
				return r;
			if ((f->tasks[s] = open(p, O_WRONLY | O_CLOEXEC)) < 0)
				return -errno;
		}
		if (n == max)
			return -E2BIG;
		fds[n++] = f->tasks[s];
	}
	return n;
}

int cg_files_dir(const struct cg_leaf *l, struct cg_files *f)
{
	if (f->dir < 0) {
		int fd = cg_leaf_unified_fd(l);
		if (fd < 0)
			return fd;
		f->dir = fd;
	}
	return f->dir;
}

/* Is anything still in the leaf? cgroup.events where there is one
 * (it also counts what lives in descendants), else the process lists. */
static bool populated(const struct cg_leaf *l, struct cg_files *f)
{
	int64_t v;
	if ((l->used & (1u << CG_UNIFIED)) &&
	    read_keyed_kept(f ? &f->events : NULL, f ? f->dir : -1, l->path[CG_UNIFIED], "cgroup.events",
			    "populated", &v) == 0)
		return v != 0;
	for (int s = 0; s < CG__SLOTS; s++) {
		_cleanup_free_ char *t = NULL;
		if ((l->used & (1u << s)) && cg_read_text(l->path[s], "cgroup.procs", &t) == 0 &&
		    strspn(t, " \n") != strlen(t))
			return true;
	}
	return false;
}

/* Without cgroup.kill: freeze, so that nothing forks behind our back,
 * kill what is listed, thaw so that the kills are delivered. */
static void freeze_kill(const struct cg_leaf *l)
{
	const char *u = (l->used & (1u << CG_UNIFIED)) ? l->path[CG_UNIFIED] : NULL;
	const char *f = (l->used & (1u << CG_FREEZER)) ? l->path[CG_FREEZER] : NULL;
	if (u)
		(void)cg_write_file(u, "cgroup.freeze", "1\n", l->fake);
	if (f)
		(void)cg_write_file(f, "freezer.state", "FROZEN\n", l->fake);
	for (int s = 0; s < CG__SLOTS; s++)
		if (l->used & (1u << s))
			(void)kill_listed(l->path[s], l->fake);
	if (f)
		(void)cg_write_file(f, "freezer.state", "THAWED\n", l->fake);
	if (u)
		(void)cg_write_file(u, "cgroup.freeze", "0\n", l->fake);
}

int cg_leaf_signal(const struct cg_leaf *l, int sig)
{
	/* One hierarchy lists them all: the unified one where there is one. */
	for (int s = 0; s < CG__SLOTS; s++)
		if (l->used & (1u << s))
			return signal_listed(l->path[s], l->fake, sig);
	return 0;
}

int cg_leaf_freeze(const struct cg_leaf *l, bool on)
{
	/* cgroup.freeze is of the cgroup core, not a controller: the
	 * controller-less unified leaf of a hybrid host has it too. */
	if ((l->used & (1u << CG_UNIFIED)) &&
	    cg_write_file(l->path[CG_UNIFIED], "cgroup.freeze", on ? "1\n" : "0\n", l->fake) == 0)
		return 0;
	if ((l->used & (1u << CG_FREEZER)) &&
	    cg_write_file(l->path[CG_FREEZER], "freezer.state", on ? "FROZEN\n" : "THAWED\n", l->fake) == 0)
		return 0;
	return -ENODEV;
}

int cg_leaf_kill_start(struct cg_leaf *l)
{
	if (!l->used)
		return 1;
	l->killed = true;
	if ((l->used & (1u << CG_UNIFIED)) &&
	    cg_write_file(l->path[CG_UNIFIED], "cgroup.kill", "1\n", l->fake) == 0)
		return 1;
	freeze_kill(l);
	return 0;
}

bool cg_leaf_populated(const struct cg_leaf *l, struct cg_files *f)
{
	return l->used && populated(l, l->fake ? NULL : f);
}

int cg_leaf_events(const struct cg_leaf *l, char *path, size_t len)
{
	if (!(l->used & (1u << CG_UNIFIED)) || !cg_exists(l->path[CG_UNIFIED], "cgroup.events"))
		return -ENOENT;
	return pathfmt(path, len, "%s/cgroup.events", l->path[CG_UNIFIED]);
}

int cg_leaf_kill(struct cg_leaf *l, int timeout_ms)
{
	if (!l->used)
		return 0;
	l->killed = true;
	bool killed = (l->used & (1u << CG_UNIFIED)) &&
		      cg_write_file(l->path[CG_UNIFIED], "cgroup.kill", "1\n", l->fake) == 0;
	if (!killed)
		freeze_kill(l);
	int64_t end = now_mono_ms() + timeout_ms;
	while (populated(l, NULL)) {
		if (now_mono_ms() >= end)
			return -ETIMEDOUT;
		sleep_ms(5);
		/* What forked between the list and the kill. */
		if (!killed)
			freeze_kill(l);
	}
	return 0;
}

/* The run's share of a counter that only grows; -1: unknown (a base
 * not read at the last run's end is no base). */
static int64_t grown(int64_t now, int64_t base)
{
	return now < 0 || base < 0 ? -1 : now >= base ? now - base : now;
}

/* cpu, memory and io.pressure of the cgroup2 directory dir (NULL: none);
 * -1 where a file or line is missing (no PSI in the kernel, psi=0). */
static void pressure_read(const char *dir, int64_t p[CG_PSI__N])
{
	static const char *const file[] = {"cpu.pressure", "memory.pressure", "io.pressure"};
	for (int i = 0; i < CG_PSI__N; i++)
		p[i] = -1;
	for (size_t f = 0; dir && f < ARRAY_SIZE(file); f++) {
		_cleanup_free_ char *t = NULL;
		if (cg_read_text(dir, file[f], &t) < 0)
			continue;
		(void)cg_parse_pressure(t, "some", &p[2 * f]);
		(void)cg_parse_pressure(t, "full", &p[2 * f + 1]);
	}
}

int cg_usage_read(struct cg_leaf *l, struct cg_usage *u, struct cg_files *f)
{
	if (l->fake)
		f = NULL;
	int64_t v;
	struct cg_count c = {-1, -1, -1, {-1, -1, -1, -1, -1, -1}};
	u->memory_peak = u->pids_peak = -1;
	const char *un = slot_dir(l, CG_UNIFIED);
	u->unified = un != NULL;
	pressure_read(un, c.pressure);
	const char *mem = l->mode == CG_MODE_V2 ? un : slot_dir(l, CG_MEMORY);
	const char *pd = l->mode == CG_MODE_V2 ? un : slot_dir(l, CG_PIDS);
	bool v2 = l->mode == CG_MODE_V2;
	_cleanup_free_ char *t = NULL;
	if (mem && cg_read_text_kept(f ? &f->peak : NULL, -1, mem,
				     v2 ? "memory.peak" : "memory.max_usage_in_bytes", &t) == 0 &&
	    cg_parse_int(t, &v) == 0)
		u->memory_peak = v;
	if (mem && read_keyed_kept(f ? &f->oom : NULL, -1, mem, v2 ? "memory.events" : "memory.oom_control",
				   "oom_kill", &v) == 0)
		c.oom_kills = v;
	free(t);
	t = NULL;
	if (pd && cg_read_text_kept(f ? &f->pids_peak : NULL, -1, pd, "pids.peak", &t) == 0 &&
	    cg_parse_int(t, &v) == 0)
		u->pids_peak = v;
	_cleanup_free_ char *cs = NULL; /* read once for both keys */
	if (un && cg_read_text_kept(f ? &f->cpu_stat : NULL, f ? f->dir : -1, un, "cpu.stat", &cs) == 0 &&
	    cg_parse_keyed(cs, "user_usec", &v) == 0) {
		c.cpu_user_us = v;
		if (cg_parse_keyed(cs, "system_usec", &v) == 0)
			c.cpu_system_us = v;
	} else if (l->mode == CG_MODE_V1 && slot_dir(l, CG_CPUACCT)) {
		const char *a = slot_dir(l, CG_CPUACCT);
		if (read_int(a, "cpuacct.usage_user", &v) == 0)
			c.cpu_user_us = v / 1000;
		if (read_int(a, "cpuacct.usage_sys", &v) == 0)
			c.cpu_system_us = v / 1000;
	}
	l->last = c;
	l->pids_peak_last = u->pids_peak;
	u->cpu_user_us = grown(c.cpu_user_us, l->base.cpu_user_us);
	u->cpu_system_us = grown(c.cpu_system_us, l->base.cpu_system_us);
	u->oom_kills = grown(c.oom_kills, l->base.oom_kills);
	for (int i = 0; i < CG_PSI__N; i++)
		u->pressure[i] = grown(c.pressure[i], l->base.pressure[i]);
	return 0;
}

/* A few of the kernel's charge batches (MEMCG_CHARGE_BATCH, 64 pages,
 * kept per CPU): what an emptied leaf may still hold and count as new.
 * Its own counters are no finer. */
static int64_t residue_max(void)
{
	static int64_t max;
	if (!max) {
		long n = sysconf(_SC_NPROCESSORS_ONLN), pg = sysconf(_SC_PAGESIZE);
		max = (int64_t)64 * (pg > 0 ? pg : 4096) * (n > 0 ? n : 1);
	}
	return max;
}

int cg_leaf_renew(struct cg_host *h, struct cg_leaf *l, struct cg_files *f, const char *name)
{
	if (!cg_leaf_reusable(l) || !f || !name_ok(name))
		return -ESTALE;
	bool v2 = l->mode == CG_MODE_V2;
	const char *mem = v2 ? slot_dir(l, CG_UNIFIED) : slot_dir(l, CG_MEMORY);
	/* A counter not read at the end is no base for the next run. */
	if (l->last.cpu_user_us < 0 || l->last.cpu_system_us < 0 ||
	    (mem && (!v2 || (h->ctls & CG_CTL_MEMORY)) && l->last.oom_kills < 0))
		return -ESTALE;
	int64_t v;
	int r;
	if (mem && (!v2 || (h->ctls & CG_CTL_MEMORY))) {
		if (read_int(mem, v2 ? "memory.current" : "memory.usage_in_bytes", &v) < 0)
			return -ESTALE;
		/* Often what the kernel frees after a grace period (a
		 * namespace's objects): worth a look again a little later. */
		if (v > residue_max())
			return -EAGAIN;
		if (v2) {
			/* The reset holds for reads through this descriptor
			 * alone (Linux 6.12), which the next reading uses;
			 * older kernels refuse the write. One opened for the
			 * first reading is read-only (EBADF): opened again. */
			char p[CG_PATH_MAX + 16];
			if (f->peak < 0 || write(f->peak, "reset\n", 6) != 6) {
				close_fd(&f->peak);
				if ((r = pathfmt(p, sizeof p, "%s/memory.peak", mem)) < 0)
					return r;
				if ((f->peak = open(p, O_RDWR | O_CLOEXEC)) < 0 ||
				    write(f->peak, "reset\n", 6) != 6)
					return -ESTALE;
			}
		} else {
			if ((r = cg_write_file(mem, "memory.max_usage_in_bytes", "0\n", l->fake)) < 0 ||
			    (r = cg_write_file(mem, "memory.failcnt", "0\n", l->fake)) < 0)
				return r;
		}
	}
	if (l->pids_peak_last > 1) {
		if (v2)
			return -ESTALE;
		/* v1: a new pids directory, the old one removed. */
		char old[CG_PATH_MAX], e[256];
		memcpy(old, l->path[CG_PIDS], CG_PATH_MAX);
		struct cg_limits want = l->lim;
		l->path[CG_PIDS][0] = '\0';
		l->used &= ~(1u << CG_PIDS);
		l->lim.pids = 0; /* a new directory holds none */
		close_fd(&f->tasks[CG_PIDS]);
		close_fd(&f->pids_peak);
		struct cg_leaf gone = {.mode = l->mode, .fake = l->fake, .used = 1u << CG_PIDS};
		memcpy(gone.path[CG_PIDS], old, CG_PATH_MAX);
		r = cg_leaf_fit(h, l, name, &want, e, sizeof e);
		(void)cg_leaf_remove(&gone);
		if (r < 0)
			return r;
		l->pids_peak_last = -1;
	}
	l->base = l->last;
	return 0;
}

/* Is pid gone, a zombie, or on its way out (PF_EXITING: a worker
 * killed -9 closes its files, which is what wakes up recovery, a moment
 * before it becomes a zombie)? */
static bool pid_gone(int pid)
{
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return true;
	char p[64];
	_cleanup_free_ char *t = NULL;
	snprintf(p, sizeof p, "/proc/%d/stat", pid);
	if (read_file_at(AT_FDCWD, p, 4096, &t, NULL) < 0)
		return false;
	const char *s = strrchr(t, ')');
	char state;
	unsigned long flags;
	/* ") S ppid pgrp session tty tpgid flags" */
	if (!s || sscanf(s + 1, " %c %*d %*d %*d %*d %*d %lu", &state, &flags) != 2)
		return false;
	return state == 'Z' || state == 'X' || (flags & 0x4 /* PF_EXITING */);
}

/* Is name a task leaf "kart.<pid>.<seq>" of a worker that is gone? */
static bool stale_leaf(const char *name)
{
	int pid;
	unsigned seq;
	char tail;
	if (sscanf(name, "kart.%d.%u%c", &pid, &seq, &tail) != 2 || pid <= 0 || pid == getpid())
		return false;
	return pid_gone(pid);
}

int cg_sweep(struct cg_host *h, int *removed)
{
	int ret = 0;
	*removed = 0;
	/* The unified tree first: its cgroup.kill empties the others too. */
	static const int order[] = {CG_UNIFIED, CG_MEMORY, CG_PIDS, CG_CPU, CG_CPUACCT, CG_FREEZER};
	for (size_t i = 0; i < ARRAY_SIZE(order); i++) {
		int s = order[i];
		if (!h->parent[s][0] || h->alias[s] >= 0)
			continue;
		DIR *d = opendir(h->parent[s]);
		if (!d) {
			if (errno != ENOENT && !ret)
				ret = -errno;
			continue;
		}
		struct dirent *de;
		while ((de = readdir(d))) {
			if (de->d_type != DT_DIR || !stale_leaf(de->d_name))
				continue;
			struct cg_leaf l = {.mode = h->mode, .fake = h->fake, .used = 1u << s};
			if (pathfmt(l.path[s], CG_PATH_MAX, "%s/%s", h->parent[s], de->d_name) < 0)
				continue;
			(void)cg_leaf_kill(&l, 1000);
			int r = cg_leaf_remove(&l);
			if (r == 0)
				(*removed)++;
			else if (!ret)
				ret = r;
		}
		closedir(d);
	}
	return ret;
}

int cg_probe(const char *root, const char *parent, struct cg_probe *out)
{
	struct cg_host h;
	memset(out, 0, sizeof *out);
	int r = cg_host_init(&h, root, NULL, parent);
	if (r < 0) {
		snprintf(out->err, sizeof out->err, "cgroups: %s", strerror(-r));
		return r;
	}
	out->mode = h.mode;
	if (h.mode == CG_MODE_NONE) {
		snprintf(out->err, sizeof out->err, "no cgroup filesystem at %.400s", h.root);
		return 0;
	}
	out->hybrid = h.mode == CG_MODE_V1 && h.parent[CG_UNIFIED][0];
	snprintf(out->parent, sizeof out->parent, "%s",
		 h.mode == CG_MODE_V2 ? h.parent[CG_UNIFIED] : h.parent[CG_MEMORY]);
	if (h.mode == CG_MODE_V1)
		out->avail = out->enabled = (h.parent[CG_MEMORY][0] ? CG_CTL_MEMORY : 0) |
					    (h.parent[CG_PIDS][0] ? CG_CTL_PIDS : 0) |
					    (h.parent[CG_CPU][0] ? CG_CTL_CPU : 0);
	static const struct cg_limits probe[4] = {
		{0}, {.memory = 64ull << 20}, {.pids = 64}, {.cpu_milli = 500}};
	bool *ok[4] = {&out->leaf, &out->memory, &out->pids, &out->cpu};
	for (int i = 0; i < 4; i++) {
		char name[64], e[400];
		struct cg_leaf l;
		snprintf(name, sizeof name, "kart.%d.%d", (int)getpid(), i);
		r = cg_leaf_create(&h, &l, name, &probe[i], e, sizeof e);
		if (h.mode == CG_MODE_V2) {
			out->avail = h.avail;
			out->enabled = h.ctls;
		}
		if (r < 0) {
			if (!out->err[0])
				snprintf(out->err, sizeof out->err, "%s", e);
			continue;
		}
		*ok[i] = true;
		if (i == 0)
			out->kill = (l.used & (1u << CG_UNIFIED)) &&
				    cg_exists(l.path[CG_UNIFIED], "cgroup.kill");
		(void)cg_leaf_remove(&l);
	}
	return 0;
}

/* The fake tree's directories hold plain files: empty them first. */
static void fake_empty(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	if (!d)
		return;
	while ((de = readdir(d)))
		if (de->d_type == DT_REG)
			(void)unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
}

static int leaf_remove(struct cg_leaf *l, int tries);

int cg_leaf_remove(struct cg_leaf *l)
{
	return leaf_remove(l, 100);
}

int cg_leaf_remove_nowait(struct cg_leaf *l)
{
	return leaf_remove(l, 1);
}

static int leaf_remove(struct cg_leaf *l, int tries)
{
	int ret = 0;
	for (int s = 0; s < CG__SLOTS; s++) {
		if (!(l->used & (1u << s)))
			continue;
		if (l->fake)
			fake_empty(l->path[s]);
		int r = 0;
		/* A task killed a moment ago may still be on its way out. */
		for (int i = 0; i < tries; i++) {
			if (i)
				sleep_ms(10);
			r = rmdir(l->path[s]) == 0 || errno == ENOENT ? 0 : -errno;
			if (r != -EBUSY)
				break;
		}
		if (r == 0)
			l->used &= ~(1u << s);
		else if (!ret)
			ret = r;
	}
	return ret;
}
