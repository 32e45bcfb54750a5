/* tally.c - see tally.h. */
#define _GNU_SOURCE
#include "tally.h"

#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>

#include "query.h"
#include "result.h"
#include "spool_int.h"
#include "task.h"
#include "util.h"

const double tally_bounds_s[TALLY_BUCKETS - 1] = {0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 14400};

#define TALLY_DIR "tally"
#define TALLY_HEADER "kart-tally 1"
#define TALLY_MARK "user.kart.tally"
/* The counts of writers that are gone (kart gc's fold), the row files
 * renamed on their way into it, and the fold's lock. */
#define TALLY_FOLDED "folded"
#define TALLY_FOLDED_HEADER "kart-tally-folded 1"
#define TALLY_FOLD_PREFIX "f."
#define TALLY_FOLD_LOCK ".lock"

struct tally_writer {
	pthread_mutex_t mu; /* the worker's loop and its commit thread both publish */
	int fd;             /* tally/w.WRITER, O_APPEND; -1 until the first row */
	bool warned;        /* a failure is logged once */
	char file[TASK_NAME_MAX + 3];
};

void tally_writer_set(struct spool *sp, const char *wid)
{
	tally_writer_free(sp);
	struct tally_writer *tw = xcalloc(1, sizeof *tw);
	pthread_mutex_init(&tw->mu, NULL);
	tw->fd = -1;
	snprintf(tw->file, sizeof tw->file, "w.%s", wid);
	sp->tally = tw;
}

void tally_writer_free(struct spool *sp)
{
	struct tally_writer *tw = sp->tally;
	if (!tw)
		return;
	if (tw->fd >= 0)
		(void)close(tw->fd);
	pthread_mutex_destroy(&tw->mu);
	free(tw);
	sp->tally = NULL;
}

/* tally/, made on first use where kart init did not (a spool older than
 * it): with done/'s mode and group, so that it is as readable as done/. */
