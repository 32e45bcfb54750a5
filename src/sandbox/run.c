/* run.c - fork, hand the child its descriptors, exec; pump output;
 * reap. The child holds a lock on its claim for the life of the run,
 * passed down to bwrap and the launcher (but not to the task). */
#define _GNU_SOURCE
#include "run.h"

#include "proctree.h"
#include "outdir.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "confine.h"
#include "sandbox.h"
#include "util.h"
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#endif

#define CLOSE_RANGE_CLOEXEC_ (1U << 2)

static int devnull_fd = -1;
static void devnull_open(void) { devnull_fd = open("/dev/null", O_RDONLY | O_CLOEXEC); }

static int pidfd_open_(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

static void child_fail(int status_w, const char *what)
{
	char buf[256];
	int n = snprintf(buf, sizeof buf, "spawn %s: %s\n", what, strerror(errno));
	(void)write_all(STDERR_FILENO, buf, (size_t)n);
	(void)status_w;
	_exit(126);
}

/* dup2 that also works when from == to (dup2 would keep FD_CLOEXEC). */
static int move_fd(int from, int to)
{
	if (from == to)
		return fcntl(to, F_SETFD, 0);
	return dup2(from, to);
}

/* In the child: become the task's user, or say why not and exit 125.
 * Groups first, then gid, then uid: each needs the privilege the next
 * gives up. */
static void child_become(const struct run_cred *c, pid_t parent, int stfd, struct confine_mem *stmem)
{
	/* Raw system calls, not libc's: in a process with threads (the
	 * worker's commit thread) libc's set*id make every thread it knows
	 * of change too, and a child born of a raw clone3 inherits that
	 * list without the threads. The kernel's calls change this process
	 * alone, which is what is wanted. */
	const char *what = NULL;
	/* For another uid, the worker's bounding set goes first, while
	 * CAP_SETPCAP is ours, so that the task holds no capability at all.
	 * Best effort: that uid gets nothing from it at execve, under
	 * no_new_privs. (bwrap's user namespace starts with a full set of
	 * its own. A root task keeps it here: bwrap as root needs
	 * CAP_SETFCAP, and with backend none kart-launch empties it.) */
	for (int cap = 0; c->uid != 0 && cap < 64; cap++) {
		int r = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
		if (r < 0)
			break; /* EINVAL: past the kernel's last capability */
		if (r == 1)
			(void)prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
	}
	if (syscall(SYS_setgroups, (size_t)c->ngroups, c->groups) < 0)
		what = "setgroups";
	else if (syscall(SYS_setresgid, c->gid, c->gid, c->gid) < 0)
		what = "setgid";
	else if (syscall(SYS_setresuid, c->uid, c->uid, c->uid) < 0)
		what = "setuid";
	else if (syscall(SYS_setuid, 0) == 0 && c->uid != 0)
		what = "setuid (root could be regained)";
	if (what) {
		char buf[160];
		int n = snprintf(buf, sizeof buf, "setuid-failed %s(%u): %s\n", what, (unsigned)c->uid,
				 strerror(errno));
		if (stmem)
			confine_mem_say(stmem, buf);
		else
			(void)write_all(stfd, buf, (size_t)n);
		(void)write_all(STDERR_FILENO, buf, (size_t)n);
		_exit(125);
	}
	/* A change of credentials clears the parent-death signal. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		_exit(126);
}

struct child_args {
	char *const *argv, *const *envp;
	int wdir;
	const char *name, *cwd;
	bool own_pgroup, own_session;
	const struct run_cred *cred;
	int seccomp_fd, outw, errw, stw, gor, gow;
	int devnull; /* /dev/null, opened once (or -1: the child opens it) */
	int stdin_fd; /* or this, if not -1 */
	pid_t parent;
	const struct run_direct *direct;
	struct confine_mem *stmem; /* direct, in our memory: status lines here (stw -1) */
	const struct run_extra *extra;
	/* The child's own join (run_join's self_fds), in our memory: why it
	 * failed into self_err. */
	const int *self_fds;
	int nself, self_err;
};

/* Backend none, after the descriptors, the lock and the switch to the
 * task's user: kart-launch's steps, "start", and the task's own exec.
 * The status pipe is close-on-exec (the task never holds it), and so is
 * every descriptor but 0, 1, 2 and the run lock. */
static void child_direct(struct child_args *a)
{
	struct confine c = *a->direct->c;
	c.status_fd = a->stw;
	c.status_mem = a->stmem;
	signal(SIGPIPE, SIG_DFL);
	if (confine_apply(&c, a->direct->abi, a->direct->filter, "kart") < 0)
		_exit(127);
	confine_status(&c, "start\n");
	if (syscall(SYS_close_range, 3U, 3U, CLOSE_RANGE_CLOEXEC_) < 0 ||
	    syscall(SYS_close_range, SANDBOX_LOCK_FD + 1U, ~0U, CLOSE_RANGE_CLOEXEC_) < 0)
		for (int fd = 3; fd < 1024; fd++)
			if (fd != SANDBOX_LOCK_FD)
				(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
	execve(c.prog[0], c.prog, a->envp);
	char buf[512];
	int n = snprintf(buf, sizeof buf, "kart: cannot run %s: %s\n", c.prog[0], strerror(errno));
	(void)write_all(STDERR_FILENO, buf, (size_t)n);
	_exit(127);
}

/* The child, from clone to exec. Only system calls and what cannot take a
 * lock or touch shared state: it may run in the worker's own memory
 * (spawn_vm), while the worker's other thread runs. */
static int child_main(struct child_args *a)
{
	int seccomp_fd = a->seccomp_fd;
	for (int i = 0; i < a->nself; i++)
		if (write(a->self_fds[i], "0", 1) != 1) {
			a->self_err = errno ? -errno : -EIO;
			_exit(126);
		}
	if (a->gor >= 0) {
		/* Nothing else until the parent says we are in place;
		 * EOF means it could not put us there. */
		char go;
		close(a->gow);
		ssize_t n;
		while ((n = read(a->gor, &go, 1)) < 0 && errno == EINTR)
			;
		if (n != 1)
			_exit(126);
	}
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != a->parent)
		_exit(126);
	if (a->own_session)
		(void)setsid();
	else if (a->own_pgroup)
		(void)setpgid(0, 0);
	int devnull = a->stdin_fd >= 0 ? a->stdin_fd
		      : a->devnull >= 0 ? a->devnull
					: open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (devnull < 0 || dup2(devnull, 0) < 0)
		child_fail(-1, "stdin");
	if (dup2(a->outw, 1) < 0 || dup2(a->errw, 2) < 0)
		child_fail(-1, "stdout");
	/* Now (stderr is the capture), while the holder's descriptors keep
	 * their numbers: the fixed ones below may take them. */
	if (a->extra && a->extra->join_ns && outdir_join(a->extra->userns_fd, a->extra->mntns_fd) < 0)
		child_fail(-1, "join the $KART_OUTDIR namespace");
	/* Out of the way of the fixed numbers before they are taken. */
	if (seccomp_fd >= 0 && seccomp_fd <= SANDBOX_SECCOMP_FD &&
	    (seccomp_fd = fcntl(seccomp_fd, F_DUPFD_CLOEXEC, SANDBOX_SECCOMP_FD + 1)) < 0)
		child_fail(-1, "seccomp fd");
	if (a->direct) {
		/* Kept close-on-exec, clear of the lock's number. */
		if (a->stw >= 0 && a->stw <= SANDBOX_SECCOMP_FD &&
		    (a->stw = fcntl(a->stw, F_DUPFD_CLOEXEC, SANDBOX_SECCOMP_FD + 1)) < 0)
			child_fail(-1, "status fd");
	} else if (move_fd(a->stw, SANDBOX_STATUS_FD) < 0)
		child_fail(-1, "status fd");
	/* The run lock: the claim's own lock file (a->name is .NAME.lock),
	 * which only the worker can open (cur/W is its alone), never the
	 * task file, which others may have open and could flock first. */
	int lk = openat(a->wdir, a->name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (lk < 0 || flock(lk, LOCK_EX | LOCK_NB) < 0)
		child_fail(-1, "run lock");
	if (move_fd(lk, SANDBOX_LOCK_FD) < 0)
		child_fail(-1, "run lock");
	/* The filter for bwrap --seccomp (which closes it once loaded)
	 * or for kart-launch with backend none. */
	if (seccomp_fd >= 0 && move_fd(seccomp_fd, SANDBOX_SECCOMP_FD) < 0)
		child_fail(-1, "seccomp fd");
	const struct run_extra *x = a->extra;
	if (x && x->nfds > 0) {
		/* Above the fixed numbers first, then into place: one of
		 * them may sit where another goes. Only the fixed ones lose
		 * close-on-exec. */
		int hi[64];
		int top = x->fd_base + x->nfds;
		for (int i = 0; i < x->nfds && i < 64; i++)
			if ((hi[i] = fcntl(x->fds[i], F_DUPFD_CLOEXEC, top)) < 0)
				child_fail(-1, "bind fd");
		for (int i = 0; i < x->nfds && i < 64; i++)
			if (move_fd(hi[i], x->fd_base + i) < 0)
				child_fail(-1, "bind fd");
	}
	if (x && x->umask >= 0)
		umask((mode_t)x->umask);
	if (a->cwd && chdir(a->cwd) < 0)
		child_fail(-1, "chdir");
	if (a->cred)
		child_become(a->cred, a->parent, a->direct ? a->stw : SANDBOX_STATUS_FD, a->stmem);
	if (a->direct)
		child_direct(a);
	execve(a->argv[0], a->argv, a->envp);
	child_fail(-1, a->argv[0]);
	return 126;
}

#define CLONE_INTO_CGROUP_ 0x200000000ULL
#define CLONE_PIDFD_ 0x1000ULL
struct clone_args_ {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls,
		set_tid, set_tid_size, cgroup;
};

#if defined(__x86_64__)
/* clone3 with CLONE_VM|CLONE_VFORK: the child runs child_main on a stack
 * of its own in our memory, and we sleep until it has exec'd or exited.
 * One stack serves every spawn: CLONE_VFORK means it is free again when
 * this returns. The child cannot return into C from the system call (its
 * stack is empty), so the call is made here, in assembly. */
static int child_trampoline(void *arg) { return child_main(arg); }

static pid_t spawn_vm(struct child_args *a, int cgroup_fd, int *pidfd)
{
	enum { STACK = 256 * 1024 };
	static __thread char *stack; /* one per spawning thread */
	if (!stack) {
		void *m = mmap(NULL, STACK, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
		if (m == MAP_FAILED)
			return -1;
		/* A guard page below: an overflow faults, never corrupts. */
		if (mprotect(m, 4096, PROT_NONE) < 0) {
			munmap(m, STACK);
			return -1;
		}
		stack = m;
	}
#ifdef __SANITIZE_ADDRESS__
	/* The last child left its frames poisoned in ASan's shadow (it exec'd
	 * or exited, never returned, on a stack ASan does not know): stale
	 * redzones that the next child would trip over (make check-asan). */
	__asan_unpoison_memory_region(stack, STACK);
#endif
	/* The pidfd comes with the clone (written here before the call
	 * returns), not from a pidfd_open after it. */
	struct clone_args_ cla = {.flags = CLONE_VM | CLONE_VFORK | CLONE_PIDFD_,
				  .pidfd = (uint64_t)(uintptr_t)pidfd, .exit_signal = SIGCHLD,
				  .stack = (uint64_t)(uintptr_t)stack, .stack_size = STACK};
	if (cgroup_fd >= 0) {
		cla.flags |= CLONE_INTO_CGROUP_;
		cla.cgroup = (uint64_t)cgroup_fd;
	}
	register int (*fn)(void *) __asm__("r12") = child_trampoline;
	register void *arg __asm__("r13") = a;
	long ret;
	__asm__ volatile("syscall\n\t"
			 "test %%rax, %%rax\n\t"
			 "jnz 1f\n\t"
			 /* The child: a fresh frame on the new stack. */
			 "xor %%ebp, %%ebp\n\t"
			 "mov %%r13, %%rdi\n\t"
			 "call *%%r12\n\t"
			 "mov %%eax, %%edi\n\t"
			 "mov $60, %%eax\n\t" /* SYS_exit */
			 "syscall\n\t"
			 "hlt\n\t"
			 "1:\n\t"
			 : "=a"(ret)
			 : "a"((long)SYS_clone3), "D"(&cla), "S"(sizeof cla), "r"(fn), "r"(arg)
			 : "rcx", "r11", "memory");
	if (ret < 0) {
		errno = (int)-ret;
		return -1;
	}
	return (pid_t)ret;
}
#else
static pid_t spawn_vm(struct child_args *a, int cgroup_fd, int *pidfd)
{
	(void)a, (void)cgroup_fd, (void)pidfd;
	errno = ENOSYS;
	return -1;
}
#endif

/* Whether this process has a controlling terminal, read once from
 * /proc/self/stat (its tty_nr); where that cannot be read, assume it has.
 * A child given a process group of its own gets a session of its own too
 * only then, to be cut off from that terminal. Without one, its own
 * process group is all it needs (to be signalled with its tree), and
 * setsid would also give it a scheduler autogroup of its own
 * (sched_autogroup_enabled), made and torn down for each task, at a cost
 * measurable per task (docs/PERFORMANCE.md, "No session without a
 * terminal"). */
static bool ctty = true;
static void ctty_probe(void)
{
	_cleanup_free_ char *t = NULL;
	if (read_file_at(AT_FDCWD, "/proc/self/stat", 4096, &t, NULL) < 0)
		return;
	const char *p = strrchr(t, ')');
	int tty;
	/* ") S ppid pgrp session tty_nr" */
	if (p && sscanf(p + 1, " %*c %*d %*d %*d %d", &tty) == 1)
		ctty = tty != 0;
}

int run_spawn_join(struct run *r, const struct run_req *q)
{
	struct run_join *join = q->join;
	const struct run_direct *direct = q->direct;
	bool own_pgroup = q->own_pgroup;
	int outp[2], errp[2], stp[2] = {-1, -1}, gop[2] = {-1, -1};
	memset(r, 0, sizeof *r);
	r->pidfd = r->status_pipe = r->out.pipe = r->err.pipe = -1;
	/* Sharing our memory (spawn_vm), a direct child writes its status
	 * lines into r->stmem: no pipe, unless that spawn fails and a fork
	 * follows. */
	bool vm = !join || join->born_is_enough;
	bool memst = vm && direct;
	if (pipe2(outp, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(errp, O_CLOEXEC) < 0) {
		int e = -errno;
		close(outp[0]);
		close(outp[1]);
		return e;
	}
	if (!memst && pipe2(stp, O_CLOEXEC) < 0) {
		int e = -errno;
		close(outp[0]);
		close(outp[1]);
		close(errp[0]);
		close(errp[1]);
		return e;
	}
	/* Every child's stdin: opened once, not once per child. */
	static pthread_once_t devnull_once = PTHREAD_ONCE_INIT, ctty_once = PTHREAD_ONCE_INIT;
	(void)pthread_once(&devnull_once, devnull_open);
	(void)pthread_once(&ctty_once, ctty_probe);
	pid_t parent = getpid();
	struct child_args ca = {.devnull = devnull_fd, .stdin_fd = q->stdin_fd, .argv = q->argv,
				.envp = q->envp, .wdir = q->wdir, .name = q->name, .cwd = q->cwd,
				.own_pgroup = own_pgroup, .own_session = own_pgroup && ctty, .cred = q->cred,
				.seccomp_fd = q->seccomp_fd, .outw = outp[1], .errw = errp[1],
				.stw = stp[1], .gor = -1, .gow = -1, .parent = parent,
				.direct = direct, .stmem = memst ? &r->stmem : NULL, .extra = q->extra};
	pid_t pid = -1;
	int pidfd = -1;
	bool waits = join != NULL; /* the child waits on gop for the join */
	if (vm) {
		/* Nothing to do between clone and exec: share our memory and
		 * sleep until the child has exec'd (posix_spawn's way), with
		 * no page tables copied and no copy-on-write faults after. */
		if (join) {
			ca.self_fds = join->self_fds;
			ca.nself = join->nself;
		}
		pid = spawn_vm(&ca, join ? join->cgroup_fd : -1, &pidfd);
		if (pid >= 0) {
			waits = false;
			if (join)
				join->born = true;
		}
		if (pid >= 0 && ca.self_err) {
			/* It exited before its exec: reaped here. */
			join->err = ca.self_err;
			while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
				;
			close(outp[0]), close(outp[1]), close(errp[0]), close(errp[1]);
			if (stp[0] >= 0)
				close(stp[0]), close(stp[1]);
			if (pidfd >= 0)
				close(pidfd);
			return -ECANCELED;
		}
		ca.nself = 0; /* a fork's child is joined by fn */
	}
	if (pid < 0 && memst) {
		/* A fork's child has its own memory: the pipe after all. */
		if (pipe2(stp, O_CLOEXEC) < 0) {
			int e = -errno;
			close(outp[0]), close(outp[1]), close(errp[0]), close(errp[1]);
			return e;
		}
		ca.stw = stp[1];
		ca.stmem = NULL;
		memst = false;
	}
	/* A child that is not born by spawn_vm waits on this pipe until its
	 * parent has joined it to its cgroups; one born by it needs none. */
	if (pid < 0 && join && pipe2(gop, O_CLOEXEC) < 0) {
		int e = -errno;
		close(outp[0]), close(outp[1]), close(errp[0]), close(errp[1]);
		close(stp[0]), close(stp[1]);
		return e;
	}
	if (pid < 0 && join && join->cgroup_fd >= 0) {
		/* Born in its leaf; any failure (an old kernel, a v1-only
		 * directory) falls back to fork and the join below. */
		struct clone_args_ cla = {.flags = CLONE_INTO_CGROUP_ | CLONE_PIDFD_,
					  .pidfd = (uint64_t)(uintptr_t)&pidfd, .exit_signal = SIGCHLD,
					  .cgroup = (uint64_t)join->cgroup_fd};
		pid = (pid_t)syscall(SYS_clone3, &cla, sizeof cla);
		join->born = pid >= 0;
	}
	if (pid < 0)
		pid = fork();
	if (pid < 0) {
		int e = -errno;
		close(outp[0]), close(outp[1]), close(errp[0]), close(errp[1]);
		close(stp[0]), close(stp[1]);
		if (join)
			close(gop[0]), close(gop[1]);
		return e;
	}
	if (pid == 0) {
		ca.gor = waits ? gop[0] : -1;
		ca.gow = waits ? gop[1] : -1;
		_exit(child_main(&ca));
	}
	close(outp[1]);
	close(errp[1]);
	if (stp[1] >= 0)
		close(stp[1]);
	if (join && !waits) {
		/* Born in its leaf with nothing else to join: already exec'd. */
		if (gop[0] >= 0)
			close(gop[0]), close(gop[1]);
	} else if (join) {
		close(gop[0]);
		int e = join->fn(pid, join->arg);
		if (e == 0)
			e = write_all(gop[1], "g", 1);
		close(gop[1]);
		if (e < 0) {
			join->err = e;
			kill(pid, SIGKILL);
			while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
				;
			close(outp[0]), close(errp[0]);
			if (stp[0] >= 0)
				close(stp[0]);
			if (pidfd >= 0)
				close(pidfd);
			return -ECANCELED;
		}
	}
	r->pid = pid;
	r->pgroup = own_pgroup;
	r->direct = direct != NULL;
	r->pidfd = pidfd >= 0 ? pidfd : pidfd_open_(pid); /* fork: no pidfd yet */
	r->status_pipe = stp[0];
	r->stmem_used = memst;
	r->out = (struct capture){.pipe = outp[0], .file = q->out_file, .cap = q->cap};
	r->err = (struct capture){.pipe = errp[0], .file = q->err_file, .cap = q->cap};
	(void)fcntl(outp[0], F_SETFL, O_NONBLOCK);
	(void)fcntl(errp[0], F_SETFL, O_NONBLOCK);
	if (stp[0] >= 0)
		(void)fcntl(stp[0], F_SETFL, O_NONBLOCK);
	if (r->pidfd < 0) {
		int e = -errno;
		kill(pid, SIGKILL);
		(void)waitpid(pid, NULL, 0);
		run_close(r);
		return e;
	}
	return 0;
}

int capture_pump(struct capture *c)
{
	char sink[65536];
	while (c->pipe >= 0) {
		ssize_t n;
		/* No file (it could not be made, or refuses writes): read and drop. */
		if (c->bytes < c->cap && c->file >= 0 && !c->werr) {
			n = splice(c->pipe, NULL, c->file, NULL, (size_t)(c->cap - c->bytes),
				   SPLICE_F_NONBLOCK);
			if (n < 0 && errno == EINVAL) {
				/* No splice to this file: copy through a buffer. */
				size_t want = c->cap - c->bytes < sizeof sink ? (size_t)(c->cap - c->bytes)
									      : sizeof sink;
				n = read(c->pipe, sink, want);
				int r = n > 0 ? write_all(c->file, sink, (size_t)n) : 0;
				if (r < 0) {
					c->werr = -r;
					c->truncated = true;
					c->lost += (uint64_t)n;
					continue;
				}
			} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
				/* The file's side failed: what is left in the pipe,
				 * and all that follows, is read and dropped below. */
				c->werr = errno;
				c->truncated = true;
				continue;
			}
			if (n > 0)
				c->bytes += (uint64_t)n;
		} else {
			n = read(c->pipe, sink, sizeof sink);
			if (n > 0) {
				c->truncated = true;
				if (c->werr)
					c->lost += (uint64_t)n;
			}
		}
		if (n == 0)
			return 1;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return 0;
			return 1;
		}
	}
	return 1;
}

void capture_close(struct capture *c)
{
	if (c->pipe >= 0)
		close(c->pipe);
	c->pipe = -1;
}

void run_term(struct run *r)
{
	if (r->pgroup && r->pid > 0)
		(void)kill(-r->pid, SIGTERM);
	else if (r->pidfd >= 0)
		(void)syscall(SYS_pidfd_send_signal, r->pidfd, SIGTERM, NULL, 0);
}

int run_term_launcher(struct run *r, const char *comm)
{
	/* bwrap, its init inside the pid namespace, then the launcher.
	 * bwrap itself must not get the SIGTERM: it would die, and the
	 * whole namespace with it, at once. */
	return proc_signal_below(r->pid, comm, SIGTERM);
}

void run_kill(struct run *r)
{
	if (r->pidfd >= 0)
		(void)syscall(SYS_pidfd_send_signal, r->pidfd, SIGKILL, NULL, 0);
	if (r->pgroup && r->pid > 0)
		(void)kill(-r->pid, SIGKILL);
}

/* kart-launch's "usage U S M R W" (launch.c); "-" or junk: not known. */
static void use_line(const char *l, struct run_use *u)
{
	int64_t v[5];
	for (int i = 0; i < 5; i++) {
		char *end;
		errno = 0;
		long long x = strtoll(l, &end, 10);
		bool ok = end != l && !errno && x >= 0 && (*end == ' ' || *end == '\0');
		v[i] = ok ? x : -1;
		if (i < 2 && !ok)
			return; /* no CPU times: no report */
		l = strchr(l, ' ');
		if (!l && i < 4)
			return;
		l = l ? l + 1 : "";
	}
	*u = (struct run_use){"launcher", v[0], v[1], v[2], v[3], v[4]};
}

void run_status_parse(char *buf, struct run_end *end, bool launcher)
{
	char *save = NULL;
	for (char *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (strcmp(l, "start") == 0)
			end->started = true;
		else if (strncmp(l, "exit ", 5) == 0) {
			end->exited = true;
			end->exit_code = atoi(l + 5);
		} else if (strncmp(l, "signal ", 7) == 0)
			end->signal = atoi(l + 7);
		else if (strncmp(l, "usage ", 6) == 0 && launcher)
			use_line(l + 6, &end->use);
		else if (end->started)
			continue; /* the set-up's lines come before "start" */
		else if (strncmp(l, "landlock ", 9) == 0)
			snprintf(end->landlock, sizeof end->landlock, "%s", l + 9);
		else if (strncmp(l, "landlock-unavailable ", 21) == 0 && !end->refusal) {
			end->refusal = "landlock_unavailable";
			snprintf(end->refusal_why, sizeof end->refusal_why,
				 "Landlock is required (enforce) but this kernel has none: %s", l + 21);
		} else if (strncmp(l, "landlock-failed ", 16) == 0 && !end->refusal) {
			end->refusal = "landlock_failed";
			snprintf(end->refusal_why, sizeof end->refusal_why,
				 "the Landlock ruleset could not be applied: %s", l + 16);
		} else if (strncmp(l, "setuid-failed ", 14) == 0 && !end->refusal) {
			end->refusal = "setuid_failed";
			snprintf(end->refusal_why, sizeof end->refusal_why,
				 "the task could not run as its submitter: %s", l + 14);
		}
	}
}

int run_collect(struct run *r, struct run_end *end)
{
	int st;
	memset(end, 0, sizeof *end);
	end->use = (struct run_use){NULL, -1, -1, -1, -1, -1};
	/* A direct child is the task: its I/O (its reaped descendants'
	 * included), read while it is a zombie, before wait4 lets its pid
	 * go. */
	struct proc_io io = {-1, -1};
	if (r->direct) {
		char p[64];
		snprintf(p, sizeof p, "/proc/%d/io", (int)r->pid);
		_cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || proc_io_read(fd, &io) < 0)
			io = (struct proc_io){-1, -1};
	}
	if (wait4(r->pid, &st, 0, &end->ru) < 0)
		return -errno;
	r->pid = 0;
	end->wrapper_status = st;
	/* Whatever the task wrote before it ended is still in the pipes. */
	capture_pump(&r->out);
	capture_pump(&r->err);
	char buf[1024];
	size_t n = 0;
	if (r->stmem_used) {
		n = r->stmem.len < sizeof buf - 1 ? r->stmem.len : sizeof buf - 1;
		memcpy(buf, r->stmem.text, n);
	}
	while (!r->stmem_used && n < sizeof buf - 1) {
		ssize_t k = read(r->status_pipe, buf + n, sizeof buf - 1 - n);
		if (k > 0)
			n += (size_t)k;
		else if (k < 0 && errno == EINTR)
			continue;
		else
			break; /* EOF, or EAGAIN: a straggler still holds the pipe */
	}
	buf[n] = '\0';
	run_status_parse(buf, end, !r->direct);
	/* Exec'd directly: no launcher reports; the status is the task's,
	 * and so is what wait4 measured. */
	if (r->direct && end->started)
		end->use = (struct run_use){"process",
					    end->ru.ru_utime.tv_sec * 1000000LL + end->ru.ru_utime.tv_usec,
					    end->ru.ru_stime.tv_sec * 1000000LL + end->ru.ru_stime.tv_usec,
					    end->ru.ru_maxrss, io.read_bytes, io.write_bytes};
	if (r->direct && end->started && !end->exited && !end->signal) {
		if (WIFEXITED(st)) {
			end->exited = true;
			end->exit_code = WEXITSTATUS(st);
		} else if (WIFSIGNALED(st))
			end->signal = WTERMSIG(st);
	}
	return 0;
}

void run_close(struct run *r)
{
	int *fds[] = {&r->pidfd, &r->status_pipe, &r->out.pipe, &r->err.pipe};
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		if (*fds[i] >= 0) {
			close(*fds[i]);
			*fds[i] = -1;
		}
}
