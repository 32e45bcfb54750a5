/* sandbox.c - the command lines of the backends that run a task as a
 * child of the worker: the bwrap profile (sandbox_bwrap), kart-launch's
 * steps alone for backend none (sandbox_launch), the container CLI's
 * (sandbox_container). Which one runs is the backend's (src/backend/):
 * nothing here asks the policy which backend it has. */
#define _GNU_SOURCE
#include "sandbox.h"

#include <sys/stat.h>

/* The parts of /etc that ordinary programs read: name service, the
 * dynamic linker, time zone, locale and alternatives (python3, awk...). */
static const char *const etc_ro[] = {
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/ld.so.cache",
	"/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/alternatives",
	"/etc/os-release", "/etc/mime.types", "/etc/protocols", "/etc/services",
	"/etc/ssl", "/etc/ca-certificates", "/etc/host.conf", "/etc/hosts",
};
/* Only where the task has network. */
static const char *const etc_net[] = {"/etc/resolv.conf", "/etc/gai.conf"};
static const char *const usr_links[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32"};

/* NAME=value of the worker's environment, NULL if unset. */
static const char *host_var(char *const *env, const char *name)
{
	size_t l = strlen(name);
	for (; env && *env; env++)
		if (strncmp(*env, name, l) == 0 && (*env)[l] == '=')
			return *env;
	return NULL;
}

/* NAME is a credential of some kind: only its forwarder has it. */
static bool kind_cred(const struct policy *pol, const char *name)
{
	for (int i = 0; i < pol->n_kinds; i++)
		for (int j = 0; j < pol->kinds[i].n_cred; j++)
			if (strcmp(pol->kinds[i].cred[j], name) == 0)
				return true;
	return false;
}

/* The task's kind (task_resolve_kind), NULL for none. */
static const struct kind *req_kind(const struct sandbox_req *req)
{
	return req->spec->kind[0] ? policy_kind(req->pol, req->spec->kind) : NULL;
}

/* A runner outside the system directories is bound at its own path
 * (read-only) and given its own Landlock rule: a runner in a build tree,
 * a venv or /opt. */
static const char *kind_runner_bound(const struct sandbox_req *req)
{
	const struct kind *k = req_kind(req);
	if (!k)
		return NULL;
	if (strncmp(k->runner, "/usr/", 5) == 0)
		return NULL;
	for (size_t i = 0; i < ARRAY_SIZE(usr_links); i++) {
		size_t l = strlen(usr_links[i]);
		if (k->runner[0] == '/' && strncmp(k->runner + 1, usr_links[i], l) == 0 &&
		    k->runner[1 + l] == '/')
			return NULL;
	}
	return k->runner;
}

/* What a kind gives its tasks: where to send requests, and the socket of
 * the forwarder that adds the kind's credentials. Never the credentials:
 * the runner and the host-side bwrap run as the submitter, who could
 * read them there (/proc/PID/environ). */
static void env_kind(const struct sandbox_req *req, struct strv *envp, bool host)
{
	const struct kind *k = req_kind(req);
	if (!k)
		return;
	if (k->endpoint[0])
		strv_addf(envp, "KART_LLM_ENDPOINT=%s", k->endpoint);
	if (k->model[0])
		strv_addf(envp, "KART_LLM_MODEL=%s", k->model);
	if (req->cred_socket)
		strv_addf(envp, "KART_LLM_SOCKET=%s", host ? req->cred_socket : SANDBOX_CRED_SOCKET);
}

/* Through envp only: never as --setenv, where argv (ps, logs) shows it.
 * host: the task sees the host's paths (no mount namespace of its own). */
static void env_policy(const struct sandbox_req *req, struct strv *envp, bool host)
{
	const char *e, *kv;
	for (e = NULL; (e = plist_next(&req->pol->env_pass, e));)
		if ((kv = host_var(req->host_env, e)))
			strv_add(envp, kv);
	if (req->spec->net)
		for (e = NULL; (e = plist_next(&req->pol->cred_env, e));)
			if ((kv = host_var(req->host_env, e)))
				strv_add(envp, kv);
	env_kind(req, envp, host);
}

/* The task's env= sets NAME (PATH, HOME, TMPDIR and LANG it may). */
static bool task_sets(const struct task_spec *spec, const char *name)
{
	size_t l = strlen(name);
	for (const char *e = NULL; (e = task_env_next(spec, e));)
		if (strncmp(e, name, l) == 0 && e[l] == '=')
			return true;
	return false;
}

const char *sandbox_home(const struct sandbox_req *req)
{
	const char *h = req->home;
	if (!h || h[0] != '/')
		return NULL;
	size_t hl = strlen(h);
	while (hl > 1 && h[hl - 1] == '/')
		hl--;
	for (int i = 0; i < req->spec->n_binds; i++) {
		const char *p = req->spec->binds[i].path;
		size_t pl = strlen(p);
		if (pl <= hl && strncmp(p, h, pl) == 0 && (h[pl] == '/' || pl == hl))
			return h;
	}
	return NULL;
}

static void env_fixed(const struct sandbox_req *req, struct strv *envp, const char *kv)
{
	const char *eq = strchr(kv, '=');
	char name[16];
	snprintf(name, sizeof name, "%.*s", (int)(eq - kv), kv);
	if (!task_sets(req->spec, name))
		strv_add(envp, kv);
}

/* Through envp only, as the policy's: a value of env= is the
 * submitter's, maybe a secret, and argv is for everyone to see. */
static void env_task(const struct sandbox_req *req, struct strv *envp)
{
	for (const char *e = NULL; (e = task_env_next(req->spec, e));)
		strv_add(envp, e);
}

static void env_common(const struct sandbox_req *req, struct strv *envp, const char *home,
		       const char *tmp, const char *out, bool host)
{
	char buf[PATH_MAX + 16];
	const char *own = sandbox_home(req);
	env_fixed(req, envp, "PATH=/usr/local/bin:/usr/bin:/bin");
	snprintf(buf, sizeof buf, "HOME=%s", own ? own : home);
	env_fixed(req, envp, buf);
	snprintf(buf, sizeof buf, "TMPDIR=%s", tmp);
	env_fixed(req, envp, buf);
	env_fixed(req, envp, "LANG=C.UTF-8");
	strv_addf(envp, "KART_TASK_ID=%s", req->task_id);
	strv_addf(envp, "KART_ATTEMPT=%d", req->attempt);
	strv_addf(envp, "KART_OUTDIR=%s", out);
	if (req->n_inputs)
		strv_addf(envp, "KART_INPUTS=%s", host ? req->in_dir : SANDBOX_INPUTS);
	env_policy(req, envp, host);
	env_task(req, envp);
}

static void ll_rule(struct strv *argv, bool rw, const char *path)
{
	strv_add(argv, rw ? "--rw" : "--ro");
	strv_add(argv, path);
}

static void ll_rules_plist(struct strv *argv, bool rw, const struct plist *l)
{
	for (const char *e = NULL; (e = plist_next(l, e));)
		ll_rule(argv, rw, e);
}

/* What kart-launch's Landlock ruleset allows: exactly what the sandbox
 * shows (bwrap: its mounts, by their paths inside), or, where the task
 * sees the host's paths (host: backend none), the host paths a task
 * needs. The system read and execute; the task's own directories every
 * right. */
static void ll_rules(const struct sandbox_req *req, struct strv *argv, bool host)
{
	const struct policy *pol = req->pol;
	strv_addf(argv, "--landlock=%s", ll_mode_name(pol->landlock));
	if (pol->landlock == LL_MODE_OFF)
		return;
	if (req->spec->net)
		strv_add(argv, "--tcp");
	ll_rule(argv, false, "/usr");
	for (size_t i = 0; i < ARRAY_SIZE(usr_links); i++) {
		char link[64];
		snprintf(link, sizeof link, "/%s", usr_links[i]);
		ll_rule(argv, false, link); /* absent ones get no rule */
	}
	for (size_t i = 0; i < ARRAY_SIZE(etc_ro); i++)
		ll_rule(argv, false, etc_ro[i]);
	if (req->spec->net)
		for (size_t i = 0; i < ARRAY_SIZE(etc_net); i++)
			ll_rule(argv, false, etc_net[i]);
	ll_rule(argv, false, "/proc");
	ll_rule(argv, false, host ? req->task_path : SANDBOX_TASK);
	if (!host) /* no launcher (backend none): nothing to read of it */
		ll_rule(argv, false, SANDBOX_LAUNCH);
	const char *runner = kind_runner_bound(req);
	if (runner)
		ll_rule(argv, false, runner);
	ll_rules_plist(argv, false, &pol->ro_binds);
	if (req->spec->net)
		ll_rules_plist(argv, false, &pol->cred_files);
	ll_rules_plist(argv, true, &pol->rw_binds);
	/* The task's own binds, with the access they were bound with. */
	for (int i = 0; i < req->spec->n_binds; i++)
		ll_rule(argv, req->spec->binds[i].mode != BIND_RO, req->spec->binds[i].path);
	/* after='s inputs: read only, where they are bound (host: the links'
	 * directory and the upstreams' outputs themselves). */
	if (req->n_inputs && !host)
		ll_rule(argv, false, SANDBOX_INPUTS);
	for (int i = 0; host && i < req->n_inputs; i++) {
		if (req->inputs[i].out_path)
			ll_rule(argv, false, req->inputs[i].out_path);
		if (req->inputs[i].stdout_path)
			ll_rule(argv, false, req->inputs[i].stdout_path);
	}
	if (host && req->n_inputs)
		ll_rule(argv, false, req->in_dir);
	if (host) {
		/* The host's /dev and /tmp are shared: only the harmless
		 * devices, and a private TMPDIR. */
		static const char *const devs[] = {"/dev/null", "/dev/zero", "/dev/full",
						   "/dev/random", "/dev/urandom"};
		for (size_t i = 0; i < ARRAY_SIZE(devs); i++)
			ll_rule(argv, true, devs[i]);
		ll_rule(argv, true, req->work_dir);
		if (req->tmp_dir)
			ll_rule(argv, true, req->tmp_dir);
		if (req->out_dir)
			ll_rule(argv, true, req->out_dir);
	} else {
		/* bwrap's own /dev (a tmpfs with the safe nodes), tmpfs. */
		ll_rule(argv, true, "/dev");
		ll_rule(argv, true, "/tmp");
		ll_rule(argv, true, SANDBOX_WORK);
		if (req->out_dir)
			ll_rule(argv, true, SANDBOX_OUT);
	}
}

/* host: no bwrap around it (backend none), so the launcher's steps load
 * the filter themselves (--seccomp-fd), and see the host's paths. */
static void launcher_tail(const struct sandbox_req *req, struct strv *argv, const char *launch,
			  const char *task, bool host)
{
	const char *targv[4];
	strv_add(argv, launch);
	strv_addf(argv, "--status-fd=%d", SANDBOX_STATUS_FD);
	if (req->seccomp && host)
		strv_addf(argv, "--seccomp-fd=%d", SANDBOX_SECCOMP_FD);
	for (char *const *o = req->launch_opts; o && *o; o++)
		strv_add(argv, *o);
	ll_rules(req, argv, host);
	strv_add(argv, "--");
	task_argv(req->spec, task, targv);
	for (int i = 0; targv[i]; i++)
		strv_add(argv, targv[i]);
}

/* A host path in a --mount option: its commas would split it. */
static int mount_path_ok(const char *p, char *err, size_t errlen)
{
	if (p[0] == '/' && !strpbrk(p, ",\n"))
		return 0;
	snprintf(err, errlen, "the path %.200s cannot be given to the container CLI's --mount", p);
	return -1;
}

/* Backend container: one fresh container per attempt, named, removed
 * by the worker once it has ended (not --rm: the runtime's OOMKilled is
 * read first), with nothing of the host but the task file, its work
 * directory and its $KART_OUTDIR. Every value that is not secret is in
 * argv. The policy's variables are not: an engine records the value of
 * every --env it is given, even one given by name (docker inspect shows
 * Config.Env), so they reach the container on its standard input, read
 * by its shell before the task starts (container_env_input). */
char *container_env_input(const struct strv *named)
{
	struct strv lines = {0};
	size_t len = 1;
	for (size_t i = 0; i < named->n; i++) {
		const char *kv = named->v[i], *eq = strchr(kv, '=');
		if (!eq || strncmp(kv, "KART_LLM_ENDPOINT=", 18) == 0 ||
		    strncmp(kv, "KART_LLM_MODEL=", 15) == 0 || strncmp(kv, "KART_LLM_SOCKET=", 16) == 0)
			continue;
		/* Single quotes hold anything but a single quote: '\'' */
		size_t qn = 0;
		for (const char *c = eq + 1; *c; c++)
			qn += *c == '\'' ? 4 : 1;
		char *v = xmalloc(qn + 1), *o = v;
		for (const char *c = eq + 1; *c; c++) {
			if (*c == '\'') {
				memcpy(o, "'\\''", 4);
				o += 4;
			} else {
				*o++ = *c;
			}
		}
		*o = '\0';
		strv_addf(&lines, "%.*s='%s'\n", (int)(eq - kv), kv, v);
		explicit_bzero(v, qn);
		free(v);
		len += strlen(lines.v[lines.n - 1]);
	}
	char *out = xmalloc(len), *o = out;
	for (size_t i = 0; i < lines.n; i++) {
		size_t l = strlen(lines.v[i]);
		memcpy(o, lines.v[i], l);
		o += l;
		explicit_bzero(lines.v[i], l);
	}
	*o = '\0';
	strv_free(&lines);
	return out;
}

/* A kind the policy no longer has (a SIGHUP since the task was read):
 * -1, said in err. */
static int kind_check(const struct sandbox_req *req, char *err, size_t errlen)
{
	if (req->spec->kind[0] && !req_kind(req)) {
		snprintf(err, errlen, "the policy no longer has kind %s", req->spec->kind);
		return -1;
	}
	return 0;
}

int sandbox_container(const struct sandbox_req *req, struct strv *argv, struct strv *envp,
		      char *err, size_t errlen)
{
	const struct policy *pol = req->pol;
	const struct task_spec *spec = req->spec;
	if (kind_check(req, err, errlen) < 0)
		return -1;
	if (mount_path_ok(req->task_path, err, errlen) < 0 ||
	    mount_path_ok(req->work_dir, err, errlen) < 0 ||
	    (req->out_dir && mount_path_ok(req->out_dir, err, errlen) < 0))
		return -1;
	strv_add(argv, pol->container_cmd);
	strv_add(argv, "run");
	strv_add(argv, "--name");
	strv_add(argv, req->container_name);
	if (req->container_label) {
		strv_add(argv, "--label");
		strv_addf(argv, "kart.worker=%s", req->container_label);
	}
	strv_add(argv, "--read-only");
	strv_add(argv, "--cap-drop");
	strv_add(argv, "ALL");
	strv_add(argv, "--security-opt");
	strv_add(argv, "no-new-privileges");
	if (req->seccomp) {
		strv_add(argv, "--security-opt");
		strv_addf(argv, "seccomp=/dev/fd/%d", SANDBOX_SECCOMP_FD);
	}
	if (!spec->net) {
		/* With net, the engine's default network. */
		strv_add(argv, "--network");
		strv_add(argv, "none");
	}
	strv_add(argv, "--hostname");
	strv_add(argv, "kart");
	strv_add(argv, "--user");
	strv_addf(argv, "%u:%u", (unsigned)req->run_uid, (unsigned)req->run_gid);
	strv_add(argv, "--tmpfs");
	strv_addf(argv, "/tmp:rw,nosuid,nodev,size=%llu",
		  (unsigned long long)(pol->tmpfs_size ? pol->tmpfs_size : SANDBOX_CONTAINER_TMP));
	strv_add(argv, "--mount");
	strv_addf(argv, "type=bind,source=%s,target=%s,readonly", req->task_path, SANDBOX_TASK);
	strv_add(argv, "--mount");
	strv_addf(argv, "type=bind,source=%s,target=%s", req->work_dir, SANDBOX_WORK);
	if (req->out_dir) {
		strv_add(argv, "--mount");
		strv_addf(argv, "type=bind,source=%s,target=%s", req->out_dir, SANDBOX_OUT);
	}
	/* A kind's runner outside /usr comes from the host, as with bwrap;
	 * one under /usr is the image's. */
	const char *runner = kind_runner_bound(req);
	if (runner) {
		if (mount_path_ok(runner, err, errlen) < 0)
			return -1;
		strv_add(argv, "--mount");
		strv_addf(argv, "type=bind,source=%s,target=%s,readonly", runner, runner);
	}
	if (req->cred_socket) {
		if (mount_path_ok(req->cred_socket, err, errlen) < 0)
			return -1;
		strv_add(argv, "--mount");
		strv_addf(argv, "type=bind,source=%s,target=%s", req->cred_socket, SANDBOX_CRED_SOCKET);
	}
	/* The task's own binds: the engine mounts them by path (it takes no
	 * descriptor), after they were checked as the submitter; the task
	 * runs as the submitter (--user), whose permissions apply inside.
	 * Not closed: the daemon resolves the path again, as root, and
	 * follows a symlink at it (tried on dockerd 20.10), so a submitter
	 * who swaps a directory of theirs for a symlink between the check
	 * and the mount gets the target mounted, e.g. a 0644 file under a
	 * 0700 directory they cannot search. Permissions on the file itself
	 * still hold inside; bwrap's --bind-fd has no such window. */
	for (int i = 0; i < spec->n_binds; i++) {
		const struct task_bind *b = &spec->binds[i];
		if (strchr(b->path, ':') || strchr(b->path, ',')) {
			snprintf(err, errlen, "the path %.200s cannot be given to the container CLI's -v",
				 b->path);
			return -1;
		}
		strv_add(argv, "-v");
		strv_addf(argv, "%s:%s%s", b->path, b->path, b->mode == BIND_RO ? ":ro" : "");
	}
	/* after=: the upstreams' outputs, read-only, by path: done/ is
	 * written by the workers alone. */
	for (int i = 0; i < req->n_inputs; i++) {
		const struct sandbox_input *in = &req->inputs[i];
		const char *src[2] = {in->out_path, in->stdout_path};
		for (int k = 0; k < 2; k++) {
			if (!src[k])
				continue;
			if (mount_path_ok(src[k], err, errlen) < 0 || strpbrk(in->id, ",\n")) {
				snprintf(err, errlen, "the input %.200s cannot be given to the container "
					 "CLI's --mount", in->id);
				return -1;
			}
			strv_add(argv, "--mount");
			strv_addf(argv, "type=bind,source=%s,target=" SANDBOX_INPUTS "/%s/%s,readonly",
				  src[k], in->id, k ? "stdout" : "out");
		}
	}
	strv_add(argv, "--workdir");
	strv_add(argv, spec->cwd >= 0 ? spec->binds[spec->cwd].path : SANDBOX_WORK);
	if (spec->memory) {
		/* No swap beyond the limit: memory-swap equal to memory. */
		strv_add(argv, "--memory");
		strv_addf(argv, "%llu", (unsigned long long)spec->memory);
		strv_add(argv, "--memory-swap");
		strv_addf(argv, "%llu", (unsigned long long)spec->memory);
	}
	if (spec->pids) {
		strv_add(argv, "--pids-limit");
		strv_addf(argv, "%lld", (long long)spec->pids);
	}
	if (spec->cpu_milli) {
		strv_add(argv, "--cpus");
		strv_addf(argv, "%u.%03u", spec->cpu_milli / 1000, spec->cpu_milli % 1000);
	}
	/* The task's environment: the fixed part by value, the policy's
	 * by name. */
	const char *own = sandbox_home(req);
	char homekv[PATH_MAX + 8];
	snprintf(homekv, sizeof homekv, "HOME=%s", own ? own : SANDBOX_WORK);
	const char *const fixed[] = {"PATH=/usr/local/bin:/usr/bin:/bin", homekv, "TMPDIR=/tmp",
				     "LANG=C.UTF-8"};
	for (size_t i = 0; i < ARRAY_SIZE(fixed); i++) {
		char name[16];
		snprintf(name, sizeof name, "%.*s", (int)(strchr(fixed[i], '=') - fixed[i]), fixed[i]);
		if (task_sets(spec, name))
			continue;
		strv_add(argv, "--env");
		strv_add(argv, fixed[i]);
	}
	strv_add(argv, "--env");
	strv_addf(argv, "KART_TASK_ID=%s", req->task_id);
	strv_add(argv, "--env");
	strv_addf(argv, "KART_ATTEMPT=%d", req->attempt);
	strv_add(argv, "--env");
	strv_add(argv, "KART_OUTDIR=" SANDBOX_OUT);
	if (req->n_inputs) {
		strv_add(argv, "--env");
		strv_add(argv, "KART_INPUTS=" SANDBOX_INPUTS);
	}
	struct strv named = {0};
	env_policy(req, &named, false);
	bool input = false;
	for (size_t i = 0; i < named.n; i++) {
		const char *kv = named.v[i];
		/* A kind's endpoint and model are the policy's, and no
		 * secret: by value. */
		if (strncmp(kv, "KART_LLM_ENDPOINT=", 18) == 0 || strncmp(kv, "KART_LLM_MODEL=", 15) == 0 ||
		    strncmp(kv, "KART_LLM_SOCKET=", 16) == 0) {
			strv_add(argv, "--env");
			strv_add(argv, kv);
		} else {
			input = true;
		}
	}
	if (input && !req->input) {
		strv_free(&named);
		snprintf(err, errlen, "the policy's variables cannot be passed to the container");
		return -1;
	}
	for (const char *a = NULL; (a = plist_next(&pol->container_extra, a));)
		strv_add(argv, a);
	if (input) {
		strv_add(argv, "--interactive");
		*req->input = container_env_input(&named);
	}
	strv_free(&named);
	/* The task's env= by name too: its values go in the CLI's own
	 * environment, below. */
	for (const char *e = NULL; (e = task_env_next(spec, e));) {
		strv_add(argv, "--env");
		strv_addf(argv, "%.*s", (int)(strchr(e, '=') - e), e);
	}
	strv_add(argv, pol->container_image);
	const char *targv[4];
	task_argv(spec, SANDBOX_TASK, targv);
	if (input) {
		/* NAME='value' lines, exported, then the task with the
		 * stdin it has without them. */
		strv_add(argv, "/bin/sh");
		strv_add(argv, "-c");
		strv_add(argv, "set -a; . /dev/stdin || exit 125; set +a; exec \"$@\" </dev/null");
		strv_add(argv, "kart-env");
	}
	for (int i = 0; targv[i]; i++)
		strv_add(argv, targv[i]);
	/* The CLI runs on the host with the worker's environment (it needs
	 * DOCKER_HOST, XDG_RUNTIME_DIR and the like); it forwards only
	 * what --env names. */
	for (char *const *e = req->host_env; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		char name[256];
		if (eq && (size_t)(eq - *e) < sizeof name) {
			snprintf(name, sizeof name, "%.*s", (int)(eq - *e), *e);
			if (task_sets(spec, name))
				continue; /* the task's value wins */
			if (kind_cred(pol, name))
				continue; /* the forwarder's alone */
		}
		strv_add(envp, *e);
	}
	env_task(req, envp);
	return 0;
}

int sandbox_launch(const struct sandbox_req *req, struct strv *argv, struct strv *envp, char *err,
		   size_t errlen)
{
	if (kind_check(req, err, errlen) < 0)
		return -1;
	env_common(req, envp, req->work_dir, req->tmp_dir ? req->tmp_dir : "/tmp", req->out_dir, true);
	launcher_tail(req, argv, req->pol->launcher, req->task_path, true);
	return 0;
}

int sandbox_bwrap(const struct sandbox_req *req, struct strv *argv, struct strv *envp, char *err,
		  size_t errlen)
{
	const struct policy *pol = req->pol;
	struct stat st;

	if (kind_check(req, err, errlen) < 0)
		return -1;
	strv_add(argv, pol->bwrap);
	strv_add(argv, "--unshare-all");
	if (req->spec->net)
		strv_add(argv, "--share-net");
	strv_add(argv, "--die-with-parent");
	strv_add(argv, "--new-session");
	strv_add(argv, "--cap-drop");
	strv_add(argv, "ALL");
	if (req->seccomp) {
		/* Loaded by bwrap last, just before it execs the launcher. */
		strv_add(argv, "--seccomp");
		strv_addf(argv, "%d", SANDBOX_SECCOMP_FD);
	}
	strv_add(argv, "--hostname");
	strv_add(argv, "kart");
	strv_add(argv, "--ro-bind");
	strv_add(argv, "/usr");
	strv_add(argv, "/usr");
	for (size_t i = 0; i < ARRAY_SIZE(usr_links); i++) {
		char host[64], target[64];
		snprintf(host, sizeof host, "/%s", usr_links[i]);
		if (lstat(host, &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlink(host, target, sizeof target - 1);
			if (n <= 0)
				continue;
			target[n] = '\0';
			strv_add(argv, "--symlink");
			strv_add(argv, target);
		} else {
			strv_add(argv, "--ro-bind");
			strv_add(argv, host);
		}
		strv_add(argv, host);
	}
	for (size_t i = 0; i < ARRAY_SIZE(etc_ro); i++) {
		strv_add(argv, "--ro-bind-try");
		strv_add(argv, etc_ro[i]);
		strv_add(argv, etc_ro[i]);
	}
	if (req->spec->net)
		for (size_t i = 0; i < ARRAY_SIZE(etc_net); i++) {
			strv_add(argv, "--ro-bind-try");
			strv_add(argv, etc_net[i]);
			strv_add(argv, etc_net[i]);
		}
	strv_add(argv, "--proc");
	strv_add(argv, "/proc");
	strv_add(argv, "--dev");
	strv_add(argv, "/dev");
	static const char *const tmpfs[] = {"/tmp", SANDBOX_WORK};
	for (size_t i = 0; i < ARRAY_SIZE(tmpfs); i++) {
		if (pol->tmpfs_size) {
			strv_add(argv, "--size");
			strv_addf(argv, "%llu", (unsigned long long)pol->tmpfs_size);
		}
		strv_add(argv, "--tmpfs");
		strv_add(argv, tmpfs[i]);
	}
	if (req->task_fd > 0) {
		strv_add(argv, "--ro-bind-fd");
		strv_addf(argv, "%d", req->task_fd);
	} else {
		strv_add(argv, "--ro-bind");
		strv_add(argv, req->task_path);
	}
	strv_add(argv, SANDBOX_TASK);
	strv_add(argv, "--ro-bind");
	strv_add(argv, pol->launcher);
	strv_add(argv, SANDBOX_LAUNCH);
	if (req->out_dir) {
		if (req->out_fd > 0) {
			strv_add(argv, "--bind-fd");
			strv_addf(argv, "%d", req->out_fd);
		} else {
			strv_add(argv, "--bind");
			strv_add(argv, req->out_dir);
		}
		strv_add(argv, SANDBOX_OUT);
	}
	/* The policy's binds, at the same path inside; credential files
	 * only where the task has network. A missing path fails the
	 * sandbox (refused), never runs without what was configured. */
	const struct plist *binds[] = {&pol->ro_binds, req->spec->net ? &pol->cred_files : NULL,
				       &pol->rw_binds};
	for (size_t i = 0; i < ARRAY_SIZE(binds); i++)
		for (const char *e = NULL; binds[i] && (e = plist_next(binds[i], e));) {
			strv_add(argv, i == 2 ? "--bind" : "--ro-bind");
			strv_add(argv, e);
			strv_add(argv, e);
		}
	const char *runner = kind_runner_bound(req);
	if (runner) {
		strv_add(argv, "--ro-bind");
		strv_add(argv, runner);
		strv_add(argv, runner);
	}
	/* The socket of the kind's credential forwarder: its submitter's
	 * (0600), in a directory no one else can list (credfwd_open). */
	if (req->cred_socket) {
		strv_add(argv, "--bind");
		strv_add(argv, req->cred_socket);
		strv_add(argv, SANDBOX_CRED_SOCKET);
	}
	/* The task's own, by the descriptors opened as its submitter
	 * (binds_open): bwrap mounts the very file that was checked, never
	 * the path again, and checks that what it mounted is that file. */
	/* Shorter paths first: a bind below another goes on top of it,
	 * never under it (ro=/home/ann then cwd=/home/ann/proj, in either
	 * order, leaves the project writable). */
	bool done[TASK_BINDS_MAX] = {false};
	for (int n = 0; n < req->spec->n_binds; n++) {
		int k = -1;
		for (int i = 0; i < req->spec->n_binds; i++)
			if (!done[i] && (k < 0 || strlen(req->spec->binds[i].path) <
						      strlen(req->spec->binds[k].path)))
				k = i;
		done[k] = true;
		const struct task_bind *b = &req->spec->binds[k];
		strv_add(argv, b->mode == BIND_RO ? "--ro-bind-fd" : "--bind-fd");
		strv_addf(argv, "%d", SANDBOX_BIND_FD + k);
		strv_add(argv, b->path);
	}
	/* after=: each upstream's output, by the descriptors the worker
	 * opened in done/ (the upstream was checked to be the submitter's
	 * and to have ended ok), read-only; nothing else of it. */
	if (req->n_inputs) {
		strv_add(argv, "--dir");
		strv_add(argv, SANDBOX_INPUTS);
	}
	for (int i = 0, fd = SANDBOX_BIND_FD + req->spec->n_binds; i < req->n_inputs; i++) {
		const struct sandbox_input *in = &req->inputs[i];
		strv_add(argv, "--dir");
		strv_addf(argv, SANDBOX_INPUTS "/%s", in->id);
		if (in->out_path) {
			strv_add(argv, "--ro-bind-fd");
			strv_addf(argv, "%d", fd++);
			strv_addf(argv, SANDBOX_INPUTS "/%s/out", in->id);
		}
		if (in->stdout_path) {
			strv_add(argv, "--ro-bind-fd");
			strv_addf(argv, "%d", fd++);
			strv_addf(argv, SANDBOX_INPUTS "/%s/stdout", in->id);
		}
	}
	/* The spool below a bind (a task run in a home that holds it): an
	 * empty read-only tmpfs over it, mode 0 (ls fails, nothing can be
	 * made there), mounted after every bind, so that no path of the
	 * sandbox (.., a link in the home, /proc/self/cwd) reaches what is
	 * under it. */
	if (req->mask) {
		strv_add(argv, "--perms");
		strv_add(argv, "0000");
		strv_add(argv, "--tmpfs");
		strv_add(argv, req->mask);
		strv_add(argv, "--remount-ro");
		strv_add(argv, req->mask);
	}
	/* The root is bwrap's tmpfs: read-only once everything is mounted.
	 * /tmp, the work dir and $KART_OUTDIR are mounts of their own. */
	strv_add(argv, "--remount-ro");
	strv_add(argv, "/");
	strv_add(argv, "--chdir");
	strv_add(argv, req->spec->cwd >= 0 ? req->spec->binds[req->spec->cwd].path : SANDBOX_WORK);
	launcher_tail(req, argv, SANDBOX_LAUNCH, SANDBOX_TASK, false);
	env_common(req, envp, SANDBOX_WORK, "/tmp", SANDBOX_OUT, false);
	return 0;
}
