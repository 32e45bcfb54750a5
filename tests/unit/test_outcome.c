/* test_outcome.c - a result's status from what was observed
 * (src/worker/outcome.c), in the order docs/DESIGN.md ("The task state machine")
 * gives: the worker's end (timeout, cancel) first; then a run that never
 * started (refused: a named confinement step, else the sandbox); then
 * its exit; else killed. An OOM the leaf counted, or the container
 * runtime reported, overrides a natural end of a run that started. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <signal.h>
#include <string.h>
#include <cmocka.h>

#include "outcome.h"

static char errbuf[1024];

/* A run that started and exited 0, ended by itself, in no leaf. */
static struct run_end ran(void)
{
	struct run_end e;
	memset(&e, 0, sizeof e);
	e.started = e.exited = true;
	return e;
}

static struct observed seen(const struct run_end *e)
{
	return (struct observed){.end = OUTCOME_NATURAL, .run = e, .backend = "bwrap",
				 .timeout_s = 7, .kill_grace_s = 3, .engine_oom = -1};
}

static struct result decide(const struct observed *o)
{
	struct result r;
	result_init(&r);
	errbuf[0] = '\0';
	outcome_decide(o, true, &r, errbuf, sizeof errbuf);
	return r;
}

static void test_exit(void **state)
{
	(void)state;
	struct run_end e = ran();
	struct observed o = seen(&e);
	struct result r = decide(&o);
	assert_string_equal(r.status, "ok");
	assert_int_equal(r.exit_code, 0);
	assert_null(r.error);
	assert_true(r.seccomp);
	e.exit_code = 3;
	r = decide(&o);
	assert_string_equal(r.status, "failed");
	assert_int_equal(r.exit_code, 3);
	/* Not exited: killed, by its signal (SIGKILL where none is known). */
	e.exited = false;
	e.signal = SIGSEGV;
	r = decide(&o);
	assert_string_equal(r.status, "killed");
	assert_int_equal(r.signal, SIGSEGV);
	assert_int_equal(r.exit_code, -1);
	e.signal = 0;
	r = decide(&o);
	assert_string_equal(r.status, "killed");
	assert_int_equal(r.signal, SIGKILL);
	assert_string_equal(r.error, "ended by SIGKILL");
}

/* 1 before 2, 3 and 4: the worker's end wins over what the run did. */
static void test_end_first(void **state)
{
	(void)state;
	struct run_end e = ran();
	e.exit_code = 0;
	struct observed o = seen(&e);
	o.end = OUTCOME_TIMEOUT;
	o.term_sent = true;
	struct result r = decide(&o);
	assert_string_equal(r.status, "timeout");
	assert_int_equal(r.exit_code, 0); /* what it chose within the grace */
	assert_string_equal(r.error, "the wall-clock timeout of 7s passed: after SIGTERM it "
				     "exited with status 0");
	e.exited = false;
	e.signal = SIGKILL;
	o.end = OUTCOME_CANCEL;
	r = decide(&o);
	assert_string_equal(r.status, "cancelled");
	assert_int_equal(r.signal, SIGKILL);
	assert_string_equal(r.error, "cancelled by kart cancel while running: SIGTERM, then "
				     "SIGKILL after the kill grace of 3s");
	/* Even one that never started. */
	e.started = false;
	e.refusal = "landlock_failed";
	r = decide(&o);
	assert_string_equal(r.status, "cancelled");
	assert_null(r.refusal);
	assert_false(r.seccomp);
	/* And an OOM: the end was the worker's. */
	e = ran();
	o.leaf = true;
	o.oom_kills = 2;
	o.end = OUTCOME_TIMEOUT;
	r = decide(&o);
	assert_string_equal(r.status, "timeout");
}

/* 2 before 3: a run that never started is refused, whatever its status. */
static void test_unstarted(void **state)
{
	(void)state;
	struct run_end e = ran();
	e.started = false;
	e.exit_code = 0;
	e.wrapper_status = 1 << 8; /* bwrap exited 1 */
	struct observed o = seen(&e);
	struct result r = decide(&o);
	assert_string_equal(r.status, "refused");
	assert_string_equal(r.refusal, "sandbox_setup_failed");
	assert_string_equal(r.error, "the sandbox could not be built (bwrap exited with status 1); "
				     "its message is in stderr");
	assert_int_equal(r.exit_code, -1);
	assert_false(r.seccomp);
	/* A named step the launcher reported goes before the sandbox's. */
	e.refusal = "landlock_unavailable";
	strcpy(e.refusal_why, "no Landlock here");
	r = decide(&o);
	assert_string_equal(r.refusal, "landlock_unavailable");
	assert_string_equal(r.error, "no Landlock here");
	assert_string_equal(r.landlock, "unsupported");
	/* Never started: no OOM either. */
	o.leaf = true;
	o.oom_kills = 1;
	r = decide(&o);
	assert_string_equal(r.status, "refused");
}

