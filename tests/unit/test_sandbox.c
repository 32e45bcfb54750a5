/* test_sandbox.c - the command line and environment a task runs with
 * (src/sandbox/sandbox.c): the bwrap profile, the `none` backend's
 * kart-launch line and the container CLI's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <sys/stat.h>

#include <jansson.h>
#include <stdint.h>

#include "container.h"
#include "credfwd.h"
#include "seccomp.h"
#include "policy.h"
#include "sandbox.h"
#include "task.h"
#include "util.h"

#define SPOOL "/srv/spool"
#define TASK_HOST SPOOL "/cur/w1/job-7"
#define WORK_HOST SPOOL "/cur/w1/.job-7.work"
#define OUT_HOST SPOOL "/cur/w1/.job-7.out"
#define CANARY "KART_TEST_CANARY_7f3a"
/* The task's socket to its kind's forwarder, as credfwd_open makes it. */
#define FWD_HOST "/tmp/kart-credfwd.Ab12Cd/s"

/* The builder of the policy's backend, as that backend calls it
 * (src/backend/). */
static int sandbox_build(const struct sandbox_req *req, struct strv *argv, struct strv *envp,
			 char *err, size_t errlen)
{
	switch (req->pol->backend) {
	case BACKEND_NONE: return sandbox_launch(req, argv, envp, err, errlen);
	case BACKEND_CONTAINER: return sandbox_container(req, argv, envp, err, errlen);
	case BACKEND_BWRAP: break;
	case BACKEND_SLURM: break; /* bwrap too, its line run on the node */
	}
	return sandbox_bwrap(req, argv, envp, err, errlen);
}

struct built {
	struct policy pol;
	struct task_spec spec;
	struct strv argv, envp;
};

/* The test policy's own settings, over kart.conf's: BACKEND, where bwrap
 * and the launcher are, and ceilings of 1G of memory and one CPU. */
static void base_policy(struct policy *pol, enum backend_id backend)
{
	pol->backend = backend;
	snprintf(pol->bwrap, sizeof pol->bwrap, "/usr/bin/bwrap");
	snprintf(pol->launcher, sizeof pol->launcher, "/opt/kart/libexec/kart-launch");
	pol->memory_max = 1ull << 30;
	pol->cpu_max_milli = 1000;
}

/* conf: kart.conf text over the test policy; env: the worker's
 * environment as the sandbox sees it. */
static void build_ex(struct built *b, enum backend_id backend, const char *task_text,
		     const char *conf, char *const *env)
{
	char err[256] = "";
	memset(b, 0, sizeof *b);
	if (conf && policy_parse_conf(&b->pol, conf, "kart.conf", err, sizeof err) != 0)
		fail_msg("kart.conf rejected: %s", err);
	base_policy(&b->pol, backend);
	if (task_parse(task_text, strlen(task_text), &b->spec, err, sizeof err) != 0)
		fail_msg("task text rejected: %s", err);
	if (task_resolve_kind(&b->spec, &b->pol, "job-7", err, sizeof err) != 0)
		fail_msg("task kind rejected: %s", err);
	struct sandbox_req req = {
		.pol = &b->pol,
		.spec = &b->spec,
		.task_path = TASK_HOST,
		.work_dir = WORK_HOST,
		.out_dir = OUT_HOST,
		.task_id = "job-7",
		.attempt = 2,
		.host_env = env,
		/* as the worker does: where credfwd_kind says so */
		.cred_socket = credfwd_kind(&b->pol, &b->spec) ? FWD_HOST : NULL,
	};
	assert_int_equal(sandbox_build(&req, &b->argv, &b->envp, err, sizeof err), 0);
	assert_non_null(b->argv.v);
	assert_non_null(b->envp.v);
	assert_null(b->argv.v[b->argv.n]); /* execve wants it NULL-terminated */
	assert_null(b->envp.v[b->envp.n]);
}

