/* kart status */
#define _GNU_SOURCE
#include <sys/ioctl.h>
#include <jansson.h>

#include "cmd.h"
#include "obs.h"
#include "opts.h"
#include "policy.h"
#include "query.h"
#include "selection.h"
#include "space.h"
#include "termsafe.h"
#include "util.h"
#include "worker_control.h"

static const struct opts_help help = {
	"usage: kart [-s SPOOL] status [--json | --ndjson] [--summary] [--state STATE]\n"
	"                               [--older-than DUR] [--newer-than DUR]\n"
	"                               [--sort time|id] [--last N] [--label L] [ID...]\n"
	"\n"
	"Each task's state: queued, scheduled (and until when), waiting (on the\n"
	"after= ids without a result), held (kart hold), running or paused (kart\n"
	"pause; and its worker, or that its worker is gone), or its final status\n"
	"(ok, failed, timeout, oom, killed, rejected, refused, cancelled, lost,\n"
	"skipped) and, for every status but ok, why (the result's error).\n"
	"A worker whose backend cannot take tasks now (its engine does not\n"
	"answer) is named on stderr, with why: its tasks wait, nothing is blamed\n"
	"on them.\n"
	"Without IDs, every task in the spool, each id once, in the furthest state\n"
	"it is found in (a result wins over a claim); an ID may be a glob pattern\n"
	"('up-f0*'). Options may come before or after the IDs.\n"
	"On a terminal, a table with a COMMAND column (kart submit's command, or\n"
	"the task file's first line after its directives), cut to fit. Otherwise\n"
	"lines of ID, state, and the time (scheduled), the worker and its use so\n"
	"far (running: CPU time, memory now and at its peak, output bytes) or the\n"
	"exit code (finished), then the error of a task not ok, separated by tabs,\n"
	"oldest first.\n",
	"exit status: 0; 1 if an ID is unknown; 2 usage error\n",
};

struct out {
	bool json, ndjson, summary, table;
	json_t *arr;
	json_t *counts; /* --summary: state -> count, in order */
	struct spool *sp;
	char *locks;    /* /proc/locks, read at the first running task */
	bool locks_read;
};

/* A running task's use so far (obs.h), as Slurm's sstat; u->by is NULL
 * where its processes are not found (a run starting, or gone). */
static void run_now(struct out *o, const char *id, const struct qinfo *q, struct run_now *u)
{
	if (!o->locks_read) {
		o->locks = obs_locks();
		o->locks_read = true;
	}
	obs_run_now(o->sp, o->locks, q->worker, id, u);
}

/* Its use as text, or NULL: not running, gone, or not found. */
static char *use_text(struct out *o, const char *id, const struct qinfo *q)
{
	if (q->state != Q_RUNNING || q->worker_gone)
		return NULL;
	struct run_now u;
	run_now(o, id, q, &u);
	return u.by ? obs_run_text(&u) : NULL;
}

/* What the task runs ("" when its file cannot be read). */
static char *command_of(struct spool *sp, const char *id, const struct qinfo *q)
{
	_cleanup_free_ char *text = NULL;
	size_t len;
	if (query_task_text(sp, id, q, &text, &len) < 0)
		return xstrdup("");
	return query_command(text, len);
}

static json_t *json_entry(struct out *o, const char *id, const struct qinfo *q)
{
	_cleanup_free_ char *clean = utf8_sanitize(id, strlen(id));
	_cleanup_free_ char *cmd = command_of(o->sp, id, q);
	_cleanup_free_ char *cmd_u = utf8_sanitize(cmd, strlen(cmd));
	json_t *e = json_pack("{s:s, s:s}", "id", clean, "state", query_state_name(q));
	if (q->state == Q_RUNNING) {
		json_object_set_new(e, "worker", json_string(q->worker));
		if (!q->worker_gone) {
			struct run_now u;
			run_now(o, id, q, &u);
			json_object_set_new(e, "usage", obs_run_json(&u));
		}
		if (q->worker_gone) {
			json_object_set_new(e, "worker_gone", json_true());
			json_object_set_new(e, "note", json_sprintf(QUERY_GONE_FMT, q->worker));
		}
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
	if (q->state == Q_DONE) {
		json_object_set_new(e, "exit_code", q->exit_code >= 0 ? json_integer(q->exit_code) : json_null());
		if (q->error[0]) {
			_cleanup_free_ char *err_u = utf8_sanitize(q->error, strlen(q->error));
			json_object_set_new(e, "error", json_string(err_u));
		}
	}
	char ts[32];
	fmt_rfc3339_ms(q->since_ms, ts);
	json_object_set_new(e, "since", q->since_ms ? json_string(ts) : json_null());
	json_object_set_new(e, "command", json_string(cmd_u));
	return e;
}

/* The third column: the worker (and use, its use so far, or NULL), the
 * time, the ids waited on, or the exit code; sep goes between a worker
 * and its use, or an exit code and the error. */
static char *detail(const struct qinfo *q, const char *use, const char *sep)
{
	switch (q->state) {
	case Q_RUNNING:
		return q->worker_gone ? xasprintf("(" QUERY_GONE_FMT ")", q->worker)
				      : xasprintf("%s%s%s", q->worker, use ? sep : "", use ? use : "");
	case Q_SCHEDULED: {
		char nb[32];
		fmt_rfc3339_ms(q->not_before_ms, nb);
		return xstrdup(nb);
	}
	case Q_QUEUED: return xstrdup(q->waiting);
	case Q_DONE: {
		char code[32] = "";
		if (q->exit_code >= 0)
			snprintf(code, sizeof code, "%d", q->exit_code);
		return xasprintf("%s%s%s", code, code[0] && q->error[0] ? sep : "", q->error);
	}
	default: return xstrdup("");
	}
}

static void emit_line(struct out *o, const char *id, const struct qinfo *q)
{
	_cleanup_free_ char *use = use_text(o, id, q);
	_cleanup_free_ char *d = detail(q, use, "\t");
	_cleanup_free_ char *shown_id = term_safe(id);
	/* Each field shown alone: a tab in one would cut the line. */
	char *f = d, *tab = strchr(d, '\t');
	if (tab)
		*tab = '\0';
	_cleanup_free_ char *a = term_safe(f), *b = tab ? term_safe(tab + 1) : NULL;
	printf("%s\t%s%s%s%s%s\n", shown_id, query_state_name(q), a[0] ? "\t" : "", a,
	       b ? "\t" : "", b ? b : "");
}

/* ---- on a terminal: a table -------------------------------------------- */

static int term_width(void)
{
	struct winsize ws;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20)
		return ws.ws_col;
	const char *c = getenv("COLUMNS");
	long long n;
	return c && parse_int(c, 20, 10000, &n) == 0 ? (int)n : 80;
}

