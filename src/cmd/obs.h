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



/* A result, reduced to what report and eff show (-1: null). */
struct obs_rec {
	char *id, *name, *status, *lane, *user, *worker, *label;
	long long submitted_ms, started_ms, finished_ms, wait_ms, run_ms;
	long long cpu_ms;        /* user + system */
	long long mem_peak, mem_limit;
	double cpus;             /* the CPUs it could use: limits.cpu, else the host's */
	long long timeout_s;
	double cpu_eff, mem_eff; /* 0..1 and more; -1: cannot be told */
};
void obs_rec_of(const char *id, json_t *res, struct obs_rec *r);
void obs_rec_free(struct obs_rec *r);
/* The first line of done/ID.task that is not a comment (what it ran),
 * at most len-1 bytes: 0, or -errno when it cannot be read. */
int obs_task_command(struct spool *sp, const char *id, char *out, size_t len);
/* Parse an RFC 3339 time as results write it; -1 if it is not one. */
long long obs_time_ms(const char *s);

#endif
