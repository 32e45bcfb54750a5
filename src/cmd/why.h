/* why.h - why a task did not end ok, as kart wait and kart cat say it:
 * the result's error, the last line of its stderr, and, for a task that
 * had no network and whose stderr names a connection that failed, that
 * the network was off. */
#ifndef KART_WHY_H
#define KART_WHY_H

#include <stdbool.h>

#include "query.h"

struct why {
	char error[1024];       /* the result's error; "": none */
	char last_stderr[512];  /* its stderr's last line; "": none */
	bool net_off;           /* no network, and its stderr says a connection failed */
};

/* What done/ID says of id, finished as q says: 0, or -errno. */
int why_load(struct spool *sp, const char *id, const struct qinfo *q, struct why *w);
/* The line that says the network was off, and how to ask for it. */
#define WHY_NET_OFF "the task ran without network: kart submit --net (#kart: net) asks for it"

#endif
