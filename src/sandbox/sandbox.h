/* sandbox.h - policy + task spec -> the command line that runs a task.
 * Pure: builds argv and envp, starts nothing, so it is unit-testable.
 * One builder per backend that runs a local process: bwrap (the
 * default), kart-launch's steps alone (backend none, trusted batch use),
 * a container CLI (docker, podman, nerdctl); each backend (src/backend/)
 * calls its own. */
#ifndef KART_SANDBOX_H
#define KART_SANDBOX_H

#include "policy.h"
#include "task.h"
#include "util.h"

/* File descriptors the spawned child hands down (see run.c). */
#define SANDBOX_STATUS_FD 3
#define SANDBOX_LOCK_FD 4
#define SANDBOX_SECCOMP_FD 5 /* the compiled filter, when sandbox_req.seccomp */
/* The task's own binds (cwd=, bind=, ro=), opened as its submitter
 * (binds.h): bind i at SANDBOX_BIND_FD + i, for bwrap --bind-fd. */
#define SANDBOX_BIND_FD 6

/* Paths inside the sandbox. */
#define SANDBOX_TASK "/run/kart/task"
#define SANDBOX_LAUNCH "/run/kart/launch"
#define SANDBOX_WORK "/work"
#define SANDBOX_OUT "/run/kart/out"
/* The kind's forwarder, which adds its credentials (credfwd.h). */
#define SANDBOX_CRED_SOCKET "/run/kart/llm.sock"
#define SANDBOX_INPUTS "/run/kart/inputs" /* $KART_INPUTS: after='s upstreams */

/* after=: one upstream's kept output, bound read-only at
 * SANDBOX_INPUTS/ID/out/ (its done/ID.out/) and SANDBOX_INPUTS/ID/stdout
 * (its done/ID.stdout), each where it has one. bwrap binds descriptors:
 * the inputs' come after the task's own binds, from SANDBOX_BIND_FD +
 * spec->n_binds on, for each input its out then its stdout, those it
 * has. The container engine mounts the host paths; backend none has no
 * mounts: $KART_INPUTS is a directory of symbolic links (in_dir). */
struct sandbox_input {
	const char *id;
	const char *out_path, *stdout_path; /* host paths; NULL: it has none */
};

struct sandbox_req {
	const struct policy *pol;
	const struct task_spec *spec;
	const char *task_path; /* host path of the claimed task file */
	const char *work_dir;  /* host work dir (backend none) */
	const char *out_dir;   /* host dir for $KART_OUTDIR */
	const char *tmp_dir;   /* host dir for $TMPDIR (backend none); NULL: /tmp */
	char *const *host_env; /* the worker's environment, for env_pass and
				* cred_env; NULL: nothing passes */
	const char *task_id;
	int attempt;
	char *const *launch_opts; /* more options for kart-launch (rlimits,
				   * see rlimits.h); NULL-terminated, or NULL */
	bool seccomp; /* the filter waits at SANDBOX_SECCOMP_FD: bwrap
		       * --seccomp loads it, or kart-launch with backend none;
		       * backend container: its JSON profile is there */
	/* Backend container: the container's unique name and the label
	 * that names its worker (for recovery), and who runs inside. */
	const char *container_name;
	const char *container_label;
	uid_t run_uid;
	gid_t run_gid;
	/* Backend container, out: the CLI's standard input (malloc'd; the
	 * policy's variables as NAME='value' lines), or left NULL when
	 * there are none. NULL here: a policy with such variables fails. */
	char **input;
	/* The submitter's home directory ("" or NULL: unknown): HOME where
	 * one of the task's binds holds it, else the private work dir. */
	const char *home;
	/* The host path of the task's socket to its kind's credential
	 * forwarder (credfwd_open), or NULL: bound at SANDBOX_CRED_SOCKET
	 * (backend none: this path), named by $KART_LLM_SOCKET. A kind's
	 * credentials are never in envp. */
	const char *cred_socket;
	/* after=: the upstreams' outputs (n_inputs == spec->n_after). */
	const struct sandbox_input *inputs;
	int n_inputs;
	const char *in_dir; /* backend none: the host directory for $KART_INPUTS */
	/* bwrap: > 0, the task file and $KART_OUTDIR's directory are bound
	 * from these descriptors (a launcher on a node opened and checked
	 * them; their paths are a stage others can rename in); 0: by path. */
	int task_fd, out_fd;
	/* The spool, where a bind of the task holds it (binds_spool_below):
	 * covered by an empty read-only mount; NULL: none to cover. */
	const char *mask;
};

/* The policy's variables (NAME=value, a kind's endpoint and model left
 * out) as lines a POSIX shell reads with `.`: NAME='value'. */
char *container_env_input(const struct strv *named);

/* The task's HOME: the submitter's own where a bind of the task holds
 * it, else NULL (the private work directory, discarded at the end). */
const char *sandbox_home(const struct sandbox_req *req);

/* The /tmp of a container when the policy sets no tmpfs_size. */
#define SANDBOX_CONTAINER_TMP (256ull << 20)

/* Each fills argv (argv[0] is the program to execve) and envp; -1 with
 * err when the task cannot be given what it asks. */
/* bwrap, then kart-launch inside it, at the SANDBOX_* paths. */
int sandbox_bwrap(const struct sandbox_req *req, struct strv *argv, struct strv *envp, char *err,
		  size_t errlen);
/* kart-launch's command line alone, with the host's paths (backend none:
 * the worker's child runs its steps itself, confine.h). */
int sandbox_launch(const struct sandbox_req *req, struct strv *argv, struct strv *envp, char *err,
		   size_t errlen);
/* The container CLI's `run` (container_name, container_label, input). */
int sandbox_container(const struct sandbox_req *req, struct strv *argv, struct strv *envp,
		      char *err, size_t errlen);

#endif
