/* test_strset.c - the set of names (src/strset.c): membership and values
 * across the growth of its buckets, deletion, and the free. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <cmocka.h>

#include "strset.h"

static void test_strset_basic(void **state)
{
	(void)state;
	struct strset k = {0};
	assert_int_equal(strset_get(&k, "a"), 0); /* empty, no buckets yet */
	strset_del(&k, "a");                      /* harmless */
	strset_put(&k, "a", 1);
	strset_put(&k, "b", 2);
	assert_int_equal(strset_get(&k, "a"), 1);
	assert_int_equal(strset_get(&k, "b"), 2);
	assert_int_equal(strset_get(&k, "c"), 0);
	assert_int_equal(strset_get(&k, "ab"), 0);
	strset_put(&k, "a", 3); /* a new value, not a second entry */
	assert_int_equal(strset_get(&k, "a"), 3);
	assert_int_equal(k.n, 2);
	strset_del(&k, "a");
	assert_int_equal(strset_get(&k, "a"), 0);
	assert_int_equal(strset_get(&k, "b"), 2);
	assert_int_equal(k.n, 1);
	strset_free(&k);
	assert_int_equal(k.n, 0);
	assert_int_equal(strset_get(&k, "b"), 0);
}

/* Past the first 1,024 buckets (twice over): every name is still found
 * with its value, none that was not put is, and a deleted one is gone
 * while its neighbours stay. */
static void test_strset_grow(void **state)
{
	(void)state;
	enum { N = 5000 };
	struct strset k = {0};
	char name[32];
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof name, "task-%d", i);
		strset_put(&k, name, 1 + i % 3);
	}
	assert_int_equal(k.n, N);
	assert_true(k.nb >= N);
	for (int i = 0; i < N; i += 2) {
		snprintf(name, sizeof name, "task-%d", i);
		strset_del(&k, name);
	}
	assert_int_equal(k.n, N / 2);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof name, "task-%d", i);
		assert_int_equal(strset_get(&k, name), i % 2 ? 1 + i % 3 : 0);
		snprintf(name, sizeof name, "task-%d", i + N);
		assert_int_equal(strset_get(&k, name), 0);
	}
	/* Every entry is reachable by walking the buckets (busy_recheck). */
	size_t walked = 0;
	for (size_t i = 0; i < k.nb; i++)
		for (struct strset_ent *e = k.b[i]; e; e = e->next)
			walked++;
	assert_int_equal(walked, N / 2);
	strset_free(&k);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_strset_basic),
		cmocka_unit_test(test_strset_grow),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
