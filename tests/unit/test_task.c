/* test_task.c - the directive parser, task names, the policy check and
 * the task's argv (src/task.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/stat.h>

#include "policy.h"
#include "task.h"
#include "util.h"

static char err[512];

/* Parse a NUL-terminated task text. */
static int parse(const char *text, struct task_spec *spec)
{
	err[0] = '\0';
	return task_parse(text, strlen(text), spec, err, sizeof err);
}

/* The text must be rejected, and the message must contain every needle. */
#define assert_rejected(text, ...)                                                           \
	do {                                                                                 \
		struct task_spec s_;                                                         \
		const char *needles_[] = {__VA_ARGS__, NULL};                                \
		if (parse((text), &s_) != -1)                                                \
			fail_msg("accepted: \"%s\"", (text));                                \
		for (int k_ = 0; needles_[k_]; k_++)                                          \
			if (!strstr(err, needles_[k_]))                                      \
				fail_msg("error \"%s\" lacks \"%s\"", err, needles_[k_]);    \
	} while (0)

#define assert_parses(text, spec)                                                            \
	do {                                                                                 \
		if (parse((text), (spec)) != 0)                                              \
			fail_msg("rejected \"%s\": %s", (text), err);                        \
	} while (0)

/* ---- defaults ------------------------------------------------------------ */

static void assert_defaults(const struct task_spec *s)
{
	assert_true(s->timeout_s == -1);
	assert_true(s->memory == 0);
	assert_true(s->pids == 0);
	assert_true(s->cpu_milli == 0);
	assert_int_equal(s->lane, LANE_FAST);
	assert_false(s->net);
	assert_int_equal(s->priority, 0);
	assert_int_equal(s->retries, -1);
	assert_true(s->output == 0);
	assert_string_equal(s->name, "");
	assert_string_equal(s->interp, "");
	assert_false(s->has_interp_arg);
}

static void test_defaults(void **state)
{
	(void)state;
	struct task_spec s;
	assert_parses("", &s);
	assert_defaults(&s);
	assert_parses("echo hello\n", &s);
	assert_defaults(&s);
	assert_parses("# just a comment\n# another\necho hi\n", &s);
	assert_defaults(&s);
	/* A non-kart comment that looks close is not a directive. */
	assert_parses("#kart timeout=5\n#karts: net\n# kart net\n#KART: net\n", &s);
	assert_defaults(&s);
	/* A stale spec does not leak into the next parse. */
	assert_parses("#kart: timeout=5 net lane=batch\n", &s);
	assert_parses("echo\n", &s);
	assert_defaults(&s);
}

/* ---- every item ---------------------------------------------------------- */

static void test_timeout_units(void **state)
{
	(void)state;
	static const struct {
		const char *text;
		int64_t want;
	} t[] = {
		{"#kart: timeout=90\n", 90},      {"#kart: timeout=90s\n", 90},
		{"#kart: timeout=5m\n", 300},     {"#kart: timeout=2h\n", 7200},
		{"#kart: timeout=1d\n", 86400},   {"#kart: timeout=1\n", 1},
		{"#kart: timeout=3660d\n", 3660LL * 86400},
	};
	for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
		struct task_spec s;
		assert_parses(t[i].text, &s);
		assert_true(s.timeout_s == t[i].want);
		assert_int_equal(s.line_timeout, 1);
	}
}

static void test_kill_grace_and_label(void **state)
{
	(void)state;
	struct task_spec s;
	assert_parses("#kart: timeout=2s kill_grace=10s label=night%20batch\n", &s);
	assert_true(s.kill_grace_s == 10);
	assert_int_equal(s.line_kill_grace, 1);
	assert_string_equal(s.label, "night batch");
	assert_parses("#kart: kill_grace=0\n", &s);
	assert_true(s.kill_grace_s == 0);
	assert_parses("#!/bin/sh\n", &s);
	assert_true(s.kill_grace_s == -1); /* the policy's */
	assert_rejected("#kart: kill_grace=soon\n", "line 1", "kill_grace=soon", "not a duration");
}

static void test_memory_units(void **state)
{
	(void)state;
	static const struct {
		const char *text;
		uint64_t want;
	} t[] = {
		{"#kart: memory=256M\n", 256ull << 20}, {"#kart: memory=256m\n", 256ull << 20},
		{"#kart: memory=2G\n", 2ull << 30},     {"#kart: memory=2g\n", 2ull << 30},
		{"#kart: memory=1024K\n", 1ull << 20},  {"#kart: memory=1024k\n", 1ull << 20},
		{"#kart: memory=1M\n", 1ull << 20},     {"#kart: memory=1048576\n", 1048576},
		{"#kart: memory=3000000\n", 3000000},   {"#kart: memory=1T\n", 1ull << 40},
	};
	for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
		struct task_spec s;
		assert_parses(t[i].text, &s);
		assert_true(s.memory == t[i].want);
		assert_int_equal(s.line_memory, 1);
	}
}

static void test_output_units(void **state)
{
	(void)state;
	static const struct {
		const char *text;
		uint64_t want;
	} t[] = {
		{"#kart: output=512K\n", 512ull << 10}, {"#kart: output=512k\n", 512ull << 10},
		{"#kart: output=64M\n", 64ull << 20},   {"#kart: output=2G\n", 2ull << 30},
		{"#kart: output=100\n", 100},           {"#kart: output=1\n", 1},
	};
	for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
		struct task_spec s;
		assert_parses(t[i].text, &s);
		assert_true(s.output == t[i].want);
		assert_int_equal(s.line_output, 1);
		assert_true(s.memory == 0); /* output= is not memory= */
	}
}

static void test_pids(void **state)
{
	(void)state;
	struct task_spec s;
	assert_parses("#kart: pids=64\n", &s);
	assert_true(s.pids == 64);
	assert_int_equal(s.line_pids, 1);
	assert_parses("#kart: pids=1\n", &s);
	assert_true(s.pids == 1);
	assert_parses("#kart: pids=4194304\n", &s);
	assert_true(s.pids == 4194304);
}

static void test_cpu_units(void **state)
{
	(void)state;
	static const struct {
		const char *text;
		uint32_t want;
	} t[] = {
		{"#kart: cpu=0.5\n", 500},   {"#kart: cpu=2\n", 2000}, {"#kart: cpu=1.25\n", 1250},
		{"#kart: cpu=.5\n", 500},    {"#kart: cpu=0.001\n", 1}, {"#kart: cpu=3.750\n", 3750},
	};
	for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
		struct task_spec s;
		assert_parses(t[i].text, &s);
		assert_int_equal(s.cpu_milli, t[i].want);
		assert_int_equal(s.line_cpu, 1);
	}
}

