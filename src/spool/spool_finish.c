/* spool_finish.c - the result protocol (spool-layout WORKER §6): a claim's id,
 * its outputs moved beside the result, the JSON written last and durably;
 * a claim that will not run; re-queue and retry. Every rename here
 * has a row in spool-layout/APPENDIX.md's crash-state tables. */
#define _GNU_SOURCE
#include "spool_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/magic.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

#include "result.h"
#include "tally.h"
#include "task.h"
#include "util.h"


void spool_id_from_bytes(const char *name, char *out, size_t outlen)
{
	size_t o = 0, max = outlen - 1 < TASK_NAME_MAX ? outlen - 1 : TASK_NAME_MAX;
	const char *why;
	if (task_name_check(name, &why) == 0) {
		snprintf(out, outlen, "%s", name);
		return;
	}
	for (const unsigned char *p = (const unsigned char *)name; *p && o < max; p++)
		out[o++] = (*p < 0x20 || *p >= 0x7f || *p == '/') ? '_' : (char)*p;
	if (o == 0 || out[0] == '.')
		out[o ? 0 : o++] = '_';
	out[o] = '\0';
}

/* The disk space under dir (allocated blocks, not following links),
 * added to *bytes; *entries counts what was seen. Stops early, with
 * 1, once *bytes passes cap or *entries passes max_entries. */
static int tree_walk(int dir, uint64_t cap, uint64_t *bytes, uint64_t *entries,
		     uint64_t max_entries, int depth)
{
	DIR *dp = opendir_at(dir, ".");
	if (!dp)
		return -errno;
	struct dirent *de;
	int r = 0;
	while (r == 0 && (de = readdir(dp))) {
		struct stat st;
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(dp), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		*bytes += (uint64_t)st.st_blocks * 512;
		if (*bytes > cap || ++*entries > max_entries || depth > 64) {
			r = 1;
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			_cleanup_close_ int sub = openat(dirfd(dp), de->d_name,
							 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0)
				r = tree_walk(sub, cap, bytes, entries, max_entries, depth + 1);
		}
	}
	closedir(dp);
	return r;
}

/* The disk space a directory tree holds, into *bytes: 1 once it passes
 * cap (or holds more than TREE_ENTRIES_MAX entries, or nests deeper than
 * 64; counting stops there), 0 within it (or no such directory), or
 * -errno. Never follows a link. */
#define TREE_ENTRIES_MAX 100000
static int tree_bytes_over(int at, const char *name, uint64_t cap, uint64_t *bytes)
{
	uint64_t entries = 0;
	return spool_tree_usage(at, name, cap, TREE_ENTRIES_MAX, bytes, &entries);
}

int spool_tree_usage(int at, const char *name, uint64_t cap, uint64_t max_entries, uint64_t *bytes,
		     uint64_t *entries)
{
	*bytes = *entries = 0;
	_cleanup_close_ int d = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d < 0)
		return errno == ENOENT ? 0 : -errno;
	return tree_walk(d, cap, bytes, entries, max_entries, 0);
}

/* Link an unnamed file (O_TMPFILE) as at/name; never replaces. With
 * AT_EMPTY_PATH where we may (Linux 6.10 and later, for a file its
 * caller opened so; before, only with CAP_DAC_READ_SEARCH), else through
 * /proc/self/fd. -EEXIST if the name is taken; -ENOTSUP if neither way
 * works here (no /proc, say): the caller writes a named file instead. */
static int link_unnamed(int fd, int at, const char *name)
{
	static _Atomic bool by_proc; /* AT_EMPTY_PATH was refused once */
	if (!by_proc) {
		if (linkat(fd, "", at, name, AT_EMPTY_PATH) == 0)
			return 0;
		if (errno != ENOENT)
			return -errno;
		by_proc = true;
	}
	char p[64];
	snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
	if (linkat(AT_FDCWD, p, at, name, AT_SYMLINK_FOLLOW) == 0)
		return 0;
	return errno == ENOENT ? -ENOTSUP : -errno;
}

/* Is a file made unnamed (O_TMPFILE), fsynced, then linked into dir as
 * durable once dir is fsynced as one made under a name? Only where the
 * new name and the file's own link count reach the disk together: a
 * journal (ext4 with one, XFS, Btrfs), or no disk at all (tmpfs). ext4
 * without a journal writes the file's inode when it was fsynced, with
 * no link, and the link count later: a crash in between leaves a name
 * whose inode fsck takes for deleted, and removes. An ext4 journal shows
 * as /proc/fs/jbd2/DEV-INODE, DEV the filesystem's block device. */
