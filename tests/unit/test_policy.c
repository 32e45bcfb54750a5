/* test_policy.c - kart.conf and KART_* overrides (src/policy_load.c): the
 * [sandbox], [network] credential and [hooks] keys, and errors that
 * name the line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>

#include "policy.h"
#include "util.h"

static const char *const overrides[] = {"KART_LANDLOCK", "KART_ALLOW_ROOT", "KART_BACKEND",
					"KART_NET_UIDS", "KART_CONTAINER_CMD", "KART_CONTAINER_IMAGE",
					"KART_ALLOW_UNSANDBOXED"};

static int clean_env(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(overrides); i++)
		unsetenv(overrides[i]);
	return 0;
}

static void load_defaults(struct policy *p)
{
	char err[512] = "";
	if (policy_load(p, NULL, err, sizeof err) != 0)
		fail_msg("policy_load: %s", err);
}

/* Parse conf over the defaults; returns the result, err filled. */
static int parse(struct policy *p, const char *conf, char *err, size_t errlen)
{
	load_defaults(p);
	err[0] = '\0';
	return policy_parse_conf(p, conf, "kart.conf", err, errlen);
}

static int count(const struct plist *l)
{
	int n = 0;
	for (const char *e = NULL; (e = plist_next(l, e));)
		n++;
	assert_int_equal(n, l->n);
	return n;
}

static void test_defaults(void **state)
{
	(void)state;
	struct policy p;
	load_defaults(&p);
	assert_int_equal(p.landlock, LL_MODE_AUTO);
	assert_false(p.allow_root);
	assert_false(p.results_group); /* results: owner-only by default */
	assert_int_equal(p.tmpfs_size, 256ull << 20); /* a shared machine's default */
	/* $KART_OUTDIR: RAM while the task runs, as /tmp is */
	assert_int_equal(p.artifacts_max, 256ull << 20);
	assert_int_equal(p.artifacts_files, 10000);
	assert_int_equal(p.artifacts_depth, 32);
	assert_int_equal(p.after_max, 1000); /* after=: a chain's depth, a walk's length */
	assert_int_equal(count(&p.ro_binds), 0);
	assert_int_equal(count(&p.rw_binds), 0);
	assert_int_equal(count(&p.env_pass), 0);
	assert_int_equal(count(&p.cred_env), 0);
	assert_int_equal(count(&p.cred_files), 0);
	assert_string_equal(p.on_done, "");
}

static void test_artifacts_keys(void **state)
{
	(void)state;
	struct policy p;
	char err[512];
	assert_int_equal(parse(&p, "[limits]\nartifacts_max = 1M\nartifacts_files = 100\nartifacts_depth = 4\n",
			       err, sizeof err), 0);
	assert_int_equal(p.artifacts_max, 1u << 20);
	assert_int_equal(p.artifacts_files, 100);
	assert_int_equal(p.artifacts_depth, 4);
	assert_int_equal(parse(&p, "[limits]\nafter_max = 20000\n", err, sizeof err), 0);
	assert_int_equal(p.after_max, 20000);
	/* defaults = none keeps them: a bound on what is kept, not a
	 * default a task could raise */
	assert_int_equal(parse(&p, "[limits]\ndefaults = none\n", err, sizeof err), 0);
	assert_int_equal(p.artifacts_files, 10000);
}

