/* test_lifecycle.c - the task state table (transitions[][] in
 * src/worker/worker_state.c): docs/DESIGN.md prints it as the code has it, every
 * state can be reached, no file changes a task's state but through it,
 * and no action fires an event itself (one event per turn: an action
 * returns the next, and task_event loops). KART_WRITE_DOCS=1 writes the
 * table into docs/DESIGN.md instead of comparing (then review the diff).
 * Run from the source tree's top, as make check does. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>
#include <glob.h>
#include <cmocka.h>

#include "worker_int.h"

#define DOC "docs/DESIGN.md"
#define BEGIN "<!-- transitions: tests/unit/test_lifecycle.c checks it, KART_WRITE_DOCS=1 writes it -->\n"
#define END "<!-- /transitions -->\n"

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
		fwrite(chunk, 1, n, m);
	fclose(f);
	fclose(m);
	return buf;
}

static char *table(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	task_table_markdown(m);
	fclose(m);
	return buf;
}

static void test_doc_matches(void **state)
{
	(void)state;
	char *doc = slurp(DOC);
	assert_non_null(doc);
	char *b = strstr(doc, BEGIN), *e = b ? strstr(b, END) : NULL;
	if (!b || !e)
		fail_msg(DOC " has no " BEGIN " ... " END " block");
	b += strlen(BEGIN);
	char *t = table();
	size_t tl = strlen(t);
	if (getenv("KART_WRITE_DOCS")) {
		FILE *f = fopen(DOC, "we");
		assert_non_null(f);
		fwrite(doc, 1, (size_t)(b - doc), f);
		fwrite(t, 1, tl, f);
		fputs(e, f);
		assert_int_equal(fclose(f), 0);
	} else if ((size_t)(e - b) != tl || memcmp(b, t, tl) != 0) {
		fprintf(stderr, "the code's table:\n%s", t);
		fail_msg(DOC "'s table of transitions is not the code's (KART_WRITE_DOCS=1 rewrites it)");
	}
	free(t);
	free(doc);
}

/* Every state but the first is entered from another, and every row is
 * named: a row added without its way in fails here. */
static void test_reachable(void **state)
{
	(void)state;
	char *t = table();
	int rows = 0;
	for (char *line = strtok(t, "\n"); line; line = strtok(NULL, "\n")) {
		char name[32], want[64];
		if (sscanf(line, "| `%31[A-Z_]`", name) != 1)
			continue; /* the header, its separator */
		if (rows++ == 0)
			continue; /* the first state: a task is made in it */
		snprintf(want, sizeof want, "→ `%s`", name);
		char *all = table();
		if (!strstr(all, want))
			fail_msg("no event leads to %s", name);
		free(all);
	}
	assert_int_equal(rows, TS__N);
	free(t);
}

/* "t->state =" is written in task_event alone. */
static void test_one_writer(void **state)
{
	(void)state;
	glob_t g;
	assert_int_equal(glob("src/*/*.[ch]", 0, NULL, &g), 0);
	int writes = 0;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		char *s = slurp(g.gl_pathv[i]);
		assert_non_null(s);
		for (char *p = s; (p = strstr(p, "->state = ")) != NULL; p++) {
			/* Other structs' "state" fields are not a task's. */
			if (p - s >= 1 && p[-1] == 't' && (p - s < 2 || p[-2] == ' ' || p[-2] == '\t' || p[-2] == '(')) {
				if (strcmp(g.gl_pathv[i], "src/worker/worker_state.c") != 0)
					fail_msg("%s changes a task's state outside task_event", g.gl_pathv[i]);
				writes++;
			}
		}
		free(s);
	}
	globfree(&g);
	assert_int_equal(writes, 1);
}

/* Holding a slot is a property of the state: a lane's slots held, the
 * tasks running and those with the commit thread are counted in
 * worker_state.c alone (enter), as a task's state changes. */
