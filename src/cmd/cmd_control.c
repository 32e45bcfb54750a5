/* kart hold, kart release, kart edit: a queued task steered by renames
 * in new/ (control.c). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cmd.h"
#include "opts.h"
#include "control.h"
#include "policy.h"
#include "query.h"
#include "task.h"
#include "termsafe.h"
#include "util.h"
#include "worker_control.h"

static const struct opts_help hold_help = {
	"usage: kart [-s SPOOL] hold ID...\n"
	"\n"
	"Hold queued tasks: each stays queued (new/.held.ID) but no worker claims\n"
	"it until kart release. kart status says `held`. A task a worker claims\n"
	"at the same instant either is held, or is said to have started.\n",
	"exit status: 0 if every task is held; 1 if one had already started or\n"
	"finished, is unknown, or is not yours; 2 usage error\n",
};

static const struct opts_help release_help = {
	"usage: kart [-s SPOOL] release ID...\n"
	"\n"
	"Release held tasks: each is queued again, and a worker claims it.\n",
	"exit status: 0 if every task was released; 1 if one was not held, is\n"
	"unknown, or is not yours; 2 usage error\n",
};

static const struct opts_help edit_help = {
	"usage: kart [-s SPOOL] edit [--set KEY=VALUE]... ID\n"
	"\n"
	"Edit a queued (or held) task in $VISUAL, else $EDITOR, else vi. When the\n"
	"editor exits, its directives are checked as a worker would, and the\n"
	"edited file replaces the queued one atomically, only if the task is\n"
	"still queued; otherwise the edited copy is kept and its path printed.\n",
	"exit status: 0 if the task was changed (or left unchanged by the\n"
	"editor); 1 if it had started, is not yours, or its directives are bad;\n"
	"2 usage error\n",
};

/* How long a worker has to answer a pause or a resume, or a request
 * through a drop directory. */
#define ANSWER_MS 10000

/* Why a task is not where a verb wanted it, on stdout as kart cancel
 * says it. 1, the exit status. */
static int say_state(struct spool *sp, const char *verb, const char *id)
{
	_cleanup_free_ char *sid = term_safe(id), *sw = NULL;
	struct qinfo q;
	if (query_id(sp, id, &q) < 0)
		q.state = Q_UNKNOWN;
	switch (q.state) {
	case Q_RUNNING:
		sw = term_safe(q.worker);
		printf("%s: had already started on %s\n", sid, sw);
		break;
	case Q_DONE: printf("%s: had already finished: %s\n", sid, q.status); break;
	case Q_QUEUED:
	case Q_SCHEDULED: printf("%s: not held\n", sid); break;
	case Q_HELD: printf("%s: held\n", sid); return 0;
	default: fprintf(stderr, "kart %s: %s: no such task\n", verb, sid); break;
	}
	return 1;
}

