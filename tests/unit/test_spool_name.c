/* test_spool_name.c - the spool's names (src/spool_name.c): each builder
 * against the layout spool-layout/ documents, their inverses, names that
 * do not fit, and spool_walk (spool.c's) over a real spool (areas, order, dot names,
 * the early stop). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/stat.h>

#include "spool.h"
#include "util.h"

static void test_builders(void **state)
{
	(void)state;
	char b[64];
	assert_int_equal(spool_name_cancel(b, sizeof b, "job.2"), 0);
	assert_string_equal(b, ".job.2.cancel");
	assert_int_equal(spool_name_scratch(b, sizeof b, "job", SCRATCH_STDOUT), 0);
	assert_string_equal(b, ".job.stdout");
	assert_int_equal(spool_name_scratch(b, sizeof b, "job", SCRATCH_OUT), 0);
	assert_string_equal(b, ".job.out");
	assert_int_equal(spool_name_scratch(b, sizeof b, "job", SCRATCH_WORK), 0);
	assert_string_equal(b, ".job.work");
	assert_int_equal(spool_name_done(b, sizeof b, "job", DONE_JSON), 0);
	assert_string_equal(b, "job.json");
	assert_int_equal(spool_name_done(b, sizeof b, "job", DONE_REJECTED), 0);
	assert_string_equal(b, "job.rejected");
	/* Never cut: a name that does not fit is an error. */
	assert_int_equal(spool_name_done(b, 8, "job.x", DONE_JSON), -ENAMETOOLONG);
	assert_int_equal(spool_name_cancel(b, 8, "job"), -ENAMETOOLONG);
}

static void test_inverses(void **state)
{
	(void)state;
	char id[64];
	enum done_file f;
	assert_true(spool_done_id("a.b.json", id, sizeof id, &f));
	assert_string_equal(id, "a.b");
	assert_int_equal(f, DONE_JSON);
	assert_true(spool_done_id("x.stdout", id, sizeof id, &f));
	assert_string_equal(id, "x");
	assert_int_equal(f, DONE_STDOUT);
	assert_true(spool_done_id("x.out", id, sizeof id, &f));
	assert_int_equal(f, DONE_OUT);
	assert_false(spool_done_id("x.txt", id, sizeof id, &f));
	assert_false(spool_done_id(".json", id, sizeof id, &f)); /* no id */
	assert_false(spool_done_id("abcdef.json", id, 4, &f));   /* id too long */
	for (int i = 0; i < DONE_NFILES; i++) { /* every suffix round-trips */
		char n[64];
		assert_int_equal(spool_name_done(n, sizeof n, "t", (enum done_file)i), 0);
		assert_true(spool_done_id(n, id, sizeof id, &f));
		assert_string_equal(id, "t");
		assert_int_equal(f, i);
	}
	char name[64];
	assert_true(spool_scratch_of(".a.b.cancel", SCRATCH_CANCEL, name, sizeof name));
	assert_string_equal(name, "a.b");
	assert_false(spool_scratch_of("..cancel", SCRATCH_CANCEL, name, sizeof name));
	assert_false(spool_scratch_of(".a.cancel", SCRATCH_STDOUT, name, sizeof name));
	assert_false(spool_scratch_of("a.cancel", SCRATCH_CANCEL, name, sizeof name));
	assert_false(spool_scratch_of(".axcancel", SCRATCH_CANCEL, name, sizeof name));
	assert_false(spool_scratch_of(".abcdef.cancel", SCRATCH_CANCEL, name, 4));
}

/* The names of kart hold, kart gc, a claim's scratch seen from cur/, and
 * unique=: each built or parsed in spool_name.c alone. */
static void test_more_names(void **state)
{
	(void)state;
	char b[64];
	assert_int_equal(spool_held_name("j.1", b, sizeof b), 0);
	assert_string_equal(spool_held_id(b), "j.1"); /* round trip */
	assert_null(spool_held_id(".held."));          /* no id */
	assert_null(spool_held_id("j.1"));
	assert_null(spool_held_id(".j.1.paused"));
	assert_int_equal(spool_name_trash(b, sizeof b, "j.out"), 0);
	assert_string_equal(b, ".rm-j.out");
	assert_true(spool_is_trash(b));
	assert_false(spool_is_trash("j.out"));
	assert_false(spool_is_trash(".r-j.out"));
	assert_int_equal(spool_name_trash(b, 6, "j.out"), -ENAMETOOLONG);
	assert_true(spool_is_result_tmp(".j.json.123.tmp"));
	assert_false(spool_is_result_tmp("j.json.123.tmp")); /* not a dot name */
	assert_false(spool_is_result_tmp(".j.json.123"));
	assert_false(spool_is_result_tmp(".j.task.1.tmp"));
	assert_true(spool_is_newborn(".new.w1.42"));
	assert_false(spool_is_newborn("w1"));
	assert_false(spool_is_newborn(".newx"));
	assert_int_equal(spool_name_claim_scratch(b, sizeof b, "w1", "j", SCRATCH_PAUSED), 0);
	assert_string_equal(b, "w1/.j.paused");
	assert_int_equal(spool_name_claim_scratch(b, sizeof b, "w1", "j", SCRATCH_CANCEL), 0);
	assert_string_equal(b, "w1/.j.cancel");
	assert_int_equal(spool_name_claim_scratch(b, 8, "w1", "j", SCRATCH_NOPAUSE), -ENAMETOOLONG);
	assert_int_equal(spool_name_uniq(b, sizeof b, 1000, 0xabcULL), 0);
	assert_string_equal(b, "1000.0000000000000abc"); /* in cur/.uniq/ */
	assert_int_equal(spool_name_uniq(b, 10, 1000, 1), -ENAMETOOLONG);
}

