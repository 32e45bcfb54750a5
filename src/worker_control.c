/* worker_control.c - see worker_control.h. */
#define _GNU_SOURCE
#include "worker_control.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

bool wctl_pause_entry(const char *entry, char *name, size_t len)
{
	size_t l = strlen(entry);
	if (entry[0] != '.' || l <= 7 || strcmp(entry + l - 6, ".pause") != 0 || l - 7 >= len)
		return false;
	memcpy(name, entry + 1, l - 7);
	name[l - 7] = '\0';
	return true;
}

bool wctl_pause_wanted(int wdir, const char *name)
{
	char p[512];
	struct stat st;
	return pathfmt(p, sizeof p, ".%s.pause", name) == 0 &&
	       fstatat(wdir, p, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* SIGSTOP or SIGCONT to the whole of the run, without a freezer: each
 * process its leaf lists, passes until one finds no more (a stopped
 * process forks no more); with no leaf, its process group (backend
 * none). The weakness: what left the group, with no leaf to list it,
 * runs on; and a stopped process's parent sees it stop (waitpid
 * WUNTRACED). kart(1) says so. */
static int signal_run(const struct cg_leaf *cg, const struct run *r, int sig)
{
	if (cg->used) {
		int n = -1, m;
		for (int pass = 0; pass < 8 && (m = cg_leaf_signal(cg, sig)) != n; pass++)
			n = m;
		return n > 0 ? 0 : -ESRCH;
	}
	if (r->pgroup && r->pid > 0)
		return kill(-r->pid, sig) == 0 ? 0 : -errno;
	return -ENOTSUP;
}

int wctl_pause(struct pause_state *ps, const struct cg_leaf *cg, const struct run *r,
	       int64_t *deadline_mono)
{
	if (ps->how != PAUSE_NONE)
		return 0;
	int rc;
	enum pause_how how = PAUSE_FREEZE;
	if ((rc = cg_leaf_freeze(cg, true)) < 0) {
		how = PAUSE_STOP;
		if ((rc = signal_run(cg, r, SIGSTOP)) < 0)
			return rc;
	}
	int64_t now = now_mono_ms();
	ps->how = how;
	ps->since_mono = now;
	/* The clock stops: a paused task never times out. */
	ps->left_ms = *deadline_mono ? (*deadline_mono > now ? *deadline_mono - now : 0) : -1;
	*deadline_mono = 0;
	return 0;
}

void wctl_resume(struct pause_state *ps, const struct cg_leaf *cg, const struct run *r,
		 int64_t *deadline_mono)
{
	if (ps->how == PAUSE_NONE)
		return;
	if (ps->how == PAUSE_FREEZE)
		(void)cg_leaf_freeze(cg, false);
	else
		(void)signal_run(cg, r, SIGCONT);
	int64_t now = now_mono_ms();
	ps->total_ms += now - ps->since_mono;
	if (ps->left_ms >= 0)
		*deadline_mono = now + ps->left_ms;
	ps->how = PAUSE_NONE;
}

int64_t wctl_paused_ms(const struct pause_state *ps)
{
	return ps->total_ms + (ps->how != PAUSE_NONE ? now_mono_ms() - ps->since_mono : 0);
}

void wctl_ack(int wdir, const char *name, bool paused)
{
	char p[512];
	if (pathfmt(p, sizeof p, ".%s.paused", name) < 0)
		return;
	if (!paused) {
		(void)unlinkat(wdir, p, 0);
		return;
	}
	int fd = openat(wdir, p, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd >= 0)
		close(fd);
}

bool wctl_spool_paused(int newdir)
{
	struct stat st;
	return fstatat(newdir, WCTL_SPOOL_PAUSED, &st, AT_SYMLINK_NOFOLLOW) == 0;
}
