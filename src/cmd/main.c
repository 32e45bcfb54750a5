/* main.c - global options and the verb table. */
#define _GNU_SOURCE
#include <signal.h>

#include "cmd.h"
#include "opts.h"
#include "policy.h"
#include "termsafe.h"
#include "util.h"

static const char main_help[] =
	"usage: kart [-s SPOOL] COMMAND [ARGS...]\n"
	"\n"
	"A task queue in the maildir tradition with a sandboxed worker.\n"
	"\n"
	"commands:\n"
	"  init                 create the spool\n"
	"  submit FILE|-|-- CMD queue a task atomically; prints its id\n"
	"  worker               run tasks from the spool\n"
	"  status [ID...]       queued, running (worker) or the final status\n"
	"  wait ID...           block until each task has a result\n"
	"  cat [-f] ID          print a task's captured output (-f: as it grows)\n"
	"  cancel ID...         cancel queued or running tasks\n"
	"  hold ID...           keep queued tasks from being claimed\n"
	"  release ID...        let held tasks be claimed again\n"
	"  edit ID              change a queued task ($EDITOR, or --set KEY=VALUE)\n"
	"  pause ID...|--all    freeze running tasks, or stop claims on the spool\n"
	"  resume ID...|--all   undo kart pause\n"
	"  doctor               what this host can enforce\n"
	"  setup-cgroup         delegate memory, pids and cpu to workers; check it\n"
	"  retry ID...          queue finished tasks again, under new ids\n"
	"  watch                print one line per result as it lands\n"
	"  gc                   clean tmp/, dead workers' directories, old results\n"
	"  metrics              the queue for Prometheus (--textfile DIR)\n"
	"  top                  a live view of what runs and waits\n"
	"  eff ID...|--label L  what tasks used against what they asked for\n"
	"  report [--html FILE] the queue over time: timeline, throughput, waste\n"
	"  sync sqlite|postgres mirror every task into a SQL table\n"
	"  feed postgres URL    run tasks from a queue shared by several hosts\n"
	"\n"
	"global options:\n"
	"  -s, --spool DIR      the spool (default: $KART_SPOOL)\n"
	"  -h, --help           this help; 'kart COMMAND --help' for a command's\n"
	"  -V, --version        the version\n";

/* Optional parts, as the Makefile found their libraries. */
#ifdef HAVE_SQLITE
#define FEATURE_SQLITE " sync-sqlite"
#else
#define FEATURE_SQLITE ""
#endif
#ifdef HAVE_PQ
#define FEATURE_PQ " sync-postgres"
#else
#define FEATURE_PQ ""
#endif

static char **main_argv;

/* Run the helper program bin (beside kart, or in LIBEXECDIR) with our own
 * command line: the verbs that link a library no other verb needs. */
static int run_helper(const char *bin, const char *verb)
{
	char path[4096];
	find_libexec(bin, path, sizeof path);
	execv(path, main_argv);
	fprintf(stderr, "kart %s: cannot run %s: %s\n", verb, path, strerror(errno));
	return 1;
}

/* The sync verbs link libsqlite3 and libpq, which with what they pull in
 * are 24 more shared libraries: 5 ms more for every kart submit or status.
 * They live in kart-sync (this same main, built with KART_SYNC_BIN), and
 * kart runs it for them with its own command line. */
#ifndef KART_SYNC_BIN
static int cmd_in_sync(struct ctx *c, int argc, char **argv)
{
	(void)c, (void)argc;
	return run_helper("kart-sync", argv[0]);
}
#define cmd_sync cmd_in_sync
#define cmd_feed cmd_in_sync
/* kart-sync opens the spool itself, in its own process. */
#define SYNC_SPOOL 0
#else
#define SYNC_SPOOL VERB_SPOOL
#endif
/* kart top links ncurses: it lives in kart-top (KART_TOP_BIN), likewise. */
#ifndef KART_TOP_BIN
static int cmd_in_top(struct ctx *c, int argc, char **argv)
{
	(void)c, (void)argc;
	return run_helper("kart-top", argv[0]);
}
#define cmd_top cmd_in_top
#define TOP_SPOOL 0
#else
#define TOP_SPOOL VERB_SPOOL
#endif

/* VERB_SPOOL: main opens the spool before the verb runs (unless help is
 * asked for), so no verb repeats the opening and its errors. submit opens
 * it only without --to, and feed keeps it in its own state. */
