/* worker_held.c - Landlock's system paths, held open for every task of backend
 * none. */
#define _GNU_SOURCE
#include <fcntl.h>

#include "worker_int.h"

/* ---- Landlock's system paths, held open ----------------------------------- */

/* Backend none: the child builds each task's Landlock ruleset, and for
 * every path an open, a stat and a close were about a third of its rules'
 * cost. The system's paths (/usr, the /lib links, /proc, the devices, the
 * directories of /etc a program needs) are the same for every task, so
 * the loop opens each once, O_PATH and close-on-exec, and the child, which
 * has a copy of our descriptors, adds its rule from the descriptor.
 * Directories and devices are held; and the regular files directly in
 * /etc (not symlinks), while an inotify watch on /etc says none of its
 * entries was made, removed or renamed since they were opened: a file
 * like /etc/passwd is replaced by rename, and a descriptor held past
 * that would keep the old one in the rule. The policy's binds are never
 * held (a symlink to a release flipped by a deploy must count at the
 * next task), nor the task's own paths. Held paths are opened again
 * every minute (a mount can move), at SIGHUP and, for the files, after
 * a change in /etc, at a moment when no child is between its clone and
 * its exec with the old numbers; until then a task's child opens the
 * files itself. */
#define HELD_MAX 64
#define HELD_TTL_MS 60000
static struct held_path {
	char *path;
	int fd;   /* -1: not held (not there, or not one of the kinds held): the child opens it */
	bool dir;
	bool watched; /* an entry of /etc itself, which the watch on /etc sees change */
	bool covered; /* beneath a held directory (real paths), or not there: no rule of its own */
	char *real;   /* a held directory's real path, for that comparison */
} held[HELD_MAX];
static size_t nheld;
static int64_t held_since;
static long held_gen = -1; /* etc_gen when they were opened */
/* sandbox.c lists the same paths in the same order for every task: what
 * the path at each position came to last time (NULL: not held), so that
 * a task's lookups are one string comparison each. */
static struct held_memo {
	char *path;
	const struct held_path *h;
} held_memo[HELD_MAX];

void held_drop(void)
{
	for (size_t i = 0; i < nheld; i++) {
		if (held[i].fd >= 0)
			close(held[i].fd);
		free(held[i].path);
		free(held[i].real);
	}
	nheld = 0;
	for (size_t i = 0; i < HELD_MAX; i++) {
		free(held_memo[i].path);
		held_memo[i] = (struct held_memo){NULL, NULL};
	}
}

static bool any_spawning(const struct worker *w)
{
	for (const struct task *t = w->tasks; t; t = t->next)
		if (t->state == TS_SPAWNING)
			return true;
	return false;
}

static const struct held_path *held_get(const struct worker *w, const char *path)
{
	for (size_t i = 0; i < nheld; i++)
		if (strcmp(held[i].path, path) == 0)
			return &held[i];
	if (nheld == HELD_MAX)
		return NULL;
	struct held_path *h = &held[nheld];
	*h = (struct held_path){.fd = -1};
	/* An entry of /etc itself (what the watch sees), never by a link. */
	bool etc_file = w->wd_etc >= 0 && strncmp(path, "/etc/", 5) == 0 && !strchr(path + 5, '/');
	h->watched = etc_file;
	h->fd = open(path, O_PATH | O_CLOEXEC | (etc_file ? O_NOFOLLOW : 0));
	/* Not there (/libx32 on most hosts): no rule to make, and no open
	 * per task to find that out; held paths are looked at again within
	 * a minute, and /etc's at its next change. */
	h->covered = h->fd < 0 && errno == ENOENT;
	struct stat st;
	bool link = h->fd >= 0 && fstat(h->fd, &st) == 0 && S_ISLNK(st.st_mode);
	if (link) {
		/* A link of /etc: only if where it leads is covered (below),
		 * which the watch sees change as the link is made anew. */
		close(h->fd);
		h->fd = open(path, O_PATH | O_CLOEXEC);
	}
	if (h->fd >= 0 && (fstat(h->fd, &st) < 0 ||
			   !(S_ISDIR(st.st_mode) || S_ISCHR(st.st_mode) ||
			     ((etc_file || link) && S_ISREG(st.st_mode))))) {
		close(h->fd);
		h->fd = -1;
	}
	h->dir = h->fd >= 0 && S_ISDIR(st.st_mode);
	/* Where it really is, beneath a directory held before it? The
	 * system's paths are all read-only rules: one beneath another adds
	 * nothing. */
	char proc[64], real[PATH_MAX];
	ssize_t rl = -1;
	if (h->fd >= 0) {
		snprintf(proc, sizeof proc, "/proc/self/fd/%d", h->fd);
		rl = readlink(proc, real, sizeof real - 1);
	}
	if (rl > 0) {
		real[rl] = '\0';
		for (size_t i = 0; i < nheld && !h->covered; i++) {
			size_t l = held[i].real ? strlen(held[i].real) : 0;
			h->covered = l && !held[i].covered && strncmp(real, held[i].real, l) == 0 &&
				     (real[l] == '/' || (l == 1 && real[0] == '/'));
		}
		if (h->dir)
			h->real = xstrdup(real);
	}
	if (link && !h->covered && h->fd >= 0) {
		close(h->fd); /* not held: the child opens it, by its link */
		h->fd = -1;
	}
	h->path = xstrdup(path);
	return &held[nheld++];
}

