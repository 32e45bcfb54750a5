/* kart report - the queue over the last hours, from done/: a timeline of
 * every worker slot, throughput and wait over time, status counts per
 * lane and user, the longest and the most wasteful tasks. As text, or
 * (--html FILE) one self-contained page: inline SVG and CSS, nothing
 * loaded from anywhere. */
#define _GNU_SOURCE
#include <time.h>

#include "cmd.h"
#include "opts.h"
#include "obs.h"
#include "util.h"

static const struct opts_help help = {
	"usage: kart [-s SPOOL] report [--hours N] [--html FILE]\n"
	"\n"
	"The tasks that finished in the last N hours (default 24), from done/:\n"
	"status counts per lane and per user, throughput and mean wait over\n"
	"time, the longest tasks and the most wasteful ones (memory asked for\n"
	"and not used, in GiB x seconds, with their CPU and memory efficiency).\n",
	"exit status: 0; 1 if done/ cannot be read or FILE written; 2 usage\n",
};

#define BUCKETS 24
#define TOP_N 8

struct rep {
	struct obs_rec *v;
	size_t n, cap;
	long long from, to; /* the window, ms */
	/* the timeline */
	int *slot;          /* per record: its row (worker, slot) */
	char **row_name;
	size_t nrows;
};

static void pick(const char *id, json_t *j, void *arg)
{
	struct rep *r = arg;
	struct obs_rec x;
	obs_rec_of(id, j, &x);
	if (x.finished_ms < r->from || x.finished_ms > r->to) {
		obs_rec_free(&x);
		return;
	}
	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 256;
		r->v = xrealloc(r->v, r->cap * sizeof *r->v);
	}
	r->v[r->n++] = x;
}

static int by_start(const void *a, const void *b)
{
	const struct obs_rec *x = a, *y = b;
	int c = strcmp(x->worker ? x->worker : "", y->worker ? y->worker : "");
	if (c)
		return c;
	long long sx = x->started_ms >= 0 ? x->started_ms : x->finished_ms;
	long long sy = y->started_ms >= 0 ? y->started_ms : y->finished_ms;
	return sx < sy ? -1 : sx > sy ? 1 : strcmp(x->id, y->id);
}

/* Each run to a row of its worker: the first slot free when it began
 * (as the worker's slots were, give or take one that ended that ms). */
static void slots(struct rep *r)
{
	sort_n(r->v, r->n, sizeof *r->v, by_start);
	r->slot = xcalloc(r->n ? r->n : 1, sizeof *r->slot);
	long long *end = NULL;
	size_t nend = 0, base = 0;
	for (size_t i = 0; i < r->n; i++) {
		struct obs_rec *x = &r->v[i];
		if (i == 0 || strcmp(x->worker ? x->worker : "", r->v[i - 1].worker ? r->v[i - 1].worker : "")) {
			base = r->nrows;
			nend = 0;
		}
		long long s = x->started_ms >= 0 ? x->started_ms : x->finished_ms;
		size_t k = 0;
		while (k < nend && end[k] > s)
			k++;
		if (k == nend) {
			end = xrealloc(end, (nend + 1) * sizeof *end);
			nend++;
			r->row_name = xrealloc(r->row_name, (r->nrows + 1) * sizeof *r->row_name);
			r->row_name[r->nrows++] = xasprintf("%s/%zu", x->worker ? x->worker : "-", k + 1);
		}
		end[k] = x->finished_ms;
		r->slot[i] = (int)(base + k);
	}
	free(end);
}

static double waste(const struct obs_rec *x)
{
	if (x->mem_limit <= 0 || x->mem_peak < 0 || x->run_ms < 0 || x->mem_peak > x->mem_limit)
		return -1;
	return (double)(x->mem_limit - x->mem_peak) / (1 << 30) * (double)x->run_ms / 1000.0;
}

static const struct rep *sort_rep;
static int by_run(const void *a, const void *b)
{
	long long x = sort_rep->v[*(const size_t *)a].run_ms, y = sort_rep->v[*(const size_t *)b].run_ms;
	return x > y ? -1 : x < y;
}
static int by_waste(const void *a, const void *b)
{
	double x = waste(&sort_rep->v[*(const size_t *)a]), y = waste(&sort_rep->v[*(const size_t *)b]);
	return x > y ? -1 : x < y;
}

