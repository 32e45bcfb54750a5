/* outcome.c - a result's status from what was observed of a run (pure). */
#define _GNU_SOURCE
#include "outcome.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "util.h"

/* A timeout's or a cancel's result: which signal ended it, or the exit
 * status it chose within its kill grace. */
static void stop_result(const struct observed *o, struct result *r, char *errbuf, size_t errlen)
{
	const struct run_end *e = o->run;
	char why[80], how[120];
	if (o->end == OUTCOME_TIMEOUT)
		snprintf(why, sizeof why, "the wall-clock timeout of %llds passed",
			 (long long)o->timeout_s);
	else
		snprintf(why, sizeof why, "cancelled by kart cancel while running");
	if (!e->started && !e->exited) {
		/* Stopped before the run began (a job still in its engine's
		 * queue, a sandbox still being built): no signal reached it. */
		snprintf(how, sizeof how, "before its run began");
	} else if (e->exited) {
		r->exit_code = e->exit_code;
		snprintf(how, sizeof how, "after SIGTERM it exited with status %d", e->exit_code);
	} else {
		r->signal = e->signal ? e->signal : SIGKILL;
		if (!o->term_sent)
			snprintf(how, sizeof how, "ended by %s", signal_name(r->signal));
		else if (r->signal == SIGKILL)
			snprintf(how, sizeof how, "SIGTERM, then SIGKILL after the kill grace of %llds",
				 (long long)o->kill_grace_s);
		else if (r->signal == SIGTERM)
			snprintf(how, sizeof how, "SIGTERM ended it");
		else
			snprintf(how, sizeof how, "after SIGTERM, %s ended it", signal_name(r->signal));
	}
	snprintf(errbuf, errlen, "%s: %s", why, how);
	r->error = errbuf;
}

void outcome_decide(const struct observed *o, bool seccomp, struct result *r, char *errbuf,
		    size_t errlen)
{
	const struct run_end *e = o->run;
	/* bwrap loads it before the launcher runs, and the launcher (backend
	 * none) before it says "start": a started task ran under it. */
	r->seccomp = seccomp && e->started;
	if (e->landlock[0])
		r->landlock = e->landlock; /* what the launcher applied */
	if (o->end == OUTCOME_TIMEOUT || o->end == OUTCOME_CANCEL) {
		r->status = o->end == OUTCOME_TIMEOUT ? "timeout" : "cancelled";
		stop_result(o, r, errbuf, errlen);
	} else if (!e->started && e->refusal) {
		/* A confinement step the policy requires failed (Landlock,
		 * the switch to the submitter): the task never ran. */
		r->status = "refused";
		r->refusal = e->refusal;
		r->error = e->refusal_why;
		if (strcmp(e->refusal, "landlock_unavailable") == 0)
			r->landlock = "unsupported";
	} else if (!e->started) {
		r->status = "refused";
		r->refusal = "sandbox_setup_failed";
		int st = e->wrapper_status;
		snprintf(errbuf, errlen,
			 "the sandbox could not be built (%s %s %d); its message is in stderr",
			 o->backend, WIFEXITED(st) ? "exited with status" : "got signal",
			 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		r->error = errbuf;
	} else if (e->exited) {
		r->exit_code = e->exit_code;
		r->status = e->exit_code == 0 ? "ok" : "failed";
	} else {
		r->status = "killed";
		r->signal = e->signal ? e->signal : SIGKILL;
		snprintf(errbuf, errlen, "ended by %s", signal_name(r->signal));
		r->error = errbuf;
	}
	if (o->end == OUTCOME_NATURAL && e->started && o->leaf && o->oom_kills > 0) {
		/* The kernel's count, not a guess from SIGKILL or exit 137. */
		r->status = "oom";
		if (o->memory)
			snprintf(errbuf, errlen, "the memory limit of %llu bytes was hit: "
				 "the kernel killed %lld process(es)",
				 (unsigned long long)o->memory, (long long)o->oom_kills);
		else
			snprintf(errbuf, errlen, "out of memory: the kernel killed %lld process(es)",
				 (long long)o->oom_kills);
		r->error = errbuf;
	}
	/* An engine's own state, whatever the run's status (a batch
	 * system's job whose cgroup had an OOM kill: its OUT_OF_MEMORY). */
	if (o->end == OUTCOME_NATURAL && e->started && o->engine && o->engine_oom == ENGINE_OOM_STATE) {
		r->status = "oom";
		if (o->memory)
			snprintf(errbuf, errlen, "the memory limit of %llu bytes was hit: %s reports an "
				 "OOM kill", (unsigned long long)o->memory, o->backend);
		else
			snprintf(errbuf, errlen, "out of memory: %s reports an OOM kill", o->backend);
		r->error = errbuf;
	}
	/* Not under the built-in share of the host's memory: too large a
	 * limit to make a SIGKILL a probable OOM. */
	if (o->end == OUTCOME_NATURAL && e->exited && e->exit_code == 137 && o->engine &&
	    o->memory && !o->memory_builtin && o->engine_oom != 0) {
		/* An engine's word (backend container: the runtime's OOMKilled);
		 * where it could not be read, SIGKILL under a memory limit is
		 * called a probable OOM. */
		r->status = "oom";
		snprintf(errbuf, errlen,
			 o->engine_oom > 0 ? "the memory limit of %llu bytes was hit: the container "
						"runtime reports it OOM-killed"
					      : "probably out of memory: exit status 137 (SIGKILL) under a "
						"memory limit of %llu bytes; the runtime's OOMKilled state "
						"could not be read",
			 (unsigned long long)o->memory);
		r->error = errbuf;
	}
}
