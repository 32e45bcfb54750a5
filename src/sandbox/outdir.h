/* outdir.h - $KART_OUTDIR bounded while the task runs, and its artifacts
 * taken into the spool afterwards.
 *
 * Under bwrap each task's $KART_OUTDIR is a tmpfs of its own, of
 * [limits] artifacts_max bytes and artifacts_files inodes: a write past
 * either fails inside the task with ENOSPC, while the task runs, and the
 * spool's disk never sees it. The tmpfs is mounted by a holder process
 * that lives in a user and mount namespace of the worker's
 * (outdir_ns_start): on the claim's own .NAME.out directory, in that
 * mount namespace only, so the host sees an empty directory and nothing
 * is ever mounted where a crash could leave it. The spawned child joins
 * the two namespaces (outdir_join) before it runs bwrap, which binds the
 * path as before. The worker keeps a descriptor of the tmpfs root: once
 * the run is over, outdir_copy copies what is there into the spool (the
 * copies are the worker's, made by it), and closing the descriptor frees
 * the tmpfs, whatever the task left in it.
 *
 * Why not the alternatives: bwrap's own --size tmpfs has no inode bound
 * and is gone with the sandbox; a mount on the host needs CAP_SYS_ADMIN,
 * which the worker drops, and survives a crash; a project quota or a
 * loop device depends on the spool's filesystem and needs root; a tree
 * measured as it fills (inotify, polling) learns of a write after it was
 * made. A tmpfs is counted in the task's memory cgroup (v1 and v2 alike),
 * so a task's $KART_OUTDIR is RAM it holds until its result is made. */
#ifndef KART_OUTDIR_H
#define KART_OUTDIR_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct outdir_ns {
	pid_t pid;          /* the holder; 0: none */
	int sock;           /* requests to it (SOCK_SEQPACKET); -1: none */
	int userns, mntns;  /* its namespaces, for outdir_join; -1: none */
	pthread_mutex_t mu; /* one request at a time */
};

#define OUTDIR_NS_INIT {0, -1, -1, -1, PTHREAD_MUTEX_INITIALIZER}

/* Start the holder: 0, or -errno with a sentence in err. The worker
 * maps its own ids into the user namespace (all of them when root, so
 * that tasks run as their submitters). */
int outdir_ns_start(struct outdir_ns *o, char *err, size_t errlen);
void outdir_ns_stop(struct outdir_ns *o);
static inline bool outdir_ns_ok(const struct outdir_ns *o) { return __atomic_load_n(&o->sock, __ATOMIC_RELAXED) >= 0; }

/* A tmpfs of bytes and files (not counting its root) on path, owned by
 * uid:gid, mode 0700, nosuid, nodev, in the holder's mount namespace.
 * Returns a descriptor of its root (O_RDONLY|O_DIRECTORY|O_CLOEXEC), or
 * -errno. */
int outdir_mount(struct outdir_ns *o, const char *path, uint64_t bytes, uint64_t files, uid_t uid,
		 gid_t gid);
/* Detach it there (lazily: a descriptor keeps it). 0 or -errno. */
int outdir_umount(struct outdir_ns *o, const char *path);
/* The same without waiting, by its root's descriptor (whatever its
 * directory was renamed to since): a detach waits for an RCU grace
 * period, about a millisecond, which the event loop must not. The
 * caller may close fd at once. 0 or -errno. */
int outdir_release(struct outdir_ns *o, int fd);
/* The holder died: no more requests (its namespaces stay open, as a
 * spawn may still join them). */
void outdir_ns_lost(struct outdir_ns *o);

/* In the spawned child, before its credentials change: into the
 * holder's namespaces. System calls only. 0 or -errno. */
int outdir_join(int userns, int mntns);

/* What outdir_copy kept and lost. In: the bounds. */
struct outdir_copy {
	uint64_t bytes_max, files_max; /* 0: none */
	int depth_max;                 /* directories deeper are not kept; at most OUTDIR_DEPTH_MAX */
	/* out */
	uint64_t bytes, files;           /* kept: bytes of regular files; entries */
	uint64_t lost_files, lost_bytes; /* not kept (lost_files counts a directory not entered as one) */
	bool full;                       /* the tmpfs was full: writes past it failed */
	bool too_deep;                   /* something lay deeper than depth_max */
	int dst_err;                     /* the spool refused a write: its -errno, and nothing more was copied */
};

#define OUTDIR_DEPTH_MAX 256

/* Copy the tree under src (a directory descriptor) into the directory
 * dst: directories 0755, files 0644 (0755 when the owner could execute
 * them), symbolic links as they are; FIFOs, sockets and devices are not
 * kept. Iterative: two descriptors per level, depth_max levels at most.
 * The copies reach the disk with one syncfs. 0, or -errno if src could
 * not be read at all. */
int outdir_copy(int src, int dst, struct outdir_copy *c);

/* Whether a tmpfs (src) has no room left, in bytes or inodes; whether
 * it holds nothing but its root. */
bool outdir_full(int src);
bool outdir_empty(int src);

#endif

/* ---- the mover: copies off the commit thread ---------------------------
 *
 * A copy takes as long as the tree is big (a full 10,000-file
 * $KART_OUTDIR: about a second here); on the commit thread it held up
 * every other user's result. The commit thread hands such a task to
 * this thread, which copies, frees the tmpfs (closing its last
 * descriptor, which frees every inode of it, is work too) and hands the
 * task back through done(). */
struct outdir_move {
	struct outdir_move *next;
	int src;  /* the tmpfs root; closed by the mover */
	int dst_at;         /* the claim directory, and in it */
	char dst_name[512]; /* .NAME.out, empty: opened by the mover (a waiting
			     * result holds one descriptor, not two) */
	int dst;            /* -1; the mover's while it copies */
	uid_t reader; /* may read the copy (an ACL entry on its top) */
	struct outdir_copy c;
	/* out: kept (copied), or not (nothing is left in dst), and why */
	bool kept;
	uint64_t bytes, files; /* what the tmpfs held */
	char why[256];         /* "" or a sentence for the result's error */
	void (*done)(struct outdir_move *m);
	void *arg; /* done's */
};

struct outdir_mover {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool quit, started;
	struct outdir_move *todo, **tail;
};

int outdir_mover_start(struct outdir_mover *mv);
void outdir_mover_add(struct outdir_mover *mv, struct outdir_move *m);
/* Finishes what it was given, then stops. */
void outdir_mover_stop(struct outdir_mover *mv);

/* One move, on the calling thread (the mover's body; the unit tests). */
void outdir_move_run(struct outdir_move *m);