static void test_lane_net_priority_retries_name(void **state)
{
	(void)state;
	struct task_spec s;
	assert_parses("#kart: lane=batch\n", &s);
	assert_int_equal(s.lane, LANE_BATCH);
	assert_parses("#kart: lane=batch lane=fast\n", &s);
	assert_int_equal(s.lane, LANE_FAST);
	assert_string_equal(lane_name(LANE_FAST), "fast");
	assert_string_equal(lane_name(LANE_BATCH), "batch");

	assert_parses("#!/bin/sh\n# comment\n#kart: net\n", &s);
	assert_true(s.net);
	assert_int_equal(s.line_net, 3);

	assert_parses("#kart: priority=-5\n", &s);
	assert_int_equal(s.priority, -5);
	assert_parses("#kart: priority=10\n", &s);
	assert_int_equal(s.priority, 10);
	assert_parses("#kart: priority=1000000\n", &s);
	assert_int_equal(s.priority, 1000000);
	assert_parses("#kart: priority=-1000000\n", &s);
	assert_int_equal(s.priority, -1000000);

	assert_parses("#kart: retries=0\n", &s);
	assert_int_equal(s.retries, 0);
	assert_parses("#kart: retries=3\n", &s);
	assert_int_equal(s.retries, 3);
	assert_int_equal(s.line_retries, 1);
	assert_parses("#kart: retries=100\n", &s);
	assert_int_equal(s.retries, 100);

	assert_parses("#kart: name=nightly-backup\n", &s);
	assert_string_equal(s.name, "nightly-backup");
	assert_parses("#kart: name=caf\xC3\xA9.sh\n", &s);
	assert_string_equal(s.name, "caf\xC3\xA9.sh");

	/* Values are %XX-decoded: a name with spaces, '%' and '#'. */
	assert_parses("#kart: name=a%20b\n", &s);
	assert_string_equal(s.name, "a b");
	assert_parses("#kart: name=x%25y%23z%20 lane=batch\n", &s);
	assert_string_equal(s.name, "x%y#z ");
	assert_int_equal(s.lane, LANE_BATCH);
	/* Every value, not only name=. */
	assert_parses("#kart: lane=b%61tch timeout=%390\n", &s);
	assert_int_equal(s.lane, LANE_BATCH);
	assert_int_equal(s.timeout_s, 90);
}

static void test_all_items_together(void **state)
{
	(void)state;
	struct task_spec s;
	const char *text = "#!/bin/sh\n"
			   "#kart: timeout=30s memory=256M pids=64 cpu=0.5\n"
			   "#kart: lane=batch net\n"
			   "# kart:\tpriority=-3\tretries=2  output=1M   name=job-7\n"
			   "echo hello\n";
	assert_parses(text, &s);
	assert_true(s.timeout_s == 30);
	assert_true(s.memory == 256ull << 20);
	assert_true(s.pids == 64);
	assert_int_equal(s.cpu_milli, 500);
	assert_int_equal(s.lane, LANE_BATCH);
	assert_true(s.net);
	assert_int_equal(s.priority, -3);
	assert_int_equal(s.retries, 2);
	assert_true(s.output == 1ull << 20);
	assert_string_equal(s.name, "job-7");
	assert_string_equal(s.interp, "/bin/sh");
	assert_int_equal(s.line_timeout, 2);
	assert_int_equal(s.line_memory, 2);
	assert_int_equal(s.line_pids, 2);
	assert_int_equal(s.line_cpu, 2);
	assert_int_equal(s.line_net, 3);
	assert_int_equal(s.line_retries, 4);
	assert_int_equal(s.line_output, 4);
}

/* ---- the directive line forms -------------------------------------------- */

static void test_directive_forms(void **state)
{
	(void)state;
	static const char *const forms[] = {
		"#kart: timeout=7\n",   "# kart: timeout=7\n", "#kart:timeout=7\n",
		"#   kart: timeout=7\n", "#\tkart:\ttimeout=7\n", "#kart:  timeout=7   \n",
		"#kart: timeout=7",     /* no final newline */
	};
	for (size_t i = 0; i < ARRAY_SIZE(forms); i++) {
		struct task_spec s;
		assert_parses(forms[i], &s);
		if (s.timeout_s != 7)
			fail_msg("form %zu: timeout %lld", i, (long long)s.timeout_s);
	}
	/* An empty directive line is fine and sets nothing. */
	struct task_spec s;
	assert_parses("#kart:\n#kart:   \n", &s);
	assert_defaults(&s);
}

static void test_allow_net(void **state)
{
	(void)state;
	struct task_spec s;
	assert_parses("#!/bin/sh\n# allow_net\necho\n", &s);
	assert_true(s.net);
	assert_int_equal(s.line_net, 2);
	assert_parses("#allow_net\n", &s);
	assert_true(s.net);
	assert_int_equal(s.line_net, 1);
	/* Only the exact word. */
	assert_parses("# allow_network\n# disallow_net\n# allow_net please\n", &s);
	assert_false(s.net);
}

static void test_leading_block_only(void **state)
{
	(void)state;
	struct task_spec s;
	/* After the first non-# line nothing is a directive, not even a bad one. */
	assert_parses("#!/bin/sh\necho hi\n#kart: timeout=bogus net\n", &s);
	assert_true(s.timeout_s == -1);
	assert_false(s.net);
	assert_parses("#kart: timeout=5\nx=1\n#kart: timeout=9 lane=nope\n", &s);
	assert_true(s.timeout_s == 5);
	/* An empty line ends the block too. */
	assert_parses("#!/bin/sh\n\n#kart: net\n", &s);
	assert_false(s.net);
	/* An indented '#' is not a comment line in this sense. */
	assert_parses("  #kart: net\n", &s);
	assert_false(s.net);
	/* A directive right before the end of the block still counts. */
	assert_parses("#!/bin/sh\n# a\n# b\n#kart: net\necho\n#kart: pids=0\n", &s);
	assert_true(s.net);
	assert_int_equal(s.line_net, 4);
}

static void test_crlf(void **state)
{
	(void)state;
	struct task_spec s;
	assert_parses("#kart: timeout=30s\r\n#kart: lane=batch net\r\n# kart: cpu=1.5\r\n"
		      "#kart: name=crlf\r\necho\r\n",
		      &s);
	assert_true(s.timeout_s == 30);
	assert_int_equal(s.lane, LANE_BATCH);
	assert_true(s.net);
	assert_int_equal(s.cpu_milli, 1500);
	assert_string_equal(s.name, "crlf");
	assert_parses("# allow_net\r\n", &s);
	assert_true(s.net);
	assert_parses("#kart: memory=256M\r\n", &s);
	assert_true(s.memory == 256ull << 20);
	/* Bad values stay bad with CRLF, and the \r is not the culprit. */
	assert_rejected("#kart: lane=slow\r\n", "line 1:", "lane=slow ");
}

/* ---- bad values ---------------------------------------------------------- */

/* Each text is rejected, and the message holds every needle. */
struct rejected {
	const char *text;
	const char *needle[3];
};

static void assert_rejected_all(const struct rejected *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct task_spec s;
		if (parse(t[i].text, &s) != -1)
			fail_msg("accepted: \"%s\"", t[i].text);
		for (size_t k = 0; k < ARRAY_SIZE(t[i].needle) && t[i].needle[k]; k++)
			if (!strstr(err, t[i].needle[k]))
				fail_msg("\"%s\": error \"%s\" lacks \"%s\"", t[i].text, err,
					 t[i].needle[k]);
	}
}

