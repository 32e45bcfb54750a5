/* worker_queue.c - queued tasks: what new/ holds, claiming,
 * deferral, names still busy. */
#define _GNU_SOURCE
#include <fcntl.h>

#include "worker_int.h"
#include "space.h"

/* Take an entry of new/ that is not a runnable task (hostile, invalid)
 * and give it its `rejected` result. Rejection takes no slot. */
static void reject_from_new(struct worker *w, const char *name, const char *why)
{
	finish_from_new(w, name, "rejected", why);
}

/* Busy names are looked at again by then, at the latest. */
static void busy_by(struct worker *w, int64_t mono)
{
	if (!w->busy.mono || mono < w->busy.mono)
		w->busy.mono = mono;
}

/* How long a second link may stand before it is taken for a hard link
 * from elsewhere: a link() publish keeps one until its writer unlinks
 * the staging name, wherever that is (spool-layout README §5, WORKER §2). */
#define LINK_GRACE_MS 2000

/* dirfd/NAME (an entry of new/ or of a drop directory) has two links.
 * link() and unlink() both set the file's ctime, so a second link made
 * less than LINK_GRACE_MS ago is a publish in progress: busy, and looked
 * at again then by the busy timer, whatever events come or not. One that
 * has stood longer is busy while its other name is in tmp/ (a slow
 * writer: a deletion there rings), else a hard link from elsewhere,
 * rejected; but the writer may unlink at any moment of the scan of
 * tmp/, so the inode, held by an O_PATH descriptor, is looked at again
 * after it: a count or a ctime that moved means look afresh. A tmp/ that
 * cannot be read leaves it busy, never rejected. */
void link_publish_look(struct worker *w, int dirfd, const char *name, struct inspect *ins)
{
	for (int round = 0; round < 3 && ins->kind == INSPECT_REJECT && ins->nlink == 2; round++) {
		_cleanup_close_ int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		struct stat st, after;
		if (fd < 0 || fstat(fd, &st) < 0) {
			ins->kind = errno == ENOENT ? INSPECT_GONE : INSPECT_BUSY;
			return;
		}
		if (st.st_dev == ins->dev && st.st_ino == ins->ino && st.st_nlink == 2) {
			int64_t ct = (int64_t)st.st_ctim.tv_sec * 1000 + st.st_ctim.tv_nsec / 1000000;
			int64_t quiet = ct + LINK_GRACE_MS - now_realtime_ms();
			/* (Further ahead: the clock was set back; not waited for.) */
			if (quiet > 0 && quiet <= LINK_GRACE_MS) {
				ins->kind = INSPECT_BUSY;
				busy_by(w, now_mono_ms() + quiet);
				return;
			}
			int r = spool_tmp_holds(w->sp, st.st_dev, st.st_ino);
			if (r != 0) {
				if (r < 0)
					logmsg("%s: cannot read tmp/ (%s): held as busy", name,
					       strerror(-r));
				ins->kind = INSPECT_BUSY;
				return;
			}
			if (fstat(fd, &after) < 0) {
				ins->kind = INSPECT_BUSY;
				return;
			}
			if (after.st_nlink == 2 && after.st_ctim.tv_sec == st.st_ctim.tv_sec &&
			    after.st_ctim.tv_nsec == st.st_ctim.tv_nsec)
				return; /* rejected: the other link is not a publish */
		}
		task_inspect(dirfd, name, w->pol, ins);
	}
}

/* Look at one entry of new/ and file it. */

