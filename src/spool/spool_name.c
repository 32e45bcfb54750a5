/* spool_name.c - the spool's names on disk: the one place that knows
 * what a name in done/, new/ or beside a claim means (spool-layout README §1,
 * §2). Below the protocol: it knows no directory and no struct
 * spool. See spool_name.h. */
#include "spool_name.h"

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
	[SCRATCH_SCRUB] = "scrub", /* done/ID.task without its env= values, on its way (spool_finish.c) */
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
	return pathfmt(buf, n, "%u.%016llx", uid, (unsigned long long)key_hash) < 0 ? -ENAMETOOLONG : 0;
}

int spool_name_cancel(char *buf, size_t n, const char *id)
{
	return spool_name_scratch(buf, n, id, SCRATCH_CANCEL);
}

int spool_held_name(const char *id, char *buf, size_t len)
{
	return pathfmt(buf, len, ".held.%s", id);
}

int spool_name_newborn(char *buf, size_t n, const char *wid, int pid)
{
	return pathfmt(buf, n, ".new.%s.%d", wid, pid) < 0 ? -ENAMETOOLONG : 0;
}

int spool_name_result_tmp(char *buf, size_t n, const char *id, int pid)
{
	return pathfmt(buf, n, ".%s.json.%d.tmp", id, pid) < 0 ? -ENAMETOOLONG : 0;
}

int spool_name_redo(char *buf, size_t n, const char *name)
{
	return pathfmt(buf, n, ".%s.redo", name) < 0 ? -ENAMETOOLONG : 0;
}

int spool_name_hoist(char *buf, size_t n, unsigned uid, const char *id)
{
	return pathfmt(buf, n, ".hoist.%u.%s", uid, id) < 0 ? -ENAMETOOLONG : 0;
}

int spool_name_hoist_copy(char *buf, size_t n, unsigned uid, const char *id)
{
	return pathfmt(buf, n, ".copy.%u.%s", uid, id) < 0 ? -ENAMETOOLONG : 0;
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
