/* backend.c - the table of backends, and what the worker asks of all of
 * them at once (stop, sweep, timers). */
#define _GNU_SOURCE
#include "backend.h"

#include "util.h"

extern const struct backend backend_bwrap, backend_none, backend_container, backend_slurm;

static const struct backend *const backends[] = {
	[BACKEND_BWRAP] = &backend_bwrap,
	[BACKEND_NONE] = &backend_none,
	[BACKEND_CONTAINER] = &backend_container,
	[BACKEND_SLURM] = &backend_slurm,
};
/* Started by this worker (backend_use): one worker per process. */
static bool started[ARRAY_SIZE(backends)];

void backend_usage_init(struct backend_usage *u)
{
	*u = (struct backend_usage){
		.cpu_user_ms = USAGE_UNKNOWN, .cpu_system_ms = USAGE_UNKNOWN,
		.memory_peak = USAGE_UNKNOWN, .io_read_bytes = USAGE_UNKNOWN,
		.io_write_bytes = USAGE_UNKNOWN, .pids_peak = USAGE_UNKNOWN,
		.started_ms = USAGE_UNKNOWN, .finished_ms = USAGE_UNKNOWN,
	};
	for (int i = 0; i < PSI__N; i++)
		u->psi_us[i] = USAGE_UNKNOWN;
}

void backend_usage_from_run(struct backend_usage *u, const struct run_use *p)
{
	if (!p->by)
		return;
	if (p->user_us >= 0 && p->system_us >= 0) {
		u->cpu_user_ms = p->user_us / 1000;
		u->cpu_system_ms = p->system_us / 1000;
		u->by[UF_CPU] = p->by;
	}
	if (p->maxrss_kb >= 0) {
		u->memory_peak = p->maxrss_kb * 1024;
		u->by[UF_MEMORY] = p->by;
	}
	if (p->read_bytes >= 0 && p->write_bytes >= 0) {
		u->io_read_bytes = p->read_bytes;
		u->io_write_bytes = p->write_bytes;
		u->by[UF_IO] = p->by;
	}
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

void backend_stopping_all(struct worker *w)
{
	for (size_t i = 0; i < ARRAY_SIZE(backends); i++)
		if (started[i] && backends[i]->stopping)
			backends[i]->stopping(w);
}

int backend_of_run(const char *run)
{
	for (size_t i = 0; i < ARRAY_SIZE(backends); i++) {
		const char *wd = backends[i]->run_word;
		size_t l = wd ? strlen(wd) : 0;
		if (l && strncmp(run, wd, l) == 0 && run[l] == ' ')
			return (int)i;
	}
	return -1;
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
