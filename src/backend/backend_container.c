/* backend_container.c - each attempt a fresh container of a container
 * engine (docker, podman, nerdctl), run by its CLI as the worker's
 * child; the engine holds the limits (its own cgroups) and runs the task
 * as its submitter. The container goes by its name, whatever becomes of
 * the CLI: killed and removed by name, and a dead worker's found again by
 * their label (container.c). */
#define _GNU_SOURCE
#include <signal.h>

#include "backend_local.h"
#include "container.h"

/* kart.worker=<this>: the label of this worker's containers, and the
 * count that names each (container_name). */
static char label[96];
static unsigned long seq;

/* Its container, or "" once it is killed and removed. */
struct container_task {
	char name[160];
};

static char *cname(struct task *t)
{
	struct container_task *c = t->be_task;
	return c ? c->name : NULL;
}

/* The CLI answers `version` when it can reach its engine; what will not
 * work with this engine on this host, and why. */
static void container_probe(const struct policy *pol, struct backend_probe *p)
{
	char cmd[PATH_MAX], out[256] = "";
	bool found = find_in_path(pol->container_cmd, cmd, sizeof cmd) == 0;
	char *const vargv[] = {cmd, "version", "--format", "{{.Server.Version}}", NULL};
	int st = found ? host_run(vargv, out, sizeof out, 10000) : -1;
	out[strcspn(out, "\n")] = '\0';
	struct engine_facts f;
	struct engine_problem probs[ENGINE_PROBLEMS_MAX];
	int np = 0;
	if (found) {
		container_facts(cmd, &f);
		np = container_problems(&f, pol, probs);
	}
	json_t *pa = json_array();
	for (int i = 0; i < np; i++) {
		json_array_append_new(pa, json_pack("{s:b, s:s}", "fatal", probs[i].fatal, "detail",
						    probs[i].what));
		if (probs[i].fatal)
			p->ok = false;
	}
	p->facts = json_pack("{s:{s:s, s:o, s:b, s:s, s:s, s:o}}", "container", "command",
			     pol->container_cmd, "path", found ? json_string(cmd) : json_null(),
			     "works", st == 0, "engine", st == 0 ? out : "not reachable", "cli",
			     !found ? "none" : f.podman ? "podman" : "docker-compatible", "problems", pa);
	if (st != 0)
		p->ok = false;
}

/* The containers of a dead worker (or of this worker's earlier life: all
 * but this life's) run on without their CLI; they go before its claims
 * run again. Bounded, and in the loop: it happens only when a worker has
 * died. Only where this worker drives the engine. */
static int container_sweep_peer(struct worker *w, const char *peer, bool started)
{
	if (!started)
		return 0;
	char plabel[96], keep[160];
	container_label(w->sp->path, peer, plabel, sizeof plabel);
	/* This life's names start so (container_name). */
	snprintf(keep, sizeof keep, "kart-%s-%d-", label, (int)getpid());
	int n = container_sweep(w->pol, plabel, strcmp(peer, w->id) == 0 ? keep : NULL, 30000);
	if (n < 0)
		logmsg("%s: cannot list the containers of worker %s", w->pol->container_cmd, peer);
	else if (n)
		logmsg("removed %d container(s) left by worker %s", n, peer);
	return 0;
}

static void container_start(struct worker *w)
{
	container_label(w->sp->path, w->id, label, sizeof label);
	(void)container_sweep_peer(w, w->id, true);
}

static int container_prepare(struct worker *w, struct task *t, struct backend_start *b)
{
	__attribute__((cleanup(local_start_close))) struct local_start s = LOCAL_START_INIT(b);
	/* No leaf: the engine applies the limits (--memory, --pids-limit,
	 * --cpus). Its /work is bound into the container; /tmp is the
	 * engine's tmpfs. The filter goes as a JSON profile, unless the
	 * policy says the runtime takes none. */
	if (local_outdir(w, t, &s, false) < 0 || local_workdir(w, t, &s) < 0 ||
	    local_outdir_give(w, t, &s) < 0 ||
	    local_filter(w, t, &s, w->pol->container_seccomp ? LOCAL_FILTER_JSON : LOCAL_FILTER_OFF) < 0)
		return -1;
	struct container_task *c = xcalloc(1, sizeof *c);
	t->be_task = c;
	container_name(label, ++seq, c->name, sizeof c->name);
	s.container_name = c->name;
	s.container_label = label;
	if (local_sandbox(w, t, &s, sandbox_container) < 0)
		return -1;
	struct spawn_job *j = local_job(w, t, &s);
	/* The CLI runs as the worker (it needs the engine's socket), in a
	 * group of its own; the container runs as the submitter (--user). */
	j->pgroup = true;
	return 0;
}

