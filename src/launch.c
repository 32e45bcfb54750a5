/* kart-launch - the first program of a task, inside the sandbox.
 *
 *   kart-launch --status-fd=N [--seccomp-fd=N] [--landlock=off|auto|enforce] [--tcp]
 *               [--ro PATH]... [--rw PATH]... [--rlimit-{nproc,as,cpu,core}=N]...
 *               -- PROGRAM [ARG...]
 *
 * It stays as the task's parent so that the worker learns exactly how the
 * task ended ("exit N" or "signal N" on the status fd) where bwrap would
 * only report 128+N. The task itself inherits no descriptor but 0, 1, 2:
 * in particular not the run's lock, which is what tells recovery that a
 * run is still alive. Confinement steps that must happen inside the
 * sandbox (rlimits, capabilities, Landlock) belong here, before the fork. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "landlock.h"

static void say(int fd, const char *msg)
{
	size_t len = strlen(msg);
	while (len) {
		ssize_t n = write(fd, msg, len);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return;
		}
		msg += n;
		len -= (size_t)n;
	}
}

static void close_from(int lowfd)
{
	if (syscall(SYS_close_range, lowfd, ~0U, 0) == 0)
		return;
	for (int fd = lowfd; fd < 65536; fd++)
		(void)close(fd);
}

/* Landlock, as the mode asks: on the status fd, "landlock ABI", "landlock
 * off" or "landlock unsupported"; or "landlock-unavailable WHY" /
 * "landlock-failed WHY" and no task (the worker refuses it). */
static int landlock_step(int status_fd, int mode, const struct ll_path *paths, size_t n,
			 bool tcp)
{
	char msg[512], why[400];
	if (mode == LL_MODE_OFF) {
		say(status_fd, "landlock off\n");
		return 0;
	}
	int abi = ll_abi();
	if (abi < 0) {
		if (mode == LL_MODE_AUTO) {
			say(status_fd, "landlock unsupported\n");
			return 0;
		}
		snprintf(msg, sizeof msg, "landlock-unavailable %s\n", strerror(-abi));
		say(status_fd, msg);
		fprintf(stderr, "kart-launch: Landlock is required but unavailable: %s\n",
			strerror(-abi));
		return -1;
	}
	if (ll_apply(abi, paths, n, tcp, why, sizeof why) < 0) {
		snprintf(msg, sizeof msg, "landlock-failed %s\n", why);
		say(status_fd, msg);
		fprintf(stderr, "kart-launch: Landlock ruleset failed: %s\n", why);
		return -1;
	}
	snprintf(msg, sizeof msg, "landlock %d\n", abi);
	say(status_fd, msg);
	return 0;
}

/* Backend none only (bwrap loads it itself): the worker's compiled
 * filter, read from fd, under no_new_privs. It confines the launcher
 * too. Any failure stops the task before "start": the worker refuses it. */