static void test_sandbox_section(void **state)
{
	(void)state;
	struct policy p;
	char err[512];
	int r = parse(&p,
		      "# a comment\n"
		      "[sandbox]\n"
		      "landlock = enforce\n"
		      "allow_root = yes\n"
		      "tmpfs_size = 256M\n"
		      "ro_binds = /opt/tools,/srv/data , /usr/share/dict\n"
		      "rw_binds = /srv/scratch\n"
		      "env_pass = TZ LC_ALL, http_proxy\n"
		      "[network]\n"
		      "allow_uids = 1000\n"
		      "cred_env = API_TOKEN, AWS_SECRET_ACCESS_KEY\n"
		      "cred_files = /etc/kart/netrc\n"
		      "[hooks]\n"
		      "on_done = /usr/local/bin/kart-push\n"
		      "[worker]\n"
		      "results = group\n",
		      err, sizeof err);
	if (r != 0)
		fail_msg("%s", err);
	assert_true(p.results_group);
	assert_int_equal(p.landlock, LL_MODE_ENFORCE);
	assert_true(p.allow_root);
	assert_int_equal(p.tmpfs_size, 256ull << 20);
	assert_int_equal(count(&p.ro_binds), 3);
	const char *e = plist_next(&p.ro_binds, NULL);
	assert_string_equal(e, "/opt/tools");
	assert_string_equal((e = plist_next(&p.ro_binds, e)), "/srv/data");
	assert_string_equal((e = plist_next(&p.ro_binds, e)), "/usr/share/dict");
	assert_null(plist_next(&p.ro_binds, e));
	assert_true(plist_has(&p.rw_binds, "/srv/scratch"));
	assert_int_equal(count(&p.env_pass), 3);
	assert_true(plist_has(&p.env_pass, "LC_ALL"));
	assert_true(plist_has(&p.env_pass, "http_proxy"));
	assert_true(plist_has(&p.cred_env, "AWS_SECRET_ACCESS_KEY"));
	assert_true(plist_has(&p.cred_files, "/etc/kart/netrc"));
	assert_false(plist_has(&p.cred_files, "/etc/kart"));
	assert_string_equal(p.on_done, "/usr/local/bin/kart-push");
	assert_true(policy_net_allowed(&p, 1000));

	/* A later line replaces a list; the policy copies by value. */
	r = policy_parse_conf(&p, "[sandbox]\nro_binds = /x\nlandlock = off\nallow_root = no\n",
			      "kart.conf", err, sizeof err);
	assert_int_equal(r, 0);
	struct policy q = p;
	assert_int_equal(count(&q.ro_binds), 1);
	assert_true(plist_has(&q.ro_binds, "/x"));
	assert_int_equal(q.landlock, LL_MODE_OFF);
	assert_false(q.allow_root);
}

/* Each kart.conf is refused, and the error holds its want. */
struct bad_conf {
	const char *conf, *want;
};

static void assert_confs_rejected(const struct bad_conf *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct policy p;
		char err[512];
		if (parse(&p, t[i].conf, err, sizeof err) == 0)
			fail_msg("accepted: %s", t[i].conf);
		if (!strstr(err, t[i].want))
			fail_msg("for %s\n  error '%s'\n  lacks '%s'", t[i].conf, err, t[i].want);
	}
}

static void test_errors_name_the_line(void **state)
{
	(void)state;
	static const struct bad_conf cases[] = {
		{"[sandbox]\nlandlock = maybe\n", "kart.conf line 2: landlock = maybe: not a mode"},
		{"[sandbox]\n\nallow_root = sure\n", "kart.conf line 3: allow_root = sure"},
		{"[sandbox]\ntmpfs_size = big\n", "kart.conf line 2: tmpfs_size = big"},
		{"[limits]\nartifacts_files = 0\n", "line 2: artifacts_files = 0: not a number from 1"},
		{"[limits]\nartifacts_depth = 257\n", "line 2: artifacts_depth = 257: not a number from 1 to 256"},
		{"[limits]\nafter_max = 0\n", "line 2: after_max = 0: not a number from 1"},
		{"[sandbox]\nro_binds = /ok, relative/path\n", "line 2: ro_binds: 'relative/path'"},
		{"[sandbox]\nrw_binds = /\n", "line 2: rw_binds: '/'"},
		{"[sandbox]\nrw_binds = /srv/../etc\n", "line 2: rw_binds: '/srv/../etc'"},
		{"[sandbox]\nro_binds = /srv/./x\n", "line 2: ro_binds: '/srv/./x'"},
		{"[sandbox]\nenv_pass = 9LIVES\n", "line 2: env_pass: '9LIVES' is not a variable name"},
		{"[sandbox]\nenv_pass = A-B\n", "line 2: env_pass: 'A-B' is not a variable name"},
		{"[sandbox]\nenv_pass = PATH\n", "line 2: env_pass: 'PATH' is set by the sandbox"},
		{"[network]\ncred_env = KART_SPOOL\n", "line 2: cred_env: 'KART_SPOOL' is set by"},
		{"[network]\ncred_files = netrc\n", "line 2: cred_files: 'netrc'"},
		{"[hooks]\non_done = push.sh\n", "line 2: on_done = push.sh: not an absolute path"},
		{"[hooks]\nbefore = /bin/true\n", "line 2: unknown key 'before' in section [hooks]"},
		{"[sandbox]\nbackend = none\n", "line 2: unknown key 'backend' in section [sandbox]"},
		{"[sandbox]\nlandlock =\n", "line 2: landlock has no value"},
		{"[jail]\n", "line 1: unknown section [jail]"},
		{"[worker]\nresults = everyone\n", "line 2: results = everyone: not owner or group"},
		{"[worker]\nbackend = lxc\n", "line 2: backend = lxc: not a backend (bwrap, container, none or slurm)"},
		{"[container]\ncommand = bin/docker\n", "line 2: command = bin/docker: not a program"},
		{"[container]\ncommand = docker;id\n", "line 2: command = docker;id: not a program"},
		{"[container]\nimage = --privileged\n", "line 2: image = --privileged: not an image"},
		{"[container]\nimage = a b\n", "line 2: image = a b: not an image"},
		{"[container]\nseccomp = maybe\n", "line 2: seccomp = maybe: not yes or no"},
		{"[container]\nruntime = runc\n", "line 2: unknown key 'runtime' in section [container]"},
		{"[sandbox]\nallow_unsandboxed = sure\n", "line 2: allow_unsandboxed = sure"},
		{"[sandbox]\nenv_pass = TOKEN\n[network]\ncred_env = TOKEN\n",
		 "TOKEN is both in [sandbox] env_pass and in [network] cred_env"},
	};
	assert_confs_rejected(cases, ARRAY_SIZE(cases));
}

