/* test_sandbox.c - the command line and environment a task runs with
 * (src/sandbox.c): the bwrap profile and the `none` backend. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <sys/stat.h>

#include "policy.h"
#include "sandbox.h"
#include "task.h"
#include "util.h"

#define SPOOL "/srv/spool"
#define TASK_HOST SPOOL "/cur/w1/job-7"
#define WORK_HOST SPOOL "/cur/w1/.job-7.work"
#define OUT_HOST SPOOL "/cur/w1/.job-7.out"
#define CANARY "KART_TEST_CANARY_7f3a"

struct built {
	struct policy pol;
	struct task_spec spec;
	struct strv argv, envp;
};

static void build(struct built *b, enum backend backend, const char *task_text)
{
	char err[256] = "";
	memset(b, 0, sizeof *b);
	b->pol.backend = backend;
	snprintf(b->pol.bwrap, sizeof b->pol.bwrap, "/usr/bin/bwrap");
	snprintf(b->pol.launcher, sizeof b->pol.launcher, "/opt/kart/libexec/kart-launch");
	b->pol.memory_max = 1ull << 30;
	b->pol.cpu_max_milli = 1000;
	if (task_parse(task_text, strlen(task_text), &b->spec, err, sizeof err) != 0)
		fail_msg("task text rejected: %s", err);
	struct sandbox_req req = {
		.pol = &b->pol,
		.spec = &b->spec,
		.task_path = TASK_HOST,
		.work_dir = WORK_HOST,
		.out_dir = OUT_HOST,
		.task_id = "job-7",
		.attempt = 2,
	};
	assert_int_equal(sandbox_build(&req, &b->argv, &b->envp, err, sizeof err), 0);
	assert_non_null(b->argv.v);
	assert_non_null(b->envp.v);
	assert_null(b->argv.v[b->argv.n]); /* execve wants it NULL-terminated */
	assert_null(b->envp.v[b->envp.n]);
}

static void built_free(struct built *b)
{
	strv_free(&b->argv);
	strv_free(&b->envp);
}

/* Index of the first run of `n` arguments equal to want[] within the
 * first lim arguments; -1 if none. */
static int find_seq(const struct strv *a, size_t lim, const char *const *want, size_t n)
{
	for (size_t i = 0; i + n <= lim; i++) {
		size_t k = 0;
		while (k < n && strcmp(a->v[i + k], want[k]) == 0)
			k++;
		if (k == n)
			return (int)i;
	}
	return -1;
}

/* Where bwrap's own options end: its command is the launcher, the one
 * followed by the launcher's own option. */
static size_t opts_end(const struct built *b)
{
	for (size_t i = 1; i + 1 < b->argv.n; i++)
		if (strcmp(b->argv.v[i], SANDBOX_LAUNCH) == 0 &&
		    strcmp(b->argv.v[i + 1], "--status-fd=3") == 0)
			return i;
	fail_msg("the launcher is not bwrap's command");
	return 0;
}

#define OPT(b, ...)                                                                          \
	({                                                                                   \
		const char *const w_[] = {__VA_ARGS__};                                      \
		find_seq(&(b)->argv, opts_end(b), w_, ARRAY_SIZE(w_));                       \
	})
