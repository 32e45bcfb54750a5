/* progress.c - see progress.h. */
#include "progress.h"

#include <stdio.h>
#include <unistd.h>

#include "util.h"

void progress_init(struct progress *p, const char *verb, const char *what)
{
	*p = (struct progress){.verb = verb, .what = what, .tty = isatty(STDERR_FILENO)};
}

void progress(struct progress *p, unsigned long long n, unsigned long long total)
{
	if (!p->tty)
		return;
	long long now = now_mono_ms();
	if (p->shown && now - p->last_ms < 100 && n != total)
		return;
	p->last_ms = now;
	p->shown = true;
	if (total)
		fprintf(stderr, "\r\033[Kkart: %s: %llu/%llu %s (%llu%%)", p->verb, n, total, p->what,
			n * 100 / total);
	else
		fprintf(stderr, "\r\033[Kkart: %s: %llu %s", p->verb, n, p->what);
}

void progress_done(struct progress *p)
{
	if (p->tty && p->shown)
		fputs("\r\033[K", stderr);
	p->shown = false;
}

