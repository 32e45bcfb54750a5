/* kart worker */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <limits.h>
#include <stdlib.h>

#include "cmd.h"
#include "opts.h"
#include "log.h"
#include "policy.h"
#include "task.h"
#include "util.h"
#include "worker.h"

static const struct opts_help help = {
	"usage: kart [-s SPOOL] worker [--id ID] [--slots N] [--batch-slots N] [--drain]\n"
	"                             [--log-format FMT] [--daemon [--log FILE]]\n"
	"\n"
	"Run tasks from the spool: watch new/, claim each task into cur/ID/ when\n"
	"a slot of its lane is free, run it in the sandbox, write done/<id>.json.\n"
	"At its start it says on stderr (the terminal, with --daemon too) each\n"
	"variable the policy passes to tasks that its environment lacks.\n",
	"signals: SIGTERM or SIGINT stop claiming and let running tasks finish\n"
	"within the grace period (KART_TERM_GRACE, default 10s), then kill and\n"
	"re-queue them; a second one ends the grace at once. SIGHUP re-reads the\n"
	"policy.\n"
	"\n"
	"environment: KART_BACKEND (bwrap|none), KART_BWRAP, KART_TERM_GRACE,\n"
	"KART_TIMEOUT_MAX, KART_NET_UIDS (uids allowed network, or '*')\n",
};

static int opt_log_format(const struct opt *o, const char *arg, struct opts_ctx *ctx)
{
	if (log_format_parse(arg, o->value) < 0)
		return usage_error(ctx->verb, "--log-format %s: not logfmt, json or text", arg);
	return 0;
}

/* One line on the terminal per variable the policy passes to tasks that
 * this worker's environment lacks: the log may be a file nobody reads
 * (--daemon), and a task would get the variable empty. */
static void env_missing(const char *name, const char *where, void *arg)
{
	(void)arg;
	if (getenv(name))
		return;
	fprintf(stderr, "kart worker: warning: %s is not set: %s passes it to tasks, which get none "
		"(set it in the worker's environment and start the worker again)\n", name, where);
}

/* Wait (a few seconds at most) until the daemon holds the spool, or is
 * gone; the exit status of the one who asked. */
static int daemon_started(struct spool *sp, pid_t pid, int before, const char *log)
{
	for (int i = 0; i < 100; i++) {
		int n = spool_live_workers(sp);
		if (n > before || (n < 0 && i > 10)) {
			printf("kart worker: running in the background as pid %d; log: %s\n", (int)pid, log);
			return 0;
		}
		if (kill(pid, 0) < 0 && errno == ESRCH) {
			fprintf(stderr, "kart worker: the daemon exited at its start: see %s\n", log);
			return 1;
		}
		(void)usleep(50000);
	}
	printf("kart worker: started as pid %d, not ready yet; log: %s\n", (int)pid, log);
	return 0;
}

/* --daemon: detach from the terminal and the session, the log appended to
 * a file. Returns the parent's exit status (>= 0) in the parent, -1 in
 * the daemon; dies if it cannot. */
static int daemonize(struct spool *sp, const char *log)
{
	_cleanup_close_ int lfd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0644);
	if (lfd < 0)
		die("--daemon: %s: %s", log, strerror(errno));
	int before = spool_live_workers(sp);
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		die("pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid > 0) {
		/* The daemon's pid comes from the middle child, which exits. */
		close(p[1]);
		pid_t dpid = 0;
		ssize_t got = read(p[0], &dpid, sizeof dpid);
		close(p[0]);
		(void)waitpid(pid, NULL, 0);
		if (got != (ssize_t)sizeof dpid) {
			fprintf(stderr, "kart worker: the daemon could not start\n");
			return 1;
		}
		return daemon_started(sp, dpid, before < 0 ? 0 : before, log);
	}
	close(p[0]);
	if (setsid() < 0)
		die("setsid: %s", strerror(errno));
	pid = fork(); /* no longer a session leader: no terminal can come back */
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid > 0)
		_exit(0);
	pid_t me = getpid();
	if (write(p[1], &me, sizeof me) != (ssize_t)sizeof me)
		_exit(1);
	close(p[1]);
	int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (nul < 0 || dup2(nul, STDIN_FILENO) < 0 || dup2(lfd, STDOUT_FILENO) < 0 ||
	    dup2(lfd, STDERR_FILENO) < 0)
		_exit(1);
	if (nul > STDERR_FILENO)
		close(nul);
	return -1;
}

