/* spool_recover.c - recovery (spool-layout WORKER §9): the claims of a dead
 * worker re-queued, lost or their finish completed, its directory
 * removed; and whether any worker is alive at all. Every rename here has
 * a row in spool-layout/APPENDIX.md's crash-state tables. */
#define _GNU_SOURCE
#include "spool_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "policy.h"
#include "tally.h"
#include "task.h"
#include "util.h"


/* A finish that got as far as done/ID.json, by a worker that died: make
 * it durable without trusting anything that worker wrote to done/. */
static int republish(struct spool *sp, const char *id)
{
	char p[512];
	const enum done_file files[] = {DONE_TASK, DONE_STDOUT, DONE_STDERR, DONE_OUT};
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		int r;
		if (spool_name_done(p, sizeof p, id, files[i]) < 0)
			return -ENAMETOOLONG;
		if ((r = redirty(sp, p)) < 0)
			return r;
	}
	_cleanup_free_ char *json = NULL;
	size_t len;
	if (pathfmt(p, sizeof p, "%s.json", id) < 0)
		return -ENAMETOOLONG;
	int r = read_file_at(sp->done, p, 1u << 20, &json, &len);
	if (r < 0)
		return r;
	/* Its reader: as when it was first written (the task's owner). */
	struct stat tst;
	uid_t owner = 0;
	if (pathfmt(p, sizeof p, "%s.task", id) == 0 && fstatat(sp->done, p, &tst, AT_SYMLINK_NOFOLLOW) == 0)
		owner = tst.st_uid;
	if ((r = write_result_json(sp, id, json, true, spool_reader(sp, id, owner), NULL)) < 0)
		return r;
	return fsync(sp->done) < 0 ? -errno : 0;
}

/* A finish of id begun (done/ID.task linked) but not written: its
 * files in done/ go, as if it never began, and the id is free again. */
static void finish_undo(struct spool *sp, const char *id)
{
	char p[512], trash[600];
	const enum done_file files[] = {DONE_TASK, DONE_STDOUT, DONE_STDERR};
	for (size_t i = 0; i < ARRAY_SIZE(files); i++)
		if (spool_name_done(p, sizeof p, id, files[i]) == 0)
			(void)unlinkat(sp->done, p, 0);
	/* And the tree it may have moved, by way of .rm-NAME: not a
	 * done/ID.out that the run's repeat would meet. */
	if (spool_name_done(p, sizeof p, id, DONE_OUT) == 0 && spool_trash(sp->done, p, trash, sizeof trash) == 0)
		(void)rm_rf_at(sp->done, trash);
}

int spool_finish_undo(struct spool *sp, int wdir, const char *name)
{
	struct stat st;
	struct claim_meta m;
	char p[512];
	_cleanup_close_ int fd = open_regular(wdir, name);
	if (fd < 0 || fstat(fd, &st) < 0)
		return -errno;
	if (st.st_nlink != 2 || claim_meta_get(fd, name, &m) < 0 || !m.id[0] ||
	    pathfmt(p, sizeof p, "%s.task", m.id) < 0 || !done_links(sp, p, &st))
		return 0;
	if (pathfmt(p, sizeof p, "%s.json", m.id) < 0 || exists_at(sp->done, p))
		return -EEXIST; /* written: only its fsync may be missing */
	finish_undo(sp, m.id);
	return 1;
}

