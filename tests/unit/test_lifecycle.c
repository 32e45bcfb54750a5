/* test_lifecycle.c - the task state table (transitions[][] in
 * src/worker/worker_state.c): docs/DESIGN.md prints it as the code has it, every
 * state can be reached, and no file changes a task's state but through
 * it. KART_WRITE_DOCS=1 writes the table into docs/DESIGN.md instead of
 * comparing (then review the diff). Run from the source tree's top, as
 * make check does. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_doc_matches),
		cmocka_unit_test(test_reachable),
		cmocka_unit_test(test_one_writer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
