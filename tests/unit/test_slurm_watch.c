/* test_slurm_watch.c - which jobs a squeue asks after (slurm_watch.c,
 * watch_pick): every followed job each call while they fit in one; past
 * that many, each in turn, none left behind however many are followed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <cmocka.h>

#include "slurm.h"

/* n followed jobs, ids 1..n, on slurm.jobs (the first is the list's head). */
static struct sjob *jobs_make(int n)
{
	struct sjob *v = xcalloc((size_t)n, sizeof *v);
	slurm.jobs = NULL;
	for (int i = n - 1; i >= 0; i--) {
		v[i].id = i + 1;
		v[i].phase = SJ_WATCH;
		v[i].iwd = -1;
		v[i].next = slurm.jobs;
		slurm.jobs = &v[i];
	}
	return v;
}

/* One call of at most max: how many times each id (1..n) was asked. */
static void pick_count(size_t max, int *seen, size_t *got)
{
	struct strv ids = {0};
	watch_pick(&ids, max);
	*got = ids.n;
	for (size_t i = 0; i < ids.n; i++)
		seen[atoi(ids.v[i])]++;
	strv_free(&ids);
}

static void test_pick_all_when_they_fit(void **state)
{
	(void)state;
	struct sjob *v = jobs_make(5);
	v[2].phase = SJ_COLLECT; /* ended: not asked */
	v[3].gone = true;        /* let go: not asked */
	for (int call = 0; call < 4; call++) {
		int seen[6] = {0};
		size_t got;
		pick_count(1000, seen, &got);
		assert_int_equal(got, 3);
		assert_int_equal(seen[1] + seen[2] + seen[5], 3);
		assert_int_equal(seen[3] + seen[4], 0);
	}
	free(v);
}

/* 7 jobs, 3 a call: each is asked once in any 3 calls in a row (a round
 * of ceil(7/3) calls, the last topped up), never twice in one call, and
 * a job that comes meanwhile is asked within a round. */
static void test_pick_in_turns(void **state)
{
	(void)state;
	struct sjob *v = jobs_make(7);
	int total[9] = {0};
	for (int call = 0; call < 9; call++) {
		int seen[9] = {0};
		size_t got;
		pick_count(3, seen, &got);
		assert_int_equal(got, 3);
		for (int i = 1; i <= 7; i++) {
			assert_true(seen[i] <= 1);
			total[i] += seen[i];
		}
		if (call % 3 == 2)
			for (int i = 1; i <= 7; i++)
				assert_true(total[i] >= (call + 1) / 3);
	}
	/* 27 asks over 7 jobs in 9 calls: none below 3, none above 4. */
	for (int i = 1; i <= 7; i++) {
		assert_true(total[i] >= 3);
		assert_true(total[i] <= 4);
	}
	/* A job followed from now on: asked within the next round. */
	struct sjob late = {.id = 8, .phase = SJ_WATCH, .iwd = -1, .next = slurm.jobs};
	slurm.jobs = &late;
	int asked = 0;
	for (int call = 0; call < 3 && !asked; call++) {
		int seen[9] = {0};
		size_t got;
		pick_count(3, seen, &got);
		asked = seen[8];
	}
	assert_int_equal(asked, 1);
	free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pick_all_when_they_fit),
		cmocka_unit_test(test_pick_in_turns),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
