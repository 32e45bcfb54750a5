/* kart wait */
#define _GNU_SOURCE
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>

#include "cmd.h"
#include "opts.h"
#include "query.h"
#include "strset.h"
#include "termsafe.h"
#include "util.h"
#include "why.h"

static const struct opts_help help = {
	"usage: kart [-s SPOOL] wait [--timeout DUR] [--quiet] ID...\n"
	"\n"
	"Block until each task has a result (watching done/ with inotify).\n"
	"On a terminal, one line keeps count as GNU parallel's --bar does:\n"
	"done/total, failed, running, and the time left from the mean duration so\n"
	"far.\n"
	"\n"
	"Each task that did not end ok is named on stderr with its status and why:\n"
	"the result's error, the last line of its stderr, and, for a task without\n"
	"network whose stderr says a connection failed, that the network was off.\n",
	"exit status: 0 if every task is ok; for a single task, by its status:\n"
	"  failed     its own exit code      timeout    124 (as timeout(1))\n"
	"  killed     128+N (signal N)       oom        137\n"
	"  cancelled  130                    rejected   65\n"
	"  refused    69                     lost       75\n"
	"  skipped    76\n"
	"for several tasks, 1 if any was not ok; 124 also if the --timeout\n"
	"passed first (stderr says which); 125 if an ID is unknown or a result\n"
	"unreadable; 2 usage error\n",
};

/* Name each task that did not end ok: with 200 ids, which ones, and why. */
static void report_not_ok(struct spool *sp, char **ids, const struct qinfo *q, int n)
{
	for (int i = 0; i < n; i++) {
		if (strcmp(q[i].status, "ok") == 0)
			continue;
		struct why w;
		char how[64] = "";
		(void)why_load(sp, ids[i], &q[i], &w);
		if (q[i].exit_code >= 0)
			snprintf(how, sizeof how, " (exit %d)", q[i].exit_code);
		else if (q[i].signal > 0)
			snprintf(how, sizeof how, " (%s)", signal_name(q[i].signal));
		_cleanup_free_ char *id = term_safe(ids[i]), *err = term_safe(w.error),
				    *line = term_safe(w.last_stderr);
		fprintf(stderr, "kart wait: %s: %s%s%s%s\n", id, q[i].status, how, err[0] ? ": " : "", err);
		if (line[0])
			fprintf(stderr, "kart wait: %s: its stderr ends: %s\n", id, line);
		if (w.net_off)
			fprintf(stderr, "kart wait: %s: %s\n", id, WHY_NET_OFF);
	}
}

/* ---- the progress line ------------------------------------------------------- */

struct progress {
	bool on;
	int n, done, failed, running;
	int64_t sum_ms; /* the durations of those finished, for the mean */
	int with_ms;
	int64_t last_ms; /* when it was last drawn */
};

static int claim_count(const struct spool_entry *e, void *arg)
{
	if (e->id)
		strset_put(arg, e->id, 1);
	return 0;
}

/* How many of the unfinished ids have a claim now. */
static int count_running(struct spool *sp, char **ids, const bool *fin, int n)
{
	struct strset claims = {0};
	int k = 0;
	if (spool_walk(sp, SPOOL_WALK_CUR, claim_count, &claims) == 0)
		for (int i = 0; i < n; i++)
			k += !fin[i] && strset_get(&claims, ids[i]);
	strset_free(&claims);
	return k;
}

static void progress_done(struct progress *p, const struct qinfo *q)
{
	p->done++;
	p->failed += strcmp(q->status, "ok") != 0;
	if (q->duration_ms >= 0) {
		p->sum_ms += q->duration_ms;
		p->with_ms++;
	}
}

