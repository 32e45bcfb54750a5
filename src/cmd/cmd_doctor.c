/* kart doctor - what this host can enforce, probed rather than assumed. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <grp.h>
#include <jansson.h>
#include <linux/magic.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>

#include "backend.h"
#include "cgroup.h"
#include "cmd.h"
#include "opts.h"
#include "policy.h"
#include "space.h"
#include "outdir.h"
#include "termsafe.h"
#include "util.h"
#include "worker_control.h"

static const struct opts_help help = {
	"usage: kart [-s SPOOL] doctor [--json]\n"
	"\n"
	"Probe what this host can enforce: bwrap (by running a trivial sandbox),\n"
	"user namespaces, the cgroup mode and controllers, the Landlock ABI,\n"
	"seccomp, the inotify limits, and the spool's filesystem (type, xattrs,\n"
	"leases, RENAME_NOREPLACE). Says whether the policy's requirements are met.\n"
	"A spool on NFS, SMB or CIFS is refused; one without RENAME_NOREPLACE is\n"
	"warned about. With backend container: whether the engine answers, and\n"
	"what will not work with it here, and why (podman: crun on hybrid cgroups,\n"
	"its default ulimits, rootless on cgroup v1, OOM reports before podman 5).\n"
	"\n"
	"On a shared spool (one with drop/), the mode, owner and group of each of\n"
	"its directories, against what kart init --shared and kart.tmpfiles make.\n",
	"exit status: 0 if the policy can be enforced here; 1 if not; 2 usage\n",
};

static long read_long(const char *path)
{
	_cleanup_free_ char *buf = NULL;
	if (read_file_at(AT_FDCWD, path, 64, &buf, NULL) < 0)
		return -1;
	return strtol(buf, NULL, 10);
}

/* Can an unprivileged process make a user namespace? That is what bwrap
 * needs when the worker (or, for a root worker, the submitter) is not
 * root. Tried for real, as nobody when we are root. */