static int seccomp_step(int fd)
{
	static struct sock_filter prog[BPF_MAXINSNS];
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, (char *)prog + len, sizeof prog - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "kart-launch: seccomp: reading fd %d: %s\n", fd, strerror(errno));
			return -1;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len == sizeof prog) {
			fprintf(stderr, "kart-launch: seccomp: the filter is too long\n");
			return -1;
		}
	}
	(void)close(fd);
	if (len == 0 || len % sizeof prog[0]) {
		fprintf(stderr, "kart-launch: seccomp: a filter of %zu bytes\n", len);
		return -1;
	}
	struct sock_fprog fp = {.len = (unsigned short)(len / sizeof prog[0]), .filter = prog};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) < 0) {
		fprintf(stderr, "kart-launch: seccomp: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

/* No capability reaches the task: the bounding, ambient, inheritable,
 * permitted and effective sets are emptied. Inside bwrap there is nothing
 * left to drop. With backend none a root task would otherwise run with
 * what the worker kept, and uid 0 gets the whole bounding set back at
 * execve: so the bounding set goes first, while CAP_SETPCAP is ours, and
 * one that cannot be emptied stops a task of uid 0 here. Another uid gets
 * nothing back from it at execve, under no_new_privs (set below, by the
 * Landlock or seccomp step, or by bwrap). */
static int caps_step(void)
{
	bool left = false;
	for (int c = 0; c < 64; c++) {
		int r = prctl(PR_CAPBSET_READ, c, 0, 0, 0);
		if (r < 0)
			break; /* EINVAL: past the kernel's last capability */
		if (r == 1 && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0)
			left = true;
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL) {
		fprintf(stderr, "kart-launch: clearing the ambient capabilities: %s\n", strerror(errno));
		return -1;
	}
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	memset(d, 0, sizeof d);
	if (syscall(SYS_capset, &h, d) < 0) {
		fprintf(stderr, "kart-launch: dropping the capabilities: %s\n", strerror(errno));
		return -1;
	}
	uid_t ru, eu, su;
	if (left && (getresuid(&ru, &eu, &su) < 0 || ru == 0 || eu == 0 || su == 0)) {
		fprintf(stderr, "kart-launch: the bounding set cannot be emptied (no CAP_SETPCAP): "
				"a task of uid 0 would get it back\n");
		return -1;
	}
	return 0;
}

/* ---- rlimits: --rlimit-{nproc,as,cpu,core}=N (see rlimits.h) --------- */

static struct {
	int res;
	const char *name;
	bool set;
	unsigned long long v;
} rl[] = {
	{RLIMIT_NPROC, "nproc", false, 0},
	{RLIMIT_AS, "as", false, 0},
	{RLIMIT_CPU, "cpu", false, 0},
	{RLIMIT_CORE, "core", false, 0},
};

static int rl_option(const char *arg)
{
	for (size_t k = 0; k < sizeof rl / sizeof rl[0]; k++) {
		size_t l = strlen(rl[k].name);
		if (strncmp(arg + 9, rl[k].name, l) == 0 && arg[9 + l] == '=') {
			char *end;
			errno = 0;
			rl[k].v = strtoull(arg + 10 + l, &end, 10);
			if (errno || *end || end == arg + 10 + l)
				return -1;
			rl[k].set = true;
			return 0;
		}
	}
	return -1;
}

/* Does RLIMIT_NPROC bind us? The kernel exempts uid 0 of the host and
 * CAP_SYS_RESOURCE/CAP_SYS_ADMIN. With a soft limit of 0 any fork must
 * fail (we exist): if one succeeds, the limit would be a lie. */
static bool nproc_binds(unsigned long long hard)
{
	struct rlimit z = {0, hard};
	if (setrlimit(RLIMIT_NPROC, &z) < 0)
		return false;
	pid_t p = fork();
	if (p == 0)
		_exit(0);
	if (p > 0)
		while (waitpid(p, NULL, 0) < 0 && errno == EINTR)
			;
	return p < 0 && errno == EAGAIN;
}

/* Before the fork: the task inherits them. A limit that cannot be set
 * (or would not hold) stops the task here: the worker refuses it. */
static int rl_apply(void)
{
	for (size_t k = 0; k < sizeof rl / sizeof rl[0]; k++) {
		if (!rl[k].set)
			continue;
		struct rlimit r = {rl[k].v, rl[k].v};
		if (rl[k].res == RLIMIT_CPU)
			r.rlim_max = rl[k].v + 1; /* SIGXCPU first, SIGKILL a second later */
		if (rl[k].res == RLIMIT_NPROC && !nproc_binds(r.rlim_max)) {
			fprintf(stderr, "kart-launch: RLIMIT_NPROC does not bind this uid (%u; root "
				"or privileged): pids= cannot be enforced without a cgroup\n",
				(unsigned)getuid());
			return -1;
		}
		if (setrlimit(rl[k].res, &r) < 0) {
			fprintf(stderr, "kart-launch: RLIMIT_%s=%llu: %s\n", rl[k].name, rl[k].v,
				strerror(errno));
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	int status_fd = -1, seccomp_fd = -1, i, ll_mode = LL_MODE_OFF;
	bool tcp = false;
	size_t npaths = 0;
	struct ll_path *paths = calloc((size_t)argc, sizeof *paths);
	if (!paths)
		return 127;
	for (i = 1; i < argc; i++) {
		if (strncmp(argv[i], "--status-fd=", 12) == 0)
			status_fd = atoi(argv[i] + 12);
		else if (strncmp(argv[i], "--seccomp-fd=", 13) == 0)
			seccomp_fd = atoi(argv[i] + 13);
		else if (strncmp(argv[i], "--landlock=", 11) == 0) {
			if ((ll_mode = ll_mode_parse(argv[i] + 11)) < 0) {
				fprintf(stderr, "kart-launch: bad %s\n", argv[i]);
				return 127;
			}
		} else if (strcmp(argv[i], "--tcp") == 0)
			tcp = true;
		else if ((strcmp(argv[i], "--ro") == 0 || strcmp(argv[i], "--rw") == 0) &&
			 i + 1 < argc) {
			paths[npaths].writable = argv[i][3] == 'w';
			paths[npaths++].path = argv[++i];
		} else if (strncmp(argv[i], "--rlimit-", 9) == 0) {
			if (rl_option(argv[i]) < 0) {
				fprintf(stderr, "kart-launch: bad %s\n", argv[i]);
				return 127;
			}
		} else if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		} else {
			fprintf(stderr, "kart-launch: unknown option %s\n", argv[i]);
			return 127;
		}
	}
	if (i >= argc) {
		fprintf(stderr, "kart-launch: no program given\n");
		return 127;
	}
	sigset_t all;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	signal(SIGPIPE, SIG_DFL);

	if (rl_apply() < 0 || caps_step() < 0)
		return 127;
	/* After the rlimits, before seccomp (bwrap's filter, loaded before
	 * us, must let the landlock_* calls through). It confines the
	 * launcher too, which from here on only forks, waits and reports. */
	if (landlock_step(status_fd, ll_mode, paths, npaths, tcp) < 0)
		return 127;
	free(paths);
	if (seccomp_fd >= 0 && seccomp_step(seccomp_fd) < 0)
		return 127;
	/* The task runs as our uid: without this it could open
	 * /proc/<us>/fd/3 and write its own "exit 0". The task's execve
	 * makes it dumpable again; we stay out of its reach. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
		fprintf(stderr, "kart-launch: PR_SET_DUMPABLE: %s\n", strerror(errno));
		return 127;
	}

	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "kart-launch: fork: %s\n", strerror(errno));
		return 127;
	}
	if (pid == 0) {
		/* Die with the launcher: without a PID namespace (backend none)
		 * this is what ties the task to its run. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		close_from(3);
		execv(argv[i], argv + i);
		fprintf(stderr, "kart-launch: cannot run %s: %s\n", argv[i], strerror(errno));
		_exit(127);
	}
	/* The launcher keeps its descriptors: among them the run's lock,
	 * held for as long as the task lives. */
	if (status_fd >= 0)
		say(status_fd, "start\n");
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return 127;
	char msg[32];
	if (WIFEXITED(st))
		snprintf(msg, sizeof msg, "exit %d\n", WEXITSTATUS(st));
	else
		snprintf(msg, sizeof msg, "signal %d\n", WTERMSIG(st));
	if (status_fd >= 0)
		say(status_fd, msg);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
