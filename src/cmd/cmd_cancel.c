/* kart cancel */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <jansson.h>

#include "cmd.h"
#include "opts.h"
#include "control.h"
#include "policy.h"
#include "query.h"
#include "selection.h"
#include "task.h"
#include "termsafe.h"
#include "util.h"

static const struct opts_help help = {
	"usage: kart [-s SPOOL] cancel [--state STATE] [--label L] [--older-than DUR]\n"
	"                              [--newer-than DUR] [ID...]\n"
	"\n"
	"A queued (or held) task is taken out of new/ and never runs; a running task is\n"
	"killed with its whole process tree. Either way its result says\n"
	"`cancelled`. An ID may be a glob pattern ('gzip*'); a pattern, or the\n"
	"filters alone, choose among your own tasks that have not finished, as\n"
	"kart status would list them.\n",
	"exit status: 0 if every task was cancelled; 1 if one had already\n"
	"finished or could not be found; 2 usage error\n",
};

/* A running task gets SIGTERM and up to its kill grace before SIGKILL:
 * wait that long more (the policy's ceiling, which bounds a task's own). */
static int64_t grace_ms(struct spool *sp)
{
	struct policy pol;
	char err[512];
	if (policy_load(&pol, sp->path, err, sizeof err) < 0)
		return 300000;
	return (pol.kill_grace_max_s > pol.kill_grace_s ? pol.kill_grace_max_s : pol.kill_grace_s) * 1000;
}

/* A task that keeps going back to new/ as we cancel it (its workers
 * stopping one after another) is chased this many times, then given up:
 * each round waits out a run, and a command must end. */
enum { REQUEUES_MAX = 5 };

/* Ask the worker running the claim cur/worker/name to kill it, and wait
 * until it is out of the claim directory. */
