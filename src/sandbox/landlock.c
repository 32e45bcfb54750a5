/* landlock.c - the task's Landlock ruleset (see landlock.h). libc only. */
#define _GNU_SOURCE
#include "landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The kernel's struct landlock_path_beneath_attr. */
struct ll_path_beneath {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

static const char *const mode_names[] = {
	[LL_MODE_AUTO] = "auto", [LL_MODE_ENFORCE] = "enforce", [LL_MODE_OFF] = "off"};

int ll_mode_parse(const char *s)
{
	for (int m = 0; m < (int)(sizeof mode_names / sizeof mode_names[0]); m++)
		if (strcmp(s, mode_names[m]) == 0)
			return m;
	return -1;
}

const char *ll_mode_name(enum ll_mode m)
{
	return (unsigned)m < sizeof mode_names / sizeof mode_names[0] ? mode_names[m] : "?";
}

uint64_t ll_fs_handled(int abi)
{
	if (abi < 1)
		return 0;
	uint64_t m = (LL_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0..12 */
	if (abi >= 2)
		m |= LL_FS_REFER;
	if (abi >= 3)
		m |= LL_FS_TRUNCATE;
	if (abi >= 5)
		m |= LL_FS_IOCTL_DEV;
	return m;
}

uint64_t ll_net_handled(int abi) { return abi >= 4 ? LL_NET_BIND_TCP | LL_NET_CONNECT_TCP : 0; }

uint64_t ll_scoped(int abi)
{
	return abi >= 6 ? LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL : 0;
}

void ll_ruleset(int abi, bool tcp_allowed, struct ll_ruleset_attr *attr)
{
	memset(attr, 0, sizeof *attr);
	attr->handled_access_fs = ll_fs_handled(abi);
	/* Handled with no port rule: every bind and connect is denied. */
	attr->handled_access_net = tcp_allowed ? 0 : ll_net_handled(abi);
	attr->scoped = ll_scoped(abi);
}

uint64_t ll_path_rights(int abi, bool writable, bool is_dir)
{
	uint64_t r = writable ? ll_fs_handled(abi)
			      : (LL_FS_EXECUTE | LL_FS_READ_FILE | LL_FS_READ_DIR) & ll_fs_handled(abi);
	return is_dir ? r : r & LL_FS_FILE_RIGHTS;
}

int ll_abi(void)
{
	long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
	if (v > 0)
		return (int)v;
	return v == 0 ? -EINVAL : -errno;
}

int ll_apply(int abi, const struct ll_path *paths, size_t npaths, bool tcp_allowed, char *err,
	     size_t errlen)
{
	struct ll_ruleset_attr attr;
	ll_ruleset(abi, tcp_allowed, &attr);
	/* Tell the kernel only the fields its ABI has. */
	size_t sz = abi >= 6 ? sizeof attr : abi >= 4 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
	int e;
	int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sz, 0);
	if (rs < 0) {
		e = errno;
		snprintf(err, errlen, "landlock_create_ruleset (ABI %d): %s", abi, strerror(e));
		return -e;
	}
	for (size_t i = 0; i < npaths; i++) {
		if (paths[i].held && paths[i].covered)
			continue;
		if (paths[i].held) {
			struct ll_path_beneath hb = {
				.allowed_access = ll_path_rights(abi, paths[i].writable, paths[i].dir),
				.parent_fd = paths[i].fd,
			};
			if (syscall(SYS_landlock_add_rule, rs, LL_RULE_PATH_BENEATH, &hb, 0) < 0) {
				e = errno;
				snprintf(err, errlen, "landlock_add_rule %s: %s", paths[i].path,
					 strerror(e));
				close(rs);
				return -e;
			}
			continue;
		}
		int fd = open(paths[i].path, O_PATH | O_CLOEXEC);
		if (fd < 0) {
			e = errno;
			/* Not there, or not ours to reach: no rule, so denied. */
			if (e == ENOENT || e == ENOTDIR || e == EACCES)
				continue;
			snprintf(err, errlen, "open %s: %s", paths[i].path, strerror(e));
			close(rs);
			return -e;
		}
		struct stat st;
		if (fstat(fd, &st) < 0) {
			e = errno;
			snprintf(err, errlen, "stat %s: %s", paths[i].path, strerror(e));
			close(fd);
			close(rs);
			return -e;
		}
		struct ll_path_beneath pb = {
			.allowed_access = ll_path_rights(abi, paths[i].writable, S_ISDIR(st.st_mode)),
			.parent_fd = fd,
		};
		if (syscall(SYS_landlock_add_rule, rs, LL_RULE_PATH_BENEATH, &pb, 0) < 0) {
			e = errno;
			snprintf(err, errlen, "landlock_add_rule %s: %s", paths[i].path, strerror(e));
			close(fd);
			close(rs);
			return -e;
		}
		close(fd);
	}
	/* Required by landlock_restrict_self without CAP_SYS_ADMIN; bwrap
	 * has set it already, backend none has not. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		e = errno;
		snprintf(err, errlen, "PR_SET_NO_NEW_PRIVS: %s", strerror(e));
		close(rs);
		return -e;
	}
	if (syscall(SYS_landlock_restrict_self, rs, 0) < 0) {
		e = errno;
		snprintf(err, errlen, "landlock_restrict_self: %s", strerror(e));
		close(rs);
		return -e;
	}
	close(rs);
	return 0;
}
