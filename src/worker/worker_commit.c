/* worker_commit.c - the commit thread: results made durable off the event
 * loop. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <jansson.h>

#include "worker_int.h"
#include "tally.h"

/* Everything of a result but the fsync of done/: the outputs fsynced,
 * the entries linked, the JSON written and fsynced. Up to
 * writes_max at a time, each step for all of them before the
 * next: the outputs' data and then the JSONs' are sent to the disk
 * together, and each fsync mostly finds its writes done, where one result
 * after the other would wait on the disk each time (docs/PERFORMANCE.md,
 * "Group commit"). */
static void commit_stage(struct commit *c, struct task *batch, int writes_max)
{
	for (struct task *first = batch, *end; first; first = end) {
		end = first;
		for (int n = 0; end && n < writes_max; n++, end = end->back.next) {
			end->commit.err = 0;
			end->commit.output = false;
			end->commit.jpend = JSON_PENDING_NONE;
			if (end->run.out.file >= 0)
				(void)sync_file_range(end->run.out.file, 0, 0, SYNC_FILE_RANGE_WRITE);
			if (end->run.err.file >= 0)
				(void)sync_file_range(end->run.err.file, 0, 0, SYNC_FILE_RANGE_WRITE);
		}
		for (struct task *t = first; t != end; t = t->back.next) {
			int files[] = {t->run.out.file, t->run.err.file};
			for (int i = 0; i < 2 && !t->commit.err; i++)
				if (files[i] >= 0 && fsync(files[i]) < 0) {
					/* Never report done on a failed fsync. */
					t->commit.err = -errno;
					t->commit.output = true;
				}
			if (!t->commit.err)
				t->commit.err = spool_finish_stage(c->sp, c->wdir, t->name, true,
								   &t->res, t->idbuf, sizeof t->idbuf,
								   &t->commit.jpend);
		}
		for (struct task *t = first; t != end; t = t->back.next)
			if (!t->commit.err)
				t->commit.err = spool_json_commit(c->sp, &t->commit.jpend);
	}
}

/* One fsync of done/ for every result staged, then the claims go. */
static void commit_finish(struct commit *c, struct task *batch)
{
	bool any = false;
	for (struct task *t = batch; t; t = t->back.next)
		any |= !t->commit.err;
	if (any && fsync(c->sp->done) < 0) {
		/* Every result of the batch is in doubt: each is retried,
		 * and a retry writes its entries anew (spool_finish). */
		int e = -errno;
		for (struct task *t = batch; t; t = t->back.next)
			if (!t->commit.err)
				t->commit.err = e;
	}
	for (struct task *t = batch; t; t = t->back.next) {
		if (t->commit.err)
			continue;
		/* Counted once durable, before the claim goes (tally.h). */
		struct tally_row row;
		tally_row_of(&t->res, &row);
		spool_tally_add(c->sp, c->wdir, t->name, t->idbuf, &row);
		t->commit.err = spool_finish_complete(
			c->sp, c->wdir, t->name, true, t->idbuf,
			(t->scr.retired ? SCRATCH_RUN_GONE : 0) |
				(t->res.outdir_gone ? SCRATCH_OUT_GONE : 0));
	}
}

/* A group commit takes what is queued, and what is queued while it
 * stages that (a result's fsync waits on the disk, and tasks end
 * meanwhile), up to this many, before its one fsync of done/. */
#define COMMIT_GROUP_MAX 64

