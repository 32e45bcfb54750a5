/* test_result.c - the result document (contract section 3): every field,
 * its type, nulls, escaping, and names that are not UTF-8 (src/result.c). */
#define _GNU_SOURCE /* strcasestr */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ctype.h>
#include <jansson.h>
#include <signal.h>

#include "result.h"
#include "task.h"
#include "util.h"

/* Dump r, check the text is one valid JSON object ending in a newline,
 * and hand back the parsed object (and the text, if asked). */
static json_t *dump_parse(const struct result *r, char **text_out)
{
	char *text = result_dumps(r);
	assert_non_null(text);
	size_t len = strlen(text);
	assert_true(len > 2);
	assert_int_equal(text[len - 1], '\n');
	assert_true(utf8_valid(text, len));
	json_error_t je;
	json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &je);
	if (!o)
		fail_msg("not JSON (%s at %d): %s", je.text, je.position, text);
	assert_true(json_is_object(o));
	if (text_out)
		*text_out = text;
	else
		free(text);
	return o;
}

static json_t *get(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	if (!v)
		fail_msg("field \"%s\" missing", key);
	return v;
}

static void assert_str(json_t *o, const char *key, const char *want)
{
	json_t *v = get(o, key);
	if (!json_is_string(v))
		fail_msg("field \"%s\" is not a string", key);
	assert_string_equal(json_string_value(v), want);
}

static void assert_int(json_t *o, const char *key, json_int_t want)
{
	json_t *v = get(o, key);
	if (!json_is_integer(v))
		fail_msg("field \"%s\" is not an integer", key);
	if (json_integer_value(v) != want)
		fail_msg("field \"%s\" = %lld, want %lld", key, (long long)json_integer_value(v),
			 (long long)want);
}

static void assert_bool(json_t *o, const char *key, bool want)
{
	json_t *v = get(o, key);
	if (!json_is_boolean(v))
		fail_msg("field \"%s\" is not a boolean", key);
	assert_int_equal(json_is_true(v), want);
}

static void assert_jnull(json_t *o, const char *key)
{
	if (!json_is_null(get(o, key)))
		fail_msg("field \"%s\" is not null", key);
}

static json_t *assert_obj(json_t *o, const char *key)
{
	json_t *v = get(o, key);
	if (!json_is_object(v))
		fail_msg("field \"%s\" is not an object", key);
	return v;
}

/* RFC 3339, UTC, milliseconds: 2026-11-30T06:24:02.123Z */
static void assert_time(json_t *o, const char *key, const char *want)
{
	json_t *v = get(o, key);
	if (!json_is_string(v))
		fail_msg("field \"%s\" is not a string", key);
	const char *s = json_string_value(v);
	static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ";
	assert_int_equal(strlen(s), sizeof shape - 1);
	for (size_t i = 0; shape[i]; i++)
		if (shape[i] == 'd' ? !isdigit((unsigned char)s[i]) : s[i] != shape[i])
			fail_msg("field \"%s\" = \"%s\" is not RFC 3339 UTC with ms", key, s);
	assert_string_equal(s, want);
}

static void full_result(struct result *r)
{
	result_init(r);
	r->id = "job-1";
	r->name = "job-1";
	r->status = "failed";
	r->exit_code = 3;
	r->worker = "host-w1";
	r->lane = "batch";
	r->attempt = 2;
	r->submitted_ms = 1700000000123LL;
	r->started_ms = 1700000001000LL;
	r->finished_ms = 1700000003500LL;
	r->out.present = true;
	snprintf(r->out.path, sizeof r->out.path, "done/job-1.stdout");
	r->out.bytes = 12;
	r->out.truncated = false;
	r->err.present = true;
	snprintf(r->err.path, sizeof r->err.path, "done/job-1.stderr");
	r->err.bytes = 8388608;
	r->err.truncated = true;
	r->task_path = "done/job-1.task";
	r->timeout_s = 30;
	r->memory = 256ull << 20;
	r->pids = 64;
	r->cpu_milli = 500;
	r->cpu_user_ms = 1500;
	r->cpu_system_ms = 250;
	r->memory_peak = 10485760;
	r->backend = "bwrap";
	r->network = true;
	r->landlock = "3";
	r->seccomp = true;
	r->cgroup = "v2";
	r->uid = 1000;
	r->user = "alice";
}

