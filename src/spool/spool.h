/* spool.h - the on-disk protocol: layout, publish, claim, finish,
 * recover. The only code that knows the directory layout; see
 * spool-layout/ for the format and its crash states. One section per
 * file, in the order a task meets them. The names on disk are a layer
 * below, spool_name.h, included here so that callers need only this. */
#ifndef KART_SPOOL_H
#define KART_SPOOL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "spool_name.h"

struct result;
struct policy;

/* ---- spool.c: the spool, its layout, worker locks, claims, user.kart, spool_walk ---- */

struct spool {
	char *path;
	int root, tmp, new, cur, done;
	/* drop/ (a shared spool's per-user drop directories), or -1 when the
	 * spool has none. */
	int drop;
	/* Set by spool_use_drop: publish into this drop directory, under an
	 * id of the form idprefix + name ("alice:"). -1 / "": into new/. */
	int dropd;
	char idprefix[72];
	/* ids/: id reservations (spool-layout README §5), or -1
	 * on a spool made before it existed. */
	int ids;
	/* spool_submit publishes the task held (kart submit --hold): under
	 * spool_held_name in new/. Only without a drop directory. */
	bool hold;
	/* Results are written unnamed and linked into done/ (1), or under a
	 * temporary name (-1); 0 until the first is written. */
	_Atomic int unnamed;
	/* Results readable by done/'s group too ([worker] results = group);
	 * set by the worker, read by its commit thread. */
	_Atomic bool results_group;
	/* What SPOOL/format says (spool_format_check): a version, 1 where
	 * there is no such file; 0 when it is not a number; -errno when it
	 * cannot be read. */
	int format;
	/* The tally this process appends to (tally.h): made by
	 * spool_worker_open, whose worker id names it; NULL before. */
	struct tally_writer *tally;
};

/* Per-claim bookkeeping kept on the task file itself (xattr user.kart),
 * so that it travels with the file through re-queues. */
struct claim_meta {
	int attempt;          /* 1 on the first run */
	int64_t submitted_ms; /* first arrival; 0 if unknown */
	char id[256];         /* set while finishing */
	/* Automatic retry (retry_on=, sched.h): */
	int64_t not_before_ms; /* the retry waits until then; 0: none */
	char hold[256];        /* the id whose done/ID.attempts/ keeps the earlier attempts */
	/* A run that goes on without the worker (a batch system's job):
	 * "BACKEND WORDS...", set before the run can exist, so that a worker
	 * that finds the claim after a crash asks that backend first and
	 * never starts the task again while it may run; "" for none. Gone
	 * with a re-queue or a retry (a new attempt is a new run). */
	char run[192];
};

/* The text of user.kart into m (defaults for what it lacks), for the
 * claim or queued task name: an id= or hold= that is not a task name of
 * name's own USER: prefix (or, for a name without one, of none) is
 * dropped, whoever wrote it (issue 35: hold=../../x made root write
 * outside the spool, hold=alice:X filed another's result). */
void claim_meta_parse(const char *text, const char *name, struct claim_meta *m);

#define KART_XATTR "user.kart"
/* Its value, at most (every line of struct claim_meta at its longest). */
#define KART_XATTR_MAX 1024

/* ---- who submitted a task (spool-layout §6) ----
 * On a shared spool the worker takes each task for its own at the
 * hoist out of drop/USER/ (and an edit makes a new file of it): the file
 * is root's, and who submitted it is recorded on it, in
 * user.kart.submitter ("uid=N\nfrom=INO\n": the submitter, and the
 * inode of the file dropped, which the id's reservation names). Only
 * the file's owner (or root) can write it, so the record is trusted only
 * on a file of root's or of the caller's own; anyone else's file is its
 * owner's. */
#define KART_XATTR_BY "user.kart.submitter"
struct submitter {
	uid_t uid;
	unsigned long long from; /* the inode that was dropped; 0: unknown */
	bool recorded;           /* from a record (the worker's file), not the owner */
};
/* Who submitted the task file fd (st: its stat). */
void spool_submitter(int fd, const struct stat *st, struct submitter *s);
/* The same for the claim (or queued task) name, its file fd (or -1) and
 * st: its record; else, on a spool with drop/, the account its USER:
 * prefix names (the dropper, also of a drop rejected and taken from
 * them); else its owner. Whose reservation, and whose result, it is. */
