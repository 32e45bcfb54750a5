/* query.h - where a task is now: queued, running, or finished. Read-only
 * views of the spool for status, wait, cat and cancel. */
#ifndef KART_QUERY_H
#define KART_QUERY_H

#include <stdbool.h>

#include "spool.h"

/* Q_HELD: queued, but held (new/.held.ID, kart hold). Q_SCHEDULED:
 * queued, not before its time (not_before=, a retry's delay). */
enum qstate { Q_UNKNOWN, Q_QUEUED, Q_HELD, Q_RUNNING, Q_DONE, Q_SCHEDULED };

struct qinfo {
	enum qstate state;
	char worker[256];  /* Q_RUNNING */
	bool paused;       /* Q_RUNNING: frozen by kart pause (cur/W/.ID.paused) */
	bool worker_gone;  /* Q_RUNNING: its worker holds no lock (spool_worker_live):
			    * the claim is re-queued when a worker starts */
	char status[32];   /* Q_DONE */
	char error[1024];  /* Q_DONE: the result's error (cut to fit), "": none */
	int exit_code;     /* Q_DONE; -1: null */
	int signal;        /* Q_DONE; 0: null */
	int64_t duration_ms; /* Q_DONE; -1: null */
	char out_path[512], err_path[512]; /* Q_DONE, relative to the spool */
	int64_t not_before_ms; /* Q_SCHEDULED: until then */
	int64_t since_ms;  /* entered this state (queued, claimed, result
			    * written), ms since the epoch; 0: unknown */
	/* Q_QUEUED whose after= names ids without a result: those ids,
	 * comma-separated (query_queued); "": none, or not looked at. */
	char waiting[512];
	/* Queued, held or running: the entry's name in new/ or cur/W/. The
	 * id, or for a reserved id re-queued onto a taken name ID.N (and
	 * .held.ID for a held one). */
	char name[256];
};

int query_id(struct spool *sp, const char *id, struct qinfo *q);
/* The name in new/ (or cur/W/) that a hold, a release, an edit or a
 * claim of id's task must act on: q->name without its .held., or id
 * where q names none. Not new/ID by name: a reserved id re-queued onto
 * a taken name is at ID.2, and new/ID is another task. */
const char *query_entry(const char *id, const struct qinfo *q);
/* A queued task's time, when it is ahead of now_ms (scheduled: its
 * not_before=, or a retry's in user.kart); else 0. */
int64_t query_not_before(int dirfd, const char *name, int64_t now_ms);
/* A finished task's status as kart wait's exit status (kart(1)):
 * ok 0, failed its exit code, timeout 124, cancelled 130, ... */
int query_exit_status(const struct qinfo *q);
/* Read done/<id>.json into q; -ENOENT if absent. */
int query_done(struct spool *sp, const char *id, struct qinfo *q);
/* Parse done/<id>.json: 0 with *out (caller json_decref), -ENOENT,
 * -EBADMSG, or another -errno. The one reader of result files. */
struct json_t;
int query_load(struct spool *sp, const char *id, struct json_t **out);
/* query_load, and the document's text as written (*text, caller frees). */
int query_read(struct spool *sp, const char *id, struct json_t **out, char **text, size_t *len);

/* A queued task's file dirfd/name, its header read once: returns its
 * time as query_not_before does, and fills waiting with the after= ids
 * that have no done/ID.json yet, comma-separated ("": none, or a file
 * the caller cannot read). */
int64_t query_queued(struct spool *sp, int dirfd, const char *name, int64_t now_ms, char *waiting,
		     size_t wlen);

/* The task file of id where q says it is (new/ID, new/.held.ID,
 * cur/W/ID, done/ID.task), its first TASK_HEADER_MAX bytes into *text
 * (caller frees), never blocking nor following a link: 0, or -errno. */
int query_task_text(struct spool *sp, const char *id, const struct qinfo *q, char **text,
		    size_t *len);
/* What a task runs, for a listing: kart submit's command (its words, a
 * word quoted where a shell would need it), else the first line after
 * the leading comment block; "" when there is none. Never cut: out is
 * the caller's (NULL with *outlen 0 is none). */
char *query_command(const char *text, size_t len);
/* "worker W is gone; re-queued when a worker starts": what kart status,
 * its --json and the mirror say of a running task whose worker is gone. */
#define QUERY_GONE_FMT "worker %s is gone; re-queued when a worker starts"
/* The state as kart status names it: queued, waiting (queued on after=
 * ids), scheduled, held, running, paused, or the final status. */
const char *query_state_name(const struct qinfo *q);

typedef void (*query_cb)(const char *id, const struct qinfo *q, void *arg);
/* Every task in the spool: queued, running, then finished. */
int query_all(struct spool *sp, query_cb cb, void *arg);
/* The same without the finished ones, and without reading done/ whole:
 * what is queued and running (kart metrics, kart top). */
int query_live(struct spool *sp, query_cb cb, void *arg);

#endif
