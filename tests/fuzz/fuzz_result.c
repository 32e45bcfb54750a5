/* libFuzzer target: the result reader used by status, wait and cat
 * (query_done), on done/<id>.json holding the input. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct spool sp;
	static char dir[] = "/tmp/kart-fuzz-result.XXXXXX";
	if (!sp.path) {
		if (!mkdtemp(dir))
			abort();
		sp.path = dir;
		sp.root = sp.tmp = sp.new = sp.cur = -1;
		sp.done = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (sp.done < 0)
			abort();
	}
	int fd = openat(sp.done, "f.json", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		abort();
	if (size && write(fd, data, size) != (ssize_t)size)
		abort();
	close(fd);
	struct qinfo q;
	memset(&q, 0, sizeof q);
	(void)query_done(&sp, "f", &q);
	return 0;
}
