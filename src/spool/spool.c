/* spool.c - the spool itself: init and open, its format and layout and
 * the checks on it, the worker directories and their locks (spool-layout
 * README §0, §1, WORKER §1, §4), claiming, user.kart (WORKER §5), the walk
 * over the spool's directories (spool_walk), and what spool_submit.c, spool_finish.c and
 * spool_recover.c share (spool_int.h). Every rename here has a row in
 * spool-layout/APPENDIX.md's crash-state tables. The names it uses are
 * spool_name.c's, a layer below that knows no directory. */
#define _GNU_SOURCE
#include "spool_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>

#include "tally.h"
#include "task.h"
#include "util.h"

#ifndef SMB2_MAGIC_NUMBER
#define SMB2_MAGIC_NUMBER 0xFE534D42
#endif
#ifndef CIFS_MAGIC_NUMBER
#define CIFS_MAGIC_NUMBER 0xFF534D42
#endif


static const char *const subdirs[] = {"tmp", "new", "cur", "done"};

/* SPOOL/format: a decimal number, then at most white space. 1 where
 * there is none; 0 when it is not a number; -errno when unreadable. */
static int format_read(int root)
{
	_cleanup_free_ char *buf = NULL;
	size_t n;
	int r = read_file_at(root, "format", 64, &buf, &n);
	if (r == -ENOENT)
		return 1;
	if (r < 0)
		return r;
	long long v;
	size_t d = 0;
	while (d < n && buf[d] >= '0' && buf[d] <= '9')
		d++;
	for (size_t i = d; i < n; i++)
		if (buf[i] != '\n' && buf[i] != ' ' && buf[i] != '\t' && buf[i] != '\r')
			return 0;
	if (d == 0 || d > 9)
		return 0;
	buf[d] = '\0';
	return parse_int(buf, 1, INT32_MAX, &v) == 0 ? (int)v : 0;
}

int spool_format_check(const struct spool *sp, char *err, size_t errlen)
{
	if (sp->format == SPOOL_FORMAT)
		return 0;
	if (sp->format > SPOOL_FORMAT)
		return ERR(-1, "%s is a spool of format %d (its file 'format'), and this kart knows "
			   "format %d alone: it would not keep that format's rules; use a kart that "
			   "knows format %d", sp->path, sp->format, SPOOL_FORMAT, sp->format);
	if (sp->format < 0)
		return ERR(-1, "%s/format: cannot read it: %s (the spool's format version)", sp->path,
			   strerror(-sp->format));
	return ERR(-1, "%s/format: not a format version (it holds one decimal number, %d "
		   "for this kart); put it back as kart init writes it", sp->path, SPOOL_FORMAT);
}

/* SPOOL/format for a spool that has none (a new one, or one made before
 * the file existed, which is format 1): written in tmp/ and linked in,
 * so that nobody reads half of it and no one's is replaced. */
static int format_write(int root)
{
	char tmp[64], text[16];
	snprintf(tmp, sizeof tmp, "tmp/.format.%d", getpid());
	int len = snprintf(text, sizeof text, "%d\n", SPOOL_FORMAT);
	(void)unlinkat(root, tmp, 0);
	_cleanup_close_ int fd = openat(root, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	int r = write_all(fd, text, (size_t)len);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (r == 0 && linkat(root, tmp, root, "format", 0) < 0 && errno != EEXIST)
		r = -errno;
	(void)unlinkat(root, tmp, 0);
	return r;
}

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
	/* ids/: reservations (spool-layout README §5); apart from subdirs, because a
	 * spool made before it existed still opens (without reservations). */
	if (mkdirat(root, "ids", 0755) < 0 && errno != EEXIST)
		return ERR(-1, "%s/ids: %s", path, strerror(errno));
	/* tally/: the results counted, for kart metrics (tally.h); a
	 * worker makes it on a spool older than it. */
	if (mkdirat(root, "tally", 0755) < 0 && errno != EEXIST)
		return ERR(-1, "%s/tally: %s", path, strerror(errno));
	int f = format_read(root);
	if (f == 1 && !exists_at(root, "format")) {
		int r = format_write(root);
		if (r < 0)
			return ERR(-1, "%s/format: %s", path, strerror(-r));
		f = format_read(root);
	}
	struct spool shown = {.path = (char *)path, .format = f};
	if (spool_format_check(&shown, err, errlen) < 0)
		return -1;
	if (fsync(root) < 0)
		return ERR(-1, "%s: fsync: %s", path, strerror(errno));
	return 0;
}

