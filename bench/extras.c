/* bench/extras: the CPU time of each per-task step a task of another
 * member of a shared spool adds (issue 36), made here as the worker makes
 * it, in a loop, and timed by the CPU it takes (this process's and its
 * reaped children's), not by the clock: a loaded machine stretches the
 * clock, not the work.
 *
 *   extras DIR UID N
 *	DIR: an empty directory on the spool's filesystem; UID: the
 *	submitter (root runs this). Prints one line per step: NAME and its
 *	CPU in us, per file for acl, per task for the others.
 *
 * Steps:
 *   acl     a POSIX ACL entry for UID on a new file (grant_read): the
 *           result's JSON, and each capture that got a byte
 *   hoist   a drop's two renames into new/ (drop/USER/NAME ->
 *           new/.hoist.UID.USER:NAME -> new/USER:NAME), the workers' lock
 *           around the second (flock, and its release), with the look at
 *           what arrived (an open and an fstat)
 *   opener  cwd= opened as UID: the thread takes UID's filesystem
 *           credentials (groups, fsgid, fsuid, no capability), opens the
 *           path by openat2, checks it, and takes its own back, checked
 *           (binds.c)
 *   tmpfs   a tmpfs mounted on a directory and opened, then detached by
 *           its descriptor (outdir.c's holder), in a mount namespace of
 *           its own */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

static double cpu_us(void)
{
	struct rusage s, c;
	getrusage(RUSAGE_SELF, &s);
	getrusage(RUSAGE_CHILDREN, &c);
	return (s.ru_utime.tv_sec + s.ru_stime.tv_sec + c.ru_utime.tv_sec + c.ru_stime.tv_sec) * 1e6 +
	       s.ru_utime.tv_usec + s.ru_stime.tv_usec + c.ru_utime.tv_usec + c.ru_stime.tv_usec;
}

static void die(const char *what)
{
	fprintf(stderr, "extras: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int mkfile(const char *dir, const char *name)
{
	char p[8192];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		die(p);
	return fd;
}

static void acl(const char *dir, uid_t uid, int n)
{
	struct {
		uint16_t tag, perm;
		uint32_t id;
	} e[] = {{1, 6, ~0u}, {2, 4, uid}, {4, 0, ~0u}, {0x10, 4, ~0u}, {0x20, 0, ~0u}};
	char buf[4 + sizeof e];
	uint32_t v = 2;
	memcpy(buf, &v, 4);
	memcpy(buf + 4, e, sizeof e);
	int fds[n];
	char name[32];
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof name, "a%d", i);
		fds[i] = mkfile(dir, name);
	}
	double c0 = cpu_us();
	for (int i = 0; i < n; i++)
		if (fsetxattr(fds[i], "system.posix_acl_access", buf, sizeof buf, 0) < 0)
			die("fsetxattr");
	printf("acl %.1f\n", (cpu_us() - c0) / n);
	for (int i = 0; i < n; i++) {
		close(fds[i]);
		snprintf(name, sizeof name, "%s/a%d", dir, i);
		unlink(name);
	}
}

static void hoist(const char *dir, uid_t uid, int n)
{
	char drop[4096], nw[4096], name[64], dot[96], fin[96];
	snprintf(drop, sizeof drop, "%s/drop", dir);
	snprintf(nw, sizeof nw, "%s/new", dir);
	if (mkdir(drop, 0700) < 0 || mkdir(nw, 0755) < 0)
		die("mkdir");
	int dd = open(drop, O_RDONLY | O_DIRECTORY | O_CLOEXEC), nd = open(nw, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	/* The workers' lock around the look and the last rename (cur/.hoist). */
	int lk = openat(nd, ".hoist-lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lk < 0)
		die("lock");
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof name, "t%d", i);
		close(mkfile(drop, name));
	}
	double c0 = cpu_us();
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof name, "t%d", i);
		snprintf(dot, sizeof dot, ".hoist.%u.u:t%d", (unsigned)uid, i);
		snprintf(fin, sizeof fin, "u:t%d", i);
		struct stat st;
		if (syscall(SYS_renameat2, dd, name, nd, dot, 1 /* RENAME_NOREPLACE */) < 0)
			die("renameat2");
		if (flock(lk, LOCK_EX) < 0)
			die("flock");
		int fd = openat(nd, dot, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0)
			die("look");
		close(fd);
		if (syscall(SYS_renameat2, nd, dot, nd, fin, 1) < 0)
			die("renameat2");
		(void)flock(lk, LOCK_UN);
	}
	printf("hoist %.1f\n", (cpu_us() - c0) / n);
	for (int i = 0; i < n; i++) {
		snprintf(fin, sizeof fin, "u:t%d", i);
		unlinkat(nd, fin, 0);
	}
	close(dd);
	close(nd);
	rmdir(drop);
	rmdir(nw);
}

