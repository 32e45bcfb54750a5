/* kart cat, and kart cat --follow: the capture as it grows.
 *
 * A run's capture is cur/W/.ID.stdout, made at its first byte; finish
 * renames that same inode to done/ID.stdout. So following is: find the
 * file, keep the descriptor, read it on every IN_MODIFY, and once the
 * result exists read what is left and stop. inotify is the doorbell
 * (nq's nqtail): new/ says the task left the queue, cur/W/ says the file
 * was made or the claim left, done/ says the result landed; after every
 * batch of events we look at the spool itself, never at the events alone. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "cmd.h"
#include "opts.h"
#include "query.h"
#include "termsafe.h"
#include "util.h"

static const struct opts_help help = {
	"usage: kart [-s SPOOL] cat [-f] [--stderr] ID\n"
	"\n"
	"Print a task's captured stdout (or stderr). For a running task, what it\n"
	"has written so far. A task that ended with no output says why on stderr\n"
	"when it did not end ok (the result's error).\n",
	"exit status: 0; 1 if the task is unknown, queued, or has no output; 2 usage.\n"
	"With --follow, kart wait's: 0 if the task ended ok, else by its status\n"
	"(its own exit code, 124 timeout, 130 cancelled, ...; kart wait --help);\n"
	"125 if it is unknown\n",
};

/* What one follow holds between two looks. */
struct follow {
	struct spool *sp;
	const char *id;
	enum scratch_file cap; /* SCRATCH_STDOUT or SCRATCH_STDERR */
	int ino;           /* the inotify instance */
	int fd;            /* the capture being read, or -1 */
	int fd_wd;         /* its watch (IN_MODIFY), or -1 */
	char worker[256];  /* the claim directory watched, "" none */
	int worker_wd;
};

/* Copy fd from where it is to its end onto stdout. */
static int drain(int fd)
{
	char buf[65536];
	ssize_t n;
	while ((n = read(fd, buf, sizeof buf)) > 0)
		if (write_all(STDOUT_FILENO, buf, (size_t)n) < 0)
			return -errno;
	return n < 0 ? -errno : 0;
}

static void follow_file(struct follow *f, int fd)
{
	char p[64];
	f->fd = fd;
	/* Watch the inode itself (through /proc: it may be renamed to done/
	 * meanwhile, and the watch stays with it). */
	snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
	f->fd_wd = inotify_add_watch(f->ino, p, IN_MODIFY);
}

static void unfollow_file(struct follow *f)
{
	if (f->fd_wd >= 0)
		(void)inotify_rm_watch(f->ino, f->fd_wd);
	if (f->fd >= 0)
		close(f->fd);
	f->fd = f->fd_wd = -1;
}

/* Look at the spool. 1: the task has finished, *q says how; 0: go on
 * waiting; -errno: give up. */
