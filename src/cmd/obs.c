/* obs.c - see obs.h. */
#define _GNU_SOURCE
#include "obs.h"
#include "termsafe.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include "task.h"
#include "util.h"

static void live_add(const char *id, const struct qinfo *q, void *arg)
{
	struct live_set *ls = arg;
	if (ls->n == ls->cap) {
		ls->cap = ls->cap ? 2 * ls->cap : 64;
		ls->v = xrealloc(ls->v, ls->cap * sizeof *ls->v);
	}
	struct live_task *t = &ls->v[ls->n++];
	memset(t, 0, sizeof *t);
	t->id = xstrdup(id);
	t->q = *q;
	t->word = query_state_name(&t->q);
	t->lane = "fast";
	t->uid = (uid_t)-1;
}

/* The task file's owner, lane and label: its header, read without
 * blocking (a FIFO or a device is no task of anyone's). */
static void live_header(struct spool *sp, struct live_task *t)
{
	char p[600];
	int dir = t->q.state == Q_RUNNING ? sp->cur : sp->new;
	if (t->q.state == Q_RUNNING ? pathfmt(p, sizeof p, "%s/%s", t->q.worker, t->id) < 0
	    : t->q.state == Q_HELD ? spool_held_name(t->id, p, sizeof p) < 0
				   : pathfmt(p, sizeof p, "%s", t->id) < 0)
		return;
	_cleanup_close_ int fd = openat(dir, p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	t->uid = st.st_uid;
	size_t want = (size_t)st.st_size < TASK_HEADER_MAX ? (size_t)st.st_size : TASK_HEADER_MAX;
	_cleanup_free_ char *text = xmalloc(want + 1);
	ssize_t n = read_upto(fd, text, want);
	struct task_spec spec;
	char err[256];
	if (n > 0 && task_parse(text, (size_t)n, &spec, err, sizeof err) == 0) {
		t->lane = lane_name(spec.lane);
		snprintf(t->label, sizeof t->label, "%s", spec.label);
	}
}

int obs_live(struct spool *sp, struct live_set *ls)
{
	memset(ls, 0, sizeof *ls);
	int r = query_live(sp, live_add, ls);
	for (size_t i = 0; i < ls->n; i++)
		live_header(sp, &ls->v[i]);
	return r;
}

void obs_live_free(struct live_set *ls)
{
	for (size_t i = 0; i < ls->n; i++)
		free(ls->v[i].id);
	free(ls->v);
	memset(ls, 0, sizeof *ls);
}

int obs_results(struct spool *sp, obs_result_cb cb, void *arg)
{
	struct strv names = {0};
	int r = dir_names(sp->done, ".", &names);
	if (r < 0)
		return r;
	struct progress pr;
	progress_init(&pr, "reading", "results");
	size_t total = 0;
	for (size_t i = 0; i < names.n; i++) {
		size_t l = strlen(names.v[i]);
		total += l > 5 && strcmp(names.v[i] + l - 5, ".json") == 0;
	}
	size_t k = 0;
	for (size_t i = 0; i < names.n; i++) {
		size_t l = strlen(names.v[i]);
		if (l <= 5 || strcmp(names.v[i] + l - 5, ".json") != 0)
			continue;
		names.v[i][l - 5] = '\0';
		json_t *j = NULL;
		/* Another user's result is not ours to read: left out. */
		if (query_load(sp, names.v[i], &j) == 0 && json_is_object(j))
			cb(names.v[i], j, arg);
		json_decref(j);
		progress(&pr, ++k, total);
	}
	progress_done(&pr);
	strv_free(&names);
	return 0;
}

long long obs_int(json_t *o, const char *k1, const char *k2)
{
	json_t *v = json_object_get(o, k1);
	if (k2)
		v = json_object_get(v, k2);
	return json_is_integer(v) && json_integer_value(v) >= 0 ? (long long)json_integer_value(v) : -1;
}

/* NULL prints as "-"; everything else through the one escaper, which
 * also catches the bidi controls a hand-rolled check would miss. */
char *obs_term(const char *s)
{
	return s ? term_safe(s) : xstrdup("-");
}

void obs_bytes(char *buf, size_t len, long long b)
{
	if (b < 0) {
		snprintf(buf, len, "-");
		return;
	}
	const char *u = "KMGT";
	double v = (double)b;
	if (v < 1024) {
		snprintf(buf, len, "%lldB", b);
		return;
	}
	int i = -1;
	while (v >= 1024 && i < 3)
		v /= 1024, i++;
	snprintf(buf, len, v < 10 ? "%.1f%c" : "%.0f%c", v, u[i]);
}

void obs_dur(char *buf, size_t len, long long ms)
{
	if (ms < 0)
		snprintf(buf, len, "-");
	else if (ms < 1000)
		snprintf(buf, len, "%lldms", ms);
	else if (ms < 60000)
		snprintf(buf, len, "%.1fs", ms / 1000.0);
	else if (ms < 3600000)
		snprintf(buf, len, "%lldm%02llds", ms / 60000, ms / 1000 % 60);
	else
		snprintf(buf, len, "%lldh%02lldm", ms / 3600000, ms / 60000 % 60);
}

long long obs_time_ms(const char *s)
{
	struct tm tm = {0};
	int ms = 0;
	if (!s)
		return -1;
	const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!p)
		return -1;
	if (*p == '.') {
		int digits = 0;
		for (p++; *p >= '0' && *p <= '9'; p++, digits++)
			if (digits < 3)
				ms = ms * 10 + (*p - '0');
		while (digits > 0 && digits < 3)
			ms *= 10, digits++;
	}
	if (*p != 'Z')
		return -1;
	return (long long)timegm(&tm) * 1000 + ms;
}

