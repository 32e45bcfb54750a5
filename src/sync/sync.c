/* sync.c - see sync.h. Reads the spool in the order tasks move (new/,
 * cur/<worker>/, done/), as query.c does, into backend-neutral rows. */
#define _GNU_SOURCE
#include "sync.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "query.h"
#include "progress.h"
#include "util.h"

enum {
	C_ID, C_NAME, C_STATE, C_STATUS, C_EXIT, C_SIGNAL, C_ERROR, C_WORKER, C_LANE,
	C_ATTEMPT, C_SINCE, C_SUBMITTED, C_STARTED, C_FINISHED, C_WAIT, C_DURATION,
	C_TIMEOUT, C_MEMORY, C_PIDS, C_CPU, C_CPU_USER, C_CPU_SYS, C_MEM_PEAK,
	C_STDOUT, C_STDERR, C_TASK, C_RESULT,
	/* schema version 2 (docs/SYNC.md): scheduling and live control */
	C_NOT_BEFORE, C_WAITING_ON, C_ATTEMPTS, C_PAUSED_MS,
	/* schema version 3: the rest of the receipt (kart-spool(5), usage
	 * and efficiency) */
	C_IO_READ, C_IO_WRITE, C_PIDS_PEAK, C_PSI_CPU_SOME, C_PSI_CPU_FULL, C_PSI_MEM_SOME,
	C_PSI_MEM_FULL, C_PSI_IO_SOME, C_PSI_IO_FULL, C_CPU_EFF, C_MEM_EFF, C_N
};

const struct sync_col sync_cols[] = {
	[C_ID] = {"id", COL_TEXT},
	[C_NAME] = {"name", COL_TEXT},
	[C_STATE] = {"state", COL_TEXT},
	[C_STATUS] = {"status", COL_TEXT},
	[C_EXIT] = {"exit_code", COL_INT},
	[C_SIGNAL] = {"signal", COL_TEXT},
	[C_ERROR] = {"error", COL_TEXT},
	[C_WORKER] = {"worker", COL_TEXT},
	[C_LANE] = {"lane", COL_TEXT},
	[C_ATTEMPT] = {"attempt", COL_INT},
	[C_SINCE] = {"since", COL_TEXT},
	[C_SUBMITTED] = {"submitted_at", COL_TEXT},
	[C_STARTED] = {"started_at", COL_TEXT},
	[C_FINISHED] = {"finished_at", COL_TEXT},
	[C_WAIT] = {"wait_ms", COL_INT},
	[C_DURATION] = {"duration_ms", COL_INT},
	[C_TIMEOUT] = {"timeout_s", COL_INT},
	[C_MEMORY] = {"memory_bytes", COL_INT},
	[C_PIDS] = {"pids", COL_INT},
	[C_CPU] = {"cpu", COL_REAL},
	[C_CPU_USER] = {"cpu_user_ms", COL_INT},
	[C_CPU_SYS] = {"cpu_system_ms", COL_INT},
	[C_MEM_PEAK] = {"memory_peak_bytes", COL_INT},
	[C_STDOUT] = {"stdout_path", COL_TEXT},
	[C_STDERR] = {"stderr_path", COL_TEXT},
	[C_TASK] = {"task_path", COL_TEXT},
	[C_RESULT] = {"result", COL_JSON},
	[C_NOT_BEFORE] = {"not_before", COL_TEXT},
	[C_WAITING_ON] = {"waiting_on", COL_TEXT},
	[C_ATTEMPTS] = {"attempts", COL_JSON},
	[C_PAUSED_MS] = {"paused_ms", COL_INT},
	[C_IO_READ] = {"io_read_bytes", COL_INT},
	[C_IO_WRITE] = {"io_write_bytes", COL_INT},
	[C_PIDS_PEAK] = {"pids_peak", COL_INT},
	[C_PSI_CPU_SOME] = {"psi_cpu_some_us", COL_INT},
	[C_PSI_CPU_FULL] = {"psi_cpu_full_us", COL_INT},
	[C_PSI_MEM_SOME] = {"psi_memory_some_us", COL_INT},
	[C_PSI_MEM_FULL] = {"psi_memory_full_us", COL_INT},
	[C_PSI_IO_SOME] = {"psi_io_some_us", COL_INT},
	[C_PSI_IO_FULL] = {"psi_io_full_us", COL_INT},
	[C_CPU_EFF] = {"cpu_efficiency", COL_REAL},
	[C_MEM_EFF] = {"memory_efficiency", COL_REAL},
};
/* The first column of each later schema version, in order: a mirror of
 * version v gets the columns from sync_since[v - 1] on (ALTER TABLE). */
