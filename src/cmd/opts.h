/* opts.h - a verb's options from a table, as git's parse-options: each
 * verb lists its options with the OPT_* rows below, opts_parse reads
 * them wherever they stand among the arguments (GNU permutation: `kart
 * wait ID --timeout 5s`), "--" ends them, and --help prints the verb's
 * help with a line per row. A bad option is a usage error: the message,
 * and exit 2. */
#ifndef KART_OPTS_H
#define KART_OPTS_H

#include <stdbool.h>
#include <stdint.h>

enum opt_type {
	OPT_T_END,
	OPT_T_GROUP,    /* a heading in --help */
	OPT_T_BOOL,     /* bool *: set */
	OPT_T_SET_INT,  /* int *: set to min */
	OPT_T_STRING,   /* const char **: the value */
	OPT_T_INT,      /* int *: a number from min to max */
	OPT_T_DURATION, /* int64_t *: seconds (90, 90s, 5m, 2h, 7d); min 1: not 0 */
	OPT_T_CALLBACK, /* cb(row, value, ctx) */
};

/* How a row takes its value. */
enum {
	OPTF_OPTARG = 1, /* only as --long=VALUE; without one the callback gets NULL */
};

struct opt;
struct opts_ctx;
/* 0, or an exit status (the message printed): the parse ends with it. */
typedef int opt_cb(const struct opt *o, const char *arg, struct opts_ctx *ctx);

struct opt {
	enum opt_type type;
	int short_name;
	const char *long_name;
	void *value;
	const char *argh; /* the value's name in --help; NULL: takes none */
	const char *help;
	unsigned flags;
	opt_cb *cb;
	long long min, max;
};

#define OPT_END() {OPT_T_END, 0, NULL, NULL, NULL, NULL, 0, NULL, 0, 0}
#define OPT_GROUP(h) {OPT_T_GROUP, 0, NULL, NULL, NULL, h, 0, NULL, 0, 0}
#define OPT_BOOL(s, l, v, h) {OPT_T_BOOL, s, l, v, NULL, h, 0, NULL, 0, 0}
#define OPT_SET_INT(s, l, v, h, n) {OPT_T_SET_INT, s, l, v, NULL, h, 0, NULL, n, 0}
#define OPT_STRING(s, l, v, a, h) {OPT_T_STRING, s, l, v, a, h, 0, NULL, 0, 0}
#define OPT_INT(s, l, v, a, h, lo, hi) {OPT_T_INT, s, l, v, a, h, 0, NULL, lo, hi}
#define OPT_DURATION(s, l, v, h, lo) {OPT_T_DURATION, s, l, v, "DUR", h, 0, NULL, lo, 0}
#define OPT_CALLBACK(s, l, v, a, h, f) {OPT_T_CALLBACK, s, l, v, a, h, 0, f, 0, 0}
#define OPT_CALLBACK_F(s, l, v, a, h, fl, f) {OPT_T_CALLBACK, s, l, v, a, h, fl, f, 0, 0}

/* A verb's --help: head (usage lines and what it does), the rows of the
 * table, then tail (the exit status). unknown, if set, is told of an
 * unknown option before its usage error, with the words from the first
 * operand on (kart submit make -j2: "make", "-j2"): it may say more. */
struct opts_help {
	const char *head, *tail;
	void (*unknown)(int argc, char **argv);
};

enum {
	OPTS_STOP_AT_NON_OPTION = 1, /* main's own options: the verb ends them */
};

/* The parse's state, for a callback that takes a second value (kart
 * submit --to postgres URL): opts_next_arg. */
struct opts_ctx {
	const char *verb;
	int argc, i;
	char **argv;
};
/* The argument after the current option's, taken as its second value;
 * NULL if there is none, or it is "--". */
const char *opts_next_arg(struct opts_ctx *ctx);

/* What is left once the options are read: the other arguments, in their
 * order, in argv[0..argc); those from dashdash on came after "--"
 * (dashdash == argc: none did, or there was no "--"). */
struct opts_rest {
	int argc;
	char **argv;
	int dashdash;
	bool had_dashdash;
};

/* Read argv[1..argc) (argv[0] is the verb) against the table. --help
 * and -h print the help and exit 0; a bad option prints a usage error
 * and exits 2; a callback's non-zero status exits with it. */
void opts_parse(const char *verb, int argc, char **argv, const struct opt *opts,
		const struct opts_help *help, unsigned flags, struct opts_rest *rest);
/* Print the help of a table (head, the rows, tail) on stdout. */
void opts_usage(const struct opt *opts, const struct opts_help *help);

#endif
