/* worker_scratch.c - spare scratch directories, reused from one run to the next. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <sys/syscall.h>

#include "worker_int.h"

/* ---- spare scratch directories ---------------------------------------- */

/* ext4 without a journal gives a new inode only after skipping every
 * inode freed in the last minute, or six while its inode table block is
 * not yet written back (find_inode_bit, recently_deleted): with
 * a mkdir and an rmdir per task, allocation cost grows with throughput
 * and was half the worker's CPU. So an emptied scratch directory is kept
 * as cur/W/.spare.N and renamed into place for the next run of the same
 * uid, but only when nothing of its run can be alive (the kernel removed
 * its leaf) and it carries nothing its task could have set on it: no
 * extended attribute (ACLs included) and the inode flags and project of
 * a directory we made ourselves. Mode and owner are set again. Spares
 * are removed at start-up, by recovery, and at exit. */
#define SPARES_MAX 64
static struct spare {
	unsigned n;
	uid_t uid;
	gid_t gid;   /* its group and mode when it was kept: */
	mode_t mode; /* a change back is made only when needed */
	struct timespec ct; /* and its change time then */
	int fd;             /* an O_PATH descriptor of it, or -1 */
} spares[SPARES_MAX];
static size_t nspares;
static unsigned spare_seq;
static int fresh_state; /* 0: not looked at; 1: fresh_* hold a new directory's; -1: no reuse */
static unsigned fresh_flags, fresh_projid, fresh_xflags;

/* Does a directory's change time on the spool's filesystem move with
 * every change made to it? On the local filesystems that keep one as
 * POSIX says, yes; a FUSE server, say, may not keep it at all. */
static bool ctime_trusted(struct worker *w)
{
	static int known; /* 0: not looked at; 1: trusted; -1: not */
	struct statfs sf;
	if (!known)
		known = fstatfs(w->wdir, &sf) == 0 &&
				(sf.f_type == EXT4_SUPER_MAGIC || sf.f_type == XFS_SUPER_MAGIC ||
				 sf.f_type == BTRFS_SUPER_MAGIC || sf.f_type == TMPFS_MAGIC ||
				 sf.f_type == F2FS_SUPER_MAGIC)
			? 1
			: -1;
	return known > 0;
}

/* Is a change time ct (as the filesystem wrote it, truncated to its
 * granularity g) older than anything done from now on can leave? A
 * change at T >= now is stamped at least floor_g(now) > now - g, so ct
 * must be below now - g. g divides ct's nanoseconds (a power of ten up
 * to a second); with none, g is taken as 2 s. */
