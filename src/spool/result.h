/* result.h - the result document done/<id>.json (contract section 3). */
#ifndef KART_RESULT_H
#define KART_RESULT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct result_stream {
	bool present;
	bool captured; /* the run captured it: no file means nothing was written */
	bool unmade;   /* captured, and its file was never made (spool_finish_stage
			* then links the shared empty file without looking) */
	char path[600]; /* relative to the spool */
	uint64_t bytes;
	bool truncated;
	uint64_t lost_bytes; /* read and dropped because the file refused a write */
};

/* The families of usage's fields, for usage.measured_by and
 * usage.why_null (usage_family_name). */
enum usage_family { UF_CPU, UF_MEMORY, UF_IO, UF_PIDS, UF_PRESSURE, UF__N };
extern const char *const usage_family_name[UF__N];
/* usage.psi_*_us, in this order. */
enum { PSI_CPU_SOME, PSI_CPU_FULL, PSI_MEMORY_SOME, PSI_MEMORY_FULL, PSI_IO_SOME, PSI_IO_FULL,
       PSI__N };

struct result {
	const char *id;
	const char *name; /* bytes, whatever they are */
	const char *kind; /* the task kind that ran it; NULL: none (no field) */
	const char *label; /* label=, as written; NULL: null */
	/* ok failed timeout oom killed rejected refused cancelled lost
	 * skipped (spool-layout README §7) */
	const char *status;
	int exit_code;      /* -1: null */
	int signal;         /* 0: null */
	const char *error;  /* NULL: null */
	const char *refusal;
	const char *worker;
	const char *lane;
	int attempt;
	int64_t submitted_ms, started_ms, finished_ms; /* 0: null */
	int64_t paused_ms;  /* time the run spent paused (kart pause) */
	struct result_stream out, err;
	const char *task_path; /* the task file kept beside the result */
	const char *artifacts_path; /* $KART_OUTDIR kept beside the result; NULL: none */
	uint64_t artifacts_max;     /* in: the policy's cap on it (0: none) */
	uint64_t artifacts_bytes;   /* out: what the task left there */
	bool artifacts_dropped;     /* out: over artifacts_max, not kept */
	uint64_t artifacts_files;   /* entries in it, when known (0: no field) */
	uint64_t artifacts_lost;    /* entries not kept of a set that was (FIFOs...) */
	bool outdir_gone;           /* in: $KART_OUTDIR was left empty, and is gone */
	const char *outdir_scratch; /* in: its name in the claim directory, if not .NAME.out */
	/* limits as applied */
	int64_t timeout_s;  /* -1: null */
	int64_t kill_grace_s; /* -1: null */
	uint64_t memory;    /* 0: null */
	int64_t pids;       /* 0: null */
	uint32_t cpu_milli; /* 0: null */
	/* usage */
	int64_t cpu_user_ms, cpu_system_ms, memory_peak; /* -1: null */
	int64_t io_read_bytes, io_write_bytes;           /* -1: null */
	int64_t pids_peak;                               /* -1: null */
	int64_t psi_us[PSI__N];                          /* -1: null */
	const char *usage_by[UF__N], *usage_why[UF__N];  /* NULL: none said */
	/* The CPUs the task could have used without a cpu= limit (the
	 * worker's), for efficiency.cpu; 0: unknown. */
	int host_cpus;
	/* sandbox */
	const char *backend;
	bool network;
	const char *landlock; /* "off", "unsupported" or an ABI number as text */
	bool seccomp;
	const char *cgroup;   /* "v2", "v1", "none" */
	uid_t uid;
	const char *user; /* NULL: null */
	/* What the task worked on (task.h; NULL: no such fields): "cwd",
	 * "binds", the names of its env= (never their values), "home", and
	 * "work_discarded" when its private work directory went with it. */
	const struct task_spec *task;
	const char *home;
	bool work_discarded;
	/* Its backend's own part (what its engine says of the run: backend.h
	 * result_json), JSON object text under engine_key; NULL: none. */
	const char *engine_key, *engine_json;
	/* retry_on= (sched.h): every attempt's outcome, as the text of a JSON
	 * array (spool_finish_stage fills it); NULL: no such field. */
	char *attempts_json;
};

void result_init(struct result *r);

/* The JSON text, UTF-8, ending in a newline; caller frees. */
char *result_dumps(const struct result *r);

#endif
