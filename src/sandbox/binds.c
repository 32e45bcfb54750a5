/* binds.c - a task's cwd=, bind= and ro=, opened as its submitter.
 *
 * The spawn thread opens them itself, under the submitter's filesystem
 * credentials: its own groups, fsgid and fsuid switched by raw system
 * calls, which change this thread alone (libc's set*id would change every
 * thread at once), and its effective capabilities emptied, so that what
 * it may open is what the submitter may. The switch is undone before
 * anything else runs in the thread, and checked: a thread that did not
 * get its own credentials back aborts the worker rather than open the
 * next task's paths as the wrong user. Every open is an openat2 that
 * follows no magic link (nothing of the worker's reachable through
 * /proc/self). No process of the submitter's exists on the way, so she
 * has nothing to stop or slow: a vforked opener that took her uid could
 * be sent SIGSTOP by her and hold the spawn thread that waited on it.
 * Where the kernel lacks openat2 or faccessat2, a vforked child drops
 * uid, gid and groups for good, opens, checks and exits, its
 * descriptors sent back over a socketpair (SCM_RIGHTS). */
#define _GNU_SOURCE
#include "binds.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "util.h"

#ifndef AT_EMPTY_PATH
#define AT_EMPTY_PATH 0x1000
#endif

enum { ACC_READ = 1, ACC_WRITE = 2, ACC_SEARCH = 4 };

bool binds_by_child;

/* One per bind, child to parent; the descriptor rides along when ok. */
struct bind_msg {
	int idx;
	int err;     /* errno of the open, 0 */
	int missing; /* ACC_* the submitter lacks */
	int notdir;  /* cwd= of something that is not a directory */
};

static int may(int fd, int mode)
{
	/* faccessat2 looks at the descriptor itself; the /proc path is for
	 * kernels before 5.8 (the magic link is the same file). */
	if (syscall(SYS_faccessat2, fd, "", mode, AT_EMPTY_PATH | AT_EACCESS) == 0)
		return 0;
	if (errno != ENOSYS && errno != EINVAL)
		return -1;
	char p[64];
	snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
	return access(p, mode);
}

/* Open bind b as we are, and what we may do with it: *fdp (m->notdir:
 * a cwd= that is no directory), or -1 with m->err. here: in a thread of
 * the worker's, following no magic link. Async-signal-safe: the opener's
 * child runs it. */
static void open_one(const struct task_bind *b, bool here, struct bind_msg *m, int *fdp)
{
	/* No O_DIRECTORY for cwd=: judge says where a file leads first. */
	int flags = O_PATH | O_CLOEXEC;
	struct open_how how = {.flags = (uint64_t)flags, .resolve = RESOLVE_NO_MAGICLINKS};
	int fd = !here ? open(b->path, flags)
		 : b->path[0] != '/' ? (errno = EINVAL, -1)
				      : (int)syscall(SYS_openat2, AT_FDCWD, b->path, &how, sizeof how);
	struct stat st;
	if (fd < 0) {
		m->err = errno;
	} else if (fstat(fd, &st) < 0) {
		m->err = errno;
	} else {
		bool dir = S_ISDIR(st.st_mode);
		m->notdir = b->mode == BIND_CWD && !dir;
		/* What the bind lets the task do, the submitter must be able
		 * to do: read (and search a directory) for ro=, write too for
		 * bind= and cwd=. */
		if (may(fd, R_OK) < 0)
			m->missing |= ACC_READ;
		if (dir && may(fd, X_OK) < 0)
			m->missing |= ACC_SEARCH;
		if (b->mode != BIND_RO && may(fd, W_OK) < 0)
			m->missing |= ACC_WRITE;
	}
	*fdp = fd;
}

/* Does the submitter's switch change nothing (the worker's own user: a
 * root task on a root worker, anyone's on their own worker)? */
static bool in_groups(gid_t x, gid_t primary, const gid_t *g, int n)
{
	for (int i = 0; i < n; i++)
		if (g[i] == x)
			return true;
	return x == primary;
}

static bool ours(const struct run_cred *c)
{
	if (!c)
		return true;
	gid_t g[RUN_CRED_GROUPS_MAX];
	int n = getgroups(RUN_CRED_GROUPS_MAX, g);
	gid_t eg = getegid();
	if (n < 0 || c->uid != geteuid() || c->gid != eg)
		return false;
	/* The same groups, the primary one counted in both. */
	for (int i = 0; i < c->ngroups; i++)
		if (!in_groups(c->groups[i], eg, g, n))
			return false;
	for (int i = 0; i < n; i++)
		if (!in_groups(g[i], c->gid, c->groups, c->ngroups))
			return false;
	return true;
}

