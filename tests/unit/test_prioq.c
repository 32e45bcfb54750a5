/* test_prioq.c - the candidates' heap (src/prioq.c): what comes out first,
 * in the order the worker claims: priority, then the submitter's turn,
 * then arrival, then the order seen. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <cmocka.h>

#include "prioq.h"
#include "util.h"

/* Each key alone decides where the ones before it are equal. */
static void test_prioq_less(void **state)
{
	(void)state;
	struct cand a = {.prio = 0, .turn = 9, .arrived_ms = 9, .seq = 9};
	struct cand b = {.prio = 1, .turn = 0, .arrived_ms = 0, .seq = 0};
	assert_true(prioq_less(&a, &b));
	assert_false(prioq_less(&b, &a));
	b.prio = 0;
	assert_false(prioq_less(&a, &b)); /* turn 9 after turn 0 */
	b.turn = 9;
	assert_false(prioq_less(&a, &b)); /* arrived later */
	b.arrived_ms = 9;
	assert_false(prioq_less(&a, &b)); /* seen later */
	b.seq = 10;
	assert_true(prioq_less(&a, &b));
	assert_false(prioq_less(&a, &a));
	/* A negative priority goes ahead of everyone's 0. */
	b = (struct cand){.prio = -5, .turn = 100, .arrived_ms = 100, .seq = 100};
	assert_true(prioq_less(&b, &a));
}

static uint64_t lcg(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 33;
}

/* Pushed in a scrambled order, interleaved with pops: every pop is the
 * least of what is in the heap, so what comes out is sorted, and all of
 * it comes out once. */
static void test_prioq_order(void **state)
{
	(void)state;
	enum { N = 2000 };
	struct prioq h = {0};
	static struct cand in[N];
	uint64_t s = 42;
	for (size_t i = 0; i < N; i++)
		in[i] = (struct cand){.prio = (int)(lcg(&s) % 5) - 2, .turn = lcg(&s) % 7,
				      .arrived_ms = (int64_t)(lcg(&s) % 11), .seq = i,
				      .uid = (uid_t)i};
	static bool seen[N];
	size_t out = 0;
	struct cand last = {0};
	bool have_last = false;
	for (size_t i = 0; i < N; i++) {
		prioq_push(&h, in[i]);
		if (i % 3 == 2) { /* a pop now and then: its order is the heap's now */
			struct cand c = prioq_pop(&h);
			assert_false(seen[c.uid]);
			seen[c.uid] = true;
			out++;
		}
	}
	assert_int_equal(h.n, N - out);
	while (h.n) {
		struct cand c = prioq_pop(&h);
		assert_false(seen[c.uid]);
		seen[c.uid] = true;
		out++;
		if (have_last && prioq_less(&c, &last))
			fail_msg("popped prio=%d turn=%llu arrived=%lld seq=%llu after prio=%d "
				 "turn=%llu arrived=%lld seq=%llu", c.prio, (unsigned long long)c.turn,
				 (long long)c.arrived_ms, (unsigned long long)c.seq, last.prio,
				 (unsigned long long)last.turn, (long long)last.arrived_ms,
				 (unsigned long long)last.seq);
		last = c;
		have_last = true;
	}
	assert_int_equal(out, N);
	free(h.v);
}

/* Ties in priority, turn and arrival come out in the order seen. */
static void test_prioq_fifo(void **state)
{
	(void)state;
	struct prioq h = {0};
	for (uint64_t i = 0; i < 100; i++)
		prioq_push(&h, (struct cand){.seq = 99 - i});
	for (uint64_t i = 0; i < 100; i++)
		assert_int_equal(prioq_pop(&h).seq, i);
	assert_int_equal(h.n, 0);
	free(h.v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prioq_less),
		cmocka_unit_test(test_prioq_order),
		cmocka_unit_test(test_prioq_fifo),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