/* The indices of the first TOP_N by cmp (those with a value). */
static size_t top(const struct rep *r, int (*cmp)(const void *, const void *), bool (*has)(const struct obs_rec *),
		  size_t *out)
{
	size_t *idx = xmalloc((r->n ? r->n : 1) * sizeof *idx), n = 0;
	for (size_t i = 0; i < r->n; i++)
		if (has(&r->v[i]))
			idx[n++] = i;
	sort_rep = r;
	sort_n(idx, n, sizeof *idx, cmp);
	if (n > TOP_N)
		n = TOP_N;
	memcpy(out, idx, n * sizeof *idx);
	free(idx);
	return n;
}
static bool has_run(const struct obs_rec *x) { return x->run_ms >= 0; }
static bool has_waste(const struct obs_rec *x) { return waste(x) > 0; }

/* Distinct values of a field, in first-seen order. */
static size_t distinct(const struct rep *r, size_t off, const char **out, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < r->n; i++) {
		const char *v = *(char *const *)((const char *)&r->v[i] + off);
		v = v ? v : "-";
		size_t k = 0;
		while (k < n && strcmp(out[k], v))
			k++;
		if (k == n && n < max)
			out[n++] = v;
	}
	return n;
}

static const char *const statuses[] = {"ok", "failed", "timeout", "oom", "killed", "rejected",
				       "refused", "cancelled", "lost", "skipped"};

static long long count_of(const struct rep *r, size_t off, const char *v, const char *status)
{
	long long n = 0;
	for (size_t i = 0; i < r->n; i++) {
		const char *f = *(char *const *)((const char *)&r->v[i] + off);
		n += strcmp(f ? f : "-", v) == 0 && r->v[i].status && strcmp(r->v[i].status, status) == 0;
	}
	return n;
}

/* Results and mean wait per bucket of the window. */
static void buckets(const struct rep *r, long long n[BUCKETS], double wait_s[BUCKETS])
{
	long long w[BUCKETS] = {0}, wn[BUCKETS] = {0};
	long long span = r->to - r->from;
	for (int b = 0; b < BUCKETS; b++)
		n[b] = 0;
	for (size_t i = 0; i < r->n; i++) {
		int b = (int)((r->v[i].finished_ms - r->from) * BUCKETS / (span ? span : 1));
		b = b < 0 ? 0 : b >= BUCKETS ? BUCKETS - 1 : b;
		n[b]++;
		if (r->v[i].wait_ms >= 0)
			w[b] += r->v[i].wait_ms, wn[b]++;
	}
	for (int b = 0; b < BUCKETS; b++)
		wait_s[b] = wn[b] ? (double)w[b] / (double)wn[b] / 1000.0 : 0;
}

static void clock_of(long long ms, char *buf, size_t len, bool date)
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	localtime_r(&s, &tm);
	strftime(buf, len, date ? "%Y-%m-%d %H:%M" : "%H:%M", &tm);
}

/* ---- text ---------------------------------------------------------------- */

static void text_table(const struct rep *r, const char *title, size_t off)
{
	const char *vals[64];
	size_t nv = distinct(r, off, vals, ARRAY_SIZE(vals));
	printf("\n%s\n%-16s", title, "");
	for (size_t s = 0; s < ARRAY_SIZE(statuses); s++)
		printf(" %9s", statuses[s]);
	putchar('\n');
	for (size_t k = 0; k < nv; k++) {
		_cleanup_free_ char *v = obs_term(vals[k]);
		printf("%-16.16s", v);
		for (size_t s = 0; s < ARRAY_SIZE(statuses); s++)
			printf(" %9lld", count_of(r, off, vals[k], statuses[s]));
		putchar('\n');
	}
}

