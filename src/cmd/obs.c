/* obs.c - see obs.h. */
#define _GNU_SOURCE
#include "obs.h"
#include "termsafe.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "task.h"
#include "util.h"

static void live_add(const char *id, const struct qinfo *q, void *arg)
{
	struct live_set *ls = arg;
	if (ls->n == ls->cap) {
		ls->cap = ls->cap ? 2 * ls->cap : 64;
		ls->v = xrealloc(ls->v, ls->cap * sizeof *ls->v);
	}
	struct live_task *t = &ls->v[ls->n++];
	memset(t, 0, sizeof *t);
	t->id = xstrdup(id);
	t->q = *q;
	t->word = query_state_name(&t->q);
	t->lane = "fast";
	t->uid = (uid_t)-1;
}

/* The task file's owner, lane and label: its header, read without
 * blocking (a FIFO or a device is no task of anyone's). */
static void live_header(struct spool *sp, struct live_task *t)
{
	char p[600];
	int dir = t->q.state == Q_RUNNING ? sp->cur : sp->new;
	if (t->q.state == Q_RUNNING ? pathfmt(p, sizeof p, "%s/%s", t->q.worker, t->id) < 0
	    : t->q.state == Q_HELD ? spool_held_name(t->id, p, sizeof p) < 0
				   : pathfmt(p, sizeof p, "%s", t->id) < 0)
		return;
	_cleanup_close_ int fd = openat(dir, p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	struct submitter by;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	/* On a shared spool a queued file is the worker's: its record says whose. */
	spool_submitter(fd, &st, &by);
	t->uid = by.uid;
	size_t want = (size_t)st.st_size < TASK_HEADER_MAX ? (size_t)st.st_size : TASK_HEADER_MAX;
	_cleanup_free_ char *text = xmalloc(want + 1);
	ssize_t n = read_upto(fd, text, want);
	struct task_spec spec;
	char err[256];
	if (n > 0 && task_parse(text, (size_t)n, &spec, err, sizeof err) == 0) {
		t->lane = lane_name(spec.lane);
		snprintf(t->label, sizeof t->label, "%s", spec.label);
	}
}

int obs_live(struct spool *sp, struct live_set *ls)
{
	memset(ls, 0, sizeof *ls);
	int r = query_live(sp, live_add, ls);
	for (size_t i = 0; i < ls->n; i++)
		live_header(sp, &ls->v[i]);
	return r;
}

void obs_live_free(struct live_set *ls)
{
	for (size_t i = 0; i < ls->n; i++)
		free(ls->v[i].id);
	free(ls->v);
	memset(ls, 0, sizeof *ls);
}

int obs_results(struct spool *sp, obs_result_cb cb, void *arg)
{
	struct strv names = {0};
	int r = dir_names(sp->done, ".", &names);
	if (r < 0)
		return r;
	struct progress pr;
	progress_init(&pr, "reading", "results");
	size_t total = 0;
	for (size_t i = 0; i < names.n; i++) {
		size_t l = strlen(names.v[i]);
		total += l > 5 && strcmp(names.v[i] + l - 5, ".json") == 0;
	}
	size_t k = 0;
	for (size_t i = 0; i < names.n; i++) {
		size_t l = strlen(names.v[i]);
		if (l <= 5 || strcmp(names.v[i] + l - 5, ".json") != 0)
			continue;
		names.v[i][l - 5] = '\0';
		json_t *j = NULL;
		/* Another user's result is not ours to read: left out. */
		if (query_load(sp, names.v[i], &j) == 0 && json_is_object(j))
			cb(names.v[i], j, arg);
		json_decref(j);
		progress(&pr, ++k, total);
	}
	progress_done(&pr);
	strv_free(&names);
	return 0;
}

long long obs_int(json_t *o, const char *k1, const char *k2)
{
	json_t *v = json_object_get(o, k1);
	if (k2)
		v = json_object_get(v, k2);
	return json_is_integer(v) && json_integer_value(v) >= 0 ? (long long)json_integer_value(v) : -1;
}

/* NULL prints as "-"; everything else through the one escaper, which
 * also catches the bidi controls a hand-rolled check would miss. */
char *obs_term(const char *s)
{
	return s ? term_safe(s) : xstrdup("-");
}

void obs_bytes(char *buf, size_t len, long long b)
{
	if (b < 0) {
		snprintf(buf, len, "-");
		return;
	}
	const char *u = "KMGT";
	double v = (double)b;
	if (v < 1024) {
		snprintf(buf, len, "%lldB", b);
		return;
	}
	int i = -1;
	while (v >= 1024 && i < 3)
		v /= 1024, i++;
	snprintf(buf, len, v < 10 ? "%.1f%c" : "%.0f%c", v, u[i]);
}

void obs_dur(char *buf, size_t len, long long ms)
{
	if (ms < 0)
		snprintf(buf, len, "-");
	else if (ms < 1000)
		snprintf(buf, len, "%lldms", ms);
	else if (ms < 60000)
		snprintf(buf, len, "%.1fs", ms / 1000.0);
	else if (ms < 3600000)
		snprintf(buf, len, "%lldm%02llds", ms / 60000, ms / 1000 % 60);
	else
		snprintf(buf, len, "%lldh%02lldm", ms / 3600000, ms / 60000 % 60);
}

long long obs_time_ms(const char *s)
{
	struct tm tm = {0};
	int ms = 0;
	if (!s)
		return -1;
	const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!p)
		return -1;
	if (*p == '.') {
		int digits = 0;
		for (p++; *p >= '0' && *p <= '9'; p++, digits++)
			if (digits < 3)
				ms = ms * 10 + (*p - '0');
		while (digits > 0 && digits < 3)
			ms *= 10, digits++;
	}
	if (*p != 'Z')
		return -1;
	return (long long)timegm(&tm) * 1000 + ms;
}