static int follow_look(struct follow *f, struct qinfo *q)
{
	char p[600];
	int r = query_id(f->sp, f->id, q);
	if (r < 0)
		return r;
	switch (q->state) {
	case Q_UNKNOWN:
		return -ENOENT;
	case Q_QUEUED:
	case Q_HELD:
	case Q_SCHEDULED:
		return 0; /* new/'s IN_MOVED_FROM says when it is claimed */
	case Q_DONE: {
		const char *rel = f->cap == SCRATCH_STDERR ? q->err_path : q->out_path;
		struct stat a, b;
		_cleanup_close_ int fd = -1;
		if (strncmp(rel, "done/", 5) == 0 && !strchr(rel + 5, '/'))
			fd = openat(f->sp->done, rel + 5, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		/* The file read so far, renamed into done/: its rest. Another
		 * (a later attempt's, or the first look at a finished task):
		 * all of it, after what is left of ours. */
		if (f->fd >= 0 && (r = drain(f->fd)) < 0)
			return r;
		if (fd >= 0 && (f->fd < 0 || fstat(fd, &a) < 0 || fstat(f->fd, &b) < 0 ||
				a.st_dev != b.st_dev || a.st_ino != b.st_ino) &&
		    (r = drain(fd)) < 0)
			return r;
		return 1;
	}
	case Q_RUNNING:
		break;
	}
	if (strcmp(f->worker, q->worker) != 0) {
		/* Claimed (again) by this worker: the watch first, then look. */
		if (f->worker_wd >= 0)
			(void)inotify_rm_watch(f->ino, f->worker_wd);
		snprintf(f->worker, sizeof f->worker, "%s", q->worker);
		f->worker_wd = -1;
		if (pathfmt(p, sizeof p, "%s/cur/%s", f->sp->path, q->worker) == 0)
			f->worker_wd = inotify_add_watch(f->ino, p, IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM |
									    IN_DELETE | IN_ONLYDIR);
		if (f->worker_wd < 0) /* gone meanwhile: it moved on; look again */
			f->worker[0] = '\0';
	}
	if (f->fd >= 0) {
		struct stat st;
		/* A capture unlinked while the task runs is an earlier run's
		 * (a re-queue, a new start): what is left of it, then the new. */
		if (fstat(f->fd, &st) == 0 && st.st_nlink == 0) {
			if ((r = drain(f->fd)) < 0)
				return r;
			unfollow_file(f);
		}
	}
	if (f->fd < 0 && spool_name_claim_scratch(p, sizeof p, q->worker, f->id, f->cap) == 0) {
		int fd = openat(f->sp->cur, p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd >= 0)
			follow_file(f, fd);
		else if (errno != ENOENT)
			return -errno;
	}
	if (f->fd >= 0 && (r = drain(f->fd)) < 0)
		return r;
	return 0;
}

static int cat_follow(struct spool *sp, const char *id, bool err)
{
	struct follow f = {.sp = sp, .id = id, .cap = err ? SCRATCH_STDERR : SCRATCH_STDOUT, .fd = -1,
			   .fd_wd = -1, .worker_wd = -1};
	char p[4096];
	_cleanup_close_ int sfd = stop_signalfd();
	f.ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (sfd < 0 || f.ino < 0 || pathfmt(p, sizeof p, "%s/done", sp->path) < 0 ||
	    inotify_add_watch(f.ino, p, IN_MOVED_TO | IN_CREATE | IN_ONLYDIR) < 0 ||
	    pathfmt(p, sizeof p, "%s/new", sp->path) < 0 ||
	    inotify_add_watch(f.ino, p, IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE | IN_ONLYDIR) < 0) {
		fprintf(stderr, "kart cat: inotify on %s: %s\n", sp->path, strerror(errno));
		if (f.ino >= 0)
			close(f.ino);
		return 125;
	}
	(void)signal(SIGPIPE, SIG_IGN);
	struct qinfo q;
	bool warned = false;
	int r;
	/* The watches exist: now look, and again after every batch of events
	 * but those that only say the capture grew (most of them). */
	bool look = true;
	while ((r = look ? follow_look(&f, &q) : drain(f.fd)) == 0) {
		if (!warned && (q.state == Q_QUEUED || q.state == Q_SCHEDULED || q.state == Q_HELD)) {
			warn_no_worker(sp, "cat");
			warned = true;
		}
		struct pollfd pfd[2] = {{.fd = f.ino, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		if (pfd[1].revents) {
			r = -EINTR;
			break;
		}
		char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
		ssize_t len;
		look = f.fd < 0;
		while ((len = read(f.ino, buf, sizeof buf)) > 0)
			for (char *e = buf; e < buf + len;) {
				const struct inotify_event *ev = (const struct inotify_event *)e;
				e += sizeof *ev + ev->len;
				look = look || ev->wd != f.fd_wd || (ev->mask & IN_Q_OVERFLOW);
			}
	}
	unfollow_file(&f);
	close(f.ino);
	if (r == 1)
		return query_exit_status(&q);
	_cleanup_free_ char *sid = term_safe(id);
	if (r == -ENOENT) {
		fprintf(stderr, "kart cat: %s: no such task\n", sid);
		return 125;
	}
	if (r == -EINTR)
		return 130;
	if (r != -EPIPE)
		fprintf(stderr, "kart cat: %s: %s\n", sid, strerror(-r));
	return r == -EPIPE ? 0 : 125;
}

int cmd_cat(struct ctx *c, int argc, char **argv)
{
	bool err = false, follow = false;
	const struct opt opts[] = {
		OPT_BOOL('f', "follow", &follow,
			 "print what was written so far, then the output as it is written (inotify), "
			 "until the task finishes; on a queued (or held) task, wait for it to start"),
		OPT_BOOL(0, "stderr", &err, "the captured stderr instead"),
		OPT_END(),
	};
	struct opts_rest rest;
	opts_parse("cat", argc, argv, opts, &help, 0, &rest);
	if (rest.argc != 1)
		return usage_error("cat", "give exactly one task ID");
	struct spool *sp = &c->sp;
	_cleanup_free_ char *own = spool_own_id(sp, rest.argv[0]), *sid = term_safe(own);
	const char *id = own;
	if (follow)
		return cat_follow(sp, id, err);
	struct qinfo q;
	int r = query_id(sp, id, &q);
	char p[4096], name[512];
	_cleanup_close_ int fd = -1;
	if (r < 0 || q.state == Q_UNKNOWN) {
		fprintf(stderr, "kart cat: %s: %s\n", sid, r < 0 ? strerror(-r) : "no such task");
		return 1;
	}
	if (q.state == Q_QUEUED || q.state == Q_SCHEDULED || q.state == Q_HELD) {
		fprintf(stderr, "kart cat: %s: %s, no output yet\n", sid,
			q.state == Q_HELD ? "held" : q.state == Q_SCHEDULED ? "scheduled" : "queued");
		return 1;
	}
	if (q.state == Q_RUNNING) {
		if (spool_name_scratch(name, sizeof name, id, err ? SCRATCH_STDERR : SCRATCH_STDOUT) == 0 &&
		    pathfmt(p, sizeof p, "%s/%s", q.worker, name) == 0)
			fd = openat(sp->cur, p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		/* The file is made at the run's first byte: none yet. */
		if (fd < 0 && errno == ENOENT)
			return 0;
	} else {
		const char *rel = err ? q.err_path : q.out_path;
		if (strncmp(rel, "done/", 5) == 0 && !strchr(rel + 5, '/'))
			fd = openat(sp->done, rel + 5, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	}
	if (fd < 0) {
		_cleanup_free_ char *why = term_safe(q.error);
		/* Why there is none: it never ran, or what it ended so. */
		if (q.state == Q_DONE && strcmp(q.status, "ok") != 0)
			fprintf(stderr, "kart cat: %s: no captured %s: it ended %s%s%s\n", sid,
				err ? "stderr" : "stdout", q.status, why[0] ? ": " : "", why);
		else
			fprintf(stderr, "kart cat: %s: no captured %s\n", sid, err ? "stderr" : "stdout");
		return 1;
	}
	r = drain(fd);
	spool_close(sp);
	return r < 0 ? 1 : 0;
}
