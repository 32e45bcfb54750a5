/* spool_name.c - the spool's names on disk and the walk over its
 * directories: the one place that knows what a name in done/ or beside a
 * claim means (spool-layout §2, §5, §6). See spool.h. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "spool.h"
#include "util.h"

const char *const spool_done_suffix[DONE_NFILES] = {
	[DONE_JSON] = ".json",         [DONE_TASK] = ".task", [DONE_STDOUT] = ".stdout",
	[DONE_STDERR] = ".stderr",     [DONE_REJECTED] = ".rejected", [DONE_OUT] = ".out",
	[DONE_ATTEMPTS] = ".attempts", /* a retry_on= task's earlier attempts (a directory) */
};

const char *const spool_scratch_suffix[SCRATCH_NFILES] = {
	[SCRATCH_STDOUT] = "stdout", [SCRATCH_STDERR] = "stderr", [SCRATCH_WORK] = "work",
	[SCRATCH_TMP] = "tmp",       [SCRATCH_OUT] = "out",       [SCRATCH_CANCEL] = "cancel",
	[SCRATCH_PAUSE] = "pause",   [SCRATCH_PAUSED] = "paused",
	[SCRATCH_NOPAUSE] = "nopause", /* a pause refused, and why (worker_task.c) */
	[SCRATCH_LOCK] = "lock",
};

int spool_name_done(char *buf, size_t n, const char *id, enum done_file f)
{
	return pathfmt(buf, n, "%s%s", id, spool_done_suffix[f]) < 0 ? -ENAMETOOLONG : 0;
}

int spool_name_scratch(char *buf, size_t n, const char *name, enum scratch_file f)
{
	return pathfmt(buf, n, ".%s.%s", name, spool_scratch_suffix[f]) < 0 ? -ENAMETOOLONG : 0;
}

int spool_name_claim_scratch(char *buf, size_t n, const char *worker, const char *name,
			     enum scratch_file f)
{
	return pathfmt(buf, n, "%s/.%s.%s", worker, name, spool_scratch_suffix[f]) < 0 ? -ENAMETOOLONG
											: 0;
}

int spool_name_uniq(char *buf, size_t n, unsigned uid, uint64_t key_hash)
{
	return pathfmt(buf, n, ".uniq.%u.%016llx", uid, (unsigned long long)key_hash) < 0 ? -ENAMETOOLONG
											   : 0;
}

int spool_name_cancel(char *buf, size_t n, const char *id)
{
	return spool_name_scratch(buf, n, id, SCRATCH_CANCEL);
}

bool spool_done_id(const char *name, char *id, size_t idlen, enum done_file *f)
{
	size_t l = strlen(name);
	for (int i = 0; i < DONE_NFILES; i++) {
		size_t sl = strlen(spool_done_suffix[i]);
		if (l > sl && strcmp(name + l - sl, spool_done_suffix[i]) == 0 && l - sl < idlen) {
			snprintf(id, idlen, "%.*s", (int)(l - sl), name);
			*f = (enum done_file)i;
			return true;
		}
	}
	return false;
}

bool spool_scratch_of(const char *entry, enum scratch_file f, char *name, size_t n)
{
	size_t l = strlen(entry), sl = strlen(spool_scratch_suffix[f]);
	/* "." NAME "." SUFFIX, NAME not empty */
	if (entry[0] != '.' || l < sl + 3 || entry[l - sl - 1] != '.' ||
	    strcmp(entry + l - sl, spool_scratch_suffix[f]) != 0 || l - sl - 2 >= n)
		return false;
	snprintf(name, n, "%.*s", (int)(l - sl - 2), entry + 1);
	return true;
}

const char *spool_held_id(const char *name)
{
	char pre[16];
	if (spool_held_name("", pre, sizeof pre) < 0)
		return NULL;
	size_t pl = strlen(pre);
	return strncmp(name, pre, pl) == 0 && name[pl] ? name + pl : NULL;
}

/* A tree being removed is first renamed .rm-NAME (kart gc), so that a
 * removal cut short says so. */
static const char trash_prefix[] = ".rm-";

int spool_name_trash(char *buf, size_t n, const char *name)
{
	return pathfmt(buf, n, "%s%s", trash_prefix, name) < 0 ? -ENAMETOOLONG : 0;
}

bool spool_is_trash(const char *name)
{
	return strncmp(name, trash_prefix, sizeof trash_prefix - 1) == 0;
}

bool spool_is_result_tmp(const char *name)
{
	size_t l = strlen(name);
	return name[0] == '.' && l > 5 && strcmp(name + l - 4, ".tmp") == 0 && strstr(name, ".json.");
}

