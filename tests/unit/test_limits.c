/* test_limits.c - memory, pids and cpu in the policy ([limits] cgroup,
 * defaults and ceilings, per lane: src/policy.c) and the rlimit fallback
 * for a task without a cgroup leaf (src/rlimits.c), down to kart-launch's
 * options. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "rlimits.h"
#include "policy.h"
#include "task.h"
#include "util.h"
#include "unit.h"

static char err[512];

/* The built-in policy (no spool), with none of our variables set. */
static void base(struct policy *pol)
{
	unsetenv("KART_CGROUP");
	unsetenv("KART_CGROUP_PARENT");
	unsetenv("KART_RLIMIT_USE_AS");
	assert_int_equal(policy_load(pol, NULL, err, sizeof err), 0);
}

static void conf_ok(struct policy *pol, const char *text)
{
	if (policy_parse_conf(pol, text, "kart.conf", err, sizeof err) != 0)
		fail_msg("rejected \"%s\": %s", text, err);
}

static void conf_bad(const char *text, const char *needle)
{
	struct policy pol;
	base(&pol);
	if (policy_parse_conf(&pol, text, "kart.conf", err, sizeof err) == 0)
		fail_msg("accepted \"%s\"", text);
	if (!strstr(err, needle))
		fail_msg("error \"%s\" lacks \"%s\"", err, needle);
}

/* policy_load on a spool holding kart.conf = text. */
static int load_conf(struct policy *pol, const char *text)
{
	return load_conf_text(pol, text, err, sizeof err);
}

/* ---- [limits] cgroup ------------------------------------------------------ */

static void test_cgroup_mode(void **state)
{
	(void)state;
	struct policy pol;
	base(&pol);
	assert_int_equal(pol.cgroup, CGROUP_AUTO); /* the default */
	assert_string_equal(pol.cgroup_parent, "");
	assert_false(pol.rlimit_as);
	conf_ok(&pol, "[limits]\ncgroup = require\n");
	assert_int_equal(pol.cgroup, CGROUP_REQUIRE);
	conf_ok(&pol, "[limits]\ncgroup = off\ncgroup_parent = /kart.slice\nrlimit_as = yes\n");
	assert_int_equal(pol.cgroup, CGROUP_OFF);
	assert_string_equal(pol.cgroup_parent, "/kart.slice");
	assert_true(pol.rlimit_as);
	assert_string_equal(cgroup_use_name(CGROUP_REQUIRE), "require");
	conf_bad("[limits]\ncgroup = sometimes\n", "line 2: cgroup = sometimes");
	conf_bad("[limits]\ncgroup_parent = kart.slice\n", "not a cgroup path");
}

/* The environment wins over kart.conf; a bad value is an error. */
static void test_cgroup_env(void **state)
{
	(void)state;
	struct policy pol;
	setenv("KART_CGROUP", "off", 1);
	setenv("KART_CGROUP_PARENT", "/elsewhere", 1);
	setenv("KART_RLIMIT_USE_AS", "1", 1);
	assert_int_equal(load_conf(&pol, "[limits]\ncgroup = require\ncgroup_parent = /a\n"), 0);
	assert_int_equal(pol.cgroup, CGROUP_OFF);
	assert_string_equal(pol.cgroup_parent, "/elsewhere");
	assert_true(pol.rlimit_as);
	setenv("KART_CGROUP", "maybe", 1);
	assert_int_equal(load_conf(&pol, ""), -1);
	assert_non_null(strstr(err, "KART_CGROUP=maybe"));
	unsetenv("KART_CGROUP");
	unsetenv("KART_CGROUP_PARENT");
	unsetenv("KART_RLIMIT_USE_AS");
}

/* ---- defaults and ceilings -------------------------------------------------- */

