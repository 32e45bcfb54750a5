/* bench/filter: the seccomp program a worker hands bwrap (--seccomp),
 * built by the same code (src/sandbox/seccomp.c), written to stdout.
 * The floor replays kart's bwrap command line with it, so that the floor
 * is kart's command line whole and not one without its filter. Built by
 * bench/run against the objects next to the kart binary it measures. */
#include <stdio.h>

#include "seccomp.h"

int main(void)
{
	struct seccomp_prog p = {0};
	char err[256];
	if (seccomp_prog_build(&p, err, sizeof err) < 0) {
		fprintf(stderr, "filter: %s\n", err);
		return 1;
	}
	return fwrite(p.bpf, 1, p.len, stdout) == p.len && fflush(stdout) == 0 ? 0 : 1;
}