/* Columns of a UTF-8 string (one per character: close enough for ids). */
static size_t cols(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += ((unsigned char)*s & 0xC0) != 0x80;
	return n;
}

/* s in a cell of width w: cut with "..." when longer, padded unless last. */
static void cell(const char *s, size_t w, bool last)
{
	size_t c = cols(s);
	if (c <= w) {
		fputs(s, stdout);
		if (!last)
			printf("%*s", (int)(w - c + 2), "");
		return;
	}
	size_t keep = w > 3 ? w - 3 : 0, i = 0, n = 0;
	for (; s[i] && n < keep; i++)
		n += ((unsigned char)s[i] & 0xC0) != 0x80;
	while (((unsigned char)s[i] & 0xC0) == 0x80)
		i++;
	printf("%.*s%s%s", (int)i, s, w > 3 ? "..." : "", last ? "" : "  ");
}

struct row {
	char *cell[4]; /* ID, STATE, INFO, COMMAND */
};

static void emit_table(struct out *o, const struct sel_list *l, size_t from)
{
	static const char *const head[4] = {"ID", "STATE", "INFO", "COMMAND"};
	static const size_t cap[3] = {40, 10, 48};
	size_t n = l->n - from, w[4] = {2, 5, 4, 7};
	struct row *rows = xcalloc(n ? n : 1, sizeof *rows);
	for (size_t k = 0; k < n; k++) {
		const struct sel_task *t = &l->v[from + k];
		_cleanup_free_ char *use = use_text(o, t->id, &t->q);
		_cleanup_free_ char *d = detail(&t->q, use, ": "), *cmd = command_of(o->sp, t->id, &t->q);
		rows[k].cell[0] = term_safe(t->id);
		rows[k].cell[1] = term_safe(query_state_name(&t->q));
		rows[k].cell[2] = term_safe(d);
		rows[k].cell[3] = term_safe(cmd);
		for (int c = 0; c < 3; c++)
			if (cols(rows[k].cell[c]) > w[c])
				w[c] = cols(rows[k].cell[c]) < cap[c] ? cols(rows[k].cell[c]) : cap[c];
	}
	/* COMMAND takes what is left of the line, at least its heading. */
	int left = term_width() - (int)(w[0] + w[1] + w[2] + 6);
	w[3] = left > 7 ? (size_t)left : 7;
	for (int c = 0; c < 4; c++)
		cell(head[c], w[c], c == 3);
	fputc('\n', stdout);
	for (size_t k = 0; k < n; k++) {
		for (int c = 0; c < 4; c++) {
			cell(rows[k].cell[c], w[c], c == 3);
			free(rows[k].cell[c]);
		}
		fputc('\n', stdout);
	}
	free(rows);
}

