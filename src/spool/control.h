/* control.h - steering a queued task through the spool (kart hold,
 * release, edit): renames within new/, never a message to a
 * worker, so any number of workers, and their restarts, change nothing.
 * A rename is atomic against a worker's claim (also a rename of the same
 * name): either ours wins, or the task has left new/ and we say so.
 * spool-layout README §8 has the names, APPENDIX §3 the crash states. */
#ifndef KART_CONTROL_H
#define KART_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "spool.h"

/* May the caller steer the task whose file is st? Root may; anyone else
 * only their own task (its submitter: the id's USER: prefix on a spool
 * with drop/, else the file's owner). 0, or -EPERM. */
int control_may(const struct spool *sp, const char *id, const struct stat *st);

/* new/ID -> new/.held.ID. 0; -ENOENT when new/ID is not there (claimed,
 * held, finished, unknown: the caller looks); -EPERM not the caller's;
 * -EEXIST a held task of that name is there already; -errno. */
int control_hold(struct spool *sp, const char *id);
/* new/.held.ID -> new/ID. 0; -ENOENT not held; -EPERM; -EEXIST a queued
 * task has that name (a cp of a used name); -errno. */
int control_release(struct spool *sp, const char *id);

/* Replace the queued file new/NAME (NAME: the id, or its held name),
 * which the caller read through orig, by text, atomically, and only if
 * new/NAME is still orig: a copy is staged in new/ under a dot name (the
 * caller's, recording orig's submitter, for the worker's copy of a
 * shared spool; else with orig's owner and mode), with orig's user.kart,
 * then swapped in by RENAME_EXCHANGE.
 * 0; -ENOENT the task left new/ (claimed); -ESTALE new/NAME is another
 * file now (put back as it was); -errno. */
int control_replace(struct spool *sp, const char *name, int orig, const char *text, size_t len);

/* text with one directive item set: KEY=VALUE items of that key are
 * taken out of the header's directive lines, and "#kart: KEY=VALUE"
 * (VALUE percent-encoded) is added at the end of the leading comment
 * block, where it wins. 0 with *out (malloc'd), or -EINVAL (not
 * KEY=VALUE). Pure. */
int control_set_item(const char *text, size_t len, const char *item, char **out, size_t *outlen);

/* A shared spool (drop/), and the caller not root: new/ and cur/ are
 * the workers', and a request goes through the caller's drop directory. */
bool control_via_drop(const struct spool *sp);
/* Ask a worker: drop/USER/.ctl.VERB.NAME for the id USER:NAME (text: an
 * edit's new text, else empty), and wait (timeout_ms) until a worker has
 * done it and removed it. 0; -EPERM the id is not the caller's;
 * -ETIMEDOUT no worker took it (withdrawn); -errno. The caller then
 * looks at the spool to say how it went. */
int control_request(struct spool *sp, const char *verb, const char *id, const char *text, size_t len,
		    int timeout_ms);

#endif
