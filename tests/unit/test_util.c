/* test_util.c - the shared parsers, UTF-8 validation, time formatting,
 * signal names and checked path formatting (src/util.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <limits.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "util.h"

/* ---- parse_duration_s ---------------------------------------------------- */

static void test_duration_units(void **state)
{
	(void)state;
	static const struct {
		const char *in;
		int64_t want;
	} ok[] = {
		{"90", 90},        {"90s", 90},     {"5m", 300},    {"2h", 7200},
		{"1d", 86400},     {"0", 0},        {"1", 1},       {"007", 7},
		{"0s", 0},         {"3660s", 3660}, {"48h", 172800}, {"3660d", 3660LL * 86400},
	};
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
		int64_t v = -42;
		assert_int_equal(parse_duration_s(ok[i].in, &v), 0);
		assert_int_equal(v, ok[i].want);
	}
}

static void test_duration_bad(void **state)
{
	(void)state;
	static const char *const inval[] = {
		"",   "s",   "m",   "-5",  "+5",   "5x",  "5M",  "5ms", "1.5h", " 5",
		"5 ", "5ss", "h5",  "0x10", "5sm", "５", "5\n", "d",   "-0",  "1e3",
	};
	for (size_t i = 0; i < ARRAY_SIZE(inval); i++) {
		int64_t v = -42;
		int r = parse_duration_s(inval[i], &v);
		if (r != -EINVAL)
			fail_msg("parse_duration_s(\"%s\") = %d, want -EINVAL", inval[i], r);
		assert_int_equal(v, -42); /* untouched on error */
	}
}

static void test_duration_range(void **state)
{
	(void)state;
	int64_t v = -42;
	/* The ceiling is ten years of 366 days. */
	assert_int_equal(parse_duration_s("316224000", &v), 0);
	assert_int_equal(v, 316224000);
	assert_int_equal(parse_duration_s("316224001", &v), -ERANGE);
	assert_int_equal(parse_duration_s("3660d", &v), 0);
	assert_int_equal(parse_duration_s("3661d", &v), -ERANGE);
	assert_int_equal(parse_duration_s("87840h", &v), 0);
	assert_int_equal(parse_duration_s("87841h", &v), -ERANGE);
	assert_int_equal(parse_duration_s("5270400m", &v), 0);
	assert_int_equal(parse_duration_s("5270401m", &v), -ERANGE);
	/* Beyond 64 bits: overflow is caught, not wrapped. */
	v = -42;
	assert_int_equal(parse_duration_s("99999999999999999999999", &v), -ERANGE);
	assert_int_equal(parse_duration_s("18446744073709551616s", &v), -ERANGE);
	assert_int_equal(parse_duration_s("18446744073709551615d", &v), -ERANGE);
	assert_int_equal(v, -42);
}

/* ---- parse_size ---------------------------------------------------------- */

static void test_size_units(void **state)
{
	(void)state;
	static const struct {
		const char *in;
		uint64_t want;
	} ok[] = {
		{"0", 0},
		{"1", 1},
		{"1048576", 1048576},
		{"512K", 512ull << 10},
		{"512k", 512ull << 10},
		{"256M", 256ull << 20},
		{"256m", 256ull << 20},
		{"2G", 2ull << 30},
		{"2g", 2ull << 30},
		{"1T", 1ull << 40},
		{"1t", 1ull << 40},
		{"18446744073709551615", UINT64_MAX},
		{"16777215T", 16777215ull << 40},
	};
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
		uint64_t v = 42;
		int r = parse_size(ok[i].in, &v);
		if (r != 0 || v != ok[i].want)
			fail_msg("parse_size(\"%s\") = %d, %llu; want 0, %llu", ok[i].in, r,
				 (unsigned long long)v, (unsigned long long)ok[i].want);
	}
}

/* FN refuses each string of the array IN with WANT, and leaves its
 * output (of TYPE) untouched. */
