/* seccomp.c - the task's syscall filter.
 *
 * A denylist on a default-allow filter, modelled on what Docker's default
 * profile leaves out of its allowlist, plus what container runtimes have
 * learnt to block since: io_uring (its submissions are not seen by
 * seccomp), TIOCSTI/TIOCLINUX, namespace flags, the new mount API, and
 * the socket families AF_VSOCK and AF_NETLINK but NETLINK_ROUTE.
 * Denied calls fail with EPERM, so programs that probe a feature fall
 * back; clone3 fails with ENOSYS so that libc falls back to clone, whose
 * flags, unlike clone3's (behind a pointer), a filter can read.
 *
 * Only the native ABI is in the filter. A syscall entered through the
 * i386 (int 0x80) or x32 ABI does not match it and kills the task with
 * SIGSYS: no task needs them, their compat paths are a history of
 * kernel bugs, and filtering them equally would mean keeping three
 * syscall tables in step. A kill rather than EPERM, because a program
 * that gets EPERM from every call, exit included, cannot even say so. */
#define _GNU_SOURCE
#include "seccomp.h"

#include <fcntl.h>
#include <jansson.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "util.h"

#ifndef __NR_clone3
#define __NR_clone3 435
#endif

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

/* Denied outright. x86_64 numbers for calls newer than some libseccomp
 * releases know (0: rely on the name). */
static const struct {
	const char *name;
	int nr;
} denied[] = {
	/* io_uring: its work is done by kernel threads that seccomp never sees. */
	{"io_uring_setup", 425}, {"io_uring_enter", 426}, {"io_uring_register", 427},
	/* keys, BPF, perf, userfaultfd: kernel attack surface, per-user state */
	{"keyctl", 0}, {"add_key", 0}, {"request_key", 0}, {"bpf", 0}, {"perf_event_open", 0},
	{"userfaultfd", 0}, {"lookup_dcookie", 0}, {"fanotify_init", 0},
	/* other processes' memory and descriptors */
	{"ptrace", 0}, {"process_vm_readv", 0}, {"process_vm_writev", 0}, {"kcmp", 0},
	{"pidfd_getfd", 438}, {"process_madvise", 440},
	/* mounts and namespaces; the new mount API too */
	{"mount", 0}, {"umount2", 0}, {"pivot_root", 0}, {"setns", 0}, {"chroot", 0},
	{"fsopen", 430}, {"fsconfig", 431}, {"fsmount", 432}, {"fspick", 433},
	{"move_mount", 429}, {"open_tree", 428}, {"mount_setattr", 442}, {"open_tree_attr", 467},
	/* file handles bypass path lookup (the "shocker" escape) */
	{"open_by_handle_at", 0}, {"name_to_handle_at", 0},
	/* the machine itself */
	{"kexec_load", 0}, {"kexec_file_load", 0}, {"init_module", 0}, {"finit_module", 0},
	{"delete_module", 0}, {"create_module", 0}, {"get_kernel_syms", 0}, {"query_module", 0},
	{"reboot", 0}, {"swapon", 0}, {"swapoff", 0}, {"acct", 0}, {"quotactl", 0},
	{"quotactl_fd", 443}, {"nfsservctl", 0}, {"syslog", 0}, {"vhangup", 0}, {"iopl", 0},
	{"ioperm", 0}, {"uselib", 0}, {"ustat", 0}, {"sysfs", 0}, {"_sysctl", 0},
	/* the clocks: adjtimex's read-only use cannot be told from its writes */
	{"settimeofday", 0}, {"clock_settime", 0}, {"clock_adjtime", 0}, {"adjtimex", 0},
	/* NUMA placement: Docker allows it with CAP_SYS_NICE only */
	{"mbind", 0}, {"set_mempolicy", 0}, {"migrate_pages", 0}, {"move_pages", 0},
	{"set_mempolicy_home_node", 450},
};

/* Namespace flags: clone and unshare with any of them get EPERM. */
static const unsigned long ns_flags[] = {
	CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWUTS,
	CLONE_NEWIPC, CLONE_NEWCGROUP, CLONE_NEWTIME,
};

/* The tty ioctls that push input into a terminal or its console. */
static const unsigned long tty_reqs[] = {TIOCSTI, TIOCLINUX};