static void test_bad_values(void **state)
{
	(void)state;
	static const struct rejected t[] = {
		/* empty values */
		{"#kart: timeout=\n", {"line 1:", "timeout=", "needs a value"}},
		{"#kart: memory=\n", {"line 1:", "memory= needs a value"}},
		{"#kart: cpu=\n", {"line 1:", "cpu= needs a value"}},
		{"#kart: lane=\n", {"line 1:", "lane= needs a value"}},
		{"#kart: pids=\n", {"line 1:", "pids= needs a value"}},
		{"#kart: name=\n", {"line 1:", "name= needs a value"}},
		/* negatives */
		{"#kart: timeout=-5\n", {"line 1:", "timeout=-5"}},
		{"#kart: memory=-1M\n", {"line 1:", "memory=-1M"}},
		{"#kart: pids=-1\n", {"line 1:", "pids=-1"}},
		{"#kart: cpu=-0.5\n", {"line 1:", "cpu=-0.5"}},
		{"#kart: retries=-1\n", {"line 1:", "retries=-1"}},
		{"#kart: output=-1\n", {"line 1:", "output=-1"}},
		/* overflow */
		{"#kart: timeout=99999999999999999999999\n", {"line 1:", "out of range"}},
		{"#kart: timeout=3661d\n", {"line 1:", "out of range"}},
		{"#kart: memory=99999999999999999999999\n", {"line 1:", "out of range"}},
		{"#kart: memory=17179869184G\n", {"line 1:", "out of range"}},
		{"#kart: output=18446744073709551616\n", {"line 1:", "out of range"}},
		{"#kart: pids=4194305\n", {"line 1:", "pids=4194305"}},
		{"#kart: pids=99999999999999999999999\n", {"line 1:", "pids="}},
		{"#kart: cpu=4097\n", {"line 1:", "cpu=4097"}},
		{"#kart: priority=1000001\n", {"line 1:", "priority=1000001"}},
		{"#kart: retries=101\n", {"line 1:", "retries=101"}},
		/* garbage suffixes and non-numbers */
		{"#kart: timeout=5x\n", {"line 1:", "timeout=5x", "not a duration"}},
		{"#kart: timeout=5M\n", {"line 1:", "not a duration"}},
		{"#kart: timeout=1.5h\n", {"line 1:", "not a duration"}},
		{"#kart: memory=256MB\n", {"line 1:", "memory=256MB", "not a size"}},
		{"#kart: memory=1.5G\n", {"line 1:", "not a size"}},
		{"#kart: output=10X\n", {"line 1:", "output=10X", "not a size"}},
		{"#kart: pids=64k\n", {"line 1:", "pids=64k"}},
		{"#kart: cpu=1c\n", {"line 1:", "cpu=1c"}},
		{"#kart: priority=high\n", {"line 1:", "priority=high"}},
		{"#kart: retries=two\n", {"line 1:", "retries=two"}},
		/* cpu: at most 3 decimals, above zero */
		{"#kart: cpu=0.0001\n", {"line 1:", "cpu=0.0001", "at most 3 decimals"}},
		{"#kart: cpu=1.2345\n", {"line 1:", "cpu=1.2345"}},
		{"#kart: cpu=0\n", {"line 1:", "cpu=0"}},
		{"#kart: cpu=0.000\n", {"line 1:", "cpu=0.000"}},
		{"#kart: cpu=1.\n", {"line 1:", "cpu=1."}},
		/* zero where zero means nothing */
		{"#kart: timeout=0\n", {"line 1:", "timeout=0", "out of range"}},
		{"#kart: timeout=0s\n", {"line 1:", "timeout=0s"}},
		{"#kart: pids=0\n", {"line 1:", "pids=0"}},
		/* memory below 1M */
		{"#kart: memory=512K\n", {"line 1:", "memory=512K", "at least 1M"}},
		{"#kart: memory=1048575\n", {"line 1:", "at least 1M"}},
		{"#kart: memory=0\n", {"line 1:", "memory=0"}},
		/* unknown items */
		{"#kart: colour=blue\n", {"line 1:", "unknown directive item 'colour=blue'"}},
		{"#kart: bogus\n", {"line 1:", "unknown directive item 'bogus'"}},
		{"#kart: net=1\n", {"line 1:", "unknown directive item 'net=1'"}},
		{"#kart: =5\n", {"line 1:", "unknown directive item '=5'"}},
		{"#kart: TIMEOUT=5\n", {"line 1:", "unknown directive item"}},
		{"#kart: timeout\n", {"line 1:", "unknown directive item 'timeout'"}},
		{"#kart: averyveryveryveryverylongdirectivename=1\n", {"line 1:", "unknown directive item"}},
		/* unknown lane */
		{"#kart: lane=slow\n", {"line 1:", "lane=slow", "fast or batch"}},
		{"#kart: lane=FAST\n", {"line 1:", "lane=FAST"}},
		/* bad names */
		{"#kart: name=.hidden\n", {"line 1:", "name=.hidden"}},
		{"#kart: name=a/b\n", {"line 1:", "name=a/b"}},
		{"#kart: name=\xFF\n", {"line 1:", "not a task name"}},
		{"#kart: name=%2Ehidden\n", {"line 1:", "starts with '.'"}},
		{"#kart: name=a%2Fb\n", {"line 1:", "name=a%2Fb", "'/'"}},
		{"#kart: name=a%0Ab\n", {"line 1:", "control character"}},
		/* bad escapes */
		{"#kart: name=a%2\n", {"line 1:", "two hex digits"}},
		{"#kart: name=a%zzb\n", {"line 1:", "two hex digits"}},
		{"#kart: name=a%00b\n", {"line 1:", "%00"}},
		{"#kart: bogus=1\n", {"line 1:", "name="}},
	};
	assert_rejected_all(t, ARRAY_SIZE(t));
}

static void test_error_names_line(void **state)
{
	(void)state;
	assert_rejected("#!/bin/sh\n#kart: timeout=bogus\n", "line 2: ");
	assert_rejected("#!/bin/sh\n# comment\n#kart: lane=batch\n# kart: pids=0\n", "line 4: ");
	assert_rejected("#kart: net\n#kart: net cpu=0\n", "line 2: ");
	/* The first bad item is the one reported. */
	assert_rejected("#kart: timeout=5 memory=1K cpu=0\n", "line 1: memory=1K");
	/* CRLF does not change the count. */
	assert_rejected("#!/bin/sh\r\n#\r\n#kart: pids=0\r\n", "line 3: ");
	/* The message starts with the line. */
	struct task_spec s;
	assert_int_equal(parse("#a\n#b\n#c\n#d\n#e\n#f\n#g\n#h\n#i\n#kart: x\n", &s), -1);
	assert_true(strncmp(err, "line 10: ", 9) == 0);
}

static void test_small_err_buffer(void **state)
{
	(void)state;
	struct task_spec s;
	char small[8];
	memset(small, 'Z', sizeof small);
	const char *t = "#kart: lane=nowhere-at-all\n";
	assert_int_equal(task_parse(t, strlen(t), &s, small, sizeof small), -1);
	assert_int_equal(small[sizeof small - 1], '\0');
	assert_string_equal(small, "line 1:");
}

static void test_not_nul_terminated(void **state)
{
	(void)state;
	/* The parser honours len: the bytes after it are not part of the task. */
	struct task_spec s;
	const char buf[] = "#kart: timeout=5\n#kart: pids=0\n";
	size_t first = strlen("#kart: timeout=5\n");
	assert_int_equal(task_parse(buf, first, &s, err, sizeof err), 0);
	assert_true(s.timeout_s == 5);
	assert_int_equal(task_parse(buf, sizeof buf - 1, &s, err, sizeof err), -1);
	/* A value cut by len is what is parsed: "timeout=5" of "timeout=59". */
	const char cut[] = "#kart: timeout=59";
	assert_int_equal(task_parse(cut, sizeof cut - 2, &s, err, sizeof err), 0);
	assert_true(s.timeout_s == 5);
}

static void test_long_directive_line(void **state)
{
	(void)state;
	/* A directive line too long to be read is refused, never dropped:
	 * dropping it would run the task without the limits it asked for. */
	static char text[5100];
	size_t pad = 5000;
	int n = snprintf(text, sizeof text, "#!/bin/sh\n#kart: memory=256M");
	memset(text + n, ' ', pad);
	strcpy(text + n + pad, "net\necho\n");
	struct task_spec s;
	assert_int_equal(parse(text, &s), -1);
	assert_non_null(strstr(err, "line 2:"));
	/* The same length as a plain comment is harmless. */
	memcpy(text + 10, "# note ", 7);
	if (parse(text, &s) != 0)
		fail_msg("long plain comment rejected: %s", err);
	assert_true(s.memory == 0);
}

/* ---- the #! line --------------------------------------------------------- */