/* By name, whatever became of the CLI that started it (killed on a
 * timeout, or failed): kill, then remove (one that never got to run is
 * only removed). One that ended by itself is only removed (no --rm: its
 * state is read first). */
static void container_kill(struct worker *w, struct task *t, bool ended)
{
	char what[256], *name = cname(t);
	if (!name || !name[0])
		return;
	char *const k[] = {w->pol->container_cmd, "kill", name, NULL};
	char *const rm[] = {w->pol->container_cmd, "rm", "--force", name, NULL};
	snprintf(what, sizeof what, "container %s %.160s", ended ? "rm" : "kill/rm", name);
	hook_spawn_host(w, ended ? rm : k, ended ? NULL : rm, what);
	name[0] = '\0';
}

/* The polite half: the runtime passes SIGTERM to the container's init.
 * The CLI is not the container: a kill goes by name too. */
static bool container_signal(struct worker *w, struct task *t, int sig)
{
	char what[256], *name = cname(t);
	if (sig == SIGKILL) {
		local_kill(w, t);
		container_kill(w, t, false);
		return true;
	}
	if (!name || !name[0])
		return false;
	char *const k[] = {w->pol->container_cmd, "kill", "--signal", "TERM", name, NULL};
	snprintf(what, sizeof what, "container kill --signal TERM %.160s", name);
	hook_spawn_host(w, k, NULL, what);
	return true;
}

/* The CLI is not the container: a SIGSTOP to the CLI's group would
 * leave the task running. The engine freezes the container's own cgroup
 * (docker, podman and nerdctl pause). Waited for in the loop, as the OOM
 * look is: rare and quick, and kart pause is answered only once it holds. */
static int container_pause(struct worker *w, struct task *t, bool on)
{
	char out[512] = "", *name = cname(t);
	if (!name || !name[0])
		return -ESRCH;
	char *const argv[] = {w->pol->container_cmd, on ? "pause" : "unpause", name, NULL};
	if (host_run(argv, out, sizeof out, 10000) != 0) {
		out[strcspn(out, "\n")] = '\0';
		logmsg("%s: %s %s: %s", t->name, w->pol->container_cmd, argv[1],
		       out[0] ? out : "failed");
		/* Not made yet, or gone: nothing to hold still. */
		return on ? -EAGAIN : 0;
	}
	return on ? PAUSE_FREEZE : 0;
}

/* No launcher reports from inside, so the CLI's own status says how it
 * went. docker, podman and nerdctl all exit 125 when the container could
 * not be made or started, and otherwise with the container's status (126
 * and 127 are the task's, as with a shell). */
static void container_reap(struct worker *w, struct task *t)
{
	local_reap(w, t);
	struct run_end *e = &t->rend;
	int st = e->wrapper_status;
	bool clean = WIFEXITED(st) && WEXITSTATUS(st) != 125;
	if (clean) {
		e->started = e->exited = true;
		e->exit_code = WEXITSTATUS(st);
	} else if (WIFSIGNALED(st)) {
		e->started = true;
		e->signal = WTERMSIG(st);
	}
	/* SIGKILL under a memory limit: the runtime says whether it was the
	 * limit, read before the removal takes the container's state. */
	t->engine_oom = 0;
	if (clean && t->end == END_NATURAL && e->exit_code == 137 && t->spec.memory)
		t->engine_oom = container_oom_killed(w->pol, cname(t), 5000);
	/* Whatever ended the CLI other than its container's exit (a kill of
	 * ours, a failure), the container is killed by name; removed in
	 * every case. */
	container_kill(w, t, clean && t->end == END_NATURAL);
}

/* The engine runs the task in a cgroup of its own: what the worker
 * reaped is the engine's CLI, whose figures are not the task's. */
static void container_usage(const struct task *t, struct backend_usage *u)
{
	(void)t;
	backend_usage_init(u);
	for (int i = 0; i < UF__N; i++)
		u->why[i] = "the container engine ran the task, in a cgroup of its own: kart does "
			    "not measure it";
}

static void container_cleanup(struct worker *w, struct task *t)
{
	(void)w;
	free(t->be_task);
	t->be_task = NULL;
}

const struct backend backend_container = {
	.name = "container",
	.engine_limits = true,
	.work = SANDBOX_WORK,
	.probe = container_probe,
	.start = container_start,
	.sweep = container_sweep_peer,
	.prepare = container_prepare,
	.spawn = local_spawn,
	.started = local_started,
	.unspawned = local_unspawned,
	.ready = local_ready,
	.signal = container_signal,
	.pause = container_pause,
	.reap = container_reap,
	.usage = container_usage,
	.cleanup = container_cleanup,
};
