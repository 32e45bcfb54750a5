/* kart init */
#define _GNU_SOURCE
#include "cmd.h"
#include "util.h"

static const char help[] =
	"usage: kart [-s SPOOL] init\n"
	"\n"
	"Create the spool (tmp/ new/ cur/ done/). Running it again is harmless.\n"
	"A spool on NFS or SMB is refused: rename() and flock() there do not give\n"
	"the guarantees the queue relies on.\n";

int cmd_init(struct ctx *c, int argc, char **argv)
{
	char err[512];
	if (wants_help(argc, argv, help))
		return 0;
	if (argc > 1)
		return usage_error("init", "unexpected argument '%s'", argv[1]);
	if (!c->spool_path || !*c->spool_path)
		return usage_error("init", "no spool: give -s DIR or set KART_SPOOL");
	if (spool_init(c->spool_path, err, sizeof err) < 0) {
		fprintf(stderr, "kart init: %s\n", err);
		return 1;
	}
	return 0;
}
