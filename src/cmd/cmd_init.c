/* kart init */
#define _GNU_SOURCE
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>

#include "cmd.h"
#include "opts.h"
#include "util.h"

static const struct opts_help help = {
	"usage: kart [-s SPOOL] init [--personal | --shared GROUP]\n"
	"\n"
	"Create the spool (tmp/ new/ cur/ done/ ids/, and the file format: its\n"
	"format version). Running it again is harmless.\n"
	"A spool on NFS or SMB is refused: rename() and flock() there do not give\n"
	"the guarantees the queue relies on.\n",
	"exit status: 0; 1 if the spool could not be made; 2 usage error\n",
};

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

/* --shared GROUP: what kart.tmpfiles lays out, for a host without
 * systemd-tmpfiles. */
static int init_shared(const char *path, const char *group)
{
	struct group gr, *gp = NULL;
	char buf[4096], err[512];
	long long n;
	gid_t gid;
	if (parse_int(group, 0, UINT32_MAX - 1, &n) == 0)
		gid = (gid_t)n;
	else if (getgrnam_r(group, &gr, buf, sizeof buf, &gp) == 0 && gp)
		gid = gp->gr_gid;
	else
		return usage_error("init", "--shared %s: no such group (groupadd %s makes it)", group, group);
	if (geteuid() != 0) {
		fprintf(stderr, "kart init: --shared: only root can lay out a shared spool (its "
			"directories are root's)\n");
		return 1;
	}
	if (spool_init_shared(path, gid, err, sizeof err) < 0) {
		fprintf(stderr, "kart init: %s\n", err);
		return 1;
	}
	return 0;
}

int cmd_init(struct ctx *c, int argc, char **argv)
{
	char err[512];
	bool personal = false;
	const char *shared = NULL;
	const struct opt opts[] = {
		OPT_BOOL(0, "personal", &personal,
			 "a spool of your own: also write a kart.conf (if there is none) that grants "
			 "you network when a task asks for it (net stays opt-in per task)"),
		OPT_STRING(0, "shared", &shared, "GROUP",
			   "a spool shared by the members of GROUP, laid out as "
			   "contrib/systemd/kart.tmpfiles does (drop/, each directory root's and "
			   "GROUP's, in its mode), for hosts without systemd-tmpfiles; as root"),
		OPT_END(),
	};
	struct opts_rest rest;
	opts_parse("init", argc, argv, opts, &help, 0, &rest);
	if (rest.argc > 0)
		return usage_error("init", "unexpected argument '%s'", rest.argv[0]);
	if (personal && shared)
		return usage_error("init", "--personal and --shared exclude each other");
	if (!c->spool_path || !*c->spool_path)
		return usage_error("init", "no spool: give -s DIR or set KART_SPOOL");
	if (shared)
		return init_shared(c->spool_path, shared);
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
