/* kart top - what runs now, full screen (ncurses), as htop shows
 * processes. inotify on new/, cur/, each cur/W/ and done/ is the doorbell
 * (the spool is looked at again after each batch of events, never polled);
 * a one-second timer re-reads the running tasks' cgroup files for CPU %
 * and memory. A task's cgroup is found from the run lock (spool-layout WORKER §4):
 * the run's processes hold cur/W/.ID.lock, /proc/locks names the holder,
 * and /proc/PID/cgroup its leaf. Without a terminal (or TERM=dumb) it
 * prints one snapshot. It lives in kart-top, which links ncurses, so
 * that no other verb loads it. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "cmd.h"
#include "opts.h"
#include "obs.h"
#include "policy.h"
#include "space.h"
#include "util.h"
#include "worker_control.h"
/* Last: curses names its error ERR too (util.h's is not used here). */
#undef ERR
#include <curses.h>

static const struct opts_help help = {
	"usage: kart [-s SPOOL] top [--once]\n"
	"\n"
	"A live view of the spool: the queue by state and lane, the last results,\n"
	"and each task running or queued with its user, lane, elapsed time, CPU %,\n"
	"memory (now and peak), output bytes and last output line. It updates as\n"
	"the spool changes (inotify) and each second from the tasks' cgroups.\n"
	"\n"
	"keys: q quits; up/down (or k/j) select a task; c cancels it (after y);\n"
	"      p pauses it and r resumes it; f follows its output (kart cat -f;\n"
	"      Ctrl-C comes back)\n",
	"exit status: 0; 1 if the spool cannot be read; 2 usage error\n",
};

#define LAST_RESULTS 6

/* A task as shown: the live task, and what was read of its run. */
struct row {
	struct live_task t;
	char user[64];
	long long mem, mem_peak, out_bytes; /* -1: unknown */
	double cpu_pct;                     /* -1: unknown */
	char last[160];                     /* its last output line, terminal-safe */
};

/* A CPU reading of a running task, kept between refreshes for CPU %. */
struct cpu_seen {
	char *id;
	long long cpu_ns;
	int64_t at_ms;
};

struct recent {
	char *id, *status, *when;
};

struct top {
	struct spool *sp;
	struct live_set live;
	struct row *rows;
	size_t nrows;
	struct cpu_seen *cpu;
	size_t ncpu;
	struct recent recent[LAST_RESULTS];
	int nworkers;
	char stopped[700]; /* why claiming is stopped; "" */
	size_t sel;
	char sel_id[TASK_NAME_MAX + 40];
	char note[300];    /* the last action's outcome */
	int ino;
};

static void user_of(uid_t uid, char *out, size_t len)
{
	struct passwd pw, *pp = NULL;
	char buf[1024];
	if (uid == (uid_t)-1)
		snprintf(out, len, "-");
	else if (getpwuid_r(uid, &pw, buf, sizeof buf, &pp) == 0 && pp) {
		/* A directory service's name may hold anything. */
		_cleanup_free_ char *safe = obs_term(pp->pw_name);
		snprintf(out, len, "%s", safe);
	}
	else
		snprintf(out, len, "%u", (unsigned)uid);
}

/* The last line of what the run wrote so far (for its submitter and
 * root: others may not read the capture). */