/* Can the paths be opened in a thread: openat2, and faccessat2 to ask
 * about a descriptor under the thread's own credentials? */
static bool here_ok(void)
{
	static int ok = -1;
	if (ok < 0) {
		struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_MAGICLINKS};
		int fd = (int)syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof how);
		ok = fd >= 0 && syscall(SYS_faccessat2, fd, "", R_OK, AT_EMPTY_PATH | AT_EACCESS) == 0;
		if (fd >= 0)
			close(fd);
	}
	return ok;
}

/* This thread's credentials, kept while it acts as a submitter. */
struct thread_cred {
	gid_t groups[RUN_CRED_GROUPS_MAX];
	int ngroups;
	struct __user_cap_data_struct cap[_LINUX_CAPABILITY_U32S_3];
};

static long caps(int get, struct __user_cap_data_struct *d)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	return syscall(get ? SYS_capget : SYS_capset, &h, d);
}

/* setfsuid and setfsgid answer the id in force when given an invalid one. */
static bool thread_is(uid_t uid, gid_t gid)
{
	return (uid_t)syscall(SYS_setfsuid, (uid_t)-1) == uid &&
	       (gid_t)syscall(SYS_setfsgid, (gid_t)-1) == gid;
}

/* Back to the worker's own: capabilities first (raising the effective
 * set within the permitted one needs none), then fsuid, fsgid, groups,
 * and the capabilities again (an fsuid back to 0 raises the filesystem
 * ones from the permitted set, which the worker may not have had in
 * effect); then each checked, or the worker stops here. */
static void thread_leave(const struct thread_cred *k)
{
	(void)caps(0, (struct __user_cap_data_struct *)k->cap);
	(void)syscall(SYS_setfsuid, geteuid());
	(void)syscall(SYS_setfsgid, getegid());
	(void)syscall(SYS_setgroups, (size_t)k->ngroups, k->groups);
	(void)caps(0, (struct __user_cap_data_struct *)k->cap);
	gid_t g[RUN_CRED_GROUPS_MAX];
	struct __user_cap_data_struct c[_LINUX_CAPABILITY_U32S_3];
	long n = syscall(SYS_getgroups, RUN_CRED_GROUPS_MAX, g);
	if (!thread_is(geteuid(), getegid()) || n != k->ngroups ||
	    memcmp(g, k->groups, (size_t)n * sizeof *g) || caps(1, c) < 0 ||
	    memcmp(c, k->cap, sizeof c)) {
		logmsg("fatal: a spawn thread did not get its own credentials back after opening "
		       "a task's paths as its submitter; stopping");
		abort();
	}
}

/* This thread becomes the submitter for what it opens: her groups,
 * fsgid and fsuid, and no effective capability. 0, or -errno with the
 * thread as it was. */
static int thread_enter(const struct run_cred *c, struct thread_cred *k)
{
	long n = syscall(SYS_getgroups, RUN_CRED_GROUPS_MAX, k->groups);
	if (n < 0 || caps(1, k->cap) < 0)
		return -errno;
	k->ngroups = (int)n;
	struct __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3];
	memcpy(none, k->cap, sizeof none);
	/* root, with other groups than the worker's, keeps root's powers */
	for (size_t i = 0; c->uid != 0 && i < ARRAY_SIZE(none); i++)
		none[i].effective = 0;
	if (syscall(SYS_setgroups, (size_t)c->ngroups, c->groups) < 0)
		return -errno;
	(void)syscall(SYS_setfsgid, c->gid);
	(void)syscall(SYS_setfsuid, c->uid);
	int e = caps(0, none) < 0 ? errno : !thread_is(c->uid, c->gid) ? EPERM : 0;
	if (e) {
		thread_leave(k);
		return -e;
	}
	return 0;
}