static int control_ids(struct ctx *c, int argc, char **argv, const char *verb,
		       const struct opts_help *help, bool hold)
{
	const struct opt opts[] = {OPT_END()};
	struct opts_rest rest;
	opts_parse(verb, argc, argv, opts, help, 0, &rest);
	if (rest.argc == 0)
		return usage_error(verb, "no task ID given");
	struct spool *sp = &c->sp;
	int rc = 0;
	for (int i = 0; i < rest.argc; i++) {
		_cleanup_free_ char *id = spool_own_id(sp, rest.argv[i]), *sid = term_safe(id);
		const char *why;
		if (task_name_check(id, &why) != 0) {
			fprintf(stderr, "kart %s: %s: no such task\n", verb, sid);
			rc = 1;
			continue;
		}
		int r;
		if (control_via_drop(sp)) {
			/* A shared spool: a worker does it, and the spool says
			 * how it went. */
			struct qinfo q;
			r = control_request(sp, verb, id, "", 0, ANSWER_MS);
			if (r == 0 && (query_id(sp, id, &q) < 0 || (q.state == Q_HELD) != hold))
				r = -ENOENT;
		} else {
			/* A finished id's name may be another task's by now (a
			 * file copied in, to finish as ID.2): not that one. */
			struct qinfo q;
			bool known = query_id(sp, id, &q) == 0;
			const char *at = known ? query_entry(id, &q) : id;
			if (known && q.state == Q_DONE)
				r = -ENOENT;
			else
				r = hold ? control_hold(sp, at) : control_release(sp, at);
		}
		if (r == 0) {
			printf("%s: %s\n", sid, hold ? "held" : "released");
			continue;
		}
		if (r == -ENOENT) {
			/* Not where we looked: claimed, or already so, or gone. */
			if (!hold) {
				struct qinfo q;
				if (query_id(sp, id, &q) == 0 && q.state == Q_HELD)
					r = control_release(sp, query_entry(id, &q)); /* in motion: once more */
				if (r == 0) {
					printf("%s: released\n", sid);
					continue;
				}
			}
			if (say_state(sp, verb, id) != 0 || !hold)
				rc = 1;
			continue;
		}
		rc = 1;
		if (r == -EPERM)
			fprintf(stderr, "kart %s: %s: not your task (only its submitter or root may %s it)\n",
				verb, sid, verb);
		else if (r == -EEXIST)
			fprintf(stderr, "kart %s: %s: another task of that name is %s already\n", verb, sid,
				hold ? "held" : "queued");
		else if (r == -ETIMEDOUT)
			fprintf(stderr, "kart %s: %s: no worker took the request (is one running?)\n", verb, sid);
		else
			fprintf(stderr, "kart %s: %s: %s\n", verb, sid, strerror(-r));
	}
	spool_close(sp);
	return rc;
}

int cmd_hold(struct ctx *c, int argc, char **argv)
{
	return control_ids(c, argc, argv, "hold", &hold_help, true);
}

int cmd_release(struct ctx *c, int argc, char **argv)
{
	return control_ids(c, argc, argv, "release", &release_help, false);
}

/* Run the user's editor on path, as a shell would ($VISUAL may carry
 * arguments). 0 when it exited 0. */
static int run_editor(const char *path)
{
	const char *ed = getenv("VISUAL");
	if (!ed || !*ed)
		ed = getenv("EDITOR");
	if (!ed || !*ed)
		ed = "vi";
	_cleanup_free_ char *cmd = xasprintf("%s \"$1\"", ed);
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", cmd, "sh", path, (char *)NULL);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -ECANCELED;
}

/* The edited copy, kept for the user when it does not go in. */
static void keep_copy(const char *text, size_t len, char *path, size_t plen)
{
	if (path[0])
		return;
	const char *dir = getenv("TMPDIR");
	snprintf(path, plen, "%s/kart-edit.XXXXXX", dir && *dir ? dir : "/tmp");
	_cleanup_close_ int fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0 || write_all(fd, text, len) < 0)
		path[0] = '\0';
}

/* --set KEY=VALUE; not_before=now is the time it is given. */
static int opt_set(const struct opt *o, const char *arg, struct opts_ctx *ctx)
{
	if (!strchr(arg, '=') || arg[0] == '=')
		return usage_error(ctx->verb, "--set %s: not KEY=VALUE", arg);
	if (strcmp(arg, "not_before=now") == 0) {
		char ts[32];
		fmt_rfc3339_ms(now_realtime_ms(), ts);
		strv_addf(o->value, "not_before=%s", ts);
	} else {
		strv_add(o->value, arg);
	}
	return 0;
}

