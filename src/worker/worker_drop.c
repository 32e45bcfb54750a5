/* worker_drop.c - drop/: a shared spool's per-user drop directories, moved
 * into new/. */
#define _GNU_SOURCE
#include <fcntl.h>
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

/* Reject a drop entry: claimed straight from the drop directory into our
 * claim directory (it never passes through new/), then given its result. */
static void drop_reject(struct worker *w, int dirfd, const char *name, const char *claim,
			const char *why)
{
	if (renameat2(dirfd, name, w->wdir, claim, RENAME_NOREPLACE) < 0) {
		if (errno != ENOENT)
			logmsg("%s: cannot claim for rejection: %s", claim, strerror(errno));
		return;
	}
	finish_unrun(w, claim, "rejected", why);
}

/* new/.hoist.UID.USER:NAME: check what arrived, then give it its name. */
void hoist_finish(struct worker *w, const char *dot)
{
	char *end;
	errno = 0;
	unsigned long uid = strtoul(dot + 7, &end, 10);
	if (errno || end == dot + 7 || *end != '.' || !end[1])
		return;
	const char *final = end + 1;
	struct stat st;
	if (fstatat(w->sp->new, dot, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return; /* another worker finished it */
	if (!S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_uid != (uid_t)uid || (st.st_mode & 022)) {
		char why[256];
		snprintf(why, sizeof why,
			 "the file that arrived from the drop directory of uid %lu is not a regular file "
			 "of that uid with one link, writable by its owner alone", uid);
		drop_reject(w, w->sp->new, dot, final, why);
		return;
	}
	/* The spool's record (attempt, submitted) starts here: whatever
	 * user.kart the submitter set on their file before dropping it is
	 * not ours, and goes (issue 26: a forged attempt and submitted_at). */
	int fd = openat(w->sp->new, dot, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd >= 0) {
		struct stat fst;
		if (fstat(fd, &fst) == 0 && fst.st_ino == st.st_ino && fst.st_dev == st.st_dev &&
		    fremovexattr(fd, KART_XATTR) < 0 && errno != ENODATA && errno != ENOTSUP)
			logmsg("%s: cannot remove the submitter's %s: %s", final, KART_XATTR, strerror(errno));
		close(fd);
	}
	char dst[TASK_NAME_MAX + 16];
	for (int n = 1; n < 1000; n++) {
		if ((n == 1 ? pathfmt(dst, sizeof dst, "%s", final)
			    : pathfmt(dst, sizeof dst, "%s.%d", final, n)) < 0)
			break;
		if (renameat2(w->sp->new, dot, w->sp->new, dst, RENAME_NOREPLACE) == 0)
			return; /* its IN_MOVED_TO brings it to consider() */
		if (errno != EEXIST)
			break;
	}
	if (errno != ENOENT)
		drop_reject(w, w->sp->new, dot, final, "no free name in new/ for it");
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
		drop_reject(w, d->fd, name, final, why);
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
