/* outcome.h - a result's status from what was observed of a run.
 *
 * Pure: no I/O, no worker state. The worker gathers what it saw (the
 * run's end, the leaf's OOM count, the container runtime's word) and
 * this decides, in the order docs/DESIGN.md ("The task state machine")
 * documents, which tests/unit/test_outcome.c holds it to. */
#ifndef KART_OUTCOME_H
#define KART_OUTCOME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "result.h"
#include "run.h"

/* What ended the run, as the worker decided it (not a re-queue: that
 * has no result). */
enum outcome_end { OUTCOME_NATURAL, OUTCOME_TIMEOUT, OUTCOME_CANCEL };

struct observed {
	enum outcome_end end;
	const struct run_end *run; /* reaped, with the launcher's report */
	const char *backend;       /* its name, for the sandbox's failure */
	/* A timeout's or a cancel's message: */
	bool term_sent;            /* SIGTERM went first */
	int64_t timeout_s, kill_grace_s;
	/* It ran in a cgroup leaf, which counted the kernel's OOM kills: */
	bool leaf;
	int64_t oom_kills;
	/* An engine holds its limits (backend.h engine_limits: backend
	 * container): SIGKILL under a memory limit may be an OOM. */
	bool engine;
	uint64_t memory;           /* its memory limit, 0: none */
	bool memory_builtin;       /* that limit is the policy's built-in share */
	int engine_oom;            /* the engine's word (the runtime's OOMKilled): 1, 0, -1 unknown;
				    * ENGINE_OOM_STATE: its job's own state says so */
};

/* engine_oom: the engine's record of the run says OOM itself (a batch
 * system's OUT_OF_MEMORY), whatever the run's own status. */
#define ENGINE_OOM_STATE 2

/* Sets r's status, exit_code, signal, refusal, error, landlock and
 * seccomp (with `seccomp`: the filter was handed over). error may point
 * into errbuf. */
void outcome_decide(const struct observed *o, bool seccomp, struct result *r, char *errbuf,
		    size_t errlen);

#endif
