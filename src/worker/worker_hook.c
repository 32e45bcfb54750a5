/* worker_hook.c - programs run on the host: the on_done hook, the container CLI's
 * kill and rm. */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/wait.h>
#include <sys/syscall.h>

#include "worker_int.h"

/* ---- the on_done hook ----------------------------------------------------- */

/* At most this many hooks run at once; one more waits for the oldest,
 * which bounds the worker's children at the cost of a (rare) pause. */
#define HOOKS_MAX 16

struct hook {
	struct hook *next;
	pid_t pid;
	int pidfd;
	struct src s;
	char what[200]; /* for the log */
};

static void hook_reap(struct worker *w, struct hook *h, bool block)
{
	int st;
	pid_t r;
	while ((r = waitpid(h->pid, &st, block ? 0 : WNOHANG)) < 0 && errno == EINTR)
		;
	if (r == 0)
		return; /* not yet: the pidfd fires again */
	if (r > 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		logmsg("%s: %s %d", h->what, WIFEXITED(st) ? "exited with status" : "killed by signal",
		       WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	if (h->pidfd >= 0) {
		ep_del(w, h->pidfd);
		close(h->pidfd);
		h->pidfd = -1;
	}
	/* Freed by hooks_sweep, after the epoll batch that may still name
	 * its source. */
	h->pid = 0;
	w->nhooks--;
}

void hooks_sweep(struct worker *w)
{
	for (struct hook **pp = &w->hooks; *pp;) {
		struct hook *h = *pp;
		if (h->pid) {
			pp = &h->next;
			continue;
		}
		*pp = h->next;
		free(h);
	}
}

/* Run a program on the host, outside any sandbox, with the worker's own
 * environment, stdin /dev/null and its output in the worker's log; then
 * argv2, if given, once argv has ended. Not waited for here: its pidfd
 * is in the event loop. */
void hook_spawn_host(struct worker *w, char *const argv[], char *const argv2[],
		const char *what)
{
	if (w->nhooks >= HOOKS_MAX) {
		struct hook *oldest = NULL;
		for (struct hook *h = w->hooks; h; h = h->next)
			if (h->pid)
				oldest = h;
		hook_reap(w, oldest, true);
	}
	pid_t pid = fork();
	if (pid < 0) {
		logmsg("%s: fork: %s", what, strerror(errno));
		return;
	}
	if (pid == 0) {
		/* Its output goes to the worker's log. */
		if (host_child_setup(2) < 0)
			_exit(127);
		if (argv2) {
			pid_t first = fork();
			if (first == 0) {
				execv(argv[0], argv);
				_exit(127);
			}
			while (first > 0 && waitpid(first, NULL, 0) < 0 && errno == EINTR)
				;
			argv = argv2;
		}
		execv(argv[0], argv);
		_exit(127);
	}
	struct hook *h = xcalloc(1, sizeof *h);
	snprintf(h->what, sizeof h->what, "%.190s", what);
	h->pid = pid;
	h->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	h->s = (struct src){SRC_HOOK, NULL};
	h->next = w->hooks;
	w->hooks = h;
	w->nhooks++;
	if (h->pidfd < 0) {
		h->pidfd = -1;
		hook_reap(w, h, true);
		return;
	}
	ep_add(w, h->pidfd, &h->s);
}

/* The policy's on_done program, with the result's path as its one
 * argument (argv: no shell ever sees the task's name). */
void hook_run(struct worker *w, const char *id)
{
	char path[PATH_MAX], what[PATH_MAX + 32];
	if (!w->pol->on_done[0])
		return;
	if (pathfmt(path, sizeof path, "%s/done/%s.json", w->sp->path, id) < 0)
		return;
	char *const argv[] = {w->pol->on_done, path, NULL};
	snprintf(what, sizeof what, "on_done hook %.200s", w->pol->on_done);
	hook_spawn_host(w, argv, NULL, what);
}

void hook_done(struct worker *w, struct src *s)
{
	for (struct hook *h = w->hooks; h; h = h->next)
		if (&h->s == s && h->pid) {
			hook_reap(w, h, false);
			return;
		}
}

/* The worker stops: its hooks get the grace period, then SIGKILL. */
void hooks_finish(struct worker *w)
{
	int64_t end = now_mono_ms() + (int64_t)w->pol->term_grace_s * 1000;
	for (;;) {
		hooks_sweep(w);
		struct hook *h = w->hooks;
		if (!h)
			return;
		bool late = now_mono_ms() >= end;
		if (late)
			(void)kill(h->pid, SIGKILL);
		hook_reap(w, h, late);
		if (h->pid)
			usleep(20000);
	}
}

/* What is left of the hooks when the worker stops (worker_release). */
void hooks_release(struct worker *w)
{
	for (struct hook *h = w->hooks, *nx; h; h = nx) {
		nx = h->next;
		free(h);
	}
	w->hooks = NULL;
}
