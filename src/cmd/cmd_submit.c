/* kart submit: read the task (a file, stdin, or a command), add the
 * options as directives (task.c's composer), check what the worker would
 * refuse, and publish it (spool_submit). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <libgen.h>
#include <sys/stat.h>

#include "backend.h"
#include "binds.h"
#include "cmd.h"
#include "opts.h"
#include "policy.h"
#include "query.h"
#include "sched.h"
#include "space.h"
#include "task.h"
#include "termsafe.h"
#include "util.h"

static void unknown_option(int argc, char **argv);

static const struct opts_help help = {
	"usage: kart [-s SPOOL] submit [OPTIONS] FILE\n"
	"       kart [-s SPOOL] submit [OPTIONS] -            (the task on stdin)\n"
	"       kart [-s SPOOL] submit [OPTIONS] -- CMD [ARG...]\n"
	"       kart submit --to postgres URL [OPTIONS] FILE|-|-- CMD [ARG...]\n"
	"\n"
	"Queue a task atomically (tmp/, fsync, rename into new/) and print its id.\n"
	"The options are added to the task as #kart: directives, after the file's\n"
	"own: an option wins over the file's directive. Options may come before or\n"
	"after FILE; everything after -- is the command.\n",
	"exit status: 0 queued; 1 could not queue; 2 usage error\n",
	unknown_option,
};

int (*submit_to_queue)(const char *url, const char *name, const char *lane, const char *task,
		       size_t len);

/* What one kart submit gathers, from its options on. */
struct submit {
	struct ctx *c;
	const char *name, *url, *lane, *cwd;
	const char *unique; /* --unique: "" for the name */
	bool no_cwd, hold, has_env, timed;
	struct task_directives td;
	struct strv after; /* --after, --after-any, --after-fail: "KEY ID", the id as given */
	/* The task as read: its text, a base name, and how to name it. */
	char *body, *base;
	size_t blen;
	bool is_cmd;
	const char *what; /* FILE, "stdin" or "the command", for messages */
	bool own_cwd; /* the file has a cwd= of its own */
	int live; /* the live workers enforce_check saw; -1: it did not look */
	char *cwd_checked; /* the cwd= default_cwd added, checked as the worker will */
};

