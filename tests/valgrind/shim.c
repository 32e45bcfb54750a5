/* shim.c - what valgrind 3.19 lacks, for kart under make check-valgrind.
 *
 * valgrind 3.19 implements neither seccomp(2) nor pidfd_open(2) and
 * pidfd_send_signal(2) (unhandled syscalls 317, 434, 424: it returns ENOSYS
 * without calling the kernel). Without them the worker cannot run a task:
 *   - libseccomp probes the kernel with seccomp(2), concludes API level 1
 *     and refuses SCMP_ACT_KILL_PROCESS, so the worker cannot build its
 *     filter and, failing closed, refuses every task;
 *   - a task's (and an on_done hook's) exit reaches the event loop through
 *     its pidfd.
 * This library, LD_PRELOADed into each kart that runs under valgrind (and
 * into nothing else: it takes itself out of the environment), supplies
 * them:
 *   - libseccomp's API level is set to the one the kernel really has,
 *     measured natively before the run (KART_VG_SECCOMP_API). kart only
 *     builds and exports the filter; bwrap loads it, natively.
 *   - syscall(SYS_pidfd_open, pid, 0) returns an eventfd that a helper
 *     thread makes readable once the child has exited (waitid WNOWAIT, so
 *     the exit status stays for kart's own waitpid), polled every 2 ms;
 *     syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0) is kill(pid, sig);
 *     close() of such an fd forgets it. kart's only uses of pidfds are
 *     these (and epoll on them), on its own children.
 * Everything else goes to the real syscall(). The valgrind launcher, which
 * runs natively and execs the tool, loads the library too: there it does
 * nothing, since the tool's client must still find LD_PRELOAD.
 *
 * Built twice by tests/valgrind/check: as this library, and with
 * -DPRINT_LEVEL as a program that prints the kernel's libseccomp API level. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <valgrind/valgrind.h>

#ifdef PRINT_LEVEL
int main(void)
{
	printf("%u\n", seccomp_api_get());
	return 0;
}
#else

static bool active;

#define MAXPIDFD 1024
static struct {
	int fd;
	pid_t pid;
	bool fired;
} tab[MAXPIDFD];
static int ntab;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static bool thread_started;

static long (*real_syscall)(long, ...);
static int (*real_close)(int);

static void fire(int i)
{
	uint64_t one = 1;
	(void)!write(tab[i].fd, &one, sizeof one);
	tab[i].fired = true;
}

static void *watch(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&mu);
		for (int i = 0; i < ntab; i++) {
			if (tab[i].fired)
				continue;
			siginfo_t si = {0};
			int r = waitid(P_PID, (id_t)tab[i].pid, &si, WEXITED | WNOHANG | WNOWAIT);
			if ((r == 0 && si.si_pid == tab[i].pid) || (r < 0 && errno == ECHILD))
				fire(i); /* exited, or already reaped */
		}
		pthread_mutex_unlock(&mu);
		struct timespec ts = {0, 2 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static int emu_pidfd_open(pid_t pid)
{
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fd < 0)
		return -1;
	pthread_mutex_lock(&mu);
	if (ntab == MAXPIDFD) {
		pthread_mutex_unlock(&mu);
		real_close(fd);
		errno = EMFILE;
		return -1;
	}
	tab[ntab++] = (typeof(tab[0])){fd, pid, false};
	if (!thread_started) {
		/* Every signal blocked: the worker takes its own with a signalfd. */
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		pthread_t th;
		if (pthread_create(&th, NULL, watch, NULL) == 0)
			thread_started = true;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	pthread_mutex_unlock(&mu);
	return fd;
}

static pid_t lookup(int fd)
{
	pid_t pid = -1;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < ntab; i++)
		if (tab[i].fd == fd)
			pid = tab[i].pid;
	pthread_mutex_unlock(&mu);
	return pid;
}

long syscall(long nr, ...)
{
	va_list ap;
	va_start(ap, nr);
	long a[6];
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (active && nr == SYS_pidfd_open) {
		if (a[1] != 0) {
			errno = EINVAL;
			return -1;
		}
		return emu_pidfd_open((pid_t)a[0]);
	}
	if (active && nr == SYS_pidfd_send_signal) {
		pid_t pid = lookup((int)a[0]);
		if (pid < 0) {
			errno = EBADF;
			return -1;
		}
		return kill(pid, (int)a[1]);
	}
	return real_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

int close(int fd)
{
	if (active) {
		pthread_mutex_lock(&mu);
		for (int i = 0; i < ntab; i++)
			if (tab[i].fd == fd) {
				tab[i] = tab[--ntab];
				break;
			}
		int r = real_close(fd);
		pthread_mutex_unlock(&mu);
		return r;
	}
	return real_close(fd);
}

/* A forked child has no helper thread and none of its parent's children. */
static void prepare(void) { pthread_mutex_lock(&mu); }
static void parent(void) { pthread_mutex_unlock(&mu); }
static void child(void)
{
	pthread_mutex_init(&mu, NULL);
	ntab = 0;
	thread_started = false;
}

__attribute__((constructor)) static void init(void)
{
	real_syscall = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
	real_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
	if (!RUNNING_ON_VALGRIND)
		return;
	const char *v = getenv("KART_VG_SECCOMP_API");
	if (v && *v && seccomp_api_set((unsigned)atoi(v)) != 0)
		fprintf(stderr, "shim.so: seccomp_api_set(%s) failed\n", v);
	unsetenv("KART_VG_SECCOMP_API");
	unsetenv("LD_PRELOAD");
	pthread_atfork(prepare, parent, child);
	active = true;
}
#endif