int cmd_worker(struct ctx *c, int argc, char **argv)
{
	struct worker_opts wo = {0};
	bool daemon = false;
	const char *logfile = NULL;
	enum log_format logf = LOG_LOGFMT;
	char defid[HOST_NAME_MAX + 32];
	int batch = -1;
	const struct opt opts[] = {
		OPT_STRING(0, "id", &wo.id, "ID",
			   "this worker's id (default: HOST.PID); a worker that starts again under its "
			   "old id recovers its claims"),
		OPT_INT(0, "slots", &wo.slots[LANE_FAST], "N", "tasks run at once in the fast lane "
			"(default 3)", 1, 4096),
		OPT_INT(0, "batch-slots", &batch, "N", "tasks run at once in the batch lane (default 1)",
			0, 4096),
		OPT_BOOL(0, "drain", &wo.drain, "exit 0 once new/ is empty and nothing runs"),
		OPT_CALLBACK(0, "log-format", &logf, "FMT",
			     "logfmt (default), json, or text: one line per task event (claimed, "
			     "started, finished) on stderr", opt_log_format),
		OPT_BOOL(0, "daemon", &daemon,
			 "detach (once the policy is read) and log to FILE, by default SPOOL/worker.log"),
		OPT_STRING(0, "log", &logfile, "FILE", "with --daemon: where the log goes (appended)"),
		OPT_END(),
	};
	struct opts_rest rest;
	opts_parse("worker", argc, argv, opts, &help, 0, &rest);
	if (rest.argc > 0)
		return usage_error("worker", "unexpected argument '%s'", rest.argv[0]);
	if (batch >= 0)
		wo.slots[LANE_BATCH] = batch ? batch : -1;
	if (logfile && !daemon)
		return usage_error("worker", "--log goes with --daemon (else the log is on stderr)");
	if (!wo.id) {
		char host[HOST_NAME_MAX + 1] = "host";
		(void)gethostname(host, sizeof host);
		host[HOST_NAME_MAX] = '\0';
		snprintf(defid, sizeof defid, "%s.%d", host, getpid());
		wo.id = defid;
	}
	const char *why;
	if (task_name_check(wo.id, &why) != 0)
		return usage_error("worker", "--id %s: not a valid worker id", wo.id);

	log_setup(logf, wo.id);
	struct policy pol;
	char err[512];
	struct spool *sp = &c->sp;
	/* A policy that cannot be read stops the worker: never run on
	 * silently with defaults. */
	if (policy_load(&pol, sp->path, err, sizeof err) < 0) {
		fprintf(stderr, "kart worker: policy: %s\n", err);
		return 1;
	}
	/* Tasks see the spool through absolute paths. */
	char *abs = realpath(sp->path, NULL);
	if (!abs)
		die("%s: %s", sp->path, strerror(errno));
	free(sp->path);
	sp->path = abs;
	/* The backend's program, resolved from the worker's PATH (tasks get
	 * their own); the hosted-posture gate; a container backend's image. */
	if (policy_prepare(&pol, sp->path, err, sizeof err) < 0) {
		fprintf(stderr, "kart worker: %s\n", err);
		return 1;
	}
	if (access(pol.launcher, X_OK) < 0) {
		fprintf(stderr, "kart worker: launcher %s: %s\n", pol.launcher, strerror(errno));
		return 1;
	}
	if (wo.slots[LANE_BATCH] < 0)
		pol.slots[LANE_BATCH] = 0, wo.slots[LANE_BATCH] = 0;
	policy_env_names(&pol, env_missing, NULL);
	if (daemon) {
		char lp[4096];
		if (!logfile && pathfmt(lp, sizeof lp, "%s/worker.log", sp->path) < 0)
			die("%s/worker.log: path too long", sp->path);
		int d = daemonize(sp, logfile ? logfile : lp);
		if (d >= 0)
			return d; /* the parent */
		if (wo.id == defid) {
			/* The daemon's own pid, as a worker started by hand has. */
			snprintf(defid + strcspn(defid, "."), sizeof defid - strcspn(defid, "."), ".%d",
				 getpid());
			log_setup(logf, wo.id);
		}
	}
	int r = worker_main(sp, &pol, &wo);
	spool_close(sp);
	return r;
}
