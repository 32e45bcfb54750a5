/* kart submit */
#define _GNU_SOURCE
#include <ctype.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <sys/stat.h>

#include "cmd.h"
#include "policy.h"
#include "query.h"
#include "sched.h"
#include "space.h"
#include "task.h"
#include "termsafe.h"
#include "util.h"

static const char help[] =
	"usage: kart [-s SPOOL] submit [OPTIONS] FILE\n"
	"       kart [-s SPOOL] submit [OPTIONS] -            (the task on stdin)\n"
	"       kart [-s SPOOL] submit [OPTIONS] -- CMD [ARG...]\n"
	"       kart submit --to postgres URL [OPTIONS] FILE|-|-- CMD [ARG...]\n"
	"\n"
	"Queue a task atomically (tmp/, fsync, rename into new/) and print its id.\n"
	"The options are added to the task as #kart: directives.\n"
	"\n"
	"  --to postgres URL  queue it in the PostgreSQL queue of kart feed\n"
	"                   instead (no spool needed) and print the row's id\n"
	"  --name NAME      the task's name (default: the file's name, 'stdin',\n"
	"                   or the command's); the id is NAME, or NAME.2, NAME.3...\n"
	"                   if NAME is taken\n"
	"  --timeout DUR    90, 90s, 5m, 2h\n"
	"  --memory SIZE    512K, 256M, 2G\n"
	"  --pids N\n"
	"  --cpu CORES      e.g. 0.5\n"
	"  --lane LANE      fast (default) or batch\n"
	"  --net            ask for network (the policy must allow it)\n"
	"  --priority N     lower runs first (default 0)\n"
	"  --kind NAME      run it with the policy's runner for kind NAME\n"
	"                   (wins over the #! line; see kart.conf(5) [kind.NAME])\n"
	"  --kill-grace DUR on a timeout or cancel, SIGTERM, then SIGKILL after\n"
	"                   DUR (default: the policy's, 5s)\n"
	"  --label LABEL    a label for a batch: kart status --label LABEL\n"
	"  --hold           queue it held: no worker claims it until kart release\n"
	"\n"
	"When it starts, and again (see kart-task(5)):\n"
	"  --at TIME        not before TIME: RFC 3339 (2026-12-01T02:00:00Z) or\n"
	"                   HH:MM, the next such local time (not_before=)\n"
	"  --in DUR         not before DUR from now: 90, 90s, 5m, 2h, 1d\n"
	"  --retry-on LIST  run it again when it ends so: failed, timeout, oom,\n"
	"                   exit=N, separated by commas (retry_on=)\n"
	"  --retries N      at most N more runs, for any reason (retries=)\n"
	"  --retry-delay DUR  wait DUR before the first retry, doubled for each\n"
	"                   later one, at most 1h (retry_delay=; default 0)\n"
	"  --unique[=KEY]   not queued while a task of yours with KEY (default: the\n"
	"                   name) is queued, scheduled or running: prints that one's\n"
	"                   id instead, exit 0 (unique=)\n"
	"Dependencies (after=; see kart-task(5)):\n"
	"  --after ID[,ID...]  run once each named task has its result, all ok;\n"
	"                   their artifacts and stdout are under $KART_INPUTS/ID/.\n"
	"                   One that did not end ok: this one ends `skipped`.\n"
	"                   Each must exist now and be yours (repeatable)\n"
	"\n"
	"The task's files (each opened as you, when it starts; see kart-task(5)):\n"
	"  (default)        it runs in the directory you submit from (cwd=), bound\n"
	"                   read-write at the same path: its output files are yours\n"
	"  -C, --cwd DIR    run in DIR instead\n"
	"  --no-cwd         run in a private, empty /work, discarded at the end\n"
	"                   (keep files in $KART_OUTDIR, or print them)\n"
	"  --bind PATH      bind PATH read-write too (bind=)\n"
	"  --ro PATH        bind PATH read-only (ro=)\n"
	"  -e NAME=VALUE    set a variable in the task's environment (env=); the\n"
	"  -e NAME          value from yours. Values are kept in the task file\n"
	"                   alone (mode 0600), never in its result or logs\n"
	"\n"
	"exit status: 0 queued; 1 could not queue; 2 usage error\n";

