/* test_sched.c - the times and retry rules of src/sched.c, and their
 * directives (not_before=, retry_on=, retry_delay=) in src/task.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "sched.h"
#include "task.h"
#include "util.h"
#include "worker_sched.h"

/* 2026-12-01T00:00:00Z */
#define DEC1 1796083200000LL

static void test_rfc3339(void **state)
{
	(void)state;
	int64_t ms;
	assert_int_equal(sched_parse_rfc3339("2026-12-01T00:00:00Z", &ms), 0);
	assert_true(ms == DEC1);
	assert_int_equal(sched_parse_rfc3339("2026-12-01t00:00:00z", &ms), 0);
	assert_true(ms == DEC1);
	assert_int_equal(sched_parse_rfc3339("2026-12-01 02:30:15Z", &ms), 0);
	assert_true(ms == DEC1 + (2 * 3600 + 30 * 60 + 15) * 1000LL);
	/* Fractions to the millisecond, the rest dropped. */
	assert_int_equal(sched_parse_rfc3339("2026-12-01T00:00:00.5Z", &ms), 0);
	assert_true(ms == DEC1 + 500);
	assert_int_equal(sched_parse_rfc3339("2026-12-01T00:00:00.123456Z", &ms), 0);
	assert_true(ms == DEC1 + 123);
	/* An offset is the local time's: +01:00 is an hour earlier in UTC. */
	assert_int_equal(sched_parse_rfc3339("2026-12-01T01:00:00+01:00", &ms), 0);
	assert_true(ms == DEC1);
	assert_int_equal(sched_parse_rfc3339("2026-11-30T19:30:00-04:30", &ms), 0);
	assert_true(ms == DEC1);
	/* What the result's own times look like reads back. */
	char buf[32];
	fmt_rfc3339_ms(DEC1 + 42, buf);
	assert_int_equal(sched_parse_rfc3339(buf, &ms), 0);
	assert_true(ms == DEC1 + 42);
	/* Leap day, leap second. */
	assert_int_equal(sched_parse_rfc3339("2028-02-29T00:00:00Z", &ms), 0);
	assert_int_equal(sched_parse_rfc3339("2016-12-31T23:59:60Z", &ms), 0);
}

static void test_rfc3339_bad(void **state)
{
	(void)state;
	int64_t ms = 7;
	const char *inval[] = {"", "2026-12-01", "2026-12-01T00:00:00", "2026-12-01T00:00Z",
			       "2026-12-01T00:00:00+0100", "2026-12-01T00:00:00.Z",
			       "2026-12-01X00:00:00Z", "2026-12-01T00:00:00Z ", "+2026-12-01T00:00:00Z",
			       "2026-1-01T00:00:00Z", "02:00", "tomorrow", "1764547200"};
	for (size_t i = 0; i < ARRAY_SIZE(inval); i++)
		if (sched_parse_rfc3339(inval[i], &ms) != -EINVAL)
			fail_msg("accepted or misjudged: \"%s\"", inval[i]);
	const char *range[] = {"2026-13-01T00:00:00Z", "2026-02-29T00:00:00Z", "2026-04-31T00:00:00Z",
			       "2026-12-01T24:00:00Z", "2026-12-01T00:60:00Z", "1969-12-31T23:59:59Z",
			       "2026-12-01T00:00:00+24:00", "2026-00-10T00:00:00Z"};
	for (size_t i = 0; i < ARRAY_SIZE(range); i++)
		if (sched_parse_rfc3339(range[i], &ms) != -ERANGE)
			fail_msg("not out of range: \"%s\"", range[i]);
	assert_true(ms == 7); /* untouched on error */
}

