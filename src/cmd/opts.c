/* opts.c - see opts.h. */
#define _GNU_SOURCE
#include "opts.h"

#include "cmd.h"
#include "util.h"

/* A usage error ends the parse: the verb's one line, exit 2. */
#define USAGE(ctx, ...) exit(usage_error((ctx)->verb, __VA_ARGS__))

/* An unknown option at argv[ctx->i]: the verb's hook, if any, gets the
 * operands read so far (argv[0..out)) and the words from here on. */
static void tell_unknown(const struct opts_help *help, struct opts_ctx *ctx, int out)
{
	if (!help || !help->unknown || out == 0)
		return;
	int n = out + (ctx->argc - ctx->i);
	char **words = xmalloc((size_t)n * sizeof *words);
	memcpy(words, ctx->argv, (size_t)out * sizeof *words);
	memcpy(words + out, ctx->argv + ctx->i, (size_t)(ctx->argc - ctx->i) * sizeof *words);
	help->unknown(n, words);
	free(words);
}

const char *opts_next_arg(struct opts_ctx *ctx)
{
	if (ctx->i + 1 >= ctx->argc || strcmp(ctx->argv[ctx->i + 1], "--") == 0)
		return NULL;
	return ctx->argv[++ctx->i];
}

/* The option as the user spelled it, for messages. */
static void spelled(const struct opt *o, bool is_long, char *buf, size_t len)
{
	if (is_long)
		snprintf(buf, len, "--%s", o->long_name);
	else
		snprintf(buf, len, "-%c", o->short_name);
}

static void take(const struct opt *o, const char *arg, bool is_long, struct opts_ctx *ctx)
{
	char name[64];
	long long n;
	int64_t d;
	spelled(o, is_long, name, sizeof name);
	switch (o->type) {
	case OPT_T_BOOL: *(bool *)o->value = true; break;
	case OPT_T_SET_INT: *(int *)o->value = (int)o->min; break;
	case OPT_T_STRING: *(const char **)o->value = arg; break;
	case OPT_T_INT:
		if (parse_int(arg, o->min, o->max, &n) < 0)
			USAGE(ctx, "%s %s: not a number from %lld to %lld", name, arg, o->min, o->max);
		*(int *)o->value = (int)n;
		break;
	case OPT_T_DURATION:
		if (parse_duration_s(arg, &d) < 0 || d < o->min)
			USAGE(ctx, "%s %s: not a duration%s (90, 90s, 5m, 2h, 7d)", name, arg,
			      o->min > 0 ? " above 0" : "");
		*(int64_t *)o->value = d;
		break;
	case OPT_T_CALLBACK: {
		int rc = o->cb(o, arg, ctx);
		if (rc)
			exit(rc);
		break;
	}
	default: break;
	}
}

/* --name, --name=VALUE, or an unambiguous start of a name (as
 * getopt_long allows: --time for --timeout). */
static const struct opt *find_long(const struct opt *opts, const char *name, size_t len,
				   struct opts_ctx *ctx, const char *as_given)
{
	const struct opt *hit = NULL;
	int hits = 0;
	for (const struct opt *o = opts; o->type != OPT_T_END; o++) {
		if (!o->long_name || strncmp(o->long_name, name, len) != 0)
			continue;
		if (strlen(o->long_name) == len)
			return o;
		hit = o;
		hits++;
	}
	if (hits > 1)
		USAGE(ctx, "option '%s' is ambiguous", as_given);
	return hit;
}

static const struct opt *find_short(const struct opt *opts, int c)
{
	for (const struct opt *o = opts; o->type != OPT_T_END; o++)
		if (o->short_name && o->short_name == c)
			return o;
	return NULL;
}

static bool is_help(const char *a) { return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0; }