const struct spool_shared_dir spool_shared_dirs[] = {
	{".", 0755}, {"tmp", 03770}, {"ids", 03770}, {"drop", 01770},
	{"new", 0755}, {"cur", 0755}, {"done", 02750}, {"tally", 02750},
};
const size_t spool_nshared_dirs = ARRAY_SIZE(spool_shared_dirs);

int spool_init_shared(const char *path, gid_t gid, char *err, size_t errlen)
{
	if (spool_init(path, err, errlen) < 0)
		return -1;
	_cleanup_close_ int root = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (root < 0 || (mkdirat(root, "drop", 0700) < 0 && errno != EEXIST))
		return ERR(-1, "%s%s: %s", path, root < 0 ? "" : "/drop", strerror(errno));
	for (size_t i = 0; i < spool_nshared_dirs; i++) {
		const struct spool_shared_dir *d = &spool_shared_dirs[i];
		_cleanup_close_ int fd = openat(root, d->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		/* The owner first: a chown clears the setgid and sticky bits. */
		if (fd < 0 || fchown(fd, 0, gid) < 0 || fchmod(fd, d->mode) < 0)
			return ERR(-1, "%s/%s: %s", path, d->name, strerror(errno));
	}
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
	sp->format = format_read(sp->root);
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
	tally_writer_free(sp);
}

bool exists_at(int dirfd, const char *name)
{
	struct stat st;
	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT;
}

/* A result, or the reservation of one (.task), under id. */
bool done_has_result(struct spool *sp, const char *id)
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
bool done_has(struct spool *sp, const char *id)
{
	char p[512];
	if (done_has_result(sp, id))
		return true;
	return pathfmt(p, sizeof p, "%s.attempts", id) < 0 || exists_at(sp->done, p);
}

bool done_links(struct spool *sp, const char *name, const struct stat *st)
{
	struct stat dst;
	return fstatat(sp->done, name, &dst, AT_SYMLINK_NOFOLLOW) == 0 && same_inode(&dst, st);
}

bool uid_name(uid_t uid, char *name, size_t n)
{
	struct passwd p, *pp = NULL;
	char buf[4096];
	return getpwuid_r(uid, &p, buf, sizeof buf, &pp) == 0 && pp &&
	       pathfmt(name, n, "%s", pp->pw_name) == 0;
}

int next_id(const char *base, int n, char *out, size_t outlen)
{
	if (n > 1000000)
		return -EEXIST; /* no free id in a million: the caller gives up */
	if (n <= 1)
		return pathfmt(out, outlen, "%s", base);
	return pathfmt(out, outlen, "%s.%d", base, n);
}

/* A claim directory is born locked: made under a dot name (which peers
 * ignore), its .lock created and flocked, then renamed into place. A
 * peer that sees cur/<wid>/ therefore always finds it locked while its
 * worker lives. */
static int worker_dir_create(struct spool *sp, const char *wid, int *dout, int *lout)
{
	char tmp[512];
	*dout = *lout = -1;
	if (spool_name_newborn(tmp, sizeof tmp, wid, getpid()) < 0)
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
		tally_writer_set(sp, wid);
		*wdir = steal_fd(&d);
		*lockfd = steal_fd(&l);
		return 0;
	}
	return -EBUSY;
}

