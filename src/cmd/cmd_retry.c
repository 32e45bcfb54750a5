/* kart retry - queue a finished task again, under a new id. The task file
 * kept beside the result (done/ID.task) is copied, not moved: the old
 * result stays whole. The copy goes through the publish protocol (tmp/,
 * fsync, RENAME_NOREPLACE into new/, fsync new/), as `kart submit` does,
 * and starts afresh: attempt 1, no user.kart attribute. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>

#include "cmd.h"
#include "opts.h"
#include "task.h"
#include "termsafe.h"
#include "util.h"

static const struct opts_help help = {
	"usage: kart [-s SPOOL] retry ID...\n"
	"\n"
	"Queue each finished task again, under a new id (its name, suffixed:\n"
	"NAME.2, NAME.3...), from the task file kept beside its result. Prints\n"
	"each new id. The old result is left as it is. A hostile entry (no task\n"
	"file kept) cannot be retried. The values of its env= left the kept file\n"
	"when it finished: each is taken again from your environment (as kart\n"
	"submit -e NAME takes it).\n",
	"exit status: 0 if every task was queued again; 1 if one has no result\n"
	"or no task file, or could not be queued; 2 usage error\n",
};

/* Read done/<id>.json; the task file it names, the submitted name, and
 * whether its env= values were taken out of it. */
static int load(struct spool *sp, const char *id, char **text, size_t *len, char *name,
		size_t namelen, bool *scrubbed, char *err, size_t errlen)
{
	char jn[512];
	_cleanup_free_ char *buf = NULL;
	size_t blen;
	if (spool_name_done(jn, sizeof jn, id, DONE_JSON) < 0)
		return snprintf(err, errlen, "id too long"), -1;
	int r = read_file_at(sp->done, jn, 1 << 20, &buf, &blen);
	if (r == -ENOENT)
		return snprintf(err, errlen, "no result (not finished, or no such task)"), -1;
	if (r < 0)
		return snprintf(err, errlen, "done/%s: %s", jn, strerror(-r)), -1;
	json_error_t je;
	json_t *o = json_loadb(buf, blen, 0, &je);
	if (!o)
		return snprintf(err, errlen, "done/%.200s: not JSON: %.100s", jn, je.text), -1;
	const char *tp = json_string_value(json_object_get(json_object_get(o, "task"), "path"));
	const char *nm = json_string_value(json_object_get(o, "name"));
	*scrubbed = json_is_true(json_object_get(o, "env_values_removed"));
	const char *why;
	snprintf(name, namelen, "%s", nm && task_name_check(nm, &why) == 0 ? nm : id);
	if (!tp || strncmp(tp, "done/", 5) != 0 || strchr(tp + 5, '/')) {
		json_decref(o);
		return snprintf(err, errlen, "no task file kept (a hostile entry?)"), -1;
	}
	_cleanup_close_ int fd = openat(sp->done, tp + 5, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		snprintf(err, errlen, "%s: %s", tp, strerror(errno));
		json_decref(o);
		return -1;
	}
	if (!S_ISREG(st.st_mode) || st.st_size == 0) {
		snprintf(err, errlen, "%s: not a task file", tp);
		json_decref(o);
		return -1;
	}
	json_decref(o);
	*text = xmalloc((size_t)st.st_size + 1);
	ssize_t n = read_upto(fd, *text, (size_t)st.st_size);
	if (n < 0)
		return free(*text), snprintf(err, errlen, "%s: %s", tp, strerror((int)-n)), -1;
	*len = (size_t)n;
	return 0;
}

static const char *from_env(const char *name, void *arg)
{
	(void)arg;
	return getenv(name);
}

static int retry_one(struct spool *sp, const char *id)
{
	_cleanup_free_ char *text = NULL, *sid = term_safe(id);
	size_t len = 0;
	bool scrubbed = false;
	char name[TASK_NAME_MAX + 1], err[600];
	struct task_spec spec;
	if (load(sp, id, &text, &len, name, sizeof name, &scrubbed, err, sizeof err) < 0 ||
	    task_parse(text, len < TASK_HEADER_MAX ? len : TASK_HEADER_MAX, &spec, err, sizeof err) < 0) {
		_cleanup_free_ char *serr = term_safe(err);
		fprintf(stderr, "kart retry: %s: %s\n", sid, serr);
		return 1;
	}
	/* Its secrets left the kept file: the caller's own, again. */
	if (scrubbed && spec.n_env) {
		size_t flen;
		char *filled = task_env_rewrite(text, len, from_env, NULL, &flen, err, sizeof err);
		if (!filled && err[0]) {
			fprintf(stderr, "kart retry: %s: its env= values left the task file when it finished: "
				"set %s in your environment, and kart retry takes it from there\n", sid, err);
			return 1;
		}
		if (filled) {
			free(text);
			text = filled;
			len = flen;
		}
	}
	/* The new id is the name, suffixed; `name` in its result stays the
	 * submitted name, through a name= directive. */
	struct task_directives td = {0};
	_cleanup_free_ char *task = NULL;
	size_t tlen = len;
	int first;
	if (!spec.name[0] && task_directive_add(&td, "name", name, err, sizeof err) == 0) {
		task = task_compose(text, len, &td, &tlen, &first, err, sizeof err);
		if (!task) {
			fprintf(stderr, "kart retry: %s: %s\n", sid, err);
			task_directives_free(&td);
			return 1;
		}
	} else {
		if (spec.name[0])
			snprintf(name, sizeof name, "%s", spec.name);
		task = steal_ptr(&text);
	}
	task_directives_free(&td);
	char nid[TASK_NAME_MAX + 16];
	/* The values of env= are the caller's alone to read (kart submit's). */
	mode_t um = spec.n_env ? umask(077) : 0;
	int r = spool_submit(sp, name, task, tlen, NULL, nid, sizeof nid);
	if (spec.n_env)
		(void)umask(um);
	if (r < 0) {
		fprintf(stderr, "kart retry: %s: cannot queue into %s/new: %s\n", sid, sp->path, strerror(-r));
		return 1;
	}
	_cleanup_free_ char *snid = term_safe(nid);
	printf("%s\n", snid);
	return 0;
}

int cmd_retry(struct ctx *c, int argc, char **argv)
{
	const struct opt opts[] = {OPT_END()};
	struct opts_rest rest;
	int rc = 0;
	opts_parse("retry", argc, argv, opts, &help, 0, &rest);
	if (rest.argc == 0)
		return usage_error("retry", "no task ID given");
	struct spool *sp = &c->sp;
	for (int i = 0; i < rest.argc; i++)
		rc |= retry_one(sp, rest.argv[i]);
	spool_close(sp);
	return rc;
}