static void text_report(const struct rep *r, const char *spool)
{
	char a[32], b[32], c[32], d[32];
	_cleanup_free_ char *path = obs_term(spool);
	clock_of(r->from, a, sizeof a, true);
	clock_of(r->to, b, sizeof b, true);
	printf("kart report: %s, %s to %s: %zu results\n", path, a, b, r->n);
	text_table(r, "Status by lane", offsetof(struct obs_rec, lane));
	text_table(r, "Status by user", offsetof(struct obs_rec, user));
	long long n[BUCKETS];
	double w[BUCKETS];
	buckets(r, n, w);
	printf("\nThroughput and wait (results finished, mean wait, per %s)\n",
	       (obs_dur(c, sizeof c, (r->to - r->from) / BUCKETS), c));
	for (int k = 0; k < BUCKETS; k++) {
		if (!n[k])
			continue;
		clock_of(r->from + (r->to - r->from) * k / BUCKETS, a, sizeof a, false);
		obs_dur(b, sizeof b, (long long)(w[k] * 1000));
		printf("  %s  %6lld results  wait %s\n", a, n[k], b);
	}
	size_t idx[TOP_N], m = top(r, by_run, has_run, idx);
	printf("\nLongest tasks\n");
	for (size_t k = 0; k < m; k++) {
		const struct obs_rec *x = &r->v[idx[k]];
		_cleanup_free_ char *id = obs_term(x->id), *st = obs_term(x->status);
		obs_dur(a, sizeof a, x->run_ms);
		printf("  %-32.32s %10s  %s\n", id, a, st);
	}
	m = top(r, by_waste, has_waste, idx);
	printf("\nMost wasteful tasks (memory asked for and not used)\n");
	for (size_t k = 0; k < m; k++) {
		const struct obs_rec *x = &r->v[idx[k]];
		_cleanup_free_ char *id = obs_term(x->id);
		obs_bytes(a, sizeof a, x->mem_limit);
		obs_bytes(b, sizeof b, x->mem_peak);
		snprintf(c, sizeof c, "%.0f%%", x->mem_eff * 100);
		if (x->cpu_eff >= 0)
			snprintf(d, sizeof d, "%.0f%%", x->cpu_eff * 100);
		else
			snprintf(d, sizeof d, "-");
		printf("  %-32.32s %8.1f GiB*s  memory %s of %s (%s), cpu %s\n", id, waste(x), b, a, c, d);
	}
	if (!m)
		printf("  (none: no task with a memory= limit and a measured peak)\n");
}

/* ---- HTML ---------------------------------------------------------------- */

static void esc(FILE *f, const char *s)
{
	_cleanup_free_ char *t = obs_term(s ? s : "-");
	for (const char *p = t; *p; p++)
		switch (*p) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&#39;", f); break;
		default: fputc(*p, f);
		}
}

static const char *colour(const char *status)
{
	static const struct {
		const char *s, *c;
	} c[] = {{"ok", "#2e9e44"}, {"failed", "#d64541"}, {"timeout", "#e8912d"}, {"oom", "#8e44ad"},
		 {"killed", "#7f8c8d"}, {"cancelled", "#95a5a6"}, {"lost", "#34495e"}};
	for (size_t i = 0; status && i < ARRAY_SIZE(c); i++)
		if (strcmp(status, c[i].s) == 0)
			return c[i].c;
	return "#2980b9";
}

static void html_table(FILE *f, const struct rep *r, const char *title, const char *cls, size_t off)
{
	const char *vals[64];
	size_t nv = distinct(r, off, vals, ARRAY_SIZE(vals));
	fprintf(f, "<h2>%s</h2>\n<table class=\"%s\"><tr><th></th>", title, cls);
	for (size_t s = 0; s < ARRAY_SIZE(statuses); s++)
		fprintf(f, "<th>%s</th>", statuses[s]);
	fputs("</tr>\n", f);
	for (size_t k = 0; k < nv; k++) {
		fputs("<tr><th>", f);
		esc(f, vals[k]);
		fputs("</th>", f);
		for (size_t s = 0; s < ARRAY_SIZE(statuses); s++)
			fprintf(f, "<td>%lld</td>", count_of(r, off, vals[k], statuses[s]));
		fputs("</tr>\n", f);
	}
	fputs("</table>\n", f);
}