int spool_worker_hold(struct spool *sp, const char *wid, int *lockfd, bool *made)
{
	*lockfd = -1;
	*made = false;
	for (int tries = 0; tries < 10; tries++) {
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
			*made = true;
			*lockfd = steal_fd(&l);
			return 0;
		}
		/* No .lock: one being removed, or garbage gc removes. */
		l = openat(d, ".lock", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (l < 0)
			return errno == ENOENT ? -EBUSY : -errno;
		if (flock(l, LOCK_EX | LOCK_NB) < 0)
			return errno == EWOULDBLOCK ? -EBUSY : -errno;
		struct stat a, b, c, e;
		if (fstat(l, &a) < 0 || fstatat(d, ".lock", &b, AT_SYMLINK_NOFOLLOW) < 0 ||
		    a.st_ino != b.st_ino || fstat(d, &c) < 0 ||
		    fstatat(sp->cur, wid, &e, AT_SYMLINK_NOFOLLOW) < 0 || c.st_ino != e.st_ino)
			continue;
		*lockfd = steal_fd(&l);
		return 0;
	}
	return -EBUSY;
}

void spool_worker_unhold(struct spool *sp, const char *wid, int lockfd, bool made)
{
	if (made) {
		_cleanup_close_ int d = openat(sp->cur, wid, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (d >= 0)
			(void)unlinkat(d, ".lock", 0);
		(void)unlinkat(sp->cur, wid, AT_REMOVEDIR);
	}
	if (lockfd >= 0)
		(void)close(lockfd);
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

/* An id= or hold= of name's: a task name, with name's own USER: prefix
 * (or none, for a name without one), so that it can neither leave done/
 * nor be another user's id. */
static bool meta_id_ok(const char *id, const char *name)
{
	const char *why, *c = strchr(name, ':');
	if (task_name_check(id, &why) != 0)
		return false;
	if (!c)
		return !strchr(id, ':');
	size_t pl = (size_t)(c - name) + 1;
	return strncmp(id, name, pl) == 0;
}

void claim_meta_parse(const char *text, const char *name, struct claim_meta *m)
{
	char buf[KART_XATTR_MAX];
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
		else if (strncmp(t, "id=", 3) == 0 && meta_id_ok(t + 3, name))
			snprintf(m->id, sizeof m->id, "%s", t + 3);
		else if (strncmp(t, "not_before=", 11) == 0 &&
			 parse_int(t + 11, 0, INT64_MAX, &v) == 0)
			m->not_before_ms = v;
		else if (strncmp(t, "hold=", 5) == 0 && meta_id_ok(t + 5, name))
			snprintf(m->hold, sizeof m->hold, "%s", t + 5);
		else if (strncmp(t, "run=", 4) == 0)
			snprintf(m->run, sizeof m->run, "%s", t + 4);
	}
}

int claim_meta_get(int fd, const char *name, struct claim_meta *m)
{
	char buf[KART_XATTR_MAX];
	memset(m, 0, sizeof *m);
	m->attempt = 1;
	ssize_t n = fgetxattr(fd, KART_XATTR, buf, sizeof buf - 1);
	if (n < 0)
		return errno == ENODATA ? 0 : -errno;
	buf[n] = '\0';
	claim_meta_parse(buf, name, m);
	return 0;
}

int claim_meta_set(int fd, const struct claim_meta *m)
{
	char buf[KART_XATTR_MAX];
	int n = snprintf(buf, sizeof buf, "attempt=%d\nsubmitted=%lld\nid=%s\n", m->attempt,
			 (long long)m->submitted_ms, m->id);
	/* Written only when set: a file never retried keeps the three lines. */
	if (n < (int)sizeof buf && m->not_before_ms)
		n += snprintf(buf + n, sizeof buf - (size_t)n, "not_before=%lld\n",
			      (long long)m->not_before_ms);
	if (n < (int)sizeof buf && m->hold[0])
		n += snprintf(buf + n, sizeof buf - (size_t)n, "hold=%s\n", m->hold);
	if (n < (int)sizeof buf && m->run[0])
		n += snprintf(buf + n, sizeof buf - (size_t)n, "run=%s\n", m->run);
	if (n >= (int)sizeof buf)
		return -ENAMETOOLONG;
	if (fsetxattr(fd, KART_XATTR, buf, (size_t)n, 0) < 0)
		return -errno;
	return 0;
}

void spool_submitter(int fd, const struct stat *st, struct submitter *s)
{
	*s = (struct submitter){.uid = st->st_uid};
	/* Another's file: its owner may have written anything there. */
	if (st->st_uid != 0 && st->st_uid != geteuid())
		return;
	char buf[128];
	ssize_t n = fgetxattr(fd, KART_XATTR_BY, buf, sizeof buf - 1);
	if (n <= 0)
		return;
	buf[n] = '\0';
	long long uid = -1, from = 0, v;
	char *save = NULL;
	for (char *t = strtok_r(buf, "\n", &save); t; t = strtok_r(NULL, "\n", &save)) {
		if (strncmp(t, "uid=", 4) == 0 && parse_int(t + 4, 0, (uid_t)-2, &v) == 0)
			uid = v;
		else if (strncmp(t, "from=", 5) == 0 && parse_int(t + 5, 0, INT64_MAX, &v) == 0)
			from = v;
	}
	if (uid < 0)
		return;
	*s = (struct submitter){.uid = (uid_t)uid, .from = (unsigned long long)from, .recorded = true};
}

uid_t spool_claim_submitter(const struct spool *sp, const char *name, int fd, const struct stat *st)
{
	struct submitter by = {.uid = st->st_uid};
	if (fd >= 0)
		spool_submitter(fd, st, &by);
	return by.recorded ? by.uid : spool_reader(sp, name, st->st_uid);
}

int spool_strip_attrs(int fd, bool keep_ours)
{
	ssize_t ln = flistxattr(fd, NULL, 0);
	if (ln < 0)
		return errno == ENOTSUP ? 0 : -errno;
	_cleanup_free_ char *names = xmalloc((size_t)ln + 1);
	if (ln > 0 && (ln = flistxattr(fd, names, (size_t)ln)) < 0)
		return -errno; /* (ERANGE: it grew meanwhile, which only its owner, root, does) */
	for (ssize_t o = 0; o < ln; o += (ssize_t)strlen(names + o) + 1)
		if ((strncmp(names + o, "user.", 5) == 0 || strncmp(names + o, "system.posix_acl", 16) == 0) &&
		    !(keep_ours && (strcmp(names + o, KART_XATTR) == 0 || strcmp(names + o, KART_XATTR_BY) == 0)) &&
		    fremovexattr(fd, names + o) < 0 && errno != ENODATA)
			return -errno;
	return 0;
}

int spool_task_record(int fd, const struct claim_meta *m, uid_t by, unsigned long long from)
{
	char rec[64];
	int n = snprintf(rec, sizeof rec, "uid=%u\nfrom=%llu\n", (unsigned)by, from);
	/* The two set below are kept, and replaced in one call each: never
	 * missing a moment, for a peer that looks meanwhile. */
	int r = spool_strip_attrs(fd, true);
	if (r < 0)
		return r;
	if (fchmod(fd, 0600) < 0)
		return -errno;
	if ((r = grant_read_acl(fd, by)) < 0)
		return r;
	if (fsetxattr(fd, KART_XATTR_BY, rec, (size_t)n, 0) < 0)
		return -errno;
	if (m && (r = claim_meta_set(fd, m)) < 0)
		return r;
	if (!m && fremovexattr(fd, KART_XATTR) < 0 && errno != ENODATA)
		return -errno;
	return 0;
}

int spool_task_fill(int fd, const char *text, size_t len, const struct claim_meta *m, uid_t by,
		    unsigned long long from)
{
	int r = spool_task_record(fd, m, by, from);
	if (r == 0)
		r = write_all(fd, text, len);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	return r;
}

int open_regular(int dirfd, const char *name)
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

int spool_trash(int dirfd, const char *name, char *trash, size_t n)
{
	if (spool_name_trash(trash, n, name) < 0)
		return -ENAMETOOLONG;
	if (renameat2(dirfd, name, dirfd, trash, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EEXIST || rm_rf_at(dirfd, trash) < 0)
		return -errno;
	return renameat2(dirfd, name, dirfd, trash, RENAME_NOREPLACE) == 0 ? 0 : -errno;
}

/* ---- spool_walk: every entry of the areas asked, in the order tasks move ---- */

/* One directory's entries to cb; "." and "..", and dot names unless dots,
 * left out. 0, cb's nonzero value, or -errno if it cannot be read. */
static int walk_dir(int dirfd, struct spool_entry *e, bool dots, spool_walk_cb cb, void *arg)
{
	DIR *dir = opendir_at(dirfd, ".");
	if (!dir)
		return -errno;
	struct dirent *de;
	int r = 0;
	char id[512];
	while (!r && (de = readdir(dir))) {
		const char *n = de->d_name;
		if (n[0] == '.' && (!dots || !strcmp(n, ".") || !strcmp(n, "..")))
			continue;
		e->name = n;
		e->id = n[0] == '.' ? NULL : n;
		if (e->area == SPOOL_WALK_DONE && e->id)
			e->id = spool_done_id(n, id, sizeof id, &e->done) ? id : NULL;
		r = cb(e, arg);
	}
	closedir(dir);
	return r;
}

/* cur/: the claim directories (WORKERS) and what they hold (CUR). A
 * dot directory (cur/.new.*, one being born) is never entered. */
static int walk_cur(struct spool *sp, unsigned areas, spool_walk_cb cb, void *arg)
{
	bool dots = areas & SPOOL_WALK_DOTS;
	DIR *dir = opendir_at(sp->cur, ".");
	if (!dir)
		return -errno;
	struct dirent *de;
	int r = 0;
	while (!r && (de = readdir(dir))) {
		const char *wid = de->d_name;
		bool dot = wid[0] == '.';
		if (dot && (!dots || !strcmp(wid, ".") || !strcmp(wid, "..")))
			continue;
		if (areas & SPOOL_WALK_WORKERS) {
			struct spool_entry e = {.area = SPOOL_WALK_WORKERS, .dirfd = sp->cur, .dir = "cur",
						.name = wid, .id = NULL};
			if ((r = cb(&e, arg)))
				break;
		}
		char rel[512];
		if (dot || !(areas & SPOOL_WALK_CUR) || pathfmt(rel, sizeof rel, "cur/%s", wid) < 0)
			continue;
		_cleanup_close_ int wd = openat(sp->cur, wid, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (wd < 0)
			continue; /* gone (recovered, collected), or not a directory */
		struct spool_entry e = {.area = SPOOL_WALK_CUR, .dirfd = wd, .dir = rel, .worker = wid};
		int wr = walk_dir(wd, &e, dots, cb, arg);
		if (wr > 0)
			r = wr; /* else an unreadable claim directory is passed over */
	}
	closedir(dir);
	return r;
}

int spool_walk(struct spool *sp, unsigned areas, spool_walk_cb cb, void *arg)
{
	bool dots = areas & SPOOL_WALK_DOTS;
	/* In the order tasks move; cur/ (0 here) is walk_cur's. */
	const struct {
		unsigned area;
		int fd;
		const char *dir;
	} dirs[] = {
		{SPOOL_WALK_TMP, sp->tmp, "tmp"},
		{SPOOL_WALK_NEW, sp->new, "new"},
		{SPOOL_WALK_WORKERS | SPOOL_WALK_CUR, -1, NULL},
		{SPOOL_WALK_DONE, sp->done, "done"},
	};
	int first = 0;
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		if (!(areas & dirs[i].area))
			continue;
		struct spool_entry e = {.area = dirs[i].area, .dirfd = dirs[i].fd, .dir = dirs[i].dir};
		/* tmp/ names are the clients': a dot name is as much theirs. */
		int r = !dirs[i].dir ? walk_cur(sp, areas, cb, arg)
				     : walk_dir(dirs[i].fd, &e, dots || dirs[i].area == SPOOL_WALK_TMP, cb, arg);
		if (r > 0)
			return r;
		first = first ? first : r;
	}
	return first;
}

bool spool_find_claim(struct spool *sp, const char *id, char *worker, size_t wlen)
{
	DIR *dir = opendir_at(sp->cur, ".");
	struct dirent *de;
	bool found = false;
	if (!dir)
		return false;
	while (!found && (de = readdir(dir))) {
		char p[512];
		struct stat st;
		if (de->d_name[0] == '.')
			continue;
		if (pathfmt(p, sizeof p, "%s/%s", de->d_name, id) == 0 &&
		    fstatat(sp->cur, p, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			snprintf(worker, wlen, "%s", de->d_name);
			found = true;
		}
	}
	closedir(dir);
	return found;
}