static void emit(struct out *o, const char *id, const struct qinfo *q)
{
	if (o->summary) {
		const char *w = query_state_name(q);
		json_t *n = json_object_get(o->counts, w);
		json_object_set_new(o->counts, w, json_integer(n ? json_integer_value(n) + 1 : 1));
		return;
	}
	if (o->json) {
		json_array_append_new(o->arr, json_entry(o, id, q));
	} else if (o->ndjson) {
		json_t *e = json_entry(o, id, q);
		char *line = json_dumps_safe(e, JSON_COMPACT | JSON_PRESERVE_ORDER);
		json_decref(e);
		if (line)
			printf("%s\n", line);
		free(line);
		fflush(stdout);
	} else {
		emit_line(o, id, q);
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

/* Workers whose backend cannot take tasks now (cur/W/.stalled: its
 * engine does not answer), "worker W: why (since T)" each, ";"-joined.
 * Their tasks wait; nothing is blamed on them. */
struct stalls {
	char text[2048];
	size_t n;
};

static void stall_add(const char *worker, const char *why, void *arg)
{
	struct stalls *st = arg;
	int k = snprintf(st->text + st->n, sizeof st->text - st->n, "%sworker %s: %s", st->n ? "; " : "",
			 worker, why);
	if (k > 0 && (size_t)k < sizeof st->text - st->n)
		st->n += (size_t)k;
}

static void print_summary(struct out *o)
{
	const char *k;
	json_t *v;
	json_int_t total = 0;
	json_object_foreach(o->counts, k, v) total += json_integer_value(v);
	json_object_set_new(o->counts, "total", json_integer(total));
	char why[700];
	if (wctl_spool_paused(o->sp->new))
		json_object_set_new(o->counts, "claiming",
				    json_string("stopped: the spool is paused (kart resume --all)"));
	else if (claiming_stopped(o->sp, why, sizeof why))
		json_object_set_new(o->counts, "claiming", json_sprintf("stopped: %s", why));
	struct stalls st = {.n = 0};
	wctl_stalled(o->sp, stall_add, &st);
	if (st.n)
		json_object_set_new(o->counts, "waiting", json_sprintf("%s: their tasks wait", st.text));
	if (o->json || o->ndjson) {
		char *s = json_dumps_safe(o->counts, JSON_PRESERVE_ORDER | (o->json ? JSON_INDENT(2) : JSON_COMPACT));
		printf("%s\n", s ? s : "{}");
		free(s);
		return;
	}
	json_object_foreach(o->counts, k, v) {
		if (json_is_string(v)) {
			_cleanup_free_ char *t = term_safe(json_string_value(v));
			printf("%s\t%s\n", k, t);
		} else
			printf("%s\t%lld\n", k, (long long)json_integer_value(v));
	}
}

static int opt_sort(const struct opt *opt, const char *arg, struct opts_ctx *ctx)
{
	struct selection *s = opt->value;
	if (strcmp(arg, "id") != 0 && strcmp(arg, "time") != 0)
		return usage_error(ctx->verb, "--sort %s: not time or id", arg);
	s->sort_id = arg[0] == 'i';
	return 0;
}

int cmd_status(struct ctx *c, int argc, char **argv)
{
	struct out o = {.sp = &c->sp};
	struct selection sel;
	int last = -1;
	selection_init(&sel);
	const struct opt opts[] = {
		OPT_BOOL(0, "json", &o.json,
			 "one JSON array of {\"id\", \"state\", \"worker\", \"not_before\", \"exit_code\", "
			 "\"error\", \"since\", \"command\"} objects"),
		OPT_BOOL(0, "ndjson", &o.ndjson, "one such object per line, printed as found"),
		OPT_BOOL(0, "summary", &o.summary,
			 "the number of tasks in each state (with --json: an object)"),
		SELECTION_OPTS(&sel),
		OPT_CALLBACK(0, "sort", &sel, "time|id",
			     "by the time each entered its state (default), or by id", opt_sort),
		OPT_INT(0, "last", &last, "N", "only the last N of that order", 0, INT32_MAX),
		OPT_END(),
	};
	struct opts_rest rest;
	opts_parse("status", argc, argv, opts, &help, 0, &rest);
	if (o.json && o.ndjson)
		return usage_error("status", "--json and --ndjson exclude each other");
	o.table = !o.json && !o.ndjson && !o.summary && isatty(STDOUT_FILENO);
	if (o.json)
		o.arr = json_array();
	if (o.summary) {
		o.counts = json_object();
		for (size_t i = 0; i < selection_nstates; i++)
			json_object_set_new(o.counts, selection_states[i], json_integer(0));
	}
	struct sel_list l;
	int rc = selection_find(o.sp, &sel, "status", rest.argc, rest.argv, &l);
	size_t from = last >= 0 && (size_t)last < l.n ? l.n - (size_t)last : 0;
	if (o.table && l.n > from)
		emit_table(&o, &l, from);
	else if (!o.table)
		for (size_t k = from; k < l.n; k++)
			emit(&o, l.v[k].id, &l.v[k].q);
	sel_list_free(&l);
	if (o.summary)
		print_summary(&o);
	else if (o.json) {
		char *s = json_dumps_safe(o.arr, JSON_INDENT(2));
		printf("%s\n", s ? s : "[]");
		free(s);
	}
	struct stalls st = {.n = 0};
	if (!o.summary)
		wctl_stalled(o.sp, stall_add, &st);
	if (st.n) {
		_cleanup_free_ char *t = term_safe(st.text);
		fprintf(stderr, "kart status: %s: their tasks wait\n", t);
	}
	free(o.locks);
	json_decref(o.counts);
	json_decref(o.arr);
	return rc;
}
