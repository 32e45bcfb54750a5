/* outdir.c - a bounded $KART_OUTDIR per task (see outdir.h for why a
 * tmpfs, mounted in a namespace of the worker's own). */
#define _GNU_SOURCE
#include "outdir.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "spool.h"
#include "util.h"

struct outdir_req {
	char op; /* 'm': mount, 'u': detach */
	char opts[128];
	char path[PATH_MAX];
};

static int send_reply(int s, int err, int fd)
{
	struct iovec io = {&err, sizeof err};
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1};
	if (fd >= 0) {
		m.msg_control = u.b;
		m.msg_controllen = sizeof u.b;
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof fd);
	}
	return sendmsg(s, &m, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

/* The holder, after fork: system calls only (the worker has threads, one
 * of which may have held malloc's lock at the fork). */
static void holder_main(int s) __attribute__((noreturn));
static void holder_main(int s)
{
	/* Mounts made here stay here: none propagates to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		_exit(1);
	static struct outdir_req q;
	for (;;) {
		union {
			char b[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} u;
		struct iovec io = {&q, sizeof q};
		struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = u.b,
				   .msg_controllen = sizeof u.b};
		ssize_t n = recvmsg(s, &m, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		int got = -1;
		if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			memcpy(&got, CMSG_DATA(c), sizeof got);
		if (n == 1 && q.op == 'f' && got >= 0) {
			/* Detach the mount this descriptor is the root of:
			 * wherever its directory was renamed since. No reply. */
			char p[32] = "/proc/self/fd/";
			int k = 14, v = got, digits = 1;
			while (v /= 10)
				digits++;
			for (int i = digits - 1, x = got; i >= 0; i--, x /= 10)
				p[k + i] = (char)('0' + x % 10);
			p[k + digits] = '\0';
			(void)umount2(p, MNT_DETACH);
			close(got);
			continue;
		}
		if (got >= 0)
			close(got);
		if ((size_t)n != sizeof q) {
			(void)send_reply(s, EINVAL, -1);
			continue;
		}
		q.path[sizeof q.path - 1] = q.opts[sizeof q.opts - 1] = '\0';
		if (q.op == 'u') {
			(void)send_reply(s, umount2(q.path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 ? errno : 0, -1);
			continue;
		}
		if (mount("kart-out", q.path, "tmpfs", MS_NOSUID | MS_NODEV, q.opts) < 0) {
			(void)send_reply(s, errno, -1);
			continue;
		}
		int fd = open(q.path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			int e = errno;
			(void)umount2(q.path, MNT_DETACH);
			(void)send_reply(s, e, -1);
			continue;
		}
		if (send_reply(s, 0, fd) < 0)
			(void)umount2(q.path, MNT_DETACH);
		close(fd);
	}
}

static int write_at(const char *path, const char *s)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return write_all(fd, s, strlen(s)) < 0 ? -errno : 0;
}

