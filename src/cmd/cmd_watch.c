/* kart watch - one line per result as it lands in done/, like tail -f.
 * inotify is the doorbell: the watch is made first, then done/ is listed;
 * every event (and an overflow) makes us look at done/ itself, and a set
 * of the ids already seen keeps each result to one line. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <jansson.h>

#include "cmd.h"
#include "opts.h"
#include "query.h"
#include "result.h"
#include "strset.h"
#include "termsafe.h"
#include "util.h"

static const struct opts_help help = {
	"usage: kart [-s SPOOL] watch [--json] [--all] [--events]\n"
	"\n"
	"Print one line per result as it lands in done/ (inotify), until SIGINT\n"
	"or SIGTERM: ID, status and exit code (if it exited), then why for a task\n"
	"not ok (the result's error), separated by tabs, as `kart status` prints\n"
	"them.\n",
	"exit status: 0 on SIGINT or SIGTERM; 1 if done/ cannot be watched; 2 usage\n",
};

/* Add id to the ids already printed (or there at start); false if it
 * was there already. */
static bool seen_add(struct strset *st, const char *id)
{
	if (strset_get(st, id))
		return false;
	strset_put(st, id, 1);
	return true;
}

struct ent {
	char *id;
	int64_t mtime_ms;
};

static int by_mtime(const void *a, const void *b)
{
	const struct ent *x = a, *y = b;
	return x->mtime_ms < y->mtime_ms ? -1 : x->mtime_ms > y->mtime_ms;
}

/* With --events, the result documents say what they are. */
static bool events_mode;

/* false when stdout is gone; a result that cannot be read (removed by
 * gc meanwhile, or not JSON) is passed over, never the end of the watch. */
static bool print_result(struct spool *sp, const char *id, bool json)
{
	if (json) {
		json_t *o = NULL;
		if (query_load(sp, id, &o) < 0)
			return true;
		/* The document on one line, its strings terminal-safe. */
		json_t *e = events_mode ? json_pack("{s:s}", "event", "finished") : json_object();
		(void)json_object_update(e, o);
		json_decref(o);
		char *line = json_dumps_safe(e, JSON_COMPACT | JSON_PRESERVE_ORDER);
		json_decref(e);
		if (!line)
			return true;
		printf("%s\n", line);
		free(line);
	} else {
		struct qinfo q = {0};
		if (query_done(sp, id, &q) < 0)
			return true;
		_cleanup_free_ char *clean = term_safe(id), *st = term_safe(q.status),
				    *err = term_safe(q.error);
		char code[32] = "";
		if (q.exit_code >= 0)
			snprintf(code, sizeof code, "\t%d", q.exit_code);
		printf("%s\t%s%s%s%s\n", clean, st, code, err[0] ? "\t" : "", err);
	}
	return fflush(stdout) == 0;
}

struct ents {
	struct ent *v;
	size_t n;
};

