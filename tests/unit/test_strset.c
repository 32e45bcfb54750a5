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

/* The pointer form (depend.c's nodes): the pointer put is the one got,
 * replaced in place, gone with its name; the set's copy of the name
 * stays put while the set grows. */
static void test_strset_pointers(void **state)
{
	(void)state;
	struct strset k = {0};
	int v[3000];
	const char *first = NULL;
	char name[32];
	assert_null(strset_getp(&k, "a"));
	for (int i = 0; i < 3000; i++) {
		snprintf(name, sizeof name, "n%d", i);
		const char *kept = strset_putp(&k, name, &v[i]);
		assert_string_equal(kept, name);
		if (i == 0)
			first = kept;
	}
	assert_string_equal(first, "n0"); /* not moved by the doubling */
	for (int i = 0; i < 3000; i++) {
		snprintf(name, sizeof name, "n%d", i);
		assert_ptr_equal(strset_getp(&k, name), &v[i]);
	}
	assert_ptr_equal(strset_putp(&k, "n0", &v[1]), first);
	assert_ptr_equal(strset_getp(&k, "n0"), &v[1]);
	strset_del(&k, "n7");
	assert_null(strset_getp(&k, "n7"));
	size_t walked = 0;
	STRSET_EACH(&k, e)
		walked++;
	assert_int_equal(walked, 2999);
	assert_int_equal(strset_hash("a"), strset_hash("a"));
	assert_true(strset_hash("a") != strset_hash("b"));
	strset_free(&k);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_strset_basic),
		cmocka_unit_test(test_strset_grow),
		cmocka_unit_test(test_strset_pointers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
