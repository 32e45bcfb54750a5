/* slurm_watch.c - the Slurm thread's watch over its jobs: one squeue
 * call for all of them (watch_poll), kart's signals sent (scancel,
 * scontrol: watch_control_one), a job that ended read from its stage
 * (watch_collect), sacct's receipt waited for (watch_receipts), and the
 * stage removed (watch_remove_one). slurm_thread.c runs them in turn. */
#define _GNU_SOURCE
#include "slurm.h"

#include <ctype.h>
#include <inttypes.h>
#include <sys/inotify.h>

#include "launch_job.h"

static bool state_final(const char *s)
{
	static const char *const fin[] = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT",
					  "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
					  "DEADLINE", "SPECIAL_EXIT", "REVOKED"};
	for (size_t i = 0; i < ARRAY_SIZE(fin); i++) {
		size_t l = strlen(fin[i]);
		if (strncmp(s, fin[i], l) == 0 && (s[l] == '\0' || s[l] == ' '))
			return true;
	}
	return false;
}

/* [D-]HH:MM:SS, MM:SS or SS (squeue's TimeUsed): seconds, or -1. */
static long long dur_s(const char *s)
{
	long long d = 0, v[3] = {0, 0, 0};
	int n = 0;
	const char *dash = strchr(s, '-');
	if (dash) {
		d = atoll(s);
		s = dash + 1;
	}
	for (char *e; n < 3; s = e + 1) {
		v[n++] = strtoll(s, &e, 10);
		if (*e != ':')
			break;
	}
	long long sec = n == 3 ? v[0] * 3600 + v[1] * 60 + v[2] : n == 2 ? v[0] * 60 + v[1] : v[0];
	return d * 86400 + sec;
}

/* sacct's TotalCPU ([D-][HH:]MM:SS.mmm): ms. */
static long long dur_ms(const char *s)
{
	const char *dot = strchr(s, '.');
	long long ms = dot ? atoll(dot + 1) : 0;
	return dur_s(s) * 1000 + ms;
}

/* 105328K, 12M, 3G, 1234: bytes. */
static long long rss_bytes(const char *s)
{
	char *e;
	double v = strtod(s, &e);
	if (e == s)
		return -1;
	switch (*e) {
	case 'K': v *= 1024; break;
	case 'M': v *= 1024 * 1024; break;
	case 'G': v *= 1024.0 * 1024 * 1024; break;
	case 'T': v *= 1024.0 * 1024 * 1024 * 1024; break;
	default: break;
	}
	return (long long)v;
}

/* Split line at '|' into f (n at most): how many. */
static int fields(char *line, char **f, int n)
{
	int k = 0;
	for (char *p = line; k < n;) {
		f[k++] = p;
		char *bar = strchr(p, '|');
		if (!bar)
			break;
		*bar = '\0';
		p = bar + 1;
	}
	return k;
}

static struct sjob *by_id(long long id)
{
	for (struct sjob *j = slurm.jobs; j; j = j->next)
		if (j->id == id && !j->gone)
			return j;
	return NULL;
}

/* A watched job's job/ under inotify, once (the ino thread's), and its
 * status looked for: the launcher may have written it already. */
static void watch_status(struct sjob *j)
{
	if (j->iwd || slurm.ifd < 0 || slurm.ino_gone)
		return;
	char p[PATH_MAX];
	struct stat st;
	j->iwd = pathfmt(p, sizeof p, "%s/" JOB_OWN, j->dir) < 0 ? -1
		 : inotify_add_watch(slurm.ifd, p, IN_MOVED_TO | IN_ONLYDIR | IN_DONT_FOLLOW);
	if (j->iwd == 0)
		j->iwd = -1; /* 0 means "not yet" here */
	if (j->iwd > 0 && pathfmt(p, sizeof p, "%s/" JOB_STATUS, j->dir) == 0 && lstat(p, &st) == 0) {
		j->status_seen = true;
		j->status_mono = now_mono_ms();
	}
}