static bool unnamed_durable(int dir)
{
	struct statfs sf;
	struct stat st;
	if (fstatfs(dir, &sf) < 0)
		return false;
	if (sf.f_type == TMPFS_MAGIC || sf.f_type == XFS_SUPER_MAGIC || sf.f_type == BTRFS_SUPER_MAGIC)
		return true;
	if (sf.f_type != EXT4_SUPER_MAGIC || fstat(dir, &st) < 0)
		return false;
	char p[64], dev[PATH_MAX];
	snprintf(p, sizeof p, "/sys/dev/block/%u:%u", major(st.st_dev), minor(st.st_dev));
	ssize_t n = readlink(p, dev, sizeof dev - 1);
	if (n <= 0)
		return false;
	dev[n] = '\0';
	const char *name = strrchr(dev, '/') ? strrchr(dev, '/') + 1 : dev;
	size_t len = strlen(name);
	DIR *d = opendir("/proc/fs/jbd2");
	bool found = false;
	struct dirent *de;
	while (d && !found && (de = readdir(d)))
		found = strncmp(de->d_name, name, len) == 0 && de->d_name[len] == '-';
	if (d)
		closedir(d);
	return found;
}

/* A result's JSON into fd, readable by reader: 0 or -errno. */
static int json_fill(struct spool *sp, int fd, const char *json, uid_t reader)
{
	int r = spool_result_grant(sp, fd, reader);
	return r < 0 ? r : write_all(fd, json, strlen(json));
}

static void json_pending_free(struct json_pending *jp)
{
	if (jp->fd >= 0)
		close(jp->fd);
	free(jp->id);
	free(jp->tmp);
	free(jp->json);
	*jp = JSON_PENDING_NONE;
}

int spool_result_grant(const struct spool *sp, int fd, uid_t reader)
{
	struct stat d, f;
	/* Fails closed: a file that cannot be given done/'s group is its
	 * reader's alone, never its present group's. */
	bool group = sp->results_group && fstat(sp->done, &d) == 0 && fstat(fd, &f) == 0 &&
		     (f.st_gid == d.st_gid || fchown(fd, (uid_t)-1, d.st_gid) == 0);
	return grant_read(fd, reader, group);
}

/* The first half of writing done/<id>.json: the file made and written,
 * unnamed where that is as durable (unnamed_durable) and there is
 * O_TMPFILE, else under a temporary name. Nothing is left in jp on an
 * error. */
