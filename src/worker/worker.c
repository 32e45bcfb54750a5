/* worker.c - one event loop (epoll over inotify, a signalfd, the timer
 * and watchdog timerfds, the helper threads' eventfds, the hooks' pidfds
 * and each backend's descriptors: enum srckind) driving each task through
 * a small state machine.
 *
 * inotify is only a doorbell: every event, an overflow and the start-up
 * all lead to looking at the directory itself. Nothing here polls: with
 * nothing running the timer is disarmed and the loop sleeps. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>

#include "worker_int.h"
#include "backend.h"
#include "caps.h"
#include "depend.h"
#include "tally.h"

static void build_seccomp(struct worker *w);

/* Results the commit thread may have queued before the loop starts no
 * more tasks (a slot is free again before its result is durable). With
 * backend none the loop can run tasks faster than one thread can fsync
 * their results: without a bound the queue, and the worker's memory
 * (about 2.5 KiB a task), would grow with the backlog in new/. */
#define COMMIT_BACKLOG_MAX 256

/* The open files the worker wants, and what it does with fewer, decided
 * at start, and again when a SIGHUP changes the slots:
 * - the slots want 16 each and 256 besides. Descriptors kept across a run
 *   (a spare's, a leaf's: scratch_dir, struct cg_files) save calls per
 *   task but hold about 6 more per running task: kept only there, else a
 *   worker of many slots under a limit of 1,024 would meet EMFILE where
 *   it did not before (and the commit thread writes one result at a
 *   time);
 * - each result waiting for the commit thread holds its output files,
 *   two descriptors: the backlog is held to what the limit leaves beside
 *   the slots, one at the least;
 * - a soft limit under all of that is raised up to the hard limit, as
 *   systemd asks of a service that needs more than its default 1,024
 *   (the hard limit there is 524,288); the tasks get the one we started
 *   with back (rl_plan.nofile), as if run directly. So the two above
 *   bite only where the hard limit is too low. */
static void fd_budget(struct worker *w)
{
	rlim_t slots = (rlim_t)16 * (rlim_t)(w->slots[LANE_FAST] + w->slots[LANE_BATCH]) + 256;
	rlim_t all = slots + 2 * COMMIT_BACKLOG_MAX;
	struct rlimit nf;
	if (getrlimit(RLIMIT_NOFILE, &nf) < 0)
		nf.rlim_cur = nf.rlim_max = 1024;
	w->fds.nofile = nf.rlim_cur;
	if (nf.rlim_cur != RLIM_INFINITY && nf.rlim_cur < all && nf.rlim_max > nf.rlim_cur) {
		rlim_t was = nf.rlim_cur;
		nf.rlim_cur = nf.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &nf) == 0) {
			w->fds.nofile = nf.rlim_cur;
			w->fds.nofile_task = was;
			if (nf.rlim_cur == RLIM_INFINITY)
				logmsg("open files limit raised from %llu to unlimited; tasks get %llu",
				       (unsigned long long)was, (unsigned long long)was);
			else
				logmsg("open files limit raised from %llu to %llu (the hard limit); "
				       "tasks get %llu",
				       (unsigned long long)was, (unsigned long long)nf.rlim_cur,
				       (unsigned long long)was);
		}
	}
	bool inf = w->fds.nofile == RLIM_INFINITY, kept = w->fds.keep;
	w->fds.keep = inf || w->fds.nofile >= slots;
	if (!w->fds.keep && (kept || !w->fds.budgeted))
		logmsg("open files limit %llu: below 16 a slot and 256 besides; no descriptors are kept "
		       "across runs and results are written one at a time (more system calls per "
		       "task)",
		       (unsigned long long)w->fds.nofile);
	w->fds.budgeted = true;
	w->fds.backlog_max = inf || w->fds.nofile >= all ? COMMIT_BACKLOG_MAX
			 : w->fds.nofile > slots + 2  ? (int)((w->fds.nofile - slots) / 2)
						  : 1;
	/* Short of descriptors, one result's files open at a time. */
	if (w->commit.h.started) {
		pthread_mutex_lock(&w->commit.h.mu);
		w->commit.writes_max = w->fds.keep ? COMMIT_WRITES_MAX : 1;
		pthread_mutex_unlock(&w->commit.h.mu);
	}
}

