/* selection.h - the tasks a verb names: ids, glob patterns ('gzip*'),
 * and the filters --state, --label, --older-than and --newer-than, read
 * alike by kart status and kart cancel. */
#ifndef KART_SELECTION_H
#define KART_SELECTION_H

#include "opts.h"
#include "query.h"

struct selection {
	char states[512];           /* ",a,b," or "" for every state */
	int64_t older_s, newer_s;   /* -1: no filter */
	const char *label;          /* NULL: any */
	bool sort_id;               /* else by the time each entered its state */
	/* Globs and "every task" mean the caller's own (kart cancel): on a
	 * shared spool, USER:... */
	bool own;
};

/* The states kart status names, in the order tasks move. */
extern const char *const selection_states[];
extern const size_t selection_nstates;

int selection_opt_state(const struct opt *o, const char *arg, struct opts_ctx *ctx);
#define SELECTION_OPTS(sel)                                                                           \
	OPT_CALLBACK(0, "state", (sel), "STATE",                                                      \
		     "only tasks in STATE: queued, scheduled, waiting, held, running, paused, done "  \
		     "(any final status) or a final status; repeat or separate by commas",            \
		     selection_opt_state),                                                            \
	OPT_DURATION(0, "older-than", &(sel)->older_s,                                                \
		     "only tasks that entered their state at least DUR ago", 0),                      \
	OPT_DURATION(0, "newer-than", &(sel)->newer_s,                                                \
		     "only tasks that entered their state less than DUR ago (DUR: 90, 90s, 5m, 2h, "  \
		     "7d)", 0),                                                                       \
	OPT_STRING(0, "label", &(sel)->label, "L", "only tasks submitted with --label L (#kart: label=L)")

void selection_init(struct selection *s);
/* Do the filters choose some tasks by themselves (no id needed)? */
bool selection_filters(const struct selection *s);

struct sel_task {
	char *id;
	struct qinfo q;
};
struct sel_list {
	struct sel_task *v;
	size_t n, cap;
};

/* The tasks args name, filtered: ids in the order named; where a pattern
 * or nothing is named, every task that matches, by time (or id). A name
 * that is no task, or a pattern that matches none, is said on stderr
 * ("kart VERB: ...") and makes the return 1; else 0. */
int selection_find(struct spool *sp, const struct selection *s, const char *verb, int argc,
		   char **argv, struct sel_list *out);
void sel_list_free(struct sel_list *l);

#endif