static void shell_quote(char **out, size_t *len, const char *s)
{
	size_t need = *len + strlen(s) * 4 + 3;
	*out = xrealloc(*out, need + 1);
	char *o = *out + *len;
	*o++ = '\'';
	for (; *s; s++) {
		if (*s == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else
			*o++ = *s;
	}
	*o++ = '\'';
	*o = '\0';
	*len = (size_t)(o - *out);
}

static int read_all_fd(int fd, char **out, size_t *outlen, size_t max)
{
	size_t cap = 65536, len = 0;
	char *buf = xmalloc(cap);
	for (;;) {
		if (len == cap) {
			if (cap >= max) {
				free(buf);
				return -EFBIG;
			}
			cap *= 2;
			buf = xrealloc(buf, cap);
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = -errno;
			free(buf);
			return e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	*out = buf;
	*outlen = len;
	return 0;
}

/* ---- the options ---------------------------------------------------------- */

/* --timeout, --memory, ... --net: the option's name is its directive's
 * (--kill-grace is kill_grace=), read by the directive's own row. */
static int opt_directive(const struct opt *o, const char *arg, struct opts_ctx *ctx)
{
	struct submit *s = o->value;
	char key[32], err[512];
	snprintf(key, sizeof key, "%s", o->long_name);
	for (char *p = key; *p; p++)
		if (*p == '-')
			*p = '_';
	if (task_directive_add(&s->td, key, arg, err, sizeof err) < 0)
		return usage_error(ctx->verb, "--%s %s: %s", o->long_name, arg ? arg : "", err);
	if (strcmp(key, "lane") == 0)
		s->lane = arg;
	return 0;
}

/* --to postgres URL, or the URL alone. */
static int opt_to(const struct opt *o, const char *arg, struct opts_ctx *ctx)
{
	struct submit *s = o->value;
	if (strncmp(arg, "postgres://", 11) == 0 || strncmp(arg, "postgresql://", 13) == 0)
		s->url = arg;
	else if (strcmp(arg, "postgres") != 0 && strcmp(arg, "postgresql") != 0)
		return usage_error(ctx->verb, "--to %s: give postgres URL", arg);
	else if (!(s->url = opts_next_arg(ctx)))
		return usage_error(ctx->verb, "--to postgres: give the URL");
	return 0;
}

/* --bind PATH, --ro PATH: made absolute and resolved here, as the worker
 * will resolve it as you. */
static int opt_bind(const struct opt *o, const char *arg, struct opts_ctx *ctx)
{
	struct submit *s = o->value;
	char err[512];
	_cleanup_free_ char *real = realpath(arg, NULL);
	if (!real) {
		fprintf(stderr, "kart %s: --%s %s: %s\n", ctx->verb, o->long_name, arg, strerror(errno));
		return 1;
	}
	if (task_directive_add(&s->td, o->long_name, real, err, sizeof err) < 0) {
		fprintf(stderr, "kart %s: --%s %s: %s\n", ctx->verb, o->long_name, arg, err);
		return 1;
	}
	return 0;
}

/* -e NAME=VALUE, or -e NAME for the value we have. A value is never
 * printed: it may be a secret. */
static int opt_env(const struct opt *o, const char *arg, struct opts_ctx *ctx)
{
	struct submit *s = o->value;
	char err[512];
	size_t nl = strcspn(arg, "=");
	_cleanup_free_ char *name = xasprintf("%.*s", (int)nl, arg);
	const char *val = arg[nl] ? arg + nl + 1 : getenv(name);
	_cleanup_free_ char *item = val ? xasprintf("%s=%s", name, val) : NULL;
	if (!item || task_directive_add(&s->td, "env", item, err, sizeof err) < 0)
		return usage_error(ctx->verb, "-e %s: give NAME=VALUE, or NAME of a variable that is set",
				   name);
	s->has_env = true;
	return 0;
}

/* --at TIME, --in DUR: written as an absolute time (not_before=). */
static int opt_when(const struct opt *o, const char *arg, struct opts_ctx *ctx)
{
	struct submit *s = o->value;
	int64_t at, d;
	char ts[32], err[256];
	if (strcmp(o->long_name, "at") == 0) {
		if (sched_parse_at(arg, now_realtime_ms(), &at) < 0)
			return usage_error(ctx->verb, "--at %s: not a time (RFC 3339, 2026-12-01T02:00:00Z, "
					   "or HH:MM)", arg);
	} else {
		if (parse_duration_s(arg, &d) < 0)
			return usage_error(ctx->verb, "--in %s: not a duration (90, 90s, 5m, 2h, 1d)", arg);
		at = now_realtime_ms() + d * 1000;
	}
	fmt_rfc3339_ms(at, ts);
	if (task_directive_add(&s->td, "not_before", ts, err, sizeof err) < 0)
		return usage_error(ctx->verb, "--%s %s: %s", o->long_name, arg, err);
	s->timed = true;
	return 0;
}

static int opt_unique(const struct opt *o, const char *arg, struct opts_ctx *ctx)
{
	struct submit *s = o->value;
	if (arg && (!*arg || strlen(arg) > TASK_NAME_MAX))
		return usage_error(ctx->verb, "--unique=KEY: 1 to %d bytes", TASK_NAME_MAX);
	s->unique = arg ? arg : "";
	return 0;
}

/* --after ID[,ID...] (after=), --after-any (after_any=), --after-fail
 * (after_fail=). */
static int opt_after(const struct opt *o, const char *arg, struct opts_ctx *ctx)
{
	(void)ctx;
	struct submit *s = o->value;
	const char *key = strcmp(o->long_name, "after-any") == 0	 ? "after_any"
			  : strcmp(o->long_name, "after-fail") == 0 ? "after_fail"
								    : "after";
	_cleanup_free_ char *copy = xstrdup(arg);
	for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		strv_addf(&s->after, "%s %s", key, tok);
	return 0;
}

/* ---- the task -------------------------------------------------------------- */

/* `kart submit make`: FILE is missing but names a command in PATH. Says
 * how to run it; true if it did. */
static bool hint_command(int n, char **args)
{
	if (strchr(args[0], '/') || access(args[0], F_OK) == 0)
		return false;
	const char *path = getenv("PATH");
	bool found = false;
	_cleanup_free_ char *dirs = xstrdup(path && *path ? path : "/usr/bin:/bin");
	char *save = NULL, p[4096];
	for (char *d = strtok_r(dirs, ":", &save); d && !found; d = strtok_r(NULL, ":", &save))
		found = pathfmt(p, sizeof p, "%s/%s", *d ? d : ".", args[0]) == 0 && access(p, X_OK) == 0;
	if (!found)
		return false;
	fprintf(stderr, "kart submit: %s is not a file but a command; did you mean: kart submit --", args[0]);
	for (int i = 0; i < n; i++)
		fprintf(stderr, " %s", args[i]);
	fputc('\n', stderr);
	return true;
}

/* kart submit make -j2: an option of the command, not ours. */
static void unknown_option(int argc, char **argv) { (void)hint_command(argc, argv); }

/* -- CMD ARG...: a shell script that execs it, each word quoted. */
static void read_command(struct submit *s, int argc, char **argv)
{
	size_t len = 0;
	char *t = xstrdup("#!/bin/sh\nexec");
	len = strlen(t);
	for (int i = 0; i < argc; i++) {
		t = xrealloc(t, len + 2);
		t[len++] = ' ';
		t[len] = '\0';
		shell_quote(&t, &len, argv[i]);
	}
	t = xrealloc(t, len + 2);
	t[len++] = '\n';
	t[len] = '\0';
	s->body = t;
	s->blen = len;
	_cleanup_free_ char *cp = xstrdup(argv[0]);
	s->base = xstrdup(basename(cp));
	s->what = "the command";
}

/* FILE, or - for stdin. 0, or the exit status (said). */
static int read_file(struct submit *s, int argc, char **argv)
{
	const char *f = argv[0];
	s->what = f;
	if (strcmp(f, "-") == 0) {
		int r = read_all_fd(STDIN_FILENO, &s->body, &s->blen, 1u << 30);
		if (r < 0) {
			fprintf(stderr, "kart submit: reading stdin: %s\n", strerror(-r));
			return 1;
		}
		s->base = xstrdup("stdin");
		return 0;
	}
	_cleanup_close_ int fd = open(f, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "kart submit: %s: %s\n", f, strerror(errno));
		(void)hint_command(argc, argv);
		return 1;
	}
	if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "kart submit: %s: not a regular file\n", f);
		return 1;
	}
	int r = read_all_fd(fd, &s->body, &s->blen, 1u << 30);
	if (r < 0) {
		fprintf(stderr, "kart submit: %s: %s\n", f, strerror(-r));
		return 1;
	}
	_cleanup_free_ char *cp = xstrdup(f);
	s->base = xstrdup(basename(cp));
	return 0;
}

