/* kart gc - retention and hygiene, safe to run from cron beside live
 * workers. What it removes, and why each removal cannot race a worker:
 *
 *  - tmp/ entries not modified for 36 hours: the maildir rule; no writer
 *    stages a file for that long. Dot files in new/ (never tasks) too,
 *    but held tasks (new/.held.ID, kart hold).
 *  - ids/ reservations whose result exists, and those as old as tmp/'s
 *    whose task is nowhere in the spool (gc_ids).
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
#include <jansson.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "cmd.h"
#include "opts.h"
#include "progress.h"
#include "tally.h"
#include "termsafe.h"
#include "util.h"
#include "worker_control.h"

static const struct opts_help help = {
	"usage: kart [-s SPOOL] gc [--older-than DUR] [--tmp-age DUR] [--dry-run] [--verbose]\n"
	"\n"
	"Keep a spool clean; safe to run from cron while workers run. Removes:\n"
	"tmp/ entries, and dot files in new/, not modified for 36 hours (the\n"
	"maildir rule); ids/ reservations whose result exists, and those as old\n"
	"whose task is no longer in the spool; stale cur/.new.* directories and\n"
	"done/.*.json.*.tmp files as old; the empty cur/<worker>/ directories of\n"
	"workers that are gone (their .lock is not held); and leftovers of\n"
	"half-removed results.\n",
	"exit status: 0; 1 if something could not be removed; 2 usage error\n",
};

/* The maildir rule: nothing is written for 36 hours. --tmp-age changes it
 * for tmp/ only; what a worker leaves half-done always gets the full age. */
#define STALE_MS (36 * 3600 * 1000LL)

struct gc {
	struct spool *sp;
	bool dry, verbose;
	int64_t now_ms, tmp_age_ms, result_age_ms; /* result_age_ms -1: keep results */
	int removed, errors;
	struct strv trash; /* trees renamed .rm-NAME, removed once the id is released */
};

static int64_t mtime_ms(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000;
}


/* "PRE DIR/NAME" on stdout, NAME escaped: a member's choice. */
static void say_path(const char *pre, const char *dir, const char *name)
{
	_cleanup_free_ char *sname = term_safe(name);
	printf("%s%s/%s\n", pre, dir, sname);
}

/* Remove dirfd/name (a tree, never following links); say so. With
 * defer, a tree is only renamed .rm-NAME and left in g->trash. */
static void gc_remove_(struct gc *g, int dirfd, const char *dir, const char *name, bool defer)
{
	/* Names in tmp/, ids/, drop/ and done/ are any member's choice. */
	if (g->verbose || g->dry)
		say_path(g->dry ? "would remove " : "", dir, name);
	if (g->dry) {
		g->removed++;
		return;
	}
	/* A tree goes by way of .rm-NAME (spool_trash): the next gc finishes
	 * a removal cut short whatever its age (gc_done), where a
	 * half-removed ID.out would wait out the orphan rule. */
	char trash[NAME_MAX + 8];
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
	    !spool_is_trash(name) && spool_trash(dirfd, name, trash, sizeof trash) == 0) {
		name = trash;
		if (defer) {
			strv_add(&g->trash, trash);
			g->removed++;
			return;
		}
	}
	int r = rm_rf_at(dirfd, name);
	if (r < 0 && r != -ENOENT) {
		_cleanup_free_ char *sname = term_safe(name);
		fprintf(stderr, "kart gc: %s/%s: %s\n", dir, sname, strerror(-r));
		g->errors++;
		return;
	}
	g->removed++;
}

static void gc_remove(struct gc *g, int dirfd, const char *dir, const char *name)
{
	gc_remove_(g, dirfd, dir, name, false);
}

static bool old(const struct gc *g, int dirfd, const char *name, int64_t age_ms)
{
	struct stat st;
	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       g->now_ms - mtime_ms(&st) >= age_ms;
}

/* Walk one area of the spool with cb; a directory that cannot be read
 * is said and counted. */
