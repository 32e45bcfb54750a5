/* task_check.c - a parsed task against the policy: its ceilings
 * (task_check_policy), where its binds may be, its kind and runner, the
 * worker's look at a claimed file (task_inspect), and the argv it runs
 * with. task.c parses; this judges. */
#define _GNU_SOURCE
#include "task.h"
#include <ctype.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include "policy.h"
#include "spool.h"
#include "util.h"

static void fmt_size(uint64_t v, char *buf, size_t len)
{
	static const char units[] = "KMGT";
	int u = -1;
	while (v >= 1024 && v % 1024 == 0 && u < 3) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%llu", (unsigned long long)v);
	else
		snprintf(buf, len, "%llu%c", (unsigned long long)v, units[u]);
}

int task_check_policy(const struct task_spec *spec, const struct policy *pol, uid_t uid,
		      char *err, size_t errlen)
{
	char a[32], b[32];
	struct lane_limits ll; /* memory, pids and cpu: the lane's own ceilings */
	policy_lane_limits(pol, spec->lane, &ll);
	if (pol->timeout_max_s >= 0 && spec->timeout_s > pol->timeout_max_s)
		return ERR(-1, "line %d: timeout=%llds is above the policy's ceiling of %llds",
			   spec->line_timeout, (long long)spec->timeout_s,
			   (long long)pol->timeout_max_s);
	if (spec->kill_grace_s > pol->kill_grace_max_s)
		return ERR(-1, "line %d: kill_grace=%llds is above the policy's ceiling of %llds",
			   spec->line_kill_grace, (long long)spec->kill_grace_s,
			   (long long)pol->kill_grace_max_s);
	if (spec->memory > ll.memory_max) {
		fmt_size(spec->memory, a, sizeof a);
		fmt_size(ll.memory_max, b, sizeof b);
		return ERR(-1, "line %d: memory=%s is above the policy's ceiling of %s (lane %s)",
			   spec->line_memory, a, b, lane_name(spec->lane));
	}
	if (spec->pids > ll.pids_max)
		return ERR(-1, "line %d: pids=%lld is above the policy's ceiling of %lld (lane %s)",
			   spec->line_pids, (long long)spec->pids, (long long)ll.pids_max,
			   lane_name(spec->lane));
	if (spec->cpu_milli > ll.cpu_max_milli)
		return ERR(-1, "line %d: cpu=%u.%03u is above the policy's ceiling of %u.%03u cores (lane %s)",
			   spec->line_cpu, spec->cpu_milli / 1000, spec->cpu_milli % 1000,
			   ll.cpu_max_milli / 1000, ll.cpu_max_milli % 1000, lane_name(spec->lane));
	if (spec->output > pol->output_max) {
		fmt_size(spec->output, a, sizeof a);
		fmt_size(pol->output_max, b, sizeof b);
		return ERR(-1, "line %d: output=%s is above the policy's ceiling of %s",
			   spec->line_output, a, b);
	}
	/* Where the grant would go: the user's next step. */
	const char *conf = pol->conf_path[0] ? pol->conf_path : "the spool's kart.conf";
	if (spec->kind_net && !policy_net_allowed(pol, uid)) {
		if (spec->line_kind)
			return ERR(-1, "line %d: kind=%s needs network, but the policy grants no network "
				   "to uid %u (" NET_GRANT_HINT ")", spec->line_kind, spec->kind,
				   (unsigned)uid, conf);
		return ERR(-1, "the file's extension makes it kind %s, which needs network, but the "
			   "policy grants no network to uid %u (" NET_GRANT_HINT ")", spec->kind,
			   (unsigned)uid, conf);
	}
	if (spec->net && !policy_net_allowed(pol, uid))
		return ERR(-1, "line %d: net requested, but the policy grants no network to uid %u "
			   "(" NET_GRANT_HINT ")", spec->line_net, (unsigned)uid, conf);
	static const char *const bkey[] = {"cwd", "bind", "ro"};
	for (int i = 0; i < spec->n_binds; i++) {
		const struct task_bind *tb = &spec->binds[i];
		if (!pol->task_binds)
			return ERR(-1, "line %d: %s=%.300s asked for, but the policy binds no path of a "
				   "task's ([sandbox] task_binds = no)", tb->line, bkey[tb->mode], tb->path);
		if (!task_bind_root_ok(pol, tb->path))
			return ERR(-1, "line %d: %s=%.300s is outside the trees the policy allows binds "
				   "in ([sandbox] task_bind_roots)", tb->line, bkey[tb->mode], tb->path);
	}
	for (const char *e = NULL; (e = task_env_next(spec, e));) {
		char name[256];
		snprintf(name, sizeof name, "%.*s", (int)(strchr(e, '=') - e), e);
		const char *why = task_env_denied(name, pol);
		if (why)
			return ERR(-1, "env=%s is refused: %s", name, why);
	}
	return 0;
}