/* Socket families a task has no use for and the host's kernel exposes
 * through them: AF_VSOCK reaches the hypervisor and its other guests;
 * AF_NETLINK but NETLINK_ROUTE reaches the audit log, uevents, netfilter,
 * every socket of the host with its owner (sock_diag), and more.
 * NETLINK_ROUTE stays: it sees the task's own network namespace (only
 * lo without `net`), and getaddrinfo and ip(8) read addresses through
 * it. The family (an int to the kernel) is compared on its low word;
 * the protocol on all of it: a high word set is refused, never a hole. */
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#define SOCK_FAMILY_DENIED AF_VSOCK
#define SOCK_FAMILY_NETLINK 16 /* AF_NETLINK */
#define SOCK_NETLINK_OK 0      /* NETLINK_ROUTE */

/* personality(2) takes an unsigned int, and libseccomp cannot say "not
 * one of these values" in a default-allow filter (one comparison per
 * argument per rule, and no rule may carry the default action). So this
 * check is a short hand-written prologue ahead of libseccomp's program:
 * the values Docker allows pass (PER_LINUX, PER_LINUX32, UNAME26, both,
 * and the 0xffffffff query), anything else gets EPERM. Everything else
 * falls through to libseccomp's code, which checks the arch itself. */
#define PERSONA_ALLOW (SECCOMP_RET_ALLOW)
#define PERSONA_DENY (SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA))
#define ARG0_LO (offsetof(struct seccomp_data, args[0]))
#define ARG0_HI (offsetof(struct seccomp_data, args[0]) + 4) /* little-endian */
static const struct sock_filter persona_prologue[] = {
	/* 0 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	/* 1 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 12),
	/* 2 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	/* 3 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_personality, 0, 10),
	/* 4 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG0_HI),
	/* 5 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 6),
	/* 6 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG0_LO),
	/* 7 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x0000, 5, 0),
	/* 8 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x0008, 4, 0),
	/* 9 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x20000, 3, 0),
	/* 10 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x20008, 2, 0),
	/* 11 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xffffffff, 1, 0),
	/* 12 */ BPF_STMT(BPF_RET | BPF_K, PERSONA_DENY),
	/* 13 */ BPF_STMT(BPF_RET | BPF_K, PERSONA_ALLOW),
	/* 14: libseccomp's program */
};
/* The same values, for seccomp_prog_build's own program. */
static const uint32_t persona_ok[] = {0x0000, 0x0008, 0x20000, 0x20008, 0xffffffff};

/* The native number of denied[i], or <= 0 if neither libseccomp nor the
 * table knows it. */
static int denied_nr(size_t i)
{
	int nr = seccomp_syscall_resolve_name(denied[i].name);
	return nr == __NR_SCMP_ERROR ? denied[i].nr : nr;
}

static int deny(scmp_filter_ctx ctx, int nr, unsigned ncmp, const struct scmp_arg_cmp *cmp,
		int errnum)
{
	return seccomp_rule_add_exact_array(ctx, SCMP_ACT_ERRNO((uint32_t)errnum), nr, ncmp, cmp);
}

