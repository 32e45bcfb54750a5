/* kart status */
#define _GNU_SOURCE
#include <fcntl.h>
#include <fnmatch.h>
#include <getopt.h>
#include <sys/stat.h>
#include <jansson.h>

#include "cmd.h"
#include "obs.h"
#include "policy.h"
#include "query.h"
#include "result.h"
#include "task.h"
#include "termsafe.h"
#include "space.h"
#include "util.h"
#include "worker_control.h"

static const char help[] =
	"usage: kart [-s SPOOL] status [--json | --ndjson] [--summary] [--state STATE]\n"
	"                               [--older-than DUR] [--newer-than DUR]\n"
	"                               [--sort time|id] [--last N] [--label L] [ID...]\n"
	"\n"
	"Each task's state: queued, scheduled (and until when), waiting (on the\n"
	"after= ids without a result), held (kart hold), running or paused (kart\n"
	"pause; and its worker), or its final status (ok, failed, timeout, oom,\n"
	"killed, rejected, refused, cancelled, lost, skipped).\n"
	"Without IDs, every task in the spool, each id once, in the furthest state\n"
	"it is found in (a result wins over a claim); an ID may be a glob pattern\n"
	"('up-f0*'). Lines are ID, state, and the time (scheduled), the worker\n"
	"and its use so far (running: CPU time, memory now and at its peak, output\n"
	"bytes) or the exit code (finished), separated by tabs, oldest first.\n"
	"\n"
	"  --json              one JSON array of {\"id\", \"state\", \"worker\",\n"
	"                      \"usage\", \"not_before\", \"exit_code\", \"since\"}\n"
	"                      objects\n"
	"  --ndjson            one such object per line, printed as found\n"
	"  --summary           the number of tasks in each state (with --json: an\n"
	"                      object)\n"
	"  --state STATE       only tasks in STATE: queued, scheduled, waiting, held,\n"
	"                      running, paused, done (any final status) or a final\n"
	"                      status; repeat or separate by commas\n"
	"  --older-than DUR    only tasks that entered their state at least DUR ago\n"
	"  --newer-than DUR    only tasks that entered their state less than DUR ago\n"
	"                      (DUR: 90, 90s, 5m, 2h, 7d)\n"
	"  --sort time|id      by the time each entered its state (default), or by id\n"
	"  --last N            only the last N of that order\n"
	"  --label L           only tasks submitted with --label L (#kart: label=L)\n"
	"\n"
	"exit status: 0; 1 if an ID is unknown; 2 usage error\n";

/* The states --summary always counts, in the order tasks move. */
static const char *const summary_states[] = {
	"queued", "scheduled", "waiting", "held", "running", "paused", "ok", "failed", "timeout",
	"oom", "killed", "rejected", "refused", "cancelled", "lost", "skipped",
};

struct out {
	bool json, ndjson, summary;
	json_t *arr;
	char states[512];         /* ",a,b," or "" for every state */
	int64_t older_ms, newer_ms; /* -1: no filter */
	int64_t now_ms;
	json_t *counts;           /* --summary: state -> count, in order */
	const char *label;        /* --label; NULL: any */
	struct spool *sp;
	char *locks;              /* /proc/locks, read at the first running task */
	bool locks_read;
};

/* A running task's use so far (obs.h), as Slurm's sstat. */
static void run_now(struct out *o, const char *id, const struct qinfo *q, struct run_now *u)
{
	if (!o->locks_read) {
		o->locks = obs_locks();
		o->locks_read = true;
	}
	obs_run_now(o->sp, o->locks, q->worker, id, u);
}

/* The tasks found, kept to be sorted and cut before they are printed. */
struct entry {
	char *id;
	struct qinfo q;
};
struct entries {
	struct entry *v;
	size_t n, cap;
};

static void collect(const char *id, const struct qinfo *q, void *arg)
{
	struct entries *e = arg;
	if (e->n == e->cap) {
		e->cap = e->cap ? 2 * e->cap : 256;
		e->v = xrealloc(e->v, e->cap * sizeof *e->v);
	}
	e->v[e->n].id = xstrdup(id);
	e->v[e->n++].q = *q;
}

static int by_id(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->id, ((const struct entry *)b)->id);
}

static int by_time(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	if (x->q.since_ms != y->q.since_ms)
		return x->q.since_ms < y->q.since_ms ? -1 : 1;
	return strcmp(x->id, y->id);
}