static void test_env_overrides(void **state)
{
	(void)state;
	struct policy p;
	char err[512] = "";
	setenv("KART_LANDLOCK", "off", 1);
	setenv("KART_ALLOW_ROOT", "yes", 1);
	assert_int_equal(policy_load(&p, NULL, err, sizeof err), 0);
	assert_int_equal(p.landlock, LL_MODE_OFF);
	assert_true(p.allow_root);
	setenv("KART_LANDLOCK", "enforce", 1);
	setenv("KART_ALLOW_ROOT", "0", 1);
	assert_int_equal(policy_load(&p, NULL, err, sizeof err), 0);
	assert_int_equal(p.landlock, LL_MODE_ENFORCE);
	assert_false(p.allow_root);
	setenv("KART_LANDLOCK", "strict", 1);
	assert_int_equal(policy_load(&p, NULL, err, sizeof err), -1);
	assert_non_null(strstr(err, "KART_LANDLOCK=strict"));
	unsetenv("KART_LANDLOCK");
	setenv("KART_ALLOW_ROOT", "perhaps", 1);
	assert_int_equal(policy_load(&p, NULL, err, sizeof err), -1);
	assert_non_null(strstr(err, "KART_ALLOW_ROOT=perhaps"));
	unsetenv("KART_ALLOW_ROOT");
}

/* Backend container: its keys, the defaults, and what the worker needs. */
/* [container] extra_args: engine options kart does not model pass;
 * none that would undo kart's own hardening, in any spelling the CLIs
 * take as one word. */
static void test_container_extra_args(void **state)
{
	(void)state;
	struct policy p;
	char err[512] = "", conf[512];
	assert_int_equal(parse(&p, "[container]\nextra_args = --userns=keep-id, --ulimit=nofile=20000:20000 "
				   "--runtime=runc --init --cap-drop=NET_RAW\n",
			       err, sizeof err),
			 0);
	assert_int_equal(count(&p.container_extra), 5);
	assert_string_equal(plist_next(&p.container_extra, NULL), "--userns=keep-id");
	static const char *const denied[] = {
		"--privileged", "--privileged=true", "--cap-add=SYS_ADMIN", "--cap-add=ALL",
		"--security-opt=seccomp=unconfined", "--security-opt=apparmor=unconfined",
		"--security-opt=no-new-privileges=false", "--network=host", "--net=host",
		"--network=bridge", "--pid=host", "--ipc=host", "--uts=host", "--userns=host",
		"--cgroupns=host", "-v", "-v/:/host", "--volume=/:/host", "--mount=type=bind,src=/,dst=/h",
		"--volumes-from=other", "--device=/dev/sda", "--gpus=all", "--user=0", "-u0",
		"--group-add=0", "--read-only=false", "--tmpfs=/x", "--memory=0", "--pids-limit=-1",
		"--cpus=64", "--sysctl=net.ipv4.ip_forward=1", "--env=A=b", "-eA=b", "--env-host",
		"--name=x", "--label=kart.worker=other", "--entrypoint=/bin/sh", "--rm",
		"--interactive", "-d", "--detach", "--oom-kill-disable", "--preserve-fds=5",
		"--userns", "image:latest", "/bin/sh", "--", "---privileged",
	};
	for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++) {
		snprintf(conf, sizeof conf, "[container]\nextra_args = --init %s\n", denied[i]);
		if (parse(&p, conf, err, sizeof err) != -1)
			fail_msg("extra_args %s was accepted", denied[i]);
		assert_non_null(strstr(err, "refused"));
		/* the word named (a comma ends a word, as a space does) */
		char word[64];
		snprintf(word, sizeof word, "'%.*s'", (int)strcspn(denied[i], ","), denied[i]);
		assert_non_null(strstr(err, word));
		assert_non_null(container_arg_denied(denied[i]));
	}
	assert_null(container_arg_denied("--userns=keep-id"));
	assert_null(container_arg_denied("--ulimit=nproc=32768:32768"));
	assert_null(container_arg_denied("--pull=never"));
	assert_non_null(strstr(container_arg_denied("--userns=host"), "user namespace"));
}

