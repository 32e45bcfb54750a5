/* worker_drop.c - drop/: a shared spool's per-user drop directories, moved
 * into new/. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/xattr.h>

#include "worker_int.h"

/* ---- drop/: the file's owner is who dropped it -----------------------------
 *
 * On a shared spool new/ is written by the workers alone, and each member
 * drops into drop/USER/, a directory that only USER can write (0700,
 * owned by USER). A file in it was put there by USER (or root), so it may
 * run as USER, if USER owns it and nobody else can write it. The worker
 * moves such a file into new/ as USER:NAME, in two renames: first to
 * new/.hoist.UID.USER:NAME, where nobody but the workers can touch it and
 * it is looked at again (the same checks, on what arrived), then to its
 * name. A crash between them leaves the dot name, which the next scan of
 * new/ by any worker finishes (the uid it must have is in the name). A
 * drop/ entry whose owner is not the user of its name is a squat: it is
 * moved into tmp/ (which kart gc empties), so it never blocks that user.
 * See spool-layout README §6 and WORKER §7. */

struct drop *drop_find(struct worker *w, const char *name, int wd)
{
	for (size_t i = 0; i < w->ndrops; i++)
		if (name ? strcmp(w->drops[i].name, name) == 0 : w->drops[i].wd == wd)
			return &w->drops[i];
	return NULL;
}

void drop_forget(struct worker *w, struct drop *d)
{
	(void)inotify_rm_watch(w->ino, d->wd);
	(void)close(d->fd);
	free(d->name);
	*d = w->drops[--w->ndrops];
}

/* A rejected drop set aside: an empty file of the worker's, readable
 * by its dropper, takes its place in cur/W/ (with empty, emptied first). */
