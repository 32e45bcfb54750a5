/* test_credfwd.c - which tasks get a credential forwarder (credfwd_kind)
 * and the socket credfwd_open makes for one: in a directory of its own,
 * not listable (0711), connectable by the task's user alone (0600),
 * already listening; and credfwd_close leaving nothing behind. The
 * forwarder itself is tried from the outside (kinds.sh, users.sh). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "credfwd.h"
#include "policy.h"
#include "task.h"
#include "util.h"

static const char conf[] = "[kind.llm]\nrunner = /opt/kart/kart-llm\nnet = yes\n"
			   "credentials = LLM_KEY\nendpoint = http://127.0.0.1:9/v1\nendpoint_uid = 0\n"
			   "[kind.plain]\nrunner = /usr/bin/python3\nendpoint = http://127.0.0.1:9/p\n";

static void spec_of(const struct policy *pol, const char *text, struct task_spec *spec)
{
	char err[256];
	assert_int_equal(task_parse(text, strlen(text), spec, err, sizeof err), 0);
	assert_int_equal(task_resolve_kind(spec, pol, "t", err, sizeof err), 0);
}

/* A kind with credentials and an endpoint, for a task with network: the
 * condition under which credentials were ever given. */
static void test_which_tasks(void **state)
{
	(void)state;
	struct policy pol;
	struct task_spec spec;
	char err[256];
	memset(&pol, 0, sizeof pol);
	assert_int_equal(policy_parse_conf(&pol, conf, "kart.conf", err, sizeof err), 0);
	spec_of(&pol, "#kart: kind=llm\n", &spec);
	assert_ptr_equal(credfwd_kind(&pol, &spec), policy_kind(&pol, "llm"));
	spec_of(&pol, "#kart: kind=plain net\n", &spec); /* no credentials */
	assert_null(credfwd_kind(&pol, &spec));
	spec_of(&pol, "#!/bin/sh\n#kart: net\n", &spec); /* no kind */
	assert_null(credfwd_kind(&pol, &spec));
	spec_of(&pol, "#kart: kind=llm\n", &spec);
	spec.net = false; /* (a kind with net = no) */
	assert_null(credfwd_kind(&pol, &spec));
}

static void test_socket(void **state)
{
	(void)state;
	struct policy pol;
	struct task_spec spec;
	struct credfwd f = CREDFWD_INIT;
	struct stat st;
	char err[256];
	memset(&pol, 0, sizeof pol);
	assert_int_equal(policy_parse_conf(&pol, conf, "kart.conf", err, sizeof err), 0);

	/* Nothing for a task without a forwarder. */
	spec_of(&pol, "#!/bin/sh\n#kart: net\n", &spec);
	assert_int_equal(credfwd_open(&f, &pol, &spec, geteuid(), getegid(), err, sizeof err), 0);
	assert_string_equal(f.path, "");
	assert_int_equal(f.lfd, -1);

	spec_of(&pol, "#kart: kind=llm\n", &spec);
	if (credfwd_open(&f, &pol, &spec, geteuid(), getegid(), err, sizeof err) != 0)
		fail_msg("credfwd_open: %s", err); /* (kart-credfwd beside this binary: make) */
	assert_true(f.lfd >= 0);
	assert_int_equal(strncmp(f.path, "/tmp/kart-credfwd.", 18), 0);
	assert_int_equal(lstat(f.dir, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0711);
	assert_int_equal(lstat(f.path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(st.st_uid, geteuid());
	/* Listening already: a runner that connects before the forwarder
	 * runs waits in the backlog. */
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", f.path);
	int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(c >= 0);
	assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof sa), 0);
	close(c);
	char dir[sizeof f.dir], path[sizeof f.path];
	snprintf(dir, sizeof dir, "%s", f.dir);
	snprintf(path, sizeof path, "%s", f.path);
	credfwd_close(&f);
	assert_int_equal(f.lfd, -1);
	assert_int_equal(lstat(path, &st), -1);
	assert_int_equal(lstat(dir, &st), -1);
	credfwd_close(&f); /* twice: nothing to do */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_which_tasks),
		cmocka_unit_test(test_socket),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