static const struct verb {
	const char *name;
	int (*fn)(struct ctx *, int, char **);
	unsigned flags;
} verbs[] = {
	{"init", cmd_init, 0},
	{"submit", cmd_submit, VERB_WRITES},
	{"worker", cmd_worker, VERB_SPOOL | VERB_WRITES},
	{"status", cmd_status, VERB_SPOOL},
	{"wait", cmd_wait, VERB_SPOOL},
	{"cat", cmd_cat, VERB_SPOOL},
	{"cancel", cmd_cancel, VERB_SPOOL | VERB_WRITES},
	{"doctor", cmd_doctor, 0},
	{"hold", cmd_hold, VERB_SPOOL | VERB_WRITES},
	{"release", cmd_release, VERB_SPOOL | VERB_WRITES},
	{"edit", cmd_edit, VERB_SPOOL | VERB_WRITES},
	{"pause", cmd_pause, VERB_SPOOL | VERB_WRITES},
	{"resume", cmd_resume, VERB_SPOOL | VERB_WRITES},
	{"setup-cgroup", cmd_setup_cgroup, 0},
	{"retry", cmd_retry, VERB_SPOOL | VERB_WRITES},
	{"watch", cmd_watch, VERB_SPOOL},
	{"gc", cmd_gc, VERB_SPOOL | VERB_WRITES},
	{"metrics", cmd_metrics, VERB_SPOOL},
	{"top", cmd_top, TOP_SPOOL},
	{"eff", cmd_eff, VERB_SPOOL},
	{"report", cmd_report, VERB_SPOOL},
	{"sync", cmd_sync, SYNC_SPOOL},
	{"feed", cmd_feed, VERB_WRITES},
};

int usage_error(const char *verb, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	(void)vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	_cleanup_free_ char *sbuf = term_safe(buf); /* it quotes what was typed */
	if (verb)
		fprintf(stderr, "kart %s: %s (see 'kart %s --help')\n", verb, sbuf, verb);
	else
		fprintf(stderr, "kart: %s (see 'kart --help')\n", sbuf);
	return EXIT_USAGE;
}

bool asks_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			break;
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return true;
	}
	return false;
}

void ctx_open_spool(struct ctx *c, struct spool *sp)
{
	char err[512];
	if (!c->spool_path || !*c->spool_path) {
		fprintf(stderr, "kart: no spool: give -s DIR or set KART_SPOOL\n");
		exit(EXIT_USAGE);
	}
	if (spool_open(c->spool_path, sp, err, sizeof err) < 0 ||
	    (c->writes && spool_format_check(sp, err, sizeof err) < 0)) {
		fprintf(stderr, "kart: %s\n", err);
		exit(1);
	}
}

void warn_no_worker(struct spool *sp, const char *verb)
{
	if (spool_live_workers(sp) == 0)
		say_no_worker(sp, verb);
}

void say_no_worker(const struct spool *sp, const char *verb)
{
	fprintf(stderr,
		"kart %s: no worker is running on %s: tasks wait in new/ until one starts:\n"
		"  kart -s %s worker --daemon    (or: systemctl --user start kart-worker)\n",
		verb, sp->path, sp->path);
}

int main(int argc, char **argv)
{
	struct ctx c = {.spool_path = getenv("KART_SPOOL"), .prog = "kart"};
	main_argv = argv;
#ifdef KART_SYNC_BIN
	submit_to_queue = feed_submit;
#endif
	bool help = false, version = false;
	const struct opt opts[] = {
		OPT_STRING('s', "spool", &c.spool_path, "DIR", "the spool (default: $KART_SPOOL)"),
		OPT_BOOL('h', "help", &help, "this help"),
		OPT_BOOL('V', "version", &version, "the version"),
		OPT_END(),
	};
	/* Lease breaks signal SIGIO; its default action would kill us. */
	sigset_t io;
	sigemptyset(&io);
	sigaddset(&io, SIGIO);
	sigprocmask(SIG_BLOCK, &io, NULL);

	/* Ours end at the verb, whose own come after it. */
	struct opts_rest rest;
	opts_parse(NULL, argc, argv, opts, NULL, OPTS_STOP_AT_NON_OPTION, &rest);
	if (help) {
		fputs(main_help, stdout);
		return 0;
	}
	if (version) {
		printf("kart %s\nfeatures: backend-bwrap backend-container backend-none%s%s\n", KART_VERSION,
		       FEATURE_SQLITE, FEATURE_PQ);
		return 0;
	}
	if (rest.argc == 0)
		return usage_error(NULL, "no command given");
	const char *verb = rest.argv[0];
	for (size_t i = 0; i < ARRAY_SIZE(verbs); i++) {
		if (strcmp(verbs[i].name, verb) == 0) {
			char prog[64];
			snprintf(prog, sizeof prog, "kart %s", verb);
			log_set_prog(xstrdup(prog));
			c.writes = verbs[i].flags & VERB_WRITES;
			c.sp = (struct spool){.root = -1, .tmp = -1, .new = -1, .cur = -1, .done = -1, .drop = -1, .dropd = -1, .ids = -1};
			if ((verbs[i].flags & VERB_SPOOL) && !asks_help(rest.argc, rest.argv))
				ctx_open_spool(&c, &c.sp);
			int rc = verbs[i].fn(&c, rest.argc, rest.argv);
			spool_close(&c.sp);
			return rc;
		}
	}
	return usage_error(NULL, "unknown command '%s'", verb);
}