static void test_slots_counted_once(void **state)
{
	(void)state;
	static const char *const counts[] = {"used[", "nrunning", "ncommit"};
	static const char *const ops[] = {"++", "--", " += ", " -= ", " = "};
	glob_t g;
	assert_int_equal(glob("src/*/*.c", 0, NULL, &g), 0);
	int writes = 0;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		char *s = slurp(g.gl_pathv[i]);
		assert_non_null(s);
		for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n"))
			for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
				char *p = strstr(line, counts[c]);
				if (!p || (p > line && p[-1] != '>' && p[-1] != '.'))
					continue; /* not a member (w->used[, w.nrunning) */
				const char *after = p + strlen(counts[c]);
				if (counts[c][strlen(counts[c]) - 1] == '[')
					after = strchr(after, ']') ? strchr(after, ']') + 1 : after;
				/* the whole operand, w->used[l]: what stands before it */
				const char *b = p;
				while (b > line && (isalnum((unsigned char)b[-1]) || b[-1] == '_' ||
						    b[-1] == '>' || b[-1] == '-' || b[-1] == '.'))
					b--;
				while (b < p && *b == '-' && b[1] != '>')
					b++; /* a "--" before it is not the operand's */
				bool write = b - line >= 2 && (strncmp(b - 2, "++", 2) == 0 ||
							      strncmp(b - 2, "--", 2) == 0);
				for (size_t o = 0; o < sizeof ops / sizeof *ops; o++)
					write |= strncmp(after, ops[o], strlen(ops[o])) == 0;
				if (!write)
					continue;
				if (strcmp(g.gl_pathv[i], "src/worker/worker_state.c") != 0)
					fail_msg("%s counts a slot outside the state machine: %s",
						 g.gl_pathv[i], line);
				writes++;
			}
		free(s);
	}
	globfree(&g);
	assert_true(writes >= 3);
}

/* ---- no action calls task_event ------------------------------------------
 *
 * A call graph of the worker's and the backends' files, read from the
 * source as the house style lays it out (a definition's name on a line
 * of its own at the margin, its body from a "{" to a "}" there): each
 * function's callees are the names followed by "(" in its body, and a
 * call through a member (t->be->reap(...)) stands for every function a
 * table assigns to that member (.reap = container_reap). From each
 * function act() calls, task_event must not be reachable. Coarse on
 * purpose (a static name defined twice is one node): it can only find
 * too much, never too little. */

#define FN_MAX 2048
#define CALLS_MAX 64
static struct fn {
	char name[64];
	char calls[CALLS_MAX][64];
	int ncalls;
	bool member[CALLS_MAX]; /* called through a member: a table's entry */
} fns[FN_MAX];
static int nfns;
static struct {
	char member[64], fn[64];
} assigns[FN_MAX];
static int nassigns;

static bool keyword(const char *w)
{
	static const char *const kw[] = {"if", "while", "for", "switch", "return", "sizeof",
					 "defined", "__attribute__", "offsetof", "ARRAY_SIZE"};
	for (size_t i = 0; i < sizeof kw / sizeof *kw; i++)
		if (strcmp(w, kw[i]) == 0)
			return true;
	return false;
}

static void add_call(struct fn *f, const char *name, bool member)
{
	for (int i = 0; i < f->ncalls; i++)
		if (strcmp(f->calls[i], name) == 0 && f->member[i] == member)
			return;
	if (f->ncalls < CALLS_MAX) {
		snprintf(f->calls[f->ncalls], sizeof f->calls[0], "%s", name);
		f->member[f->ncalls++] = member;
	}
}

static void read_graph(const char *path)
{
	FILE *fp = fopen(path, "re");
	assert_non_null(fp);
	char line[1024], cand[64] = "";
	struct fn *cur = NULL;
	while (fgets(line, sizeof line, fp)) {
		/* .member = function, in a table */
		const char *d = line;
		while (*d == ' ' || *d == '\t')
			d++;
		char m[64], v[64];
		if (nassigns < FN_MAX && sscanf(d, ".%63[A-Za-z0-9_] = %63[A-Za-z0-9_],", m, v) == 2) {
			snprintf(assigns[nassigns].member, sizeof m, "%s", m);
			snprintf(assigns[nassigns++].fn, sizeof v, "%s", v);
		}
		if (!cur) {
			if (strcmp(line, "{\n") == 0 && cand[0]) {
				assert_true(nfns < FN_MAX);
				cur = &fns[nfns++];
				memset(cur, 0, sizeof *cur);
				snprintf(cur->name, sizeof cur->name, "%s", cand);
			} else if (isalpha((unsigned char)line[0]) && strchr(line, '(')) {
				/* the name before the first '(' */
				const char *o = strchr(line, '('), *b = o;
				while (b > line && (isalnum((unsigned char)b[-1]) || b[-1] == '_'))
					b--;
				snprintf(cand, sizeof cand, "%.*s", (int)(o - b), b);
				if (strchr(line, ';') || strchr(line, '='))
					cand[0] = '\0'; /* a prototype, a variable */
			} else if (line[0] != ' ' && line[0] != '\t' && line[0] != '\n') {
				cand[0] = '\0';
			}
			continue;
		}
		if (strcmp(line, "}\n") == 0) {
			cur = NULL;
			cand[0] = '\0';
			continue;
		}
		for (const char *p = line; *p; p++) {
			if (!(isalpha((unsigned char)*p) || *p == '_') ||
			    (p > line && (isalnum((unsigned char)p[-1]) || p[-1] == '_')))
				continue;
			const char *e = p;
			while (isalnum((unsigned char)*e) || *e == '_')
				e++;
			const char *q = e;
			while (*q == ' ')
				q++;
			if (*q == '(' && e - p < 64) {
				char w[64];
				snprintf(w, sizeof w, "%.*s", (int)(e - p), p);
				bool member = (p > line && p[-1] == '.') ||
					      (p - line >= 2 && p[-1] == '>' && p[-2] == '-');
				if (!keyword(w))
					add_call(cur, w, member);
			}
			p = e - 1;
		}
	}
	fclose(fp);
}

