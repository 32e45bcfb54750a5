/* kart metrics - the queue in Prometheus' text exposition format. The
 * results are counted from tally/ (tally.h), never by reading done/:
 * what is queued and running is read from new/ and cur/. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/stat.h>

#include "cmd.h"
#include "opts.h"
#include "obs.h"
#include "policy.h"
#include "space.h"
#include "tally.h"
#include "util.h"
#include "worker_control.h"

static const struct opts_help help = {
	"usage: kart [-s SPOOL] metrics [--textfile DIR]\n"
	"\n"
	"Print the queue's metrics in the Prometheus text format: tasks by state\n"
	"and lane, results by status, lane and user (counted by the workers in\n"
	"tally/, not read from done/), histograms of run and wait times, each\n"
	"live worker's slots and the busy ones, the age of the oldest queued task,\n"
	"and whether claiming is stopped, and why.\n",
	"exit status: 0; 1 if the spool or DIR cannot be read or written; 2 usage\n",
};

static const char *const states[] = {"queued", "scheduled", "waiting", "held", "running", "paused"};
static const char *const lanes[] = {"fast", "batch"};

/* A label value: UTF-8, with \, " and newline escaped (the format's rule). */
static void label(FILE *f, const char *s)
{
	_cleanup_free_ char *u = utf8_sanitize(s ? s : "", strlen(s ? s : ""));
	for (const char *p = u; *p; p++) {
		if (*p == '\\' || *p == '"')
			fputc('\\', f), fputc(*p, f);
		else if (*p == '\n')
			fputs("\\n", f);
		else
			fputc(*p, f);
	}
}

static void head(FILE *f, const char *name, const char *type, const char *text)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, type);
}

static void hist(FILE *f, const char *name, const char *text, const struct tally_hist *h, size_t n)
{
	head(f, name, "histogram", text);
	for (size_t i = 0; i < n; i++) {
		uint64_t cum = 0;
		for (int b = 0; b < TALLY_BUCKETS; b++) {
			cum += h[i].bucket[b];
			fprintf(f, "%s_bucket{lane=\"", name);
			label(f, h[i].lane);
			if (b < TALLY_BUCKETS - 1)
				fprintf(f, "\",le=\"%g\"} %llu\n", tally_bounds_s[b], (unsigned long long)cum);
			else
				fprintf(f, "\",le=\"+Inf\"} %llu\n", (unsigned long long)cum);
		}
		fprintf(f, "%s_sum{lane=\"", name);
		label(f, h[i].lane);
		fprintf(f, "\"} %.3f\n%s_count{lane=\"", (double)h[i].sum_ms / 1000.0, name);
		label(f, h[i].lane);
		fprintf(f, "\"} %llu\n", (unsigned long long)h[i].n);
	}
}

static int lane_index(const char *l) { return strcmp(l, "batch") == 0; }

