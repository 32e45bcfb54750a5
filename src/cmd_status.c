/* kart status */
#define _GNU_SOURCE
#include <getopt.h>
#include <jansson.h>

#include "cmd.h"
#include "query.h"
#include "result.h"
#include "util.h"

static const char help[] =
	"usage: kart [-s SPOOL] status [--json] [ID...]\n"
	"\n"
	"Each task's state: queued, running (and its worker), or its final status\n"
	"(ok, failed, timeout, oom, killed, rejected, refused, cancelled, lost).\n"
	"Without IDs, every task in the spool. --json prints one JSON array of\n"
	"{\"id\", \"state\", \"worker\", \"exit_code\"} objects.\n"
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

struct out {
	bool json;
	json_t *arr;
};

static void emit(const char *id, const struct qinfo *q, void *arg)
{
	struct out *o = arg;
	_cleanup_free_ char *clean = utf8_sanitize(id, strlen(id));
	if (o->json) {
		json_t *e = json_pack("{s:s, s:s}", "id", clean, "state", state_word(q));
		if (q->state == Q_RUNNING)
			json_object_set_new(e, "worker", json_string(q->worker));
		if (q->state == Q_DONE)
			json_object_set_new(e, "exit_code",
					    q->exit_code >= 0 ? json_integer(q->exit_code) : json_null());
		json_array_append_new(o->arr, e);
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
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	struct out o = {0};
	int ch, rc = 0;
	while ((ch = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'h': fputs(help, stdout); return 0;
		case 'j': o.json = true; break;
		case ':': return usage_error("status", "option '%s' needs a value", argv[optind - 1]);
		default: return usage_error("status", "unknown option '%s'", argv[optind - 1]);
		}
	}
	struct spool sp;
	ctx_open_spool(c, &sp);
	if (o.json)
		o.arr = json_array();
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
	if (o.json) {
		char *s = json_dumps(o.arr, JSON_INDENT(2));
		printf("%s\n", s ? s : "[]");
		free(s);
		json_decref(o.arr);
	}
	spool_close(&sp);
	return rc;
}
