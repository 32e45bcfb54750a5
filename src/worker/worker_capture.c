/* worker_capture.c - a task's stdout and stderr, captured into the claim
 * directory. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>
#include <sys/epoll.h>

#include "worker_int.h"
#include "space.h"

/* Readable by the submitter and root alone (or also the spool's group,
 * [worker] results = group), while it runs and after (renamed into
 * done/ as it is). */
static int open_capture(struct worker *w, const char *name, enum scratch_file kind, uid_t reader)
{
	char p[512];
	if (spool_name_scratch(p, sizeof p, name, kind) < 0)
		return -ENAMETOOLONG;
	int fd = openat(w->wdir, p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	int r = spool_result_grant(w->sp, fd, reader);
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

/* Make the capture file once there is something to put in it. If it
 * cannot be made, the output is read and dropped, and marked truncated. */
void capture_file(struct worker *w, struct task *t, struct capture *c, enum scratch_file kind)
{
	int n = 0;
	if (c->file >= 0 || c->pipe < 0 || ioctl(c->pipe, FIONREAD, &n) < 0 || n <= 0)
		return;
	int fd = open_capture(w, t->name, kind, spool_reader(w->sp, t->name, t->uid));
	if (fd < 0) {
		logmsg("%s: cannot create its %s file: %s; output dropped", t->name, spool_scratch_suffix[kind],
		       strerror(-fd));
		c->cap = c->bytes;
		c->truncated = true;
		c->werr = -fd;
		return;
	}
	c->file = fd;
}

/* An output pipe is ready: what is in it goes to the capture file. A
 * pipe polls EPOLLIN only while it holds data: hung up without it, it
 * is at its end, and no read is needed to say so (most runs write
 * nothing). */
void on_capture(struct worker *w, struct task *t, struct capture *c, enum scratch_file kind,
		uint32_t events)
{
	if (!(events & EPOLLIN) && (events & EPOLLHUP)) {
		ep_del(w, c->pipe);
		capture_close(c);
		return;
	}
	capture_file(w, t, c, kind);
	if (capture_pump(c) == 1) {
		ep_del(w, c->pipe);
		capture_close(c);
	}
}

static const char *errno_name(int e)
{
	switch (e) {
	case ENOSPC: return "ENOSPC";
	case EDQUOT: return "EDQUOT";
	case EIO: return "EIO";
	case EFBIG: return "EFBIG";
	case EROFS: return "EROFS";
	default: return "errno";
	}
}

/* Output the spool could not store is said in the result, never passed
 * off as complete: the task's status stays its own, and the error says
 * what was lost and why, naming the filesystem, so the host is blamed
 * and not the task. */
void capture_loss(struct worker *w, struct task *t)
{
	const struct capture *caps[] = {&t->run.out, &t->run.err};
	const char *const names[] = {spool_scratch_suffix[SCRATCH_STDOUT], spool_scratch_suffix[SCRATCH_STDERR]};
	struct result *r = &t->res;
	char *buf = t->errbuf;
	const size_t len = sizeof t->errbuf;
	for (int i = 0; i < 2; i++) {
		const struct capture *c = caps[i];
		if (!c->werr)
			continue;
		struct statfs sf;
		char fs[32] = "unknown";
		if (fstatfs(w->sp->root, &sf) == 0)
			space_fs_name((unsigned long)sf.f_type, fs, sizeof fs);
		char why[600];
		snprintf(why, sizeof why,
			 "%s: %llu bytes of output were lost: the spool's filesystem (%s, holding %s) "
			 "refused the write: %s (%s)",
			 names[i], (unsigned long long)c->lost, fs, w->sp->path, strerror(c->werr),
			 errno_name(c->werr));
		/* After the error the outcome gave, if any, not instead of it. */
		if (!r->error)
			buf[0] = '\0';
		else if (r->error != buf)
			snprintf(buf, len, "%s", r->error);
		size_t used = strlen(buf);
		snprintf(buf + used, len - used, "%s%s", used ? "; " : "", why);
		r->error = buf;
	}
}