/* "[#####.....] 12/30 done, 1 failed, 3 running, ETA 0:45", over the last. */
static void progress_draw(struct progress *p)
{
	char eta[32] = "?";
	int left = p->n - p->done;
	if (p->with_ms && left) {
		int64_t s = p->sum_ms / p->with_ms * left / (p->running > 0 ? p->running : 1) / 1000;
		if (s >= 3600)
			snprintf(eta, sizeof eta, "%lld:%02lld:%02lld", (long long)(s / 3600),
				 (long long)(s / 60 % 60), (long long)(s % 60));
		else
			snprintf(eta, sizeof eta, "%lld:%02lld", (long long)(s / 60), (long long)(s % 60));
	} else if (!left) {
		snprintf(eta, sizeof eta, "0:00");
	}
	char bar[21];
	int fill = p->n ? p->done * 20 / p->n : 20;
	for (int i = 0; i < 20; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[20] = '\0';
	char line[256];
	int len = snprintf(line, sizeof line, "[%s] %d/%d done, %d failed, %d running, ETA %s", bar, p->done,
			   p->n, p->failed, p->running, eta);
	struct winsize ws;
	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && len >= ws.ws_col)
		line[ws.ws_col - 1] = '\0';
	fprintf(stderr, "\r%s\033[K", line);
	p->last_ms = now_mono_ms();
}

/* ---- the wait ------------------------------------------------------------------ */

int cmd_wait(struct ctx *c, int argc, char **argv)
{
	int64_t timeout_s = -1;
	bool quiet = false;
	const struct opt opts[] = {
		OPT_DURATION(0, "timeout", &timeout_s, "give up after DUR (exit 124)", 0),
		OPT_BOOL('q', "quiet", &quiet, "no progress line on a terminal"),
		OPT_END(),
	};
	struct opts_rest args;
	opts_parse("wait", argc, argv, opts, &help, 0, &args);
	int n = args.argc;
	if (n <= 0)
		return usage_error("wait", "no task ID given");
	struct spool *sp = &c->sp;
	/* A plain NAME on a shared spool is the caller's own USER:NAME. */
	char **ids = xcalloc((size_t)n, sizeof *ids);
	for (int i = 0; i < n; i++)
		ids[i] = spool_own_id(sp, args.argv[i]);
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
	struct progress prog = {.on = !quiet && n > 1 && isatty(STDOUT_FILENO) && isatty(STDERR_FILENO),
				.n = n};
	bool full = true, warned = false, changed = true;
	for (;;) {
		/* The watch exists: now look at every task; after that, only at
		 * those whose result an event names (or all, on an overflow). */
		for (int i = 0; full && i < n; i++) {
			if (fin[i])
				continue;
			int r = query_id(sp, ids[i], &q[i]);
			_cleanup_free_ char *shown = term_safe(ids[i]);
			if (r < 0) {
				fprintf(stderr, "kart wait: %s: cannot read its result: %s\n", shown, strerror(-r));
				return 125;
			}
			if (q[i].state == Q_UNKNOWN) {
				fprintf(stderr, "kart wait: %s: no such task\n", shown);
				return 125;
			}
			if (q[i].state == Q_DONE) {
				fin[i] = true;
				left--;
				progress_done(&prog, &q[i]);
			}
		}
		if (full && left && !warned) {
			warn_no_worker(sp, "wait");
			warned = true;
		}
		full = false;
		/* Redrawn when a task finishes, and each second for the rest. */
		if (prog.on && (changed || !left || now_mono_ms() - prog.last_ms >= 1000)) {
			prog.running = count_running(sp, ids, fin, n);
			progress_draw(&prog);
			if (!left)
				fputc('\n', stderr);
		}
		changed = false;
		if (!left)
			break;
		int ms = prog.on ? 1000 : -1;
		if (deadline) {
			int64_t rest = deadline - now_mono_ms();
			if (rest <= 0) {
				if (prog.on)
					fputc('\n', stderr);
				fprintf(stderr, "kart wait: timed out with %d of %d task(s) unfinished\n", left, n);
				return 124;
			}
			if (ms < 0 || rest < ms)
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
						changed = true;
						progress_done(&prog, &q[i]);
					}
			}
		}
	}
	report_not_ok(sp, ids, q, n);
	if (n == 1)
		return query_exit_status(&q[0]);
	for (int i = 0; i < n; i++)
		if (strcmp(q[i].status, "ok") != 0)
			return 1;
	return 0;
}
