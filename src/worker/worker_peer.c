/* worker_peer.c - peers: other workers' claim directories, and recovery of a
 * dead one's. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/inotify.h>

#include "worker_int.h"
#include "backend.h"

static int peer_dead(void *arg, const char *peer);

/* ---- peers: other workers' claim directories ---------------------------- */

void recover_peer(struct worker *w, const char *peer)
{
	int busy = 0, rq = 0, lost = 0;
	if (strcmp(peer, w->id) == 0)
		return;
	int r = spool_recover_peer(w->sp, w->pol, peer, w->id, peer_dead, w, &busy, &rq, &lost);
	if (r < 0)
		logmsg("recover cur/%s: %s", peer, strerror(-r));
	else if (r > 0 && (rq || lost || busy))
		logmsg("recovered dead worker %s: %d re-queued, %d lost, %d still busy", peer, rq,
		       lost, busy);
	if (busy > 0 && !w->peers.recover_mono)
		w->peers.recover_mono = now_mono_ms() + 200;
}

void recover_adopt(struct worker *w, const char *name)
{
	w->peers.own = xrealloc(w->peers.own, (w->peers.nown + 1) * sizeof(char *));
	w->peers.own[w->peers.nown++] = xstrdup(name);
	if (!w->peers.recover_mono)
		w->peers.recover_mono = now_mono_ms();
}

/* A claim whose run goes on without a worker (its record, claim_meta.run;
 * not one being finished, which recovery completes): a task again, its
 * run followed by its backend. 1: it is; 0: not such a claim; -1: not
 * now (looked at again). */
static int adopt_claim(struct worker *w, const char *name)
{
	_cleanup_close_ int fd = openat(w->wdir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct claim_meta m;
	if (fd < 0 || claim_meta_get(fd, name, &m) < 0 || !m.run[0] || m.id[0])
		return 0;
	int be = backend_of_run(m.run);
	if (be < 0) {
		logmsg("%s: its run record (%.100s) names no backend of this worker's: left as it is",
		       name, m.run);
		return -1;
	}
	return start_adopted(w, name, be, m.run) < 0 ? -1 : 1;
}

/* Our own claims left by an earlier life under this id: recover each
 * once the processes of its old run are gone (its run lock is free). */
void recover_own(struct worker *w)
{
	size_t keep = 0;
	bool moved = false;
	/* The earlier life's runs, as for a dead peer: one a backend still
	 * sees going keeps every claim where it is, for the next look. */
	if (w->peers.nown && peer_dead(w, w->id) < 0) {
		if (!w->peers.recover_mono)
			w->peers.recover_mono = now_mono_ms() + 200;
		return;
	}
	for (size_t i = 0; i < w->peers.nown; i++) {
		int a = adopt_claim(w, w->peers.own[i]);
		if (a != 0) {
			if (a < 0)
				w->peers.own[keep++] = w->peers.own[i];
			else
				free(w->peers.own[i]);
			continue;
		}
		enum recover_kind k = spool_recover_claim(w->sp, w->pol, w->wdir, w->peers.own[i], w->id);
		if (k == RECOVER_BUSY || k == RECOVER_ERROR) {
			w->peers.own[keep++] = w->peers.own[i];
			continue;
		}
		moved = true;
		logmsg("%s: recovered from an earlier run of worker %s (%s)", w->peers.own[i], w->id,
		       k == RECOVER_LOST ? "lost" : k == RECOVER_REQUEUED ? "re-queued" : "finished");
		free(w->peers.own[i]);
	}
	w->peers.nown = keep;
	if (keep && !w->peers.recover_mono)
		w->peers.recover_mono = now_mono_ms() + 200;
	if (moved)
		undefer(w);
}

void watch_peer(struct worker *w, const char *peer)
{
	char p[PATH_MAX];
	if (strcmp(peer, w->id) == 0 || peer[0] == '.')
		return;
	if (pathfmt(p, sizeof p, "%s/cur/%s", w->sp->path, peer) < 0)
		return;
	/* A worker's lock file is open for writing for its whole life;
	 * its close (at death) is the doorbell to try its lock. */
	int wd = inotify_add_watch(w->ino, p, IN_CLOSE_WRITE | IN_ONLYDIR | IN_DONT_FOLLOW);
	if (wd < 0)
		return;
	for (size_t i = 0; i < w->peers.n; i++)
		if (w->peers.v[i].wd == wd)
			return;
	w->peers.v = xrealloc(w->peers.v, (w->peers.n + 1) * sizeof *w->peers.v);
	w->peers.v[w->peers.n++] = (struct peer){.wd = wd, .name = xstrdup(peer)};
}

void scan_peers(struct worker *w)
{
	struct strv names = {0};
	if (dir_names(w->sp->cur, ".", &names) < 0)
		return;
	for (size_t i = 0; i < names.n; i++) {
		if (strcmp(names.v[i], w->id) == 0)
			continue;
		watch_peer(w, names.v[i]);
		recover_peer(w, names.v[i]);
	}
	strv_free(&names);
}

/* Recovery holds a dead peer's lock: nothing of its runs may survive
 * (a daemon of backend none is outside any PID namespace) before its
 * claims are re-queued: its leaves, and what each backend left. */
static int peer_dead(void *arg, const char *peer)
{
	sweep_leaves(arg);
	return backend_sweep(arg, peer);
}