bool task_bind_root_ok(const struct policy *pol, const char *path)
{
	if (!pol->task_bind_roots.n)
		return true;
	for (const char *r = NULL; (r = plist_next(&pol->task_bind_roots, r));)
		if (task_path_covers(r, path))
			return true;
	return false;
}

int task_resolve_kind(struct task_spec *spec, const struct policy *pol, const char *fname,
		      char *err, size_t errlen)
{
	const struct kind *k;
	if (spec->kind[0]) {
		k = policy_kind(pol, spec->kind);
		if (!k) {
			char known[256] = "";
			size_t o = 0;
			for (int i = 0; i < pol->n_kinds && o < sizeof known; i++)
				o += (size_t)snprintf(known + o, sizeof known - o, "%s%s", i ? ", " : "",
						      pol->kinds[i].name);
			return ERR(-1, "line %d: kind=%s is not a kind of the policy (%s%s)",
				   spec->line_kind, spec->kind, pol->n_kinds ? "known: " : "",
				   pol->n_kinds ? known : "it defines none");
		}
	} else if (spec->interp[0] || !(k = policy_kind_by_ext(pol, fname))) {
		return 0; /* the #! line, or /bin/sh */
	}
	snprintf(spec->kind, sizeof spec->kind, "%s", k->name);
	snprintf(spec->interp, sizeof spec->interp, "%s", k->runner);
	spec->interp_arg[0] = '\0';
	spec->has_interp_arg = false;
	if (k->net) {
		spec->kind_net = true;
		if (!spec->net)
			spec->line_net = spec->line_kind;
		spec->net = true;
	}
	return 0;
}

