/* query.c - see query.h. */
#define _GNU_SOURCE
#include "query.h"

#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "task.h"
#include "util.h"

/* When an entry got where it is: a rename into new/ or cur/ sets ctime;
 * a result's JSON is written just before its rename into done/. */
static int64_t stat_ms(int dirfd, const char *name, bool ctime)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	const struct timespec *ts = ctime ? &st.st_ctim : &st.st_mtim;
	return (int64_t)ts->tv_sec * 1000 + ts->tv_nsec / 1000000;
}

int query_read(struct spool *sp, const char *id, json_t **out, char **text, size_t *len)
{
	char p[512];
	_cleanup_free_ char *buf = NULL;
	size_t n;
	if (spool_name_done(p, sizeof p, id, DONE_JSON) < 0)
		return -ENAMETOOLONG;
	int r = read_file_at(sp->done, p, 1 << 20, &buf, &n);
	if (r < 0)
		return r;
	json_error_t je;
	*out = json_loadb(buf, n, 0, &je);
	if (!*out)
		return -EBADMSG;
	if (text) {
		*text = steal_ptr(&buf);
		*len = n;
	}
	return 0;
}

int query_load(struct spool *sp, const char *id, json_t **out)
{
	return query_read(sp, id, out, NULL, NULL);
}

int query_done(struct spool *sp, const char *id, struct qinfo *q)
{
	char p[512];
	json_t *o;
	int r = query_load(sp, id, &o);
	if (r < 0)
		return r;
	(void)spool_name_done(p, sizeof p, id, DONE_JSON);
	q->state = Q_DONE;
	q->since_ms = stat_ms(sp->done, p, false);
	const char *s = json_string_value(json_object_get(o, "status"));
	snprintf(q->status, sizeof q->status, "%s", s ? s : "?");
	const char *e = json_string_value(json_object_get(o, "error"));
	snprintf(q->error, sizeof q->error, "%s", e && strcmp(q->status, "ok") != 0 ? e : "");
	json_t *dur = json_object_get(o, "duration_ms");
	q->duration_ms = json_is_integer(dur) ? json_integer_value(dur) : -1;
	json_t *ec = json_object_get(o, "exit_code");
	q->exit_code = json_is_integer(ec) ? (int)json_integer_value(ec) : -1;
	const char *sig = json_string_value(json_object_get(o, "signal"));
	q->signal = sig ? signal_from_name(sig) : 0;
	if (q->signal < 0)
		q->signal = 0;
	const char *op = json_string_value(json_object_get(json_object_get(o, "stdout"), "path"));
	const char *ep = json_string_value(json_object_get(json_object_get(o, "stderr"), "path"));
	snprintf(q->out_path, sizeof q->out_path, "%s", op ? op : "");
	snprintf(q->err_path, sizeof q->err_path, "%s", ep ? ep : "");
	json_decref(o);
	return 0;
}

/* One task's status as an exit status (kart(1), "kart wait"): a shell's
 * habits where a run ended (timeout(1)'s 124, 128+N), sysexits(3) for
 * the rest. */
int query_exit_status(const struct qinfo *q)
{
	static const struct {
		const char *status;
		int code;
	} codes[] = {{"timeout", 124}, {"oom", 137}, {"cancelled", 130}, {"rejected", 65},
		     {"refused", 69}, {"lost", 75}, {"skipped", 76}};
	if (strcmp(q->status, "ok") == 0)
		return 0;
	if (strcmp(q->status, "failed") == 0)
		return q->exit_code > 0 ? q->exit_code : 1;
	for (size_t i = 0; i < ARRAY_SIZE(codes); i++)
		if (strcmp(q->status, codes[i].status) == 0)
			return codes[i].code;
	if (q->signal > 0)
		return 128 + q->signal;
	return 1;
}

static bool exists_at(int dirfd, const char *name)
{
	struct stat st;
	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}


/* A queued task's header, read once (kart status and kart sync read
 * every queued task): when it may run, the later of its not_before= and
 * a retry's (user.kart), as the worker reads them (worker_sched.c), and,
 * if sp and waiting are given, the after= ids that have no result yet,
 * comma-separated. nb 0: not ahead of now_ms. */
