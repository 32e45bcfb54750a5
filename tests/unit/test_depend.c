/* test_depend.c - the waiting set of after= (src/depend.c): filing,
 * release by one upstream's result, cycles refused, and a member's graph
 * (deep, in any order) costing a bounded, linear walk. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
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

/* ---- issue 35, break 3: a member's graph sets no recursion depth ---- */

#define CHAIN 200000

static void cname(char *b, size_t n, int k) { snprintf(b, n, "c%d", k); }

/* c(k) waits on c(k-1), c0 on "run" (a task that runs), filed in an
 * order: 0 forward (a chain built one task at a time), 1 backwards, 2
 * forward with each pair swapped (c1 c0 c3 c2 ...). */
static void file_chain_in(struct depwait *d, int n, int order)
{
	char cyc[256], me[32], up[32];
	for (int i = 0; i < n; i++) {
		int k = order == 1 ? n - 1 - i : order == 2 && (i ^ 1) < n ? i ^ 1 : i;
		cname(me, sizeof me, k);
		if (k)
			cname(up, sizeof up, k - 1);
		else
			snprintf(up, sizeof up, "run");
		assert_int_equal(depwait_add(d, me, (const char *[]){up}, 1, NULL, 0, cyc, sizeof cyc), 0);
	}
}

static void file_chain(struct depwait *d, int n, bool forward) { file_chain_in(d, n, forward ? 0 : 1); }

/* Any of those orders costs O(N) names looked at (the chain of 16,000
 * took 8 s to file forward: each add walked all of it, recursively). */
static void test_chain_linear_either_order(void **state)
{
	(void)state;
	for (int order = 0; order < 3; order++) {
		struct depwait *d = depwait_new();
		depwait_set_max(d, CHAIN + 10);
		file_chain_in(d, CHAIN, order);
		assert_int_equal(depwait_count(d), CHAIN);
		assert_true(depwait_steps(d) <= 3 * (uint64_t)CHAIN + 4);
		/* Released one by one, as the results come. */
		char up[32];
		assert_int_equal(depwait_release(d, "run", NULL, NULL), 1);
		for (int k = 0; k < CHAIN - 1; k++) {
			cname(up, sizeof up, k);
			assert_int_equal(depwait_release(d, up, NULL, NULL), 1);
		}
		assert_int_equal(depwait_count(d), 0);
		depwait_free(d);
	}
}

/* A random order of filing: still a bounded number of steps per task. */
static void test_chain_random_order(void **state)
{
	(void)state;
	enum { N = 50000 };
	int *ord = malloc(N * sizeof *ord);
	for (int i = 0; i < N; i++)
		ord[i] = i;
	srand(35);
	for (int i = N - 1; i > 0; i--) {
		int j = rand() % (i + 1), t = ord[i];
		ord[i] = ord[j];
		ord[j] = t;
	}
	struct depwait *d = depwait_new();
	depwait_set_max(d, N + 10);
	char cyc[256], me[32], up[32];
	for (int i = 0; i < N; i++) {
		cname(me, sizeof me, ord[i]);
		cname(up, sizeof up, ord[i] - 1);
		assert_int_equal(depwait_add(d, me, (const char *[]){ord[i] ? up : "run"}, 1, NULL, 0, cyc,
					     sizeof cyc), 0);
	}
	/* About N ln N (the smaller side of each look, small to large). */
	assert_true(depwait_steps(d) <= 20 * (uint64_t)N);
	depwait_free(d);
	free(ord);
}

struct deep {
	int rc_walk, rc_cycle, rc_cut;
	char cycle[256];
};

/* On a 64 KiB stack: a walk of 200,000 names, and a cycle closed at the
 * far end of them. A recursion of one frame per name needs megabytes. */