int (*submit_to_queue)(const char *url, const char *name, const char *lane, const char *task,
		       size_t len);

static void shell_quote(struct strv *unused, char **out, size_t *len, const char *s)
{
	(void)unused;
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

/* "#kart: KEY=PATH" for an existing path, made absolute and resolved
 * here (as the worker will resolve it as you), and encoded. */
static int bind_line(const char *key, const char *path, char *line, size_t len)
{
	_cleanup_free_ char *real = realpath(path, NULL);
	char enc[TASK_BIND_PATH_MAX * 3];
	if (!real) {
		fprintf(stderr, "kart submit: --%s %s: %s\n", key, path, strerror(errno));
		return -1;
	}
	if (pct_encode(real, enc, sizeof enc) < 0 || strlen(real) >= TASK_BIND_PATH_MAX) {
		fprintf(stderr, "kart submit: --%s %s: the path is too long\n", key, path);
		return -1;
	}
	snprintf(line, len, "#kart: %s=%s\n", key, enc);
	return 0;
}

/* -e NAME=VALUE, or -e NAME for the value we have. */
static int env_line(const char *arg, struct strv *lines)
{
	const char *eq = strchr(arg, '=');
	size_t nl = eq ? (size_t)(eq - arg) : strlen(arg);
	char name[256];
	if (nl == 0 || nl >= sizeof name)
		return -1;
	memcpy(name, arg, nl);
	name[nl] = '\0';
	for (size_t i = 0; i < nl; i++)
		if (!(isalnum((unsigned char)name[i]) || name[i] == '_') || isdigit((unsigned char)name[0]))
			return -1;
	const char *val = eq ? eq + 1 : getenv(name);
	if (!val)
		return -1;
	size_t cap = strlen(val) * 3 + 1;
	_cleanup_free_ char *enc = xmalloc(cap);
	if (pct_encode(val, enc, cap) < 0)
		return -1;
	strv_addf(lines, "#kart: env=%s=%s\n", name, enc);
	return 0;
}

/* The directory we run in, as the task's cwd=, unless the spool or the
 * policy would refuse it: then the private /work, and a note. */
static void default_cwd(const struct spool *sp, struct strv *lines)
{
	_cleanup_free_ char *here = getcwd(NULL, 0);
	char line[TASK_BIND_PATH_MAX * 3 + 32];
	const char *why = NULL;
	struct policy pol;
	char perr[512];
	_cleanup_free_ char *spool_real = realpath(sp->path, NULL);
	if (!here)
		return;
	size_t sl = spool_real ? strlen(spool_real) : 0, hl = strlen(here);
	if (policy_load(&pol, sp->path, perr, sizeof perr) == 0 && !pol.task_binds)
		return; /* the policy binds nothing: the private /work, as asked */
	if (strcmp(here, "/") == 0)
		why = "it is the root directory";
	else if ((why = bind_path_refused(here)))
		;
	else if (spool_real && ((hl <= sl && strncmp(here, spool_real, hl) == 0 &&
				 (spool_real[hl] == '/' || spool_real[hl] == '\0')) ||
				(sl < hl && strncmp(here, spool_real, sl) == 0 && here[sl] == '/')))
		why = "it is the spool, in it or above it";
	if (why) {
		fprintf(stderr, "kart submit: note: the task runs in a private /work, not in %s (%s); "
			"-C DIR names another, --no-cwd silences this\n", here, why);
		return;
	}
	if (bind_line("cwd", here, line, sizeof line) == 0)
		strv_add(lines, line);
}

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

/* A task that asks for network the policy would refuse: say so now, with
 * where the grant goes, rather than as a `rejected` result later. The
 * policy is read as the worker reads it; one that cannot be read here
 * leaves the decision to the worker. */
static bool net_refused(struct spool *sp, const struct task_spec *spec, const char *what)
{
	struct policy pol;
	char err[1024];
	if (policy_load(&pol, sp->path, err, sizeof err) < 0)
		return false;
	if (task_check_policy(spec, &pol, getuid(), err, sizeof err) == 0 || policy_net_allowed(&pol, getuid()))
		return false;
	fprintf(stderr, "kart submit: %s: %s\n", what, err);
	return true;
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

/* Queued all the same: the task waits until space returns. */
static void warn_low_space(const struct spool *sp)
{
	struct policy pol;
	char err[512], why[700];
	if (policy_load(&pol, sp->path, err, sizeof err) == 0 &&
	    space_low(sp->root, &pol, sp->path, why, sizeof why))
		fprintf(stderr, "kart submit: warning: %s: workers claim nothing new%s until space returns\n",
			why, pol.shared ? " for members over their share of the disk (drop_max_bytes)" : "");
}

/* --after: one after= line, each id as the spool names it (a plain NAME
 * of a user on a shared spool is their USER:NAME), encoded. An id that
 * is nowhere is refused now: the worker would reject the task. */
static int after_line(struct spool *sp, const char *url, const struct strv *ids, struct strv *lines)
{
	if (url) {
		fprintf(stderr, "kart submit: --after names tasks of a spool; the PostgreSQL queue "
			"has no dependencies\n");
		return -1;
	}
	if (ids->n > TASK_AFTER_MAX) {
		fprintf(stderr, "kart submit: --after: at most %d tasks\n", TASK_AFTER_MAX);
		return -1;
	}
	char line[16 + TASK_AFTER_MAX * (3 * (TASK_NAME_MAX + 80) + 1)];
	size_t o = (size_t)snprintf(line, sizeof line, "#kart: after=");
	for (size_t i = 0; i < ids->n; i++) {
		_cleanup_free_ char *id = spool_own_id(sp, ids->v[i]);
		const char *why;
		uid_t owner;
		if (task_name_check(id, &why) != 0 ||
		    (!spool_id_taken(sp, id) && spool_id_pending(sp, id, getuid(), &owner) <= 0)) {
			_cleanup_free_ char *sid = term_safe(id);
			fprintf(stderr, "kart submit: --after %s: %s\n", sid,
				task_name_check(id, &why) != 0 ? "not a task id" : "no such task");
			return -1;
		}
		char enc[3 * (TASK_NAME_MAX + 80) + 1];
		ssize_t n = pct_encode(id, enc, sizeof enc);
		if (n < 0)
			return -1;
		/* A comma would cut the id: after= splits there first. */
		for (const char *p = enc; *p && o + 4 < sizeof line; p++)
			o += (size_t)(*p == ',' ? snprintf(line + o, sizeof line - o, "%%2C")
						: snprintf(line + o, sizeof line - o, "%c", *p));
		if (i + 1 < ids->n && o + 2 < sizeof line)
			line[o++] = ',';
	}
	if (o + 2 >= sizeof line)
		return -1;
	line[o++] = '\n';
	line[o] = '\0';
	strv_add(lines, line);
	return 0;
}

int cmd_submit(struct ctx *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{"name", required_argument, NULL, 'n'},
		{"timeout", required_argument, NULL, 't'},
		{"memory", required_argument, NULL, 'm'},
		{"pids", required_argument, NULL, 'p'},
		{"cpu", required_argument, NULL, 'c'},
		{"lane", required_argument, NULL, 'l'},
		{"net", no_argument, NULL, 'N'},
		{"priority", required_argument, NULL, 'P'},
		{"kind", required_argument, NULL, 'k'},
		{"kill-grace", required_argument, NULL, 'G'},
		{"label", required_argument, NULL, 'L'},
		{"to", required_argument, NULL, 'T'},
		{"cwd", required_argument, NULL, 'C'},
		{"no-cwd", no_argument, NULL, 'W'},
		{"hold", no_argument, NULL, 'H'},
		{"bind", required_argument, NULL, 'B'},
		{"ro", required_argument, NULL, 'R'},
		{"env", required_argument, NULL, 'e'},
		/* Scheduling (kart-task(5): not_before=, retry_on=, ...). */
		{"at", required_argument, NULL, 1000},
		{"in", required_argument, NULL, 1001},
		{"retry-on", required_argument, NULL, 1002},
		{"retries", required_argument, NULL, 1003},
		{"retry-delay", required_argument, NULL, 1004},
		{"unique", optional_argument, NULL, 1005},
		/* dependencies */
		{"after", required_argument, NULL, 'A'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *name = NULL, *url = NULL, *lane = NULL;
	char directives[1024 + 3 * TASK_NAME_MAX] = "";
	size_t dl = 0;
	int ch;
	/* cwd=, bind=, ro=, env=: one line each, their values encoded. */
	struct strv lines = {0};
	const char *cwd_opt = NULL;
	bool no_cwd = false, has_env = false, hold = false;
	const char *unique = NULL; /* --unique: "" for the name */
	bool timed = false;        /* --at, --in */
	struct strv after = {0}; /* --after ids, as given */
#define ADD(...) \
	do { \
		int _n = snprintf(directives + dl, sizeof directives - dl, __VA_ARGS__); \
		if (_n < 0 || (size_t)_n >= sizeof directives - dl) \
			return usage_error("submit", "options too long"); \
		dl += (size_t)_n; \
	} while (0)
	while ((ch = getopt_long(argc, argv, "+:hC:e:", opts, NULL)) != -1) {
		int64_t d;
		uint64_t sz;
		uint32_t cpu;
		long long v;
		switch (ch) {
		case 'h': fputs(help, stdout); return 0;
		case 'n': name = optarg; break;
		case 't':
			if (parse_duration_s(optarg, &d) < 0 || d == 0)
				return usage_error("submit", "--timeout %s: not a duration (90, 90s, 5m, 2h)", optarg);
			ADD(" timeout=%s", optarg);
			break;
		case 'm':
			if (parse_size(optarg, &sz) < 0)
				return usage_error("submit", "--memory %s: not a size (512K, 256M, 2G)", optarg);
			ADD(" memory=%s", optarg);
			break;
		case 'p':
			if (parse_int(optarg, 1, 4194304, &v) < 0)
				return usage_error("submit", "--pids %s: not a number from 1 to 4194304", optarg);
			ADD(" pids=%s", optarg);
			break;
		case 'c':
			if (parse_cpu_milli(optarg, &cpu) < 0)
				return usage_error("submit", "--cpu %s: not a core count (e.g. 0.5)", optarg);
			ADD(" cpu=%s", optarg);
			break;
		case 'l':
			if (strcmp(optarg, "fast") != 0 && strcmp(optarg, "batch") != 0)
				return usage_error("submit", "--lane %s: not a lane (fast or batch)", optarg);
			ADD(" lane=%s", optarg);
			lane = optarg;
			break;
		case 'N': ADD(" net"); break;
		case 'H': hold = true; break;
		case 'P':
			if (parse_int(optarg, -1000000, 1000000, &v) < 0)
				return usage_error("submit", "--priority %s: not a number", optarg);
			ADD(" priority=%s", optarg);
			break;
		case 'k':
			if (!kind_name_ok(optarg))
				return usage_error("submit", "--kind %s: not a kind name (a-z 0-9 _ -)", optarg);
			ADD(" kind=%s", optarg);
			break;
		case 'G':
			if (parse_duration_s(optarg, &d) < 0)
				return usage_error("submit", "--kill-grace %s: not a duration (0, 10s, 1m)", optarg);
			ADD(" kill_grace=%s", optarg);
			break;
		case 'L': {
			char enc[3 * TASK_NAME_MAX + 1];
			if (!*optarg || pct_encode(optarg, enc, sizeof enc) < 0 ||
			    strlen(enc) > TASK_NAME_MAX)
				return usage_error("submit", "--label: 1 to %d bytes, once encoded", TASK_NAME_MAX);
			ADD(" label=%s", enc);
			break;
		}
		case 'T':
			/* --to postgres URL, or the URL alone. */
			if (strncmp(optarg, "postgres://", 11) == 0 ||
			    strncmp(optarg, "postgresql://", 13) == 0)
				url = optarg;
			else if (strcmp(optarg, "postgres") != 0 && strcmp(optarg, "postgresql") != 0)
				return usage_error("submit", "--to %s: give postgres URL", optarg);
			else if (optind >= argc || strcmp(argv[optind], "--") == 0)
				return usage_error("submit", "--to postgres: give the URL");
			else
				url = argv[optind++];
			break;
		case 'C': cwd_opt = optarg; break;
		case 'W': no_cwd = true; break;
		case 'B':
		case 'R': {
			char line[TASK_BIND_PATH_MAX * 3 + 32];
			if (bind_line(ch == 'B' ? "bind" : "ro", optarg, line, sizeof line) < 0) {
				strv_free(&lines);
				return 1;
			}
			strv_add(&lines, line);
			break;
		}
		case 'e': {
			if (env_line(optarg, &lines) < 0) {
				strv_free(&lines);
				return usage_error("submit", "-e %s: give NAME=VALUE, or NAME of a variable "
					   "that is set", optarg);
			}
			has_env = true;
			break;
		}
		/* Scheduling: written as absolute times and plain values. */
		case 1000:
		case 1001: {
			int64_t at;
			char ts[32];
			if (ch == 1000 && sched_parse_at(optarg, now_realtime_ms(), &at) < 0)
				return usage_error("submit", "--at %s: not a time (RFC 3339, "
						   "2026-12-01T02:00:00Z, or HH:MM)", optarg);
			if (ch == 1001) {
				if (parse_duration_s(optarg, &d) < 0)
					return usage_error("submit", "--in %s: not a duration (90, 90s, 5m, 2h, 1d)",
							   optarg);
				at = now_realtime_ms() + d * 1000;
			}
			fmt_rfc3339_ms(at, ts);
			ADD(" not_before=%s", ts);
			timed = true;
			break;
		}
		case 1002: {
			struct retry_on ro;
			const char *why;
			if (sched_parse_retry_on(optarg, &ro, &why) < 0)
				return usage_error("submit", "--retry-on %s: %s (failed, timeout, oom, exit=N)",
						   optarg, why);
			ADD(" retry_on=%s", optarg);
			break;
		}
		case 1003:
			if (parse_int(optarg, 0, 100, &v) < 0)
				return usage_error("submit", "--retries %s: not a number from 0 to 100", optarg);
			ADD(" retries=%s", optarg);
			break;
		case 1004:
			if (parse_duration_s(optarg, &d) < 0)
				return usage_error("submit", "--retry-delay %s: not a duration (0, 10s, 5m)", optarg);
			ADD(" retry_delay=%s", optarg);
			break;
		case 1005:
			unique = optarg ? optarg : "";
			if (optarg && (!*optarg || strlen(optarg) > TASK_NAME_MAX))
				return usage_error("submit", "--unique=KEY: 1 to %d bytes", TASK_NAME_MAX);
			break;
		case 'A':
			for (char *save = NULL, *tok = strtok_r(optarg, ",", &save); tok;
			     tok = strtok_r(NULL, ",", &save))
				strv_add(&after, tok);
			break;
		case ':': return usage_error("submit", "option '%s' needs a value", argv[optind - 1]);
		default: return usage_error("submit", "unknown option '%s'", argv[optind - 1]);
		}
	}
	/* The queue between hosts has no time nor key of its own: a feeder
	 * would hold a timed row (and its slot) until then, and a key holds
	 * only within one spool. Said now rather than half honoured. */
	if (url && (timed || unique))
		return usage_error("submit", "%s: not with --to postgres (the queue has no %s; "
				   "see docs/SYNC.md)", timed ? "--at/--in" : "--unique",
				   timed ? "start time" : "unique keys");
	if (url && !submit_to_queue) {
		/* libpq is in kart-sync: the same command line, there (before
		 * stdin is read). */
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
	bool is_cmd = optind > 0 && strcmp(argv[optind - 1], "--") == 0;
	if (optind >= argc)
		return usage_error("submit", "no task given (FILE, - or -- CMD)");
	if (!is_cmd && argc - optind > 1) {
		if (hint_command(argc - optind, argv + optind))
			return EXIT_USAGE;
		return usage_error("submit", "one task file at a time (or -- CMD ARGS)");
	}

	_cleanup_free_ char *body = NULL;
	size_t blen = 0;
	_cleanup_free_ char *base = NULL;
	if (is_cmd) {
		size_t len = 0;
		char *s = xstrdup("#!/bin/sh\nexec");
		len = strlen(s);
		for (int i = optind; i < argc; i++) {
			s = xrealloc(s, len + 2);
			s[len++] = ' ';
			s[len] = '\0';
			shell_quote(NULL, &s, &len, argv[i]);
		}
		s = xrealloc(s, len + 2);
		s[len++] = '\n';
		s[len] = '\0';
		body = s;
		blen = len;
		_cleanup_free_ char *cp = xstrdup(argv[optind]);
		base = xstrdup(basename(cp));
	} else if (strcmp(argv[optind], "-") == 0) {
		int r = read_all_fd(STDIN_FILENO, &body, &blen, 1u << 30);
		if (r < 0) {
			fprintf(stderr, "kart submit: reading stdin: %s\n", strerror(-r));
			return 1;
		}
		base = xstrdup("stdin");
	} else {
		_cleanup_close_ int fd = open(argv[optind], O_RDONLY | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0) {
			fprintf(stderr, "kart submit: %s: %s\n", argv[optind], strerror(errno));
			(void)hint_command(argc - optind, argv + optind);
			return 1;
		}
		if (!S_ISREG(st.st_mode)) {
			fprintf(stderr, "kart submit: %s: not a regular file\n", argv[optind]);
			return 1;
		}
		int r = read_all_fd(fd, &body, &blen, 1u << 30);
		if (r < 0) {
			fprintf(stderr, "kart submit: %s: %s\n", argv[optind], strerror(-r));
			return 1;
		}
		_cleanup_free_ char *cp = xstrdup(argv[optind]);
		base = xstrdup(basename(cp));
	}
	if (name)
		base = (free(base), xstrdup(name));
	const char *why;
	if (task_name_check(base, &why) != 0) {
		if (name)
			return usage_error("submit", "--name %s: not a task name (%s)", name,
					   task_name_check(base, &why) > 0 ? "starts with '.'" : why);
		/* A name from a path that cannot be a task name: a plain one. */
		free(base);
		base = xstrdup("task");
	}

	/* --unique: the key, as the directive holds it (encoded). */
	char ukey[3 * TASK_NAME_MAX + 1] = "";
	if (unique) {
		if (pct_encode(*unique ? unique : base, ukey, sizeof ukey) < 0 || strlen(ukey) > TASK_NAME_MAX)
			return usage_error("submit", "--unique: the key is longer than %d bytes, once encoded",
					   TASK_NAME_MAX);
		ADD(" unique=%s", ukey);
	}

	/* The queue's row keeps the name; the host's id is q<row>.<attempt>. */
	_cleanup_spool_ struct spool sp = {.root = -1, .tmp = -1, .new = -1, .cur = -1, .done = -1,
						   .drop = -1, .dropd = -1, .ids = -1};
	char id[TASK_NAME_MAX + 16];
	if (!url) {
		ctx_open_spool(c, &sp);
		char derr[512];
		if (spool_use_drop(&sp, derr, sizeof derr) < 0) {
			fprintf(stderr, "kart submit: %s\n", derr);
			return 1;
		}
		if (unique) {
			/* A courtesy: the worker's check is the one that counts
			 * (two racing submits both get here). */
			char have[TASK_NAME_MAX + 80];
			const char *state = unique_existing(&sp, ukey, have, sizeof have);
			if (state) {
				_cleanup_free_ char *shave = term_safe(have);
				printf("%s\n", shave);
				fprintf(stderr, "kart submit: unique=%s: %s is already %s; not queued again\n",
					ukey, shave, state);
				return 0;
			}
		}
		if (hold && sp.dropd >= 0) {
			fprintf(stderr, "kart submit: --hold: new/ is the workers' on a shared spool: only "
					"root can hold there\n");
			return 1;
		}
		sp.hold = hold;
		/* The id is chosen, reserved and written into the task (as
		 * name=BASE, when it is not BASE: on a shared spool the id is
		 * USER:NAME) by spool_submit, before the task is published. */
	}
	if (after.n && after_line(&sp, url, &after, &lines) < 0) {
		strv_free(&after);
		return 1;
	}
	strv_free(&after);
	if (cwd_opt) {
		char line[TASK_BIND_PATH_MAX * 3 + 32];
		if (no_cwd)
			return usage_error("submit", "-C and --no-cwd together");
		if (bind_line("cwd", cwd_opt, line, sizeof line) < 0)
			return 1;
		strv_add(&lines, line);
	} else if (!no_cwd && !url) {
		default_cwd(&sp, &lines);
	}

	/* Directives go right after the #! line, or first. */
	size_t split = 0;
	if (blen >= 2 && body[0] == '#' && body[1] == '!') {
		const char *nl = memchr(body, '\n', blen);
		split = nl ? (size_t)(nl - body) + 1 : blen;
	}
	_cleanup_free_ char *task = NULL;
	size_t tlen = blen;
	if (dl || lines.n) {
		char line[sizeof directives + 8] = "";
		int ll = dl ? snprintf(line, sizeof line, "#kart:%s\n", directives) : 0;
		size_t more = 0;
		for (size_t i = 0; i < lines.n; i++)
			more += strlen(lines.v[i]);
		task = xmalloc(blen + (size_t)ll + more + 2);
		memcpy(task, body, split);
		size_t o = split;
		if (split && body[split - 1] != '\n')
			task[o++] = '\n';
		memcpy(task + o, line, (size_t)ll);
		o += (size_t)ll;
		for (size_t i = 0; i < lines.n; i++) {
			memcpy(task + o, lines.v[i], strlen(lines.v[i]));
			o += strlen(lines.v[i]);
		}
		memcpy(task + o, body + split, blen - split);
		tlen = o + blen - split;
	} else {
		task = steal_ptr(&body);
	}
	/* Catch a bad directive now rather than as a `rejected` result. */
	struct task_spec spec;
	char err[512];
	if (task_parse(task, tlen < TASK_HEADER_MAX ? tlen : TASK_HEADER_MAX, &spec, err, sizeof err) < 0) {
		fprintf(stderr, "kart submit: %s: %s\n", is_cmd ? "the command" : argv[optind], err);
		return 1;
	}
	strv_free(&lines);
	if (url)
		return submit_to_queue(url, base, lane, task, tlen);
	if ((spec.net || spec.kind_net) && net_refused(&sp, &spec, is_cmd ? "the command" : argv[optind]))
		return 1;
	/* The values of env= are yours alone to read: the task file is made
	 * 0600 (the worker reads it as root, or as you). */
	mode_t um = has_env ? umask(077) : 0;
	warn_low_space(&sp);
	int r = spool_submit(&sp, base, task, tlen, base, id, sizeof id);
	if (has_env)
		(void)umask(um);
	if (r < 0) {
		fprintf(stderr, "kart submit: cannot queue into %s/%s: %s\n", sp.path,
			sp.dropd >= 0 ? "drop" : "new", strerror(-r));
		spool_close(&sp);
		return 1;
	}
	_cleanup_free_ char *sid = term_safe(id);
	printf("%s\n", sid);
	(void)fflush(stdout);
	warn_no_worker(&sp, "submit");
	spool_close(&sp);
	return 0;
}
