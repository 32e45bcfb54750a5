/* test_log.c - the worker's log lines in logfmt (src/log.c): a line
 * built on the stack, and one too long for it built on the heap,
 * each the same bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

/* What log_task writes to stderr, without its "ts=...Z " (the clock). */
static char *logged(const char *event, const char *id, const char *status, int64_t ms,
		    const char *error)
{
	char path[] = "/tmp/kart-test-log.XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	int saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
	log_task(event, id, status, ms, error);
	assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
	close(saved);
	off_t len = lseek(fd, 0, SEEK_END);
	assert_true(len > 0);
	char *buf = calloc(1, (size_t)len + 1);
	assert_non_null(buf);
	assert_int_equal(pread(fd, buf, (size_t)len, 0), len);
	close(fd);
	assert_memory_equal(buf, "ts=", 3);
	char *rest = strstr(buf, "Z ");
	assert_non_null(rest);
	char *out = strdup(rest + 2);
	free(buf);
	return out;
}

static void test_logfmt_plain(void **state)
{
	(void)state;
	log_setup(LOG_LOGFMT, "w1");
	char *l = logged("finished", "t1", "ok", 12, NULL);
	assert_string_equal(l, "level=info event=finished worker=w1 id=t1 status=ok duration_ms=12\n");
	free(l);
	l = logged("started", "t2", NULL, -1, NULL);
	assert_string_equal(l, "level=info event=started worker=w1 id=t2\n");
	free(l);
}

static void test_logfmt_quoting(void **state)
{
	(void)state;
	log_setup(LOG_LOGFMT, "w1");
	char *l = logged("finished", "t3", "killed", 5, "a \"b\" c\\d\ne\x01=\x7f");
	assert_string_equal(l, "level=warn event=finished worker=w1 id=t3 status=killed duration_ms=5 "
			       "error=\"a \\\"b\\\" c\\\\d\\ne\\x01=\\x7f\"\n");
	free(l);
	l = logged("finished", "t4", "failed", 0, "");
	assert_string_equal(l, "level=info event=finished worker=w1 id=t4 status=failed duration_ms=0 error=\"\"\n");
	free(l);
}

/* A right-to-left override, an isolate, NEL (a C1 control) and the line
 * separator are escaped as the ASCII controls are; other Unicode (é, a
 * U+2010 hyphen) is kept, and a name with none of them stays bare. */
static void test_logfmt_unicode_controls(void **state)
{
	(void)state;
	log_setup(LOG_LOGFMT, "w1");
	char *l = logged("started", "a\xe2\x80\xaegpj.exe", NULL, -1, NULL);
	assert_string_equal(l, "level=info event=started worker=w1 id=\"a\\u202egpj.exe\"\n");
	free(l);
	l = logged("started", "x\xc2\x85y\xe2\x81\xa6z\xe2\x80\xa8\xc3\xa9\xe2\x80\x90", NULL, -1, NULL);
	assert_string_equal(l, "level=info event=started worker=w1 "
			       "id=\"x\\u0085y\\u2066z\\u2028\xc3\xa9\xe2\x80\x90\"\n");
	free(l);
	l = logged("started", "caf\xc3\xa9", NULL, -1, NULL);
	assert_string_equal(l, "level=info event=started worker=w1 id=caf\xc3\xa9\n");
	free(l);
}

/* Past the stack's line: the heap buffer holds the same encoding. */
static void test_logfmt_long_line(void **state)
{
	(void)state;
	log_setup(LOG_LOGFMT, "w1");
	char err[3001];
	for (size_t i = 0; i < 3000; i++)
		err[i] = i % 100 == 99 ? '"' : 'x';
	err[3000] = '\0';
	char *l = logged("finished", "t5", "failed", 7, err);
	char want[8192];
	size_t o = (size_t)snprintf(want, sizeof want,
				   "level=info event=finished worker=w1 id=t5 status=failed duration_ms=7 error=\"");
	for (size_t i = 0; i < 3000; i++) {
		if (err[i] == '"')
			want[o++] = '\\';
		want[o++] = err[i];
	}
	memcpy(want + o, "\"\n", 3);
	assert_string_equal(l, want);
	free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_logfmt_plain),
		cmocka_unit_test(test_logfmt_quoting),
		cmocka_unit_test(test_logfmt_unicode_controls),
		cmocka_unit_test(test_logfmt_long_line),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