/* In the child: async-signal-safe calls only (the worker has threads). */
static void opener(const struct task_spec *spec, const struct run_cred *cred, int sock)
{
	/* Before anything is opened, nothing of the worker's is left to
	 * reach through /proc/self: its descriptors (a symlink to
	 * /proc/self/fd/N opened its log, its spool, its tasks' files) all
	 * closed but the socket, and its working directory "/". */
	if ((sock > 0 && syscall(SYS_close_range, 0U, (unsigned)sock - 1, 0U) < 0) ||
	    syscall(SYS_close_range, (unsigned)sock + 1, ~0U, 0U) < 0 || chdir("/") < 0)
		_exit(5);
	if (cred) {
		/* Raw calls: libc's would try to reach the parent's threads
		 * (see run.c, child_become). Groups, gid, uid, in that order. */
		if (syscall(SYS_setgroups, (size_t)cred->ngroups, cred->groups) < 0 ||
		    syscall(SYS_setresgid, cred->gid, cred->gid, cred->gid) < 0 ||
		    syscall(SYS_setresuid, cred->uid, cred->uid, cred->uid) < 0 ||
		    (cred->uid != 0 && syscall(SYS_setuid, 0) == 0))
			_exit(3);
	}
	for (int i = 0; i < spec->n_binds; i++) {
		const struct task_bind *b = &spec->binds[i];
		struct bind_msg m = {.idx = i};
		int fd;
		open_one(b, false, &m, &fd);
		char cbuf[CMSG_SPACE(sizeof(int))];
		memset(cbuf, 0, sizeof cbuf);
		struct iovec iov = {.iov_base = &m, .iov_len = sizeof m};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
		/* The descriptor goes back even when an access is missing: the
		 * parent says first whether the path may be bound at all. */
		bool ok = fd >= 0 && !m.err;
		if (ok) {
			mh.msg_control = cbuf;
			mh.msg_controllen = sizeof cbuf;
			struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(c), &fd, sizeof fd);
		}
		if (sendmsg(sock, &mh, MSG_NOSIGNAL) < 0)
			_exit(4);
		if (!ok || m.missing || m.notdir)
			_exit(0); /* the first failure rejects the task */
		close(fd);
	}
	_exit(0);
}

static const char *const bkey[] = {"cwd", "bind", "ro"};

static void missing_words(int missing, char *buf, size_t len)
{
	const char *w[3];
	int n = 0;
	if (missing & ACC_READ)
		w[n++] = "read";
	if (missing & ACC_WRITE)
		w[n++] = "write";
	if (missing & ACC_SEARCH)
		w[n++] = "search";
	snprintf(buf, len, "%s%s%s%s%s", n > 0 ? w[0] : "", n == 3 ? ", " : n == 2 ? " and " : "",
		 n > 1 ? w[1] : "", n == 3 ? " and " : "", n == 3 ? w[2] : "");
}

/* The spool's directory and each one above it, as (dev, ino): a bind is
 * refused if it is one of them or if one of them is above it, whatever
 * path (another mount, a symlink) led to it. */
struct spool_ids {
	dev_t dev[64];
	ino_t ino[64];
	int n;
};

static void spool_ids_get(const char *spool, struct spool_ids *s)
{
	s->n = 0;
	int fd = open(spool, O_PATH | O_DIRECTORY | O_CLOEXEC);
	while (fd >= 0 && s->n < 64) {
		struct stat st;
		if (fstat(fd, &st) < 0)
			break;
		s->dev[s->n] = st.st_dev;
		s->ino[s->n] = st.st_ino;
		s->n++;
		int up = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		struct stat ust;
		close(fd);
		fd = up;
		if (fd >= 0 && fstat(fd, &ust) == 0 && ust.st_dev == st.st_dev && ust.st_ino == st.st_ino)
			break; /* the root */
	}
	if (fd >= 0)
		close(fd);
}

static bool is_spool_or_above(const struct spool_ids *s, const struct stat *st)
{
	for (int i = 0; i < s->n; i++)
		if (s->dev[i] == st->st_dev && s->ino[i] == st->st_ino)
			return true;
	return false;
}

/* A directory inside the spool: the spool is met walking up from it. */
static bool is_in_spool(const struct spool_ids *s, int fd)
{
	if (!s->n)
		return false;
	int cur = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	for (int depth = 0; cur >= 0 && depth < 4096; depth++) {
		struct stat st, ust;
		if (fstat(cur, &st) < 0)
			break;
		if (st.st_dev == s->dev[0] && st.st_ino == s->ino[0]) {
			close(cur);
			return true;
		}
		int up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		close(cur);
		cur = up;
		if (cur >= 0 && fstat(cur, &ust) == 0 && ust.st_dev == st.st_dev && ust.st_ino == st.st_ino)
			break;
	}
	if (cur >= 0)
		close(cur);
	return false;
}

