/* binds.h - a task's cwd=, bind= and ro=, opened as its submitter.
 *
 * Each path is opened (O_PATH) as the submitter (uid, gid, supplementary
 * groups): by the calling thread under her filesystem credentials, or,
 * on a kernel without openat2 and faccessat2, by a vforked child that
 * has become her. Symlinks are resolved and permissions checked as that
 * user would see them, and the sandbox binds those descriptors (bwrap
 * --bind-fd), never the path again: a path swapped after the check
 * cannot be followed to something else. */
#ifndef KART_BINDS_H
#define KART_BINDS_H

#include "run.h"
#include "task.h"

/* In the spawned child, bind i of the spec waits at SANDBOX_BIND_FD + i
 * (sandbox.h); binds_open fills fds[i]. */
struct binds_opened {
	int fd[TASK_BINDS_MAX];
	int n;
};

/* Open spec's binds as cred's user (NULL: as we are). spool is the
 * spool's path (resolved): it and anything in it are refused, and so is
 * any directory above it, unless masked (the sandbox covers the spool
 * with an empty mount: binds_masks) and the bind's path is that
 * directory's own, with no link in it (the path the mask is computed
 * from; a second way to the same directory is refused). Returns 0 with
 * out filled; -EACCES with err naming the path and what is missing (the
 * task is to be rejected); another -errno with err when the opening
 * itself could not be done (refused). */
int binds_open(const struct task_spec *spec, const struct run_cred *cred, const char *spool,
	       bool masked, struct binds_opened *out, char *err, size_t errlen);
/* The spool as a sandbox that binds spec's paths at their own paths
 * sees it, when one of them is above it (a task run in a home that
 * holds the spool): the path to cover with an empty mount. NULL when
 * none is. */
const char *binds_spool_below(const struct task_spec *spec, const char *spool);
void binds_close(struct binds_opened *b);
/* Tests only: open by the vforked child even where the thread could,
 * so that the older kernels' way stays tried. */
extern bool binds_by_child;
/* The same checks as binds_open, as we are (kart submit, as the
 * submitter, before it queues): 0, or -errno with err in the words of
 * the worker's rejection. */
int binds_check(const struct task_spec *spec, const char *spool, bool masked, char *err,
		size_t errlen);

#endif
