/* test_landlock.c - the launcher's Landlock helpers (src/landlock.c):
 * the masks per ABI, the rights of a path, and a real ruleset applied
 * in a child where the kernel has Landlock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include "landlock.h"

static void test_modes(void **state)
{
	(void)state;
	assert_int_equal(ll_mode_parse("auto"), LL_MODE_AUTO);
	assert_int_equal(ll_mode_parse("enforce"), LL_MODE_ENFORCE);
	assert_int_equal(ll_mode_parse("off"), LL_MODE_OFF);
	assert_int_equal(ll_mode_parse("on"), -1);
	assert_int_equal(ll_mode_parse(""), -1);
	assert_string_equal(ll_mode_name(LL_MODE_ENFORCE), "enforce");
	assert_int_equal(LL_MODE_AUTO, 0); /* a zeroed policy means auto */
}

/* Best effort: each ABI handles exactly the rights it knows. */
static void test_masks_per_abi(void **state)
{
	(void)state;
	assert_int_equal(ll_fs_handled(0), 0);
	assert_int_equal(ll_fs_handled(1), 0x1fff);
	assert_int_equal(ll_fs_handled(2), 0x3fff);
	assert_int_equal(ll_fs_handled(3), 0x7fff);
	assert_int_equal(ll_fs_handled(4), 0x7fff);
	assert_int_equal(ll_fs_handled(5), 0xffff);
	assert_int_equal(ll_fs_handled(7), 0xffff);
	assert_int_equal(ll_net_handled(3), 0);
	assert_int_equal(ll_net_handled(4), LL_NET_BIND_TCP | LL_NET_CONNECT_TCP);
	assert_int_equal(ll_scoped(5), 0);
	assert_int_equal(ll_scoped(6), LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL);

	struct ll_ruleset_attr a;
	ll_ruleset(7, false, &a);
	assert_int_equal(a.handled_access_fs, 0xffff);
	assert_int_equal(a.handled_access_net, LL_NET_BIND_TCP | LL_NET_CONNECT_TCP);
	assert_int_equal(a.scoped, LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL);
	ll_ruleset(7, true, &a); /* net granted: TCP not handled at all */
	assert_int_equal(a.handled_access_net, 0);
	ll_ruleset(3, false, &a);
	assert_int_equal(a.handled_access_net, 0);
	assert_int_equal(a.scoped, 0);
}

static void test_path_rights(void **state)
{
	(void)state;
	uint64_t ro = LL_FS_EXECUTE | LL_FS_READ_FILE | LL_FS_READ_DIR;
	assert_int_equal(ll_path_rights(7, false, true), ro);
	assert_int_equal(ll_path_rights(7, false, false), LL_FS_EXECUTE | LL_FS_READ_FILE);
	assert_int_equal(ll_path_rights(7, true, true), ll_fs_handled(7));
	/* A file gets only the rights that apply to files (else EINVAL). */
	assert_int_equal(ll_path_rights(7, true, false), LL_FS_FILE_RIGHTS);
	assert_int_equal(ll_path_rights(1, true, false),
			 LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE);
	assert_int_equal(ll_path_rights(2, true, true) & LL_FS_REFER, LL_FS_REFER);
	assert_int_equal(ll_path_rights(1, true, true) & LL_FS_REFER, 0);
	/* Never a right the ABI does not know. */
	for (int abi = 1; abi <= 7; abi++)
		for (int rw = 0; rw < 2; rw++)
			for (int dir = 0; dir < 2; dir++)
				assert_int_equal(ll_path_rights(abi, rw, dir) & ~ll_fs_handled(abi), 0);
}

static bool try_write(const char *dir, const char *name)
{
	char p[512];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* A real ruleset in a child: writes inside the writable path succeed,
 * elsewhere fail; reads of read-only paths work; TCP connect denied. */
static void test_apply(void **state)
{
	(void)state;
	int abi = ll_abi();
	if (abi < 0) {
		if (getenv("KART_MUST_WORK") && strcmp(getenv("KART_MUST_WORK"), "1") == 0)
			fail_msg("no Landlock in this kernel (%s), and KART_MUST_WORK=1", strerror(-abi));
		skip();
	}
	char rw[] = "/tmp/kart-ll-rw.XXXXXX", other[] = "/tmp/kart-ll-other.XXXXXX";
	assert_non_null(mkdtemp(rw));
	assert_non_null(mkdtemp(other));
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct ll_path paths[] = {{"/usr", false}, {rw, true}, {"/nonexistent/kart", false}};
		char err[256];
		if (ll_apply(abi, paths, 3, false, err, sizeof err) < 0) {
			fprintf(stderr, "ll_apply: %s\n", err);
			_exit(10);
		}
		if (!try_write(rw, "ok"))
			_exit(11);
		if (try_write(other, "no"))
			_exit(12);
		if (open("/usr/bin/env", O_RDONLY | O_CLOEXEC) < 0)
			_exit(13);
		if (open("/etc/passwd", O_RDONLY | O_CLOEXEC) >= 0 || errno != EACCES)
			_exit(14);
		if (abi >= 4) {
			int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
			struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(9),
						 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
			if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof sa) == 0 || errno != EACCES)
				_exit(15);
		}
		_exit(0);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	char p[600];
	snprintf(p, sizeof p, "%s/ok", rw);
	(void)unlink(p);
	(void)rmdir(rw);
	(void)rmdir(other);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_modes),
		cmocka_unit_test(test_masks_per_abi),
		cmocka_unit_test(test_path_rights),
		cmocka_unit_test(test_apply),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