static void write_metrics(struct spool *sp, FILE *f, bool *ok)
{
	int64_t now = now_realtime_ms();
	struct live_set ls;
	if (obs_live(sp, &ls) < 0)
		*ok = false;
	long long count[ARRAY_SIZE(states)][2] = {{0}};
	int64_t oldest = 0;
	for (size_t i = 0; i < ls.n; i++) {
		for (size_t s = 0; s < ARRAY_SIZE(states); s++)
			if (strcmp(ls.v[i].word, states[s]) == 0)
				count[s][lane_index(ls.v[i].lane)]++;
		if (ls.v[i].q.state == Q_QUEUED && ls.v[i].q.since_ms &&
		    (!oldest || ls.v[i].q.since_ms < oldest))
			oldest = ls.v[i].q.since_ms;
	}
	head(f, "kart_tasks", "gauge", "Tasks in the spool now, by state and lane.");
	for (size_t s = 0; s < ARRAY_SIZE(states); s++)
		for (int l = 0; l < 2; l++)
			fprintf(f, "kart_tasks{state=\"%s\",lane=\"%s\"} %lld\n", states[s], lanes[l],
				count[s][l]);
	head(f, "kart_oldest_queued_age_seconds", "gauge",
	     "Age of the oldest task queued and not held or scheduled (0: none).");
	fprintf(f, "kart_oldest_queued_age_seconds %.3f\n",
		oldest && now > oldest ? (now - oldest) / 1000.0 : 0.0);

	struct tally t;
	int r = tally_read(sp, &t);
	head(f, "kart_tally_up", "gauge",
	     "1 if the results were counted from tally/; 0 if it could not be read.");
	fprintf(f, "kart_tally_up %d\n", r == 0);
	if (r < 0) {
		_cleanup_free_ char *path = obs_term(sp->path);
		fprintf(stderr, "kart metrics: %s/tally: %s: results are not counted\n", path,
			strerror(-r));
		*ok = false;
	}
	head(f, "kart_results_total", "counter", "Results published, by status, lane and user.");
	for (size_t i = 0; i < t.ncount; i++) {
		fputs("kart_results_total{status=\"", f);
		label(f, t.count[i].status);
		fputs("\",lane=\"", f);
		label(f, t.count[i].lane);
		fputs("\",user=\"", f);
		label(f, t.count[i].user);
		fprintf(f, "\"} %llu\n", (unsigned long long)t.count[i].n);
	}
	hist(f, "kart_run_duration_seconds", "How long runs took, by lane.", t.run, t.nrun);
	hist(f, "kart_wait_duration_seconds", "How long tasks waited before they started, by lane.",
	     t.wait, t.nwait);

	struct strv live = {0};
	(void)spool_live_worker_ids(sp, &live);
	head(f, "kart_worker_slots", "gauge", "Slots of each live worker, by lane.");
	for (size_t i = 0; i < t.nslots; i++)
		for (size_t k = 0; k < live.n; k++) {
			if (strcmp(live.v[k], t.slots[i].writer) != 0)
				continue;
			for (int l = 0; l < 2; l++) {
				fputs("kart_worker_slots{worker=\"", f);
				label(f, live.v[k]);
				fprintf(f, "\",lane=\"%s\"} %ld\n", lanes[l], l ? t.slots[i].batch : t.slots[i].fast);
			}
		}
	head(f, "kart_worker_slots_busy", "gauge", "Tasks each live worker runs now, by lane.");
	for (size_t k = 0; k < live.n; k++)
		for (int l = 0; l < 2; l++) {
			long long busy = 0;
			for (size_t i = 0; i < ls.n; i++)
				busy += ls.v[i].q.state == Q_RUNNING && lane_index(ls.v[i].lane) == l &&
					strcmp(ls.v[i].q.worker, live.v[k]) == 0;
			fputs("kart_worker_slots_busy{worker=\"", f);
			label(f, live.v[k]);
			fprintf(f, "\",lane=\"%s\"} %lld\n", lanes[l], busy);
		}
	head(f, "kart_workers", "gauge", "Workers holding the spool now.");
	fprintf(f, "kart_workers %zu\n", live.n);
	strv_free(&live);
	obs_live_free(&ls);

	/* As kart status --summary says it: pause --all, then min_free. */
	bool paused = wctl_spool_paused(sp->new);
	char why[700] = "";
	struct policy pol;
	char err[512];
	bool low = policy_load(&pol, sp->path, err, sizeof err) == 0 &&
		   space_low(sp->root, &pol, sp->path, why, sizeof why);
	head(f, "kart_claiming_stopped", "gauge",
	     "1 while workers claim nothing, by reason: pause (kart pause --all) or min_free.");
	fprintf(f, "kart_claiming_stopped{reason=\"pause\"} %d\n", paused);
	fprintf(f, "kart_claiming_stopped{reason=\"min_free\"} %d\n", low);
	head(f, "kart_claiming_stopped_info", "gauge", "Why claiming is stopped, in words (while it is).");
	if (paused)
		fputs("kart_claiming_stopped_info{reason=\"pause\",why=\"the spool is paused (kart resume "
		      "--all)\"} 1\n",
		      f);
	if (low) {
		fputs("kart_claiming_stopped_info{reason=\"min_free\",why=\"", f);
		label(f, why);
		fputs("\"} 1\n", f);
	}
	tally_free(&t);
}

/* DIR/kart.prom by a temporary name that node_exporter does not read
 * (it reads *.prom), fsynced, renamed over the old one. */
static int write_textfile(struct spool *sp, const char *dir)
{
	_cleanup_close_ int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_free_ char *sdir = obs_term(dir);
	if (d < 0) {
		fprintf(stderr, "kart metrics: --textfile %s: %s\n", sdir, strerror(errno));
		return 1;
	}
	char tmp[64];
	snprintf(tmp, sizeof tmp, ".kart.prom.%d", (int)getpid());
	int fd = openat(d, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "kart metrics: %s/%s: %s\n", sdir, tmp, strerror(errno));
		return 1;
	}
	FILE *f = fdopen(fd, "w");
	if (!f) {
		(void)close(fd);
		(void)unlinkat(d, tmp, 0);
		return 1;
	}
	bool ok = true;
	write_metrics(sp, f, &ok);
	int e = 0;
	if (fflush(f) != 0 || fsync(fd) < 0)
		e = errno;
	if (fclose(f) != 0 && !e)
		e = errno;
	if (!e && renameat(d, tmp, d, "kart.prom") < 0)
		e = errno;
	if (e) {
		(void)unlinkat(d, tmp, 0);
		fprintf(stderr, "kart metrics: %s/kart.prom: %s\n", sdir, strerror(e));
		return 1;
	}
	(void)fsync(d);
	return ok ? 0 : 1;
}

int cmd_metrics(struct ctx *c, int argc, char **argv)
{
	const char *textfile = NULL;
	const struct opt opts[] = {
		OPT_STRING(0, "textfile", &textfile, "DIR",
			   "write DIR/kart.prom instead (atomically: a temporary file renamed into "
			   "place), for node_exporter's textfile collector; run it from cron or a timer"),
		OPT_END(),
	};
	struct opts_rest rest;
	opts_parse("metrics", argc, argv, opts, &help, 0, &rest);
	if (rest.argc > 0)
		return usage_error("metrics", "unexpected argument '%s'", rest.argv[0]);
	if (textfile)
		return write_textfile(&c->sp, textfile);
	bool ok = true;
	write_metrics(&c->sp, stdout, &ok);
	return fflush(stdout) == 0 && ok ? 0 : 1;
}
