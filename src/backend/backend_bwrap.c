/* backend_bwrap.c - the default backend: each task in a bubblewrap
 * sandbox of its own (every namespace unshared, a tmpfs root made
 * read-only, the system bound read-only), kart-launch's steps first
 * inside it (confine.h), in a cgroup leaf of its own, $KART_OUTDIR a
 * bounded tmpfs while it runs (outdir.h). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/wait.h>

#include "backend_local.h"
#include "binds.h"

bool bwrap_works(const char *bwrap, char *why, size_t len)
{
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(why, len, "fork: %s", strerror(errno));
		return false;
	}
	if (pid == 0) {
		int dn = open("/dev/null", O_RDWR);
		if (dn >= 0) {
			dup2(dn, 0);
			dup2(dn, 1);
			dup2(dn, 2);
		}
		execlp(bwrap, bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
		       "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink",
		       "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev", "/bin/true", NULL);
		_exit(127);
	}
	int st;
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		snprintf(why, len, "%s", WIFEXITED(st) && WEXITSTATUS(st) == 127
						 ? "bwrap is not installed"
						 : "bwrap could not build a sandbox");
		return false;
	}
	return true;
}

/* Its tasks need a bwrap that builds a sandbox; $KART_OUTDIR is bounded
 * where the worker's holder can be started (tried as the worker would). */
static void bwrap_probe(const struct policy *pol, struct backend_probe *p)
{
	char why[256];
	if (!bwrap_works(pol->bwrap, why, sizeof why))
		p->ok = false;
	struct outdir_ns ons = OUTDIR_NS_INIT;
	p->bounded_outdir = outdir_ns_start(&ons, p->outdir_why, sizeof p->outdir_why) == 0;
	outdir_ns_stop(&ons);
}

static int bwrap_prepare(struct worker *w, struct task *t, struct backend_start *b)
{
	__attribute__((cleanup(local_start_close))) struct local_start s = LOCAL_START_INIT(b);
	/* A task run in (or binding) a directory that holds the spool, as
	 * the README's ~/spool is in the home: bwrap covers the spool with
	 * an empty mount, and the binds above it are let through. */
	s.mask = binds_spool_below(&t->spec, w->sp->path);
	/* Its work directory and /tmp are bwrap's tmpfs: only $KART_OUTDIR
	 * is in the claim directory, with a tmpfs of its own on it, bounded
	 * while the task runs, mounted by the spawn thread (the directory
	 * under it stays the worker's). */
	if (local_limits(w, t, b) < 0 || local_outdir(w, t, &s, false) < 0)
		return -1;
	s.bounded = outdir_ns_ok(&w->ons);
	if (local_outdir_give(w, t, &s) < 0 || local_filter(w, t, &s, LOCAL_FILTER_FD) < 0 ||
	    local_sandbox(w, t, &s, sandbox_bwrap) < 0)
		return -1;
	struct spawn_job *j = local_job(w, t, &s);
	/* bwrap runs as the submitter, and the task below it. */
	if ((j->use_cred = b->as_user > 0))
		j->cred = b->cred;
	return 0;
}

/* To the launcher, which passes it to everything in the sandbox's pid
 * namespace (its comm is the name of the path bwrap execs it by); bwrap
 * itself would die of it, and the namespace at once. */
static bool bwrap_signal(struct worker *w, struct task *t, int sig)
{
	if (sig == SIGKILL) {
		local_kill(w, t);
		return true;
	}
	return run_term_launcher(&t->run, strrchr(SANDBOX_LAUNCH, '/') + 1) == 0;
}

const struct backend backend_bwrap = {
	.name = "bwrap",
	.masks_spool = true,
	.work = SANDBOX_WORK,
	.probe = bwrap_probe,
	.prepare = bwrap_prepare,
	.spawn = local_spawn,
	.started = local_started,
	.unspawned = local_unspawned,
	.ready = local_ready,
	.signal = bwrap_signal,
	.pause = local_pause,
	.reap = local_reap,
	.usage = local_usage,
};