#define assert_opt(b, ...)                                                                   \
	do {                                                                                 \
		if (OPT(b, __VA_ARGS__) < 0)                                                 \
			fail_msg("bwrap options lack: %s", #__VA_ARGS__);                    \
	} while (0)

static const char *env_get(const struct built *b, const char *name)
{
	size_t l = strlen(name);
	const char *found = NULL;
	for (size_t i = 0; i < b->envp.n; i++)
		if (strncmp(b->envp.v[i], name, l) == 0 && b->envp.v[i][l] == '=') {
			if (found)
				fail_msg("%s set twice", name);
			found = b->envp.v[i] + l + 1;
		}
	return found;
}

/* ---- setup: a hostile outer environment ---------------------------------- */

static char *saved_path, *saved_home;

static int env_setup(void **state)
{
	(void)state;
	const char *p = getenv("PATH"), *h = getenv("HOME");
	saved_path = p ? xstrdup(p) : NULL;
	saved_home = h ? xstrdup(h) : NULL;
	setenv(CANARY, "leaked-secret", 1);
	setenv("LD_PRELOAD", "/tmp/evil.so", 1);
	setenv("PATH", "/evil/bin:" CANARY, 1);
	setenv("HOME", "/home/" CANARY, 1);
	setenv("KART_SPOOL", SPOOL, 1);
	setenv("TMPDIR", "/var/" CANARY, 1);
	return 0;
}

static int env_teardown(void **state)
{
	(void)state;
	unsetenv(CANARY);
	unsetenv("LD_PRELOAD");
	unsetenv("KART_SPOOL");
	unsetenv("TMPDIR");
	if (saved_path)
		setenv("PATH", saved_path, 1);
	if (saved_home)
		setenv("HOME", saved_home, 1);
	free(saved_path);
	free(saved_home);
	return 0;
}

/* ---- bwrap ----------------------------------------------------------------- */

static void test_bwrap_isolation(void **state)
{
	(void)state;
	struct built b;
	build(&b, BACKEND_BWRAP, "echo hi\n");
	assert_string_equal(b.argv.v[0], "/usr/bin/bwrap");
	assert_opt(&b, "--unshare-all");
	assert_opt(&b, "--die-with-parent");
	assert_opt(&b, "--new-session"); /* no TIOCSTI into the worker's tty */
	assert_opt(&b, "--cap-drop", "ALL");
	assert_opt(&b, "--ro-bind", "/usr", "/usr");
	assert_opt(&b, "--proc", "/proc");
	assert_opt(&b, "--dev", "/dev");
	assert_opt(&b, "--tmpfs", "/tmp");
	assert_opt(&b, "--tmpfs", SANDBOX_WORK);
	assert_opt(&b, "--chdir", SANDBOX_WORK);
	assert_opt(&b, "--ro-bind", TASK_HOST, SANDBOX_TASK);
	assert_opt(&b, "--ro-bind", b.pol.launcher, SANDBOX_LAUNCH);
	assert_opt(&b, "--bind", OUT_HOST, SANDBOX_OUT);
	/* The tmpfs work dir exists before bwrap changes into it. */
	assert_true(OPT(&b, "--tmpfs", SANDBOX_WORK) < OPT(&b, "--chdir", SANDBOX_WORK));
	built_free(&b);
}

static void test_bwrap_no_net(void **state)
{
	(void)state;
	struct built b;
	build(&b, BACKEND_BWRAP, "#!/bin/sh\n#kart: timeout=5\n");
	for (size_t i = 0; i < b.argv.n; i++) {
		assert_string_not_equal(b.argv.v[i], "--share-net");
		assert_null(strstr(b.argv.v[i], "resolv.conf"));
	}
	assert_opt(&b, "--unshare-all");
	built_free(&b);
}

static void test_bwrap_net(void **state)
{
	(void)state;
	static const char *const texts[] = {"#kart: net\n", "#!/bin/sh\n# allow_net\n"};
	for (size_t t = 0; t < ARRAY_SIZE(texts); t++) {
		struct built b;
		build(&b, BACKEND_BWRAP, texts[t]);
		int un = OPT(&b, "--unshare-all"), sh = OPT(&b, "--share-net");
		assert_true(un > 0);
		assert_true(sh > 0);
		/* bwrap applies them in order: --share-net must come after. */
		assert_true(sh > un);
		assert_opt(&b, "--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf");
		built_free(&b);
	}
}

static void test_bwrap_nothing_writable_but_out(void **state)
{
	(void)state;
	struct built b;
	build(&b, BACKEND_BWRAP, "#kart: net\n");
	size_t end = opts_end(&b);
	for (size_t i = 1; i < end; i++) {
		const char *a = b.argv.v[i];
		/* Writable binds: only $KART_OUTDIR. */
		if (strcmp(a, "--bind") == 0 || strcmp(a, "--bind-try") == 0) {
			assert_true(i + 2 < end);
			assert_string_equal(b.argv.v[i + 1], OUT_HOST);
			assert_string_equal(b.argv.v[i + 2], SANDBOX_OUT);
		}
		assert_string_not_equal(a, "--dev-bind");
		assert_string_not_equal(a, "--dev-bind-try");
		assert_string_not_equal(a, "--share-pid");
		assert_string_not_equal(a, "--cap-add");
		/* The spool is invisible but for the task file and the out dir;
		 * the work dir on the host is not the task's (a tmpfs is). */
		if (strstr(a, SPOOL) && strcmp(a, TASK_HOST) != 0 && strcmp(a, OUT_HOST) != 0)
			fail_msg("the spool leaks into the sandbox: %s", a);
		/* "/" itself is never bound. */
		if ((strcmp(a, "--bind") == 0 || strcmp(a, "--ro-bind") == 0) && i + 1 < end)
			assert_string_not_equal(b.argv.v[i + 1], "/");
		assert_null(strstr(a, CANARY));
	}
	/* /bin, /lib... are there, read-only or as the host's symlinks. */
	static const char *const sys[] = {"/bin", "/lib"};
	for (size_t k = 0; k < ARRAY_SIZE(sys); k++) {
		struct stat st;
		if (lstat(sys[k], &st) < 0)
			continue;
		bool seen = false;
		for (size_t i = 1; i + 2 < end; i++)
			if ((strcmp(b.argv.v[i], "--ro-bind") == 0 ||
			     strcmp(b.argv.v[i], "--symlink") == 0) &&
			    strcmp(b.argv.v[i + 2], sys[k]) == 0)
				seen = true;
		if (!seen)
			fail_msg("%s is missing from the sandbox", sys[k]);
	}
	built_free(&b);
}

static void assert_env_exact(const struct built *b, const char *home, const char *tmp,
			     const char *out)
{
	static const char *const names[] = {"PATH",         "HOME",         "TMPDIR",
					    "LANG",         "KART_TASK_ID", "KART_ATTEMPT",
					    "KART_OUTDIR"};
	assert_int_equal(b->envp.n, ARRAY_SIZE(names));
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (!env_get(b, names[i]))
			fail_msg("%s is not set", names[i]);
	for (size_t i = 0; i < b->envp.n; i++) {
		if (strstr(b->envp.v[i], CANARY) || strstr(b->envp.v[i], "evil"))
			fail_msg("the worker's environment leaks in: %s", b->envp.v[i]);
		assert_non_null(strchr(b->envp.v[i], '='));
	}
	assert_string_equal(env_get(b, "PATH"), "/usr/local/bin:/usr/bin:/bin");
	assert_string_equal(env_get(b, "HOME"), home);
	assert_string_equal(env_get(b, "TMPDIR"), tmp);
	assert_string_equal(env_get(b, "LANG"), "C.UTF-8");
	assert_string_equal(env_get(b, "KART_TASK_ID"), "job-7");
	assert_string_equal(env_get(b, "KART_ATTEMPT"), "2");
	assert_string_equal(env_get(b, "KART_OUTDIR"), out);
	assert_null(env_get(b, "LD_PRELOAD"));
	assert_null(env_get(b, "KART_SPOOL"));
	assert_null(env_get(b, CANARY));
}

static void test_bwrap_env(void **state)
{
	(void)state;
	struct built b;
	assert_non_null(getenv(CANARY)); /* the hostile outer environment is in place */
	build(&b, BACKEND_BWRAP, "#kart: net\n");
	assert_env_exact(&b, SANDBOX_WORK, "/tmp", SANDBOX_OUT);
	/* The environment reaches the task via envp only, never as bwrap
	 * --setenv options that could be overridden. */
	for (size_t i = 0; i < b.argv.n; i++) {
		assert_string_not_equal(b.argv.v[i], "--setenv");
		assert_null(strstr(b.argv.v[i], CANARY));
	}
	built_free(&b);
}

static void assert_tail(const struct built *b, const char *launch, const char *const *task,
			size_t ntask)
{
	size_t n = b->argv.n;
	assert_true(n >= 3 + ntask);
	size_t t = n - ntask - 3;
	assert_string_equal(b->argv.v[t], launch);
	assert_string_equal(b->argv.v[t + 1], "--status-fd=3");
	assert_string_equal(b->argv.v[t + 2], "--");
	for (size_t i = 0; i < ntask; i++)
		assert_string_equal(b->argv.v[t + 3 + i], task[i]);
}

static void test_bwrap_tail(void **state)
{
	(void)state;
	struct built b;
	build(&b, BACKEND_BWRAP, "echo\n");
	static const char *const sh[] = {"/bin/sh", SANDBOX_TASK};
	assert_tail(&b, SANDBOX_LAUNCH, sh, 2);
	/* Everything before the launcher is bwrap's. */
	assert_int_equal(opts_end(&b), b.argv.n - 5);
	built_free(&b);

	build(&b, BACKEND_BWRAP, "#!/usr/bin/python3\n");
	static const char *const py[] = {"/usr/bin/python3", SANDBOX_TASK};
	assert_tail(&b, SANDBOX_LAUNCH, py, 2);
	built_free(&b);

	build(&b, BACKEND_BWRAP, "#!/usr/bin/env python3 -u\n#kart: net\n");
	static const char *const env[] = {"/usr/bin/env", "python3 -u", SANDBOX_TASK};
	assert_tail(&b, SANDBOX_LAUNCH, env, 3);
	built_free(&b);
}

/* ---- none ------------------------------------------------------------------ */

static void test_none(void **state)
{
	(void)state;
	struct built b;
	build(&b, BACKEND_NONE, "echo\n");
	assert_string_equal(b.argv.v[0], b.pol.launcher);
	static const char *const sh[] = {"/bin/sh", TASK_HOST};
	assert_tail(&b, b.pol.launcher, sh, 2);
	assert_int_equal(b.argv.n, 5);
	for (size_t i = 0; i < b.argv.n; i++)
		assert_null(strstr(b.argv.v[i], "bwrap"));
	assert_env_exact(&b, WORK_HOST, "/tmp", OUT_HOST);
	built_free(&b);

	build(&b, BACKEND_NONE, "#!/bin/bash -e\n");
	static const char *const bash[] = {"/bin/bash", "-e", TASK_HOST};
	assert_string_equal(b.argv.v[0], b.pol.launcher);
	assert_tail(&b, b.pol.launcher, bash, 3);
	assert_string_equal(env_get(&b, "HOME"), WORK_HOST);
	built_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bwrap_isolation),
		cmocka_unit_test(test_bwrap_no_net),
		cmocka_unit_test(test_bwrap_net),
		cmocka_unit_test(test_bwrap_nothing_writable_but_out),
		cmocka_unit_test(test_bwrap_env),
		cmocka_unit_test(test_bwrap_tail),
		cmocka_unit_test(test_none),
	};
	return cmocka_run_group_tests(tests, env_setup, env_teardown);
}
