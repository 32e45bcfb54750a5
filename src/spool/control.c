/* control.c - see control.h. Every rename here has a row in
 * spool-layout's crash-state table (APPENDIX §3, "Hold, release, edit, pause"). */
#define _GNU_SOURCE
#include "control.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "task.h"
#include "util.h"
#include "worker_control.h"

int control_may(const struct spool *sp, const char *id, const struct stat *st)
{
	uid_t me = geteuid();
	if (me == 0 || spool_reader(sp, id, st->st_uid) == me)
		return 0;
	return -EPERM;
}

static bool same_inode(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Rename new/from -> new/to for the task id, if the caller may: the file
 * is looked at through a descriptor first, and what arrived at to must
 * be that file; else (swapped in between, only possible on a new/ that
 * others write) it goes back. */
static int control_move(struct spool *sp, const char *id, const char *from, const char *to)
{
	struct stat a, b;
	_cleanup_close_ int fd = openat(sp->new, from, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &a) < 0)
		return -errno;
	if (!S_ISREG(a.st_mode))
		return -ENOENT; /* no task: a worker rejects it */
	int r = control_may(sp, id, &a);
	if (r < 0)
		return r;
	if (renameat2(sp->new, from, sp->new, to, RENAME_NOREPLACE) < 0)
		return -errno;
	if (fstatat(sp->new, to, &b, AT_SYMLINK_NOFOLLOW) == 0 && !same_inode(&a, &b)) {
		(void)renameat2(sp->new, to, sp->new, from, RENAME_NOREPLACE);
		return -ESTALE;
	}
	if (fsync(sp->new) < 0)
		return -errno; /* moved, but not known durable */
	return 0;
}

int control_hold(struct spool *sp, const char *id)
{
	char held[TASK_NAME_MAX + 24];
	if (spool_held_name(id, held, sizeof held) < 0)
		return -ENAMETOOLONG;
	return control_move(sp, id, id, held);
}

int control_release(struct spool *sp, const char *id)
{
	char held[TASK_NAME_MAX + 24];
	if (spool_held_name(id, held, sizeof held) < 0)
		return -ENAMETOOLONG;
	return control_move(sp, id, held, id);
}

