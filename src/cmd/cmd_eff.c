/* kart eff - what tasks used against what they asked for, as Slurm's
 * seff: one task's receipt, or over many (a label, a glob) the spread and
 * the memory= and timeout= that would have fitted them all. */
#define _GNU_SOURCE
#include <fnmatch.h>
#include <math.h>

#include "cmd.h"
#include "opts.h"
#include "obs.h"
#include "util.h"

static const struct opts_help help = {
	"usage: kart [-s SPOOL] eff ID...\n"
	"       kart [-s SPOOL] eff --label L | GLOB\n"
	"\n"
	"What each finished task used against what it asked for: run and wait\n"
	"time, CPU time and CPU efficiency (CPU time / (run time x the CPUs it\n"
	"could use)), memory peak against its memory= limit (memory efficiency).\n"
	"A value the host could not measure is shown as '-'.\n"
	"\n"
	"Over several tasks (more than one ID, a glob such as 'build-*', or\n"
	"--label), the distribution (min, median, 95th percentile, max) and a\n"
	"suggested memory= and timeout=: the largest seen, with headroom (x1.25\n"
	"and x1.5), rounded up.\n",
	"exit status: 0; 1 if an ID has no result (or none matched); 2 usage error\n",
};

struct recs {
	struct obs_rec *v;
	size_t n, cap;
	const char *label, *glob;
};

static void add(struct recs *rs, const char *id, json_t *j)
{
	if (rs->n == rs->cap) {
		rs->cap = rs->cap ? 2 * rs->cap : 64;
		rs->v = xrealloc(rs->v, rs->cap * sizeof *rs->v);
	}
	obs_rec_of(id, j, &rs->v[rs->n++]);
}

static void pick(const char *id, json_t *j, void *arg)
{
	struct recs *rs = arg;
	if (rs->glob && fnmatch(rs->glob, id, FNM_PERIOD) != 0)
		return;
	if (rs->label) {
		const char *l = json_string_value(json_object_get(j, "label"));
		if (!l || strcmp(l, rs->label) != 0)
			return;
	}
	add(rs, id, j);
}

static void pct(char *buf, size_t len, double v)
{
	if (v < 0)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.1f%%", v * 100);
}

/* "LABEL:   VALUE", and " (WHY)" where the result says why it is not
 * known (why NULL: nothing more). */
static void row(const char *label, const char *value, const char *why)
{
	_cleanup_free_ char *w = why ? obs_term(why) : NULL;
	printf("%-19s%s%s%s%s\n", label, value, w ? " (" : "", w ? w : "", w ? ")" : "");
}