/* Ended in Slurm: its stage to read, its watch no longer needed. */
static void watch_ended(struct sjob *j, int64_t now)
{
	j->phase = SJ_COLLECT;
	j->ended_mono = now;
	if (j->iwd > 0 && slurm.ifd >= 0)
		(void)inotify_rm_watch(slurm.ifd, j->iwd);
	j->iwd = -1;
}

void watch_pick(struct strv *ids, size_t max)
{
	slurm.poll_call++;
	for (int pass = 0; pass < 2; pass++) {
		for (struct sjob *j = slurm.jobs; j && ids->n < max; j = j->next)
			if (j->phase == SJ_WATCH && j->id > 0 && !j->gone && j->poll_call != slurm.poll_call &&
			    j->poll_round != slurm.poll_round) {
				strv_addf(ids, "%lld", j->id);
				j->poll_call = slurm.poll_call;
				j->poll_round = slurm.poll_round;
				watch_status(j);
			}
		if (ids->n == max)
			break;
		slurm.poll_round++; /* each looked at in this round: the next begins */
	}
}

/* One squeue for every job followed (a thousand ids a call at most);
 * a job it no longer knows is asked of sacct, else its stage says. */
void watch_poll(void)
{
	static char out[1 << 20];
	char err[2048];
	struct strv ids = {0};
	watch_pick(&ids, IDS_PER_CALL);
	if (!ids.n)
		return;
	char *idlist = strv_join(&ids, ',');
	pthread_mutex_unlock(&slurm.mu);
	char *const sq[] = {"squeue", "-h", "-t", "all", "-j", idlist, "-O",
			    "JobID:|,State:|,Reason:|,NodeList:|,Partition:|,TimeUsed:|,exit_code", NULL};
	int rc = slurm_cmd(slurm.bin, sq, NULL, out, sizeof out, err, sizeof err, CMD_TIMEOUT);
	int64_t now = now_mono_ms();
	pthread_mutex_lock(&slurm.mu);
	free(idlist);
	bool none_known = rc == 1 && strstr(err, "Invalid job id");
	if (rc != 0 && !none_known) {
		slurm_oneline(err);
		char why[700];
		snprintf(why, sizeof why, "%s: %.600s", slurm_ctld_down(err) ? "slurmctld does not answer to squeue" : "squeue failed",
			 err[0] ? err : "no answer");
		slurm_stalled(why);
		int64_t most = BACKOFF_MAX(slurm.pol->slurm_poll_ms);
		slurm.poll_every = slurm.poll_every * 2 > most ? most : slurm.poll_every * 2;
		strv_free(&ids);
		return;
	}
	/* squeue answers: a stall of squeue's (a poll's, or a lookup's) is over. */
	if (strstr(slurm.stalled, "squeue"))
		slurm_unstalled();
	bool changed = false;
	/* Those it did not list: gone from slurmctld (MinJobAge after
	 * their end), or never known to this one. */
	for (size_t i = 0; i < ids.n; i++) {
		struct sjob *j = by_id(atoll(ids.v[i]));
		if (j)
			j->wstatus = -2; /* not seen yet in this answer */
	}
	char *save = NULL;
	for (char *line = none_known ? NULL : strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[7];
		if (fields(line, f, 7) < 7)
			continue;
		for (int k = 0; k < 7; k++) {
			size_t l = strlen(f[k]);
			while (l && f[k][l - 1] == ' ')
				f[k][--l] = '\0';
		}
		struct sjob *j = by_id(atoll(f[0]));
		if (!j || j->phase != SJ_WATCH)
			continue;
		if (strcmp(j->state, f[1]))
			changed = true;
		snprintf(j->state, sizeof j->state, "%s", f[1]);
		snprintf(j->reason, sizeof j->reason, "%s", f[2]);
		if (f[3][0])
			snprintf(j->nodes, sizeof j->nodes, "%s", f[3]);
		snprintf(j->partition, sizeof j->partition, "%s", f[4]);
		j->wstatus = f[6][0] && isdigit((unsigned char)f[6][0]) ? atoi(f[6]) : -1;
		if (!j->began_mono && (strcmp(f[1], "RUNNING") == 0 || state_final(f[1])) && f[3][0]) {
			long long used = dur_s(f[5]);
			j->began_mono = now - (used > 0 ? used * 1000 : 0);
			slurm_back(j, SB_BEGAN);
		}
		if (state_final(f[1]))
			watch_ended(j, now);
	}
	for (size_t i = 0; i < ids.n; i++) {
		struct sjob *j = by_id(atoll(ids.v[i]));
		if (j && j->phase == SJ_WATCH && j->wstatus == -2) {
			/* Its stage and sacct stage_say the rest. */
			j->wstatus = -1;
			snprintf(j->state, sizeof j->state, "%s", "UNKNOWN");
			watch_ended(j, now);
			changed = true;
		}
	}
	strv_free(&ids);
	/* A job whose launcher wrote its status and that Slurm has not
	 * ended yet ends within moments: looked at again soon. */
	for (struct sjob *j = slurm.jobs; j && !changed; j = j->next)
		changed = j->phase == SJ_WATCH && j->status_seen && !j->gone && now - j->status_mono < STATUS_SOON_MS;
	slurm.poll_every = changed ? POLL_MIN
			   : slurm.poll_every * 2 > slurm.pol->slurm_poll_ms ? slurm.pol->slurm_poll_ms
									    : slurm.poll_every * 2;
}

