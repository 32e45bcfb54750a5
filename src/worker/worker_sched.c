/* worker_sched.c - issue 20's scheduling in the worker: tasks that wait
 * for their time, unique keys (worker_sched.h), and the hooks the rest
 * of the worker calls (declared in worker_int.h): sched_consider,
 * sched_claimed, sched_claim_done, sched_retry, sched_next_mono. The
 * ring that looks at the names whose time came is the queue's
 * (sched_ring, worker_queue.c): it calls consider, and this file calls
 * nothing above it. */
#define _GNU_SOURCE
#include "worker_sched.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "prioq.h"
#include "spool.h"
#include "task.h"
#include "util.h"
#include "worker_int.h"

/* The queue is a prioq (prioq.c) whose candidates are doorbells: a
 * name, and its time as the key (arrived_ms); seq keeps the order in
 * which names were pushed among those due at the same ms. */
void sched_queue_push(struct sched_queue *q, int64_t at_ms, const char *name)
{
	prioq_push(&q->h, (struct cand){.name = xstrdup(name), .arrived_ms = at_ms, .seq = q->seq++});
}

int64_t sched_queue_next(const struct sched_queue *q)
{
	return q->h.n ? q->h.v[0].arrived_ms : 0;
}

char *sched_queue_pop_due(struct sched_queue *q, int64_t now_ms)
{
	if (!q->h.n || q->h.v[0].arrived_ms > now_ms)
		return NULL;
	return prioq_pop(&q->h).name;
}

void sched_queue_forget(struct sched_queue *q, const char *name)
{
	size_t k = 0, n = q->h.n;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(q->h.v[i].name, name) == 0)
			free(q->h.v[i].name);
		else
			q->h.v[k++] = q->h.v[i];
	}
	if (k == n)
		return;
	/* The heap again, in place: pushing v[i] touches v[0..i] alone. */
	q->h.n = 0;
	for (size_t i = 0; i < k; i++) {
		struct cand c = q->h.v[i];
		prioq_push(&q->h, c);
	}
}

void sched_queue_free(struct sched_queue *q)
{
	for (size_t i = 0; i < q->h.n; i++)
		free(q->h.v[i].name);
	free(q->h.v);
	*q = (struct sched_queue){0};
}

int64_t sched_not_before(const struct inspect *ins)
{
	struct claim_meta m;
	claim_meta_parse(ins->kattr, "", &m); /* its not_before alone */
	return m.not_before_ms > ins->spec.not_before_ms ? m.not_before_ms : ins->spec.not_before_ms;
}

int64_t sched_mono_for(int64_t at_real_ms)
{
	int64_t wait = at_real_ms - now_realtime_ms();
	return now_mono_ms() + (wait > 0 ? wait : 0);
}

void uniq_add(struct uniq_index *u, uid_t uid, const char *key, const char *name, int64_t arrived_ms)
{
	uniq_forget(u, name);
	u->v = xrealloc(u->v, (u->n + 1) * sizeof *u->v);
	u->v[u->n++] = (struct uniq_ent){uid, xstrdup(key), xstrdup(name), arrived_ms};
}

static void uniq_drop(struct uniq_index *u, size_t i)
{
	free(u->v[i].key);
	free(u->v[i].name);
	u->v[i] = u->v[--u->n];
}

void uniq_forget(struct uniq_index *u, const char *name)
{
	for (size_t i = 0; i < u->n; i++)
		if (strcmp(u->v[i].name, name) == 0) {
			uniq_drop(u, i);
			return;
		}
}

void uniq_free(struct uniq_index *u)
{
	while (u->n)
		uniq_drop(u, 0);
	free(u->v);
	u->v = NULL;
}