static void *commit_main(void *arg)
{
	struct commit *c = arg;
	pthread_mutex_lock(&c->h.mu);
	for (;;) {
		while (!c->todo && (!c->h.quit || c->moving))
			pthread_cond_wait(&c->h.cv, &c->h.mu);
		if (!c->todo)
			break;
		struct task *all = NULL, **tail = &all;
		int n = 0;
		while (c->todo && n < COMMIT_GROUP_MAX) {
			/* Oldest first (the list is pushed at its head). */
			struct task *batch = NULL;
			for (struct task *t = c->todo, *nx; t; t = nx) {
				nx = t->back.next;
				if (t->outdir.mv.src >= 0) {
					/* Its artifacts first, by the mover: a
					 * big tree would hold up every result. */
					c->moving++;
					outdir_mover_add(&c->mover, &t->outdir.mv);
					continue;
				}
				t->back.next = batch;
				batch = t;
				n++;
			}
			c->todo = NULL;
			int wm = c->writes_max; /* the loop's to change (SIGHUP) */
			pthread_mutex_unlock(&c->h.mu);
			commit_stage(c, batch, wm);
			*tail = batch;
			while (*tail)
				tail = &(*tail)->back.next;
			pthread_mutex_lock(&c->h.mu);
		}
		if (!all)
			continue; /* all of it went to the mover */
		pthread_mutex_unlock(&c->h.mu);
		commit_finish(c, all);
		pthread_mutex_lock(&c->h.mu);
		for (struct task *t = all, *nx; t; t = nx) {
			nx = t->back.next;
			helper_back(&c->h, t, t->commit.err ? TE_COMMIT_FAILED : TE_COMMITTED);
		}
		uint64_t one = 1;
		(void)!write(c->h.efd, &one, sizeof one);
	}
	pthread_mutex_unlock(&c->h.mu);
	return NULL;
}

/* Publish a task's result: handed to the commit thread, and out of the
 * loop's hands (and of w->tasks) until it comes back (helper_done). */
void publish(struct worker *w, struct task *t)
{
	task_unlink(w, t);
	pthread_mutex_lock(&w->commit.h.mu);
	t->back.next = w->commit.todo;
	w->commit.todo = t;
	pthread_mutex_unlock(&w->commit.h.mu);
	/* After the unlock: the thread woken does not block at once on the
	 * lock we hold (two futex calls fewer per hand-over). */
	pthread_cond_signal(&w->commit.h.cv);
}

void commit_start(struct worker *w)
{
	struct commit *c = &w->commit;
	c->sp = w->sp;
	c->wdir = w->wdir;
	c->writes_max = w->fds.keep ? COMMIT_WRITES_MAX : 1; /* as fd_budget */
	/* JSON objects are made in both threads: jansson's hash seed is
	 * set once, here, before there are two. */
	json_object_seed(0);
	int e = outdir_mover_start(&c->mover);
	if (e < 0)
		die("cannot start the outdir thread: %s", strerror(-e));
	helper_start(w, &c->h, commit_main, c, "commit");
}

/* The mover copied a task's $KART_OUTDIR (its thread): what the result
 * says of it, then back to the commit thread.
 * Not helper_back: that hands a task to the loop, with an event of the
 * state table, through an eventfd. This task goes from one thread to
 * another (the mover to the commit thread, whose condition it signals),
 * its state unchanged (COMMITTING); through the loop it would take a
 * wake-up, an event that changes nothing and a second hand-over to the
 * commit thread. And outdir.c, below the worker, knows no struct task
 * nor struct helper: done() is how it hands back to whoever called. */
void outdir_moved(struct outdir_move *m)
{
	struct task *t = (struct task *)(void *)((char *)m - offsetof(struct task, outdir.mv));
	struct commit *c = m->arg;
	struct result *r = &t->res;
	r->artifacts_max = 0; /* measured: spool_finish_stage moves it as it is */
	r->artifacts_files = m->kept ? m->c.files : m->files;
	r->artifacts_bytes = m->kept ? m->c.bytes : m->bytes;
	r->artifacts_lost = m->kept ? m->c.lost_files : 0;
	r->artifacts_dropped = !m->kept;
	if (m->why[0] && !r->error) {
		snprintf(t->errbuf, sizeof t->errbuf, "%s", m->why);
		r->error = t->errbuf;
	}
	pthread_mutex_lock(&c->h.mu);
	t->back.next = c->todo;
	c->todo = t;
	c->moving--;
	pthread_mutex_unlock(&c->h.mu);
	pthread_cond_signal(&c->h.cv);
}

void commit_stop(struct worker *w)
{
	helper_stop(&w->commit.h);
	outdir_mover_stop(&w->commit.mover);
}