void opts_parse(const char *verb, int argc, char **argv, const struct opt *opts,
		const struct opts_help *help, unsigned flags, struct opts_rest *rest)
{
	struct opts_ctx ctx = {.verb = verb, .argc = argc, .argv = argv};
	/* The arguments that are no option, in their order: written over
	 * argv from the start, which the reading is always ahead of. */
	int out = 0;
	rest->had_dashdash = false;
	for (ctx.i = 1; ctx.i < argc; ctx.i++) {
		char *a = argv[ctx.i];
		if (strcmp(a, "--") == 0 && (flags & OPTS_STOP_AT_NON_OPTION)) {
			ctx.i++;
			break;
		}
		if (strcmp(a, "--") == 0) {
			rest->had_dashdash = true;
			rest->dashdash = out;
			for (ctx.i++; ctx.i < argc; ctx.i++)
				argv[out++] = argv[ctx.i];
			break;
		}
		if (a[0] != '-' || a[1] == '\0') { /* an operand, or "-" (stdin) */
			if (flags & OPTS_STOP_AT_NON_OPTION)
				break;
			argv[out++] = a;
			continue;
		}
		if (is_help(a) && !(flags & OPTS_STOP_AT_NON_OPTION)) {
			opts_usage(opts, help);
			exit(0);
		}
		if (a[1] == '-') {
			const char *name = a + 2, *eq = strchr(name, '=');
			size_t len = eq ? (size_t)(eq - name) : strlen(name);
			const struct opt *o = find_long(opts, name, len, &ctx, a);
			if (!o) {
				tell_unknown(help, &ctx, out);
				USAGE(&ctx, "unknown option '%.*s'", (int)(len + 2), a);
			}
			const char *arg = eq ? eq + 1 : NULL;
			if (!o->argh && arg)
				USAGE(&ctx, "option '--%s' takes no value", o->long_name);
			if (o->argh && !arg && !(o->flags & OPTF_OPTARG)) {
				if (ctx.i + 1 >= argc)
					USAGE(&ctx, "option '--%s' needs a value", o->long_name);
				arg = argv[++ctx.i];
			}
			take(o, arg, true, &ctx);
			continue;
		}
		/* -abc: flags together; the first that takes a value takes the
		 * rest of the word, or the next argument. */
		for (const char *p = a + 1; *p; p++) {
			const struct opt *o = find_short(opts, (unsigned char)*p);
			if (!o) {
				tell_unknown(help, &ctx, out);
				USAGE(&ctx, "unknown option '-%c'", *p);
			}
			if (!o->argh) {
				take(o, NULL, false, &ctx);
				continue;
			}
			const char *arg = p[1] ? p + 1 : NULL;
			if (!arg) {
				if (ctx.i + 1 >= argc)
					USAGE(&ctx, "option '-%c' needs a value", *p);
				arg = argv[++ctx.i];
			}
			take(o, arg, false, &ctx);
			break;
		}
	}
	if (flags & OPTS_STOP_AT_NON_OPTION) {
		/* Left where they are: the verb's argv, as given. */
		rest->argc = argc - ctx.i;
		rest->argv = argv + ctx.i;
		rest->dashdash = rest->argc;
		return;
	}
	if (!rest->had_dashdash)
		rest->dashdash = out;
	rest->argc = out;
	rest->argv = argv;
	if (out < argc)
		argv[out] = NULL;
}

/* ---- --help ---------------------------------------------------------- */

enum { HELP_WIDTH = 79, HELP_COL_MAX = 22 };

static size_t opt_label(const struct opt *o, char *buf, size_t len)
{
	int n;
	const char *a = o->argh ? o->argh : "";
	bool opt = o->flags & OPTF_OPTARG;
	if (o->short_name && o->long_name)
		n = snprintf(buf, len, "-%c, --%s%s%s%s", o->short_name, o->long_name,
			     o->argh ? (opt ? "[=" : " ") : "", a, o->argh && opt ? "]" : "");
	else if (o->long_name)
		n = snprintf(buf, len, "--%s%s%s%s", o->long_name, o->argh ? (opt ? "[=" : " ") : "", a,
			     o->argh && opt ? "]" : "");
	else
		n = snprintf(buf, len, "-%c%s%s", o->short_name, o->argh ? " " : "", a);
	return n < 0 ? 0 : (size_t)n;
}

/* text, wrapped to the help's width, each line after the first starting
 * at column col; a "\n" in it starts a line. */
static void wrapped(const char *text, size_t col)
{
	size_t room = HELP_WIDTH > col + 20 ? HELP_WIDTH - col : 20;
	bool first = true;
	for (const char *p = text; *p || first;) {
		size_t n = strcspn(p, "\n"), take = n;
		if (n > room) {
			take = room;
			while (take > 0 && p[take] != ' ')
				take--;
			if (take == 0)
				take = strcspn(p, " \n");
		}
		printf("%*s%.*s\n", first ? 0 : (int)col, "", (int)take, p);
		first = false;
		p += take;
		if (*p == ' ' || *p == '\n')
			p++;
	}
}

void opts_usage(const struct opt *opts, const struct opts_help *help)
{
	char label[128];
	size_t col = 0;
	for (const struct opt *o = opts; o->type != OPT_T_END; o++)
		if (o->type != OPT_T_GROUP) {
			size_t l = 2 + opt_label(o, label, sizeof label) + 2;
			if (l > col && l <= HELP_COL_MAX)
				col = l;
		}
	if (!col)
		col = HELP_COL_MAX;
	fputs(help->head, stdout);
	bool first = true;
	for (const struct opt *o = opts; o->type != OPT_T_END; o++) {
		if (o->type == OPT_T_GROUP) {
			printf("\n%s\n", o->help);
			first = false;
			continue;
		}
		if (first) {
			fputc('\n', stdout);
			first = false;
		}
		size_t l = 2 + opt_label(o, label, sizeof label);
		/* Too long for the column: the help starts on the next line. */
		if (l + 2 > col)
			printf("  %s\n%*s", label, (int)col, "");
		else
			printf("  %s%*s", label, (int)(col - l), "");
		wrapped(o->help, col);
	}
	if (help->tail) {
		fputc('\n', stdout);
		fputs(help->tail, stdout);
	}
}