#define assert_all_refused(fn, type, in, want)                                               \
	do {                                                                                 \
		for (size_t i_ = 0; i_ < ARRAY_SIZE(in); i_++) {                             \
			type v_ = 42;                                                        \
			int r_ = fn((in)[i_], &v_);                                          \
			if (r_ != (want))                                                    \
				fail_msg(#fn "(\"%s\") = %d, want " #want, (in)[i_], r_);    \
			assert_int_equal(v_, 42);                                            \
		}                                                                            \
	} while (0)

static void test_size_bad(void **state)
{
	(void)state;
	static const char *const inval[] = {
		"", "K", "M", "-1", "-1M", "+1M", "1.5G", "512KB", "512Ki", "2X", " 2G", "2G ",
		"1e6", "0x100", "1MM", "G2",
	};
	assert_all_refused(parse_size, uint64_t, inval, -EINVAL);
	static const char *const range[] = {
		"18446744073709551616", "99999999999999999999999", "16777216T", "17179869184G",
		"17592186044416M", "18014398509481984K",
	};
	assert_all_refused(parse_size, uint64_t, range, -ERANGE);
}

/* ---- parse_cpu_milli ----------------------------------------------------- */

static void test_cpu_ok(void **state)
{
	(void)state;
	static const struct {
		const char *in;
		uint32_t want;
	} ok[] = {
		{"0.5", 500},  {"2", 2000},     {"1.25", 1250}, {".5", 500},     {"0.001", 1},
		{"1.000", 1000}, {"4096", 4096000}, {"3.5", 3500}, {"0.123", 123}, {"10.1", 10100},
		{"4096.999", 4096999},
	};
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
		uint32_t v = 42;
		int r = parse_cpu_milli(ok[i].in, &v);
		if (r != 0 || v != ok[i].want)
			fail_msg("parse_cpu_milli(\"%s\") = %d, %u; want 0, %u", ok[i].in, r, v,
				 ok[i].want);
	}
}

static void test_cpu_bad(void **state)
{
	(void)state;
	static const char *const inval[] = {
		"", ".", "5.", "0.0001", "1.2345", "-1", "-0.5", "+1", "1,5", "1.5.0", "abc", "1x",
		" 1", "1 ", "1.-5", "..5",
	};
	assert_all_refused(parse_cpu_milli, uint32_t, inval, -EINVAL);
	static const char *const range[] = {"0", "0.0", "0.000", ".000", "4097",
					    "99999999999999999999999"};
	assert_all_refused(parse_cpu_milli, uint32_t, range, -ERANGE);
}

/* ---- parse_int ----------------------------------------------------------- */

