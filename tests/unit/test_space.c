/* test_space.c - [worker] min_free (src/space.c) and the built-in
 * defaults of a shared machine (src/policy_load.c): what they parse to, the
 * lesser of a size and a percentage, and the defaults yielding to a
 * lower ceiling or turned off by one line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "policy.h"
#include "space.h"
#include "util.h"
#include "unit.h"

static void test_min_free_parse(void **state)
{
	(void)state;
	static const struct {
		const char *text;
		uint64_t bytes;
		unsigned pct;
	} ok[] = {
		{"64M", 64ull << 20, 0},
		{"1%", 0, 1},
		{"64M, 1%", 64ull << 20, 1},
		{"0", 0, 0},
	};
	uint64_t b = 7;
	unsigned p = 7;
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
		assert_int_equal(min_free_parse(ok[i].text, &b, &p), 0);
		assert_int_equal(b, ok[i].bytes);
		assert_int_equal(p, ok[i].pct);
	}
	static const char *const bad[] = {"", "%", "100%", "-1%", "64X", "1%, 2%", "1M 2M", "x"};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		assert_int_equal(min_free_parse(bad[i], &b, &p), -EINVAL);
}

/* The lesser of the two holds, against the filesystem's own figures. */
static void test_space_check_threshold(void **state)
{
	(void)state;
	int fd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	struct statvfs sv;
	assert_int_equal(fstatvfs(fd, &sv), 0);
	uint64_t fr = sv.f_frsize ? sv.f_frsize : sv.f_bsize;
	uint64_t total = (uint64_t)sv.f_blocks * fr;
	struct space s;
	assert_int_equal(space_check(fd, 0, 0, &s), 0);
	assert_false(s.low);
	assert_int_equal(s.min_bytes, 0);
	assert_int_equal(space_check(fd, 1, 99, &s), 0);
	assert_int_equal(s.min_bytes, 1); /* 1 byte is less than 99 % */
	assert_int_equal(space_check(fd, UINT64_MAX, 1, &s), 0);
	assert_int_equal(s.min_bytes, total / 100); /* 1 % is less than UINT64_MAX */
	assert_int_equal(space_check(fd, UINT64_MAX, 0, &s), 0);
	assert_true(s.low); /* nobody has that much free */
	char why[700];
	space_describe(&s, "/the/spool", why, sizeof why);
	assert_non_null(strstr(why, "holding /the/spool"));
	assert_non_null(strstr(why, "below min_free"));
	close(fd);
}

static void load_conf(struct policy *p, const char *conf)
{
	char err[512] = "";
	if (load_conf_text(p, conf, err, sizeof err) != 0)
		fail_msg("policy_load: %s", err);
}

static void test_builtin_defaults(void **state)
{
	(void)state;
	unsetenv("KART_TIMEOUT_MAX");
	struct policy p;
	load_conf(&p, "");
	assert_int_equal(p.timeout_default_s, 3600);
	assert_int_equal(p.pids_default, 512);
	assert_int_equal(p.tmpfs_size, 256ull << 20);
	assert_int_equal(p.memory_default, p.memory_max / 4); /* 3 + 1 slots */
	assert_int_equal(p.min_free_bytes, 64ull << 20);
	assert_int_equal(p.min_free_pct, 1);
	assert_true(p.leaf_memory);
	/* More slots, a smaller share each. */
	load_conf(&p, "[worker]\nslots = 7\n");
	assert_int_equal(p.memory_default, p.memory_max / 8);
	/* A lower ceiling: the built-in defaults yield to it (no error). */
	load_conf(&p, "[limits]\ntimeout_max = 5m\npids_max = 100\nmemory_max = 64M\n");
	assert_int_equal(p.timeout_default_s, 300);
	struct lane_limits ll;
	policy_lane_limits(&p, 0, &ll);
	assert_int_equal(ll.pids_default, 100);
	assert_int_equal(ll.memory_default, 64ull << 20);
	/* One line for a personal spool; what follows it still holds. */
	load_conf(&p, "[limits]\ndefaults = none\npids_default = 64\n");
	assert_int_equal(p.timeout_default_s, -1);
	assert_int_equal(p.memory_default, 0);
	assert_int_equal(p.pids_default, 64);
	assert_int_equal(p.tmpfs_size, 0);
	assert_false(p.leaf_memory);
	/* A default set in kart.conf above its ceiling is still an error. */
	char err[512] = "";
	char dir[] = "/tmp/test_space.XXXXXX", path[64];
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/kart.conf", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs("[limits]\npids_default = 200\npids_max = 100\n", f);
	fclose(f);
	assert_int_equal(policy_load(&p, dir, err, sizeof err), -1);
	assert_non_null(strstr(err, "pids_default is above pids_max"));
	unlink(path);
	rmdir(dir);
}

static void test_priority_allow(void **state)
{
	(void)state;
	struct policy p;
	load_conf(&p, "");
	assert_true(policy_priority_allowed(&p, 0));
	assert_false(policy_priority_allowed(&p, 12345));
	load_conf(&p, "[limits]\npriority_allow = 12345, @0\nslots_per_user = 2\n");
	assert_true(policy_priority_allowed(&p, 12345));
	assert_false(policy_priority_allowed(&p, 12346));
	assert_int_equal(p.n_prio_gids, 1);
	assert_int_equal(p.slots_per_user, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_min_free_parse),
		cmocka_unit_test(test_space_check_threshold),
		cmocka_unit_test(test_builtin_defaults),
		cmocka_unit_test(test_priority_allow),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