static void test_container_backend(void **state)
{
	(void)state;
	struct policy p;
	char err[512] = "";
	assert_int_equal(policy_load(&p, NULL, err, sizeof err), 0);
	assert_string_equal(p.container_cmd, "docker");
	assert_true(p.container_seccomp);
	assert_false(p.allow_unsandboxed);
	assert_int_equal(parse(&p, "[worker]\nbackend = container\n", err, sizeof err), 0);
	assert_int_equal(p.backend, BACKEND_CONTAINER);
	assert_string_equal(backend_name(p.backend), "container");
	/* No image: refused, naming what to set. */
	assert_int_equal(policy_backend_check(&p, NULL, err, sizeof err), -1);
	assert_non_null(strstr(err, "[container] image"));
	assert_int_equal(parse(&p, "[worker]\nbackend = container\n[container]\ncommand = /usr/bin/podman\n"
				   "image = registry.example/team/img:1.2@sha256:ab12\nseccomp = no\n",
			       err, sizeof err),
			 0);
	assert_string_equal(p.container_cmd, "/usr/bin/podman");
	assert_string_equal(p.container_image, "registry.example/team/img:1.2@sha256:ab12");
	assert_false(p.container_seccomp);
	assert_int_equal(policy_backend_check(&p, NULL, err, sizeof err), 0);
	setenv("KART_BACKEND", "container", 1);
	setenv("KART_CONTAINER_CMD", "nerdctl", 1);
	setenv("KART_CONTAINER_IMAGE", "alpine:3", 1);
	assert_int_equal(policy_load(&p, NULL, err, sizeof err), 0);
	assert_int_equal(p.backend, BACKEND_CONTAINER);
	assert_string_equal(p.container_cmd, "nerdctl");
	assert_string_equal(p.container_image, "alpine:3");
	setenv("KART_CONTAINER_IMAGE", "-v/:/host", 1);
	assert_int_equal(policy_load(&p, NULL, err, sizeof err), -1);
	assert_non_null(strstr(err, "KART_CONTAINER_IMAGE=-v/:/host"));
	unsetenv("KART_BACKEND");
	unsetenv("KART_CONTAINER_CMD");
	unsetenv("KART_CONTAINER_IMAGE");
}

/* policy_describe of conf, parsed, with the credential variable var set
 * in the environment meanwhile: its value must not show. */
static json_t *describe(const char *conf, const char *var)
{
	struct policy p;
	char err[512];
	if (parse(&p, conf, err, sizeof err) != 0)
		fail_msg("parse: %s", err);
	setenv(var, "do-not-show-me", 1);
	char *t = policy_describe(&p);
	unsetenv(var);
	assert_non_null(t);
	assert_null(strstr(t, "do-not-show-me"));
	json_t *o = json_loads(t, 0, NULL);
	free(t);
	assert_non_null(o);
	return o;
}

/* kart doctor's view: the effective values, credentials by name only. */
static void test_describe(void **state)
{
	(void)state;
	json_t *o = describe("[sandbox]\nlandlock = enforce\nallow_root = yes\n"
			     "[network]\ncred_env = API_TOKEN\n[hooks]\non_done = /bin/true\n"
			     "[limits]\npids_max = 100\n[lane.batch]\npids_max = 10\n",
			     "API_TOKEN");
	assert_string_equal(json_string_value(json_object_get(o, "backend")), "bwrap");
	json_t *sb = json_object_get(o, "sandbox");
	assert_string_equal(json_string_value(json_object_get(sb, "landlock")), "enforce");
	assert_true(json_is_true(json_object_get(sb, "allow_root")));
	assert_int_equal(json_integer_value(json_object_get(sb, "tmpfs_size")), 256 << 20);
	json_t *ce = json_object_get(json_object_get(o, "network"), "cred_env");
	assert_int_equal(json_array_size(ce), 1);
	assert_string_equal(json_string_value(json_array_get(ce, 0)), "API_TOKEN");
	assert_string_equal(json_string_value(json_object_get(json_object_get(o, "hooks"), "on_done")),
			    "/bin/true");
	json_t *lanes = json_object_get(json_object_get(o, "limits"), "lanes");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(lanes, "fast"), "pids_max")),
			 100);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(lanes, "batch"), "pids_max")),
			 10);
	/* The built-in default (policy_load fits it under a lower ceiling;
	 * policy_parse_conf alone does not: test_space.c checks that). */
	assert_int_equal(json_integer_value(json_object_get(json_object_get(lanes, "batch"), "pids_default")),
			 512);
	json_decref(o);
}