static bool is_glob(const char *s) { return strpbrk(s, "*?[") != NULL; }

/* The task's label=, from its result or else its file ("": none). */
static void task_label(struct spool *sp, const char *id, const struct qinfo *q, char *out, size_t len)
{
	out[0] = '\0';
	if (q->state == Q_DONE) {
		json_t *j = NULL;
		if (query_load(sp, id, &j) == 0) {
			const char *l = json_string_value(json_object_get(j, "label"));
			snprintf(out, len, "%s", l ? l : "");
		}
		json_decref(j);
		return;
	}
	char p[600];
	int dir = q->state == Q_RUNNING ? sp->cur : sp->new;
	if (q->state == Q_QUEUED || q->state == Q_SCHEDULED ? pathfmt(p, sizeof p, "%s", id) < 0
	    : q->state == Q_HELD ? spool_held_name(id, p, sizeof p) < 0
				 : pathfmt(p, sizeof p, "%s/%s", q->worker, id) < 0)
		return;
	struct task_spec spec;
	struct stat st;
	char err[256];
	/* Never blocks: a FIFO or a device is no task of anyone's. */
	_cleanup_close_ int fd = openat(dir, p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	_cleanup_free_ char *text = xmalloc(TASK_HEADER_MAX);
	ssize_t n = read_upto(fd, text, TASK_HEADER_MAX);
	if (n > 0 && task_parse(text, (size_t)n, &spec, err, sizeof err) == 0)
		snprintf(out, len, "%s", spec.label);
}

/* Whether a task's label is L: as the user typed it, or as kart submit
 * wrote it (percent-encoded) where a reader has not decoded it. */
static bool label_is(const char *have, const char *want)
{
	char enc[3 * TASK_NAME_MAX + 1];
	return strcmp(have, want) == 0 ||
	       (pct_encode(want, enc, sizeof enc) >= 0 && strcmp(have, enc) == 0);
}

static bool wanted(const struct out *o, const struct qinfo *q)
{
	if (o->states[0]) {
		char k[64];
		snprintf(k, sizeof k, ",%s,", query_state_name(q));
		if (!strstr(o->states, k) && !(q->state == Q_DONE && strstr(o->states, ",done,")))
			return false;
	}
	if (o->older_ms >= 0 && (!q->since_ms || o->now_ms - q->since_ms < o->older_ms))
		return false;
	if (o->newer_ms >= 0 && (!q->since_ms || o->now_ms - q->since_ms >= o->newer_ms))
		return false;
	return true;
}

static bool label_wanted(const struct out *o, const char *id, const struct qinfo *q)
{
	if (!o->label)
		return true;
	char have[TASK_NAME_MAX * 3 + 1];
	task_label(o->sp, id, q, have, sizeof have);
	return label_is(have, o->label);
}

static void emit(const char *id, const struct qinfo *q, void *arg)
{
	struct out *o = arg;
	if (!wanted(o, q))
		return;
	if (o->summary) {
		const char *w = query_state_name(q);
		json_t *n = json_object_get(o->counts, w);
		json_object_set_new(o->counts, w, json_integer(n ? json_integer_value(n) + 1 : 1));
		return;
	}
	if (o->json || o->ndjson) {
		_cleanup_free_ char *clean = utf8_sanitize(id, strlen(id));
		json_t *e = json_pack("{s:s, s:s}", "id", clean, "state", query_state_name(q));
		if (q->state == Q_RUNNING) {
			struct run_now u;
			run_now(o, id, q, &u);
			json_object_set_new(e, "worker", json_string(q->worker));
			json_object_set_new(e, "usage", obs_run_json(&u));
		}
		if (q->state == Q_SCHEDULED) {
			char nb[32];
			fmt_rfc3339_ms(q->not_before_ms, nb);
			json_object_set_new(e, "not_before", json_string(nb));
		}
		if (q->waiting[0]) {
			json_t *on = json_array();
			_cleanup_free_ char *copy = xstrdup(q->waiting);
			char *save = NULL;
			for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
				_cleanup_free_ char *u = utf8_sanitize(t, strlen(t));
				json_array_append_new(on, json_string(u));
			}
			json_object_set_new(e, "waiting_on", on);
		}
		if (q->state == Q_DONE)
			json_object_set_new(e, "exit_code",
					    q->exit_code >= 0 ? json_integer(q->exit_code) : json_null());
		char ts[32];
		fmt_rfc3339_ms(q->since_ms, ts);
		json_object_set_new(e, "since", q->since_ms ? json_string(ts) : json_null());
		if (o->json) {
			json_array_append_new(o->arr, e);
			return;
		}
		char *line = json_dumps_safe(e, JSON_COMPACT | JSON_PRESERVE_ORDER);
		json_decref(e);
		if (line)
			printf("%s\n", line);
		free(line);
		fflush(stdout);
		return;
	}
	/* The id, the worker and the after= ids are names anyone may
	 * have chosen: printed escaped. */
	_cleanup_free_ char *clean = term_safe(id);
	if (q->state == Q_RUNNING) {
		struct run_now u;
		run_now(o, id, q, &u);
		/* Its use, where its processes are found (a claim whose
		 * run is starting or gone has none). */
		_cleanup_free_ char *w = term_safe(q->worker), *use = u.by ? obs_run_text(&u) : NULL;
		printf("%s\t%s\t%s%s%s\n", clean, query_state_name(q), w, use ? "\t" : "", use ? use : "");
	}
	else if (q->state == Q_SCHEDULED) {
		char nb[32];
		fmt_rfc3339_ms(q->not_before_ms, nb);
		printf("%s\tscheduled\t%s\n", clean, nb);
	}
	else if (q->waiting[0]) {
		_cleanup_free_ char *on = term_safe(q->waiting);
		printf("%s\twaiting\t%s\n", clean, on);
	} else {
		_cleanup_free_ char *st = term_safe(query_state_name(q));
		if (q->state == Q_DONE && q->exit_code >= 0)
			printf("%s\t%s\t%d\n", clean, st, q->exit_code);
		else
			printf("%s\t%s\n", clean, st);
	}
}