static void html_report(FILE *f, const struct rep *r, const char *spool)
{
	char a[32], b[32], c[32], d[32];
	clock_of(r->from, a, sizeof a, true);
	clock_of(r->to, b, sizeof b, true);
	fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>kart report</title>\n"
	      "<style>body{font:14px sans-serif;margin:20px;color:#222}table{border-collapse:collapse;"
	      "margin:6px 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}"
	      "th{background:#f4f4f4}svg{background:#fafafa;border:1px solid #ddd}"
	      "rect.task:hover{stroke:#000;stroke-width:1.5}text{font:11px sans-serif}</style>\n"
	      "</head><body>\n<h1>kart report: ",
	      f);
	esc(f, spool);
	fprintf(f, "</h1>\n<p>%s to %s: <b id=\"count\">%zu</b> results.</p>\n", a, b, r->n);

	/* The timeline: one row per worker slot, a bar per run. */
	const int left = 160, width = 900, rowh = 18;
	int h = (int)r->nrows * rowh + 30;
	double span = (double)(r->to - r->from);
	fprintf(f, "<h2>Timeline</h2>\n<svg id=\"timeline\" width=\"%d\" height=\"%d\" "
		   "xmlns=\"http://www.w3.org/2000/svg\">\n",
		left + width + 10, h);
	for (size_t k = 0; k < r->nrows; k++) {
		fprintf(f, "<g class=\"slot\" data-slot=\"");
		esc(f, r->row_name[k]);
		fprintf(f, "\"><text x=\"4\" y=\"%zu\">", k * (size_t)rowh + 13);
		esc(f, r->row_name[k]);
		fputs("</text>\n", f);
		for (size_t i = 0; i < r->n; i++) {
			const struct obs_rec *x = &r->v[i];
			if ((size_t)r->slot[i] != k)
				continue;
			long long s = x->started_ms >= 0 ? x->started_ms : x->finished_ms;
			double x0 = left + (double)(s - r->from) / span * width;
			double w = (double)(x->finished_ms - s) / span * width;
			fprintf(f, "<rect class=\"task\" data-id=\"");
			esc(f, x->id);
			fprintf(f, "\" data-status=\"");
			esc(f, x->status);
			fprintf(f, "\" x=\"%.1f\" y=\"%zu\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>",
				x0 < left ? left : x0, k * (size_t)rowh + 2, w < 1 ? 1 : w, rowh - 4,
				colour(x->status));
			esc(f, x->id);
			fputs(": ", f);
			esc(f, x->name);
			obs_dur(c, sizeof c, x->run_ms);
			fputs(" (", f);
			esc(f, x->status ? x->status : "-");
			fprintf(f, ", %s)</title></rect>\n", c);
		}
		fputs("</g>\n", f);
	}
	fprintf(f, "<text x=\"%d\" y=\"%d\">%s</text><text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>\n",
		left, h - 6, a, left + width, h - 6, b);
	fputs("</svg>\n<p>", f);
	for (size_t s = 0; s < ARRAY_SIZE(statuses); s++)
		fprintf(f, "<span style=\"color:%s\">&#9632;</span> %s &nbsp;", colour(statuses[s]), statuses[s]);
	fputs("</p>\n", f);

	/* Throughput (bars) and mean wait (a line) per bucket. */
	long long n[BUCKETS], maxn = 1;
	double w[BUCKETS], maxw = 0.001;
	buckets(r, n, w);
	for (int k = 0; k < BUCKETS; k++) {
		maxn = n[k] > maxn ? n[k] : maxn;
		maxw = w[k] > maxw ? w[k] : maxw;
	}
	const int ch = 160, bw = width / BUCKETS;
	fprintf(f, "<h2>Throughput and wait</h2>\n<svg id=\"throughput\" width=\"%d\" height=\"%d\" "
		   "xmlns=\"http://www.w3.org/2000/svg\">\n",
		left + width + 10, ch + 30);
	fprintf(f, "<text x=\"4\" y=\"14\">max %lld results</text><text x=\"4\" y=\"30\" "
		   "fill=\"#c0392b\">max wait %.1fs</text>\n", maxn, maxw);
	for (int k = 0; k < BUCKETS; k++) {
		int bh = (int)(n[k] * ch / maxn);
		clock_of(r->from + (r->to - r->from) * k / BUCKETS, c, sizeof c, false);
		fprintf(f, "<rect class=\"bucket\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
			   "fill=\"#5dade2\"><title>%s: %lld results, mean wait %.2fs</title></rect>\n",
			left + k * bw, ch - bh + 5, bw - 2, bh, c, n[k], w[k]);
	}
	fputs("<polyline fill=\"none\" stroke=\"#c0392b\" stroke-width=\"2\" points=\"", f);
	for (int k = 0; k < BUCKETS; k++)
		fprintf(f, "%d,%.1f ", left + k * bw + bw / 2, ch + 5 - w[k] / maxw * ch);
	fputs("\"/>\n</svg>\n", f);

	html_table(f, r, "Status by lane", "by-lane", offsetof(struct obs_rec, lane));
	html_table(f, r, "Status by user", "by-user", offsetof(struct obs_rec, user));

	size_t idx[TOP_N], m = top(r, by_run, has_run, idx);
	fputs("<h2>Longest tasks</h2>\n<table class=\"longest\"><tr><th>id</th><th>command</th>"
	      "<th>run time</th><th>status</th></tr>\n", f);
	for (size_t k = 0; k < m; k++) {
		const struct obs_rec *x = &r->v[idx[k]];
		fputs("<tr><td>", f);
		esc(f, x->id);
		fputs("</td><td>", f);
		esc(f, x->name);
		obs_dur(a, sizeof a, x->run_ms);
		fprintf(f, "</td><td>%s</td><td>", a);
		esc(f, x->status);
		fputs("</td></tr>\n", f);
	}
	fputs("</table>\n", f);
	m = top(r, by_waste, has_waste, idx);
	fputs("<h2>Most wasteful tasks</h2>\n<p>Memory asked for and not used, in GiB &times; "
	      "seconds of the run.</p>\n<table class=\"wasteful\"><tr><th>id</th><th>GiB&times;s"
	      "</th><th>memory peak</th><th>memory=</th><th>memory eff.</th><th>CPU eff.</th></tr>\n", f);
	for (size_t k = 0; k < m; k++) {
		const struct obs_rec *x = &r->v[idx[k]];
		fputs("<tr><td>", f);
		esc(f, x->id);
		obs_bytes(a, sizeof a, x->mem_peak);
		obs_bytes(b, sizeof b, x->mem_limit);
		snprintf(c, sizeof c, "%.0f%%", x->mem_eff * 100);
		if (x->cpu_eff >= 0)
			snprintf(d, sizeof d, "%.0f%%", x->cpu_eff * 100);
		else
			snprintf(d, sizeof d, "-");
		fprintf(f, "</td><td>%.1f</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n", waste(x), a,
			b, c, d);
	}
	fputs("</table>\n</body></html>\n", f);
}