const size_t sync_since[] = {C_NOT_BEFORE, C_IO_READ};
const size_t sync_ncols = C_N;

_Static_assert(C_N <= ARRAY_SIZE(((struct sync_row *)0)->v), "sync_row too small");

void sync_row_clear(struct sync_row *r)
{
	for (size_t i = 0; i < ARRAY_SIZE(r->v); i++) {
		free(r->v[i]);
		r->v[i] = NULL;
	}
}

static char *ms_text(int64_t ms)
{
	char ts[32];
	if (ms <= 0)
		return NULL;
	fmt_rfc3339_ms(ms, ts);
	return xstrdup(ts);
}

/* A JSON scalar as text; NULL for null, absent, or a container. */
static char *jtext(json_t *v)
{
	if (json_is_string(v))
		return xstrdup(json_string_value(v));
	if (json_is_integer(v))
		return xasprintf("%lld", (long long)json_integer_value(v));
	if (json_is_real(v))
		return xasprintf("%.17g", json_real_value(v));
	if (json_is_boolean(v))
		return xstrdup(json_is_true(v) ? "1" : "0");
	return NULL;
}

static int64_t stat_ms(int dirfd, const char *name, bool ctime)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -1;
	const struct timespec *ts = ctime ? &st.st_ctim : &st.st_mtim;
	return (int64_t)ts->tv_sec * 1000 + ts->tv_nsec / 1000000;
}

