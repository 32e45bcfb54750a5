/* util.h - small helpers shared by every module: cleanup attributes,
 * checked path formatting, durable-write primitives, time. */
#ifndef KART_UTIL_H
#define KART_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KART_VERSION "0.1.0"

static inline void cleanup_freep(void *p) { free(*(void **)p); }
static inline void cleanup_closep(int *fd)
{
	if (*fd >= 0) {
		int e = errno;
		(void)close(*fd);
		errno = e;
	}
}
static inline void cleanup_fclosep(FILE **f)
{
	if (*f)
		(void)fclose(*f);
}
#define _cleanup_free_ __attribute__((cleanup(cleanup_freep)))
#define _cleanup_close_ __attribute__((cleanup(cleanup_closep)))
#define _cleanup_fclose_ __attribute__((cleanup(cleanup_fclosep)))

/* Hand ownership out of a cleanup variable. */
static inline void *steal_ptr(void *pp)
{
	void **p = pp, *v = *p;
	*p = NULL;
	return v;
}
static inline int steal_fd(int *fd)
{
	int v = *fd;
	*fd = -1;
	return v;
}

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t m);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* snprintf that fails with -ENAMETOOLONG instead of truncating. */
int pathfmt(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* A library function's error: the message into the caller's err/errlen
 * buffer (both in scope), and e, the value to return: return ERR(-1, ...). */
#define ERR(e, ...) ({ (void)snprintf(err, errlen, __VA_ARGS__); (e); })

/* logmsg() and die(), which every module may call, are log.c's. */
#include "log.h"

int write_all(int fd, const void *buf, size_t len);
/* "PROG: out of memory" on stderr, and exit 1: what the x*() allocators
 * do when they cannot. */
_Noreturn void oom(void);
/* A sealed, read-only memfd holding data at offset 0 (O_CLOEXEC): the fd
 * or -errno. */
int memfd_sealed(const char *name, const void *data, size_t len);
/* In a forked child that will exec a host program (an on_done hook, the
 * container CLI): signals unblocked, stdin /dev/null, stdout out, every
 * other descriptor above 2 closed. Async-signal-safe; 0 or -1. */
int host_child_setup(int out);
/* name as execv needs it: itself if it holds a '/', else the first
 * executable in $PATH. 0 or -errno. */
int find_in_path(const char *name, char *out, size_t len);
/* Read up to max bytes; returns bytes read or -errno. */
ssize_t read_upto(int fd, void *buf, size_t max);
/* Read a whole (small) file at dirfd/path into a NUL-terminated buffer. */
int read_file_at(int dirfd, const char *path, size_t max, char **out, size_t *outlen);
int fsync_dirat(int dirfd, const char *path);
/* A DIR stream for dirfd/name (never following a final symlink), or NULL. */
DIR *opendir_at(int dirfd, const char *name);


/* SIGINT and SIGTERM blocked and delivered through a signalfd
 * (nonblocking, close-on-exec), for a loop that ends cleanly on them;
 * -1 on failure. */
int stop_signalfd(void);
int64_t now_realtime_ms(void);
int64_t now_mono_ms(void);
/* RFC 3339 UTC with milliseconds; buf must hold 32 bytes. */
void fmt_rfc3339_ms(int64_t ms, char buf[32]);

/* Parsers shared by directives and command-line options.
 * Return 0 or -EINVAL / -ERANGE. */
int parse_duration_s(const char *s, int64_t *out);
int parse_size(const char *s, uint64_t *out);
int parse_cpu_milli(const char *s, uint32_t *out);
int parse_int(const char *s, long long min, long long max, long long *out);

/* Directive values (kart-task(5), "Values"): %XX stands for the byte
 * 0xXX, so a value can hold spaces, '%' and any byte. An encoder writes
 * %XX for '%', space, tab, '#', bytes below 0x20 and 0x7f, and leaves the
 * rest as it is. pct_encode returns the length written, or -ENAMETOOLONG
 * when out (its NUL included) is too small; pct_decode returns the length
 * decoded, -EINVAL for a '%' not followed by two hex digits or a %00, or
 * -ENAMETOOLONG. */
ssize_t pct_encode(const char *in, char *out, size_t outlen);
ssize_t pct_decode(const char *in, char *out, size_t outlen);

/* qsort for any n: qsort(NULL, 0, ...) is undefined behaviour, and an
 * empty list (an empty directory) is the common case. */
static inline void sort_n(void *v, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(v, n, size, cmp);
}

/* Valid UTF-8 (no overlongs, no surrogates)? */
bool utf8_valid(const char *s, size_t len);
/* The length of the valid UTF-8 sequence that starts s (left bytes
 * there, left > 0), or 0 when it starts none. */
size_t utf8_char(const char *s, size_t left);
/* A copy of arbitrary bytes as UTF-8, for JSON and log lines: invalid
 * sequences and NUL become U+FFFD. Caller frees. */
char *utf8_sanitize(const char *s, size_t len);

/* A growable NULL-terminated vector of owned strings (argv, envp). */
struct strv {
	char **v;
	size_t n, cap;
};
void strv_add(struct strv *s, const char *str);
void strv_addf(struct strv *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void strv_free(struct strv *s);
/* s's words with sep between them, as one string (xmalloc'd). */
char *strv_join(const struct strv *s, char sep);

/* The names in dirfd/name that do not start with '.', read whole before
 * the caller acts on any (acting may rename entries under a readdir).
 * 0, or -errno when it cannot be opened. */
int dir_names(int dirfd, const char *name, struct strv *out);
/* The same for dirfd itself, dot names included (but . and ..). */
int dir_names_all(int dirfd, struct strv *out);

/* A file the worker writes for a task (a capture, a result), made
 * 0600: owned by the worker, readable by uid alone (a POSIX ACL entry),
 * and by the file's group too with group. uid 0 (or a filesystem without ACLs, where
 * the file is given to uid, mode 0400): no ACL. */
int grant_read(int fd, uid_t uid, bool group);
/* The same, by an ACL alone: never the fallback that gives the file to
 * uid (a task file of the worker's must stay its own). -EOPNOTSUPP where
 * the filesystem has no ACLs. */
int grant_read_acl(int fd, uid_t uid);
/* The same for a directory the worker owns (0700): uid may list and
 * enter it. 0, or -1 with errno. */
int grant_read_dir(int fd, uid_t uid);

const char *signal_name(int sig);
int signal_from_name(const char *name);

#endif
