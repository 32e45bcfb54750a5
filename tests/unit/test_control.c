/* test_control.c - kart edit --set's rewrite of one directive
 * (control_set_item, src/control.c): the item replaced wherever the
 * header has it, the new line at the end of the leading comment block,
 * the program untouched, and the result parsed by task_parse as meant. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "task.h"
#include "util.h"

static char *set(const char *text, const char *item)
{
	char *out = NULL;
	size_t len = 0;
	assert_int_equal(control_set_item(text, strlen(text), item, &out, &len), 0);
	assert_int_equal(strlen(out), len);
	return out;
}

static void test_set_after_shebang(void **state)
{
	(void)state;
	char *o = set("#!/bin/sh\necho hi\n", "timeout=5m");
	assert_string_equal(o, "#!/bin/sh\n#kart: timeout=5m\necho hi\n");
	free(o);
}

static void test_set_replaces_item_keeps_others(void **state)
{
	(void)state;
	char *o = set("#!/bin/sh\n#kart: timeout=1h memory=1G\n# a comment\n#kart: timeout=2h\n\n"
		      "# not the header: timeout=9h\necho hi\n",
		      "timeout=5m");
	assert_string_equal(o, "#!/bin/sh\n#kart: memory=1G\n# a comment\n#kart: timeout=5m\n\n"
			       "# not the header: timeout=9h\necho hi\n");
	struct task_spec spec;
	char err[256];
	assert_int_equal(task_parse(o, strlen(o), &spec, err, sizeof err), 0);
	assert_int_equal(spec.timeout_s, 300);
	free(o);
}

static void test_set_without_header(void **state)
{
	(void)state;
	char *o = set("echo hi", "pids=8");
	assert_string_equal(o, "#kart: pids=8\necho hi");
	free(o);
	o = set("#kart: pids=4", "pids=8"); /* all header, no last newline */
	assert_string_equal(o, "#kart: pids=8\n");
	free(o);
}

static void test_set_encodes_value(void **state)
{
	(void)state;
	char *o = set("#!/bin/sh\n", "name=a b#c");
	assert_string_equal(o, "#!/bin/sh\n#kart: name=a%20b%23c\n");
	struct task_spec spec;
	char err[256];
	assert_int_equal(task_parse(o, strlen(o), &spec, err, sizeof err), 0);
	assert_string_equal(spec.name, "a b#c");
	free(o);
}

static void test_set_refuses_non_items(void **state)
{
	(void)state;
	char *out = NULL;
	size_t len;
	static const char *const bad[] = {"timeout", "=5m", "timeout=", "time out=5", "a#b=1"};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		assert_int_equal(control_set_item("x\n", 2, bad[i], &out, &len), -EINVAL);
	assert_null(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_set_after_shebang),
		cmocka_unit_test(test_set_replaces_item_keeps_others),
		cmocka_unit_test(test_set_without_header),
		cmocka_unit_test(test_set_encodes_value),
		cmocka_unit_test(test_set_refuses_non_items),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
