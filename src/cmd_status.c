/* kart status */
#define _GNU_SOURCE
#include <getopt.h>
#include <jansson.h>

#include "cmd.h"
#include "query.h"
#include "result.h"
#include "util.h"

static const char help[] =
	"usage: kart [-s SPOOL] status [--json | --ndjson] [--summary] [--state STATE]\n"
	"                               [--older-than DUR] [--newer-than DUR] [ID...]\n"
	"\n"
	"Each task's state: queued, running (and its worker), or its final status\n"
	"(ok, failed, timeout, oom, killed, rejected, refused, cancelled, lost).\n"
	"Without IDs, every task in the spool, each id once, in the furthest state\n"
	"it is found in (a result wins over a claim). Lines are ID, state, and the worker\n"
	"(running) or the exit code (finished), separated by tabs.\n"
	"\n"
	"  --json              one JSON array of {\"id\", \"state\", \"worker\",\n"
	"                      \"exit_code\", \"since\"} objects\n"
	"  --ndjson            one such object per line, printed as found\n"
	"  --summary           the number of tasks in each state (with --json: an\n"
	"                      object)\n"
	"  --state STATE       only tasks in STATE: queued, running, done (any final\n"
	"                      status) or a final status; repeat or separate by commas\n"
	"  --older-than DUR    only tasks that entered their state at least DUR ago\n"
	"  --newer-than DUR    only tasks that entered their state less than DUR ago\n"
	"                      (DUR: 90, 90s, 5m, 2h, 7d)\n"
	"\n"
	"exit status: 0; 1 if an ID is unknown; 2 usage error\n";

static const char *state_word(const struct qinfo *q)
{
	switch (q->state) {
	case Q_QUEUED: return "queued";
	case Q_RUNNING: return "running";
	case Q_DONE: return q->status;
	default: return "unknown";
	}
}

/* The states --summary always counts, in the order tasks move. */
static const char *const summary_states[] = {
	"queued", "running", "ok", "failed", "timeout", "oom", "killed",
	"rejected", "refused", "cancelled", "lost",
};

struct out {
	bool json, ndjson, summary;
	json_t *arr;
	char states[512];         /* ",a,b," or "" for every state */
	int64_t older_ms, newer_ms; /* -1: no filter */
	int64_t now_ms;
	json_t *counts;           /* --summary: state -> count, in order */
};

static bool wanted(const struct out *o, const struct qinfo *q)
{
	if (o->states[0]) {
		char k[64];
		snprintf(k, sizeof k, ",%s,", state_word(q));
		if (!strstr(o->states, k) && !(q->state == Q_DONE && strstr(o->states, ",done,")))
			return false;
	}
	if (o->older_ms >= 0 && (!q->since_ms || o->now_ms - q->since_ms < o->older_ms))
		return false;
	if (o->newer_ms >= 0 && (!q->since_ms || o->now_ms - q->since_ms >= o->newer_ms))
		return false;
	return true;
}

static void emit(const char *id, const struct qinfo *q, void *arg)
{
	struct out *o = arg;
	if (!wanted(o, q))
		return;
	if (o->summary) {
		const char *w = state_word(q);
		json_t *n = json_object_get(o->counts, w);
		json_object_set_new(o->counts, w, json_integer(n ? json_integer_value(n) + 1 : 1));
		return;
	}
	_cleanup_free_ char *clean = utf8_sanitize(id, strlen(id));
	if (o->json || o->ndjson) {
		json_t *e = json_pack("{s:s, s:s}", "id", clean, "state", state_word(q));
		if (q->state == Q_RUNNING)
			json_object_set_new(e, "worker", json_string(q->worker));
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
		char *line = json_dumps(e, JSON_COMPACT | JSON_PRESERVE_ORDER);
		json_decref(e);
		if (line)
			printf("%s\n", line);
		free(line);
		fflush(stdout);
		return;
	}
	if (q->state == Q_RUNNING)
		printf("%s\trunning\t%s\n", clean, q->worker);
	else if (q->state == Q_DONE && q->exit_code >= 0)
		printf("%s\t%s\t%d\n", clean, q->status, q->exit_code);
	else
		printf("%s\t%s\n", clean, state_word(q));
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
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	struct out o = {.older_ms = -1, .newer_ms = -1};
	int ch, rc = 0;
	int64_t d;
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
		case ':': return usage_error("status", "option '%s' needs a value", argv[optind - 1]);
		default: return usage_error("status", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (o.json && o.ndjson)
		return usage_error("status", "--json and --ndjson exclude each other");
	_cleanup_spool_ struct spool sp;
	ctx_open_spool(c, &sp);
	o.now_ms = now_realtime_ms();
	if (o.json)
		o.arr = json_array();
	if (o.summary) {
		o.counts = json_object();
		for (size_t i = 0; i < ARRAY_SIZE(summary_states); i++)
			json_object_set_new(o.counts, summary_states[i], json_integer(0));
	}
	if (optind == argc) {
		int r = query_all(&sp, emit, &o);
		if (r < 0) {
			fprintf(stderr, "kart status: %s\n", strerror(-r));
			rc = 1;
		}
	}
	for (int i = optind; i < argc; i++) {
		struct qinfo q;
		int r = query_id(&sp, argv[i], &q);
		if (r < 0 || q.state == Q_UNKNOWN) {
			fprintf(stderr, "kart status: %s: %s\n", argv[i],
				r < 0 ? strerror(-r) : "no such task");
			rc = 1;
			continue;
		}
		emit(argv[i], &q, &o);
	}
	if (o.summary) {
		const char *k;
		json_t *v;
		json_int_t total = 0;
		json_object_foreach(o.counts, k, v) total += json_integer_value(v);
		json_object_set_new(o.counts, "total", json_integer(total));
		if (o.json || o.ndjson) {
			char *s = json_dumps(o.counts, JSON_PRESERVE_ORDER |
							       (o.json ? JSON_INDENT(2) : JSON_COMPACT));
			printf("%s\n", s ? s : "{}");
			free(s);
		} else {
			json_object_foreach(o.counts, k, v)
				printf("%s\t%lld\n", k, (long long)json_integer_value(v));
		}
		json_decref(o.counts);
		json_decref(o.arr);
		spool_close(&sp);
		return rc;
	}
	if (o.json) {
		char *s = json_dumps(o.arr, JSON_INDENT(2));
		printf("%s\n", s ? s : "[]");
		free(s);
		json_decref(o.arr);
	}
	spool_close(&sp);
	return rc;
}
