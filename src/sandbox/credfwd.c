/* credfwd.c - the task's socket to the worker's credential forwarder
 * (kart-credfwd), and starting it. See credfwd.h. */
#define _GNU_SOURCE
#include "credfwd.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "util.h"

const struct kind *credfwd_kind(const struct policy *pol, const struct task_spec *spec)
{
	const struct kind *k = spec->kind[0] ? policy_kind(pol, spec->kind) : NULL;
	return k && k->n_cred > 0 && k->endpoint[0] && spec->net ? k : NULL;
}

void credfwd_close(struct credfwd *f)
{
	if (f->lfd >= 0)
		(void)close(f->lfd);
	f->lfd = -1;
	if (f->path[0])
		(void)unlink(f->path);
	if (f->dir[0])
		(void)rmdir(f->dir);
	f->path[0] = f->dir[0] = '\0';
}

int credfwd_open(struct credfwd *f, const struct policy *pol, const struct task_spec *spec,
		 uid_t run_uid, gid_t run_gid, char *err, size_t errlen)
{
	char helper[PATH_MAX];
	int r;
	f->lfd = -1;
	f->path[0] = f->dir[0] = '\0';
	if (!(f->kind = credfwd_kind(pol, spec)))
		return 0;
	find_libexec("kart-credfwd", helper, sizeof helper);
	if (!helper[0] || access(helper, X_OK) < 0) {
		snprintf(err, errlen, "kind %s has credentials, but kart-credfwd, which adds them, "
			 "is not installed (%s)", f->kind->name, helper);
		return -ENOENT;
	}
	/* A directory of this task's alone, root's (the worker's) and not
	 * listable: no one else can put, swap or find anything in it, and
	 * the submitter's bwrap can still reach the socket by its name. In
	 * /tmp, whatever the spool's path: a socket's name has 108 bytes. */
	snprintf(f->dir, sizeof f->dir, "/tmp/kart-credfwd.XXXXXX");
	if (!mkdtemp(f->dir)) {
		r = -errno;
		f->dir[0] = '\0';
		goto fail;
	}
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (chmod(f->dir, 0711) < 0) {
		r = -errno;
		goto fail;
	}
	if (pathfmt(f->path, sizeof f->path, "%s/s", f->dir) < 0 ||
	    pathfmt(sa.sun_path, sizeof sa.sun_path, "%s", f->path) < 0) {
		r = -ENAMETOOLONG;
		goto fail;
	}
	f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	/* Connectable by the task's user alone, before anyone can connect
	 * (it listens last). */
	if (f->lfd < 0 || bind(f->lfd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    chmod(f->path, 0600) < 0 || lchown(f->path, run_uid, run_gid) < 0 ||
	    listen(f->lfd, 64) < 0) {
		r = -errno;
		goto fail;
	}
	return 0;
fail:
	snprintf(err, errlen, "cannot make the socket of kind %s's forwarder: %s", f->kind->name,
		 strerror(-r));
	credfwd_close(f);
	return r;
}

/* NAME=value of env, or NULL. */
static const char *env_value(char *const *env, const char *name)
{
	size_t l = strlen(name);
	for (; env && *env; env++)
		if (strncmp(*env, name, l) == 0 && (*env)[l] == '=')
			return *env + l + 1;
	return NULL;
}

int credfwd_start(struct credfwd *f, int task_pidfd, char *const *env)
{
	if (f->lfd < 0)
		return 0;
	const struct kind *k = f->kind;
	const char *key = NULL;
	for (int i = 0; i < k->n_cred && !key; i++)
		key = env_value(env, k->cred[i]);
	char helper[PATH_MAX], uid[24];
	find_libexec("kart-credfwd", helper, sizeof helper);
	snprintf(uid, sizeof uid, "%lld", k->endpoint_uid);
	/* Whom it may give the key to: https proves itself; http:// a
	 * socket of this uid (kart.conf(5) endpoint_uid), here or there. */
	char *const argv[] = {helper, f->path, (char *)k->endpoint, uid, (char *)k->endpoint_socket,
			      NULL};
	char *const envp[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", NULL};
	/* Above what the child's dup2s write, so that none is overwritten
	 * before it is moved. */
	_cleanup_close_ int kfd = -1, pfd = -1, lfd = -1;
	int r = memfd_sealed("kart-credential", key ? key : "", key ? strlen(key) : 0);
	if (r < 0)
		goto out;
	kfd = fcntl(r, F_DUPFD_CLOEXEC, 10);
	(void)close(r);
	pfd = fcntl(task_pidfd, F_DUPFD_CLOEXEC, 10);
	lfd = fcntl(f->lfd, F_DUPFD_CLOEXEC, 10);
	if (kfd < 0 || pfd < 0 || lfd < 0) {
		r = -errno;
		goto out;
	}
	/* Twice, so that it is init's to reap, never ours: it ends with the
	 * task (its pidfd), not with a call of the worker's. */
	pid_t pid = fork();
	if (pid < 0) {
		r = -errno;
		goto out;
	}
	if (pid == 0) {
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		(void)setsid(); /* no signal to the worker's group reaches it */
		if (fork() != 0)
			_exit(0);
		int dn = open("/dev/null", O_WRONLY | O_CLOEXEC);
		/* fd 2 stays: the worker's log. */
		if (dn < 0 || dup2(kfd, 0) < 0 || dup2(dn, 1) < 0 || dup2(lfd, 3) < 0 ||
		    dup2(pfd, 4) < 0)
			_exit(127);
		(void)syscall(SYS_close_range, 5, ~0U, 0);
		execve(helper, argv, envp);
		static const char msg[] = "kart-credfwd: cannot be run\n";
		(void)!write(2, msg, sizeof msg - 1);
		_exit(127);
	}
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	/* Its socket and directory are the forwarder's to remove now. */
	f->path[0] = f->dir[0] = '\0';
	r = 0;
out:
	(void)close(f->lfd);
	f->lfd = -1;
	return r;
}