bool spool_is_newborn(const char *name)
{
	return strncmp(name, ".new.", 5) == 0;
}

/* One directory's entries to cb; "." and "..", and dot names unless dots,
 * left out. 0, cb's nonzero value, or -errno if it cannot be read. */
static int walk_dir(int dirfd, struct spool_entry *e, bool dots, spool_walk_cb cb, void *arg)
{
	DIR *dir = opendir_at(dirfd, ".");
	if (!dir)
		return -errno;
	struct dirent *de;
	int r = 0;
	char id[512];
	while (!r && (de = readdir(dir))) {
		const char *n = de->d_name;
		if (n[0] == '.' && (!dots || !strcmp(n, ".") || !strcmp(n, "..")))
			continue;
		e->name = n;
		e->id = n[0] == '.' ? NULL : n;
		if (e->area == SPOOL_WALK_DONE && e->id)
			e->id = spool_done_id(n, id, sizeof id, &e->done) ? id : NULL;
		r = cb(e, arg);
	}
	closedir(dir);
	return r;
}

/* cur/: the claim directories (WORKERS) and what they hold (CUR). A
 * dot directory (cur/.new.*, one being born) is never entered. */
static int walk_cur(struct spool *sp, unsigned areas, spool_walk_cb cb, void *arg)
{
	bool dots = areas & SPOOL_WALK_DOTS;
	DIR *dir = opendir_at(sp->cur, ".");
	if (!dir)
		return -errno;
	struct dirent *de;
	int r = 0;
	while (!r && (de = readdir(dir))) {
		const char *wid = de->d_name;
		bool dot = wid[0] == '.';
		if (dot && (!dots || !strcmp(wid, ".") || !strcmp(wid, "..")))
			continue;
		if (areas & SPOOL_WALK_WORKERS) {
			struct spool_entry e = {.area = SPOOL_WALK_WORKERS, .dirfd = sp->cur, .dir = "cur",
						.name = wid, .id = NULL};
			if ((r = cb(&e, arg)))
				break;
		}
		char rel[512];
		if (dot || !(areas & SPOOL_WALK_CUR) || pathfmt(rel, sizeof rel, "cur/%s", wid) < 0)
			continue;
		_cleanup_close_ int wd = openat(sp->cur, wid, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (wd < 0)
			continue; /* gone (recovered, collected), or not a directory */
		struct spool_entry e = {.area = SPOOL_WALK_CUR, .dirfd = wd, .dir = rel, .worker = wid};
		int wr = walk_dir(wd, &e, dots, cb, arg);
		if (wr > 0)
			r = wr; /* else an unreadable claim directory is passed over */
	}
	closedir(dir);
	return r;
}

int spool_walk(struct spool *sp, unsigned areas, spool_walk_cb cb, void *arg)
{
	bool dots = areas & SPOOL_WALK_DOTS;
	/* In the order tasks move; cur/ (0 here) is walk_cur's. */
	const struct {
		unsigned area;
		int fd;
		const char *dir;
	} dirs[] = {
		{SPOOL_WALK_TMP, sp->tmp, "tmp"},
		{SPOOL_WALK_NEW, sp->new, "new"},
		{SPOOL_WALK_WORKERS | SPOOL_WALK_CUR, -1, NULL},
		{SPOOL_WALK_DONE, sp->done, "done"},
	};
	int first = 0;
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		if (!(areas & dirs[i].area))
			continue;
		struct spool_entry e = {.area = dirs[i].area, .dirfd = dirs[i].fd, .dir = dirs[i].dir};
		/* tmp/ names are the clients': a dot name is as much theirs. */
		int r = !dirs[i].dir ? walk_cur(sp, areas, cb, arg)
				     : walk_dir(dirs[i].fd, &e, dots || dirs[i].area == SPOOL_WALK_TMP, cb, arg);
		if (r > 0)
			return r;
		first = first ? first : r;
	}
	return first;
}

bool spool_find_claim(struct spool *sp, const char *id, char *worker, size_t wlen)
{
	DIR *dir = opendir_at(sp->cur, ".");
	struct dirent *de;
	bool found = false;
	if (!dir)
		return false;
	while (!found && (de = readdir(dir))) {
		char p[512];
		struct stat st;
		if (de->d_name[0] == '.')
			continue;
		if (pathfmt(p, sizeof p, "%s/%s", de->d_name, id) == 0 &&
		    fstatat(sp->cur, p, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			snprintf(worker, wlen, "%s", de->d_name);
			found = true;
		}
	}
	closedir(dir);
	return found;
}