static void test_every_field(void **state)
{
	(void)state;
	struct result r;
	full_result(&r);
	json_t *o = dump_parse(&r, NULL);

	assert_str(o, "id", "job-1");
	assert_str(o, "name", "job-1");
	assert_null(json_object_get(o, "name_hex")); /* only for non-UTF-8 names */
	assert_str(o, "status", "failed");
	assert_int(o, "exit_code", 3);
	assert_jnull(o, "signal");
	assert_jnull(o, "error");
	assert_jnull(o, "refusal");
	assert_str(o, "worker", "host-w1");
	assert_str(o, "lane", "batch");
	assert_int(o, "attempt", 2);
	assert_time(o, "submitted_at", "2023-11-14T22:13:20.123Z");
	assert_time(o, "started_at", "2023-11-14T22:13:21.000Z");
	assert_time(o, "finished_at", "2023-11-14T22:13:23.500Z");
	assert_int(o, "wait_ms", 877);
	assert_int(o, "duration_ms", 2500);

	json_t *so = assert_obj(o, "stdout");
	assert_str(so, "path", "done/job-1.stdout");
	assert_int(so, "bytes", 12);
	assert_bool(so, "truncated", false);
	json_t *se = assert_obj(o, "stderr");
	assert_str(se, "path", "done/job-1.stderr");
	assert_int(se, "bytes", 8388608);
	assert_bool(se, "truncated", true);

	json_t *lim = assert_obj(o, "limits");
	assert_int(lim, "timeout_s", 30);
	assert_int(lim, "memory_bytes", 268435456);
	assert_int(lim, "pids", 64);
	json_t *cpu = get(lim, "cpu");
	assert_true(json_is_number(cpu));
	assert_true(json_number_value(cpu) == 0.5);

	json_t *use = assert_obj(o, "usage");
	assert_int(use, "cpu_user_ms", 1500);
	assert_int(use, "cpu_system_ms", 250);
	assert_int(use, "memory_peak_bytes", 10485760);

	json_t *sb = assert_obj(o, "sandbox");
	assert_str(sb, "backend", "bwrap");
	assert_bool(sb, "network", true);
	assert_int(sb, "landlock", 3);
	assert_bool(sb, "seccomp", true);
	assert_str(sb, "cgroup", "v2");

	json_t *sub = assert_obj(o, "submitter");
	assert_int(sub, "uid", 1000);
	assert_str(sub, "user", "alice");

	json_decref(o);
}

static void test_signal_and_error(void **state)
{
	(void)state;
	struct result r;
	full_result(&r);
	r.status = "timeout";
	r.exit_code = -1;
	r.signal = SIGKILL;
	r.error = "wall clock passed the 30s timeout";
	json_t *o = dump_parse(&r, NULL);
	assert_str(o, "status", "timeout");
	assert_jnull(o, "exit_code");
	assert_str(o, "signal", "SIGKILL");
	assert_str(o, "error", "wall clock passed the 30s timeout");
	json_decref(o);

	r.status = "refused";
	r.signal = 0;
	r.refusal = "landlock_unavailable";
	r.error = "Landlock is required by the policy but this kernel lacks it";
	o = dump_parse(&r, NULL);
	assert_str(o, "refusal", "landlock_unavailable");
	assert_jnull(o, "signal");
	assert_str(o, "error", "Landlock is required by the policy but this kernel lacks it");
	json_decref(o);

	/* exit 0 is a value, not null */
	r.status = "ok";
	r.exit_code = 0;
	r.refusal = NULL;
	r.error = NULL;
	o = dump_parse(&r, NULL);
	assert_int(o, "exit_code", 0);
	assert_jnull(o, "refusal");
	assert_jnull(o, "error");
	json_decref(o);
}

static double num(json_t *o, const char *key)
{
	json_t *v = get(o, key);
	if (!json_is_number(v))
		fail_msg("field \"%s\" is not a number", key);
	return json_number_value(v);
}

/* The receipt: every figure of usage, where each was measured or why
 * not, and the efficiency as seff computes it (the time paused left
 * out; a cpu= limit above the worker's CPUs counts the worker's). */
