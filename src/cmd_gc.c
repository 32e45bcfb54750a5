/* kart gc - retention and hygiene, safe to run from cron beside live
 * workers. What it removes, and why each removal cannot race a worker:
 *
 *  - tmp/ entries not modified for 36 hours: the maildir rule; no writer
 *    stages a file for that long. Dot files in new/ (never tasks) too.
 *  - cur/.new.* (a claim directory being born) and done/.ID.json.PID.tmp
 *    (a result being written) older than that: left by a crash.
 *  - cur/<worker>/ with no claim in it, once we hold its .lock
 *    (flock LOCK_EX|LOCK_NB): the kernel says its worker is gone. The
 *    same steps as a peer's recovery: scratch, .lock, then rmdir. A worker
 *    starting under that id checks that the lock it took is still the
 *    directory's, so it starts afresh after us.
 *  - With --older-than: results whose JSON was written that long ago,
 *    with the files it names. The JSON goes first (and done/ is fsynced),
 *    so no reader ever finds a result without its files; the id's .task
 *    goes last, because it is what keeps the id reserved: no finisher can
 *    put a new result's files under that id while we remove the old ones.
 *  - Files of an id with no JSON (a gc or a recovery that crashed half
 *    way), older than 36 hours, and never a .task that a claim still
 *    shares (nlink > 1: a finish in progress).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "cmd.h"
#include "util.h"

static const char help[] =
	"usage: kart [-s SPOOL] gc [--older-than DUR] [--tmp-age DUR] [--dry-run] [--verbose]\n"
	"\n"
	"Keep a spool clean; safe to run from cron while workers run. Removes:\n"
	"tmp/ entries, and dot files in new/, not modified for 36 hours (the\n"
	"maildir rule); stale cur/.new.* directories and done/.*.json.*.tmp\n"
	"files as old; the empty cur/<worker>/ directories of workers that are\n"
	"gone (their .lock is not held); and leftovers of half-removed results.\n"
	"\n"
	"  --older-than DUR  also remove results written at least DUR ago (90s,\n"
	"                    5m, 2h, 30d), with every file they name: the JSON\n"
	"                    first, then stdout, stderr, artifacts, the task\n"
	"  --tmp-age DUR     the age for tmp/ entries and new/ dot files (default 36h)\n"
	"  -n, --dry-run     print what would be removed, remove nothing\n"
	"  -v, --verbose     print each path removed (relative to the spool)\n"
	"\n"
	"exit status: 0; 1 if something could not be removed; 2 usage error\n";

/* The maildir rule: nothing is written for 36 hours. --tmp-age changes it
 * for tmp/ only; what a worker leaves half-done always gets the full age. */
#define STALE_MS (36 * 3600 * 1000LL)

struct gc {
	struct spool *sp;
	bool dry, verbose;
	int64_t now_ms, tmp_age_ms, result_age_ms; /* result_age_ms -1: keep results */
	int removed, errors;
};

static int64_t mtime_ms(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000;
}


/* Remove dirfd/name (a tree, never following links); say so. */
static void gc_remove(struct gc *g, int dirfd, const char *dir, const char *name)
{
	if (g->verbose || g->dry)
		printf("%s%s/%s\n", g->dry ? "would remove " : "", dir, name);
	if (g->dry) {
		g->removed++;
		return;
	}
	int r = rm_rf_at(dirfd, name);
	if (r < 0 && r != -ENOENT) {
		fprintf(stderr, "kart gc: %s/%s: %s\n", dir, name, strerror(-r));
		g->errors++;
		return;
	}
	g->removed++;
}

static bool old(const struct gc *g, int dirfd, const char *name, int64_t age_ms)
{
	struct stat st;
	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       g->now_ms - mtime_ms(&st) >= age_ms;
}

/* The one age rule for leftovers: what was not modified for age_ms goes
 * (directories too, unless files_only). */
