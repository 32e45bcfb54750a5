/* kart cat */
#define _GNU_SOURCE
#include <fcntl.h>
#include <getopt.h>

#include "cmd.h"
#include "query.h"
#include "util.h"

static const char help[] =
	"usage: kart [-s SPOOL] cat [--stderr] ID\n"
	"\n"
	"Print a task's captured stdout (or stderr). For a running task, what it\n"
	"has written so far.\n"
	"\n"
	"exit status: 0; 1 if the task is unknown, queued, or has no output; 2 usage\n";

int cmd_cat(struct ctx *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{"stderr", no_argument, NULL, 'e'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	bool err = false;
	int ch;
	while ((ch = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'h': fputs(help, stdout); return 0;
		case 'e': err = true; break;
		case ':': return usage_error("cat", "option '%s' needs a value", argv[optind - 1]);
		default: return usage_error("cat", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (argc - optind != 1)
		return usage_error("cat", "give exactly one task ID");
	struct spool *sp = &c->sp;
	_cleanup_free_ char *own = spool_own_id(sp, argv[optind]);
	const char *id = own;
	struct qinfo q;
	int r = query_id(sp, id, &q);
	char p[4096], name[512];
	_cleanup_close_ int fd = -1;
	if (r < 0 || q.state == Q_UNKNOWN) {
		fprintf(stderr, "kart cat: %s: %s\n", id, r < 0 ? strerror(-r) : "no such task");
		return 1;
	}
	if (q.state == Q_QUEUED) {
		fprintf(stderr, "kart cat: %s: queued, no output yet\n", id);
		return 1;
	}
	if (q.state == Q_RUNNING) {
		if (spool_name_scratch(name, sizeof name, id, err ? SCRATCH_STDERR : SCRATCH_STDOUT) == 0 &&
		    pathfmt(p, sizeof p, "%s/%s", q.worker, name) == 0)
			fd = openat(sp->cur, p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		/* The file is made at the run's first byte: none yet. */
		if (fd < 0 && errno == ENOENT)
			return 0;
	} else {
		const char *rel = err ? q.err_path : q.out_path;
		if (strncmp(rel, "done/", 5) == 0 && !strchr(rel + 5, '/'))
			fd = openat(sp->done, rel + 5, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	}
	if (fd < 0) {
		fprintf(stderr, "kart cat: %s: no captured %s\n", id, err ? "stderr" : "stdout");
		return 1;
	}
	char buf[65536];
	ssize_t n;
	while ((n = read(fd, buf, sizeof buf)) > 0)
		if (write_all(STDOUT_FILENO, buf, (size_t)n) < 0)
			return 1;
	spool_close(sp);
	return n < 0 ? 1 : 0;
}
