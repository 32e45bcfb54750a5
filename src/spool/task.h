/* task.h - a task file turned into a validated spec: names, directives,
 * the #! line, and the checks that keep hostile entries from running. */
#ifndef KART_TASK_H
#define KART_TASK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sched.h"
#include "util.h"

struct policy;

enum lane { LANE_FAST = 0, LANE_BATCH = 1, LANE__N };
const char *lane_name(enum lane l);

#define TASK_NAME_MAX 200     /* leaves room for ".stdout", suffixes */
#define TASK_HEADER_MAX 65536 /* directives are read from this much */
#define TASK_INTERP_MAX 256   /* as the kernel's BINPRM_BUF_SIZE */
#define TASK_BINDS_MAX 16     /* cwd=, bind= and ro= together */
#define TASK_BIND_PATH_MAX 1024
#define TASK_ENV_BYTES 8192   /* env= items, decoded, NUL after each */
#define TASK_AFTER_MAX 16     /* after= ids: each binds two inputs (sandbox.h) */

/* A host path the task asked for (cwd=, bind=, ro=), bound at the same
 * path. Opened as the submitter when the task starts (binds.h). */
enum bind_mode { BIND_CWD, BIND_RW, BIND_RO };
struct task_bind {
	enum bind_mode mode;
	int line;
	char path[TASK_BIND_PATH_MAX]; /* decoded, absolute, no . or .. */
};

struct task_spec {
	int64_t timeout_s; /* -1: none */
	int64_t kill_grace_s; /* SIGTERM, then SIGKILL this long after; -1: policy default */
	uint64_t memory;   /* 0: none */
	int64_t pids;      /* 0: none */
	uint32_t cpu_milli; /* 0: none */
	enum lane lane;
	bool net;
	int priority;
	int retries;     /* -1: policy default */
	uint64_t output; /* 0: policy default */
	char name[TASK_NAME_MAX + 1]; /* from name=, set by kart submit; "" if absent */
	char label[TASK_NAME_MAX + 1]; /* label=, as written (percent-encoded); "" if absent */
	/* The #! line: interp[0] == 0 means "run under /bin/sh". */
	char interp[TASK_INTERP_MAX];
	char interp_arg[TASK_INTERP_MAX];
	bool has_interp_arg;
	/* Line each limit came from (0: default), for errors naming it. */
	int line_timeout, line_kill_grace, line_memory, line_pids, line_cpu, line_net, line_output, line_retries;
	/* kind=NAME, or after task_resolve_kind the kind that runs the task
	 * ("": none); line_kind 0 when the extension chose it. */
	char kind[32];
	int line_kind;
	bool kind_net; /* the kind needs network (net is set too) */
	/* cwd= (at most one, binds[cwd]), bind=, ro=: in their order. */
	struct task_bind binds[TASK_BINDS_MAX];
	int n_binds;
	int cwd; /* index in binds of the cwd=, -1: none (the private /work) */
	/* env=NAME=VALUE, decoded: "NAME=VALUE\0" back to back. The values
	 * are the submitter's: never in a result, a log line or argv. */
	char env[TASK_ENV_BYTES];
	size_t env_len;
	int n_env, line_env_first;
	int umask; /* umask=, octal; -1: 022 */
	/* When it may start, and whether it runs again (sched.h). */
	int64_t not_before_ms;   /* not_before=, RFC 3339; 0: at once */
	struct retry_on retry_on; /* retry_on=; nothing set: never retried for its outcome */
	int64_t retry_delay_ms;  /* retry_delay=; doubled for each later attempt */
	int line_retry_on;
	/* unique=KEY, as written (percent-encoded): at most one task of its
	 * submitter with this key queued, scheduled or running. "": none. */
	char unique[TASK_NAME_MAX + 1];
	/* after=ID[,ID...] (dependencies, depend.h): the upstream ids,
	 * decoded, each a task name, without repeats, in their order; with
	 * each, what its end must be for this one to run: after= ok (Slurm's
	 * afterok), after_any= any (afterany), after_fail= not ok
	 * (afternotok). */
	char after[TASK_AFTER_MAX][TASK_NAME_MAX + 1];
	enum after_mode { AFTER_OK, AFTER_ANY, AFTER_FAIL } after_mode[TASK_AFTER_MAX];
	int n_after, line_after;
};

/* Why a bind at path (clean, absolute) is refused whoever asks: the
 * host's /proc, /sys, /dev, or a path at or above the sandbox's own
 * mounts. NULL when it is not. The spool is checked where its path is
 * known (binds_open). */
/* a is path, or a directory above it. */
bool task_path_covers(const char *a, const char *path);
const char *bind_path_refused(const char *path);
/* Inside one of the policy's task_bind_roots (any path where none). */
bool task_bind_root_ok(const struct policy *pol, const char *path);

/* Iterate over env: for (const char *e = NULL; (e = task_env_next(s, e));) */
const char *task_env_next(const struct task_spec *spec, const char *prev);
/* Whether env= may set NAME, given the policy's env_deny: names set by
 * the sandbox itself (KART_*) never. Returns NULL, or why not. */