void watch_status_seen(int wd)
{
	bool seen = false;
	for (struct sjob *j = slurm.jobs; j; j = j->next)
		if (j->phase == SJ_WATCH && !j->gone && !j->status_seen && (wd < 0 || (j->iwd > 0 && j->iwd == wd))) {
			/* Once a job: a flood of renames in her job/ brings
			 * nothing forward but the first. */
			j->status_seen = true;
			j->status_mono = now_mono_ms();
			seen = true;
		}
	if (!seen)
		return;
	/* POLL_MIN after the last at the soonest: the submitter, whose
	 * job/ it is, can make such events at will. */
	int64_t at = slurm.poll_last + POLL_MIN;
	if (at < slurm.poll_next) {
		slurm.poll_next = at;
		pthread_cond_broadcast(&slurm.cv);
	}
}

/* The attempt taken by no job (the link a job makes first), or the id
 * of the one that took it. */
static int stage_poison(const struct sjob *j, void *arg, int msg)
{
	(void)arg;
	int dfd = open(j->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || symlinkat("0", dfd, JOB_RUN) == 0)
		return 0;
	char run[64] = "";
	ssize_t k = readlinkat(dfd, JOB_RUN, run, sizeof run - 1);
	run[k > 0 ? k : 0] = '\0';
	stage_say(msg, "%s", run);
	return 0;
}

/* Stopped (a cancel) before any submission went through, which Slurm
 * may not have said (it did not answer): the attempt is taken in its
 * stage first, so that a job of it that Slurm accepted unseen runs
 * nothing; or, where such a job took it already, that job is the one
 * stopped. Under mu. */
static void stop_unsubmitted(struct sjob *j)
{
	char msg[64];
	j->busy = true;
	pthread_mutex_unlock(&slurm.mu);
	int rc = stage_as_submitter(j, stage_poison, NULL, msg, sizeof msg);
	long long taken = rc == 0 ? atoll(msg) : 0;
	/* (Asked outside the lock: j is busy, ours.) */
	int ours = taken > 0 ? slurm_job_ours(j, taken) : 0;
	pthread_mutex_lock(&slurm.mu);
	j->busy = false;
	if (j->gone) {
		slurm_let_go(j);
		return;
	}
	slurm_ask_later(j, ours);
	if (ours < 0)
		return; /* that job may run the task: nothing ends before Slurm says */
	if (taken > 0 && !ours)
		logmsg("%s: its stage's run link names job %lld, not a job of this task's: ignored", j->name, taken);
	if (ours) {
		j->id = taken;
		j->phase = SJ_WATCH; /* its scancel follows */
		return;
	}
	j->phase = SJ_DONE;
	slurm_back(j, SB_ENDED);
}

