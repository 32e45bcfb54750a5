/* kart submit */
#define _GNU_SOURCE
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <sys/stat.h>

#include "cmd.h"
#include "policy.h"
#include "task.h"
#include "util.h"

static const char help[] =
	"usage: kart [-s SPOOL] submit [OPTIONS] FILE\n"
	"       kart [-s SPOOL] submit [OPTIONS] -            (the task on stdin)\n"
	"       kart [-s SPOOL] submit [OPTIONS] -- CMD [ARG...]\n"
	"       kart submit --to postgres URL [OPTIONS] FILE|-|-- CMD [ARG...]\n"
	"\n"
	"Queue a task atomically (tmp/, fsync, rename into new/) and print its id.\n"
	"The options are added to the task as #kart: directives.\n"
	"\n"
	"  --to postgres URL  queue it in the PostgreSQL queue of kart feed\n"
	"                   instead (no spool needed) and print the row's id\n"
	"  --name NAME      the task's name (default: the file's name, 'stdin',\n"
	"                   or the command's); the id is NAME, or NAME.2, NAME.3...\n"
	"                   if NAME is taken\n"
	"  --timeout DUR    90, 90s, 5m, 2h\n"
	"  --memory SIZE    512K, 256M, 2G\n"
	"  --pids N\n"
	"  --cpu CORES      e.g. 0.5\n"
	"  --lane LANE      fast (default) or batch\n"
	"  --net            ask for network (the policy must allow it)\n"
	"  --priority N     lower runs first (default 0)\n"
	"  --kind NAME      run it with the policy's runner for kind NAME\n"
	"                   (wins over the #! line; see kart.conf(5) [kind.NAME])\n"
	"\n"
	"exit status: 0 queued; 1 could not queue; 2 usage error\n";

int (*submit_to_queue)(const char *url, const char *name, const char *lane, const char *task,
		       size_t len);