static void test_shebang(void **state)
{
	(void)state;
	struct task_spec s;
	assert_parses("#!/bin/bash\necho\n", &s);
	assert_string_equal(s.interp, "/bin/bash");
	assert_false(s.has_interp_arg);

	assert_parses("#!/usr/bin/env python3\nprint(1)\n", &s);
	assert_string_equal(s.interp, "/usr/bin/env");
	assert_true(s.has_interp_arg);
	assert_string_equal(s.interp_arg, "python3");

	/* Spaces after #!, around and after the argument; the rest of the
	 * line is one argument, as the kernel passes it. */
	assert_parses("#! \t/usr/bin/env   python3 -u  \t\n", &s);
	assert_string_equal(s.interp, "/usr/bin/env");
	assert_true(s.has_interp_arg);
	assert_string_equal(s.interp_arg, "python3 -u");

	assert_parses("#!/bin/sh -e\n#kart: timeout=5\n", &s);
	assert_string_equal(s.interp, "/bin/sh");
	assert_string_equal(s.interp_arg, "-e");
	assert_true(s.timeout_s == 5);

	/* No final newline. */
	assert_parses("#!/bin/dash", &s);
	assert_string_equal(s.interp, "/bin/dash");
	assert_false(s.has_interp_arg);

	/* Only line 1 is a #! line; later it is a comment. */
	assert_parses("#kart: net\n#!/bin/bash\n", &s);
	assert_string_equal(s.interp, "");
	assert_true(s.net);
}

static void test_shebang_bad(void **state)
{
	(void)state;
	assert_rejected("#!sh\n", "line 1:", "absolute path");
	assert_rejected("#!bin/sh\n", "line 1:", "absolute path");
	assert_rejected("#! ./run.sh arg\n", "line 1:", "absolute path");
	assert_rejected("#!\n", "line 1:", "no interpreter");
	assert_rejected("#!   \t \n", "line 1:", "no interpreter");

	/* The kernel reads 255 bytes of a #! line (BINPRM_BUF_SIZE 256). */
	char line[600];
	struct task_spec s;
	memset(line, 0, sizeof line);
	memcpy(line, "#!/", 3);
	memset(line + 3, 'a', TASK_INTERP_MAX - 1 - 3); /* 255 bytes in all */
	line[TASK_INTERP_MAX - 1] = '\n';
	assert_parses(line, &s);
	assert_int_equal(strlen(s.interp), TASK_INTERP_MAX - 1 - 2);
	memset(line, 0, sizeof line);
	memcpy(line, "#!/", 3);
	memset(line + 3, 'a', TASK_INTERP_MAX - 3); /* 256 bytes */
	line[TASK_INTERP_MAX] = '\n';
	assert_rejected(line, "line 1:", "longer than 255 bytes");
	/* A long argument counts too. */
	memset(line, 0, sizeof line);
	int n = sprintf(line, "#!/usr/bin/env ");
	memset(line + n, 'x', 400);
	assert_rejected(line, "line 1:", "#! line is longer");
}

/* ---- task_name_check ----------------------------------------------------- */

static void test_name_ok(void **state)
{
	(void)state;
	static const char *const ok[] = {
		"job",        "job-1.sh",   "hello world", "a",  "_x", "-dash", "caf\xC3\xA9",
		"\xE6\x97\xA5\xE6\x9C\xAC", "\xF0\x9F\x98\x80", "x.y.z", "a..b", "~tilde",
	};
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
		const char *why = "untouched";
		int r = task_name_check(ok[i], &why);
		if (r != 0)
			fail_msg("\"%s\": %d (%s)", ok[i], r, why);
	}
	char name[TASK_NAME_MAX + 2];
	memset(name, 'n', TASK_NAME_MAX);
	name[TASK_NAME_MAX] = '\0';
	const char *why = NULL;
	assert_int_equal(task_name_check(name, &why), 0);
}

static void test_name_dot_ignored(void **state)
{
	(void)state;
	static const char *const dots[] = {".", "..", ".hidden", ".job.tmp", ".\xFF", ".a/b"};
	for (size_t i = 0; i < ARRAY_SIZE(dots); i++) {
		const char *why = NULL;
		assert_int_equal(task_name_check(dots[i], &why), 1);
	}
}

static void assert_name_rejected(const char *name, const char *needle)
{
	const char *why = NULL;
	if (task_name_check(name, &why) != -1)
		fail_msg("name accepted (index of needle '%s')", needle);
	assert_non_null(why);
	if (!strstr(why, needle))
		fail_msg("why \"%s\" lacks \"%s\"", why, needle);
}