static int tally_dir(struct spool *sp)
{
	int d = openat(sp->root, TALLY_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (d >= 0 || errno != ENOENT)
		return d < 0 ? -errno : d;
	struct stat st;
	if (fstat(sp->done, &st) < 0)
		return -errno;
	if (mkdirat(sp->root, TALLY_DIR, st.st_mode & 07777) < 0 && errno != EEXIST)
		return -errno;
	d = openat(sp->root, TALLY_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (d < 0)
		return -errno;
	if (geteuid() == 0)
		(void)!fchown(d, (uid_t)-1, st.st_gid);
	(void)fchmod(d, st.st_mode & 07777); /* past the umask */
	return d;
}

/* The last byte of d/name, read without blocking: true if there is one. */
static bool pread_last(int d, const char *name, char *c)
{
	_cleanup_close_ int fd = openat(d, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	return fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0 && pread(fd, c, 1, st.st_size - 1) == 1;
}

/* tally/w.WRITER, opened for appending. The writer holds cur/WRITER/.lock
 * whenever it opens or appends to it; kart gc's fold holds that lock
 * while it moves a file away (tally_fold). */

static int tally_open(struct spool *sp, struct tally_writer *tw)
{
	if (tw->fd >= 0)
		return 0;
	_cleanup_close_ int d = tally_dir(sp);
	if (d < 0)
		return d;
	/* O_NONBLOCK: a FIFO planted under our name fails (ENXIO) instead
	 * of holding the worker until someone reads it. */
	_cleanup_close_ int fd = openat(d, tw->file, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW |
						  O_NONBLOCK | O_CLOEXEC, 0644);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if (st.st_size == 0) {
		if (write_all(fd, TALLY_HEADER "\n", sizeof TALLY_HEADER) < 0)
			return -errno;
	} else {
		/* A row cut short (a crash of the machine mid-write) stays a
		 * line of its own, which readers skip, not the start of ours. */
		char last;
		if (pread_last(d, tw->file, &last) && last != '\n' && write_all(fd, "\n", 1) < 0)
			return -errno;
	}
	tw->fd = steal_fd(&fd);
	return 0;
}

/* One field of a row: percent-encoded (no space, tab or newline), "-" for
 * none. */
static void field(char *out, size_t len, const char *s)
{
	if (!s || !*s || pct_encode(s, out, len) < 0)
		snprintf(out, len, "-");
}

static void warn_once(struct tally_writer *tw, const char *what, int e)
{
	if (tw->warned)
		return;
	tw->warned = true;
	logmsg("tally/%s: cannot %s (%s): kart metrics will undercount", tw->file,
	       what, strerror(e));
}

/* Append line to the writer's tally, first marking the claim (if any)
 * with where it goes; the caller holds tw->mu. */
static void append(struct spool *sp, struct tally_writer *tw, int wdir, const char *claim,
		   const char *id, const char *line)
{
	int r = tally_open(sp, tw);
	struct stat st;
	if (r < 0 || fstat(tw->fd, &st) < 0) {
		warn_once(tw, "open", r < 0 ? -r : errno);
		return;
	}
	if (claim) {
		_cleanup_close_ int fd =
			openat(wdir, claim, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		struct stat cst;
		char mark[1024];
		int n = snprintf(mark, sizeof mark, "%lld %llu %s\n%s", (long long)st.st_size,
				 (unsigned long long)st.st_ino, tw->file, id);
		/* Without a mark (not a regular file), a crash in the next
		 * few lines could count it twice: recovery finds no mark. */
		if (fd >= 0 && fstat(fd, &cst) == 0 && S_ISREG(cst.st_mode) && n > 0 &&
		    (size_t)n < sizeof mark && fsetxattr(fd, TALLY_MARK, mark, (size_t)n, 0) < 0)
			warn_once(tw, "mark a claim", errno);
	}
	size_t len = strlen(line);
	if (write_all(tw->fd, line, len) < 0) {
		int e = errno;
		/* No half row for the next one to be glued to. */
		(void)!ftruncate(tw->fd, st.st_size);
		warn_once(tw, "append", e);
	}
}

void tally_row_of(const struct result *res, struct tally_row *row)
{
	row->status = res->status;
	row->lane = res->lane;
	row->user = res->user;
	row->wait_ms = res->started_ms > 0 && res->submitted_ms > 0 ? res->started_ms - res->submitted_ms : -1;
	row->run_ms = res->started_ms > 0 && res->finished_ms > 0 ? res->finished_ms - res->started_ms : -1;
}

static void format_row(const struct tally_row *row, char *line, size_t len)
{
	char st[96], la[96], us[800], w[24] = "-", r[24] = "-";
	field(st, sizeof st, row->status);
	field(la, sizeof la, row->lane);
	field(us, sizeof us, row->user);
	if (row->wait_ms >= 0)
		snprintf(w, sizeof w, "%lld", (long long)row->wait_ms);
	if (row->run_ms >= 0)
		snprintf(r, sizeof r, "%lld", (long long)row->run_ms);
	snprintf(line, len, "r %s %s %s %s %s\n", st, la, us, w, r);
}

void spool_tally_add(struct spool *sp, int wdir, const char *claim, const char *id,
		     const struct tally_row *row)
{
	struct tally_writer *tw = sp->tally;
	if (!tw)
		return; /* not a writer: it publishes no result */
	char line[1200];
	format_row(row, line, sizeof line);
	pthread_mutex_lock(&tw->mu);
	append(sp, tw, wdir, claim, id, line);
	pthread_mutex_unlock(&tw->mu);
}

void spool_tally_slots(struct spool *sp, const int *slots, int nlanes)
{
	struct tally_writer *tw = sp->tally;
	if (!tw || nlanes < 2)
		return;
	char line[64];
	snprintf(line, sizeof line, "s %d %d\n", slots[0], slots[1]);
	pthread_mutex_lock(&tw->mu);
	append(sp, tw, -1, NULL, NULL, line);
	pthread_mutex_unlock(&tw->mu);
}

/* Did the row the mark names land? The finisher marks, then appends, to
 * the end of a file that only grows while its writer's lock is held. */
static bool mark_landed(struct spool *sp, int fd, const char *id)
{
	char v[1024];
	ssize_t n = fgetxattr(fd, TALLY_MARK, v, sizeof v - 1);
	if (n <= 0)
		return false;
	v[n] = '\0';
	long long off;
	unsigned long long ino;
	int used = 0;
	if (sscanf(v, "%lld %llu %n", &off, &ino, &used) != 2 || !used)
		return false;
	char *file = v + used, *nl = strchr(file, '\n');
	if (!nl || strchr(file, '/') || strncmp(file, "w.", 2) != 0)
		return false;
	*nl = '\0';
	if (strcmp(nl + 1, id) != 0)
		return false; /* a mark of an earlier result of this file (kart retry) */
	_cleanup_close_ int d = openat(sp->root, TALLY_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	return d >= 0 && fstatat(d, file, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_ino == ino &&
	       st.st_size > off;
}

/* A published result's row (its strings borrowed from j). */
static void row_of_json(json_t *j, struct tally_row *row)
{
	*row = (struct tally_row){
		.status = json_string_value(json_object_get(j, "status")),
		.lane = json_string_value(json_object_get(j, "lane")),
		.user = json_string_value(json_object_get(json_object_get(j, "submitter"), "user")),
		.wait_ms = json_is_integer(json_object_get(j, "wait_ms"))
				   ? json_integer_value(json_object_get(j, "wait_ms")) : -1,
		.run_ms = json_is_integer(json_object_get(j, "duration_ms"))
				  ? json_integer_value(json_object_get(j, "duration_ms")) : -1,
	};
}

void spool_tally_recovered(struct spool *sp, int wdir, const char *claim, int fd, const char *id)
{
	if (!sp->tally || mark_landed(sp, fd, id))
		return;
	json_t *j = NULL;
	if (query_load(sp, id, &j) < 0)
		return;
	struct tally_row row;
	row_of_json(j, &row);
	spool_tally_add(sp, wdir, claim, id, &row);
	json_decref(j);
}

/* ---- reading ------------------------------------------------------------- */

/* The counts, keyed by the row's encoded "STATUS LANE USER" (open
 * addressing over t->count), and the histograms by lane. */
struct reader {
	struct tally *t;
	size_t *slot; /* index + 1 into t->count; 0: empty */
	size_t nslot;
	char **key;   /* the encoded key of each count */
	struct strv marks; /* "NAME OFFSET" of folded's watermarks */
};

static uint64_t hash(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

static char *decoded(const char *s, size_t n)
{
	if (n == 1 && s[0] == '-')
		return NULL;
	_cleanup_free_ char *enc = xmalloc(n + 1);
	memcpy(enc, s, n);
	enc[n] = '\0';
	char *out = xmalloc(n + 1);
	if (pct_decode(enc, out, n + 1) < 0)
		snprintf(out, n + 1, "%s", enc);
	return out;
}

static void grow(struct reader *rd)
{
	size_t n = rd->nslot ? 2 * rd->nslot : 64;
	size_t *s = xcalloc(n, sizeof *s);
	for (size_t i = 0; i < rd->t->ncount; i++) {
		uint64_t h = hash(rd->key[i], strlen(rd->key[i]));
		size_t k = h & (n - 1);
		while (s[k])
			k = (k + 1) & (n - 1);
		s[k] = i + 1;
	}
	free(rd->slot);
	rd->slot = s;
	rd->nslot = n;
}

/* key: the three encoded fields f[0..2], space-separated, as one string
 * of klen bytes. */
static void count_add(struct reader *rd, const char *key, size_t klen, const char *f[3],
		      const size_t fl[3], uint64_t n)
{
	struct tally *t = rd->t;
	if (2 * (t->ncount + 1) > rd->nslot)
		grow(rd);
	size_t k = hash(key, klen) & (rd->nslot - 1);
	for (; rd->slot[k]; k = (k + 1) & (rd->nslot - 1)) {
		size_t i = rd->slot[k] - 1;
		if (strlen(rd->key[i]) == klen && memcmp(rd->key[i], key, klen) == 0) {
			t->count[i].n += n;
			return;
		}
	}
	t->count = xrealloc(t->count, (t->ncount + 1) * sizeof *t->count);
	rd->key = xrealloc(rd->key, (t->ncount + 1) * sizeof *rd->key);
	rd->key[t->ncount] = xmalloc(klen + 1);
	memcpy(rd->key[t->ncount], key, klen);
	rd->key[t->ncount][klen] = '\0';
	t->count[t->ncount] = (struct tally_count){decoded(f[0], fl[0]), decoded(f[1], fl[1]),
						   decoded(f[2], fl[2]), n};
	rd->slot[k] = ++t->ncount;
}

static struct tally_hist *hist_of(struct tally_hist **h, size_t *n, const char *lane, size_t ll)
{
	_cleanup_free_ char *l = decoded(lane, ll);
	const char *name = l ? l : "";
	for (size_t i = 0; i < *n; i++)
		if (strcmp((*h)[i].lane, name) == 0)
			return &(*h)[i];
	*h = xrealloc(*h, (*n + 1) * sizeof **h);
	struct tally_hist *x = &(*h)[(*n)++];
	memset(x, 0, sizeof *x);
	x->lane = xstrdup(name);
	return x;
}

/* A number of a line: 0 <= v, or -1. */
static long long number(const char *s, size_t n)
{
	char num[24];
	if (n == 0 || n >= sizeof num)
		return -1;
	memcpy(num, s, n);
	num[n] = '\0';
	char *end;
	errno = 0;
	long long v = strtoll(num, &end, 10);
	return *end || errno || v < 0 ? -1 : v;
}

static void hist_add(struct tally_hist **h, size_t *n, const char *lane, size_t ll, const char *ms,
		     size_t msl)
{
	long long v = number(ms, msl);
	if (v < 0)
		return; /* "-": not timed */
	struct tally_hist *x = hist_of(h, n, lane, ll);
	double s = (double)v / 1000.0;
	size_t b = 0;
	while (b < TALLY_BUCKETS - 1 && s > tally_bounds_s[b])
		b++;
	x->bucket[b]++;
	x->n++;
	x->sum_ms += v;
}

/* Split a line into at most n space-separated fields. */
static size_t split(const char *s, size_t len, const char **f, size_t *fl, size_t n)
{
	size_t k = 0, i = 0;
	while (i < len && k < n) {
		size_t j = i;
		while (j < len && s[j] != ' ')
			j++;
		f[k] = s + i;
		fl[k++] = j - i;
		i = j + 1;
	}
	return i < len ? n + 1 : k; /* more than n: not a line we know */
}

/* A row file's line: "r STATUS LANE USER WAIT_MS RUN_MS", "s FAST BATCH". */
static void row_line(struct reader *rd, const char *writer, const char *s, size_t len)
{
	struct tally *t = rd->t;
	const char *f[6];
	size_t fl[6];
	size_t n = split(s, len, f, fl, 6);
	bool timed = n == 6 && (number(f[4], fl[4]) >= 0 || (fl[4] == 1 && f[4][0] == '-')) &&
		     (number(f[5], fl[5]) >= 0 || (fl[5] == 1 && f[5][0] == '-'));
	if (n == 6 && fl[0] == 1 && f[0][0] == 'r' && timed) {
		count_add(rd, f[1], (size_t)(f[4] - f[1] - 1), f + 1, fl + 1, 1);
		hist_add(&t->wait, &t->nwait, f[2], fl[2], f[4], fl[4]);
		hist_add(&t->run, &t->nrun, f[2], fl[2], f[5], fl[5]);
		t->rows++;
	} else if (n == 3 && fl[0] == 1 && f[0][0] == 's' && writer) {
		struct tally_slots *x = NULL;
		for (size_t i = 0; i < t->nslots && !x; i++)
			if (strcmp(t->slots[i].writer, writer) == 0)
				x = &t->slots[i];
		if (!x) {
			t->slots = xrealloc(t->slots, (t->nslots + 1) * sizeof *t->slots);
			x = &t->slots[t->nslots++];
			x->writer = xstrdup(writer);
		}
		x->fast = strtol(f[1], NULL, 10);
		x->batch = strtol(f[2], NULL, 10);
	} else
		t->bad++;
}

/* folded's line: "p", "c STATUS LANE USER N", "h run|wait LANE N SUM_MS
 * B0..B11", "m NAME OFFSET". */
static void folded_line(struct reader *rd, const char *s, size_t len)
{
	struct tally *t = rd->t;
	const char *f[5 + TALLY_BUCKETS];
	size_t fl[5 + TALLY_BUCKETS];
	size_t n = split(s, len, f, fl, 5 + TALLY_BUCKETS);
	long long v;
	if (n == 1 && fl[0] == 1 && f[0][0] == 'p')
		t->pretally = true;
	else if (n == 5 && fl[0] == 1 && f[0][0] == 'c' && (v = number(f[4], fl[4])) >= 0)
		count_add(rd, f[1], (size_t)(f[4] - f[1] - 1), f + 1, fl + 1, (uint64_t)v);
	else if (n == 5 + TALLY_BUCKETS && fl[0] == 1 && f[0][0] == 'h' &&
		   ((fl[1] == 3 && !memcmp(f[1], "run", 3)) || (fl[1] == 4 && !memcmp(f[1], "wait", 4)))) {
		long long cnt = number(f[3], fl[3]), sum = number(f[4], fl[4]), b[TALLY_BUCKETS];
		bool ok = cnt >= 0 && sum >= 0;
		for (int i = 0; i < TALLY_BUCKETS && ok; i++)
			ok = (b[i] = number(f[5 + i], fl[5 + i])) >= 0;
		if (!ok) {
			t->bad++;
			return;
		}
		bool run = f[1][0] == 'r';
		struct tally_hist *x = hist_of(run ? &t->run : &t->wait, run ? &t->nrun : &t->nwait,
					       f[2], fl[2]);
		for (int i = 0; i < TALLY_BUCKETS; i++)
			x->bucket[i] += (uint64_t)b[i];
		x->n += (uint64_t)cnt;
		x->sum_ms += sum;
	} else if (n == 3 && fl[0] == 1 && f[0][0] == 'm' && number(f[2], fl[2]) >= 0) {
		_cleanup_free_ char *m = xmalloc(len);
		memcpy(m, s + 2, len - 2);
		m[len - 2] = '\0';
		strv_add(&rd->marks, m);
	} else
		t->bad++;
}

/* The offset up to which folded holds name's rows; 0: none of them. */
static off_t mark_of(const struct reader *rd, const char *name)
{
	size_t l = strlen(name);
	for (size_t i = 0; i < rd->marks.n; i++)
		if (strncmp(rd->marks.v[i], name, l) == 0 && rd->marks.v[i][l] == ' ')
			return (off_t)strtoll(rd->marks.v[i] + l + 1, NULL, 10);
	return 0;
}

/* Each complete line of fd from offset from (a header first when from is
 * 0, which must be header), to line(); returns the offset after the last
 * complete line, or -1 when the header is another's (not ours to read). */
static off_t read_lines(int fd, off_t from, const char *header, struct reader *rd, const char *writer,
			void (*line)(struct reader *, const char *, const char *, size_t))
{
	enum { BUF = 1 << 16 };
	_cleanup_free_ char *buf = xmalloc(BUF);
	size_t have = 0;
	bool need_header = from == 0;
	off_t at = from, done = from;
	for (;;) {
		ssize_t n = pread(fd, buf + have, BUF - have, at);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		at += n;
		have += (size_t)n;
		size_t start = 0;
		for (char *nl; (nl = memchr(buf + start, '\n', have - start));) {
			size_t len = (size_t)(nl - (buf + start));
			if (need_header) {
				if (len != strlen(header) || memcmp(buf + start, header, len))
					return -1;
				need_header = false;
			} else
				line(rd, writer, buf + start, len);
			start += len + 1;
		}
		done += (off_t)start;
		memmove(buf, buf + start, have - start);
		have -= start;
		if (have == BUF) {
			/* No line is that long: skipped, up to its end. */
			done += BUF;
			have = 0;
			rd->t->bad++;
		}
	}
	/* A last line without its newline is a row being written: not yet. */
	return done;
}

static void folded_line_cb(struct reader *rd, const char *writer, const char *s, size_t len)
{
	(void)writer;
	folded_line(rd, s, len);
}

static void reader_free(struct reader *rd)
{
	for (size_t i = 0; i < rd->t->ncount; i++)
		free(rd->key[i]);
	free(rd->key);
	free(rd->slot);
	strv_free(&rd->marks);
	memset(rd, 0, sizeof *rd);
}

/* A regular file of d, opened without following a link or blocking on a
 * FIFO; -1 (errno) otherwise. */
static int open_plain(int d, const char *name, struct stat *st)
{
	int fd = openat(d, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0 && (fstat(fd, st) < 0 || !S_ISREG(st->st_mode))) {
		(void)close(fd);
		errno = EINVAL;
		return -1;
	}
	return fd;
}

/* Every row file of d, each from where folded (read into rd) stops.
 * 1: a fold renamed or removed one meanwhile (look again), 0, -errno. */
static int read_rows(int d, struct reader *rd)
{
	struct strv names = {0};
	int rc = dir_names(d, ".", &names);
	if (rc < 0)
		return rc;
	ino_t *seen = xcalloc(names.n + 1, sizeof *seen);
	size_t nseen = 0;
	for (size_t i = 0; i < names.n && !rc; i++) {
		const char *name = names.v[i];
		bool fold = strncmp(name, TALLY_FOLD_PREFIX, strlen(TALLY_FOLD_PREFIX)) == 0;
		if (strncmp(name, "w.", 2) != 0 && !fold)
			continue;
		off_t from = mark_of(rd, name);
		struct stat st;
		_cleanup_close_ int fd = open_plain(d, name, &st);
		if (fd < 0) {
			/* Gone since the listing: a fold's (unless folded
			 * already holds all of it). */
			if (errno == ENOENT && !(fold && from > 0))
				rc = 1;
			continue;
		}
		/* Seen under two names (renamed by a fold in the middle of
		 * the listing): look again. */
		for (size_t k = 0; k < nseen; k++)
			if (seen[k] == st.st_ino)
				rc = 1;
		seen[nseen++] = st.st_ino;
		if (read_lines(fd, from, TALLY_HEADER, rd, fold ? NULL : name + 2, row_line) >= 0)
			rd->t->files++;
	}
	free(seen);
	strv_free(&names);
	return rc;
}

/* One look at tally/: folded, then the row files. A fold replaces
 * folded whole, so a new one at the end means it ran meanwhile: 1 (look
 * again), 0, or -errno. */
static int read_once(int d, struct tally *t)
{
	struct reader rd = {.t = t};
	struct stat st1, st2;
	_cleanup_close_ int ff = open_plain(d, TALLY_FOLDED, &st1);
	int rc = ff < 0 && errno != ENOENT ? -errno : 0;
	if (!rc && ff >= 0 && read_lines(ff, 0, TALLY_FOLDED_HEADER, &rd, NULL, folded_line_cb) >= 0)
		t->files++;
	if (!rc)
		rc = read_rows(d, &rd);
	bool now = fstatat(d, TALLY_FOLDED, &st2, AT_SYMLINK_NOFOLLOW) == 0;
	if (!rc && (now != (ff >= 0) || (now && st2.st_ino != st1.st_ino)))
		rc = 1;
	reader_free(&rd);
	return rc;
}

int tally_read(struct spool *sp, struct tally *t)
{
	memset(t, 0, sizeof *t);
	_cleanup_close_ int d = openat(sp->root, TALLY_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d < 0)
		return -errno;
	for (int tries = 0; tries < 20; tries++) {
		int r = read_once(d, t);
		if (r <= 0)
			return r;
		tally_free(t);
		usleep(10000);
	}
	return -EAGAIN;
}

void tally_free(struct tally *t)
{
	for (size_t i = 0; i < t->ncount; i++) {
		free(t->count[i].status);
		free(t->count[i].lane);
		free(t->count[i].user);
	}
	for (size_t i = 0; i < t->nrun; i++)
		free(t->run[i].lane);
	for (size_t i = 0; i < t->nwait; i++)
		free(t->wait[i].lane);
	for (size_t i = 0; i < t->nslots; i++)
		free(t->slots[i].writer);
	free(t->count);
	free(t->run);
	free(t->wait);
	free(t->slots);
	memset(t, 0, sizeof *t);
}

/* ---- folding (kart gc) ------------------------------------------------------ */

/* The mark of d/name, read by its path: a claim may be a member's hard
 * link to a file elsewhere, or a FIFO, which is not ours to open.
 * Its length, or -1 (errno: ENOENT no such file, ENODATA no mark). */
static ssize_t xattr_at(int d, const char *name, char *v, size_t len)
{
	char p[PATH_MAX];
	if (pathfmt(p, sizeof p, "/proc/self/fd/%d/%s", d, name) < 0) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return lgetxattr(p, TALLY_MARK, v, len);
}

/* "FILE INODE" of each mark on a claim still in cur/ (a finish or a
 * recovery that may yet be retried, whose mark_landed must find FILE as
 * it is). */
static void pending_marks(struct spool *sp, struct strv *out)
{
	struct strv workers = {0};
	if (dir_names(sp->cur, ".", &workers) < 0)
		return;
	for (size_t i = 0; i < workers.n; i++) {
		struct strv claims = {0};
		_cleanup_close_ int wd = workers.v[i][0] == '.' ? -1
					 : openat(sp->cur, workers.v[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (wd < 0 || dir_names(wd, ".", &claims) < 0)
			continue;
		for (size_t k = 0; k < claims.n; k++) {
			char v[1024], file[600];
			long long off;
			unsigned long long ino;
			ssize_t n = claims.v[k][0] == '.' ? -1 : xattr_at(wd, claims.v[k], v, sizeof v - 1);
			if (n <= 0)
				continue;
			v[n] = '\0';
			if (sscanf(v, "%lld %llu %599[^\n]", &off, &ino, file) == 3) {
				char m[640];
				snprintf(m, sizeof m, "%s %llu", file, ino);
				strv_add(out, m);
			}
		}
		strv_free(&claims);
	}
	strv_free(&workers);
}

static bool marked(const struct strv *marks, const char *file, ino_t ino)
{
	char m[640];
	snprintf(m, sizeof m, "%s %llu", file, (unsigned long long)ino);
	for (size_t i = 0; i < marks->n; i++)
		if (strcmp(marks->v[i], m) == 0)
			return true;
	return false;
}

/* Results published before tally/ was made (a spool of an older kart),
 * counted into rd once. A result is one of them when its JSON is older
 * than tally/ and its task file carries no mark of its row (the first
 * result a writer counts is published just before it makes tally/, and
 * is marked), or, with no task file, when it finished before tally/. */
static int count_pretally(struct spool *sp, int d, struct reader *rd, struct tally_fold *out)
{
	struct statx sx;
	if (statx(d, "", AT_EMPTY_PATH, STATX_BTIME, &sx) < 0 || !(sx.stx_mask & STATX_BTIME)) {
		snprintf(out->why, sizeof out->why,
			 "this filesystem does not say when tally/ was made: results older than it "
			 "are not counted");
		return -ENOTSUP;
	}
	int64_t birth = (int64_t)sx.stx_btime.tv_sec * 1000 + sx.stx_btime.tv_nsec / 1000000;
	struct strv names = {0};
	int r = dir_names(sp->done, ".", &names);
	if (r < 0)
		return r;
	for (size_t i = 0; i < names.n; i++) {
		char *n = names.v[i], task[600], v[1024];
		size_t l = strlen(n);
		struct stat st;
		if (n[0] == '.' || l <= 5 || strcmp(n + l - 5, ".json") != 0 ||
		    fstatat(sp->done, n, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000 >= birth)
			continue;
		n[l - 5] = '\0';
		if (spool_name_done(task, sizeof task, n, DONE_TASK) < 0)
			continue;
		ssize_t m = xattr_at(sp->done, task, v, sizeof v - 1);
		bool has_task = m >= 0 || errno != ENOENT;
		if (m > 0) {
			v[m] = '\0';
			const char *id = strchr(v, '\n');
			if (id && strcmp(id + 1, n) == 0)
				continue; /* its row was written */
		}
		json_t *j = NULL;
		if (query_load(sp, n, &j) < 0)
			continue;
		const char *fin = json_string_value(json_object_get(j, "finished_at"));
		struct tm tm = {0};
		const char *e = fin ? strptime(fin, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
		if (!has_task && (!e || (int64_t)timegm(&tm) * 1000 >= birth)) {
			json_decref(j);
			continue;
		}
		struct tally_row row;
		char line[1200];
		row_of_json(j, &row);
		format_row(&row, line, sizeof line);
		row_line(rd, NULL, line, strlen(line) - 1);
		json_decref(j);
		out->pretally++;
	}
	strv_free(&names);
	return 0;
}

static void put_hist(FILE *f, const char *what, const struct tally_hist *h, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char la[96];
		field(la, sizeof la, h[i].lane);
		fprintf(f, "h %s %s %llu %lld", what, la, (unsigned long long)h[i].n, (long long)h[i].sum_ms);
		for (int b = 0; b < TALLY_BUCKETS; b++)
			fprintf(f, " %llu", (unsigned long long)h[i].bucket[b]);
		fputc('\n', f);
	}
}

/* folded, anew: by a temporary name, fsynced, renamed over the old. */
static int write_folded(int d, const struct reader *rd, const struct strv *marks)
{
	char tmp[64];
	snprintf(tmp, sizeof tmp, ".folded.%d.tmp", (int)getpid());
	(void)unlinkat(d, tmp, 0);
	int fd = openat(d, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	FILE *f = fdopen(fd, "w");
	if (!f) {
		int e = errno;
		(void)close(fd);
		(void)unlinkat(d, tmp, 0);
		return -e;
	}
	const struct tally *t = rd->t;
	fprintf(f, "%s\n", TALLY_FOLDED_HEADER);
	if (t->pretally)
		fputs("p\n", f);
	for (size_t i = 0; i < t->ncount; i++)
		fprintf(f, "c %s %llu\n", rd->key[i], (unsigned long long)t->count[i].n);
	put_hist(f, "run", t->run, t->nrun);
	put_hist(f, "wait", t->wait, t->nwait);
	for (size_t i = 0; i < marks->n; i++)
		fprintf(f, "m %s\n", marks->v[i]);
	int e = fflush(f) != 0 || fsync(fd) < 0 ? errno : 0;
	if (fclose(f) != 0 && !e)
		e = errno;
	if (!e && renameat(d, tmp, d, TALLY_FOLDED) < 0)
		e = errno;
	if (e) {
		(void)unlinkat(d, tmp, 0);
		return -e;
	}
	return fsync(d) < 0 ? -errno : 0;
}

struct fold_src {
	char name[TASK_NAME_MAX + 96]; /* its name; once renamed, its f. name */
	char wid[TASK_NAME_MAX + 1];   /* w.W: W */
	int lock;                      /* its writer's cur/W/.lock, held; or -1 */
	bool made;                     /* and cur/W was made for it */
	off_t end;                     /* folded up to here; -1: left as it is */
};

/* The files no writer can append to meanwhile: f.* (no writer's),
 * and each w.W whose writer's lock we now hold (a writer appends only
 * while it holds it, and one starting waits for it). */
static void fold_sources(struct spool *sp, const struct strv *names, struct fold_src **src, size_t *n)
{
	for (size_t i = 0; i < names->n; i++) {
		const char *nm = names->v[i], *why;
		struct fold_src x = {.lock = -1};
		bool w = strncmp(nm, "w.", 2) == 0;
		if (!w && strncmp(nm, TALLY_FOLD_PREFIX, strlen(TALLY_FOLD_PREFIX)) != 0)
			continue;
		if (w && (task_name_check(nm + 2, &why) != 0 ||
			  spool_worker_hold(sp, nm + 2, &x.lock, &x.made) < 0))
			continue; /* its writer lives (or no writer could be it) */
		snprintf(x.name, sizeof x.name, "%s", nm);
		if (w)
			snprintf(x.wid, sizeof x.wid, "%s", nm + 2);
		*src = xrealloc(*src, (*n + 1) * sizeof **src);
		(*src)[(*n)++] = x;
	}
}

int tally_fold(struct spool *sp, struct tally_fold *out)
{
	memset(out, 0, sizeof *out);
	_cleanup_close_ int d = openat(sp->root, TALLY_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d < 0)
		return errno == ENOENT ? 0 : -errno;
	/* One fold at a time, by a lock only the spool's owner can open
	 * (readers need none: read_once). */
	_cleanup_close_ int lk = openat(d, TALLY_FOLD_LOCK, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (lk < 0)
		return -errno;
	if (flock(lk, LOCK_EX | LOCK_NB) < 0)
		return errno == EWOULDBLOCK ? -EBUSY : -errno;
	struct tally t = {0};
	struct reader rd = {.t = &t};
	struct strv names = {0}, pend = {0}, marks = {0};
	struct fold_src *src = NULL;
	size_t nsrc = 0;
	struct stat st;
	bool changed = false;
	int r = 0;
	_cleanup_close_ int ff = open_plain(d, TALLY_FOLDED, &st);
	if (ff < 0 && errno != ENOENT)
		r = -errno;
	else if (ff >= 0 && read_lines(ff, 0, TALLY_FOLDED_HEADER, &rd, NULL, folded_line_cb) < 0)
		r = -EPROTO; /* another version's: not ours to rewrite */
	/* Once: what was published before tally/ (no writer held for it). */
	if (!r && !t.pretally) {
		int pr = count_pretally(sp, d, &rd, out);
		if (pr == 0)
			t.pretally = changed = true;
		else if (pr != -ENOTSUP)
			r = pr;
	}
	if (!r)
		r = dir_names(d, ".", &names);
	if (!r)
		fold_sources(sp, &names, &src, &nsrc);
	/* Only a writer holding its lock marks a claim with its file: the
	 * marks are looked at once every writer folded is held. */
	if (!r)
		pending_marks(sp, &pend);
	for (size_t i = 0; !r && i < nsrc; i++) {
		struct fold_src *x = &src[i];
		_cleanup_close_ int fd = open_plain(d, x->name, &st);
		x->end = -1;
		if (fd < 0 || (x->name[0] == 'w' && marked(&pend, x->name, st.st_ino)))
			continue; /* gone, or a recovery may yet look for it */
		if (x->name[0] == 'w') {
			/* Out of its writer's name first; the new name is never
			 * used again. */
			char nn[sizeof x->name];
			snprintf(nn, sizeof nn, "%s%s.%llu.%lld", TALLY_FOLD_PREFIX, x->name + 2,
				 (unsigned long long)st.st_ino, (long long)now_realtime_ms());
			if (renameat(d, x->name, d, nn) < 0)
				continue;
			snprintf(x->name, sizeof x->name, "%s", nn);
		}
		x->end = read_lines(fd, mark_of(&rd, x->name), TALLY_HEADER, &rd, NULL, row_line);
		if (x->end < 0)
			continue; /* another version's rows: left to it */
		out->files++;
		changed = true;
		char m[sizeof x->name + 24];
		snprintf(m, sizeof m, "%s %lld", x->name, (long long)x->end);
		strv_add(&marks, m);
	}
	/* The marks of earlier folds whose file is still there (killed
	 * between its rename and its removal), unless folded again now. */
	for (size_t i = 0; !r && i < rd.marks.n; i++) {
		char n[600];
		bool keep = sscanf(rd.marks.v[i], "%599s", n) == 1 &&
			    fstatat(d, n, &st, AT_SYMLINK_NOFOLLOW) == 0;
		for (size_t k = 0; k < nsrc && keep; k++)
			keep = !(src[k].end >= 0 && strcmp(src[k].name, n) == 0);
		if (keep)
			strv_add(&marks, rd.marks.v[i]);
		else
			changed = true; /* dropped, or renewed above */
	}
	if (!r && changed)
		r = write_folded(d, &rd, &marks);
	/* In folded now: gone. (Killed before this, a file stays, and its
	 * mark says how much of it folded holds.) */
	for (size_t i = 0; i < nsrc; i++) {
		if (!r && src[i].end >= 0)
			(void)unlinkat(d, src[i].name, 0);
		if (src[i].lock >= 0)
			spool_worker_unhold(sp, src[i].wid, src[i].lock, src[i].made);
	}
	free(src);
	strv_free(&names);
	strv_free(&pend);
	strv_free(&marks);
	reader_free(&rd);
	tally_free(&t);
	return r;
}