/* Back under the lock after work on j outside it: true when the loop
 * let go of j meanwhile (it is the loop's to free now). */
static bool release(struct sjob *j)
{
	j->busy = false;
	if (!j->gone)
		return false;
	slurm_let_go(j);
	return true;
}

/* kart's signals, pauses and resumptions, as Slurm's commands. */
bool watch_control_one(void)
{
	for (struct sjob *j = slurm.jobs; j; j = j->next) {
		if (j->phase == SJ_SUBMIT && j->handed && j->want_stop && !j->busy && !j->gone &&
		    j->ask_next <= now_mono_ms()) {
			stop_unsubmitted(j);
			return true;
		}
		if (j->gone || j->id <= 0 || j->phase != SJ_WATCH)
			continue;
		char id[32], sig[32];
		snprintf(id, sizeof id, "%lld", j->id);
		if (j->want_stop > j->sent_stop) {
			int s = j->want_stop;
			bool pending = !j->began_mono;
			j->sent_stop = s;
			/* Outside the lock another thread may end the job and the
			 * loop let go of it: busy keeps it ours until we are back. */
			j->busy = true;
			pthread_mutex_unlock(&slurm.mu);
			if (s == STOP_TERM && !pending) {
				/* To the batch script alone, which is the launcher:
				 * it passes it into the sandbox. */
				char *const sc[] = {"scancel", "--batch", "--signal=TERM", id, NULL};
				(void)slurm_cmd(slurm.bin, sc, NULL, NULL, 0, NULL, 0, CMD_TIMEOUT);
			} else {
				if (!pending) {
					snprintf(sig, sizeof sig, "--signal=KILL");
					char *const sk[] = {"scancel", "--full", sig, id, NULL};
					(void)slurm_cmd(slurm.bin, sk, NULL, NULL, 0, NULL, 0, CMD_TIMEOUT);
				}
				char *const sc[] = {"scancel", id, NULL};
				(void)slurm_cmd(slurm.bin, sc, NULL, NULL, 0, NULL, 0, CMD_TIMEOUT);
			}
			pthread_mutex_lock(&slurm.mu);
			if (release(j))
				return true;
			slurm.poll_every = POLL_MIN;
			slurm.poll_next = 0;
			return true;
		}
		if (j->want_pause) {
			int p = j->want_pause;
			bool held = j->held;
			char name[sizeof j->name];
			snprintf(name, sizeof name, "%s", j->name);
			j->want_pause = 0;
			j->busy = true;
			pthread_mutex_unlock(&slurm.mu);
			char err[1024];
			char *const su[] = {"scontrol", p > 0 ? "suspend" : held ? "release" : "resume", id, NULL};
			int rc = slurm_cmd(slurm.bin, su, NULL, NULL, 0, err, sizeof err, CMD_TIMEOUT);
			bool hold = false;
			if (rc != 0 && p > 0 && strstr(err, "pending")) {
				/* Not started yet: held instead, so that it does not. */
				char *const sh[] = {"scontrol", "hold", id, NULL};
				rc = slurm_cmd(slurm.bin, sh, NULL, NULL, 0, err, sizeof err, CMD_TIMEOUT);
				hold = rc == 0;
			}
			if (rc != 0) {
				slurm_oneline(err);
				logmsg("%s: scontrol %s %s: %s", name, su[1], id, err);
			}
			pthread_mutex_lock(&slurm.mu);
			if (release(j))
				return true;
			if (p > 0)
				j->held = hold;
			else
				j->held = false;
			return true;
		}
	}
	return false;
}