uid_t spool_claim_submitter(const struct spool *sp, const char *name, int fd, const struct stat *st);
/* Remove every user.* attribute and POSIX ACL of fd (a member may have
 * set them on what is now root's file), but user.kart and
 * user.kart.submitter with keep_ours. 0 or -errno. */
int spool_strip_attrs(int fd, bool keep_ours);
/* Make fd, a file of the caller's (the worker's), a task file of by's:
 * every user.* attribute and ACL it had removed, mode 0600, one ACL
 * entry letting by read it (which the task, running as by, needs), the
 * record (by, from), user.kart (m, when given). 0, or -errno:
 * -EOPNOTSUPP where the filesystem has no POSIX ACLs (a shared spool
 * needs them: the file is never given to by instead). */
int spool_task_record(int fd, const struct claim_meta *m, uid_t by, unsigned long long from);
/* The same for an empty file fd open for writing, then its text (len
 * bytes), fsynced (kart edit's new file). */
int spool_task_fill(int fd, const char *text, size_t len, const struct claim_meta *m, uid_t by,
		    unsigned long long from);

/* "NFS", "SMB" or "CIFS" for a statfs f_type a spool may not live on
 * (spool_init refuses it, kart doctor too); NULL otherwise. */
const char *spool_fs_network(unsigned long f_type);
/* The spool format this kart reads and writes (spool-layout/README.md,
 * "Format"). kart init writes it into SPOOL/format; a spool without that
 * file is format 1. */
#define SPOOL_FORMAT 1
int spool_init(const char *path, char *err, size_t errlen);
/* 0 when the spool's format is the one this kart knows; else -1 with the
 * reason and what to do in err. The worker and every verb that writes
 * the spool call it: a newer format may mean what this kart would get
 * wrong. */
int spool_format_check(const struct spool *sp, char *err, size_t errlen);
/* A shared spool's directories, as contrib/systemd/kart.tmpfiles lays
 * them out: each root's, of the spool's group, in this mode ("." is the
 * spool itself). kart init --shared makes them so; kart doctor checks. */
struct spool_shared_dir {
	const char *name;
	mode_t mode;
};
extern const struct spool_shared_dir spool_shared_dirs[];
extern const size_t spool_nshared_dirs;
/* spool_init, and every directory of spool_shared_dirs (drop/ made)
 * given to root and group gid, in its mode. As root only. */
int spool_init_shared(const char *path, gid_t gid, char *err, size_t errlen);
int spool_open(const char *path, struct spool *sp, char *err, size_t errlen);
void spool_close(struct spool *sp);

/* Worker directories: cur/<wid>/ with .lock held (flock) for life. */
int spool_worker_open(struct spool *sp, const char *wid, int *wdir, int *lockfd);
/* Hold a worker's cur/WID/.lock as it would (making cur/WID, then *made,
 * where there is none), so that no worker WID runs meanwhile, nor starts:
 * 0, -EBUSY (one lives, or its directory is being made or removed), or
 * -errno. spool_worker_unhold lets go (and removes what it made). */
int spool_worker_hold(struct spool *sp, const char *wid, int *lockfd, bool *made);
void spool_worker_unhold(struct spool *sp, const char *wid, int lockfd, bool made);
/* Claim new/<name> into the claim directory: -ENOENT if another took it,
 * -EEXIST if the claim directory already holds that name. */
int spool_claim(struct spool *sp, int wdir, const char *name);
/* The same for a held task (new/.held.ID -> claim directory/ID): kart
 * cancel of a held task. */
int spool_claim_held(struct spool *sp, int wdir, const char *id);

int claim_meta_get(int fd, const char *name, struct claim_meta *m);
int claim_meta_set(int fd, const struct claim_meta *m);

/* Remove a per-claim scratch entry (.<name>.*) in wdir, but what gone
 * says the caller knows is not there: SCRATCH_RUN_GONE, the run's work
 * and tmp directories are gone and the stage moved (or never needed) its
 * outputs; SCRATCH_OUT_GONE, its $KART_OUTDIR was taken back empty by the
 * worker. .<name>.cancel, which kart cancel may make at any time, is
 * always tried. */
enum { SCRATCH_RUN_GONE = 1, SCRATCH_OUT_GONE = 2 };
void spool_clean_scratch(int wdir, const char *name, unsigned gone);

/* Remove a tree under dirfd/name, never following links. */
int rm_rf_at(int dirfd, const char *name);
/* Rename dirfd/name to .rm-NAME (trash, of size n) before a slow removal,
 * so that one cut short (kill -9, a crash) leaves a name that says so and
 * the next kart gc finishes it; a leftover .rm-NAME of an earlier removal
 * is finished first. 0 once renamed, else -errno (name stays). */
