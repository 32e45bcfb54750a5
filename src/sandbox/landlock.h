/* landlock.h - the Landlock ruleset of a task, for kart-launch.
 *
 * libc only (it is linked into the launcher, which runs inside the
 * minimal sandbox). The constants are spelled out here rather than taken
 * from <linux/landlock.h>, because the build host's headers may be older
 * than the kernel that runs the task: the ABI is probed at run time and
 * each mask is cut down to what that ABI knows (best effort, as the
 * kernel's samples/landlock/sandboxer.c). */
#ifndef KART_LANDLOCK_H
#define KART_LANDLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ABI 1 */
#define LL_FS_EXECUTE (1ULL << 0)
#define LL_FS_WRITE_FILE (1ULL << 1)
#define LL_FS_READ_FILE (1ULL << 2)
#define LL_FS_READ_DIR (1ULL << 3)
#define LL_FS_REMOVE_DIR (1ULL << 4)
#define LL_FS_REMOVE_FILE (1ULL << 5)
#define LL_FS_MAKE_CHAR (1ULL << 6)
#define LL_FS_MAKE_DIR (1ULL << 7)
#define LL_FS_MAKE_REG (1ULL << 8)
#define LL_FS_MAKE_SOCK (1ULL << 9)
#define LL_FS_MAKE_FIFO (1ULL << 10)
#define LL_FS_MAKE_BLOCK (1ULL << 11)
#define LL_FS_MAKE_SYM (1ULL << 12)
/* ABI 2, 3, 5 */
#define LL_FS_REFER (1ULL << 13)
#define LL_FS_TRUNCATE (1ULL << 14)
#define LL_FS_IOCTL_DEV (1ULL << 15)
/* ABI 4 */
#define LL_NET_BIND_TCP (1ULL << 0)
#define LL_NET_CONNECT_TCP (1ULL << 1)
/* ABI 6 */
#define LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LL_SCOPE_SIGNAL (1ULL << 1)

#define LL_RULE_PATH_BENEATH 1
#define LL_CREATE_RULESET_VERSION (1U << 0)

/* The kernel's struct landlock_ruleset_attr (its size tells the kernel
 * which fields we know; unknown ones must be zero). */
struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

/* Rights that apply to a file (not only to a directory): a rule on a
 * file with any other right is EINVAL. */
#define LL_FS_FILE_RIGHTS \
	(LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV)

enum ll_mode { LL_MODE_AUTO = 0, LL_MODE_ENFORCE, LL_MODE_OFF };
/* "auto", "enforce", "off" -> mode; -1 otherwise. */
int ll_mode_parse(const char *s);
const char *ll_mode_name(enum ll_mode m);

/* What a ruleset handles (denies unless a rule allows it) at this ABI. */
uint64_t ll_fs_handled(int abi);
uint64_t ll_net_handled(int abi);
uint64_t ll_scoped(int abi);
/* The ruleset of a task at this ABI: every filesystem right this ABI
 * knows; TCP bind and connect unless the task has network; scoping of
 * abstract unix sockets and signals. */
void ll_ruleset(int abi, bool tcp_allowed, struct ll_ruleset_attr *attr);
/* Rights a path gets: read-only paths read and execute, writable ones
 * every right; a file only the rights that apply to files. */
uint64_t ll_path_rights(int abi, bool writable, bool is_dir);

/* The highest ABI of the running kernel: > 0, or -errno (-ENOSYS: no
 * Landlock in this kernel; -EOPNOTSUPP: built in but switched off). */
int ll_abi(void);

struct ll_path {
	const char *path;
	bool writable;
	/* Opened ahead (backend none: the worker keeps the system's paths
	 * open, see worker_held.c): an O_PATH descriptor of path and whether it
	 * is a directory; then ll_apply neither opens nor stats it. */
	bool held;
	bool dir;
	int fd;
	/* Held, and beneath a held read-only directory with its rule: this
	 * one would add nothing (/bin -> /usr/bin, /etc/localtime ->
	 * /usr/share/zoneinfo/...): no rule is made for it. */
	bool covered;
};

/* Build the ruleset, add a rule for each path (a path that does not
 * exist, or that this user cannot reach, gets no rule: it stays denied),
 * set no_new_privs and restrict the calling thread. Returns 0, or -errno
 * with err saying which step failed. */
int ll_apply(int abi, const struct ll_path *paths, size_t npaths, bool tcp_allowed, char *err,
	     size_t errlen);

#endif
