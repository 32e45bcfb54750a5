/* policy.h - what the host allows: defaults, ceilings, grants, backend.
 * Today the policy comes from built-in safe defaults, the host's own
 * capacity (cores, memory) and KART_* environment overrides; kart.conf
 * parsing plugs in here. */
#ifndef KART_POLICY_H
#define KART_POLICY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum backend { BACKEND_BWRAP, BACKEND_NONE };
const char *backend_name(enum backend b);

struct policy {
	enum backend backend;
	int slots[2];            /* per lane: fast, batch */
	uint64_t output_default; /* per stream */
	uint64_t output_max;
	uint64_t task_max_bytes; /* larger task files are rejected */
	int retries_default;     /* re-queues after an interrupted run */
	int64_t timeout_default_s; /* -1: none */
	int64_t timeout_max_s;     /* -1: none */
	uint64_t memory_max;       /* ceiling; the host's memory */
	int64_t pids_max;
	uint32_t cpu_max_milli;    /* ceiling; the host's cores */
	int term_grace_s;          /* SIGTERM: running tasks get this long */
	bool net_all;              /* network for every submitter */
	uid_t net_uids[64];
	int n_net_uids;
	char bwrap[4096];
	char launcher[4096];
};

/* Fill pol from defaults and the environment. On a bad override returns
 * -1 with err naming the variable; never falls back silently. */
int policy_load(struct policy *pol, char *err, size_t errlen);
bool policy_net_allowed(const struct policy *pol, uid_t uid);

#endif
