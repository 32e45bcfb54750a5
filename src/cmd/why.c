/* why.c - see why.h. */
#define _GNU_SOURCE
#include "why.h"

#include <ctype.h>
#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>

#include "util.h"

/* What a program says when it cannot reach the network (curl, wget, ssh,
 * git, python's socket, getaddrinfo), lowercased. Without network, a
 * connect() is refused by the sandbox (EACCES): "connect" with
 * "permission denied" says that too. */
static const char *const no_net[] = {
	"connection refused",	 "failed to connect",	    "couldn't connect",
	"network is unreachable", "could not resolve host", "temporary failure in name resolution",
	"name or service not known", "no address associated with hostname",
};

/* The last 4K of done/ID.stderr (rel: the result's stderr.path). */
static ssize_t stderr_tail(struct spool *sp, const char *rel, char *buf, size_t len)
{
	if (strncmp(rel, "done/", 5) != 0 || strchr(rel + 5, '/'))
		return -ENOENT;
	_cleanup_close_ int fd = openat(sp->done, rel + 5, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return -ENOENT;
	off_t from = st.st_size > (off_t)len - 1 ? st.st_size - (off_t)len + 1 : 0;
	ssize_t n = pread(fd, buf, len - 1, from);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return n;
}

int why_load(struct spool *sp, const char *id, const struct qinfo *q, struct why *w)
{
	json_t *o;
	*w = (struct why){{0}};
	snprintf(w->error, sizeof w->error, "%s", q->error);
	int r = query_load(sp, id, &o);
	if (r < 0)
		return r;
	const char *e = json_string_value(json_object_get(o, "error"));
	if (e && strcmp(q->status, "ok") != 0)
		snprintf(w->error, sizeof w->error, "%s", e);
	json_t *net = json_object_get(json_object_get(o, "sandbox"), "network");
	bool had_net = !json_is_false(net);
	json_decref(o);
	char tail[4097];
	ssize_t n = stderr_tail(sp, q->err_path, tail, sizeof tail);
	if (n <= 0)
		return 0;
	/* Its last line with something on it. */
	while (n > 0 && (tail[n - 1] == '\n' || tail[n - 1] == '\r' || tail[n - 1] == ' '))
		tail[--n] = '\0';
	const char *nl = memrchr(tail, '\n', (size_t)n);
	const char *last = nl ? nl + 1 : tail;
	snprintf(w->last_stderr, sizeof w->last_stderr, "%.*s", (int)sizeof w->last_stderr - 1, last);
	if (had_net)
		return 0;
	for (char *p = tail; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	for (size_t i = 0; i < ARRAY_SIZE(no_net) && !w->net_off; i++)
		w->net_off = strstr(tail, no_net[i]) != NULL;
	w->net_off = w->net_off || (strstr(tail, "connect") && strstr(tail, "permission denied"));
	return 0;
}