/* The leaf's OOM count overrides ok, failed and killed. */
static void test_oom_leaf(void **state)
{
	(void)state;
	struct run_end e = ran();
	struct observed o = seen(&e);
	o.oom_kills = 1; /* no leaf: not counted */
	assert_string_equal(decide(&o).status, "ok");
	o.leaf = true;
	o.oom_kills = 0;
	assert_string_equal(decide(&o).status, "ok");
	o.oom_kills = 2;
	o.memory = 1048576;
	struct result r = decide(&o);
	assert_string_equal(r.status, "oom");
	assert_string_equal(r.error, "the memory limit of 1048576 bytes was hit: the kernel "
				     "killed 2 process(es)");
	e.exited = false;
	e.signal = SIGKILL;
	assert_string_equal(decide(&o).status, "oom");
	o.memory = 0;
	assert_string_equal(decide(&o).error, "out of memory: the kernel killed 2 process(es)");
}

/* Backend container: exit 137 under a memory limit of the task's own is
 * an OOM where the runtime says so or cannot say; not where it says no,
 * nor under the built-in share. */
static void test_oom_container(void **state)
{
	(void)state;
	struct run_end e = ran();
	e.exit_code = 137;
	struct observed o = seen(&e);
	o.engine = true;
	o.memory = 4096;
	o.engine_oom = 1;
	struct result r = decide(&o);
	assert_string_equal(r.status, "oom");
	assert_int_equal(r.exit_code, 137);
	o.engine_oom = -1;
	r = decide(&o);
	assert_string_equal(r.status, "oom");
	assert_non_null(strstr(r.error, "probably out of memory"));
	/* Any one of these, the rest as above, is a plain failure. */
	static const struct {
		const char *why;
		int engine_oom;
		bool memory_builtin;
		uint64_t memory;
		bool engine;
		int exit_code;
	} failed[] = {
		{"the runtime says no", 0, false, 4096, true, 137},
		{"the built-in share", 1, true, 4096, true, 137},
		{"no limit", 1, false, 0, true, 137},
		{"not a container", 1, false, 4096, false, 137},
		{"exit 1", 1, false, 4096, true, 1},
	};
	for (size_t i = 0; i < sizeof failed / sizeof failed[0]; i++) {
		o.engine_oom = failed[i].engine_oom;
		o.memory_builtin = failed[i].memory_builtin;
		o.memory = failed[i].memory;
		o.engine = failed[i].engine;
		e.exit_code = failed[i].exit_code;
		r = decide(&o);
		if (strcmp(r.status, "failed") != 0)
			fail_msg("%s: status %s", failed[i].why, r.status);
	}
}

/* A batch system's job ended OUT_OF_MEMORY (ENGINE_OOM_STATE): oom,
 * whatever the task's own status (its shell may outlive the killed
 * child, as Slurm's job does), but only for a natural end. */
static void test_oom_engine_state(void **state)
{
	(void)state;
	struct run_end e = ran();
	e.exit_code = 0;
	struct observed o = seen(&e);
	o.engine = true;
	o.memory = 32 << 20;
	o.engine_oom = ENGINE_OOM_STATE;
	struct result r = decide(&o);
	assert_string_equal(r.status, "oom");
	assert_non_null(strstr(r.error, "reports an OOM kill"));
	o.end = OUTCOME_CANCEL;
	assert_string_equal(decide(&o).status, "cancelled");
	o.end = OUTCOME_NATURAL;
	o.engine_oom = 0;
	assert_string_equal(decide(&o).status, "ok");
}

/* The launcher's Landlock report is kept. */
static void test_landlock(void **state)
{
	(void)state;
	struct run_end e = ran();
	struct observed o = seen(&e);
	assert_string_equal(decide(&o).landlock, "off");
	strcpy(e.landlock, "4");
	assert_string_equal(decide(&o).landlock, "4");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exit),
		cmocka_unit_test(test_end_first),
		cmocka_unit_test(test_unstarted),
		cmocka_unit_test(test_oom_leaf),
		cmocka_unit_test(test_oom_container),
		cmocka_unit_test(test_oom_engine_state),
		cmocka_unit_test(test_landlock),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
