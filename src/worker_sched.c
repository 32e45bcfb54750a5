/* worker_sched.c - tasks that wait for their time (worker_sched.h). */
#define _GNU_SOURCE
#include "worker_sched.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "spool.h"
#include "task.h"
#include "util.h"

static bool ent_less(const struct sched_ent *a, const struct sched_ent *b)
{
	return a->at_ms < b->at_ms;
}

void sched_queue_push(struct sched_queue *q, int64_t at_ms, const char *name)
{
	if (q->n == q->cap) {
		q->cap = q->cap ? q->cap * 2 : 64;
		q->v = xrealloc(q->v, q->cap * sizeof *q->v);
	}
	struct sched_ent e = {at_ms, xstrdup(name)};
	size_t i = q->n++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!ent_less(&e, &q->v[p]))
			break;
		q->v[i] = q->v[p];
		i = p;
	}
	q->v[i] = e;
}

int64_t sched_queue_next(const struct sched_queue *q)
{
	return q->n ? q->v[0].at_ms : 0;
}

char *sched_queue_pop_due(struct sched_queue *q, int64_t now_ms)
{
	if (!q->n || q->v[0].at_ms > now_ms)
		return NULL;
	char *name = q->v[0].name;
	struct sched_ent last = q->v[--q->n];
	size_t i = 0;
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		const struct sched_ent *best = &last;
		if (l < q->n && ent_less(&q->v[l], best))
			m = l, best = &q->v[l];
		if (r < q->n && ent_less(&q->v[r], best))
			m = r;
		if (m == i)
			break;
		q->v[i] = q->v[m];
		i = m;
	}
	if (q->n)
		q->v[i] = last;
	return name;
}

void sched_queue_free(struct sched_queue *q)
{
	for (size_t i = 0; i < q->n; i++)
		free(q->v[i].name);
	free(q->v);
	*q = (struct sched_queue){0};
}

int64_t sched_not_before(const struct inspect *ins)
{
	struct claim_meta m;
	claim_meta_parse(ins->kattr, &m);
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

static int uniq_open(int curfd, uid_t uid, const char *key)
{
	/* The key is any bytes: a hash of it names the file (FNV-1a, 64 bits). */
	uint64_t h = 1469598103934665603ull;
	for (const char *p = key; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	char n[64];
	snprintf(n, sizeof n, ".uniq.%u.%016llx", (unsigned)uid, (unsigned long long)h);
	/* Read-only is enough for flock; 0644 lets workers of other users
	 * on the spool take it too. */
	int fd = openat(curfd, n, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	return fd < 0 ? -errno : fd;
}

int uniq_lock(int curfd, uid_t uid, const char *key)
{
	int fd = uniq_open(curfd, uid, key);
	if (fd < 0)
		return fd;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno == EWOULDBLOCK ? -EWOULDBLOCK : -errno;
		close(fd);
		return e;
	}
	return fd;
}

bool uniq_held(int curfd, uid_t uid, const char *key)
{
	int fd = uniq_lock(curfd, uid, key);
	if (fd >= 0)
		close(fd); /* free: nobody runs one */
	return fd == -EWOULDBLOCK;
}