/* Is path dir, or in it? A file in the spool has no ".." to walk up. */
static bool under(const char *dir, const char *path)
{
	size_t l = strlen(dir);
	return l && strncmp(dir, path, l) == 0 && (path[l] == '\0' || path[l] == '/');
}

void binds_close(struct binds_opened *b)
{
	for (int i = 0; i < b->n; i++)
		if (b->fd[i] >= 0)
			close(b->fd[i]);
	b->n = 0;
}


/* path (a bind's, clean) is a proper ancestor of spool, by its path. */
static bool path_above(const char *path, const char *spool)
{
	size_t l = strlen(path);
	return strncmp(path, spool, l) == 0 && spool[l] == '/';
}

/* A bind above the spool that a mask covers: the path asked for is the
 * one it leads to (no link on the way), and the spool is below it by
 * that path, where binds_spool_below put the mask. */
static bool above_by_path(const char *path, const char *real, const char *spool)
{
	return strcmp(path, real) == 0 && path_above(path, spool);
}

const char *binds_spool_below(const struct task_spec *spec, const char *spool)
{
	for (int i = 0; i < spec->n_binds; i++)
		if (path_above(spec->binds[i].path, spool))
			return spool;
	return NULL;
}

/* The worker's word on one bind, opened as its submitter (fd, m): 0, or
 * -EACCES (or -EIO when the opener failed) with err saying why, as the
 * result's error will. fd is the caller's to close. */
static int judge(const struct task_bind *b, int fd, const struct bind_msg *m,
		 const struct spool_ids *sid, const char *spool, bool masked, const char *who, char *err,
		 size_t errlen)
{
	/* Which of the worker's descriptors are open is none of hers: the
	 * spawn thread opening as her is the worker's own to /proc/self/fd
	 * and fdinfo (same thread group), so a name not there, a file met on
	 * the way, a magic link met and a path into /proc all read alike. */
	static const char hidden[] =
		"No such file or directory (or not a directory, a link loop, or into /proc)";
	if (m->err)
		return ERR(-EACCES, "line %d: %s=%.300s cannot be opened as %s: %s", b->line,
			   bkey[b->mode], b->path, who,
			   m->err == ENOENT || m->err == ELOOP || m->err == ENOTDIR ? hidden
										 : strerror(m->err));
	if (fd < 0)
		return ERR(-EIO, "cannot open the task's paths: the opener sent no descriptor");
	/* Where it really is, as the submitter resolved it: the same
	 * refusals as for the path asked for, and the spool. */
	char proc[64], real[TASK_BIND_PATH_MAX + 32];
	struct stat st;
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	ssize_t rl = readlink(proc, real, sizeof real - 1);
	if (rl >= (ssize_t)sizeof real - 1)
		rl = -1;
	const char *why = NULL;
	if (rl <= 0 || fstat(fd, &st) < 0)
		why = "where it leads cannot be told";
	else {
		real[rl] = '\0';
		if (task_path_covers("/proc", real))
			return ERR(-EACCES, "line %d: %s=%.300s cannot be opened as %s: %s", b->line,
				   bkey[b->mode], b->path, who, hidden);
		if (m->notdir)
			return ERR(-EACCES, "line %d: cwd=%.300s is not a directory", b->line, b->path);
		if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
			why = "only a directory or a regular file can be bound";
		else if (real[0] != '/' || strcmp(real, "/") == 0)
			why = "it leads to the root directory, or outside of it";
		else if ((why = bind_path_refused(real)))
			;
		else if (sid->n && st.st_dev == sid->dev[0] && st.st_ino == sid->ino[0])
			why = "it is the spool";
		else if (is_spool_or_above(sid, &st) && !masked)
			why = "it holds the spool, which this backend cannot hide from the task (bwrap does)";
		else if (is_spool_or_above(sid, &st) && !above_by_path(b->path, real, spool))
			why = "it holds the spool by another path than its own, which the sandbox cannot "
			      "hide";
		else if ((S_ISDIR(st.st_mode) && is_in_spool(sid, fd)) || under(spool, real))
			why = "it is in the spool";
	}
	if (!why && m->missing) {
		char words[64];
		missing_words(m->missing, words, sizeof words);
		return ERR(-EACCES, "line %d: %s=%.300s: %s has no %s access to it", b->line,
			   bkey[b->mode], b->path, who, words);
	}
	if (why) {
		bool elsewhere = rl > 0 && strcmp(real, b->path);
		return ERR(-EACCES, "line %d: %s=%.300s is refused: %s%s%.300s%s", b->line,
			   bkey[b->mode], b->path, why, elsewhere ? " (it leads to " : "",
			   elsewhere ? real : "", elsewhere ? ")" : "");
	}
	return 0;
}