static void last_line(struct spool *sp, const struct live_task *t, char *out, size_t len)
{
	char p[600];
	out[0] = '\0';
	if (spool_name_claim_scratch(p, sizeof p, t->q.worker, t->id, SCRATCH_STDOUT) < 0)
		return;
	_cleanup_close_ int fd = openat(sp->cur, p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
		return;
	char buf[4096];
	off_t from = st.st_size > (off_t)sizeof buf - 1 ? st.st_size - (off_t)sizeof buf + 1 : 0;
	ssize_t n = pread(fd, buf, sizeof buf - 1, from);
	if (n <= 0)
		return;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	buf[n] = '\0';
	char *start = memrchr(buf, '\n', (size_t)n);
	_cleanup_free_ char *safe = obs_term(start ? start + 1 : buf);
	snprintf(out, len, "%s", safe);
}

static int by_state(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	bool rx = x->t.q.state == Q_RUNNING, ry = y->t.q.state == Q_RUNNING;
	if (rx != ry)
		return rx ? -1 : 1;
	if (x->t.q.since_ms != y->t.q.since_ms)
		return x->t.q.since_ms < y->t.q.since_ms ? -1 : 1;
	return strcmp(x->t.id, y->t.id);
}

/* What runs and waits now, read anew. */
static void reload(struct top *tp)
{
	obs_live_free(&tp->live);
	(void)obs_live(tp->sp, &tp->live);
	free(tp->rows);
	tp->nrows = tp->live.n;
	tp->rows = xcalloc(tp->nrows ? tp->nrows : 1, sizeof *tp->rows);
	_cleanup_free_ char *locks = obs_locks();
	int64_t now = now_mono_ms();
	struct cpu_seen *seen = xcalloc(tp->nrows ? tp->nrows : 1, sizeof *seen);
	size_t nseen = 0;
	for (size_t i = 0; i < tp->nrows; i++) {
		struct row *r = &tp->rows[i];
		r->t = tp->live.v[i];
		user_of(r->t.uid, r->user, sizeof r->user);
		r->mem = r->mem_peak = r->out_bytes = -1;
		r->cpu_pct = -1;
		if (r->t.q.state != Q_RUNNING)
			continue;
		last_line(tp->sp, &r->t, r->last, sizeof r->last);
		struct run_now u;
		obs_run_now(tp->sp, locks, r->t.q.worker, r->t.id, &u);
		r->out_bytes = u.out_bytes;
		r->mem = u.mem;
		r->mem_peak = u.mem_peak;
		long long cpu_ns = u.cpu_ns;
		if (cpu_ns < 0)
			continue;
		for (size_t k = 0; k < tp->ncpu; k++)
			if (strcmp(tp->cpu[k].id, r->t.id) == 0 && now > tp->cpu[k].at_ms &&
			    cpu_ns >= tp->cpu[k].cpu_ns)
				r->cpu_pct = (cpu_ns - tp->cpu[k].cpu_ns) / 1e4 / (double)(now - tp->cpu[k].at_ms);
		seen[nseen++] = (struct cpu_seen){xstrdup(r->t.id), cpu_ns, now};
	}
	/* A reading is kept until a second one makes a rate of it. */
	for (size_t k = 0; k < tp->ncpu; k++) {
		bool again = false;
		for (size_t j = 0; j < nseen && !again; j++)
			if (strcmp(seen[j].id, tp->cpu[k].id) == 0 && seen[j].at_ms - tp->cpu[k].at_ms < 500) {
				free(seen[j].id);
				seen[j] = tp->cpu[k];
				again = true;
			}
		if (!again)
			free(tp->cpu[k].id);
	}
	free(tp->cpu);
	tp->cpu = seen;
	tp->ncpu = nseen;
	sort_n(tp->rows, tp->nrows, sizeof *tp->rows, by_state);
	/* The selection follows its task. */
	tp->sel = 0;
	for (size_t i = 0; i < tp->nrows; i++)
		if (strcmp(tp->rows[i].t.id, tp->sel_id) == 0)
			tp->sel = i;
	tp->nworkers = spool_live_workers(tp->sp);
	tp->stopped[0] = '\0';
	struct policy pol;
	char err[512];
	if (wctl_spool_paused(tp->sp->new))
		snprintf(tp->stopped, sizeof tp->stopped, "the spool is paused (kart resume --all)");
	else if (policy_load(&pol, tp->sp->path, err, sizeof err) == 0)
		(void)space_low(tp->sp->root, &pol, tp->sp->path, tp->stopped, sizeof tp->stopped);
}

static void recent_push(struct top *tp, const char *id, const char *status, int64_t ms)
{
	for (int i = 0; i < LAST_RESULTS; i++)
		if (tp->recent[i].id && strcmp(tp->recent[i].id, id) == 0)
			return;
	free(tp->recent[LAST_RESULTS - 1].id);
	free(tp->recent[LAST_RESULTS - 1].status);
	free(tp->recent[LAST_RESULTS - 1].when);
	memmove(&tp->recent[1], &tp->recent[0], (LAST_RESULTS - 1) * sizeof tp->recent[0]);
	char ts[32];
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	localtime_r(&s, &tm);
	strftime(ts, sizeof ts, "%H:%M:%S", &tm);
	tp->recent[0] = (struct recent){obs_term(id), obs_term(status), xstrdup(ts)};
}

/* A result that landed: its status, where this user may read it. */
static void result_seen(struct top *tp, const char *id)
{
	struct qinfo q;
	if (query_done(tp->sp, id, &q) == 0)
		recent_push(tp, id, q.status, q.since_ms);
	else
		recent_push(tp, id, "(not yours)", now_realtime_ms());
}

/* The last results at start: the newest done/ID.json by mtime. */
static void recent_initial(struct top *tp)
{
	struct strv names = {0};
	if (dir_names(tp->sp->done, ".", &names) < 0)
		return;
	struct {
		int64_t ms;
		size_t i;
	} best[LAST_RESULTS] = {{0}};
	for (size_t i = 0; i < names.n; i++) {
		size_t l = strlen(names.v[i]);
		struct stat st;
		if (l <= 5 || strcmp(names.v[i] + l - 5, ".json") != 0 ||
		    fstatat(tp->sp->done, names.v[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		int64_t ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
		int k = LAST_RESULTS;
		while (k > 0 && best[k - 1].ms < ms)
			k--;
		if (k == LAST_RESULTS)
			continue;
		memmove(&best[k + 1], &best[k], (LAST_RESULTS - 1 - k) * sizeof best[0]);
		best[k].ms = ms;
		best[k].i = i;
	}
	for (int k = LAST_RESULTS - 1; k >= 0; k--) {
		if (!best[k].ms)
			continue;
		char *n = names.v[best[k].i];
		n[strlen(n) - 5] = '\0';
		result_seen(tp, n);
	}
	strv_free(&names);
}

static void counts(const struct top *tp, const char *lane, long long c[6])
{
	static const char *const st[] = {"queued", "waiting", "scheduled", "held", "running", "paused"};
	for (int i = 0; i < 6; i++)
		c[i] = 0;
	for (size_t i = 0; i < tp->nrows; i++)
		for (int s = 0; s < 6; s++)
			c[s] += strcmp(tp->rows[i].t.lane, lane) == 0 && strcmp(tp->rows[i].t.word, st[s]) == 0;
}

/* One task's line, fitted to width. */
static void row_text(const struct row *r, char *out, size_t len, int64_t now)
{
	char el[16], mem[16], peak[16], ob[16], cpu[16];
	obs_dur(el, sizeof el, r->t.q.since_ms ? now - r->t.q.since_ms : -1);
	obs_bytes(mem, sizeof mem, r->mem);
	obs_bytes(peak, sizeof peak, r->mem_peak);
	obs_bytes(ob, sizeof ob, r->out_bytes);
	if (r->cpu_pct >= 0)
		snprintf(cpu, sizeof cpu, "%.0f", r->cpu_pct);
	else
		snprintf(cpu, sizeof cpu, "-");
	_cleanup_free_ char *id = obs_term(r->t.id);
	snprintf(out, len, "%-24.24s %-10.10s %-5s %-9s %8s %5s %7s %7s %7s  %s", id, r->user,
		 r->t.lane, r->t.word, el, cpu, mem, peak, ob, r->last);
}

static const char header[] =
	"ID                       USER       LANE  STATE      ELAPSED  CPU%     MEM    PEAK     OUT  LAST LINE";

/* The text of the view, line by line, for the snapshot and the screen. */
static void lines(const struct top *tp, void (*put)(void *, int, const char *), void *arg)
{
	int64_t now = now_realtime_ms();
	char buf[1024], ts[32];
	time_t s = time(NULL);
	struct tm tm;
	localtime_r(&s, &tm);
	strftime(ts, sizeof ts, "%H:%M:%S", &tm);
	_cleanup_free_ char *path = obs_term(tp->sp->path), *why = obs_term(tp->stopped);
	snprintf(buf, sizeof buf, "kart top  %s  %s  workers: %d%s%s", path, ts, tp->nworkers,
		 tp->stopped[0] ? "  CLAIMING STOPPED: " : "", tp->stopped[0] ? why : "");
	put(arg, 1, buf);
	put(arg, 0, "lane      queued  waiting  scheduled  held  running  paused");
	const char *ln[] = {"fast", "batch"};
	for (int l = 0; l < 2; l++) {
		long long c[6];
		counts(tp, ln[l], c);
		snprintf(buf, sizeof buf, "%-8s %7lld %8lld %10lld %5lld %8lld %7lld", ln[l], c[0], c[1],
			 c[2], c[3], c[4], c[5]);
		put(arg, 0, buf);
	}
	size_t o = (size_t)snprintf(buf, sizeof buf, "last results:");
	for (int i = 0; i < LAST_RESULTS && tp->recent[i].id && o < sizeof buf; i++)
		o += (size_t)snprintf(buf + o, sizeof buf - o, "  %s %s %s", tp->recent[i].when,
				      tp->recent[i].id, tp->recent[i].status);
	put(arg, 0, buf);
	put(arg, 0, "");
	put(arg, 1, header);
	for (size_t i = 0; i < tp->nrows; i++) {
		row_text(&tp->rows[i], buf, sizeof buf, now);
		put(arg, i == tp->sel ? 2 : 0, buf);
	}
	if (!tp->nrows)
		put(arg, 0, "(nothing queued or running)");
}

static void put_stdout(void *arg, int attr, const char *s)
{
	(void)arg, (void)attr;
	printf("%s\n", s);
}

struct screen {
	int y, first_row; /* the screen line of the header row's first task */
};

static void put_screen(void *arg, int attr, const char *s)
{
	struct screen *sc = arg;
	int h = LINES - 2; /* the last two: the note and the keys */
	if (sc->y >= h)
		return;
	if (attr == 1)
		attron(A_BOLD);
	if (attr == 2)
		attron(A_REVERSE);
	mvaddnstr(sc->y, 0, s, COLS);
	if (attr == 2)
		for (int x = (int)strlen(s); x < COLS; x++)
			addch(' ');
	attrset(A_NORMAL);
	sc->y++;
}

static void draw(struct top *tp)
{
	erase();
	struct screen sc = {0};
	lines(tp, put_screen, &sc);
	mvaddnstr(LINES - 2, 0, tp->note, COLS);
	attron(A_BOLD);
	mvaddnstr(LINES - 1, 0, "q quit  up/down select  c cancel  p pause  r resume  f follow output", COLS);
	attrset(A_NORMAL);
	refresh();
}

/* Run a verb of this program on the selected task, in a child (its
 * output kept for the note line), as if typed: kart VERB ID. */
static void run_verb(struct top *tp, struct ctx *c, int (*fn)(struct ctx *, int, char **),
		     const char *verb)
{
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return;
	char *id = tp->sel_id;
	pid_t pid = fork();
	if (pid == 0) {
		(void)dup2(pfd[1], 1);
		(void)dup2(pfd[1], 2);
		char *av[] = {(char *)verb, id, NULL};
		int rc = fn(c, 2, av);
		fflush(NULL);
		_exit(rc);
	}
	(void)close(pfd[1]);
	char buf[512];
	ssize_t n = pid < 0 ? -1 : read_upto(pfd[0], buf, sizeof buf - 1);
	(void)close(pfd[0]);
	int st = 0;
	if (pid > 0)
		(void)waitpid(pid, &st, 0);
	buf[n > 0 ? n : 0] = '\0';
	char *nl = strchr(buf, '\n');
	if (nl)
		*nl = '\0';
	_cleanup_free_ char *safe = obs_term(buf);
	snprintf(tp->note, sizeof tp->note, "kart %s: %s", verb, safe);
}

/* kart cat -f on the whole terminal, until the task ends or Ctrl-C. */
static void follow(struct top *tp, struct ctx *c)
{
	def_prog_mode();
	endwin();
	_cleanup_free_ char *id = obs_term(tp->sel_id);
	printf("kart top: following %s (Ctrl-C to come back)\n", id);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		signal(SIGINT, SIG_DFL);
		char *av[] = {"cat", "-f", tp->sel_id, NULL};
		int rc = cmd_cat(c, 3, av);
		fflush(NULL);
		_exit(rc);
	}
	void (*old)(int) = signal(SIGINT, SIG_IGN);
	int st;
	if (pid > 0)
		(void)waitpid(pid, &st, 0);
	signal(SIGINT, old);
	reset_prog_mode();
	refresh();
}

static int watch_dir(int ino, int dirfd, const char *name, uint32_t mask)
{
	char p[64];
	snprintf(p, sizeof p, "/proc/self/fd/%d", dirfd);
	if (!name)
		return inotify_add_watch(ino, p, mask);
	char full[700];
	if (pathfmt(full, sizeof full, "%s/%s", p, name) < 0)
		return -1;
	return inotify_add_watch(ino, full, mask);
}

#define DIR_EVENTS (IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ONLYDIR)

/* Watch every worker's claim directory (new ones as they appear). */
static void watch_workers(struct top *tp)
{
	struct strv w = {0};
	if (dir_names(tp->sp->cur, ".", &w) < 0)
		return;
	for (size_t i = 0; i < w.n; i++)
		(void)watch_dir(tp->ino, tp->sp->cur, w.v[i], DIR_EVENTS | IN_MODIFY);
	strv_free(&w);
}

/* Read the events; true if the view should be drawn again. */
static bool events(struct top *tp)
{
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool any = false;
	for (;;) {
		ssize_t n = read(tp->ino, buf, sizeof buf);
		if (n <= 0)
			break;
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;
			p += sizeof *ev + ev->len;
			any = true;
			size_t l = ev->len ? strlen(ev->name) : 0;
			if (l > 5 && ev->name[0] != '.' && strcmp(ev->name + l - 5, ".json") == 0 &&
			    (ev->mask & (IN_CREATE | IN_MOVED_TO))) {
				/* Only done/ holds NAME.json: a result landed. */
				ev->name[l - 5] = '\0';
				result_seen(tp, ev->name);
			}
		}
	}
	if (any)
		watch_workers(tp); /* a new worker's directory, if one came */
	return any;
}

static int top_screen(struct top *tp, struct ctx *c)
{
	tp->ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (tp->ino < 0) {
		fprintf(stderr, "kart top: inotify: %s\n", strerror(errno));
		return 1;
	}
	(void)watch_dir(tp->ino, tp->sp->new, NULL, DIR_EVENTS);
	(void)watch_dir(tp->ino, tp->sp->cur, NULL, DIR_EVENTS);
	(void)watch_dir(tp->ino, tp->sp->done, NULL, IN_CREATE | IN_MOVED_TO | IN_ONLYDIR);
	watch_workers(tp);
	recent_initial(tp);
	reload(tp);
	initscr();
	cbreak();
	noecho();
	keypad(stdscr, TRUE);
	nodelay(stdscr, TRUE);
	curs_set(0);
	bool confirm = false;
	int64_t drawn = 0, sampled = now_mono_ms();
	bool dirty = true;
	for (;;) {
		int64_t now = now_mono_ms();
		if (now - sampled >= 1000)
			dirty = true; /* the cgroup files, once a second */
		if (dirty && now - drawn >= 150) {
			reload(tp);
			if (tp->nrows && tp->sel < tp->nrows)
				snprintf(tp->sel_id, sizeof tp->sel_id, "%s", tp->rows[tp->sel].t.id);
			draw(tp);
			drawn = sampled = now;
			dirty = false;
		}
		struct pollfd pf[2] = {{.fd = 0, .events = POLLIN}, {.fd = tp->ino, .events = POLLIN}};
		int wait = dirty ? 150 : (int)(1000 - (now_mono_ms() - sampled));
		if (poll(pf, 2, wait < 0 ? 0 : wait) < 0 && errno != EINTR)
			break;
		if (pf[1].revents & POLLIN)
			dirty |= events(tp);
		int k;
		while ((k = getch()) != ERR) {
			if (k == KEY_RESIZE) {
				dirty = true;
				continue;
			}
			if (confirm) {
				confirm = false;
				if (k == 'y' || k == 'Y')
					run_verb(tp, c, cmd_cancel, "cancel");
				else
					snprintf(tp->note, sizeof tp->note, "not cancelled");
				dirty = true;
				drawn = 0;
				continue;
			}
			switch (k) {
			case 'q':
			case 'Q':
				endwin();
				return 0;
			case KEY_UP:
			case 'k':
				if (tp->sel > 0)
					tp->sel--;
				break;
			case KEY_DOWN:
			case 'j':
				if (tp->sel + 1 < tp->nrows)
					tp->sel++;
				break;
			case 'c':
			case 'p':
			case 'r':
			case 'f':
				if (!tp->nrows) {
					snprintf(tp->note, sizeof tp->note, "no task selected");
					break;
				}
				if (k == 'c') {
					_cleanup_free_ char *id = obs_term(tp->sel_id);
					snprintf(tp->note, sizeof tp->note, "cancel %s? (y/n)", id);
					confirm = true;
				} else if (k == 'p')
					run_verb(tp, c, cmd_pause, "pause");
				else if (k == 'r')
					run_verb(tp, c, cmd_resume, "resume");
				else
					follow(tp, c);
				break;
			}
			if (tp->nrows && tp->sel < tp->nrows)
				snprintf(tp->sel_id, sizeof tp->sel_id, "%s", tp->rows[tp->sel].t.id);
			dirty = true;
			drawn = 0;
		}
	}
	endwin();
	return 1;
}

int cmd_top(struct ctx *c, int argc, char **argv)
{
	bool once = false;
	const struct opt opts[] = {
		OPT_BOOL(0, "once", &once,
			 "print one snapshot and exit (what it does anyway without a terminal, or on "
			 "TERM=dumb)"),
		OPT_END(),
	};
	struct opts_rest rest;
	opts_parse("top", argc, argv, opts, &help, 0, &rest);
	if (rest.argc > 0)
		return usage_error("top", "unexpected argument '%s'", rest.argv[0]);
	struct top tp = {.sp = &c->sp, .ino = -1};
	const char *term = getenv("TERM");
	if (once || !isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO) || !term || !*term ||
	    strcmp(term, "dumb") == 0) {
		recent_initial(&tp);
		reload(&tp);
		/* A second look a moment later gives the CPU % a rate. */
		if (tp.ncpu) {
			usleep(300000);
			reload(&tp);
		}
		lines(&tp, put_stdout, NULL);
		return 0;
	}
	return top_screen(&tp, c);
}