/* done/<id>.json into a row: 0, -ENOENT, or another -errno. */
static int row_done(struct spool *sp, const char *id, struct sync_row *r)
{
	char p[512];
	_cleanup_free_ char *buf = NULL;
	size_t len;
	json_t *o;
	/* The raw text is kept in the row. */
	int rc = query_read(sp, id, &o, &buf, &len);
	if (rc < 0)
		return rc;
	(void)spool_name_done(p, sizeof p, id, DONE_JSON);
	r->v[C_ID] = xstrdup(id);
	r->v[C_NAME] = jtext(json_object_get(o, "name"));
	r->v[C_STATE] = xstrdup("done");
	static const struct { int col; const char *key; } top[] = {
		{C_STATUS, "status"}, {C_EXIT, "exit_code"}, {C_SIGNAL, "signal"},
		{C_ERROR, "error"}, {C_WORKER, "worker"}, {C_LANE, "lane"},
		{C_ATTEMPT, "attempt"}, {C_SUBMITTED, "submitted_at"},
		{C_STARTED, "started_at"}, {C_FINISHED, "finished_at"},
		{C_WAIT, "wait_ms"}, {C_DURATION, "duration_ms"}, {C_PAUSED_MS, "paused_ms"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(top); i++)
		r->v[top[i].col] = jtext(json_object_get(o, top[i].key));
	static const struct { int col; const char *obj, *key; } sub[] = {
		{C_TIMEOUT, "limits", "timeout_s"}, {C_MEMORY, "limits", "memory_bytes"},
		{C_PIDS, "limits", "pids"}, {C_CPU, "limits", "cpu"},
		{C_CPU_USER, "usage", "cpu_user_ms"}, {C_CPU_SYS, "usage", "cpu_system_ms"},
		{C_MEM_PEAK, "usage", "memory_peak_bytes"}, {C_STDOUT, "stdout", "path"},
		{C_STDERR, "stderr", "path"}, {C_TASK, "task", "path"},
		{C_IO_READ, "usage", "io_read_bytes"}, {C_IO_WRITE, "usage", "io_write_bytes"},
		{C_PIDS_PEAK, "usage", "pids_peak"}, {C_PSI_CPU_SOME, "usage", "psi_cpu_some_us"},
		{C_PSI_CPU_FULL, "usage", "psi_cpu_full_us"},
		{C_PSI_MEM_SOME, "usage", "psi_memory_some_us"},
		{C_PSI_MEM_FULL, "usage", "psi_memory_full_us"},
		{C_PSI_IO_SOME, "usage", "psi_io_some_us"}, {C_PSI_IO_FULL, "usage", "psi_io_full_us"},
		{C_CPU_EFF, "efficiency", "cpu"}, {C_MEM_EFF, "efficiency", "memory"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(sub); i++)
		r->v[sub[i].col] = jtext(json_object_get(json_object_get(o, sub[i].obj), sub[i].key));
	r->v[C_SINCE] = ms_text(stat_ms(sp->done, p, false));
	json_t *att = json_object_get(o, "attempts");
	if (json_is_array(att))
		r->v[C_ATTEMPTS] = json_dumps(att, JSON_COMPACT);
	json_decref(o);
	/* The document as written, not re-serialised. */
	while (len && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
		buf[--len] = '\0';
	r->v[C_RESULT] = steal_ptr(&buf);
	return 0;
}

static bool exists_at(int dirfd, const char *name)
{
	struct stat st;
	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* user.kart on dirfd/name: attempt and first submission (0: unknown). */
static void read_meta(int dirfd, const char *name, long long *attempt, long long *submitted)
{
	char p[600], v[512];
	*attempt = 1;
	*submitted = 0;
	if (pathfmt(p, sizeof p, "/proc/self/fd/%d/%s", dirfd, name) < 0)
		return;
	ssize_t n = lgetxattr(p, KART_XATTR, v, sizeof v - 1);
	if (n <= 0)
		return;
	v[n] = '\0';
	char *save = NULL;
	for (char *l = strtok_r(v, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		long long x;
		if (strncmp(l, "attempt=", 8) == 0 && parse_int(l + 8, 1, 1000000, &x) == 0)
			*attempt = x;
		else if (strncmp(l, "submitted=", 10) == 0 && parse_int(l + 10, 0, INT64_MAX, &x) == 0)
			*submitted = x;
	}
}

/* A queued (worker NULL), held or running entry: what the spool says
 * before a result exists. The name is the entry's; a name= directive is
 * seen only in the result. name is the entry in dirfd (new/.held.ID for
 * a held task), id the task's. */
static void row_pending(struct spool *sp, int dirfd, const char *dir, const char *worker,
			const char *name, const char *id, struct sync_row *r)
{
	long long attempt, submitted;
	int64_t since = stat_ms(dirfd, name, true);
	read_meta(dirfd, name, &attempt, &submitted);
	r->v[C_ID] = xstrdup(id);
	r->v[C_NAME] = xstrdup(id);
	/* The states of kart-spool(5), STATES, as kart status says them. */
	const char *state = "queued";
	char p[600];
	if (worker)
		state = spool_name_scratch(p, sizeof p, id, SCRATCH_PAUSED) == 0 && exists_at(dirfd, p)
				? "paused"
				: "running";
	else if (strcmp(name, id) != 0)
		state = "held";
	else {
		char waiting[512];
		int64_t nb = query_queued(sp, dirfd, name, now_realtime_ms(), waiting, sizeof waiting);
		if (nb) {
			state = "scheduled";
			r->v[C_NOT_BEFORE] = ms_text(nb);
		}
		if (waiting[0]) {
			if (!nb)
				state = "waiting";
			r->v[C_WAITING_ON] = xstrdup(waiting);
		}
	}
	r->v[C_STATE] = xstrdup(state);
	r->v[C_ATTEMPT] = xasprintf("%lld", attempt);
	r->v[C_SINCE] = ms_text(since);
	r->v[C_SUBMITTED] = ms_text(submitted ? submitted : (worker ? 0 : since));
	if (worker) {
		r->v[C_WORKER] = xstrdup(worker);
		r->v[C_STARTED] = ms_text(since);
		/* As kart status says it: the claim waits for a worker. */
		if (spool_worker_live(sp, worker) == 0)
			r->v[C_ERROR] = xasprintf(QUERY_GONE_FMT, worker);
		char o[512], e[512];
		if (spool_name_scratch(o, sizeof o, id, SCRATCH_STDOUT) == 0 &&
		    spool_name_scratch(e, sizeof e, id, SCRATCH_STDERR) == 0) {
			r->v[C_STDOUT] = xasprintf("%s/%s", dir, o);
			r->v[C_STDERR] = xasprintf("%s/%s", dir, e);
		}
	}
	r->v[C_TASK] = xasprintf("%s/%s", dir, name);
}

static bool task_name_ok(const char *n)
{
	return n[0] && n[0] != '.' && !strchr(n, '/');
}

/* Where id is now, in the order tasks move: 1 found (row filled), 0 not
 * in the spool, -errno. Looks twice: a re-queue moves a task backwards. */
static int resolve(struct spool *sp, const char *id, struct sync_row *r)
{
	if (!task_name_ok(id))
		return 0;
	for (int pass = 0; pass < 2; pass++) {
		char held[NAME_MAX + 1];
		if (exists_at(sp->new, id)) {
			row_pending(sp, sp->new, "new", NULL, id, id, r);
			return 1;
		}
		if (spool_held_name(id, held, sizeof held) == 0 && exists_at(sp->new, held)) {
			row_pending(sp, sp->new, "new", NULL, held, id, r);
			return 1;
		}
		char worker[256];
		if (spool_find_claim(sp, id, worker, sizeof worker)) {
			/* A finishing task writes its result before it leaves cur/. */
			if (row_done(sp, id, r) == 0)
				return 1;
			sync_row_clear(r);
			int wd = openat(sp->cur, worker, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
			char dir[512];
			bool running = wd >= 0 && pathfmt(dir, sizeof dir, "cur/%s", worker) == 0;
			if (running)
				row_pending(sp, wd, dir, worker, id, id, r);
			if (wd >= 0)
				close(wd);
			if (running)
				return 1;
		}
		int rc = row_done(sp, id, r);
		if (rc == 0)
			return 1;
		sync_row_clear(r);
		if (rc != -ENOENT)
			return rc;
	}
	return 0;
}

/* A full pass: every entry of new/, each cur/W/, done/, then rows of tasks seen
 * nowhere are marked gone. Commits every `batch` rows. */
enum { BATCH = 5000 };

struct scan {
	struct sync_db *db;
	struct spool *sp;
	long n, inbatch;
	int err;
	struct progress pr;
};

static int scan_put(struct scan *s, struct sync_row *r)
{
	int rc = s->db->ops->upsert(s->db, r, true);
	sync_row_clear(r);
	if (rc < 0)
		return -1;
	s->n++;
	progress(&s->pr, (unsigned long long)s->n, 0);
	if (++s->inbatch >= BATCH) {
		s->inbatch = 0;
		if (s->db->ops->commit(s->db) < 0 || s->db->ops->begin(s->db) < 0)
			return -1;
	}
	return 0;
}

/* One entry of the full pass: a row for each task, wherever it is. */
static int scan_one(const struct spool_entry *e, void *arg)
{
	struct scan *s = arg;
	struct sync_row r = {0};
	if (e->area == SPOOL_WALK_DONE) {
		if (!e->id || e->done != DONE_JSON)
			return 0;
		if (row_done(s->sp, e->id, &r) < 0) {
			sync_row_clear(&r);
			return 0; /* removed meanwhile, or not a result: not ours to judge */
		}
	} else if (!e->id) {
		/* Held tasks (kart hold): new/.held.ID. */
		const char *id = e->area == SPOOL_WALK_NEW ? spool_held_id(e->name) : NULL;
		if (!id || !task_name_ok(id))
			return 0;
		row_pending(s->sp, e->dirfd, e->dir, NULL, e->name, id, &r);
	} else {
		char jn[600];
		/* The result is the truth; done/ comes next in any case. */
		if (e->area == SPOOL_WALK_CUR && spool_name_done(jn, sizeof jn, e->id, DONE_JSON) == 0 &&
		    exists_at(s->sp->done, jn))
			return 0;
		row_pending(s->sp, e->dirfd, e->dir, e->worker, e->id, e->id, &r);
	}
	return scan_put(s, &r) < 0 ? 1 : 0;
}

static int full_scan(struct spool *sp, struct sync_db *db, bool verbose)
{
	struct scan s = {.db = db, .sp = sp};
	progress_init(&s.pr, "sync", "tasks mirrored");
	int64_t t0 = now_mono_ms();
	if (db->ops->begin(db) < 0 || db->ops->scan_begin(db) < 0)
		return -1;
	if (spool_walk(sp, SPOOL_WALK_NEW | SPOOL_WALK_CUR | SPOOL_WALK_DONE | SPOOL_WALK_DOTS, scan_one,
		       &s) > 0)
		return -1;
	long gone = 0;
	progress_done(&s.pr);
	if (db->ops->scan_end(db, &gone) < 0 || db->ops->commit(db) < 0)
		return -1;
	if (verbose)
		fprintf(stderr, "kart sync: %ld tasks, %ld newly gone, %lld ms\n", s.n, gone,
			(long long)(now_mono_ms() - t0));
	return 0;
}

/* ids touched by a batch of events, deduplicated. */
struct idset {
	char **v;
	size_t n, cap;
};

static void idset_add(struct idset *s, const char *id)
{
	for (size_t i = s->n; i-- > 0 && i + 64 >= s->n;) /* cheap: recent repeats */
		if (strcmp(s->v[i], id) == 0)
			return;
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		s->v = xrealloc(s->v, s->cap * sizeof *s->v);
	}
	s->v[s->n++] = xstrdup(id);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void idset_free(struct idset *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	s->n = 0;
}

/* Look at each touched id itself (inotify is a doorbell) and store what
 * is there now, in one transaction. */
static int apply(struct spool *sp, struct sync_db *db, struct idset *s)
{
	sort_n(s->v, s->n, sizeof *s->v, cmp_str);
	if (db->ops->begin(db) < 0)
		return -1;
	for (size_t i = 0; i < s->n; i++) {
		if (i && strcmp(s->v[i], s->v[i - 1]) == 0)
			continue;
		struct sync_row r = {0};
		int f = resolve(sp, s->v[i], &r);
		int rc = f > 0 ? db->ops->upsert(db, &r, false) : f == 0 ? db->ops->gone(db, s->v[i]) : 0;
		sync_row_clear(&r);
		if (rc < 0)
			return -1;
	}
	return db->ops->commit(db);
}

struct watches {
	int fd, new, cur, done;
};

#define W_DIR_MASK (IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ONLYDIR)
/* A worker directory's too: its .lock closed is its worker gone (no
 * other event says so), and its claims' rows say so. */
#define W_WORKER_MASK (W_DIR_MASK | IN_CLOSE_WRITE | IN_CLOSE_NOWRITE)

/* Watch a worker directory, then look at what it already holds. */
static void watch_worker(struct spool *sp, struct watches *w, const char *wid, struct idset *s)
{
	char p[600];
	if (wid[0] == '.' || pathfmt(p, sizeof p, "/proc/self/fd/%d/%s", sp->cur, wid) < 0)
		return;
	if (inotify_add_watch(w->fd, p, W_WORKER_MASK | IN_DONT_FOLLOW) < 0)
		return; /* gone already: its tasks moved on, and we hear of that */
	DIR *d = opendir_at(sp->cur, wid);
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (task_name_ok(de->d_name))
			idset_add(s, de->d_name);
	if (d)
		closedir(d);
}

static int watch_all(struct spool *sp, struct watches *w, struct idset *s)
{
	char p[64];
	snprintf(p, sizeof p, "/proc/self/fd/%d", sp->new);
	w->new = inotify_add_watch(w->fd, p, W_DIR_MASK);
	snprintf(p, sizeof p, "/proc/self/fd/%d", sp->cur);
	w->cur = inotify_add_watch(w->fd, p, IN_CREATE | IN_MOVED_TO | IN_ONLYDIR);
	snprintf(p, sizeof p, "/proc/self/fd/%d", sp->done);
	w->done = inotify_add_watch(w->fd, p, W_DIR_MASK);
	if (w->new < 0 || w->cur < 0 || w->done < 0)
		return -errno;
	DIR *d = opendir_at(sp->cur, ".");
	struct dirent *de;
	while (d && (de = readdir(d)))
		watch_worker(sp, w, de->d_name, s);
	if (d)
		closedir(d);
	return 0;
}

/* Every claim of every worker directory into s. */
static void claims_all(struct spool *sp, struct idset *s)
{
	struct strv workers = {0};
	if (dir_names(sp->cur, ".", &workers) < 0)
		return;
	for (size_t i = 0; i < workers.n; i++) {
		DIR *d = workers.v[i][0] == '.' ? NULL : opendir_at(sp->cur, workers.v[i]);
		struct dirent *de;
		while (d && (de = readdir(d)))
			if (task_name_ok(de->d_name))
				idset_add(s, de->d_name);
		if (d)
			closedir(d);
	}
	strv_free(&workers);
}

/* Read every pending event: the ids they name into s; returns 1 after an
 * overflow (rescan everything), 0, or -errno. */
static int drain_events(struct spool *sp, struct watches *w, struct idset *s)
{
	char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
	int overflow = 0;
	for (;;) {
		ssize_t n = read(w->fd, buf, sizeof buf);
		if (n < 0)
			return errno == EAGAIN ? overflow : -errno;
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;
			p += sizeof *ev + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) {
				overflow = 1;
				continue;
			}
			if (!ev->len)
				continue;
			if (strcmp(ev->name, ".lock") == 0 && (ev->mask & (IN_CLOSE_WRITE | IN_CLOSE_NOWRITE))) {
				claims_all(sp, s);
				continue;
			}
			if (ev->name[0] == '.') {
				/* new/.held.ID: a hold or a release changes ID's row. */
				const char *held = ev->wd == w->new ? spool_held_id(ev->name) : NULL;
				if (held && task_name_ok(held))
					idset_add(s, held);
				continue;
			}
			if (ev->wd == w->cur) {
				if (ev->mask & IN_ISDIR)
					watch_worker(sp, w, ev->name, s);
			} else if (ev->wd == w->done) {
				char id[512];
				enum done_file f;
				if (spool_done_id(ev->name, id, sizeof id, &f) && f == DONE_JSON)
					idset_add(s, id);
			} else if (!(ev->mask & IN_ISDIR) || ev->wd == w->new) {
				idset_add(s, ev->name);
			}
		}
	}
}

/* A failed database call: report, drop the connection, retry later. */
static bool lose(struct sync_db **dbp, const struct sync_opts *o)
{
	fprintf(stderr, "kart sync: %s\n", *dbp ? (*dbp)->err : "no database");
	if (*dbp)
		(*dbp)->ops->close(*dbp);
	*dbp = NULL;
	return o->reopen != NULL;
}

int sync_run(struct spool *sp, struct sync_db **dbp, const struct sync_opts *o)
{
	if (!o->follow) {
		if (full_scan(sp, *dbp, o->verbose) < 0) {
			fprintf(stderr, "kart sync: %s\n", (*dbp)->err);
			return -1;
		}
		return 0;
	}
	_cleanup_close_ int sfd = stop_signalfd();
	struct watches w = {.fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK)};
	_cleanup_close_ int ifd = w.fd;
	struct idset s = {0};
	if (sfd < 0 || w.fd < 0) {
		fprintf(stderr, "kart sync: %s\n", strerror(errno));
		return -1;
	}
	/* Watch first, then look: nothing lands unseen in between. */
	int r = watch_all(sp, &w, &s);
	if (r < 0) {
		fprintf(stderr, "kart sync: cannot watch the spool: %s\n", strerror(-r));
		return -1;
	}
	idset_free(&s);
	bool broken = false, rescan = false;
	int backoff_ms = 100, rc = 0;
	if (full_scan(sp, *dbp, o->verbose) < 0) {
		if (!lose(dbp, o))
			return -1;
		broken = true;
	}
	for (;;) {
		struct pollfd pf[2] = {{.fd = sfd, .events = POLLIN}, {.fd = w.fd, .events = POLLIN}};
		/* The timeout is the reconnect backoff, never a look at the spool. */
		int n = poll(pf, 2, broken ? backoff_ms : -1);
		if (n < 0 && errno != EINTR) {
			rc = -1;
			break;
		}
		if (pf[0].revents & POLLIN)
			break;
		if (pf[1].revents & POLLIN) {
			int d = drain_events(sp, &w, &s);
			if (d < 0) {
				fprintf(stderr, "kart sync: inotify: %s\n", strerror(-d));
				rc = -1;
				break;
			}
			if (d > 0) {
				if (o->verbose)
					fprintf(stderr, "kart sync: event queue overflowed; rescanning\n");
				(void)watch_all(sp, &w, &s);
				rescan = true;
			}
		}
		if (broken) {
			/* Events wait for the rescan that follows the reconnect. */
			idset_free(&s);
			if (n != 0)
				continue;
			char err[512];
			*dbp = o->reopen(o->target, err, sizeof err);
			if (!*dbp) {
				fprintf(stderr, "kart sync: reconnect: %s\n", err);
				backoff_ms = backoff_ms * 2 > 5000 ? 5000 : backoff_ms * 2;
				continue;
			}
			fprintf(stderr, "kart sync: reconnected; rescanning\n");
			backoff_ms = 100;
			broken = false;
			rescan = true;
		}
		bool failed = false;
		if (rescan) {
			idset_free(&s);
			rescan = false;
			failed = full_scan(sp, *dbp, o->verbose) < 0;
		} else if (s.n) {
			failed = apply(sp, *dbp, &s) < 0;
			idset_free(&s);
		}
		if (failed) {
			if (!lose(dbp, o)) {
				rc = -1;
				break;
			}
			broken = true;
		}
	}
	idset_free(&s);
	free(s.v);
	return rc;
}