static void test_defaults_and_ceilings(void **state)
{
	(void)state;
	struct policy pol;
	struct lane_limits ll;
	base(&pol);
	uint64_t host_mem = pol.memory_max;
	conf_ok(&pol, "[limits]\nmemory_default = 64M\nmemory_max = 1G\npids_default = 50\n"
		      "pids_max = 500\ncpu_default = 0.5\ncpu_max = 2\n"
		      "[lane.batch]\nmemory_max = 4G\ncpu_default = 1.5\n");
	policy_lane_limits(&pol, LANE_FAST, &ll);
	assert_int_equal(ll.memory_default, 64ull << 20);
	assert_int_equal(ll.memory_max, 1ull << 30);
	assert_int_equal(ll.pids_default, 50);
	assert_int_equal(ll.pids_max, 500);
	assert_int_equal(ll.cpu_default_milli, 500);
	assert_int_equal(ll.cpu_max_milli, 2000);
	/* batch: its own where it has them, [limits] elsewhere. */
	policy_lane_limits(&pol, LANE_BATCH, &ll);
	assert_int_equal(ll.memory_max, 4ull << 30);
	assert_int_equal(ll.memory_default, 64ull << 20);
	assert_int_equal(ll.cpu_default_milli, 1500);
	assert_int_equal(ll.pids_max, 500);
	(void)host_mem;

	conf_bad("[limits]\nmemory_max = lots\n", "memory_max = lots");
	conf_bad("[limits]\npids_default = 0\n", "pids_default = 0");
	conf_bad("[lane.batch]\ncpu_max = -1\n", "cpu_max = -1");
	conf_bad("[lane.slow]\ncpu_max = 1\n", "unknown section [lane.slow]");
	conf_bad("[lane.fast]\nbogus = 1\n", "unknown key 'bogus'");
}

static void test_default_above_ceiling(void **state)
{
	(void)state;
	struct policy pol;
	base(&pol);
	assert_int_equal(load_conf(&pol, "[limits]\npids_default = 100\npids_max = 10\n"), -1);
	assert_non_null(strstr(err, "pids_default is above pids_max"));
	assert_int_equal(load_conf(&pol, "[limits]\nmemory_max = 1G\n[lane.batch]\n"
					 "memory_default = 2G\n"), -1);
	assert_non_null(strstr(err, "lane batch: memory_default"));
	assert_int_equal(load_conf(&pol, "[limits]\ncpu_default = 1\ncpu_max = 1\n"), 0);
}

/* task_check_policy holds each lane to its own ceilings. */
static void test_ceiling_per_lane(void **state)
{
	(void)state;
	struct policy pol;
	struct task_spec spec;
	const char *fast = "#!/bin/sh\n#kart: memory=2G\n";
	const char *batch = "#!/bin/sh\n#kart: memory=2G lane=batch pids=600\n";
	base(&pol);
	conf_ok(&pol, "[limits]\nmemory_max = 1G\n[lane.batch]\nmemory_max = 4G\npids_max = 500\n");
	task_spec_init(&spec);
	assert_int_equal(task_parse(fast, strlen(fast), &spec, err, sizeof err), 0);
	assert_int_equal(task_check_policy(&spec, &pol, 1000, err, sizeof err), -1);
	assert_non_null(strstr(err, "line 2: memory=2G is above the policy's ceiling of 1G"));
	task_spec_init(&spec);
	assert_int_equal(task_parse(batch, strlen(batch), &spec, err, sizeof err), 0);
	assert_int_equal(task_check_policy(&spec, &pol, 1000, err, sizeof err), -1);
	assert_non_null(strstr(err, "pids=600 is above the policy's ceiling of 500 (lane batch)"));
	spec.pids = 100;
	assert_int_equal(task_check_policy(&spec, &pol, 1000, err, sizeof err), 0);
}

static void test_apply_defaults(void **state)
{
	(void)state;
	struct policy pol;
	struct task_spec spec;
	base(&pol);
	conf_ok(&pol, "[limits]\nmemory_default = 64M\npids_default = 50\n"
		      "[lane.batch]\ncpu_default = 1.5\n");
	task_spec_init(&spec);
	spec.pids = 7; /* the task's own wins */
	limits_apply_defaults(&spec, &pol);
	assert_int_equal(spec.memory, 64ull << 20);
	assert_int_equal(spec.pids, 7);
	assert_int_equal(spec.cpu_milli, 0);
	task_spec_init(&spec);
	spec.lane = LANE_BATCH;
	limits_apply_defaults(&spec, &pol);
	assert_int_equal(spec.cpu_milli, 1500);
	assert_int_equal(spec.pids, 50);
}

/* ---- the rlimit fallback ------------------------------------------------------- */

static const struct rl_host user_host = {.use_as = false, .nproc_binds = true, .ncpu = 2};

