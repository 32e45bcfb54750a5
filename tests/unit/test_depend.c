/* test_depend.c - the waiting set of after= (src/depend.c): filing,
 * release by one upstream's result, cycles refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "depend.h"

struct seen {
	char names[64][32];
	int n;
};

static void collect(void *arg, const char *name, const char *const *ups, int n, const void *data)
{
	(void)ups;
	(void)n;
	(void)data;
	struct seen *s = arg;
	if (s->n < 64)
		snprintf(s->names[s->n++], sizeof s->names[0], "%s", name);
}

static bool has(const struct seen *s, const char *name)
{
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->names[i], name) == 0)
			return true;
	return false;
}

static void test_release_by_first_upstream(void **state)
{
	(void)state;
	struct depwait *d = depwait_new();
	char cyc[256];
	assert_int_equal(depwait_add(d, "c", (const char *[]){"a", "b"}, 2, NULL, 0, cyc, sizeof cyc), 0);
	assert_int_equal(depwait_add(d, "e", (const char *[]){"a"}, 1, NULL, 0, cyc, sizeof cyc), 0);
	assert_int_equal(depwait_count(d), 2);
	assert_string_equal(depwait_on(d, "c"), "a");
	/* A result for b releases nobody: c is filed under a alone. */
	struct seen s = {.n = 0};
	assert_int_equal(depwait_release(d, "b", collect, &s), 0);
	assert_int_equal(depwait_release(d, "a", collect, &s), 2);
	assert_true(has(&s, "c") && has(&s, "e"));
	assert_int_equal(depwait_count(d), 0);
	assert_null(depwait_on(d, "c"));
	/* Released once only. */
	s.n = 0;
	assert_int_equal(depwait_release(d, "a", collect, &s), 0);
	depwait_free(d);
}

/* Filed again (looked at twice), a name is in one list once. */
static void test_refile_replaces(void **state)
{
	(void)state;
	struct depwait *d = depwait_new();
	char cyc[256];
	assert_int_equal(depwait_add(d, "x", (const char *[]){"a"}, 1, NULL, 0, cyc, sizeof cyc), 0);
	assert_int_equal(depwait_add(d, "x", (const char *[]){"a"}, 1, NULL, 0, cyc, sizeof cyc), 0);
	assert_int_equal(depwait_add(d, "x", (const char *[]){"b"}, 1, NULL, 0, cyc, sizeof cyc), 0);
	assert_int_equal(depwait_count(d), 1);
	struct seen s = {.n = 0};
	assert_int_equal(depwait_release(d, "a", collect, &s), 0);
	assert_int_equal(depwait_release(d, "b", collect, &s), 1);
	depwait_free(d);
}

/* fn files a released name again, under the next upstream. */
struct chain {
	struct depwait *d;
	int calls;
};

static void refile(void *arg, const char *name, const char *const *ups, int n, const void *data)
{
	struct chain *c = arg;
	char cyc[64];
	c->calls++;
	/* What it waited on, and its data, come back with it. */
	assert_int_equal(n, 2);
	assert_string_equal(ups[0], "up");
	assert_string_equal(ups[1], "next");
	assert_int_equal(*(const int *)data, atoi(name + 1));
	assert_int_equal(depwait_add(c->d, name, (const char *[]){"next"}, 1, NULL, 0, cyc, sizeof cyc), 0);
}

static void test_release_refiles(void **state)
{
	(void)state;
	struct chain c = {.d = depwait_new()};
	char cyc[64];
	for (int i = 0; i < 1000; i++) {
		char n[16];
		snprintf(n, sizeof n, "t%d", i);
		assert_int_equal(depwait_add(c.d, n, (const char *[]){"up", "next"}, 2, &i, sizeof i, cyc,
					     sizeof cyc), 0);
	}
	assert_int_equal(depwait_release(c.d, "up", refile, &c), 1000);
	assert_int_equal(c.calls, 1000);
	assert_int_equal(depwait_count(c.d), 1000);
	assert_string_equal(depwait_on(c.d, "t7"), "next");
	assert_int_equal(depwait_release(c.d, "next", NULL, NULL), 1000);
	assert_int_equal(depwait_count(c.d), 0);
	depwait_free(c.d);
}

/* Two tasks copied in at once, each naming the other: the second one
 * filed closes a cycle and is refused, with the path. */
static void test_cycle_refused(void **state)
{
	(void)state;
	struct depwait *d = depwait_new();
	char cyc[256];
	assert_int_equal(depwait_add(d, "a", (const char *[]){"b"}, 1, NULL, 0, cyc, sizeof cyc), 0);
	assert_int_equal(depwait_add(d, "b", (const char *[]){"c"}, 1, NULL, 0, cyc, sizeof cyc), 0);
	assert_int_equal(depwait_add(d, "c", (const char *[]){"z", "a"}, 2, NULL, 0, cyc, sizeof cyc), -ELOOP);
	assert_string_equal(cyc, "c -> a -> b -> c");
	assert_null(depwait_on(d, "c"));
	assert_int_equal(depwait_count(d), 2);
	/* Itself. */
	assert_int_equal(depwait_add(d, "s", (const char *[]){"s"}, 1, NULL, 0, cyc, sizeof cyc), -ELOOP);
	/* A diamond is no cycle. */
	assert_int_equal(depwait_add(d, "m", (const char *[]){"a", "b"}, 2, NULL, 0, cyc, sizeof cyc), 0);
	assert_int_equal(depwait_add(d, "n", (const char *[]){"m", "a"}, 2, NULL, 0, cyc, sizeof cyc), 0);
	depwait_free(d);
}

/* Every id some name is filed under, for a look after an overflow. */
static void count_up(void *arg, const char *id)
{
	(void)id;
	(*(int *)arg)++;
}

static void test_each_upstream(void **state)
{
	(void)state;
	struct depwait *d = depwait_new();
	char cyc[64];
	int n = 0;
	assert_int_equal(depwait_add(d, "a", (const char *[]){"u1"}, 1, NULL, 0, cyc, sizeof cyc), 0);
	assert_int_equal(depwait_add(d, "b", (const char *[]){"u1"}, 1, NULL, 0, cyc, sizeof cyc), 0);
	assert_int_equal(depwait_add(d, "c", (const char *[]){"u2", "u1"}, 2, NULL, 0, cyc, sizeof cyc), 0);
	depwait_each_upstream(d, count_up, &n);
	assert_int_equal(n, 2);
	depwait_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_release_by_first_upstream),
		cmocka_unit_test(test_refile_replaces),
		cmocka_unit_test(test_release_refiles),
		cmocka_unit_test(test_cycle_refused),
		cmocka_unit_test(test_each_upstream),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