int cmd_edit(struct ctx *c, int argc, char **argv)
{
	struct strv sets = {0};
	const struct opt opts[] = {
		OPT_CALLBACK(0, "set", &sets, "KEY=VALUE",
			     "set one directive (timeout=5m, memory=1G, ...) without an editor; repeat "
			     "for several. not_before=now starts a scheduled task at once", opt_set),
		OPT_END(),
	};
	struct opts_rest rest;
	opts_parse("edit", argc, argv, opts, &edit_help, 0, &rest);
	if (rest.argc != 1)
		return usage_error("edit", "give exactly one task ID");
	struct spool *sp = &c->sp;
	_cleanup_free_ char *id = spool_own_id(sp, rest.argv[0]), *sid = term_safe(id);
	struct qinfo q;
	if (query_id(sp, id, &q) < 0)
		q.state = Q_UNKNOWN;
	if (q.state != Q_QUEUED && q.state != Q_SCHEDULED && q.state != Q_HELD) {
		if (q.state == Q_UNKNOWN)
			fprintf(stderr, "kart edit: %s: no such task\n", sid);
		else
			(void)say_state(sp, "edit", id);
		return 1;
	}
	/* Its file, which for a reserved id re-queued is ID.2 (query_entry). */
	char name[TASK_NAME_MAX + 24];
	const char *at = query_entry(id, &q);
	if (q.state == Q_HELD ? spool_held_name(at, name, sizeof name) < 0
			      : pathfmt(name, sizeof name, "%s", at) < 0)
		return 1;
	struct policy pol;
	char err[1024];
	if (policy_load(&pol, sp->path, err, sizeof err) < 0) {
		fprintf(stderr, "kart edit: %s\n", err);
		return 1;
	}
	/* Read as a worker would: never blocking, never following a link. */
	_cleanup_close_ int orig = openat(sp->new, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (orig < 0 || fstat(orig, &st) < 0) {
		if (errno == ENOENT)
			return say_state(sp, "edit", id);
		fprintf(stderr, "kart edit: %s: %s\n", sid, strerror(errno));
		return 1;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > pol.task_max_bytes) {
		fprintf(stderr, "kart edit: %s: not a task file a worker would run\n", sid);
		return 1;
	}
	if (control_may(sp, id, &st) < 0) {
		fprintf(stderr, "kart edit: %s: not your task (only its submitter or root may edit it)\n", sid);
		return 1;
	}
	size_t len;
	int r;
	_cleanup_free_ char *text = xmalloc((size_t)st.st_size + 1);
	ssize_t n = pread(orig, text, (size_t)st.st_size, 0);
	if (n < 0) {
		fprintf(stderr, "kart edit: %s: %s\n", sid, strerror(errno));
		return 1;
	}
	len = (size_t)n;
	_cleanup_free_ char *edited = NULL;
	size_t elen = 0;
	char kept[4096] = "";
	if (sets.n) {
		edited = xmalloc(len + 1);
		memcpy(edited, text, len);
		elen = len;
		for (size_t i = 0; i < sets.n; i++) {
			char *next;
			size_t nlen;
			if (control_set_item(edited, elen, sets.v[i], &next, &nlen) < 0) {
				strv_free(&sets);
				return usage_error("edit", "--set %s: not KEY=VALUE", sets.v[i]);
			}
			free(edited);
			edited = next, elen = nlen;
		}
		strv_free(&sets);
	} else {
		keep_copy(text, len, kept, sizeof kept);
		if (!kept[0]) {
			fprintf(stderr, "kart edit: cannot make a copy to edit: %s\n", strerror(errno));
			return 1;
		}
		if ((r = run_editor(kept)) < 0) {
			fprintf(stderr, "kart edit: %s: the editor failed; nothing changed (your copy: %s)\n",
				sid, kept);
			return 1;
		}
		if (read_file_at(AT_FDCWD, kept, pol.task_max_bytes, &edited, &elen) < 0) {
			fprintf(stderr, "kart edit: %s: cannot read %s back: %s\n", sid, kept, strerror(errno));
			return 1;
		}
		if (elen == len && memcmp(edited, text, len) == 0) {
			(void)unlink(kept);
			printf("%s: unchanged\n", sid);
			return 0;
		}
	}
	/* The directives, checked as the worker will, before the swap. */
	struct task_spec spec;
	uid_t submitter = spool_reader(sp, id, st.st_uid);
	if (task_parse(edited, elen < TASK_HEADER_MAX ? elen : TASK_HEADER_MAX, &spec, err, sizeof err) < 0 ||
	    task_resolve_kind(&spec, &pol, id, err, sizeof err) < 0 ||
	    task_check_policy(&spec, &pol, submitter, err, sizeof err) < 0) {
		keep_copy(edited, elen, kept, sizeof kept);
		_cleanup_free_ char *serr = term_safe(err); /* it may quote the task */
		fprintf(stderr, "kart edit: %s: %s; nothing changed%s%s%s\n", sid, serr,
			kept[0] ? " (your copy: " : "", kept, kept[0] ? ")" : "");
		return 1;
	}
	if (control_via_drop(sp)) {
		/* A worker swaps it in; done if new/ now holds this text. */
		r = control_request(sp, "edit", id, edited, elen, ANSWER_MS);
		_cleanup_free_ char *now = NULL;
		size_t nlen = 0;
		struct qinfo q2;
		if (r == 0 && query_id(sp, id, &q2) == 0 &&
		    (q2.state == Q_QUEUED || q2.state == Q_SCHEDULED || q2.state == Q_HELD) &&
		    (q2.state == Q_HELD ? spool_held_name(query_entry(id, &q2), name, sizeof name)
					: pathfmt(name, sizeof name, "%s", query_entry(id, &q2))) == 0 &&
		    read_file_at(sp->new, name, pol.task_max_bytes, &now, &nlen) == 0)
			r = nlen == elen && memcmp(now, edited, elen) == 0 ? 0 : -ESTALE;
		else if (r == 0)
			r = -ENOENT;
	} else {
		r = control_replace(sp, name, orig, edited, elen);
	}
	if (r == 0) {
		if (kept[0])
			(void)unlink(kept);
		printf("%s: edited\n", sid);
		return 0;
	}
	keep_copy(edited, elen, kept, sizeof kept);
	if (r == -ENOENT) {
		(void)say_state(sp, "edit", id);
		fprintf(stderr, "kart edit: %s: no longer queued; nothing changed (your copy: %s)\n", sid, kept);
	} else if (r == -ESTALE) {
		fprintf(stderr, "kart edit: %s: changed by someone else meanwhile; nothing changed "
				"(your copy: %s)\n", sid, kept);
	} else if (r == -ETIMEDOUT) {
		fprintf(stderr, "kart edit: %s: no worker took the request (is one running?); nothing "
				"changed (your copy: %s)\n", sid, kept);
	} else {
		fprintf(stderr, "kart edit: %s: %s; nothing changed (your copy: %s)\n", sid, strerror(-r), kept);
	}
	return 1;
}

static const struct opts_help pause_help = {
	"usage: kart [-s SPOOL] pause ID...\n"
	"       kart [-s SPOOL] pause --all [--freeze]\n"
	"\n"
	"Pause running tasks: the whole tree of each is frozen (its cgroup's\n"
	"cgroup.freeze, or the v1 freezer; without a cgroup, SIGSTOP to each of\n"
	"its processes), its timeout stops counting, and kart status says\n"
	"`paused`; kart resume goes on. Its result reports `paused_ms`. A cancel\n"
	"or a worker's stop ends a paused task as any other.\n",
	"exit status: 0 if every task is paused; 1 if one is not running, is not\n"
	"yours, or its worker did not answer; 2 usage error\n",
};

static const struct opts_help resume_help = {
	"usage: kart [-s SPOOL] resume ID...\n"
	"       kart [-s SPOOL] resume --all\n"
	"\n"
	"Resume paused tasks (their timeout counts again from where it stopped).\n",
	"exit status: 0 if every task runs again; 1 if one was not paused, is not\n"
	"yours, or its worker did not answer; 2 usage error\n",
};


/* Ask the worker running the claim cur/worker/name to pause it (or resume
 * it), and wait for its answer: .NAME.paused made (or removed). 0; -ENOENT
 * the claim left meanwhile; -ETIMEDOUT no answer. */
static int pause_one(struct spool *sp, const char *worker, const char *name, bool on, char *refusal,
		     size_t refusal_len)
{
	/* On a shared spool a worker makes (or removes) the request. */
	bool ask = !control_via_drop(sp);
	if (!ask) {
		int r = control_request(sp, on ? "pause" : "resume", name, "", 0, ANSWER_MS);
		if (r < 0)
			return r;
	}
	char dir[4096], req[600], ack[600], claim[600], nopause[600];
	_cleanup_close_ int ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (ino < 0 || pathfmt(dir, sizeof dir, "%s/cur/%s", sp->path, worker) < 0 ||
	    spool_name_claim_scratch(req, sizeof req, worker, name, SCRATCH_PAUSE) < 0 ||
	    spool_name_claim_scratch(ack, sizeof ack, worker, name, SCRATCH_PAUSED) < 0 ||
	    spool_name_claim_scratch(nopause, sizeof nopause, worker, name, SCRATCH_NOPAUSE) < 0 ||
	    pathfmt(claim, sizeof claim, "%s/%s", worker, name) < 0)
		return -ENAMETOOLONG;
	if (inotify_add_watch(ino, dir, IN_CREATE | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF |
					   IN_ONLYDIR) < 0)
		return -errno;
	int64_t end = now_mono_ms() + ANSWER_MS;
	for (;;) {
		struct stat st;
		if (fstatat(sp->cur, claim, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return -ENOENT;
		/* The request is a level: made again if the worker's clean-up
		 * before the run took it (it was made just as the run began). */
		if (ask && on) {
			int fd = openat(sp->cur, req, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
			if (fd < 0)
				return -errno;
			close(fd);
		} else if (ask && unlinkat(sp->cur, req, 0) < 0 && errno != ENOENT) {
			return -errno;
		}
		bool acked = fstatat(sp->cur, ack, &st, AT_SYMLINK_NOFOLLOW) == 0;
		if (acked == on)
			return 0;
		/* The worker could not freeze it, and said why. */
		_cleanup_free_ char *why = NULL;
		size_t wl = 0;
		if (on && read_file_at(sp->cur, nopause, 1024, &why, &wl) == 0 && wl) {
			while (wl && why[wl - 1] == '\n')
				why[--wl] = '\0';
			snprintf(refusal, refusal_len, "%s", why);
			if (ask)
				(void)unlinkat(sp->cur, req, 0); /* not left to be tried again */
			return -EOPNOTSUPP;
		}
		int64_t rest = end - now_mono_ms();
		if (rest <= 0)
			return -ETIMEDOUT;
		struct pollfd pfd = {.fd = ino, .events = POLLIN};
		if (poll(&pfd, 1, (int)rest) > 0) {
			char buf[4096];
			while (read(ino, buf, sizeof buf) > 0)
				;
		}
	}
}

/* The spool's own pause: new/.paused, made or removed. */
static int spool_pause(struct spool *sp, bool on)
{
	if (on) {
		int fd = openat(sp->new, WCTL_SPOOL_PAUSED, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
		if (fd < 0)
			return -errno;
		close(fd);
	} else if (unlinkat(sp->new, WCTL_SPOOL_PAUSED, 0) < 0 && errno != ENOENT) {
		return -errno;
	}
	return fsync(sp->new) < 0 ? -errno : 0;
}

struct all_arg {
	struct spool *sp;
	bool on;
	int rc;
};

static void pause_each(const char *id, const struct qinfo *q, void *arg)
{
	struct all_arg *a = arg;
	if (q->state != Q_RUNNING || q->paused == a->on)
		return;
	_cleanup_free_ char *sid = term_safe(id);
	char refusal[1024] = "";
	int r = pause_one(a->sp, q->worker, query_entry(id, q), a->on, refusal, sizeof refusal);
	if (r == 0)
		printf("%s: %s\n", sid, a->on ? "paused" : "resumed");
	else if (r != -ENOENT) {
		fprintf(stderr, "kart %s: %s: %s%s\n", a->on ? "pause" : "resume", sid,
			r == -EOPNOTSUPP && refusal[0] ? "its worker cannot pause it: " : "",
			r == -EOPNOTSUPP && refusal[0] ? refusal
			: r == -ETIMEDOUT		 ? "its worker did not answer"
							 : strerror(-r));
		a->rc = 1;
	}
}

static int pause_verb(struct ctx *c, int argc, char **argv, bool on)
{
	const char *verb = on ? "pause" : "resume";
	bool all = false, freeze = false;
	const struct opt pause_opts[] = {
		OPT_BOOL(0, "all", &all,
			 "pause the spool: workers claim nothing new (new/.paused) until kart resume "
			 "--all; running tasks go on"),
		OPT_BOOL(0, "freeze", &freeze, "with --all: pause every running task too"),
		OPT_END(),
	};
	const struct opt resume_opts[] = {
		OPT_BOOL(0, "all", &all, "let workers claim again, and resume every paused task"),
		OPT_END(),
	};
	struct opts_rest rest;
	opts_parse(verb, argc, argv, on ? pause_opts : resume_opts, on ? &pause_help : &resume_help, 0,
		   &rest);
	argc = rest.argc;
	argv = rest.argv;
	if (freeze && !all)
		return usage_error(verb, "--freeze goes with --all");
	if (all != (argc == 0))
		return usage_error(verb, all ? "--all takes no ID" : "no task ID given");
	struct spool *sp = &c->sp;
	if (all) {
		int r = spool_pause(sp, on);
		if (r < 0) {
			fprintf(stderr, "kart %s: %s/new/%s: %s\n", verb, sp->path, WCTL_SPOOL_PAUSED, strerror(-r));
			return 1;
		}
		printf("spool %s\n", on ? "paused: workers claim nothing new" : "resumed");
		struct all_arg a = {sp, on, 0};
		/* resume --all ends every task's pause, --freeze makes one. */
		if (!on || freeze)
			(void)query_all(sp, pause_each, &a);
		return a.rc;
	}
	int rc = 0;
	for (int i = 0; i < argc; i++) {
		_cleanup_free_ char *id = spool_own_id(sp, argv[i]), *sid = term_safe(id);
		struct qinfo q;
		char claim[600];
		struct stat st;
		if (query_id(sp, id, &q) < 0)
			q.state = Q_UNKNOWN;
		if (q.state == Q_QUEUED || q.state == Q_SCHEDULED || q.state == Q_HELD) {
			printf("%s: not running (%s)%s\n", sid,
			       q.state == Q_HELD ? "held" : q.state == Q_SCHEDULED ? "scheduled" : "queued",
			       on ? ": kart hold keeps a queued task from starting" : "");
			rc = 1;
			continue;
		}
		if (q.state != Q_RUNNING) {
			if (say_state(sp, verb, id) != 0)
				rc = 1;
			continue;
		}
		if (!on && !q.paused) {
			printf("%s: not paused (running on %s)\n", sid, q.worker);
			rc = 1;
			continue;
		}
		const char *at = query_entry(id, &q); /* cur/W/ID.2 for a reserved id re-queued */
		if (pathfmt(claim, sizeof claim, "%s/%s", q.worker, at) == 0 &&
		    fstatat(sp->cur, claim, &st, AT_SYMLINK_NOFOLLOW) == 0 && control_may(sp, id, &st) < 0) {
			fprintf(stderr, "kart %s: %s: not your task (only its submitter or root may %s it)\n",
				verb, sid, verb);
			rc = 1;
			continue;
		}
		char refusal[1024] = "";
		int r = pause_one(sp, q.worker, at, on, refusal, sizeof refusal);
		if (r == 0) {
			printf("%s: %s\n", sid, on ? "paused" : "resumed");
			continue;
		}
		rc = 1;
		if (r == -ENOENT)
			(void)say_state(sp, verb, id);
		else if (r == -EOPNOTSUPP && refusal[0])
			fprintf(stderr, "kart %s: %s: its worker cannot pause it: %s\n", verb, sid, refusal);
		else if (r == -EPERM)
			fprintf(stderr, "kart %s: %s: not your task (only its submitter or root may %s it)\n",
				verb, sid, verb);
		else
			fprintf(stderr, "kart %s: %s: %s\n", verb, sid,
				r == -ETIMEDOUT ? "its worker did not answer (no cgroup to freeze it by?)"
						: strerror(-r));
	}
	spool_close(sp);
	return rc;
}

int cmd_pause(struct ctx *c, int argc, char **argv) { return pause_verb(c, argc, argv, true); }
int cmd_resume(struct ctx *c, int argc, char **argv) { return pause_verb(c, argc, argv, false); }