/* ---- a running task's use so far ------------------------------------------ */

static long long read_ll(const char *path)
{
	char buf[64];
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read_upto(fd, buf, sizeof buf - 1);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	char *end;
	long long v = strtoll(buf, &end, 10);
	return end == buf || v < 0 ? -1 : v;
}

/* "key value" of a flat-keyed cgroup file (cpu.stat). */
static long long read_key(const char *path, const char *key)
{
	_cleanup_free_ char *text = NULL;
	size_t len;
	if (read_file_at(AT_FDCWD, path, 1 << 16, &text, &len) < 0)
		return -1;
	size_t kl = strlen(key);
	for (char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (strncmp(l, key, kl) == 0 && l[kl] == ' ')
			return strtoll(l + kl + 1, NULL, 10);
	return -1;
}

char *obs_locks(void)
{
	char *locks = NULL;
	size_t len;
	(void)read_file_at(AT_FDCWD, "/proc/locks", 4 << 20, &locks, &len);
	return locks;
}

/* The pid holding the run lock of cur/W/ID, or 0. /proc/locks names a
 * lock by "MAJ:MIN:INODE" of its superblock: an inode number alone could
 * be anyone's lock on another filesystem, so a lock matched by its inode
 * alone (btrfs: stat's device is a subvolume's, not the superblock's)
 * counts only where it is the one such. */
static pid_t run_pid(struct spool *sp, const char *locks, const char *worker, const char *id)
{
	char p[600];
	struct stat st;
	if (!locks || spool_name_claim_scratch(p, sizeof p, worker, id, SCRATCH_LOCK) < 0 ||
	    fstatat(sp->cur, p, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	char exact[64], ino[32];
	snprintf(exact, sizeof exact, " %02x:%02x:%llu ", major(st.st_dev), minor(st.st_dev),
		 (unsigned long long)st.st_ino);
	snprintf(ino, sizeof ino, ":%llu ", (unsigned long long)st.st_ino);
	pid_t only = 0;
	int nino = 0;
	for (const char *l = locks; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);
		char line[512];
		snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), l);
		long pid = 0;
		/* "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"; a
		 * waiter's line ("->") holds nothing. */
		if (!strstr(line, "->") && sscanf(line, "%*s %*s %*s %*s %ld", &pid) == 1 && pid > 0) {
			if (strstr(line, exact))
				return (pid_t)pid;
			if (strstr(line, ino)) {
				only = (pid_t)pid;
				nino++;
			}
		}
		l = nl ? nl + 1 : NULL;
	}
	return nino == 1 ? only : 0;
}