static void inspect(int dirfd, const char *name, const struct policy *pol, struct inspect *out,
		    bool keep)
{
	const char *why;
	struct stat st;
	memset(out, 0, sizeof *out);
	out->fd = -1;
	task_spec_init(&out->spec);

	int nc = task_name_check(name, &why);
	if (nc > 0) {
		out->kind = INSPECT_IGNORE;
		return;
	}
	/* In new/ anyone may swap the entry between two looks: it is looked
	 * at through one O_PATH descriptor, and read through that. A claim
	 * (keep) is in the worker's own directory, where nobody else can
	 * rename: a stat of the name, and an open of it once it is known to
	 * be a regular file (no device is ever opened), checked to be the
	 * same file. */
	_cleanup_close_ int pfd = keep ? -1 : openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (!keep && pfd < 0) {
		if (errno == ENOENT) {
			out->kind = INSPECT_GONE;
			return;
		}
		out->kind = INSPECT_REJECT;
		snprintf(out->error, sizeof out->error, "cannot open the task file: %s",
			 strerror(errno));
		return;
	}
	if (keep ? fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 : fstat(pfd, &st) < 0) {
		if (keep && errno == ENOENT) {
			out->kind = INSPECT_GONE;
			return;
		}
		out->kind = INSPECT_REJECT;
		snprintf(out->error, sizeof out->error, "cannot stat the task file: %s",
			 strerror(errno));
		return;
	}
	out->dev = st.st_dev;
	out->ino = st.st_ino;
	out->uid = st.st_uid;
	out->mode = st.st_mode;
	out->size = st.st_size;
	out->arrived_ms = (int64_t)st.st_ctim.tv_sec * 1000 + st.st_ctim.tv_nsec / 1000000;
	out->kind = INSPECT_REJECT;
	if (nc < 0) {
		snprintf(out->error, sizeof out->error, "bad task name: %s", why);
		return;
	}
	if (!S_ISREG(st.st_mode)) {
		const char *what = S_ISLNK(st.st_mode)    ? "a symbolic link (never followed)"
				   : S_ISDIR(st.st_mode)  ? "a directory"
				   : S_ISFIFO(st.st_mode) ? "a FIFO"
				   : S_ISCHR(st.st_mode)  ? "a character device"
				   : S_ISBLK(st.st_mode)  ? "a block device"
				   : S_ISSOCK(st.st_mode) ? "a socket"
							  : "not a regular file";
		snprintf(out->error, sizeof out->error, "not a regular file: the entry is %s", what);
		return;
	}
	if (st.st_nlink == 0) {
		out->kind = INSPECT_GONE;
		return;
	}
	if (st.st_nlink > 1) {
		out->nlink = st.st_nlink;
		snprintf(out->error, sizeof out->error,
			 "the task file has %lu hard links; a task file must have exactly one",
			 (unsigned long)st.st_nlink);
		return;
	}
	/* The task runs as its owner: anyone else who can write it could
	 * make the owner run their code. (With an ACL the group bits are its
	 * mask, which bounds every named entry: 022 clear means none writes.) */
	if (st.st_mode & 022) {
		snprintf(out->error, sizeof out->error,
			 "the task file is writable by others than its owner (mode %04o); a task runs "
			 "as its owner, so only its owner may be able to write it (chmod go-w)",
			 (unsigned)(st.st_mode & 07777));
		return;
	}
	if ((uint64_t)st.st_size > pol->task_max_bytes) {
		snprintf(out->error, sizeof out->error,
			 "the task file is %lld bytes, above the limit of %llu bytes",
			 (long long)st.st_size, (unsigned long long)pol->task_max_bytes);
		return;
	}

	char proc[64];
	if (!keep)
		snprintf(proc, sizeof proc, "/proc/self/fd/%d", pfd);
	_cleanup_close_ int fd = keep ? openat(dirfd, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY)
				      : open(proc, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	struct stat fst;
	if (fd >= 0 && keep && (fstat(fd, &fst) < 0 || fst.st_ino != st.st_ino || fst.st_dev != st.st_dev)) {
		snprintf(out->error, sizeof out->error, "the task file changed while it was looked at");
		return; /* rejected: never run */
	}
	if (fd < 0) {
		snprintf(out->error, sizeof out->error, "cannot read the task file: %s",
			 strerror(errno));
		return;
	}
	/* A read lease cannot be had while anyone holds the file open for
	 * writing: that is exactly "the writer has not finished". Without
	 * CAP_LEASE a lease on another user's file is refused (EACCES); then
	 * the maildir rule (writers publish only finished files) is trusted. */
	bool leased = false;
	if (fcntl(fd, F_SETLEASE, F_RDLCK) == 0)
		leased = true;
	else if (errno == EAGAIN || errno == EBUSY) {
		out->kind = INSPECT_BUSY;
		return;
	}
	size_t want = (size_t)st.st_size < TASK_HEADER_MAX ? (size_t)st.st_size : TASK_HEADER_MAX;
	_cleanup_free_ char *buf = xmalloc(want + 1);
	ssize_t n = read_upto(fd, buf, want);
	ssize_t kn = fgetxattr(fd, KART_XATTR, out->kattr, sizeof out->kattr - 1);
	out->kattr[kn > 0 ? kn : 0] = '\0';
	if (leased)
		(void)fcntl(fd, F_SETLEASE, F_UNLCK);
	if (n < 0) {
		snprintf(out->error, sizeof out->error, "cannot read the task file: %s",
			 strerror((int)-n));
		return;
	}
	/* Whom it runs as: its record, on the worker's own copy (a shared
	 * spool's hoist); else its owner. Never the owner of a copy. */
	struct submitter by;
	spool_submitter(fd, &st, &by);
	out->uid = by.uid;
	out->recorded = by.recorded;
	char err[400];
	if (task_parse(buf, (size_t)n, &out->spec, err, sizeof err) < 0 ||
	    task_resolve_kind(&out->spec, pol, out->spec.name[0] ? out->spec.name : name, err,
			      sizeof err) < 0 ||
	    task_check_policy(&out->spec, pol, out->uid, err, sizeof err) < 0) {
		snprintf(out->error, sizeof out->error, "%s", err);
		return;
	}
	out->kind = INSPECT_OK;
	if (keep)
		out->fd = steal_fd(&fd);
}

void task_inspect(int dirfd, const char *name, const struct policy *pol, struct inspect *out)
{
	inspect(dirfd, name, pol, out, false);
}

void task_inspect_open(int dirfd, const char *name, const struct policy *pol, struct inspect *out)
{
	inspect(dirfd, name, pol, out, true);
}

void inspect_close(struct inspect *i)
{
	if (i->fd >= 0)
		close(i->fd);
	i->fd = -1;
}

int task_argv(const struct task_spec *spec, const char *path, const char *argv[4])
{
	int n = 0;
	if (spec->interp[0]) {
		argv[n++] = spec->interp;
		if (spec->has_interp_arg)
			argv[n++] = spec->interp_arg;
	} else {
		argv[n++] = "/bin/sh";
	}
	argv[n++] = path;
	argv[n] = NULL;
	return n;
}