/* The one hand-back from a thread to the loop (its eventfd was
 * written): each task it has done with gets its event, oldest first,
 * then what a slot or a claim freed allows is started. */
void helper_done(struct worker *w, struct helper *h)
{
	uint64_t x;
	(void)!read(h->efd, &x, sizeof x);
	pthread_mutex_lock(&h->mu);
	struct task *list = h->done;
	h->done = NULL;
	pthread_mutex_unlock(&h->mu);
	struct task *rev = NULL;
	for (struct task *t = list, *nx; t; t = nx) {
		nx = t->back.next;
		t->back.next = rev;
		rev = t;
	}
	for (struct task *t = rev, *nx; t; t = nx) {
		nx = t->back.next;
		task_event(w, t, t->back.ev);
	}
	(void)notify_statusf("%d running", w->nrunning);
	/* A task of the same name may wait for this one's claim to go. */
	undefer(w);
	dispatch(w);
}

/* ---- time ------------------------------------------------------------------- */

/* The loop's one timer, set before each wait to the earliest deadline any
 * part of the worker holds (each keeps its own and is asked here), as
 * s6-supervise computes its deadline before each poll: a file that
 * changes a deadline does not arm the timer itself. */
static void arm_timer(struct worker *w)
{
	int64_t next = 0;
#define EARLIER(x) \
	do { \
		if ((x) && (!next || (x) < next)) \
			next = (x); \
	} while (0)
	for (struct task *t = w->tasks; t; t = t->next) {
		if (t->state == TS_RUNNING || t->state == TS_STOPPING)
			EARLIER(t->deadline_mono);
		if (t->state == TS_PUBLISHING || t->state == TS_DRAINING || t->state == TS_DYING)
			EARLIER(t->retry_mono);
	}
	if (w->stopping && (w->nrunning || w->tasks))
		EARLIER(w->grace_mono);
	EARLIER(w->peers.recover_mono);
	EARLIER(w->busy.mono);
	EARLIER(w->space_mono);
	EARLIER(w->quota_mono);
	EARLIER(sched_next_mono(w));
	EARLIER(backend_next_mono(w));
#undef EARLIER
	struct itimerspec its = {0};
	if (next) {
		its.it_value.tv_sec = next / 1000;
		its.it_value.tv_nsec = (next % 1000) * 1000000;
	}
	/* Nothing pending: disarmed, and an idle worker sleeps for good.
	 * Several calls per task compute the same time: set it once. */
	if (next == w->timer_at)
		return;
	w->timer_at = next;
	(void)timerfd_settime(w->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void on_timer(struct worker *w)
{
	uint64_t x;
	if (read(w->tfd, &x, sizeof x) < 0 && errno != EAGAIN)
		logmsg("timerfd: %s", strerror(errno));
	w->timer_at = 0; /* it fired: disarmed (arm_timer sets it again before the wait) */
	int64_t now = now_mono_ms();
	for (struct task *t = w->tasks, *nx; t; t = nx) {
		nx = t->next;
		if ((t->state == TS_RUNNING || t->state == TS_STOPPING) && t->deadline_mono &&
		    t->deadline_mono <= now)
			task_event(w, t, TE_TIMEOUT);
		else if ((t->state == TS_PUBLISHING || t->state == TS_DRAINING || t->state == TS_DYING) &&
			 t->retry_mono <= now)
			task_event(w, t, TE_AGAIN);
	}
	if (w->stopping && w->grace_mono && w->grace_mono <= now) {
		for (struct task *t = w->tasks, *nx; t; t = nx) {
			nx = t->next; /* an abandoned task is freed */
			task_event(w, t, TE_GRACE_OVER);
		}
		w->grace_mono = 0;
	}
	if (w->peers.recover_mono && w->peers.recover_mono <= now) {
		w->peers.recover_mono = 0;
		recover_own(w);
		scan_peers(w);
	}
	if (w->busy.mono && w->busy.mono <= now) {
		busy_recheck(w);
		dispatch(w);
	}
	if (w->space_mono && w->space_mono <= now)
		dispatch(w);
	if (w->quota_mono && w->quota_mono <= now)
		quota_scan(w);
	if (sched_ring(w))
		dispatch(w);
	backend_tick(w, now);
}

/* ---- inotify and signals -------------------------------------------------- */

static void on_inotify(struct worker *w)
{
	char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool rescan = false, peers = false;
	for (bool more = true; more;) {
		ssize_t n = read(w->ino, buf, sizeof buf);
		if (n <= 0)
			break;
		/* Room was left for another event: the queue was empty (and
		 * the fd is level-triggered: what comes later wakes us). */
		more = (size_t)n > sizeof buf - sizeof(struct inotify_event) - NAME_MAX - 1;
		/* A change in /etc first: a task these events start must not
		 * get a held file that was replaced before them. */
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;
			p += sizeof *ev + ev->len;
			if (w->wd_etc >= 0 && (ev->wd == w->wd_etc || (ev->mask & IN_Q_OVERFLOW)))
				etc_gen++; /* (without a watch it stays -1) */
		}
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;
			p += sizeof *ev + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) {
				rescan = peers = true;
				continue;
			}
			struct drop *dd = w->ndrops ? drop_find(w, NULL, ev->wd) : NULL;
			if (dd) {
				if (ev->mask & (IN_MOVE_SELF | IN_DELETE_SELF | IN_IGNORED))
					drop_forget(w, dd);
				else if (ev->len && !rescan) {
					w->busy.seen = false;
					drop_entry(w, dd, ev->name);
					if (w->busy.seen && (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO)))
						busy_arm(w);
				}
				continue;
			}
			if (ev->len && ev->wd == w->wd_drop) {
				if (!rescan)
					drop_seen(w, ev->name);
				continue;
			}
			struct task *dt = ev->len ? NULL : drain_event(w, ev->wd);
			if (dt) {
				task_event(w, dt, TE_AGAIN);
				continue;
			}
			if (!ev->len)
				continue;
			if (ev->wd == w->after.wd_done) {
				dep_result(w, ev->name);
			} else if (ev->wd == w->wd_new && strcmp(ev->name, WCTL_SPOOL_PAUSED) == 0) {
				scan_pauses(w);
			} else if (ev->wd == w->wd_new) {
				if (!rescan && !(ev->mask & IN_DELETE)) {
					w->busy.seen = false;
					consider(w, ev->name);
					if (w->busy.seen && (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO)))
						busy_arm(w);
				}
			} else if (ev->wd == w->wd_tmp) {
				if (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO))
					quota_note(w); /* a member's bytes, on a shared spool */
				else if (w->nbusy) /* a link() publisher's tmp/ name went */
					busy_arm(w);
			} else if (ev->wd == w->wd_wdir) {
				char name[NAME_MAX + 1];
				char pn[TASK_NAME_MAX + 1];
				if (spool_scratch_of(ev->name, SCRATCH_CANCEL, name, sizeof name)) {
					struct task *t = find_task(w, name);
					if (t)
						task_event(w, t, TE_CANCEL);
				} else if (wctl_pause_entry(ev->name, pn, sizeof pn)) {
					struct task *t = find_task(w, pn);
					if (t)
						task_pause_look(w, t);
				}
			} else if (ev->wd == w->wd_cur) {
				watch_peer(w, ev->name);
			} else if (strcmp(ev->name, ".lock") == 0) {
				for (size_t i = 0; i < w->peers.n; i++)
					if (w->peers.v[i].wd == ev->wd)
						recover_peer(w, w->peers.v[i].name);
			}
		}
	}
	if (rescan) {
		scan_new(w);
		scan_drops(w);
		scan_cancels(w);
		dep_recheck(w);
		scan_pauses(w);
	}
	if (peers)
		scan_peers(w);
	dispatch(w);
}