static int list_result(const struct spool_entry *e, void *arg)
{
	struct ents *l = arg;
	struct stat s;
	if (!e->id || e->done != DONE_JSON || fstatat(e->dirfd, e->name, &s, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	l->v = xrealloc(l->v, (l->n + 1) * sizeof *l->v);
	l->v[l->n].id = xstrdup(e->id);
	l->v[l->n].mtime_ms = (int64_t)s.st_mtim.tv_sec * 1000 + s.st_mtim.tv_nsec / 1000000;
	l->n++;
	return 0;
}

/* Look at done/: every result not yet seen, oldest first. */
static int scan(struct spool *sp, struct strset *st, bool print, bool json)
{
	struct ents l = {0};
	int r = spool_walk(sp, SPOOL_WALK_DONE, list_result, &l);
	if (r < 0) {
		for (size_t i = 0; i < l.n; i++)
			free(l.v[i].id);
		free(l.v);
		return r;
	}
	struct ent *v = l.v;
	size_t n = l.n;
	sort_n(v, n, sizeof *v, by_mtime);
	for (size_t i = 0; i < n; i++) {
		if (seen_add(st, v[i].id) && print && r == 0 && !print_result(sp, v[i].id, json))
			r = -EPIPE;
		free(v[i].id);
	}
	free(v);
	return r;
}

/* --events: the claim directories watched, by watch descriptor. */
struct wdirs {
	struct wdir {
		int wd;
		char *worker;
	} *v;
	size_t n;
	int cur_wd;   /* cur/ itself: a worker directory appears */
	struct strset pending; /* "W/NAME" printed by a scan; its event is skipped */
};

static bool print_event(const char *event, const char *id, const char *worker, bool json)
{
	if (json) {
		_cleanup_free_ char *clean = utf8_sanitize(id, strlen(id)),
				    *w = utf8_sanitize(worker, strlen(worker));
		char ts[32];
		fmt_rfc3339_ms(now_realtime_ms(), ts);
		json_t *e = json_pack("{s:s, s:s, s:s, s:s}", "event", event, "id", clean, "worker", w,
				      "at", ts);
		char *line = e ? json_dumps_safe(e, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
		json_decref(e);
		if (!line)
			return false;
		printf("%s\n", line);
		free(line);
	} else {
		_cleanup_free_ char *clean = term_safe(id), *w = term_safe(worker);
		printf("%s\t%s\t%s\n", clean, event, w);
	}
	return fflush(stdout) == 0;
}

static bool seen_del(struct strset *st, const char *key)
{
	if (!strset_get(st, key))
		return false;
	strset_del(st, key);
	return true;
}

/* The name of a claim directory's entry as an event: a claim (NAME) or a
 * run's start (.NAME.lock, made by the run's child before it execs). */
static const char *entry_event(const char *name, char *id, size_t idlen)
{
	if (name[0] != '.') {
		snprintf(id, idlen, "%s", name);
		return "claimed";
	}
	return spool_scratch_of(name, SCRATCH_LOCK, id, idlen) ? "started" : NULL;
}

/* Watch cur/W/, then print what it already holds that no event will
 * tell (a worker seen for the first time, or after an overflow). */
static int watch_worker(struct spool *sp, struct wdirs *ws, int ino, const char *worker, bool json,
			bool print)
{
	char p[4096];
	if (worker[0] == '.' || pathfmt(p, sizeof p, "%s/cur/%s", sp->path, worker) < 0)
		return 0;
	int wd = inotify_add_watch(ino, p, IN_CREATE | IN_MOVED_TO | IN_ONLYDIR | IN_DONT_FOLLOW);
	if (wd < 0)
		return 0; /* gone already, or not a directory */
	bool known = false;
	for (size_t i = 0; i < ws->n && !known; i++)
		known = ws->v[i].wd == wd;
	if (!known) {
		ws->v = xrealloc(ws->v, (ws->n + 1) * sizeof *ws->v);
		ws->v[ws->n++] = (struct wdir){wd, xstrdup(worker)};
	}
	if (!print)
		return 0;
	struct strv names = {0};
	if (dir_names(sp->cur, worker, &names) < 0)
		return 0;
	int r = 0;
	for (size_t i = 0; i < names.n && r == 0; i++) {
		char id[512], key[1024];
		const char *ev = entry_event(names.v[i], id, sizeof id);
		if (!ev || pathfmt(key, sizeof key, "%c%s/%s", ev[0], worker, id) < 0)
			continue;
		if (seen_add(&ws->pending, key) && !print_event(ev, id, worker, json))
			r = -EPIPE;
	}
	strv_free(&names);
	return r;
}

static int watch_workers(struct spool *sp, struct wdirs *ws, int ino, bool json, bool print)
{
	struct strv names = {0};
	int r = dir_names(sp->root, "cur", &names);
	if (r < 0)
		return r;
	for (size_t i = 0; i < names.n && r == 0; i++)
		r = watch_worker(sp, ws, ino, names.v[i], json, print);
	strv_free(&names);
	return r;
}

/* One event of --events: in cur/ (a worker directory) or in cur/W/. */
static int on_event(struct spool *sp, struct wdirs *ws, int ino, const struct inotify_event *ev,
		    bool json)
{
	if (!ev->len)
		return 0;
	if (ev->wd == ws->cur_wd)
		return watch_worker(sp, ws, ino, ev->name, json, true);
	const char *worker = NULL;
	for (size_t i = 0; i < ws->n && !worker; i++)
		if (ws->v[i].wd == ev->wd)
			worker = ws->v[i].worker;
	char id[512], key[1024];
	const char *what = worker ? entry_event(ev->name, id, sizeof id) : NULL;
	if (!what || pathfmt(key, sizeof key, "%c%s/%s", what[0], worker, id) < 0)
		return 0;
	if (seen_del(&ws->pending, key))
		return 0;
	return print_event(what, id, worker, json) ? 0 : -EPIPE;
}

int cmd_watch(struct ctx *c, int argc, char **argv)
{
	bool json = false, all = false;
	const struct opt opts[] = {
		OPT_BOOL(0, "json", &json, "print each result document, on one line (NDJSON)"),
		OPT_BOOL(0, "all", &all, "print the results already there first (oldest first)"),
		OPT_BOOL(0, "events", &events_mode,
			 "also a line when a task is claimed (ID, claimed, worker) and when its run "
			 "starts (ID, started, worker); with --json, an object {\"event\", \"id\", "
			 "\"worker\", \"at\"}, and each result document gets \"event\": \"finished\""),
		OPT_END(),
	};
	struct opts_rest rest;
	opts_parse("watch", argc, argv, opts, &help, 0, &rest);
	if (rest.argc > 0)
		return usage_error("watch", "unexpected argument '%s'", rest.argv[0]);
	struct spool *sp = &c->sp;

	/* Signals through a signalfd: the loop ends cleanly, no handler. */
	_cleanup_close_ int sfd = stop_signalfd();
	(void)signal(SIGPIPE, SIG_IGN);
	_cleanup_close_ int ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	char p[4096];
	int done_wd = -1;
	if (sfd < 0 || ino < 0 || pathfmt(p, sizeof p, "%s/done", sp->path) < 0 ||
	    (done_wd = inotify_add_watch(ino, p, IN_MOVED_TO | IN_CREATE | IN_ONLYDIR | IN_DONT_FOLLOW)) < 0) {
		fprintf(stderr, "kart watch: inotify on %s/done: %s\n", sp->path, strerror(errno));
		return 1;
	}
	struct strset st = {0};
	struct wdirs ws = {.cur_wd = -1};
	/* Workers' directories first: a task claimed while done/ is listed
	 * is then told, rather than missed. */
	if (events_mode &&
	    (pathfmt(p, sizeof p, "%s/cur", sp->path) < 0 ||
	     (ws.cur_wd = inotify_add_watch(ino, p, IN_CREATE | IN_MOVED_TO | IN_ONLYDIR)) < 0 ||
	     watch_workers(sp, &ws, ino, json, false) < 0)) {
		fprintf(stderr, "kart watch: inotify on %s/cur: %s\n", sp->path, strerror(errno));
		return 1;
	}
	int r = scan(sp, &st, all, json);
	while (r == 0) {
		struct pollfd pfd[2] = {{.fd = ino, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		if (pfd[1].revents)
			break;
		/* One read may hold many events: drain. Each names a result
		 * (looked at itself); an overflow makes us list done/. */
		char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
		ssize_t len;
		bool overflow = false;
		while (r == 0 && (len = read(ino, buf, sizeof buf)) > 0) {
			for (char *e = buf; r == 0 && e < buf + len;) {
				struct inotify_event *ev = (struct inotify_event *)e;
				e += sizeof *ev + ev->len;
				if (ev->mask & IN_Q_OVERFLOW) {
					overflow = true;
					continue;
				}
				if (events_mode && ev->wd != done_wd) {
					r = on_event(sp, &ws, ino, ev, json);
					continue;
				}
				size_t l = ev->len ? strlen(ev->name) : 0;
				if (l <= 5 || ev->name[0] == '.' || strcmp(ev->name + l - 5, ".json") != 0)
					continue;
				ev->name[l - 5] = '\0';
				struct qinfo q;
				/* An event for a JSON already gone (gc) prints nothing. */
				if (query_done(sp, ev->name, &q) == 0 && seen_add(&st, ev->name) &&
				    !print_result(sp, ev->name, json))
					r = -EPIPE;
			}
		}
		if (r == 0 && overflow && events_mode)
			r = watch_workers(sp, &ws, ino, json, true);
		if (r == 0 && overflow)
			r = scan(sp, &st, true, json);
	}
	for (size_t i = 0; i < ws.n; i++)
		free(ws.v[i].worker);
	free(ws.v);
	strset_free(&ws.pending);
	strset_free(&st);
	if (r < 0 && r != -EPIPE)
		fprintf(stderr, "kart watch: %s/done: %s\n", sp->path, strerror(-r));
	spool_close(sp);
	/* -EPIPE: the reader went away (kart watch | head): done. */
	return r < 0 && r != -EPIPE ? 1 : 0;
}