static void read_queued(struct spool *sp, int dirfd, const char *name, int64_t now_ms, int64_t *nb,
			char *waiting, size_t wlen)
{
	*nb = 0;
	if (waiting)
		waiting[0] = '\0';
	/* Never blocks: a FIFO or a device is no task of anyone's. */
	_cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	char kattr[KART_XATTR_MAX], err[256];
	struct claim_meta m;
	ssize_t kn = fgetxattr(fd, KART_XATTR, kattr, sizeof kattr - 1);
	kattr[kn > 0 ? kn : 0] = '\0';
	claim_meta_parse(kattr, name, &m);
	size_t want = (size_t)st.st_size < TASK_HEADER_MAX ? (size_t)st.st_size : TASK_HEADER_MAX;
	_cleanup_free_ char *text = xmalloc(want + 1);
	ssize_t n = read_upto(fd, text, want);
	struct task_spec spec;
	bool parsed = n > 0 && task_parse(text, (size_t)n, &spec, err, sizeof err) == 0;
	int64_t t = m.not_before_ms;
	if (parsed && spec.not_before_ms > t)
		t = spec.not_before_ms;
	*nb = t > now_ms ? t : 0;
	if (!parsed || !sp || !waiting)
		return;
	size_t o = 0;
	for (int i = 0; i < spec.n_after; i++) {
		char p[512];
		if (spool_name_done(p, sizeof p, spec.after[i], DONE_JSON) < 0 || exists_at(sp->done, p))
			continue;
		int w = snprintf(waiting + o, wlen - o, "%s%s", o ? "," : "", spec.after[i]);
		if (w < 0 || (size_t)w >= wlen - o) {
			waiting[o] = '\0';
			break;
		}
		o += (size_t)w;
	}
}

int64_t query_not_before(int dirfd, const char *name, int64_t now_ms)
{
	int64_t nb;
	read_queued(NULL, dirfd, name, now_ms, &nb, NULL, 0);
	return nb;
}

int64_t query_queued(struct spool *sp, int dirfd, const char *name, int64_t now_ms, char *waiting,
		     size_t wlen)
{
	int64_t nb;
	read_queued(sp, dirfd, name, now_ms, &nb, waiting, wlen);
	return nb;
}

/* new/ID: scheduled, or queued (waiting: on after= ids without a result). */
static void queued_state(struct spool *sp, const char *id, int64_t now_ms, struct qinfo *q)
{
	q->not_before_ms = query_queued(sp, sp->new, id, now_ms, q->waiting, sizeof q->waiting);
	q->state = q->not_before_ms ? Q_SCHEDULED : Q_QUEUED;
	if (q->state != Q_QUEUED)
		q->waiting[0] = '\0';
}

/* cur/WORKER/.ID.paused: kart pause froze it. */
static bool is_paused(struct spool *sp, const char *worker, const char *id)
{
	char p[600];
	return spool_name_claim_scratch(p, sizeof p, worker, id, SCRATCH_PAUSED) == 0 &&
	       exists_at(sp->cur, p);
}

/* A re-queue that found its name taken puts a task back as NAME.2 (and
 * that as NAME.2.3 ...): is name one of id's? */
static bool requeued_name(const char *name, const char *id)
{
	size_t n = strlen(id);
	if (strncmp(name, id, n) != 0 || name[n] != '.')
		return false;
	for (const char *p = name + n; *p == '.';) {
		size_t d = strspn(p + 1, "0123456789");
		if (!d)
			return false;
		p += 1 + d;
		if (!*p)
			return true;
	}
	return false;
}

/* Where a task is before its result: new/ (queued), new/.held. (held),
 * or cur/WORKER/ (running); at is its name there. */
enum qwhere { QW_NOWHERE, QW_NEW, QW_HELD, QW_CUR };

/* The entry dirfd/name is the file the reservation ids/ID names, made
 * by the id's user (USER: on a shared spool, where the worker owns the
 * file; else the file's owner). */
static bool is_reserved(struct spool *sp, const char *id, int dirfd, const char *name)
{
	struct stat st;
	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       spool_ids_state(sp, id, &st, spool_reader(sp, id, st.st_uid)) == IDS_MINE;
}