const struct uniq_ent *uniq_other(struct uniq_index *u, int newfd, uid_t uid, const char *key,
				  const char *name)
{
	/* Few: the queued tasks that have a key. */
	for (size_t i = 0; i < u->n;) {
		struct uniq_ent *e = &u->v[i];
		struct stat st;
		if (e->uid != uid || strcmp(e->key, key) != 0 || strcmp(e->name, name) == 0) {
			i++;
			continue;
		}
		if (fstatat(newfd, e->name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			uniq_drop(u, i); /* claimed, by us or a peer: the lock says the rest */
			continue;
		}
		return e;
	}
	return NULL;
}

bool uniq_first(int64_t a_ms, const char *a, int64_t b_ms, const char *b)
{
	return a_ms != b_ms ? a_ms < b_ms : strcmp(a, b) < 0;
}

/* cur/.uniq/, made 0700 if missing, and only if it is ours and
 * nobody else's to open. */
static int uniq_dir(int curfd)
{
	int d = openat(curfd, SPOOL_UNIQ_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d < 0 && errno == ENOENT) {
		if (mkdirat(curfd, SPOOL_UNIQ_DIR, 0700) < 0 && errno != EEXIST)
			return -errno;
		d = openat(curfd, SPOOL_UNIQ_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (d < 0)
		return -errno;
	struct stat st;
	if (fstat(d, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077)) {
		close(d);
		return -EPERM;
	}
	return d;
}

/* The key is any bytes: a hash of it names the file (FNV-1a, 64 bits). */
static void uniq_name(char n[64], uid_t uid, const char *key)
{
	uint64_t h = 1469598103934665603ull;
	for (const char *p = key; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	(void)spool_name_uniq(n, 64, (unsigned)uid, h); /* 64 bytes: always fits */
}

/* Is fd still the file named n in d (not removed by its last holder)? */
static bool uniq_current(int d, const char *n, int fd)
{
	struct stat a, b;
	return fstat(fd, &a) == 0 && fstatat(d, n, &b, AT_SYMLINK_NOFOLLOW) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

/* The lock, locked: with create, made if missing; without, -ENOENT
 * when there is none (nobody holds it). */
static int uniq_take(int curfd, uid_t uid, const char *key, bool create)
{
	char n[64];
	uniq_name(n, uid, key);
	_cleanup_close_ int d = uniq_dir(curfd);
	if (d < 0)
		return d;
	for (int tries = 0; tries < 8; tries++) {
		int fd = openat(d, n, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
		if (fd < 0)
			return -errno;
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			int e = errno == EWOULDBLOCK ? -EWOULDBLOCK : -errno;
			close(fd);
			return e;
		}
		if (uniq_current(d, n, fd))
			return fd;
		close(fd); /* removed by its holder as we took it: again */
	}
	return -EAGAIN;
}

int uniq_lock(int curfd, uid_t uid, const char *key)
{
	return uniq_take(curfd, uid, key, true);
}

void uniq_unlock(int curfd, uid_t uid, const char *key, int fd)
{
	char n[64];
	uniq_name(n, uid, key);
	_cleanup_close_ int d = uniq_dir(curfd);
	if (d >= 0 && uniq_current(d, n, fd))
		(void)unlinkat(d, n, 0);
	close(fd);
}

bool uniq_held(int curfd, uid_t uid, const char *key)
{
	int fd = uniq_take(curfd, uid, key, false);
	if (fd >= 0)
		uniq_unlock(curfd, uid, key, fd); /* free, and a file left by a dead holder goes */
	return fd == -EWOULDBLOCK;
}

/* ---- the worker's hooks (worker_int.h) ------------------------------------ */

/* A duplicate of a unique= task: finished `cancelled`, never run. Not
 * finish_from_new: a name we run already is deferred here, as dispatch
 * does, where a rejection would only be logged. */
static void cancel_from_new(struct worker *w, const char *name, const char *why)
{
	int r = spool_claim(w->sp, w->wdir, name);
	if (r == -ENOENT)
		return; /* another worker has it */
	if (r == -EEXIST) {
		/* We run a task of that name: looked at again once it ends
		 * (undefer), as dispatch does. */
		strset_put(&w->known, name, K_DEFERRED);
		w->deferred = xrealloc(w->deferred, (w->ndeferred + 1) * sizeof(char *));
		w->deferred[w->ndeferred++] = xstrdup(name);
		return;
	}
	if (r < 0) {
		logmsg("%s: cannot claim to cancel it: %s", name, strerror(-r));
		return;
	}
	finish_unrun(w, name, "cancelled", why);
}

/* unique=KEY: true when name is a duplicate, now finished `cancelled`.
 * An earlier-seen one that arrived later is the duplicate instead, and
 * finished so here. */
static bool uniq_duplicate(struct worker *w, const char *name, const struct inspect *ins)
{
	const char *key = ins->spec.unique;
	char why[2 * TASK_NAME_MAX + 96];
	const struct uniq_ent *e;
	if (uniq_held(w->sp->cur, ins->uid, key)) {
		snprintf(why, sizeof why, "unique=%s: a task of its submitter with this key is running", key);
		cancel_from_new(w, name, why);
		return true;
	}
	while ((e = uniq_other(&w->uniq, w->sp->new, ins->uid, key, name))) {
		if (uniq_first(e->arrived_ms, e->name, ins->arrived_ms, name)) {
			snprintf(why, sizeof why, "unique=%s: %s, of the same submitter and key, is queued",
				 key, e->name);
			cancel_from_new(w, name, why);
			return true;
		}
		_cleanup_free_ char *other = xstrdup(e->name);
		uniq_forget(&w->uniq, other);
		snprintf(why, sizeof why, "unique=%s: %s, of the same submitter and key, is queued", key,
			 name);
		cancel_from_new(w, other, why);
	}
	uniq_add(&w->uniq, ins->uid, key, name, ins->arrived_ms);
	return false;
}

bool sched_consider(struct worker *w, const char *name, const struct inspect *ins)
{
	if (ins->spec.unique[0] && uniq_duplicate(w, name, ins))
		return true;
	/* Not before its time: the timer rings for it, nothing polls. */
	int64_t nb = sched_not_before(ins);
	if (nb <= now_realtime_ms())
		return false;
	strset_put(&w->known, name, K_SCHEDULED);
	sched_queue_push(&w->sched, nb, name);
	return true;
}

bool sched_claimed(struct worker *w, const char *name, const struct inspect *ins, int *ufd)
{
	*ufd = -1;
	if (sched_not_before(ins) > now_realtime_ms()) {
		/* Claimed from an older look: re-queued since to wait (a
		 * retry's delay). Back into new/, unchanged. */
		struct claim_meta m;
		claim_meta_parse(ins->kattr, name, &m);
		int r = spool_requeue(w->sp, w->wdir, name, &m);
		if (r < 0)
			logmsg("%s: cannot give back to new/: %s", name, strerror(-r));
		return true;
	}
	if (!ins->spec.unique[0])
		return false;
	/* unique=: the lock of its key, held until its result is written;
	 * held by another worker's run, this one is the duplicate. */
	*ufd = uniq_lock(w->sp->cur, ins->uid, ins->spec.unique);
	if (*ufd == -EWOULDBLOCK) {
		char why[TASK_NAME_MAX + 96];
		snprintf(why, sizeof why, "unique=%s: a task of its submitter with this key is running",
			 ins->spec.unique);
		finish_unrun(w, name, "cancelled", why);
		return true;
	}
	if (*ufd < 0) {
		logmsg("%s: unique=%s: cannot take its key's lock: %s; it runs all the same", name,
		       ins->spec.unique, strerror(-*ufd));
		*ufd = -1;
	}
	return false;
}

void sched_claim_done(struct worker *w, const char *name)
{
	uniq_forget(&w->uniq, name); /* its key's lock speaks for it now */
}

bool sched_retry(struct worker *w, struct task *t)
{
	struct result *r = &t->res;
	int retries = t->spec.retries >= 0 ? t->spec.retries : w->pol->retries_default;
	if (t->end == END_CANCEL ||
	    !sched_retry_due(&t->spec.retry_on, r->status, r->exit_code, t->meta.attempt, retries))
		return false;
	if (t->meta.submitted_ms == 0)
		t->meta.submitted_ms = t->submitted_ms;
	struct attempt_rec a = {t->meta.attempt, r->status, r->exit_code, r->signal, r->started_ms,
				r->finished_ms};
	int64_t delay = sched_retry_delay_ms(t->spec.retry_delay_ms, t->meta.attempt + 1);
	int e = spool_retry(w->sp, w->wdir, t->name, &t->meta, &a, now_realtime_ms() + delay,
			    spool_reader(w->sp, t->name, t->uid));
	if (e < 0) {
		logmsg("%s: attempt %d ended %s, but cannot be kept for a retry: %s; its result is final",
		       t->name, a.attempt, a.status, strerror(-e));
		return false;
	}
	logmsg("%s: attempt %d ended %s; retry_on: attempt %d in %lld ms", t->name, a.attempt,
	       a.status, a.attempt + 1, (long long)delay);
	if (t->outdir.mv.src >= 0) {
		/* An attempt's kept $KART_OUTDIR is not kept across a
		 * retry (kart-task(5)): the mover never had it. */
		close(t->outdir.mv.src);
		t->outdir.mv.src = -1;
	}
	return true;
}

int64_t sched_next_mono(const struct worker *w)
{
	return w->sched.h.n ? sched_mono_for(sched_queue_next(&w->sched)) : 0;
}
