/* test_backend.c - the backend interface (src/backend/backend.h): every
 * backend of the policy has a row, with the operations the worker calls
 * unconditionally; and no file outside src/backend/ (and the policy,
 * which reads the name) asks which backend it is: a backend's difference
 * is an operation or a property of struct backend, never an `if` in the
 * worker. Run from the source tree's top, as make check does. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <glob.h>
#include <regex.h>
#include <cmocka.h>

#include "backend.h"
#include "policy.h"

/* What names a backend: the policy's ids, the implementations, and the
 * flags the worker once kept for them. */
#define NAMES_A_BACKEND                                                                        \
	"\\bBACKEND_[A-Z_]+\\b|\\bbackend_(bwrap|none|container|slurm)\\b|->(none|container|slurm)\\b|" \
	"\\.(none|container|slurm) =|\\bcontainer_oom\\b|->cname\\b|->coom\\b|\\bclabel\\b"

static void test_no_backend_outside(void **state)
{
	(void)state;
	regex_t re;
	assert_int_equal(regcomp(&re, NAMES_A_BACKEND, REG_EXTENDED | REG_NOSUB), 0);
	glob_t g;
	assert_int_equal(glob("src/*/*.[ch]", 0, NULL, &g), 0);
	int found = 0;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		const char *p = g.gl_pathv[i];
		if (strncmp(p, "src/backend/", 12) == 0 || strncmp(p, "src/policy/", 11) == 0)
			continue;
		FILE *f = fopen(p, "re");
		assert_non_null(f);
		char line[4096];
		for (int n = 1; fgets(line, sizeof line, f); n++)
			if (regexec(&re, line, 0, NULL, 0) == 0) {
				fprintf(stderr, "%s:%d: %s", p, n, line);
				found++;
			}
		fclose(f);
	}
	globfree(&g);
	regfree(&re);
	if (found)
		fail_msg("%d line(s) outside src/backend/ name a backend (above): make it an "
			 "operation or a property of struct backend", found);
}

/* The pattern finds what it is for (else the test above proves nothing). */
static void test_pattern_finds(void **state)
{
	(void)state;
	regex_t re;
	assert_int_equal(regcomp(&re, NAMES_A_BACKEND, REG_EXTENDED | REG_NOSUB), 0);
	static const char *const hits[] = {
		"\tif (w->pol->backend == BACKEND_CONTAINER)\n", "\tbool inplace = s->none;\n",
		"\t.container = true,\n", "\tif (w->be == &backend_none)\n",
	};
	for (size_t i = 0; i < sizeof hits / sizeof hits[0]; i++)
		assert_int_equal(regexec(&re, hits[i], 0, NULL, 0), 0);
	static const char *const misses[] = {
		"\tt->be->signal(w, t, SIGTERM);\n", "\tr->backend = t->be->name;\n",
		"\tcontainer_oom_killed(pol, name, 5000);\n",
	};
	for (size_t i = 0; i < sizeof misses / sizeof misses[0]; i++)
		assert_int_not_equal(regexec(&re, misses[i], 0, NULL, 0), 0);
	regfree(&re);
}

/* Each of the policy's backends has its row, under the policy's name for
 * it, with every operation the worker calls without asking. */
static void test_table(void **state)
{
	(void)state;
	static const enum backend_id ids[] = {BACKEND_BWRAP, BACKEND_NONE, BACKEND_CONTAINER};
	for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
		const struct backend *be = backend_get(ids[i]);
		assert_non_null(be);
		assert_string_equal(be->name, backend_name(ids[i]));
		assert_int_equal(backend_parse(be->name), (int)ids[i]);
		assert_non_null(be->prepare);
		assert_non_null(be->spawn);
		assert_non_null(be->started);
		assert_non_null(be->unspawned);
		assert_non_null(be->ready);
		assert_non_null(be->signal);
		assert_non_null(be->pause);
		assert_non_null(be->reap);
		assert_non_null(be->usage);
	}
}

static void test_usage_unknown(void **state)
{
	(void)state;
	struct backend_usage u;
	memset(&u, 0, sizeof u);
	backend_usage_init(&u);
	/* Every figure (the int64_t fields before by[]); no family said. */
	const int64_t *f = (const int64_t *)&u;
	for (size_t i = 0; i < offsetof(struct backend_usage, by) / sizeof *f; i++)
		assert_int_equal(f[i], USAGE_UNKNOWN);
	for (int i = 0; i < UF__N; i++) {
		assert_null(u.by[i]);
		assert_null(u.why[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_backend_outside),
		cmocka_unit_test(test_pattern_finds),
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_usage_unknown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
