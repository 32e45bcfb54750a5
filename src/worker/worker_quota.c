/* worker_quota.c - a shared spool's bounds on each member (issue 35):
 * the slots one member may hold, the disk one member may fill in tmp/
 * and drop/USER/ (drop_max_bytes, drop_max_files), and, below min_free,
 * no claim for a member who holds more than that share of the spool,
 * rather than no claim for anyone. Only where drop/ exists. */
#define _GNU_SOURCE
#include "worker_int.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

/* A scan follows an event in tmp/ or a drop directory by this much at
 * most, so that a flood of submits costs one scan per interval. */
#define QUOTA_SCAN_MS 2000
/* Below min_free, who is over their share is measured again after this
 * long (it walks done/). */
#define SHARE_RECHECK_MS 10000

void quota_policy(struct worker *w)
{
	if (!w->pol->slots_per_user_auto)
		return;
	int half = (w->slots[LANE_FAST] + w->slots[LANE_BATCH]) / 2;
	w->pol->slots_per_user = half > 1 ? half : 1;
}

/* A member's share of the spool's disk: the lesser of drop_max_bytes and
 * its percentage of the filesystem (as min_free). 0: none. */
static uint64_t share_bytes(const struct worker *w)
{
	uint64_t b = w->pol->drop_max_bytes, byp = 0;
	struct statvfs sv;
	if (w->pol->drop_max_pct && fstatvfs(w->sp->root, &sv) == 0)
		byp = (uint64_t)sv.f_blocks * (sv.f_frsize ? sv.f_frsize : sv.f_bsize) / 100 * w->pol->drop_max_pct;
	if (b && byp)
		return b < byp ? b : byp;
	return b ? b : byp;
}

static bool quota_on(const struct worker *w)
{
	return w->pol->shared && w->sp->drop >= 0 && (share_bytes(w) || w->pol->drop_max_files);
}

void quota_note(struct worker *w)
{
	if (!w->quota_mono && quota_on(w))
		w->quota_mono = now_mono_ms() + QUOTA_SCAN_MS;
}

/* One entry of tmp/ or of a drop directory, charged to a member. */
struct qent {
	char *name;
	int dirfd;          /* tmp/, or the drop directory's descriptor */
	const char *dname;  /* the drop directory's name; NULL: tmp/ */
	uid_t uid;
	uint64_t bytes, files;
	struct timespec mtime;
	bool task;          /* a regular file of the drop with a task name */
};

struct qscan {
	struct qent *v;
	size_t n, cap;
	uint64_t share, files_max;
};

static void qadd(struct qscan *q, int dirfd, const char *dname, const char *name, uid_t uid)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	struct qent e = {.dirfd = dirfd, .dname = dname, .uid = uid, .mtime = st.st_mtim, .files = 1,
			 .bytes = (uint64_t)st.st_blocks * 512};
	if (S_ISDIR(st.st_mode)) {
		/* Measured whole, up to a bound past either limit. */
		uint64_t b = 0, f = 0;
		(void)spool_tree_usage(dirfd, name, q->share ? q->share : UINT64_MAX,
				       q->files_max ? q->files_max : 100000, &b, &f);
		e.bytes += b;
		e.files += f;
	}
	const char *why;
	e.task = dname && S_ISREG(st.st_mode) && task_name_check(name, &why) == 0;
	if (q->n == q->cap) {
		q->cap = q->cap ? q->cap * 2 : 64;
		q->v = xrealloc(q->v, q->cap * sizeof *q->v);
	}
	e.name = xstrdup(name);
	q->v[q->n++] = e;
}

/* By member, newest first: the entries beyond a member's limits are the
 * last ones she made. */
