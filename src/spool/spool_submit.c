/* spool_submit.c - publishing a task (spool-layout README §5),
 * reserving its id in ids/, the drop directories of a shared spool (§6)
 * and the look-ups of after= (WORKER §3). Every rename here has a row in
 * spool-layout/APPENDIX.md's crash-state tables. */
#define _GNU_SOURCE
#include "spool_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "task.h"
#include "util.h"


bool spool_id_taken(struct spool *sp, const char *id)
{
	/* Look in the order tasks move (new, cur, done), so that one moving
	 * while we look is seen in at least one place. A held task is
	 * queued under its dot name and comes back under its id. */
	char held[TASK_NAME_MAX + 16];
	if (exists_at(sp->new, id) ||
	    (spool_held_name(id, held, sizeof held) == 0 && exists_at(sp->new, held)))
		return true;
	_cleanup_close_ int cfd = openat(sp->cur, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = cfd >= 0 ? fdopendir(steal_fd(&cfd)) : NULL;
	if (d) {
		struct dirent *de;
		bool found = false;
		while (!found && (de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			char p[512];
			if (pathfmt(p, sizeof p, "%s/%s", de->d_name, id) == 0 && exists_at(sp->cur, p))
				found = true;
		}
		closedir(d);
		if (found)
			return true;
	}
	return done_has(sp, id);
}

/* Reservations (spool-layout README §5). ids/ID is a
 * symbolic link that a submitter makes before it publishes, whose target
 * is the task file's inode number in decimal. symlink(2) is exclusive
 * (EEXIST) in every language, and its target is there the moment the
 * name is: no reader ever finds half a reservation. Nothing follows it. */
/* On a spool with drop/, ids/ is every member's to write: an entry for
 * USER:NAME made by anyone but USER (or root, or us), or one without a
 * prefix made by anyone but root (or us), reserves nothing. Else a
 * member's link at ids/alice:X moved alice's running X to X.2 at its
 * finish, where her kart wait X and her after=alice:X never found it. */
static bool id_user(const char *id, char *user, size_t n);
static bool ids_squat(const struct spool *sp, const char *id, uid_t by)
{
	char user[256];
	if (sp->drop < 0 || by == 0 || by == geteuid())
		return false;
	return !id_user(id, user, sizeof user) || spool_reader(sp, id, by) != by;
}

int spool_ids_state(struct spool *sp, const char *id, const struct stat *st, uid_t owner)
{
	char buf[32], *end;
	struct stat ls;
	if (sp->ids < 0)
		return IDS_NONE;
	if (fstatat(sp->ids, id, &ls, AT_SYMLINK_NOFOLLOW) == 0 && ids_squat(sp, id, ls.st_uid))
		return IDS_NONE;
	ssize_t n = readlinkat(sp->ids, id, buf, sizeof buf - 1);
	if (n < 0)
		/* Too long to be a name there: nobody could reserve it. Any
		 * other entry (EINVAL: not a link) still holds the id. */
		return errno == ENOENT || errno == ENAMETOOLONG ? IDS_NONE : IDS_OTHER;
	buf[n] = '\0';
	if (!st || n == 0 || buf[strspn(buf, "0123456789")] != '\0')
		return IDS_OTHER;
	errno = 0;
	unsigned long long ino = strtoull(buf, &end, 10);
	/* Made by the task's submitter: no one reserves an id for another's
	 * task (on a shared spool ids are USER:NAME in any case). */
	if (errno || ino != (unsigned long long)st->st_ino ||
	    fstatat(sp->ids, id, &ls, AT_SYMLINK_NOFOLLOW) < 0 || ls.st_uid != owner)
		return IDS_OTHER;
	return IDS_MINE;
}

int spool_reserved_id(struct spool *sp, const char *name, const struct stat *st, uid_t owner,
		      char *out, size_t outlen)
{
	char cand[512];
	if (sp->ids < 0 || pathfmt(cand, sizeof cand, "%s", name) < 0)
		return 0;
	/* A re-queue that found new/NAME taken put it back as NAME.2 (and
	 * a move from drop/ as USER:NAME.2): its reservation is NAME's. */
	for (;;) {
		if (spool_ids_state(sp, cand, st, owner) == IDS_MINE)
			return pathfmt(out, outlen, "%s", cand) < 0 ? 0 : 1;
		char *dot = strrchr(cand, '.');
		if (!dot || dot == cand || !dot[1] || dot[1 + strspn(dot + 1, "0123456789")] != '\0')
			return 0;
		*dot = '\0';
	}
}

/* Remove ids/ID once the result it promised is durable, if it is the
 * reservation of this file (st). */
void ids_release(struct spool *sp, const char *id, const struct stat *st, uid_t owner)
{
	if (spool_ids_state(sp, id, st, owner) == IDS_MINE)
		(void)unlinkat(sp->ids, id, 0);
}

/* ---- after=: where an upstream without a result is ---- */

/* 1 with *owner (its submitter: the record of the worker's copy, else
 * its owner) when the entry is there, 0 when it is not, -errno when it
 * cannot be told (the caller must not call that "absent"). */
static int owner_at(int dirfd, const char *name, uid_t *owner)
{
	struct stat st;
	if (dirfd < 0)
		return 0;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT || errno == ENAMETOOLONG ? 0 : -errno;
	*owner = st.st_uid;
	if (S_ISREG(st.st_mode) && (st.st_uid == 0 || st.st_uid == geteuid())) {
		_cleanup_close_ int fd = open_regular(dirfd, name);
		struct stat fst;
		struct submitter by;
		if (fd >= 0 && fstat(fd, &fst) == 0 && same_inode(&fst, &st)) {
			spool_submitter(fd, &fst, &by);
			*owner = by.uid;
		}
	}
	return 1;
}

int spool_id_pending(struct spool *sp, const char *id, uid_t uid, uid_t *owner)
{
	char p[512];
	int r;
	/* In the order tasks move: drop/USER/NAME, new/.hoist.UID.ID (only
	 * uid's can be of interest: another's is not to be named anyway),
	 * new/ID, cur/W/ID. */
	const char *colon = sp->drop >= 0 ? strchr(id, ':') : NULL;
	if (colon && colon > id && pathfmt(p, sizeof p, "%.*s/%s", (int)(colon - id), id, colon + 1) == 0 &&
	    (r = owner_at(sp->drop, p, owner)) != 0)
		return r;
	if (colon && spool_name_hoist(p, sizeof p, (unsigned)uid, id) == 0 &&
	    owner_at(sp->new, p, owner) > 0)
		return 1;
	if ((r = owner_at(sp->new, id, owner)) != 0)
		return r;
	_cleanup_close_ int cfd = openat(sp->cur, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = cfd >= 0 ? fdopendir(steal_fd(&cfd)) : NULL;
	if (!d)
		return -errno;
	struct dirent *de;
	r = 0;
	while (r == 0 && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue; /* a worker being born holds no claim */
		if (pathfmt(p, sizeof p, "%s/%s", de->d_name, id) == 0)
			r = owner_at(sp->cur, p, owner);
	}
	closedir(d);
	return r;
}

/* With a drop directory, the name there is base.N and the id is the
 * prefix and that name: both must be free, looked for in the order a
 * drop moves (drop/USER/, new/.hoist.UID.ID, then as any id). */
static bool drop_taken(struct spool *sp, const char *name)
{
	char id[TASK_NAME_MAX + 80], hoist[NAME_MAX + 1];
	if (pathfmt(id, sizeof id, "%s%s", sp->idprefix, name) < 0)
		return true;
	return exists_at(sp->dropd, name) ||
	       (spool_name_hoist(hoist, sizeof hoist, (unsigned)geteuid(), id) == 0 &&
		exists_at(sp->new, hoist)) ||
	       spool_id_taken(sp, id);
}

int spool_pick_id(struct spool *sp, const char *base, char *out, size_t outlen)
{
	size_t pl = sp->dropd >= 0 ? strlen(sp->idprefix) : 0;
	char name[TASK_NAME_MAX + 16];
	for (int n = 1; n < 1000000; n++) {
		int r = next_id(base, n, name, sizeof name);
		if (r < 0)
			return r;
		if (strlen(name) + pl > TASK_NAME_MAX)
			return -ENAMETOOLONG; /* a worker would reject it */
		if (pl ? drop_taken(sp, name) : spool_id_taken(sp, name))
			continue;
		return pathfmt(out, outlen, "%s%s", pl ? sp->idprefix : "", name);
	}
	return -EEXIST;
}

bool spool_drop_name_ok(const char *name, uid_t uid)
{
	char num[24];
	snprintf(num, sizeof num, "%u", (unsigned)uid);
	if (strcmp(name, num) == 0)
		return true;
	char acct[256];
	return uid_name(uid, acct, sizeof acct) && strcmp(acct, name) == 0;
}

/* The USER of an id USER:NAME into user: false when it has no such
 * prefix (or one too long for user). */
static bool id_user(const char *id, char *user, size_t n)
{
	const char *colon = strchr(id, ':');
	if (!colon || colon == id || (size_t)(colon - id) >= n)
		return false;
	memcpy(user, id, (size_t)(colon - id));
	user[colon - id] = '\0';
	return true;
}

/* The uid of the account named user: false if there is none. */
static bool user_uid(const char *user, uid_t *uid)
{
	struct passwd p, *pp = NULL;
	char buf[4096];
	if (getpwnam_r(user, &p, buf, sizeof buf, &pp) != 0 || !pp)
		return false;
	*uid = pp->pw_uid;
	return true;
}

uid_t spool_reader(const struct spool *sp, const char *id, uid_t owner)
{
	char user[256];
	uid_t uid;
	if (sp->drop < 0 || !id_user(id, user, sizeof user))
		return owner;
	if (user_uid(user, &uid))
		return uid;
	char *end;
	unsigned long v = strtoul(user, &end, 10);
	return *end == '\0' && end != user ? (uid_t)v : owner;
}

bool spool_prefix_owner_ok(const char *name, uid_t owner)
{
	char user[256];
	uid_t uid;
	if (!id_user(name, user, sizeof user))
		return true;
	if (spool_drop_name_ok(user, owner))
		return true;
	/* Not the owner's: wrong only if the prefix names someone. */
	if (user_uid(user, &uid))
		return false;
	return user[strspn(user, "0123456789")] != '\0';
}

char *spool_own_id(const struct spool *sp, const char *id)
{
	uid_t me = geteuid();
	if (sp->drop < 0 || me == 0 || strchr(id, ':'))
		return xstrdup(id);
	char acct[256], out[TASK_NAME_MAX + 80];
	if (uid_name(me, acct, sizeof acct))
		snprintf(out, sizeof out, "%s:%s", acct, id);
	else
		snprintf(out, sizeof out, "%u:%s", (unsigned)me, id);
	return xstrdup(out);
}

int spool_use_drop(struct spool *sp, char *err, size_t errlen)
{
	struct stat st;
	uid_t me = geteuid();
	if (fstat(sp->new, &st) < 0)
		return ERR(-1, "%s/new: %s", sp->path, strerror(errno));
	if (st.st_uid == me && !(st.st_mode & 022))
		return 0; /* our own single-writer new/: the file's owner is who put it there */
	if (sp->drop < 0) {
		if (st.st_mode & 022)
			return ERR(-1, "%s/new is writable by others than its owner and the spool has no "
				   "drop/: a worker rejects what is put there; ask the administrator to "
				   "apply kart.tmpfiles (drop/ 1770, new/ 0755)", sp->path);
		return 0; /* another's single-user spool: new/ decides (EACCES) */
	}
	char user[64];
	if (!uid_name(me, user, sizeof user) || strchr(user, '/') || user[0] == '.')
		snprintf(user, sizeof user, "%u", (unsigned)me);
	/* A squatter's directory under our name is moved away by a worker
	 * as soon as it sees it: wait a little for that. */
	for (int tries = 0;; tries++) {
		if (mkdirat(sp->drop, user, 0700) < 0 && errno != EEXIST)
			return ERR(-1, "%s/drop/%s: %s", sp->path, user, strerror(errno));
		int d = openat(sp->drop, user, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		/* EACCES: another user's 0700 directory under our name, a
		 * squat we cannot even open; a worker moves it as any other. */
		if (d < 0 && errno != ENOENT && errno != ENOTDIR && errno != ELOOP && errno != EACCES)
			return ERR(-1, "%s/drop/%s: %s", sp->path, user, strerror(errno));
		if (d >= 0 && fstat(d, &st) == 0 && st.st_uid == me) {
			/* Writable by us alone, or a worker trusts nothing in it. */
			if ((st.st_mode & 07777) != 0700 && fchmod(d, 0700) < 0) {
				int e = errno;
				close(d);
				return ERR(-1, "%s/drop/%s: chmod 0700: %s", sp->path, user, strerror(e));
			}
			sp->dropd = d;
			snprintf(sp->idprefix, sizeof sp->idprefix, "%s:", user);
			return 0;
		}
		if (d >= 0)
			close(d);
		if (tries >= 50 && d >= 0)
			return ERR(-1, "%s/drop/%s is not yours (owned by uid %u): a worker moves such a "
				   "directory away when it sees it; is a worker running?",
				   sp->path, user, (unsigned)st.st_uid);
		if (tries >= 50)
			return ERR(-1, "%s/drop/%s is not yours (you cannot open it): a worker moves such "
				   "a directory away when it sees it; is a worker running?", sp->path, user);
		usleep(100000);
	}
}

int spool_tmp_holds(struct spool *sp, dev_t dev, ino_t ino)
{
	DIR *dir = opendir_at(sp->tmp, ".");
	struct dirent *de;
	int found = 0;
	if (!dir)
		return -errno;
	/* fstatat, not d_ino: overlayfs may report other numbers there. A
	 * name that goes between readdir and fstatat (ENOENT) was not it
	 * for long: the caller's second fstat sees the link count drop. */
	errno = 0;
	while (!found && (de = readdir(dir))) {
		struct stat st;
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		found = fstatat(sp->tmp, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			st.st_dev == dev && st.st_ino == ino;
		errno = 0;
	}
	if (!found && errno)
		found = -errno;
	closedir(dir);
	return found;
}

/* The task as published: data, with `#kart: name=KEEP` after its #!
 * line (or first) when named; again: over what an earlier round wrote. */
static int write_task(int fd, const char *data, size_t len, const char *keep, bool named,
		      bool again)
{
	if (again && (ftruncate(fd, 0) < 0 || lseek(fd, 0, SEEK_SET) < 0))
		return -errno;
	if (!named)
		return write_all(fd, data, len);
	size_t split = 0;
	if (len >= 2 && data[0] == '#' && data[1] == '!') {
		const char *nl = memchr(data, '\n', len);
		split = nl ? (size_t)(nl - data) + 1 : len;
	}
	/* Escaped: a value ends at a space (spool-layout README §3). */
	char enc[3 * TASK_NAME_MAX + 1], line[sizeof enc + 32];
	if (pct_encode(keep, enc, sizeof enc) < 0)
		return -ENAMETOOLONG;
	int ll = snprintf(line, sizeof line, "%s#kart: name=%s\n",
			  split && data[split - 1] != '\n' ? "\n" : "", enc);
	int r = write_all(fd, data, split);
	if (r == 0)
		r = write_all(fd, line, (size_t)ll);
	if (r == 0)
		r = write_all(fd, data + split, len - split);
	return r;
}

/* The looks of a search for a free id: cur/'s worker directories are
 * read once (an id a task may be claimed under meanwhile is still looked
 * for afresh after its reservation, spool_id_taken). */
struct idsearch {
	struct spool *sp;
	const char *base;
	size_t pl; /* a drop directory's id prefix: its length, or 0 */
	struct strv workers;
	bool listed;
};

static void idsearch_free(struct idsearch *q) { strv_free(&q->workers); }

/* Does NAME.n (and its id) look taken: reserved, queued, claimed, done? */
static bool seen_taken(struct idsearch *q, int n)
{
	struct spool *sp = q->sp;
	char name[TASK_NAME_MAX + 16], id[TASK_NAME_MAX + 96], held[TASK_NAME_MAX + 24], p[512];
	if (next_id(q->base, n, name, sizeof name) < 0 ||
	    pathfmt(id, sizeof id, "%s%s", q->pl ? sp->idprefix : "", name) < 0)
		return true;
	if (q->pl && exists_at(sp->dropd, name))
		return true;
	/* A reservation counts here only if it is ours: ids/ is every
	 * member's to write, and another's squats would steer the steps
	 * below (a few dozen would end the search); the reservation itself
	 * still refuses a squatted id, one at a time. */
	struct stat st;
	if ((sp->ids >= 0 && fstatat(sp->ids, id, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_uid == geteuid()) ||
	    exists_at(sp->new, id) ||
	    (spool_held_name(id, held, sizeof held) == 0 && exists_at(sp->new, held)))
		return true;
	if (!q->listed)
		q->listed = dir_names(sp->cur, ".", &q->workers) == 0;
	for (size_t i = 0; i < q->workers.n; i++)
		if (q->workers.v[i][0] != '.' && pathfmt(p, sizeof p, "%s/%s", q->workers.v[i], id) == 0 &&
		    exists_at(sp->cur, p))
			return true;
	return done_has(sp, id);
}

/* NAME.n is taken: the next id that looks free after the run of taken
 * ids n is in, found by steps that double, then halve. A name submitted
 * a thousand times costs a few dozen looks, not a thousand (the ids of a
 * name are taken from the first on). A free id within the run (a result
 * kart gc removed) is passed over: the id is still one no task has. */
static int skip_taken(struct idsearch *q, int n)
{
	int lo = n, hi, step = 1;
	for (;;) {
		hi = lo + step;
		if (hi > 1000000)
			return n + 1; /* no end to the run in sight (planted?): one by one */
		if (!seen_taken(q, hi))
			break;
		lo = hi;
		step *= 2;
	}
	while (hi - lo > 1) {
		int mid = lo + (hi - lo) / 2;
		if (seen_taken(q, mid))
			lo = mid;
		else
			hi = mid;
	}
	return hi;
}

int spool_submit(struct spool *sp, const char *base, const void *data, size_t len,
		 const char *keep, char *id, size_t idlen)
{
	char tname[128], ino[32];
	uint64_t rnd = 0;
	struct stat st;
	if (getrandom(&rnd, sizeof rnd, 0) < 0)
		rnd = (uint64_t)now_mono_ms();
	snprintf(tname, sizeof tname, "%lld.%d.%016llx", (long long)now_realtime_ms(), getpid(),
		 (unsigned long long)rnd);
	/* Readable by its owner alone (and the root worker). */
	_cleanup_close_ int fd =
		openat(sp->tmp, tname, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		(void)unlinkat(sp->tmp, tname, 0);
		return -e;
	}
	/* The reservation names this inode: it is what the task will be. */
	snprintf(ino, sizeof ino, "%llu", (unsigned long long)st.st_ino);
	if (sp->ids < 0) {
		/* A spool made before ids/: ours to add where we may. */
		(void)mkdirat(sp->root, "ids", 0755);
		sp->ids = openat(sp->root, "ids", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	}
	int into = sp->dropd >= 0 ? sp->dropd : sp->new;
	size_t pl = sp->dropd >= 0 ? strlen(sp->idprefix) : 0;
	char name[TASK_NAME_MAX + 16];
	int r = 0, written = -1; /* what fd holds: -1 nothing, 0 data, 1 data with name= */
	bool reserved = false, published = false;
	__attribute__((cleanup(idsearch_free))) struct idsearch q = {.sp = sp, .base = base, .pl = pl};
	for (int n = 1; n < 1000000; n = skip_taken(&q, n)) {
		r = next_id(base, n, name, sizeof name);
		if (r == 0 && strlen(name) + pl > TASK_NAME_MAX)
			r = -ENAMETOOLONG;
		if (r == 0)
			r = pathfmt(id, idlen, "%s%s", pl ? sp->idprefix : "", name);
		if (r < 0)
			break;
		/* Reserve the id first (README §5): a symlink ids/ID -> INO,
		 * which fails with EEXIST when anyone holds it. */
		reserved = false;
		if (sp->ids >= 0) {
			/* Reserved first, without a look: a symlink (and an
			 * unlink if the id is taken) costs less than one. The
			 * look after the reservation is the one that counts. */
			if (symlinkat(ino, sp->ids, id) == 0)
				reserved = true;
			else if (errno == EEXIST)
				continue;
			else if (errno != EACCES && errno != EPERM) {
				r = -errno;
				break;
			}
			/* ids/ not ours to write: no reservation, as before it. */
		}
		/* Then look where a task of that id can be. A finisher links
		 * done/ID.task before it looks at ids/: either it sees our
		 * reservation and moves on, or we see its link here. */
		if (pl ? drop_taken(sp, name) : spool_id_taken(sp, id)) {
			if (reserved)
				(void)unlinkat(sp->ids, id, 0);
			reserved = false;
			continue;
		}
		/* The file's content waits for its id: name= only when the id
		 * is not the name to keep. */
		bool named = keep && strcmp(id, keep) != 0;
		if (written != (int)named) {
			r = write_task(fd, data, len, keep, named, written >= 0);
			if (r == 0 && fsync(fd) < 0)
				r = -errno;
			if (r < 0)
				break;
			written = named;
		}
		/* The reservation is on disk before the task can be. */
		if (reserved && fsync(sp->ids) < 0) {
			r = -errno;
			break;
		}
		/* kart submit --hold: queued under the held name, which no
		 * worker claims, until kart release. */
		char held[TASK_NAME_MAX + 24];
		const char *dst = name;
		if (sp->hold && !pl) {
			if ((r = spool_held_name(name, held, sizeof held)) < 0)
				break;
			dst = held;
		}
		if (renameat2(sp->tmp, tname, into, dst, RENAME_NOREPLACE) == 0) {
			published = true;
			break;
		}
		if (errno == EEXIST)
			goto next;
		if (errno != EINVAL && errno != ENOSYS) {
			r = -errno;
			break;
		}
		/* No RENAME_NOREPLACE on this filesystem. link() would leave
		 * the task with two links until the unlink, busy to a worker,
		 * and for ever after a crash in between; check, then rename
		 * (the id was just seen free). */
		if (exists_at(into, dst))
			goto next;
		if (renameat(sp->tmp, tname, into, dst) == 0) {
			published = true;
			break;
		}
		r = -errno;
		break;
	next:
		/* A task copied in under that name meanwhile: it keeps it. */
		if (reserved)
			(void)unlinkat(sp->ids, id, 0);
		reserved = false;
	}
	if (r == 0 && !published)
		r = -EEXIST; /* no free id in a million */
	if (r < 0) {
		if (reserved)
			(void)unlinkat(sp->ids, id, 0);
		(void)unlinkat(sp->tmp, tname, 0);
		return r;
	}
	if (fsync(into) < 0)
		return -errno; /* published, but not known durable: say so */
	return 0;
}

/* The id's reservation names the task file's inode (spool-layout README
 * §8), and the edited task is a new file: if ids/ID is owner's
 * reservation of old, it follows, replaced in one rename (a new link
 * under a dot name, then over ids/ID), owned by owner (the task's
 * submitter), or the finisher would give the edited task another id than
 * the one its submitter was told. */
static void ids_follow(struct spool *sp, const char *name, const struct stat *old,
		       const struct stat *now, uid_t owner)
{
	char tmp[64], ino[32], id[TASK_NAME_MAX + 1];
	const char *queued = spool_held_id(name);
	if (sp->ids < 0)
		return;
	/* Its id may be its name's base: a re-queue onto a taken name made
	 * it ID.2 (README §7). */
	if (spool_reserved_id(sp, queued ? queued : name, old, owner, id, sizeof id) != 1)
		return;
	snprintf(ino, sizeof ino, "%llu", (unsigned long long)now->st_ino);
	snprintf(tmp, sizeof tmp, ".follow.%d.%llu", getpid(), (unsigned long long)now->st_ino);
	if (symlinkat(ino, sp->ids, tmp) < 0)
		return;
	if ((geteuid() != owner && fchownat(sp->ids, tmp, owner, (gid_t)-1, AT_SYMLINK_NOFOLLOW) < 0) ||
	    renameat(sp->ids, tmp, sp->ids, id) < 0)
		(void)unlinkat(sp->ids, tmp, 0);
	else
		(void)fsync(sp->ids);
}

int spool_replace_queued(struct spool *sp, const char *staged, const char *name,
			 const struct stat *old, const struct stat *st, uid_t owner)
{
	struct stat now;
	int r;
	if (renameat2(sp->new, staged, sp->new, name, RENAME_EXCHANGE) < 0) {
		r = -errno;
		(void)unlinkat(sp->new, staged, 0);
		return r;
	}
	/* What came out must be what the caller read: else another edit
	 * went in between, and its file goes back. */
	if (fstatat(sp->new, staged, &now, AT_SYMLINK_NOFOLLOW) < 0 || !same_inode(old, &now)) {
		if (renameat2(sp->new, staged, sp->new, name, RENAME_EXCHANGE) == 0)
			(void)unlinkat(sp->new, staged, 0);
		return -ESTALE;
	}
	ids_follow(sp, name, old, st, owner);
	r = fsync(sp->new) < 0 ? -errno : 0;
	(void)unlinkat(sp->new, staged, 0);
	return r;
}
