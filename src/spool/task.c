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
bool task_path_covers(const char *a, const char *path)
{
	size_t l = strlen(a);
	return strncmp(a, path, l) == 0 && (path[l] == '\0' || path[l] == '/' || l == 1);
}

const char *bind_path_refused(const char *path)
{
	/* Never the host's kernel interfaces and devices, nor below them. */
	static const char *const never[] = {"/proc", "/sys", "/dev", "/run/kart"};
	for (size_t i = 0; i < ARRAY_SIZE(never); i++)
		if (task_path_covers(never[i], path) || task_path_covers(path, never[i]))
			return "the host's /proc, /sys and /dev are never bound";
	/* The sandbox's own mounts: a bind at one of them, or above one,
	 * would cover it (a bind below one is on top of it, and fine). */
	static const char *const own[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
					  "/libx32", "/etc", "/tmp", "/work", "/run"};
	for (size_t i = 0; i < ARRAY_SIZE(own); i++)
		if (task_path_covers(path, own[i]))
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


/* ---- the directives --------------------------------------------------
 *
 * One table, read by the parser (task_parse) and by kart submit's
 * composer (task_directive_add), as kart.conf's keys are (policy_conf.c).
 * A row's setter reads one value into the spec; the message of a bad
 * one names the item as written, and the caller says where it was. */

struct directive;
/* val: decoded (the row's own when D_RAW); raw: as written. */
typedef int directive_set(struct task_spec *spec, const struct directive *d, const char *val,
			  const char *raw, int line, char *err, size_t errlen);

enum {
	D_FLAG = 1,     /* a bare word (net): no value */
	D_RAW = 2,      /* the setter decodes its own value: a path has its own limit,
			 * and an error must never quote an env= value (a secret) */
	D_OWN_LINE = 4, /* kart submit writes it on a line of its own (a long value) */
	D_WIDE = 8,     /* a number into an int64_t, not an int */
};

struct directive {
	const char *key;
	directive_set *set;
	size_t off;          /* the field in struct task_spec */
	size_t line_off;     /* its line_ field, or NO_LINE */
	long long min, max;  /* numbers: the range; durations: min, and max the unit in ms */
	const char *eg;      /* examples of a good value, for messages */
	unsigned flags;
};

#define NO_LINE ((size_t)-1)
/* The field's offset, and a compile error where it is not of that type. */
#define SPEC_IS(f, type) __builtin_types_compatible_p(__typeof__(((struct task_spec *)0)->f), type)
#define SPEC(f, type) (offsetof(struct task_spec, f) + 0 * sizeof(char[SPEC_IS(f, type) ? 1 : -1]))
#define SPEC_AT(spec, off, type) ((type *)((char *)(spec) + (off)))

static void set_line(struct task_spec *spec, const struct directive *d, int line)
{
	if (d->line_off != NO_LINE)
		*SPEC_AT(spec, d->line_off, int) = line;
}

static int d_net(struct task_spec *spec, const struct directive *d, const char *val, const char *raw,
		 int line, char *err, size_t errlen)
{
	(void)val, (void)raw, (void)err, (void)errlen;
	spec->net = true;
	set_line(spec, d, line);
	return 0;
}

static int d_duration(struct task_spec *spec, const struct directive *d, const char *val,
		      const char *raw, int line, char *err, size_t errlen)
{
	int64_t s;
	int r = parse_duration_s(val, &s);
	if (r == -ERANGE || (r == 0 && s < d->min))
		return ERR(-1, "%s=%s is out of range (%llds to 10 years)", d->key, raw, d->min);
	if (r < 0)
		return ERR(-1, "%s=%s is not a duration (use %s)", d->key, raw, d->eg);
	*SPEC_AT(spec, d->off, int64_t) = s * d->max;
	set_line(spec, d, line);
	return 0;
}

static int d_size(struct task_spec *spec, const struct directive *d, const char *val, const char *raw,
		  int line, char *err, size_t errlen)
{
	uint64_t v;
	int r = parse_size(val, &v);
	if (r == -EINVAL)
		return ERR(-1, "%s=%s is not a size (use 512K, 256M, 2G or bytes)", d->key, raw);
	if (r < 0 || v < (uint64_t)d->min)
		return ERR(-1, "%s=%s is out of range%s", d->key, raw, d->min ? " (at least 1M)" : "");
	*SPEC_AT(spec, d->off, uint64_t) = v;
	set_line(spec, d, line);
	return 0;
}

static int d_int(struct task_spec *spec, const struct directive *d, const char *val, const char *raw,
		 int line, char *err, size_t errlen)
{
	long long v;
	if (parse_int(val, d->min, d->max, &v) < 0)
		return ERR(-1, "%s=%s is not a number from %lld to %lld", d->key, raw, d->min, d->max);
	if (d->flags & D_WIDE)
		*SPEC_AT(spec, d->off, int64_t) = v;
	else
		*SPEC_AT(spec, d->off, int) = (int)v;
	set_line(spec, d, line);
	return 0;
}

static int d_cpu(struct task_spec *spec, const struct directive *d, const char *val, const char *raw,
		 int line, char *err, size_t errlen)
{
	if (parse_cpu_milli(val, &spec->cpu_milli) < 0)
		return ERR(-1, "cpu=%s is not a core count (decimal, e.g. 0.5 or 2, at most 3 decimals, "
			   "above 0)", raw);
	set_line(spec, d, line);
	return 0;
}

static int d_lane(struct task_spec *spec, const struct directive *d, const char *val, const char *raw,
		  int line, char *err, size_t errlen)
{
	(void)d, (void)line;
	if (strcmp(val, "fast") == 0)
		spec->lane = LANE_FAST;
	else if (strcmp(val, "batch") == 0)
		spec->lane = LANE_BATCH;
	else
		return ERR(-1, "lane=%s is not a lane (fast or batch)", raw);
	return 0;
}

/* label= (decoded) and unique= (as written: tasks compare it so), kept
 * as text in the field at off. */
static int d_text(struct task_spec *spec, const struct directive *d, const char *val, const char *raw,
		  int line, char *err, size_t errlen)
{
	(void)line;
	const char *v = d->flags & D_RAW ? raw : val;
	if (strlen(v) >= (size_t)d->max)
		return ERR(-1, "%s= is longer than %lld bytes", d->key, d->max - 1);
	(void)pathfmt(SPEC_AT(spec, d->off, char), (size_t)d->max, "%s", v); /* length checked above */
	return 0;
}

static int d_kind(struct task_spec *spec, const struct directive *d, const char *val, const char *raw,
		  int line, char *err, size_t errlen)
{
	if (!kind_name_ok(val))
		return ERR(-1, "kind=%s is not a kind name (1 to 31 of a-z 0-9 _ -)", raw);
	(void)pathfmt(spec->kind, sizeof spec->kind, "%s", val); /* kind_name_ok: 1 to 31 */
	set_line(spec, d, line);
	return 0;
}

static int d_name(struct task_spec *spec, const struct directive *d, const char *val, const char *raw,
		  int line, char *err, size_t errlen)
{
	(void)d, (void)line;
	const char *why;
	int nc = task_name_check(val, &why);
	if (nc != 0)
		return ERR(-1, "name=%s is not a task name (%s)", raw, nc > 0 ? "starts with '.'" : why);
	(void)pathfmt(spec->name, sizeof spec->name, "%s", val); /* task_name_check: fits */
	return 0;
}

/* cwd=, bind=, ro=: decoded here, with a path's own limit. */
static int d_bind(struct task_spec *spec, const struct directive *d, const char *val, const char *raw,
		  int line, char *err, size_t errlen)
{
	(void)raw;
	const char *why, *refused;
	if (spec->n_binds >= TASK_BINDS_MAX)
		return ERR(-1, "more than %d of cwd=, bind= and ro=", TASK_BINDS_MAX);
	struct task_bind *b = &spec->binds[spec->n_binds];
	if (bind_path_clean(val, b->path, sizeof b->path, &why) < 0)
		return ERR(-1, "%s=%.300s is %s", d->key, val, why);
	if ((refused = bind_path_refused(b->path)))
		return ERR(-1, "%s=%.300s is refused: %s", d->key, b->path, refused);
	b->mode = d->key[0] == 'c' ? BIND_CWD : d->key[0] == 'b' ? BIND_RW : BIND_RO;
	b->line = line;
	if (b->mode == BIND_CWD) {
		if (spec->cwd >= 0)
			return ERR(-1, "a second cwd= (the first is on line %d)", spec->binds[spec->cwd].line);
		spec->cwd = spec->n_binds;
	}
	for (int i = 0; i < spec->n_binds; i++)
		if (strcmp(spec->binds[i].path, b->path) == 0)
			return ERR(-1, "%s is asked for twice (also on line %d)", b->path,
				   spec->binds[i].line);
	spec->n_binds++;
	return 0;
}

/* env=NAME=VALUE: the value is never echoed, it may be a secret. */
static int d_env(struct task_spec *spec, const struct directive *d, const char *val, const char *raw,
		 int line, char *err, size_t errlen)
{
	(void)d, (void)raw;
	char *dst = spec->env + spec->env_len;
	size_t room = sizeof spec->env - spec->env_len;
	ssize_t n = pct_decode(val, dst, room);
	const char *eqv = n >= 0 ? strchr(dst, '=') : NULL;
	if (n == -ENAMETOOLONG)
		return ERR(-1, "the env= items are longer than %zu bytes in all", sizeof spec->env - 1);
	if (n < 0)
		return ERR(-1, "env= has a '%%' not followed by two hex digits (or a %%00)");
	if (!eqv || !env_name_valid(dst, (size_t)(eqv - dst)))
		return ERR(-1, "env= needs NAME=VALUE, NAME of A-Z a-z 0-9 _");
	size_t nl = (size_t)(eqv - dst);
	for (const char *e = NULL; (e = task_env_next(spec, e));)
		if (strncmp(e, dst, nl + 1) == 0)
			return ERR(-1, "env=%.*s is set twice", (int)nl, dst);
	if (!spec->n_env)
		spec->line_env_first = line;
	spec->env_len += (size_t)n + 1;
	spec->n_env++;
	return 0;
}

static int d_umask(struct task_spec *spec, const struct directive *d, const char *val, const char *raw,
		   int line, char *err, size_t errlen)
{
	(void)d, (void)line;
	char *end;
	errno = 0;
	long m = strtol(val, &end, 8);
	if (errno || *end || m < 0 || m > 0777 || !isdigit((unsigned char)*val))
		return ERR(-1, "umask=%s is not an octal mask from 0 to 777", raw);
	spec->umask = (int)m;
	return 0;
}

/* Absolute only: a relative time would move each time the file is read
 * (kart submit --at HH:MM and --in write this). */
static int d_not_before(struct task_spec *spec, const struct directive *d, const char *val,
			const char *raw, int line, char *err, size_t errlen)
{
	(void)d, (void)line;
	if (sched_parse_rfc3339(val, &spec->not_before_ms) < 0)
		return ERR(-1, "not_before=%s is not an RFC 3339 time (2026-12-01T02:00:00Z, or with an "
			   "offset: +01:00)", raw);
	return 0;
}

static int d_retry_on(struct task_spec *spec, const struct directive *d, const char *val,
		      const char *raw, int line, char *err, size_t errlen)
{
	const char *why;
	if (sched_parse_retry_on(val, &spec->retry_on, &why) < 0)
		return ERR(-1, "retry_on=%s: %s (use failed, timeout, oom, exit=N, separated by commas)",
			   raw, why);
	set_line(spec, d, line);
	return 0;
}

/* after=ID[,ID...] (and after_any=, after_fail=: the mode is the row's
 * min): cut at the commas first, then each id decoded, so that an id
 * holding a comma is written %2C. Repeated items add up; one id under
 * two modes is an error. */
static int d_after(struct task_spec *spec, const struct directive *d, const char *val,
		   const char *raw, int line, char *err, size_t errlen)
{
	(void)raw;
	for (const char *p = val;;) {
		const char *e = strchrnul(p, ',');
		char enc[3 * TASK_NAME_MAX + 1], id[TASK_NAME_MAX + 1];
		const char *why;
		if (e == p)
			return ERR(-1, "%s=%s has an empty id", d->key, val);
		if ((size_t)(e - p) >= sizeof enc)
			return ERR(-1, "%s=: an id longer than %d bytes", d->key, TASK_NAME_MAX);
		memcpy(enc, p, (size_t)(e - p));
		enc[e - p] = '\0';
		ssize_t n = pct_decode(enc, id, sizeof id);
		if (n == -ENAMETOOLONG)
			return ERR(-1, "%s=%s: an id longer than %d bytes", d->key, enc, TASK_NAME_MAX);
		if (n < 0)
			return ERR(-1, "%s=%s: a '%%' must be followed by two hex digits, not %%00", d->key,
				   enc);
		if (task_name_check(id, &why) != 0)
			return ERR(-1, "%s=%s is not a task id (%s)", d->key, enc,
				   id[0] == '.' ? "it starts with '.'" : why);
		int dup = -1;
		for (int i = 0; i < spec->n_after; i++)
			if (strcmp(spec->after[i], id) == 0)
				dup = i;
		if (dup >= 0 && spec->after_mode[dup] != (enum after_mode)d->min)
			return ERR(-1, "%s=%s: the task is named by after=, after_any= or after_fail= "
				   "already, under another", d->key, enc);
		if (dup < 0) {
			if (spec->n_after == TASK_AFTER_MAX)
				return ERR(-1, "after=, after_any= and after_fail= name more than %d tasks",
					   TASK_AFTER_MAX);
			spec->after_mode[spec->n_after] = (enum after_mode)d->min;
			memcpy(spec->after[spec->n_after++], id, (size_t)n + 1);
		}
		spec->line_after = line;
		if (!*e)
			return 0;
		p = e + 1;
	}
}

#define FLAG(k, fn, lf) {k, fn, 0, SPEC(lf, int), 0, 0, NULL, D_FLAG}
#define DURATION(k, f, lf, lo, unit, eg) {k, d_duration, SPEC(f, int64_t), lf, lo, unit, eg, 0}
#define SIZE(k, f, lf, lo) {k, d_size, SPEC(f, uint64_t), SPEC(lf, int), lo, 0, NULL, 0}
#define INT(k, f, lf, lo, hi) {k, d_int, SPEC(f, int), lf, lo, hi, NULL, 0}
#define INT64(k, f, lf, lo, hi) {k, d_int, SPEC(f, int64_t), SPEC(lf, int), lo, hi, NULL, D_WIDE}
#define TEXT(k, f, fl) {k, d_text, SPEC(f, char[TASK_NAME_MAX + 1]), NO_LINE, 0, TASK_NAME_MAX + 1, NULL, fl}
#define OWN(k, fn, lf, fl) {k, fn, 0, lf, 0, 0, NULL, fl}
#define AFTER(k, mode) {k, d_after, 0, NO_LINE, mode, 0, NULL, D_RAW | D_OWN_LINE}

/* Every directive, in the order kart-task(5) lists them. */
static const struct directive directives[] = {
	DURATION("timeout", timeout_s, SPEC(line_timeout, int), 1, 1, "90, 90s, 5m or 2h"),
	SIZE("memory", memory, line_memory, 1 << 20),
	INT64("pids", pids, line_pids, 1, 4194304),
	OWN("cpu", d_cpu, SPEC(line_cpu, int), 0),
	OWN("lane", d_lane, NO_LINE, 0),
	FLAG("net", d_net, line_net),
	INT("priority", priority, NO_LINE, -1000000, 1000000),
	INT("retries", retries, SPEC(line_retries, int), 0, 100),
	SIZE("output", output, line_output, 0),
	OWN("kind", d_kind, SPEC(line_kind, int), 0),
	OWN("name", d_name, NO_LINE, 0),
	DURATION("kill_grace", kill_grace_s, SPEC(line_kill_grace, int), 0, 1, "0, 10s or 1m"),
	TEXT("label", label, 0),
	OWN("cwd", d_bind, NO_LINE, D_RAW | D_OWN_LINE),
	OWN("bind", d_bind, NO_LINE, D_RAW | D_OWN_LINE),
	OWN("ro", d_bind, NO_LINE, D_RAW | D_OWN_LINE),
	OWN("env", d_env, NO_LINE, D_RAW | D_OWN_LINE),
	OWN("umask", d_umask, NO_LINE, 0),
	OWN("not_before", d_not_before, NO_LINE, 0),
	OWN("retry_on", d_retry_on, SPEC(line_retry_on, int), 0),
	DURATION("retry_delay", retry_delay_ms, NO_LINE, 0, 1000, "0, 10s, 5m or 1h"),
	TEXT("unique", unique, D_RAW),
	AFTER("after", AFTER_OK),
	AFTER("after_any", AFTER_ANY),
	AFTER("after_fail", AFTER_FAIL),
};
#undef FLAG
#undef DURATION
#undef SIZE
#undef INT
#undef INT64
#undef TEXT
#undef OWN
#undef AFTER

static const struct directive *directive_find(const char *key, size_t klen)
{
	for (size_t i = 0; i < ARRAY_SIZE(directives); i++)
		if (strlen(directives[i].key) == klen && strncmp(directives[i].key, key, klen) == 0)
			return &directives[i];
	return NULL;
}

/* "(known: timeout= memory= ... net ...)", from the table. */
static void directives_known(char *buf, size_t len)
{
	size_t o = (size_t)snprintf(buf, len, "(known:");
	for (size_t i = 0; i < ARRAY_SIZE(directives) && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, " %s%s", directives[i].key,
				      directives[i].flags & D_FLAG ? "" : "=");
	if (o < len)
		snprintf(buf + o, len - o, ")");
}

/* One item of a directive line: KEY=VALUE, or a bare flag. Its value is
 * decoded (%XX is the byte 0xXX) before the row reads it, so that one
 * rule serves all, but for the rows that decode their own. The message
 * of a bad one has no line: the caller's. */
static int directive_item(const char *item, int line, struct task_spec *spec, char *err,
			  size_t errlen)
{
	const char *eq = strchr(item, '=');
	const char *raw = eq ? eq + 1 : NULL;
	const struct directive *d = directive_find(item, eq ? (size_t)(eq - item) : strlen(item));
	if (!d || !(d->flags & D_FLAG) != !!raw) {
		char known[400];
		directives_known(known, sizeof known);
		return ERR(-1, "unknown directive item '%s' %s", item, known);
	}
	if (d->flags & D_FLAG)
		return d->set(spec, d, NULL, NULL, line, err, errlen);
	if (*raw == '\0')
		return ERR(-1, "%s= needs a value", d->key);
	if (d->flags & D_RAW)
		return d->set(spec, d, raw, raw, line, err, errlen);
	char val[4096];
	ssize_t vlen = pct_decode(raw, val, sizeof val);
	if (vlen < 0)
		return ERR(-1, "%s=%s: a '%%' must be followed by two hex digits, not %%00", d->key, raw);
	if ((size_t)vlen != strlen(val))
		return ERR(-1, "%s=%s holds a NUL byte", d->key, raw);
	return d->set(spec, d, val, raw, line, err, errlen);
}

static int parse_item(const char *item, int lineno, struct task_spec *spec, char *err,
		      size_t errlen)
{
	char why[1024];
	if (directive_item(item, lineno, spec, why, sizeof why) < 0)
		return ERR(-1, "line %d: %s", lineno, why);
	return 0;
}

/* ---- kart submit's composer ------------------------------------------ */

int task_directive_add(struct task_directives *td, const char *key, const char *value, char *err,
		       size_t errlen)
{
	const struct directive *d = directive_find(key, strlen(key));
	if (!d || !(d->flags & D_FLAG) != !!value)
		return ERR(-1, "%s: not a directive%s", key, d ? (value ? " with a value" : " without a value") : "");
	if (!value)
		return strv_add(&td->items, d->key), 0;
	size_t cap = strlen(value) * 3 + 1;
	_cleanup_free_ char *enc = xmalloc(cap), *item = NULL;
	if (pct_encode(value, enc, cap) < 0)
		return ERR(-1, "%s=: the value is too long", key);
	if (d->set == d_after) {
		/* One id: a comma in it would cut it, after= splits there first. */
		_cleanup_free_ char *c = xmalloc(strlen(enc) * 3 + 1);
		size_t o = 0;
		for (const char *p = enc; *p; p++)
			o += (size_t)(*p == ',' ? sprintf(c + o, "%%2C") : sprintf(c + o, "%c", *p));
		c[o] = '\0';
		free(enc);
		enc = steal_ptr(&c);
	}
	/* Read as the worker will read it, alone: what holds between items
	 * (a second cwd=) is the whole task's parse. */
	_cleanup_free_ struct task_spec *scratch = xmalloc(sizeof *scratch);
	task_spec_init(scratch);
	item = xasprintf("%s=%s", d->key, enc);
	if (directive_item(item, 0, scratch, err, errlen) < 0)
		return -1;
	if (d->flags & D_OWN_LINE)
		strv_addf(&td->lines, "#kart: %s\n", item);
	else
		strv_add(&td->items, item);
	return 0;
}

char *task_compose(const char *body, size_t len, const struct task_directives *td, size_t *outlen,
		   int *first_line, char *err, size_t errlen)
{
	/* Where the leading comment block ends, as task_parse reads it. */
	size_t off = 0;
	int lines = 0;
	while (off < len) {
		const char *line = body + off, *nl = memchr(line, '\n', len - off);
		size_t llen = nl ? (size_t)(nl - line) : len - off;
		if (llen == 0 || line[0] != '#')
			break;
		lines++;
		off += llen + (nl ? 1 : 0);
	}
	/* The items on #kart: lines of at most about 1K (a worker reads a
	 * line of up to 4K), then the lines of their own. */
	size_t cap = 16, o = 0;
	for (size_t i = 0; i < td->items.n; i++)
		cap += strlen(td->items.v[i]) + 9;
	for (size_t i = 0; i < td->lines.n; i++)
		cap += strlen(td->lines.v[i]);
	_cleanup_free_ char *add = xmalloc(cap);
	if (off > 0 && body[off - 1] != '\n')
		add[o++] = '\n';
	for (size_t i = 0, start = 0; i < td->items.n; i++) {
		bool open = i > 0;
		if (open && o - start + strlen(td->items.v[i]) > 1024) {
			add[o++] = '\n';
			open = false;
		}
		if (!open) {
			start = o;
			o += (size_t)sprintf(add + o, "#kart:");
		}
		o += (size_t)sprintf(add + o, " %s", td->items.v[i]);
	}
	if (td->items.n)
		add[o++] = '\n';
	for (size_t i = 0; i < td->lines.n; i++)
		o += (size_t)sprintf(add + o, "%s", td->lines.v[i]);
	if (off + o >= TASK_HEADER_MAX)
		return ERR(NULL, "the leading comment block would end past %d bytes with the options "
			   "added: a worker would not read them", TASK_HEADER_MAX);
	char *out = xmalloc(len + o + 1);
	memcpy(out, body, off);
	memcpy(out + off, add, o);
	memcpy(out + off + o, body + off, len - off);
	out[len + o] = '\0';
	*outlen = len + o;
	*first_line = lines + 1;
	return out;
}

void task_directives_free(struct task_directives *td)
{
	strv_free(&td->items);
	strv_free(&td->lines);
}

/* ---- env= values, taken out of a kept task and put back ----------------- */

char *task_env_rewrite(const char *text, size_t len, task_env_value *value, void *arg,
		       size_t *outlen, char *err, size_t errlen)
{
	/* Each line of the leading comment block as it is, but a directive
	 * line holding env= items, made again from its items. */
	struct strv out = {0};
	size_t off = 0, total = 0;
	bool any = false;
	while (off < len) {
		const char *line = text + off, *nl = memchr(line, '\n', len - off);
		size_t llen = nl ? (size_t)(nl - line) : len - off;
		size_t next = off + llen + (nl ? 1 : 0);
		if (llen == 0 || line[0] != '#')
			break;
		_cleanup_free_ char *l = xasprintf("%.*s", (int)llen, line);
		char *p = l + 1;
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncmp(p, "kart:", 5) != 0 || !strstr(p, "env=")) {
			strv_addf(&out, "%.*s", (int)(next - off), line);
			off = next;
			continue;
		}
		char *cr = llen && l[llen - 1] == '\r' ? &l[llen - 1] : NULL;
		if (cr)
			*cr = '\0';
		p += 5;
		_cleanup_free_ char *made = xasprintf("%.*s", (int)(p - l), l);
		char *save = NULL;
		for (char *item = strtok_r(p, " \t", &save); item; item = strtok_r(NULL, " \t", &save)) {
			char *eq = strncmp(item, "env=", 4) == 0 ? strchr(item + 4, '=') : NULL;
			char *piece;
			if (eq) {
				char name[256];
				snprintf(name, sizeof name, "%.*s", (int)(eq - item - 4), item + 4);
				const char *v = value(name, arg);
				if (!v) {
					strv_free(&out);
					return ERR(NULL, "%s", name);
				}
				size_t cap = strlen(v) * 3 + 1;
				_cleanup_free_ char *enc = xmalloc(cap);
				(void)pct_encode(v, enc, cap); /* cap always fits */
				piece = xasprintf("%s env=%s=%s", made, name, enc);
				any = true;
			} else {
				piece = xasprintf("%s %s", made, item);
			}
			free(made);
			made = piece;
		}
		strv_addf(&out, "%s%s%s", made, cr ? "\r" : "", nl ? "\n" : "");
		off = next;
	}
	if (!any) {
		strv_free(&out);
		if (err && errlen)
			err[0] = '\0';
		return NULL;
	}
	for (size_t i = 0; i < out.n; i++)
		total += strlen(out.v[i]);
	char *res = xmalloc(total + (len - off) + 1), *o = res;
	for (size_t i = 0; i < out.n; i++)
		o = stpcpy(o, out.v[i]);
	memcpy(o, text + off, len - off);
	o[len - off] = '\0';
	*outlen = (size_t)(o - res) + (len - off);
	strv_free(&out);
	if (err && errlen)
		err[0] = '\0';
	return res;
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