int outdir_ns_start(struct outdir_ns *o, char *err, size_t errlen)
{
	int sv[2], up[2], go[2];
	int r;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return r = -errno, ERR(r, "socketpair: %s", strerror(-r));
	if (pipe2(up, O_CLOEXEC) < 0) {
		r = -errno;
		close(sv[0]), close(sv[1]);
		return ERR(r, "pipe: %s", strerror(-r));
	}
	if (pipe2(go, O_CLOEXEC) < 0) {
		r = -errno;
		close(sv[0]), close(sv[1]), close(up[0]), close(up[1]);
		return ERR(r, "pipe: %s", strerror(-r));
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		r = -errno;
		close(sv[0]), close(sv[1]), close(up[0]), close(up[1]), close(go[0]), close(go[1]);
		return ERR(r, "fork: %s", strerror(-r));
	}
	if (pid == 0) {
		char c = 'x';
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(1);
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) {
			int e = errno;
			(void)!write(up[1], &e, sizeof e);
			_exit(1);
		}
		int e = 0;
		if (write(up[1], &e, sizeof e) != sizeof e || read(go[0], &c, 1) != 1)
			_exit(1);
		/* Nothing of the worker's but the socket. */
		if (dup2(sv[1], 3) < 0 || syscall(SYS_close_range, 4U, ~0U, 0U) < 0)
			_exit(1);
		holder_main(3);
	}
	close(sv[1]), close(up[1]), close(go[0]);
	int e = -1;
	ssize_t n = read(up[0], &e, sizeof e);
	close(up[0]);
	char p[64], map[64];
	if (n != sizeof e || e != 0) {
		r = n == sizeof e ? -e : -ECHILD;
		snprintf(err, errlen, "cannot make a user and mount namespace: %s", strerror(-r));
		goto fail;
	}
	/* Root maps every id (tasks run as their submitters); anyone else
	 * only their own, which is all their tasks run as. */
	if (geteuid() == 0) {
		static const char *const f[] = {"uid_map", "gid_map"};
		for (size_t i = 0; i < ARRAY_SIZE(f); i++)
			if (snprintf(p, sizeof p, "/proc/%d/%s", (int)pid, f[i]) > 0 &&
			    (r = write_at(p, "0 0 4294967295\n")) < 0) {
				snprintf(err, errlen, "cannot write the namespace's %s: %s", f[i], strerror(-r));
				goto fail;
			}
	} else {
		snprintf(p, sizeof p, "/proc/%d/setgroups", (int)pid);
		if ((r = write_at(p, "deny\n")) < 0) {
			snprintf(err, errlen, "cannot write the namespace's setgroups: %s", strerror(-r));
			goto fail;
		}
		snprintf(p, sizeof p, "/proc/%d/uid_map", (int)pid);
		snprintf(map, sizeof map, "%u %u 1\n", (unsigned)geteuid(), (unsigned)geteuid());
		if ((r = write_at(p, map)) < 0) {
			snprintf(err, errlen, "cannot write the namespace's uid_map: %s", strerror(-r));
			goto fail;
		}
		snprintf(p, sizeof p, "/proc/%d/gid_map", (int)pid);
		snprintf(map, sizeof map, "%u %u 1\n", (unsigned)getegid(), (unsigned)getegid());
		if ((r = write_at(p, map)) < 0) {
			snprintf(err, errlen, "cannot write the namespace's gid_map: %s", strerror(-r));
			goto fail;
		}
	}
	snprintf(p, sizeof p, "/proc/%d/ns/user", (int)pid);
	o->userns = open(p, O_RDONLY | O_CLOEXEC);
	snprintf(p, sizeof p, "/proc/%d/ns/mnt", (int)pid);
	o->mntns = open(p, O_RDONLY | O_CLOEXEC);
	if (o->userns < 0 || o->mntns < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot open the holder's namespaces: %s", strerror(-r));
		goto fail;
	}
	if (write(go[1], "g", 1) != 1) {
		r = -errno;
		snprintf(err, errlen, "the holder is gone: %s", strerror(-r));
		goto fail;
	}
	close(go[1]);
	o->pid = pid;
	o->sock = sv[0];
	return 0;
fail:
	close(go[1]);
	close(sv[0]);
	(void)kill(pid, SIGKILL);
	(void)waitpid(pid, NULL, 0);
	if (o->userns >= 0)
		close(o->userns);
	if (o->mntns >= 0)
		close(o->mntns);
	o->userns = o->mntns = -1;
	return r;
}

void outdir_ns_stop(struct outdir_ns *o)
{
	if (o->sock >= 0)
		close(o->sock); /* the holder sees EOF and exits */
	if (o->pid > 0)
		(void)waitpid(o->pid, NULL, 0);
	if (o->userns >= 0)
		close(o->userns);
	if (o->mntns >= 0)
		close(o->mntns);
	o->sock = o->userns = o->mntns = -1;
	o->pid = 0;
}

static int request(struct outdir_ns *o, const struct outdir_req *q, int *fd)
{
	if (fd)
		*fd = -1;
	int err = 0;
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec io = {&err, sizeof err};
	struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = u.b,
			   .msg_controllen = sizeof u.b};
	pthread_mutex_lock(&o->mu);
	if (o->sock < 0) {
		pthread_mutex_unlock(&o->mu);
		return -ENOTCONN;
	}
	ssize_t n = send(o->sock, q, sizeof *q, MSG_NOSIGNAL);
	if (n == (ssize_t)sizeof *q)
		n = recvmsg(o->sock, &m, MSG_CMSG_CLOEXEC);
	pthread_mutex_unlock(&o->mu);
	if (n < 0)
		return -errno;
	if (n != sizeof err)
		return -EPIPE; /* the holder died */
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	int got = -1;
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
		memcpy(&got, CMSG_DATA(c), sizeof got);
	if (err) {
		if (got >= 0)
			close(got);
		return -err;
	}
	if (fd)
		*fd = got;
	else if (got >= 0)
		close(got);
	return 0;
}