static void test_name_bad(void **state)
{
	(void)state;
	static const struct {
		const char *name, *needle;
	} t[] = {
		{"", "empty"},
		/* invalid UTF-8 */
		{"bad\xFF", "UTF-8"},
		{"\x80job", "UTF-8"},
		{"caf\xC3", "UTF-8"},
		{"\xED\xA0\x80", "UTF-8"}, /* surrogate */
		{"\xF4\x90\x80\x80", "UTF-8"},
		/* overlong encodings: of '/', of NUL, of '.' */
		{"a\xC0\xAF" "b", "UTF-8"},
		{"a\xE0\x80\xAF" "b", "UTF-8"},
		{"a\xF0\x80\x80\xAF" "b", "UTF-8"},
		{"\xC0\x80", "UTF-8"},
		{"\xC0\xAE" "hidden", "UTF-8"},
		/* control characters and DEL */
		{"a\x01" "b", "control"},
		{"a\tb", "control"},
		{"a\nb", "control"},
		{"a\rb", "control"},
		{"\x1b[31m", "control"},
		{"x\x1f", "control"},
		{"del\x7f", "control"},
		/* a slash */
		{"a/b", "'/'"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(t); i++)
		assert_name_rejected(t[i].name, t[i].needle);
	char name[TASK_NAME_MAX + 2];
	memset(name, 'n', TASK_NAME_MAX + 1);
	name[TASK_NAME_MAX + 1] = '\0';
	assert_name_rejected(name, "longer than 200");
}

/* ---- task_check_policy --------------------------------------------------- */

static void test_policy(struct policy *p)
{
	memset(p, 0, sizeof *p);
	p->backend = BACKEND_BWRAP;
	p->timeout_max_s = 3600;
	p->memory_max = 1ull << 30;
	p->pids_max = 100;
	p->cpu_max_milli = 2000;
	p->output_max = 64ull << 20;
	p->output_default = 1ull << 20;
	p->task_max_bytes = 1ull << 20;
	p->net_uids[0] = 1000;
	p->net_uids[1] = 1002;
	p->n_net_uids = 2;
}

static int check(const char *text, const struct policy *p, uid_t uid)
{
	struct task_spec s;
	if (parse(text, &s) != 0)
		fail_msg("rejected by the parser: %s", err);
	err[0] = '\0';
	return task_check_policy(&s, p, uid, err, sizeof err);
}

#define assert_refused(text, pol, uid, ...)                                                  \
	do {                                                                                 \
		const char *needles_[] = {__VA_ARGS__, NULL};                                \
		if (check((text), (pol), (uid)) != -1)                                       \
			fail_msg("policy accepted \"%s\"", (text));                          \
		for (int k_ = 0; needles_[k_]; k_++)                                          \
			if (!strstr(err, needles_[k_]))                                      \
				fail_msg("error \"%s\" lacks \"%s\"", err, needles_[k_]);    \
	} while (0)

static void test_policy_within(void **state)
{
	(void)state;
	struct policy p;
	test_policy(&p);
	/* Nothing asked: nothing above a ceiling. */
	assert_int_equal(check("echo\n", &p, 1000), 0);
	/* Exactly at every ceiling is allowed. */
	assert_int_equal(check("#kart: timeout=1h memory=1G pids=100 cpu=2 output=64M\n", &p, 5),
			 0);
	assert_int_equal(check("#kart: timeout=59m memory=1M pids=1 cpu=0.001 output=1\n", &p, 5),
			 0);
}

static void test_policy_ceilings(void **state)
{
	(void)state;
	struct policy p;
	test_policy(&p);
	assert_refused("#!/bin/sh\n#kart: lane=batch\n#kart: timeout=2h\n", &p, 1000, "line 3:",
		       "timeout=7200s", "ceiling of 3600s");
	assert_refused("#kart: timeout=3601\n", &p, 1000, "line 1:", "ceiling of 3600s");
	assert_refused("#!/bin/sh\n#kart: memory=2G\n", &p, 1000, "line 2:", "memory=2G",
		       "ceiling of 1G");
	assert_refused("#kart: memory=1025M\n", &p, 1000, "line 1:", "memory=1025M",
		       "ceiling of 1G");
	assert_refused("#\n#\n#kart: pids=101\n", &p, 1000, "line 3:", "pids=101",
		       "ceiling of 100");
	assert_refused("#kart: lane=fast\n#kart: cpu=2.5\n", &p, 1000, "line 2:", "cpu=2.500",
		       "ceiling of 2.000");
	assert_refused("#kart: cpu=2.001\n", &p, 1000, "line 1:", "ceiling of 2.000");
	assert_refused("#!/bin/sh\n# x\n# y\n#kart: output=65M\n", &p, 1000, "line 4:",
		       "output=65M", "ceiling of 64M");
	assert_refused("#kart: output=67108865\n", &p, 1000, "line 1:", "output=67108865",
		       "ceiling of 64M");
	/* The ceiling is from the policy, not fixed: a tighter one tightens. */
	p.memory_max = 512ull << 20;
	p.pids_max = 10;
	assert_refused("#kart: memory=513M\n", &p, 1000, "ceiling of 512M");
	assert_refused("#kart: pids=11\n", &p, 1000, "ceiling of 10");
	p.memory_max = 1536ull << 20;
	assert_refused("#kart: memory=2G\n", &p, 1000, "ceiling of 1536M");
	assert_int_equal(check("#kart: memory=1536M\n", &p, 1000), 0);
}

static void test_policy_no_timeout_ceiling(void **state)
{
	(void)state;
	struct policy p;
	test_policy(&p);
	p.timeout_max_s = -1;
	assert_int_equal(check("#kart: timeout=3660d\n", &p, 1000), 0);
	p.timeout_max_s = 60;
	assert_refused("#kart: timeout=61\n", &p, 1000, "ceiling of 60s");
	assert_int_equal(check("#kart: timeout=60\n", &p, 1000), 0);
}

static void test_policy_net(void **state)
{
	(void)state;
	struct policy p;
	test_policy(&p);
	assert_int_equal(check("#kart: net\n", &p, 1000), 0);
	assert_int_equal(check("#kart: net\n", &p, 1002), 0);
	assert_refused("#!/bin/sh\n#kart: net\n", &p, 1001, "line 2:", "net", "uid 1001");
	assert_refused("#!/bin/sh\n# allow_net\n", &p, 0, "line 2:", "uid 0");
	assert_true(policy_net_allowed(&p, 1000));
	assert_false(policy_net_allowed(&p, 1001));
	/* Without net asked, no grant is needed. */
	assert_int_equal(check("#kart: timeout=5\n", &p, 1001), 0);
	/* No grants at all. */
	p.n_net_uids = 0;
	assert_refused("#kart: net\n", &p, 1000, "line 1:", "uid 1000");
	/* net_all grants everyone. */
	p.net_all = true;
	assert_int_equal(check("#kart: net\n", &p, 1000), 0);
	assert_int_equal(check("#kart: net\n", &p, 4242), 0);
	assert_true(policy_net_allowed(&p, 0));
}

/* ---- task_argv ----------------------------------------------------------- */

static void test_argv(void **state)
{
	(void)state;
	struct task_spec s;
	const char *argv[4] = {"x", "x", "x", "x"};

	assert_parses("echo hi\n", &s);
	assert_int_equal(task_argv(&s, "/run/kart/task", argv), 2);
	assert_string_equal(argv[0], "/bin/sh");
	assert_string_equal(argv[1], "/run/kart/task");
	assert_null(argv[2]);

	assert_parses("#!/usr/bin/python3\n", &s);
	assert_int_equal(task_argv(&s, "/t", argv), 2);
	assert_string_equal(argv[0], "/usr/bin/python3");
	assert_string_equal(argv[1], "/t");
	assert_null(argv[2]);

	assert_parses("#!/usr/bin/env python3 -u\n", &s);
	assert_int_equal(task_argv(&s, "/t", argv), 3);
	assert_string_equal(argv[0], "/usr/bin/env");
	assert_string_equal(argv[1], "python3 -u");
	assert_string_equal(argv[2], "/t");
	assert_null(argv[3]);
}

/* ---- task_inspect: hostile entries --------------------------------------- */

struct tmpdir {
	char path[64];
	int fd;
};

static int inspect_setup(void **state)
{
	struct tmpdir *t = xcalloc(1, sizeof *t);
	snprintf(t->path, sizeof t->path, "/tmp/kart-test-task.XXXXXX");
	if (!mkdtemp(t->path))
		return -1;
	t->fd = open(t->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	*state = t;
	return t->fd < 0 ? -1 : 0;
}

static int inspect_teardown(void **state)
{
	struct tmpdir *t = *state;
	static const char *const names[] = {"ok", "link", "fifo", "dir", "hard1", "hard2",
					    "big", "open", "bad", ".dot", "cap"};
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		(void)unlinkat(t->fd, names[i], names[i][0] == 'd' ? AT_REMOVEDIR : 0);
	close(t->fd);
	(void)rmdir(t->path);
	free(t);
	return 0;
}

static void put(int dirfd, const char *name, const char *text)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write_all(fd, text, strlen(text)), 0);
	close(fd);
}

/* task_inspect rejects NAME in DIRFD, and says why. */
static void assert_inspect_rejects(int dirfd, const char *name, const struct policy *p,
				   const char *why)
{
	struct inspect in;
	task_inspect(dirfd, name, p, &in);
	if (in.kind != INSPECT_REJECT)
		fail_msg("%s: kind %d, not rejected", name, (int)in.kind);
	if (!strstr(in.error, why))
		fail_msg("%s: error \"%s\" lacks \"%s\"", name, in.error, why);
}

