/* test_claim_meta.c - user.kart read back (claim_meta_parse,
 * src/spool/spool.c): every id it names is checked once, where it is
 * parsed, whoever wrote it. A hold= or id= that could leave done/, or
 * name another user's id, is dropped (issue 35: hold=../../x made root
 * write outside the spool; hold=alice:nightly filed mallory's result as
 * alice's). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "spool.h"

static void test_fields(void **state)
{
	(void)state;
	struct claim_meta m;
	claim_meta_parse("attempt=3\nsubmitted=1700000000000\nid=mallory:x.2\nnot_before=5\nhold=mallory:x\n",
			 "mallory:x", &m);
	assert_int_equal(m.attempt, 3);
	assert_true(m.submitted_ms == 1700000000000LL);
	assert_string_equal(m.id, "mallory:x.2");
	assert_true(m.not_before_ms == 5);
	assert_string_equal(m.hold, "mallory:x");
	/* Defaults for what is missing or out of range. */
	claim_meta_parse("attempt=0\nsubmitted=-1\n", "x", &m);
	assert_int_equal(m.attempt, 1);
	assert_true(m.submitted_ms == 0);
	assert_string_equal(m.id, "");
}

static void test_ids_checked(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"./../../../../var/tmp/x/victim", /* out of done/ */
		"../victim", "a/b", ".hidden", "", "x\ty",
		"alice:nightly", /* another user's prefix */
		"nightly",       /* no prefix: root's */
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		char text[512];
		struct claim_meta m;
		snprintf(text, sizeof text, "attempt=1\nid=%s\nhold=%s\n", bad[i], bad[i]);
		claim_meta_parse(text, "mallory:job", &m);
		assert_string_equal(m.hold, "");
		assert_string_equal(m.id, "");
	}
	/* A name without a prefix (root's, or a single-user spool's) may
	 * have none either. */
	struct claim_meta m;
	claim_meta_parse("hold=job.2\nid=job.3\n", "job", &m);
	assert_string_equal(m.hold, "job.2");
	assert_string_equal(m.id, "job.3");
	claim_meta_parse("hold=alice:job\nid=../job\n", "job", &m);
	assert_string_equal(m.hold, "");
	assert_string_equal(m.id, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fields),
		cmocka_unit_test(test_ids_checked),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