static bool in_plist(const struct plist *l, const char *p)
{
	for (const char *e = NULL; (e = plist_next(l, e));)
		if (strcmp(e, p) == 0)
			return true;
	return false;
}

/* One of the system's paths, and not one the policy names? */
static bool held_system(const struct policy *pol, const char *p)
{
	static const char *const sys[] = {"/usr",	"/bin",	     "/sbin",	   "/lib",
					  "/lib32",	"/lib64",    "/libx32",	   "/proc",
					  "/dev/null", "/dev/zero", "/dev/full", "/dev/random",
					  "/dev/urandom"};
	bool yes = strncmp(p, "/etc/", 5) == 0;
	for (size_t i = 0; !yes && i < ARRAY_SIZE(sys); i++)
		yes = strcmp(p, sys[i]) == 0;
	return yes && !in_plist(&pol->ro_binds, p) && !in_plist(&pol->rw_binds, p) &&
	       !in_plist(&pol->cred_files, p);
}

/* Fill in the held descriptors of a task's rules. */
void held_apply(struct worker *w, struct confine *c)
{
	int64_t now = now_mono_ms();
	if ((nheld && now - held_since >= HELD_TTL_MS) || w->held_stale || held_gen != etc_gen) {
		if (any_spawning(w))
			goto use; /* their children have the old numbers: later */
		held_drop();
		w->held_stale = false;
	}
	if (!nheld) {
		held_since = now;
		held_gen = etc_gen;
	}
use:;
	/* An entry of /etc changed since: until they are opened again, the
	 * child opens the paths of /etc itself. */
	bool etc_stale = held_gen != etc_gen;
	for (size_t i = 0; i < c->npaths; i++) {
		const char *p = c->paths[i].path;
		const struct held_path *h;
		struct held_memo *m = i < HELD_MAX ? &held_memo[i] : NULL;
		if (m && m->path && strcmp(m->path, p) == 0) {
			h = m->h;
		} else {
			h = held_system(w->pol, p) ? held_get(w, p) : NULL;
			if (m) {
				free(m->path);
				*m = (struct held_memo){xstrdup(p), h};
			}
		}
		if (!h || (h->watched && etc_stale))
			continue;
		if (h->fd < 0 && h->covered && !c->paths[i].writable) {
			c->paths[i].held = c->paths[i].covered = true; /* absent */
			c->paths[i].fd = -1;
		} else if (h->fd >= 0) {
			c->paths[i].held = true;
			c->paths[i].fd = h->fd;
			c->paths[i].dir = h->dir;
			/* (a writable rule is never read-only's to cover) */
			c->paths[i].covered = h->covered && !c->paths[i].writable;
		}
	}
}

/* The rules for a task's own paths from descriptors the child has: its
 * directories, the spares' (scratch_dir). No open, stat and close of
 * each by path. (The task file is opened by path: the run lock is a
 * file of its own now, .NAME.lock.) */
void held_task_paths(const struct task *t, struct confine *c, const char *task,
		     const char *const dirs[SCR_NDIRS])
{
	(void)task;
	for (size_t i = 0; i < c->npaths; i++) {
		struct ll_path *p = &c->paths[i];
		if (p->held)
			continue;
		for (int k = 0; k < SCR_NDIRS; k++)
			if (t->scr.fd[k] >= 0 && strcmp(p->path, dirs[k]) == 0) {
				*p = (struct ll_path){.path = p->path, .writable = p->writable, .held = true,
						      .dir = true, .fd = t->scr.fd[k]};
				break;
			}
	}
}
