/* tally.h - the results counted, so that kart metrics reads a few files
 * instead of every done/ID.json (spool-layout/README.md, "tally/").
 *
 * tally/w.WRITER is appended by the holder of cur/WRITER/.lock alone: one
 * row per result it publishes, after the result is durable and before its
 * claim goes. The claim is marked first (xattr user.kart.tally: where the
 * row goes), so that recovery of a finisher killed in between can tell
 * whether its row landed: no result is counted twice or missed. Rows name
 * no task: a member who reads them learns what kart metrics shows. */
#ifndef KART_TALLY_H
#define KART_TALLY_H

#include <stdint.h>

#include "spool.h"

struct result;

/* The histograms' upper bounds in seconds; the last bucket is +Inf. */
#define TALLY_BUCKETS 12
extern const double tally_bounds_s[TALLY_BUCKETS - 1];

/* One result as counted: -1 for a time that is null. */
struct tally_row {
	const char *status, *lane, *user; /* user NULL: unknown */
	int64_t wait_ms, run_ms;
};
void tally_row_of(const struct result *res, struct tally_row *row);

/* Append res's row to this process's tally (the writer named by its
 * spool_worker_open), marking the claim wdir/claim first. Failures are
 * logged, never returned: a result is not undone for its count. */
void spool_tally_add(struct spool *sp, int wdir, const char *claim, const char *id,
		     const struct tally_row *row);
/* Recovery of claim (fd), whose done/ID.json exists: add its row unless
 * its mark shows the dead finisher's row landed. */
void spool_tally_recovered(struct spool *sp, int wdir, const char *claim, int fd, const char *id);
/* A worker's slots, as one row of its tally (kart metrics reports them
 * for live workers). */
void spool_tally_slots(struct spool *sp, const int *slots, int nlanes);

/* The writer this process is (spool_worker_open names it), and its end
 * (spool_close). */
void tally_writer_set(struct spool *sp, const char *wid);
void tally_writer_free(struct spool *sp);

/* ---- reading ---- */

struct tally_count {
	char *status, *lane, *user;
	uint64_t n;
};
struct tally_hist {
	char *lane;
	uint64_t bucket[TALLY_BUCKETS]; /* not cumulative */
	uint64_t n;
	int64_t sum_ms;
};
struct tally_slots {
	char *writer;
	long fast, batch;
};
struct tally {
	struct tally_count *count;
	size_t ncount;
	struct tally_hist *run, *wait;
	size_t nrun, nwait;
	struct tally_slots *slots;
	size_t nslots;
	size_t files, rows, bad; /* bad: lines not understood (skipped) */
	bool pretally; /* the results older than tally/ are counted (tally_fold) */
};
/* Sum folded and every row file: 0, -ENOENT when the spool has no
 * tally/ (made before it existed), or another -errno. */
int tally_read(struct spool *sp, struct tally *t);
void tally_free(struct tally *t);

/* ---- folding (kart gc) ---- */

/* The row files of writers that are gone, folded into tally/folded (the
 * counts and histograms, summed), so that tally/ does not grow by a file
 * each worker start; and once, the results published before tally/ was
 * made. Crash-safe: a row file is first renamed to a name of its own
 * (f.*), then folded is replaced whole (by rename) with a mark of
 * how much of each such file it holds, then the file is removed; readers
 * read each file from its mark. A file a writer holds (flock, for its
 * life) or that a claim's mark names (a recovery may look for it) stays.
 * 0, -EBUSY (another fold runs), or -errno. */
struct tally_fold {
	size_t files, pretally; /* row files folded, results older than tally/ counted */
	char why[160]; /* why results older than tally/ were not counted, or "" */
};
int tally_fold(struct spool *sp, struct tally_fold *out);

#endif