static struct fn *fn_find(const char *name, int from)
{
	for (int i = from; i < nfns; i++)
		if (strcmp(fns[i].name, name) == 0)
			return &fns[i];
	return NULL;
}

/* Can name reach task_event? path: the way, for the message. */
static bool reaches(const char *name, bool *seen, char *path, size_t len, int depth)
{
	if (strcmp(name, "task_event") == 0)
		return true;
	if (depth > 64)
		return false;
	bool any = false;
	for (int i = 0; !any && i < nfns; i++) {
		if (strcmp(fns[i].name, name) != 0 || seen[i])
			continue;
		seen[i] = true;
		for (int c = 0; !any && c < fns[i].ncalls; c++) {
			const char *callee = fns[i].calls[c];
			if (!fns[i].member[c]) {
				any = reaches(callee, seen, path, len, depth + 1);
			} else {
				for (int a = 0; !any && a < nassigns; a++)
					if (strcmp(assigns[a].member, callee) == 0)
						any = reaches(assigns[a].fn, seen, path, len, depth + 1);
			}
		}
		if (any) {
			size_t l = strlen(path);
			snprintf(path + l, len - l, " <- %s", name);
		}
	}
	return any;
}

static void graph_read(void)
{
	nfns = nassigns = 0;
	static const char *const globs[] = {"src/worker/*.c", "src/backend/*.c"};
	for (size_t k = 0; k < sizeof globs / sizeof *globs; k++) {
		glob_t g;
		assert_int_equal(glob(globs[k], 0, NULL, &g), 0);
		for (size_t i = 0; i < g.gl_pathc; i++)
			read_graph(g.gl_pathv[i]);
		globfree(&g);
	}
}

static void test_no_action_fires(void **state)
{
	(void)state;
	graph_read();
	/* The graph is read: task_event calls act, which calls actions. */
	struct fn *te = fn_find("task_event", 0), *act = fn_find("act", 0);
	if (!te || !act)
		fail_msg("worker_state.c has no task_event() or act() to read");
	bool calls_act = false;
	for (int i = 0; i < te->ncalls; i++)
		calls_act |= strcmp(te->calls[i], "act") == 0;
	assert_true(calls_act);
	assert_true(act->ncalls >= 10);
	for (int c = 0; c < act->ncalls; c++) {
		static bool seen[FN_MAX];
		char path[1024] = "task_event";
		memset(seen, 0, sizeof seen);
		const char *callee = act->calls[c];
		if (act->member[c]) {
			for (int a = 0; a < nassigns; a++)
				if (strcmp(assigns[a].member, callee) == 0 &&
				    reaches(assigns[a].fn, seen, path, sizeof path, 0))
					fail_msg("an action fires an event itself: %s <- act", path);
		} else if (reaches(callee, seen, path, sizeof path, 0)) {
			fail_msg("an action fires an event itself: %s <- act", path);
		}
	}
}

/* The reading finds such a call where there is one (else the test above
 * proves nothing): finish_unstarted fires RESULT, and start_claimed
 * reaches it. */
static void test_graph_finds(void **state)
{
	(void)state;
	graph_read();
	static bool seen[FN_MAX];
	char path[1024] = "task_event";
	assert_true(reaches("finish_unstarted", seen, path, sizeof path, 0));
	memset(seen, 0, sizeof seen);
	assert_true(reaches("start_claimed", seen, path, sizeof path, 0));
	/* and through a table: a member call to whatever is assigned */
	memset(seen, 0, sizeof seen);
	assert_non_null(fn_find("local_reap", 0));
	bool via = false;
	for (int a = 0; a < nassigns; a++)
		via |= strcmp(assigns[a].member, "reap") == 0 && strcmp(assigns[a].fn, "local_reap") == 0;
	assert_true(via);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_doc_matches),
		cmocka_unit_test(test_reachable),
		cmocka_unit_test(test_one_writer),
		cmocka_unit_test(test_slots_counted_once),
		cmocka_unit_test(test_no_action_fires),
		cmocka_unit_test(test_graph_finds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