/* The task from what is left of the arguments, its name, and its own
 * directives, read alone (into scratch): an error names the file's own
 * line. */
static int read_task(struct submit *s, const struct opts_rest *rest, struct task_spec *scratch)
{
	int r;
	s->is_cmd = rest->had_dashdash && rest->dashdash == 0;
	if (rest->argc == 0 || (s->is_cmd && rest->argc == 0))
		return usage_error("submit", "no task given (FILE, - or -- CMD)");
	if (!s->is_cmd && rest->argc > 1) {
		if (hint_command(rest->argc, rest->argv))
			return EXIT_USAGE;
		return usage_error("submit", "one task file at a time (or -- CMD ARGS)");
	}
	if (s->is_cmd)
		read_command(s, rest->argc, rest->argv);
	else if ((r = read_file(s, rest->argc, rest->argv)) != 0)
		return r;
	if (s->name)
		s->base = (free(s->base), xstrdup(s->name));
	const char *why;
	if ((r = task_name_check(s->base, &why)) != 0) {
		if (s->name)
			return usage_error("submit", "--name %s: not a task name (%s)", s->name,
					   r > 0 ? "starts with '.'" : why);
		/* A name from a path that cannot be a task name: a plain one. */
		s->base = (free(s->base), xstrdup("task"));
	}
	char err[512];
	if (task_parse(s->body, s->blen < TASK_HEADER_MAX ? s->blen : TASK_HEADER_MAX, scratch, err,
		       sizeof err) < 0) {
		_cleanup_free_ char *serr = term_safe(err);
		fprintf(stderr, "kart submit: %s: %s\n", s->what, serr);
		return 1;
	}
	s->own_cwd = scratch->cwd >= 0;
	return 0;
}

/* ---- what the spool says --------------------------------------------------- */

/* The spool as the worker judges a bind: resolved, and whether its
 * sandbox covers the spool under a bind above it (bwrap does). A policy
 * that cannot be read here: bwrap's, the default. */
static bool spool_masked(const struct policy *pol)
{
	return !pol || backend_get(pol->backend)->masks_spool;
}

/* The directory we run in, as the task's cwd=, unless the worker would
 * refuse it (the root, the spool or in it, one we cannot write): then
 * the private /work, and a note. Run in a home that holds the spool, it
 * is that home: the sandbox covers the spool. one: room for a task's
 * spec (29 KB), written here. */
static void default_cwd(struct submit *s, const struct spool *sp, const struct policy *pol,
			struct task_spec *one)
{
	_cleanup_free_ char *here = getcwd(NULL, 0);
	_cleanup_free_ char *spool_real = realpath(sp->path, NULL);
	const char *why = NULL;
	char berr[1024];
	if (!here || !spool_real)
		return;
	if (pol && !pol->task_binds)
		return; /* the policy binds nothing: the private /work, as asked */
	/* As the worker will open it, as us. */
	task_spec_init(one);
	one->n_binds = 1;
	one->binds[0] = (struct task_bind){.mode = BIND_CWD};
	if (strcmp(here, "/") == 0)
		why = "it is the root directory";
	else if ((why = bind_path_refused(here)))
		;
	else if (pol && !task_bind_root_ok(pol, here))
		why = "outside the trees the policy allows binds in ([sandbox] task_bind_roots)";
	else if (pathfmt(one->binds[0].path, sizeof one->binds[0].path, "%s", here) < 0)
		why = "the path is too long";
	else if (binds_check(one, spool_real, spool_masked(pol), berr, sizeof berr) < 0)
		why = strncmp(berr, "line 0: ", 8) == 0 ? berr + 8 : berr;
	if (why) {
		_cleanup_free_ char *swhy = term_safe(why), *shere = term_safe(here);
		fprintf(stderr, "kart submit: note: the task runs in a private /work, not in %s (%s); "
			"-C DIR names another, --no-cwd silences this\n", shere, swhy);
		return;
	}
	char err[512];
	if (task_directive_add(&s->td, "cwd", here, err, sizeof err) < 0)
		fprintf(stderr, "kart submit: note: the task runs in a private /work, not in %s (%s)\n",
			here, err);
	else
		s->cwd_checked = xstrdup(one->binds[0].path);
}

