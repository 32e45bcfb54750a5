/* test_termsafe.c - src/lib/termsafe.c: what a member of a shared spool
 * puts in a task's name reaches nobody's terminal as a control. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "termsafe.h"
#include "util.h"

static void same(const char *in, const char *want)
{
	char *got = term_safe(in);
	assert_string_equal(got, want);
	free(got);
}

static void test_kept(void **state)
{
	(void)state;
	same("alice:nightly-build.2", "alice:nightly-build.2");
	same("", "");
	/* Other Unicode stays readable: é, a U+2010 hyphen, U+2027, U+202F,
	 * U+2065, CJK, a 4-byte emoji. */
	same("caf\xc3\xa9 a\xe2\x80\x90" "b \xe2\x80\xa7\xe2\x80\xaf\xe2\x81\xa5 \xe6\x97\xa5 \xf0\x9f\x98\x80",
	     "caf\xc3\xa9 a\xe2\x80\x90" "b \xe2\x80\xa7\xe2\x80\xaf\xe2\x81\xa5 \xe6\x97\xa5 \xf0\x9f\x98\x80");
	char *n = term_safe(NULL);
	assert_string_equal(n, "");
	free(n);
}

/* ESC [ 2 J clears the screen; OSC 0 retitles the window; \r and \n
 * forge lines; DEL. A backslash is no control: kept. */
static void test_c0_del_backslash(void **state)
{
	(void)state;
	same("a\x1b[2Jb", "a\\x1b[2Jb");
	same("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07");
	same("x\ry\nz\tw", "x\\x0dy\\nz\\x09w");
	same("d\x7f", "d\\x7f");
	same("back\\slash", "back\\slash");
}

/* C1 controls as valid UTF-8 (U+009B is CSI, U+0085 NEL, U+009D OSC)
 * and as lone bytes (8-bit CSI on a terminal that takes them). */
static void test_c1(void **state)
{
	(void)state;
	same("a\xc2\x9b" "2Jb", "a\\u009b2Jb");
	same("\xc2\x85\xc2\x80\xc2\x9f", "\\u0085\\u0080\\u009f");
	same("\xc2\xa0", "\xc2\xa0"); /* U+00A0, just past C1 */
	same("a\x9b" "2J", "a\\x9b2J");
}

/* The bidi controls: a name shown reversed ("alice:payroll" from
 * mallory's "llorayap:ecila" behind U+202E). */
static void test_bidi(void **state)
{
	(void)state;
	same("\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xac\xe2\x80\xad\xe2\x80\xae",
	     "\\u202a\\u202b\\u202c\\u202d\\u202e");
	same("\xe2\x81\xa6\xe2\x81\xa7\xe2\x81\xa8\xe2\x81\xa9", "\\u2066\\u2067\\u2068\\u2069");
	same("\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c", "\\u200e\\u200f\\u061c");
	same("\xe2\x80\xa8\xe2\x80\xa9", "\\u2028\\u2029");
}

/* Bytes of no valid sequence: each one as \xHH, never passed on. */
static void test_invalid_utf8(void **state)
{
	(void)state;
	same("\xc0\x80", "\\xc0\\x80");             /* overlong NUL */
	same("\xed\xa0\x80", "\\xed\\xa0\\x80");    /* a surrogate */
	same("ok\xe2\x80", "ok\\xe2\\x80");         /* cut short */
	same("\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"); /* above U+10FFFF */
	same("\xff\xfe", "\\xff\\xfe");
}

static void test_escape_bounds(void **state)
{
	(void)state;
	char out[16];
	/* A NUL inside the bytes given is escaped, not an end. */
	assert_int_equal(term_escape(out, sizeof out, "a\0b", 3, NULL), 6);
	assert_string_equal(out, "a\\x00b");
	/* "also": logfmt's quote. */
	assert_int_equal(term_escape(out, sizeof out, "a\"b", 3, "\"\\"), 4);
	assert_string_equal(out, "a\\\"b");
	/* Exactly enough room, then one byte less. */
	assert_int_equal(term_escape(out, 5, "\x1b", 1, NULL), 4);
	assert_int_equal(term_escape(out, 4, "\x1b", 1, NULL), -ENOSPC);
	assert_int_equal(term_escape(out, 3, "abc", 3, NULL), -ENOSPC);
	assert_int_equal(term_escape(out, 4, "abc", 3, NULL), 3);
}

