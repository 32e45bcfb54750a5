/* spool.c - the on-disk protocol. See spool-layout/README.md: every
 * rename here has a row in its crash-state table. */
#define _GNU_SOURCE
#include "spool.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/magic.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "policy.h"
#include "result.h"
#include "task.h"
#include "util.h"

#ifndef SMB2_MAGIC_NUMBER
#define SMB2_MAGIC_NUMBER 0xFE534D42
#endif
#ifndef CIFS_MAGIC_NUMBER
#define CIFS_MAGIC_NUMBER 0xFF534D42
#endif


static const char *const subdirs[] = {"tmp", "new", "cur", "done"};

const char *spool_fs_network(unsigned long f_type)
{
	f_type &= 0xffffffffUL;
	if (f_type == NFS_SUPER_MAGIC)
		return "NFS";
	if (f_type == SMB2_MAGIC_NUMBER)
		return "SMB";
	if (f_type == CIFS_MAGIC_NUMBER)
		return "CIFS";
	return NULL;
}

static int check_fs(const char *path, char *err, size_t errlen)
{
	struct statfs sf;
	if (statfs(path, &sf) < 0)
		return ERR(-1, "%s: %s", path, strerror(errno));
	if (spool_fs_network((unsigned long)sf.f_type))
		return ERR(-1, "%s: is on a network filesystem; rename() and flock() there do not "
			   "give the guarantees a spool needs; use a local filesystem",
			   path);
	return 0;
}