static int build(scmp_filter_ctx ctx, int *nrules, char *err, size_t errlen)
{
	int r;
	/* A binary tree on the syscall number, not libseccomp's default
	 * linear list. Same decisions; what changes is the cost of loading
	 * the filter, once per task: at attach the kernel runs the program
	 * for every syscall number to fill its action cache, and with a
	 * list each run walks half of it (docs/PERFORMANCE.md, "The
	 * seccomp filter as a tree"). An older libseccomp without the
	 * attribute keeps the list. */
	(void)seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	/* Not for our own process: the worker never loads it. */
	if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0)) < 0)
		return ERR(r, "seccomp_attr_set(NNP): %s", strerror(-r));
	*nrules = 0;
	for (size_t i = 0; i < ARRAY_SIZE(denied); i++) {
		int nr = denied_nr(i);
		if (nr <= 0)
			return ERR(-ENOSYS, "seccomp: this libseccomp does not know %s", denied[i].name);
		if ((r = deny(ctx, nr, 0, NULL, EPERM)) < 0)
			return ERR(r, "seccomp rule for %s: %s", denied[i].name, strerror(-r));
		++*nrules;
	}
	/* The namespace flags: one rule per flag, as a rule holds one
	 * comparison per argument. clone's flags are its first argument on
	 * x86_64 (not on s390). */
	for (size_t i = 0; i < ARRAY_SIZE(ns_flags); i++) {
		struct scmp_arg_cmp c = SCMP_A0_64(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]);
		if ((r = deny(ctx, SCMP_SYS(clone), 1, &c, EPERM)) < 0 ||
		    (r = deny(ctx, SCMP_SYS(unshare), 1, &c, EPERM)) < 0)
			return ERR(r, "seccomp rule for clone/unshare: %s", strerror(-r));
		*nrules += 2;
	}
	if ((r = deny(ctx, SCMP_SYS(clone3), 0, NULL, ENOSYS)) < 0)
		return ERR(r, "seccomp rule for clone3: %s", strerror(-r));
	++*nrules;
	/* ioctl's request is an unsigned int to the kernel: compare the low
	 * 32 bits only, or TIOCSTI | 1 << 32 would slip through. */
	for (size_t i = 0; i < ARRAY_SIZE(tty_reqs); i++) {
		struct scmp_arg_cmp c = SCMP_A1_64(SCMP_CMP_MASKED_EQ, 0xffffffffUL, tty_reqs[i]);
		if ((r = deny(ctx, SCMP_SYS(ioctl), 1, &c, EPERM)) < 0)
			return ERR(r, "seccomp rule for ioctl: %s", strerror(-r));
		++*nrules;
	}
	struct scmp_arg_cmp vs = SCMP_A0_64(SCMP_CMP_MASKED_EQ, 0xffffffffUL, SOCK_FAMILY_DENIED);
	struct scmp_arg_cmp nl[2] = {SCMP_A0_64(SCMP_CMP_MASKED_EQ, 0xffffffffUL, SOCK_FAMILY_NETLINK),
				     SCMP_A2_64(SCMP_CMP_NE, SOCK_NETLINK_OK)};
	if ((r = deny(ctx, SCMP_SYS(socket), 1, &vs, EPERM)) < 0 ||
	    (r = deny(ctx, SCMP_SYS(socket), 2, nl, EPERM)) < 0)
		return ERR(r, "seccomp rule for socket: %s", strerror(-r));
	*nrules += 2;
	return 0;
}

int seccomp_prog_build_libseccomp(struct seccomp_prog *p, char *err, size_t errlen)
{
	memset(p, 0, sizeof *p);
	if (seccomp_arch_native() != SCMP_ARCH_X86_64) {
		/* The prologue and the fallback numbers are x86_64's. */
		return ERR(-ENOTSUP, "seccomp: only x86_64 is supported");
	}
	/* Anything not of the native arch (i386, x32) is killed. */
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx) {
		return ERR(-ENOMEM, "seccomp_init failed");
	}
	int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (r < 0)
		ERR(r, "seccomp_attr_set(BADARCH): %s", strerror(-r));
	else
		r = build(ctx, &p->nrules, err, errlen);
	_cleanup_close_ int mfd = -1;
	if (r == 0 && (mfd = memfd_create("kart-seccomp-build", MFD_CLOEXEC)) < 0) {
		r = -errno;
		ERR(r, "memfd_create: %s", strerror(errno));
	}
	if (r == 0 && (r = seccomp_export_bpf(ctx, mfd)) < 0)
		ERR(r, "seccomp_export_bpf: %s", strerror(-r));
	seccomp_release(ctx);
	if (r < 0)
		return r;
	off_t end = lseek(mfd, 0, SEEK_END);
	if (end <= 0 || end % sizeof(struct sock_filter) || end > BPF_MAXINSNS * 8) {
		return ERR(-EINVAL, "seccomp_export_bpf: a program of %lld bytes", (long long)end);
	}
	size_t pro = sizeof persona_prologue;
	p->len = pro + (size_t)end;
	p->bpf = xmalloc(p->len);
	memcpy(p->bpf, persona_prologue, pro);
	ssize_t n = pread(mfd, p->bpf + pro, (size_t)end, 0);
	if (n != end) {
		r = n < 0 ? -errno : -EIO;
		ERR(r, "reading the exported filter back: %s", strerror(-r));
		seccomp_prog_free(p);
		return r;
	}
	if (p->len / sizeof(struct sock_filter) > BPF_MAXINSNS) {
		ERR(-E2BIG, "seccomp: the filter is too long");
		seccomp_prog_free(p);
		return -E2BIG;
	}
	p->nrules++; /* the personality prologue */
	return 0;
}

