/* kart wait */
#define _GNU_SOURCE
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>

#include "cmd.h"
#include "query.h"
#include "termsafe.h"
#include "util.h"

static const char help[] =
	"usage: kart [-s SPOOL] wait [--timeout DUR] ID...\n"
	"\n"
	"Block until each task has a result (watching done/ with inotify).\n"
	"\n"
	"Each task that did not end ok is named on stderr with its status.\n"
	"\n"
	"exit status: 0 if every task is ok; for a single task, by its status:\n"
	"  failed     its own exit code      timeout    124 (as timeout(1))\n"
	"  killed     128+N (signal N)       oom        137\n"
	"  cancelled  130                    rejected   65\n"
	"  refused    69                     lost       75\n"
	"  skipped    76\n"
	"for several tasks, 1 if any was not ok; 124 also if the --timeout\n"
	"passed first (stderr says which); 125 if an ID is unknown or a result\n"
	"unreadable; 2 usage error\n";

/* Name each task that did not end ok: with 200 ids, which ones. */
static void report_not_ok(char **ids, const struct qinfo *q, int n)
{
	for (int i = 0; i < n; i++) {
		if (strcmp(q[i].status, "ok") == 0)
			continue;
		_cleanup_free_ char *sid = term_safe(ids[i]), *st = term_safe(q[i].status);
		if (q[i].exit_code >= 0)
			fprintf(stderr, "kart wait: %s: %s (exit %d)\n", sid, st, q[i].exit_code);
		else if (q[i].signal > 0)
			fprintf(stderr, "kart wait: %s: %s (%s)\n", sid, st, signal_name(q[i].signal));
		else
			fprintf(stderr, "kart wait: %s: %s\n", sid, st);
	}
}

int cmd_wait(struct ctx *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{"timeout", required_argument, NULL, 't'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	int64_t timeout_s = -1;
	int ch;
	while ((ch = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'h': fputs(help, stdout); return 0;
		case 't':
			if (parse_duration_s(optarg, &timeout_s) < 0)
				return usage_error("wait", "--timeout %s: not a duration", optarg);
			break;
		case ':': return usage_error("wait", "option '%s' needs a value", argv[optind - 1]);
		default: return usage_error("wait", "unknown option '%s'", argv[optind - 1]);
		}
	}
	int n = argc - optind;
	if (n <= 0)
		return usage_error("wait", "no task ID given");
	struct spool *sp = &c->sp;
	/* A plain NAME on a shared spool is the caller's own USER:NAME. */
	char **ids = xcalloc((size_t)n, sizeof *ids);
	for (int i = 0; i < n; i++)
		ids[i] = spool_own_id(sp, argv[optind + i]);
	_cleanup_close_ int ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	char p[4096];
	if (ino < 0 || pathfmt(p, sizeof p, "%s/done", sp->path) < 0 ||
	    inotify_add_watch(ino, p, IN_MOVED_TO | IN_CREATE | IN_ONLYDIR) < 0) {
		fprintf(stderr, "kart wait: inotify on %s/done: %s\n", sp->path, strerror(errno));
		return 125;
	}
	_cleanup_free_ struct qinfo *q = xcalloc((size_t)n, sizeof *q);
	_cleanup_free_ bool *fin = xcalloc((size_t)n, sizeof *fin);
	int left = n;
	int64_t deadline = timeout_s >= 0 ? now_mono_ms() + timeout_s * 1000 : 0;
	bool tty = isatty(STDERR_FILENO);
	int shown = -1;
	bool full = true, warned = false;
	for (;;) {
		/* The watch exists: now look at every task; after that, only at
		 * those whose result an event names (or all, on an overflow). */
		for (int i = 0; full && i < n; i++) {
			if (fin[i])
				continue;
			int r = query_id(sp, ids[i], &q[i]);
			if (r < 0 || q[i].state == Q_UNKNOWN) {
				_cleanup_free_ char *sid = term_safe(ids[i]);
				if (r < 0)
					fprintf(stderr, "kart wait: %s: cannot read its result: %s\n", sid,
						strerror(-r));
				else
					fprintf(stderr, "kart wait: %s: no such task\n", sid);
				return 125;
			}
			if (q[i].state == Q_DONE) {
				fin[i] = true;
				left--;
			}
		}
		if (full && left && !warned) {
			warn_no_worker(sp, "wait");
			warned = true;
		}
		full = false;
		if (tty && n > 1 && shown != n - left) {
			shown = n - left;
			fprintf(stderr, "\r%d/%d done", shown, n);
			if (!left)
				fputc('\n', stderr);
		}
		if (!left)
			break;
		int ms = -1;
		if (deadline) {
			int64_t rest = deadline - now_mono_ms();
			if (rest <= 0) {
				if (tty && n > 1)
					fputc('\n', stderr);
				fprintf(stderr, "kart wait: timed out with %d of %d task(s) unfinished\n", left, n);
				return 124;
			}
			ms = (int)(rest > INT32_MAX ? INT32_MAX : rest);
		}
		struct pollfd pfd = {.fd = ino, .events = POLLIN};
		if (poll(&pfd, 1, ms) <= 0)
			continue;
		char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
		ssize_t len;
		while ((len = read(ino, buf, sizeof buf)) > 0) {
			for (char *e = buf; e < buf + len;) {
				struct inotify_event *ev = (struct inotify_event *)e;
				e += sizeof *ev + ev->len;
				if (ev->mask & IN_Q_OVERFLOW) {
					full = true;
					continue;
				}
				size_t l = ev->len ? strlen(ev->name) : 0;
				if (l <= 5 || strcmp(ev->name + l - 5, ".json") != 0)
					continue;
				ev->name[l - 5] = '\0';
				for (int i = 0; i < n; i++)
					if (!fin[i] && strcmp(ids[i], ev->name) == 0 &&
					    query_done(sp, ids[i], &q[i]) == 0) {
						fin[i] = true;
						left--;
					}
			}
		}
	}
	spool_close(sp);
	report_not_ok(ids, q, n);
	if (n == 1)
		return query_exit_status(&q[0]);
	for (int i = 0; i < n; i++)
		if (strcmp(q[i].status, "ok") != 0)
			return 1;
	return 0;
}
