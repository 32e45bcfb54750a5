/* kart setup-cgroup - delegate memory, pids and cpu to the worker (a
 * systemd drop-in), then check that a worker here could make a leaf and
 * write each limit. Without delegation, limits fall back to rlimits (or
 * the task is refused): see rlimits.h. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cgroup.h"
#include "cmd.h"
#include "opts.h"
#include "policy.h"
#include "util.h"

static const struct opts_help help = {
	"usage: kart [-s SPOOL] setup-cgroup [--user | --system] [--dry-run] [--check]\n"
	"\n"
	"Give kart workers a cgroup subtree with the memory, pids and cpu\n"
	"controllers (systemd Delegate=), so that memory=, pids= and cpu= hold in\n"
	"a cgroup leaf per task; then check it by making a leaf and writing each\n"
	"limit, where the worker would (KART_CGROUP_PARENT / [limits]\n"
	"cgroup_parent, else this process's own cgroup).\n"
	"Without systemd nothing is written: it prints what a systemd host would\n"
	"get, and checks.\n",
	"exit status: 0 the worker can make leaves and write every limit here;\n"
	"1 not (the message says what is missing), or the drop-in could not be\n"
	"written; 2 usage\n",
};

static const char dropin[] =
	"# kart: the worker gets its own cgroup subtree, with these controllers,\n"
	"# and makes one leaf per task in it (kart setup-cgroup).\n"
	"[Service]\n"
	"Delegate=memory pids cpu\n";

/* systemd delegates to user managers only what user@.service has. */
static const char user_manager_dropin[] =
	"# /etc/systemd/system/user@.service.d/delegate.conf\n"
	"[Service]\n"
	"Delegate=memory pids cpu\n";

static bool systemd_booted(void)
{
	struct stat st;
	return lstat("/run/systemd/system", &st) == 0 && S_ISDIR(st.st_mode);
}

static int mkdir_p(const char *path)
{
	char p[PATH_MAX];
	if (pathfmt(p, sizeof p, "%s", path) < 0)
		return -ENAMETOOLONG;
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			if (mkdir(p, 0755) < 0 && errno != EEXIST)
				return -errno;
			*s = '/';
		}
	return mkdir(p, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

static int write_dropin(const char *dir, const char *file)
{
	char p[PATH_MAX], tmp[PATH_MAX];
	int r = mkdir_p(dir);
	if (r < 0)
		return r;
	if (pathfmt(p, sizeof p, "%s/%s", dir, file) < 0 ||
	    pathfmt(tmp, sizeof tmp, "%s/.%s.tmp", dir, file) < 0)
		return -ENAMETOOLONG;
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	if ((r = write_all(fd, dropin, strlen(dropin))) < 0 || (fsync(fd) < 0 && (r = -errno)) ||
	    (rename(tmp, p) < 0 && (r = -errno))) {
		(void)unlink(tmp);
		return r;
	}
	return 0;
}

static const char *ctl_list(unsigned m, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s", m & CG_CTL_MEMORY ? "memory " : "", m & CG_CTL_PIDS ? "pids " : "",
		 m & CG_CTL_CPU ? "cpu " : "");
	size_t n = strlen(buf);
	if (n)
		buf[n - 1] = '\0';
	else
		snprintf(buf, len, "none");
	return buf;
}

/* The check: what a worker in this position would get. */
static int check_here(const struct policy *pol)
{
	struct cg_probe pr;
	char a[64];
	const char *parent = pol->cgroup_parent[0] ? pol->cgroup_parent : NULL;
	(void)cg_probe(NULL, parent, &pr);
	printf("cgroup mode: %s%s\n", cg_mode_name(pr.mode), pr.hybrid ? " (hybrid)" : "");
	if (pr.mode == CG_MODE_NONE) {
		printf("delegation: MISSING: %s\n", pr.err);
		return 1;
	}
	printf("parent: %s%s\n", pr.parent, parent ? "" : " (this process's own cgroup)");
	printf("controllers: %s\n", ctl_list(pr.avail, a, sizeof a));
	printf("leaf: %s; memory: %s; pids: %s; cpu: %s; cgroup.kill: %s\n",
	       pr.leaf ? "ok" : "NO", pr.memory ? "ok" : "NO", pr.pids ? "ok" : "NO",
	       pr.cpu ? "ok" : "NO", pr.kill ? "yes" : "no");
	if (pr.leaf && pr.memory && pr.pids && pr.cpu) {
		printf("delegation: ok\n");
		return 0;
	}
	printf("delegation: MISSING: %s\n", pr.err[0] ? pr.err : "a limit cannot be written");
	printf("Without it, tasks fall back to rlimits (pids= by RLIMIT_NPROC, memory= only\n"
	       "with KART_RLIMIT_USE_AS=1, cpu= refused), or are refused under cgroup = require.\n");
	return 1;
}