static void drop_set_aside(struct worker *w, const char *claim, uid_t uid, bool empty)
{
	char e[NAME_MAX + 1];
	if (spool_name_hoist_copy(e, sizeof e, (unsigned)uid, claim) < 0)
		return;
	_cleanup_close_ int efd = openat(w->wdir, e, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	_cleanup_close_ int wfd = !empty ? -1 : openat(w->wdir, claim, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (wfd >= 0)
		(void)!ftruncate(wfd, 0);
	if (efd >= 0 && grant_read_acl(efd, uid) == 0 &&
	    renameat2(w->wdir, e, w->wdir, claim, RENAME_EXCHANGE) < 0)
		logmsg("%s: cannot set the rejected file aside from its dropper: %s", claim, strerror(errno));
	(void)unlinkat(w->wdir, e, 0);
}

/* A rejected drop of the dropper's own (uid) is kept in done/ as the
 * worker's: a member must not keep an object she can write, beyond her
 * share, in the worker's directories (issue 35). Owner first (then she
 * can change nothing more), then every attribute she set goes (a
 * record of hers, which root's file would make trusted, first of all),
 * mode 0600, readable by her through one ACL entry. A file she still
 * holds open for writing keeps nothing: emptied, its writer may go on
 * into a file of no name. One with another name is set aside, still
 * hers. A directory is closed at its top (what she holds a descriptor
 * into stays hers to write, out of every path). */
static void drop_disown(struct worker *w, const char *claim, uid_t uid, bool keep)
{
	struct stat st;
	if (fstatat(w->wdir, claim, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_uid != uid || uid == geteuid())
		return;
	/* Another name (hers, in tmp/ or her home) keeps it: it stays hers,
	 * counted as hers there, and out of the worker's directories. */
	if (S_ISREG(st.st_mode) && st.st_nlink != 1) {
		drop_set_aside(w, claim, uid, false);
		return;
	}
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
		if (fchownat(w->wdir, claim, geteuid(), getegid(), AT_SYMLINK_NOFOLLOW) < 0)
			logmsg("%s: cannot take the rejected entry from its dropper: %s", claim, strerror(errno));
		return;
	}
	_cleanup_close_ int fd = openat(w->wdir, claim, (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0) | O_RDONLY |
							    O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	struct stat fst;
	if (fd < 0 || fstat(fd, &fst) < 0 || fst.st_dev != st.st_dev || fst.st_ino != st.st_ino ||
	    fchown(fd, geteuid(), getegid()) < 0) {
		logmsg("%s: cannot take the rejected file from its dropper: %s", claim, strerror(errno));
		return;
	}
	int r = spool_strip_attrs(fd, false);
	if (r < 0)
		logmsg("%s: cannot remove its dropper's attributes: %s", claim, strerror(-r));
	if (fchmod(fd, S_ISDIR(st.st_mode) ? 0700 : 0600) < 0)
		logmsg("%s: chmod: %s", claim, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return;
	/* A name she gave it before the chown: root's now, its bytes go. */
	if (fstat(fd, &fst) == 0 && fst.st_nlink != 1)
		keep = false;
	(void)grant_read_acl(fd, uid);
	if (fcntl(fd, F_SETLEASE, F_RDLCK) == 0 || (errno != EAGAIN && errno != EBUSY)) {
		(void)fcntl(fd, F_SETLEASE, F_UNLCK);
		/* Past task_max it was never a task: its bytes are not kept. */
		_cleanup_close_ int wfd = keep && (uint64_t)fst.st_size <= w->pol->task_max_bytes ? -1
			: openat(w->wdir, claim, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (wfd >= 0)
			(void)!ftruncate(wfd, 0);
		return;
	}
	/* Still open for writing: set aside, emptied. */
	drop_set_aside(w, claim, uid, true);
}

/* Claimed into cur/W/ for rejection (the rename), then rejected: two
 * steps, so that the second, which writes the result and runs the
 * on_done hook, is done outside hoist_finish's lock. */
static bool drop_claim(struct worker *w, int dirfd, const char *name, const char *claim)
{
	if (renameat2(dirfd, name, w->wdir, claim, RENAME_NOREPLACE) < 0) {
		if (errno != ENOENT)
			logmsg("%s: cannot claim for rejection: %s", claim, strerror(errno));
		return false;
	}
	return true;
}

static void drop_rejected(struct worker *w, const char *claim, const char *why, uid_t uid, bool keep)
{
	drop_disown(w, claim, uid, keep);
	finish_unrun(w, claim, "rejected", why);
}

void drop_reject(struct worker *w, int dirfd, const char *name, const char *claim, const char *why,
		 uid_t uid, bool keep)
{
	if (drop_claim(w, dirfd, name, claim))
		drop_rejected(w, claim, why, uid, keep);
}

/* Make the member's file at new/DOT (fd, read-only; st its stat; uid
 * the dropper) the worker's, where it is: from then on it is a file
 * whose bytes, mode, attributes and name only workers can change, and
 * which records who dropped it (spool_task_record). The owner first,
 * then the mode and ACLs: after them she can change nothing more (a
 * write, a chmod, an attribute or an ACL is checked against the owner,
 * or write permission, at each call). What she opened for writing
 * before (a descriptor, a shared mapping) would still write: a read
 * lease shows any, and such a file is given back to her, to be rejected
 * as hers (drop_reject takes it again, and empties it).
 * No byte is copied and nothing needs an fsync: a crash leaves DOT
 * root's with or without the record, and the next look does this again.
 * 0; else -errno, the reason to reject it (-EFBIG over task_max,
 * -ETXTBSY open for writing, -EMLINK linked elsewhere, -EOPNOTSUPP no
 * ACLs). */
static int hoist_adopt(struct worker *w, const char *dot, int fd, const struct stat *st, uid_t uid)
{
	struct stat now;
	if (fchown(fd, geteuid(), getegid()) < 0)
		return -errno;
	/* Then no one else may open it for writing (she may have made it
	 * 0666, or given herself an ACL entry, since it was checked), and a
	 * record of hers, which root's file would make trusted, goes. */
	if (fchmod(fd, 0600) < 0 ||
	    (fremovexattr(fd, "system.posix_acl_access") < 0 && errno != ENODATA && errno != ENOTSUP &&
	     errno != EOPNOTSUPP) ||
	    (fremovexattr(fd, KART_XATTR_BY) < 0 && errno != ENODATA && errno != ENOTSUP))
		return -errno;
	if (fcntl(fd, F_SETLEASE, F_RDLCK) < 0 && (errno == EAGAIN || errno == EBUSY)) {
		(void)!fchown(fd, uid, (gid_t)-1);
		return -ETXTBSY;
	}
	(void)fcntl(fd, F_SETLEASE, F_UNLCK);
	if (fstat(fd, &now) < 0)
		return -errno;
	/* A name she gave it (in tmp/) while it was hers, which she could
	 * no longer give it now: its bytes go, outside her share. */
	if (now.st_nlink != 1) {
		struct stat ws;
		_cleanup_close_ int wfd = openat(w->sp->new, dot, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (wfd >= 0 && fstat(wfd, &ws) == 0 && ws.st_dev == now.st_dev && ws.st_ino == now.st_ino)
			(void)!ftruncate(wfd, 0);
		return -EMLINK;
	}
	if ((uint64_t)now.st_size > w->pol->task_max_bytes)
		return -EFBIG;
	struct claim_meta m = {.attempt = 1, .submitted_ms = now_realtime_ms()};
	return spool_task_record(fd, &m, uid, (unsigned long long)st->st_ino);
}

/* cur/.hoist, the lock every worker of the spool takes around
 * hoist_finish. Its rename out of the dot name is by name, after a look
 * through a descriptor: without the lock, a second worker (a scan of
 * new/ meets every dot name) could look at a file, stall, and then move
 * on another one: the next drop of the same name, hoisted under the
 * same dot name by the first worker after it had finished this one, and
 * not yet taken (still hers). While one worker holds the lock, the file
 * it looked at stays under the dot name (only hoist_finish moves it
 * away), so nothing new can be renamed there (RENAME_NOREPLACE). 0600
 * and the worker's: a lock that others could open, they could hold.
 * Only a rename into cur/W/ for a rejection is under it with the look;
 * the rejection's result and hook come after (drop_rejected). None
 * where drop/ is not looked at (no drop/, or a new/ others can write). */
void hoist_lock_open(struct worker *w)
{
	w->hoist_lock = -1;
	if (w->sp->drop < 0 || w->new_shared)
		return;
	int fd = openat(w->sp->cur, SPOOL_HOIST_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		die("cur/%s (the workers' lock of their moves from drop/): %s", SPOOL_HOIST_LOCK, strerror(errno));
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
		die("cur/%s (the workers' lock of their moves from drop/) is not a file of uid %u's alone, "
		    "mode 0600: remove it, and run every worker of the spool as one user",
		    SPOOL_HOIST_LOCK, (unsigned)geteuid());
	w->hoist_lock = fd;
}

/* A hoist that ended in a rejection: claimed under the lock, rejected
 * after it. */
struct hoist_reject {
	char claim[TASK_NAME_MAX * 2], why[300];
	uid_t uid;
};

static bool hoist_finish_locked(struct worker *w, const char *dot, struct hoist_reject *rj);

/* new/.hoist.UID.USER:NAME: check what arrived, make it the worker's
 * (hoist_adopt), then give it its name. A crash at any step leaves the
 * dot name: the member's file, or root's (adopted, maybe without its
 * record yet), which the next scan of new/ finishes here. One worker at
 * a time (hoist_lock_open). */
void hoist_finish(struct worker *w, const char *dot)
{
	struct hoist_reject rj;
	if (w->hoist_lock >= 0)
		while (flock(w->hoist_lock, LOCK_EX) < 0)
			if (errno != EINTR)
				die("flock cur/%s: %s", SPOOL_HOIST_LOCK, strerror(errno));
	bool rejected = hoist_finish_locked(w, dot, &rj);
	if (w->hoist_lock >= 0)
		(void)flock(w->hoist_lock, LOCK_UN);
	if (rejected)
		drop_rejected(w, rj.claim, rj.why, rj.uid, true);
}

/* Under the lock: true when the file was claimed for rejection (rj). */
static bool hoist_finish_locked(struct worker *w, const char *dot, struct hoist_reject *rj)
{
	char *end;
	errno = 0;
	unsigned long uid = strtoul(dot + 7, &end, 10);
	if (errno || end == dot + 7 || *end != '.' || !end[1])
		return false;
	const char *final = end + 1;
	char why[300] = "";
	struct stat st;
	if (fstatat(w->sp->new, dot, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return false; /* another worker finished it */
	_cleanup_close_ int fd = !S_ISREG(st.st_mode) ? -1
		: openat(w->sp->new, dot, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	struct stat fst;
	if (fd >= 0 && (fstat(fd, &fst) < 0 || fst.st_dev != st.st_dev || fst.st_ino != st.st_ino))
		return false; /* it moved: whoever moved it goes on */
	struct submitter by = {0};
	if (fd >= 0)
		spool_submitter(fd, &st, &by);
	/* Root's (or ours) under this name: adopted, perhaps cut short before
	 * its record (only a worker's rename from drop/UID/, after its
	 * checks, makes the name, and only a worker chowns it). */
	bool ours = fd >= 0 && (st.st_uid == 0 || st.st_uid == geteuid()) && (uid_t)uid != st.st_uid;
	if (by.recorded && by.uid != (uid_t)uid)
		snprintf(why, sizeof why, "the file from the drop directory of uid %lu records uid %u", uid,
			 (unsigned)by.uid);
	else if (!by.recorded && (fd < 0 || st.st_nlink != 1 || (!ours && (st.st_uid != (uid_t)uid || (st.st_mode & 022)))))
		snprintf(why, sizeof why,
			 "the file that arrived from the drop directory of uid %lu is not a regular file "
			 "of that uid with one link, writable by its owner alone", uid);
	else if (!by.recorded) {
		int r = hoist_adopt(w, dot, fd, &st, (uid_t)uid);
		if (r == -EFBIG)
			snprintf(why, sizeof why, "the task file is larger than the limit of %llu bytes",
				 (unsigned long long)w->pol->task_max_bytes);
		else if (r == -ETXTBSY)
			snprintf(why, sizeof why, "the file was opened for writing again while it was moved "
				 "from the drop directory: a task is published whole");
		else if (r == -EMLINK)
			snprintf(why, sizeof why, "the file was linked elsewhere while it was moved from the "
				 "drop directory: a task has one name; its content is not kept");
		else if (r == -EOPNOTSUPP)
			snprintf(why, sizeof why, "the spool's filesystem has no POSIX ACLs: the task could not "
				 "be made the worker's and readable by its submitter alone");
		else if (r < 0)
			snprintf(why, sizeof why, "the worker could not take the file for its own: %s",
				 strerror(-r));
	}
	if (why[0])
		goto reject;
	char dst[TASK_NAME_MAX + 16];
	for (int n = 1; n < 1000; n++) {
		if ((n == 1 ? pathfmt(dst, sizeof dst, "%s", final)
			    : pathfmt(dst, sizeof dst, "%s.%d", final, n)) < 0)
			break;
		if (renameat2(w->sp->new, dot, w->sp->new, dst, RENAME_NOREPLACE) == 0)
			return false; /* its IN_MOVED_TO brings it to consider() */
		if (errno != EEXIST)
			break;
	}
	if (errno == ENOENT)
		return false;
	snprintf(why, sizeof why, "no free name in new/ for it");
reject:
	snprintf(rj->claim, sizeof rj->claim, "%s", final);
	snprintf(rj->why, sizeof rj->why, "%s", why);
	rj->uid = (uid_t)uid;
	return drop_claim(w, w->sp->new, dot, final);
}

/* One entry of a drop directory: wait for its writer, reject it, or move
 * it into new/. */
static void drop_consider(struct worker *w, struct drop *d, const char *name, const char *key)
{
	enum kstate ks = strset_get(&w->known, key);
	struct inspect ins;
	task_inspect(d->fd, name, w->pol, &ins);
	if (ins.kind == INSPECT_REJECT && ins.nlink == 2)
		link_publish_look(w, d->fd, name, &ins);
	if (ins.kind == INSPECT_IGNORE)
		return;
	if (ins.kind == INSPECT_BUSY) {
		if (ks != K_BUSY) {
			strset_put(&w->known, key, K_BUSY);
			w->nbusy++;
		}
		w->busy.seen = true;
		return;
	}
	if (ks == K_BUSY) {
		strset_del(&w->known, key);
		w->nbusy--;
	}
	if (ins.kind == INSPECT_GONE)
		return;
	char final[TASK_NAME_MAX * 2], dot[NAME_MAX + 1], why[700] = "";
	struct stat dst;
	if (pathfmt(final, sizeof final, "%s:%s", d->name, name) < 0)
		snprintf(final, sizeof final, "%s:_", d->name);
	if (fstat(d->fd, &dst) < 0 || (dst.st_mode & 022))
		snprintf(why, sizeof why,
			 "drop/%s is writable by others than its owner, so who put this file there "
			 "cannot be known (chmod 700 drop/%s)", d->name, d->name);
	else if (ins.kind == INSPECT_REJECT)
		snprintf(why, sizeof why, "%s", ins.error);
	else if (ins.uid != d->uid)
		snprintf(why, sizeof why,
			 "the file is owned by uid %u, but it is in drop/%s, the drop directory of uid "
			 "%u: a task runs only as the user who dropped it into their own drop directory",
			 (unsigned)ins.uid, d->name, (unsigned)d->uid);
	else if (strlen(final) > TASK_NAME_MAX ||
		 pathfmt(dot, sizeof dot, ".hoist.%u.%s", (unsigned)d->uid, final) < 0)
		snprintf(why, sizeof why, "the name %s is longer than %d bytes", final, TASK_NAME_MAX);
	if (why[0]) {
		drop_reject(w, d->fd, name, final, why, d->uid, true);
		return;
	}
	if (renameat2(d->fd, name, w->sp->new, dot, RENAME_NOREPLACE) < 0) {
		if (errno != ENOENT)
			logmsg("drop/%s/%s: cannot move it into new/: %s", d->name, name, strerror(errno));
		return;
	}
	hoist_finish(w, dot);
}

void drop_key(struct worker *w, const char *key)
{
	const char *sl = strchr(key + 1, '/');
	char dname[NAME_MAX + 1];
	struct drop *d = NULL;
	if (sl && (size_t)(sl - key - 1) < sizeof dname) {
		memcpy(dname, key + 1, (size_t)(sl - key - 1));
		dname[sl - key - 1] = '\0';
		d = drop_find(w, dname, -1);
	}
	if (d) {
		drop_consider(w, d, sl + 1, key);
	} else if (strset_get(&w->known, key) == K_BUSY) {
		strset_del(&w->known, key);
		w->nbusy--;
	}
}

void drop_entry(struct worker *w, struct drop *d, const char *name)
{
	quota_note(w); /* its bytes, and its entries, count to its owner */
	/* kart hold, edit, pause ... of a user of a shared spool. */
	if (wctl_drop_entry(name)) {
		wctl_drop_request(w->sp, w->pol, w->id, w->wdir, d->fd, d->name, d->uid, name);
		return;
	}
	char key[NAME_MAX * 2 + 3];
	if (name[0] == '.' || pathfmt(key, sizeof key, "/%s/%s", d->name, name) < 0)
		return;
	drop_consider(w, d, name, key);
}

static void drop_scan(struct worker *w, struct drop *d)
{
	struct strv names = {0};
	if (dir_names(d->fd, ".", &names) < 0)
		return;
	for (size_t i = 0; i < names.n; i++)
		drop_entry(w, d, names.v[i]);
	strv_free(&names);
}

/* An entry of drop/ itself: a drop directory to watch, or a squat. */
void drop_seen(struct worker *w, const char *name)
{
	struct stat st;
	if (name[0] == '.')
		return;
	struct drop *d = drop_find(w, name, -1);
	if (fstatat(w->sp->drop, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (d)
			drop_forget(w, d);
		return;
	}
	if (d && d->dev == st.st_dev && d->ino == st.st_ino)
		return;
	if (d)
		drop_forget(w, d);
	if (!S_ISDIR(st.st_mode) || !spool_drop_name_ok(name, st.st_uid)) {
		/* Squatted, or not a directory: out of that user's way. */
		static unsigned seq;
		char to[64];
		snprintf(to, sizeof to, ".drop.%lld.%d.%u", (long long)now_realtime_ms(), getpid(), seq++);
		if (renameat2(w->sp->drop, name, w->sp->tmp, to, RENAME_NOREPLACE) == 0)
			logmsg("drop/%s: owned by uid %u, not by the user of that name (or not a "
			       "directory): moved to tmp/%s", name, (unsigned)st.st_uid, to);
		else if (errno != ENOENT)
			logmsg("drop/%s: owned by uid %u, not by the user of that name: cannot move it "
			       "away: %s", name, (unsigned)st.st_uid, strerror(errno));
		return;
	}
	int fd = openat(w->sp->drop, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat fst;
	if (fd < 0 || fstat(fd, &fst) < 0 || fst.st_dev != st.st_dev || fst.st_ino != st.st_ino) {
		if (fd >= 0)
			close(fd); /* it changed: the event of the change brings it back */
		return;
	}
	char p[64];
	snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
	int wd = inotify_add_watch(w->ino, p, IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE | IN_ONLYDIR |
					       IN_MOVE_SELF | IN_DELETE_SELF);
	if (wd < 0) {
		logmsg("drop/%s: inotify watch: %s", name, strerror(errno));
		close(fd);
		return;
	}
	w->drops = xrealloc(w->drops, (w->ndrops + 1) * sizeof *w->drops);
	d = &w->drops[w->ndrops++];
	*d = (struct drop){.wd = wd, .fd = fd, .uid = fst.st_uid, .dev = fst.st_dev,
			   .ino = fst.st_ino, .name = xstrdup(name)};
	drop_scan(w, d);
}

void scan_drops(struct worker *w)
{
	if (w->wd_drop < 0)
		return;
	struct strv names = {0};
	if (dir_names(w->sp->drop, ".", &names) < 0)
		return;
	for (size_t i = 0; i < names.n; i++)
		drop_seen(w, names.v[i]);
	strv_free(&names);
	for (size_t i = 0; i < w->ndrops; i++)
		drop_scan(w, &w->drops[i]);
}