/* [kind.NAME]: a runner, extensions, net, credentials, endpoint, model;
 * the llm kind's runner defaults to kart-llm (found like kart-launch). */
static void test_kind_sections(void **state)
{
	(void)state;
	struct policy p;
	char err[512];
	int r = parse(&p,
		      "[kind.python]\n"
		      "runner = /usr/bin/python3\n"
		      "extensions = .py, .pyw\n"
		      "[network]\n"
		      "allow_uids = 1000\n"
		      "[kind.llm]\n"
		      "extensions = .prompt\n"
		      "net = yes\n"
		      "credentials = KART_LLM_API_KEY OPENAI_API_KEY\n"
		      "endpoint = http://127.0.0.1:8080/v1\n"
		      "endpoint_uid = 0\n"
		      "model = some-model\n"
		      "[kind.python]\n"
		      "net = no\n",
		      err, sizeof err);
	if (r != 0)
		fail_msg("%s", err);
	assert_int_equal(p.n_kinds, 2);
	const struct kind *py = policy_kind(&p, "python"), *llm = policy_kind(&p, "llm");
	assert_non_null(py);
	assert_non_null(llm);
	assert_null(policy_kind(&p, "node"));
	assert_string_equal(py->runner, "/usr/bin/python3");
	assert_int_equal(py->n_ext, 2);
	assert_string_equal(py->ext[1], ".pyw");
	assert_false(py->net);
	assert_int_equal(py->n_cred, 0);
	assert_true(llm->net);
	assert_int_equal(llm->n_cred, 2);
	assert_string_equal(llm->cred[0], "KART_LLM_API_KEY");
	assert_string_equal(llm->cred[1], "OPENAI_API_KEY");
	assert_string_equal(llm->endpoint, "http://127.0.0.1:8080/v1");
	assert_string_equal(llm->model, "some-model");
	/* No runner given: kart-llm, beside this binary or in LIBEXECDIR. */
	char want[4096];
	find_libexec("kart-llm", want, sizeof want);
	assert_string_equal(llm->runner, want);
	assert_non_null(strstr(llm->runner, "/kart-llm"));
	/* By extension: the end of the name, longer than the extension. */
	assert_ptr_equal(policy_kind_by_ext(&p, "hello.py"), py);
	assert_ptr_equal(policy_kind_by_ext(&p, "a.b.pyw"), py);
	assert_ptr_equal(policy_kind_by_ext(&p, "ask.prompt"), llm);
	assert_null(policy_kind_by_ext(&p, "hello.pyc"));
	assert_null(policy_kind_by_ext(&p, "hello.PY"));
	assert_null(policy_kind_by_ext(&p, "py"));
	/* Copied by value like the rest of the policy. */
	struct policy q = p;
	assert_string_equal(policy_kind(&q, "llm")->model, "some-model");
}

