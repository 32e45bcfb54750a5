/* test_binds.c - a task's paths opened as its submitter (src/sandbox/
 * binds.c): what she may not open is refused, what her groups give her
 * is hers, no magic link is followed, and the thread that acted as her
 * has its own credentials back afterwards, and which of the worker's
 * descriptors are open reads alike. Each case runs both ways: in
 * the thread (this kernel's) and by the vforked child (older kernels'). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "binds.h"
#include "util.h"

#define NOBODY 65534
#define GROUP 4242 /* a group nobody is given here, by number alone */

static char base[64], spool[96];

static int setup(void **state)
{
	(void)state;
	if (geteuid() != 0)
		return 0;
	snprintf(base, sizeof base, "/tmp/kart-binds.XXXXXX");
	if (!mkdtemp(base) || chmod(base, 0755) < 0)
		return -1;
	snprintf(spool, sizeof spool, "%s/spool", base);
	char p[160];
	snprintf(p, sizeof p, "%s/open", base);
	if (mkdir(spool, 0700) < 0 || mkdir(p, 0777) < 0 || chmod(p, 0777) < 0)
		return -1;
	snprintf(p, sizeof p, "%s/root", base);
	if (mkdir(p, 0700) < 0)
		return -1;
	snprintf(p, sizeof p, "%s/root/sub", base);
	if (mkdir(p, 0777) < 0)
		return -1;
	snprintf(p, sizeof p, "%s/grp", base);
	if (mkdir(p, 0770) < 0 || chmod(p, 0770) < 0 || chown(p, 0, GROUP) < 0)
		return -1;
	snprintf(p, sizeof p, "%s/magic", base);
	if (symlink("/proc/self/cwd", p) < 0)
		return -1;
	snprintf(p, sizeof p, "%s/file", base);
	int f = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (f < 0 || close(f) < 0)
		return -1;
	/* The worker's descriptor table, by number: one open, one not. */
	static const char *const fdl[] = {"fd/%d", "fdinfo/%d", "fdinfo/%d/x"};
	int held = open("/", O_PATH | O_CLOEXEC);
	if (held < 0 || fcntl(999, F_GETFD) >= 0)
		return -1;
	for (int i = 0; i < 6; i++) {
		char to[96], rel[32];
		snprintf(rel, sizeof rel, fdl[i / 2], i % 2 ? 999 : held);
		snprintf(to, sizeof to, "/proc/%d/%s", (int)getpid(), rel);
		snprintf(p, sizeof p, "%s/fdt%d", base, i);
		if (symlink(to, p) < 0)
			return -1;
	}
	/* The worker's working directory, which no error may name. */
	snprintf(p, sizeof p, "%s/spool/worker-cwd", base);
	if (mkdir(p, 0700) < 0 || chdir(p) < 0)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (base[0]) {
		char cmd[128];
		if (chdir("/") < 0)
			return -1;
		snprintf(cmd, sizeof cmd, "rm -rf %s", base);
		if (system(cmd) != 0)
			return -1;
	}
	return 0;
}

/* The thread's credentials, to compare before and after. */
struct snap {
	uid_t fsuid;
	gid_t fsgid;
	gid_t groups[64];
	long ngroups;
	struct __user_cap_data_struct cap[_LINUX_CAPABILITY_U32S_3];
};

static void snap(struct snap *s)
{
	memset(s, 0, sizeof *s);
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	s->fsuid = (uid_t)syscall(SYS_setfsuid, (uid_t)-1);
	s->fsgid = (gid_t)syscall(SYS_setfsgid, (gid_t)-1);
	s->ngroups = syscall(SYS_getgroups, 64, s->groups);
	assert_int_equal(syscall(SYS_capget, &h, s->cap), 0);
}

/* binds_open of one bind of mode at base/rel as cred (NULL: as we are);
 * the descriptor is closed. */
static int open_as(const struct run_cred *cred, enum bind_mode mode, const char *rel, char *err,
		   size_t errlen)
{
	struct task_spec spec;
	memset(&spec, 0, sizeof spec);
	spec.n_binds = 1;
	spec.cwd = mode == BIND_CWD ? 0 : -1;
	spec.binds[0].mode = mode;
	spec.binds[0].line = 2;
	snprintf(spec.binds[0].path, sizeof spec.binds[0].path, "%s/%s", base, rel);
	struct binds_opened bo = {.n = 0};
	struct snap before, after;
	snap(&before);
	err[0] = '\0';
	int r = binds_open(&spec, cred, spool, false, &bo, err, errlen);
	snap(&after);
	/* Whatever the answer, the thread is itself again. */
	assert_int_equal(after.fsuid, before.fsuid);
	assert_int_equal(after.fsgid, before.fsgid);
	assert_int_equal(after.ngroups, before.ngroups);
	assert_memory_equal(after.groups, before.groups, sizeof after.groups);
	assert_memory_equal(after.cap, before.cap, sizeof after.cap);
	if (r == 0)
		assert_int_equal(bo.n, 1);
	binds_close(&bo);
	return r;
}

