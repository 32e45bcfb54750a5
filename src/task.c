/* task.c - task names, the directive parser, and inspection of entries.
 *
 * Inspection never follows a link, never opens anything but a regular
 * file, and never opens for blocking I/O: the entry is first pinned with
 * O_PATH|O_NOFOLLOW, checked with fstat, and only then reopened for
 * reading through /proc/self/fd. A read lease probe tells whether any
 * process still has the file open for writing (a `cp` under way). */
#define _GNU_SOURCE
#include "task.h"

#include <ctype.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "policy.h"
#include "util.h"

const char *lane_name(enum lane l) { return l == LANE_BATCH ? "batch" : "fast"; }

void task_spec_init(struct task_spec *spec)
{
	memset(spec, 0, sizeof *spec);
	spec->timeout_s = -1;
	spec->lane = LANE_FAST;
	spec->retries = -1;
}

int task_name_check(const char *name, const char **why)
{
	size_t len = strlen(name);
	if (len == 0) {
		*why = "empty name";
		return -1;
	}
	if (name[0] == '.')
		return 1;
	if (len > TASK_NAME_MAX) {
		*why = "name longer than 200 bytes";
		return -1;
	}
	if (!utf8_valid(name, len)) {
		*why = "name is not valid UTF-8";
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		if (c < 0x20 || c == 0x7f) {
			*why = "name contains a control character";
			return -1;
		}
		if (c == '/') {
			*why = "name contains '/'";
			return -1;
		}
	}
	return 0;
}

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)

static int parse_item(const char *item, int lineno, struct task_spec *spec, char *err,
		      size_t errlen)
{
	const char *eq = strchr(item, '=');
	char key[32];
	const char *val = eq ? eq + 1 : NULL;
	size_t klen = eq ? (size_t)(eq - item) : strlen(item);
	if (klen == 0 || klen >= sizeof key)
		return ERR("line %d: unknown directive item '%s'", lineno, item);
	memcpy(key, item, klen);
	key[klen] = '\0';

	if (!val) {
		if (strcmp(key, "net") == 0) {
			spec->net = true;
			spec->line_net = lineno;
			return 0;
		}
		return ERR("line %d: unknown directive item '%s' (known: timeout= memory= pids= "
			   "cpu= lane= net priority= retries= output= kind=)", lineno, item);
	}
	if (*val == '\0')
		return ERR("line %d: %s= needs a value", lineno, key);

	int r;
	if (strcmp(key, "timeout") == 0) {
		int64_t s;
		r = parse_duration_s(val, &s);
		if (r == -ERANGE || (r == 0 && s == 0))
			return ERR("line %d: timeout=%s is out of range (1s to 10 years)", lineno, val);
		if (r < 0)
			return ERR("line %d: timeout=%s is not a duration (use 90, 90s, 5m or 2h)",
				   lineno, val);
		spec->timeout_s = s;
		spec->line_timeout = lineno;
	} else if (strcmp(key, "memory") == 0 || strcmp(key, "output") == 0) {
		uint64_t v;
		bool mem = key[0] == 'm';
		r = parse_size(val, &v);
		if (r == -EINVAL)
			return ERR("line %d: %s=%s is not a size (use 512K, 256M, 2G or bytes)",
				   lineno, key, val);
		if (r < 0 || (mem && v < 1 << 20))
			return ERR("line %d: %s=%s is out of range%s", lineno, key, val,
				   mem ? " (at least 1M)" : "");
		if (mem) {
			spec->memory = v;
			spec->line_memory = lineno;
		} else {
			spec->output = v;
			spec->line_output = lineno;
		}
	} else if (strcmp(key, "pids") == 0) {
		long long v;
		r = parse_int(val, 1, 4194304, &v);
		if (r < 0)
			return ERR("line %d: pids=%s is not a number from 1 to 4194304", lineno, val);
		spec->pids = v;
		spec->line_pids = lineno;
	} else if (strcmp(key, "cpu") == 0) {
		uint32_t m;
		r = parse_cpu_milli(val, &m);
		if (r < 0)
			return ERR("line %d: cpu=%s is not a core count (decimal, e.g. 0.5 or 2, "
				   "at most 3 decimals, above 0)", lineno, val);
		spec->cpu_milli = m;
		spec->line_cpu = lineno;
	} else if (strcmp(key, "lane") == 0) {
		if (strcmp(val, "fast") == 0)
			spec->lane = LANE_FAST;
		else if (strcmp(val, "batch") == 0)
			spec->lane = LANE_BATCH;
		else
			return ERR("line %d: lane=%s is not a lane (fast or batch)", lineno, val);
	} else if (strcmp(key, "priority") == 0) {
		long long v;
		if (parse_int(val, -1000000, 1000000, &v) < 0)
			return ERR("line %d: priority=%s is not a number from -1000000 to 1000000",
				   lineno, val);
		spec->priority = (int)v;
	} else if (strcmp(key, "retries") == 0) {
		long long v;
		if (parse_int(val, 0, 100, &v) < 0)
			return ERR("line %d: retries=%s is not a number from 0 to 100", lineno, val);
		spec->retries = (int)v;
		spec->line_retries = lineno;
	} else if (strcmp(key, "kind") == 0) {
		if (!kind_name_ok(val))
			return ERR("line %d: kind=%s is not a kind name (1 to 31 of a-z 0-9 _ -)",
				   lineno, val);
		snprintf(spec->kind, sizeof spec->kind, "%s", val);
		spec->line_kind = lineno;
	} else if (strcmp(key, "name") == 0) {
		const char *why;
		if (task_name_check(val, &why) != 0)
			return ERR("line %d: name=%s is not a task name", lineno, val);
		snprintf(spec->name, sizeof spec->name, "%s", val);
	} else {
		return ERR("line %d: unknown directive item '%s' (known: timeout= memory= pids= "
			   "cpu= lane= net priority= retries= output= kind=)", lineno, item);
	}
	return 0;
}