/* The program kart loads, compiled here rather than by libseccomp.
 *
 * Every task pays for the load: the kernel JITs the program (its cost
 * grows with the length) and fills its action cache by running it once
 * for every syscall number (its cost grows with the steps each walk
 * takes). libseccomp's tree, with the personality prologue in front,
 * is longer and walks further per number than this one, a binary search
 * over the ranges of numbers that share an action (docs/PERFORMANCE.md,
 * "The seccomp filter as a tree"). The rules are the same table; the
 * unit test runs both programs over every syscall number, arch and
 * argument pattern that decides anything and requires the same answer
 * from each.
 *
 * Layout, all jumps forward:
 *   arch != x86_64 -> kill; nr >= 0x40000000 (x32) -> kill, but -1;
 *   the search: one JGE per boundary between ranges;
 *   blocks for the numbers whose arguments decide (clone and unshare,
 *   ioctl, personality, socket); then the four returns. */
enum act { ACT_ALLOW, ACT_EPERM, ACT_ENOSYS, ACT_KILL, ACT_NSFLAGS, ACT_IOCTL, ACT_PERSONA,
	   ACT_SOCKET, ACT_X32, ACT__N };

struct span {
	uint32_t lo; /* the first number of the range; it runs to the next span's lo */
	enum act act;
};

struct asm_ {
	struct sock_filter ins[BPF_MAXINSNS];
	int target[BPF_MAXINSNS][2]; /* -1, or an ACT_ block for jt [0] and jf [1] */
	int block[ACT__N];           /* where each block starts */
	size_t n;
	bool overflow;
};

static size_t emit(struct asm_ *a, uint16_t code, uint32_t k, int jt, int jf)
{
	if (a->n >= BPF_MAXINSNS) {
		a->overflow = true;
		return a->n - 1;
	}
	a->ins[a->n] = (struct sock_filter){.code = code, .k = k};
	a->target[a->n][0] = jt;
	a->target[a->n][1] = jf;
	return a->n++;
}

/* Spans [l, r]: a JGE on the middle boundary, the lower half falling
 * through, the upper half jumped to; a single span is its block. The
 * caller's jump to the result is patched by index: returns the
 * instruction to jump to, or -1 - block for a block. */
static int search(struct asm_ *a, const struct span *sp, size_t l, size_t r)
{
	if (l == r)
		return -1 - (int)sp[l].act;
	size_t m = (l + r + 1) / 2;
	size_t at = emit(a, BPF_JMP | BPF_JGE | BPF_K, sp[m].lo, -1, -1);
	int lo = search(a, sp, l, m - 1);
	int hi = search(a, sp, m, r);
	/* jt: an instruction index (>= 0) is resolved below like a block */
	a->target[at][0] = hi < 0 ? -1 - hi : ACT__N + hi;
	a->target[at][1] = lo < 0 ? -1 - lo : ACT__N + lo;
	return (int)at;
}

static int cmp_span(const void *x, const void *y)
{
	uint32_t a = ((const struct span *)x)->lo, b = ((const struct span *)y)->lo;
	return a < b ? -1 : a > b;
}

#define LD_ARG(i, hi) (offsetof(struct seccomp_data, args[i]) + ((hi) ? 4 : 0)) /* little-endian */

/* The whole program, or (clone3_denied false) the same without its rule
 * for clone3: the outer half of seccomp_prog_build_split. */