/* Is b (NUL-ended) valid UTF-8 holding no control a terminal acts on
 * (but newlines, with nl)? */
static void assert_safe_lines(const char *b, bool nl)
{
	size_t len = strlen(b);
	assert_true(utf8_valid(b, len));
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)b[i];
		assert_true((c >= 0x20 || (nl && c == '\n')) && c != 0x7f);
		assert_false(c == 0xc2 && (unsigned char)b[i + 1] <= 0x9f);
		assert_false(c == 0xd8 && (unsigned char)b[i + 1] == 0x9c);
		if (c == 0xe2 && (unsigned char)b[i + 1] == 0x80) {
			unsigned char d = (unsigned char)b[i + 2];
			assert_false(d == 0x8e || d == 0x8f || (d >= 0xa8 && d <= 0xae));
		}
		if (c == 0xe2 && (unsigned char)b[i + 1] == 0x81) {
			unsigned char d = (unsigned char)b[i + 2];
			assert_false(d >= 0xa6 && d <= 0xa9);
		}
	}
}

static void assert_terminal_safe(const char *b) { assert_safe_lines(b, false); }

/* Any bytes at all: the output is valid UTF-8 with no control in it,
 * TERM_ESC_GROWTH * len + 1 always holds it, and it is as long as the
 * input exactly when nothing needed an escape. */
static void test_random_bytes(void **state)
{
	(void)state;
	static const unsigned char pick[] = {0x1b, 0x9b, 0xc2, 0xe2, 0x80, 0x81, 0xae, 0xa6, 0x85,
					     0x7f, 0x0a, 0xd8, 0x9c, 0xf0, 0x9f, 'a', '\\', 0xff};
	srand(35);
	for (int round = 0; round < 20000; round++) {
		char in[24], out[TERM_ESC_GROWTH * sizeof in + 1];
		size_t len = (size_t)(rand() % (int)sizeof in);
		for (size_t i = 0; i < len; i++)
			in[i] = (char)(rand() % 3 ? pick[rand() % sizeof pick] : rand() % 256);
		ssize_t n = term_escape(out, TERM_ESC_GROWTH * len + 1, in, len, "\\");
		assert_true(n >= 0);
		assert_int_equal(strlen(out), (size_t)n);
		assert_terminal_safe(out);
		if ((size_t)n == len)
			assert_memory_equal(out, in, len);
	}
}

/* jansson leaves DEL, C1, the bidi controls and U+2028/9 raw; the
 * safe dump escapes them and means the same value. */
static void test_json_dumps_safe(void **state)
{
	(void)state;
	const char *name = "m:\x1b[2J\x7f\xc2\x9b\xc2\x85\xe2\x80\xae\xe2\x80\xa8\xe2\x81\xa6\xd8\x9c"
			   "caf\xc3\xa9\\\"";
	json_t *o = json_pack("{s:s, s:[s]}", "id", name, "after", name);
	assert_non_null(o);
	char *raw = json_dumps(o, JSON_COMPACT);
	assert_non_null(strstr(raw, "\xc2\x9b")); /* what this is for */
	free(raw);
	char *d = json_dumps_safe(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	assert_non_null(d);
	assert_terminal_safe(d);
	assert_non_null(strstr(d, "\\u009b"));
	assert_non_null(strstr(d, "caf\xc3\xa9"));
	json_error_t e;
	json_t *back = json_loads(d, 0, &e);
	assert_non_null(back);
	assert_true(json_equal(o, back));
	json_decref(back);
	free(d);
	/* Indented output too, and nothing to escape: unchanged. */
	d = json_dumps_safe(o, JSON_INDENT(2));
	assert_non_null(strchr(d, '\n'));
	assert_safe_lines(d, true);
	back = json_loads(d, 0, &e);
	assert_true(json_equal(o, back));
	json_decref(back);
	free(d);
	json_t *plain = json_pack("{s:s}", "id", "alice:x");
	d = json_dumps_safe(plain, JSON_COMPACT);
	assert_string_equal(d, "{\"id\":\"alice:x\"}");
	free(d);
	json_decref(plain);
	json_decref(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kept),
		cmocka_unit_test(test_c0_del_backslash),
		cmocka_unit_test(test_c1),
		cmocka_unit_test(test_bidi),
		cmocka_unit_test(test_invalid_utf8),
		cmocka_unit_test(test_escape_bounds),
		cmocka_unit_test(test_random_bytes),
		cmocka_unit_test(test_json_dumps_safe),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