static void gc_stale(struct gc *g, const struct spool_entry *e, int64_t age_ms, bool files_only)
{
	struct stat st;
	if (fstatat(e->dirfd, e->name, &st, AT_SYMLINK_NOFOLLOW) < 0 || (files_only && S_ISDIR(st.st_mode)) ||
	    g->now_ms - mtime_ms(&st) < age_ms)
		return;
	gc_remove(g, e->dirfd, e->dir, e->name);
}

/* A claim directory whose worker is gone and which holds no claim. */
static void gc_worker_dir(struct gc *g, const char *wid, bool born)
{
	_cleanup_close_ int d = openat(g->sp->cur, wid, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (d < 0)
		return;
	/* A directory without .lock is garbage of a recovery that could not
	 * rmdir it: take a lock there too, exactly as a worker would. */
	_cleanup_close_ int l = openat(d, ".lock", O_RDONLY | O_CLOEXEC | O_NOFOLLOW | (born ? 0 : O_CREAT), 0600);
	if (l < 0 || flock(l, LOCK_EX | LOCK_NB) < 0)
		return; /* alive (or being born): not ours */
	DIR *dir = opendir_at(d, ".");
	struct dirent *de;
	if (!dir)
		return;
	bool claims = false;
	while ((de = readdir(dir)))
		if (de->d_name[0] != '.')
			claims = true;
	if (claims) {
		/* A dead worker's claims are for a worker to recover (re-queue
		 * or `lost`, by the policy): start one. */
		closedir(dir);
		if (g->verbose)
			fprintf(stderr, "kart gc: cur/%s: a dead worker's claims, left for a worker to recover\n", wid);
		return;
	}
	rewinddir(dir);
	char rel[512];
	snprintf(rel, sizeof rel, "cur/%s", wid);
	while ((de = readdir(dir)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && strcmp(de->d_name, ".lock"))
			gc_remove(g, d, rel, de->d_name);
	closedir(dir);
	if (g->verbose || g->dry)
		printf("%s%s/\n", g->dry ? "would remove " : "", rel);
	if (g->dry)
		return;
	(void)unlinkat(d, ".lock", 0);
	if (unlinkat(g->sp->cur, wid, AT_REMOVEDIR) < 0 && errno != ENOENT) {
		fprintf(stderr, "kart gc: %s: %s\n", rel, strerror(errno));
		g->errors++;
		return;
	}
	g->removed++;
}

static bool exists_at(int dirfd, const char *name)
{
	struct stat st;
	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* A path the JSON names, if it is a file of this id in done/. */
static const char *named(json_t *o, const char *field, const char *id)
{
	const char *p = json_string_value(json_object_get(json_object_get(o, field), "path"));
	size_t il = strlen(id);
	if (!p || strncmp(p, "done/", 5) != 0)
		return NULL;
	p += 5;
	if (strchr(p, '/') || strncmp(p, id, il) != 0 || p[il] != '.')
		return NULL;
	return p;
}

/* Remove one expired result: JSON, fsync done/, the files it names, and
 * the .task reservation last. */
static void gc_result(struct gc *g, const char *id)
{
	char jn[512], tn[512], rn[512], on[512];
	_cleanup_free_ char *buf = NULL;
	size_t len;
	if (spool_name_done(jn, sizeof jn, id, DONE_JSON) < 0 || spool_name_done(tn, sizeof tn, id, DONE_TASK) < 0 ||
	    spool_name_done(rn, sizeof rn, id, DONE_REJECTED) < 0 || spool_name_done(on, sizeof on, id, DONE_OUT) < 0)
		return;
	if (read_file_at(g->sp->done, jn, 1 << 20, &buf, &len) < 0)
		return;
	json_error_t je;
	json_t *o = json_loadb(buf, len, 0, &je);
	const char *files[8];
	size_t nf = 0;
	static const char *const fields[] = {"stdout", "stderr", "artifacts"};
	for (size_t i = 0; o && i < ARRAY_SIZE(fields); i++) {
		const char *f = named(o, fields[i], id);
		if (f && strcmp(f, tn) != 0)
			files[nf++] = f;
	}
	files[nf++] = rn;
	files[nf++] = on;
	if (g->dry) {
		printf("would remove done/%s\n", jn);
		for (size_t i = 0; i < nf; i++)
			if (exists_at(g->sp->done, files[i]))
				printf("would remove done/%s\n", files[i]);
		if (exists_at(g->sp->done, tn))
			printf("would remove done/%s\n", tn);
		g->removed++;
		json_decref(o);
		return;
	}
	/* Results written before hostile entries reserved their id with a
	 * .task have none: reserve it now, for the time of the removal. */
	bool reserved = false;
	int rfd = openat(g->sp->done, tn, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (rfd >= 0) {
		close(rfd);
		reserved = true;
	}
	if (unlinkat(g->sp->done, jn, 0) < 0) {
		if (errno != ENOENT) {
			fprintf(stderr, "kart gc: done/%s: %s\n", jn, strerror(errno));
			g->errors++;
		}
		if (reserved)
			(void)unlinkat(g->sp->done, tn, 0);
		json_decref(o);
		return;
	}
	if (g->verbose)
		printf("done/%s\n", jn);
	/* The JSON's removal is durable before any file it names goes. */
	if (fsync(g->sp->done) < 0) {
		fprintf(stderr, "kart gc: fsync done/: %s (its files are kept)\n", strerror(errno));
		g->errors++;
		json_decref(o);
		return;
	}
	for (size_t i = 0; i < nf; i++)
		if (exists_at(g->sp->done, files[i]))
			gc_remove(g, g->sp->done, "done", files[i]);
	if (reserved) {
		(void)unlinkat(g->sp->done, tn, 0);
	} else if (exists_at(g->sp->done, tn)) {
		gc_remove(g, g->sp->done, "done", tn);
	}
	json_decref(o);
}

/* A file of done/ whose id has no JSON and is not part of a finish in
 * progress. A finish links the claim to ID.task (two links) before it
 * moves the outputs in and writes the JSON; a rejection creates ID.task
 * just before its JSON. So: no JSON, the file old, and the id's .task
 * absent or alone (one link) and old too. */
static bool orphan(const struct gc *g, const char *n)
{
	char id[512], jn[600], tn[600];
	enum done_file kind;
	struct stat st, ts;
	if (!spool_done_id(n, id, sizeof id, &kind) || kind == DONE_JSON ||
	    spool_name_done(jn, sizeof jn, id, DONE_JSON) < 0 || spool_name_done(tn, sizeof tn, id, DONE_TASK) < 0 ||
	    exists_at(g->sp->done, jn) || fstatat(g->sp->done, n, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    g->now_ms - mtime_ms(&st) < STALE_MS)
		return false;
	if (fstatat(g->sp->done, tn, &ts, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT;
	return ts.st_nlink == 1 && g->now_ms - mtime_ms(&ts) >= STALE_MS;
}

/* What each entry of the spool is to gc: stale leftovers by the age
 * rule (tmp/ entries, new/ dot files, cur/.new.*, done/.ID.json.PID.tmp),
 * claim directories of workers that may be gone, and done/'s results
 * and orphans, kept for after the walk. */
struct gc_found {
	struct gc *g;
	struct strv expired, orphans;
};

static int gc_entry(const struct spool_entry *e, void *arg)
{
	struct gc_found *f = arg;
	struct gc *g = f->g;
	const char *n = e->name;
	struct stat st;
	switch (e->area) {
	case SPOOL_WALK_TMP: gc_stale(g, e, g->tmp_age_ms, false); break;
	/* Dot files in new/ are never tasks (a worker skips them): what a
	 * writer staged there (rsync's .NAME.XXXXXX) and never renamed. By
	 * the rule and age of tmp/. Directories are left: new/ may hold some
	 * of the spool's own, and a task is never one. */
	case SPOOL_WALK_NEW:
		if (n[0] == '.')
			gc_stale(g, e, g->tmp_age_ms, true);
		break;
	case SPOOL_WALK_WORKERS:
		if (strncmp(n, ".new.", 5) == 0) {
			if (old(g, e->dirfd, n, STALE_MS))
				gc_worker_dir(g, n, true);
		} else if (n[0] != '.') {
			gc_worker_dir(g, n, false);
		}
		break;
	case SPOOL_WALK_DONE:
		if (n[0] == '.') {
			size_t l = strlen(n);
			if (l > 5 && strcmp(n + l - 4, ".tmp") == 0 && strstr(n, ".json."))
				gc_stale(g, e, STALE_MS, false);
		} else if (e->id && fstatat(e->dirfd, n, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			if (e->done == DONE_JSON) {
				if (g->result_age_ms >= 0 && g->now_ms - mtime_ms(&st) >= g->result_age_ms)
					strv_add(&f->expired, e->id);
			} else if (orphan(g, n)) {
				strv_add(&f->orphans, n);
			}
		}
		break;
	}
	return 0;
}

static void gc_walk(struct gc *g)
{
	static const struct {
		unsigned area;
		const char *dir;
	} areas[] = {
		{SPOOL_WALK_TMP, "tmp"}, {SPOOL_WALK_NEW, "new"}, {SPOOL_WALK_WORKERS, "cur"}, {SPOOL_WALK_DONE, "done"},
	};
	struct gc_found f = {.g = g};
	for (size_t i = 0; i < ARRAY_SIZE(areas); i++) {
		int r = spool_walk(g->sp, areas[i].area | SPOOL_WALK_DOTS, gc_entry, &f);
		if (r < 0) {
			fprintf(stderr, "kart gc: %s/: %s\n", areas[i].dir, strerror(-r));
			g->errors++;
		}
	}
	for (size_t i = 0; i < f.expired.n; i++)
		gc_result(g, f.expired.v[i]);
	/* Orphans: the .task (the id's reservation) after the others, each
	 * looked at again just before it goes. */
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < f.orphans.n; i++) {
			char id[512];
			enum done_file kind;
			bool task = spool_done_id(f.orphans.v[i], id, sizeof id, &kind) && kind == DONE_TASK;
			if (task == (pass == 1) && orphan(g, f.orphans.v[i]))
				gc_remove(g, g->sp->done, "done", f.orphans.v[i]);
		}
	strv_free(&f.expired);
	strv_free(&f.orphans);
}

int cmd_gc(struct ctx *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{"older-than", required_argument, NULL, 'o'},
		{"tmp-age", required_argument, NULL, 't'},
		{"dry-run", no_argument, NULL, 'n'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	struct gc g = {.tmp_age_ms = STALE_MS, .result_age_ms = -1};
	int ch;
	int64_t d;
	while ((ch = getopt_long(argc, argv, "+:hnv", opts, NULL)) != -1) {
		switch (ch) {
		case 'h': fputs(help, stdout); return 0;
		case 'o':
		case 't':
			if (parse_duration_s(optarg, &d) < 0)
				return usage_error("gc", "%s %s: not a duration (90s, 5m, 2h, 30d)",
						   ch == 'o' ? "--older-than" : "--tmp-age", optarg);
			*(ch == 'o' ? &g.result_age_ms : &g.tmp_age_ms) = d * 1000;
			break;
		case 'n': g.dry = true; break;
		case 'v': g.verbose = true; break;
		case ':': return usage_error("gc", "option '%s' needs a value", argv[optind - 1]);
		default: return usage_error("gc", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("gc", "unexpected argument '%s'", argv[optind]);
	struct spool *sp = &c->sp;
	g.sp = sp;
	g.now_ms = now_realtime_ms();
	gc_walk(&g);
	fflush(stdout);
	spool_close(sp);
	return g.errors ? 1 : 0;
}