/* In dirfd, the reserved file of id: under id or .held.id (plain), or
 * under a name a re-queue gave it (!plain, a scan of dirfd). held: it
 * is a held name. */
static bool find_in(struct spool *sp, const char *id, int dirfd, bool plain, char *at, size_t atlen,
		    bool *held)
{
	char hn[512];
	*held = false;
	if (plain) {
		if (is_reserved(sp, id, dirfd, id))
			return pathfmt(at, atlen, "%s", id) == 0;
		if (spool_held_name(id, hn, sizeof hn) == 0 && is_reserved(sp, id, dirfd, hn)) {
			*held = true;
			return pathfmt(at, atlen, "%s", hn) == 0;
		}
		return false;
	}
	DIR *d = opendir_at(dirfd, ".");
	struct dirent *de;
	bool found = false;
	while (d && !found && (de = readdir(d))) {
		const char *h = spool_held_id(de->d_name);
		if (requeued_name(h ? h : de->d_name, id) && is_reserved(sp, id, dirfd, de->d_name)) {
			*held = h != NULL;
			found = pathfmt(at, atlen, "%s", de->d_name) == 0;
		}
	}
	if (d)
		closedir(d);
	return found;
}

/* A reserved id names one file, whatever its name: after a re-queue it
 * is ID.N while another file may sit at ID (spool-layout README §7).
 * Looked for in the order tasks move, under its own name first (no scan
 * of new/ for a task that runs), then under a re-queue's. */
static enum qwhere where_reserved(struct spool *sp, const char *id, char *at, size_t atlen,
				  char *worker, size_t wlen)
{
	for (int plain = 1; plain >= 0; plain--) {
		bool held;
		if (find_in(sp, id, sp->new, plain, at, atlen, &held))
			return held ? QW_HELD : QW_NEW;
		DIR *d = opendir_at(sp->cur, ".");
		struct dirent *de;
		enum qwhere w = QW_NOWHERE;
		while (d && w == QW_NOWHERE && (de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			_cleanup_close_ int wd =
				openat(sp->cur, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (wd >= 0 && find_in(sp, id, wd, plain, at, atlen, &held) && !held) {
				snprintf(worker, wlen, "%s", de->d_name);
				w = QW_CUR;
			}
		}
		if (d)
			closedir(d);
		if (w != QW_NOWHERE)
			return w;
	}
	return QW_NOWHERE;
}

/* Without a reservation, the id is the name: looked for in the order
 * tasks move, the furthest place found wins (a claim over a new entry
 * of the same name, which will finish under another id). */
static enum qwhere where_named(struct spool *sp, const char *id, char *at, size_t atlen,
			       char *worker, size_t wlen)
{
	char hn[512];
	if (pathfmt(at, atlen, "%s", id) < 0)
		return QW_NOWHERE;
	bool queued = exists_at(sp->new, id);
	bool held = !queued && spool_held_name(id, hn, sizeof hn) == 0 && exists_at(sp->new, hn);
	if (spool_find_claim(sp, id, worker, wlen))
		return QW_CUR;
	if (held)
		return pathfmt(at, atlen, "%s", hn) == 0 ? QW_HELD : QW_NOWHERE;
	return queued ? QW_NEW : QW_NOWHERE;
}

static int query_once(struct spool *sp, const char *id, struct qinfo *q)
{
	memset(q, 0, sizeof q[0]);
	q->exit_code = -1;
	/* Look in the order tasks move (new, cur, done), so that one in
	 * motion is seen somewhere, and report the furthest place found:
	 * done/ID.json, then cur/W/ID, then new/ID (spool-layout README §7). A
	 * finishing task writes its result before it leaves cur/ (and a new/
	 * entry of a finished id will finish under another one): done/ wins. */
	bool plain = id[0] != '.' && !strchr(id, '/');
	char at[sizeof q->name], worker[sizeof q->worker];
	enum qwhere where = QW_NOWHERE;
	/* A reservation whose file is nowhere (its client has not published
	 * yet, or it is no reservation of ours to read): the name, as
	 * without one. */
	if (plain && spool_ids_state(sp, id, NULL, 0) != IDS_NONE)
		where = where_reserved(sp, id, at, sizeof at, worker, sizeof worker);
	if (plain && where == QW_NOWHERE)
		where = where_named(sp, id, at, sizeof at, worker, sizeof worker);
	int64_t qsince = where == QW_NEW || where == QW_HELD ? stat_ms(sp->new, at, true) : 0;
	int r = query_done(sp, id, q);
	if (r != -ENOENT)
		return r;
	memset(q, 0, sizeof q[0]);
	q->exit_code = -1;
	if (where != QW_NOWHERE)
		snprintf(q->name, sizeof q->name, "%s", at);
	if (where == QW_CUR) {
		q->state = Q_RUNNING;
		snprintf(q->worker, sizeof q->worker, "%s", worker);
		char p[512];
		if (pathfmt(p, sizeof p, "%s/%s", q->worker, at) == 0)
			q->since_ms = stat_ms(sp->cur, p, true);
		q->paused = is_paused(sp, q->worker, at);
		q->worker_gone = spool_worker_live(sp, q->worker) == 0;
	} else if (where == QW_HELD) {
		q->state = Q_HELD;
		q->since_ms = qsince;
	} else if (where == QW_NEW) {
		queued_state(sp, at, now_realtime_ms(), q);
		q->since_ms = qsince;
	} else {
		q->state = Q_UNKNOWN;
	}
	return 0;
}

const char *query_entry(const char *id, const struct qinfo *q)
{
	if (!q->name[0])
		return id;
	const char *queued = spool_held_id(q->name);
	return queued ? queued : q->name;
}

int query_id(struct spool *sp, const char *id, struct qinfo *q)
{
	/* A hold and a release move a task between two names of new/ in
	 * either direction, so one pass can miss it: look twice. */
	int r = query_once(sp, id, q);
	if (r == 0 && q->state == Q_UNKNOWN)
		r = query_once(sp, id, q);
	return r;
}

struct qent {
	char *id;
	char *worker; /* cur/ entries */
	int64_t since_ms;
	bool held;    /* new/.held.ID */
};

struct qlist {
	struct qent *v;
	size_t n, cap;
};

static void qlist_add(struct qlist *l, const char *id, const char *worker, int64_t since)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 256;
		l->v = xrealloc(l->v, l->cap * sizeof *l->v);
	}
	l->v[l->n++] = (struct qent){xstrdup(id), worker ? xstrdup(worker) : NULL, since, false};
}

