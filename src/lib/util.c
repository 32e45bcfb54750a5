/* util.c - see util.h. */
#define _GNU_SOURCE
#include "util.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <time.h>

/* Out of memory: said without allocating, since die()'s logfmt and JSON
 * sinks allocate to clean their values (and would call us again), and
 * without log.c, which sits above this file. */
void oom(void)
{
	static const char msg[] = ": out of memory\n";
	char line[64];
	size_t n = strnlen(program_invocation_short_name, sizeof line - sizeof msg);
	memcpy(line, program_invocation_short_name, n);
	memcpy(line + n, msg, sizeof msg - 1); /* one write: one line, even between processes */
	(void)write_all(STDERR_FILENO, line, n + sizeof msg - 1);
	exit(1);
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom();
	return p;
}

void *xcalloc(size_t n, size_t m)
{
	void *p = calloc(n ? n : 1, m ? m : 1);
	if (!p)
		oom();
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom();
	return p;
}

char *xstrdup(const char *s)
{
	char *p = strdup(s);
	if (!p)
		oom();
	return p;
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		oom();
	va_end(ap);
	return s;
}

int pathfmt(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

ssize_t read_upto(int fd, void *buf, size_t max)
{
	size_t got = 0;
	while (got < max) {
		ssize_t n = read(fd, (char *)buf + got, max - got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

int read_file_at(int dirfd, const char *path, size_t max, char **out, size_t *outlen)
{
	_cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	/* Grown as it fills: a buffer of max (1 MiB for kart.conf, 4 MiB
	 * for /proc/locks) would be an mmap and a munmap for a file of a few
	 * hundred bytes. */
	size_t cap = max < 4096 ? max : 4096, n = 0;
	_cleanup_free_ char *buf = xmalloc(cap + 1);
	for (;;) {
		ssize_t k = read_upto(fd, buf + n, cap - n);
		if (k < 0)
			return (int)k;
		n += (size_t)k;
		if (n < cap || cap == max)
			break;
		cap = cap > max / 2 ? max : 2 * cap;
		buf = xrealloc(buf, cap + 1);
	}
	buf[n] = '\0';
	if (outlen)
		*outlen = n;
	*out = steal_ptr(&buf);
	return 0;
}

DIR *opendir_at(int dirfd, const char *name)
{
	int d = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (d < 0)
		return NULL;
	DIR *dir = fdopendir(d);
	if (!dir)
		close(d);
	return dir;
}

int fsync_dirat(int dirfd, const char *path)
{
	_cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		return -errno;
	return 0;
}

int64_t now_realtime_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t now_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void fmt_rfc3339_ms(int64_t ms, char buf[32])
{
	/* The seconds' text is kept per thread: the worker stamps several
	 * log lines and results in the same second, and gmtime_r takes
	 * glibc's time zone lock each time. */
	static __thread int64_t last_s = INT64_MIN;
	static __thread char last[32];
	static __thread size_t last_n;
	int64_t sec = ms / 1000;
	if (sec != last_s) {
		time_t s = (time_t)sec;
		struct tm tm;
		gmtime_r(&s, &tm);
		/* strftime: the compiler cannot bound %d widths of struct tm. */
		last_n = strftime(last, sizeof last, "%Y-%m-%dT%H:%M:%S", &tm);
		last_s = sec;
	}
	memcpy(buf, last, last_n);
	snprintf(buf + last_n, 32 - last_n, ".%03uZ", (unsigned)(ms % 1000) % 1000u);
}

/* Digits only, no sign, no leading '+', no overflow. */
static int parse_u64(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	if (len == 0)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -EINVAL;
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

int parse_duration_s(const char *s, int64_t *out)
{
	size_t len = strlen(s);
	uint64_t mult = 1, v;
	if (len == 0)
		return -EINVAL;
	switch (s[len - 1]) {
	case 's': mult = 1; len--; break;
	case 'm': mult = 60; len--; break;
	case 'h': mult = 3600; len--; break;
	case 'd': mult = 86400; len--; break;
	default: break;
	}
	int r = parse_u64(s, len, &v);
	if (r < 0)
		return r;
	/* Ten years is beyond any sane timeout and keeps ms arithmetic safe. */
	if (v > (uint64_t)10 * 366 * 86400 / mult)
		return -ERANGE;
	*out = (int64_t)(v * mult);
	return 0;
}

int parse_size(const char *s, uint64_t *out)
{
	size_t len = strlen(s);
	unsigned shift = 0;
	uint64_t v;
	if (len == 0)
		return -EINVAL;
	switch (s[len - 1]) {
	case 'K': case 'k': shift = 10; len--; break;
	case 'M': case 'm': shift = 20; len--; break;
	case 'G': case 'g': shift = 30; len--; break;
	case 'T': case 't': shift = 40; len--; break;
	default: break;
	}
	int r = parse_u64(s, len, &v);
	if (r < 0)
		return r;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = v << shift;
	return 0;
}

int parse_cpu_milli(const char *s, uint32_t *out)
{
	const char *dot = strchr(s, '.');
	size_t ilen = dot ? (size_t)(dot - s) : strlen(s);
	uint64_t whole = 0, frac = 0;
	if (ilen == 0 && !dot)
		return -EINVAL;
	if (ilen > 0) {
		int r = parse_u64(s, ilen, &whole);
		if (r < 0)
			return r;
	}
	if (dot) {
		size_t flen = strlen(dot + 1);
		if (flen == 0 || flen > 3 || (ilen == 0 && flen == 0))
			return -EINVAL;
		int r = parse_u64(dot + 1, flen, &frac);
		if (r < 0)
			return r;
		for (size_t i = flen; i < 3; i++)
			frac *= 10;
	}
	if (whole > 4096)
		return -ERANGE;
	uint64_t m = whole * 1000 + frac;
	if (m == 0)
		return -ERANGE;
	*out = (uint32_t)m;
	return 0;
}

int parse_int(const char *s, long long min, long long max, long long *out)
{
	bool neg = false;
	uint64_t v;
	if (*s == '-') {
		neg = true;
		s++;
	}
	int r = parse_u64(s, strlen(s), &v);
	if (r < 0)
		return r;
	if (v > (uint64_t)LLONG_MAX)
		return -ERANGE;
	long long x = neg ? -(long long)v : (long long)v;
	if (x < min || x > max)
		return -ERANGE;
	*out = x;
	return 0;
}

static bool pct_needed(unsigned char c)
{
	return c <= 0x20 || c == 0x7f || c == '%' || c == '#';
}

ssize_t pct_encode(const char *in, char *out, size_t outlen)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
		size_t need = pct_needed(*p) ? 3 : 1;
		if (o + need >= outlen)
			return -ENAMETOOLONG;
		if (need == 3) {
			out[o++] = '%';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		} else {
			out[o++] = (char)*p;
		}
	}
	if (o >= outlen)
		return -ENAMETOOLONG;
	out[o] = '\0';
	return (ssize_t)o;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

ssize_t pct_decode(const char *in, char *out, size_t outlen)
{
	size_t o = 0;
	for (const char *p = in; *p; p++) {
		int c = (unsigned char)*p;
		if (c == '%') {
			int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);
			if (lo < 0 || (hi | lo) == 0)
				return -EINVAL;
			c = hi << 4 | lo;
			p += 2;
		}
		if (o + 1 >= outlen)
			return -ENAMETOOLONG;
		out[o++] = (char)c;
	}
	if (!outlen)
		return -ENAMETOOLONG;
	out[o] = '\0';
	return (ssize_t)o;
}

bool utf8_valid(const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;
	while (i < len) {
		unsigned c = s[i];
		size_t n;
		uint32_t cp;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xE0) == 0xC0) {
			n = 1;
			cp = c & 0x1F;
		} else if ((c & 0xF0) == 0xE0) {
			n = 2;
			cp = c & 0x0F;
		} else if ((c & 0xF8) == 0xF0) {
			n = 3;
			cp = c & 0x07;
		} else
			return false;
		for (size_t k = 1; k <= n; k++) {
			if (i + k >= len || (s[i + k] & 0xC0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + k] & 0x3F);
		}
		if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000))
			return false; /* overlong */
		if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return false;
		i += n + 1;
	}
	return true;
}