int spool_trash(int dirfd, const char *name, char *trash, size_t n);

/* The walk over the spool's directories, the spool's own (it needs
 * their descriptors); the names it meets are spool_name.h's. What
 * spool_walk visits, one bit each, in the order tasks move. */
enum {
	SPOOL_WALK_TMP = 1,     /* tmp/NAME: a client's staged files (any name) */
	SPOOL_WALK_NEW = 2,     /* new/NAME: queued tasks */
	SPOOL_WALK_WORKERS = 4, /* cur/WID: the claim directories themselves */
	SPOOL_WALK_CUR = 8,     /* cur/WID/NAME: claims */
	SPOOL_WALK_DONE = 16,   /* done/ID.SUFFIX: results and their files */
	SPOOL_WALK_DOTS = 32,   /* dot names too (never tasks); cur/.X is not entered */
};
struct spool_entry {
	unsigned area;      /* one SPOOL_WALK_ bit */
	int dirfd;          /* the directory that holds name */
	const char *dir;    /* its name in the spool: "new", "cur/WID", "done" */
	const char *worker; /* SPOOL_WALK_CUR: WID; else NULL */
	const char *name;
	/* The task's id: name in new/ and cur/WID/; in done/, name less its
	 * suffix (kind in done), or NULL when it has no known one. */
	const char *id;
	enum done_file done;
};
/* Visit the entries of areas, directory by directory in the order tasks
 * move (tmp, new, cur, done), so that a task in motion is seen at least
 * once. A cb returning a positive value ends the walk with it. Else 0,
 * or the first -errno of a directory of the spool that could not be read
 * (the others are still walked; a vanished cur/WID/ is no error). */
typedef int (*spool_walk_cb)(const struct spool_entry *e, void *arg);
int spool_walk(struct spool *sp, unsigned areas, spool_walk_cb cb, void *arg);
/* The worker holding a claim of id (cur/WID/ID) into worker: true if any. */
bool spool_find_claim(struct spool *sp, const char *id, char *worker, size_t wlen);

/* ---- spool_submit.c: publish and ids/ (README §5), drop/ (§6), after= (WORKER §3) ---- */

/* Who may read a result besides root: the account of the id's USER:
 * prefix where it names one (on a shared spool, who dropped the task,
 * even when it was rejected for not being theirs), else owner. */
uid_t spool_reader(const struct spool *sp, const char *id, uid_t owner);
/* Is `name` under drop/ the drop directory of uid (its account's name,
 * or the uid in decimal)? */
bool spool_drop_name_ok(const char *name, uid_t uid);
/* A task USER:NAME in new/ of a spool with drop/ came from drop/USER/:
 * false when USER names an account (or a uid) other than owner. */
bool spool_prefix_owner_ok(const char *name, uid_t owner);
/* The id a user means: on a spool with drop/, a plain NAME given by a
 * user other than root is their own USER:NAME (only root makes ids
 * without a prefix there); else id as it is. Returns a new string. */
char *spool_own_id(const struct spool *sp, const char *id);
/* Choose where this process publishes: new/ when it is the owner of a
 * new/ that only its owner writes (a single-user spool, or root on a
 * shared one), else its own drop/<user>/ (made 0700 if missing). 0 with
 * the spool set (dropd, idprefix) for spool_pick_id/spool_submit;
 * -1 with err set when it cannot publish safely. */
int spool_use_drop(struct spool *sp, char *err, size_t errlen);

/* Does tmp/ hold a name of this inode (a link() publish not yet done)?
 * 1 yes, 0 no, -errno when tmp/ could not be read (the caller cannot
 * tell, so must not treat it as "no"). Dot names count: a client may use
 * any name in tmp/ (spool-layout README §2). */
int spool_tmp_holds(struct spool *sp, dev_t dev, ino_t ino);
/* Is this id in use anywhere (new/, any cur/ID/, done/)? */
bool spool_id_taken(struct spool *sp, const char *id);
/* after=: is id a task without a result yet (drop/USER/, new/, any
 * cur/W/)? 1 with *owner its file's owner, 0 if absent, -errno when it
 * cannot be told. uid: the asker's, for its own hoist in progress. */