static bool userns_works(void)
{
	pid_t pid = fork();
	if (pid < 0)
		return false;
	if (pid == 0) {
		if (getuid() == 0 && (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0))
			_exit(2);
		_exit(unshare(CLONE_NEWUSER) == 0 ? 0 : 1);
	}
	int st;
	return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static json_t *userns_facts(void)
{
	long max = read_long("/proc/sys/user/max_user_namespaces");
	long aa = read_long("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
	long clone = read_long("/proc/sys/kernel/unprivileged_userns_clone");
	bool works = userns_works();
	const char *fix = NULL;
	if (!works && aa == 1)
		fix = "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10+): allow "
		      "bwrap with an AppArmor profile granting 'userns,' (see the bwrap "
		      "package's profile), or sysctl kernel.apparmor_restrict_unprivileged_userns=0";
	else if (!works && clone == 0)
		fix = "sysctl kernel.unprivileged_userns_clone=1";
	else if (!works && max == 0)
		fix = "sysctl user.max_user_namespaces=15000";
	else if (!works)
		fix = "unprivileged user namespaces are unavailable; run the worker as root";
	json_t *j = json_pack("{s:b, s:I}", "unprivileged", works, "max", (json_int_t)max);
	if (aa >= 0)
		json_object_set_new(j, "apparmor_restrict", json_boolean(aa == 1));
	json_object_set_new(j, "fix", fix ? json_string(fix) : json_null());
	return j;
}

static const char *cgroup_mode(void)
{
	struct statfs sf;
	if (statfs("/sys/fs/cgroup", &sf) < 0)
		return "none";
	if (sf.f_type == CGROUP2_SUPER_MAGIC)
		return "v2";
	if (statfs("/sys/fs/cgroup/unified", &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC)
		return "hybrid";
	return "v1";
}

/* The name of a filesystem, by its statfs magic: the common ones. */
static json_t *ctl_array(unsigned m)
{
	json_t *a = json_array();
	if (m & CG_CTL_MEMORY)
		json_array_append_new(a, json_string("memory"));
	if (m & CG_CTL_PIDS)
		json_array_append_new(a, json_string("pids"));
	if (m & CG_CTL_CPU)
		json_array_append_new(a, json_string("cpu"));
	return a;
}

/* The cgroup facts, probed where a worker would make its leaves (a leaf
 * made and removed, each limit written), and whether the policy's
 * [limits] can hold: *ok goes false when they cannot. */
static json_t *cgroup_facts(const struct policy *pol, bool *ok)
{
	struct cg_probe pr;
	(void)cg_probe(NULL, pol->cgroup_parent[0] ? pol->cgroup_parent : NULL, &pr);
	bool use = pol->cgroup != CGROUP_OFF, leaf = use && pr.leaf;
	/* What the policy's defaults make every task ask for. */
	bool need_mem = false, need_pids = false, need_cpu = false;
	for (int l = 0; l < 2; l++) {
		struct lane_limits ll;
		policy_lane_limits(pol, l, &ll);
		/* The built-in defaults yield where nothing holds them. */
		need_mem |= ll.memory_default != 0 && !(pol->builtin_memory && !pol->lane[l].memory_default);
		need_pids |= ll.pids_default != 0 && !(pol->builtin_pids && !pol->lane[l].pids_default);
		need_cpu |= ll.cpu_default_milli != 0;
	}
	/* Without a leaf, rlimits: RLIMIT_NPROC does not bind root. */
	bool fb_mem = pol->rlimit_as, fb_pids = geteuid() != 0 || !pol->allow_root;
	const char *why = NULL;
	if (pol->cgroup == CGROUP_REQUIRE && !leaf)
		why = "cgroup = require, and no cgroup leaf can be made here";
	else if (need_cpu && !(leaf && pr.cpu))
		why = "the policy's cpu_default needs a cgroup with cpu, which is not available";
	else if (need_mem && !(leaf && pr.memory) && (pol->cgroup == CGROUP_REQUIRE || !fb_mem))
		why = "the policy's memory_default needs a cgroup with memory, which is not available";
	else if (need_pids && !(leaf && pr.pids) && (pol->cgroup == CGROUP_REQUIRE || !fb_pids))
		why = "the policy's pids_default needs a cgroup with pids, which is not available";
	if (why)
		*ok = false;
	json_t *o = json_object();
	json_object_set_new(o, "mode", json_string(cgroup_mode()));
	json_object_set_new(o, "policy", json_string(cgroup_use_name(pol->cgroup)));
	json_object_set_new(o, "parent", pr.parent[0] ? json_string(pr.parent) : json_null());
	json_object_set_new(o, "controllers", ctl_array(pr.avail));
	json_object_set_new(o, "enabled", ctl_array(pr.enabled));
	json_object_set_new(o, "leaf", json_boolean(pr.leaf));
	json_object_set_new(o, "limits", json_pack("{s:b, s:b, s:b}", "memory", pr.memory, "pids",
						   pr.pids, "cpu", pr.cpu));
	json_object_set_new(o, "kill", json_boolean(pr.kill));
	json_object_set_new(o, "rlimit_fallback",
			    json_pack("{s:b, s:b, s:b}", "pids", fb_pids, "memory", fb_mem, "cpu", 0));
	json_object_set_new(o, "error", pr.err[0] ? json_string(pr.err) : json_null());
	json_object_set_new(o, "requirements", why ? json_string(why) : json_string("met"));
	return o;
}

static void env_fact(const char *name, const char *where, void *arg)
{
	json_t *o = arg;
	if (!json_object_get(o, name))
		json_object_set_new(o, name, json_pack("{s:b, s:s}", "set", getenv(name) != NULL, "in", where));
}

/* Each variable the policy passes into tasks, and whether it is set here.
 * The worker takes them from its own environment at its start (a SIGHUP
 * does not change it): run doctor in that environment to check it. */
static json_t *env_facts(const struct policy *pol)
{
	json_t *o = json_object();
	policy_env_names(pol, env_fact, o);
	const char *k;
	json_t *v;
	json_object_foreach(o, k, v)
		if (!json_is_true(json_object_get(v, "set")))
			fprintf(stderr, "kart doctor: warning: %s (%s) is not set in this environment; "
				"a worker started from it passes it empty\n", k,
				json_string_value(json_object_get(v, "in")));
	return o;
}

/* The spool's free space against [worker] min_free: below it, workers
 * claim nothing new, so nothing queued runs until space returns. */
static void doctor_space(const struct spool *sp, const struct policy *pol, json_t *s, bool *ok)
{
	struct space sc;
	if (space_check(sp->root, pol->min_free_bytes, pol->min_free_pct, &sc) < 0)
		return;
	json_object_set_new(s, "free_bytes", json_integer((json_int_t)sc.free_bytes));
	json_object_set_new(s, "min_free_bytes", json_integer((json_int_t)sc.min_bytes));
	if (!sc.low)
		return;
	char why[700];
	space_describe(&sc, sp->path, why, sizeof why);
	const char *who = pol->shared ? " for members over their share of the disk (drop_max_bytes)" : "";
	json_object_set_new(s, "space", json_sprintf("%s: workers claim nothing new%s", why, who));
	fprintf(stderr, "kart doctor: %s: workers claim nothing new%s until space returns\n", why, who);
	*ok = false;
}

static void stall_say(const char *worker, const char *why, void *arg)
{
	json_object_set_new(arg, worker, json_string(why));
	_cleanup_free_ char *t = term_safe(why);
	_cleanup_free_ char *w = term_safe(worker);
	fprintf(stderr, "kart doctor: worker %s: %s: its tasks wait\n", w, t);
}

/* A shared spool (one with drop/): each directory as kart.tmpfiles and
 * kart init --shared make it, root's and the spool's group's; each that
 * is not, named. A mode wrong one way lets members write where only the
 * workers may; the other, keeps them from submitting. */
static void doctor_modes(struct spool *sp, json_t *s, bool *ok)
{
	struct stat top;
	if (sp->drop < 0 || fstat(sp->root, &top) < 0)
		return;
	json_t *wrong = json_array();
	for (size_t i = 0; i < spool_nshared_dirs; i++) {
		const struct spool_shared_dir *d = &spool_shared_dirs[i];
		struct stat st;
		/* ids/ and tally/ may be missing on an older spool. */
		if (fstatat(sp->root, d->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		bool mode_ok = (st.st_mode & 07777) == d->mode, own_ok = st.st_uid == 0 && st.st_gid == top.st_gid;
		if (mode_ok && own_ok && S_ISDIR(st.st_mode))
			continue;
		json_t *w = json_sprintf("%s/%s: mode %04o, uid %u, gid %u; should be a directory of mode "
					 "%04o, uid 0, gid %u (kart init --shared GROUP lays it out, as "
					 "kart.tmpfiles does)", sp->path, strcmp(d->name, ".") ? d->name : "",
					 (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid,
					 (unsigned)st.st_gid, (unsigned)d->mode, (unsigned)top.st_gid);
		_cleanup_free_ char *t = term_safe(json_string_value(w));
		fprintf(stderr, "kart doctor: %s\n", t);
		json_array_append_new(wrong, w);
	}
	json_object_set_new(s, "modes_ok", json_boolean(json_array_size(wrong) == 0));
	if (json_array_size(wrong)) {
		json_object_set_new(s, "modes_wrong", wrong);
		*ok = false;
	} else {
		json_decref(wrong);
	}
}

int cmd_doctor(struct ctx *c, int argc, char **argv)
{
	bool json = false;
	const struct opt opts[] = {
		OPT_BOOL(0, "json", &json, "the findings as one JSON object"),
		OPT_END(),
	};
	struct opts_rest rest;
	opts_parse("doctor", argc, argv, opts, &help, 0, &rest);
	if (rest.argc > 0)
		return usage_error("doctor", "unexpected argument '%s'", rest.argv[0]);
	struct policy pol;
	char err[512];
	bool ok = true;
	if (policy_load(&pol, c->spool_path && *c->spool_path ? c->spool_path : NULL, err, sizeof err) < 0) {
		fprintf(stderr, "kart doctor: policy: %s\n", err);
		return 1;
	}
	json_t *o = json_object();
	json_object_set_new(o, "backend", json_string(backend_name(pol.backend)));

	char why[256] = "";
	bool bw = bwrap_works(pol.bwrap, why, sizeof why);
	json_object_set_new(o, "bwrap", json_pack("{s:b, s:s}", "works", bw, "detail", bw ? "ok" : why));
	/* The hosted-posture gate (backend none) and the container's image. */
	const char *spath = c->spool_path && *c->spool_path ? c->spool_path : NULL;
	bool bok = policy_backend_check(&pol, spath, err, sizeof err) == 0;
	json_object_set_new(o, "backend_allowed",
			    json_pack("{s:b, s:s}", "ok", bok, "detail", bok ? "ok" : err));
	if (!bok)
		ok = false;
	/* What the backend's tasks need of this host, and its own facts. */
	struct backend_probe bp = {.ok = true};
	snprintf(bp.outdir_why, sizeof bp.outdir_why, "not with this backend: measured when the task ends");
	const struct backend *be = backend_get(pol.backend);
	if (be->probe)
		be->probe(&pol, &bp);
	if (!bp.ok)
		ok = false;
	if (bp.facts) {
		json_object_update(o, bp.facts);
		json_decref(bp.facts);
	}
	json_object_set_new(o, "user_namespaces", userns_facts());
	/* $KART_OUTDIR bounded while a task runs (outdir.h): the worker's
	 * holder, tried as the worker would (the backend's probe). */
	json_object_set_new(o, "outdir",
			    json_pack("{s:b, s:s}", "bounded_while_running", bp.bounded_outdir, "detail",
				      bp.bounded_outdir ? "a tmpfs per task in the worker's own namespace"
							: bp.outdir_why));
	json_object_set_new(o, "cgroup", cgroup_facts(&pol, &ok));
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, 1UL /* VERSION */);
	json_object_set_new(o, "landlock_abi", abi > 0 ? json_integer(abi) : json_string("unsupported"));
	if (pol.landlock == LL_MODE_ENFORCE && abi <= 0)
		ok = false; /* every task would be refused: landlock_unavailable */
	json_object_set_new(o, "seccomp", json_boolean(prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0));
	json_object_set_new(o, "inotify",
			    json_pack("{s:I, s:I, s:I}", "max_queued_events",
				      (json_int_t)read_long("/proc/sys/fs/inotify/max_queued_events"),
				      "max_user_watches",
				      (json_int_t)read_long("/proc/sys/fs/inotify/max_user_watches"),
				      "max_user_instances",
				      (json_int_t)read_long("/proc/sys/fs/inotify/max_user_instances")));
	if (c->spool_path && *c->spool_path) {
		struct spool sp;
		json_t *s = json_object();
		if (spool_open(c->spool_path, &sp, err, sizeof err) < 0) {
			json_object_set_new(s, "error", json_string(err));
			ok = false;
		} else {
			struct statfs sf;
			const char *net = NULL;
			if (fstatfs(sp.root, &sf) == 0) {
				unsigned long m = (unsigned long)sf.f_type & 0xffffffffUL;
				const char *n = space_fs_known(m);
				json_object_set_new(s, "fs", n ? json_string(n) : json_null());
				json_object_set_new(s, "fs_magic", json_sprintf("0x%lx", m));
				net = spool_fs_network(m);
			}
			/* As kart init: rename() and flock() there do not hold. */
			if (net) {
				json_object_set_new(s, "error", json_sprintf(
					"the spool is on %s, a network filesystem: refused "
					"(rename() and flock() there do not give the guarantees "
					"a spool needs; use a local filesystem)", net));
				ok = false;
			}
			doctor_space(&sp, &pol, s, &ok);
			doctor_modes(&sp, s, &ok);
			char tn[64], tn2[64];
			snprintf(tn, sizeof tn, ".doctor.%d", getpid());
			snprintf(tn2, sizeof tn2, ".doctor.%d.2", getpid());
			int fd = openat(sp.tmp, tn, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
			if (fd >= 0) {
				bool xa = fsetxattr(fd, "user.kart", "x", 1, 0) == 0;
				close(fd);
				fd = openat(sp.tmp, tn, O_RDONLY | O_CLOEXEC);
				bool lease = fd >= 0 && fcntl(fd, F_SETLEASE, F_RDLCK) == 0;
				if (lease)
					(void)fcntl(fd, F_SETLEASE, F_UNLCK);
				if (fd >= 0)
					close(fd);
				bool noreplace = renameat2(sp.tmp, tn, sp.tmp, tn2, RENAME_NOREPLACE) == 0;
				(void)unlinkat(sp.tmp, noreplace ? tn2 : tn, 0);
				json_object_set_new(s, "xattr", json_boolean(xa));
				json_object_set_new(s, "lease", json_boolean(lease));
				json_object_set_new(s, "rename_noreplace", json_boolean(noreplace));
				if (!xa)
					ok = false;
				/* Works, with a window: kart checks, then renames. */
				if (!noreplace) {
					const char *w = "no RENAME_NOREPLACE on the spool's filesystem: "
							"claims and publishing fall back to "
							"check-then-rename; a local ext4, xfs, btrfs or "
							"tmpfs has it";
					json_object_set_new(s, "warning", json_string(w));
					fprintf(stderr, "kart doctor: warning: %s\n", w);
				}
			}
			/* A worker whose engine does not answer: its tasks wait. */
			json_t *st = json_object();
			wctl_stalled(&sp, stall_say, st);
			if (json_object_size(st))
				json_object_set_new(s, "stalled", st);
			else
				json_decref(st);
			/* Said, not a failure: someone paused it on purpose. */
			if (wctl_spool_paused(sp.new)) {
				const char *m = "paused (kart pause --all): workers claim nothing new "
						"until kart resume --all";
				json_object_set_new(s, "claiming", json_string(m));
				fprintf(stderr, "kart doctor: the spool is %s\n", m);
			}
			spool_close(&sp);
		}
		json_object_set_new(o, "spool", s);
	}
	/* The effective policy: kart.conf over the defaults, then KART_*. */
	_cleanup_free_ char *pt = policy_describe(&pol);
	json_t *pj = pt ? json_loads(pt, 0, NULL) : NULL;
	/* A kind whose runner is not there: its tasks would all be refused. */
	for (int i = 0; pj && i < pol.n_kinds; i++) {
		bool found = access(pol.kinds[i].runner, X_OK) == 0;
		json_t *kj = json_object_get(json_object_get(pj, "kinds"), pol.kinds[i].name);
		json_object_set_new(kj, "runner_found", json_boolean(found));
		/* Its credentials need the forwarder that adds them
		 * (credfwd.h): without it, its tasks are refused. */
		if (pol.kinds[i].n_cred) {
			char fwd[PATH_MAX];
			find_libexec("kart-credfwd", fwd, sizeof fwd);
			bool ffound = fwd[0] && access(fwd, X_OK) == 0;
			json_object_set_new(kj, "forwarder_found", json_boolean(ffound));
			found = found && ffound;
		}
		if (!found)
			ok = false;
	}
	json_object_set_new(o, "policy", pj ? pj : json_null());
	json_object_set_new(o, "environment", env_facts(&pol));
	json_object_set_new(o, "ok", json_boolean(ok));
	if (json) {
		char *t = json_dumps_safe(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		printf("%s\n", t);
		free(t);
	} else {
		const char *k;
		json_t *v;
		json_object_foreach(o, k, v) {
			char *t = json_dumps_safe(v, JSON_ENCODE_ANY | JSON_COMPACT);
			printf("%-16s %s\n", k, t);
			free(t);
		}
	}
	json_decref(o);
	return ok ? 0 : 1;
}
