/* libFuzzer target: the directive parser and task-name validation. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "task.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct task_spec spec;
	char err[512];
	task_spec_init(&spec);
	(void)task_parse((const char *)data, size, &spec, err, sizeof err);
	/* The same bytes as a name: NUL-terminated copy. */
	char *name = malloc(size + 1);
	if (!name)
		return 0;
	memcpy(name, data, size);
	name[size] = '\0';
	const char *why = NULL;
	(void)task_name_check(name, &why);
	free(name);
	return 0;
}