static int json_write(struct spool *sp, const char *id, const char *json, bool redo,
		      uid_t reader, struct json_pending *jp)
{
	char tmpn[512];
	*jp = JSON_PENDING_NONE;
	/* redo replaces our own earlier copy: only rename(2) can. */
	if (!redo && !sp->unnamed)
		sp->unnamed = unnamed_durable(sp->done) ? 1 : -1;
	if (!redo && sp->unnamed > 0) {
		int fd = openat(sp->done, ".", O_WRONLY | O_TMPFILE | O_CLOEXEC, 0600);
		if (fd >= 0) {
			int r = json_fill(sp, fd, json, reader);
			if (r < 0) {
				close(fd);
				return r;
			}
			*jp = (struct json_pending){.fd = fd, .unnamed = true, .id = xstrdup(id),
						    .json = xstrdup(json), .reader = reader};
			return 0;
		}
		if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
			return -errno;
		sp->unnamed = -1;
	}
	if (spool_name_result_tmp(tmpn, sizeof tmpn, id, getpid()) < 0)
		return -ENAMETOOLONG;
	int fd = openat(sp->done, tmpn, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 && errno == EEXIST) {
		/* Our own leftover from a crash (the name has our pid). */
		(void)unlinkat(sp->done, tmpn, 0);
		fd = openat(sp->done, tmpn, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	}
	if (fd < 0)
		return -errno;
	int r = json_fill(sp, fd, json, reader);
	if (r < 0) {
		close(fd);
		(void)unlinkat(sp->done, tmpn, 0);
		return r;
	}
	*jp = (struct json_pending){.fd = fd, .redo = redo, .id = xstrdup(id), .tmp = xstrdup(tmpn),
				    .reader = reader};
	return 0;
}

/* The second half: fsync, then the name, which is never an existing
 * result's but with redo. A failed fsync is never retried and trusted:
 * the page state after a writeback error is unknown, so the file is
 * dropped (unlinked, or closed unnamed). jp is empty afterwards. */
int spool_json_commit(struct spool *sp, struct json_pending *jp)
{
	char fin[512];
	if (jp->fd < 0)
		return 0;
	int r = pathfmt(fin, sizeof fin, "%s.json", jp->id) < 0 ? -ENAMETOOLONG : 0;
	if (r == 0 && fsync(jp->fd) < 0)
		r = -errno;
	if (jp->unnamed) {
		if (r == 0 && (r = link_unnamed(jp->fd, sp->done, fin)) == -ENOTSUP) {
			/* No way to link it here: a named one, as elsewhere. */
			sp->unnamed = -1;
			struct json_pending named;
			if ((r = json_write(sp, jp->id, jp->json, false, jp->reader, &named)) == 0)
				r = spool_json_commit(sp, &named);
		}
		json_pending_free(jp);
		return r;
	}
	/* redo: the id is ours and a JSON of ours may be there already, from
	 * an attempt whose fsync of done/ failed. It is replaced by this
	 * fresh, fsynced copy (the same result), never trusted as it was. */
	if (r == 0 && jp->redo && renameat(sp->done, jp->tmp, sp->done, fin) < 0)
		r = -errno;
	else if (r == 0 && !jp->redo &&
		 renameat2(sp->done, jp->tmp, sp->done, fin, RENAME_NOREPLACE) < 0) {
		if (errno == EINVAL) {
			if (linkat(sp->done, jp->tmp, sp->done, fin, 0) < 0)
				r = -errno;
			else
				(void)unlinkat(sp->done, jp->tmp, 0);
		} else
			r = -errno;
	}
	if (r < 0)
		(void)unlinkat(sp->done, jp->tmp, 0);
	json_pending_free(jp);
	return r;
}

/* Write done/<id>.json durably, without ever replacing an existing
 * result: at once, or with pend left pending there, its data on its way
 * to the disk, for the caller to commit. */
int write_result_json(struct spool *sp, const char *id, const char *json, bool redo,
			     uid_t reader, struct json_pending *pend)
{
	struct json_pending now;
	int r = json_write(sp, id, json, redo, reader, pend ? pend : &now);
	if (r < 0)
		return r;
	if (!pend)
		return spool_json_commit(sp, &now);
	(void)sync_file_range(pend->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	return 0;
}

static void fill_user(struct result *res, uid_t uid, char *buf, size_t len)
{
	res->uid = uid;
	if (uid_name(uid, buf, len))
		res->user = buf;
}

/* Make an entry of done/ dirty again. After an fsync of done/ failed, the
 * kernel may have dropped the dirty state of what it failed to write, and
 * a second fsync would report success for it: so the entries of an
 * unfinished publish are written anew, and only the fsync that follows is
 * trusted. A file gets a second link, .NAME.redo, removed at once: its
 * own name never goes missing. A directory (ID.out/) is renamed to
 * .NAME.redo and back, and a crash in between is repaired here, by the
 * next redirty of the same name (a publish retry, or recovery). */
int redirty(struct spool *sp, const char *name)
{
	char aside[512];
	struct stat st;
	if (spool_name_redo(aside, sizeof aside, name) < 0)
		return -ENAMETOOLONG;
	if (fstatat(sp->done, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT)
			return -errno;
		/* Crashed between the two renames of a directory: back. */
		if (renameat2(sp->done, aside, sp->done, name, RENAME_NOREPLACE) < 0)
			return errno == ENOENT ? 0 : -errno;
		return 0;
	}
	if (S_ISDIR(st.st_mode)) {
		if (renameat2(sp->done, name, sp->done, aside, RENAME_NOREPLACE) < 0 ||
		    renameat2(sp->done, aside, sp->done, name, RENAME_NOREPLACE) < 0)
			return -errno;
		return 0;
	}
	(void)unlinkat(sp->done, aside, 0); /* a crash's leftover link */
	if (linkat(sp->done, name, sp->done, aside, 0) < 0)
		return -errno;
	if (unlinkat(sp->done, aside, 0) < 0)
		return -errno;
	return 0;
}

/* done/ID.stdout (or .stderr) for a run that wrote nothing: a link to
 * done/.empty, one empty file for the whole spool, so that no inode is
 * allocated for it (on ext4 without a journal each new inode skips every
 * inode freed in the last 30 s). Where a link cannot be made (the link
 * limit, protected_hardlinks between workers of different users) the
 * empty file is made for this result alone. */
static int link_empty(struct spool *sp, const char *to, bool *checked)
{
	/* The second of a result's two links needs no second look. */
	if (*checked && (linkat(sp->done, ".empty", sp->done, to, 0) == 0 || errno == EEXIST))
		return 0;
	for (int round = 0; round < 2; round++) {
		struct stat st;
		if (fstatat(sp->done, ".empty", &st, AT_SYMLINK_NOFOLLOW) == 0) {
			if (S_ISREG(st.st_mode) && st.st_size == 0) {
				if (linkat(sp->done, ".empty", sp->done, to, 0) == 0 || errno == EEXIST)
					return (*checked = true), 0;
				if (errno != EMLINK)
					break;
			}
			/* Full of links, or not an empty file any more: a
			 * new one (the old links keep the old inode). */
			if (unlinkat(sp->done, ".empty", 0) < 0 && errno != ENOENT)
				break;
		}
		int fd = openat(sp->done, ".empty", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
				0444);
		if (fd < 0 && errno != EEXIST)
			break;
		if (fd >= 0) {
			int bad = fsync(fd) < 0;
			close(fd);
			if (bad) {
				(void)unlinkat(sp->done, ".empty", 0);
				break;
			}
		}
	}
	int fd = openat(sp->done, to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return errno == EEXIST ? 0 : -errno;
	int r = fsync(fd) < 0 ? -errno : 0;
	close(fd);
	if (r < 0)
		(void)unlinkat(sp->done, to, 0);
	return r;
}

/* One attempt's record, as done/HOLD.attempts/N.json and the entries
 * of the result's `attempts`. */
static json_t *attempt_json(const struct attempt_rec *a, const char *out, uint64_t out_bytes,
			    const char *err, uint64_t err_bytes)
{
	char st[32], ft[32];
	fmt_rfc3339_ms(a->started_ms, st);
	fmt_rfc3339_ms(a->finished_ms, ft);
	json_t *o = json_object();
	json_object_set_new(o, "attempt", json_integer(a->attempt));
	json_object_set_new(o, "status", json_string(a->status));
	json_object_set_new(o, "exit_code", a->exit_code >= 0 ? json_integer(a->exit_code) : json_null());
	json_object_set_new(o, "signal", a->signal ? json_string(signal_name(a->signal)) : json_null());
	json_object_set_new(o, "started_at", a->started_ms > 0 ? json_string(st) : json_null());
	json_object_set_new(o, "finished_at", a->finished_ms > 0 ? json_string(ft) : json_null());
	json_t *po = out ? json_string(out) : NULL, *pe = err ? json_string(err) : NULL;
	json_object_set_new(o, "stdout", json_pack("{s:o, s:I}", "path", po ? po : json_null(),
						   "bytes", (json_int_t)out_bytes));
	json_object_set_new(o, "stderr", json_pack("{s:o, s:I}", "path", pe ? pe : json_null(),
						   "bytes", (json_int_t)err_bytes));
	return o;
}

static int attempt_cmp(const void *x, const void *y)
{
	json_int_t a = json_integer_value(json_object_get(*(json_t *const *)x, "attempt"));
	json_int_t b = json_integer_value(json_object_get(*(json_t *const *)y, "attempt"));
	return a < b ? -1 : a > b;
}

/* The result's `attempts`: the records in done/HOLD.attempts/ (none
 * without a hold), in order, then this last one. An attempt whose
 * worker died is recorded `lost` by the peer that recovers it. */
static char *attempts_list(struct spool *sp, const char *hold, const struct result *res)
{
	json_t *arr = json_array();
	char p[512];
	DIR *d = hold[0] && pathfmt(p, sizeof p, "%s.attempts", hold) == 0 ? opendir_at(sp->done, p) : NULL;
	json_t **v = NULL;
	size_t n = 0;
	for (struct dirent *de; d && (de = readdir(d));) {
		size_t l = strlen(de->d_name);
		if (de->d_name[0] == '.' || l < 6 || strcmp(de->d_name + l - 5, ".json") != 0)
			continue;
		_cleanup_free_ char *buf = NULL;
		size_t len;
		json_t *o;
		if (read_file_at(dirfd(d), de->d_name, 1 << 16, &buf, &len) < 0 ||
		    !(o = json_loadb(buf, len, 0, NULL)))
			continue;
		v = xrealloc(v, (n + 1) * sizeof *v);
		v[n++] = o;
	}
	if (d)
		closedir(d);
	if (n)
		sort_n(v, n, sizeof *v, attempt_cmp);
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, v[i]);
	free(v);
	struct attempt_rec last = {res->attempt, res->status, res->exit_code, res->signal,
				   res->started_ms, res->finished_ms};
	json_array_append_new(arr, attempt_json(&last, res->out.present ? res->out.path : NULL,
						res->out.bytes, res->err.present ? res->err.path : NULL,
						res->err.bytes));
	char *s = json_dumps(arr, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(arr);
	return s;
}

/* A run's output kept as done/q: the result names it. */
static void stream_kept(struct result_stream *s, const char *q)
{
	s->present = true;
	snprintf(s->path, sizeof s->path, "done/%s", q);
}

/* How a finisher takes an id: the claim linked as done/ID.task, its
 * user.kart saying id=ID first so that recovery can tell a finish in
 * progress from a run in progress; or, for an entry that is no task
 * file (fd < 0), an empty done/ID.task made exclusively. -EEXIST: the
 * id is taken, try the next. */
struct id_taker {
	int wdir, fd;
	const char *name;
	struct claim_meta *m;
	uid_t by; /* its submitter (spool_claim_submitter): whose reservations are its own */
};

static int take_id(struct spool *sp, const struct id_taker *t, const char *id, const char *task)
{
	if (t->fd < 0) {
		int fd = openat(sp->done, task, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
		if (fd < 0)
			return -errno;
		close(fd);
		return 0;
	}
	snprintf(t->m->id, sizeof t->m->id, "%s", id);
	int r = claim_meta_set(t->fd, t->m);
	if (r < 0 && r != -ENOTSUP)
		return r;
	return linkat(t->wdir, t->name, sp->done, task, 0) < 0 ? -errno : 0;
}

/* Reserve the id: the first of base, base.2, ... with no result and no
 * reservation of another task in ids/ (cst NULL: of anyone), taken with
 * done/ID.task. A submitter reserves, then looks in done/; we take, then
 * look in ids/: one of the two sees the other, and a reservation made
 * since our first look wins (the id is given back: a crash there is a
 * finish cut short, WORKER §9). own_hold: base is the id its own earlier
 * attempts hold, which counts as taken only by a result. */
static int reserve_id(struct spool *sp, const char *base, bool own_hold, const struct stat *cst,
		      const struct id_taker *t, char *id, size_t idlen)
{
	char task[512];
	for (int n = 1;; n++) {
		int r = next_id(base, n, id, idlen);
		if (r < 0)
			return r;
		if (spool_name_done(task, sizeof task, id, DONE_TASK) < 0)
			return -ENAMETOOLONG;
		if (n == 1 && own_hold ? done_has_result(sp, id) : done_has(sp, id))
			continue;
		int held = spool_ids_state(sp, id, cst, t->by);
		if (held == IDS_OTHER)
			continue;
		if ((r = take_id(sp, t, id, task)) == -EEXIST)
			continue;
		if (r < 0)
			return r;
		if (held == IDS_NONE && spool_ids_state(sp, id, cst, t->by) == IDS_OTHER) {
			if (unlinkat(sp->done, task, 0) < 0)
				return -errno;
			continue;
		}
		return 0;
	}
}

/* The id of a claim being finished: the one it already holds when this
 * is a retry of a failed publish (*redo: its entries in done/ are made
 * dirty again), else a new one from the id its submitter reserved
 * (README §5: the claim's name, or that name before a re-queue or a
 * move from drop/ suffixed it), else the id its earlier attempts hold
 * (hold=), else base. */
static int finish_reserve(struct spool *sp, const struct id_taker *t, const struct stat *cst,
			  const char *base, char *id, size_t idlen, bool *redo)
{
	char task[512], rid[TASK_NAME_MAX + 80];
	*redo = false;
	if (t->m->id[0] && spool_name_done(task, sizeof task, t->m->id, DONE_TASK) == 0 &&
	    done_links(sp, task, cst)) {
		snprintf(id, idlen, "%s", t->m->id);
		*redo = true;
		return redirty(sp, task);
	}
	if (spool_reserved_id(sp, t->name, cst, t->by, rid, sizeof rid) == 1)
		base = rid;
	else if (t->m->hold[0])
		base = t->m->hold;
	return reserve_id(sp, base, t->m->hold[0] != '\0', cst, t, id, idlen);
}

/* Keep the streams: .NAME.stdout and .stderr renamed to done/ID.*; a
 * stream the run never made is a link to done/.empty. */
static int finish_keep_streams(struct spool *sp, int wdir, const char *name, const char *id,
			       bool redo, struct result *res)
{
	char p[512], q[512];
	struct result_stream *st[] = {&res->out, &res->err};
	const enum scratch_file scr[] = {SCRATCH_STDOUT, SCRATCH_STDERR};
	const enum done_file kept[] = {DONE_STDOUT, DONE_STDERR};
	bool empty_ok = false; /* done/.empty looked at (link_empty) */
	int r;
	for (int i = 0; i < 2; i++) {
		if (spool_name_scratch(p, sizeof p, name, scr[i]) < 0 ||
		    spool_name_done(q, sizeof q, id, kept[i]) < 0)
			return -ENAMETOOLONG;
		if (!redo && st[i]->unmade) {
			/* The run never made the file (it wrote nothing). */
			if ((r = link_empty(sp, q, &empty_ok)) < 0)
				return r;
			stream_kept(st[i], q);
		} else if (renameat(wdir, p, sp->done, q) == 0) {
			struct stat os;
			if (!st[i]->bytes && fstatat(sp->done, q, &os, 0) == 0)
				st[i]->bytes = (uint64_t)os.st_size;
			stream_kept(st[i], q);
		} else if (errno == ENOENT && (redo || st[i]->captured)) {
			/* Moved (or linked) by an earlier attempt; or the run
			 * wrote nothing, and the file was never made. */
			struct stat os;
			if (fstatat(sp->done, q, &os, AT_SYMLINK_NOFOLLOW) < 0) {
				if (errno != ENOENT || !st[i]->captured)
					continue;
				if ((r = link_empty(sp, q, &empty_ok)) < 0)
					return r;
				stream_kept(st[i], q);
				continue;
			}
			if (!S_ISREG(os.st_mode))
				continue; /* none of ours: no output to name */
			if ((r = redirty(sp, q)) < 0)
				return r;
			if (!st[i]->bytes)
				st[i]->bytes = (uint64_t)os.st_size;
			stream_kept(st[i], q);
		} else if (errno != ENOENT && errno != ENAMETOOLONG)
			/* ENAMETOOLONG: for a name near NAME_MAX (a rejected
			 * one), the scratch name cannot exist. */
			return -errno;
	}
	return 0;
}

/* Keep the artifacts: what the task left in $KART_OUTDIR, renamed to
 * done/ID.out/, up to res->artifacts_max: over it, none of it (part of
 * a set of files would mislead), and the result says so. Only a full
 * one is measured: an empty one is just removed. */
static int finish_keep_artifacts(struct spool *sp, int wdir, const char *name, const char *id,
				 bool redo, struct result *res)
{
	char p[512], q[512];
	int over = 0, r;
	if (res->outdir_gone && !redo)
		return 0; /* the worker took it back empty */
	if ((res->outdir_scratch ? pathfmt(p, sizeof p, "%s", res->outdir_scratch)
				 : spool_name_scratch(p, sizeof p, name, SCRATCH_OUT)) == 0 &&
	    spool_name_done(q, sizeof q, id, DONE_OUT) == 0 && unlinkat(wdir, p, AT_REMOVEDIR) < 0 &&
	    errno == ENOTEMPTY &&
	    (!res->artifacts_max ||
	     (over = tree_bytes_over(wdir, p, res->artifacts_max, &res->artifacts_bytes)) == 0)) {
		if (renameat(wdir, p, sp->done, q) < 0) {
			if (errno != ENOTEMPTY && errno != EEXIST)
				return -errno;
			/* done/ID.out of an earlier run of this id whose
			 * result was never written (its worker died mid-
			 * publish, and recovery ran it again): the new tree
			 * takes its place, and the old one, now at the
			 * scratch name, goes. A crash between the two
			 * leaves it in scratch, removed with the claim's. */
			if (renameat2(wdir, p, sp->done, q, RENAME_EXCHANGE) < 0)
				return -errno;
			(void)rm_rf_at(wdir, p);
		}
		res->artifacts_path = xasprintf("done/%s", q);
	} else if (over != 0) {
		res->artifacts_dropped = true;
		(void)rm_rf_at(wdir, p);
	} else if (redo && !res->artifacts_path && exists_at(sp->done, q)) {
		if ((r = redirty(sp, q)) < 0)
			return r;
		res->artifacts_path = xasprintf("done/%s", q);
	}
	return 0;
}

/* Write the JSON, last: done/ID.json, at once or left in pend. */
static int finish_write_json(struct spool *sp, const char *id, const char *hold, bool redo,
			     struct result *res, struct json_pending *pend)
{
	if (hold[0] || (res->task && sched_retry_set(&res->task->retry_on)))
		res->attempts_json = attempts_list(sp, hold, res);
	_cleanup_free_ char *json = result_dumps(res);
	free(res->attempts_json);
	res->attempts_json = NULL;
	free((char *)res->task_path);
	free((char *)res->artifacts_path);
	res->task_path = res->artifacts_path = NULL;
	return write_result_json(sp, id, json, redo, spool_reader(sp, id, res->uid), pend);
}

/* Not a task file (symlink, FIFO, device, directory, extra hard link):
 * the result is written first, then only the entry itself is removed
 * (spool_finish_complete), so what it points at is untouched. A crash
 * between the two rejects it again under a new id. */
static int finish_entry(struct spool *sp, const char *base, struct result *res, char *id,
			size_t idlen)
{
	char task[512];
	const struct id_taker t = {.fd = -1};
	int r = reserve_id(sp, base, false, NULL, &t, id, idlen);
	if (r < 0)
		return r;
	res->id = id;
	uid_t reader = spool_reader(sp, id, res->uid);
	_cleanup_free_ char *json = result_dumps(res);
	if ((r = write_result_json(sp, id, json, false, reader, NULL)) == -EEXIST) {
		/* The id is ours: the JSON there is our own, from an attempt
		 * whose later step failed. Written anew. */
		if (spool_name_done(task, sizeof task, id, DONE_TASK) < 0)
			return -ENAMETOOLONG;
		if ((r = redirty(sp, task)) < 0)
			return r;
		r = write_result_json(sp, id, json, true, reader, NULL);
	}
	return r;
}

int spool_finish_stage(struct spool *sp, int wdir, const char *name, bool regular,
		       struct result *res, char *idbuf, size_t idlen, struct json_pending *pend)
{
	_cleanup_free_ char *base = xstrdup(res->id ? res->id : name);
	if (!regular)
		return finish_entry(sp, base, res, idbuf, idlen);
	_cleanup_close_ int fd = open_regular(wdir, name);
	struct claim_meta m;
	struct stat cst;
	bool redo; /* an earlier attempt of this publish got this far */
	if (fd < 0 || fstat(fd, &cst) < 0)
		return -errno;
	(void)claim_meta_get(fd, name, &m);
	const struct id_taker t = {.wdir = wdir, .fd = fd, .name = name, .m = &m,
				   .by = spool_claim_submitter(sp, name, fd, &cst)};
	int r = finish_reserve(sp, &t, &cst, base, idbuf, idlen, &redo);
	if (r < 0)
		return r;
	res->id = idbuf;
	res->task_path = xasprintf("done/%s.task", idbuf);
	if ((r = finish_keep_streams(sp, wdir, name, idbuf, redo, res)) < 0 ||
	    (r = finish_keep_artifacts(sp, wdir, name, idbuf, redo, res)) < 0)
		return r;
	return finish_write_json(sp, idbuf, m.hold, redo, res, pend);
}

static const char *no_value(const char *name, void *arg)
{
	(void)name, (void)arg;
	return "";
}

/* done/ID.task without its env= values (the submitter's secrets: the
 * names stay, and the result says so), written whole beside the claim's
 * scratch and renamed over it, its owner and mode kept. Once the claim
 * is gone: before, recovery takes the task file's links to tell a
 * finish under way. */
int spool_scrub_task(struct spool *sp, int wdir, const char *name, const char *id)
{
	char tn[512], sn[512], err[64];
	_cleanup_free_ char *text = NULL, *clean = NULL;
	size_t len, clen;
	struct stat st;
	if (spool_name_done(tn, sizeof tn, id, DONE_TASK) < 0 ||
	    spool_name_scratch(sn, sizeof sn, name, SCRATCH_SCRUB) < 0)
		return -ENAMETOOLONG;
	if (fstatat(sp->done, tn, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	int r = read_file_at(sp->done, tn, (size_t)st.st_size + 1, &text, &len);
	if (r < 0)
		return r;
	clean = task_env_rewrite(text, len, no_value, NULL, &clen, err, sizeof err);
	if (!clean)
		return 0; /* none to take out */
	(void)unlinkat(wdir, sn, 0);
	_cleanup_close_ int fd = openat(wdir, sn, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (fchown(fd, st.st_uid, st.st_gid) < 0 || fchmod(fd, st.st_mode & 07777) < 0 ||
	    (r = write_all(fd, clean, clen)) < 0 || fsync(fd) < 0 ||
	    renameat(wdir, sn, sp->done, tn) < 0 || fsync(sp->done) < 0) {
		r = r < 0 ? r : -errno;
		(void)unlinkat(wdir, sn, 0);
		return r;
	}
	return 0;
}

int spool_finish_complete(struct spool *sp, int wdir, const char *name, bool regular,
			  const char *idbuf, unsigned gone)
{
	char p[512];
	if (regular) {
		/* Scratch first: once the claim is gone the name is free for
		 * the next task of that name, whose scratch this must not
		 * touch. A crash in between leaves a claim whose JSON exists,
		 * which recovery completes (WORKER §9). */
		spool_clean_scratch(wdir, name, gone);
		/* The result is durable: its reservation has done its work. */
		struct stat st;
		_cleanup_close_ int fd = open_regular(wdir, name);
		if (fd >= 0 && fstat(fd, &st) == 0)
			ids_release(sp, idbuf, &st, spool_claim_submitter(sp, name, fd, &st));
		if (unlinkat(wdir, name, 0) < 0)
			return -errno;
		int r = spool_scrub_task(sp, wdir, name, idbuf);
		if (r < 0)
			logmsg("%s: its env= values stay in done/%s.task: %s", idbuf, idbuf, strerror(-r));
		return 0;
	} else {
		struct stat st;
		if (fstatat(wdir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
			if (pathfmt(p, sizeof p, "%s.rejected", idbuf) < 0)
				return -ENAMETOOLONG;
			if (renameat(wdir, name, sp->done, p) < 0)
				return -errno;
		} else if (unlinkat(wdir, name, 0) < 0 && errno != ENOENT)
			return -errno;
	}
	spool_clean_scratch(wdir, name, 0);
	return 0;
}

int spool_finish(struct spool *sp, int wdir, const char *name, bool regular,
		 struct result *res, char *idbuf, size_t idlen)
{
	int r = spool_finish_stage(sp, wdir, name, regular, res, idbuf, idlen, NULL);
	if (r < 0)
		return r;
	if (fsync(sp->done) < 0)
		return -errno;
	struct tally_row row;
	tally_row_of(res, &row);
	/* Only a plain claim is opened for its mark: another (a hard link
	 * to a file elsewhere, a FIFO) is not ours to open. */
	spool_tally_add(sp, wdir, regular ? name : NULL, idbuf, &row);
	return spool_finish_complete(sp, wdir, name, regular, idbuf, 0);
}

int spool_finish_unrun(struct spool *sp, int wdir, const char *name, const char *status,
		       const char *error, const char *worker, char *idbuf, size_t idlen)
{
	struct result res;
	struct stat st;
	char user[256];
	char safe_id[TASK_NAME_MAX + 1];
	struct claim_meta m = {.attempt = 1};
	struct task_spec spec;
	bool regular = false;

	result_init(&res);
	task_spec_init(&spec);
	if (fstatat(wdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	regular = S_ISREG(st.st_mode) && st.st_nlink == 1;
	/* Its submitter: the record of the worker's file; else whoever's
	 * drop it came from (USER:), even when the file is another's (a
	 * rejected drop is the dropper's); else its owner. */
	uid_t by = spool_reader(sp, name, st.st_uid);
	if (regular) {
		_cleanup_close_ int fd = open_regular(wdir, name);
		if (fd >= 0)
			by = spool_claim_submitter(sp, name, fd, &st);
		if (fd >= 0) {
			(void)claim_meta_get(fd, name, &m);
			/* Best effort: lane and name= for the record. */
			char buf[4096], e[64];
			ssize_t n = read_upto(fd, buf, sizeof buf);
			if (n > 0 && task_parse(buf, (size_t)n, &spec, e, sizeof e) < 0)
				task_spec_init(&spec);
		}
	}
	spool_id_from_bytes(name, safe_id, sizeof safe_id);
	res.id = safe_id;
	res.name = spec.name[0] ? spec.name : name;
	res.status = status;
	res.error = error;
	res.worker = worker;
	res.lane = lane_name(spec.lane);
	res.attempt = m.attempt;
	res.submitted_ms = m.submitted_ms ? m.submitted_ms : ctime_ms(&st);
	res.finished_ms = now_realtime_ms();
	res.backend = "none";
	fill_user(&res, by, user, sizeof user);
	return spool_finish(sp, wdir, name, regular, &res, idbuf, idlen);
}

int spool_requeue(struct spool *sp, int wdir, const char *name, const struct claim_meta *m0)
{
	struct claim_meta m = *m0;
	struct stat st;
	if (fstatat(wdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (S_ISREG(st.st_mode) && st.st_nlink == 1) {
		_cleanup_close_ int fd = open_regular(wdir, name);
		if (fd < 0)
			return -errno;
		m.id[0] = '\0';
		m.run[0] = '\0'; /* the next attempt is a run of its own */
		int r = claim_meta_set(fd, &m);
		if (r < 0 && r != -ENOTSUP)
			return r;
		if (fsync(fd) < 0)
			return -errno;
	}
	char dst[TASK_NAME_MAX + 16];
	for (int n = 1; n < 1000; n++) {
		if (next_id(name, n, dst, sizeof dst) < 0)
			return -ENAMETOOLONG;
		if (renameat2(wdir, name, sp->new, dst, RENAME_NOREPLACE) == 0) {
			spool_clean_scratch(wdir, name, 0);
			return fsync(sp->new) < 0 ? -errno : 0;
		}
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

int spool_retry(struct spool *sp, int wdir, const char *name, struct claim_meta *m,
		const struct attempt_rec *a, int64_t not_before_ms, uid_t reader)
{
	char dir[512], p[512], q[512], id[TASK_NAME_MAX + 16];
	int r;
	/* Set up front: the exits below jump past where they are filled. */
	_cleanup_free_ char *text = NULL;
	_cleanup_close_ int jfd = -1, dfd = -1;
	char *path[2] = {NULL, NULL};
	_cleanup_close_ int fd = open_regular(wdir, name);
	if (fd < 0)
		return -errno;
	m->run[0] = '\0'; /* the next attempt is a run of its own */
	if (!m->hold[0]) {
		/* Reserve the final result's id: done/ID.attempts/ counts as
		 * taken for every finisher and kart submit (done_has). Made
		 * first and recorded next: a crash between leaves a directory
		 * nobody holds (spool-layout APPENDIX §3), never a hold of nothing. */
		for (int n = 1;; n++) {
			if ((r = next_id(name, n, id, sizeof id)) < 0 ||
			    (r = pathfmt(dir, sizeof dir, "%s.attempts", id)) < 0)
				return r;
			if (done_has(sp, id))
				continue;
			if (mkdirat(sp->done, dir, 0755) == 0)
				break;
			if (errno != EEXIST)
				return -errno;
		}
		if (fsync(sp->done) < 0)
			return -errno;
		snprintf(m->hold, sizeof m->hold, "%s", id);
		if ((r = claim_meta_set(fd, m)) < 0)
			return r;
	}
	if ((r = pathfmt(dir, sizeof dir, "%s.attempts", m->hold)) < 0)
		return r;
	dfd = openat(sp->done, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	/* The outputs, durable before the record that names them. */
	static const enum scratch_file sfx[] = {SCRATCH_STDOUT, SCRATCH_STDERR};
	uint64_t bytes[2] = {0, 0};
	for (int i = 0; i < 2; i++) {
		if (spool_name_scratch(p, sizeof p, name, sfx[i]) < 0 ||
		    pathfmt(q, sizeof q, "%d.%s", a->attempt, spool_scratch_suffix[sfx[i]]) < 0)
			goto toolong;
		_cleanup_close_ int ofd = openat(wdir, p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (ofd < 0 && errno == ENOENT)
			continue; /* it wrote nothing there */
		if (ofd < 0 || fstat(ofd, &st) < 0 || fsync(ofd) < 0 || renameat(wdir, p, dfd, q) < 0) {
			r = -errno;
			goto out;
		}
		bytes[i] = (uint64_t)st.st_size;
		path[i] = xasprintf("done/%s/%s", dir, q);
	}
	json_t *o = attempt_json(a, path[0], bytes[0], path[1], bytes[1]);
	text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!text || pathfmt(p, sizeof p, ".%d.json.tmp", a->attempt) < 0 ||
	    pathfmt(q, sizeof q, "%d.json", a->attempt) < 0)
		goto toolong;
	(void)unlinkat(dfd, p, 0);
	jfd = openat(dfd, p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (jfd < 0) {
		r = -errno;
		goto out;
	}
	if ((r = grant_read(jfd, reader, false)) < 0 || (r = write_all(jfd, text, strlen(text))) < 0)
		goto out;
	if (fsync(jfd) < 0 || renameat(dfd, p, dfd, q) < 0 || fsync(dfd) < 0) {
		r = -errno;
		goto out;
	}
	m->attempt = a->attempt + 1;
	m->not_before_ms = not_before_ms;
	r = spool_requeue(sp, wdir, name, m);
	goto out;
toolong:
	r = -ENAMETOOLONG;
out:
	free(path[0]);
	free(path[1]);
	return r;
}
