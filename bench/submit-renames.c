/* bench/submit-renames SPOOL N PREFIX [INTERP]: queue N trivial tasks the
 * way a client in another language does, from one process: write each
 * task (#!/bin/sh, true; or with INTERP the one line #!INTERP, for a task
 * that is exactly one exec of INTERP, as `tsp true` runs one program)
 * into SPOOL/tmp/PREFIXi, then rename(2) it into
 * SPOOL/new/PREFIXi. No fork, no exec per task, so the submission rate is
 * the file system's, not a shell loop's. No fsync (the bench's old shell
 * loop did none either); see spool-layout/README.md for a durable client. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


int main(int argc, char **argv)
{
	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: %s SPOOL N PREFIX [INTERP]\n", argv[0]);
		return 2;
	}
	char task[4200] = "#!/bin/sh\ntrue\n";
	if (argc == 5)
		snprintf(task, sizeof task, "#!%s\n", argv[4]);
	size_t len = strlen(task);
	char path[4096];
	snprintf(path, sizeof path, "%s/tmp", argv[1]);
	int tmpd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	snprintf(path, sizeof path, "%s/new", argv[1]);
	int newd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (tmpd < 0 || newd < 0) {
		fprintf(stderr, "submit-renames: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	long n = strtol(argv[2], NULL, 10);
	for (long i = 0; i < n; i++) {
		char name[256];
		snprintf(name, sizeof name, "%s%ld", argv[3], i);
		int fd = openat(tmpd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0 || write(fd, task, len) != (ssize_t)len ||
		    close(fd) < 0 || renameat(tmpd, name, newd, name) < 0) {
			fprintf(stderr, "submit-renames: %s: %s\n", name, strerror(errno));
			return 1;
		}
	}
	return 0;
}