static void begin_stop(struct worker *w, const char *why)
{
	if (w->stopping) {
		/* A second request: no more grace. */
		w->grace_mono = now_mono_ms();
	} else {
		w->stopping = true;
		w->grace_mono = now_mono_ms() + (int64_t)w->pol->term_grace_s * 1000;
		/* A paused task would not finish in the grace: killed and
		 * queued again now, thawed first (task_event). A run that goes
		 * on without the worker is left going (backend.h detach). */
		backend_stopping_all(w);
		for (struct task *t = w->tasks, *nx; t; t = nx) {
			nx = t->next;
			if (t->be->detach)
				task_event(w, t, TE_DETACH);
			else if (t->pause.how != PAUSE_NONE)
				task_event(w, t, TE_GRACE_OVER);
		}
		logmsg("%s: no more claims; %d running task(s) get %ds to finish", why, w->nrunning,
		       w->pol->term_grace_s);
		(void)notify_send("STOPPING=1");
	}
}

struct env_gap {
	char names[512];
	size_t len;
};

static void env_gap_add(const char *name, const char *where, void *arg)
{
	struct env_gap *g = arg;
	(void)where;
	if (getenv(name))
		return;
	/* Two kinds may name one variable: say it once. */
	size_t n = strlen(name);
	for (const char *p = g->names; (p = strstr(p, name)); p += n)
		if ((p == g->names || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
			return;
	int k = snprintf(g->names + g->len, sizeof g->names - g->len, "%s%s", g->len ? " " : "", name);
	if (k > 0 && (size_t)k < sizeof g->names - g->len)
		g->len += (size_t)k;
}

/* The policy passes these from our environment, which is the one we
 * started with: a reload cannot give us a variable, so say which lack. */
static void log_env_missing(const struct policy *pol, const char *when)
{
	struct env_gap g = {.len = 0};
	g.names[0] = '\0';
	policy_env_names(pol, env_gap_add, &g);
	if (g.len)
		logmsg("%s: the policy passes variables this worker's environment lacks: %s (they "
		       "come from the worker's environment at its start: set them there and "
		       "restart it; kart doctor lists them)", when, g.names);
}

static void on_signal(struct worker *w)
{
	struct signalfd_siginfo si;
	while (read(w->sig, &si, sizeof si) == sizeof si) {
		switch (si.ssi_signo) {
		case SIGTERM:
		case SIGINT:
			begin_stop(w, si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
			break;
		case SIGHUP: {
			struct policy np;
			char err[600];
			policy_forget();
			if (policy_load(&np, w->sp->path, err, sizeof err) < 0) {
				logmsg("SIGHUP: policy NOT reloaded, the previous one stays in force: %s",
				       err);
				break;
			}
			/* The launcher and the sandbox program were resolved at
			 * start-up, from the worker's own PATH: a reload does not
			 * move them (a bwrap still unresolved, under another
			 * backend then, is resolved now). */
			memcpy(np.bwrap, w->pol->bwrap, sizeof np.bwrap);
			memcpy(np.launcher, w->pol->launcher, sizeof np.launcher);
			if (policy_prepare(&np, w->sp->path, err, sizeof err) < 0) {
				logmsg("SIGHUP: policy NOT reloaded, the previous one stays in force: %s",
				       err);
				break;
			}
			*w->pol = np;
			/* The next tasks start under it; each running one keeps
			 * its own (t->be). */
			w->be = backend_use(w, np.backend);
			w->sp->results_group = np.results_group;
			w->held_stale = true;
			for (int l = 0; l < LANE__N; l++)
				if (w->opts->slots[l] == 0)
					w->slots[l] = np.slots[l];
			quota_policy(w);
			logmsg("SIGHUP: policy reloaded (backend %s, slots fast=%d batch=%d)",
			       backend_name(np.backend), w->slots[0], w->slots[1]);
			spool_tally_slots(w->sp, w->slots, LANE__N);
			log_env_missing(w->pol, "SIGHUP");
			enforce_publish(w);
			/* More slots may want more descriptors than at start. */
			fd_budget(w);
			/* No policy setting shapes the filter: rebuilt only if it failed. */
			if (!w->flt.whole.bpf)
				build_seccomp(w);
			dispatch(w);
			break;
		}
		default:
			break;
		}
	}
}

static bool only_lock_left(int wdir)
{
	DIR *d = opendir_at(wdir, ".");
	if (!d)
		return false;
	bool only = true;
	struct dirent *de;
	while (only && (de = readdir(d)))
		only = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		       strcmp(de->d_name, ".lock") == 0;
	closedir(d);
	return only;
}

static bool idle_and_empty(struct worker *w)
{
	return w->nrunning == 0 && !w->tasks && w->heap[0].n == 0 && w->heap[1].n == 0 &&
	       w->nbusy == 0 && w->ndeferred == 0 && w->peers.nown == 0 && w->ncommit == 0 &&
	       w->sched.h.n == 0 &&
	       depwait_count(w->after.wait) == 0 &&
	       !w->peers.recover_mono; /* a dead peer's claim waits for its old run to go */
}

/* A filter that cannot be built is logged once and refuses every task
 * (refusal seccomp_failed) until a SIGHUP builds it. */
static void build_seccomp(struct worker *w)
{
	int r = seccomp_prog_build(&w->flt.whole, w->flt.err, sizeof w->flt.err);
	if (r < 0)
		logmsg("seccomp: the filter could not be built, every task will be refused: %s",
		       w->flt.err);
	else
		logmsg("seccomp: %d rules, %zu instructions", w->flt.whole.nrules, w->flt.whole.len / 8);
	char err[256];
	if (r == 0 && !w->flt.inner.bpf &&
	    seccomp_prog_build_split(&w->flt.outer, &w->flt.inner, err, sizeof err) < 0) {
		seccomp_prog_free(&w->flt.outer);
		logmsg("seccomp: no split filter (%s): each task loads the whole program", err);
	}
	w->flt.fp_whole = seccomp_prog_fprog(&w->flt.whole);
	w->flt.fp_outer = seccomp_prog_fprog(&w->flt.outer);
	w->flt.fp_inner = seccomp_prog_fprog(&w->flt.inner);
	if (!w->flt.json && !(w->flt.json = seccomp_profile_json()))
		logmsg("seccomp: the container profile could not be made");
}

/* What the worker still holds when it stops: freed, so that valgrind
 * (make check-valgrind) reports only memory lost while it ran. */
static void worker_release(struct worker *w)
{
	depwait_free(w->after.wait);
	dep_cache_free(w->after.cache);
	for (int l = 0; l < LANE__N; l++) {
		for (size_t i = 0; i < w->heap[l].n; i++)
			free(w->heap[l].v[i].name);
		free(w->heap[l].v);
	}
	strset_free(&w->known);
	for (size_t i = 0; i < w->peers.n; i++)
		free(w->peers.v[i].name);
	free(w->peers.v);
	for (size_t i = 0; i < w->peers.nown; i++)
		free(w->peers.own[i]);
	free(w->peers.own);
	for (size_t i = 0; i < w->ndeferred; i++)
		free(w->deferred[i]);
	free(w->deferred);
	hooks_release(w);
	seccomp_prog_free(&w->flt.whole);
	seccomp_prog_free(&w->flt.outer);
	seccomp_prog_free(&w->flt.inner);
	free(w->flt.json);
	w->flt.json = NULL;
}

/* The loop's descriptors, and the watches: the watch first, then the
 * scans (setup_recover), so that nothing that lands in between can be
 * missed. */
static void setup_loop(struct worker *w)
{
	char p[PATH_MAX];
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGIO); /* lease breaks: never the default (fatal) action */
	sigaddset(&mask, SIGPIPE);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		die("sigprocmask: %s", strerror(errno));
	sigdelset(&mask, SIGIO);
	sigdelset(&mask, SIGPIPE);
	w->sig = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	w->ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	w->ep = epoll_create1(EPOLL_CLOEXEC);
	w->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (w->sig < 0 || w->ino < 0 || w->ep < 0 || w->tfd < 0)
		die("event loop set-up: %s", strerror(errno));

	if (pathfmt(p, sizeof p, "%s/new", w->sp->path) < 0 ||
	    (w->wd_new = inotify_add_watch(w->ino, p, IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE |
							     IN_ONLYDIR | IN_DONT_FOLLOW)) < 0)
		die("inotify watch on %s: %s", p, strerror(errno));
	new_mode(w);
	w->wd_drop = -1;
	hoist_lock_open(w);
	if (w->sp->drop >= 0 && w->new_shared)
		logmsg("new/ is writable by others than its owner: files there not owned by root or "
		       "new/'s owner are rejected, and drop/ is not looked at; make new/ 0755 "
		       "(see kart.tmpfiles)");
	else if (w->sp->drop >= 0 &&
		 (pathfmt(p, sizeof p, "%s/drop", w->sp->path) < 0 ||
		  (w->wd_drop = inotify_add_watch(w->ino, p, IN_CREATE | IN_MOVED_TO | IN_ONLYDIR |
								   IN_DONT_FOLLOW)) < 0))
		die("inotify watch on %s: %s", p, strerror(errno));
	/* On a shared spool also what members leave there (quota_note). */
	if (pathfmt(p, sizeof p, "%s/tmp", w->sp->path) < 0 ||
	    (w->wd_tmp = inotify_add_watch(w->ino, p, IN_DELETE | IN_MOVED_FROM | IN_ONLYDIR |
							     (w->wd_drop >= 0 ? IN_CLOSE_WRITE | IN_MOVED_TO : 0))) < 0)
		die("inotify watch on %s: %s", p, strerror(errno));
	if (pathfmt(p, sizeof p, "%s/cur/%s", w->sp->path, w->id) < 0 ||
	    (w->wd_wdir = inotify_add_watch(w->ino, p, IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_ONLYDIR)) < 0)
		die("inotify watch on %s: %s", p, strerror(errno));
	if (pathfmt(p, sizeof p, "%s/cur", w->sp->path) < 0 ||
	    (w->wd_cur = inotify_add_watch(w->ino, p, IN_CREATE | IN_MOVED_TO | IN_ONLYDIR)) < 0)
		die("inotify watch on %s: %s", p, strerror(errno));

	/* Held files of /etc (held_get) are good while this says nothing. */
	/* And the accounts are looked up again only after a change there
	 * (acct_get): IN_MODIFY too, for a file written in place. */
	w->wd_etc = inotify_add_watch(w->ino, "/etc",
				     IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY |
					     IN_ONLYDIR);
	etc_gen = w->wd_etc >= 0 ? 0 : -1;
	if (w->wd_etc < 0)
		logmsg("no inotify watch on /etc (%s): each task's child opens its files", strerror(errno));

	w->s_ino = (struct src){SRC_INOTIFY, NULL};
	w->s_sig = (struct src){SRC_SIGNAL, NULL};
	w->s_timer = (struct src){SRC_TIMER, NULL};
	ep_add(w, w->ino, &w->s_ino);
	ep_add(w, w->sig, &w->s_sig);
	ep_add(w, w->tfd, &w->s_timer);
}

/* Start-up is done: compile the tasks' filter once, then give up every
 * capability the work from here on does not need. */
static void setup_privileges(struct worker *w)
{
	build_seccomp(w);
	unsigned long long kept;
	char cerr[256];
	if (caps_drop_worker(&kept, cerr, sizeof cerr) < 0)
		die("dropping capabilities: %s", cerr);
	if (kept) {
		char names[512];
		caps_mask_names(kept, names, sizeof names);
		logmsg("capabilities kept: %s", names);
	}
	/* What a task's child must drop from the bounding set (confine.c). */
	for (int c = 0; c < 64; c++) {
		int in = prctl(PR_CAPBSET_READ, c, 0, 0, 0);
		if (in < 0)
			break;
		if (in == 1)
			w->bset |= 1ULL << c;
	}
}

/* What dead workers left running in their cgroups first (and what its
 * backend's earlier life of this worker left), then our own claims
 * from an earlier life under this id, then dead peers', then the
 * queue. */
static void setup_recover(struct worker *w)
{
	sweep_leaves(w);
	w->be = backend_use(w, w->pol->backend);
	/* Before any task has a leaf: the probe makes leaves of its own. */
	enforce_publish(w);
	scratch_spares_drop(w);
	_cleanup_close_ int d = openat(w->wdir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = d >= 0 ? fdopendir(d) : NULL;
	struct dirent *de;
	if (dir) {
		d = -1;
		while ((de = readdir(dir))) {
			if (de->d_name[0] == '.')
				continue;
			w->peers.own = xrealloc(w->peers.own, (w->peers.nown + 1) * sizeof(char *));
			w->peers.own[w->peers.nown++] = xstrdup(de->d_name);
		}
		closedir(dir);
	}
	recover_own(w);
	scan_peers(w);
	scan_drops(w);
	scan_pauses(w);
	scan_new(w);
}

/* Set-up: the claim directory and its lock, the loop, the privileges
 * given up, recovery, then the threads and the first claims. */
static void worker_setup(struct worker *w)
{
	const struct worker_opts *opts = w->opts;
	w->sp->results_group = w->pol->results_group;
	w->after.wait = depwait_new();
	w->after.cache = dep_cache_new();
	w->after.wd_done = -1;
	w->wdog = -1;
	for (int l = 0; l < LANE__N; l++)
		w->slots[l] = opts->slots[l] > 0 ? opts->slots[l] : w->pol->slots[l];
	quota_policy(w);
	fd_budget(w);

	int r = spool_worker_open(w->sp, w->id, &w->wdir, &w->lockfd);
	if (r == -EBUSY)
		die("worker id '%s' is in use by a live worker (cur/%s/.lock is held)", w->id, w->id);
	if (r < 0)
		die("cannot open cur/%s/: %s", w->id, strerror(-r));
	spool_tally_slots(w->sp, w->slots, LANE__N);
	setup_loop(w);
	setup_privileges(w);
	setup_recover(w);
	logmsg("worker %s on %s: backend %s, slots fast=%d batch=%d", w->id, w->sp->path,
	       backend_name(w->pol->backend), w->slots[0], w->slots[1]);
	if (w->pol->shared)
		logmsg("shared spool: each member runs %d task(s) here at once at most (slots_per_user; "
		       "0: no bound), each for %lld s at most (timeout_max; -1: no bound)",
		       w->pol->slots_per_user, (long long)w->pol->timeout_max_s);
	quota_note(w);
	log_env_missing(w->pol, "start");
	(void)notify_send("READY=1\nSTATUS=waiting for tasks");
	w->s_wdog = (struct src){SRC_WATCHDOG, NULL};
	if ((w->wdog = notify_watchdog_fd()) >= 0)
		ep_add(w, w->wdog, &w->s_wdog);
	/* Before the threads: the holder is forked (outdir.h). */
	char oerr[256];
	w->ons = (struct outdir_ns)OUTDIR_NS_INIT;
	if (outdir_ns_start(&w->ons, oerr, sizeof oerr) < 0)
		logmsg("$KART_OUTDIR cannot be bounded while tasks run (%s): it is measured "
		       "when each ends", oerr);
	/* After the capabilities were dropped: they are per thread, and the
	 * commit thread inherits what the loop kept. */
	commit_start(w);
	spawner_start(w);
	leaves_start(w);
	dispatch(w);
}

/* One wait's events. Exits last: finishing frees a task that other
 * events of this batch may still name (so the second pass reads no
 * src). */
static void worker_turn(struct worker *w, const struct epoll_event *evs, int n)
{
	struct task *exited[32];
	int nexited = 0;
	for (int i = 0; i < n; i++) {
		struct src *s = evs[i].data.ptr;
		switch (s->kind) {
		case SRC_INOTIFY: on_inotify(w); break;
		case SRC_SIGNAL: on_signal(w); break;
		case SRC_TIMER: on_timer(w); break;
		case SRC_WATCHDOG: notify_watchdog(w->wdog); break;
		case SRC_BACKEND:
			if (s->be->ready(w, s, evs[i].events) && s->t)
				exited[nexited++] = s->t;
			break;
		case SRC_HOOK: hook_done(w, s); break;
		case SRC_HELPER:
			helper_done(w, (struct helper *)((char *)s - offsetof(struct helper, src)));
			break;
		}
	}
	for (int i = 0; i < nexited; i++)
		task_event(w, exited[i], TE_EXIT);
}

/* The loop, until the stop has nothing left to wait for, or a drain
 * finds nothing to do. */
static void worker_run(struct worker *w)
{
	for (;;) {
		if (w->freed) {
			/* A slot the state table freed since the last look. */
			w->freed = false;
			undefer(w);
			dispatch(w);
		}
		if (w->stopping && w->nrunning == 0 && !w->tasks && !w->ncommit)
			return;
		if (w->drain && idle_and_empty(w)) {
			/* Events may still be in flight: look once more. */
			scan_drops(w);
			scan_new(w);
			dispatch(w);
			if (idle_and_empty(w))
				return;
		}
		hooks_sweep(w);
		arm_timer(w);
		struct epoll_event evs[32];
		int n = epoll_wait(w->ep, evs, 32, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("epoll_wait: %s", strerror(errno));
		}
		worker_turn(w, evs, n);
	}
}

/* The stop: the threads joined, the holder, the hooks, spares and
 * leaves gone. Leave nothing behind: our claim directory goes if it is
 * empty. A claim still in it (a re-queue that failed) keeps the .lock,
 * which our exit unlocks: that is what lets a peer recover it
 * (spool-layout WORKER §9). */
static void worker_stop(struct worker *w)
{
	spawner_stop(w);
	commit_stop(w);
	backend_stop_all(w);
	outdir_ns_stop(&w->ons);
	hooks_finish(w);
	scratch_spares_drop(w);
	leaves_drop();
	held_drop();
	if (w->wdog >= 0)
		close(w->wdog);
	enforce_withdraw(w);
	if (only_lock_left(w->wdir)) {
		(void)unlinkat(w->wdir, ".lock", 0);
		if (unlinkat(w->sp->cur, w->id, AT_REMOVEDIR) < 0 && errno != ENOENT &&
		    errno != ENOTEMPTY)
			logmsg("cannot remove cur/%s: %s", w->id, strerror(errno));
	} else
		logmsg("cur/%s still holds claims: left for recovery", w->id);
	logmsg("worker %s stopped", w->id);
	worker_release(w);
}

int worker_main(struct spool *sp, struct policy *pol, const struct worker_opts *opts)
{
	struct worker w = {.sp = sp, .pol = pol, .id = opts->id, .drain = opts->drain, .opts = opts};
	worker_setup(&w);
	worker_run(&w);
	worker_stop(&w);
	return 0;
}