static void test_kind_errors(void **state)
{
	(void)state;
	static const struct bad_conf cases[] = {
		{"[kind.Python]\nrunner = /usr/bin/python3\n", "line 1: [kind.Python]: a kind's name"},
		{"[kind.]\n", "line 1: [kind.]: a kind's name"},
		{"[kind.a/b]\n", "line 1: [kind.a/b]"},
		{"[kind.abcdefghijabcdefghijabcdefghij12]\n", "line 1: [kind.abcdefghij"},
		{"[kind.py]\nrunner = python3\n", "line 2: runner = python3: not an absolute path"},
		{"[kind.py]\nrunner = /usr/bin/../bin/python3\n", "line 2: runner = /usr/bin/../bin"},
		{"[kind.py]\nrunner = /usr/bin/env python3\n", "line 2: runner = /usr/bin/env python3"},
		{"[kind.py]\nrunner = /usr/bin/python3\nextensions = py\n",
		 "line 3: extensions: 'py' is not an extension"},
		{"[kind.py]\nrunner = /usr/bin/python3\nextensions = .p/y\n", "line 3: extensions: '.p/y'"},
		{"[kind.py]\nrunner = /usr/bin/python3\nextensions = .\n", "line 3: extensions: '.'"},
		{"[kind.py]\nrunner = /x\nextensions = .a .b .c .d .e .f .g .h .i\n",
		 "line 3: extensions: more than 8"},
		{"[kind.llm]\nnet = sometimes\n", "line 2: net = sometimes: not yes or no"},
		{"[kind.llm]\ncredentials = 9KEY\n", "line 2: credentials: '9KEY' is not a variable name"},
		{"[kind.llm]\ncredentials = KART_LLM_ENDPOINT\n",
		 "line 2: credentials: 'KART_LLM_ENDPOINT' is set by the sandbox"},
		{"[kind.llm]\ncredentials = PATH\n", "line 2: credentials: 'PATH' is set by the sandbox"},
		{"[kind.llm]\ncredentials = KART_LLM_SOCKET\n",
		 "line 2: credentials: 'KART_LLM_SOCKET' is set by the sandbox"},
		{"[kind.llm]\nendpoint = 127.0.0.1:8080\n", "line 2: endpoint = 127.0.0.1:8080: not an http"},
		{"[kind.llm]\nmodel = two words\n", "line 2: model = two words"},
		/* The forwarder proves its peer: over http://, by endpoint_uid. */
		{"[kind.llm]\ncredentials = K\nendpoint = http://127.0.0.1:8080/v1\n",
		 "[kind.llm]: endpoint http://127.0.0.1:8080/v1 is http://, and its forwarder sends the "
		 "key only to a peer it can prove: set endpoint_uid"},
		{"[kind.llm]\ncredentials = K\nendpoint = https://api.example/v1\nendpoint_uid = 0\n",
		 "endpoint_uid and endpoint_socket are for an http:// endpoint"},
		{"[kind.llm]\nendpoint = http://127.0.0.1:1/v1\nendpoint_uid = 0\n",
		 "endpoint_uid and endpoint_socket are for the forwarder of credentials"},
		{"[kind.llm]\nendpoint_uid = no-such-user-35\n",
		 "line 2: endpoint_uid = no-such-user-35: not a user"},
		{"[kind.llm]\nendpoint_socket = run/llm.sock\n",
		 "line 2: endpoint_socket = run/llm.sock: not an absolute path"},
		{"[kind.llm]\ntemperature = 0\n",
		 "line 2: unknown key 'temperature' in section [kind.llm]"},
		{"[kind.ruby]\nextensions = .rb\n", "kart.conf: [kind.ruby] has no runner"},
		{"[kind.a]\nrunner = /a\nextensions = .x\n[kind.b]\nrunner = /b\nextensions = .y .x\n",
		 "extension .x is in both [kind.a] and [kind.b]"},
		{"[sandbox]\nenv_pass = KEY\n[kind.llm]\ncredentials = KEY\n",
		 "KEY is a credential of [kind.llm] and also in [sandbox] env_pass"},
		{"[network]\ncred_env = KEY\n[kind.llm]\ncredentials = KEY\n",
		 "KEY is a credential of [kind.llm] and also in [network] cred_env"},
		{"[kind.runner]\nrunner =\n", "line 2: runner has no value"},
		/* A credential is added by the worker's forwarder, to requests
		 * to the endpoint: never handed to a task. */
		{"[kind.py]\nrunner = /usr/bin/python3\ncredentials = PY_KEY\n",
		 "[kind.py] has credentials but no endpoint"},
	};
	assert_confs_rejected(cases, ARRAY_SIZE(cases));
	/* More than KIND_MAX kinds. */
	char conf[4096] = "";
	for (int k = 0; k <= KIND_MAX; k++)
		snprintf(conf + strlen(conf), sizeof conf - strlen(conf), "[kind.k%d]\nrunner = /bin/k\n", k);
	struct policy p;
	char err[512];
	assert_int_equal(parse(&p, conf, err, sizeof err), -1);
	assert_non_null(strstr(err, "more than 16 [kind.*] sections"));
}

