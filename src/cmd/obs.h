/* obs.h - what the verbs that look at the queue share (metrics, top,
 * report, eff): the live tasks with their lanes, every result, and
 * names made safe for a terminal. */
#ifndef KART_OBS_H
#define KART_OBS_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "progress.h"
#include "query.h"
#include "result.h"
#include "spool.h"
#include "task.h"

/* A task queued or running, as query_live found it. */
struct live_task {
	char *id;
	struct qinfo q;
	const char *word;   /* query_state_name: queued, running, ... */
	const char *lane;   /* "fast" or "batch" (its header; "fast" if unreadable) */
	uid_t uid;          /* its file's owner; -1 unknown */
	char label[TASK_NAME_MAX + 1]; /* label=, as written; "" none */
};
struct live_set {
	struct live_task *v;
	size_t n, cap;
};
int obs_live(struct spool *sp, struct live_set *ls);
void obs_live_free(struct live_set *ls);

/* Every result this user can read, in no order: cb gets each document
 * (borrowed), with a progress line on a terminal while they are read.
 * 0, or -errno when done/ cannot be listed. */
typedef void (*obs_result_cb)(const char *id, json_t *res, void *arg);
int obs_results(struct spool *sp, obs_result_cb cb, void *arg);

/* A JSON integer member, or -1 (null, absent, negative). */
long long obs_int(json_t *o, const char *k1, const char *k2);

/* A copy of bytes fit to print on a terminal: control characters
 * (C0, DEL, C1) and invalid UTF-8 as \xNN; caller frees. */
char *obs_term(const char *s);

/* "1.5G", "200M", "3.0K", "12B". */
void obs_bytes(char *buf, size_t len, long long b);
/* "1h02m", "3m04s", "5.2s", "120ms". */
void obs_dur(char *buf, size_t len, long long ms);



/* A running task's use so far, as Slurm's sstat gives it: from its
 * cgroup leaf, found by the run lock (spool-layout WORKER §4: the run's
 * processes hold cur/W/.ID.lock, /proc/locks names a holder, and
 * /proc/PID/cgroup its leaf); without a leaf, summed over its processes
 * (no peak then). -1 where unknown. */
struct run_now {
	long long cpu_ns, mem, mem_peak, out_bytes;
	const char *by; /* "cgroup", "processes", or NULL: not found */
};
/* /proc/locks, read once for many tasks (caller frees; NULL: unreadable). */
char *obs_locks(void);
void obs_run_now(struct spool *sp, const char *locks, const char *worker, const char *id,
		 struct run_now *u);
/* As kart status prints it: "cpu 1.2s, memory 40M (peak 200M), output
 * 3.1K", "-" for what is unknown; and as JSON. Callers free. */
char *obs_run_text(const struct run_now *u);
json_t *obs_run_json(const struct run_now *u);

/* A result, reduced to what report and eff show (-1: null). */
struct obs_rec {
	char *id, *name, *status, *lane, *user, *worker, *label;
	long long submitted_ms, started_ms, finished_ms, wait_ms, run_ms;
	long long cpu_ms;        /* user + system */
	long long mem_peak, mem_limit;
	double cpus;             /* the CPUs it could use: limits.cpu, else the host's */
	long long timeout_s;
	double cpu_eff, mem_eff; /* 0..1 and more; -1: cannot be told */
	long long io_read, io_write, pids_peak;
	long long psi_us[PSI__N];
	/* usage.measured_by and usage.why_null by family (result.h); NULL:
	 * not said (a result of an older kart says neither) */
	char *by[UF__N], *why[UF__N];
	char *cpu_why, *mem_why; /* efficiency.why_null */
};
void obs_rec_of(const char *id, json_t *res, struct obs_rec *r);
void obs_rec_free(struct obs_rec *r);
/* The first line of done/ID.task that is not a comment (what it ran),
 * at most len-1 bytes: 0, or -errno when it cannot be read. */
int obs_task_command(struct spool *sp, const char *id, char *out, size_t len);
/* Parse an RFC 3339 time as results write it; -1 if it is not one. */
long long obs_time_ms(const char *s);

#endif
