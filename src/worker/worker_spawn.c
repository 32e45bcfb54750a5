/* worker_spawn.c - the spawn threads: the child's set-up off the event loop. */
#define _GNU_SOURCE
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <linux/seccomp.h>

#include "worker_int.h"
#include "binds.h"

static void spawn_loop(struct spawner *sp, bool filtered, bool holds_outer)
{
	pthread_mutex_lock(&sp->h.mu);
	struct spawn_job **q = filtered ? &sp->todo_filtered : &sp->todo;
	pthread_cond_t *cv = filtered ? &sp->cv_filtered : &sp->h.cv;
	for (;;) {
		while (!*q && !sp->h.quit)
			pthread_cond_wait(cv, &sp->h.mu);
		struct spawn_job *j = *q;
		if (!j)
			break;
		*q = j->next;
		pthread_mutex_unlock(&sp->h.mu);
		struct task *t = j->t;
		if (holds_outer && j->inherit)
			j->direct.filter = sp->inner;
		/* Opened here, off the loop: a path on a slow disk stalls
		 * this thread alone. */
		struct binds_opened bo = {.n = 0};
		j->bind_rc = binds_open(&t->spec, j->use_bcred ? &j->bcred : NULL, j->spool,
					j->spool_masked, &bo, j->bind_err, sizeof j->bind_err);
		if (j->outdir && j->bind_rc >= 0) {
			int fd = outdir_mount(j->ons, j->outpath, j->obytes, j->ofiles, j->ouid, j->ogid);
			if (fd < 0) {
				/* Refused, never rejected: not the task's doing. */
				j->bind_rc = fd == -EACCES ? -EIO : fd;
				snprintf(j->bind_err, sizeof j->bind_err,
					 "cannot mount the tmpfs of $KART_OUTDIR: %s", strerror(-fd));
			} else {
				t->outdir.mfd = fd;
				j->join_ns = true;
			}
		}
		/* The inputs of after= follow the binds (sandbox.h). */
		int xfd[TASK_BINDS_MAX + 2 * TASK_AFTER_MAX];
		int nx = j->is_direct ? 0 : bo.n;
		for (int i = 0; i < nx; i++)
			xfd[i] = bo.fd[i];
		for (int i = 0; j->bind_rc == 0 && !j->is_direct && i < j->n_in_fd; i++)
			xfd[nx++] = j->in_fd[i];
		struct run_extra x = {.fds = xfd, .nfds = nx, .fd_base = SANDBOX_BIND_FD,
				      .umask = j->umask, .join_ns = j->join_ns,
				      .userns_fd = j->userns, .mntns_fd = j->mntns};
		/* Backend none binds nothing: its cwd= is entered by the
		 * descriptor that was checked, not by the path. */
		char fdcwd[64];
		const char *cwd = j->cwd;
		if (j->is_direct && t->spec.cwd >= 0 && bo.n > t->spec.cwd) {
			snprintf(fdcwd, sizeof fdcwd, "/proc/self/fd/%d", bo.fd[t->spec.cwd]);
			cwd = fdcwd;
		}
		char lockname[NAME_MAX + 8];
		if (spool_name_scratch(lockname, sizeof lockname, t->name, SCRATCH_LOCK) < 0)
			lockname[0] = '\0'; /* the child fails "run lock" */
		struct run_req rq = RUN_REQ_INIT;
		rq.argv = j->argv.v;
		rq.envp = j->envp.v;
		rq.wdir = sp->wdir;
		rq.name = lockname;
		rq.cap = j->cap;
		rq.cwd = cwd;
		rq.own_pgroup = j->pgroup;
		rq.join = j->use_join ? &j->lj.rj : NULL;
		rq.cred = j->use_cred ? &j->cred : NULL;
		rq.seccomp_fd = j->sfd;
		rq.stdin_fd = j->ifd;
		rq.direct = j->is_direct ? &j->direct : NULL;
		rq.extra = &x;
		j->rc = j->bind_rc < 0 ? j->bind_rc : run_spawn_join(&t->run, &rq);
		binds_close(&bo);
		pthread_mutex_lock(&sp->h.mu);
		helper_back(&sp->h, t, j->rc < 0 ? TE_SPAWN_FAILED : TE_SPAWNED);
		uint64_t one = 1;
		(void)!write(sp->h.efd, &one, sizeof one);
	}
	pthread_mutex_unlock(&sp->h.mu);
}

static void *spawn_main(void *arg)
{
	spawn_loop(arg, false, false);
	return NULL;
}

static void *spawn_main_filtered(void *arg)
{
	struct spawner *sp = arg;
	/* This thread alone: no_new_privs and a filter are per thread. */
	bool held = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
		    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, sp->outer) == 0;
	if (!held)
		logmsg("seccomp: a spawn thread cannot load the outer filter (%s); its tasks "
		       "load the whole program", strerror(errno));
	spawn_loop(sp, true, held);
	return NULL;
}

void spawn_job_free(struct spawn_job *j)
{
	confine_free(&j->conf);
	strv_free(&j->argv);
	strv_free(&j->envp);
	free(j->cwd);
	if (j->sfd >= 0)
		close(j->sfd);
	if (j->ifd >= 0)
		close(j->ifd);
	if (j->ufd_owned && j->ufd >= 0)
		close(j->ufd);
	for (int i = 0; i < j->n_in_fd; i++)
		close(j->in_fd[i]);
	free(j);
}

/* The threads that hold the outer half, at the first task that wants
 * them; none if they cannot start (the others serve). */
void spawner_start_filtered(struct worker *w)
{
	struct spawner *sp = &w->spawner;
	sp->outer = &w->flt.fp_outer;
	sp->inner = &w->flt.fp_inner;
	for (int i = 0; i < SPAWN_THREADS; i++) {
		int e = pthread_create(&sp->filtered_th[sp->nfiltered], NULL, spawn_main_filtered, sp);
		if (e) {
			logmsg("cannot start a spawn thread: %s", strerror(e));
			break;
		}
		thread_name(sp->filtered_th[sp->nfiltered], "spawn");
		sp->nfiltered++;
	}
}

void spawner_start(struct worker *w)
{
	struct spawner *sp = &w->spawner;
	sp->wdir = w->wdir;
	pthread_cond_init(&sp->cv_filtered, NULL);
	helper_start(w, &sp->h, spawn_main, sp, "spawn");
	for (int i = 0; i < SPAWN_THREADS - 1; i++) {
		int e = pthread_create(&sp->more[i], NULL, spawn_main, sp);
		if (e)
			die("cannot start a spawn thread: %s", strerror(e));
		thread_name(sp->more[i], "spawn");
		sp->nmore++;
	}
}

/* After the loop: every spawn has come back (they count as running). */
void spawner_stop(struct worker *w)
{
	struct spawner *sp = &w->spawner;
	if (sp->h.started) {
		pthread_mutex_lock(&sp->h.mu);
		sp->h.quit = true;
		pthread_cond_broadcast(&sp->h.cv);
		pthread_cond_broadcast(&sp->cv_filtered);
		pthread_mutex_unlock(&sp->h.mu);
	}
	for (int i = 0; i < sp->nmore; i++)
		pthread_join(sp->more[i], NULL);
	sp->nmore = 0;
	for (int i = 0; i < sp->nfiltered; i++)
		pthread_join(sp->filtered_th[i], NULL);
	sp->nfiltered = 0;
	helper_stop(&sp->h);
}