static void gc_walk(struct gc *g, unsigned area, const char *dir, spool_walk_cb cb, void *arg)
{
	int r = spool_walk(g->sp, area | SPOOL_WALK_DOTS, cb, arg);
	if (r < 0) {
		fprintf(stderr, "kart gc: %s/: %s\n", dir, strerror(-r));
		g->errors++;
	}
}

static int gc_tmp_one(const struct spool_entry *e, void *arg)
{
	struct gc *g = arg;
	if (old(g, e->dirfd, e->name, g->tmp_age_ms))
		gc_remove(g, e->dirfd, e->dir, e->name);
	return 0;
}

/* Dot files in new/ are never tasks (a worker skips them): what a writer
 * staged there (rsync's .NAME.XXXXXX) and never renamed. By the rule and
 * age of tmp/. Directories are left: new/ may hold some of the spool's
 * own, and a task is never one. */
static int gc_new_dot(const struct spool_entry *e, void *arg)
{
	struct gc *g = arg;
	struct stat st;
	/* A held task (kart hold) is queued, however long; a paused
	 * spool stays paused. */
	char held[16], hoist[16];
	(void)spool_held_name("", held, sizeof held);
	/* A move from drop/ cut short is a task on its way, finished by the
	 * next worker's scan, whatever the age of its file. */
	(void)spool_name_hoist(hoist, sizeof hoist, 0, "");
	if (e->id || strncmp(e->name, held, strlen(held)) == 0 || strcmp(e->name, WCTL_SPOOL_PAUSED) == 0 ||
	    strncmp(e->name, hoist, 7) == 0 ||
	    fstatat(e->dirfd, e->name, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode) ||
	    g->now_ms - mtime_ms(&st) < g->tmp_age_ms)
		return 0;
	gc_remove(g, e->dirfd, e->dir, e->name);
	return 0;
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

static int gc_cur_one(const struct spool_entry *e, void *arg)
{
	struct gc *g = arg;
	if (spool_is_newborn(e->name)) {
		if (old(g, e->dirfd, e->name, STALE_MS))
			gc_worker_dir(g, e->name, true);
	} else if (e->name[0] != '.') {
		gc_worker_dir(g, e->name, false);
	}
	return 0;
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
	char jn[512], tn[512], rn[512], on[512], an[512];
	_cleanup_free_ char *buf = NULL;
	size_t len;
	if (spool_name_done(jn, sizeof jn, id, DONE_JSON) < 0 ||
	    spool_name_done(tn, sizeof tn, id, DONE_TASK) < 0 ||
	    spool_name_done(rn, sizeof rn, id, DONE_REJECTED) < 0 ||
	    spool_name_done(on, sizeof on, id, DONE_OUT) < 0 ||
	    spool_name_done(an, sizeof an, id, DONE_ATTEMPTS) < 0)
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
	files[nf++] = an; /* the earlier attempts of a retry_on= task */
	if (g->dry) {
		say_path("would remove ", "done", jn);
		for (size_t i = 0; i < nf; i++)
			if (exists_at(g->sp->done, files[i]))
				say_path("would remove ", "done", files[i]);
		if (exists_at(g->sp->done, tn))
			say_path("would remove ", "done", tn);
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
			_cleanup_free_ char *sjn = term_safe(jn);
			fprintf(stderr, "kart gc: done/%s: %s\n", sjn, strerror(errno));
			g->errors++;
		}
		if (reserved)
			(void)unlinkat(g->sp->done, tn, 0);
		json_decref(o);
		return;
	}
	if (g->verbose)
		say_path("", "done", jn);
	/* The JSON's removal is durable before any file it names goes. */
	if (fsync(g->sp->done) < 0) {
		fprintf(stderr, "kart gc: fsync done/: %s (its files are kept)\n", strerror(errno));
		g->errors++;
		json_decref(o);
		return;
	}
	/* Trees are only renamed here, the .task goes, and then they are
	 * removed: what a kill leaves mid-way is .rm-* alone. */
	for (size_t i = 0; i < nf; i++)
		if (exists_at(g->sp->done, files[i]))
			gc_remove_(g, g->sp->done, "done", files[i], true);
	if (reserved) {
		(void)unlinkat(g->sp->done, tn, 0);
	} else if (exists_at(g->sp->done, tn)) {
		gc_remove(g, g->sp->done, "done", tn);
	}
	for (size_t i = 0; i < g->trash.n; i++) {
		int r = rm_rf_at(g->sp->done, g->trash.v[i]);
		if (r < 0 && r != -ENOENT) {
			_cleanup_free_ char *st = term_safe(g->trash.v[i]);
			fprintf(stderr, "kart gc: done/%s: %s\n", st, strerror(-r));
			g->errors++;
		}
	}
	strv_free(&g->trash);
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
	enum done_file f;
	struct stat st, ts;
	/* ID.attempts/ without a JSON is a task's that waits for its next
	 * attempt, however long no worker runs: never an orphan here. */
	if (!spool_done_id(n, id, sizeof id, &f) || f == DONE_JSON || f == DONE_ATTEMPTS ||
	    spool_name_done(jn, sizeof jn, id, DONE_JSON) < 0 ||
	    spool_name_done(tn, sizeof tn, id, DONE_TASK) < 0 ||
	    exists_at(g->sp->done, jn) || fstatat(g->sp->done, n, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    g->now_ms - mtime_ms(&st) < STALE_MS)
		return false;
	if (fstatat(g->sp->done, tn, &ts, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT;
	return ts.st_nlink == 1 && g->now_ms - mtime_ms(&ts) >= STALE_MS;
}

/* What one walk of done/ finds for later: a result is removed, and an
 * orphan looked at again, once the listing is read. */
struct gc_done {
	struct gc *g;
	struct strv expired, orphans;
	struct progress pr;
	unsigned long long seen;
};

static int gc_done_one(const struct spool_entry *e, void *arg)
{
	struct gc_done *d = arg;
	struct gc *g = d->g;
	struct stat st;
	progress(&d->pr, ++d->seen, 0);
	if (spool_is_trash(e->name)) {
		/* A removal cut short (gc_remove): finished now. */
		gc_remove(g, e->dirfd, e->dir, e->name);
		return 0;
	}
	if (e->name[0] == '.') {
		if (spool_is_result_tmp(e->name) && old(g, e->dirfd, e->name, STALE_MS))
			gc_remove(g, e->dirfd, e->dir, e->name);
		return 0;
	}
	if (!e->id || fstatat(e->dirfd, e->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	if (e->done == DONE_JSON) {
		if (g->result_age_ms >= 0 && g->now_ms - mtime_ms(&st) >= g->result_age_ms)
			strv_add(&d->expired, e->id);
		return 0;
	}
	if (orphan(g, e->name))
		strv_add(&d->orphans, e->name);
	return 0;
}

static void gc_done(struct gc *g)
{
	struct gc_done d = {.g = g};
	progress_init(&d.pr, "gc", "entries of done/ looked at");
	gc_walk(g, SPOOL_WALK_DONE, "done", gc_done_one, &d);
	progress_done(&d.pr);
	progress_init(&d.pr, "gc", "old results removed");
	for (size_t i = 0; i < d.expired.n; i++) {
		gc_result(g, d.expired.v[i]);
		progress(&d.pr, i + 1, d.expired.n);
	}
	progress_done(&d.pr);
	/* Orphans: the .task (the id's reservation) after the others, each
	 * looked at again just before it goes. */
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < d.orphans.n; i++) {
			char id[512];
			enum done_file f;
			bool task = spool_done_id(d.orphans.v[i], id, sizeof id, &f) && f == DONE_TASK;
			if (task == (pass == 1) && orphan(g, d.orphans.v[i]))
				gc_remove(g, g->sp->done, "done", d.orphans.v[i]);
		}
	strv_free(&d.expired);
	strv_free(&d.orphans);
}

struct inodes {
	ino_t *v;
	size_t n;
};

static void inode_add(struct inodes *in, int dirfd, const char *name)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	in->v = xrealloc(in->v, (in->n + 1) * sizeof *in->v);
	in->v[in->n++] = st.st_ino;
}

/* The inodes of every file in dir, or in each directory of it (depth 1:
 * drop/USER/), added to *in. */
static void inodes_in(int at, const char *name, int depth, struct inodes *in)
{
	DIR *dir = at < 0 ? NULL : opendir_at(at, name);
	struct dirent *de;
	if (!dir)
		return;
	while ((de = readdir(dir))) {
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (depth > 0 && S_ISDIR(st.st_mode)) {
			inodes_in(dirfd(dir), de->d_name, depth - 1, in);
			continue;
		}
		in->v = xrealloc(in->v, (in->n + 1) * sizeof *in->v);
		in->v[in->n++] = st.st_ino;
	}
	closedir(dir);
}

/* Everything in tmp/, new/ and cur/W/; what cur/ holds but a claim
 * directory (a file, a link, cur/.new.* being born) too. */
static int inode_one(const struct spool_entry *e, void *arg)
{
	struct inodes *in = arg;
	struct stat st;
	if (e->area != SPOOL_WALK_WORKERS)
		inode_add(in, e->dirfd, e->name);
	else if (fstatat(e->dirfd, e->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	else if (!S_ISDIR(st.st_mode))
		inode_add(in, e->dirfd, e->name);
	else if (e->name[0] == '.')
		inodes_in(e->dirfd, e->name, 0, in); /* the walk enters no cur/.X */
	return 0;
}

static int ino_cmp(const void *a, const void *b)
{
	ino_t x = *(const ino_t *)a, y = *(const ino_t *)b;
	return x < y ? -1 : x > y;
}

/* The inodes of the spool's tasks wherever a task can be (tmp/, new/,
 * cur/W/, drop/USER/), sorted. */
static size_t live_inodes(struct gc *g, ino_t **v)
{
	struct inodes in = {0};
	(void)spool_walk(g->sp, SPOOL_WALK_TMP | SPOOL_WALK_NEW | SPOOL_WALK_WORKERS | SPOOL_WALK_CUR |
				 SPOOL_WALK_DOTS, inode_one, &in);
	inodes_in(g->sp->drop, ".", 1, &in);
	if (in.n)
		sort_n(in.v, in.n, sizeof *in.v, ino_cmp);
	*v = in.v;
	return in.n;
}

/* Is ids/name the reservation of a task that is still somewhere (its
 * inode in v)? */
static bool reserves_live(struct gc *g, const char *name, const ino_t *v, size_t n)
{
	char buf[32], *end;
	ssize_t l = readlinkat(g->sp->ids, name, buf, sizeof buf - 1);
	if (l <= 0)
		return false;
	buf[l] = '\0';
	errno = 0;
	unsigned long long ino = strtoull(buf, &end, 10);
	if (errno || *end || end == buf)
		return false;
	ino_t key = (ino_t)ino;
	return n && bsearch(&key, v, n, sizeof *v, ino_cmp) != NULL;
}

/* ids/: id reservations (spool-layout README §5, WORKER §10). One whose
 * result exists has done its work: a worker that died between the
 * result and its removal leaves it. One not modified for the tmp/ age
 * (36 hours, --tmp-age) that names no task's inode (none in tmp/, new/,
 * cur/W/ or drop/USER/) is a submitter's that died before it published:
 * its id is free again. A task queued or running keeps its reservation
 * however long it waits. Its inode is looked for in two scans, so that a
 * task moving between new/ and cur/ during one is seen in the other. */
static void gc_ids(struct gc *g)
{
	if (g->sp->ids < 0)
		return;
	DIR *dir = opendir_at(g->sp->ids, ".");
	struct dirent *de;
	if (!dir) {
		fprintf(stderr, "kart gc: ids/: %s\n", strerror(errno));
		g->errors++;
		return;
	}
	struct strv stale = {0};
	ino_t *live = NULL;
	size_t nlive = 0;
	bool scanned = false;
	while ((de = readdir(dir))) {
		const char *n = de->d_name;
		char p[512];
		if (!strcmp(n, ".") || !strcmp(n, ".."))
			continue;
		struct stat st;
		if (pathfmt(p, sizeof p, "%s.json", n) == 0 &&
		    fstatat(g->sp->done, p, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			strv_add(&stale, n);
			continue;
		}
		if (!old(g, g->sp->ids, n, g->tmp_age_ms))
			continue;
		if (!scanned) {
			nlive = live_inodes(g, &live);
			scanned = true;
		}
		if (!reserves_live(g, n, live, nlive))
			strv_add(&stale, n);
	}
	closedir(dir);
	if (stale.n) {
		/* The second scan, for the old ones only. */
		free(live);
		nlive = live_inodes(g, &live);
		for (size_t i = 0; i < stale.n; i++) {
			char p[512];
			struct stat st;
			bool done = pathfmt(p, sizeof p, "%s.json", stale.v[i]) == 0 &&
				    fstatat(g->sp->done, p, &st, AT_SYMLINK_NOFOLLOW) == 0;
			if (done || !reserves_live(g, stale.v[i], live, nlive))
				gc_remove(g, g->sp->ids, "ids", stale.v[i]);
		}
	}
	free(live);
	strv_free(&stale);
}

/* tally/: the row files of workers that are gone folded into one (and,
 * once, the results older than tally/ counted): tally.h, tally_fold.
 * Only who may write tally/ can (a member of a shared spool cannot). */
static void gc_tally(struct gc *g)
{
	struct tally_fold f;
	if (g->dry)
		return;
	int r = tally_fold(g->sp, &f);
	if (r == -EACCES || r == -EPERM || r == -EROFS || r == -EBUSY) {
		if (g->verbose)
			fprintf(stderr, "kart gc: tally/: not folded: %s\n",
				r == -EBUSY ? "another kart gc is folding it" : strerror(-r));
		return;
	}
	if (r < 0) {
		fprintf(stderr, "kart gc: tally/: %s\n", strerror(-r));
		g->errors++;
		return;
	}
	if (f.why[0])
		fprintf(stderr, "kart gc: tally/: %s\n", f.why);
	if (g->verbose && f.files)
		printf("tally/: %zu files of workers that are gone folded into tally/folded\n", f.files);
	if (g->verbose && f.pretally)
		printf("tally/: %zu results older than tally/ counted\n", f.pretally);
}

int cmd_gc(struct ctx *c, int argc, char **argv)
{
	struct gc g = {.tmp_age_ms = STALE_MS, .result_age_ms = -1};
	int64_t older_s = -1, tmp_age_s = -1;
	const struct opt opts[] = {
		OPT_DURATION(0, "older-than", &older_s,
			     "also remove results written at least DUR ago (90s, 5m, 2h, 30d), with "
			     "every file they name: the JSON first, then stdout, stderr, artifacts, "
			     "the task", 0),
		OPT_DURATION(0, "tmp-age", &tmp_age_s,
			     "the age for tmp/ entries, new/ dot files and ids/ reservations (default "
			     "36h)", 0),
		OPT_BOOL('n', "dry-run", &g.dry, "print what would be removed, remove nothing"),
		OPT_BOOL('v', "verbose", &g.verbose, "print each path removed (relative to the spool)"),
		OPT_END(),
	};
	struct opts_rest rest;
	opts_parse("gc", argc, argv, opts, &help, 0, &rest);
	if (rest.argc > 0)
		return usage_error("gc", "unexpected argument '%s'", rest.argv[0]);
	if (older_s >= 0)
		g.result_age_ms = older_s * 1000;
	if (tmp_age_s >= 0)
		g.tmp_age_ms = tmp_age_s * 1000;
	struct spool *sp = &c->sp;
	g.sp = sp;
	g.now_ms = now_realtime_ms();
	gc_walk(&g, SPOOL_WALK_TMP, "tmp", gc_tmp_one, &g);
	gc_ids(&g);
	gc_walk(&g, SPOOL_WALK_NEW, "new", gc_new_dot, &g);
	gc_walk(&g, SPOOL_WALK_WORKERS, "cur", gc_cur_one, &g);
	/* Before gc_done: an old result is counted before it goes. */
	gc_tally(&g);
	gc_done(&g);
	fflush(stdout);
	spool_close(sp);
	return g.errors ? 1 : 0;
}