void consider(struct worker *w, const char *name)
{
	if (name[0] == '/') { /* "/DROP/NAME": an entry of a drop directory */
		drop_key(w, name);
		return;
	}
	enum kstate ks = strset_get(&w->known, name);
	if (ks == K_QUEUED || ks == K_DEFERRED || ks == K_WAITING)
		return;
	if (ks == K_SCHEDULED) {
		/* A doorbell on a name that waits for its time: its file may
		 * say another time now (an edit, a release, another file moved
		 * in under the name). Forgotten, and looked at afresh. */
		sched_queue_forget(&w->sched, name);
		strset_del(&w->known, name);
		ks = 0;
	}
	struct inspect ins;
	task_inspect(w->sp->new, name, w->pol, &ins);
	if (ins.kind == INSPECT_REJECT && ins.nlink == 2)
		link_publish_look(w, w->sp->new, name, &ins);
	switch (ins.kind) {
	case INSPECT_IGNORE:
		return;
	case INSPECT_GONE:
		if (ks == K_BUSY) {
			strset_del(&w->known, name);
			w->nbusy--;
		}
		return;
	case INSPECT_BUSY:
		if (ks != K_BUSY) {
			strset_put(&w->known, name, K_BUSY);
			w->nbusy++;
		}
		w->busy.seen = true;
		return;
	case INSPECT_REJECT:
		if (ks == K_BUSY) {
			strset_del(&w->known, name);
			w->nbusy--;
		}
		reject_from_new(w, name, ins.error);
		return;
	case INSPECT_OK:
		break;
	}
	/* Where others may write new/, anyone could have moved in a file
	 * of anyone's: only root's and new/'s owner's are taken (a member
	 * drops into drop/USER/, from where the worker moves it here). */
	if (w->new_shared && ins.uid != 0 && ins.uid != w->new_uid) {
		if (ks == K_BUSY) {
			strset_del(&w->known, name);
			w->nbusy--;
		}
		reject_from_new(w, name,
				"new/ is writable by others than its owner, so who put this file there "
				"cannot be known, and it would run as its owner: drop it into "
				"drop/USER/ (or use kart submit)");
		return;
	}
	/* USER:NAME came from drop/USER/ and is USER's, or was claimed from
	 * there for rejection and re-queued by a recovery: never run as
	 * someone else. */
	if (w->sp->drop >= 0 && strchr(name, ':') && !spool_prefix_owner_ok(name, ins.uid)) {
		if (ks == K_BUSY) {
			strset_del(&w->known, name);
			w->nbusy--;
		}
		reject_from_new(w, name,
				"the task came from the drop directory of another user than its "
				"file's owner: a task runs only as the user who dropped it");
		return;
	}
	if (ks == K_BUSY)
		w->nbusy--;
	if (ins.spec.n_after && !deps_ready(w, name, &ins))
		return; /* waiting, skipped or rejected (worker_wait.c) */
	if (sched_consider(w, name, &ins))
		return;
	strset_put(&w->known, name, K_QUEUED);
	prioq_push(&w->heap[ins.spec.lane], (struct cand){.name = xstrdup(name),
							 .prio = cand_priority(w, name, &ins),
							 .turn = fair_turn(&w->fair, ins.uid),
							 .arrived_ms = ins.arrived_ms,
							 .seq = w->seq++,
							 .uid = ins.uid});
}

struct seen {
	char *name;
	struct timespec ct;
};

static int seen_cmp(const void *a, const void *b)
{
	const struct seen *x = a, *y = b;
	if (x->ct.tv_sec != y->ct.tv_sec)
		return x->ct.tv_sec < y->ct.tv_sec ? -1 : 1;
	if (x->ct.tv_nsec != y->ct.tv_nsec)
		return x->ct.tv_nsec < y->ct.tv_nsec ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Is new/ writable by others than its owner (a shared spool without the
 * drop layout, or one set up by hand)? Then no one can tell who put a
 * file there, and consider runs none but its owner's or root's. */
void new_mode(struct worker *w)
{
	struct stat st;
	if (fstat(w->sp->new, &st) == 0) {
		w->new_shared = (st.st_mode & 022) != 0;
		w->new_uid = st.st_uid;
	}
}

void scan_new(struct worker *w)
{
	new_mode(w);
	_cleanup_close_ int d = openat(w->sp->new, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = d >= 0 ? fdopendir(d) : NULL;
	if (!dir) {
		logmsg("scan new/: %s", strerror(errno));
		return;
	}
	d = -1;
	/* In order of arrival: each is given its submitter's next turn
	 * (fair_turn), so one user's tasks keep their order among themselves. */
	struct seen *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(dir))) {
		if (de->d_name[0] == '.') {
			if (strncmp(de->d_name, ".hoist.", 7) == 0)
				hoist_finish(w, de->d_name); /* a move from drop/ cut short */
			continue;
		}
		struct stat st;
		if (fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			st.st_ctim = (struct timespec){0, 0}; /* gone, or not ours to know: consider says */
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			v = xrealloc(v, cap * sizeof *v);
		}
		v[n++] = (struct seen){xstrdup(de->d_name), st.st_ctim};
	}
	closedir(dir);
	sort_n(v, n, sizeof *v, seen_cmp);
	for (size_t i = 0; i < n; i++) {
		consider(w, v[i].name);
		free(v[i].name);
	}
	free(v);
	dep_scanned(w);
}