static void test_inspect(void **state)
{
	struct tmpdir *t = *state;
	struct policy p;
	struct inspect in;
	test_policy(&p);
	p.task_max_bytes = 100;

	put(t->fd, "ok", "#!/bin/sh\n#kart: timeout=5 lane=batch\necho\n");
	task_inspect(t->fd, "ok", &p, &in);
	assert_int_equal(in.kind, INSPECT_OK);
	assert_true(in.spec.timeout_s == 5);
	assert_int_equal(in.spec.lane, LANE_BATCH);
	assert_int_equal(in.uid, getuid());

	task_inspect(t->fd, ".dot", &p, &in);
	assert_int_equal(in.kind, INSPECT_IGNORE);
	task_inspect(t->fd, "missing", &p, &in);
	assert_int_equal(in.kind, INSPECT_GONE);

	assert_int_equal(symlinkat("ok", t->fd, "link"), 0);
	assert_inspect_rejects(t->fd, "link", &p, "symbolic link");

	assert_int_equal(mkfifoat(t->fd, "fifo", 0644), 0);
	assert_inspect_rejects(t->fd, "fifo", &p, "FIFO"); /* must not block */

	assert_int_equal(mkdirat(t->fd, "dir", 0755), 0);
	assert_inspect_rejects(t->fd, "dir", &p, "directory");

	put(t->fd, "hard1", "echo\n");
	assert_int_equal(linkat(t->fd, "hard1", t->fd, "hard2", 0), 0);
	assert_inspect_rejects(t->fd, "hard2", &p, "hard links");

	put(t->fd, "big", "#!/bin/sh\n# padding padding padding padding padding padding padding "
			  "padding padding padding padding padding padding padding padding\n");
	assert_inspect_rejects(t->fd, "big", &p, "above the limit of 100 bytes");

	put(t->fd, "bad", "#kart: pids=0\n");
	assert_inspect_rejects(t->fd, "bad", &p, "line 1: pids=0");

	put(t->fd, "cap", "#kart: pids=101\n");
	assert_inspect_rejects(t->fd, "cap", &p, "ceiling of 100");

	task_inspect(t->fd, "bad\nname", &p, &in);
	assert_int_equal(in.kind, INSPECT_GONE); /* nothing there to reject */

	/* A file its writer still holds open is busy, not run half-written. */
	int w = openat(t->fd, "open", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	assert_true(w >= 0);
	assert_int_equal(write_all(w, "echo", 4), 0);
	task_inspect(t->fd, "open", &p, &in);
	int busy = in.kind;
	close(w);
	assert_int_equal(busy, INSPECT_BUSY);
	task_inspect(t->fd, "open", &p, &in);
	assert_int_equal(in.kind, INSPECT_OK);
}

/* ---- kinds -------------------------------------------------------------- */

static void test_kind_directive(void **state)
{
	(void)state;
	struct task_spec s;
	assert_parses("#!/bin/sh\n#kart: timeout=5 kind=python\n", &s);
	assert_string_equal(s.kind, "python");
	assert_int_equal(s.line_kind, 2);
	assert_string_equal(s.interp, "/bin/sh"); /* resolved later, against the policy */
	assert_parses("#kart: kind=a_b-9\n", &s);
	assert_string_equal(s.kind, "a_b-9");
	assert_parses("#kart: kind=abcdefghijabcdefghijabcdefghij1\n", &s); /* 31 */
	assert_parses("echo\n", &s);
	assert_string_equal(s.kind, "");
	assert_int_equal(s.line_kind, 0);
	assert_rejected("#\n#kart: kind=\n", "line 2:", "kind= needs a value");
	assert_rejected("#kart: kind=Python\n", "line 1:", "kind=Python is not a kind name");
	assert_rejected("#kart: kind=py.thon\n", "kind=py.thon is not a kind name");
	assert_rejected("#kart: kind=a/b\n", "kind=a/b");
	assert_rejected("#kart: kind=abcdefghijabcdefghijabcdefghij12\n", "is not a kind name");
	assert_rejected("#kart: kind\n", "unknown directive item 'kind'", "kind=");
}

/* python (.py) and llm (.prompt, needs network) */
static void kind_policy(struct policy *p)
{
	char e[256];
	test_policy(p);
	if (policy_parse_conf(p,
			      "[kind.python]\nrunner = /usr/bin/python3\nextensions = .py\n"
			      "[kind.llm]\nrunner = /opt/kart/kart-llm\nextensions = .prompt\nnet = yes\n",
			      "kart.conf", e, sizeof e) != 0)
		fail_msg("%s", e);
}

static int resolve(const char *text, const struct policy *p, const char *fname,
		   struct task_spec *s)
{
	if (parse(text, s) != 0)
		fail_msg("rejected by the parser: %s", err);
	err[0] = '\0';
	return task_resolve_kind(s, p, fname, err, sizeof err);
}

/* kind= wins over #!; the extension only without a #! line. */
static void test_kind_precedence(void **state)
{
	(void)state;
	struct policy p;
	struct task_spec s;
	kind_policy(&p);
	assert_int_equal(resolve("print(1)\n", &p, "hello.py", &s), 0);
	assert_string_equal(s.kind, "python");
	assert_string_equal(s.interp, "/usr/bin/python3");
	assert_false(s.net);
	assert_int_equal(resolve("#!/bin/sh\necho\n", &p, "hello.py", &s), 0);
	assert_string_equal(s.kind, "");
	assert_string_equal(s.interp, "/bin/sh");
	assert_int_equal(resolve("#!/bin/sh -e\n#kart: kind=python\n", &p, "job", &s), 0);
	assert_string_equal(s.kind, "python");
	assert_string_equal(s.interp, "/usr/bin/python3");
	assert_false(s.has_interp_arg);
	/* kind= over the extension too. */
	assert_int_equal(resolve("#kart: kind=python\n", &p, "ask.prompt", &s), 0);
	assert_string_equal(s.kind, "python");
	assert_int_equal(resolve("echo\n", &p, "hello.pyc", &s), 0);
	assert_string_equal(s.kind, "");
	assert_string_equal(s.interp, "");
	const char *argv[4];
	assert_int_equal(resolve("# no #!\n", &p, "x.py", &s), 0);
	assert_int_equal(task_argv(&s, "/run/kart/task", argv), 2);
	assert_string_equal(argv[0], "/usr/bin/python3");
	assert_string_equal(argv[1], "/run/kart/task");
}

static void test_kind_unknown(void **state)
{
	(void)state;
	struct policy p;
	struct task_spec s;
	kind_policy(&p);
	assert_int_equal(resolve("#!/bin/sh\n# x\n#kart: kind=cobol\n", &p, "job", &s), -1);
	assert_non_null(strstr(err, "line 3: kind=cobol is not a kind of the policy (known: python, llm)"));
	test_policy(&p);
	assert_int_equal(resolve("#kart: kind=python\n", &p, "x.py", &s), -1);
	assert_non_null(strstr(err, "line 1: kind=python is not a kind of the policy (it defines none)"));
	/* No kinds: an extension means nothing. */
	assert_int_equal(resolve("print(1)\n", &p, "x.py", &s), 0);
	assert_string_equal(s.interp, "");
}

/* A kind that needs network: granted to the submitter, or rejected,
 * saying so and naming the kind= line. */
static void test_kind_needs_net(void **state)
{
	(void)state;
	struct policy p;
	struct task_spec s;
	kind_policy(&p);
	assert_int_equal(resolve("Say hi.\n", &p, "ask.prompt", &s), 0);
	assert_string_equal(s.kind, "llm");
	assert_true(s.net);
	assert_true(s.kind_net);
	assert_int_equal(task_check_policy(&s, &p, 1000, err, sizeof err), 0);
	assert_int_equal(task_check_policy(&s, &p, 1001, err, sizeof err), -1);
	assert_non_null(strstr(err, "extension makes it kind llm, which needs network, but the policy "
				    "grants no network to uid 1001"));
	assert_int_equal(resolve("#!/bin/sh\n#kart: kind=llm\n", &p, "job", &s), 0);
	assert_int_equal(task_check_policy(&s, &p, 1001, err, sizeof err), -1);
	assert_non_null(strstr(err, "line 2: kind=llm needs network"));
	/* A kind without net leaves the task without it. */
	assert_int_equal(resolve("#kart: kind=python\n", &p, "job", &s), 0);
	assert_false(s.net);
	assert_int_equal(task_check_policy(&s, &p, 1001, err, sizeof err), 0);
}

/* ---- cwd=, bind=, ro=, env=, umask= --------------------------------------- */

static void test_binds_parse(void **state)
{
	(void)state;
	struct task_spec s;
	assert_parses("#kart: cwd=/home/ann/proj ro=/srv/data//in/ bind=/home/ann/out\n", &s);
	assert_int_equal(s.n_binds, 3);
	assert_int_equal(s.cwd, 0);
	assert_int_equal(s.binds[0].mode, BIND_CWD);
	assert_string_equal(s.binds[0].path, "/home/ann/proj");
	assert_int_equal(s.binds[1].mode, BIND_RO);
	assert_string_equal(s.binds[1].path, "/srv/data/in"); /* one spelling */
	assert_int_equal(s.binds[2].mode, BIND_RW);
	assert_int_equal(s.binds[2].line, 1);
	/* Without any: the private /work. */
	assert_parses("#kart: timeout=5\n", &s);
	assert_int_equal(s.n_binds, 0);
	assert_int_equal(s.cwd, -1);
	assert_int_equal(s.umask, -1);
}

/* A path with a space, a '%' and a '#' is written encoded, and the
 * parser gives it back as it was; kart submit writes it with pct_encode. */
static void test_binds_encoded(void **state)
{
	(void)state;
	const char *path = "/home/ann/my dir/100%#1\tx";
	char enc[256], text[400];
	struct task_spec s;
	assert_true(pct_encode(path, enc, sizeof enc) > 0);
	assert_null(strchr(enc, ' '));
	snprintf(text, sizeof text, "#kart: ro=%s cwd=/tmp/a%%20b\n", enc);
	assert_parses(text, &s);
	assert_string_equal(s.binds[0].path, path);
	assert_string_equal(s.binds[1].path, "/tmp/a b");
	assert_rejected("#kart: ro=/tmp/a%2\n", "line 1", "two hex digits");
	assert_rejected("#kart: ro=/tmp/a%00b\n", "line 1", "%00");
}

static void test_binds_bad(void **state)
{
	(void)state;
	assert_rejected("#kart: cwd=proj\n", "line 1", "cwd=proj", "not an absolute path");
	assert_rejected("#kart: bind=/home/ann/../bob\n", "line 1", "..");
	assert_rejected("#kart: ro=/home/./ann\n", "line 1", ". or ..");
	assert_rejected("#kart: cwd=/\n", "root directory");
	assert_rejected("#kart: cwd=//\n", "root directory");
	assert_rejected("#!/bin/sh\n#kart: cwd=/a\n#kart: cwd=/b\n", "line 3", "second cwd=",
			"line 2");
	assert_rejected("#kart: ro=/a bind=/a/\n", "/a is asked for twice");
	/* Refused whoever asks: the host's kernel interfaces, and what would
	 * cover the sandbox's own mounts. */
	static const char *const refused[] = {"/proc", "/proc/1/root", "/sys/kernel", "/dev",
					      "/dev/sda", "/usr", "/etc", "/lib", "/tmp", "/run",
					      "/run/kart", "/run/kart/task", "/work", "/bin"};
	for (size_t i = 0; i < ARRAY_SIZE(refused); i++) {
		char text[128];
		snprintf(text, sizeof text, "#kart: ro=%s\n", refused[i]);
		assert_rejected(text, "refused", refused[i]);
	}
	/* Below one of the sandbox's mounts is on top of it: fine. */
	struct task_spec s;
	assert_parses("#kart: bind=/tmp/x ro=/usr/share/dict ro=/run/user/1000/x\n", &s);
	char many[2048] = "#kart:";
	for (int i = 0; i <= TASK_BINDS_MAX; i++)
		snprintf(many + strlen(many), sizeof many - strlen(many), " ro=/d%d", i);
	strcat(many, "\n");
	assert_rejected(many, "more than 16");
}

static void test_env_parse(void **state)
{
	(void)state;
	struct task_spec s;
	assert_parses("#kart: env=FOO=bar env=MSG=hello%20world%25 env=EMPTY=\n#kart: env=EQ=a=b\n", &s);
	assert_int_equal(s.n_env, 4);
	const char *want[] = {"FOO=bar", "MSG=hello world%", "EMPTY=", "EQ=a=b"};
	int i = 0;
	for (const char *e = NULL; (e = task_env_next(&s, e)); i++)
		assert_string_equal(e, want[i]);
	assert_int_equal(i, 4);
	/* A newline in a value: encoded, and back. */
	char enc[64], text[128];
	assert_true(pct_encode("two\nlines", enc, sizeof enc) > 0);
	snprintf(text, sizeof text, "#kart: env=X=%s\n", enc);
	assert_parses(text, &s);
	assert_string_equal(task_env_next(&s, NULL), "X=two\nlines");
	assert_rejected("#kart: env=FOO\n", "NAME=VALUE");
	assert_rejected("#kart: env==x\n", "NAME=VALUE");
	assert_rejected("#kart: env=1A=x\n", "NAME=VALUE");
	assert_rejected("#kart: env=A-B=x\n", "NAME=VALUE");
	assert_rejected("#kart: env=A=1 env=A=2\n", "env=A is set twice");
	/* A value is never echoed in an error. */
	assert_rejected("#kart: env=A=s3cr3t%zz\n", "two hex digits");
	assert_null(strstr(err, "s3cr3t"));
}

static void test_umask_parse(void **state)
{
	(void)state;
	struct task_spec s;
	assert_parses("#kart: umask=077\n", &s);
	assert_int_equal(s.umask, 077);
	assert_parses("#kart: umask=0\n", &s);
	assert_int_equal(s.umask, 0);
	assert_rejected("#kart: umask=0800\n", "octal");
	assert_rejected("#kart: umask=-1\n", "octal");
	assert_rejected("#kart: umask=1000\n", "octal");
}

/* [sandbox] task_binds, task_bind_roots, env_deny and their defaults. */
static void test_binds_policy(void **state)
{
	(void)state;
	struct policy p;
	char perr[256];
	assert_int_equal(policy_load(&p, NULL, perr, sizeof perr), 0);
	assert_true(p.task_binds);
	p.net_all = false;
	assert_int_equal(check("#kart: cwd=/home/ann/p ro=/srv/x\n", &p, 1000), 0);
	assert_refused("#kart: env=LD_PRELOAD=/tmp/evil.so\n", &p, 1000, "LD_PRELOAD", "env_deny");
	assert_null(strstr(err, "evil"));
	assert_refused("#kart: env=LD_LIBRARY_PATH=/x\n", &p, 1000, "LD_LIBRARY_PATH");
	assert_refused("#kart: env=KART_OUTDIR=/x\n", &p, 1000, "KART_OUTDIR", "sandbox");
	assert_int_equal(check("#kart: env=FOO=1 env=PATH=/opt/bin:/usr/bin\n", &p, 1000), 0);
	assert_int_equal(policy_parse_conf(&p, "[sandbox]\ntask_binds = no\n", "kart.conf", perr,
					   sizeof perr), 0);
	assert_refused("#kart: timeout=5\n#kart: ro=/srv/x\n", &p, 1000, "line 2", "ro=/srv/x",
		       "task_binds = no");
	assert_int_equal(policy_parse_conf(&p, "[sandbox]\ntask_binds = yes\n"
					       "task_bind_roots = /home, /srv/data\n"
					       "env_deny = SECRET_*, PYTHONPATH\n", "kart.conf", perr,
					   sizeof perr), 0);
	assert_int_equal(check("#kart: cwd=/home/ann ro=/srv/data/in\n", &p, 1000), 0);
	assert_refused("#kart: ro=/srv/database\n", &p, 1000, "task_bind_roots");
	assert_refused("#kart: cwd=/opt/x\n", &p, 1000, "cwd=/opt/x", "task_bind_roots");
	assert_refused("#kart: env=SECRET_KEY=1\n", &p, 1000, "SECRET_KEY");
	assert_refused("#kart: env=PYTHONPATH=1\n", &p, 1000, "PYTHONPATH");
	/* The policy's list replaces the default; KART_* stays refused. */
	assert_int_equal(check("#kart: env=LD_PRELOAD=x\n", &p, 1000), 0);
	assert_refused("#kart: env=KART_TASK_ID=x\n", &p, 1000, "KART_TASK_ID");
	assert_int_equal(policy_parse_conf(&p, "[sandbox]\nenv_deny = 1BAD\n", "kart.conf", perr,
					   sizeof perr), -1);
}

/* after=: ids cut at commas, each decoded; repeats add up, duplicates
 * drop; a bad id or too many is rejected with the line. */
static void test_after(void **state)
{
	(void)state;
	struct task_spec s;
	assert_parses("#!/bin/sh\n#kart: after=a,b%2Cc\n#kart: after=d,a\necho\n", &s);
	assert_int_equal(s.n_after, 3);
	assert_string_equal(s.after[0], "a");
	assert_string_equal(s.after[1], "b,c");
	assert_string_equal(s.after[2], "d");
	assert_int_equal(s.line_after, 3);
	assert_parses("#kart: after=alice:step1\n", &s);
	assert_string_equal(s.after[0], "alice:step1");
	assert_parses("#kart: timeout=5\n", &s);
	assert_int_equal(s.n_after, 0);
	assert_rejected("#kart: after=a,,b\n", "line 1", "empty id");
	assert_rejected("#kart: after=.hidden\n", "line 1", "not a task id");
	assert_rejected("#kart: after=a%2Fb\n", "not a task id", "'/'");
	assert_rejected("#kart: after=a%zz\n", "line 1", "two hex digits");
	assert_rejected("#\n#kart: after=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17\n", "line 2",
			"more than 16");
	assert_rejected("#kart: afterx=a\n", "after=");
}

/* ---- kart submit's composer and the kept file's env= values ------------------ */

static void test_compose(void **state)
{
	(void)state;
	struct task_directives td = {0};
	struct task_spec s;
	char e[256];
	size_t len;
	int first;
	/* Each value read by its row of the table, as the worker reads it. */
	assert_int_equal(task_directive_add(&td, "timeout", "10s", e, sizeof e), 0);
	assert_int_equal(task_directive_add(&td, "net", NULL, e, sizeof e), 0);
	assert_int_equal(task_directive_add(&td, "label", "night batch", e, sizeof e), 0);
	assert_int_equal(task_directive_add(&td, "cwd", "/home/ann/a b", e, sizeof e), 0);
	assert_int_equal(task_directive_add(&td, "after", "up,1", e, sizeof e), 0);
	assert_int_equal(task_directive_add(&td, "timeout", "0", e, sizeof e), -1);
	assert_non_null(strstr(e, "timeout=0 is out of range"));
	assert_null(strstr(e, "line"));
	assert_int_equal(task_directive_add(&td, "env", "X=s3cr3t", e, sizeof e), 0);
	assert_int_equal(task_directive_add(&td, "env", "1X=s3cr3t", e, sizeof e), -1);
	assert_null(strstr(e, "s3cr3t")); /* a value is never quoted */
	assert_int_equal(task_directive_add(&td, "colour", "blue", e, sizeof e), -1);
	assert_int_equal(task_directive_add(&td, "net", "1", e, sizeof e), -1);
	/* After the file's own block: an option wins, the file's lines keep
	 * their numbers. */
	const char *body = "#!/bin/sh\n#kart: timeout=5m\n# a comment\necho hi\n";
	char *t = task_compose(body, strlen(body), &td, &len, &first, e, sizeof e);
	assert_non_null(t);
	assert_int_equal(first, 4);
	assert_true(strncmp(t, "#!/bin/sh\n#kart: timeout=5m\n# a comment\n#kart: timeout=10s net "
			       "label=night%20batch\n#kart: cwd=/home/ann/a%20b\n#kart: after=up%2C1\n"
			       "#kart: env=X=s3cr3t\necho hi\n", len) == 0);
	assert_int_equal(task_parse(t, len, &s, e, sizeof e), 0);
	assert_int_equal(s.timeout_s, 10);
	assert_true(s.net);
	assert_string_equal(s.label, "night batch");
	assert_string_equal(s.binds[s.cwd].path, "/home/ann/a b");
	assert_int_equal(s.n_after, 1);
	assert_string_equal(s.after[0], "up,1");
	free(t);
	/* No header: first; a header without a newline gets one. */
	t = task_compose("echo x\n", 7, &td, &len, &first, e, sizeof e);
	assert_int_equal(first, 1);
	assert_true(strncmp(t, "#kart: timeout=10s", 18) == 0);
	free(t);
	t = task_compose("#!/bin/sh", 9, &td, &len, &first, e, sizeof e);
	assert_true(strncmp(t, "#!/bin/sh\n#kart: ", 17) == 0);
	free(t);
	task_directives_free(&td);
}

static const char *empty_value(const char *name, void *arg)
{
	(void)name, (void)arg;
	return "";
}

static const char *only_a(const char *name, void *arg)
{
	(void)arg;
	return strcmp(name, "A") == 0 ? "v 1" : NULL;
}

static void test_env_rewrite(void **state)
{
	(void)state;
	const char *t = "#!/bin/sh\n#kart: timeout=5 env=A=s3cr3t net\r\n#kart: env=B=x%20y\necho env=A=1\n";
	size_t len;
	char e[64];
	char *out = task_env_rewrite(t, strlen(t), empty_value, NULL, &len, e, sizeof e);
	assert_non_null(out);
	assert_string_equal(out, "#!/bin/sh\n#kart: timeout=5 env=A= net\r\n#kart: env=B=\necho env=A=1\n");
	assert_int_equal(len, strlen(out));
	struct task_spec s;
	assert_int_equal(task_parse(out, len, &s, e, sizeof e), 0);
	assert_int_equal(s.n_env, 2);
	free(out);
	/* Put back: a value refused names the variable. */
	assert_null(task_env_rewrite(t, strlen(t), only_a, NULL, &len, e, sizeof e));
	assert_string_equal(e, "B");
	out = task_env_rewrite("#kart: env=A=\ntrue\n", 19, only_a, NULL, &len, e, sizeof e);
	assert_string_equal(out, "#kart: env=A=v%201\ntrue\n");
	free(out);
	/* Nothing to do. */
	assert_null(task_env_rewrite("#kart: net\ntrue\n", 17, empty_value, NULL, &len, e, sizeof e));
	assert_string_equal(e, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_binds_parse),
		cmocka_unit_test(test_binds_encoded),
		cmocka_unit_test(test_binds_bad),
		cmocka_unit_test(test_env_parse),
		cmocka_unit_test(test_umask_parse),
		cmocka_unit_test(test_binds_policy),
		cmocka_unit_test(test_timeout_units),
		cmocka_unit_test(test_kill_grace_and_label),
		cmocka_unit_test(test_memory_units),
		cmocka_unit_test(test_output_units),
		cmocka_unit_test(test_pids),
		cmocka_unit_test(test_cpu_units),
		cmocka_unit_test(test_lane_net_priority_retries_name),
		cmocka_unit_test(test_all_items_together),
		cmocka_unit_test(test_directive_forms),
		cmocka_unit_test(test_allow_net),
		cmocka_unit_test(test_leading_block_only),
		cmocka_unit_test(test_crlf),
		cmocka_unit_test(test_bad_values),
		cmocka_unit_test(test_error_names_line),
		cmocka_unit_test(test_small_err_buffer),
		cmocka_unit_test(test_not_nul_terminated),
		cmocka_unit_test(test_long_directive_line),
		cmocka_unit_test(test_shebang),
		cmocka_unit_test(test_shebang_bad),
		cmocka_unit_test(test_name_ok),
		cmocka_unit_test(test_name_dot_ignored),
		cmocka_unit_test(test_name_bad),
		cmocka_unit_test(test_policy_within),
		cmocka_unit_test(test_policy_ceilings),
		cmocka_unit_test(test_policy_no_timeout_ceiling),
		cmocka_unit_test(test_policy_net),
		cmocka_unit_test(test_argv),
		cmocka_unit_test(test_after),
		cmocka_unit_test(test_kind_directive),
		cmocka_unit_test(test_kind_precedence),
		cmocka_unit_test(test_kind_unknown),
		cmocka_unit_test(test_kind_needs_net),
		cmocka_unit_test(test_compose),
		cmocka_unit_test(test_env_rewrite),
		cmocka_unit_test_setup_teardown(test_inspect, inspect_setup, inspect_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