int spool_init(const char *path, char *err, size_t errlen)
{
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return ERR(-1, "%s: %s", path, strerror(errno));
	if (check_fs(path, err, errlen) < 0)
		return -1;
	_cleanup_close_ int root = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return ERR(-1, "%s: %s", path, strerror(errno));
	for (size_t i = 0; i < ARRAY_SIZE(subdirs); i++) {
		if (mkdirat(root, subdirs[i], 0755) < 0 && errno != EEXIST)
			return ERR(-1, "%s/%s: %s", path, subdirs[i], strerror(errno));
		struct stat st;
		if (fstatat(root, subdirs[i], &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
			return ERR(-1, "%s/%s: exists and is not a directory", path, subdirs[i]);
	}
	/* ids/: reservations (section 3.2); apart from subdirs, because a
	 * spool made before it existed still opens (without reservations). */
	if (mkdirat(root, "ids", 0755) < 0 && errno != EEXIST)
		return ERR(-1, "%s/ids: %s", path, strerror(errno));
	if (fsync(root) < 0)
		return ERR(-1, "%s: fsync: %s", path, strerror(errno));
	return 0;
}

int spool_open(const char *path, struct spool *sp, char *err, size_t errlen)
{
	memset(sp, 0, sizeof *sp);
	sp->root = sp->tmp = sp->new = sp->cur = sp->done = sp->drop = sp->dropd = sp->ids = -1;
	sp->root = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sp->root < 0 && errno == ENOENT)
		return ERR(-1, "%s: %s (no spool there yet: create one with 'kart -s %s init')", path,
			   strerror(errno), path);
	if (sp->root < 0)
		return ERR(-1, "%s: %s", path, strerror(errno));
	int *fds[] = {&sp->tmp, &sp->new, &sp->cur, &sp->done};
	for (size_t i = 0; i < ARRAY_SIZE(subdirs); i++) {
		*fds[i] = openat(sp->root, subdirs[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (*fds[i] < 0) {
			int e = errno;
			spool_close(sp);
			return ERR(-1, "%s/%s: %s (is this a spool? create one with 'kart init')", path,
				   subdirs[i], strerror(e));
		}
	}
	/* drop/ is optional: only a shared spool has it (kart.tmpfiles). */
	sp->drop = openat(sp->root, "drop", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	/* ids/ too: a spool made before reservations has none. */
	sp->ids = openat(sp->root, "ids", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	sp->path = xstrdup(path);
	return 0;
}

void spool_close(struct spool *sp)
{
	int *fds[] = {&sp->root, &sp->tmp, &sp->new, &sp->cur, &sp->done, &sp->drop, &sp->dropd, &sp->ids};
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		if (*fds[i] >= 0) {
			(void)close(*fds[i]);
			*fds[i] = -1;
		}
	free(sp->path);
	sp->path = NULL;
}

static bool exists_at(int dirfd, const char *name)
{
	struct stat st;
	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT;
}

/* A result, or the reservation of one (.task), under id. */
static bool done_has_result(struct spool *sp, const char *id)
{
	char p[512];
	if (pathfmt(p, sizeof p, "%s.task", id) < 0)
		return true;
	if (exists_at(sp->done, p))
		return true;
	if (pathfmt(p, sizeof p, "%s.json", id) < 0)
		return true;
	return exists_at(sp->done, p);
}

/* The same, or the earlier attempts of a task that holds id for its
 * final result (spool_retry). */
static bool done_has(struct spool *sp, const char *id)
{
	char p[512];
	if (done_has_result(sp, id))
		return true;
	return pathfmt(p, sizeof p, "%s.attempts", id) < 0 || exists_at(sp->done, p);
}

int spool_held_name(const char *id, char *buf, size_t len)
{
	return pathfmt(buf, len, ".held.%s", id);
}

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

/* Reservations (spool-layout/README.md section 3.2). ids/ID is a
 * symbolic link that a submitter makes before it publishes, whose target
 * is the task file's inode number in decimal. symlink(2) is exclusive
 * (EEXIST) in every language, and its target is there the moment the
 * name is: no reader ever finds half a reservation. Nothing follows it. */
int spool_ids_state(struct spool *sp, const char *id, const struct stat *st)
{
	char buf[32], *end;
	struct stat ls;
	if (sp->ids < 0)
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
	/* Made by the file's owner: no one reserves an id for another's
	 * task (on a shared spool ids are USER:NAME in any case). */
	if (errno || ino != (unsigned long long)st->st_ino ||
	    fstatat(sp->ids, id, &ls, AT_SYMLINK_NOFOLLOW) < 0 || ls.st_uid != st->st_uid)
		return IDS_OTHER;
	return IDS_MINE;
}

int spool_reserved_id(struct spool *sp, const char *name, const struct stat *st, char *out,
		      size_t outlen)
{
	char cand[512];
	if (sp->ids < 0 || pathfmt(cand, sizeof cand, "%s", name) < 0)
		return 0;
	/* A re-queue that found new/NAME taken put it back as NAME.2 (and
	 * a move from drop/ as USER:NAME.2): its reservation is NAME's. */
	for (;;) {
		if (spool_ids_state(sp, cand, st) == IDS_MINE)
			return pathfmt(out, outlen, "%s", cand) < 0 ? 0 : 1;
		char *dot = strrchr(cand, '.');
		if (!dot || dot == cand || !dot[1] || dot[1 + strspn(dot + 1, "0123456789")] != '\0')
			return 0;
		*dot = '\0';
	}
}

/* Remove ids/ID once the result it promised is durable, if it is the
 * reservation of this file (st). */
static void ids_release(struct spool *sp, const char *id, const struct stat *st)
{
	if (spool_ids_state(sp, id, st) == IDS_MINE)
		(void)unlinkat(sp->ids, id, 0);
}

/* ---- after=: where an upstream without a result is ---- */

/* 1 with *owner when the entry is there, 0 when it is not, -errno when
 * it cannot be told (the caller must not call that "absent"). */
static int owner_at(int dirfd, const char *name, uid_t *owner)
{
	struct stat st;
	if (dirfd < 0)
		return 0;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		*owner = st.st_uid;
		return 1;
	}
	return errno == ENOENT || errno == ENAMETOOLONG ? 0 : -errno;
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
	if (colon && pathfmt(p, sizeof p, ".hoist.%u.%s", (unsigned)uid, id) == 0 &&
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

static int next_id(const char *base, int n, char *out, size_t outlen)
{
	if (n <= 1)
		return pathfmt(out, outlen, "%s", base);
	return pathfmt(out, outlen, "%s.%d", base, n);
}

/* With a drop directory, the name there is base.N and the id is the
 * prefix and that name: both must be free. */
static bool drop_taken(struct spool *sp, const char *name)
{
	char id[TASK_NAME_MAX + 80];
	if (pathfmt(id, sizeof id, "%s%s", sp->idprefix, name) < 0)
		return true;
	return exists_at(sp->dropd, name) || spool_id_taken(sp, id);
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

bool spool_new_shared(const struct spool *sp)
{
	struct stat st;
	return fstat(sp->new, &st) < 0 || (st.st_mode & 022) != 0;
}

bool spool_drop_name_ok(const char *name, uid_t uid)
{
	char num[24];
	snprintf(num, sizeof num, "%u", (unsigned)uid);
	if (strcmp(name, num) == 0)
		return true;
	struct passwd p, *pp = NULL;
	char buf[4096];
	return getpwuid_r(uid, &p, buf, sizeof buf, &pp) == 0 && pp && strcmp(pp->pw_name, name) == 0;
}

uid_t spool_reader(const struct spool *sp, const char *id, uid_t owner)
{
	const char *colon = strchr(id, ':');
	char user[256];
	if (sp->drop < 0 || !colon || colon == id || (size_t)(colon - id) >= sizeof user)
		return owner;
	memcpy(user, id, (size_t)(colon - id));
	user[colon - id] = '\0';
	struct passwd p, *pp = NULL;
	char buf[4096];
	if (getpwnam_r(user, &p, buf, sizeof buf, &pp) == 0 && pp)
		return pp->pw_uid;
	char *end;
	unsigned long v = strtoul(user, &end, 10);
	return *end == '\0' && end != user ? (uid_t)v : owner;
}

bool spool_prefix_owner_ok(const char *name, uid_t owner)
{
	const char *colon = strchr(name, ':');
	char user[256];
	if (!colon || colon == name || (size_t)(colon - name) >= sizeof user)
		return true;
	memcpy(user, name, (size_t)(colon - name));
	user[colon - name] = '\0';
	if (spool_drop_name_ok(user, owner))
		return true;
	/* Not the owner's: wrong only if the prefix names someone. */
	struct passwd p, *pp = NULL;
	char buf[4096];
	if (getpwnam_r(user, &p, buf, sizeof buf, &pp) == 0 && pp)
		return false;
	return user[strspn(user, "0123456789")] != '\0';
}

char *spool_own_id(const struct spool *sp, const char *id)
{
	uid_t me = geteuid();
	if (sp->drop < 0 || me == 0 || strchr(id, ':'))
		return xstrdup(id);
	struct passwd p, *pp = NULL;
	char buf[4096], out[TASK_NAME_MAX + 80];
	if (getpwuid_r(me, &p, buf, sizeof buf, &pp) == 0 && pp)
		snprintf(out, sizeof out, "%s:%s", pp->pw_name, id);
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
	struct passwd p, *pp = NULL;
	char buf[4096];
	if (getpwuid_r(me, &p, buf, sizeof buf, &pp) == 0 && pp && strlen(pp->pw_name) < sizeof user &&
	    !strchr(pp->pw_name, '/') && pp->pw_name[0] != '.')
		snprintf(user, sizeof user, "%s", pp->pw_name);
	else
		snprintf(user, sizeof user, "%u", (unsigned)me);
	/* A squatter's directory under our name is moved away by a worker
	 * as soon as it sees it: wait a little for that. */
	for (int tries = 0;; tries++) {
		if (mkdirat(sp->drop, user, 0700) < 0 && errno != EEXIST)
			return ERR(-1, "%s/drop/%s: %s", sp->path, user, strerror(errno));
		int d = openat(sp->drop, user, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (d < 0 && errno != ENOENT && errno != ENOTDIR && errno != ELOOP)
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
		if (tries >= 50)
			return ERR(-1, "%s/drop/%s is not yours (owned by uid %u): a worker moves such a "
				   "directory away when it sees it; is a worker running?",
				   sp->path, user, d >= 0 ? (unsigned)st.st_uid : 0u);
		usleep(100000);
	}
}

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
	/* Escaped: a value ends at a space (section 3.1). */
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
	for (int n = 1; n < 1000000; n++) {
		r = next_id(base, n, name, sizeof name);
		if (r == 0 && strlen(name) + pl > TASK_NAME_MAX)
			r = -ENAMETOOLONG;
		if (r == 0)
			r = pathfmt(id, idlen, "%s%s", pl ? sp->idprefix : "", name);
		if (r < 0)
			break;
		/* Reserve the id first (section 3.2): a symlink ids/ID -> INO,
		 * which fails with EEXIST when anyone holds it. */
		reserved = false;
		if (sp->ids >= 0) {
			/* An id seen taken needs no reservation (a name reused a
			 * thousand times would cost two calls an id); the look
			 * after the reservation is the one that counts. */
			if (pl ? drop_taken(sp, name) : spool_id_taken(sp, id))
				continue;
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

/* A claim directory is born locked: made under a dot name (which peers
 * ignore), its .lock created and flocked, then renamed into place. A
 * peer that sees cur/<wid>/ therefore always finds it locked while its
 * worker lives. */
static int worker_dir_create(struct spool *sp, const char *wid, int *dout, int *lout)
{
	char tmp[512];
	*dout = *lout = -1;
	if (pathfmt(tmp, sizeof tmp, ".new.%s.%d", wid, getpid()) < 0)
		return -ENAMETOOLONG;
	(void)rm_rf_at(sp->cur, tmp);
	if (mkdirat(sp->cur, tmp, 0755) < 0)
		return -errno;
	_cleanup_close_ int d = openat(sp->cur, tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	/* 0600: a lock that others could open, they could also hold
	 * (flock LOCK_SH) past the worker's death, and so pin its claims as
	 * a live worker's. */
	_cleanup_close_ int l = d < 0 ? -1 : openat(d, ".lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	int r = 0;
	if (l < 0)
		r = -errno;
	else if (flock(l, LOCK_EX | LOCK_NB) < 0)
		r = -errno;
	else if (renameat2(sp->cur, tmp, sp->cur, wid, RENAME_NOREPLACE) < 0)
		r = errno == EEXIST || errno == ENOTEMPTY ? 0 : -errno;
	else {
		/* In place and locked: handed over still locked, so that no
		 * peer or gc ever sees it unlocked while we live. */
		*dout = steal_fd(&d);
		*lout = steal_fd(&l);
		return 0;
	}
	(void)rm_rf_at(sp->cur, tmp);
	return r;
}

int spool_worker_open(struct spool *sp, const char *wid, int *wdir, int *lockfd)
{
	const char *why;
	if (task_name_check(wid, &why) != 0)
		return -EINVAL;
	/* A peer may hold the lock for a moment to see whether we are alive,
	 * or be removing a dead namesake's directory: try for about 2 s. */
	for (int tries = 0; tries < 100; tries++) {
		if (tries)
			usleep(20000);
		_cleanup_close_ int d = openat(sp->cur, wid, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		_cleanup_close_ int l = -1;
		if (d < 0) {
			if (errno != ENOENT)
				return -errno;
			int r = worker_dir_create(sp, wid, &d, &l);
			if (r < 0)
				return r;
			if (d < 0)
				continue; /* a namesake's appeared meanwhile */
		} else
			/* O_RDWR: its close at death raises IN_CLOSE_WRITE for
			 * peers that watch it; their read-only probes do not. */
			l = openat(d, ".lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (l < 0) {
			if (errno == ENOENT)
				continue; /* the directory was just removed */
			return -errno;
		}
		if (flock(l, LOCK_EX | LOCK_NB) < 0) {
			if (errno != EWOULDBLOCK)
				return -errno;
			continue;
		}
		/* Ours only if both are still where a peer would look. */
		struct stat a, b, c, e;
		if (fstat(l, &a) < 0 || fstatat(d, ".lock", &b, AT_SYMLINK_NOFOLLOW) < 0 ||
		    a.st_ino != b.st_ino || fstat(d, &c) < 0 ||
		    fstatat(sp->cur, wid, &e, AT_SYMLINK_NOFOLLOW) < 0 || c.st_ino != e.st_ino)
			continue;
		(void)fchmod(l, 0600); /* one made 0644 by an older kart */
		*wdir = steal_fd(&d);
		*lockfd = steal_fd(&l);
		return 0;
	}
	return -EBUSY;
}

int spool_claim(struct spool *sp, int wdir, const char *name)
{
	if (renameat2(sp->new, name, wdir, name, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno == EINVAL) {
		/* No RENAME_NOREPLACE here: check, then rename. The claim
		 * directory is ours alone, so nobody races the check. */
		if (exists_at(wdir, name))
			return -EEXIST;
		if (renameat(sp->new, name, wdir, name) == 0)
			return 0;
	}
	return -errno;
}

int spool_claim_held(struct spool *sp, int wdir, const char *id)
{
	char held[TASK_NAME_MAX + 24];
	if (spool_held_name(id, held, sizeof held) < 0)
		return -ENAMETOOLONG;
	return renameat2(sp->new, held, wdir, id, RENAME_NOREPLACE) == 0 ? 0 : -errno;
}

void claim_meta_parse(const char *text, struct claim_meta *m)
{
	char buf[512];
	memset(m, 0, sizeof *m);
	m->attempt = 1;
	snprintf(buf, sizeof buf, "%s", text);
	char *save = NULL;
	for (char *t = strtok_r(buf, "\n", &save); t; t = strtok_r(NULL, "\n", &save)) {
		long long v;
		if (strncmp(t, "attempt=", 8) == 0 && parse_int(t + 8, 1, 1000000, &v) == 0)
			m->attempt = (int)v;
		else if (strncmp(t, "submitted=", 10) == 0 &&
			 parse_int(t + 10, 0, INT64_MAX, &v) == 0)
			m->submitted_ms = v;
		else if (strncmp(t, "id=", 3) == 0)
			snprintf(m->id, sizeof m->id, "%s", t + 3);
		else if (strncmp(t, "not_before=", 11) == 0 &&
			 parse_int(t + 11, 0, INT64_MAX, &v) == 0)
			m->not_before_ms = v;
		else if (strncmp(t, "hold=", 5) == 0)
			snprintf(m->hold, sizeof m->hold, "%s", t + 5);
	}
}

int claim_meta_get(int fd, struct claim_meta *m)
{
	char buf[512];
	memset(m, 0, sizeof *m);
	m->attempt = 1;
	ssize_t n = fgetxattr(fd, KART_XATTR, buf, sizeof buf - 1);
	if (n < 0)
		return errno == ENODATA ? 0 : -errno;
	buf[n] = '\0';
	claim_meta_parse(buf, m);
	return 0;
}

int claim_meta_set(int fd, const struct claim_meta *m)
{
	char buf[512];
	int n = snprintf(buf, sizeof buf, "attempt=%d\nsubmitted=%lld\nid=%s\n", m->attempt,
			 (long long)m->submitted_ms, m->id);
	/* Written only when set: a file never retried keeps the three lines. */
	if (n < (int)sizeof buf && m->not_before_ms)
		n += snprintf(buf + n, sizeof buf - (size_t)n, "not_before=%lld\n",
			      (long long)m->not_before_ms);
	if (n < (int)sizeof buf && m->hold[0])
		n += snprintf(buf + n, sizeof buf - (size_t)n, "hold=%s\n", m->hold);
	if (n >= (int)sizeof buf)
		return -ENAMETOOLONG;
	if (fsetxattr(fd, KART_XATTR, buf, (size_t)n, 0) < 0)
		return -errno;
	return 0;
}

static int open_regular(int dirfd, const char *name)
{
	return openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
}

void spool_clean_scratch(int wdir, const char *name, unsigned gone)
{
	/* What the caller may know gone, by kind: the rest is always tried. */
	static const unsigned known[SCRATCH_NFILES] = {
		[SCRATCH_STDOUT] = SCRATCH_RUN_GONE, [SCRATCH_STDERR] = SCRATCH_RUN_GONE,
		[SCRATCH_WORK] = SCRATCH_RUN_GONE,   [SCRATCH_TMP] = SCRATCH_RUN_GONE,
		[SCRATCH_OUT] = SCRATCH_OUT_GONE,
	};
	char p[512];
	for (int i = 0; i < SCRATCH_NFILES; i++)
		if (!(gone & known[i]) && spool_name_scratch(p, sizeof p, name, (enum scratch_file)i) == 0)
			(void)rm_rf_at(wdir, p);
}

/* Move every entry of the non-empty directory name (in root) up into
 * root under a fresh name, so that it is removed there: 1 if something
 * moved, 0 if nothing, or -errno. Two descriptors whatever the depth. */
static int hoist(int root, const char *name, unsigned long *seq)
{
	_cleanup_close_ int c = openat(root, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (c < 0)
		return errno == ENOENT ? 0 : -errno;
	DIR *dir = fdopendir(c);
	if (!dir)
		return -errno;
	c = -1;
	struct dirent *de;
	int r = 0;
	while ((de = readdir(dir))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		for (;;) {
			char to[32];
			snprintf(to, sizeof to, ".rm.%lu", (*seq)++);
			if (renameat2(dirfd(dir), de->d_name, root, to, RENAME_NOREPLACE) == 0) {
				r = r < 0 ? r : 1;
				break;
			}
			if (errno == EEXIST)
				continue;
			if (errno == EINVAL && faccessat(root, to, F_OK, AT_SYMLINK_NOFOLLOW) < 0 &&
			    renameat(dirfd(dir), de->d_name, root, to) == 0) {
				r = r < 0 ? r : 1; /* no RENAME_NOREPLACE here */
				break;
			}
			if (errno != ENOENT)
				r = -errno;
			break;
		}
	}
	closedir(dir);
	return r;
}

/* Iterative, with two descriptors at most: a deep tree (25,000 levels
 * once took a descriptor and a stack frame each, and could not be
 * removed) is flattened by moving each non-empty directory's entries up
 * into the top one, where they are removed in a later pass. Links are
 * never followed: a symlink is removed as a file. */
int rm_rf_at(int at, const char *name)
{
	if (unlinkat(at, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	if (unlinkat(at, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
		return 0;
	if (errno != ENOTEMPTY && errno != EEXIST)
		return -errno;
	_cleanup_close_ int d = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d < 0)
		return -errno;
	DIR *dir = fdopendir(d);
	if (!dir)
		return -errno;
	d = -1;
	const int root = dirfd(dir);
	unsigned long seq = 0;
	int r = 0;
	bool progress = true;
	/* Until a pass finds the directory empty, or changes nothing. */
	while (progress) {
		progress = false;
		r = 0;
		rewinddir(dir);
		struct dirent *de;
		while ((de = readdir(dir))) {
			const char *e = de->d_name;
			if (strcmp(e, ".") == 0 || strcmp(e, "..") == 0)
				continue;
			if (unlinkat(root, e, 0) == 0 || errno == ENOENT ||
			    ((errno == EISDIR || errno == EPERM) &&
			     (unlinkat(root, e, AT_REMOVEDIR) == 0 || errno == ENOENT))) {
				progress = true;
				continue;
			}
			if (errno != ENOTEMPTY && errno != EEXIST) {
				r = -errno;
				continue;
			}
			int h = hoist(root, e, &seq);
			if (h > 0)
				progress = true;
			else if (h < 0)
				r = h;
		}
	}
	closedir(dir);
	if (unlinkat(at, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return r < 0 ? r : -errno;
	return 0;
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
	*bytes = 0;
	uint64_t entries = 0;
	_cleanup_close_ int d = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d < 0)
		return errno == ENOENT ? 0 : -errno;
	return tree_walk(d, cap, bytes, &entries, TREE_ENTRIES_MAX, 0);
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
			int r = spool_result_grant(sp, fd, reader);
			if (r == 0)
				r = write_all(fd, json, strlen(json));
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
	if (pathfmt(tmpn, sizeof tmpn, ".%s.json.%d.tmp", id, getpid()) < 0)
		return -ENAMETOOLONG;
	int fd = openat(sp->done, tmpn, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 && errno == EEXIST) {
		/* Our own leftover from a crash (the name has our pid). */
		(void)unlinkat(sp->done, tmpn, 0);
		fd = openat(sp->done, tmpn, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	}
	if (fd < 0)
		return -errno;
	int r = spool_result_grant(sp, fd, reader);
	if (r == 0)
		r = write_all(fd, json, strlen(json));
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
static int write_result_json(struct spool *sp, const char *id, const char *json, bool redo,
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
	struct passwd pw, *pp = NULL;
	char pwbuf[1024];
	res->uid = uid;
	if (getpwuid_r(uid, &pw, pwbuf, sizeof pwbuf, &pp) == 0 && pp) {
		snprintf(buf, len, "%s", pp->pw_name);
		res->user = buf;
	}
}

/* Make an entry of done/ dirty again. After an fsync of done/ failed, the
 * kernel may have dropped the dirty state of what it failed to write, and
 * a second fsync would report success for it: so the entries of an
 * unfinished publish are written anew, and only the fsync that follows is
 * trusted. A file gets a second link, .NAME.redo, removed at once: its
 * own name never goes missing. A directory (ID.out/) is renamed to
 * .NAME.redo and back, and a crash in between is repaired here, by the
 * next redirty of the same name (a publish retry, or recovery). */
static int redirty(struct spool *sp, const char *name)
{
	char aside[512];
	struct stat st;
	if (pathfmt(aside, sizeof aside, ".%s.redo", name) < 0)
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
 * worker died has no record: `attempt` still counts it. */
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
		qsort(v, n, sizeof *v, attempt_cmp);
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

int spool_finish_stage(struct spool *sp, int wdir, const char *name, bool regular,
		       struct result *res, char *idbuf, size_t idlen, struct json_pending *pend)
{
	bool redo = false; /* an earlier attempt of this publish got this far */
	char p[512], q[512];
	char hold[256] = ""; /* the id its earlier attempts hold (spool_retry) */
	const char *base = res->id ? res->id : name;
	_cleanup_free_ char *base_copy = xstrdup(base);
	int r;

	if (regular) {
		_cleanup_close_ int fd = open_regular(wdir, name);
		if (fd < 0)
			return -errno;
		struct claim_meta m;
		struct stat cst, dst;
		if (fstat(fd, &cst) < 0)
			return -errno;
		(void)claim_meta_get(fd, &m);
		snprintf(hold, sizeof hold, "%s", m.hold);
		if (hold[0]) {
			free(base_copy);
			base_copy = xstrdup(hold);
		}
		/* A retry after a failed publish: the id is already ours. */
		if (m.id[0] && pathfmt(p, sizeof p, "%s.task", m.id) == 0 &&
		    fstatat(sp->done, p, &dst, AT_SYMLINK_NOFOLLOW) == 0 && dst.st_ino == cst.st_ino &&
		    dst.st_dev == cst.st_dev) {
			snprintf(idbuf, idlen, "%s", m.id);
			redo = true;
			if ((r = redirty(sp, p)) < 0)
				return r;
			goto reserved;
		}
		/* The id its submitter reserved, where there is one (section
		 * 3.2): the claim's name, or that name before a re-queue or a
		 * move from drop/ suffixed it. */
		char rid[TASK_NAME_MAX + 80];
		if (spool_reserved_id(sp, name, &cst, rid, sizeof rid) == 1) {
			free(base_copy);
			base_copy = xstrdup(rid);
		}
		/* Reserve the id with a second link to the task file, recorded
		 * on the file first, so recovery can tell a finish in progress
		 * from a run in progress. An id reserved in ids/ for another
		 * task is never taken. */
		for (int n = 1;; n++) {
			if (n > 1000000)
				return -EEXIST;
			if ((r = next_id(base_copy, n, idbuf, idlen)) < 0)
				return r;
			if (pathfmt(p, sizeof p, "%s.task", idbuf) < 0)
				return -ENAMETOOLONG;
			/* The id its own earlier attempts hold is its own. */
			if (n == 1 && hold[0] ? done_has_result(sp, idbuf) : done_has(sp, idbuf))
				continue;
			int held = spool_ids_state(sp, idbuf, &cst);
			if (held == IDS_OTHER)
				continue;
			snprintf(m.id, sizeof m.id, "%s", idbuf);
			if ((r = claim_meta_set(fd, &m)) < 0 && r != -ENOTSUP)
				return r;
			if (linkat(wdir, name, sp->done, p, 0) < 0) {
				if (errno != EEXIST)
					return -errno;
				continue;
			}
			/* A submitter reserves, then looks in done/; we link,
			 * then look in ids/: one of the two sees the other. A
			 * reservation made since our first look wins: give the
			 * id back (a crash here is a finish cut short, §11). */
			if (held == IDS_NONE && spool_ids_state(sp, idbuf, &cst) == IDS_OTHER) {
				if (unlinkat(sp->done, p, 0) < 0)
					return -errno;
				continue;
			}
			break;
		}
	reserved:
		res->id = idbuf;
		res->task_path = xasprintf("done/%s.task", idbuf);
		struct result_stream *st[] = {&res->out, &res->err};
		const enum scratch_file scr[] = {SCRATCH_STDOUT, SCRATCH_STDERR};
		const enum done_file kept[] = {DONE_STDOUT, DONE_STDERR};
		bool empty_ok = false; /* done/.empty looked at (link_empty) */
		for (int i = 0; i < 2; i++) {
			if (spool_name_scratch(p, sizeof p, name, scr[i]) < 0 ||
			    spool_name_done(q, sizeof q, idbuf, kept[i]) < 0)
				return -ENAMETOOLONG;
			if (!redo && st[i]->unmade) {
				/* The run never made the file (it wrote nothing). */
				if ((r = link_empty(sp, q, &empty_ok)) < 0)
					return r;
				st[i]->present = true;
				snprintf(st[i]->path, sizeof st[i]->path, "done/%s", q);
			} else if (renameat(wdir, p, sp->done, q) == 0) {
				struct stat os;
				if (!st[i]->bytes && fstatat(sp->done, q, &os, 0) == 0)
					st[i]->bytes = (uint64_t)os.st_size;
				st[i]->present = true;
				snprintf(st[i]->path, sizeof st[i]->path, "done/%s", q);
			} else if (errno == ENOENT && (redo || st[i]->captured)) {
				/* Moved (or linked) by an earlier attempt; or the run
				 * wrote nothing, and the file was never made. */
				struct stat os;
				if (fstatat(sp->done, q, &os, AT_SYMLINK_NOFOLLOW) < 0) {
					if (errno != ENOENT || !st[i]->captured)
						continue;
					if ((r = link_empty(sp, q, &empty_ok)) < 0)
						return r;
					st[i]->present = true;
					snprintf(st[i]->path, sizeof st[i]->path, "done/%s", q);
					continue;
				}
				if ((r = redirty(sp, q)) < 0)
					return r;
				if (!st[i]->bytes)
					st[i]->bytes = (uint64_t)os.st_size;
				st[i]->present = true;
				snprintf(st[i]->path, sizeof st[i]->path, "done/%s", q);
			} else if (errno != ENOENT && errno != ENAMETOOLONG)
				/* ENAMETOOLONG: for a name near NAME_MAX (a rejected
				 * one), the scratch name cannot exist. */
				return -errno;
		}
		/* What the task left in $KART_OUTDIR is kept beside the result,
		 * up to res->artifacts_max: over it, none of it (part of a set
		 * of files would mislead), and the result says so. Only a full
		 * one is measured: an empty one is just removed. */
		int over = 0;
		if (res->outdir_gone && !redo)
			; /* the worker took it back empty */
		else if ((res->outdir_scratch ? pathfmt(p, sizeof p, "%s", res->outdir_scratch)
					      : spool_name_scratch(p, sizeof p, name, SCRATCH_OUT)) == 0 &&
			 spool_name_done(q, sizeof q, idbuf, DONE_OUT) == 0 &&
		    unlinkat(wdir, p, AT_REMOVEDIR) < 0 && errno == ENOTEMPTY &&
		    (!res->artifacts_max ||
		     (over = tree_bytes_over(wdir, p, res->artifacts_max, &res->artifacts_bytes)) == 0)) {
			if (renameat(wdir, p, sp->done, q) < 0 && errno != EEXIST)
				return -errno;
			res->artifacts_path = xasprintf("done/%s", q);
		} else if (over != 0) {
			res->artifacts_dropped = true;
			(void)rm_rf_at(wdir, p);
		} else if (redo && !res->artifacts_path && exists_at(sp->done, q)) {
			if ((r = redirty(sp, q)) < 0)
				return r;
			res->artifacts_path = xasprintf("done/%s", q);
		}
	} else {
		/* Not a task file (symlink, FIFO, device, directory, extra
		 * hard link): the result is written first, then only the
		 * entry itself is removed, so what it points at is untouched.
		 * A crash between the two rejects it again under a new id.
		 * The id is reserved as for a task: an (empty) done/<id>.task,
		 * created exclusively. */
		for (int n = 1;; n++) {
			if (n > 1000000)
				return -EEXIST;
			if ((r = next_id(base_copy, n, idbuf, idlen)) < 0)
				return r;
			if (done_has(sp, idbuf) || pathfmt(p, sizeof p, "%s.task", idbuf) < 0 ||
			    spool_ids_state(sp, idbuf, NULL) != IDS_NONE)
				continue;
			int fd = openat(sp->done, p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
			if (fd < 0 && errno == EEXIST)
				continue;
			if (fd < 0)
				return -errno;
			close(fd);
			/* As for a task: a reservation made meanwhile wins. */
			if (spool_ids_state(sp, idbuf, NULL) != IDS_NONE) {
				if (unlinkat(sp->done, p, 0) < 0)
					return -errno;
				continue;
			}
			break;
		}
		res->id = idbuf;
		_cleanup_free_ char *json = result_dumps(res);
		if ((r = write_result_json(sp, idbuf, json, false, spool_reader(sp, idbuf, res->uid), NULL)) == -EEXIST) {
			/* The id is ours: the JSON there is our own, from an
			 * attempt whose later step failed. Written anew. */
			if (pathfmt(p, sizeof p, "%s.task", idbuf) < 0 || (r = redirty(sp, p)) < 0)
				return r < 0 ? r : -ENAMETOOLONG;
			r = write_result_json(sp, idbuf, json, true, spool_reader(sp, idbuf, res->uid), NULL);
		}
		if (r < 0)
			return r;
	}
	if (regular) {
		if (hold[0] || (res->task && sched_retry_set(&res->task->retry_on)))
			res->attempts_json = attempts_list(sp, hold, res);
		_cleanup_free_ char *json = result_dumps(res);
		free(res->attempts_json);
		res->attempts_json = NULL;
		free((char *)res->task_path);
		free((char *)res->artifacts_path);
		res->task_path = res->artifacts_path = NULL;
		if ((r = write_result_json(sp, idbuf, json, redo, spool_reader(sp, idbuf, res->uid), pend)) < 0)
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
		 * which recovery completes (§11). */
		spool_clean_scratch(wdir, name, gone);
		/* The result is durable: its reservation has done its work. */
		struct stat st;
		if (fstatat(wdir, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			ids_release(sp, idbuf, &st);
		if (unlinkat(wdir, name, 0) < 0)
			return -errno;
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
	if (regular) {
		_cleanup_close_ int fd = open_regular(wdir, name);
		if (fd >= 0) {
			(void)claim_meta_get(fd, &m);
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
	res.submitted_ms = m.submitted_ms ? m.submitted_ms
					  : (int64_t)st.st_ctim.tv_sec * 1000 + st.st_ctim.tv_nsec / 1000000;
	res.finished_ms = now_realtime_ms();
	res.backend = "none";
	fill_user(&res, st.st_uid, user, sizeof user);
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
	if (!m->hold[0]) {
		/* Reserve the final result's id: done/ID.attempts/ counts as
		 * taken for every finisher and kart submit (done_has). Made
		 * first and recorded next: a crash between leaves a directory
		 * nobody holds (spool-layout §12), never a hold of nothing. */
		for (int n = 1;; n++) {
			if (n > 1000000)
				return -EEXIST;
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
	static const char *const sfx[] = {"stdout", "stderr"};
	uint64_t bytes[2] = {0, 0};
	for (int i = 0; i < 2; i++) {
		if (pathfmt(p, sizeof p, ".%s.%s", name, sfx[i]) < 0 ||
		    pathfmt(q, sizeof q, "%d.%s", a->attempt, sfx[i]) < 0)
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
		struct stat rt;
		if (fd >= 0 && claim_meta_get(fd, &m3) == 0 && m3.id[0] &&
		    pathfmt(p, sizeof p, ".%s.task.redo", m3.id) == 0 &&
		    fstatat(sp->done, p, &rt, AT_SYMLINK_NOFOLLOW) == 0 && rt.st_ino == st.st_ino &&
		    rt.st_dev == st.st_dev && unlinkat(sp->done, p, 0) == 0)
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
		if (pathfmt(lk, sizeof lk, ".%s.lock", name) < 0)
			return RECOVER_ERROR;
		_cleanup_close_ int lfd = openat(wdir, lk, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (lfd < 0 && errno != ENOENT)
			return RECOVER_ERROR;
		if (lfd >= 0 && flock(lfd, LOCK_EX | LOCK_NB) < 0)
			return errno == EWOULDBLOCK ? RECOVER_BUSY : RECOVER_ERROR;
		(void)claim_meta_get(fd, &m);
		if (st.st_nlink == 2 && m.id[0]) {
			struct stat dt;
			if (pathfmt(p, sizeof p, "%s.task", m.id) == 0 &&
			    fstatat(sp->done, p, &dt, AT_SYMLINK_NOFOLLOW) == 0 &&
			    dt.st_ino == st.st_ino && dt.st_dev == st.st_dev) {
				/* Died while finishing. */
				if (pathfmt(p, sizeof p, "%s.json", m.id) == 0 && exists_at(sp->done, p)) {
					/* Its fsync of done/ may never have run, or
					 * have failed: the entries are written anew
					 * and done/ fsynced before the claim goes. */
					if (republish(sp, m.id) < 0)
						return RECOVER_ERROR;
					ids_release(sp, m.id, &st);
					(void)unlinkat(wdir, name, 0);
					spool_clean_scratch(wdir, name, 0);
					return RECOVER_FINISHED;
				}
				const enum done_file files[] = {DONE_TASK, DONE_STDOUT, DONE_STDERR};
				for (size_t i = 0; i < ARRAY_SIZE(files); i++)
					if (spool_name_done(p, sizeof p, m.id, files[i]) == 0)
						(void)unlinkat(sp->done, p, 0);
			}
		}
		char buf[TASK_HEADER_MAX], e[64];
		struct task_spec spec;
		ssize_t n = pread(fd, buf, sizeof buf, 0);
		if (n > 0 && task_parse(buf, (size_t)n, &spec, e, sizeof e) == 0 && spec.retries >= 0)
			retries = spec.retries;
		if (m.submitted_ms == 0)
			m.submitted_ms = (int64_t)st.st_ctim.tv_sec * 1000 + st.st_ctim.tv_nsec / 1000000;
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
		/* A dead worker's spare scratch directories (see scratch.c). */
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
		       const char *me, void (*dead)(void *arg, const char *peer), void *arg, int *busy,
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
	if (dead)
		dead(arg, peer);
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

int spool_live_workers(struct spool *sp)
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
		if (flocked(locks, st.st_ino))
			n++;
	}
	closedir(d);
	return n;
}