int cmd_report(struct ctx *c, int argc, char **argv)
{
	int hours = 24;
	const char *html = NULL;
	const struct opt opts[] = {
		OPT_INT(0, "hours", &hours, "N", "the window, in hours", 1, 24 * 366),
		OPT_STRING(0, "html", &html, "FILE",
			   "write one self-contained HTML page instead, with a timeline of each "
			   "worker's slots (hover a task for its id and command); '-' for stdout"),
		OPT_END(),
	};
	struct opts_rest rest;
	opts_parse("report", argc, argv, opts, &help, 0, &rest);
	if (rest.argc > 0)
		return usage_error("report", "unexpected argument '%s'", rest.argv[0]);
	struct rep r = {.to = now_realtime_ms()};
	r.from = r.to - (int64_t)hours * 3600 * 1000;
	int e = obs_results(&c->sp, pick, &r);
	if (e < 0) {
		_cleanup_free_ char *path = obs_term(c->sp.path);
		fprintf(stderr, "kart report: %s/done: %s\n", path, strerror(-e));
		return 1;
	}
	/* The page spans what happened, not the whole window. */
	long long first = r.to;
	for (size_t i = 0; i < r.n; i++) {
		long long s0 = r.v[i].started_ms >= 0 ? r.v[i].started_ms : r.v[i].finished_ms;
		first = s0 < first ? s0 : first;
	}
	if (r.n && first > r.from)
		r.from = first - (r.to - first) / 20 - 1;
	/* What each ran, for the timeline's hover: its task file's first
	 * command line. */
	for (size_t i = 0; i < r.n && r.n <= 20000; i++) {
		char cmdline[160];
		if (obs_task_command(&c->sp, r.v[i].id, cmdline, sizeof cmdline) == 0) {
			free(r.v[i].name);
			r.v[i].name = xstrdup(cmdline);
		}
	}
	slots(&r);
	int rc = 0;
	if (!html)
		text_report(&r, c->sp.path);
	else {
		FILE *f = strcmp(html, "-") == 0 ? stdout : fopen(html, "we");
		_cleanup_free_ char *shtml = obs_term(html);
		if (!f) {
			fprintf(stderr, "kart report: %s: %s\n", shtml, strerror(errno));
			rc = 1;
		} else {
			html_report(f, &r, c->sp.path);
			if ((f == stdout ? fflush(f) : fclose(f)) != 0) {
				fprintf(stderr, "kart report: %s: %s\n", shtml, strerror(errno));
				rc = 1;
			}
		}
	}
	for (size_t i = 0; i < r.n; i++)
		obs_rec_free(&r.v[i]);
	for (size_t i = 0; i < r.nrows; i++)
		free(r.row_name[i]);
	free(r.row_name);
	free(r.slot);
	free(r.v);
	return rc;
}