/* cwd=: -C DIR, or where we are, unless --no-cwd or the file has its own. */
static int add_cwd(struct submit *s, const struct spool *sp, const struct policy *pol,
		   struct task_spec *scratch)
{
	char err[512];
	if (s->cwd && s->no_cwd)
		return usage_error("submit", "-C and --no-cwd together");
	if (s->cwd) {
		_cleanup_free_ char *real = realpath(s->cwd, NULL);
		if (!real || task_directive_add(&s->td, "cwd", real, err, sizeof err) < 0) {
			fprintf(stderr, "kart submit: --cwd %s: %s\n", s->cwd, real ? err : strerror(errno));
			return 1;
		}
	} else if (!s->no_cwd && !s->url && !s->own_cwd) {
		default_cwd(s, sp, pol, scratch);
	}
	return 0;
}

/* An error of the task as composed: "line N:" of an option's line reads
 * as the options' (their lines are not the file's). */
static void say_task_error(const struct submit *s, const char *err, int first)
{
	int line = 0, n = 0;
	bool ours = sscanf(err, "line %d: %n", &line, &n) == 1 && n && line >= first;
	_cleanup_free_ char *serr = term_safe(ours ? err + n : err);
	fprintf(stderr, "kart submit: %s%s %s\n", s->what, ours ? ", with the options:" : ":", serr);
}

/* What the worker would refuse, said now in its words rather than as a
 * `rejected` result later: the policy's ceilings and grants (a network
 * request, with where the grant goes), the kind, and each path, opened
 * as we are (we are its submitter). A policy that cannot be read here
 * leaves the decision to the worker. 0, or 1 (said). */
static int precheck(const struct submit *s, struct spool *sp, const struct policy *pol,
		    struct task_spec *spec, int first)
{
	char err[1024];
	if (!pol)
		return 0;
	if (task_resolve_kind(spec, pol, s->base, err, sizeof err) < 0 ||
	    task_check_policy(spec, pol, getuid(), err, sizeof err) < 0) {
		say_task_error(s, err, first);
		return 1;
	}
	/* A task whose one path is the cwd= default_cwd has just checked,
	 * the same way, is not walked twice (about 50 system calls). */
	if (!pol->task_binds || (s->cwd_checked && spec->n_binds == 1 && spec->binds[0].mode == BIND_CWD &&
				 strcmp(spec->binds[0].path, s->cwd_checked) == 0))
		return 0;
	_cleanup_free_ char *spool_real = realpath(sp->path, NULL);
	if (spool_real && binds_check(spec, spool_real, spool_masked(pol), err, sizeof err) < 0) {
		say_task_error(s, err, first);
		return 1;
	}
	return 0;
}

/* A live worker's word (cur/WID/.enforced, worker_enforce.c) on key
 * ("memory", "pids", "cpu", "lacks"): the rest of its line, into out.
 * false when it has none (a worker that published nothing: it may). */
static bool worker_says(struct spool *sp, const char *wid, const char *key, char *out, size_t len)
{
	char p[512];
	_cleanup_free_ char *text = NULL;
	size_t n;
	if (pathfmt(p, sizeof p, "%s/%s", wid, SPOOL_ENFORCED) < 0 ||
	    read_file_at(sp->cur, p, 8192, &text, &n) < 0 || strncmp(text, "kart-enforced 1\n", 16) != 0)
		return false;
	size_t kl = strlen(key);
	for (char *l = text, *nl; l && *l; l = nl ? nl + 1 : NULL) {
		nl = strchr(l, '\n');
		if (nl)
			*nl = '\0';
		if (strncmp(l, key, kl) == 0 && (l[kl] == ' ' || l[kl] == '\0')) {
			snprintf(out, len, "%s", l[kl] ? l + kl + 1 : "");
			return true;
		}
	}
	return false;
}

/* The limits a task asks for that no live worker can hold: refused now,
 * in the first worker's words, rather than `refused` when it runs. A
 * worker that says nothing may hold them; without a live worker nothing
 * can be told. 0, or 1 (said). */