static void qlist_free(struct qlist *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].id);
		free(l->v[i].worker);
	}
	free(l->v);
}

static int qent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct qent *)a)->id, ((const struct qent *)b)->id);
}

static bool qlist_has(const struct qlist *sorted, const char *id)
{
	struct qent key = {.id = (char *)id};
	return sorted->n && bsearch(&key, sorted->v, sorted->n, sizeof key, qent_cmp);
}

/* The listings query_all reads before it reports anything. */
struct qlists {
	struct qlist nl, cl, dl; /* new/ (queued and held), cur/W/, done/ID.json */
};

static int list_one(const struct spool_entry *e, void *arg)
{
	struct qlists *l = arg;
	const char *held;
	switch (e->area) {
	case SPOOL_WALK_NEW:
		if (e->id)
			qlist_add(&l->nl, e->id, NULL, stat_ms(e->dirfd, e->name, true));
		else if ((held = spool_held_id(e->name))) {
			qlist_add(&l->nl, held, NULL, stat_ms(e->dirfd, e->name, true));
			l->nl.v[l->nl.n - 1].held = true;
		}
		break;
	case SPOOL_WALK_CUR:
		if (e->id)
			qlist_add(&l->cl, e->id, e->worker, stat_ms(e->dirfd, e->name, true));
		break;
	case SPOOL_WALK_DONE:
		if (e->id && e->done == DONE_JSON)
			qlist_add(&l->dl, e->id, NULL, 0);
		break;
	}
	return 0;
}

/* done/ID.json exists (or cannot be told): the task is no longer live. */
static bool has_result(struct spool *sp, const char *id)
{
	char p[512];
	return spool_name_done(p, sizeof p, id, DONE_JSON) < 0 || exists_at(sp->done, p);
}