static long caps(int get, struct __user_cap_data_struct *d)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	return syscall(get ? SYS_capget : SYS_capset, &h, d);
}

static void opener(const char *dir, uid_t uid, int n)
{
	double c0 = cpu_us();
	for (int i = 0; i < n; i++) {
		/* Enter: the thread's groups, fsgid, fsuid; no capability. */
		gid_t saved[64], none[1] = {65534};
		struct __user_cap_data_struct cap[2], zero[2];
		long ng = syscall(SYS_getgroups, 64, saved);
		if (ng < 0 || caps(1, cap) < 0)
			die("getgroups");
		memcpy(zero, cap, sizeof zero);
		zero[0].effective = zero[1].effective = 0;
		if (syscall(SYS_setgroups, 1, none) < 0)
			die("setgroups");
		syscall(SYS_setfsgid, 65534);
		syscall(SYS_setfsuid, uid);
		if (caps(0, zero) < 0 || (uid_t)syscall(SYS_setfsuid, -1) != uid)
			die("capset");
		struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC, .resolve = RESOLVE_NO_MAGICLINKS};
		int fd = (int)syscall(SYS_openat2, AT_FDCWD, dir, &how, sizeof how);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0)
			die("opener: openat2");
		for (int k = 0; k < 3; k++)
			(void)syscall(SYS_faccessat2, fd, "", k == 0 ? R_OK : k == 1 ? X_OK : W_OK,
				      AT_EMPTY_PATH | AT_EACCESS);
		/* Leave, and check. */
		struct __user_cap_data_struct back[2];
		gid_t g[64];
		caps(0, cap);
		syscall(SYS_setfsuid, 0);
		syscall(SYS_setfsgid, 0);
		syscall(SYS_setgroups, ng, saved);
		if ((uid_t)syscall(SYS_setfsuid, -1) != 0 || (gid_t)syscall(SYS_setfsgid, -1) != 0 ||
		    syscall(SYS_getgroups, 64, g) != ng || caps(1, back) < 0)
			die("opener: credentials not back");
		close(fd);
	}
	printf("opener %.1f\n", (cpu_us() - c0) / n);
}

static void tmpfs(const char *dir, int n)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/out", dir);
	if (mkdir(p, 0700) < 0)
		die("mkdir");
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
			die("unshare");
		for (int i = 0; i < n; i++) {
			if (mount("kart-out", p, "tmpfs", MS_NOSUID | MS_NODEV, "size=256m,nr_inodes=10000,mode=0700") < 0)
				die("mount");
			int fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			char fp[32];
			snprintf(fp, sizeof fp, "/proc/self/fd/%d", fd);
			if (fd < 0 || umount2(fp, MNT_DETACH) < 0)
				die("umount2");
			close(fd);
		}
		_exit(0);
	}
	double c0 = cpu_us();
	int st;
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		exit(1);
	printf("tmpfs %.1f\n", (cpu_us() - c0) / n);
	rmdir(p);
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: extras DIR UID N\n");
		return 2;
	}
	uid_t uid = (uid_t)atoi(argv[2]);
	int n = atoi(argv[3]);
	acl(argv[1], uid, n);
	hoist(argv[1], uid, n);
	opener(argv[1], uid, n);
	tmpfs(argv[1], n);
	return 0;
}