static int cancel_running(struct spool *sp, const char *worker, const char *name)
{
	char p[PATH_MAX], req[512];
	_cleanup_close_ int ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (ino < 0 || pathfmt(p, sizeof p, "%s/cur/%s", sp->path, worker) < 0)
		return -errno;
	if (inotify_add_watch(ino, p, IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | IN_ONLYDIR) < 0)
		return -errno;
	if (spool_name_claim_scratch(req, sizeof req, worker, name, SCRATCH_CANCEL) < 0)
		return -ENAMETOOLONG;
	int fd = openat(sp->cur, req, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	close(fd);
	int64_t deadline = now_mono_ms() + 30000 + grace_ms(sp);
	char claim[512];
	if (pathfmt(claim, sizeof claim, "%s/%s", worker, name) < 0)
		return -ENAMETOOLONG;
	for (;;) {
		struct stat st;
		int64_t rest = deadline - now_mono_ms();
		bool gone = fstatat(sp->cur, claim, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT;
		if (gone || rest <= 0) {
			/* Whatever happened, the request must not outlive this task
			 * and cancel a later one of the same name. */
			(void)unlinkat(sp->cur, req, 0);
			return gone ? 0 : -ETIMEDOUT;
		}
		struct pollfd pfd = {.fd = ino, .events = POLLIN};
		if (poll(&pfd, 1, (int)rest) > 0) {
			char buf[4096];
			while (read(ino, buf, sizeof buf) > 0)
				;
		}
	}
}

/* On a shared spool, as a user: a worker is asked through our drop
 * directory (control_request), then we wait for the result. */
static int cancel_via_drop(struct spool *sp, const char *id)
{
	char p[4096];
	_cleanup_close_ int ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (ino < 0 || pathfmt(p, sizeof p, "%s/done", sp->path) < 0 ||
	    inotify_add_watch(ino, p, IN_MOVED_TO | IN_CREATE | IN_ONLYDIR) < 0)
		return -errno;
	int r = control_request(sp, "cancel", id, "", 0, 10000);
	if (r < 0)
		return r;
	int64_t end = now_mono_ms() + 30000 + grace_ms(sp);
	struct qinfo q;
	while (query_done(sp, id, &q) < 0) {
		int64_t rest = end - now_mono_ms();
		if (rest <= 0)
			return -ETIMEDOUT;
		struct pollfd pfd = {.fd = ino, .events = POLLIN};
		if (poll(&pfd, 1, (int)(rest > 500 ? 500 : rest)) > 0) {
			char buf[4096];
			while (read(ino, buf, sizeof buf) > 0)
				;
		}
	}
	return 0;
}

/* What a cancel of a running task did, from its result: "SIGTERM,
 * exited 1 within the grace", "SIGKILL after the 5s grace". */
static void cancel_how(struct spool *sp, const char *id, const struct qinfo *d, char *buf, size_t len)
{
	json_t *o = NULL;
	long long grace = -1;
	if (query_load(sp, id, &o) == 0) {
		json_t *g = json_object_get(json_object_get(o, "limits"), "kill_grace_s");
		grace = json_is_integer(g) ? json_integer_value(g) : -1;
	}
	json_decref(o);
	if (d->exit_code >= 0)
		snprintf(buf, len, "SIGTERM, exited %d within the grace", d->exit_code);
	else if (d->signal == SIGKILL && grace >= 0)
		snprintf(buf, len, "SIGKILL after the %llds grace", grace);
	else if (d->signal > 0)
		snprintf(buf, len, "%s ended it", signal_name(d->signal));
	else
		snprintf(buf, len, "it never ran");
}

/* Only a task's submitter, or root, may cancel it: false (said on
 * stderr) when dirfd/path is a task of someone else's. */
static bool may_cancel(struct spool *sp, int dirfd, const char *path, const char *id)
{
	struct stat st;
	if (fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0 || control_may(sp, id, &st) == 0)
		return true; /* gone: the claim that follows finds out */
	_cleanup_free_ char *sid = term_safe(id);
	fprintf(stderr, "kart cancel: %s: not your task (only its submitter or root may cancel it)\n", sid);
	return false;
}

/* The claim directory cancel works from, made at the first queued task
 * it takes (as a worker would take it). */
struct canceller {
	char me[128];
	int wdir, lockfd;
};

/* Cancel one task: 0, or 1 (said). */
static int cancel_one(struct spool *sp, const char *id, struct canceller *cc)
{
	int rc = 0;
	const char *me = cc->me;
	_cleanup_free_ char *sid = term_safe(id);
	int requeues = 0;
	if (control_via_drop(sp)) {
		struct qinfo q;
		int r = query_id(sp, id, &q);
		if (r == 0 && q.state == Q_UNKNOWN) {
			fprintf(stderr, "kart cancel: %s: no such task\n", sid);
			return 1;
		}
		if (r == 0 && q.state == Q_DONE) {
			printf("%s: had already finished: %s\n", sid, q.status);
			return 1;
		}
		r = cancel_via_drop(sp, id);
		if (r < 0) {
			fprintf(stderr, "kart cancel: %s: %s\n", sid,
				r == -EPERM	 ? "not your task (only its submitter or root may cancel it)"
				: r == -ETIMEDOUT ? "no worker took the request, or no result came"
						  : strerror(-r));
			rc = 1;
		} else if (query_done(sp, id, &q) == 0 && strcmp(q.status, "cancelled") == 0) {
			char how[128];
			cancel_how(sp, id, &q, how, sizeof how);
			printf("%s: cancelled: %s\n", sid, how);
		} else {
			printf("%s: had already finished: %s\n", sid, q.status);
			rc = 1;
		}
		return rc;
	}
	for (int attempt = 0; attempt < 3; attempt++) {
		if (cc->wdir < 0) {
			int r = spool_worker_open(sp, me, &cc->wdir, &cc->lockfd);
			if (r < 0) {
				fprintf(stderr, "kart cancel: cannot create cur/%s: %s\n", me, strerror(-r));
				return 1;
			}
		}
		/* Queued (or held): take it as a worker would, and finish
		 * it unrun; by its entry's name, which for a reserved id
		 * re-queued is ID.2 (query_entry). */
		struct qinfo e;
		bool known = query_id(sp, id, &e) == 0, done = known && e.state == Q_DONE;
		const char *at = known ? query_entry(id, &e) : id;
		char held[TASK_NAME_MAX + 24];
		/* A finished id's name may be another task's by now (a file
		 * copied in, to finish as ID.2): never claimed as this one. */
		if (!done && (!may_cancel(sp, sp->new, at, id) ||
			      (spool_held_name(at, held, sizeof held) == 0 &&
			       !may_cancel(sp, sp->new, held, id)))) {
			rc = 1;
			break;
		}
		int r = done ? -ENOENT : spool_claim(sp, cc->wdir, at);
		if (r == -ENOENT && !done)
			r = spool_claim_held(sp, cc->wdir, at);
		if (r == 0) {
			char newid[256];
			r = spool_finish_unrun(sp, cc->wdir, at, "cancelled",
					       "cancelled by kart cancel before it ran", me, newid,
					       sizeof newid);
			if (r < 0) {
				fprintf(stderr, "kart cancel: %s: cannot write its result: %s\n", sid,
					strerror(-r));
				rc = 1;
			} else
				{
				_cleanup_free_ char *snew = term_safe(newid);
				printf("%s: cancelled (it never ran)\n", snew);
			}
			break;
		}
		struct qinfo q;
		if (query_id(sp, id, &q) < 0)
			q.state = Q_UNKNOWN;
		if (q.state == Q_RUNNING) {
			char claim[512];
			if (pathfmt(claim, sizeof claim, "%s/%s", q.worker, query_entry(id, &q)) == 0 &&
			    !may_cancel(sp, sp->cur, claim, id)) {
				rc = 1;
				break;
			}
			r = cancel_running(sp, q.worker, query_entry(id, &q));
			struct qinfo d;
			if (r < 0) {
				fprintf(stderr, "kart cancel: %s: %s\n", sid, strerror(-r));
				rc = 1;
				break;
			}
			if (query_done(sp, id, &d) < 0) {
				/* It left the claim without a result: re-queued
				 * (its worker stopped). Take it from new/. */
				if (++requeues > REQUEUES_MAX) {
					fprintf(stderr,
						"kart cancel: %s: re-queued %d times while being cancelled "
						"(its workers keep stopping); giving up\n",
						sid, REQUEUES_MAX);
					rc = 1;
					break;
				}
				attempt = -1;
				continue;
			}
			if (strcmp(d.status, "cancelled") != 0) {
				printf("%s: had already finished: %s\n", sid, d.status);
				rc = 1;
			} else {
				char how[128];
				cancel_how(sp, id, &d, how, sizeof how);
				printf("%s: cancelled: %s\n", sid, how);
			}
			break;
		}
		if (q.state == Q_DONE) {
			printf("%s: had already finished: %s\n", sid, q.status);
			rc = 1;
			break;
		}
		if (q.state == Q_UNKNOWN && attempt == 2) {
			fprintf(stderr, "kart cancel: %s: no such task\n", sid);
			rc = 1;
		}
		/* Q_QUEUED again, or in motion: look again. */
	}
	return rc;
}

int cmd_cancel(struct ctx *c, int argc, char **argv)
{
	struct selection sel;
	selection_init(&sel);
	sel.own = true;
	const struct opt opts[] = {SELECTION_OPTS(&sel), OPT_END()};
	struct opts_rest rest;
	opts_parse("cancel", argc, argv, opts, &help, 0, &rest);
	if (rest.argc == 0 && !selection_filters(&sel))
		return usage_error("cancel", "no task ID given");
	struct spool *sp = &c->sp;
	struct canceller cc = {.wdir = -1, .lockfd = -1};
	snprintf(cc.me, sizeof cc.me, "cancel.%d", getpid());
	struct sel_list l;
	int rc = selection_find(sp, &sel, "cancel", rest.argc, rest.argv, &l);
	size_t tried = 0;
	for (size_t k = 0; k < l.n; k++) {
		/* A pattern or a filter means the tasks yet to finish: one named
		 * by its id is told of all the same. */
		bool named = false;
		for (int i = 0; i < rest.argc && !named; i++) {
			_cleanup_free_ char *own = spool_own_id(sp, rest.argv[i]);
			named = !strpbrk(rest.argv[i], "*?[") && strcmp(own, l.v[k].id) == 0;
		}
		if (l.v[k].q.state == Q_DONE && !named)
			continue;
		tried++;
		rc |= cancel_one(sp, l.v[k].id, &cc);
	}
	if (!tried && !rc) {
		fprintf(stderr, "kart cancel: no task to cancel: none of yours that has not finished "
			"matches\n");
		rc = 1;
	}
	sel_list_free(&l);
	if (cc.wdir >= 0) {
		(void)unlinkat(cc.wdir, ".lock", 0);
		(void)unlinkat(sp->cur, cc.me, AT_REMOVEDIR);
		close(cc.wdir);
		close(cc.lockfd);
	}
	return rc;
}