int binds_check(const struct task_spec *spec, const char *spool, bool masked, char *err,
		size_t errlen)
{
	struct spool_ids sid;
	char who[64], spool_real[PATH_MAX];
	spool_ids_get(spool, &sid);
	if (!realpath(spool, spool_real))
		spool_real[0] = '\0';
	spool = spool_real;
	snprintf(who, sizeof who, "uid %u", (unsigned)getuid());
	for (int i = 0; i < spec->n_binds; i++) {
		struct bind_msg m = {.idx = i};
		int fd;
		open_one(&spec->binds[i], false, &m, &fd);
		int r = judge(&spec->binds[i], fd, &m, &sid, spool, masked, who, err, errlen);
		if (fd >= 0)
			close(fd);
		if (r < 0)
			return r;
	}
	return 0;
}

int binds_open(const struct task_spec *spec, const struct run_cred *cred, const char *spool,
	       bool masked, struct binds_opened *out, char *err, size_t errlen)
{
	out->n = 0;
	if (!spec->n_binds)
		return 0;
	/* In this thread (as the submitter where she is not the worker's
	 * own user), or by a vforked child where the kernel is too old. */
	bool here = here_ok() && !binds_by_child, as_them = here && !ours(cred);
	int sv[2] = {-1, -1};
	pid_t pid = -1;
	if (!here && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return ERR(-errno, "cannot open the task's paths: socketpair: %s", strerror(errno));
	/* vfork: the worker's page tables are not copied (docs/
	 * PERFORMANCE.md, "The opener is the spawn thread"), and the child only
	 * makes system calls and exits; the socketpair holds all it sends,
	 * so it never waits on us, suspended until it is gone. */
	if (!here && (pid = vfork()) < 0) {
		int e = errno;
		close(sv[0]);
		close(sv[1]);
		return ERR(-e, "cannot open the task's paths: fork: %s", strerror(e));
	}
	if (pid == 0) {
		close(sv[0]);
		opener(spec, cred, sv[1]);
	}
	if (!here)
		close(sv[1]);
	struct spool_ids sid;
	spool_ids_get(spool, &sid);
	char spool_real[PATH_MAX];
	if (!realpath(spool, spool_real))
		spool_real[0] = '\0';
	int rc = 0;
	for (int i = 0; i < spec->n_binds && rc == 0; i++) {
		const struct task_bind *b = &spec->binds[i];
		struct bind_msg m = {.idx = i};
		ssize_t n = sizeof m;
		int fd = -1;
		if (here) {
			struct thread_cred k;
			int r = as_them ? thread_enter(cred, &k) : 0;
			if (r < 0) {
				rc = ERR(r, "cannot open the task's paths: cannot act as uid %u: %s",
					 (unsigned)cred->uid, strerror(-r));
				break;
			}
			open_one(b, true, &m, &fd);
			if (as_them)
				thread_leave(&k);
		} else {
			char cbuf[CMSG_SPACE(sizeof(int))];
			struct iovec iov = {.iov_base = &m, .iov_len = sizeof m};
			struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
					    .msg_controllen = sizeof cbuf};
			while ((n = recvmsg(sv[0], &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
				;
			for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c))
				if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
				    c->cmsg_len == CMSG_LEN(sizeof(int)))
					memcpy(&fd, CMSG_DATA(c), sizeof fd);
		}
		if (n != (ssize_t)sizeof m || m.idx != i) {
			if (fd >= 0)
				close(fd);
			rc = ERR(-EIO, "cannot open the task's paths: the opener (as uid %u) failed",
				 cred ? (unsigned)cred->uid : (unsigned)getuid());
			break;
		}
		char who[64];
		snprintf(who, sizeof who, "uid %u", cred ? (unsigned)cred->uid : (unsigned)getuid());
		if ((rc = judge(b, fd, &m, &sid, spool_real, masked, who, err, errlen)) < 0) {
			if (fd >= 0)
				close(fd);
			break;
		}
		out->fd[out->n++] = fd;
	}
	int status = 0;
	if (!here) {
		close(sv[0]);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
	}
	if (rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
		rc = ERR(-EIO, "cannot open the task's paths: the opener could not start as uid %u",
			 cred ? (unsigned)cred->uid : (unsigned)getuid());
	if (rc)
		binds_close(out);
	return rc;
}