static void shell_quote(struct strv *unused, char **out, size_t *len, const char *s)
{
	(void)unused;
	size_t need = *len + strlen(s) * 4 + 3;
	*out = xrealloc(*out, need + 1);
	char *o = *out + *len;
	*o++ = '\'';
	for (; *s; s++) {
		if (*s == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else
			*o++ = *s;
	}
	*o++ = '\'';
	*o = '\0';
	*len = (size_t)(o - *out);
}

static int read_all_fd(int fd, char **out, size_t *outlen, size_t max)
{
	size_t cap = 65536, len = 0;
	char *buf = xmalloc(cap);
	for (;;) {
		if (len == cap) {
			if (cap >= max) {
				free(buf);
				return -EFBIG;
			}
			cap *= 2;
			buf = xrealloc(buf, cap);
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = -errno;
			free(buf);
			return e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	*out = buf;
	*outlen = len;
	return 0;
}

int cmd_submit(struct ctx *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{"name", required_argument, NULL, 'n'},
		{"timeout", required_argument, NULL, 't'},
		{"memory", required_argument, NULL, 'm'},
		{"pids", required_argument, NULL, 'p'},
		{"cpu", required_argument, NULL, 'c'},
		{"lane", required_argument, NULL, 'l'},
		{"net", no_argument, NULL, 'N'},
		{"priority", required_argument, NULL, 'P'},
		{"kind", required_argument, NULL, 'k'},
		{"to", required_argument, NULL, 'T'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *name = NULL, *url = NULL, *lane = NULL;
	char directives[1024] = "";
	size_t dl = 0;
	int ch;
#define ADD(...) \
	do { \
		int _n = snprintf(directives + dl, sizeof directives - dl, __VA_ARGS__); \
		if (_n < 0 || (size_t)_n >= sizeof directives - dl) \
			return usage_error("submit", "options too long"); \
		dl += (size_t)_n; \
	} while (0)
	while ((ch = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		int64_t d;
		uint64_t sz;
		uint32_t cpu;
		long long v;
		switch (ch) {
		case 'h': fputs(help, stdout); return 0;
		case 'n': name = optarg; break;
		case 't':
			if (parse_duration_s(optarg, &d) < 0 || d == 0)
				return usage_error("submit", "--timeout %s: not a duration (90, 90s, 5m, 2h)", optarg);
			ADD(" timeout=%s", optarg);
			break;
		case 'm':
			if (parse_size(optarg, &sz) < 0)
				return usage_error("submit", "--memory %s: not a size (512K, 256M, 2G)", optarg);
			ADD(" memory=%s", optarg);
			break;
		case 'p':
			if (parse_int(optarg, 1, 4194304, &v) < 0)
				return usage_error("submit", "--pids %s: not a number from 1 to 4194304", optarg);
			ADD(" pids=%s", optarg);
			break;
		case 'c':
			if (parse_cpu_milli(optarg, &cpu) < 0)
				return usage_error("submit", "--cpu %s: not a core count (e.g. 0.5)", optarg);
			ADD(" cpu=%s", optarg);
			break;
		case 'l':
			if (strcmp(optarg, "fast") != 0 && strcmp(optarg, "batch") != 0)
				return usage_error("submit", "--lane %s: not a lane (fast or batch)", optarg);
			ADD(" lane=%s", optarg);
			lane = optarg;
			break;
		case 'N': ADD(" net"); break;
		case 'P':
			if (parse_int(optarg, -1000000, 1000000, &v) < 0)
				return usage_error("submit", "--priority %s: not a number", optarg);
			ADD(" priority=%s", optarg);
			break;
		case 'k':
			if (!kind_name_ok(optarg))
				return usage_error("submit", "--kind %s: not a kind name (a-z 0-9 _ -)", optarg);
			ADD(" kind=%s", optarg);
			break;
		case 'T':
			/* --to postgres URL, or the URL alone. */
			if (strncmp(optarg, "postgres://", 11) == 0 ||
			    strncmp(optarg, "postgresql://", 13) == 0)
				url = optarg;
			else if (strcmp(optarg, "postgres") != 0 && strcmp(optarg, "postgresql") != 0)
				return usage_error("submit", "--to %s: give postgres URL", optarg);
			else if (optind >= argc || strcmp(argv[optind], "--") == 0)
				return usage_error("submit", "--to postgres: give the URL");
			else
				url = argv[optind++];
			break;
		case ':': return usage_error("submit", "option '%s' needs a value", argv[optind - 1]);
		default: return usage_error("submit", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (url && !submit_to_queue) {
		/* libpq is in kart-sync: the same command line, there (before
		 * stdin is read). */
		char path[4096];
		find_libexec("kart-sync", path, sizeof path);
		char **av = xmalloc(((size_t)argc + 2) * sizeof *av);
		av[0] = (char *)"kart";
		memcpy(av + 1, argv, (size_t)argc * sizeof *av);
		av[argc + 1] = NULL;
		execv(path, av);
		fprintf(stderr, "kart submit: cannot run %s: %s\n", path, strerror(errno));
		free(av);
		return 1;
	}
	bool is_cmd = optind > 0 && strcmp(argv[optind - 1], "--") == 0;
	if (optind >= argc)
		return usage_error("submit", "no task given (FILE, - or -- CMD)");
	if (!is_cmd && argc - optind > 1)
		return usage_error("submit", "one task file at a time (or -- CMD ARGS)");

	_cleanup_free_ char *body = NULL;
	size_t blen = 0;
	_cleanup_free_ char *base = NULL;
	if (is_cmd) {
		size_t len = 0;
		char *s = xstrdup("#!/bin/sh\nexec");
		len = strlen(s);
		for (int i = optind; i < argc; i++) {
			s = xrealloc(s, len + 2);
			s[len++] = ' ';
			s[len] = '\0';
			shell_quote(NULL, &s, &len, argv[i]);
		}
		s = xrealloc(s, len + 2);
		s[len++] = '\n';
		s[len] = '\0';
		body = s;
		blen = len;
		_cleanup_free_ char *cp = xstrdup(argv[optind]);
		base = xstrdup(basename(cp));
	} else if (strcmp(argv[optind], "-") == 0) {
		int r = read_all_fd(STDIN_FILENO, &body, &blen, 1u << 30);
		if (r < 0) {
			fprintf(stderr, "kart submit: reading stdin: %s\n", strerror(-r));
			return 1;
		}
		base = xstrdup("stdin");
	} else {
		_cleanup_close_ int fd = open(argv[optind], O_RDONLY | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0) {
			fprintf(stderr, "kart submit: %s: %s\n", argv[optind], strerror(errno));
			return 1;
		}
		if (!S_ISREG(st.st_mode)) {
			fprintf(stderr, "kart submit: %s: not a regular file\n", argv[optind]);
			return 1;
		}
		int r = read_all_fd(fd, &body, &blen, 1u << 30);
		if (r < 0) {
			fprintf(stderr, "kart submit: %s: %s\n", argv[optind], strerror(-r));
			return 1;
		}
		_cleanup_free_ char *cp = xstrdup(argv[optind]);
		base = xstrdup(basename(cp));
	}
	if (name)
		base = (free(base), xstrdup(name));
	const char *why;
	if (task_name_check(base, &why) != 0) {
		if (name)
			return usage_error("submit", "--name %s: not a task name (%s)", name,
					   task_name_check(base, &why) > 0 ? "starts with '.'" : why);
		/* A name from a path that cannot be a task name: a plain one. */
		free(base);
		base = xstrdup("task");
	}

	/* The queue's row keeps the name; the host's id is q<row>.<attempt>. */
	_cleanup_spool_ struct spool sp = {.root = -1, .tmp = -1, .new = -1, .cur = -1, .done = -1,
						   .drop = -1, .dropd = -1};
	char id[TASK_NAME_MAX + 16];
	if (!url) {
		ctx_open_spool(c, &sp);
		char derr[512];
		if (spool_use_drop(&sp, derr, sizeof derr) < 0) {
			fprintf(stderr, "kart submit: %s\n", derr);
			return 1;
		}
		if (spool_pick_id(&sp, base, id, sizeof id) < 0) {
			fprintf(stderr, "kart submit: no free id for %s\n", base);
			return 1;
		}
		/* On a shared spool the id is USER:NAME: the name travels. */
		if (strcmp(id, base) != 0)
			ADD(" name=%s", base);
	}

	/* Directives go right after the #! line, or first. */
	size_t split = 0;
	if (blen >= 2 && body[0] == '#' && body[1] == '!') {
		const char *nl = memchr(body, '\n', blen);
		split = nl ? (size_t)(nl - body) + 1 : blen;
	}
	_cleanup_free_ char *task = NULL;
	size_t tlen = blen;
	if (dl) {
		char line[1100];
		int ll = snprintf(line, sizeof line, "#kart:%s\n", directives);
		task = xmalloc(blen + (size_t)ll + 2);
		memcpy(task, body, split);
		size_t o = split;
		if (split && body[split - 1] != '\n')
			task[o++] = '\n';
		memcpy(task + o, line, (size_t)ll);
		o += (size_t)ll;
		memcpy(task + o, body + split, blen - split);
		tlen = o + blen - split;
	} else {
		task = steal_ptr(&body);
	}
	/* Catch a bad directive now rather than as a `rejected` result. */
	struct task_spec spec;
	char err[512];
	if (task_parse(task, tlen < TASK_HEADER_MAX ? tlen : TASK_HEADER_MAX, &spec, err, sizeof err) < 0) {
		fprintf(stderr, "kart submit: %s: %s\n", is_cmd ? "the command" : argv[optind], err);
		return 1;
	}
	if (url)
		return submit_to_queue(url, base, lane, task, tlen);
	int r = spool_submit(&sp, base, task, tlen, id, sizeof id);
	if (r < 0) {
		fprintf(stderr, "kart submit: cannot queue into %s/%s: %s\n", sp.path,
			sp.dropd >= 0 ? "drop" : "new", strerror(-r));
		spool_close(&sp);
		return 1;
	}
	printf("%s\n", id);
	spool_close(&sp);
	return 0;
}