static int prog_build(struct seccomp_prog *p, bool clone3_denied, char *err, size_t errlen)
{
	memset(p, 0, sizeof *p);
	if (seccomp_arch_native() != SCMP_ARCH_X86_64) {
		/* The layout, the argument offsets and the fallback numbers
		 * are x86_64's. */
		return ERR(-ENOTSUP, "seccomp: only x86_64 is supported");
	}
	/* The numbers with an action other than allow. */
	struct span one[ARRAY_SIZE(denied) + 8];
	size_t n1 = 0;
	for (size_t i = 0; i < ARRAY_SIZE(denied); i++) {
		int nr = denied_nr(i);
		if (nr <= 0)
			return ERR(-ENOSYS, "seccomp: this libseccomp does not know %s", denied[i].name);
		one[n1++] = (struct span){(uint32_t)nr, ACT_EPERM};
	}
	one[n1++] = (struct span){SCMP_SYS(clone), ACT_NSFLAGS};
	one[n1++] = (struct span){SCMP_SYS(unshare), ACT_NSFLAGS};
	if (clone3_denied)
		one[n1++] = (struct span){SCMP_SYS(clone3), ACT_ENOSYS};
	one[n1++] = (struct span){SCMP_SYS(ioctl), ACT_IOCTL};
	one[n1++] = (struct span){SCMP_SYS(personality), ACT_PERSONA};
	one[n1++] = (struct span){SCMP_SYS(socket), ACT_SOCKET};
	sort_n(one, n1, sizeof *one, cmp_span);
	/* Ranges: allow between the numbers, neighbours with one action
	 * merged. */
	struct span sp[2 * ARRAY_SIZE(one) + 1];
	size_t ns = 0;
	uint32_t next = 0;
	for (size_t i = 0; i < n1; i++) {
		if (i > 0 && one[i].lo == one[i - 1].lo)
			return ERR(-EINVAL, "seccomp: syscall %u is in the table twice", one[i].lo);
		if (one[i].lo > next && (ns == 0 || sp[ns - 1].act != ACT_ALLOW))
			sp[ns++] = (struct span){next, ACT_ALLOW};
		if (ns == 0 || sp[ns - 1].act != one[i].act)
			sp[ns++] = one[i];
		next = one[i].lo + 1;
	}
	sp[ns++] = (struct span){next, ACT_ALLOW};

	struct asm_ *a = xmalloc(sizeof *a);
	a->n = 0;
	a->overflow = false;
	emit(a, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch), -1, -1);
	emit(a, BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, -1, ACT_KILL);
	emit(a, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr), -1, -1);
	emit(a, BPF_JMP | BPF_JGE | BPF_K, 0x40000000U, ACT_X32, -1);
	int root = search(a, sp, 0, ns - 1);
	if (root < 0) /* one range: no search, a jump to its block */
		emit(a, BPF_JMP | BPF_JA, 0, -1 - root, -1);

	/* The x32 ABI's numbers, and beyond, kill; except -1, which a
	 * tracer sets to skip a call (it fails with ENOSYS), as libseccomp
	 * lets it through. */
	a->block[ACT_X32] = (int)a->n;
	emit(a, BPF_JMP | BPF_JEQ | BPF_K, 0xffffffffU, ACT_ALLOW, ACT_KILL);
	/* clone and unshare: any namespace flag in the low word of the
	 * flags (they all are) is refused. */
	a->block[ACT_NSFLAGS] = (int)a->n;
	uint32_t mask = 0;
	for (size_t i = 0; i < ARRAY_SIZE(ns_flags); i++)
		mask |= (uint32_t)ns_flags[i];
	emit(a, BPF_LD | BPF_W | BPF_ABS, LD_ARG(0, 0), -1, -1);
	emit(a, BPF_JMP | BPF_JSET | BPF_K, mask, ACT_EPERM, ACT_ALLOW);
	/* ioctl: the request is an unsigned int to the kernel; the low word
	 * alone decides. */
	a->block[ACT_IOCTL] = (int)a->n;
	emit(a, BPF_LD | BPF_W | BPF_ABS, LD_ARG(1, 0), -1, -1);
	for (size_t i = 0; i < ARRAY_SIZE(tty_reqs); i++)
		emit(a, BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)tty_reqs[i], ACT_EPERM,
		     i + 1 < ARRAY_SIZE(tty_reqs) ? -1 : ACT_ALLOW);
	/* personality: the values of persona_prologue (above), which says
	 * why. */
	a->block[ACT_PERSONA] = (int)a->n;
	emit(a, BPF_LD | BPF_W | BPF_ABS, LD_ARG(0, 1), -1, -1);
	emit(a, BPF_JMP | BPF_JEQ | BPF_K, 0, -1, ACT_EPERM);
	emit(a, BPF_LD | BPF_W | BPF_ABS, LD_ARG(0, 0), -1, -1);
	for (size_t i = 0; i < ARRAY_SIZE(persona_ok); i++)
		emit(a, BPF_JMP | BPF_JEQ | BPF_K, persona_ok[i], ACT_ALLOW,
		     i + 1 < ARRAY_SIZE(persona_ok) ? -1 : ACT_EPERM);
	/* socket: the families above, by the low word; netlink's protocol,
	 * by both words. */
	a->block[ACT_SOCKET] = (int)a->n;
	emit(a, BPF_LD | BPF_W | BPF_ABS, LD_ARG(0, 0), -1, -1);
	emit(a, BPF_JMP | BPF_JEQ | BPF_K, SOCK_FAMILY_DENIED, ACT_EPERM, -1);
	emit(a, BPF_JMP | BPF_JEQ | BPF_K, SOCK_FAMILY_NETLINK, -1, ACT_ALLOW);
	emit(a, BPF_LD | BPF_W | BPF_ABS, LD_ARG(2, 0), -1, -1);
	emit(a, BPF_JMP | BPF_JEQ | BPF_K, SOCK_NETLINK_OK, -1, ACT_EPERM);
	emit(a, BPF_LD | BPF_W | BPF_ABS, LD_ARG(2, 1), -1, -1);
	emit(a, BPF_JMP | BPF_JEQ | BPF_K, 0, ACT_ALLOW, ACT_EPERM);
	static const uint32_t ret[] = {
		[ACT_ALLOW] = SECCOMP_RET_ALLOW,
		[ACT_EPERM] = SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA),
		[ACT_ENOSYS] = SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA),
		[ACT_KILL] = SECCOMP_RET_KILL_PROCESS,
	};
	for (int b = ACT_ALLOW; b <= ACT_KILL; b++) {
		a->block[b] = (int)a->n;
		emit(a, BPF_RET | BPF_K, ret[b], -1, -1);
	}

	/* Resolve the jumps: -1 falls through; below ACT__N, a block; from
	 * ACT__N up, an instruction of the search. */
	int r = 0;
	for (size_t i = 0; i < a->n && !a->overflow; i++) {
		struct sock_filter *f = &a->ins[i];
		if (BPF_CLASS(f->code) != BPF_JMP)
			continue;
		for (int j = 0; j < 2; j++) {
			int t = a->target[i][j];
			if (BPF_OP(f->code) == BPF_JA && j == 1)
				break;
			long to = t < 0 ? (long)i + 1 : t < ACT__N ? a->block[t] : t - ACT__N;
			long off = to - (long)i - 1;
			if (off < 0 || off > (BPF_OP(f->code) == BPF_JA ? (long)UINT32_MAX : 255)) {
				ERR(-E2BIG, "seccomp: a jump of %ld at instruction %zu", off, i);
				r = -E2BIG;
			}
			if (BPF_OP(f->code) == BPF_JA)
				f->k = (uint32_t)off;
			else if (j == 0)
				f->jt = (uint8_t)off;
			else
				f->jf = (uint8_t)off;
		}
	}
	if (a->overflow) {
		ERR(-E2BIG, "seccomp: the filter is too long");
		r = -E2BIG;
	}
	if (r == 0) {
		p->len = a->n * sizeof(struct sock_filter);
		p->bpf = xmalloc(p->len);
		memcpy(p->bpf, a->ins, p->len);
		/* As counted for the log: one per denied call and per argument
		 * test, as libseccomp's rules are. */
		p->nrules = (int)ARRAY_SIZE(denied) + 2 * (int)ARRAY_SIZE(ns_flags) + 1 +
			    (int)ARRAY_SIZE(tty_reqs) + 2 + 1;
	}
	free(a);
	return r;
}

