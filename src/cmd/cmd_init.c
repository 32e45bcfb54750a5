/* kart init */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pwd.h>

#include "cmd.h"
#include "util.h"

static const char help[] =
	"usage: kart [-s SPOOL] init [--personal]\n"
	"\n"
	"Create the spool (tmp/ new/ cur/ done/ ids/, and the file format: its\n"
	"format version). Running it again is harmless.\n"
	"A spool on NFS or SMB is refused: rename() and flock() there do not give\n"
	"the guarantees the queue relies on.\n"
	"\n"
	"  --personal   a spool of your own: also write a kart.conf (if there is\n"
	"               none) that grants you network when a task asks for it\n"
	"               (net stays opt-in per task)\n";

/* The policy of a spool of one user: what the peers give without asking.
 * Written once; an existing kart.conf is the user's and stays. */
static int write_personal_conf(const char *spool)
{
	char path[4096], tmp[4096], text[512];
	uid_t uid = getuid();
	struct passwd *pw = getpwuid(uid);
	if (pathfmt(path, sizeof path, "%s/kart.conf", spool) < 0 ||
	    pathfmt(tmp, sizeof tmp, "%s/tmp/.kart.conf.init", spool) < 0)
		return -ENAMETOOLONG;
	snprintf(text, sizeof text,
		 "# Written by kart init --personal: the spool of %s (uid %u).\n"
		 "# See kart.conf(5); a worker re-reads it on SIGHUP.\n"
		 "\n"
		 "[network]\n"
		 "# Your tasks get network when they ask (#kart: net, kart submit --net).\n"
		 "allow_uids = %u\n",
		 pw ? pw->pw_name : "?", (unsigned)uid, (unsigned)uid);
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	int r = write_all(fd, text, strlen(text));
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	/* link, not rename: never over a kart.conf already there. */
	if (r == 0 && link(tmp, path) < 0)
		r = -errno;
	(void)unlink(tmp);
	return r == -EEXIST ? 1 : r;
}

int cmd_init(struct ctx *c, int argc, char **argv)
{
	char err[512];
	bool personal = false;
	if (wants_help(argc, argv, help))
		return 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--personal") == 0)
			personal = true;
		else
			return usage_error("init", "unexpected argument '%s'", argv[i]);
	}
	if (!c->spool_path || !*c->spool_path)
		return usage_error("init", "no spool: give -s DIR or set KART_SPOOL");
	if (spool_init(c->spool_path, err, sizeof err) < 0) {
		fprintf(stderr, "kart init: %s\n", err);
		return 1;
	}
	if (personal) {
		int r = write_personal_conf(c->spool_path);
		if (r < 0) {
			fprintf(stderr, "kart init: %s/kart.conf: %s\n", c->spool_path, strerror(-r));
			return 1;
		}
		if (r == 1)
			fprintf(stderr, "kart init: %s/kart.conf exists: left as it is\n", c->spool_path);
	}
	return 0;
}
