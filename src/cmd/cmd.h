/* cmd.h - the verbs. Each cmd_* parses its options, calls the library
 * and prints; main.c holds the table. Exit codes: 0 success, 1 failure,
 * 2 usage error (one line on stderr). */
#ifndef KART_CMD_H
#define KART_CMD_H

#include "spool.h"

struct ctx {
	const char *spool_path; /* -s, --spool or $KART_SPOOL */
	const char *prog;
	/* Opened by main before a verb marked VERB_SPOOL runs (as git's
	 * RUN_SETUP), closed after it returns. */
	struct spool sp;
	/* The verb writes the spool (VERB_WRITES): ctx_open_spool refuses a
	 * spool of a format this kart does not know. */
	bool writes;
};

/* Flags of the verb table (main.c). */
enum {
	VERB_SPOOL = 1,  /* needs the spool: main opens it into ctx.sp */
	VERB_WRITES = 2, /* writes it: only a spool of the format this kart knows */
};

#define EXIT_USAGE 2

int usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Open the spool named by -s / $KART_SPOOL, or exit with a message: for a
 * verb that needs it only sometimes (submit without --to). */
void ctx_open_spool(struct ctx *c, struct spool *sp);
/* A spool closed when it goes out of scope, however the verb returns
 * (spool_close is idempotent): declare it just before ctx_open_spool. */
#define _cleanup_spool_ __attribute__((cleanup(spool_close)))
/* Is --help or -h among the arguments (before any "--")? */
bool asks_help(int argc, char **argv);
/* Say on stderr when no live worker holds the spool (its tasks wait for
 * one), with the command that starts one. Quiet where it cannot tell. */
void warn_no_worker(struct spool *sp, const char *verb);
/* The same words, said: the caller already knows no worker is live. */
void say_no_worker(const struct spool *sp, const char *verb);

/* kart submit --to postgres URL: insert the task (directives in its
 * header) into the queue of kart feed and print the row's id. It links
 * libpq, so it lives in kart-sync (cmd_feed.c), which sets this; kart
 * runs kart-sync for it. 0, or 1 with a message printed. */
extern int (*submit_to_queue)(const char *url, const char *name, const char *lane,
			      const char *task, size_t len);
int feed_submit(const char *url, const char *name, const char *lane, const char *task,
		size_t len);

int cmd_init(struct ctx *c, int argc, char **argv);
int cmd_submit(struct ctx *c, int argc, char **argv);
int cmd_worker(struct ctx *c, int argc, char **argv);
int cmd_status(struct ctx *c, int argc, char **argv);
int cmd_wait(struct ctx *c, int argc, char **argv);
int cmd_cat(struct ctx *c, int argc, char **argv);
int cmd_cancel(struct ctx *c, int argc, char **argv);
int cmd_hold(struct ctx *c, int argc, char **argv);
int cmd_release(struct ctx *c, int argc, char **argv);
int cmd_edit(struct ctx *c, int argc, char **argv);
int cmd_pause(struct ctx *c, int argc, char **argv);
int cmd_resume(struct ctx *c, int argc, char **argv);
int cmd_doctor(struct ctx *c, int argc, char **argv);
int cmd_setup_cgroup(struct ctx *c, int argc, char **argv);
int cmd_retry(struct ctx *c, int argc, char **argv);
int cmd_watch(struct ctx *c, int argc, char **argv);
int cmd_gc(struct ctx *c, int argc, char **argv);
int cmd_metrics(struct ctx *c, int argc, char **argv);
int cmd_top(struct ctx *c, int argc, char **argv);
int cmd_eff(struct ctx *c, int argc, char **argv);
int cmd_report(struct ctx *c, int argc, char **argv);
int cmd_sync(struct ctx *c, int argc, char **argv);
int cmd_feed(struct ctx *c, int argc, char **argv);

#endif
