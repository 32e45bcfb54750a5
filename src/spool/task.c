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
#include <sys/xattr.h>

#include "policy.h"
#include "spool.h"
#include "util.h"

const char *lane_name(enum lane l) { return l == LANE_BATCH ? "batch" : "fast"; }

void task_spec_init(struct task_spec *spec)
{
	memset(spec, 0, sizeof *spec);
	spec->timeout_s = -1;
	spec->kill_grace_s = -1;
	spec->lane = LANE_FAST;
	spec->retries = -1;
	spec->cwd = -1;
	spec->umask = -1;
}

const char *task_env_next(const struct task_spec *spec, const char *prev)
{
	const char *p = prev ? prev + strlen(prev) + 1 : spec->env;
	return p < spec->env + spec->env_len ? p : NULL;
}

static bool env_name_valid(const char *s, size_t n)
{
	if (n == 0 || (*s >= '0' && *s <= '9'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return false;
	return true;
}

/* NAME against an env_deny entry: a name, or a prefix ending in '*'. */
static bool env_pat_match(const char *pat, const char *name)
{
	size_t l = strlen(pat);
	if (l && pat[l - 1] == '*')
		return strncmp(pat, name, l - 1) == 0;
	return strcmp(pat, name) == 0;
}

const char *task_env_denied(const char *name, const struct policy *pol)
{
	/* What the sandbox sets for its own workings and the kinds' names:
	 * whatever the policy says. */
	if (strncmp(name, "KART_", 5) == 0)
		return "it is set by the sandbox itself";
	for (const char *e = NULL; (e = plist_next(&pol->env_deny, e));)
		if (env_pat_match(e, name))
			return "the policy's [sandbox] env_deny names it";
	return NULL;
}

/* A bind's path, decoded: absolute, with no "." or ".." component, not
 * "/"; repeated and trailing slashes dropped, so that the checks below
 * compare one spelling. */
static int bind_path_clean(const char *enc, char *out, size_t outlen, const char **why)
{
	char dec[TASK_BIND_PATH_MAX];
	ssize_t n = pct_decode(enc, dec, sizeof dec);
	if (n == -ENAMETOOLONG)
		return *why = "longer than 1023 bytes", -1;
	if (n < 0)
		return *why = "a '%' not followed by two hex digits (or a %00)", -1;
	if (dec[0] != '/')
		return *why = "not an absolute path", -1;
	size_t o = 0;
	for (const char *p = dec; *p;) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		const char *e = strchrnul(p, '/');
		size_t l = (size_t)(e - p);
		if ((l == 1 && p[0] == '.') || (l == 2 && p[0] == '.' && p[1] == '.'))
			return *why = "a path with a . or .. component", -1;
		if (o + 1 + l >= outlen)
			return *why = "longer than 1023 bytes", -1;
		out[o++] = '/';
		memcpy(out + o, p, l);
		o += l;
		p = e;
	}
	if (o == 0)
		return *why = "the root directory", -1;
	out[o] = '\0';
	return 0;
}

/* Parent-or-self: a is path, or a directory above it. */
static bool path_covers(const char *a, const char *path)
{
	size_t l = strlen(a);
	return strncmp(a, path, l) == 0 && (path[l] == '\0' || path[l] == '/' || l == 1);
}

const char *bind_path_refused(const char *path)
{
	/* Never the host's kernel interfaces and devices, nor below them. */
	static const char *const never[] = {"/proc", "/sys", "/dev", "/run/kart"};
	for (size_t i = 0; i < ARRAY_SIZE(never); i++)
		if (path_covers(never[i], path) || path_covers(path, never[i]))
			return "the host's /proc, /sys and /dev are never bound";
	/* The sandbox's own mounts: a bind at one of them, or above one,
	 * would cover it (a bind below one is on top of it, and fine). */
	static const char *const own[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
					  "/libx32", "/etc", "/tmp", "/work", "/run"};
	for (size_t i = 0; i < ARRAY_SIZE(own); i++)
		if (path_covers(path, own[i]))
			return "it would cover the sandbox's own mounts";
	return NULL;
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


/* Said by every "unknown directive" error: keep in step with kart-task(5). */
#define KNOWN_DIRECTIVES                                                                   \
	"(known: timeout= memory= pids= cpu= lane= net priority= retries= output= kind= "  \
	"name= kill_grace= label= cwd= bind= ro= env= umask= not_before= retry_on= "  \
	"retry_delay= unique= "  \
	"after=)"

/* after=ID[,ID...]: cut at the commas first, then each id decoded, so
 * that an id holding a comma is written %2C. Repeated items add up. */
static int parse_after(const char *raw, int lineno, struct task_spec *spec, char *err,
		       size_t errlen)
{
	for (const char *p = raw;;) {
		const char *e = strchrnul(p, ',');
		char enc[3 * TASK_NAME_MAX + 1], id[TASK_NAME_MAX + 1];
		const char *why;
		if (e == p)
			return ERR(-1, "line %d: after=%s has an empty id", lineno, raw);
		if ((size_t)(e - p) >= sizeof enc)
			return ERR(-1, "line %d: after=: an id longer than %d bytes", lineno, TASK_NAME_MAX);
		memcpy(enc, p, (size_t)(e - p));
		enc[e - p] = '\0';
		ssize_t n = pct_decode(enc, id, sizeof id);
		if (n == -ENAMETOOLONG)
			return ERR(-1, "line %d: after=%s: an id longer than %d bytes", lineno, enc,
				   TASK_NAME_MAX);
		if (n < 0)
			return ERR(-1, "line %d: after=%s: a '%%' must be followed by two hex digits, not %%00",
				   lineno, enc);
		if (task_name_check(id, &why) != 0)
			return ERR(-1, "line %d: after=%s is not a task id (%s)", lineno, enc,
				   id[0] == '.' ? "it starts with '.'" : why);
		bool dup = false;
		for (int i = 0; i < spec->n_after; i++)
			dup |= strcmp(spec->after[i], id) == 0;
		if (!dup) {
			if (spec->n_after == TASK_AFTER_MAX)
				return ERR(-1, "line %d: after= names more than %d tasks", lineno,
					   TASK_AFTER_MAX);
			memcpy(spec->after[spec->n_after++], id, (size_t)n + 1);
		}
		spec->line_after = lineno;
		if (!*e)
			return 0;
		p = e + 1;
	}
}

static int parse_item(const char *item, int lineno, struct task_spec *spec, char *err,
		      size_t errlen)
{
	const char *eq = strchr(item, '=');
	char key[32];
	const char *raw = eq ? eq + 1 : NULL;
	/* Every value is decoded (%XX is the byte 0xXX) before it is read,
	 * so that one rule serves all; errors quote it as written. */
	char vbuf[4096];
	const char *val = vbuf;
	size_t klen = eq ? (size_t)(eq - item) : strlen(item);
	if (klen == 0 || klen >= sizeof key)
		return ERR(-1, "line %d: unknown directive item '%s'", lineno, item);
	memcpy(key, item, klen);
	key[klen] = '\0';

	if (!raw) {
		if (strcmp(key, "net") == 0) {
			spec->net = true;
			spec->line_net = lineno;
			return 0;
		}
		return ERR(-1, "line %d: unknown directive item '%s' " KNOWN_DIRECTIVES, lineno, item);
	}
	if (*raw == '\0')
		return ERR(-1, "line %d: %s= needs a value", lineno, key);
	/* cwd=, bind=, ro= and env= decode their own: a path has its own
	 * limit, and an error must never quote an env= value (a secret). */
	if (strcmp(key, "env") == 0 || strcmp(key, "cwd") == 0 || strcmp(key, "bind") == 0 ||
	    strcmp(key, "ro") == 0 || strcmp(key, "after") == 0) {
		val = raw;
	} else {
		ssize_t vlen = pct_decode(raw, vbuf, sizeof vbuf);
		if (vlen < 0)
			return ERR(-1, "line %d: %s=%s: a '%%' must be followed by two hex digits, not %%00",
				   lineno, key, raw);
		if ((size_t)vlen != strlen(vbuf))
			return ERR(-1, "line %d: %s=%s holds a NUL byte", lineno, key, raw);
	}

	int r;
	if (strcmp(key, "timeout") == 0) {
		int64_t s;
		r = parse_duration_s(val, &s);
		if (r == -ERANGE || (r == 0 && s == 0))
			return ERR(-1, "line %d: timeout=%s is out of range (1s to 10 years)", lineno, raw);
		if (r < 0)
			return ERR(-1, "line %d: timeout=%s is not a duration (use 90, 90s, 5m or 2h)",
				   lineno, raw);
		spec->timeout_s = s;
		spec->line_timeout = lineno;
	} else if (strcmp(key, "kill_grace") == 0) {
		int64_t s;
		if (parse_duration_s(val, &s) < 0)
			return ERR(-1, "line %d: kill_grace=%s is not a duration (use 0, 10s or 1m)",
				   lineno, val);
		spec->kill_grace_s = s;
		spec->line_kill_grace = lineno;
	} else if (strcmp(key, "label") == 0) {
		/* Kept as written: `kart status --label` compares it so. */
		if (strlen(val) >= sizeof spec->label)
			return ERR(-1, "line %d: label= is longer than %zu bytes", lineno,
				   sizeof spec->label - 1);
		(void)pathfmt(spec->label, sizeof spec->label, "%s", val); /* length checked above */
	} else if (strcmp(key, "memory") == 0 || strcmp(key, "output") == 0) {
		uint64_t v;
		bool mem = key[0] == 'm';
		r = parse_size(val, &v);
		if (r == -EINVAL)
			return ERR(-1, "line %d: %s=%s is not a size (use 512K, 256M, 2G or bytes)",
				   lineno, key, raw);
		if (r < 0 || (mem && v < 1 << 20))
			return ERR(-1, "line %d: %s=%s is out of range%s", lineno, key, raw,
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
			return ERR(-1, "line %d: pids=%s is not a number from 1 to 4194304", lineno, raw);
		spec->pids = v;
		spec->line_pids = lineno;
	} else if (strcmp(key, "cpu") == 0) {
		uint32_t m;
		r = parse_cpu_milli(val, &m);
		if (r < 0)
			return ERR(-1, "line %d: cpu=%s is not a core count (decimal, e.g. 0.5 or 2, "
				   "at most 3 decimals, above 0)", lineno, raw);
		spec->cpu_milli = m;
		spec->line_cpu = lineno;
	} else if (strcmp(key, "lane") == 0) {
		if (strcmp(val, "fast") == 0)
			spec->lane = LANE_FAST;
		else if (strcmp(val, "batch") == 0)
			spec->lane = LANE_BATCH;
		else
			return ERR(-1, "line %d: lane=%s is not a lane (fast or batch)", lineno, raw);
	} else if (strcmp(key, "priority") == 0) {
		long long v;
		if (parse_int(val, -1000000, 1000000, &v) < 0)
			return ERR(-1, "line %d: priority=%s is not a number from -1000000 to 1000000",
				   lineno, raw);
		spec->priority = (int)v;
	} else if (strcmp(key, "retries") == 0) {
		long long v;
		if (parse_int(val, 0, 100, &v) < 0)
			return ERR(-1, "line %d: retries=%s is not a number from 0 to 100", lineno, raw);
		spec->retries = (int)v;
		spec->line_retries = lineno;
	} else if (strcmp(key, "kind") == 0) {
		if (!kind_name_ok(val))
			return ERR(-1, "line %d: kind=%s is not a kind name (1 to 31 of a-z 0-9 _ -)",
				   lineno, raw);
		(void)pathfmt(spec->kind, sizeof spec->kind, "%s", val); /* kind_name_ok: 1 to 31 */
		spec->line_kind = lineno;
	} else if (strcmp(key, "name") == 0) {
		const char *why;
		int nc = task_name_check(val, &why);
		if (nc != 0)
			return ERR(-1, "line %d: name=%s is not a task name (%s)", lineno, raw,
				   nc > 0 ? "starts with '.'" : why);
		(void)pathfmt(spec->name, sizeof spec->name, "%s", val); /* task_name_check: fits */
	} else if (strcmp(key, "cwd") == 0 || strcmp(key, "bind") == 0 || strcmp(key, "ro") == 0) {
		/* Decoded here, in the directive's own handler: the item loop
		 * hands every value over as it was written. */
		const char *why, *refused;
		if (spec->n_binds >= TASK_BINDS_MAX)
			return ERR(-1, "line %d: more than %d of cwd=, bind= and ro=", lineno,
				   TASK_BINDS_MAX);
		struct task_bind *b = &spec->binds[spec->n_binds];
		if (bind_path_clean(val, b->path, sizeof b->path, &why) < 0)
			return ERR(-1, "line %d: %s=%.300s is %s", lineno, key, val, why);
		if ((refused = bind_path_refused(b->path)))
			return ERR(-1, "line %d: %s=%.300s is refused: %s", lineno, key, b->path, refused);
		b->mode = key[0] == 'c' ? BIND_CWD : key[0] == 'b' ? BIND_RW : BIND_RO;
		b->line = lineno;
		if (b->mode == BIND_CWD) {
			if (spec->cwd >= 0)
				return ERR(-1, "line %d: a second cwd= (the first is on line %d)", lineno,
					   spec->binds[spec->cwd].line);
			spec->cwd = spec->n_binds;
		}
		for (int i = 0; i < spec->n_binds; i++)
			if (strcmp(spec->binds[i].path, b->path) == 0)
				return ERR(-1, "line %d: %s is asked for twice (also on line %d)", lineno,
					   b->path, spec->binds[i].line);
		spec->n_binds++;
	} else if (strcmp(key, "env") == 0) {
		char *dst = spec->env + spec->env_len;
		size_t room = sizeof spec->env - spec->env_len;
		ssize_t n = pct_decode(val, dst, room);
		/* The value is never echoed: it may be a secret. */
		const char *eqv = n >= 0 ? strchr(dst, '=') : NULL;
		if (n == -ENAMETOOLONG)
			return ERR(-1, "line %d: the env= items are longer than %zu bytes in all", lineno,
				   sizeof spec->env - 1);
		if (n < 0)
			return ERR(-1, "line %d: env= has a '%%' not followed by two hex digits (or a %%00)",
				   lineno);
		if (!eqv || !env_name_valid(dst, (size_t)(eqv - dst)))
			return ERR(-1, "line %d: env= needs NAME=VALUE, NAME of A-Z a-z 0-9 _", lineno);
		size_t nl = (size_t)(eqv - dst);
		for (const char *e = NULL; (e = task_env_next(spec, e));)
			if (strncmp(e, dst, nl + 1) == 0)
				return ERR(-1, "line %d: env=%.*s is set twice", lineno, (int)nl, dst);
		if (!spec->n_env)
			spec->line_env_first = lineno;
		spec->env_len += (size_t)n + 1;
		spec->n_env++;
	} else if (strcmp(key, "umask") == 0) {
		char *end;
		errno = 0;
		long m = strtol(val, &end, 8);
		if (errno || *end || m < 0 || m > 0777 || !isdigit((unsigned char)*val))
			return ERR(-1, "line %d: umask=%s is not an octal mask from 0 to 777", lineno, val);
		spec->umask = (int)m;
	} else if (strcmp(key, "not_before") == 0) {
		/* Absolute only: a relative time would move each time the
		 * file is read (kart submit --at HH:MM and --in write this). */
		int64_t ms;
		if (sched_parse_rfc3339(val, &ms) < 0)
			return ERR(-1, "line %d: not_before=%s is not an RFC 3339 time "
				   "(2026-12-01T02:00:00Z, or with an offset: +01:00)", lineno, raw);
		spec->not_before_ms = ms;
	} else if (strcmp(key, "retry_on") == 0) {
		const char *why;
		if (sched_parse_retry_on(val, &spec->retry_on, &why) < 0)
			return ERR(-1, "line %d: retry_on=%s: %s (use failed, timeout, oom, exit=N, "
				   "separated by commas)", lineno, raw, why);
		spec->line_retry_on = lineno;
	} else if (strcmp(key, "unique") == 0) {
		/* Kept as written, as label= is: tasks compare it so. */
		if (strlen(raw) >= sizeof spec->unique)
			return ERR(-1, "line %d: unique= is longer than %zu bytes", lineno,
				   sizeof spec->unique - 1);
		snprintf(spec->unique, sizeof spec->unique, "%s", raw);
	} else if (strcmp(key, "retry_delay") == 0) {
		int64_t s;
		if (parse_duration_s(val, &s) < 0)
			return ERR(-1, "line %d: retry_delay=%s is not a duration (use 0, 10s, 5m or 1h)",
				   lineno, raw);
		spec->retry_delay_ms = s * 1000;
	} else if (strcmp(key, "after") == 0) {
		return parse_after(val, lineno, spec, err, errlen);
	} else {
		return ERR(-1, "line %d: unknown directive item '%s' " KNOWN_DIRECTIVES, lineno, item);
	}
	return 0;
}

static int parse_shebang(const char *line, size_t len, struct task_spec *spec, char *err,
			 size_t errlen)
{
	const char *p = line + 2, *end = line + len;
	if (len >= TASK_INTERP_MAX)
		return ERR(-1, "line 1: the #! line is longer than %d bytes", TASK_INTERP_MAX - 1);
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	const char *i0 = p;
	while (p < end && *p != ' ' && *p != '\t')
		p++;
	if (p == i0)
		return ERR(-1, "line 1: the #! line names no interpreter");
	if (*i0 != '/')
		return ERR(-1, "line 1: the #! interpreter must be an absolute path");
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
			return ERR(-1, "line %d: the leading comment block is longer than %d bytes",
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
				return ERR(-1, "line %d: the directive line is longer than %zu bytes",
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
		if (path_covers(r, path))
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
