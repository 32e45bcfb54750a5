/* progress.h - a progress line for long work (kart gc, sync, report): on
 * stderr, rewritten in place, and only when stderr is a terminal. */
#ifndef KART_PROGRESS_H
#define KART_PROGRESS_H

#include <stdbool.h>

/* A progress line on stderr, rewritten in place, when stderr is a
 * terminal: "kart VERB: N/TOTAL WHAT" (TOTAL 0: unknown). At most ten
 * times a second; progress_done ends the line. */
struct progress {
	const char *verb, *what;
	bool tty;
	long long last_ms;
	bool shown;
};
void progress_init(struct progress *p, const char *verb, const char *what);
void progress(struct progress *p, unsigned long long n, unsigned long long total);
void progress_done(struct progress *p);

#endif