/* kart doctor lists the kinds; a credential by its name only. */
static void test_describe_kinds(void **state)
{
	(void)state;
	json_t *o = describe("[kind.node]\nrunner = /usr/bin/node\nextensions = .js .mjs\n"
			     "[kind.llm]\nrunner = /opt/kart/kart-llm\nnet = yes\n"
			     "credentials = LLM_KEY\nendpoint = http://127.0.0.1:9/v1\nendpoint_uid = 0\n"
			     "endpoint_socket = /run/llm/api.sock\nmodel = m1\n",
			     "LLM_KEY");
	json_t *k = json_object_get(o, "kinds");
	assert_int_equal(json_object_size(k), 2);
	json_t *node = json_object_get(k, "node"), *llm = json_object_get(k, "llm");
	assert_string_equal(json_string_value(json_object_get(node, "runner")), "/usr/bin/node");
	assert_int_equal(json_array_size(json_object_get(node, "extensions")), 2);
	assert_true(json_is_false(json_object_get(node, "net")));
	assert_true(json_is_null(json_object_get(node, "endpoint")));
	assert_true(json_is_true(json_object_get(llm, "net")));
	assert_string_equal(json_string_value(json_array_get(json_object_get(llm, "credentials"), 0)),
			    "LLM_KEY");
	assert_string_equal(json_string_value(json_object_get(llm, "model")), "m1");
	assert_int_equal(json_integer_value(json_object_get(llm, "endpoint_uid")), 0);
	assert_string_equal(json_string_value(json_object_get(llm, "endpoint_socket")), "/run/llm/api.sock");
	assert_true(json_is_null(json_object_get(node, "endpoint_uid")));
	json_decref(o);
}

/* Every key of the table lands in its own field, each with a value of
 * its own (a row naming the wrong field fails here), and a bad value's
 * error names the key and what it wants. */
