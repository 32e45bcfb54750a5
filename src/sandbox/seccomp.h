/* seccomp.h - the task's syscall filter: a denylist modelled on Docker's
 * default profile, compiled once per worker into classic BPF, handed to
 * bwrap in a sealed memfd (--seccomp FD) and loaded from the worker's own
 * copy by the child of backend none. */
#ifndef KART_SECCOMP_H
#define KART_SECCOMP_H

#include <linux/filter.h>
#include <stddef.h>

struct seccomp_prog {
	unsigned char *bpf; /* struct sock_filter[], len / 8 of them */
	size_t len;
	int nrules;         /* rules in the filter, for the log */
};

/* Compile the filter for the native ABI. The i386 and x32 ABIs are not
 * added: a syscall made through them kills the task (SIGSYS). Returns 0
 * or -errno with err saying which step failed. The program is kart's
 * own compilation of the rules (a search over ranges of syscall
 * numbers), shorter and quicker to load than libseccomp's. */
int seccomp_prog_build(struct seccomp_prog *p, char *err, size_t errlen);

/* The same filter in two programs whose verdicts, combined as the kernel
 * combines stacked filters, are the whole program's for every input:
 * outer is it without the rule for clone3, inner (7 instructions)
 * refuses clone3 alone. A thread that loads outer on itself passes it
 * to every process it clones (at no cost: a filter is shared, not
 * copied), while itself still free to clone3 into a cgroup; each child
 * then loads inner before it execs, a fraction of the cost of loading
 * the whole (docs/PERFORMANCE.md, "The filter in two halves"). */
int seccomp_prog_build_split(struct seccomp_prog *outer, struct seccomp_prog *inner, char *err,
			     size_t errlen);

/* The same rules compiled by libseccomp, behind the hand-written
 * personality check: the reference the unit test holds the program
 * above to, input by input. Not loaded by the worker. */
int seccomp_prog_build_libseccomp(struct seccomp_prog *p, char *err, size_t errlen);

/* A fresh memfd holding the program at offset 0, sealed read-only,
 * O_CLOEXEC. One per task: the reader consumes its file offset. Returns
 * the fd or -errno. */
int seccomp_prog_fd(const struct seccomp_prog *p);

void seccomp_prog_free(struct seccomp_prog *p);

/* The program as SECCOMP_SET_MODE_FILTER takes it; it points into p. */
struct sock_fprog seccomp_prog_fprog(const struct seccomp_prog *p);

/* The same denylist as a container runtime's seccomp profile (the JSON
 * that docker, podman and nerdctl take with --security-opt seccomp=FILE):
 * default allow, each denied call with its errno, the namespace flags of
 * clone and unshare, the two tty ioctls and the socket families by masked
 * argument. The
 * personality check has no equivalent there (a profile cannot say "none
 * of these values" either) and is left to the runtime's own default.
 * Returns malloc'd text, or NULL. */
char *seccomp_profile_json(void);

#endif