static void test_usage_efficiency(void **state)
{
	(void)state;
	struct result r;
	full_result(&r); /* ran 2.5 s, cpu=0.5, 1.75 s of CPU, 10M of 256M */
	r.paused_ms = 500;
	r.io_read_bytes = 4096;
	r.io_write_bytes = 0;
	for (int i = 0; i < PSI__N; i++)
		r.psi_us[i] = i == PSI_CPU_FULL ? -1 : 100 * i;
	r.usage_by[UF_CPU] = r.usage_by[UF_MEMORY] = r.usage_by[UF_PRESSURE] = "cgroup";
	r.usage_by[UF_IO] = "launcher";
	r.usage_why[UF_PIDS] = "no pids controller";
	r.host_cpus = 8;
	json_t *o = dump_parse(&r, NULL);
	json_t *use = assert_obj(o, "usage");
	assert_int(use, "io_read_bytes", 4096);
	assert_int(use, "io_write_bytes", 0); /* measured, and nothing: 0, not null */
	assert_jnull(use, "pids_peak");
	assert_int(use, "psi_cpu_some_us", 0);
	assert_jnull(use, "psi_cpu_full_us");
	assert_int(use, "psi_io_full_us", 500);
	json_t *by = assert_obj(use, "measured_by");
	assert_str(by, "cpu", "cgroup");
	assert_str(by, "io", "launcher");
	assert_null(json_object_get(by, "pids"));
	json_t *why = assert_obj(use, "why_null");
	assert_str(why, "pids", "no pids controller");
	assert_int_equal(json_object_size(why), 1);
	json_t *eff = assert_obj(o, "efficiency");
	/* 1750 ms / ((2500 - 500) ms x 0.5 CPU) */
	assert_true(num(eff, "cpu") == 1.75);
	assert_true(num(eff, "cpus") == 0.5);
	assert_true(num(eff, "memory") == 0.0391); /* 10M / 256M, to 0.01% */
	assert_null(json_object_get(eff, "why_null"));
	json_decref(o);

	/* No cpu= limit: the worker's CPUs; no memory limit: null, and why. */
	r.cpu_milli = 0;
	r.memory = 0;
	r.paused_ms = 0;
	r.host_cpus = 2;
	o = dump_parse(&r, NULL);
	eff = assert_obj(o, "efficiency");
	assert_true(num(eff, "cpu") == 0.35); /* 1750 / (2500 x 2) */
	assert_true(num(eff, "cpus") == 2);
	assert_jnull(eff, "memory");
	assert_str(assert_obj(eff, "why_null"), "memory", "no memory limit (memory=)");
	json_decref(o);

	/* A cpu= above the worker's CPUs: the worker's. CPU not measured:
	 * null, never 0. */
	r.cpu_milli = 4000;
	r.cpu_user_ms = -1;
	o = dump_parse(&r, NULL);
	eff = assert_obj(o, "efficiency");
	assert_true(num(eff, "cpus") == 2);
	assert_jnull(eff, "cpu");
	assert_non_null(json_object_get(assert_obj(eff, "why_null"), "cpu"));
	assert_jnull(assert_obj(o, "usage"), "cpu_user_ms");
	json_decref(o);

	/* Never ran: no efficiency, and usage says no why. */
	r.started_ms = 0;
	o = dump_parse(&r, NULL);
	assert_jnull(o, "efficiency");
	assert_null(json_object_get(assert_obj(o, "usage"), "why_null"));
	json_decref(o);
}

/* A rejected task: nothing ran, almost everything is unknown. */
static void test_nulls(void **state)
{
	(void)state;
	struct result r;
	result_init(&r);
	r.id = "bad";
	r.name = "bad";
	r.status = "rejected";
	r.error = "not a regular file: the entry is a FIFO";
	r.worker = "w";
	r.lane = "fast";
	json_t *o = dump_parse(&r, NULL);

	assert_str(o, "status", "rejected");
	assert_jnull(o, "exit_code");
	assert_jnull(o, "signal");
	assert_jnull(o, "refusal");
	assert_int(o, "attempt", 1);
	assert_jnull(o, "submitted_at");
	assert_jnull(o, "started_at");
	assert_jnull(o, "finished_at");
	assert_jnull(o, "wait_ms");
	assert_jnull(o, "duration_ms");

	/* stdout/stderr stay objects (contract: type object) even when
	 * nothing was captured. */
	static const char *const streams[] = {"stdout", "stderr"};
	for (size_t i = 0; i < 2; i++) {
		json_t *s = assert_obj(o, streams[i]);
		assert_jnull(s, "path");
		assert_int(s, "bytes", 0);
		assert_bool(s, "truncated", false);
	}

	json_t *lim = assert_obj(o, "limits");
	assert_jnull(lim, "timeout_s");
	assert_jnull(lim, "memory_bytes");
	assert_jnull(lim, "pids");
	assert_jnull(lim, "cpu");
	json_t *use = assert_obj(o, "usage");
	assert_jnull(use, "cpu_user_ms");
	assert_jnull(use, "cpu_system_ms");
	assert_jnull(use, "memory_peak_bytes");
	json_t *sb = assert_obj(o, "sandbox");
	assert_str(sb, "backend", "none");
	assert_bool(sb, "network", false);
	assert_str(sb, "landlock", "off");
	assert_bool(sb, "seccomp", false);
	assert_str(sb, "cgroup", "none");
	json_t *sub = assert_obj(o, "submitter");
	assert_jnull(sub, "uid");
	assert_jnull(sub, "user");
	json_decref(o);
}