static int query_walk(struct spool *sp, bool done, query_cb cb, void *arg)
{
	/* Every listing is read first, in the order tasks move (new, cur,
	 * done), so that one in motion is seen at least once; then each id
	 * is reported once, in the furthest state it was found in, as
	 * query_id does. A directory that cannot be read reports nothing. */
	struct qlists l = {0};
	struct qlist *nl = &l.nl, *cl = &l.cl, *dl = &l.dl;
	int r = spool_walk(sp, SPOOL_WALK_NEW | SPOOL_WALK_CUR | (done ? SPOOL_WALK_DONE : 0) |
				       SPOOL_WALK_DOTS,
			   list_one, &l);
	if (r < 0)
		goto out;

	sort_n(dl->v, dl->n, sizeof *dl->v, qent_cmp);
	struct qlist cs = {0}; /* cur/ ids, sorted, each once */
	for (size_t i = 0; i < cl->n; i++)
		qlist_add(&cs, cl->v[i].id, NULL, 0);
	sort_n(cs.v, cs.n, sizeof *cs.v, qent_cmp);
	struct qinfo q;
	for (size_t i = 0; i < nl->n; i++) {
		if (qlist_has(&cs, nl->v[i].id) || qlist_has(dl, nl->v[i].id) ||
		    (!done && has_result(sp, nl->v[i].id)))
			continue;
		memset(&q, 0, sizeof q);
		if (nl->v[i].held)
			q.state = Q_HELD;
		else
			queued_state(sp, nl->v[i].id, now_realtime_ms(), &q);
		q.exit_code = -1;
		q.since_ms = nl->v[i].since_ms;
		cb(nl->v[i].id, &q, arg);
	}
	/* The same id under two workers' cur/ (a claim and a peer's
	 * recovery of it) is reported once, for the first found. */
	struct qlist seen = {0};
	const char *last = NULL; /* the worker last asked about: one at a time */
	bool last_gone = false;
	for (size_t i = 0; i < cl->n; i++) {
		bool dup = false;
		for (size_t j = 0; j < seen.n && !dup; j++)
			dup = strcmp(seen.v[j].id, cl->v[i].id) == 0;
		if (dup || qlist_has(dl, cl->v[i].id) || (!done && has_result(sp, cl->v[i].id)))
			continue;
		qlist_add(&seen, cl->v[i].id, NULL, 0); /* few: the running tasks */
		memset(&q, 0, sizeof q);
		q.state = Q_RUNNING;
		q.exit_code = -1;
		q.since_ms = cl->v[i].since_ms;
		snprintf(q.worker, sizeof q.worker, "%s", cl->v[i].worker);
		q.paused = is_paused(sp, q.worker, cl->v[i].id);
		if (!last || strcmp(last, cl->v[i].worker) != 0)
			last_gone = spool_worker_live(sp, cl->v[i].worker) == 0;
		last = cl->v[i].worker;
		q.worker_gone = last_gone;
		cb(cl->v[i].id, &q, arg);
	}
	qlist_free(&seen);
	qlist_free(&cs);
	for (size_t i = 0; i < dl->n; i++) {
		memset(&q, 0, sizeof q);
		if (query_done(sp, dl->v[i].id, &q) == 0)
			cb(dl->v[i].id, &q, arg);
	}
out:
	qlist_free(nl);
	qlist_free(cl);
	qlist_free(dl);
	return r;
}