/* The protocol's own dot names, once spelled by hand in spool*.c: each
 * builder against the spelling on disk, and the parser a reader uses
 * (kart gc, the walk's callers) recognises what it builds. */
static void test_protocol_names(void **state)
{
	(void)state;
	char b[64];
	assert_int_equal(spool_name_newborn(b, sizeof b, "w1", 42), 0);
	assert_string_equal(b, ".new.w1.42");
	assert_true(spool_is_newborn(b));
	assert_int_equal(spool_name_newborn(b, 8, "w1", 42), -ENAMETOOLONG);
	assert_int_equal(spool_name_result_tmp(b, sizeof b, "a.b", 123), 0);
	assert_string_equal(b, ".a.b.json.123.tmp");
	assert_true(spool_is_result_tmp(b));
	assert_int_equal(spool_name_result_tmp(b, 12, "a.b", 123), -ENAMETOOLONG);
	assert_int_equal(spool_name_redo(b, sizeof b, "j.task"), 0);
	assert_string_equal(b, ".j.task.redo");
	assert_false(spool_is_result_tmp(b));
	assert_int_equal(spool_name_redo(b, 8, "j.task"), -ENAMETOOLONG);
	assert_int_equal(spool_name_hoist(b, sizeof b, 1000, "alice:j"), 0);
	assert_string_equal(b, ".hoist.1000.alice:j");
	assert_int_equal(spool_name_hoist(b, 12, 1000, "alice:j"), -ENAMETOOLONG);
	assert_int_equal(spool_name_hoist_copy(b, sizeof b, 1000, "alice:j"), 0);
	assert_string_equal(b, ".copy.1000.alice:j");
	assert_int_equal(spool_name_hoist_copy(b, 12, 1000, "alice:j"), -ENAMETOOLONG);
	/* None of them is a held task's name (which kart release takes back). */
	assert_null(spool_held_id(".new.w1.42"));
	assert_null(spool_held_id(".hoist.1000.alice:j"));
	assert_null(spool_held_id(".copy.1000.alice:j"));
}

struct seen {
	char log[1024];
	int stop_after; /* 0: never */
	int n;
};

static int note(const struct spool_entry *e, void *arg)
{
	struct seen *s = arg;
	size_t l = strlen(s->log);
	snprintf(s->log + l, sizeof s->log - l, "%s/%s=%s%s ", e->dir, e->name, e->id ? e->id : "-",
		 e->area == SPOOL_WALK_DONE && e->id && e->done == DONE_JSON ? "(json)" : "");
	return ++s->n == s->stop_after ? 7 : 0;
}

static void touch(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
}

static void test_walk(void **state)
{
	(void)state;
	char tmpl[] = "/tmp/test_spool_name.XXXXXX", err[256];
	assert_non_null(mkdtemp(tmpl));
	char path[512];
	snprintf(path, sizeof path, "%s/s", tmpl);
	assert_int_equal(spool_init(path, err, sizeof err), 0);
	struct spool sp;
	assert_int_equal(spool_open(path, &sp, err, sizeof err), 0);
	touch(sp.new, "q");
	touch(sp.new, ".staged");
	assert_int_equal(mkdirat(sp.cur, "w1", 0755), 0);
	int w1 = openat(sp.cur, "w1", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(w1 >= 0);
	touch(w1, "r");
	touch(w1, ".r.stdout");
	close(w1);
	touch(sp.done, "d.json");
	touch(sp.done, "d.task");

	struct seen s = {0};
	assert_int_equal(spool_walk(&sp, SPOOL_WALK_NEW | SPOOL_WALK_CUR | SPOOL_WALK_DONE, note, &s), 0);
	/* Dot names left out; new, then cur, then done. */
	assert_non_null(strstr(s.log, "new/q=q "));
	assert_null(strstr(s.log, ".staged"));
	assert_non_null(strstr(s.log, "cur/w1/r=r "));
	assert_null(strstr(s.log, ".r.stdout"));
	assert_non_null(strstr(s.log, "done/d.json=d(json) "));
	assert_non_null(strstr(s.log, "done/d.task=d "));
	assert_true(strstr(s.log, "new/q") < strstr(s.log, "cur/w1/r"));
	assert_true(strstr(s.log, "cur/w1/r") < strstr(s.log, "done/d.json"));
	assert_int_equal(s.n, 4);

	/* Only the areas asked for; dot names when asked. */
	s = (struct seen){0};
	assert_int_equal(spool_walk(&sp, SPOOL_WALK_NEW | SPOOL_WALK_DOTS, note, &s), 0);
	assert_non_null(strstr(s.log, "new/.staged=- "));
	assert_null(strstr(s.log, "done/"));
	assert_int_equal(s.n, 2);
	s = (struct seen){0};
	assert_int_equal(spool_walk(&sp, SPOOL_WALK_WORKERS, note, &s), 0);
	assert_string_equal(s.log, "cur/w1=- ");

	/* A positive return ends the walk with it. */
	s = (struct seen){.stop_after = 1};
	assert_int_equal(spool_walk(&sp, SPOOL_WALK_NEW | SPOOL_WALK_CUR | SPOOL_WALK_DONE, note, &s), 7);
	assert_int_equal(s.n, 1);

	char w[64];
	assert_true(spool_find_claim(&sp, "r", w, sizeof w));
	assert_string_equal(w, "w1");
	assert_false(spool_find_claim(&sp, "q", w, sizeof w));

	spool_close(&sp);
	assert_int_equal(rm_rf_at(AT_FDCWD, tmpl), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_builders),
		cmocka_unit_test(test_inverses),
		cmocka_unit_test(test_more_names),
		cmocka_unit_test(test_protocol_names),
		cmocka_unit_test(test_walk),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