static void *deep_walks(void *arg)
{
	struct deep *r = arg;
	char cyc[256];
	struct depwait *d = depwait_new();
	depwait_set_max(d, CHAIN + 10);
	file_chain(d, CHAIN, true);
	/* "tail" waits on x, which is not filed yet: filing x (on the
	 * chain's last) must walk the whole chain for a cycle. */
	assert_int_equal(depwait_add(d, "tail", (const char *[]){"x"}, 1, NULL, 0, cyc, sizeof cyc), 0);
	r->rc_walk = depwait_add(d, "x", (const char *[]){"c199999"}, 1, NULL, 0, cyc, sizeof cyc);
	/* "run" waits on c199999, whose chain waits on "run": a cycle of
	 * 200,001, found, and its path said (cut to the buffer). */
	r->rc_cycle = depwait_add(d, "run", (const char *[]){"c199999"}, 1, NULL, 0, r->cycle,
				  sizeof r->cycle);
	/* With after_max 100, the same look is cut short. */
	depwait_set_max(d, 100);
	r->rc_cut = depwait_add(d, "run", (const char *[]){"c199999"}, 1, NULL, 0, cyc, sizeof cyc);
	depwait_free(d);
	return NULL;
}

static void test_deep_walk_small_stack(void **state)
{
	(void)state;
	pthread_attr_t a;
	pthread_t t;
	struct deep r = {0};
	assert_int_equal(pthread_attr_init(&a), 0);
	assert_int_equal(pthread_attr_setstacksize(&a, 64 * 1024), 0);
	assert_int_equal(pthread_create(&t, &a, deep_walks, &r), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(r.rc_walk, 0);
	assert_int_equal(r.rc_cycle, -ELOOP);
	assert_memory_equal(r.cycle, "run -> c199999 -> c199998 -> ", 29);
	assert_int_equal(r.rc_cut, -E2BIG);
}

/* after_max bounds a chain's depth: the task that would wait behind
 * more is refused, and why says so. */
static void test_after_max_depth(void **state)
{
	(void)state;
	struct depwait *d = depwait_new();
	depwait_set_max(d, 50);
	file_chain(d, 50, true);
	char why[256];
	assert_int_equal(depwait_add(d, "c50", (const char *[]){"c49"}, 1, NULL, 0, why, sizeof why),
			 -E2BIG);
	assert_non_null(strstr(why, "after_max (50)"));
	assert_null(depwait_on(d, "c50"));
	assert_int_equal(depwait_count(d), 50);
	/* Next to the chain, as deep as that, is fine. */
	assert_int_equal(depwait_add(d, "b", (const char *[]){"c48"}, 1, NULL, 0, why, sizeof why), 0);
	depwait_free(d);
}

/* A look for a cycle stops after after_max names: t is waited on by a
 * chain of 600 (b0..b599) and is filed on the end of another (a599):
 * both sides are long, and with after_max 1000 the look is cut short
 * (the task rejected) after about 1000 names; with 5000 it ends, no
 * cycle. */
static void test_walk_bounded(void **state)
{
	(void)state;
	enum { N = 600 };
	struct depwait *d = depwait_new();
	char why[256], me[32], up[32];
	for (int k = 0; k < N; k++) {
		snprintf(me, sizeof me, "a%d", k);
		snprintf(up, sizeof up, "a%d", k - 1);
		assert_int_equal(depwait_add(d, me, (const char *[]){k ? up : "ra"}, 1, NULL, 0, why,
					     sizeof why), 0);
		snprintf(me, sizeof me, "b%d", k);
		snprintf(up, sizeof up, "b%d", k - 1);
		assert_int_equal(depwait_add(d, me, (const char *[]){k ? up : "t"}, 1, NULL, 0, why,
					     sizeof why), 0);
	}
	uint64_t before = depwait_steps(d);
	assert_int_equal(depwait_add(d, "t", (const char *[]){"a599"}, 1, NULL, 0, why, sizeof why),
			 -E2BIG);
	assert_non_null(strstr(why, "more than after_max (1000)"));
	assert_true(depwait_steps(d) - before <= 1000 + 4);
	assert_null(depwait_on(d, "t"));
	depwait_set_max(d, 5000);
	assert_int_equal(depwait_add(d, "t", (const char *[]){"a599"}, 1, NULL, 0, why, sizeof why), 0);
	/* And the cycle, once there: both sides meet. */
	assert_int_equal(depwait_add(d, "ra", (const char *[]){"b599"}, 1, NULL, 0, why, sizeof why),
			 -ELOOP);
	assert_memory_equal(why, "ra -> b599 -> b598 -> ", 22);
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
		cmocka_unit_test(test_chain_linear_either_order),
		cmocka_unit_test(test_chain_random_order),
		cmocka_unit_test(test_deep_walk_small_stack),
		cmocka_unit_test(test_after_max_depth),
		cmocka_unit_test(test_walk_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