#define BUSY_RECHECK_FIRST_MS 2
#define BUSY_RECHECK_STEPS 10 /* 2 ms doubling: the last look ~1 s after the event */

/* An event left a name busy: look again soon, then less often. */
void busy_arm(struct worker *w)
{
	w->busy.step = 0;
	w->busy.mono = now_mono_ms() + BUSY_RECHECK_FIRST_MS;
}

void busy_recheck(struct worker *w)
{
	size_t n = 0;
	char **names = xcalloc(w->nbusy ? w->nbusy : 1, sizeof *names);
	for (size_t i = 0; i < w->known.nb; i++)
		for (struct strset_ent *e = w->known.b[i]; e; e = e->next)
			if (e->st == K_BUSY && n < w->nbusy)
				names[n++] = xstrdup(e->name);
	w->busy.seen = false;
	w->busy.mono = 0; /* a second link's wait sets its own (link_publish_look) */
	for (size_t i = 0; i < n; i++) {
		consider(w, names[i]);
		free(names[i]);
	}
	free(names);
	if (w->busy.seen && ++w->busy.step < BUSY_RECHECK_STEPS)
		busy_by(w, now_mono_ms() + ((int64_t)BUSY_RECHECK_FIRST_MS << w->busy.step));
}

/* Fill free slots from the candidates, best first. */
/* Tasks of uid holding a slot (spawning, running, or draining with its
 * slot not yet given back). */
static int user_running(const struct worker *w, uid_t uid)
{
	int n = 0;
	for (const struct task *t = w->tasks; t; t = t->next)
		if (t->uid == uid && task_holds_slot(t))
			n++;
	return n;
}

/* [limits] slots_per_user: a candidate whose submitter has that many
 * running waits in capped (dispatch puts it back), and the next one is
 * looked at; so does one of a member over their share of the disk while
 * the spool is below min_free (low_share, worker_quota.c). Past
 * CAPPED_MAX set aside, the lane waits for this round: a queue of one
 * user's thousands is not sorted again on every dispatch. */
#define CAPPED_MAX 256
static bool user_at_cap(struct worker *w, struct cand *c, struct prioq *capped, bool low_share)
{
	if (!(low_share && quota_over(w, c->uid)) &&
	    (!w->pol->slots_per_user || user_running(w, c->uid) < w->pol->slots_per_user))
		return false;
	if (capped->n == capped->cap) {
		capped->cap = capped->cap ? capped->cap * 2 : 16;
		capped->v = xrealloc(capped->v, capped->cap * sizeof *capped->v);
	}
	capped->v[capped->n++] = *c;
	return true;
}

/* Below [worker] min_free nothing new is claimed: a task started now
 * could store neither its output nor its result. On a shared spool, a
 * member who filled it must not stop the others (issue 35): first what
 * members hold beyond their share of tmp/ and drop/ goes (quota_scan),
 * then, still low, only the members who hold more than their share of
 * the spool are claimed for no more (*low_share, quota_shares). Looked
 * at only when there is a task to claim, and again on the timer only
 * while low with tasks waiting, so an idle worker still costs nothing.
 * Said once each way. */