static int qent_cmp(const void *a, const void *b)
{
	const struct qent *x = a, *y = b;
	if (x->uid != y->uid)
		return x->uid < y->uid ? -1 : 1;
	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec > y->mtime.tv_sec ? -1 : 1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec > y->mtime.tv_nsec ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Its bytes freed even while its writer holds it open (an unlinked file
 * kept open would keep them, out of sight of the next scan). */
static void qtruncate(int dirfd, const char *name)
{
	struct stat st;
	_cleanup_close_ int fd = openat(dirfd, name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1)
		(void)!ftruncate(fd, 0);
}

/* An entry beyond its member's limits: a drop's task is claimed and
 * rejected (its submitter may wait for its id), its content not kept;
 * anything else is removed. */
static void qremove(struct worker *w, const struct qent *e, const char *why)
{
	if (e->task) {
		char claim[TASK_NAME_MAX * 2];
		if (pathfmt(claim, sizeof claim, "%s:%s", e->dname, e->name) == 0)
			drop_reject(w, e->dirfd, e->name, claim, why, e->uid, false);
		return;
	}
	qtruncate(e->dirfd, e->name);
	(void)rm_rf_at(e->dirfd, e->name);
}

void quota_scan(struct worker *w)
{
	w->quota_mono = 0;
	if (!quota_on(w))
		return;
	struct qscan q = {.share = share_bytes(w), .files_max = w->pol->drop_max_files};
	uid_t me = geteuid();
	struct strv names = {0};
	if (dir_names_all(w->sp->tmp, &names) == 0)
		for (size_t i = 0; i < names.n; i++) {
			struct stat st;
			/* Charged to the owner: in the sticky tmp/ only they (and
			 * root) can remove it. The workers' own are not counted. */
			if (fstatat(w->sp->tmp, names.v[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_uid != 0 &&
			    st.st_uid != me)
				qadd(&q, w->sp->tmp, NULL, names.v[i], st.st_uid);
		}
	strv_free(&names);
	for (size_t d = 0; d < w->ndrops; d++) {
		struct strv dn = {0};
		if (dir_names_all(w->drops[d].fd, &dn) == 0)
			for (size_t i = 0; i < dn.n; i++)
				qadd(&q, w->drops[d].fd, w->drops[d].name, dn.v[i], w->drops[d].uid);
		strv_free(&dn);
	}
	sort_n(q.v, q.n, sizeof *q.v, qent_cmp);
	for (size_t i = 0; i < q.n;) {
		size_t j = i;
		uint64_t bytes = 0, files = 0;
		while (j < q.n && q.v[j].uid == q.v[i].uid) {
			bytes += q.v[j].bytes;
			files += q.v[j].files;
			j++;
		}
		if ((q.share && bytes > q.share) || (q.files_max && files > q.files_max)) {
			char why[400];
			snprintf(why, sizeof why,
				 "uid %u holds %llu bytes in %llu entries of tmp/ and its drop directory, over "
				 "its share (drop_max_bytes %llu, drop_max_files %llu): this entry is rejected "
				 "and its content not kept",
				 (unsigned)q.v[i].uid, (unsigned long long)bytes, (unsigned long long)files,
				 (unsigned long long)q.share, (unsigned long long)q.files_max);
			unsigned long long n = 0, freed = 0;
			/* The newest go first, until what is left fits. */
			for (size_t k = i; k < j && ((q.share && bytes > q.share) ||
						     (q.files_max && files > q.files_max)); k++) {
				qremove(w, &q.v[k], why);
				bytes -= q.v[k].bytes;
				files -= q.v[k].files;
				freed += q.v[k].bytes;
				n++;
			}
			logmsg("uid %u: over its share of tmp/ and its drop directory (drop_max_bytes %llu, "
			       "drop_max_files %llu): %llu entries removed (%llu bytes)",
			       (unsigned)q.v[i].uid, (unsigned long long)q.share,
			       (unsigned long long)q.files_max, n, freed);
		}
		i = j;
	}
	for (size_t i = 0; i < q.n; i++)
		free(q.v[i].name);
	free(q.v);
}

/* ---- below min_free: who is over their share ---------------------------- */

struct usage {
	uid_t uid;
	uint64_t bytes;
};

static void charge(struct usage **u, size_t *n, uid_t uid, uint64_t bytes)
{
	for (size_t i = 0; i < *n; i++)
		if ((*u)[i].uid == uid) {
			(*u)[i].bytes += bytes;
			return;
		}
	*u = xrealloc(*u, (*n + 1) * sizeof **u);
	(*u)[(*n)++] = (struct usage){uid, bytes};
}

/* The member a name of new/ or done/ is of (USER:...), through a few
 * names remembered: (uid_t)-1 for none (root's, or a spool without
 * prefixes). */
struct prefixes {
	char name[8][72];
	uid_t uid[8];
	unsigned n;
};

static uid_t name_uid(struct worker *w, struct prefixes *pc, const char *name)
{
	const char *c = strchr(name, ':');
	if (!c || c == name || (size_t)(c - name) >= sizeof pc->name[0])
		return (uid_t)-1;
	size_t l = (size_t)(c - name);
	for (unsigned i = 0; i < pc->n && i < 8; i++)
		if (strlen(pc->name[i]) == l && memcmp(pc->name[i], name, l) == 0)
			return pc->uid[i];
	unsigned k = pc->n++ % 8;
	memcpy(pc->name[k], name, l);
	pc->name[k][l] = '\0';
	pc->uid[k] = spool_reader(w->sp, name, (uid_t)-1);
	return pc->uid[k];
}

static void charge_dir(struct worker *w, int dirfd, struct prefixes *pc, struct usage **u, size_t *n,
		       uint64_t cap)
{
	struct strv names = {0};
	if (dir_names_all(dirfd, &names) < 0)
		return;
	for (size_t i = 0; i < names.n; i++) {
		const char *nm = names.v[i][0] == '.' ? names.v[i] + 1 : names.v[i];
		uid_t uid = name_uid(w, pc, nm);
		struct stat st;
		if (uid == (uid_t)-1 || uid == 0 || fstatat(dirfd, names.v[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		uint64_t b = (uint64_t)st.st_blocks * 512, tb = 0, te = 0;
		if (S_ISDIR(st.st_mode) && spool_tree_usage(dirfd, names.v[i], cap, 100000, &tb, &te) >= 0)
			b += tb;
		charge(u, n, uid, b);
	}
	strv_free(&names);
}

void quota_shares(struct worker *w)
{
	int64_t now = now_mono_ms();
	if (w->share_mono && now - w->share_mono < SHARE_RECHECK_MS)
		return;
	w->share_mono = now;
	w->nover = 0;
	uint64_t share = share_bytes(w);
	if (!share)
		return;
	struct usage *u = NULL;
	size_t n = 0;
	struct prefixes pc = {0};
	uid_t me = geteuid();
	/* What each member holds: in tmp/ (by owner), in their drop
	 * directory, queued in new/ and kept in done/ (by the id's USER:). */
	struct strv names = {0};
	if (dir_names_all(w->sp->tmp, &names) == 0)
		for (size_t i = 0; i < names.n; i++) {
			struct stat st;
			uint64_t tb = 0, te = 0;
			if (fstatat(w->sp->tmp, names.v[i], &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_uid == 0 ||
			    st.st_uid == me)
				continue;
			if (S_ISDIR(st.st_mode))
				(void)spool_tree_usage(w->sp->tmp, names.v[i], share + 1, 100000, &tb, &te);
			charge(&u, &n, st.st_uid, (uint64_t)st.st_blocks * 512 + tb);
		}
	strv_free(&names);
	for (size_t d = 0; d < w->ndrops; d++) {
		struct strv dn = {0};
		if (dir_names_all(w->drops[d].fd, &dn) == 0)
			for (size_t i = 0; i < dn.n; i++) {
				struct stat st;
				if (fstatat(w->drops[d].fd, dn.v[i], &st, AT_SYMLINK_NOFOLLOW) == 0)
					charge(&u, &n, w->drops[d].uid, (uint64_t)st.st_blocks * 512);
			}
		strv_free(&dn);
	}
	charge_dir(w, w->sp->new, &pc, &u, &n, share + 1);
	charge_dir(w, w->sp->done, &pc, &u, &n, share + 1);
	for (size_t i = 0; i < n; i++)
		if (u[i].bytes > share && w->nover < ARRAY_SIZE(w->over)) {
			w->over[w->nover++] = u[i].uid;
			logmsg("below min_free: uid %u holds %llu bytes in the spool, over its share of "
			       "%llu (drop_max_bytes): none of its tasks is claimed until there is room",
			       (unsigned)u[i].uid, (unsigned long long)u[i].bytes,
			       (unsigned long long)share);
		}
	free(u);
}

bool quota_over(const struct worker *w, uid_t uid)
{
	for (size_t i = 0; i < w->nover; i++)
		if (w->over[i] == uid)
			return true;
	return false;
}
