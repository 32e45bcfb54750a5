/* policy.h - what the host allows: defaults, ceilings, grants, backend.
 * Built-in safe defaults and the host's own capacity (cores, memory),
 * then SPOOL/kart.conf, then KART_* environment overrides. */
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

/* Fill pol from defaults, spool_dir/kart.conf (if spool_dir is given and
 * the file exists) and the environment. On an unreadable file, a bad
 * line or a bad override returns -1 with err naming the file and line or
 * the variable; never falls back silently to defaults. */
int policy_load(struct policy *pol, const char *spool_dir, char *err, size_t errlen);
/* Parse kart.conf text into pol (over whatever pol holds). */
int policy_parse_conf(struct policy *pol, const char *text, const char *fname, char *err,
		      size_t errlen);
bool policy_net_allowed(const struct policy *pol, uid_t uid);

#endif