/* Memory now and peak, and CPU time, of pid's cgroup leaf; false if it
 * is in none. */
static bool cgroup_usage(pid_t pid, struct run_now *u)
{
	char p[128];
	_cleanup_free_ char *cg = NULL;
	size_t len;
	snprintf(p, sizeof p, "/proc/%d/cgroup", (int)pid);
	if (read_file_at(AT_FDCWD, p, 1 << 16, &cg, &len) < 0)
		return false;
	/* Where the cgroup2 tree is: the whole of /sys/fs/cgroup, or its
	 * unified/ on a hybrid host. */
	const char *v2 = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0 ? "/sys/fs/cgroup"
										: "/sys/fs/cgroup/unified";
	char path[4200];
	bool leaf = false;
	for (char *l = cg, *nl; l && *l; l = nl) {
		nl = strchr(l, '\n');
		if (nl)
			*nl++ = '\0';
		char *c1 = strchr(l, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		const char *ctl = c1 + 1, *dir = c2 + 1;
		/* Only the task's own leaf (kart.PID.N, cgroup.h): a
		 * hierarchy where it has none counts the whole host. */
		const char *base = strrchr(dir, '/');
		if (!base || strncmp(base + 1, "kart.", 5) != 0 || strstr(dir, "/.."))
			continue;
		leaf = true;
		if (strcmp(ctl, "memory") == 0) {
			snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.usage_in_bytes", dir);
			u->mem = read_ll(path);
			snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.max_usage_in_bytes", dir);
			u->mem_peak = read_ll(path);
		} else if (strstr(ctl, "cpuacct") && u->cpu_ns < 0 && !strchr(ctl, '/')) {
			snprintf(path, sizeof path, "/sys/fs/cgroup/%s%s/cpuacct.usage", ctl, dir);
			u->cpu_ns = read_ll(path);
		} else if (!*ctl) {
			if (u->mem < 0) {
				snprintf(path, sizeof path, "%s%s/memory.current", v2, dir);
				u->mem = read_ll(path);
				snprintf(path, sizeof path, "%s%s/memory.peak", v2, dir);
				u->mem_peak = read_ll(path);
			}
			snprintf(path, sizeof path, "%s%s/cpu.stat", v2, dir);
			long long us = read_key(path, "usage_usec");
			if (us >= 0 && u->cpu_ns < 0)
				u->cpu_ns = us * 1000;
		}
	}
	return leaf;
}

/* Without a leaf: the tree under pid, as the kernel lists each
 * process's children, summed: CPU time (its own and its reaped
 * children's) and resident memory now. Bounded: a fork bomb is not
 * walked to its end. */
static void tree_usage(pid_t pid, struct run_now *u)
{
	enum { MAX = 4096 };
	pid_t *todo = xmalloc(MAX * sizeof *todo);
	size_t n = 0, k = 0;
	long long ticks = 0, pages = 0;
	todo[n++] = pid;
	while (k < n) {
		pid_t p = todo[k++];
		char path[96];
		_cleanup_free_ char *stat = NULL, *kids = NULL;
		size_t len;
		snprintf(path, sizeof path, "/proc/%d/stat", (int)p);
		if (read_file_at(AT_FDCWD, path, 4096, &stat, &len) < 0)
			continue;
		/* After the name's ")": state is field 3; utime, stime,
		 * cutime, cstime 14-17; rss 24. */
		const char *r = strrchr(stat, ')');
		unsigned long long ut, st;
		long long cut, cst, rss;
		if (!r || sscanf(r + 2, "%*c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu %llu %lld %lld "
					"%*s %*s %*s %*s %*s %*s %lld", &ut, &st, &cut, &cst, &rss) != 5)
			continue;
		ticks += (long long)(ut + st) + cut + cst;
		pages += rss;
		snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)p, (int)p);
		if (read_file_at(AT_FDCWD, path, 1 << 16, &kids, &len) < 0)
			continue;
		for (char *c = kids, *end; *c && n < MAX; c = end) {
			long v = strtol(c, &end, 10);
			if (end == c)
				break;
			if (v > 0)
				todo[n++] = (pid_t)v;
		}
	}
	free(todo);
	long hz = sysconf(_SC_CLK_TCK), pg = sysconf(_SC_PAGESIZE);
	if (hz > 0)
		u->cpu_ns = ticks * (1000000000LL / hz);
	u->mem = pages * pg;
}

