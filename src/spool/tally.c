/* tally.c - see tally.h. */
#define _GNU_SOURCE
#include "tally.h"

#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "query.h"
#include "result.h"
#include "spool_int.h"
#include "task.h"
#include "util.h"

const double tally_bounds_s[TALLY_BUCKETS - 1] = {0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 14400};

#define TALLY_DIR "tally"
#define TALLY_HEADER "kart-tally 1"
#define TALLY_MARK "user.kart.tally"

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

static int tally_open(struct spool *sp, struct tally_writer *tw)
{
	if (tw->fd >= 0)
		return 0;
	_cleanup_close_ int d = tally_dir(sp);
	if (d < 0)
		return d;
	_cleanup_close_ int fd =
		openat(d, tw->file, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
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
		_cleanup_close_ int rd = openat(d, tw->file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		char last;
		if (rd >= 0 && pread(rd, &last, 1, st.st_size - 1) == 1 && last != '\n' &&
		    write_all(fd, "\n", 1) < 0)
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

void spool_tally_recovered(struct spool *sp, int wdir, const char *claim, int fd, const char *id)
{
	if (!sp->tally || mark_landed(sp, fd, id))
		return;
	json_t *j = NULL;
	if (query_load(sp, id, &j) < 0)
		return;
	struct tally_row row = {
		.status = json_string_value(json_object_get(j, "status")),
		.lane = json_string_value(json_object_get(j, "lane")),
		.user = json_string_value(json_object_get(json_object_get(j, "submitter"), "user")),
		.wait_ms = json_is_integer(json_object_get(j, "wait_ms"))
				   ? json_integer_value(json_object_get(j, "wait_ms")) : -1,
		.run_ms = json_is_integer(json_object_get(j, "duration_ms"))
				  ? json_integer_value(json_object_get(j, "duration_ms")) : -1,
	};
	spool_tally_add(sp, wdir, claim, id, &row);
	json_decref(j);
}

/* ---- reading ------------------------------------------------------------- */

/* The counts, keyed by the row's encoded "STATUS LANE USER": an open
 * addressing table over t->count. */
struct reader {
	struct tally *t;
	size_t *slot; /* index + 1 into t->count; 0: empty */
	size_t nslot;
	char **key;   /* the encoded key of each count */
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

static void count_add(struct reader *rd, const char *key, size_t klen, const char *f[3],
		      const size_t fl[3])
{
	struct tally *t = rd->t;
	if (2 * (t->ncount + 1) > rd->nslot)
		grow(rd);
	size_t k = hash(key, klen) & (rd->nslot - 1);
	for (; rd->slot[k]; k = (k + 1) & (rd->nslot - 1)) {
		size_t i = rd->slot[k] - 1;
		if (strlen(rd->key[i]) == klen && memcmp(rd->key[i], key, klen) == 0) {
			t->count[i].n++;
			return;
		}
	}
	t->count = xrealloc(t->count, (t->ncount + 1) * sizeof *t->count);
	rd->key = xrealloc(rd->key, (t->ncount + 1) * sizeof *rd->key);
	rd->key[t->ncount] = xmalloc(klen + 1);
	memcpy(rd->key[t->ncount], key, klen);
	rd->key[t->ncount][klen] = '\0';
	t->count[t->ncount] = (struct tally_count){decoded(f[0], fl[0]), decoded(f[1], fl[1]),
						   decoded(f[2], fl[2]), 1};
	rd->slot[k] = ++t->ncount;
}

static void hist_add(struct tally_hist **h, size_t *n, const char *lane, size_t ll, const char *ms,
		     size_t msl)
{
	if (msl == 1 && ms[0] == '-')
		return;
	char num[24];
	if (msl >= sizeof num)
		return;
	memcpy(num, ms, msl);
	num[msl] = '\0';
	char *end;
	long long v = strtoll(num, &end, 10);
	if (*end || v < 0)
		return;
	_cleanup_free_ char *l = decoded(lane, ll);
	const char *name = l ? l : "";
	struct tally_hist *x = NULL;
	for (size_t i = 0; i < *n && !x; i++)
		if (strcmp((*h)[i].lane, name) == 0)
			x = &(*h)[i];
	if (!x) {
		*h = xrealloc(*h, (*n + 1) * sizeof **h);
		x = &(*h)[(*n)++];
		memset(x, 0, sizeof *x);
		x->lane = xstrdup(name);
	}
	double s = v / 1000.0;
	size_t b = 0;
	while (b < TALLY_BUCKETS - 1 && s > tally_bounds_s[b])
		b++;
	x->bucket[b]++;
	x->n++;
	x->sum_s += s;
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

static void line(struct reader *rd, const char *writer, const char *s, size_t len)
{
	struct tally *t = rd->t;
	const char *f[6];
	size_t fl[6];
	size_t n = split(s, len, f, fl, 6);
	if (n == 6 && fl[0] == 1 && f[0][0] == 'r') {
		count_add(rd, f[1], (size_t)(f[4] - f[1] - 1), f + 1, fl + 1);
		hist_add(&t->wait, &t->nwait, f[2], fl[2], f[4], fl[4]);
		hist_add(&t->run, &t->nrun, f[2], fl[2], f[5], fl[5]);
		t->rows++;
	} else if (n == 3 && fl[0] == 1 && f[0][0] == 's') {
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

static void read_one(struct reader *rd, int d, const char *name)
{
	_cleanup_close_ int fd = openat(d, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	rd->t->files++;
	enum { BUF = 1 << 16 };
	_cleanup_free_ char *buf = xmalloc(BUF);
	size_t have = 0;
	bool header = false;
	for (;;) {
		ssize_t n = read(fd, buf + have, BUF - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
		size_t start = 0;
		for (char *nl; (nl = memchr(buf + start, '\n', have - start));) {
			size_t len = (size_t)(nl - (buf + start));
			if (!header) {
				if (len != strlen(TALLY_HEADER) || memcmp(buf + start, TALLY_HEADER, len))
					return; /* another version: not ours to read */
				header = true;
			} else
				line(rd, name + 2, buf + start, len);
			start += len + 1;
		}
		memmove(buf, buf + start, have - start);
		have -= start;
		if (have == BUF)
			have = 0, rd->t->bad++; /* no row is that long */
	}
	/* A last line without its newline is a row being written: not yet. */
}

int tally_read(struct spool *sp, struct tally *t)
{
	memset(t, 0, sizeof *t);
	_cleanup_close_ int d = openat(sp->root, TALLY_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d < 0)
		return -errno;
	struct strv names = {0};
	int r = dir_names(d, ".", &names);
	if (r < 0)
		return r;
	struct reader rd = {.t = t};
	for (size_t i = 0; i < names.n; i++)
		if (strncmp(names.v[i], "w.", 2) == 0)
			read_one(&rd, d, names.v[i]);
	strv_free(&names);
	for (size_t i = 0; i < t->ncount; i++)
		free(rd.key[i]);
	free(rd.key);
	free(rd.slot);
	return 0;
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
