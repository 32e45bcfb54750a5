/* test_recover.c - a dead worker's claims (src/spool/spool_recover.c,
 * spool_recover_peer): its caller's dead() runs before any claim moves,
 * and one that says a run may still go (a backend's sweep: a job a batch
 * system still runs, where no run lock holds it) keeps every claim where
 * it is, for a later look. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "policy.h"
#include "spool.h"
#include "util.h"

struct seen {
	int calls;
	int rc;
	bool claim_there; /* the claim was still in cur/dead/ when dead() ran */
	struct spool *sp;
};

static int dead(void *arg, const char *peer)
{
	struct seen *s = arg;
	char p[PATH_MAX];
	s->calls++;
	assert_string_equal(peer, "dead");
	snprintf(p, sizeof p, "%s/cur/dead/t1", s->sp->path);
	s->claim_there = access(p, F_OK) == 0;
	return s->rc;
}

static void test_dead_keeps_claims(void **state)
{
	(void)state;
	char tmpl[] = "/tmp/kart-recover.XXXXXX", path[256], err[256], p[PATH_MAX];
	assert_non_null(mkdtemp(tmpl));
	snprintf(path, sizeof path, "%s/spool", tmpl);
	assert_int_equal(spool_init(path, err, sizeof err), 0);
	struct spool sp;
	assert_int_equal(spool_open(path, &sp, err, sizeof err), 0);
	/* A worker that claimed t1, then died (its lock let go). */
	int wdir, lockfd;
	assert_int_equal(spool_worker_open(&sp, "dead", &wdir, &lockfd), 0);
	int fd = openat(wdir, "t1", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "echo hi\n", 8), 8);
	close(fd);
	close(lockfd);
	struct policy pol;
	memset(&pol, 0, sizeof pol);
	pol.retries_default = 3;

	struct seen s = {.rc = -EBUSY, .sp = &sp};
	int busy = 0, rq = 0, lost = 0;
	assert_int_equal(spool_recover_peer(&sp, &pol, "dead", "me", dead, &s, &busy, &rq, &lost), 1);
	assert_int_equal(s.calls, 1);
	assert_true(s.claim_there);
	assert_int_equal(busy, 1);
	assert_int_equal(rq, 0);
	assert_int_equal(lost, 0);
	assert_true(faccessat(wdir, "t1", F_OK, 0) == 0);
	snprintf(p, sizeof p, "%s/new/t1", path);
	assert_int_not_equal(access(p, F_OK), 0);

	/* Its runs are gone now: the claim is re-queued. */
	s.rc = 0;
	busy = 0;
	assert_int_equal(spool_recover_peer(&sp, &pol, "dead", "me", dead, &s, &busy, &rq, &lost), 1);
	assert_int_equal(s.calls, 2);
	assert_int_equal(busy, 0);
	assert_int_equal(rq, 1);
	assert_int_equal(access(p, F_OK), 0);

	close(wdir);
	spool_close(&sp);
	(void)rm_rf_at(AT_FDCWD, tmpl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dead_keeps_claims),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
