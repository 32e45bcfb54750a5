/* test_caps.c - the worker's capability drop (src/caps.c), done for real
 * in a forked child and read back from /proc/self/status. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <linux/capability.h>
#include <sys/wait.h>

#include "caps.h"
#include "util.h"

#define BIT(c) (1ULL << (c))
static const unsigned long long want_kept =
	BIT(CAP_SETUID) | BIT(CAP_SETGID) | BIT(CAP_DAC_OVERRIDE) | BIT(CAP_FOWNER) |
	BIT(CAP_CHOWN) | BIT(CAP_LEASE) | BIT(CAP_KILL) | BIT(CAP_SETFCAP) |
	BIT(CAP_SETPCAP);

static unsigned long long status_mask(const char *key)
{
	char line[256];
	unsigned long long v = ~0ULL;
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return v;
	size_t l = strlen(key);
	while (fgets(line, sizeof line, f))
		if (strncmp(line, key, l) == 0 && line[l] == ':')
			v = strtoull(line + l + 1, NULL, 16);
	fclose(f);
	return v;
}

static int run_child(int (*fn)(void))
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(fn());
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static int drop_as_root(void)
{
	unsigned long long kept;
	char err[256];
	if (caps_drop_worker(&kept, err, sizeof err) < 0) {
		fprintf(stderr, "drop: %s\n", err);
		return 1;
	}
	if (kept != want_kept) {
		fprintf(stderr, "kept %llx, want %llx\n", kept, want_kept);
		return 2;
	}
	const char *keys[] = {"CapEff", "CapPrm", "CapBnd"};
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
		if (status_mask(keys[i]) != want_kept) {
			fprintf(stderr, "%s %llx\n", keys[i], status_mask(keys[i]));
			return 3;
		}
	if (status_mask("CapInh") != 0 || status_mask("CapAmb") != 0)
		return 4;
	/* Again: nothing left to drop, the same set kept. */
	if (caps_drop_worker(&kept, err, sizeof err) < 0 || kept != want_kept)
		return 5;
	return 0;
}

static void test_root_keeps_only_the_set(void **state)
{
	(void)state;
	if (geteuid() != 0 || (status_mask("CapEff") & want_kept) != want_kept) {
		skip();
		return;
	}
	assert_int_equal(run_child(drop_as_root), 0);
}

static int drop_unprivileged(void)
{
	unsigned long long kept = 1;
	char err[256];
	if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
		return 10;
	unsigned long long bnd = status_mask("CapBnd");
	if (caps_drop_worker(&kept, err, sizeof err) != 0 || kept != 0)
		return 11;
	return status_mask("CapBnd") == bnd ? 0 : 12; /* left as it was */
}

static void test_unprivileged_left_alone(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		skip();
		return;
	}
	assert_int_equal(run_child(drop_unprivileged), 0);
}

static void test_mask_names(void **state)
{
	(void)state;
	char buf[512];
	caps_mask_names(BIT(CAP_CHOWN) | BIT(CAP_KILL), buf, sizeof buf);
	assert_string_equal(buf, "cap_chown,cap_kill");
	caps_mask_names(0, buf, sizeof buf);
	assert_string_equal(buf, "none");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_root_keeps_only_the_set),
		cmocka_unit_test(test_unprivileged_left_alone),
		cmocka_unit_test(test_mask_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
