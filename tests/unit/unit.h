/* tests/unit/unit.h - what more than one unit test needs. Each test is a
 * .c of its own, built alone (Makefile: $(B)/test_%), so these are
 * static; include after <cmocka.h>. */
#ifndef KART_TESTS_UNIT_H
#define KART_TESTS_UNIT_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy.h"

/* policy_load on a fresh spool directory whose kart.conf holds TEXT: the
 * policy a worker there would have (defaults, ceilings, environment). */
static inline int load_conf_text(struct policy *pol, const char *text, char *err, size_t errlen)
{
	char dir[] = "/tmp/kart-unit.XXXXXX", path[64];
	if (!mkdtemp(dir))
		fail_msg("mkdtemp: %s", strerror(errno));
	snprintf(path, sizeof path, "%s/kart.conf", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(fclose(f), 0);
	int r = policy_load(pol, dir, err, errlen);
	unlink(path);
	rmdir(dir);
	return r;
}

#endif