int control_replace(struct spool *sp, const char *name, int orig, const char *text, size_t len)
{
	struct stat st;
	if (fstat(orig, &st) < 0)
		return -errno;
	/* Staged in new/ itself, under a dot name no worker reads: on a
	 * shared spool only workers and root write there, so no member can
	 * touch the staged file, nor swap another in its place (issue 35:
	 * staged in the sticky tmp/ and given to the member, mallory renamed
	 * alice's file over it, and it ran as alice). */
	char t[128];
	uint64_t rnd = 0;
	if (getrandom(&rnd, sizeof rnd, 0) < 0)
		rnd = (uint64_t)now_mono_ms();
	snprintf(t, sizeof t, ".edit.%d.%016llx", getpid(), (unsigned long long)rnd);
	_cleanup_close_ int fd = openat(sp->new, t, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	/* The spool's record of the task (attempt, first submission) goes
	 * with it; only a file without one has none to keep. */
	char meta[512];
	struct claim_meta m;
	ssize_t ml = fgetxattr(orig, KART_XATTR, meta, sizeof meta - 1);
	meta[ml > 0 ? ml : 0] = '\0';
	claim_meta_parse(meta, spool_held_id(name) ? spool_held_id(name) : name, &m);
	struct submitter by;
	spool_submitter(orig, &st, &by);
	int r;
	if (by.recorded || st.st_uid == geteuid()) {
		/* The worker's copy (or our own file): the new one is ours
		 * too, recording the same submitter, readable by them alone. */
		r = spool_task_fill(fd, text, len, ml > 0 ? &m : NULL, by.uid, by.from);
	} else {
		/* A file of its submitter's, on a spool where new/ is theirs
		 * (a single-user spool): owned as before, or root's edit would
		 * run as root. The worker rejects a file others may write, so
		 * no group or other write. */
		r = write_all(fd, text, len);
		if (r == 0 && ml > 0 && claim_meta_set(fd, &m) < 0)
			r = -errno;
		if (r == 0 && (st.st_uid != geteuid() || st.st_gid != getegid()) &&
		    fchown(fd, st.st_uid, st.st_gid) < 0)
			r = -errno;
		if (r == 0 && fchmod(fd, st.st_mode & 0755) < 0)
			r = -errno;
		if (r == 0 && fsync(fd) < 0)
			r = -errno;
	}
	struct stat nst;
	if (r == 0 && fstat(fd, &nst) < 0)
		r = -errno;
	if (r < 0) {
		(void)unlinkat(sp->new, t, 0);
		return r;
	}
	/* Closed before the swap: a worker never meets it open for writing. */
	close(steal_fd(&fd));
	return spool_replace_queued(sp, t, name, &st, &nst, by.uid);
}

/* Is line (len bytes, no newline) a directive line? Then *items is
 * where its items start. */
static bool directive_line(const char *line, size_t len, size_t *items)
{
	size_t i = 1;
	if (!len || line[0] != '#')
		return false;
	while (i < len && (line[i] == ' ' || line[i] == '\t'))
		i++;
	if (len - i < 5 || memcmp(line + i, "kart:", 5) != 0)
		return false;
	*items = i + 5;
	return true;
}

int control_set_item(const char *text, size_t len, const char *item, char **out, size_t *outlen)
{
	const char *eq = strchr(item, '=');
	if (!eq || eq == item || !eq[1])
		return -EINVAL;
	for (const char *k = item; k < eq; k++)
		if (!((*k >= 'a' && *k <= 'z') || *k == '_'))
			return -EINVAL; /* keys are lower-case words */
	size_t kl = (size_t)(eq - item) + 1; /* "KEY=" */
	char enc[3 * 4096 + 1];
	if (pct_encode(eq + 1, enc, sizeof enc) < 0)
		return -EINVAL;
	char *line = xasprintf("#kart: %.*s%s\n", (int)kl, item, enc);
	/* A rewritten directive line grows by one byte at most (a space
	 * after "kart:"), and each is 6 bytes or more. */
	size_t cap = 2 * len + strlen(line) + 16, o = 0, p = 0, at = 0;
	char *buf = xmalloc(cap);
	bool header = true;
	/* Copy line by line; in the leading comment block, drop the items of
	 * this key from directive lines (a line left with none goes). */
	while (p < len) {
		const char *nl = memchr(text + p, '\n', len - p);
		size_t ll = nl ? (size_t)(nl - (text + p)) : len - p;
		const char *l = text + p;
		size_t items;
		if (header && (ll == 0 || l[0] != '#')) {
			header = false;
			at = o;
		}
		if (header && directive_line(l, ll, &items)) {
			size_t start = o, kept = 0;
			memcpy(buf + o, l, items);
			o += items;
			for (size_t i = items; i < ll;) {
				while (i < ll && (l[i] == ' ' || l[i] == '\t'))
					i++;
				size_t j = i;
				while (j < ll && l[j] != ' ' && l[j] != '\t' && l[j] != '\r')
					j++;
				if (j > i && !(j - i >= kl && memcmp(l + i, item, kl) == 0)) {
					buf[o++] = ' ';
					memcpy(buf + o, l + i, j - i);
					o += j - i;
					kept++;
				}
				if (j == i)
					break; /* a trailing \r, or the end */
				i = j;
			}
			if (kept)
				buf[o++] = '\n';
			else
				o = start;
		} else {
			memcpy(buf + o, l, ll);
			o += ll;
			/* A header line always ends, even the last of a file
			 * that is all header: the new line goes after it. */
			if (nl || header)
				buf[o++] = '\n';
		}
		p += ll + (nl ? 1 : 0);
	}
	if (header)
		at = o;
	/* The new line goes where the leading block ends, after #!. */
	size_t nl_len = strlen(line);
	char *res = xmalloc(o + nl_len + 1);
	memcpy(res, buf, at);
	memcpy(res + at, line, nl_len);
	memcpy(res + at + nl_len, buf + at, o - at);
	*outlen = o + nl_len;
	res[*outlen] = '\0';
	free(buf);
	free(line);
	*out = res;
	return 0;
}

bool control_via_drop(const struct spool *sp)
{
	return sp->drop >= 0 && geteuid() != 0;
}

int control_request(struct spool *sp, const char *verb, const char *id, const char *text, size_t len,
		    int timeout_ms)
{
	char err[512];
	if (sp->dropd < 0 && spool_use_drop(sp, err, sizeof err) < 0)
		return -EACCES;
	size_t pl = strlen(sp->idprefix);
	if (sp->dropd < 0 || !pl || strncmp(id, sp->idprefix, pl) != 0)
		return -EPERM; /* a drop can only name the dropper's own tasks */
	char stage[96], req[TASK_NAME_MAX + 96], dir[64];
	uint64_t rnd = 0;
	if (getrandom(&rnd, sizeof rnd, 0) < 0)
		rnd = (uint64_t)now_mono_ms();
	snprintf(stage, sizeof stage, ".ctl-stage.%d.%016llx", getpid(), (unsigned long long)rnd);
	if (pathfmt(req, sizeof req, "%s%s.%s", WCTL_REQ_PREFIX, verb, id + pl) < 0)
		return -ENAMETOOLONG;
	_cleanup_close_ int ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	snprintf(dir, sizeof dir, "/proc/self/fd/%d", sp->dropd);
	if (ino < 0 || inotify_add_watch(ino, dir, IN_DELETE | IN_MOVED_FROM | IN_ONLYDIR) < 0)
		return -errno;
	/* Staged under a name no worker reads, then renamed in whole. */
	_cleanup_close_ int fd = openat(sp->dropd, stage, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
					0600);
	if (fd < 0)
		return -errno;
	int r = write_all(fd, text, len);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	close(steal_fd(&fd));
	int64_t end = now_mono_ms() + timeout_ms;
	bool sent = false;
	while (r == 0) {
		struct stat st;
		if (!sent) {
			if (renameat2(sp->dropd, stage, sp->dropd, req, RENAME_NOREPLACE) == 0)
				sent = true;
			else if (errno != EEXIST) /* EEXIST: the same request pending: after it */
				r = -errno;
		} else if (fstatat(sp->dropd, req, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			break; /* taken and done: its removal is the answer */
		}
		int64_t rest = end - now_mono_ms();
		if (r == 0 && rest <= 0)
			r = -ETIMEDOUT;
		if (r < 0)
			break;
		struct pollfd pfd = {.fd = ino, .events = POLLIN};
		if (poll(&pfd, 1, (int)(rest > 200 ? 200 : rest)) > 0) {
			char buf[4096];
			while (read(ino, buf, sizeof buf) > 0)
				;
		}
	}
	if (!sent)
		(void)unlinkat(sp->dropd, stage, 0);
	else if (r == -ETIMEDOUT)
		(void)unlinkat(sp->dropd, req, 0); /* withdrawn: no worker took it */
	return r;
}