/* Each nullable field on its own: set one, the others stay null. */
static void test_nulls_one_by_one(void **state)
{
	(void)state;
	struct result r;
	result_init(&r);
	r.id = r.name = "x";
	r.status = "ok";
	r.submitted_ms = 1000;
	json_t *o = dump_parse(&r, NULL);
	assert_time(o, "submitted_at", "1970-01-01T00:00:01.000Z");
	assert_jnull(o, "started_at");
	assert_jnull(o, "wait_ms"); /* needs both ends */
	assert_jnull(o, "duration_ms");
	json_decref(o);

	r.started_ms = 1250;
	o = dump_parse(&r, NULL);
	assert_int(o, "wait_ms", 250);
	assert_jnull(o, "finished_at");
	assert_jnull(o, "duration_ms");
	json_decref(o);

	r.submitted_ms = 0;
	r.finished_ms = 2000;
	o = dump_parse(&r, NULL);
	assert_jnull(o, "submitted_at");
	assert_jnull(o, "wait_ms");
	assert_int(o, "duration_ms", 750);
	json_decref(o);

	/* zero-valued limits and usage that are real values */
	result_init(&r);
	r.id = r.name = "x";
	r.status = "ok";
	r.timeout_s = 0;
	r.cpu_user_ms = 0;
	r.cpu_system_ms = 0;
	r.memory_peak = 0;
	r.uid = 0;
	r.user = "root";
	o = dump_parse(&r, NULL);
	json_t *lim = assert_obj(o, "limits");
	assert_int(lim, "timeout_s", 0);
	assert_jnull(lim, "memory_bytes");
	json_t *use = assert_obj(o, "usage");
	assert_int(use, "cpu_user_ms", 0);
	assert_int(use, "cpu_system_ms", 0);
	assert_int(use, "memory_peak_bytes", 0);
	json_t *sub = assert_obj(o, "submitter");
	assert_int(sub, "uid", 0); /* root is uid 0, not null */
	assert_str(sub, "user", "root");
	json_decref(o);

	/* each limit alone */
	result_init(&r);
	r.id = r.name = "x";
	r.status = "ok";
	r.pids = 5;
	r.cpu_milli = 2000;
	o = dump_parse(&r, NULL);
	lim = assert_obj(o, "limits");
	assert_jnull(lim, "timeout_s");
	assert_jnull(lim, "memory_bytes");
	assert_int(lim, "pids", 5);
	assert_true(json_is_number(get(lim, "cpu")));
	assert_true(json_number_value(get(lim, "cpu")) == 2.0);
	json_decref(o);
}

static void test_sandbox_values(void **state)
{
	(void)state;
	static const struct {
		const char *landlock;
		int abi; /* -1: expect the string */
	} ll[] = {{"1", 1}, {"4", 4}, {"off", -1}, {"unsupported", -1}};
	for (size_t i = 0; i < ARRAY_SIZE(ll); i++) {
		struct result r;
		full_result(&r);
		r.landlock = ll[i].landlock;
		json_t *o = dump_parse(&r, NULL);
		json_t *sb = assert_obj(o, "sandbox");
		if (ll[i].abi >= 0)
			assert_int(sb, "landlock", ll[i].abi);
		else
			assert_str(sb, "landlock", ll[i].landlock);
		json_decref(o);
	}
	struct result r;
	full_result(&r);
	r.landlock = NULL;
	r.cgroup = "v1";
	r.backend = "none";
	r.network = false;
	r.seccomp = false;
	json_t *o = dump_parse(&r, NULL);
	json_t *sb = assert_obj(o, "sandbox");
	assert_str(sb, "landlock", "off");
	assert_str(sb, "cgroup", "v1");
	assert_str(sb, "backend", "none");
	assert_bool(sb, "network", false);
	assert_bool(sb, "seccomp", false);
	json_decref(o);
}

