/* query.c - see query.h. */
#define _GNU_SOURCE
#include "query.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>

#include "util.h"

/* When an entry got where it is: a rename into new/ or cur/ sets ctime;
 * a result's JSON is written just before its rename into done/. */
static int64_t stat_ms(int dirfd, const char *name, bool ctime)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	const struct timespec *ts = ctime ? &st.st_ctim : &st.st_mtim;
	return (int64_t)ts->tv_sec * 1000 + ts->tv_nsec / 1000000;
}

int query_load(struct spool *sp, const char *id, json_t **out)
{
	char p[512];
	_cleanup_free_ char *buf = NULL;
	size_t len;
	if (pathfmt(p, sizeof p, "%s.json", id) < 0)
		return -ENAMETOOLONG;
	int r = read_file_at(sp->done, p, 1 << 20, &buf, &len);
	if (r < 0)
		return r;
	json_error_t je;
	*out = json_loadb(buf, len, 0, &je);
	return *out ? 0 : -EBADMSG;
}

int query_done(struct spool *sp, const char *id, struct qinfo *q)
{
	char p[512];
	json_t *o;
	int r = query_load(sp, id, &o);
	if (r < 0)
		return r;
	(void)pathfmt(p, sizeof p, "%s.json", id);
	q->state = Q_DONE;
	q->since_ms = stat_ms(sp->done, p, false);
	const char *s = json_string_value(json_object_get(o, "status"));
	snprintf(q->status, sizeof q->status, "%s", s ? s : "?");
	json_t *ec = json_object_get(o, "exit_code");
	q->exit_code = json_is_integer(ec) ? (int)json_integer_value(ec) : -1;
	const char *sig = json_string_value(json_object_get(o, "signal"));
	q->signal = sig ? signal_from_name(sig) : 0;
	if (q->signal < 0)
		q->signal = 0;
	const char *op = json_string_value(json_object_get(json_object_get(o, "stdout"), "path"));
	const char *ep = json_string_value(json_object_get(json_object_get(o, "stderr"), "path"));
	snprintf(q->out_path, sizeof q->out_path, "%s", op ? op : "");
	snprintf(q->err_path, sizeof q->err_path, "%s", ep ? ep : "");
	json_decref(o);
	return 0;
}

static bool exists_at(int dirfd, const char *name)
{
	struct stat st;
	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}


static bool find_running(struct spool *sp, const char *id, char *worker, size_t wlen)
{
	DIR *dir = opendir_at(sp->cur, ".");
	struct dirent *de;
	bool found = false;
	if (!dir)
		return false;
	while (!found && (de = readdir(dir))) {
		char p[512];
		if (de->d_name[0] == '.')
			continue;
		if (pathfmt(p, sizeof p, "%s/%s", de->d_name, id) == 0 && exists_at(sp->cur, p)) {
			snprintf(worker, wlen, "%s", de->d_name);
			found = true;
		}
	}
	closedir(dir);
	return found;
}

int query_id(struct spool *sp, const char *id, struct qinfo *q)
{
	memset(q, 0, sizeof *q);
	q->exit_code = -1;
	/* In the order tasks move, so one in motion is seen somewhere. */
	if (id[0] != '.' && !strchr(id, '/') && exists_at(sp->new, id)) {
		q->state = Q_QUEUED;
		q->since_ms = stat_ms(sp->new, id, true);
		return 0;
	}
	if (id[0] != '.' && !strchr(id, '/') && find_running(sp, id, q->worker, sizeof q->worker)) {
		/* A finishing task writes its result before it leaves cur/:
		 * in between, it is done. */
		if (query_done(sp, id, q) == 0)
			return 0;
		q->state = Q_RUNNING;
		char p[512];
		if (pathfmt(p, sizeof p, "%s/%s", q->worker, id) == 0)
			q->since_ms = stat_ms(sp->cur, p, true);
		return 0;
	}
	int r = query_done(sp, id, q);
	if (r == -ENOENT) {
		q->state = Q_UNKNOWN;
		return 0;
	}
	return r;
}

int query_all(struct spool *sp, query_cb cb, void *arg)
{
	struct qinfo q;
	struct dirent *de;
	DIR *dir = opendir_at(sp->new, ".");
	if (!dir)
		return -errno;
	while ((de = readdir(dir))) {
		if (de->d_name[0] == '.')
			continue;
		memset(&q, 0, sizeof q);
		q.state = Q_QUEUED;
		q.exit_code = -1;
		q.since_ms = stat_ms(sp->new, de->d_name, true);
		cb(de->d_name, &q, arg);
	}
	closedir(dir);
	if (!(dir = opendir_at(sp->cur, ".")))
		return -errno;
	while ((de = readdir(dir))) {
		if (de->d_name[0] == '.')
			continue;
		int wd = openat(sp->cur, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		DIR *wdir = wd >= 0 ? fdopendir(wd) : NULL;
		if (!wdir) {
			if (wd >= 0)
				close(wd);
			continue;
		}
		struct dirent *te;
		while ((te = readdir(wdir))) {
			if (te->d_name[0] == '.')
				continue;
			memset(&q, 0, sizeof q);
			q.state = Q_RUNNING;
			q.exit_code = -1;
			q.since_ms = stat_ms(wd, te->d_name, true);
			snprintf(q.worker, sizeof q.worker, "%s", de->d_name);
			cb(te->d_name, &q, arg);
		}
		closedir(wdir);
	}
	closedir(dir);
	if (!(dir = opendir_at(sp->done, ".")))
		return -errno;
	while ((de = readdir(dir))) {
		size_t l = strlen(de->d_name);
		if (de->d_name[0] == '.' || l <= 5 || strcmp(de->d_name + l - 5, ".json") != 0)
			continue;
		char id[512];
		snprintf(id, sizeof id, "%.*s", (int)(l - 5), de->d_name);
		memset(&q, 0, sizeof q);
		if (query_done(sp, id, &q) == 0)
			cb(id, &q, arg);
	}
	closedir(dir);
	return 0;
}
