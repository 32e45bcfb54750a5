/* worker_end.c - the end of a name that never ran (finish_unrun,
 * finish_from_new) and of a task's record (task_unlink, task_free): the
 * lowest of the worker's files, so that every file above it that ends
 * something (the queue, the start, drop/, after=, the retry, the commit
 * thread) calls down to it, never up. It calls nothing of the worker but
 * the on_done hook. */
#define _GNU_SOURCE
#include "worker_int.h"
#include "backend.h"

void finish_unrun(struct worker *w, const char *name, const char *status, const char *why)
{
	char id[256];
	int r = spool_finish_unrun(w->sp, w->wdir, name, status, why, w->id, id, sizeof id);
	if (r < 0)
		logmsg("%s: cannot write its %s result: %s (left in cur/%s/ for recovery)",
		       name, status, strerror(-r), w->id);
	else
		log_task("finished", id, status, -1, why);
	if (r == 0)
		hook_run(w, id);
}

void finish_from_new(struct worker *w, const char *name, const char *status, const char *why)
{
	int r = spool_claim(w->sp, w->wdir, name);
	if (r == -ENOENT)
		return; /* another worker has it */
	if (r < 0) {
		logmsg("%s: cannot claim to finish it %s: %s", name, status, strerror(-r));
		return;
	}
	finish_unrun(w, name, status, why);
}

/* Out of w->tasks, if it is there. */
void task_unlink(struct worker *w, struct task *t)
{
	for (struct task **pp = &w->tasks; *pp; pp = &(*pp)->next)
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	t->next = NULL;
}

void task_free(struct worker *w, struct task *t)
{
	task_unlink(w, t);
	/* Backend none's directories that were not retired (a refusal, a
	 * re-queue, a run whose leaf was not seen empty): removed by name,
	 * as spool_clean_scratch does the others. One the commit moved into
	 * done/ is not there any more. */
	for (int i = 0; i < 3; i++) {
		if (t->scr.dir[i][0])
			(void)rm_rf_at(w->wdir, t->scr.dir[i]);
		if (t->scr.fd[i] >= 0)
			close(t->scr.fd[i]);
	}
	if (t->uniq_fd >= 0) /* its key is free: the result is written */
		uniq_unlock(w->sp->cur, t->uid, t->spec.unique, t->uniq_fd);
	if (t->outdir.mfd >= 0) {
		(void)outdir_release(&w->ons, t->outdir.mfd);
		close(t->outdir.mfd);
	}
	if (t->run.out.file >= 0)
		close(t->run.out.file);
	if (t->run.err.file >= 0)
		close(t->run.err.file);
	cg_files_close(&t->leaf.files);
	credfwd_close(&t->fwd);
	if (t->be->cleanup)
		t->be->cleanup(w, t);
	free(t->name);
	free(t);
}
