/* test_outdir.c - a bounded $KART_OUTDIR (src/outdir.c): the holder's
 * tmpfs refuses writes past its bytes and its files with ENOSPC, is seen
 * only in the holder's mount namespace, outlives it through the
 * descriptor, and the copy keeps a tree whole or says why not. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "outdir.h"
#include "util.h"

static struct outdir_ns ns = OUTDIR_NS_INIT;
static char base[64];
static bool have_ns;

static int setup(void **state)
{
	(void)state;
	snprintf(base, sizeof base, "/tmp/kart-outdir.XXXXXX");
	if (!mkdtemp(base))
		return -1;
	char err[256];
	have_ns = outdir_ns_start(&ns, err, sizeof err) == 0;
	if (!have_ns)
		fprintf(stderr, "outdir: %s\n", err);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	outdir_ns_stop(&ns);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", base);
	return system(cmd) == 0 ? 0 : -1;
}

static void need_ns(void)
{
	if (!have_ns) {
		if (getenv("KART_MUST_WORK"))
			fail_msg("no user namespace for the $KART_OUTDIR holder");
		skip();
	}
}

/* In a child that joined the holder's namespaces, as a task would. */
static int in_ns(const char *dir, const char *sh)
{
	pid_t p = fork();
	if (p == 0) {
		if (outdir_join(ns.userns, ns.mntns) < 0 || chdir(dir) < 0)
			_exit(99);
		execl("/bin/sh", "sh", "-c", sh, (char *)NULL);
		_exit(98);
	}
	int st;
	if (waitpid(p, &st, 0) < 0 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* A bounded $KART_OUTDIR of BYTES and FILES mounted on a fresh BASE/NAME
 * (its path in P); its descriptor. Skips where there is no holder. */
static int bounded(char p[128], const char *name, uint64_t bytes, uint64_t files)
{
	need_ns();
	snprintf(p, 128, "%s/%s", base, name);
	assert_int_equal(mkdir(p, 0700), 0);
	int fd = outdir_mount(&ns, p, bytes, files, getuid(), getgid());
	assert_true(fd >= 0);
	return fd;
}

/* The mover copies the tree under FD back to P, within these bounds. */
static void move(struct outdir_move *m, int fd, const char *p, uint64_t bytes_max,
		 uint64_t files_max, int depth_max)
{
	*m = (struct outdir_move){.src = fd, .dst_at = AT_FDCWD, .dst = -1, .reader = getuid(),
				  .c = {.bytes_max = bytes_max, .files_max = files_max,
					.depth_max = depth_max}};
	snprintf(m->dst_name, sizeof m->dst_name, "%s", p);
	outdir_move_run(m);
}

/* A bounded $KART_OUTDIR at BASE/NAME (its path in P) where SH, run as
 * a task would, exits 0; unmounted, then moved back to P by the mover. */
static void filled_and_moved(struct outdir_move *m, char p[128], const char *name, uint64_t bytes,
			     uint64_t files, int depth_max, const char *sh)
{
	int fd = bounded(p, name, bytes, files);
	assert_int_equal(in_ns(p, sh), 0);
	assert_int_equal(outdir_umount(&ns, p), 0);
	move(m, fd, p, bytes, files, depth_max);
}

static void test_bytes_bound(void **state)
{
	(void)state;
	char p[128];
	int fd = bounded(p, "bytes", 1 << 20, 100);
	/* The host sees its own empty directory; the namespace, the tmpfs. */
	assert_int_equal(in_ns(p, "head -c 3000000 /dev/zero >big"), 1);
	struct stat st;
	char q[160];
	snprintf(q, sizeof q, "%s/big", p);
	assert_int_equal(stat(q, &st), -1);
	assert_int_equal(fstatat(fd, "big", &st, 0), 0);
	assert_true(st.st_size <= 1 << 20);
	assert_true(outdir_full(fd));
	/* Detached without waiting, by its descriptor, even renamed. */
	char p2[160];
	snprintf(p2, sizeof p2, "%s.moved", p);
	assert_int_equal(rename(p, p2), 0);
	assert_int_equal(outdir_release(&ns, fd), 0);
	char sh[400];
	snprintf(sh, sizeof sh,
		 "i=0; while [ $i -lt 100 ]; do [ \"$(stat -f -c %%T %s)\" = tmpfs ] || exit 0; "
		 "sleep 0.02; i=$((i+1)); done; exit 1", p2);
	assert_int_equal(in_ns("/", sh), 0);
	assert_int_equal(rename(p2, p), 0);
	/* Detached, and still there through the descriptor. */
	assert_int_equal(fstatat(fd, "big", &st, 0), 0);

	struct outdir_move m;
	move(&m, fd, p, 1 << 20, 100, 8);
	assert_false(m.kept);
	assert_true(m.c.full);
	assert_non_null(strstr(m.why, "artifacts_max"));
	assert_int_equal(m.bytes, 1 << 20);
	assert_int_equal(rmdir(p), 0); /* nothing copied */
}

static void test_files_bound(void **state)
{
	(void)state;
	char p[128];
	struct outdir_move m;
	/* The 21st entry fails with ENOSPC. */
	filled_and_moved(&m, p, "files", 1 << 20, 20, 8,
			 "i=0; while [ $i -lt 20 ]; do (: >f$i) || exit 2; i=$((i+1)); done; "
			 "(: >one_more) 2>/dev/null && exit 3; exit 0");
	assert_false(m.kept);
	assert_int_equal(m.files, 20);
	assert_non_null(strstr(m.why, "artifacts_files"));
	assert_int_equal(rmdir(p), 0);
}

static void test_copy_kept_whole(void **state)
{
	(void)state;
	char p[128];
	struct outdir_move m;
	filled_and_moved(&m, p, "kept", 4 << 20, 100, 8,
			 "mkdir -p a/b/c && echo hi >a/b/c/f && ln -s /etc/passwd a/l && "
			 "mkfifo a/fifo && printf x >x && chmod 755 x");
	assert_true(m.kept);
	assert_int_equal(m.c.files, 6); /* a a/b a/b/c a/b/c/f a/l x */
	assert_int_equal(m.c.lost_files, 1); /* the FIFO */
	assert_int_equal(m.c.bytes, 4);
	char q[200], t[64];
	struct stat st;
	snprintf(q, sizeof q, "%s/a/b/c/f", p);
	assert_int_equal(stat(q, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	assert_int_equal(st.st_size, 3);
	snprintf(q, sizeof q, "%s/x", p);
	assert_int_equal(stat(q, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);
	snprintf(q, sizeof q, "%s/a/l", p);
	ssize_t n = readlink(q, t, sizeof t - 1);
	assert_true(n > 0);
	t[n] = '\0';
	assert_string_equal(t, "/etc/passwd");
	snprintf(q, sizeof q, "%s/a/fifo", p);
	assert_int_equal(lstat(q, &st), -1);
}

static void test_copy_too_deep(void **state)
{
	(void)state;
	char p[128];
	struct outdir_move m;
	filled_and_moved(&m, p, "deep", 4 << 20, 100, 4,
			 "mkdir -p 1/2/3/4/5/6 && echo x >1/2/3/4/5/6/f && echo y >top");
	assert_false(m.kept);
	assert_true(m.c.too_deep);
	assert_non_null(strstr(m.why, "artifacts_depth"));
	assert_int_equal(rmdir(p), 0); /* what was copied is gone again */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bytes_bound),
		cmocka_unit_test(test_files_bound),
		cmocka_unit_test(test_copy_kept_whole),
		cmocka_unit_test(test_copy_too_deep),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