static int parse_shebang(const char *line, size_t len, struct task_spec *spec, char *err,
			 size_t errlen)
{
	const char *p = line + 2, *end = line + len;
	if (len >= TASK_INTERP_MAX)
		return ERR("line 1: the #! line is longer than %d bytes", TASK_INTERP_MAX - 1);
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	const char *i0 = p;
	while (p < end && *p != ' ' && *p != '\t')
		p++;
	if (p == i0)
		return ERR("line 1: the #! line names no interpreter");
	if (*i0 != '/')
		return ERR("line 1: the #! interpreter must be an absolute path");
	memcpy(spec->interp, i0, (size_t)(p - i0));
	spec->interp[p - i0] = '\0';
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	const char *a_end = end;
	while (a_end > p && (a_end[-1] == ' ' || a_end[-1] == '\t'))
		a_end--;
	if (a_end > p) {
		memcpy(spec->interp_arg, p, (size_t)(a_end - p));
		spec->interp_arg[a_end - p] = '\0';
		spec->has_interp_arg = true;
	}
	return 0;
}

int task_parse(const char *buf, size_t len, struct task_spec *spec, char *err, size_t errlen)
{
	size_t off = 0;
	int lineno = 0;
	task_spec_init(spec);
	while (off < len) {
		const char *line = buf + off;
		const char *nl = memchr(line, '\n', len - off);
		size_t llen = nl ? (size_t)(nl - line) : len - off;
		lineno++;
		off += llen + (nl ? 1 : 0);
		if (llen == 0 || line[0] != '#')
			break; /* the leading comment block is over */
		if (!nl && len >= TASK_HEADER_MAX)
			return ERR("line %d: the leading comment block is longer than %d bytes",
				   lineno, TASK_HEADER_MAX);
		if (lineno == 1 && llen >= 2 && line[1] == '!') {
			if (parse_shebang(line, llen, spec, err, errlen) < 0)
				return -1;
			continue;
		}
		/* Copy the line so it can be cut into items. */
		char tmp[4096];
		if (llen >= sizeof tmp) {
			/* A long plain comment is fine; a directive line cut or
			 * skipped would run the task without what it asked for. */
			const char *q = line + 1;
			while (q < line + llen && (*q == ' ' || *q == '\t'))
				q++;
			if (line + llen - q >= 5 && memcmp(q, "kart:", 5) == 0)
				return ERR("line %d: the directive line is longer than %zu bytes",
					   lineno, sizeof tmp - 1);
			continue;
		}
		memcpy(tmp, line, llen);
		tmp[llen] = '\0';
		if (llen && tmp[llen - 1] == '\r')
			tmp[--llen] = '\0';
		char *p = tmp + 1;
		while (*p == ' ' || *p == '\t')
			p++;
		if (strcmp(p, "allow_net") == 0) {
			spec->net = true;
			spec->line_net = lineno;
			continue;
		}
		if (strncmp(p, "kart:", 5) != 0)
			continue;
		p += 5;
		char *save = NULL;
		for (char *item = strtok_r(p, " \t", &save); item; item = strtok_r(NULL, " \t", &save))
			if (parse_item(item, lineno, spec, err, errlen) < 0)
				return -1;
	}
	return 0;
}

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
		return ERR("line %d: timeout=%llds is above the policy's ceiling of %llds",
			   spec->line_timeout, (long long)spec->timeout_s,
			   (long long)pol->timeout_max_s);
	if (spec->memory > ll.memory_max) {
		fmt_size(spec->memory, a, sizeof a);
		fmt_size(ll.memory_max, b, sizeof b);
		return ERR("line %d: memory=%s is above the policy's ceiling of %s (lane %s)",
			   spec->line_memory, a, b, lane_name(spec->lane));
	}
	if (spec->pids > ll.pids_max)
		return ERR("line %d: pids=%lld is above the policy's ceiling of %lld (lane %s)",
			   spec->line_pids, (long long)spec->pids, (long long)ll.pids_max,
			   lane_name(spec->lane));
	if (spec->cpu_milli > ll.cpu_max_milli)
		return ERR("line %d: cpu=%u.%03u is above the policy's ceiling of %u.%03u cores (lane %s)",
			   spec->line_cpu, spec->cpu_milli / 1000, spec->cpu_milli % 1000,
			   ll.cpu_max_milli / 1000, ll.cpu_max_milli % 1000, lane_name(spec->lane));
	if (spec->output > pol->output_max) {
		fmt_size(spec->output, a, sizeof a);
		fmt_size(pol->output_max, b, sizeof b);
		return ERR("line %d: output=%s is above the policy's ceiling of %s",
			   spec->line_output, a, b);
	}
	if (spec->kind_net && !policy_net_allowed(pol, uid)) {
		if (spec->line_kind)
			return ERR("line %d: kind=%s needs network, but the policy grants no network "
				   "to uid %u", spec->line_kind, spec->kind, (unsigned)uid);
		return ERR("the file's extension makes it kind %s, which needs network, but the "
			   "policy grants no network to uid %u", spec->kind, (unsigned)uid);
	}
	if (spec->net && !policy_net_allowed(pol, uid))
		return ERR("line %d: net requested, but the policy grants no network to uid %u",
			   spec->line_net, (unsigned)uid);
	return 0;
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
			return ERR("line %d: kind=%s is not a kind of the policy (%s%s)",
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
	if (leased)
		(void)fcntl(fd, F_SETLEASE, F_UNLCK);
	if (n < 0) {
		snprintf(out->error, sizeof out->error, "cannot read the task file: %s",
			 strerror((int)-n));
		return;
	}
	char err[400];
	if (task_parse(buf, (size_t)n, &out->spec, err, sizeof err) < 0 ||
	    task_resolve_kind(&out->spec, pol, out->spec.name[0] ? out->spec.name : name, err,
			      sizeof err) < 0 ||
	    task_check_policy(&out->spec, pol, st.st_uid, err, sizeof err) < 0) {
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