int outdir_mount(struct outdir_ns *o, const char *path, uint64_t bytes, uint64_t files, uid_t uid,
		 gid_t gid)
{
	static struct outdir_req zero;
	struct outdir_req q = zero;
	q.op = 'm';
	/* nr_inodes counts the root too. */
	if (pathfmt(q.path, sizeof q.path, "%s", path) < 0 ||
	    pathfmt(q.opts, sizeof q.opts, "size=%llu,nr_inodes=%llu,uid=%u,gid=%u,mode=0700",
		    (unsigned long long)bytes, (unsigned long long)files + 1, (unsigned)uid,
		    (unsigned)gid) < 0)
		return -ENAMETOOLONG;
	int fd, r = request(o, &q, &fd);
	if (r == 0 && fd < 0)
		r = -EPROTO;
	return r < 0 ? r : fd;
}

int outdir_umount(struct outdir_ns *o, const char *path)
{
	static struct outdir_req zero;
	struct outdir_req q = zero;
	q.op = 'u';
	if (pathfmt(q.path, sizeof q.path, "%s", path) < 0)
		return -ENAMETOOLONG;
	return request(o, &q, NULL);
}

int outdir_release(struct outdir_ns *o, int fd)
{
	char op = 'f';
	struct iovec io = {&op, 1};
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = u.b,
			   .msg_controllen = sizeof u.b};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof fd);
	/* Under the lock: never between a mount request and its reply's
	 * reader, though a message alone could not be split anyway. */
	pthread_mutex_lock(&o->mu);
	ssize_t n = o->sock < 0 ? -1 : sendmsg(o->sock, &m, MSG_NOSIGNAL);
	int e = n < 0 ? (o->sock < 0 ? ENOTCONN : errno) : 0;
	pthread_mutex_unlock(&o->mu);
	return -e;
}

void outdir_ns_lost(struct outdir_ns *o)
{
	pthread_mutex_lock(&o->mu);
	if (o->sock >= 0)
		close(o->sock);
	o->sock = -1;
	pthread_mutex_unlock(&o->mu);
}

int outdir_join(int userns, int mntns)
{
	if (syscall(SYS_setns, userns, CLONE_NEWUSER) < 0 || syscall(SYS_setns, mntns, CLONE_NEWNS) < 0)
		return -errno;
	return 0;
}

bool outdir_full(int src)
{
	struct statfs sf;
	return fstatfs(src, &sf) == 0 && (sf.f_bavail == 0 || sf.f_ffree == 0);
}

bool outdir_empty(int src)
{
	struct statfs sf;
	return fstatfs(src, &sf) == 0 && sf.f_files - sf.f_ffree <= 1;
}

/* One regular file, up to its size at the look (it cannot grow: the run
 * is over). 0, or the destination's -errno; a source that cannot be read
 * is lost, not an error of the spool's. */
static int copy_file(int sdir, const char *name, int ddir, const struct stat *st, bool *lost)
{
	*lost = false;
	_cleanup_close_ int in = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (in < 0) {
		*lost = true;
		return 0;
	}
	mode_t mode = (st->st_mode & S_IXUSR) ? 0755 : 0644;
	_cleanup_close_ int out =
		openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (out < 0)
		return -errno;
	off_t left = st->st_size;
	while (left > 0) {
		ssize_t n = sendfile(out, in, NULL, left > (1 << 30) ? (1 << 30) : (size_t)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EINVAL || errno == ENOSYS)) {
			char buf[65536];
			n = read(in, buf, sizeof buf < (size_t)left ? sizeof buf : (size_t)left);
			if (n > 0 && write_all(out, buf, (size_t)n) < 0)
				return -errno;
		}
		if (n < 0)
			return errno == EIO || errno == ENOSPC || errno == EDQUOT ? -errno : (*lost = true, 0);
		if (n == 0)
			break; /* shorter than it was: what is there is kept */
		left -= n;
	}
	/* The mode as asked, whatever our umask took from it. */
	if (fchmod(out, mode) < 0)
		return -errno;
	return 0;
}

struct frame {
	DIR *src;
	int dst;
};