static int enforce_check(struct submit *s, struct spool *sp, const struct task_spec *spec, int first)
{
	static const char *const key[] = {"memory", "pids", "cpu"};
	int line[] = {spec->memory ? spec->line_memory : 0, spec->pids ? spec->line_pids : 0,
		      spec->cpu_milli ? spec->line_cpu : 0};
	struct strv ids = {0};
	int rc = 0;
	if (line[0] <= 0 && line[1] <= 0 && line[2] <= 0)
		return 0; /* nothing to ask of a worker: /proc/locks is read once, after */
	s->live = spool_live_worker_ids(sp, &ids);
	if (s->live <= 0) {
		strv_free(&ids);
		return 0;
	}
	for (size_t k = 0; k < ARRAY_SIZE(key) && !rc; k++) {
		char why[1024] = "", word[1024];
		bool can = line[k] <= 0;
		for (size_t i = 0; i < ids.n && !can; i++) {
			if (!worker_says(sp, ids.v[i], key[k], word, sizeof word) || strcmp(word, "yes") == 0 ||
			    (strncmp(word, "nonroot", 7) == 0 && getuid() != 0))
				can = true;
			else if (!why[0])
				snprintf(why, sizeof why, "%s", strchr(word, ' ') ? strchr(word, ' ') + 1 : word);
		}
		if (!can) {
			char err[1200];
			snprintf(err, sizeof err, "line %d: %s (no live worker can hold it)", line[k], why);
			say_task_error(s, err, first);
			rc = 1;
		}
	}
	strv_free(&ids);
	return rc;
}

/* A task with network, and a credential the policy passes to it that
 * every live worker lacks: it would get none. Said, not refused (the
 * worker may be restarted with it before the task runs). */
static void warn_creds(struct spool *sp, const struct policy *pol, const struct task_spec *spec)
{
	struct strv ids = {0};
	char lacks[1024];
	if (!(spec->net || spec->kind_net) || !pol ||
	    spool_live_worker_ids(sp, &ids) <= 0) {
		strv_free(&ids);
		return;
	}
	for (const char *e = NULL; (e = plist_next(&pol->cred_env, e));) {
		size_t all = 0, el = strlen(e);
		for (size_t i = 0; i < ids.n; i++) {
			bool has = false;
			if (worker_says(sp, ids.v[i], "lacks", lacks, sizeof lacks))
				for (const char *p = lacks; (p = strstr(p, e)); p += el)
					has |= (p == lacks || p[-1] == ' ') && (p[el] == ' ' || p[el] == '\0');
			all += has;
		}
		if (all == ids.n)
			fprintf(stderr, "kart submit: warning: %s is not set in any live worker's environment: "
				"[network] cred_env passes it to tasks with network, and this one would get "
				"none (set it where the worker starts, and start it again)\n", e);
	}
	strv_free(&ids);
}

/* The unique= key of dirfd/name, if it is a task file of ours. */
static bool has_key(int dirfd, const char *name, const char *key)
{
	struct stat st;
	struct task_spec spec;
	struct submitter by;
	char err[64];
	_cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	/* Ours: our own file, or on a shared spool the worker's copy of it. */
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (spool_submitter(fd, &st, &by), by.uid != getuid()))
		return false;
	size_t want = (size_t)st.st_size < TASK_HEADER_MAX ? (size_t)st.st_size : TASK_HEADER_MAX;
	_cleanup_free_ char *text = xmalloc(want + 1);
	ssize_t n = read_upto(fd, text, want);
	return n > 0 && task_parse(text, (size_t)n, &spec, err, sizeof err) == 0 &&
	       strcmp(spec.unique, key) == 0;
}

/* A task of ours with unique=key in drop/ (ours), new/ or cur/: its id
 * into id, and its state ("queued", "scheduled", "running"); NULL: none. */
