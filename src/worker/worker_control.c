/* worker_control.c - see worker_control.h. */
#define _GNU_SOURCE
#include "worker_control.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control.h"
#include "policy.h"
#include "query.h"
#include "spool.h"
#include "task.h"
#include "util.h"

bool wctl_pause_entry(const char *entry, char *name, size_t len)
{
	size_t l = strlen(entry);
	if (entry[0] != '.' || l <= 7 || strcmp(entry + l - 6, ".pause") != 0 || l - 7 >= len)
		return false;
	memcpy(name, entry + 1, l - 7);
	name[l - 7] = '\0';
	return true;
}

bool wctl_pause_wanted(int wdir, const char *name)
{
	char p[512];
	struct stat st;
	return spool_name_scratch(p, sizeof p, name, SCRATCH_PAUSE) == 0 &&
	       fstatat(wdir, p, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* SIGSTOP or SIGCONT to the whole of the run, without a freezer: each
 * process its leaf lists, passes until one finds no more (a stopped
 * process forks no more); with no leaf, its process group (backend
 * none). The weakness: what left the group, with no leaf to list it,
 * runs on; and a stopped process's parent sees it stop (waitpid
 * WUNTRACED). kart(1) says so. */
static int signal_run(const struct cg_leaf *cg, const struct run *r, int sig)
{
	if (cg->used) {
		int n = -1, m;
		for (int pass = 0; pass < 8 && (m = cg_leaf_signal(cg, sig)) != n; pass++)
			n = m;
		return n > 0 ? 0 : -ESRCH;
	}
	if (r->pgroup && r->pid > 0)
		return kill(-r->pid, sig) == 0 ? 0 : -errno;
	return -ENOTSUP;
}

int wctl_freeze(const struct cg_leaf *cg, const struct run *r)
{
	if (cg_leaf_freeze(cg, true) == 0)
		return PAUSE_FREEZE;
	int rc = signal_run(cg, r, SIGSTOP);
	return rc < 0 ? rc : PAUSE_STOP;
}

void wctl_thaw(enum pause_how how, const struct cg_leaf *cg, const struct run *r)
{
	if (how == PAUSE_FREEZE)
		(void)cg_leaf_freeze(cg, false);
	else if (how == PAUSE_STOP)
		(void)signal_run(cg, r, SIGCONT);
}

void wctl_clock_stop(struct pause_state *ps, enum pause_how how, int64_t *deadline_mono)
{
	int64_t now = now_mono_ms();
	ps->how = how;
	ps->since_mono = now;
	/* The clock stops: a paused task never times out. */
	ps->left_ms = *deadline_mono ? (*deadline_mono > now ? *deadline_mono - now : 0) : -1;
	*deadline_mono = 0;
}

void wctl_clock_start(struct pause_state *ps, int64_t *deadline_mono)
{
	if (ps->how == PAUSE_NONE)
		return;
	int64_t now = now_mono_ms();
	ps->total_ms += now - ps->since_mono;
	if (ps->left_ms >= 0)
		*deadline_mono = now + ps->left_ms;
	ps->how = PAUSE_NONE;
}

int64_t wctl_paused_ms(const struct pause_state *ps)
{
	return ps->total_ms + (ps->how != PAUSE_NONE ? now_mono_ms() - ps->since_mono : 0);
}

void wctl_ack(int wdir, const char *name, bool paused)
{
	char p[512];
	if (spool_name_scratch(p, sizeof p, name, SCRATCH_PAUSED) < 0)
		return;
	if (!paused) {
		(void)unlinkat(wdir, p, 0);
		return;
	}
	int fd = openat(wdir, p, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd >= 0)
		close(fd);
}

void wctl_refuse(int wdir, const char *name, int err)
{
	char p[512], why[256];
	if (spool_name_scratch(p, sizeof p, name, SCRATCH_NOPAUSE) < 0)
		return;
	if (err == 0) {
		(void)unlinkat(wdir, p, 0);
		return;
	}
	int n = snprintf(why, sizeof why, "%s%s\n", strerror(-err),
			 err == -EOPNOTSUPP || err == -ENOTSUP
				 ? ": the run has no cgroup leaf to freeze (a bwrap task needs cgroup.freeze "
				   "or the v1 freezer; kart doctor)"
				 : "");
	int fd = openat(wdir, p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd >= 0) {
		(void)write_all(fd, why, (size_t)(n < (int)sizeof why ? n : (int)sizeof why - 1));
		close(fd);
	}
}

bool wctl_spool_paused(int newdir)
{
	struct stat st;
	return fstatat(newdir, WCTL_SPOOL_PAUSED, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* ---- requests through a drop directory --------------------------------- */

bool wctl_drop_entry(const char *entry)
{
	return strncmp(entry, WCTL_REQ_PREFIX, strlen(WCTL_REQ_PREFIX)) == 0;
}

/* A pause, resume or cancel request for a running task: its file in the
 * claim directory of the worker running it. */
static int running_request(struct spool *sp, const char *id, const char *sfx, bool on)
{
	struct qinfo q;
	char p[600];
	int r = query_id(sp, id, &q);
	if (r < 0)
		return r;
	if (q.state != Q_RUNNING || pathfmt(p, sizeof p, "%s/.%s.%s", q.worker, query_entry(id, &q), sfx) < 0)
		return -ENOENT;
	if (!on)
		return unlinkat(sp->cur, p, 0) == 0 || errno == ENOENT ? 0 : -errno;
	int fd = openat(sp->cur, p, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

/* kart edit through a drop: the request's text replaces the queued file
 * as kart edit would (control_replace: the owner, mode and record of the
 * queued file), once checked as a task of its owner's. */
static int drop_edit(struct spool *sp, const struct policy *pol, int rfd, const char *id, uid_t uid)
{
	char held[TASK_NAME_MAX + 24];
	const char *name = id;
	_cleanup_close_ int orig = openat(sp->new, id, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (orig < 0 && errno == ENOENT && spool_held_name(id, held, sizeof held) == 0) {
		name = held;
		orig = openat(sp->new, held, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	}
	struct stat st;
	struct submitter by;
	if (orig < 0 || fstat(orig, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || (spool_submitter(orig, &st, &by), by.uid != uid))
		return -EPERM;
	/* A writer still at it (a client that did not publish by rename)
	 * holds it open: its close brings it back (IN_CLOSE_WRITE). */
	if (fcntl(rfd, F_SETLEASE, F_RDLCK) < 0) {
		if (errno == EAGAIN)
			return -EAGAIN;
	} else {
		(void)fcntl(rfd, F_SETLEASE, F_UNLCK);
	}
	struct stat rs;
	if (fstat(rfd, &rs) < 0)
		return -errno;
	if ((uint64_t)rs.st_size > pol->task_max_bytes)
		return -EFBIG;
	_cleanup_free_ char *text = xmalloc((size_t)rs.st_size + 1);
	ssize_t n = pread(rfd, text, (size_t)rs.st_size, 0);
	if (n < 0)
		return -errno;
	struct task_spec spec;
	char err[1024];
	size_t hl = (size_t)n < TASK_HEADER_MAX ? (size_t)n : TASK_HEADER_MAX;
	if (task_parse(text, hl, &spec, err, sizeof err) < 0 ||
	    task_resolve_kind(&spec, pol, id, err, sizeof err) < 0 ||
	    task_check_policy(&spec, pol, uid, err, sizeof err) < 0) {
		logmsg("%s: edit refused: %s", id, err);
		return -EINVAL;
	}
	return control_replace(sp, name, orig, text, (size_t)n);
}

void wctl_drop_request(struct spool *sp, const struct policy *pol, const char *me, int wdir,
		       int dropfd, const char *dname, uid_t uid, const char *entry)
{
	static const char *const verbs[] = {"hold", "release", "pause", "resume", "cancel", "edit"};
	const char *rest = entry + strlen(WCTL_REQ_PREFIX), *name = NULL, *verb = NULL;
	for (size_t i = 0; i < ARRAY_SIZE(verbs) && !name; i++) {
		size_t l = strlen(verbs[i]);
		if (strncmp(rest, verbs[i], l) == 0 && rest[l] == '.') {
			verb = verbs[i];
			name = rest + l + 1;
		}
	}
	char id[TASK_NAME_MAX + 80];
	const char *why;
	_cleanup_close_ int rfd = openat(dropfd, entry, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (rfd < 0)
		return; /* done already (another worker), or not a file */
	/* Every worker watching the drop sees it: one does it. The lock
	 * goes with the file's removal, so a worker that gets it after the
	 * doer's removal finds no link left. */
	if (flock(rfd, LOCK_EX | LOCK_NB) < 0 || fstat(rfd, &st) < 0 || st.st_nlink == 0)
		return;
	/* Only the drop directory's owner can make an entry in it; a file
	 * of another owner there is none of theirs to act on. */
	if (!name || fstat(rfd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != uid || st.st_nlink != 1 ||
	    task_name_check(name, &why) != 0 || pathfmt(id, sizeof id, "%s:%s", dname, name) < 0) {
		logmsg("drop/%s/%s: not a request: removed", dname, entry);
		(void)unlinkat(dropfd, entry, 0);
		return;
	}
	/* The task's own file: for a reserved id re-queued, ID.2. */
	struct qinfo q;
	const char *at = query_id(sp, id, &q) == 0 ? query_entry(id, &q) : id;
	int r = 0;
	if (strcmp(verb, "hold") == 0)
		r = control_hold(sp, at);
	else if (strcmp(verb, "release") == 0)
		r = control_release(sp, at);
	else if (strcmp(verb, "pause") == 0 || strcmp(verb, "resume") == 0)
		r = running_request(sp, id, "pause", verb[0] == 'p');
	else if (strcmp(verb, "edit") == 0)
		r = drop_edit(sp, pol, rfd, at, uid);
	else {
		/* cancel: a running task through its worker; a queued (or
		 * held) one is claimed here and finished unrun, as kart cancel
		 * does with its own claim directory. */
		r = running_request(sp, id, "cancel", true);
		if (r == -ENOENT) {
			r = spool_claim(sp, wdir, at);
			if (r == -ENOENT)
				r = spool_claim_held(sp, wdir, at);
			char newid[256];
			if (r == 0)
				r = spool_finish_unrun(sp, wdir, at, "cancelled",
						       "cancelled by kart cancel before it ran", me, newid,
						       sizeof newid);
		}
	}
	if (r == -EAGAIN)
		return; /* being written: its close rings again */
	logmsg("drop/%s: %s %s: %s", dname, verb, id, r == 0 ? "done" : strerror(-r));
	(void)unlinkat(dropfd, entry, 0);
}

void wctl_stalled(struct spool *sp, void (*fn)(const char *worker, const char *why, void *arg), void *arg)
{
	/* Only a live worker's (its .lock held): one killed while stalled
	 * leaves its note until the next worker's recovery, and speaks for
	 * no one meanwhile. */
	struct strv ids = {0};
	if (spool_live_worker_ids(sp, &ids) < 0)
		return;
	for (size_t i = 0; i < ids.n; i++) {
		char p[600];
		_cleanup_free_ char *text = NULL;
		size_t tl = 0;
		if (pathfmt(p, sizeof p, "%s/%s", ids.v[i], WCTL_STALLED) < 0 ||
		    read_file_at(sp->cur, p, 1024, &text, &tl) < 0 || !tl)
			continue;
		text[strcspn(text, "\n")] = '\0';
		fn(ids.v[i], text, arg);
	}
	strv_free(&ids);
}