int seccomp_prog_build(struct seccomp_prog *p, char *err, size_t errlen)
{
	return prog_build(p, true, err, errlen);
}

int seccomp_prog_build_split(struct seccomp_prog *outer, struct seccomp_prog *inner, char *err,
			     size_t errlen)
{
	memset(inner, 0, sizeof *inner);
	int r = prog_build(outer, false, err, errlen);
	if (r < 0)
		return r;
	/* Another arch is killed by the outer program too; clone3 gets the
	 * whole program's ENOSYS; the rest is the outer program's to say. */
	static const struct sock_filter in[] = {
		/* 0 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		/* 1 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 4),
		/* 2 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		/* 3 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1),
		/* 4 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
		/* 5 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		/* 6 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	};
	inner->len = sizeof in;
	inner->bpf = xmalloc(sizeof in);
	memcpy(inner->bpf, in, sizeof in);
	inner->nrules = 1;
	return 0;
}

int seccomp_prog_fd(const struct seccomp_prog *p)
{
	if (!p->bpf)
		return -EINVAL;
	return memfd_sealed("kart-seccomp", p->bpf, p->len);
}

struct sock_fprog seccomp_prog_fprog(const struct seccomp_prog *p)
{
	return (struct sock_fprog){.len = (unsigned short)(p->len / sizeof(struct sock_filter)),
				   .filter = (struct sock_filter *)p->bpf};
}

void seccomp_prog_free(struct seccomp_prog *p)
{
	free(p->bpf);
	p->bpf = NULL;
	p->len = 0;
}

static json_t *profile_rule(const char *name, int errnum, int index, unsigned long long mask,
			    unsigned long long value)
{
	json_t *r = json_pack("{s:[s], s:s, s:i}", "names", name, "action", "SCMP_ACT_ERRNO",
			      "errnoRet", errnum);
	if (r && index >= 0)
		json_object_set_new(r, "args",
				    json_pack("[{s:i, s:I, s:I, s:s}]", "index", index, "value",
					      (json_int_t)mask, "valueTwo", (json_int_t)value, "op",
					      "SCMP_CMP_MASKED_EQ"));
	return r;
}

char *seccomp_profile_json(void)
{
	json_t *names = json_array(), *rules = json_array();
	for (size_t i = 0; i < ARRAY_SIZE(denied); i++)
		json_array_append_new(names, json_string(denied[i].name));
	json_array_append_new(rules, json_pack("{s:o, s:s, s:i}", "names", names, "action",
					       "SCMP_ACT_ERRNO", "errnoRet", EPERM));
	for (size_t i = 0; i < ARRAY_SIZE(ns_flags); i++) {
		json_array_append_new(rules, profile_rule("clone", EPERM, 0, ns_flags[i], ns_flags[i]));
		json_array_append_new(rules, profile_rule("unshare", EPERM, 0, ns_flags[i], ns_flags[i]));
	}
	json_array_append_new(rules, profile_rule("clone3", ENOSYS, -1, 0, 0));
	for (size_t i = 0; i < ARRAY_SIZE(tty_reqs); i++)
		json_array_append_new(rules, profile_rule("ioctl", EPERM, 1, 0xffffffffUL, tty_reqs[i]));
	json_array_append_new(rules, profile_rule("socket", EPERM, 0, 0xffffffffUL, SOCK_FAMILY_DENIED));
	json_t *nl = profile_rule("socket", EPERM, 0, 0xffffffffUL, SOCK_FAMILY_NETLINK);
	json_array_append_new(json_object_get(nl, "args"),
			      json_pack("{s:i, s:I, s:s}", "index", 2, "value", (json_int_t)SOCK_NETLINK_OK,
					"op", "SCMP_CMP_NE"));
	json_array_append_new(rules, nl);
	/* personality: a profile cannot say "none of persona_ok", but it can
	 * deny every bit that none of them holds, one rule a bit. Unlike the
	 * BPF program, this also denies the 0xffffffff query. */
	uint32_t ok_bits = 0;
	for (size_t i = 0; i < ARRAY_SIZE(persona_ok); i++)
		if (persona_ok[i] != 0xffffffffu)
			ok_bits |= persona_ok[i];
	for (int b = 0; b < 32; b++)
		if (!(ok_bits & (1u << b)))
			json_array_append_new(rules, profile_rule("personality", EPERM, 0, 1ul << b,
								  1ul << b));
	json_t *o = json_pack("{s:s, s:[s], s:o}", "defaultAction", "SCMP_ACT_ALLOW",
			      "architectures", "SCMP_ARCH_X86_64", "syscalls", rules);
	if (!o)
		return NULL;
	char *t = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	json_decref(o);
	return t;
}