static void test_escaping(void **state)
{
	(void)state;
	struct result r;
	char *text;
	const char *name = "q\"uote back\\slash new\nline tab\t cr\r bell\x07 esc\x1b del\x7f";
	const char *error = "line 2: \"x\\y\"\nsecond line\x01";
	full_result(&r);
	r.name = name;
	r.error = error;
	json_t *o = dump_parse(&r, &text);
	/* Round trip: the exact bytes come back. */
	assert_str(o, "name", name);
	assert_str(o, "error", error);
	assert_null(json_object_get(o, "name_hex"));
	/* The text holds escapes, never the raw control bytes. */
	assert_non_null(strstr(text, "q\\\"uote back\\\\slash new\\nline tab\\t cr\\r"));
	assert_non_null(strcasestr(text, "\\u0007"));
	assert_non_null(strcasestr(text, "\\u001b"));
	assert_non_null(strcasestr(text, "\\u0001"));
	for (const char *p = text; *p; p++)
		if ((unsigned char)*p < 0x20 && *p != '\n' && *p != ' ')
			fail_msg("raw control byte 0x%02x in the JSON text", (unsigned char)*p);
	/* Every raw newline is formatting, not content. */
	const char *nl = strstr(text, "new\nline");
	assert_null(nl);
	free(text);
	json_decref(o);
}

static void test_non_utf8_name(void **state)
{
	(void)state;
	struct result r;
	char *text;
	full_result(&r);
	r.name = "bad\xFFname\xC3";
	r.error = "cannot run \xFE\xFF";
	json_t *o = dump_parse(&r, &text);
	assert_str(o, "name", "bad\xEF\xBF\xBDname\xEF\xBF\xBD");
	assert_str(o, "name_hex", "626164ff6e616d65c3");
	assert_str(o, "error", "cannot run \xEF\xBF\xBD\xEF\xBF\xBD");
	free(text);
	json_decref(o);

	/* Overlong and surrogate encodings are not UTF-8 either. */
	full_result(&r);
	r.name = "\xC0\xAF\xED\xA0\x80";
	o = dump_parse(&r, NULL);
	assert_str(o, "name_hex", "c0afeda080");
	const char *n = json_string_value(get(o, "name"));
	assert_non_null(n);
	assert_true(utf8_valid(n, strlen(n)));
	assert_non_null(strstr(n, "\xEF\xBF\xBD"));
	assert_null(strstr(n, "\xC0"));
	json_decref(o);

	/* A valid multibyte name is kept as is, with no name_hex. */
	full_result(&r);
	r.name = "caf\xC3\xA9-\xF0\x9F\x98\x80";
	o = dump_parse(&r, NULL);
	assert_str(o, "name", "caf\xC3\xA9-\xF0\x9F\x98\x80");
	assert_null(json_object_get(o, "name_hex"));
	json_decref(o);
}