enum recover_kind spool_recover_claim(struct spool *sp, const struct policy *pol, int wdir,
				     const char *name, const char *me)
{
	struct stat st;
	char p[512];
	if (fstatat(wdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? RECOVER_FINISHED : RECOVER_ERROR;
	struct claim_meta m = {.attempt = 1};
	int retries = pol->retries_default;
	if (S_ISREG(st.st_mode) && st.st_nlink == 3) {
		/* A finisher that died inside redirty() of done/ID.task left
		 * a third link, done/.ID.task.redo: drop it, look again. */
		_cleanup_close_ int fd = open_regular(wdir, name);
		struct claim_meta m3;
		char task[512];
		if (fd >= 0 && claim_meta_get(fd, name, &m3) == 0 && m3.id[0] &&
		    spool_name_done(task, sizeof task, m3.id, DONE_TASK) == 0 &&
		    spool_name_redo(p, sizeof p, task) == 0 && done_links(sp, p, &st) &&
		    unlinkat(sp->done, p, 0) == 0)
			(void)fstat(fd, &st);
	}
	if (S_ISREG(st.st_mode) && st.st_nlink <= 2) {
		_cleanup_close_ int fd = open_regular(wdir, name);
		if (fd < 0)
			return RECOVER_ERROR;
		/* The run's own processes hold the claim's lock file while
		 * any of them lives: never start it again before they are
		 * gone. Only the worker can open it (the task file, which
		 * others may hold open and flock, is not looked at). */
		char lk[512];
		if (spool_name_scratch(lk, sizeof lk, name, SCRATCH_LOCK) < 0)
			return RECOVER_ERROR;
		_cleanup_close_ int lfd = openat(wdir, lk, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (lfd < 0 && errno != ENOENT)
			return RECOVER_ERROR;
		if (lfd >= 0 && flock(lfd, LOCK_EX | LOCK_NB) < 0)
			return errno == EWOULDBLOCK ? RECOVER_BUSY : RECOVER_ERROR;
		(void)claim_meta_get(fd, name, &m);
		if (st.st_nlink == 2 && m.id[0]) {
			if (pathfmt(p, sizeof p, "%s.task", m.id) == 0 && done_links(sp, p, &st)) {
				/* Died while finishing. */
				if (pathfmt(p, sizeof p, "%s.json", m.id) == 0 && exists_at(sp->done, p)) {
					/* Its fsync of done/ may never have run, or
					 * have failed: the entries are written anew
					 * and done/ fsynced before the claim goes. */
					if (republish(sp, m.id) < 0)
						return RECOVER_ERROR;
					spool_tally_recovered(sp, wdir, name, fd, m.id);
					ids_release(sp, m.id, &st, spool_claim_submitter(sp, name, fd, &st));
					(void)unlinkat(wdir, name, 0);
					(void)spool_scrub_task(sp, wdir, name, m.id);
					spool_clean_scratch(wdir, name, 0);
					return RECOVER_FINISHED;
				}
				finish_undo(sp, m.id);
			}
		}
		char buf[TASK_HEADER_MAX], e[64];
		struct task_spec spec;
		ssize_t n = pread(fd, buf, sizeof buf, 0);
		if (n > 0 && task_parse(buf, (size_t)n, &spec, e, sizeof e) == 0 && spec.retries >= 0)
			retries = spec.retries;
		if (m.submitted_ms == 0)
			m.submitted_ms = ctime_ms(&st);
	}
	if (m.attempt > retries) {
		char idbuf[256], msg[200];
		snprintf(msg, sizeof msg,
			 "its worker died during attempt %d and retries=%d allows no more", m.attempt,
			 retries);
		if (spool_finish_unrun(sp, wdir, name, "lost", msg, me, idbuf, sizeof idbuf) < 0)
			return RECOVER_ERROR;
		return RECOVER_LOST;
	}
	/* The attempt lost is kept, as a retry's is (done/ID.attempts/N.json
	 * and what it wrote): the result's `attempts` says it was run. */
	if (S_ISREG(st.st_mode)) {
		struct stat lst;
		int64_t started = ctime_ms(&st);
		if (spool_name_scratch(p, sizeof p, name, SCRATCH_LOCK) == 0 &&
		    fstatat(wdir, p, &lst, AT_SYMLINK_NOFOLLOW) == 0)
			started = (int64_t)lst.st_mtim.tv_sec * 1000 + lst.st_mtim.tv_nsec / 1000000;
		struct attempt_rec a = {m.attempt, "lost", -1, 0, started, now_realtime_ms()};
		return spool_retry(sp, wdir, name, &m, &a, 0, spool_reader(sp, name, st.st_uid)) == 0
			       ? RECOVER_REQUEUED
			       : RECOVER_ERROR;
	}
	m.attempt++;
	return spool_requeue(sp, wdir, name, &m) == 0 ? RECOVER_REQUEUED : RECOVER_ERROR;
}

int spool_recover_dir(struct spool *sp, const struct policy *pol, int wdir, const char *me,
		      int *requeued, int *lost)
{
	DIR *dir = opendir_at(wdir, ".");
	if (!dir)
		return -errno;
	int busy = 0;
	char **names = NULL;
	size_t nn = 0;
	struct dirent *de;
	while ((de = readdir(dir))) {
		/* A dead worker's spare scratch directories (see worker_scratch.c). */
		if (strncmp(de->d_name, ".spare.", 7) == 0)
			(void)rm_rf_at(dirfd(dir), de->d_name);
		if (de->d_name[0] == '.')
			continue;
		names = xrealloc(names, (nn + 1) * sizeof *names);
		names[nn++] = xstrdup(de->d_name);
	}
	closedir(dir);
	for (size_t i = 0; i < nn; i++) {
		switch (spool_recover_claim(sp, pol, wdir, names[i], me)) {
		case RECOVER_REQUEUED: (*requeued)++; break;
		case RECOVER_LOST: (*lost)++; break;
		case RECOVER_BUSY:
		case RECOVER_ERROR: busy++; break;
		case RECOVER_FINISHED: break;
		}
		free(names[i]);
	}
	free(names);
	return busy;
}

int spool_recover_peer(struct spool *sp, const struct policy *pol, const char *peer,
		       const char *me, int (*dead)(void *arg, const char *peer), void *arg, int *busy,
		       int *requeued, int *lost)
{
	_cleanup_close_ int d = openat(sp->cur, peer, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (d < 0)
		return errno == ENOENT ? 0 : -errno;
	/* No .lock: a worker that died at its exit between unlinking the
	 * lock and removing the directory (a worker is born under a dot
	 * name, locked, then renamed into place; and one that leaves a claim
	 * behind keeps its lock). Only an empty one is removed: rmdir
	 * refuses anything else. */
	_cleanup_close_ int l = openat(d, ".lock", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (l < 0) {
		if (errno != ENOENT)
			return -errno;
		(void)unlinkat(sp->cur, peer, AT_REMOVEDIR);
		return 0;
	}
	if (flock(l, LOCK_EX | LOCK_NB) < 0)
		return errno == EWOULDBLOCK ? 0 : -errno;
	if (dead && dead(arg, peer) < 0) {
		*busy = 1;
		return 1;
	}
	int r = spool_recover_dir(sp, pol, d, me, requeued, lost);
	if (r < 0)
		return r;
	*busy = r;
	if (r == 0) {
		/* Everything is out: remove the dead worker's directory. What
		 * is left in it is scratch of claims that are gone (a worker
		 * killed between a claim's finish or re-queue and the removal
		 * of its scratch, in this life or an earlier one): no claim,
		 * so nobody's. A worker starting again under this id simply
		 * recreates the directory. */
		DIR *dir = opendir_at(d, ".");
		struct dirent *de;
		while (dir && (de = readdir(dir)))
			if (de->d_name[0] == '.' && strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
			    strcmp(de->d_name, ".lock"))
				(void)rm_rf_at(dirfd(dir), de->d_name);
		if (dir)
			closedir(dir);
		(void)unlinkat(d, ".lock", 0);
		(void)unlinkat(sp->cur, peer, AT_REMOVEDIR);
	}
	return 1;
}

/* ---- is anyone serving the spool? ------------------------------------------ */

/* Whether the flock list (/proc/locks) has a lock on inode ino. Read,
 * not probed with a flock of our own: a recovering worker that met our
 * probe's lock would take its dead peer for alive. By the inode alone:
 * on overlayfs the list names the upper layer's device, not the one
 * stat gives (another file of that number elsewhere only hides a hint). */
static bool flocked(const char *locks, ino_t ino)
{
	char want[32];
	snprintf(want, sizeof want, ":%llu ", (unsigned long long)ino);
	for (const char *l = locks; l && *l;) {
		const char *nl = strchr(l, '\n');
		const char *hit = strstr(l, want);
		const char *kind = strstr(l, " FLOCK ");
		const char *waiter = strstr(l, "->"); /* blocked, not holding */
		if (hit && (!nl || hit < nl) && kind && kind < hit && !(waiter && waiter < kind))
			return true;
		l = nl ? nl + 1 : NULL;
	}
	return false;
}

int spool_worker_live(struct spool *sp, const char *worker)
{
	_cleanup_free_ char *locks = NULL;
	size_t len = 0;
	char p[512];
	struct stat st;
	if (worker[0] == '.' || pathfmt(p, sizeof p, "%s/.lock", worker) < 0)
		return -EINVAL;
	int r = read_file_at(AT_FDCWD, "/proc/locks", 4 << 20, &locks, &len);
	if (r < 0)
		return r;
	if (fstatat(sp->cur, p, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	return flocked(locks, st.st_ino);
}

int spool_live_worker_ids(struct spool *sp, struct strv *ids)
{
	_cleanup_free_ char *locks = NULL;
	size_t len = 0;
	int r = read_file_at(AT_FDCWD, "/proc/locks", 4 << 20, &locks, &len);
	if (r < 0)
		return r;
	DIR *d = opendir_at(sp->cur, ".");
	if (!d)
		return -errno;
	int n = 0;
	struct dirent *de;
	char p[512];
	while ((de = readdir(d))) {
		struct stat st;
		/* A worker is born under a dot name, locked, then renamed. */
		if (de->d_name[0] == '.' || pathfmt(p, sizeof p, "%s/.lock", de->d_name) < 0 ||
		    fstatat(sp->cur, p, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (flocked(locks, st.st_ino)) {
			n++;
			if (ids)
				strv_add(ids, de->d_name);
		}
	}
	closedir(d);
	return n;
}

int spool_live_workers(struct spool *sp) { return spool_live_worker_ids(sp, NULL); }