static void test_fallback_nothing_asked(void **state)
{
	(void)state;
	struct task_spec spec;
	struct rl_plan p;
	task_spec_init(&spec);
	assert_int_equal(limits_fallback(&spec, &user_host, &p, err, sizeof err), 0);
	assert_int_equal(p.nproc, 0);
	assert_int_equal(p.as, 0);
	assert_int_equal(p.cpu_s, 0); /* no timeout: no backstop */
	assert_true(p.core0);
	spec.timeout_s = 30;
	assert_int_equal(limits_fallback(&spec, &user_host, &p, err, sizeof err), 0);
	assert_int_equal(p.cpu_s, 61); /* timeout x cores, + 1 */
	spec.kill_grace_s = 5;
	assert_int_equal(limits_fallback(&spec, &user_host, &p, err, sizeof err), 0);
	assert_int_equal(p.cpu_s, 71); /* (timeout + kill grace) x cores, + 1 */
}

static void test_fallback_pids(void **state)
{
	(void)state;
	struct task_spec spec;
	struct rl_plan p;
	task_spec_init(&spec);
	spec.pids = 32;
	spec.line_pids = 2;
	assert_int_equal(limits_fallback(&spec, &user_host, &p, err, sizeof err), 0);
	assert_int_equal(p.nproc, 32);
	/* Root is exempt from RLIMIT_NPROC: refused, not run unbounded. */
	struct rl_host root = user_host;
	root.nproc_binds = false;
	assert_int_equal(limits_fallback(&spec, &root, &p, err, sizeof err), -1);
	assert_non_null(strstr(err, "line 2: pids= needs a cgroup"));
	assert_non_null(strstr(err, "root"));
}

static void test_fallback_memory(void **state)
{
	(void)state;
	struct task_spec spec;
	struct rl_plan p;
	task_spec_init(&spec);
	spec.memory = 64ull << 20; /* line 0: the policy's default */
	assert_int_equal(limits_fallback(&spec, &user_host, &p, err, sizeof err), -1);
	assert_non_null(strstr(err, "memory= (the policy's default) needs a cgroup"));
	assert_non_null(strstr(err, "KART_RLIMIT_USE_AS=1"));
	struct rl_host as = user_host;
	as.use_as = true;
	assert_int_equal(limits_fallback(&spec, &as, &p, err, sizeof err), 0);
	assert_int_equal(p.as, 64ull << 20);
}

static void test_fallback_cpu_refused(void **state)
{
	(void)state;
	struct task_spec spec;
	struct rl_plan p;
	struct rl_host all = {.use_as = true, .nproc_binds = true, .ncpu = 4};
	task_spec_init(&spec);
	spec.cpu_milli = 500;
	spec.line_cpu = 3;
	assert_int_equal(limits_fallback(&spec, &all, &p, err, sizeof err), -1);
	assert_non_null(strstr(err, "line 3: cpu= needs a cgroup: no rlimit can limit a rate"));
}

static void test_launch_opts(void **state)
{
	(void)state;
	struct strv o = {0};
	struct rl_plan p = {.as = 1048576, .nproc = 32, .cpu_s = 61, .core0 = true, .nofile = 1024};
	limits_launch_opts(&p, &o);
	assert_int_equal(o.n, 5);
	assert_string_equal(o.v[0], "--rlimit-nproc=32");
	assert_string_equal(o.v[1], "--rlimit-as=1048576");
	assert_string_equal(o.v[2], "--rlimit-cpu=61");
	assert_string_equal(o.v[3], "--rlimit-core=0");
	assert_string_equal(o.v[4], "--rlimit-nofile=1024");
	assert_null(o.v[5]);
	strv_free(&o);
	struct rl_plan none = {0};
	struct strv e = {0};
	limits_launch_opts(&none, &e);
	assert_int_equal(e.n, 0);
	strv_free(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cgroup_mode),
		cmocka_unit_test(test_cgroup_env),
		cmocka_unit_test(test_defaults_and_ceilings),
		cmocka_unit_test(test_default_above_ceiling),
		cmocka_unit_test(test_ceiling_per_lane),
		cmocka_unit_test(test_apply_defaults),
		cmocka_unit_test(test_fallback_nothing_asked),
		cmocka_unit_test(test_fallback_pids),
		cmocka_unit_test(test_fallback_memory),
		cmocka_unit_test(test_fallback_cpu_refused),
		cmocka_unit_test(test_launch_opts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