int spool_id_pending(struct spool *sp, const char *id, uid_t uid, uid_t *owner);
/* The first free id of base, base.2, base.3, ... into out. */
int spool_pick_id(struct spool *sp, const char *base, char *out, size_t outlen);

/* Publish data into new/ (or the drop directory) under a free id derived
 * from base, reserved first in ids/ so that it is the result's id: tmp/,
 * the reservation, the data (with `#kart: name=KEEP` after its #! line
 * when keep is given and the id is not keep), fsync, renameat2
 * (RENAME_NOREPLACE) into new/, fsync new/. */
int spool_submit(struct spool *sp, const char *base, const void *data, size_t len,
		 const char *keep, char *id, size_t idlen);
/* The reservation ids/<id>, for a task file whose stat is st and whose
 * submitter is owner (spool_submitter): 0 none, 1 it names this file
 * (its inode, made by owner), 2 it is someone else's (or not a
 * reservation at all: it still holds the id). */
enum { IDS_NONE = 0, IDS_MINE = 1, IDS_OTHER = 2 };
int spool_ids_state(struct spool *sp, const char *id, const struct stat *st, uid_t owner);
/* The id reserved for the claim name in wdir (st its stat, owner its
 * submitter): name itself, or name without the .N suffixes a re-queue
 * or a move from drop/ gave it, when ids/ holds a reservation of that id
 * naming this file. 1 with out set, 0 when there is none. */
int spool_reserved_id(struct spool *sp, const char *name, const struct stat *st, uid_t owner,
		      char *out, size_t outlen);
/* kart edit's swap of a queued task (spool-layout README §8): new/STAGED
 * (a dot name), the new text's file (st its stat), exchanged with
 * new/NAME (NAME: the id, or its held name) by RENAME_EXCHANGE, which
 * fails once the task is claimed; kept only if what came out is old, the
 * file the caller read, else put back. The id's reservation in ids/ then
 * follows the new file (README §5; owner: the task's submitter), and
 * new/STAGED (the old file, or ours put back) is removed.
 * 0; -ENOENT the task left new/; -ESTALE new/NAME was another file;
 * -errno. */
int spool_replace_queued(struct spool *sp, const char *staged, const char *name,
			 const struct stat *old, const struct stat *st, uid_t owner);

/* ---- spool_finish.c: the result protocol, re-queue and retry (WORKER §6) ---- */

/* The disk space and entries a directory tree at/name holds (never
 * following a link): 1 once past cap bytes or max_entries entries (or 64
 * levels deep; counting stops there), 0 within (or no such directory),
 * or -errno. */
int spool_tree_usage(int at, const char *name, uint64_t cap, uint64_t max_entries, uint64_t *bytes,
		     uint64_t *entries);
/* A safe id from arbitrary entry bytes (for rejected bad names). */
void spool_id_from_bytes(const char *name, char *out, size_t outlen);
/* A result's file (its JSON, a capture) readable by reader and root;
 * with [worker] results = group, by done/'s group too, which it is
 * given. 0 or -errno. */
int spool_result_grant(const struct spool *sp, int fd, uid_t reader);

/* Finish a claim: pick the id (res->id as base, suffixed if taken),
 * move the task file and the outputs (.<name>.stdout/.stderr in wdir, if
 * present) beside the result, write the result JSON last, durably.
 * Fills res->id / paths. `regular` says the claim is a regular file with
 * one link; other entries are removed after the result is written. */
int spool_finish(struct spool *sp, int wdir, const char *name, bool regular,
		 struct result *res, char *idbuf, size_t idlen);
/* A result's JSON written but not yet fsynced or named. A caller that
 * stages several results at once passes one to spool_finish_stage for
 * each: the JSON's data goes to the disk at once (sync_file_range), and
 * spool_json_commit, called for each after all are staged, fsyncs it and
 * gives it its name. The fsyncs then mostly find their writes done
 * (and, with a journal, one commit can serve several): one staged and
 * committed after another waits on the disk several times over. */
struct json_pending {
	int fd;        /* -1: nothing pending */
	bool unnamed;  /* made O_TMPFILE, to be linked; else renamed from tmp */
	bool redo;     /* may replace our own earlier copy (rename(2)) */
	char *id, *tmp; /* tmp: the temporary name of a named one */
	char *json;    /* the text, for the named fallback of an unnamed one */
	uid_t reader;  /* who may read it besides root (grant_read) */
};
#define JSON_PENDING_NONE ((struct json_pending){.fd = -1})
int spool_json_commit(struct spool *sp, struct json_pending *jp);

