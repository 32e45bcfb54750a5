/* backend_local.h - what the backends that run a task as a child of the
 * worker share (bwrap, none, container): the task's limits in its cgroup
 * leaf or rlimits, its directories in the claim directory, the seccomp
 * filter in the form the sandbox takes, the command line, the spawn job
 * handed to the spawn threads; then the child watched by its pidfd, its
 * output pumped, signalled, frozen, reaped and measured. Each backend's
 * prepare is these steps in its own order, with its own part between. */
#ifndef KART_BACKEND_LOCAL_H
#define KART_BACKEND_LOCAL_H

#include "backend.h"
#include "sandbox.h"
#include "worker_int.h"

/* What prepare's steps hand on to each other. */
struct local_start {
	struct backend_start *b;
	bool bounded;   /* $KART_OUTDIR is a tmpfs of its own while it runs (outdir.h) */
	bool want_scmp; /* the task gets the seccomp filter */
	char workdir[PATH_MAX], taskpath[PATH_MAX], outhost[PATH_MAX];
	char tmpdir[PATH_MAX]; /* its TMPDIR, a directory of ours; "": the sandbox's /tmp */
	char outname[512];     /* $KART_OUTDIR's name in the claim directory */
	bool out_owned;        /* and it is the submitter's already (a spare of theirs) */
	const char *container_name, *container_label; /* backend container's */
	int sfd;        /* the filter handed to the sandbox, or -1 */
	struct strv argv, envp;
	int ifd;        /* the CLI's standard input (the policy's variables), or -1 */
	/* The spool, covered by an empty mount where a bind holds it (bwrap
	 * alone: the others cannot, and refuse such a bind); NULL: none. */
	const char *mask;
	char err[256];
};
#define LOCAL_START_INIT(bs) {.b = (bs), .sfd = -1, .ifd = -1}
void local_start_close(struct local_start *s);

/* -1, with b->why: the task is refused; error outlives prepare (a
 * literal, or the task's errbuf). */
int local_refuse(struct backend_start *b, const char *refusal, const char *error);
/* The same, with s->err, copied into the task's errbuf. */
int local_refuse_err(struct task *t, struct local_start *s, const char *refusal);

/* The task's leaf, or else the rlimit fallback, as [limits] cgroup says:
 * a limit is never dropped (where neither can hold it, refused). */
int local_limits(struct worker *w, struct task *t, struct backend_start *b);
/* Its $KART_OUTDIR in the claim directory, and the paths of its task
 * file and of that directory: here, a spare used under its own name
 * (scratch_dir); else .NAME.out, and workdir is .NAME.work's path. */
int local_outdir(struct worker *w, struct task *t, struct local_start *s, bool here);
/* Its work directory .NAME.work, made, the submitter's. */
int local_workdir(struct worker *w, struct task *t, struct local_start *s);
/* Its work and tmp directories, spares used under their own names. */
int local_workdirs_here(struct worker *w, struct task *t, struct local_start *s);
/* $KART_OUTDIR the submitter's to write, unless it is bounded (then the
 * directory under its tmpfs stays the worker's). */
int local_outdir_give(struct worker *w, struct task *t, struct local_start *s);

/* The seccomp filter, in the form the sandbox takes it; one that cannot
 * be handed over refuses the task, which never runs without it. */
enum local_filter {
	LOCAL_FILTER_FD,     /* the program, at SANDBOX_SECCOMP_FD (bwrap --seccomp) */
	LOCAL_FILTER_MEMORY, /* loaded by the child from our memory (no descriptor) */
	LOCAL_FILTER_JSON,   /* a container runtime's profile, at SANDBOX_SECCOMP_FD */
	LOCAL_FILTER_OFF,    /* none (the policy says the runtime takes none) */
};
int local_filter(struct worker *w, struct task *t, struct local_start *s, enum local_filter how);

/* The command line and environment, from the backend's builder
 * (sandbox.h), with what it binds: the credential forwarder, after='s
 * inputs, the policy's variables in a sealed memfd. */
typedef int local_builder(const struct sandbox_req *req, struct strv *argv, struct strv *envp,
			  char *err, size_t errlen);
int local_sandbox(struct worker *w, struct task *t, struct local_start *s, local_builder *build);

/* The spawn job, everything the child's set-up needs (the spawn thread
 * touches nothing of the loop's); the backend sets its own part after:
 * cwd, pgroup, use_cred, the direct run. */
struct spawn_job *local_job(struct worker *w, struct task *t, struct local_start *s);

/* The operations the three share (struct backend's). */
void local_spawn(struct worker *w, struct task *t);
void local_started(struct worker *w, struct task *t);
void local_unspawned(struct worker *w, struct task *t, struct backend_refusal *why);
bool local_ready(struct worker *w, struct src *s, uint32_t events);
/* SIGTERM to its process group, or to what its leaf lists (true). */
bool local_term(struct worker *w, struct task *t);
void local_kill(struct worker *w, struct task *t);
int local_pause(struct worker *w, struct task *t, bool on);
void local_reap(struct worker *w, struct task *t);
void local_usage(const struct task *t, struct backend_usage *u);

#endif