static bool ctime_before_now(struct timespec ct)
{
	struct timespec now;
	if (clock_gettime(CLOCK_REALTIME_COARSE, &now) < 0)
		return false;
	int64_t g = 2000000000, a = ct.tv_nsec, b = 1000000000;
	if (a) {
		while (b) { /* gcd(ns, 10^9) >= g */
			int64_t r = a % b;
			a = b;
			b = r;
		}
		g = a;
	}
	return (int64_t)ct.tv_sec * 1000000000 + ct.tv_nsec + g <
	       (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

static int dir_attrs(int d, unsigned *flags, unsigned *projid, unsigned *xflags)
{
	int f = 0;
	struct fsxattr fx;
	if (ioctl(d, FS_IOC_GETFLAGS, &f) < 0 || ioctl(d, FS_IOC_FSGETXATTR, &fx) < 0)
		return -1;
	*flags = (unsigned)f;
	*projid = fx.fsx_projid;
	*xflags = fx.fsx_xflags;
	return 0;
}

/* A scratch directory for a run as uid, made or taken from the spares
 * (one of the mode asked first: no chmod). inplace (backend none): it is
 * used under the name it has, written to name (24 bytes at least), a
 * spare's or a new one named like a spare: no rename into place, nor out
 * of it at the end; its path reaches the task in its environment, and
 * nothing else needs to know whose it is. Else it is made or renamed to
 * cur/W/name, a leftover of that name (a clean-up that failed) removed
 * first. *owned: a spare that is uid's and gid's already (no chown). */
int scratch_dir(struct worker *w, char *name, bool inplace, mode_t mode, uid_t uid, gid_t gid,
		bool *owned, struct timespec *ct, int *dfd)
{
	*owned = false;
	if (ct)
		*ct = (struct timespec){0, 0};
	if (dfd)
		*dfd = -1;
	if (!w->fds.keep)
		dfd = NULL; /* none kept (fd_budget) */
	static mode_t um = (mode_t)-1;
	if (um == (mode_t)-1) {
		um = umask(022);
		(void)umask(um);
	}
	size_t pick = nspares;
	for (size_t i = nspares; i-- > 0;)
		if (spares[i].uid == uid && (pick == nspares || spares[i].mode == (mode & ~um))) {
			pick = i;
			if (spares[i].mode == (mode & ~um))
				break;
		}
	if (pick < nspares) {
		struct spare k = spares[pick];
		spares[pick] = spares[--nspares];
		char sp[24];
		snprintf(sp, sizeof sp, ".spare.%u", k.n);
		if (inplace)
			strcpy(name, sp);
		/* Its descriptor goes with it where it keeps its name. */
		if (dfd && inplace)
			*dfd = k.fd;
		else if (k.fd >= 0)
			close(k.fd);
		if (inplace || renameat2(w->wdir, sp, w->wdir, name, RENAME_NOREPLACE) == 0) {
			*owned = k.gid == gid;
			if (k.mode == (mode & ~um)) {
				/* Unchanged since it was checked, and its change
				 * time older than anything the run can do to it
				 * (the filesystem stamps with the coarse clock, or
				 * a finer one): scratch_retire needs no more than
				 * that time to know the run left it as it was. A
				 * chmod or a chown of ours makes it newer, and the
				 * full check is made. */
				if (ct && inplace && k.ct.tv_sec && ctime_trusted(w) && ctime_before_now(k.ct))
					*ct = k.ct;
				return 0;
			}
			if (fchmodat(w->wdir, name, mode & ~um, 0) == 0)
				return 0;
			*owned = false;
			(void)rm_rf_at(w->wdir, name);
		} else
			(void)rm_rf_at(w->wdir, sp);
		if (dfd && *dfd >= 0) {
			close(*dfd);
			*dfd = -1;
		}
	}
	if (inplace)
		snprintf(name, 24, ".spare.%u", ++spare_seq);
	if (mkdirat(w->wdir, name, mode) < 0) {
		int e = -errno;
		if (inplace) {
			name[0] = '\0'; /* nothing to remove later */
			return e;
		}
		if (e != -EEXIST)
			return e;
		(void)rm_rf_at(w->wdir, name);
		if (mkdirat(w->wdir, name, mode) < 0)
			return -errno;
	}
	if (!fresh_state) {
		/* What a directory of ours looks like, for scratch_retire. */
		_cleanup_close_ int d = openat(w->wdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		fresh_state = d >= 0 && dir_attrs(d, &fresh_flags, &fresh_projid, &fresh_xflags) == 0 ? 1 : -1;
	}
	/* Kept with it while it is a spare: the child makes its Landlock
	 * rule from it (held_task_paths), without a walk of the path. */
	if (dfd && inplace)
		*dfd = openat(w->wdir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return 0;
}

/* Empty a run's scratch directory and keep it as a spare, or remove it.
 * keep_full: a directory with something in it stays as it is (the run's
 * $KART_OUTDIR, which spool_finish moves beside the result). Returns
 * true when it is gone from its name. */
bool scratch_retire(struct worker *w, const struct task *t, const char *name, bool keep_full,
		    const struct timespec *ct, int *dfd)
{
	int nofd = -1;
	if (!dfd)
		dfd = &nofd;
	bool reuse = t->leaf.empty && fresh_state > 0 && nspares < SPARES_MAX;
	struct stat st;
	unsigned sn;
	char tail;
	/* A spare used in place whose change time is the one it had before
	 * the run (scratch_dir): no entry was made in it or removed, and no
	 * attribute, flag, mode or owner was changed, since each of those
	 * sets it anew. Still empty and clean: one stat instead of seven
	 * calls. */
	if (reuse && ct && ct->tv_sec && sscanf(name, ".spare.%u%c", &sn, &tail) == 1 &&
	    (*dfd >= 0 ? fstat(*dfd, &st) : fstatat(w->wdir, name, &st, AT_SYMLINK_NOFOLLOW)) == 0 &&
	    S_ISDIR(st.st_mode) &&
	    st.st_uid == t->run_uid && st.st_ctim.tv_sec == ct->tv_sec && st.st_ctim.tv_nsec == ct->tv_nsec) {
		spares[nspares++] = (struct spare){sn, t->run_uid, st.st_gid, st.st_mode & 07777, st.st_ctim, *dfd};
		*dfd = -1;
		return true;
	}
	_cleanup_close_ int d = reuse ? openat(w->wdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
	unsigned fl, pj, xf;
	char xl[1];
	if (d < 0 || fstat(d, &st) < 0 || st.st_uid != t->run_uid || flistxattr(d, xl, 0) != 0 ||
	    dir_attrs(d, &fl, &pj, &xf) < 0 || fl != fresh_flags || pj != fresh_projid ||
	    xf != fresh_xflags)
		reuse = false;
	if (!reuse) {
		if (!keep_full) /* else spool_finish removes it, or moves it if full */
			return rm_rf_at(w->wdir, name) == 0;
		return false;
	}
	/* Most runs leave it empty: one getdents64 says so. */
	char buf[4096] __attribute__((aligned(8)));
	long n = syscall(SYS_getdents64, d, buf, sizeof buf);
	bool empty = n > 0 && (size_t)n < sizeof buf / 2;
	for (long off = 0; empty && off < n;) {
		const char *nm = buf + off + 19; /* struct linux_dirent64: d_name */
		off += *(unsigned short *)(buf + off + 16);
		if (strcmp(nm, ".") && strcmp(nm, ".."))
			empty = false;
	}
	if (!empty) {
		if (keep_full)
			return false;
		_cleanup_close_ int dd = openat(d, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		DIR *dir = dd >= 0 ? fdopendir(dd) : NULL;
		if (!dir)
			return rm_rf_at(w->wdir, name) == 0;
		dd = -1;
		struct dirent *de;
		while ((de = readdir(dir)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
			    rm_rf_at(dirfd(dir), de->d_name) < 0)
				reuse = false;
		closedir(dir);
	}
	char sp[32];
	if (sscanf(name, ".spare.%u%c", &sn, &tail) == 1) {
		/* scratch_dir's in place: a spare already, by its name */
		if (reuse) {
			/* Emptied: its change time is the one after that
			 * (unknown: the full check next time). */
			struct stat now;
			struct timespec ct_now = st.st_ctim;
			if (!empty)
				ct_now = fstat(d, &now) == 0 ? now.st_ctim : (struct timespec){0, 0};
			spares[nspares++] =
				(struct spare){sn, t->run_uid, st.st_gid, st.st_mode & 07777, ct_now, *dfd};
			*dfd = -1;
			return true;
		}
	} else {
		snprintf(sp, sizeof sp, ".spare.%u", sn = ++spare_seq);
		if (reuse && renameat2(w->wdir, name, w->wdir, sp, RENAME_NOREPLACE) == 0) {
			/* Renamed: a change time unknown (never used in place). */
			spares[nspares++] = (struct spare){sn, t->run_uid, st.st_gid, st.st_mode & 07777, {0, 0}, -1};
			return true;
		}
	}
	return rm_rf_at(w->wdir, name) == 0;
}

/* Spares are ours for this life only: every .spare.N goes at start-up (a
 * crash's) and at exit (backend none's run directories are named so, and
 * one its clean-up could not remove is not in spares[]). */
void scratch_spares_drop(struct worker *w)
{
	_cleanup_close_ int d = openat(w->wdir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = d >= 0 ? fdopendir(d) : NULL;
	if (!dir)
		return;
	d = -1;
	struct dirent *de;
	while ((de = readdir(dir)))
		if (strncmp(de->d_name, ".spare.", 7) == 0)
			(void)rm_rf_at(dirfd(dir), de->d_name);
	closedir(dir);
	for (size_t i = 0; i < nspares; i++)
		if (spares[i].fd >= 0)
			close(spares[i].fd);
	nspares = 0;
}