int outdir_copy(int src, int dst, struct outdir_copy *c)
{
	c->bytes = c->files = c->lost_files = c->lost_bytes = 0;
	c->too_deep = false;
	c->dst_err = 0;
	c->full = outdir_full(src);
	int depth_max = c->depth_max < 1 ? 1 : c->depth_max > OUTDIR_DEPTH_MAX ? OUTDIR_DEPTH_MAX
										: c->depth_max;
	struct frame st[OUTDIR_DEPTH_MAX + 1];
	int sp = 0;
	int s0 = openat(src, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d0 = s0 >= 0 ? fdopendir(s0) : NULL;
	if (!d0) {
		int e = -errno;
		if (s0 >= 0)
			close(s0);
		return e;
	}
	st[sp++] = (struct frame){d0, dst};
	while (sp > 0) {
		struct frame *f = &st[sp - 1];
		errno = 0;
		struct dirent *de = c->dst_err ? NULL : readdir(f->src);
		if (!de) {
			closedir(f->src);
			if (sp > 1)
				close(f->dst);
			sp--;
			continue;
		}
		const char *e = de->d_name;
		if (strcmp(e, ".") == 0 || strcmp(e, "..") == 0)
			continue;
		struct stat s;
		if (fstatat(dirfd(f->src), e, &s, AT_SYMLINK_NOFOLLOW) < 0) {
			c->lost_files++;
			continue;
		}
		bool room = !c->files_max || c->files < c->files_max;
		if (S_ISDIR(s.st_mode)) {
			if (!room || sp > depth_max) {
				c->too_deep |= room;
				c->lost_files++;
				continue;
			}
			if (mkdirat(f->dst, e, 0755) < 0 || fchmodat(f->dst, e, 0755, 0) < 0) {
				c->dst_err = -errno;
				continue;
			}
			int ns = openat(dirfd(f->src), e, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			DIR *nd = ns >= 0 ? fdopendir(ns) : NULL;
			if (!nd) {
				if (ns >= 0)
					close(ns);
				c->lost_files++;
				continue;
			}
			int ndst = openat(f->dst, e, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (ndst < 0) {
				c->dst_err = -errno;
				closedir(nd);
				continue;
			}
			c->files++;
			st[sp++] = (struct frame){nd, ndst};
		} else if (S_ISREG(s.st_mode)) {
			if (!room || (c->bytes_max && c->bytes + (uint64_t)s.st_size > c->bytes_max)) {
				c->lost_files++;
				c->lost_bytes += (uint64_t)s.st_size;
				continue;
			}
			bool lost;
			int r = copy_file(dirfd(f->src), e, f->dst, &s, &lost);
			if (r < 0) {
				c->dst_err = r;
				(void)unlinkat(f->dst, e, 0);
			} else if (lost) {
				c->lost_files++;
				c->lost_bytes += (uint64_t)s.st_size;
				(void)unlinkat(f->dst, e, 0);
			} else {
				c->files++;
				c->bytes += (uint64_t)s.st_size;
			}
		} else if (S_ISLNK(s.st_mode) && room) {
			char t[PATH_MAX];
			ssize_t n = readlinkat(dirfd(f->src), e, t, sizeof t - 1);
			if (n < 0) {
				c->lost_files++;
				continue;
			}
			t[n] = '\0';
			if (symlinkat(t, f->dst, e) < 0)
				c->dst_err = -errno;
			else
				c->files++;
		} else {
			/* A FIFO, socket or device (or no room): not kept. */
			c->lost_files++;
		}
	}
	/* Durable before the result names them: one call for the lot. */
	if (syncfs(dst) < 0 && !c->dst_err)
		c->dst_err = -errno;
	return 0;
}

/* Everything in dir goes (not dir itself): what a copy left when the
 * whole of it is not kept. */
static void empty_dir(int dir)
{
	_cleanup_close_ int d = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dp = d >= 0 ? fdopendir(d) : NULL;
	if (!dp)
		return;
	d = -1;
	struct dirent *de;
	while ((de = readdir(dp)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			(void)rm_rf_at(dirfd(dp), de->d_name);
	closedir(dp);
}

static const char *size_text(uint64_t n, char *buf, size_t len)
{
	static const char u[] = "KMGT";
	int i = -1;
	while (n >= 1024 && n % 1024 == 0 && i < 3) {
		n /= 1024;
		i++;
	}
	if (i < 0)
		snprintf(buf, len, "%llu bytes", (unsigned long long)n);
	else
		snprintf(buf, len, "%llu%c", (unsigned long long)n, u[i]);
	return buf;
}

void outdir_move_run(struct outdir_move *m)
{
	struct statfs sf;
	m->kept = false;
	m->why[0] = '\0';
	m->bytes = m->files = 0;
	if (fstatfs(m->src, &sf) == 0) {
		m->bytes = (uint64_t)(sf.f_blocks - sf.f_bfree) * (uint64_t)sf.f_bsize;
		m->files = sf.f_files > sf.f_ffree ? (uint64_t)(sf.f_files - sf.f_ffree - 1) : 0;
	}
	char a[32];
	m->dst = openat(m->dst_at, m->dst_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (m->dst < 0) {
		snprintf(m->why, sizeof m->why, "$KART_OUTDIR could not be kept: %.120s: %s", m->dst_name,
			 strerror(errno));
		close(m->src);
		m->src = -1;
		return;
	}
	/* Over a bound, none of it: part of a set of files would mislead,
	 * and the task was told (ENOSPC) when it wrote past it. */
	if (outdir_full(m->src)) {
		m->c.full = true;
		if (sf.f_ffree == 0)
			snprintf(m->why, sizeof m->why,
				 "$KART_OUTDIR reached its bound of %llu files ([limits] artifacts_files): "
				 "writes past it failed with ENOSPC, and none of it was kept",
				 (unsigned long long)m->c.files_max);
		else
			snprintf(m->why, sizeof m->why,
				 "$KART_OUTDIR reached its bound of %s ([limits] artifacts_max): writes past "
				 "it failed with ENOSPC, and none of it was kept",
				 size_text(m->c.bytes_max, a, sizeof a));
	} else if (fchown(m->dst, geteuid(), getegid()) < 0 || fchmod(m->dst, 0700) < 0) {
		/* The top is the worker's, 0700, whatever spare it was. */
		snprintf(m->why, sizeof m->why, "$KART_OUTDIR could not be kept: %s", strerror(errno));
	} else if (outdir_copy(m->src, m->dst, &m->c) < 0) {
		snprintf(m->why, sizeof m->why, "$KART_OUTDIR could not be read: %s", strerror(errno));
	} else if (m->c.dst_err) {
		snprintf(m->why, sizeof m->why,
			 "$KART_OUTDIR could not be kept: the spool's filesystem refused a write (%s)",
			 strerror(-m->c.dst_err));
	} else if (m->c.too_deep) {
		snprintf(m->why, sizeof m->why,
			 "$KART_OUTDIR held directories deeper than %d levels ([limits] artifacts_depth): "
			 "none of it was kept",
			 m->c.depth_max);
	} else {
		m->kept = true;
		if (m->c.lost_files)
			snprintf(m->why, sizeof m->why,
				 "%llu entries of $KART_OUTDIR (FIFOs, sockets, devices or unreadable files) "
				 "were not kept",
				 (unsigned long long)m->c.lost_files);
		if (m->reader != geteuid() && grant_read_dir(m->dst, m->reader) < 0 && !m->why[0])
			snprintf(m->why, sizeof m->why,
				 "$KART_OUTDIR was kept, but its submitter could not be given read access: %s",
				 strerror(errno));
	}
	if (!m->kept)
		empty_dir(m->dst);
	/* The tmpfs goes with its last descriptor: every inode freed here. */
	close(m->src);
	close(m->dst);
	m->src = m->dst = -1;
}

static void *mover_main(void *arg)
{
	struct outdir_mover *mv = arg;
	pthread_mutex_lock(&mv->mu);
	for (;;) {
		while (!mv->todo && !mv->quit)
			pthread_cond_wait(&mv->cv, &mv->mu);
		struct outdir_move *m = mv->todo;
		if (!m)
			break;
		mv->todo = m->next;
		if (!mv->todo)
			mv->tail = &mv->todo;
		pthread_mutex_unlock(&mv->mu);
		outdir_move_run(m);
		m->done(m);
		pthread_mutex_lock(&mv->mu);
	}
	pthread_mutex_unlock(&mv->mu);
	return NULL;
}

int outdir_mover_start(struct outdir_mover *mv)
{
	pthread_mutex_init(&mv->mu, NULL);
	pthread_cond_init(&mv->cv, NULL);
	mv->todo = NULL;
	mv->tail = &mv->todo;
	mv->quit = false;
	int r = pthread_create(&mv->th, NULL, mover_main, mv);
	if (r)
		return -r;
	(void)pthread_setname_np(mv->th, "kart-outdir");
	mv->started = true;
	return 0;
}

void outdir_mover_add(struct outdir_mover *mv, struct outdir_move *m)
{
	m->next = NULL;
	pthread_mutex_lock(&mv->mu);
	*mv->tail = m;
	mv->tail = &m->next;
	pthread_mutex_unlock(&mv->mu);
	pthread_cond_signal(&mv->cv);
}

/* The same steps as the worker's helper_stop, over a struct of this
 * layer's own: outdir.c is below the worker and knows no struct helper
 * (see outdir_moved, worker_commit.c). */
void outdir_mover_stop(struct outdir_mover *mv)
{
	if (!mv->started)
		return;
	pthread_mutex_lock(&mv->mu);
	mv->quit = true;
	pthread_mutex_unlock(&mv->mu);
	pthread_cond_signal(&mv->cv);
	pthread_join(mv->th, NULL);
	mv->started = false;
}