static void test_int(void **state)
{
	(void)state;
	long long v = 42;
	assert_int_equal(parse_int("0", 0, 10, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(parse_int("10", 0, 10, &v), 0);
	assert_int_equal(v, 10);
	assert_int_equal(parse_int("-5", -10, 10, &v), 0);
	assert_true(v == -5);
	assert_int_equal(parse_int("9223372036854775807", 0, LLONG_MAX, &v), 0);
	assert_true(v == LLONG_MAX);
	assert_int_equal(parse_int("-9223372036854775807", LLONG_MIN, 0, &v), 0);
	assert_true(v == -LLONG_MAX);

	v = 42;
	assert_int_equal(parse_int("11", 0, 10, &v), -ERANGE);
	assert_int_equal(parse_int("-1", 0, 10, &v), -ERANGE);
	assert_int_equal(parse_int("-11", -10, 10, &v), -ERANGE);
	assert_int_equal(parse_int("9223372036854775808", 0, LLONG_MAX, &v), -ERANGE);
	assert_int_equal(parse_int("18446744073709551616", 0, LLONG_MAX, &v), -ERANGE);
	assert_int_equal(parse_int("99999999999999999999999", 0, LLONG_MAX, &v), -ERANGE);
	assert_int_equal(v, 42);

	static const char *const inval[] = {"", "-", "+1", "--1", "1-", "0x10", "1.0", " 1",
					    "1 ", "1a", "a1", "- 1"};
	for (size_t i = 0; i < ARRAY_SIZE(inval); i++) {
		int r = parse_int(inval[i], -100, 100, &v);
		if (r != -EINVAL)
			fail_msg("parse_int(\"%s\") = %d, want -EINVAL", inval[i], r);
	}
	assert_int_equal(v, 42);
}

/* ---- utf8_valid ---------------------------------------------------------- */

static bool valid(const char *s) { return utf8_valid(s, strlen(s)); }

static void test_utf8_valid_ok(void **state)
{
	(void)state;
	assert_true(utf8_valid("", 0));
	assert_true(valid("plain ascii 0123 ~\x7f"));
	assert_true(valid("\xC2\x80"));          /* U+0080, smallest 2-byte */
	assert_true(valid("caf\xC3\xA9"));       /* é */
	assert_true(valid("\xDF\xBF"));          /* U+07FF */
	assert_true(valid("\xE0\xA0\x80"));      /* U+0800, smallest 3-byte */
	assert_true(valid("\xE2\x82\xAC"));      /* € */
	assert_true(valid("\xED\x9F\xBF"));      /* U+D7FF, just below surrogates */
	assert_true(valid("\xEE\x80\x80"));      /* U+E000, just above surrogates */
	assert_true(valid("\xEF\xBF\xBD"));      /* U+FFFD */
	assert_true(valid("\xEF\xBF\xBF"));      /* U+FFFF */
	assert_true(valid("\xF0\x90\x80\x80"));  /* U+10000, smallest 4-byte */
	assert_true(valid("\xF0\x9F\x98\x80"));  /* 😀 */
	assert_true(valid("\xF4\x8F\xBF\xBF"));  /* U+10FFFF, the last */
	assert_true(valid("a\xC3\xA9z\xE2\x82\xAC\xF0\x9F\x98\x80!"));
	/* An embedded NUL is one valid byte when the length says so. */
	assert_true(utf8_valid("a\0b", 3));
}

static void test_utf8_valid_bad(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"\x80",                 /* lone continuation */
		"a\xBF" "b",            /* continuation in the middle */
		"\xC3",                 /* truncated 2-byte */
		"\xC3" "a",             /* 2-byte lead then ASCII */
		"\xE2\x82",             /* truncated 3-byte */
		"\xE2" "a" "\xAC",      /* broken 3-byte */
		"\xF0\x9F\x98",         /* truncated 4-byte */
		"\xF0\x9F",             /* truncated 4-byte */
		"\xC0\x80",             /* overlong NUL */
		"\xC0\xAF",             /* overlong '/' */
		"\xC1\xBF",             /* overlong U+007F */
		"\xE0\x80\xAF",         /* overlong '/' in 3 bytes */
		"\xE0\x9F\xBF",         /* overlong U+07FF */
		"\xF0\x80\x80\xAF",     /* overlong '/' in 4 bytes */
		"\xF0\x8F\xBF\xBF",     /* overlong U+FFFF */
		"\xED\xA0\x80",         /* U+D800, a surrogate */
		"\xED\xBF\xBF",         /* U+DFFF */
		"\xED\xA0\xBD\xED\xB8\x80", /* CESU-8 pair */
		"\xF4\x90\x80\x80",     /* U+110000 */
		"\xF5\x80\x80\x80",     /* beyond U+10FFFF by lead byte */
		"\xF7\xBF\xBF\xBF",
		"\xF8\x88\x80\x80\x80", /* 5-byte form */
		"\xFC\x84\x80\x80\x80\x80",
		"\xFE",
		"\xFF",
		"ok\xFFok",
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if (valid(bad[i]))
			fail_msg("utf8_valid accepted bad[%zu]", i);
	/* The length bounds the look-ahead: a sequence cut by len is invalid
	 * even when the bytes after it would complete it. */
	assert_false(utf8_valid("\xE2\x82\xAC", 2));
	assert_false(utf8_valid("\xF0\x9F\x98\x80", 3));
	assert_false(utf8_valid("\xC3\xA9", 1));
	assert_true(utf8_valid("\xC3\xA9\xFF", 2));
}

/* ---- fmt_rfc3339_ms ------------------------------------------------------ */

static void test_rfc3339(void **state)
{
	(void)state;
	char buf[32];
	fmt_rfc3339_ms(0, buf);
	assert_string_equal(buf, "1970-01-01T00:00:00.000Z");
	fmt_rfc3339_ms(1, buf);
	assert_string_equal(buf, "1970-01-01T00:00:00.001Z");
	fmt_rfc3339_ms(999, buf);
	assert_string_equal(buf, "1970-01-01T00:00:00.999Z");
	fmt_rfc3339_ms(1000, buf);
	assert_string_equal(buf, "1970-01-01T00:00:01.000Z");
	fmt_rfc3339_ms(1700000000123LL, buf);
	assert_string_equal(buf, "2023-11-14T22:13:20.123Z");
	fmt_rfc3339_ms(951782400050LL, buf); /* a leap day */
	assert_string_equal(buf, "2000-02-29T00:00:00.050Z");
	fmt_rfc3339_ms(1796019842123LL, buf); /* the contract's example */
	assert_string_equal(buf, "2026-11-30T06:24:02.123Z");
	fmt_rfc3339_ms(4102444799999LL, buf);
	assert_string_equal(buf, "2099-12-31T23:59:59.999Z");
	/* The text of a second is kept: the same second again, the next,
	 * and one before it. */
	fmt_rfc3339_ms(1700000000123LL, buf);
	assert_string_equal(buf, "2023-11-14T22:13:20.123Z");
	fmt_rfc3339_ms(1700000000999LL, buf);
	assert_string_equal(buf, "2023-11-14T22:13:20.999Z");
	fmt_rfc3339_ms(1700000001000LL, buf);
	assert_string_equal(buf, "2023-11-14T22:13:21.000Z");
	fmt_rfc3339_ms(1700000000500LL, buf);
	assert_string_equal(buf, "2023-11-14T22:13:20.500Z");
}

static void test_rfc3339_ignores_tz(void **state)
{
	(void)state;
	char buf[32];
	const char *old = getenv("TZ");
	char *saved = old ? strdup(old) : NULL;
	setenv("TZ", "Asia/Kolkata", 1);
	tzset();
	fmt_rfc3339_ms(1700000000123LL, buf);
	if (saved) {
		setenv("TZ", saved, 1);
		free(saved);
	} else {
		unsetenv("TZ");
	}
	tzset();
	assert_string_equal(buf, "2023-11-14T22:13:20.123Z");
}

/* ---- signal names -------------------------------------------------------- */

static void test_signal_names(void **state)
{
	(void)state;
	assert_string_equal(signal_name(SIGKILL), "SIGKILL");
	assert_string_equal(signal_name(SIGTERM), "SIGTERM");
	assert_string_equal(signal_name(SIGSEGV), "SIGSEGV");
	assert_string_equal(signal_name(SIGXCPU), "SIGXCPU");
	assert_int_equal(signal_from_name("SIGKILL"), SIGKILL);
	assert_int_equal(signal_from_name("SIGINT"), SIGINT);
	/* Every classic signal has a name that maps back to it. */
	int named = 0;
	for (int sig = 1; sig < 32; sig++) {
		const char *n = signal_name(sig);
		assert_non_null(n);
		assert_true(strncmp(n, "SIG", 3) == 0);
		int back = signal_from_name(n);
		if (back != sig)
			fail_msg("signal %d -> \"%s\" -> %d", sig, n, back);
		named++;
	}
	assert_int_equal(named, 31);
}

static void test_signal_unknown(void **state)
{
	(void)state;
	/* A real-time signal has no table name; it is still printable. */
	assert_string_equal(signal_name(40), "SIG40");
	assert_string_equal(signal_name(0), "SIG0");
	assert_string_equal(signal_name(-3), "SIG-3");
	assert_int_equal(signal_from_name("SIGNOPE"), -1);
	assert_int_equal(signal_from_name("KILL"), -1);
	assert_int_equal(signal_from_name("sigkill"), -1);
	assert_int_equal(signal_from_name(""), -1);
}

/* ---- pathfmt ------------------------------------------------------------- */

static void test_pathfmt(void **state)
{
	(void)state;
	char buf[8];
	memset(buf, 'x', sizeof buf);
	assert_int_equal(pathfmt(buf, sizeof buf, "%s/%s", "ab", "cd"), 0);
	assert_string_equal(buf, "ab/cd");
	/* Exactly filling the buffer (7 chars + NUL) fits. */
	assert_int_equal(pathfmt(buf, sizeof buf, "%s", "1234567"), 0);
	assert_string_equal(buf, "1234567");
	/* One more byte would be cut: an error, not a shorter path. */
	assert_int_equal(pathfmt(buf, sizeof buf, "%s", "12345678"), -ENAMETOOLONG);
	assert_int_equal(pathfmt(buf, sizeof buf, "%s/%s", "done", "task.json"), -ENAMETOOLONG);
	char big[4096];
	char name[5000];
	memset(name, 'a', sizeof name - 1);
	name[sizeof name - 1] = '\0';
	assert_int_equal(pathfmt(big, sizeof big, "/spool/new/%s", name), -ENAMETOOLONG);
	assert_int_equal(pathfmt(big, sizeof big, "/spool/new/%s", "ok"), 0);
	assert_string_equal(big, "/spool/new/ok");
}

/* ---- strv ---------------------------------------------------------------- */

static void test_strv(void **state)
{
	(void)state;
	struct strv s = {0};
	for (int i = 0; i < 40; i++)
		strv_addf(&s, "item%d", i);
	strv_add(&s, "last");
	assert_int_equal(s.n, 41);
	assert_string_equal(s.v[0], "item0");
	assert_string_equal(s.v[39], "item39");
	assert_string_equal(s.v[40], "last");
	assert_null(s.v[41]);
	struct strv two = {0};
	char *j = strv_join(&two, ',');
	assert_string_equal(j, "");
	free(j);
	strv_add(&two, "12");
	strv_add(&two, "345");
	j = strv_join(&two, ',');
	assert_string_equal(j, "12,345");
	free(j);
	strv_free(&two);
	strv_free(&s);
	assert_null(s.v);
	assert_int_equal(s.n, 0);
}

/* Directive values: what needs escaping is escaped, the rest kept, and
 * every byte but NUL survives the round trip. */
static void test_pct_round_trip(void **state)
{
	(void)state;
	char enc[64], dec[64];
	assert_int_equal(pct_encode("a b%c#d\t\x7f", enc, sizeof enc), 19);
	assert_string_equal(enc, "a%20b%25c%23d%09%7F");
	assert_int_equal(pct_decode(enc, dec, sizeof dec), 9);
	assert_string_equal(dec, "a b%c#d\t\x7f");
	assert_int_equal(pct_encode("r\xc3\xa9sum\xc3\xa9=1", enc, sizeof enc), 10);
	assert_string_equal(enc, "r\xc3\xa9sum\xc3\xa9=1");
	char all[256], back[256];
	for (int i = 1; i < 256; i++)
		all[i - 1] = (char)i;
	all[255] = '\0';
	char big[1024];
	assert_true(pct_encode(all, big, sizeof big) > 255);
	assert_null(strpbrk(big, " \t\n#"));
	assert_int_equal(pct_decode(big, back, sizeof back), 255);
	assert_memory_equal(back, all, 256);
	assert_int_equal(pct_decode("%41%62c", dec, sizeof dec), 3);
	assert_string_equal(dec, "Abc");
}

static void test_pct_errors(void **state)
{
	(void)state;
	char out[8];
	assert_int_equal(pct_decode("a%2", out, sizeof out), -EINVAL);
	assert_int_equal(pct_decode("a%zz", out, sizeof out), -EINVAL);
	assert_int_equal(pct_decode("%00", out, sizeof out), -EINVAL);
	assert_int_equal(pct_decode("abcdefgh", out, sizeof out), -ENAMETOOLONG);
	assert_int_equal(pct_decode("abcdefg", out, sizeof out), 7);
	assert_int_equal(pct_encode("       ", out, sizeof out), -ENAMETOOLONG);
	assert_int_equal(pct_encode("abcdefg", out, sizeof out), 7);
	assert_int_equal(pct_encode("abcdefgh", out, sizeof out), -ENAMETOOLONG);
}

/* An allocation that fails says so on stderr, without allocating, and
 * exits 1: also with the JSON log sink set, whose lines allocate. */
static void test_oom(void **state)
{
	(void)state;
	int pfd[2];
	assert_int_equal(pipe(pfd), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(pfd[1], STDERR_FILENO);
		log_setup(LOG_JSON, "w1");
		volatile size_t huge = SIZE_MAX / 2;
		(void)xmalloc(huge);
		_exit(0);
	}
	close(pfd[1]);
	char buf[256] = {0};
	size_t n = 0;
	for (ssize_t r; n < sizeof buf - 1 && (r = read(pfd[0], buf + n, sizeof buf - 1 - n)) > 0;)
		n += (size_t)r;
	close(pfd[0]);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 1);
	assert_true(n > 0);
	assert_non_null(strstr(buf, ": out of memory\n"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_duration_units),
		cmocka_unit_test(test_duration_bad),
		cmocka_unit_test(test_duration_range),
		cmocka_unit_test(test_size_units),
		cmocka_unit_test(test_size_bad),
		cmocka_unit_test(test_cpu_ok),
		cmocka_unit_test(test_cpu_bad),
		cmocka_unit_test(test_int),
		cmocka_unit_test(test_utf8_valid_ok),
		cmocka_unit_test(test_utf8_valid_bad),
		cmocka_unit_test(test_rfc3339),
		cmocka_unit_test(test_rfc3339_ignores_tz),
		cmocka_unit_test(test_signal_names),
		cmocka_unit_test(test_signal_unknown),
		cmocka_unit_test(test_pathfmt),
		cmocka_unit_test(test_strv),
		cmocka_unit_test(test_pct_round_trip),
		cmocka_unit_test(test_pct_errors),
		cmocka_unit_test(test_oom),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