static void each_way(void (*f)(void))
{
	if (geteuid() != 0)
		skip(); /* a submitter to become needs root */
	binds_by_child = false;
	f();
	binds_by_child = true;
	f();
	binds_by_child = false;
}

static const struct run_cred nobody = {.uid = NOBODY, .gid = NOBODY, .ngroups = 1, .groups = {NOBODY}};

static void refused_what_she_may_not(void)
{
	char err[512];
	/* Hers to use: world-writable. */
	assert_int_equal(open_as(&nobody, BIND_CWD, "open", err, sizeof err), 0);
	/* root's alone: she may not read, write or search it. */
	assert_int_equal(open_as(&nobody, BIND_RO, "root", err, sizeof err), -EACCES);
	assert_non_null(strstr(err, "uid 65534 has no read"));
	/* Below root's alone: she cannot even reach it. */
	assert_int_equal(open_as(&nobody, BIND_CWD, "root/sub", err, sizeof err), -EACCES);
	assert_non_null(strstr(err, "cannot be opened as uid 65534: Permission denied"));
	/* A file is no cwd=, and no directory to go through. */
	assert_int_equal(open_as(&nobody, BIND_CWD, "file", err, sizeof err), -EACCES);
	assert_non_null(strstr(err, "cwd=/tmp/kart-binds."));
	assert_non_null(strstr(err, "/file is not a directory"));
	assert_int_equal(open_as(&nobody, BIND_RO, "file/sub", err, sizeof err), -EACCES);
	assert_non_null(strstr(err, "No such file or directory (or not a directory"));
	/* The worker's own user (root) may. */
	assert_int_equal(open_as(NULL, BIND_CWD, "root/sub", err, sizeof err), 0);
}

static void test_refused_what_she_may_not(void **state)
{
	(void)state;
	each_way(refused_what_she_may_not);
}

static void groups_are_hers(void)
{
	char err[512];
	struct run_cred in = nobody;
	in.groups[in.ngroups++] = GROUP;
	assert_int_equal(open_as(&in, BIND_RW, "grp", err, sizeof err), 0);
	assert_int_equal(open_as(&nobody, BIND_RW, "grp", err, sizeof err), -EACCES);
	assert_non_null(strstr(err, "uid 65534 has no read, write and search access"));
	/* Her group, not the worker's: root with only GROUP in its list
	 * still reaches it (root keeps root's powers). */
	struct run_cred r = {.uid = 0, .gid = 0, .ngroups = 1, .groups = {GROUP}};
	assert_int_equal(open_as(&r, BIND_RW, "root/sub", err, sizeof err), 0);
}

static void test_groups_are_hers(void **state)
{
	(void)state;
	each_way(groups_are_hers);
}

static void no_magic_link(void)
{
	char err[512];
	/* A symlink to /proc/self/cwd would be the worker's working
	 * directory: never followed, and the error names nothing of it. */
	assert_int_equal(open_as(&nobody, BIND_CWD, "magic", err, sizeof err), -EACCES);
	char cwd[4096];
	assert_non_null(getcwd(cwd, sizeof cwd));
	assert_null(strstr(err, cwd));
}

static void test_no_magic_link(void **state)
{
	(void)state;
	each_way(no_magic_link);
}

static void fd_table_hidden(void)
{
	/* Which of the worker's descriptors are open is none of hers: a
	 * link to /proc/PID/fd/N or fdinfo/N of the worker's says the same
	 * whether N is open or not (she herself may not look there). */
	char err[512], first[512] = "";
	for (int i = 0; i < 12; i++) {
		char rel[16];
		snprintf(rel, sizeof rel, "fdt%d", i % 6);
		assert_int_equal(open_as(&nobody, i < 6 ? BIND_RO : BIND_CWD, rel, err, sizeof err),
				 -EACCES);
		const char *why = strstr(err, "cannot be opened as uid 65534");
		if (!why)
			fail_msg("%s (%s): '%s'", rel, i < 6 ? "ro" : "cwd", err);
		if (i == 0)
			snprintf(first, sizeof first, "%s", why);
		else if (strcmp(why, first))
			fail_msg("%s (%s): '%s', fdt0: '%s'", rel, i < 6 ? "ro" : "cwd", why, first);
	}
}

static void test_fd_table_hidden(void **state)
{
	(void)state;
	each_way(fd_table_hidden);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refused_what_she_may_not),
		cmocka_unit_test(test_groups_are_hers),
		cmocka_unit_test(test_no_magic_link),
		cmocka_unit_test(test_fd_table_hidden),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
