/* worker_ev.c - what the event loop lends the worker's other files:
 * registering a descriptor with its epoll, and the helper threads (the
 * commit thread, the spawn threads) with their one way back to the loop.
 * It calls nothing above it, so a file that needs the loop's plumbing
 * does not reach back up into worker.c, which calls every one of them.
 * The hand-back's other half, helper_done, is the loop's: it runs the
 * tasks' events (worker.c). */
#define _GNU_SOURCE
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "worker_int.h"

/* Counted up at every change in /etc the worker's watch sees; -1: there
 * is no watch, and /etc/passwd and /etc/group are looked at each time.
 * What was read from /etc (accounts, held paths) notes the count it was
 * read at, and is good while it is the same. */
long etc_gen = -1;

void ep_add(struct worker *w, int fd, struct src *s)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};
	if (epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		die("epoll_ctl: %s", strerror(errno));
}

void ep_del(struct worker *w, int fd)
{
	if (fd >= 0)
		(void)epoll_ctl(w->ep, EPOLL_CTL_DEL, fd, NULL);
}

/* "kart-commit", "kart-spawn": what ps -L, top -H and perf show, and how
 * the tests find the commit thread to slow or kill it. */
void thread_name(pthread_t th, const char *what)
{
	char name[16];
	snprintf(name, sizeof name, "kart-%s", what);
	(void)pthread_setname_np(th, name);
}

/* Start a helper thread, which wakes the loop through h->efd (src kind).
 * Every signal stays blocked in it: it inherits the mask the signalfd
 * needs. */
void helper_start(struct worker *w, struct helper *h, void *(*fn)(void *), void *arg,
		  const char *what)
{
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cv, NULL);
	if ((h->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		die("eventfd: %s", strerror(errno));
	int e = pthread_create(&h->th, NULL, fn, arg);
	if (e)
		die("cannot start the %s thread: %s", what, strerror(e));
	thread_name(h->th, what);
	h->started = true;
	h->src = (struct src){SRC_HELPER, NULL};
	ep_add(w, h->efd, &h->src);
}

/* In the thread, under h->mu: t is the loop's again, with ev for it. */
void helper_back(struct helper *h, struct task *t, enum tevent ev)
{
	t->back.ev = ev;
	t->back.next = h->done;
	h->done = t;
}

/* Ask it to quit once its queue is empty, and wait for it. */
void helper_stop(struct helper *h)
{
	if (!h->started)
		return;
	pthread_mutex_lock(&h->mu);
	h->quit = true;
	pthread_cond_signal(&h->cv);
	pthread_mutex_unlock(&h->mu);
	pthread_join(h->th, NULL);
	h->started = false;
	close(h->efd);
}
