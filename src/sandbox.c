/* sandbox.c - the bwrap profile and the `none` backend's command line. */
#define _GNU_SOURCE
#include "sandbox.h"

#include <sys/stat.h>

/* The parts of /etc that ordinary programs read: name service, the
 * dynamic linker, time zone, locale and alternatives (python3, awk...). */
static const char *const etc_ro[] = {
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/ld.so.cache",
	"/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/alternatives",
	"/etc/os-release", "/etc/mime.types", "/etc/protocols", "/etc/services",
	"/etc/ssl", "/etc/ca-certificates", "/etc/host.conf", "/etc/hosts",
};
/* Only where the task has network. */
static const char *const etc_net[] = {"/etc/resolv.conf", "/etc/gai.conf"};
static const char *const usr_links[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32"};

static void env_common(const struct sandbox_req *req, struct strv *envp, const char *home,
		       const char *tmp, const char *out)
{
	strv_add(envp, "PATH=/usr/local/bin:/usr/bin:/bin");
	strv_addf(envp, "HOME=%s", home);
	strv_addf(envp, "TMPDIR=%s", tmp);
	strv_add(envp, "LANG=C.UTF-8");
	strv_addf(envp, "KART_TASK_ID=%s", req->task_id);
	strv_addf(envp, "KART_ATTEMPT=%d", req->attempt);
	strv_addf(envp, "KART_OUTDIR=%s", out);
}

static void launcher_tail(const struct sandbox_req *req, struct strv *argv, const char *launch,
			  const char *task)
{
	const char *targv[4];
	strv_add(argv, launch);
	strv_addf(argv, "--status-fd=%d", SANDBOX_STATUS_FD);
	strv_add(argv, "--");
	task_argv(req->spec, task, targv);
	for (int i = 0; targv[i]; i++)
		strv_add(argv, targv[i]);
}

int sandbox_build(const struct sandbox_req *req, struct strv *argv, struct strv *envp, char *err,
		  size_t errlen)
{
	const struct policy *pol = req->pol;
	struct stat st;

	if (pol->backend == BACKEND_NONE) {
		env_common(req, envp, req->work_dir, "/tmp", req->out_dir);
		launcher_tail(req, argv, pol->launcher, req->task_path);
		return 0;
	}

	strv_add(argv, pol->bwrap);
	strv_add(argv, "--unshare-all");
	if (req->spec->net)
		strv_add(argv, "--share-net");
	strv_add(argv, "--die-with-parent");
	strv_add(argv, "--new-session");
	strv_add(argv, "--cap-drop");
	strv_add(argv, "ALL");
	strv_add(argv, "--hostname");
	strv_add(argv, "kart");
	strv_add(argv, "--ro-bind");
	strv_add(argv, "/usr");
	strv_add(argv, "/usr");
	for (size_t i = 0; i < ARRAY_SIZE(usr_links); i++) {
		char host[64], target[64];
		snprintf(host, sizeof host, "/%s", usr_links[i]);
		if (lstat(host, &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlink(host, target, sizeof target - 1);
			if (n <= 0)
				continue;
			target[n] = '\0';
			strv_add(argv, "--symlink");
			strv_add(argv, target);
		} else {
			strv_add(argv, "--ro-bind");
			strv_add(argv, host);
		}
		strv_add(argv, host);
	}
	for (size_t i = 0; i < ARRAY_SIZE(etc_ro); i++) {
		strv_add(argv, "--ro-bind-try");
		strv_add(argv, etc_ro[i]);
		strv_add(argv, etc_ro[i]);
	}
	if (req->spec->net)
		for (size_t i = 0; i < ARRAY_SIZE(etc_net); i++) {
			strv_add(argv, "--ro-bind-try");
			strv_add(argv, etc_net[i]);
			strv_add(argv, etc_net[i]);
		}
	strv_add(argv, "--proc");
	strv_add(argv, "/proc");
	strv_add(argv, "--dev");
	strv_add(argv, "/dev");
	strv_add(argv, "--tmpfs");
	strv_add(argv, "/tmp");
	strv_add(argv, "--tmpfs");
	strv_add(argv, SANDBOX_WORK);
	strv_add(argv, "--ro-bind");
	strv_add(argv, req->task_path);
	strv_add(argv, SANDBOX_TASK);
	strv_add(argv, "--ro-bind");
	strv_add(argv, pol->launcher);
	strv_add(argv, SANDBOX_LAUNCH);
	if (req->out_dir) {
		strv_add(argv, "--bind");
		strv_add(argv, req->out_dir);
		strv_add(argv, SANDBOX_OUT);
	}
	/* The root is bwrap's tmpfs: read-only once everything is mounted.
	 * /tmp, the work dir and $KART_OUTDIR are mounts of their own. */
	strv_add(argv, "--remount-ro");
	strv_add(argv, "/");
	strv_add(argv, "--chdir");
	strv_add(argv, SANDBOX_WORK);
	launcher_tail(req, argv, SANDBOX_LAUNCH, SANDBOX_TASK);
	env_common(req, envp, SANDBOX_WORK, "/tmp", SANDBOX_OUT);
	(void)err;
	(void)errlen;
	return 0;
}
