/* worker.h - the event loop: watch new/, claim, run, finish, recover. */
#ifndef KART_WORKER_H
#define KART_WORKER_H

#include <stdbool.h>

#include "policy.h"
#include "spool.h"

struct worker_opts {
	const char *id;
	int slots[2]; /* <= 0: policy default */
	bool drain;
};

int worker_main(struct spool *sp, struct policy *pol, const struct worker_opts *opts);

#endif
