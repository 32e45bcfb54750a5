/* libFuzzer target: the kart.conf parser (over the defaults). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct policy defaults;
	static int ready;
	char err[512];
	if (!ready) {
		if (policy_load(&defaults, NULL, err, sizeof err) < 0)
			abort();
		ready = 1;
	}
	struct policy pol = defaults;
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	(void)policy_parse_conf(&pol, text, "kart.conf", err, sizeof err);
	free(text);
	return 0;
}