/* Check inside a delegated scope, as a unit with the drop-in would be. */
static int check_in_scope(struct ctx *c, bool user)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		return -1;
	self[n] = '\0';
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		const char *argv[16];
		int i = 0;
		argv[i++] = "systemd-run";
		if (user)
			argv[i++] = "--user";
		argv[i++] = "--scope";
		argv[i++] = "--quiet";
		argv[i++] = "-p";
		argv[i++] = "Delegate=memory pids cpu";
		argv[i++] = "--";
		argv[i++] = self;
		if (c->spool_path && *c->spool_path) {
			argv[i++] = "-s";
			argv[i++] = c->spool_path;
		}
		argv[i++] = "setup-cgroup";
		argv[i++] = "--check";
		argv[i] = NULL;
		execvp(argv[0], (char **)argv);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
		return -1; /* no systemd-run: check here instead */
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

int cmd_setup_cgroup(struct ctx *c, int argc, char **argv)
{
	int mode = geteuid() == 0 ? 'S' : 'u';
	bool dry = false, check_only = false;
	const struct opt opts[] = {
		OPT_SET_INT(0, "user", &mode,
			    "(default unless root) write the drop-in for the user unit "
			    "~/.config/systemd/user/kart-worker.service.d/50-kart-delegate.conf", 'u'),
		OPT_SET_INT(0, "system", &mode,
			    "(default for root) print the drop-in for the system unit "
			    "/etc/systemd/system/kart-worker@.service.d/50-kart-delegate.conf", 'S'),
		OPT_BOOL(0, "dry-run", &dry, "write nothing: print what would be written"),
		OPT_BOOL(0, "check", &check_only, "only check the delegation here"),
		OPT_END(),
	};
	struct opts_rest rest;
	opts_parse("setup-cgroup", argc, argv, opts, &help, 0, &rest);
	if (rest.argc > 0)
		return usage_error("setup-cgroup", "unexpected argument '%s'", rest.argv[0]);
	struct policy pol;
	char err[512];
	if (policy_load(&pol, c->spool_path && *c->spool_path ? c->spool_path : NULL, err,
			sizeof err) < 0) {
		fprintf(stderr, "kart setup-cgroup: policy: %s\n", err);
		return 1;
	}
	if (check_only)
		return check_here(&pol);

	bool sd = systemd_booted();
	if (mode == 'S' || !sd || dry) {
		const char *dir = mode == 'S' ? "/etc/systemd/system/kart-worker@.service.d"
					      : "~/.config/systemd/user/kart-worker.service.d";
		if (!sd)
			printf("No systemd here (/run/systemd/system is missing): nothing written.\n"
			       "On a systemd host, the worker unit would get:\n\n");
		printf("# %s/50-kart-delegate.conf\n%s\n", dir, dropin);
		if (mode == 'u')
			printf("and user@.service must delegate them to your user manager (as root):\n"
			       "%s\n", user_manager_dropin);
		if (sd)
			printf("then: systemctl %sdaemon-reload\n\n", mode == 'u' ? "--user " : "");
	} else {
		char dir[PATH_MAX];
		const char *cfg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
		struct passwd *pw = getpwuid(getuid());
		if (!home || !*home)
			home = pw ? pw->pw_dir : "/";
		int r = cfg && *cfg ? pathfmt(dir, sizeof dir, "%s/systemd/user/kart-worker.service.d", cfg)
				    : pathfmt(dir, sizeof dir, "%s/.config/systemd/user/kart-worker.service.d",
					      home);
		if (r == 0)
			r = write_dropin(dir, "50-kart-delegate.conf");
		if (r < 0) {
			fprintf(stderr, "kart setup-cgroup: cannot write %s/50-kart-delegate.conf: %s\n",
				dir, strerror(-r));
			return 1;
		}
		printf("wrote %s/50-kart-delegate.conf\nthen: systemctl --user daemon-reload\n\n", dir);
	}
	if (sd && !pol.cgroup_parent[0]) {
		/* This process's own cgroup is a session's, not the unit's:
		 * check from a scope delegated as the unit will be. */
		int r = check_in_scope(c, mode == 'u');
		if (r >= 0) {
			if (r)
				printf("delegation: MISSING in a delegated scope%s\n",
				       mode == 'u' ? " (see user@.service above)" : "");
			return r;
		}
	}
	return check_here(&pol);
}