static void test_sanitize(void **state)
{
	(void)state;
	char *s;
	s = utf8_sanitize("", 0);
	assert_string_equal(s, "");
	free(s);
	s = utf8_sanitize("plain", 5);
	assert_string_equal(s, "plain");
	free(s);
	s = utf8_sanitize("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", 14);
	assert_string_equal(s, "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
	free(s);
	s = utf8_sanitize("\xFF", 1);
	assert_string_equal(s, "\xEF\xBF\xBD");
	free(s);
	s = utf8_sanitize("a\xFF" "b", 3);
	assert_string_equal(s, "a\xEF\xBF\xBD" "b");
	free(s);
	/* An embedded NUL cannot pass into a C string: replaced. */
	s = utf8_sanitize("a\0b", 3);
	assert_string_equal(s, "a\xEF\xBF\xBD" "b");
	free(s);
	/* len bounds the input: a sequence cut by len is invalid. */
	s = utf8_sanitize("x\xC3\xA9", 2);
	assert_string_equal(s, "x\xEF\xBF\xBD");
	free(s);
	/* Whatever the input, the output is valid UTF-8 and keeps the ASCII. */
	static const char *const bad[] = {
		"\xE2\x82",  "\xF0\x9F\x98", "\xC0\xAF",     "\xED\xA0\x80", "\xF4\x90\x80\x80",
		"\x80\x80",  "\xF8\x88\x80\x80\x80", "a\xE2(b", "\xC3\xC3\xA9",
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		size_t len = strlen(bad[i]);
		s = utf8_sanitize(bad[i], len);
		if (!utf8_valid(s, strlen(s)))
			fail_msg("sanitize(bad[%zu]) is not valid UTF-8", i);
		assert_non_null(strstr(s, "\xEF\xBF\xBD"));
		for (size_t k = 0; k < len; k++)
			if ((unsigned char)bad[i][k] < 0x80 && !strchr(s, bad[i][k]))
				fail_msg("sanitize(bad[%zu]) lost '%c'", i, bad[i][k]);
		free(s);
	}
	/* A broken lead does not swallow the valid sequence after it. */
	s = utf8_sanitize("\xC3\xC3\xA9", 3);
	assert_string_equal(s, "\xEF\xBF\xBD\xC3\xA9");
	free(s);
	/* Every byte value on its own. */
	for (int b = 1; b < 256; b++) {
		char in[1] = {(char)b};
		s = utf8_sanitize(in, 1);
		if (b < 0x80) {
			assert_int_equal(strlen(s), 1);
			assert_int_equal((unsigned char)s[0], b);
		} else {
			assert_string_equal(s, "\xEF\xBF\xBD");
		}
		free(s);
	}
}

static void test_other_strings_sanitized(void **state)
{
	(void)state;
	struct result r;
	full_result(&r);
	r.id = "id\xFF";
	r.worker = "w\xFE";
	r.user = "u\x80";
	r.out.present = true;
	snprintf(r.out.path, sizeof r.out.path, "done/\xFF.stdout");
	json_t *o = dump_parse(&r, NULL);
	assert_str(o, "id", "id\xEF\xBF\xBD");
	assert_str(o, "worker", "w\xEF\xBF\xBD");
	assert_str(assert_obj(o, "submitter"), "user", "u\xEF\xBF\xBD");
	assert_str(assert_obj(o, "stdout"), "path", "done/\xEF\xBF\xBD.stdout");
	json_decref(o);
}

/* The task's own paths and variables: cwd, binds with their modes, the
 * names of its env= and never a value; none of these fields without a
 * task spec (a rejected entry). */
static void test_task_binds_and_env(void **state)
{
	(void)state;
	struct task_spec spec;
	char err[256];
	const char *text = "#kart: cwd=/home/ann/p ro=/srv/in env=TOKEN=hunter2-value env=B=x\n";
	assert_int_equal(task_parse(text, strlen(text), &spec, err, sizeof err), 0);
	struct result r;
	result_init(&r);
	r.id = r.name = "t";
	r.status = "ok";
	r.task = &spec;
	r.home = "/work";
	r.work_discarded = true;
	char *doc;
	json_t *o = dump_parse(&r, &doc);
	assert_string_equal(json_string_value(get(o, "cwd")), "/home/ann/p");
	json_t *b = get(o, "binds");
	assert_int_equal(json_array_size(b), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(b, 1), "path")), "/srv/in");
	assert_string_equal(json_string_value(json_object_get(json_array_get(b, 1), "mode")), "ro");
	assert_string_equal(json_string_value(json_object_get(json_array_get(b, 0), "mode")), "rw");
	json_t *e = get(o, "env");
	assert_int_equal(json_array_size(e), 2);
	assert_string_equal(json_string_value(json_array_get(e, 0)), "TOKEN");
	assert_null(strstr(doc, "hunter2"));
	assert_true(json_is_true(get(o, "work_discarded")));
	assert_string_equal(json_string_value(get(o, "home")), "/work");
	free(doc);
	json_decref(o);
	r.task = NULL;
	o = dump_parse(&r, NULL);
	assert_null(json_object_get(o, "binds"));
	assert_null(json_object_get(o, "env"));
	json_decref(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_field),
		cmocka_unit_test(test_task_binds_and_env),
		cmocka_unit_test(test_signal_and_error),
		cmocka_unit_test(test_usage_efficiency),
		cmocka_unit_test(test_nulls),
		cmocka_unit_test(test_nulls_one_by_one),
		cmocka_unit_test(test_sandbox_values),
		cmocka_unit_test(test_escaping),
		cmocka_unit_test(test_non_utf8_name),
		cmocka_unit_test(test_sanitize),
		cmocka_unit_test(test_other_strings_sanitized),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