static void receipt(const struct obs_rec *r)
{
	char a[32], b[32], c[32], v[160];
	_cleanup_free_ char *id = obs_term(r->id), *st = obs_term(r->status), *user = obs_term(r->user),
			   *lane = obs_term(r->lane);
	row("Task:", id, NULL);
	row("Status:", st, NULL);
	snprintf(v, sizeof v, "%s, %s", user, lane);
	row("User, lane:", v, NULL);
	obs_dur(a, sizeof a, r->run_ms);
	obs_dur(b, sizeof b, r->wait_ms);
	if (r->timeout_s >= 0)
		obs_dur(c, sizeof c, r->timeout_s * 1000);
	else
		snprintf(c, sizeof c, "none");
	snprintf(v, sizeof v, "%s (timeout=%s), waited %s", a, c, b);
	row("Run time:", v, NULL);
	obs_dur(a, sizeof a, r->cpu_ms);
	row("CPU time:", a, r->cpu_ms < 0 ? r->why[UF_CPU] : NULL);
	pct(b, sizeof b, r->cpu_eff);
	if (r->cpu_eff >= 0) {
		obs_dur(c, sizeof c, r->run_ms);
		snprintf(v, sizeof v, "%s of %.2g CPU%s for %s", b, r->cpus, r->cpus == 1 ? "" : "s", c);
		row("CPU efficiency:", v, NULL);
	} else
		row("CPU efficiency:", "-", r->cpu_why);
	obs_bytes(a, sizeof a, r->mem_peak);
	row("Memory peak:", a, r->mem_peak < 0 ? r->why[UF_MEMORY] : NULL);
	obs_bytes(b, sizeof b, r->mem_limit);
	pct(c, sizeof c, r->mem_eff);
	snprintf(v, sizeof v, "%s of %s", c, b);
	row("Memory efficiency:", r->mem_limit > 0 ? v : "-",
	    r->mem_limit > 0 ? NULL : "no limit: set memory= to be measured against it");
	obs_bytes(a, sizeof a, r->io_read);
	obs_bytes(b, sizeof b, r->io_write);
	snprintf(v, sizeof v, "%s read, %s written", a, b);
	bool io = r->io_read >= 0 && r->io_write >= 0;
	row("Storage I/O:", io ? v : "-", io ? NULL : r->why[UF_IO]);
	snprintf(v, sizeof v, "%lld", r->pids_peak);
	row("Processes at most:", r->pids_peak >= 0 ? v : "-", r->pids_peak >= 0 ? NULL : r->why[UF_PIDS]);
	/* "some": the time at least one of its tasks waited for the
	 * resource; "full": all of them at once (PSI). */
	char ps[PSI__N][16];
	bool any = false;
	for (int i = 0; i < PSI__N; i++) {
		obs_dur(ps[i], sizeof ps[i], r->psi_us[i] >= 0 ? r->psi_us[i] / 1000 : -1);
		any = any || r->psi_us[i] >= 0;
	}
	snprintf(v, sizeof v, "cpu %s/%s, memory %s/%s, io %s/%s", ps[0], ps[1], ps[2], ps[3], ps[4],
		 ps[5]);
	row("Stall (some/full):", any ? v : "-", any ? NULL : r->why[UF_PRESSURE]);
	if (r->by[UF_CPU] || r->by[UF_MEMORY]) {
		_cleanup_free_ char *bc = obs_term(r->by[UF_CPU]), *bm = obs_term(r->by[UF_MEMORY]),
				   *bi = obs_term(r->by[UF_IO]);
		snprintf(v, sizeof v, "%s (CPU), %s (memory), %s (I/O)", bc, bm, bi);
		row("Measured by:", v, NULL);
	}
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;
	return x < y ? -1 : x > y;
}

/* min, median, p95, max of the known values of one field; n known. */
static size_t spread(const struct recs *rs, size_t off, long long q[4])
{
	long long *v = xmalloc((rs->n ? rs->n : 1) * sizeof *v);
	size_t n = 0;
	for (size_t i = 0; i < rs->n; i++) {
		long long x = *(const long long *)((const char *)&rs->v[i] + off);
		if (x >= 0)
			v[n++] = x;
	}
	sort_n(v, n, sizeof *v, cmp_ll);
	if (n) {
		q[0] = v[0];
		q[1] = v[(n - 1) / 2];
		q[2] = v[(size_t)ceil(0.95 * (double)n) - 1];
		q[3] = v[n - 1];
	}
	free(v);
	return n;
}

/* The next "nice" size at or above b: 1, 2 or 5 times a power of 2 of
 * MiB (so 64M, 128M, 160M...), as a directive writes it. */
static void suggest_memory(long long b, char *out, size_t len)
{
	long long mib = (b + (1 << 20) - 1) >> 20;
	long long step = 1;
	while (step * 16 < mib)
		step *= 2;
	mib = (mib + step - 1) / step * step;
	if (mib % 1024 == 0)
		snprintf(out, len, "%lldG", mib / 1024);
	else
		snprintf(out, len, "%lldM", mib);
}

static void suggest_timeout(long long ms, char *out, size_t len)
{
	long long s = (ms + 999) / 1000;
	if (s < 60)
		snprintf(out, len, "%llds", s < 1 ? 1 : s);
	else if (s < 3600)
		snprintf(out, len, "%lldm", (s + 59) / 60);
	else
		snprintf(out, len, "%lldh", (s + 3599) / 3600);
}

