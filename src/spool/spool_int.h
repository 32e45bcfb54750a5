/* spool_int.h - what spool.c, spool_submit.c, spool_finish.c and
 * spool_recover.c share, one section per file. Nothing here is for the
 * rest of kart (spool.h is). */
#ifndef KART_SPOOL_INT_H
#define KART_SPOOL_INT_H

#include "spool.h"

/* ---- spool.c ---- */

/* Is there an entry dirfd/name (or no telling: true)? */
bool exists_at(int dirfd, const char *name);
/* done/ID.task or done/ID.json: a result, or its id reserved. */
bool done_has_result(struct spool *sp, const char *id);
/* The same, or done/ID.attempts/ (spool_retry's hold on the id). */
bool done_has(struct spool *sp, const char *id);
/* The n-th candidate id of base: base, base.2, base.3, ...; -EEXIST
 * past the millionth. */
int next_id(const char *base, int n, char *out, size_t outlen);
/* A claim's task file, opened to read, never following a link. */
int open_regular(int dirfd, const char *name);
/* Are a and b the stat of one file? */
static inline bool same_inode(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}
/* Is done/name a link of the file st (a finish of it begun)? */
bool done_links(struct spool *sp, const char *name, const struct stat *st);
/* A file's ctime in ms: when a task without user.kart arrived. */
static inline int64_t ctime_ms(const struct stat *st)
{
	return (int64_t)st->st_ctim.tv_sec * 1000 + st->st_ctim.tv_nsec / 1000000;
}
/* The account name of uid into name: false if none, or it does not fit. */
bool uid_name(uid_t uid, char *name, size_t n);

/* ---- spool_submit.c ---- */

/* Remove ids/ID if it is the reservation of the file st, by owner. */
void ids_release(struct spool *sp, const char *id, const struct stat *st, uid_t owner);

/* ---- spool_finish.c ---- */

/* Write done/<id>.json durably, never over an existing result but with
 * redo; with pend, left pending there for the caller to commit. */
int write_result_json(struct spool *sp, const char *id, const char *json, bool redo,
		      uid_t reader, struct json_pending *pend);
/* Make the entry done/name dirty again, for an fsync that can be trusted. */
int redirty(struct spool *sp, const char *name);
/* done/ID.task without its env= values, once claim name (in wdir) of
 * it is gone: 0, or -errno (the values stay). spool_finish.c's. */
int spool_scrub_task(struct spool *sp, int wdir, const char *name, const char *id);

#endif