int query_task_text(struct spool *sp, const char *id, const struct qinfo *q, char **text,
		    size_t *len)
{
	char p[600];
	int dir = q->state == Q_RUNNING ? sp->cur : q->state == Q_DONE ? sp->done : sp->new;
	int r = q->state == Q_HELD      ? spool_held_name(id, p, sizeof p)
		: q->state == Q_RUNNING ? pathfmt(p, sizeof p, "%s/%s", q->worker, id)
		: q->state == Q_DONE    ? spool_name_done(p, sizeof p, id, DONE_TASK)
					: pathfmt(p, sizeof p, "%s", id);
	if (r < 0)
		return r;
	/* Never blocks: a FIFO or a device is no task of anyone's. */
	_cleanup_close_ int fd = openat(dir, p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	size_t want = (size_t)st.st_size < TASK_HEADER_MAX ? (size_t)st.st_size : TASK_HEADER_MAX;
	char *buf = xmalloc(want + 1);
	ssize_t n = read_upto(fd, buf, want);
	if (n < 0) {
		free(buf);
		return (int)n;
	}
	buf[n] = '\0';
	*text = buf;
	*len = (size_t)n;
	return 0;
}

/* One word of the shell's single-quoted kind ('a'\''b': a'b) at *p, into
 * out: false if what is there is not one. */
static bool quoted_word(const char **p, char *out, size_t *o, size_t cap)
{
	const char *s = *p;
	bool any = false;
	while (*s == '\'' || (s[0] == '\\' && s[1] == '\'')) {
		if (*s == '\\') {
			if (*o + 1 < cap)
				out[(*o)++] = '\'';
			s += 2;
		} else {
			const char *e = strchr(s + 1, '\'');
			if (!e)
				return false;
			for (const char *c = s + 1; c < e; c++)
				if (*o + 1 < cap)
					out[(*o)++] = *c;
			s = e + 1;
		}
		any = true;
	}
	*p = s;
	return any && (*s == ' ' || *s == '\0');
}

/* kart submit -- CMD's body, "exec 'w1' 'w2'...": the words, each quoted
 * again only where a shell would need it. NULL when line is not that. */
static char *submitted_command(const char *line)
{
	if (strncmp(line, "exec ", 5) != 0)
		return NULL;
	size_t cap = strlen(line) * 4 + 8, o = 0;
	char *out = xmalloc(cap), *word = xmalloc(cap);
	for (const char *p = line + 5; *p;) {
		while (*p == ' ')
			p++;
		if (!*p)
			break;
		size_t wl = 0;
		if (!quoted_word(&p, word, &wl, cap)) {
			free(out), free(word);
			return NULL;
		}
		word[wl] = '\0';
		bool plain = wl > 0 && strspn(word, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
						"0123456789%+,-./:=@_") == wl;
		if (o)
			out[o++] = ' ';
		if (plain) {
			memcpy(out + o, word, wl);
			o += wl;
		} else {
			out[o++] = '\'';
			for (size_t i = 0; i < wl; i++) {
				if (word[i] == '\'') {
					memcpy(out + o, "'\\''", 4);
					o += 4;
				} else
					out[o++] = word[i];
			}
			out[o++] = '\'';
		}
	}
	out[o] = '\0';
	free(word);
	return out;
}

char *query_command(const char *text, size_t len)
{
	size_t off = 0;
	bool header = true;
	while (off < len) {
		const char *line = text + off, *nl = memchr(line, '\n', len - off);
		size_t llen = nl ? (size_t)(nl - line) : len - off;
		off += llen + (nl ? 1 : 0);
		if (llen && line[llen - 1] == '\r')
			llen--;
		if (header && llen && line[0] == '#')
			continue; /* the #! line, directives and comments */
		header = false;
		size_t lead = 0;
		while (lead < llen && (line[lead] == ' ' || line[lead] == '\t'))
			lead++;
		if (lead == llen)
			continue;
		_cleanup_free_ char *l = xasprintf("%.*s", (int)(llen - lead), line + lead);
		char *cmd = submitted_command(l);
		return cmd ? cmd : steal_ptr(&l);
	}
	return xstrdup("");
}

const char *query_state_name(const struct qinfo *q)
{
	switch (q->state) {
	case Q_QUEUED: return q->waiting[0] ? "waiting" : "queued";
	case Q_SCHEDULED: return "scheduled";
	case Q_HELD: return "held";
	case Q_RUNNING: return q->paused ? "paused" : "running";
	case Q_DONE: return q->status;
	default: return "unknown";
	}
}

int query_all(struct spool *sp, query_cb cb, void *arg) { return query_walk(sp, true, cb, arg); }

int query_live(struct spool *sp, query_cb cb, void *arg) { return query_walk(sp, false, cb, arg); }