static void summary(const struct recs *rs)
{
	long long q[4];
	char a[4][32];
	printf("Tasks:             %zu\n", rs->n);
	const struct {
		const char *what;
		size_t off;
		bool bytes;
	} rows[] = {
		{"Run time", offsetof(struct obs_rec, run_ms), false},
		{"Wait", offsetof(struct obs_rec, wait_ms), false},
		{"CPU time", offsetof(struct obs_rec, cpu_ms), false},
		{"Memory peak", offsetof(struct obs_rec, mem_peak), true},
	};
	printf("%-18s %10s %10s %10s %10s %6s\n", "", "min", "median", "p95", "max", "known");
	for (size_t k = 0; k < ARRAY_SIZE(rows); k++) {
		size_t n = spread(rs, rows[k].off, q);
		for (int i = 0; i < 4; i++) {
			if (!n)
				snprintf(a[i], sizeof a[i], "-");
			else if (rows[k].bytes)
				obs_bytes(a[i], sizeof a[i], q[i]);
			else
				obs_dur(a[i], sizeof a[i], q[i]);
		}
		printf("%-18s %10s %10s %10s %10s %6zu\n", rows[k].what, a[0], a[1], a[2], a[3], n);
	}
	double ce = 0, me = 0;
	size_t nc = 0, nm = 0;
	for (size_t i = 0; i < rs->n; i++) {
		if (rs->v[i].cpu_eff >= 0)
			ce += rs->v[i].cpu_eff, nc++;
		if (rs->v[i].mem_eff >= 0)
			me += rs->v[i].mem_eff, nm++;
	}
	pct(a[0], sizeof a[0], nc ? ce / (double)nc : -1);
	pct(a[1], sizeof a[1], nm ? me / (double)nm : -1);
	printf("CPU efficiency:    %s on average\n", a[0]);
	printf("Memory efficiency: %s on average\n", a[1]);
	if (spread(rs, offsetof(struct obs_rec, mem_peak), q)) {
		suggest_memory((long long)((double)q[3] * 1.25), a[0], sizeof a[0]);
		obs_bytes(a[1], sizeof a[1], q[3]);
		printf("Suggested:         memory=%s (the largest peak, %s, x1.25)\n", a[0], a[1]);
	}
	if (spread(rs, offsetof(struct obs_rec, run_ms), q)) {
		suggest_timeout((long long)((double)q[3] * 1.5), a[0], sizeof a[0]);
		obs_dur(a[1], sizeof a[1], q[3]);
		printf("Suggested:         timeout=%s (the longest run, %s, x1.5)\n", a[0], a[1]);
	}
}

static bool is_glob(const char *s) { return strpbrk(s, "*?[") != NULL; }

int cmd_eff(struct ctx *c, int argc, char **argv)
{
	struct recs rs = {0};
	int rc = 0;
	const struct opt opts[] = {
		OPT_STRING(0, "label", &rs.label, "L", "the finished tasks submitted with --label L"),
		OPT_END(),
	};
	struct opts_rest rest;
	opts_parse("eff", argc, argv, opts, &help, 0, &rest);
	argc = rest.argc;
	argv = rest.argv;
	if (argc == 0 && !rs.label)
		return usage_error("eff", "give task ids, a glob or --label L");
	struct spool *sp = &c->sp;
	bool many = false; /* a glob or a label: the spread alone */
	if (rs.label || (argc == 1 && is_glob(argv[0]))) {
		rs.glob = argc > 0 ? argv[0] : NULL;
		many = true;
		(void)obs_results(sp, pick, &rs);
		if (!rs.n) {
			fprintf(stderr, "kart eff: no finished task you can read matches\n");
			return 1;
		}
	} else {
		for (int i = 0; i < argc; i++) {
			_cleanup_free_ char *id = spool_own_id(sp, argv[i]);
			json_t *j = NULL;
			int r = query_load(sp, id, &j);
			if (r < 0) {
				_cleanup_free_ char *safe = obs_term(id);
				fprintf(stderr, "kart eff: %s: %s\n", safe,
					r == -ENOENT ? "no result (not finished, or no such task)" : strerror(-r));
				rc = 1;
				continue;
			}
			add(&rs, id, j);
			json_decref(j);
		}
	}
	for (size_t i = 0; i < rs.n && !many; i++) {
		if (i)
			putchar('\n');
		receipt(&rs.v[i]);
	}
	if (rs.n > 1 || many) {
		if (!many)
			putchar('\n');
		summary(&rs);
	}
	for (size_t i = 0; i < rs.n; i++)
		obs_rec_free(&rs.v[i]);
	free(rs.v);
	return rc;
}