static void test_hhmm(void **state)
{
	(void)state;
	int64_t ms;
	setenv("TZ", "UTC", 1);
	tzset();
	/* 10:00 UTC: 14:30 is today's, 09:15 tomorrow's, 10:00 itself too. */
	int64_t now = DEC1 + 10 * 3600 * 1000LL;
	assert_int_equal(sched_parse_hhmm("14:30", now, &ms), 0);
	assert_true(ms == DEC1 + (14 * 3600 + 30 * 60) * 1000LL);
	assert_int_equal(sched_parse_hhmm("09:15", now, &ms), 0);
	assert_true(ms == DEC1 + 86400000LL + (9 * 3600 + 15 * 60) * 1000LL);
	assert_int_equal(sched_parse_hhmm("10:00", now, &ms), 0);
	assert_true(ms == DEC1 + 86400000LL + 10 * 3600 * 1000LL);
	assert_int_equal(sched_parse_at("00:00", now, &ms), 0);
	assert_true(ms == DEC1 + 86400000LL);
	/* Local: in UTC+2 (POSIX writes it -2), 14:30 is 12:30 UTC. */
	setenv("TZ", "XYZ-2", 1);
	tzset();
	assert_int_equal(sched_parse_hhmm("14:30", now, &ms), 0);
	assert_true(ms == DEC1 + (12 * 3600 + 30 * 60) * 1000LL);
	setenv("TZ", "UTC", 1);
	tzset();
	const char *bad[] = {"24:00", "12:60", "1:30", "12:3", "12-30", "", "ab:cd"};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if (sched_parse_hhmm(bad[i], now, &ms) != -EINVAL)
			fail_msg("accepted: \"%s\"", bad[i]);
	/* --at takes RFC 3339 too. */
	assert_int_equal(sched_parse_at("2026-12-01T00:00:00Z", now, &ms), 0);
	assert_true(ms == DEC1);
}

static void test_retry_on(void **state)
{
	(void)state;
	struct retry_on r;
	const char *why;
	assert_int_equal(sched_parse_retry_on("failed", &r, &why), 0);
	assert_true(sched_retry_matches(&r, "failed", 1));
	assert_true(sched_retry_matches(&r, "failed", 255));
	assert_false(sched_retry_matches(&r, "timeout", -1));
	assert_false(sched_retry_matches(&r, "ok", 0));
	assert_int_equal(sched_parse_retry_on("exit=3,timeout,oom", &r, &why), 0);
	assert_true(sched_retry_matches(&r, "failed", 3));
	assert_false(sched_retry_matches(&r, "failed", 4));
	assert_true(sched_retry_matches(&r, "timeout", -1));
	assert_true(sched_retry_matches(&r, "oom", -1));
	/* Never for what says nothing of the task itself. */
	const char *never[] = {"ok", "killed", "rejected", "refused", "cancelled", "lost", "skipped"};
	for (size_t i = 0; i < ARRAY_SIZE(never); i++)
		assert_false(sched_retry_matches(&r, never[i], 3));
	assert_int_equal(sched_parse_retry_on("exit=1,exit=2", &r, &why), 0);
	assert_int_equal(r.nexits, 2);
	const char *bad[] = {"", "ok", "killed", "exit=0", "exit=256", "exit=", "failed,,", "Failed"};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if (sched_parse_retry_on(bad[i], &r, &why) != -1)
			fail_msg("accepted: \"%s\"", bad[i]);
}

static void test_backoff(void **state)
{
	(void)state;
	/* 1s, 2s, 4s, ... before attempts 2, 3, 4, ... */
	assert_true(sched_retry_delay_ms(1000, 2) == 1000);
	assert_true(sched_retry_delay_ms(1000, 3) == 2000);
	assert_true(sched_retry_delay_ms(1000, 4) == 4000);
	assert_true(sched_retry_delay_ms(1000, 13) == 2048000);
	/* Capped at an hour, however many attempts. */
	assert_true(sched_retry_delay_ms(1000, 14) == RETRY_DELAY_CAP_MS);
	assert_true(sched_retry_delay_ms(1000, 1000000) == RETRY_DELAY_CAP_MS);
	assert_true(sched_retry_delay_ms(2 * RETRY_DELAY_CAP_MS, 2) == RETRY_DELAY_CAP_MS);
	assert_true(sched_retry_delay_ms(0, 5) == 0);
}

static char err[512];