static void test_key_table(void **state)
{
	(void)state;
	struct policy p;
	char err[512];
	int r = parse(&p,
		      "[worker]\n"
		      "backend = none\nslots = 7\nbatch_slots = 5\nterm_grace = 42s\n"
		      "min_free = 32M\nresults = group\nretries = 9\n"
		      "[limits]\n"
		      "leaf_memory = no\npriority_allow = 0, @0\nslots_per_user = 3\ncgroup = off\n"
		      "cgroup_parent = /k.slice\nrlimit_as = yes\nkill_grace = 6s\nkill_grace_max = 7m\n"
		      "timeout_default = 11m\ntimeout_max = 13h\noutput_default = 3M\noutput_max = 4M\n"
		      "task_max = 5M\nartifacts_max = 6M\nartifacts_files = 17\nartifacts_depth = 19\n"
		      "[network]\n"
		      "allow_uids = 4242\nallow_groups = 0\ncred_env = TOK\ncred_files = /etc/tok\n"
		      "[sandbox]\n"
		      "landlock = off\nallow_root = yes\ntmpfs_size = 9M\nro_binds = /ro\nrw_binds = /rw\n"
		      "task_binds = no\ntask_bind_roots = /home\nenv_deny = SECRET_*\nenv_pass = TZ\n"
		      "allow_unsandboxed = yes\n"
		      "[container]\n"
		      "command = podman\nimage = alpine:3\nextra_args = --init\nseccomp = no\n"
		      "[hooks]\n"
		      "on_done = /bin/true\n",
		      err, sizeof err);
	if (r != 0)
		fail_msg("%s", err);
	assert_int_equal(p.backend, BACKEND_NONE);
	assert_int_equal(p.slots[0], 7);
	assert_int_equal(p.slots[1], 5);
	assert_int_equal(p.term_grace_s, 42);
	assert_int_equal(p.min_free_bytes, 32ull << 20);
	assert_true(p.results_group);
	assert_int_equal(p.retries_default, 9);
	assert_false(p.leaf_memory);
	assert_int_equal(p.n_prio_uids, 1);
	assert_int_equal(p.n_prio_gids, 1);
	assert_int_equal(p.slots_per_user, 3);
	assert_int_equal(p.cgroup, CGROUP_OFF);
	assert_string_equal(p.cgroup_parent, "/k.slice");
	assert_true(p.rlimit_as);
	assert_int_equal(p.kill_grace_s, 6);
	assert_int_equal(p.kill_grace_max_s, 7 * 60);
	assert_int_equal(p.timeout_default_s, 11 * 60);
	assert_false(p.builtin_timeout);
	assert_int_equal(p.timeout_max_s, 13 * 3600);
	assert_int_equal(p.output_default, 3ull << 20);
	assert_int_equal(p.output_max, 4ull << 20);
	assert_int_equal(p.task_max_bytes, 5ull << 20);
	assert_int_equal(p.artifacts_max, 6ull << 20);
	assert_int_equal(p.artifacts_files, 17);
	assert_int_equal(p.artifacts_depth, 19);
	assert_true(policy_net_allowed(&p, 4242));
	assert_int_equal(p.n_net_gids, 1);
	assert_true(plist_has(&p.cred_env, "TOK"));
	assert_true(plist_has(&p.cred_files, "/etc/tok"));
	assert_int_equal(p.landlock, LL_MODE_OFF);
	assert_true(p.allow_root);
	assert_int_equal(p.tmpfs_size, 9ull << 20);
	assert_true(plist_has(&p.ro_binds, "/ro") && !plist_has(&p.ro_binds, "/rw"));
	assert_true(plist_has(&p.rw_binds, "/rw") && !plist_has(&p.rw_binds, "/ro"));
	assert_false(p.task_binds);
	assert_true(plist_has(&p.task_bind_roots, "/home"));
	assert_int_equal(count(&p.env_deny), 1);
	assert_true(plist_has(&p.env_deny, "SECRET_*"));
	assert_true(plist_has(&p.env_pass, "TZ"));
	assert_true(p.allow_unsandboxed);
	assert_string_equal(p.container_cmd, "podman");
	assert_string_equal(p.container_image, "alpine:3");
	assert_true(plist_has(&p.container_extra, "--init"));
	assert_false(p.container_seccomp);
	assert_string_equal(p.on_done, "/bin/true");
	/* timeout_max alone leaves the built-in default in place */
	assert_int_equal(parse(&p, "[limits]\ntimeout_max = 2h\n", err, sizeof err), 0);
	assert_true(p.builtin_timeout);
	assert_int_equal(p.timeout_max_s, 7200);

	static const struct {
		const char *conf, *want;
	} bad[] = {
		{"[worker]\nslots = 4097\n", "line 2: slots = 4097: not a number from 0 to 4096"},
		{"[worker]\nbatch_slots = -1\n", "line 2: batch_slots = -1: not a number from 0 to 4096"},
		{"[worker]\nretries = 101\n", "line 2: retries = 101: not a number from 0 to 100"},
		{"[worker]\nterm_grace = 2h\n", "line 2: term_grace = 2h: not a duration up to 1h"},
		{"[worker]\nmin_free = lots\n", "line 2: min_free = lots: not a size, a percentage"},
		{"[limits]\nslots_per_user = x\n", "line 2: slots_per_user = x: not a number from 0 to 4096"},
		{"[limits]\nleaf_memory = maybe\n", "line 2: leaf_memory = maybe: not yes or no"},
		{"[limits]\nrlimit_as = 2\n", "line 2: rlimit_as = 2: not yes or no"},
		{"[limits]\ndefaults = few\n", "line 2: defaults = few: not shared or none"},
		{"[limits]\ncgroup = on\n", "line 2: cgroup = on: not require, auto or off"},
		{"[limits]\ncgroup_parent = k.slice\n", "line 2: cgroup_parent = k.slice: not a cgroup path"},
		{"[limits]\nkill_grace_max = 2h\n", "line 2: kill_grace_max = 2h: not a duration up to 1h (0,"},
		{"[limits]\ntimeout_max = 0\n", "line 2: timeout_max = 0: not a duration (90,"},
		{"[limits]\noutput_max = 0\n", "line 2: output_max = 0: not a size"},
		{"[limits]\ntask_max = big\n", "line 2: task_max = big: not a size"},
		{"[sandbox]\ntask_binds = maybe\n", "line 2: task_binds = maybe: not yes or no"},
		{"[sandbox]\nenv_deny = A-B*\n", "line 2: env_deny: 'A-B*' is not a variable name (or PREFIX*)"},
		{"[network]\nallow_uids = bob\n", "line 2: 'bob' is not a uid"},
		{"[lane.fast]\nslots = 2\n", "line 2: unknown key 'slots' in section [lane.fast]"},
		{"[worker]\nmemory_max = 1G\n", "line 2: unknown key 'memory_max' in section [worker]"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		if (parse(&p, bad[i].conf, err, sizeof err) == 0)
			fail_msg("accepted: %s", bad[i].conf);
		if (!strstr(err, bad[i].want))
			fail_msg("for %s\n  error '%s'\n  lacks '%s'", bad[i].conf, err, bad[i].want);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_defaults, clean_env),
		cmocka_unit_test_setup(test_artifacts_keys, clean_env),
		cmocka_unit_test_setup(test_sandbox_section, clean_env),
		cmocka_unit_test_setup(test_errors_name_the_line, clean_env),
		cmocka_unit_test_setup(test_env_overrides, clean_env),
		cmocka_unit_test_setup(test_describe, clean_env),
		cmocka_unit_test_setup(test_kind_sections, clean_env),
		cmocka_unit_test_setup(test_kind_errors, clean_env),
		cmocka_unit_test_setup(test_describe_kinds, clean_env),
		cmocka_unit_test_setup(test_container_backend, clean_env),
		cmocka_unit_test_setup(test_container_extra_args, clean_env),
		cmocka_unit_test_setup(test_key_table, clean_env),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