/* The end of a job: its stage, read as the submitter. */
void watch_collect(struct sjob *j)
{
	char p[512], msg[8192];
	j->busy = true;
	pthread_mutex_unlock(&slurm.mu);
	struct gather g = {-1, -1, -1};
	/* The claim's capture files, as a local run's (open_capture). */
	uid_t reader = spool_reader(slurm.w->sp, j->name, j->owner);
	static const enum scratch_file sf[] = {SCRATCH_STDOUT, SCRATCH_STDERR};
	int *fds[] = {&g.out_fd, &g.err_fd};
	for (int i = 0; i < 2; i++)
		if (spool_name_scratch(p, sizeof p, j->name, sf[i]) == 0 &&
		    (*fds[i] = openat(slurm.w->wdir, p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
				      0600)) >= 0 &&
		    spool_result_grant(slurm.w->sp, *fds[i], reader) < 0) {
			close(*fds[i]);
			*fds[i] = -1;
		}
	/* $KART_OUTDIR's copy: the submitter's, as backend none's. */
	if (spool_name_scratch(p, sizeof p, j->name, SCRATCH_OUT) == 0) {
		(void)rm_rf_at(slurm.w->wdir, p);
		if (mkdirat(slurm.w->wdir, p, 0700) == 0 &&
		    (!j->as_user || fchownat(slurm.w->wdir, p, j->cred.uid, j->cred.gid, AT_SYMLINK_NOFOLLOW) == 0))
			g.art_fd = openat(slurm.w->wdir, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	int rc = stage_as_submitter(j, stage_read, &g, msg, sizeof msg);
	if (g.art_fd >= 0)
		close(g.art_fd);
	/* Another job took the attempt, says job/run, the submitter's
	 * link: believed only of a job of this task's name and user. */
	long long claimed = rc == 0 && strncmp(msg, "run ", 4) == 0 ? atoll(msg + 4) : 0;
	int ours = claimed > 0 && claimed != j->id ? slurm_job_ours(j, claimed) : 1;
	bool forged = ours == 0;
	pthread_mutex_lock(&slurm.mu);
	j->busy = false;
	if (j->gone || ours < 0) {
		if (g.out_fd >= 0)
			close(g.out_fd);
		if (g.err_fd >= 0)
			close(g.err_fd);
		if (j->gone)
			slurm_let_go(j);
		else /* that job may run the task yet: read again once Slurm says */
			slurm_ask_later(j, ours);
		return;
	}
	slurm_ask_later(j, ours);
	long long token = 0;
	char *status = NULL, said[320] = "";
	bool nodir = rc != 0 || strncmp(msg, "nodir", 5) == 0;
	for (char *l = msg, *nl; l && *l; l = nl) {
		nl = strchr(l, '\n');
		if (nl)
			*nl++ = '\0';
		unsigned long long b;
		int m;
		if (strncmp(l, "run ", 4) == 0)
			token = atoll(l + 4);
		else if (strncmp(l, "said ", 5) == 0)
			snprintf(said, sizeof said, "%s", l + 5);
		else if (sscanf(l, JOB_STDOUT " %llu %d", &b, &m) == 2)
			j->out_bytes = b, j->out_trunc = m;
		else if (sscanf(l, JOB_STDERR " %llu %d", &b, &m) == 2)
			j->err_bytes = b, j->err_trunc = m;
		else if (strcmp(l, "status") == 0) {
			status = nl;
			break;
		}
	}
	if (forged) {
		logmsg("%s: its stage's run link names job %lld, not a job of this task's: ignored", j->name, token);
		token = 0;
	}
	if (token > 0 && token != j->id) {
		/* Another job of this attempt ran it (a submission thought
		 * lost): that one is followed from here on. */
		logmsg("%s: job %lld found the attempt taken by job %lld: following that one", j->name,
		       j->id, token);
		j->id = token;
		j->began_mono = 0;
		j->phase = SJ_WATCH;
		j->state[0] = '\0';
		j->sent_stop = 0; /* a cancel or timeout sent to the first goes to it */
		if (g.out_fd >= 0)
			close(g.out_fd);
		if (g.err_fd >= 0)
			close(g.err_fd);
		return;
	}
	j->out_fd = g.out_fd;
	j->err_fd = g.err_fd;
	j->launched = status != NULL;
	if (status) {
		for (char *l = status, *nl; l && *l; l = nl) {
			nl = strchr(l, '\n');
			if (nl)
				*nl++ = '\0';
			if (strcmp(l, "--") == 0) {
				snprintf(j->report, sizeof j->report, "%s", nl ? nl : "");
				break;
			}
			sscanf(l, "start_ms=%" SCNd64, &j->start_ms);
			sscanf(l, "end_ms=%" SCNd64, &j->end_ms);
			sscanf(l, "wrapper=%d", &j->wrapper);
			sscanf(l, "memory_peak=%lld", &j->peak);
			sscanf(l, "cpu_user_us=%lld", &j->cpu_user_us);
			sscanf(l, "cpu_system_us=%lld", &j->cpu_sys_us);
			if (strncmp(l, "node=", 5) == 0 && l[5])
				snprintf(j->nodes, sizeof j->nodes, "%s", l + 5);
		}
	}
	const char *s = j->state;
	bool node_lost = strncmp(s, "NODE_FAIL", 9) == 0 || strncmp(s, "BOOT_FAIL", 9) == 0 ||
			 strncmp(s, "PREEMPTED", 9) == 0 || strncmp(s, "REVOKED", 7) == 0;
	j->end = SE_RAN;
	/* The task's own exit, not a signal of the job's end (a node that
	 * fails, a preemption: TERM, then KILL). */
	bool exited = status && j->report[0] && strstr(j->report, "exit ") && !strstr(j->report, "signal ");
	if ((node_lost && !exited) || (!status && strcmp(s, "UNKNOWN") == 0 && !nodir)) {
		/* Its node went (or Slurm lost it) before the run reported:
		 * the attempt is void, as a dead worker's. */
		j->end = SE_REQUEUE;
		snprintf(j->why, sizeof j->why, "its Slurm job %lld ended %s%s%.200s before it could report",
			 j->id, s, j->nodes[0] ? " on " : "", j->nodes);
	} else if (!status && token == j->id && j->wstatus > 0 && WIFEXITED(j->wstatus) && !j->sent_stop) {
		/* kart-launch took the attempt, then exited without running the
		 * task: the stage or the node, never the task, is to blame. */
		snprintf(j->why, sizeof j->why, "kart-launch on %.60s did not run the task (exit %d)%s%.300s",
			 j->nodes[0] ? j->nodes : "the node", WEXITSTATUS(j->wstatus), said[0] ? ": " : "", said);
	} else if (!status && !token && !j->sent_stop && strncmp(s, "CANCELLED", 9) != 0) {
		snprintf(j->why, sizeof j->why,
			 "Slurm job %lld ended %s%s%.40s without starting kart-launch: is the stage "
			 "shared with the nodes, kart at the same path? See %.300s/" JOB_OWN "/slurm.out",
			 j->id, s, j->nodes[0] ? " on " : "", j->nodes, j->dir);
	}
	if (slurm.accounting && j->id > 0) {
		j->phase = SJ_RECEIPT;
	} else {
		j->receipt_why = j->id > 0 ? "Slurm keeps no accounting here (sacct: accounting storage is disabled)"
					   : "no Slurm job ran it";
		j->phase = SJ_DONE;
		slurm_back(j, SB_ENDED);
	}
}

/* sacct's record of every job that waits for it: complete once the job
 * line is the job's (not slurmdbd's placeholder) and final, with its
 * batch step's where it ran; else the wait goes on, receipt_wait at most. */
void watch_receipts(void)
{
	static char out[1 << 20];
	char err[1024];
	struct strv ids = {0};
	int64_t now = now_mono_ms();
	for (struct sjob *j = slurm.jobs; j; j = j->next)
		if (j->phase == SJ_RECEIPT && !j->gone && ids.n < IDS_PER_CALL)
			strv_addf(&ids, "%lld", j->id);
	if (!ids.n)
		return;
	char *idlist = strv_join(&ids, ',');
	pthread_mutex_unlock(&slurm.mu);
	char *const sa[] = {"sacct", "-n", "-P", "-j", idlist, "-o",
			    "JobID,JobName,State,ExitCode,MaxRSS,TotalCPU,ElapsedRaw,ConsumedEnergyRaw,NodeList,Partition",
			    NULL};
	int rc = slurm_cmd(slurm.bin, sa, NULL, out, sizeof out, err, sizeof err, CMD_TIMEOUT);
	pthread_mutex_lock(&slurm.mu);
	free(idlist);
	if (rc != 0 && strstr(err, "accounting storage is disabled"))
		slurm.accounting = false;
	char *save = NULL;
	for (char *line = rc == 0 ? strtok_r(out, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
		char *f[10];
		if (fields(line, f, 10) < 10)
			continue;
		char *dot = strchr(f[0], '.');
		struct sjob *j = by_id(atoll(f[0]));
		if (!j || j->phase != SJ_RECEIPT)
			continue;
		if (!dot) {
			if (strcmp(f[1], j->jname) || !state_final(f[2]))
				continue;
			j->receipt = true;
			snprintf(j->exit_code, sizeof j->exit_code, "%s", f[3]);
			j->total_cpu_ms = f[5][0] ? dur_ms(f[5]) : -1;
			j->elapsed_s = f[6][0] ? atoll(f[6]) : -1;
			if (f[7][0] && atoll(f[7]) > 0)
				j->energy_j = atoll(f[7]);
			if (!j->partition[0])
				snprintf(j->partition, sizeof j->partition, "%s", f[9]);
			/* Never started (cancelled pending): no step to wait for. */
			if (strcmp(f[8], "None assigned") == 0 || !j->began_mono)
				j->phase = SJ_DONE;
		} else if (j->receipt && strcmp(dot + 1, "batch") == 0 && state_final(f[2])) {
			long long rss = f[4][0] ? rss_bytes(f[4]) : -1;
			if (rss > j->max_rss)
				j->max_rss = rss;
			if (f[7][0] && atoll(f[7]) > 0)
				j->energy_j = atoll(f[7]);
			j->phase = SJ_DONE;
		}
		if (j->phase == SJ_DONE)
			slurm_back(j, SB_ENDED);
	}
	for (size_t i = 0; i < ids.n; i++) {
		struct sjob *j = by_id(atoll(ids.v[i]));
		if (j && j->phase == SJ_RECEIPT && now - j->ended_mono > slurm.pol->slurm_receipt_ms) {
			/* Published without it, and saying so: never rewritten later. */
			j->receipt_why = rc != 0 ? "sacct did not answer within [slurm] receipt_wait"
					 : "sacct had no final record of the job within [slurm] receipt_wait "
					   "(slurmdbd lags behind slurmctld)";
			j->phase = SJ_DONE;
			slurm_back(j, SB_ENDED);
		}
	}
	strv_free(&ids);
}

/* Stage directories of tasks that are over, removed as their submitter. */
bool watch_remove_one(void)
{
	if (!slurm.rm.n)
		return false;
	char *e = slurm.rm.v[--slurm.rm.n];
	pthread_mutex_unlock(&slurm.mu);
	struct sjob j = {.as_user = false};
	unsigned uid, gid;
	int off = 0;
	if (sscanf(e, "%u %u %n", &uid, &gid, &off) >= 2 && off > 0) {
		snprintf(j.dir, sizeof j.dir, "%s", e + off);
		j.as_user = uid != geteuid();
		/* Its own directory: no supplementary group is needed. */
		j.cred = (struct run_cred){.uid = uid, .gid = gid};
		int r = stage_remove(&j);
		if (r < 0)
			logmsg("cannot remove the stage directory %s: %s", j.dir, strerror(-r));
	}
	free(e);
	pthread_mutex_lock(&slurm.mu);
	return true;
}

