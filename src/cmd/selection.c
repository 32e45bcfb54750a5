/* selection.c - see selection.h. */
#define _GNU_SOURCE
#include "selection.h"

#include <fnmatch.h>
#include <jansson.h>

#include "cmd.h"
#include "task.h"
#include "termsafe.h"
#include "util.h"

const char *const selection_states[] = {
	"queued", "scheduled", "waiting", "held", "running", "paused", "ok", "failed", "timeout",
	"oom", "killed", "rejected", "refused", "cancelled", "lost", "skipped",
};
const size_t selection_nstates = ARRAY_SIZE(selection_states);

void selection_init(struct selection *s)
{
	*s = (struct selection){.older_s = -1, .newer_s = -1};
}

bool selection_filters(const struct selection *s)
{
	return s->states[0] || s->older_s >= 0 || s->newer_s >= 0 || s->label;
}

int selection_opt_state(const struct opt *o, const char *arg, struct opts_ctx *ctx)
{
	struct selection *s = o->value;
	_cleanup_free_ char *copy = xstrdup(arg);
	char *save = NULL;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		bool known = strcmp(t, "done") == 0;
		for (size_t i = 0; i < selection_nstates; i++)
			known = known || strcmp(t, selection_states[i]) == 0;
		if (!known)
			return usage_error(ctx->verb, "--state %s: not a state (queued, running, done, ok, "
					   "failed, ...)", t);
		size_t l = strlen(s->states);
		if (l + strlen(t) + 3 > sizeof s->states)
			return usage_error(ctx->verb, "--state: too many states");
		snprintf(s->states + l, sizeof s->states - l, "%s%s,", l ? "" : ",", t);
	}
	return 0;
}

static void add(struct sel_list *l, const char *id, const struct qinfo *q)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 256;
		l->v = xrealloc(l->v, l->cap * sizeof *l->v);
	}
	l->v[l->n].id = xstrdup(id);
	l->v[l->n++].q = *q;
}

static void collect(const char *id, const struct qinfo *q, void *arg) { add(arg, id, q); }

void sel_list_free(struct sel_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].id);
	free(l->v);
	*l = (struct sel_list){0};
}

static int by_id(const void *a, const void *b)
{
	return strcmp(((const struct sel_task *)a)->id, ((const struct sel_task *)b)->id);
}

static int by_time(const void *a, const void *b)
{
	const struct sel_task *x = a, *y = b;
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
	_cleanup_free_ char *text = NULL;
	size_t n;
	struct task_spec spec;
	char err[256];
	if (query_task_text(sp, id, q, &text, &n) == 0 && task_parse(text, n, &spec, err, sizeof err) == 0)
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

static bool wanted(struct spool *sp, const struct selection *s, int64_t now_ms, const struct sel_task *t)
{
	const struct qinfo *q = &t->q;
	if (s->states[0]) {
		char k[64];
		snprintf(k, sizeof k, ",%s,", query_state_name(q));
		if (!strstr(s->states, k) && !(q->state == Q_DONE && strstr(s->states, ",done,")))
			return false;
	}
	if (s->older_s >= 0 && (!q->since_ms || now_ms - q->since_ms < s->older_s * 1000))
		return false;
	if (s->newer_s >= 0 && (!q->since_ms || now_ms - q->since_ms >= s->newer_s * 1000))
		return false;
	if (s->label) {
		char have[TASK_NAME_MAX * 3 + 1];
		task_label(sp, t->id, q, have, sizeof have);
		if (!label_is(have, s->label))
			return false;
	}
	return true;
}

int selection_find(struct spool *sp, const struct selection *s, const char *verb, int argc,
		   char **argv, struct sel_list *out)
{
	struct sel_list all = {0}, sel = {0};
	int rc = 0;
	bool globs = argc == 0;
	for (int i = 0; i < argc; i++)
		globs = globs || is_glob(argv[i]);
	if (globs) {
		int r = query_all(sp, collect, &all);
		if (r < 0) {
			fprintf(stderr, "kart %s: %s\n", verb, strerror(-r));
			rc = 1;
		}
	}
	/* Nothing named: every task (the caller's own, for s->own). */
	char *every[] = {"*"};
	if (argc == 0 && s->own) {
		argc = 1;
		argv = every;
	} else if (argc == 0) {
		sel = all, all = (struct sel_list){0};
	}
	for (int i = 0; i < argc; i++) {
		_cleanup_free_ char *id = spool_own_id(sp, argv[i]);
		const char *pat = s->own ? id : argv[i];
		if (is_glob(argv[i])) {
			size_t before = sel.n;
			for (size_t k = 0; k < all.n; k++)
				if (fnmatch(pat, all.v[k].id, FNM_PERIOD) == 0)
					add(&sel, all.v[k].id, &all.v[k].q);
			if (sel.n == before && argv != every) {
				_cleanup_free_ char *shown = term_safe(argv[i]);
				fprintf(stderr, "kart %s: %s: no task matches\n", verb, shown);
				rc = 1;
			}
			continue;
		}
		struct qinfo q;
		int r = query_id(sp, id, &q);
		if (r < 0 || q.state == Q_UNKNOWN) {
			_cleanup_free_ char *shown = term_safe(id);
			fprintf(stderr, "kart %s: %s: %s\n", verb, shown, r < 0 ? strerror(-r) : "no such task");
			rc = 1;
			continue;
		}
		add(&sel, id, &q);
	}
	sel_list_free(&all);
	/* Named one by one, they come in the order named. */
	if (globs)
		sort_n(sel.v, sel.n, sizeof *sel.v, s->sort_id ? by_id : by_time);
	int64_t now = now_realtime_ms();
	size_t kept = 0;
	for (size_t k = 0; k < sel.n; k++) {
		if (wanted(sp, s, now, &sel.v[k]))
			sel.v[kept++] = sel.v[k];
		else
			free(sel.v[k].id);
	}
	sel.n = kept;
	*out = sel;
	return rc;
}