static void test_directives(void **state)
{
	(void)state;
	struct task_spec s;
	const char *t = "#!/bin/sh\n#kart: not_before=2026-12-01T00:00:00Z retry_on=failed,exit=3\n"
			"#kart: retry_delay=2s retries=4\necho\n";
	assert_int_equal(task_parse(t, strlen(t), &s, err, sizeof err), 0);
	assert_true(s.not_before_ms == DEC1);
	assert_true(s.retry_on.mask == RETRY_FAILED);
	assert_int_equal(s.retry_on.nexits, 1);
	assert_int_equal(s.retry_delay_ms, 2000);
	assert_int_equal(s.retries, 4);
	assert_int_equal(s.line_retry_on, 2);
	/* Defaults: at once, never retried for its outcome. */
	assert_int_equal(task_parse("echo\n", 5, &s, err, sizeof err), 0);
	assert_true(s.not_before_ms == 0);
	assert_false(sched_retry_set(&s.retry_on));
	assert_true(s.retry_delay_ms == 0);
	/* unique= is kept as written (encoded): tasks compare it so. */
	t = "#kart: unique=nightly%20job\n";
	assert_int_equal(task_parse(t, strlen(t), &s, err, sizeof err), 0);
	assert_string_equal(s.unique, "nightly%20job");
	/* Percent-encoded like any value. */
	t = "#kart: not_before=2026-12-01T01:00:00%2B01:00\n";
	assert_int_equal(task_parse(t, strlen(t), &s, err, sizeof err), 0);
	assert_true(s.not_before_ms == DEC1);
	const struct {
		const char *text, *needle;
	} bad[] = {
		{"#kart: not_before=02:00\n", "RFC 3339"},
		{"#kart: not_before=2026-02-30T00:00:00Z\n", "line 1: not_before="},
		{"#x\n#kart: retry_on=killed\n", "line 2: retry_on=killed"},
		{"#kart: retry_on=exit=0\n", "exit=N"},
		{"#kart: retry_delay=soon\n", "retry_delay=soon is not a duration"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		err[0] = '\0';
		if (task_parse(bad[i].text, strlen(bad[i].text), &s, err, sizeof err) != -1)
			fail_msg("accepted: %s", bad[i].text);
		if (!strstr(err, bad[i].needle))
			fail_msg("error \"%s\" lacks \"%s\"", err, bad[i].needle);
	}
}

/* The worker's queue by time: earliest first, only what is due. */
static void test_queue(void **state)
{
	(void)state;
	struct sched_queue q = {0};
	assert_true(sched_queue_next(&q) == 0);
	assert_null(sched_queue_pop_due(&q, INT64_MAX));
	const int64_t at[] = {500, 100, 900, 300, 300, 700, 200};
	char name[16];
	for (size_t i = 0; i < ARRAY_SIZE(at); i++) {
		snprintf(name, sizeof name, "t%lld", (long long)at[i]);
		sched_queue_push(&q, at[i], name);
	}
	assert_true(sched_queue_next(&q) == 100);
	assert_null(sched_queue_pop_due(&q, 99));
	const char *want[] = {"t100", "t200", "t300", "t300"};
	for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
		char *n = sched_queue_pop_due(&q, 450);
		assert_non_null(n);
		assert_string_equal(n, want[i]);
		free(n);
	}
	assert_null(sched_queue_pop_due(&q, 450));
	assert_true(sched_queue_next(&q) == 500);
	assert_int_equal(q.h.n, 3);
	/* A name looked at afresh leaves the queue, every entry of it;
	 * the rest stay in order. */
	sched_queue_push(&q, 600, "t900");
	sched_queue_push(&q, 50, "t700");
	sched_queue_forget(&q, "t900");
	sched_queue_forget(&q, "absent");
	assert_int_equal(q.h.n, 3);
	const char *rest[] = {"t700", "t500", "t700"};
	for (size_t i = 0; i < ARRAY_SIZE(rest); i++) {
		char *n = sched_queue_pop_due(&q, INT64_MAX);
		assert_non_null(n);
		assert_string_equal(n, rest[i]);
		free(n);
	}
	assert_int_equal(q.h.n, 0);
	sched_queue_push(&q, 1, "a");
	sched_queue_free(&q);
	assert_int_equal(q.h.n, 0);
	/* Which of two with one key is the one: earlier, then by name. */
	assert_true(uniq_first(1, "b", 2, "a"));
	assert_false(uniq_first(2, "a", 1, "b"));
	assert_true(uniq_first(5, "a", 5, "b"));
	assert_false(uniq_first(5, "b", 5, "a"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rfc3339),
		cmocka_unit_test(test_rfc3339_bad),
		cmocka_unit_test(test_hhmm),
		cmocka_unit_test(test_retry_on),
		cmocka_unit_test(test_backoff),
		cmocka_unit_test(test_directives),
		cmocka_unit_test(test_queue),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