size_t utf8_char(const char *str, size_t left)
{
	const unsigned char *s = (const unsigned char *)str;
	if (s[0] < 0x80)
		return 1;
	size_t n = (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
	if (n == 0 || n > left)
		return 0;
	return utf8_valid((const char *)s, n) ? n : 0;
}

char *utf8_sanitize(const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str;
	char *out = xmalloc(len * 3 + 1), *o = out;
	size_t i = 0;
	while (i < len) {
		size_t n = utf8_char((const char *)s + i, len - i);
		if (n == 0 || (n == 1 && s[i] == 0)) {
			memcpy(o, "\xEF\xBF\xBD", 3); /* U+FFFD */
			o += 3;
			i++;
		} else {
			memcpy(o, s + i, n);
			o += n;
			i += n;
		}
	}
	*o = '\0';
	return out;
}

static const struct {
	int sig;
	const char *name;
} sigs[] = {
	{SIGHUP, "SIGHUP"}, {SIGINT, "SIGINT"}, {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
	{SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"}, {SIGFPE, "SIGFPE"},
	{SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
	{SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGSTKFLT, "SIGSTKFLT"},
	{SIGCHLD, "SIGCHLD"}, {SIGCONT, "SIGCONT"}, {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"},
	{SIGTTIN, "SIGTTIN"}, {SIGTTOU, "SIGTTOU"}, {SIGURG, "SIGURG"}, {SIGXCPU, "SIGXCPU"},
	{SIGXFSZ, "SIGXFSZ"}, {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"},
	{SIGWINCH, "SIGWINCH"}, {SIGIO, "SIGIO"}, {SIGPWR, "SIGPWR"}, {SIGSYS, "SIGSYS"},
};

const char *signal_name(int sig)
{
	static __thread char buf[16];
	for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
		if (sigs[i].sig == sig)
			return sigs[i].name;
	snprintf(buf, sizeof buf, "SIG%d", sig);
	return buf;
}

int signal_from_name(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
		if (strcmp(sigs[i].name, name) == 0)
			return sigs[i].sig;
	return -1;
}

void strv_add(struct strv *s, const char *str)
{
	if (s->n + 2 > s->cap) {
		s->cap = s->cap ? s->cap * 2 : 16;
		s->v = xrealloc(s->v, s->cap * sizeof *s->v);
	}
	s->v[s->n++] = xstrdup(str);
	s->v[s->n] = NULL;
}

void strv_addf(struct strv *s, const char *fmt, ...)
{
	va_list ap;
	char *str;
	va_start(ap, fmt);
	if (vasprintf(&str, fmt, ap) < 0)
		oom();
	va_end(ap);
	strv_add(s, str);
	free(str);
}

char *strv_join(const struct strv *s, char sep)
{
	size_t len = 1;
	for (size_t i = 0; i < s->n; i++)
		len += strlen(s->v[i]) + 1;
	char *t = xmalloc(len), *o = t;
	for (size_t i = 0; i < s->n; i++) {
		size_t k = strlen(s->v[i]);
		memcpy(o, s->v[i], k);
		o += k;
		if (i + 1 < s->n)
			*o++ = sep;
	}
	*o = '\0';
	return t;
}

void strv_free(struct strv *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof *s);
}

int stop_signalfd(void)
{
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return -1;
	return signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
}

int memfd_sealed(const char *name, const void *data, size_t len)
{
	_cleanup_close_ int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	int r = write_all(fd, data, len);
	if (r < 0)
		return r;
	/* Read-only from here on, whoever holds it. */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
		return -errno;
	if (lseek(fd, 0, SEEK_SET) < 0)
		return -errno;
	return steal_fd(&fd);
}

int host_child_setup(int out)
{
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	int dn = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (dn < 0 || dup2(dn, 0) < 0 || dup2(out, 1) < 0)
		return -1;
	(void)syscall(SYS_close_range, 3, ~0U, 0);
	return 0;
}

int find_in_path(const char *name, char *out, size_t len)
{
	if (strchr(name, '/')) {
		if (access(name, X_OK) < 0)
			return -errno;
		return pathfmt(out, len, "%s", name) < 0 ? -ENAMETOOLONG : 0;
	}
	const char *path = getenv("PATH");
	_cleanup_free_ char *copy = xstrdup(path ? path : "/usr/bin:/bin");
	char *save = NULL;
	for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save))
		if (pathfmt(out, len, "%s/%s", d, name) == 0 && access(out, X_OK) == 0)
			return 0;
	return -ENOENT;
}

/* linux/posix_acl_xattr.h: a version, then entries sorted by tag:
 * user::OWN user:UID:RD group::GRP mask::RD other::---. 0, -EOPNOTSUPP
 * where the filesystem has no ACLs, or another -errno. */
static int set_acl(int fd, uid_t uid, uint16_t own, uint16_t rd, uint16_t grp)
{
	struct {
		uint16_t tag, perm;
		uint32_t id;
	} __attribute__((packed)) e[5] = {
		{0x01, own, (uint32_t)-1}, {0x02, rd, (uint32_t)uid}, {0x04, grp, (uint32_t)-1},
		{0x10, rd, (uint32_t)-1},  {0x20, 0, (uint32_t)-1},
	};
	unsigned char buf[4 + sizeof e];
	uint32_t version = 2;
	memcpy(buf, &version, 4);
	memcpy(buf + 4, e, sizeof e);
	return fsetxattr(fd, "system.posix_acl_access", buf, sizeof buf, 0) == 0 ? 0 : -errno;
}

int grant_read(int fd, uid_t uid, bool group)
{
	/* (Made 0600: nothing to change for its owner alone.) */
	if (uid == 0 || uid == geteuid())
		return group && fchmod(fd, 0640) < 0 ? -errno : 0;
	int r = set_acl(fd, uid, 6, 4, group ? 4 : 0);
	if (r != -EOPNOTSUPP)
		return r;
	/* No ACLs here: the reader's own, read-only. */
	if (fchown(fd, uid, (gid_t)-1) < 0 || fchmod(fd, group ? 0440 : 0400) < 0)
		return -errno;
	return 0;
}

int grant_read_acl(int fd, uid_t uid)
{
	if (uid == 0 || uid == geteuid())
		return 0;
	return set_acl(fd, uid, 6, 4, 0);
}

int grant_read_dir(int fd, uid_t uid)
{
	if (uid == 0 || uid == geteuid())
		return 0;
	/* As grant_read, with search. */
	int r = set_acl(fd, uid, 7, 5, 0);
	if (r != -EOPNOTSUPP)
		return r;
	/* No ACLs here: the reader's own, read-only (its owner could
	 * chmod it back: the best this filesystem allows). */
	if (fchown(fd, uid, (gid_t)-1) < 0 || fchmod(fd, 0500) < 0)
		return -errno;
	return 0;
}

int dir_names_all(int dirfd, struct strv *out)
{
	DIR *dir = opendir_at(dirfd, ".");
	if (!dir)
		return -errno;
	struct dirent *de;
	while ((de = readdir(dir)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			strv_add(out, de->d_name);
	closedir(dir);
	return 0;
}

int dir_names(int dirfd, const char *name, struct strv *out)
{
	DIR *dir = opendir_at(dirfd, name);
	if (!dir)
		return -errno;
	struct dirent *de;
	while ((de = readdir(dir)))
		if (de->d_name[0] != '.')
			strv_add(out, de->d_name);
	closedir(dir);
	return 0;
}
