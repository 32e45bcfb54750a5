/* log.c - see log.h. */
#define _GNU_SOURCE
#include "log.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>

#include "termsafe.h"
#include "util.h"

static const char *log_prog = "kart";

void log_set_prog(const char *prog) { log_prog = prog; }

void (*log_sink)(const char *level, const char *msg);

void logmsg(const char *fmt, ...)
{
	char buf[2048];
	va_list ap;
	va_start(ap, fmt);
	(void)vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (log_sink) {
		log_sink("info", buf);
		return;
	}
	/* A message names tasks and files of anyone's: escaped whole. */
	char line[TERM_ESC_GROWTH * sizeof buf + 64];
	int n = snprintf(line, 64, "%s: ", log_prog);
	if (n < 0 || n >= 64)
		n = 0;
	ssize_t el = term_escape(line + n, sizeof line - (size_t)n - 1, buf, strlen(buf), NULL);
	size_t l = (size_t)n + (el > 0 ? (size_t)el : 0);
	line[l++] = '\n';
	(void)write_all(STDERR_FILENO, line, l);
}

void die(const char *fmt, ...)
{
	char buf[2048];
	va_list ap;
	va_start(ap, fmt);
	(void)vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (log_sink)
		log_sink("error", buf);
	else
		logmsg("%s", buf);
	exit(1);
}

static enum log_format log_fmt = LOG_TEXT;
static const char *log_worker;

int log_format_parse(const char *s, enum log_format *out)
{
	if (strcmp(s, "text") == 0)
		*out = LOG_TEXT;
	else if (strcmp(s, "logfmt") == 0)
		*out = LOG_LOGFMT;
	else if (strcmp(s, "json") == 0)
		*out = LOG_JSON;
	else
		return -EINVAL;
	return 0;
}

struct kv {
	const char *k;
	const char *v;  /* NULL: left out */
	bool number;    /* JSON: v is a number */
};

/* A logfmt line into b: values bare when safe, else quoted, with \" \\
 * and term_escape's escapes. Returns the length, or 0 when it does not
 * fit in cap (logfmt_bound always does). */
static size_t logfmt_line(char *b, size_t cap, const struct kv *kvs, size_t n)
{
	size_t o = 0;
	bool first = true;
	for (size_t i = 0; i < n; i++) {
		const char *v = kvs[i].v;
		if (!v)
			continue;
		size_t kl = strlen(kvs[i].k), vl = strlen(v);
		if (o + kl + 3 >= cap)
			return 0;
		if (!first)
			b[o++] = ' ';
		first = false;
		memcpy(b + o, kvs[i].k, kl);
		o += kl;
		b[o++] = '=';
		/* Escaped one byte on, where its opening quote would go. */
		ssize_t el = term_escape(b + o + 1, cap - o - 1, v, vl, "\"\\");
		if (el < 0)
			return 0;
		if (vl && (size_t)el == vl && !strpbrk(v, " =")) {
			memmove(b + o, b + o + 1, vl); /* nothing escaped: bare */
			o += vl;
			continue;
		}
		b[o] = '"';
		o += (size_t)el + 1;
		if (o + 1 >= cap)
			return 0;
		b[o++] = '"';
	}
	if (o + 1 >= cap)
		return 0;
	b[o++] = '\n';
	return o;
}

/* Room enough for any logfmt line of kvs. */
static size_t logfmt_bound(const struct kv *kvs, size_t n)
{
	size_t b = 2;
	for (size_t i = 0; i < n; i++)
		if (kvs[i].v)
			b += strlen(kvs[i].k) + TERM_ESC_GROWTH * strlen(kvs[i].v) + 4;
	return b;
}

/* One line, written with a single write(): lines of concurrent writers
 * to the same journal or file never interleave. Two or three are logged
 * per task, so a logfmt line is built on the stack when it fits. */