static void build(struct built *b, enum backend_id backend, const char *task_text)
{
	build_ex(b, backend, task_text, NULL, NULL);
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

/* Index of the launcher: the argument followed by its --status-fd. */
static size_t launcher_at(const struct built *b, const char *launch)
{
	for (size_t i = 0; i + 1 < b->argv.n; i++)
		if (strcmp(b->argv.v[i], launch) == 0 && strcmp(b->argv.v[i + 1], "--status-fd=3") == 0)
			return i;
	fail_msg("no launcher %s in argv", launch);
	return 0;
}

/* The launcher, its options (Landlock's rules among them), "--", then
 * exactly the task's argv. */
static void assert_tail(const struct built *b, const char *launch, const char *const *task,
			size_t ntask)
{
	size_t n = b->argv.n;
	assert_true(n >= 3 + ntask);
	size_t t = launcher_at(b, launch), dd = n - ntask - 1;
	assert_true(dd > t + 1);
	assert_string_equal(b->argv.v[dd], "--");
	for (size_t i = t + 2; i < dd; i++) {
		const char *a = b->argv.v[i];
		if (strcmp(a, "--ro") == 0 || strcmp(a, "--rw") == 0) {
			assert_true(i + 1 < dd);
			assert_true(b->argv.v[++i][0] == '/');
		} else if (strncmp(a, "--", 2) != 0 || strcmp(a, "--") == 0)
			fail_msg("not a launcher option: %s", a);
	}
	for (size_t i = 0; i < ntask; i++)
		assert_string_equal(b->argv.v[dd + 1 + i], task[i]);
}

static void test_bwrap_tail(void **state)
{
	(void)state;
	struct built b;
	build(&b, BACKEND_BWRAP, "echo\n");
	static const char *const sh[] = {"/bin/sh", SANDBOX_TASK};
	assert_tail(&b, SANDBOX_LAUNCH, sh, 2);
	/* Everything before the launcher is bwrap's. */
	assert_int_equal(opts_end(&b), launcher_at(&b, SANDBOX_LAUNCH));
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
	assert_int_equal(launcher_at(&b, b.pol.launcher), 0);
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

/* ---- Landlock rules, policy binds, credentials ------------------------------ */

/* Does the launcher get `--ro PATH` (rw false) or `--rw PATH`? */
static bool has_rule(const struct built *b, bool rw, const char *path)
{
	for (size_t i = 0; i + 1 < b->argv.n && strcmp(b->argv.v[i], "--") != 0; i++)
		if (strcmp(b->argv.v[i], rw ? "--rw" : "--ro") == 0 &&
		    strcmp(b->argv.v[i + 1], path) == 0)
			return true;
	return false;
}

static bool has_arg(const struct built *b, const char *a)
{
	for (size_t i = 0; i < b->argv.n; i++)
		if (strcmp(b->argv.v[i], a) == 0)
			return true;
	return false;
}

static void test_landlock_mirrors_bwrap(void **state)
{
	(void)state;
	struct built b;
	build(&b, BACKEND_BWRAP, "echo\n");
	assert_true(has_arg(&b, "--landlock=auto")); /* the default mode */
	assert_false(has_arg(&b, "--tcp"));
	assert_true(has_rule(&b, false, "/usr"));
	assert_true(has_rule(&b, false, "/etc/passwd"));
	assert_true(has_rule(&b, false, SANDBOX_TASK));
	assert_true(has_rule(&b, false, SANDBOX_LAUNCH));
	assert_true(has_rule(&b, false, "/proc"));
	assert_false(has_rule(&b, false, "/etc/resolv.conf"));
	/* Writable: exactly bwrap's writable mounts. */
	static const char *const rw[] = {"/tmp", SANDBOX_WORK, SANDBOX_OUT, "/dev"};
	size_t nrw = 0;
	for (size_t i = 0; i + 1 < b.argv.n; i++)
		if (strcmp(b.argv.v[i], "--rw") == 0) {
			bool known = false;
			for (size_t k = 0; k < ARRAY_SIZE(rw); k++)
				known |= strcmp(b.argv.v[i + 1], rw[k]) == 0;
			if (!known)
				fail_msg("writable in Landlock but not a writable mount: %s", b.argv.v[i + 1]);
			nrw++;
		}
	assert_int_equal(nrw, ARRAY_SIZE(rw));
	/* Nothing of the host's spool paths reaches the launcher's rules. */
	for (size_t i = launcher_at(&b, SANDBOX_LAUNCH); i < b.argv.n; i++)
		assert_null(strstr(b.argv.v[i], SPOOL));
	built_free(&b);

	build(&b, BACKEND_BWRAP, "#kart: net\n");
	assert_true(has_arg(&b, "--tcp"));
	assert_true(has_rule(&b, false, "/etc/resolv.conf"));
	built_free(&b);
}

static void test_landlock_off(void **state)
{
	(void)state;
	struct built b;
	build_ex(&b, BACKEND_BWRAP, "echo\n", "[sandbox]\nlandlock = off\n", NULL);
	assert_true(has_arg(&b, "--landlock=off"));
	assert_false(has_arg(&b, "--ro"));
	assert_false(has_arg(&b, "--rw"));
	built_free(&b);
	build_ex(&b, BACKEND_NONE, "echo\n", "[sandbox]\nlandlock = enforce\n", NULL);
	assert_true(has_arg(&b, "--landlock=enforce"));
	built_free(&b);
}

/* Backend none: Landlock is all there is; the host's /tmp, the rest
 * of the spool and the launcher it does not run stay out. */
static void test_landlock_none(void **state)
{
	(void)state;
	struct built b;
	build(&b, BACKEND_NONE, "echo\n");
	assert_true(has_rule(&b, true, WORK_HOST));
	assert_true(has_rule(&b, true, OUT_HOST));
	assert_true(has_rule(&b, true, "/dev/null"));
	assert_true(has_rule(&b, false, TASK_HOST));
	/* No launcher runs with backend none: the task gets no rule for it. */
	assert_false(has_rule(&b, false, b.pol.launcher));
	assert_false(has_rule(&b, true, b.pol.launcher));
	assert_true(has_rule(&b, false, "/usr"));
	assert_false(has_rule(&b, true, "/tmp"));
	assert_false(has_rule(&b, true, "/dev"));
	assert_false(has_rule(&b, false, "/"));
	assert_false(has_rule(&b, false, SPOOL));
	assert_false(has_rule(&b, true, SPOOL));
	built_free(&b);
}

static void test_policy_binds(void **state)
{
	(void)state;
	struct built b;
	build_ex(&b, BACKEND_BWRAP, "echo\n",
		 "[sandbox]\nro_binds = /opt/tools, /srv/data\nrw_binds = /srv/scratch\n"
		 "tmpfs_size = 64M\n",
		 NULL);
	assert_opt(&b, "--ro-bind", "/opt/tools", "/opt/tools");
	assert_opt(&b, "--ro-bind", "/srv/data", "/srv/data");
	assert_opt(&b, "--bind", "/srv/scratch", "/srv/scratch");
	assert_opt(&b, "--size", "67108864", "--tmpfs", "/tmp");
	assert_opt(&b, "--size", "67108864", "--tmpfs", SANDBOX_WORK);
	assert_true(has_rule(&b, false, "/opt/tools"));
	assert_true(has_rule(&b, true, "/srv/scratch"));
	/* The binds come before the root is made read-only. */
	assert_true(OPT(&b, "--bind", "/srv/scratch", "/srv/scratch") < OPT(&b, "--remount-ro", "/"));
	built_free(&b);
}

static void test_credentials_only_with_net(void **state)
{
	(void)state;
	static const char conf[] = "[sandbox]\nenv_pass = TZ, UNSET_ONE\n"
				   "[network]\ncred_env = API_TOKEN\ncred_files = /etc/kart/netrc\n";
	char *const env[] = {"API_TOKEN=s3cr3t-" CANARY, "TZ=Europe/Paris", "OTHER=x", NULL};
	struct built b;

	build_ex(&b, BACKEND_BWRAP, "echo\n", conf, env);
	assert_string_equal(env_get(&b, "TZ"), "Europe/Paris");
	assert_null(env_get(&b, "UNSET_ONE"));
	assert_null(env_get(&b, "OTHER"));
	assert_null(env_get(&b, "API_TOKEN"));
	for (size_t i = 0; i < b.argv.n; i++)
		assert_null(strstr(b.argv.v[i], "netrc"));
	built_free(&b);

	build_ex(&b, BACKEND_BWRAP, "#kart: net\n", conf, env);
	assert_string_equal(env_get(&b, "API_TOKEN"), "s3cr3t-" CANARY);
	assert_opt(&b, "--ro-bind", "/etc/kart/netrc", "/etc/kart/netrc");
	assert_true(has_rule(&b, false, "/etc/kart/netrc"));
	/* The value only ever in envp. */
	for (size_t i = 0; i < b.argv.n; i++) {
		assert_null(strstr(b.argv.v[i], "s3cr3t"));
		assert_string_not_equal(b.argv.v[i], "--setenv");
	}
	built_free(&b);

	build_ex(&b, BACKEND_NONE, "#kart: net\n", conf, env);
	assert_string_equal(env_get(&b, "API_TOKEN"), "s3cr3t-" CANARY);
	assert_true(has_rule(&b, false, "/etc/kart/netrc"));
	built_free(&b);
	build_ex(&b, BACKEND_NONE, "echo\n", conf, env);
	assert_null(env_get(&b, "API_TOKEN"));
	assert_false(has_rule(&b, false, "/etc/kart/netrc"));
	built_free(&b);
}

/* A kind's task: its runner is the program (bound at its own path, with
 * a Landlock rule, when it is outside /usr), it gets the kind's endpoint
 * and model, and with network the socket of the forwarder that adds the
 * kind's credentials: never the credentials themselves, in no backend.
 * No other task gets any of it. */
static bool canary_anywhere(const struct built *b)
{
	for (size_t i = 0; i < b->argv.n; i++)
		if (strstr(b->argv.v[i], CANARY))
			return true;
	for (size_t i = 0; i < b->envp.n; i++)
		if (strstr(b->envp.v[i], CANARY))
			return true;
	return false;
}

static void test_kind_runner_and_credentials(void **state)
{
	(void)state;
	static const char conf[] = "[kind.llm]\nrunner = /opt/kart/kart-llm\nnet = yes\n"
				   "credentials = LLM_KEY\nendpoint = http://127.0.0.1:9/v1\nendpoint_uid = 0\nmodel = m1\n"
				   "[kind.python]\nrunner = /usr/bin/python3\ncredentials = PY_KEY\n"
				   "endpoint = http://127.0.0.1:9/py\nendpoint_uid = 0\n"
				   "[network]\ncred_env = API_TOKEN\n";
	char *const env[] = {"LLM_KEY=llm-" CANARY, "PY_KEY=py-" CANARY, "API_TOKEN=general", NULL};
	struct built b;

	build_ex(&b, BACKEND_BWRAP, "#kart: kind=llm\n", conf, env);
	assert_true(b.spec.net);
	assert_opt(&b, "--share-net");
	assert_opt(&b, "--ro-bind", "/opt/kart/kart-llm", "/opt/kart/kart-llm");
	assert_true(has_rule(&b, false, "/opt/kart/kart-llm"));
	assert_string_equal(b.argv.v[b.argv.n - 2], "/opt/kart/kart-llm");
	assert_string_equal(b.argv.v[b.argv.n - 1], SANDBOX_TASK);
	assert_null(env_get(&b, "LLM_KEY"));
	assert_opt(&b, "--bind", FWD_HOST, SANDBOX_CRED_SOCKET);
	assert_string_equal(env_get(&b, "KART_LLM_SOCKET"), SANDBOX_CRED_SOCKET);
	assert_string_equal(env_get(&b, "API_TOKEN"), "general");
	assert_string_equal(env_get(&b, "KART_LLM_ENDPOINT"), "http://127.0.0.1:9/v1");
	assert_string_equal(env_get(&b, "KART_LLM_MODEL"), "m1");
	assert_null(env_get(&b, "PY_KEY"));
	assert_false(canary_anywhere(&b));
	built_free(&b);

	/* Backend none: the socket at its host path. */
	build_ex(&b, BACKEND_NONE, "#kart: kind=llm\n", conf, env);
	assert_true(has_rule(&b, false, "/opt/kart/kart-llm"));
	assert_null(env_get(&b, "LLM_KEY"));
	assert_string_equal(env_get(&b, "KART_LLM_SOCKET"), FWD_HOST);
	assert_false(canary_anywhere(&b));
	built_free(&b);

	/* A shell task with network: the general credential, nothing of
	 * the kind's. */
	build_ex(&b, BACKEND_BWRAP, "#!/bin/sh\n#kart: net\n", conf, env);
	assert_string_equal(env_get(&b, "API_TOKEN"), "general");
	assert_null(env_get(&b, "LLM_KEY"));
	assert_null(env_get(&b, "PY_KEY"));
	assert_null(env_get(&b, "KART_LLM_ENDPOINT"));
	assert_null(env_get(&b, "KART_LLM_MODEL"));
	assert_null(env_get(&b, "KART_LLM_SOCKET"));
	assert_false(has_arg(&b, "/opt/kart/kart-llm"));
	assert_false(has_arg(&b, FWD_HOST));
	built_free(&b);

	/* A runner under /usr is visible already: no bind, no rule; a kind
	 * without net gives its forwarder to no task without net. */
	build_ex(&b, BACKEND_BWRAP, "#kart: kind=python\n", conf, env);
	assert_true(OPT(&b, "--ro-bind", "/usr/bin/python3", "/usr/bin/python3") < 0);
	assert_false(has_rule(&b, false, "/usr/bin/python3"));
	assert_string_equal(b.argv.v[b.argv.n - 2], "/usr/bin/python3");
	assert_null(env_get(&b, "KART_LLM_SOCKET"));
	assert_false(has_arg(&b, FWD_HOST));
	assert_false(canary_anywhere(&b));
	built_free(&b);
	build_ex(&b, BACKEND_BWRAP, "#kart: kind=python net\n", conf, env);
	assert_string_equal(env_get(&b, "KART_LLM_SOCKET"), SANDBOX_CRED_SOCKET);
	assert_false(canary_anywhere(&b));
	built_free(&b);

	/* A kind the policy lost (SIGHUP between look and start): refused. */
	memset(&b, 0, sizeof b);
	char err[256] = "";
	assert_int_equal(policy_parse_conf(&b.pol, conf, "kart.conf", err, sizeof err), 0);
	task_spec_init(&b.spec);
	snprintf(b.spec.kind, sizeof b.spec.kind, "gone");
	struct sandbox_req req = {.pol = &b.pol, .spec = &b.spec, .task_path = TASK_HOST,
				  .work_dir = WORK_HOST, .out_dir = OUT_HOST, .task_id = "job-7"};
	assert_int_equal(sandbox_build(&req, &b.argv, &b.envp, err, sizeof err), -1);
	assert_non_null(strstr(err, "kind gone"));
	built_free(&b);
}

/* The policy of kart.conf CONF on the container backend: docker, img:1. */
static void container_policy(struct policy *pol, const char *conf)
{
	char err[256] = "";
	memset(pol, 0, sizeof *pol);
	assert_int_equal(policy_parse_conf(pol, conf, "kart.conf", err, sizeof err), 0);
	pol->backend = BACKEND_CONTAINER;
	snprintf(pol->container_cmd, sizeof pol->container_cmd, "/usr/bin/docker");
	snprintf(pol->container_image, sizeof pol->container_image, "img:1");
}

/* Backend container: a kind's runner outside /usr is mounted from the
 * host, its endpoint, model and the forwarder's socket go by value and
 * the socket is mounted; its credential is nowhere, neither by value nor
 * by name, nor on the CLI's stdin. */
static void test_kind_container(void **state)
{
	(void)state;
	static const char conf[] = "[kind.llm]\nrunner = /opt/kart/kart-llm\nnet = yes\n"
				   "credentials = LLM_KEY\nendpoint = http://127.0.0.1:9/v1\nendpoint_uid = 0\nmodel = m1\n"
				   "[kind.python]\nrunner = /usr/bin/python3\n";
	char *const env[] = {"LLM_KEY=llm-" CANARY, NULL};
	struct policy pol;
	struct task_spec spec;
	struct strv argv = {0}, envp = {0};
	char err[256] = "";
	container_policy(&pol, conf);
	static const char *const texts[] = {"#kart: kind=llm\n", "#kart: kind=python\n"};
	for (int t = 0; t < 2; t++) {
		assert_int_equal(task_parse(texts[t], strlen(texts[t]), &spec, err, sizeof err), 0);
		assert_int_equal(task_resolve_kind(&spec, &pol, "job-7", err, sizeof err), 0);
		char *input = NULL;
		struct sandbox_req req = {.pol = &pol, .spec = &spec, .task_path = TASK_HOST,
					  .work_dir = WORK_HOST, .out_dir = OUT_HOST, .task_id = "job-7",
					  .host_env = env, .container_name = "kart-x-1", .input = &input,
					  .cred_socket = credfwd_kind(&pol, &spec) ? FWD_HOST : NULL};
		assert_int_equal(t == 0, req.cred_socket != NULL);
		assert_int_equal(sandbox_build(&req, &argv, &envp, err, sizeof err), 0);
		bool mount = false, ep = false, model = false, key = false, inter = false, sock = false,
		     sockenv = false;
		for (size_t i = 0; i < argv.n; i++) {
			assert_null(strstr(argv.v[i], CANARY));
			mount |= strcmp(argv.v[i], "type=bind,source=/opt/kart/kart-llm,"
						   "target=/opt/kart/kart-llm,readonly") == 0;
			sock |= strcmp(argv.v[i], "type=bind,source=" FWD_HOST ",target=" SANDBOX_CRED_SOCKET) == 0;
			ep |= strcmp(argv.v[i], "KART_LLM_ENDPOINT=http://127.0.0.1:9/v1") == 0;
			model |= strcmp(argv.v[i], "KART_LLM_MODEL=m1") == 0;
			sockenv |= strcmp(argv.v[i], "KART_LLM_SOCKET=" SANDBOX_CRED_SOCKET) == 0;
			key |= strstr(argv.v[i], "LLM_KEY") != NULL;
			inter |= strcmp(argv.v[i], "--interactive") == 0;
		}
		for (size_t i = 0; i < envp.n; i++)
			assert_null(strstr(envp.v[i], CANARY));
		assert_int_equal(mount, t == 0);
		assert_int_equal(sock, t == 0);
		assert_int_equal(ep, t == 0);
		assert_int_equal(model, t == 0);
		assert_int_equal(sockenv, t == 0);
		assert_false(key);
		assert_false(inter);
		assert_null(input);
		assert_string_equal(argv.v[argv.n - 2], t == 0 ? "/opt/kart/kart-llm" : "/usr/bin/python3");
		assert_string_equal(argv.v[argv.n - 1], SANDBOX_TASK);
		strv_free(&argv);
		strv_free(&envp);
	}
}

/* Backend container: the policy's variables as lines for a POSIX
 * shell, whatever their values hold; where the caller cannot pass them
 * on stdin, the task is not built. [container] extra_args come after
 * kart's options, before the image. */
static void test_container_env_and_extra(void **state)
{
	(void)state;
	static const char conf[] = "[sandbox]\nenv_pass = A_TOKEN B_VAR\n"
				   "[container]\nextra_args = --userns=keep-id --ulimit=nofile=20000:20000\n";
	char *const env[] = {"A_TOKEN=it's a \"secret\"\nline two", "B_VAR=", "OTHER=x", NULL};
	struct policy pol;
	struct task_spec spec;
	struct strv argv = {0}, envp = {0};
	char err[256] = "";
	container_policy(&pol, conf);
	assert_int_equal(task_parse("echo\n", 5, &spec, err, sizeof err), 0);
	char *input = NULL;
	struct sandbox_req req = {.pol = &pol, .spec = &spec, .task_path = TASK_HOST,
				  .work_dir = WORK_HOST, .out_dir = OUT_HOST, .task_id = "t",
				  .host_env = env, .container_name = "kart-x-1"};
	/* No way to pass them: refused, never by --env. */
	assert_int_equal(sandbox_build(&req, &argv, &envp, err, sizeof err), -1);
	assert_non_null(strstr(err, "variables"));
	strv_free(&argv);
	strv_free(&envp);
	req.input = &input;
	assert_int_equal(sandbox_build(&req, &argv, &envp, err, sizeof err), 0);
	assert_string_equal(input, "A_TOKEN='it'\\''s a \"secret\"\nline two'\nB_VAR=''\n");
	size_t img = 0, keep = 0, ul = 0;
	for (size_t i = 0; i < argv.n; i++) {
		assert_null(strstr(argv.v[i], "secret"));
		assert_null(strstr(argv.v[i], "A_TOKEN"));
		if (strcmp(argv.v[i], "img:1") == 0)
			img = i;
		if (strcmp(argv.v[i], "--userns=keep-id") == 0)
			keep = i;
		if (strcmp(argv.v[i], "--ulimit=nofile=20000:20000") == 0)
			ul = i;
	}
	assert_true(keep > 0 && ul == keep + 1 && img > ul);
	assert_string_equal(argv.v[1], "run");
	free(input);
	strv_free(&argv);
	strv_free(&envp);
}

/* kart doctor's conclusions about an engine (container_problems), for
 * the hosts the container backend meets: podman 4 with crun on hybrid
 * cgroups and a nofile hard limit of 20000 (this kind of host), the same
 * with runc and the ulimits set, podman 5 on cgroup v2, rootless podman
 * on v1, and docker. */
static int count_problems(const struct engine_facts *f, const char *conf, int *fatal,
			  const char *needle)
{
	struct policy pol;
	char err[256] = "";
	memset(&pol, 0, sizeof pol);
	assert_int_equal(policy_parse_conf(&pol, conf, "kart.conf", err, sizeof err), 0);
	struct engine_problem p[ENGINE_PROBLEMS_MAX];
	int n = container_problems(f, &pol, p), found = 0;
	*fatal = 0;
	for (int i = 0; i < n; i++) {
		*fatal += p[i].fatal;
		found += needle && strstr(p[i].what, needle) != NULL;
	}
	return needle ? found : n;
}

static void test_engine_problems(void **state)
{
	(void)state;
	int fatal;
	struct engine_facts podman4 = {.podman = true, .major = 4, .minor = 3, .runtime = "crun",
				       .hybrid_controllers = true, .hybrid_list = "hugetlb",
				       .nofile_hard = 20000, .nproc_hard = 96362};
	/* Everything this host has against podman 4 and crun. */
	assert_int_equal(count_problems(&podman4, "", &fatal, NULL), 4);
	assert_int_equal(fatal, 3);
	assert_int_equal(count_problems(&podman4, "", &fatal, "crun refuses hybrid cgroups"), 1);
	assert_int_equal(count_problems(&podman4, "", &fatal, "here: hugetlb"), 1);
	assert_int_equal(count_problems(&podman4, "", &fatal, "--ulimit=nofile=20000:20000"), 1);
	assert_int_equal(count_problems(&podman4, "", &fatal, "--ulimit=nproc=96362:96362"), 1);
	assert_int_equal(count_problems(&podman4, "", &fatal, "podman 4.3 reports no OOM kill"), 1);
	/* The workaround: runc and both ulimits; only the OOM note. */
	static const char fixed[] = "[container]\nextra_args = --runtime=runc "
				    "--ulimit=nofile=20000:20000 --ulimit=nproc=32768:32768\n";
	assert_int_equal(count_problems(&podman4, fixed, &fatal, NULL), 1);
	assert_int_equal(fatal, 0);
	/* runc as podman's own runtime: no crun problem. */
	struct engine_facts runc4 = podman4;
	snprintf(runc4.runtime, sizeof runc4.runtime, "runc");
	assert_int_equal(count_problems(&runc4, "", &fatal, "crun"), 0);
	/* A ulimit above the hard limit fails, podman or not. */
	struct engine_facts docker = {.nofile_hard = 20000, .nproc_hard = 96362, .hybrid_controllers = true};
	assert_int_equal(count_problems(&docker, "", &fatal, NULL), 0);
	assert_int_equal(count_problems(&docker, "[container]\nextra_args = --ulimit=nofile=65536:65536\n",
					&fatal, "above this host's hard limit of 20000"),
			 1);
	assert_int_equal(fatal, 1);
	/* podman 5 on cgroup v2 with room for its ulimits: nothing. */
	struct engine_facts podman5 = {.podman = true, .major = 5, .minor = 2, .runtime = "crun",
				       .cgroup_unified = true, .nofile_hard = -1, .nproc_hard = -1};
	assert_int_equal(count_problems(&podman5, "", &fatal, NULL), 0);
	/* Rootless podman on v1: no limit would hold. */
	struct engine_facts rootless = podman5;
	rootless.rootless = true;
	rootless.cgroup_unified = false;
	assert_int_equal(count_problems(&rootless, "", &fatal, "applies no limit"), 1);
	assert_int_equal(fatal, 1);
}

/* The JSON profile a container runtime loads: personality(2) is denied
 * for every bit no allowed persona holds (ADDR_NO_RANDOMIZE among them),
 * never for PER_LINUX32 or UNAME26. The real engine tries it
 * (engine.sh, the escape battery's sys_personality). */
static void test_profile_personality(void **state)
{
	(void)state;
	char *text = seccomp_profile_json();
	assert_non_null(text);
	json_error_t je;
	json_t *o = json_loads(text, 0, &je), *r;
	assert_non_null(o);
	uint64_t denied = 0;
	size_t i;
	json_array_foreach(json_object_get(o, "syscalls"), i, r) {
		json_t *names = json_object_get(r, "names");
		if (json_array_size(names) != 1 ||
		    strcmp(json_string_value(json_array_get(names, 0)), "personality") != 0)
			continue;
		assert_string_equal(json_string_value(json_object_get(r, "action")), "SCMP_ACT_ERRNO");
		json_t *a = json_array_get(json_object_get(r, "args"), 0);
		assert_string_equal(json_string_value(json_object_get(a, "op")), "SCMP_CMP_MASKED_EQ");
		assert_int_equal(json_integer_value(json_object_get(a, "index")), 0);
		json_int_t m = json_integer_value(json_object_get(a, "value"));
		assert_int_equal(m, json_integer_value(json_object_get(a, "valueTwo")));
		assert_int_equal(m & (m - 1), 0); /* one bit */
		denied |= (uint64_t)m;
	}
	assert_int_equal(denied, 0xffffffffull & ~0x20008ull);
	assert_true(denied & 0x0040000); /* ADDR_NO_RANDOMIZE */
	json_decref(o);
	free(text);
}

/* With the filter at fd 5: bwrap is told --seccomp 5 (before its command),
 * the launcher of backend none --seccomp-fd=5; without it, neither. */
static void test_seccomp_fd(void **state)
{
	(void)state;
	for (int none = 0; none < 2; none++)
		for (int on = 0; on < 2; on++) {
			struct built b;
			char err[256];
			memset(&b, 0, sizeof b);
			b.pol.backend = none ? BACKEND_NONE : BACKEND_BWRAP;
			snprintf(b.pol.bwrap, sizeof b.pol.bwrap, "/usr/bin/bwrap");
			snprintf(b.pol.launcher, sizeof b.pol.launcher, "/opt/kart/libexec/kart-launch");
			assert_int_equal(task_parse("echo hi\n", 8, &b.spec, err, sizeof err), 0);
			struct sandbox_req req = {.pol = &b.pol, .spec = &b.spec, .task_path = TASK_HOST,
						  .work_dir = WORK_HOST, .out_dir = OUT_HOST,
						  .task_id = "job-7", .attempt = 1, .seccomp = on};
			assert_int_equal(sandbox_build(&req, &b.argv, &b.envp, err, sizeof err), 0);
			int bw = -1, ln = -1;
			for (size_t i = 0; i < b.argv.n; i++) {
				if (strcmp(b.argv.v[i], "--seccomp") == 0 && i + 1 < b.argv.n &&
				    strcmp(b.argv.v[i + 1], "5") == 0)
					bw = (int)i;
				if (strcmp(b.argv.v[i], "--seccomp-fd=5") == 0)
					ln = (int)i;
			}
			if (none) {
				assert_int_equal(bw, -1);
				assert_true(on ? ln > 0 : ln == -1);
			} else {
				assert_int_equal(ln, -1);
				assert_true(on ? bw > 0 && (size_t)bw < opts_end(&b) : bw == -1);
			}
			built_free(&b);
		}
}

/* ---- the task's own binds and env= ---------------------------------------- */

static void build_home(struct built *b, enum backend_id backend, const char *text, const char *home,
		       char *const *env)
{
	char err[256] = "";
	memset(b, 0, sizeof *b);
	base_policy(&b->pol, backend);
	snprintf(b->pol.container_cmd, sizeof b->pol.container_cmd, "/usr/bin/docker");
	snprintf(b->pol.container_image, sizeof b->pol.container_image, "img:1");
	if (task_parse(text, strlen(text), &b->spec, err, sizeof err) != 0)
		fail_msg("task text rejected: %s", err);
	struct sandbox_req req = {.pol = &b->pol, .spec = &b->spec, .task_path = TASK_HOST,
				  .work_dir = WORK_HOST, .out_dir = OUT_HOST, .task_id = "job-7",
				  .attempt = 1, .host_env = env, .home = home,
				  .container_name = "kart-x-1"};
	assert_int_equal(sandbox_build(&req, &b->argv, &b->envp, err, sizeof err), 0);
}

/* bwrap binds the descriptors opened as the submitter, at the paths
 * asked for, after the system's mounts and before the root turns
 * read-only; the task starts in its cwd=; Landlock has a rule for each
 * with the same access. */
static void test_task_binds_bwrap(void **state)
{
	(void)state;
	struct built b;
	build_home(&b, BACKEND_BWRAP,
		   "#kart: ro=/srv/in cwd=/home/ann/proj bind=/home/ann/out\necho\n", NULL, NULL);
	assert_opt(&b, "--ro-bind-fd", "6", "/srv/in");
	assert_opt(&b, "--bind-fd", "7", "/home/ann/proj");
	assert_opt(&b, "--bind-fd", "8", "/home/ann/out");
	assert_opt(&b, "--chdir", "/home/ann/proj");
	assert_true(OPT(&b, "--chdir", SANDBOX_WORK) < 0);
	assert_true(OPT(&b, "--tmpfs", "/tmp") < OPT(&b, "--ro-bind-fd", "6", "/srv/in"));
	assert_true(OPT(&b, "--bind-fd", "8", "/home/ann/out") < OPT(&b, "--remount-ro", "/"));
	/* Never by path. */
	assert_true(OPT(&b, "--bind", "/home/ann/proj", "/home/ann/proj") < 0);
	assert_true(has_rule(&b, false, "/srv/in"));
	assert_false(has_rule(&b, true, "/srv/in"));
	assert_true(has_rule(&b, true, "/home/ann/proj"));
	assert_true(has_rule(&b, true, "/home/ann/out"));
	/* No home of the submitter's bound: HOME is the private /work. */
	assert_string_equal(env_get(&b, "HOME"), SANDBOX_WORK);
	built_free(&b);
	/* A bind below another is mounted after it, on top, whatever the
	 * order asked; each keeps its own descriptor. */
	build_home(&b, BACKEND_BWRAP, "#kart: cwd=/home/ann/proj ro=/home/ann\n", NULL, NULL);
	assert_true(OPT(&b, "--ro-bind-fd", "7", "/home/ann") >= 0);
	assert_true(OPT(&b, "--ro-bind-fd", "7", "/home/ann") < OPT(&b, "--bind-fd", "6", "/home/ann/proj"));
	built_free(&b);
}

/* HOME is the submitter's own where a bind holds it, else /work. */
static void test_task_home(void **state)
{
	(void)state;
	struct built b;
	build_home(&b, BACKEND_BWRAP, "#kart: cwd=/home/ann\n", "/home/ann", NULL);
	assert_string_equal(env_get(&b, "HOME"), "/home/ann");
	built_free(&b);
	build_home(&b, BACKEND_BWRAP, "#kart: ro=/home\n", "/home/ann/", NULL);
	assert_string_equal(env_get(&b, "HOME"), "/home/ann/");
	built_free(&b);
	build_home(&b, BACKEND_BWRAP, "#kart: cwd=/home/ann/proj\n", "/home/ann", NULL);
	assert_string_equal(env_get(&b, "HOME"), SANDBOX_WORK);
	built_free(&b);
	/* /home/an is not above /home/ann. */
	build_home(&b, BACKEND_BWRAP, "#kart: cwd=/home/an\n", "/home/ann", NULL);
	assert_string_equal(env_get(&b, "HOME"), SANDBOX_WORK);
	built_free(&b);
}

/* env= values are in envp only: never in argv, where ps shows them. The
 * task may set PATH; it wins over the sandbox's. */
static void test_task_env(void **state)
{
	(void)state;
	struct built b;
	for (int be = 0; be < 2; be++) {
		build_home(&b, be ? BACKEND_NONE : BACKEND_BWRAP,
			   "#kart: env=FOO=" CANARY "%20x env=PATH=/opt/bin:/usr/bin\n", NULL, NULL);
		assert_string_equal(env_get(&b, "FOO"), CANARY " x");
		assert_string_equal(env_get(&b, "PATH"), "/opt/bin:/usr/bin");
		assert_string_equal(env_get(&b, "KART_TASK_ID"), "job-7");
		for (size_t i = 0; i < b.argv.n; i++)
			assert_null(strstr(b.argv.v[i], CANARY));
		built_free(&b);
	}
}

/* Backend container: -v PATH:PATH[:ro], --workdir the cwd=, and env= by
 * name only (its value in the CLI's environment, over the worker's). */
static void test_task_binds_container(void **state)
{
	(void)state;
	char *const env[] = {"FOO=worker-value", "DOCKER_HOST=unix:///x", NULL};
	struct built b;
	build_home(&b, BACKEND_CONTAINER,
		   "#kart: cwd=/home/ann/proj ro=/srv/in env=FOO=" CANARY "\n", "/home/ann", env);
	const char *const v1[] = {"-v", "/home/ann/proj:/home/ann/proj"};
	const char *const v2[] = {"-v", "/srv/in:/srv/in:ro"};
	const char *const wd[] = {"--workdir", "/home/ann/proj"};
	const char *const fe[] = {"--env", "FOO"};
	assert_true(find_seq(&b.argv, b.argv.n, v1, 2) >= 0);
	assert_true(find_seq(&b.argv, b.argv.n, v2, 2) >= 0);
	assert_true(find_seq(&b.argv, b.argv.n, wd, 2) >= 0);
	assert_true(find_seq(&b.argv, b.argv.n, fe, 2) >= 0);
	for (size_t i = 0; i < b.argv.n; i++)
		assert_null(strstr(b.argv.v[i], CANARY));
	assert_string_equal(env_get(&b, "FOO"), CANARY);
	assert_string_equal(env_get(&b, "DOCKER_HOST"), "unix:///x");
	built_free(&b);
	/* A path the CLI's -v would split is refused, not bound elsewhere. */
	char err[256];
	memset(&b, 0, sizeof b);
	b.pol.backend = BACKEND_CONTAINER;
	snprintf(b.pol.container_cmd, sizeof b.pol.container_cmd, "/usr/bin/docker");
	assert_int_equal(task_parse("#kart: ro=/srv/a:b\n", 19, &b.spec, err, sizeof err), 0);
	struct sandbox_req req = {.pol = &b.pol, .spec = &b.spec, .task_path = TASK_HOST,
				  .work_dir = WORK_HOST, .task_id = "job-7", .container_name = "k"};
	assert_int_equal(sandbox_build(&req, &b.argv, &b.envp, err, sizeof err), -1);
	assert_non_null(strstr(err, "/srv/a:b"));
	built_free(&b);
}

/* after=: each upstream's out/ and stdout, by descriptors numbered after
 * the task's own binds, read-only under $KART_INPUTS/ID/, before the root
 * turns read-only; one without artifacts gets its stdout alone; Landlock
 * reads them; the container engine mounts the paths read-only. */
static void test_inputs(void **state)
{
	(void)state;
	struct built b;
	char err[256] = "";
	memset(&b, 0, sizeof b);
	b.pol.backend = BACKEND_BWRAP;
	snprintf(b.pol.bwrap, sizeof b.pol.bwrap, "/usr/bin/bwrap");
	snprintf(b.pol.launcher, sizeof b.pol.launcher, "/opt/kart/libexec/kart-launch");
	snprintf(b.pol.container_cmd, sizeof b.pol.container_cmd, "/usr/bin/docker");
	snprintf(b.pol.container_image, sizeof b.pol.container_image, "img:1");
	const char *text = "#kart: ro=/srv/in after=up1,up2\necho\n";
	assert_int_equal(task_parse(text, strlen(text), &b.spec, err, sizeof err), 0);
	const struct sandbox_input in[] = {
		{.id = "up1", .out_path = SPOOL "/done/up1.out", .stdout_path = SPOOL "/done/up1.stdout"},
		{.id = "up2", .stdout_path = SPOOL "/done/up2.stdout"},
	};
	struct sandbox_req req = {.pol = &b.pol, .spec = &b.spec, .task_path = TASK_HOST,
				  .work_dir = WORK_HOST, .out_dir = OUT_HOST, .task_id = "job-7",
				  .attempt = 1, .inputs = in, .n_inputs = 2, .container_name = "kart-x-1"};
	assert_int_equal(sandbox_build(&req, &b.argv, &b.envp, err, sizeof err), 0);
	assert_opt(&b, "--ro-bind-fd", "6", "/srv/in");
	assert_opt(&b, "--ro-bind-fd", "7", SANDBOX_INPUTS "/up1/out");
	assert_opt(&b, "--ro-bind-fd", "8", SANDBOX_INPUTS "/up1/stdout");
	assert_opt(&b, "--ro-bind-fd", "9", SANDBOX_INPUTS "/up2/stdout");
	assert_true(OPT(&b, "--ro-bind-fd", "9", SANDBOX_INPUTS "/up2/stdout") < OPT(&b, "--remount-ro", "/"));
	/* Never writable, never by path. */
	assert_true(OPT(&b, "--bind-fd", "7", SANDBOX_INPUTS "/up1/out") < 0);
	for (size_t i = 0; i < b.argv.n; i++)
		assert_null(strstr(b.argv.v[i], SPOOL "/done"));
	assert_string_equal(env_get(&b, "KART_INPUTS"), SANDBOX_INPUTS);
	assert_true(has_rule(&b, false, SANDBOX_INPUTS));
	assert_false(has_rule(&b, true, SANDBOX_INPUTS));
	built_free(&b);
	/* No after=: no $KART_INPUTS. */
	build_home(&b, BACKEND_BWRAP, "#kart: ro=/srv/in\necho\n", NULL, NULL);
	assert_null(env_get(&b, "KART_INPUTS"));
	assert_true(OPT(&b, "--dir", SANDBOX_INPUTS) < 0);
	built_free(&b);
	/* The container engine: the paths, read-only. */
	b.pol.backend = BACKEND_CONTAINER;
	assert_int_equal(sandbox_build(&req, &b.argv, &b.envp, err, sizeof err), 0);
	bool out = false, so = false;
	for (size_t i = 0; i < b.argv.n; i++) {
		out |= strcmp(b.argv.v[i], "type=bind,source=" SPOOL "/done/up1.out,target=" SANDBOX_INPUTS
					   "/up1/out,readonly") == 0;
		so |= strcmp(b.argv.v[i], "type=bind,source=" SPOOL "/done/up2.stdout,target=" SANDBOX_INPUTS
					  "/up2/stdout,readonly") == 0;
	}
	assert_true(out && so);
	built_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bwrap_isolation),
		cmocka_unit_test(test_task_binds_bwrap),
		cmocka_unit_test(test_task_home),
		cmocka_unit_test(test_task_env),
		cmocka_unit_test(test_task_binds_container),
		cmocka_unit_test(test_inputs),
		cmocka_unit_test(test_bwrap_no_net),
		cmocka_unit_test(test_bwrap_net),
		cmocka_unit_test(test_bwrap_nothing_writable_but_out),
		cmocka_unit_test(test_bwrap_env),
		cmocka_unit_test(test_bwrap_tail),
		cmocka_unit_test(test_none),
		cmocka_unit_test(test_landlock_mirrors_bwrap),
		cmocka_unit_test(test_landlock_off),
		cmocka_unit_test(test_landlock_none),
		cmocka_unit_test(test_policy_binds),
		cmocka_unit_test(test_credentials_only_with_net),
		cmocka_unit_test(test_kind_runner_and_credentials),
		cmocka_unit_test(test_kind_container),
		cmocka_unit_test(test_container_env_and_extra),
		cmocka_unit_test(test_engine_problems),
		cmocka_unit_test(test_profile_personality),
		cmocka_unit_test(test_seccomp_fd),
	};
	return cmocka_run_group_tests(tests, env_setup, env_teardown);
}
