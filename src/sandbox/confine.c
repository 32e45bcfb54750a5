/* confine.c - kart-launch's command line and its confinement steps; see
 * confine.h for who runs them where. */
#define _GNU_SOURCE
#include "confine.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

void confine_mem_say(struct confine_mem *m, const char *msg)
{
	size_t len = strlen(msg), room = sizeof m->text - 1 - m->len;
	if (len > room)
		len = room;
	memcpy(m->text + m->len, msg, len);
	m->len = (unsigned short)(m->len + len);
	m->text[m->len] = '\0';
}

void confine_status(const struct confine *c, const char *msg)
{
	if (c->status_mem)
		confine_mem_say(c->status_mem, msg);
	else
		confine_say(c->status_fd, msg);
}

void confine_say(int fd, const char *msg)
{
	size_t len = strlen(msg);
	while (fd >= 0 && len) {
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

static long long io_key(const char *text, const char *key)
{
	size_t kl = strlen(key);
	for (const char *l = text; l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (strncmp(l, key, kl) == 0 && l[kl] == ':')
			return strtoll(l + kl + 1, NULL, 10);
	return -1;
}

int proc_io_read(int fd, struct proc_io *io)
{
	char buf[512];
	ssize_t n;
	while ((n = pread(fd, buf, sizeof buf - 1, 0)) < 0 && errno == EINTR)
		;
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	long long r = io_key(buf, "read_bytes"), w = io_key(buf, "write_bytes"),
		  cw = io_key(buf, "cancelled_write_bytes");
	if (r < 0 || w < 0 || cw < 0)
		return -1;
	io->read_bytes = r;
	io->write_bytes = w > cw ? w - cw : 0;
	return 0;
}

/* To stderr, "WHO: ...\n", through a buffer on the stack (no stdio: its
 * locks are the worker's when this runs in spawn_vm's child). */
__attribute__((format(printf, 2, 3))) static void complain(const char *who, const char *fmt, ...)
{
	char buf[600];
	int n = snprintf(buf, sizeof buf, "%s: ", who);
	va_list ap;
	va_start(ap, fmt);
	if (n > 0 && (size_t)n < sizeof buf)
		(void)vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
	va_end(ap);
	size_t l = strlen(buf);
	if (l + 1 < sizeof buf) {
		buf[l] = '\n';
		buf[l + 1] = '\0';
	}
	confine_say(STDERR_FILENO, buf);
}

/* ---- the command line ------------------------------------------------ */

/* c->rl[] in this order. */
enum { RL_NPROC, RL_AS, RL_CPU, RL_CORE, RL_NOFILE, RL__N };
static const struct {
	int res;
	const char *name;
} rl_names[RL__N] = {
	[RL_NPROC] = {RLIMIT_NPROC, "nproc"},
	[RL_AS] = {RLIMIT_AS, "as"},
	[RL_CPU] = {RLIMIT_CPU, "cpu"},
	[RL_CORE] = {RLIMIT_CORE, "core"},
	[RL_NOFILE] = {RLIMIT_NOFILE, "nofile"},
};
_Static_assert(RL__N == sizeof((struct confine *)0)->rl / sizeof((struct confine *)0)->rl[0],
	       "struct confine's rl[] and rl_names[] differ");

static int rl_option(struct confine *c, const char *arg)
{
	for (size_t k = 0; k < RL__N; k++) {
		size_t l = strlen(rl_names[k].name);
		if (strncmp(arg + 9, rl_names[k].name, l) == 0 && arg[9 + l] == '=') {
			char *end;
			errno = 0;
			c->rl[k].v = strtoull(arg + 10 + l, &end, 10);
			if (errno || *end || end == arg + 10 + l)
				return -1;
			c->rl[k].set = true;
			return 0;
		}
	}
	return -1;
}

int confine_parse(int argc, char **argv, struct confine *c, char *err, size_t errlen)
{
	memset(c, 0, sizeof *c);
	c->status_fd = c->seccomp_fd = -1;
	c->ll_mode = LL_MODE_OFF;
	c->paths = calloc((size_t)argc + 1, sizeof *c->paths);
	if (!c->paths) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	int i;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strncmp(a, "--status-fd=", 12) == 0)
			c->status_fd = atoi(a + 12);
		else if (strncmp(a, "--seccomp-fd=", 13) == 0)
			c->seccomp_fd = atoi(a + 13);
		else if (strncmp(a, "--landlock=", 11) == 0) {
			if ((c->ll_mode = ll_mode_parse(a + 11)) < 0)
				goto bad;
		} else if (strcmp(a, "--tcp") == 0)
			c->tcp = true;
		else if ((strcmp(a, "--ro") == 0 || strcmp(a, "--rw") == 0) && i + 1 < argc) {
			c->paths[c->npaths] = (struct ll_path){.path = argv[++i], .writable = a[3] == 'w',
							       .fd = -1};
			c->npaths++;
		} else if (strncmp(a, "--rlimit-", 9) == 0) {
			if (rl_option(c, a) < 0)
				goto bad;
		} else if (strcmp(a, "--") == 0) {
			i++;
			break;
		} else {
			snprintf(err, errlen, "unknown option %s", a);
			confine_free(c);
			return -1;
		}
	}
	if (i >= argc) {
		snprintf(err, errlen, "no program given");
		confine_free(c);
		return -1;
	}
	c->prog = argv + i;
	return 0;
bad:
	snprintf(err, errlen, "bad %s", argv[i]);
	confine_free(c);
	return -1;
}

void confine_free(struct confine *c)
{
	free(c->paths);
	c->paths = NULL;
	c->npaths = 0;
}

/* ---- the steps ------------------------------------------------------- */

/* Does RLIMIT_NPROC bind us? The kernel exempts uid 0 of the host and
 * CAP_SYS_RESOURCE/CAP_SYS_ADMIN. With a soft limit of 0 any fork must
 * fail (we exist): if one succeeds, the limit would be a lie. A raw
 * fork: libc's would run its fork handlers on the worker's locks when
 * this runs in spawn_vm's child. */
static bool nproc_binds(unsigned long long hard)
{
	struct rlimit z = {0, hard};
	if (setrlimit(RLIMIT_NPROC, &z) < 0)
		return false;
	long p = syscall(SYS_clone, (unsigned long)SIGCHLD, 0UL, NULL, NULL, 0UL);
	if (p == 0)
		syscall(SYS_exit_group, 0);
	int e = errno;
	if (p > 0)
		while (waitpid((pid_t)p, NULL, 0) < 0 && errno == EINTR)
			;
	return p < 0 && e == EAGAIN;
}

/* Before the exec: the task inherits them. A limit that cannot be set
 * (or would not hold) stops the task here: the worker refuses it. */
static int rl_apply(const struct confine *c, const char *who)
{
	for (size_t k = 0; k < RL__N; k++) {
		if (!c->rl[k].set || k == RL_NOFILE) /* last, nofile_step */
			continue;
		struct rlimit r = {c->rl[k].v, c->rl[k].v};
		if (rl_names[k].res == RLIMIT_CPU)
			r.rlim_max = c->rl[k].v + 1; /* SIGXCPU first, SIGKILL a second later */
		if (rl_names[k].res == RLIMIT_NPROC && !nproc_binds(r.rlim_max)) {
			complain(who, "RLIMIT_NPROC does not bind this uid (%u; root or privileged): "
				 "pids= cannot be enforced without a cgroup", (unsigned)getuid());
			return -1;
		}
		if (setrlimit(rl_names[k].res, &r) < 0) {
			complain(who, "RLIMIT_%s=%llu: %s", rl_names[k].name, c->rl[k].v,
				 strerror(errno));
			return -1;
		}
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
static int caps_step(const struct confine *c, const char *who)
{
	bool left = false;
	for (int cap = 0; cap < 64; cap++) {
		if (c->bset_known) {
			if (!(c->bset >> cap & 1))
				continue;
		} else {
			int r = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
			if (r < 0)
				break; /* EINVAL: past the kernel's last capability */
			if (r != 1)
				continue;
		}
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
			left = true;
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL) {
		complain(who, "clearing the ambient capabilities: %s", strerror(errno));
		return -1;
	}
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	memset(d, 0, sizeof d);
	if (syscall(SYS_capset, &h, d) < 0) {
		complain(who, "dropping the capabilities: %s", strerror(errno));
		return -1;
	}
	uid_t ru, eu, su;
	if (left && (getresuid(&ru, &eu, &su) < 0 || ru == 0 || eu == 0 || su == 0)) {
		complain(who, "the bounding set cannot be emptied (no CAP_SETPCAP): "
			 "a task of uid 0 would get it back");
		return -1;
	}
	return 0;
}

/* Landlock, as the mode asks: on the status fd, "landlock ABI", "landlock
 * off" or "landlock unsupported"; or "landlock-unavailable WHY" /
 * "landlock-failed WHY" and no task (the worker refuses it). */
static int landlock_step(const struct confine *c, int abi, const char *who)
{
	char msg[512], why[400];
	if (c->ll_mode == LL_MODE_OFF) {
		confine_status(c, "landlock off\n");
		return 0;
	}
	if (abi < 0) {
		if (c->ll_mode == LL_MODE_AUTO) {
			confine_status(c, "landlock unsupported\n");
			return 0;
		}
		snprintf(msg, sizeof msg, "landlock-unavailable %s\n", strerror(-abi));
		confine_status(c, msg);
		complain(who, "Landlock is required but unavailable: %s", strerror(-abi));
		return -1;
	}
	if (ll_apply(abi, c->paths, c->npaths, c->tcp, why, sizeof why) < 0) {
		snprintf(msg, sizeof msg, "landlock-failed %s\n", why);
		confine_status(c, msg);
		complain(who, "Landlock ruleset failed: %s", why);
		return -1;
	}
	snprintf(msg, sizeof msg, "landlock %d\n", abi);
	confine_status(c, msg);
	return 0;
}

/* The open files soft limit the worker started with (it raised its
 * own), under the hard limit it left as it was. Last: until the exec
 * this process holds a copy of the worker's descriptors, numbered above
 * that limit, and the Landlock step still makes one. */
static int nofile_step(const struct confine *c, const char *who)
{
	const size_t k = RL_NOFILE;
	struct rlimit r;
	if (!c->rl[k].set || getrlimit(RLIMIT_NOFILE, &r) < 0 || c->rl[k].v >= r.rlim_cur)
		return 0;
	r.rlim_cur = c->rl[k].v;
	if (setrlimit(RLIMIT_NOFILE, &r) < 0) {
		complain(who, "RLIMIT_NOFILE=%llu: %s", c->rl[k].v, strerror(errno));
		return -1;
	}
	return 0;
}

int confine_apply(const struct confine *c, int abi, const struct sock_fprog *filter,
		  const char *who)
{
	if (rl_apply(c, who) < 0 || caps_step(c, who) < 0)
		return -1;
	/* After the rlimits, before seccomp (bwrap's filter, loaded before
	 * the launcher, must let the landlock_* calls through). */
	if (landlock_step(c, abi, who) < 0)
		return -1;
	if (filter && (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
		       syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, filter) < 0)) {
		complain(who, "seccomp: %s", strerror(errno));
		return -1;
	}
	return nofile_step(c, who);
}