/* spool_finish in two halves, for a caller that fsyncs done/ once for
 * several results (group commit): stage writes everything up to the
 * JSON; complete, once done/ is fsynced, removes the claim (gone: as
 * spool_clean_scratch's). With pend, stage leaves the JSON pending there,
 * and the caller commits it (spool_json_commit) before done/'s fsync. */
int spool_finish_stage(struct spool *sp, int wdir, const char *name, bool regular,
		       struct result *res, char *idbuf, size_t idlen, struct json_pending *pend);
int spool_finish_complete(struct spool *sp, int wdir, const char *name, bool regular,
			  const char *idbuf, unsigned gone);

/* An attempt that retry_on= tries again: what it was, for the record
 * kept of it (done/HOLD.attempts/N.json) and the final result's
 * `attempts`. */
struct attempt_rec {
	int attempt;
	const char *status;
	int exit_code; /* -1: null */
	int signal;    /* 0: null */
	int64_t started_ms, finished_ms;
};
/* Keep that attempt and queue the next: the first time, reserve the id
 * the final result will have by making done/HOLD.attempts/ (recorded as
 * m->hold on the file); move the run's outputs there as N.stdout and
 * N.stderr (fsynced), write N.json; then re-queue the claim with
 * attempt N+1 and not_before (spool_requeue). reader may read the record.
 * See spool-layout APPENDIX §3 for its crash states. */
int spool_retry(struct spool *sp, int wdir, const char *name, struct claim_meta *m,
		const struct attempt_rec *a, int64_t not_before_ms, uid_t reader);

/* Put a claim back into new/ with its attempt counted up. */
int spool_requeue(struct spool *sp, int wdir, const char *name, const struct claim_meta *m);

/* Finish a claim that will not run (rejected, cancelled while queued,
 * lost): a result with the given status and error. */
int spool_finish_unrun(struct spool *sp, int wdir, const char *name, const char *status,
		       const char *error, const char *worker, char *idbuf, size_t idlen);

/* ---- spool_recover.c: dead workers' claims (WORKER §9), and live workers ---- */

/* Outcome of recovering one claim of a dead (or restarted) worker. */
enum recover_kind { RECOVER_REQUEUED, RECOVER_LOST, RECOVER_FINISHED, RECOVER_BUSY, RECOVER_ERROR };

/* Recover one claim in wdir (see recover_kind). */
enum recover_kind spool_recover_claim(struct spool *sp, const struct policy *pol, int wdir,
				      const char *name, const char *me);

/* A finish of the claim begun and not completed (done/ID.task linked,
 * no done/ID.json): undone, as recovery undoes one, so that the claim
 * can be finished anew (a publish given up on). 1 undone, 0 none begun,
 * -EEXIST its result is written, -errno. */
int spool_finish_undo(struct spool *sp, int wdir, const char *name);

/* Recover every claim in cur/<wid>/ (whose lock the caller holds via
 * lockfd or has just taken). Returns the number still busy (an old run
 * still alive), or -errno. `me` is the recovering worker's id. */
int spool_recover_dir(struct spool *sp, const struct policy *pol, int wdir, const char *me,
		      int *requeued, int *lost);

/* Try to take a dead worker's lock and recover its directory. Returns
 * 1 if recovered (or still busy: *busy > 0), 0 if the worker is alive.
 * dead(arg, peer), if given, runs once the lock is ours (the worker is
 * gone) and before any claim moves: the caller ends what is left of its
 * runs there (the worker kills its cgroup leaves and what its backends
 * left). dead() < 0: a run of that worker may still go where only the
 * caller can tell (no run lock holds it): no claim moves, *busy is 1. */
int spool_recover_peer(struct spool *sp, const struct policy *pol, const char *peer,
		       const char *me, int (*dead)(void *arg, const char *peer), void *arg, int *busy,
		       int *requeued, int *lost);

/* How many workers hold the spool (their flocks on cur/<id>/.lock, as
 * /proc/locks lists them), or -errno where that cannot be told. */
int spool_live_workers(struct spool *sp);
/* Does worker (cur/<worker>/) hold its lock? 1 yes, 0 it is gone (its
 * claims wait for a worker to start and recover them), -errno where that
 * cannot be told. */
int spool_worker_live(struct spool *sp, const char *worker);
/* The same, and their ids added to ids (NULL: only counted). */
struct strv;
int spool_live_worker_ids(struct spool *sp, struct strv *ids);

#endif