void obs_run_now(struct spool *sp, const char *locks, const char *worker, const char *id,
		 struct run_now *u)
{
	*u = (struct run_now){-1, -1, -1, -1, NULL};
	long long total = 0;
	bool any = false;
	const int which[] = {SCRATCH_STDOUT, SCRATCH_STDERR};
	for (size_t i = 0; i < 2; i++) {
		char p[600];
		struct stat st;
		if (spool_name_claim_scratch(p, sizeof p, worker, id, which[i]) == 0 &&
		    fstatat(sp->cur, p, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
			total += st.st_size;
			any = true;
		}
	}
	/* A run that wrote nothing has no capture file yet (capture_file). */
	u->out_bytes = any ? total : 0;
	pid_t pid = run_pid(sp, locks, worker, id);
	if (pid <= 0)
		return;
	if (cgroup_usage(pid, u)) {
		u->by = "cgroup";
		return;
	}
	tree_usage(pid, u);
	u->by = "processes";
}

char *obs_run_text(const struct run_now *u)
{
	char c[32], m[32], p[32], o[32];
	obs_dur(c, sizeof c, u->cpu_ns >= 0 ? u->cpu_ns / 1000000 : -1);
	obs_bytes(m, sizeof m, u->mem);
	obs_bytes(p, sizeof p, u->mem_peak);
	obs_bytes(o, sizeof o, u->out_bytes);
	return xasprintf("cpu %s, memory %s (peak %s), output %s", c, m, p, o);
}

json_t *obs_run_json(const struct run_now *u)
{
	json_t *o = json_object();
	const struct {
		const char *k;
		long long v;
	} f[] = {{"cpu_ms", u->cpu_ns >= 0 ? u->cpu_ns / 1000000 : -1}, {"memory_bytes", u->mem},
		 {"memory_peak_bytes", u->mem_peak}, {"output_bytes", u->out_bytes}};
	for (size_t i = 0; i < ARRAY_SIZE(f); i++)
		json_object_set_new(o, f[i].k, f[i].v >= 0 ? json_integer(f[i].v) : json_null());
	json_object_set_new(o, "measured_by", u->by ? json_string(u->by) : json_null());
	return o;
}

static char *dup_or_null(json_t *v)
{
	const char *s = json_string_value(v);
	return s ? xstrdup(s) : NULL;
}

void obs_rec_of(const char *id, json_t *j, struct obs_rec *r)
{
	memset(r, 0, sizeof *r);
	r->id = xstrdup(id);
	r->name = dup_or_null(json_object_get(j, "name"));
	r->status = dup_or_null(json_object_get(j, "status"));
	r->lane = dup_or_null(json_object_get(j, "lane"));
	r->user = dup_or_null(json_object_get(json_object_get(j, "submitter"), "user"));
	r->worker = dup_or_null(json_object_get(j, "worker"));
	r->label = dup_or_null(json_object_get(j, "label"));
	r->submitted_ms = obs_time_ms(json_string_value(json_object_get(j, "submitted_at")));
	r->started_ms = obs_time_ms(json_string_value(json_object_get(j, "started_at")));
	r->finished_ms = obs_time_ms(json_string_value(json_object_get(j, "finished_at")));
	r->wait_ms = obs_int(j, "wait_ms", NULL);
	r->run_ms = obs_int(j, "duration_ms", NULL);
	long long u = obs_int(j, "usage", "cpu_user_ms"), s = obs_int(j, "usage", "cpu_system_ms");
	r->cpu_ms = u >= 0 && s >= 0 ? u + s : -1;
	r->mem_peak = obs_int(j, "usage", "memory_peak_bytes");
	r->mem_limit = obs_int(j, "limits", "memory_bytes");
	r->timeout_s = obs_int(j, "limits", "timeout_s");
	json_t *use = json_object_get(j, "usage");
	r->io_read = obs_int(use, "io_read_bytes", NULL);
	r->io_write = obs_int(use, "io_write_bytes", NULL);
	r->pids_peak = obs_int(use, "pids_peak", NULL);
	static const char *const psi[PSI__N] = {"psi_cpu_some_us", "psi_cpu_full_us",
						"psi_memory_some_us", "psi_memory_full_us",
						"psi_io_some_us", "psi_io_full_us"};
	for (int i = 0; i < PSI__N; i++)
		r->psi_us[i] = obs_int(use, psi[i], NULL);
	for (int i = 0; i < UF__N; i++) {
		r->by[i] = dup_or_null(json_object_get(json_object_get(use, "measured_by"),
						       usage_family_name[i]));
		r->why[i] = dup_or_null(json_object_get(json_object_get(use, "why_null"),
							usage_family_name[i]));
	}
	/* The worker's figures where it wrote them (kart-spool(5),
	 * efficiency); else, for a result of an older kart, the same
	 * computed here, as Slurm's seff does. */
	json_t *eff = json_object_get(j, "efficiency");
	json_t *ce = json_object_get(eff, "cpu"), *me = json_object_get(eff, "memory");
	json_t *cpus = json_object_get(eff, "cpus");
	json_t *cpu = json_object_get(json_object_get(j, "limits"), "cpu");
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	r->cpus = json_is_number(cpus) ? json_number_value(cpus)
		  : json_is_number(cpu) && json_number_value(cpu) > 0 ? json_number_value(cpu)
								       : (double)(ncpu > 0 ? ncpu : 1);
	r->cpu_why = dup_or_null(json_object_get(json_object_get(eff, "why_null"), "cpu"));
	r->mem_why = dup_or_null(json_object_get(json_object_get(eff, "why_null"), "memory"));
	if (json_is_object(eff)) {
		r->cpu_eff = json_is_number(ce) ? json_number_value(ce) : -1;
		r->mem_eff = json_is_number(me) ? json_number_value(me) : -1;
		return;
	}
	r->cpu_eff = r->cpu_ms >= 0 && r->run_ms > 0 ? r->cpu_ms / (r->run_ms * r->cpus) : -1;
	r->mem_eff = r->mem_peak >= 0 && r->mem_limit > 0 ? (double)r->mem_peak / (double)r->mem_limit
							   : -1;
}

void obs_rec_free(struct obs_rec *r)
{
	free(r->id);
	free(r->name);
	free(r->status);
	free(r->lane);
	free(r->user);
	free(r->worker);
	free(r->label);
	for (int i = 0; i < UF__N; i++) {
		free(r->by[i]);
		free(r->why[i]);
	}
	free(r->cpu_why);
	free(r->mem_why);
}

int obs_task_command(struct spool *sp, const char *id, char *out, size_t len)
{
	char p[512];
	if (spool_name_done(p, sizeof p, id, DONE_TASK) < 0)
		return -ENAMETOOLONG;
	_cleanup_close_ int fd = openat(sp->done, p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char buf[4096];
	ssize_t n = read_upto(fd, buf, sizeof buf - 1);
	if (n < 0)
		return (int)n;
	buf[n] = '\0';
	for (char *l = buf, *nl; l && *l; l = nl) {
		nl = strchr(l, '\n');
		if (nl)
			*nl++ = '\0';
		while (*l == ' ' || *l == '\t')
			l++;
		if (*l && *l != '#') {
			snprintf(out, len, "%s", l);
			return 0;
		}
	}
	return -ENOENT;
}