const char *task_env_denied(const char *name, const struct policy *pol);

void task_spec_init(struct task_spec *spec);

/* Name rules. Returns 0 when the name may be a task, 1 when it is to be
 * ignored (leading '.'), -1 when it must be rejected (*why says why). */
int task_name_check(const char *name, const char **why);

/* Parse the leading comment block of a task. Pure: no policy, no I/O.
 * On error returns -1 with a message naming the line in err. */
int task_parse(const char *buf, size_t len, struct task_spec *spec, char *err, size_t errlen);

/* kart submit's directives, gathered from its options by
 * task_directive_add (each value read by its directive's row, as the
 * worker will read it) and written into the task by task_compose. */
struct task_directives {
	struct strv items; /* KEY=VALUE, encoded: on #kart: lines together */
	struct strv lines; /* "#kart: KEY=VALUE\n": rows whose values are long */
};
/* Add KEY=value (value as given, decoded; NULL for a flag such as net).
 * -1 with err (which never quotes an env= value) if the worker would
 * refuse it. */
int task_directive_add(struct task_directives *td, const char *key, const char *value, char *err,
		       size_t errlen);
/* body with td's directives at the end of its leading comment block:
 * after the file's own, so that the command line wins (as sbatch's), and
 * the file's lines keep their numbers. *first_line: the number of the
 * first line added. NULL with err if the block would end past what a
 * worker reads (TASK_HEADER_MAX). */
char *task_compose(const char *body, size_t len, const struct task_directives *td, size_t *outlen,
		   int *first_line, char *err, size_t errlen);
void task_directives_free(struct task_directives *td);

/* Every env= item of text's leading comment block with its value made
 * value(NAME, arg) (encoded): "" takes the values out of a kept task
 * file (the result is written: they were the submitter's secrets), the
 * submitter's own puts them back (kart retry). A new text (*outlen), or
 * NULL: with err "" when it has no env= item, else err the NAME whose
 * value(NAME) was NULL. */
typedef const char *task_env_value(const char *name, void *arg);
char *task_env_rewrite(const char *text, size_t len, task_env_value *value, void *arg,
		       size_t *outlen, char *err, size_t errlen);

/* How a refused network request says where the grant goes (%s: the
 * policy file). */
#define NET_GRANT_HINT "grant it with [network] allow_uids or allow_groups in %s"

/* Check a parsed spec against the policy's ceilings and grants for the
 * submitter uid. Returns -1 with a message naming the line on refusal. */
int task_check_policy(const struct task_spec *spec, const struct policy *pol, uid_t uid,
		      char *err, size_t errlen);

/* The kind that runs the task: its kind= directive, which wins over the
 * #! line; else, only without a #! line, the kind whose extension ends
 * fname (the submitted name). A kind's runner becomes the interpreter,
 * and a kind that needs network sets net. An unknown kind= returns -1
 * with err naming the line. */
int task_resolve_kind(struct task_spec *spec, const struct policy *pol, const char *fname,
		      char *err, size_t errlen);

/* What looking at one entry of new/ (or of a claim directory) found. */
enum inspect_kind {
	INSPECT_OK,      /* a regular file, closed by its writer, parsed */
	INSPECT_BUSY,    /* a writer still has it open: wait for IN_CLOSE_WRITE */
	INSPECT_GONE,    /* vanished (another worker claimed it) */
	INSPECT_IGNORE,  /* dot name */
	INSPECT_REJECT,  /* hostile or invalid: gets a `rejected` result */
};

struct inspect {
	enum inspect_kind kind;
	char error[512];
	dev_t dev;
	ino_t ino;
	uid_t uid;          /* its submitter: the record of the worker's copy, else its owner */
	bool recorded;      /* uid is from the record (spool_submitter) */
	mode_t mode;
	off_t size;
	int64_t arrived_ms; /* ctime: when it was linked or renamed in */
	nlink_t nlink;      /* set when rejected for having more than one link */
	struct task_spec spec;
	/* user.kart as it was with the header (claim_meta_parse): a pending
	 * retry's not_before is there. "" when there is none. */
	char kattr[1024]; /* KART_XATTR_MAX (spool.h) */
	int fd;             /* task_inspect_open, INSPECT_OK: the file, read-only; else -1 */
};

/* Look at dirfd/name without following links, without blocking and
 * without ever opening anything but a regular file for reading. */
void task_inspect(int dirfd, const char *name, const struct policy *pol, struct inspect *out);
/* The same, and when it is INSPECT_OK the file stays open in out->fd
 * (its claim record is read from it next): inspect_close closes it. */
void task_inspect_open(int dirfd, const char *name, const struct policy *pol, struct inspect *out);
void inspect_close(struct inspect *i);

/* Build argv for running the task file at `path` (inside the sandbox):
 * honours the #! line as the kernel would, else /bin/sh. */
int task_argv(const struct task_spec *spec, const char *path, const char *argv[4]);

#endif
