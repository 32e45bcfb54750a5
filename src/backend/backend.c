/* backend.c - the table of backends, and what the worker asks of all of
 * them at once (stop, sweep, timers). */
#define _GNU_SOURCE
#include "backend.h"

#include "util.h"

extern const struct backend backend_bwrap, backend_none, backend_container;

static const struct backend *const backends[] = {
	[BACKEND_BWRAP] = &backend_bwrap,
	[BACKEND_NONE] = &backend_none,
	[BACKEND_CONTAINER] = &backend_container,
};
/* Started by this worker (backend_use): one worker per process. */
static bool started[ARRAY_SIZE(backends)];

void backend_usage_init(struct backend_usage *u)
{
	*u = (struct backend_usage){
		.cpu_user_ms = USAGE_UNKNOWN, .cpu_system_ms = USAGE_UNKNOWN,
		.memory_peak = USAGE_UNKNOWN, .io_read_bytes = USAGE_UNKNOWN,
		.io_write_bytes = USAGE_UNKNOWN, .pids_peak = USAGE_UNKNOWN,
	};
	for (int i = 0; i < PSI__N; i++)
		u->psi_us[i] = USAGE_UNKNOWN;
}

/* b is one of the policy's (backend_parse). */
const struct backend *backend_get(enum backend_id b)
{
	return backends[b];
}

const struct backend *backend_use(struct worker *w, enum backend_id b)
{
	if (!started[b]) {
		started[b] = true;
		if (backends[b]->start)
			backends[b]->start(w);
	}
	return backends[b];
}

void backend_stop_all(struct worker *w)
{
	for (size_t i = 0; i < ARRAY_SIZE(backends); i++)
		if (started[i] && backends[i]->stop)
			backends[i]->stop(w);
}

int backend_sweep(struct worker *w, const char *peer)
{
	int rc = 0;
	for (size_t i = 0; i < ARRAY_SIZE(backends); i++)
		if (backends[i]->sweep && backends[i]->sweep(w, peer, started[i]) < 0)
			rc = -EBUSY;
	return rc;
}

int64_t backend_next_mono(struct worker *w)
{
	int64_t next = 0;
	for (size_t i = 0; i < ARRAY_SIZE(backends); i++) {
		int64_t t = started[i] && backends[i]->next_mono ? backends[i]->next_mono(w) : 0;
		if (t && (!next || t < next))
			next = t;
	}
	return next;
}

void backend_tick(struct worker *w, int64_t now)
{
	for (size_t i = 0; i < ARRAY_SIZE(backends); i++)
		if (started[i] && backends[i]->tick)
			backends[i]->tick(w, now);
}