static char *dup_or_null(json_t *v)
{
	const char *s = json_string_value(v);
	return s ? xstrdup(s) : NULL;
}

void obs_rec_of(const char *id, json_t *j, struct obs_rec *r)
{
	memset(r, 0, sizeof *r);
	r->id = xstrdup(id);
	r->name = dup_or_null(json_object_get(j, "name"));
	r->status = dup_or_null(json_object_get(j, "status"));
	r->lane = dup_or_null(json_object_get(j, "lane"));
	r->user = dup_or_null(json_object_get(json_object_get(j, "submitter"), "user"));
	r->worker = dup_or_null(json_object_get(j, "worker"));
	r->label = dup_or_null(json_object_get(j, "label"));
	r->submitted_ms = obs_time_ms(json_string_value(json_object_get(j, "submitted_at")));
	r->started_ms = obs_time_ms(json_string_value(json_object_get(j, "started_at")));
	r->finished_ms = obs_time_ms(json_string_value(json_object_get(j, "finished_at")));
	r->wait_ms = obs_int(j, "wait_ms", NULL);
	r->run_ms = obs_int(j, "duration_ms", NULL);
	long long u = obs_int(j, "usage", "cpu_user_ms"), s = obs_int(j, "usage", "cpu_system_ms");
	r->cpu_ms = u >= 0 && s >= 0 ? u + s : -1;
	r->mem_peak = obs_int(j, "usage", "memory_peak_bytes");
	r->mem_limit = obs_int(j, "limits", "memory_bytes");
	r->timeout_s = obs_int(j, "limits", "timeout_s");
	json_t *cpu = json_object_get(json_object_get(j, "limits"), "cpu");
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	r->cpus = json_is_number(cpu) && json_number_value(cpu) > 0 ? json_number_value(cpu)
								     : (double)(ncpu > 0 ? ncpu : 1);
	/* As the result says it, where the worker wrote it (item of
	 * kart-spool(5)); else from the same fields, as Slurm's seff does. */
	json_t *eff = json_object_get(j, "efficiency");
	json_t *ce = json_object_get(eff, "cpu"), *me = json_object_get(eff, "memory");
	r->cpu_eff = json_is_number(ce) ? json_number_value(ce)
		     : r->cpu_ms >= 0 && r->run_ms > 0 ? r->cpu_ms / (r->run_ms * r->cpus)
						       : -1;
	r->mem_eff = json_is_number(me) ? json_number_value(me)
		     : r->mem_peak >= 0 && r->mem_limit > 0 ? (double)r->mem_peak / (double)r->mem_limit
							    : -1;
}

void obs_rec_free(struct obs_rec *r)
{
	free(r->id);
	free(r->name);
	free(r->status);
	free(r->lane);
	free(r->user);
	free(r->worker);
	free(r->label);
}

int obs_task_command(struct spool *sp, const char *id, char *out, size_t len)
{
	char p[512];
	if (spool_name_done(p, sizeof p, id, DONE_TASK) < 0)
		return -ENAMETOOLONG;
	_cleanup_close_ int fd = openat(sp->done, p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char buf[4096];
	ssize_t n = read_upto(fd, buf, sizeof buf - 1);
	if (n < 0)
		return (int)n;
	buf[n] = '\0';
	for (char *l = buf, *nl; l && *l; l = nl) {
		nl = strchr(l, '\n');
		if (nl)
			*nl++ = '\0';
		while (*l == ' ' || *l == '\t')
			l++;
		if (*l && *l != '#') {
			snprintf(out, len, "%s", l);
			return 0;
		}
	}
	return -ENOENT;
}