/* Below [worker] min_free, workers claim nothing: what is queued waits
 * for space, not for a worker (only said then, so the usual lines stay). */
static bool claiming_stopped(const struct spool *sp, char *why, size_t len)
{
	struct policy pol;
	char err[512];
	return policy_load(&pol, sp->path, err, sizeof err) == 0 &&
	       space_low(sp->root, &pol, sp->path, why, len);
}

int cmd_status(struct ctx *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, 'j'},
		{"ndjson", no_argument, NULL, 'J'},
		{"summary", no_argument, NULL, 'S'},
		{"state", required_argument, NULL, 's'},
		{"older-than", required_argument, NULL, 'o'},
		{"newer-than", required_argument, NULL, 'n'},
		{"sort", required_argument, NULL, 'O'},
		{"last", required_argument, NULL, 'l'},
		{"label", required_argument, NULL, 'L'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	struct out o = {.older_ms = -1, .newer_ms = -1};
	int ch, rc = 0;
	int64_t d;
	bool sort_id = false;
	long long last = -1;
	while ((ch = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'h': fputs(help, stdout); return 0;
		case 'j': o.json = true; break;
		case 'J': o.ndjson = true; break;
		case 'S': o.summary = true; break;
		case 's': {
			_cleanup_free_ char *copy = xstrdup(optarg);
			char *save = NULL;
			for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
				bool known = strcmp(t, "done") == 0;
				for (size_t i = 0; i < ARRAY_SIZE(summary_states); i++)
					known = known || strcmp(t, summary_states[i]) == 0;
				if (!known)
					return usage_error("status", "--state %s: not a state (queued, "
							   "running, done, ok, failed, ...)", t);
				size_t l = strlen(o.states);
				if (l + strlen(t) + 3 > sizeof o.states)
					return usage_error("status", "--state: too many states");
				snprintf(o.states + l, sizeof o.states - l, "%s%s,", l ? "" : ",", t);
			}
			break;
		}
		case 'o':
		case 'n':
			if (parse_duration_s(optarg, &d) < 0)
				return usage_error("status", "%s %s: not a duration (90, 90s, 5m, 2h, 7d)",
						   ch == 'o' ? "--older-than" : "--newer-than", optarg);
			*(ch == 'o' ? &o.older_ms : &o.newer_ms) = d * 1000;
			break;
		case 'O':
			if (strcmp(optarg, "id") != 0 && strcmp(optarg, "time") != 0)
				return usage_error("status", "--sort %s: not time or id", optarg);
			sort_id = optarg[0] == 'i';
			break;
		case 'l':
			if (parse_int(optarg, 0, INT32_MAX, &last) < 0)
				return usage_error("status", "--last %s: not a number", optarg);
			break;
		case 'L': o.label = optarg; break;
		case ':': return usage_error("status", "option '%s' needs a value", argv[optind - 1]);
		default: return usage_error("status", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (o.json && o.ndjson)
		return usage_error("status", "--json and --ndjson exclude each other");
	struct spool *sp = &c->sp;
	o.now_ms = now_realtime_ms();
	if (o.json)
		o.arr = json_array();
	if (o.summary) {
		o.counts = json_object();
		for (size_t i = 0; i < ARRAY_SIZE(summary_states); i++)
			json_object_set_new(o.counts, summary_states[i], json_integer(0));
	}
	o.sp = sp;
	struct entries all = {0}, sel = {0};
	bool globs = optind == argc;
	for (int i = optind; i < argc; i++)
		globs = globs || is_glob(argv[i]);
	if (globs) {
		int r = query_all(sp, collect, &all);
		if (r < 0) {
			fprintf(stderr, "kart status: %s\n", strerror(-r));
			rc = 1;
		}
	}
	if (optind == argc)
		sel = all, all = (struct entries){0};
	for (int i = optind; i < argc; i++) {
		if (is_glob(argv[i])) {
			size_t before = sel.n;
			for (size_t k = 0; k < all.n; k++)
				if (fnmatch(argv[i], all.v[k].id, FNM_PERIOD) == 0)
					collect(all.v[k].id, &all.v[k].q, &sel);
			if (sel.n == before) {
				_cleanup_free_ char *a = term_safe(argv[i]);
				fprintf(stderr, "kart status: %s: no task matches\n", a);
				rc = 1;
			}
			continue;
		}
		struct qinfo q;
		_cleanup_free_ char *id = spool_own_id(sp, argv[i]);
		int r = query_id(sp, id, &q);
		if (r < 0 || q.state == Q_UNKNOWN) {
			_cleanup_free_ char *sid = term_safe(id);
			fprintf(stderr, "kart status: %s: %s\n", sid,
				r < 0 ? strerror(-r) : "no such task");
			rc = 1;
			continue;
		}
		collect(id, &q, &sel);
	}
	/* Named one by one, they come in the order named. */
	if (globs)
		sort_n(sel.v, sel.n, sizeof *sel.v, sort_id ? by_id : by_time);
	size_t kept = 0;
	for (size_t k = 0; k < sel.n; k++) {
		if (wanted(&o, &sel.v[k].q) && label_wanted(&o, sel.v[k].id, &sel.v[k].q))
			sel.v[kept++] = sel.v[k];
		else
			free(sel.v[k].id);
	}
	for (size_t k = last >= 0 && (size_t)last < kept ? kept - (size_t)last : 0; k < kept; k++)
		emit(sel.v[k].id, &sel.v[k].q, &o);
	for (size_t k = 0; k < all.n; k++)
		free(all.v[k].id);
	free(all.v);
	for (size_t k = 0; k < kept; k++)
		free(sel.v[k].id);
	free(sel.v);
	if (o.summary) {
		const char *k;
		json_t *v;
		json_int_t total = 0;
		json_object_foreach(o.counts, k, v) total += json_integer_value(v);
		json_object_set_new(o.counts, "total", json_integer(total));
		char why[700];
		if (wctl_spool_paused(sp->new))
			json_object_set_new(o.counts, "claiming",
					    json_string("stopped: the spool is paused (kart resume --all)"));
		else if (claiming_stopped(sp, why, sizeof why))
			json_object_set_new(o.counts, "claiming", json_sprintf("stopped: %s", why));
		if (o.json || o.ndjson) {
			char *s = json_dumps_safe(o.counts, JSON_PRESERVE_ORDER |
							       (o.json ? JSON_INDENT(2) : JSON_COMPACT));
			printf("%s\n", s ? s : "{}");
			free(s);
		} else {
			json_object_foreach(o.counts, k, v) {
				if (json_is_string(v)) {
					_cleanup_free_ char *t = term_safe(json_string_value(v));
					printf("%s\t%s\n", k, t);
				} else
					printf("%s\t%lld\n", k, (long long)json_integer_value(v));
			}
		}
		json_decref(o.counts);
		json_decref(o.arr);
		spool_close(sp);
		return rc;
	}
	free(o.locks);
	if (o.json) {
		char *s = json_dumps_safe(o.arr, JSON_INDENT(2));
		printf("%s\n", s ? s : "[]");
		free(s);
		json_decref(o.arr);
	}
	spool_close(sp);
	return rc;
}
