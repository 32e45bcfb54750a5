/* spool_name.h - every name on disk: the spool's suffix tables, the
 * builders of its names and their inverses (spool-layout README §1, §2).
 * Pure: strings in, strings out, no descriptor and no struct spool, so
 * that it sits below the protocol (spool.c and its sections) and
 * everything above can spell a name the one way. spool.h includes it. */
#ifndef KART_SPOOL_NAME_H
#define KART_SPOOL_NAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A result's files in done/: ID followed by one of these suffixes. */
enum done_file { DONE_JSON, DONE_TASK, DONE_STDOUT, DONE_STDERR, DONE_REJECTED, DONE_OUT,
		DONE_ATTEMPTS, DONE_NFILES };
extern const char *const spool_done_suffix[DONE_NFILES]; /* ".json", ... */
/* A claim's scratch entries beside it in cur/<wid>/: "." NAME "." suffix. */
enum scratch_file {
	SCRATCH_STDOUT, SCRATCH_STDERR, SCRATCH_WORK, SCRATCH_TMP, SCRATCH_OUT, SCRATCH_CANCEL,
	SCRATCH_PAUSE, SCRATCH_PAUSED, SCRATCH_NOPAUSE, SCRATCH_LOCK, SCRATCH_SCRUB, SCRATCH_NFILES
};
extern const char *const spool_scratch_suffix[SCRATCH_NFILES]; /* "stdout", ... */

/* cur/WID/.enforced: what a live worker can hold of memory=, pids= and
 * cpu=, and the variables it lacks (worker_enforce.c, read by kart
 * submit); a dot name, so no task's. */
#define SPOOL_ENFORCED ".enforced"

/* Name builders: 0, or -ENAMETOOLONG when buf is too small (never cut). */
int spool_name_done(char *buf, size_t n, const char *id, enum done_file f);
int spool_name_scratch(char *buf, size_t n, const char *name, enum scratch_file f);
/* WORKER/.NAME.SUFFIX: a claim's scratch entry, relative to cur/. */
int spool_name_claim_scratch(char *buf, size_t n, const char *worker, const char *name,
			     enum scratch_file f);
/* cur/.uniq/: the workers' own directory (0700) of the locks of unique=
 * keys, UID.HASH (HASH: FNV-1a of the key), each there while a task of
 * user UID with that key runs. */
#define SPOOL_UNIQ_DIR ".uniq"
/* cur/.hoist: a spool with drop/; the workers' lock of their hoists
 * (worker_drop.c), 0600, nobody else's to open. */
#define SPOOL_HOIST_LOCK ".hoist"
int spool_name_uniq(char *buf, size_t n, unsigned uid, uint64_t key_hash);
/* .ID.cancel: `kart cancel`'s request to the worker running ID. */
int spool_name_cancel(char *buf, size_t n, const char *id);
/* A held task's name in new/ (kart hold): ".held.ID". A dot name, so
 * that no worker claims it; kart release renames it back. (Its argument
 * order is older than the other builders'.) */
int spool_held_name(const char *id, char *buf, size_t len);
/* cur/.new.WID.PID: a claim directory being born (spool_worker_open). */
int spool_name_newborn(char *buf, size_t n, const char *wid, int pid);
/* done/.ID.json.PID.tmp: a result being written under a temporary name. */
int spool_name_result_tmp(char *buf, size_t n, const char *id, int pid);
/* done/.NAME.redo: the second name redirty() gives an entry of done/. */
int spool_name_redo(char *buf, size_t n, const char *name);
/* new/.hoist.UID.ID: a task moved from drop/ on its way into new/. */
int spool_name_hoist(char *buf, size_t n, unsigned uid, const char *id);
/* cur/W/.copy.UID.ID: an empty file of the worker's, made to take the
 * place of a rejected drop that its dropper still holds open for
 * writing (§3a). */
int spool_name_hoist_copy(char *buf, size_t n, unsigned uid, const char *id);

/* The id and kind of a done/ name (ID + a known suffix): false if it has
 * none, or the id does not fit idlen. */
bool spool_done_id(const char *name, char *id, size_t idlen, enum done_file *f);
/* The claim a scratch entry of kind f belongs to (.NAME.SUFFIX -> NAME):
 * false if entry is not one. */
bool spool_scratch_of(const char *entry, enum scratch_file f, char *name, size_t n);
/* The id a held task's name in new/ holds (.held.ID -> ID, spool_held_name's
 * inverse): NULL if name is not one. */
const char *spool_held_id(const char *name);
/* .rm-NAME: a tree kart gc is removing (renamed first, so that a removal
 * cut short says so and the next gc finishes it). */
int spool_name_trash(char *buf, size_t n, const char *name);
bool spool_is_trash(const char *name);
/* done/.ID.json.PID.tmp: a result being written (spool_finish.c). */
bool spool_is_result_tmp(const char *name);
/* cur/.new.WID.PID: a claim directory being born (spool_worker_open). */
bool spool_is_newborn(const char *name);

#endif