static void emit(const struct kv *kvs, size_t n)
{
	if (log_fmt != LOG_JSON) {
		char line[1024];
		size_t len = logfmt_line(line, sizeof line, kvs, n);
		if (len) {
			(void)write_all(STDERR_FILENO, line, len);
			return;
		}
		size_t cap = logfmt_bound(kvs, n);
		_cleanup_free_ char *big = xmalloc(cap);
		if ((len = logfmt_line(big, cap, kvs, n)))
			(void)write_all(STDERR_FILENO, big, len);
		return;
	}
	json_t *o = json_object();
	for (size_t i = 0; i < n; i++) {
		if (!kvs[i].v)
			continue;
		if (kvs[i].number) {
			json_object_set_new(o, kvs[i].k, json_integer(strtoll(kvs[i].v, NULL, 10)));
			continue;
		}
		_cleanup_free_ char *v = utf8_sanitize(kvs[i].v, strlen(kvs[i].v));
		json_object_set_new(o, kvs[i].k, json_string(v));
	}
	_cleanup_free_ char *s = json_dumps_safe(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	size_t len = s ? strlen(s) : 0;
	_cleanup_free_ char *line = xmalloc(len + 1);
	if (len)
		memcpy(line, s, len);
	line[len] = '\n';
	(void)write_all(STDERR_FILENO, line, len + 1);
}

static void sink(const char *level, const char *msg)
{
	char ts[32];
	fmt_rfc3339_ms(now_realtime_ms(), ts);
	struct kv kvs[] = {{"ts", ts}, {"level", level}, {"worker", log_worker}, {"msg", msg}};
	emit(kvs, ARRAY_SIZE(kvs));
}

void log_setup(enum log_format f, const char *worker)
{
	log_fmt = f;
	log_worker = worker;
	log_sink = f == LOG_TEXT ? NULL : sink;
}

void log_task(const char *event, const char *id, const char *status, int64_t duration_ms,
	      const char *error)
{
	if (log_fmt == LOG_TEXT) {
		char dur[32] = "";
		if (duration_ms >= 0)
			snprintf(dur, sizeof dur, " in %lld ms", (long long)duration_ms);
		logmsg("%s: %s%s%s%s%s%s", id, event, status ? " " : "", status ? status : "", dur,
		       error ? ": " : "", error ? error : "");
		return;
	}
	char ts[32], dur[32];
	fmt_rfc3339_ms(now_realtime_ms(), ts);
	snprintf(dur, sizeof dur, "%lld", (long long)duration_ms);
	bool bad = status && strcmp(status, "ok") != 0 && strcmp(status, "failed") != 0;
	struct kv kvs[] = {
		{"ts", ts},
		{"level", bad ? "warn" : "info"},
		{"event", event},
		{"worker", log_worker},
		{"id", id},
		{"status", status},
		{"duration_ms", duration_ms >= 0 ? dur : NULL, true},
		{"error", error},
	};
	emit(kvs, ARRAY_SIZE(kvs));
}

/* ---- sd_notify ---------------------------------------------------------------- */

int notify_send(const char *msg)
{
	const char *path = getenv("NOTIFY_SOCKET");
	if (!path || !*path)
		return 0;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t plen = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || plen >= sizeof sa.sun_path)
		return -EINVAL;
	memcpy(sa.sun_path, path, plen);
	if (path[0] == '@')
		sa.sun_path[0] = '\0'; /* abstract namespace */
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen);
	if (sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen) < 0)
		return -errno;
	return 1;
}

int notify_statusf(const char *fmt, ...)
{
	char buf[512] = "STATUS=";
	va_list ap;
	va_start(ap, fmt);
	(void)vsnprintf(buf + 7, sizeof buf - 7, fmt, ap);
	va_end(ap);
	return notify_send(buf);
}

int notify_watchdog_fd(void)
{
	const char *us = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	long long usec, p;
	if (!getenv("NOTIFY_SOCKET") || !us || parse_int(us, 1, INT64_MAX / 1000, &usec) < 0)
		return -1;
	/* The watchdog is for the process systemd started, not for a child
	 * that inherited the environment. */
	if (pid && (parse_int(pid, 1, INT32_MAX, &p) < 0 || p != getpid()))
		return -1;
	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (tfd < 0)
		return -1;
	long long half = usec / 2;
	struct itimerspec its = {
		.it_interval = {.tv_sec = half / 1000000, .tv_nsec = (half % 1000000) * 1000},
	};
	its.it_value = its.it_interval;
	if (timerfd_settime(tfd, 0, &its, NULL) < 0) {
		close(tfd);
		return -1;
	}
	return tfd;
}

void notify_watchdog(int tfd)
{
	uint64_t n;
	if (read(tfd, &n, sizeof n) < 0 && errno != EAGAIN)
		return;
	(void)notify_send("WATCHDOG=1");
}