#define SPACE_RECHECK_MS 1000
static bool space_ok(struct worker *w, bool *low_share)
{
	struct space sp;
	*low_share = false;
	if (!w->pol->min_free_bytes && !w->pol->min_free_pct)
		return true;
	if (space_check(w->sp->root, w->pol->min_free_bytes, w->pol->min_free_pct, &sp) < 0)
		return true; /* not known: as before there was a check */
	bool shared = w->pol->shared && w->sp->drop >= 0;
	if (sp.low && shared && !w->space_low) {
		quota_scan(w);
		if (space_check(w->sp->root, w->pol->min_free_bytes, w->pol->min_free_pct, &sp) < 0)
			return true;
	}
	if (sp.low != w->space_low) {
		char why[700];
		space_describe(&sp, w->sp->path, why, sizeof why);
		logmsg(sp.low ? (shared ? "claiming only for members within their share of the disk: %s"
					: "claiming nothing new: %s")
			      : "claiming again: %s",
		       why);
		w->share_mono = 0;
	}
	w->space_low = sp.low;
	w->space_mono = sp.low ? now_mono_ms() + SPACE_RECHECK_MS : 0;
	if (sp.low && shared) {
		quota_shares(w);
		*low_share = true;
		return true;
	}
	return !sp.low;
}

static bool any_claimable(const struct worker *w)
{
	for (int l = 0; l < LANE__N; l++)
		if (w->used[l] < w->slots[l] && w->heap[l].n)
			return true;
	return false;
}

void dispatch(struct worker *w)
{
	if (w->stopping || w->spool_paused)
		return;
	w->space_mono = 0;
	bool low_share = false;
	if (w->ncommit < w->fds.backlog_max && any_claimable(w) && !space_ok(w, &low_share))
		return;
	for (int l = 0; l < LANE__N; l++) {
		struct prioq capped = {0};
		while (w->used[l] < w->slots[l] && w->heap[l].n && w->ncommit < w->fds.backlog_max &&
		       capped.n < CAPPED_MAX) {
			struct cand c = prioq_pop(&w->heap[l]);
			if (user_at_cap(w, &c, &capped, low_share))
				continue;
			if (c.turn > w->fair.now)
				w->fair.now = c.turn;
			int r = spool_claim(w->sp, w->wdir, c.name);
			if (r == -EEXIST) {
				/* We are running a task of the same name: it waits
				 * in new/ until that one has finished. */
				strset_put(&w->known, c.name, K_DEFERRED);
				w->deferred = xrealloc(w->deferred, (w->ndeferred + 1) * sizeof(char *));
				w->deferred[w->ndeferred++] = c.name;
				continue;
			}
			strset_del(&w->known, c.name);
			sched_claim_done(w, c.name);
			if (r == 0)
				log_task("claimed", c.name, NULL, -1, NULL);
			if (r == 0)
				start_claimed(w, c.name, c.arrived_ms);
			else if (r != -ENOENT)
				logmsg("%s: claim failed: %s", c.name, strerror(-r));
			free(c.name);
		}
		/* Back in their places, for when their submitter's tasks end. */
		for (size_t i = 0; i < capped.n; i++)
			prioq_push(&w->heap[l], capped.v[i]);
		free(capped.v);
	}
}

void undefer(struct worker *w)
{
	size_t n = w->ndeferred;
	char **d = w->deferred;
	w->deferred = NULL;
	w->ndeferred = 0;
	for (size_t i = 0; i < n; i++) {
		strset_del(&w->known, d[i]);
		consider(w, d[i]);
		free(d[i]);
	}
	free(d);
}

bool sched_ring(struct worker *w)
{
	bool due = false;
	for (char *n; (n = sched_queue_pop_due(&w->sched, now_realtime_ms())); free(n)) {
		if (strset_get(&w->known, n) != K_SCHEDULED)
			continue; /* an older ring for the same name */
		strset_del(&w->known, n);
		consider(w, n);
		due = true;
	}
	return due;
}