static const char *unique_existing(struct spool *sp, const char *key, char *id, size_t idlen)
{
	struct strv names = {0};
	const char *found = NULL;
	int dirs[] = {sp->dropd, sp->new};
	for (size_t d = 0; d < ARRAY_SIZE(dirs) && !found; d++) {
		if (dirs[d] < 0 || dir_names(dirs[d], ".", &names) < 0)
			continue;
		for (size_t i = 0; i < names.n && !found; i++)
			if (has_key(dirs[d], names.v[i], key)) {
				snprintf(id, idlen, "%s%s", d == 0 ? sp->idprefix : "", names.v[i]);
				found = query_not_before(dirs[d], names.v[i], now_realtime_ms()) ? "scheduled"
												   : "queued";
			}
		strv_free(&names);
		names = (struct strv){0};
	}
	struct strv workers = {0};
	if (!found && dir_names(sp->cur, ".", &workers) == 0) {
		for (size_t w = 0; w < workers.n && !found; w++) {
			_cleanup_close_ int wd = openat(sp->cur, workers.v[w], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (wd < 0 || dir_names(wd, ".", &names) < 0)
				continue;
			for (size_t i = 0; i < names.n && !found; i++)
				if (has_key(wd, names.v[i], key)) {
					snprintf(id, idlen, "%s", names.v[i]);
					found = "running";
				}
			strv_free(&names);
			names = (struct strv){0};
		}
	}
	strv_free(&workers);
	return found;
}

/* --unique: the key, as the directive holds it (encoded), added; and
 * 1 (said) when a task of ours with it is there already. A courtesy:
 * the worker's check is the one that counts (two racing submits both
 * get here). */
static int add_unique(struct submit *s, struct spool *sp)
{
	char err[512];
	if (!s->unique)
		return 0;
	if (task_directive_add(&s->td, "unique", *s->unique ? s->unique : s->base, err, sizeof err) < 0)
		return usage_error("submit", "--unique: %s", err);
	const char *key = s->td.items.v[s->td.items.n - 1] + strlen("unique=");
	char have[TASK_NAME_MAX + 80];
	const char *state = s->url ? NULL : unique_existing(sp, key, have, sizeof have);
	if (!state)
		return 0;
	_cleanup_free_ char *shave = term_safe(have), *skey = term_safe(key);
	printf("%s\n", shave);
	fprintf(stderr, "kart submit: unique=%s: %s is already %s; not queued again\n", skey, shave, state);
	return -1;
}

/* Queued all the same: the task waits until space returns. */
static void warn_low_space(const struct spool *sp, const struct policy *pol)
{
	char why[700];
	if (pol && space_low(sp->root, pol, sp->path, why, sizeof why))
		fprintf(stderr, "kart submit: warning: %s: workers claim nothing new%s until space returns\n",
			why, pol->shared ? " for members over their share of the disk (drop_max_bytes)" : "");
}

/* --after: each id as the spool names it (a plain NAME of a user on a
 * shared spool is their USER:NAME). An id that is nowhere is refused
 * now: the worker would reject the task. */
static int add_after(struct submit *s, struct spool *sp)
{
	char err[512];
	if (!s->after.n)
		return 0;
	if (s->url) {
		fprintf(stderr, "kart submit: --after, --after-any and --after-fail name tasks of a spool; "
			"the PostgreSQL queue has no dependencies\n");
		return 1;
	}
	for (size_t i = 0; i < s->after.n; i++) {
		char key[16];
		const char *given = strchr(s->after.v[i], ' ') + 1;
		snprintf(key, sizeof key, "%.*s", (int)(given - 1 - s->after.v[i]), s->after.v[i]);
		_cleanup_free_ char *id = spool_own_id(sp, given), *sid = term_safe(id);
		const char *why;
		uid_t owner;
		if (task_name_check(id, &why) != 0) {
			fprintf(stderr, "kart submit: %s=%s: not a task id\n", key, sid);
			return 1;
		}
		if (!spool_id_taken(sp, id) && spool_id_pending(sp, id, getuid(), &owner) <= 0) {
			fprintf(stderr, "kart submit: %s=%s: no such task\n", key, sid);
			return 1;
		}
		if (task_directive_add(&s->td, key, id, err, sizeof err) < 0) {
			_cleanup_free_ char *serr = term_safe(err);
			fprintf(stderr, "kart submit: %s=%s: %s\n", key, sid, serr);
			return 1;
		}
	}
	return 0;
}

/* Open the spool (not for --to), ready to publish: the drop directory
 * of a shared spool, --hold. 0, or the exit status (said). */
static int open_spool(struct submit *s, struct spool *sp)
{
	char err[512];
	if (s->url)
		return 0;
	ctx_open_spool(s->c, sp);
	if (spool_use_drop(sp, err, sizeof err) < 0) {
		fprintf(stderr, "kart submit: %s\n", err);
		return 1;
	}
	if (s->hold && sp->dropd >= 0) {
		fprintf(stderr, "kart submit: --hold: new/ is the workers' on a shared spool: only "
			"root can hold there\n");
		return 1;
	}
	/* The id is chosen, reserved and written into the task (as name=BASE,
	 * when it is not BASE: on a shared spool the id is USER:NAME) by
	 * spool_submit, before the task is published. */
	sp->hold = s->hold;
	return 0;
}

/* The task with the options' directives, parsed whole as the worker
 * will: what holds between a file's directive and an option's (a second
 * cwd=) is said here, the options named as such. *first: the number of
 * the options' first line. */
static char *compose(struct submit *s, size_t *tlen, struct task_spec *spec, int *first)
{
	char err[512];
	char *task = task_compose(s->body, s->blen, &s->td, tlen, first, err, sizeof err);
	if (!task) {
		fprintf(stderr, "kart submit: %s: %s\n", s->what, err);
		return NULL;
	}
	if (task_parse(task, *tlen < TASK_HEADER_MAX ? *tlen : TASK_HEADER_MAX, spec, err, sizeof err) == 0)
		return task;
	say_task_error(s, err, *first);
	free(task);
	return NULL;
}

/* Publish it, and print its id. */
static int queue(struct submit *s, struct spool *sp, const struct policy *pol, const char *task,
		 size_t tlen)
{
	char id[TASK_NAME_MAX + 16];
	/* The values of env= are yours alone to read: the task file is made
	 * 0600 (the worker reads it as root, or as you). */
	mode_t um = s->has_env ? umask(077) : 0;
	warn_low_space(sp, pol);
	int r = spool_submit(sp, s->base, task, tlen, s->base, id, sizeof id);
	if (s->has_env)
		(void)umask(um);
	if (r == -ENAMETOOLONG) {
		/* An id is a task name: 200 bytes, the .N and a USER: prefix
		 * included (spool-layout README §2). */
		_cleanup_free_ char *b = term_safe(s->base), *pre = term_safe(sp->idprefix);
		fprintf(stderr, "kart submit: no id of at most %d bytes is free for the name %s (its ids are "
			"%s%s, then %s%s.2 ...): give a shorter --name\n", TASK_NAME_MAX, b, pre, b, pre, b);
		return 1;
	}
	if (r < 0) {
		fprintf(stderr, "kart submit: cannot queue into %s/%s: %s\n", sp->path,
			sp->dropd >= 0 ? "drop" : "new", strerror(-r));
		return 1;
	}
	_cleanup_free_ char *sid = term_safe(id);
	printf("%s\n", sid);
	(void)fflush(stdout);
	if (s->live < 0)
		warn_no_worker(sp, "submit");
	else if (s->live == 0)
		say_no_worker(sp, "submit");
	return 0;
}

/* libpq is in kart-sync: the same command line, there (before stdin is
 * read). */
static int exec_sync(int argc, char **argv)
{
	char path[4096];
	find_libexec("kart-sync", path, sizeof path);
	char **av = xmalloc(((size_t)argc + 2) * sizeof *av);
	av[0] = (char *)"kart";
	memcpy(av + 1, argv, (size_t)argc * sizeof *av);
	av[argc + 1] = NULL;
	execv(path, av);
	fprintf(stderr, "kart submit: cannot run %s: %s\n", path, strerror(errno));
	free(av);
	return 1;
}

static void submit_free(struct submit *s)
{
	task_directives_free(&s->td);
	strv_free(&s->after);
	free(s->body);
	free(s->base);
	free(s->cwd_checked);
}

static int submit_run(struct submit *s, const struct opts_rest *rest)
{
	_cleanup_spool_ struct spool sp = {.root = -1, .tmp = -1, .new = -1, .cur = -1, .done = -1,
					   .drop = -1, .dropd = -1, .ids = -1};
	_cleanup_free_ struct task_spec *spec = xmalloc(sizeof *spec);
	int r;
	if ((r = read_task(s, rest, spec)) != 0 || (r = open_spool(s, &sp)) != 0)
		return r;
	if ((r = add_unique(s, &sp)) != 0)
		return r < 0 ? 0 : r;
	/* spec is scratch (29 KB) until compose parses the task into it. The
	 * policy, read once for every check below (a copy is 90 KB): NULL
	 * where it cannot be read here, and each check leaves it to the
	 * worker. */
	char perr[512];
	const struct policy *pol = s->url ? NULL : policy_get(sp.path, perr, sizeof perr);
	if ((r = add_after(s, &sp)) != 0 || (r = add_cwd(s, &sp, pol, spec)) != 0)
		return r;
	size_t tlen;
	int first;
	_cleanup_free_ char *task = compose(s, &tlen, spec, &first);
	if (!task)
		return 1;
	if (s->url)
		return submit_to_queue(s->url, s->base, s->lane, task, tlen);
	if ((r = precheck(s, &sp, pol, spec, first)) != 0 || (r = enforce_check(s, &sp, spec, first)) != 0)
		return r;
	warn_creds(&sp, pol, spec);
	return queue(s, &sp, pol, task, tlen);
}

int cmd_submit(struct ctx *c, int argc, char **argv)
{
	struct submit s = {.c = c, .live = -1};
	const struct opt opts[] = {
		OPT_CALLBACK(0, "to", &s, "postgres URL",
			     "queue it in the PostgreSQL queue of kart feed instead (no spool needed) "
			     "and print the row's id", opt_to),
		OPT_STRING(0, "name", &s.name, "NAME",
			   "the task's name (default: the file's name, 'stdin', or the command's); the "
			   "id is NAME, or NAME.2, NAME.3... if NAME is taken"),
		OPT_CALLBACK(0, "timeout", &s, "DUR", "90, 90s, 5m, 2h", opt_directive),
		OPT_CALLBACK(0, "memory", &s, "SIZE", "512K, 256M, 2G", opt_directive),
		OPT_CALLBACK(0, "pids", &s, "N", "at most N processes", opt_directive),
		OPT_CALLBACK(0, "cpu", &s, "CORES", "e.g. 0.5", opt_directive),
		OPT_CALLBACK(0, "lane", &s, "LANE", "fast (default) or batch", opt_directive),
		OPT_CALLBACK(0, "net", &s, NULL, "ask for network (the policy must allow it)",
			     opt_directive),
		OPT_CALLBACK(0, "priority", &s, "N", "lower runs first (default 0)", opt_directive),
		OPT_CALLBACK(0, "kind", &s, "NAME",
			     "run it with the policy's runner for kind NAME (wins over the #! line; see "
			     "kart.conf(5) [kind.NAME])", opt_directive),
		OPT_CALLBACK(0, "kill-grace", &s, "DUR",
			     "on a timeout or cancel, SIGTERM, then SIGKILL after DUR (default: the "
			     "policy's, 5s)", opt_directive),
		OPT_CALLBACK(0, "label", &s, "LABEL", "a label for a batch: kart status --label LABEL",
			     opt_directive),
		OPT_BOOL(0, "hold", &s.hold, "queue it held: no worker claims it until kart release"),
		OPT_GROUP("When it starts, and again (see kart-task(5)):"),
		OPT_CALLBACK(0, "at", &s, "TIME",
			     "not before TIME: RFC 3339 (2026-12-01T02:00:00Z) or HH:MM, the next such "
			     "local time (not_before=)", opt_when),
		OPT_CALLBACK(0, "in", &s, "DUR", "not before DUR from now: 90, 90s, 5m, 2h, 1d",
			     opt_when),
		OPT_CALLBACK(0, "retry-on", &s, "LIST",
			     "run it again when it ends so: failed, timeout, oom, exit=N, separated by "
			     "commas (retry_on=)", opt_directive),
		OPT_CALLBACK(0, "retries", &s, "N", "at most N more runs, for any reason (retries=)",
			     opt_directive),
		OPT_CALLBACK(0, "retry-delay", &s, "DUR",
			     "wait DUR before the first retry, doubled for each later one, at most 1h "
			     "(retry_delay=; default 0)", opt_directive),
		OPT_CALLBACK_F(0, "unique", &s, "KEY",
			       "not queued while a task of yours with KEY (default: the name) is "
			       "queued, scheduled or running: prints that one's id instead, exit 0 "
			       "(unique=)", OPTF_OPTARG, opt_unique),
		OPT_GROUP("Dependencies (after=; see kart-task(5)):"),
		OPT_CALLBACK(0, "after", &s, "ID[,ID...]",
			     "run once each named task has its result, all ok; their artifacts and "
			     "stdout are under $KART_INPUTS/ID/. One that did not end ok: this one "
			     "ends `skipped`. Each must exist now and be yours (repeatable)", opt_after),
		OPT_CALLBACK(0, "after-any", &s, "ID[,ID...]",
			     "run once each named task has its result, whatever its status (Slurm's "
			     "afterany; after_any=)", opt_after),
		OPT_CALLBACK(0, "after-fail", &s, "ID[,ID...]",
			     "run only if each named task did not end ok (Slurm's afternotok; "
			     "after_fail=); one that ended ok: this one ends `skipped`", opt_after),
		OPT_GROUP("The task's files (each opened as you, when it starts; see kart-task(5)):"),
		OPT_STRING('C', "cwd", &s.cwd, "DIR",
			   "run in DIR instead of the directory you submit from (the default: cwd=, "
			   "bound read-write at the same path: its output files are yours)"),
		OPT_BOOL(0, "no-cwd", &s.no_cwd,
			 "run in a private, empty /work, discarded at the end (keep files in "
			 "$KART_OUTDIR, or print them)"),
		OPT_CALLBACK(0, "bind", &s, "PATH", "bind PATH read-write too (bind=)", opt_bind),
		OPT_CALLBACK(0, "ro", &s, "PATH", "bind PATH read-only (ro=)", opt_bind),
		OPT_CALLBACK('e', "env", &s, "NAME[=VALUE]",
			     "set a variable in the task's environment (env=); without =VALUE, the "
			     "value from yours. Values are kept in the task file alone (mode 0600), "
			     "never in its result or logs", opt_env),
		OPT_END(),
	};
	/* As given, for kart-sync: the parse moves the operands forward. */
	_cleanup_free_ char **given = xmalloc(((size_t)argc + 1) * sizeof *given);
	memcpy(given, argv, ((size_t)argc + 1) * sizeof *given);
	struct opts_rest rest;
	opts_parse("submit", argc, argv, opts, &help, 0, &rest);
	/* The queue between hosts has no time nor key of its own: a feeder
	 * would hold a timed row (and its slot) until then, and a key holds
	 * only within one spool. Said now rather than half honoured. */
	if (s.url && (s.timed || s.unique))
		return usage_error("submit", "%s: not with --to postgres (the queue has no %s; "
				   "see docs/SYNC.md)", s.timed ? "--at/--in" : "--unique",
				   s.timed ? "start time" : "unique keys");
	if (s.url && !submit_to_queue)
		return exec_sync(argc, given);
	int rc = submit_run(&s, &rest);
	submit_free(&s);
	return rc;
}
