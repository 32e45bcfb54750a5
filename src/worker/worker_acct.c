/* worker_acct.c - accounts, looked up once per uid, and the switch to the
 * submitter. */
#define _GNU_SOURCE
#include <grp.h>
#include <pwd.h>

#include "worker_int.h"

/* ---- accounts: looked up once per uid, not once per task ----------------
 *
 * Each lookup reads /etc/passwd and /etc/group through NSS (a dozen system
 * calls, twice per task). An entry is kept while both files keep their
 * inode, size and mtime, and for at most ACCT_TTL_MS in any case, for NSS
 * sources that are not files. */
#define ACCT_SLOTS 16
#define ACCT_TTL_MS 5000

static struct acct accts[ACCT_SLOTS];
static unsigned acct_next;
static struct stat acct_pw, acct_gr;
/* etc_gen when the accounts were last looked at. */
static long acct_gen = -2;

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

const struct acct *acct_get(uid_t uid)
{
	if (etc_gen < 0 || etc_gen != acct_gen) {
		struct stat pw, gr;
		if (stat("/etc/passwd", &pw) < 0)
			memset(&pw, 0, sizeof pw);
		if (stat("/etc/group", &gr) < 0)
			memset(&gr, 0, sizeof gr);
		if (!same_file(&pw, &acct_pw) || !same_file(&gr, &acct_gr)) {
			memset(accts, 0, sizeof accts);
			acct_pw = pw;
			acct_gr = gr;
		}
		acct_gen = etc_gen;
	}
	int64_t now = now_mono_ms();
	struct acct *a = NULL;
	for (int i = 0; i < ACCT_SLOTS; i++)
		if (accts[i].used && accts[i].uid == uid) {
			a = &accts[i];
			if (now - a->at_mono < ACCT_TTL_MS)
				return a;
			break;
		}
	if (!a)
		a = &accts[acct_next++ % ACCT_SLOTS];
	memset(a, 0, sizeof *a);
	a->used = true;
	a->uid = uid;
	a->at_mono = now;
	struct passwd p, *pp = NULL;
	char buf[4096];
	if (getpwuid_r(uid, &p, buf, sizeof buf, &pp) != 0 || !pp)
		return a;
	a->found = true;
	snprintf(a->name, sizeof a->name, "%s", pp->pw_name);
	snprintf(a->home, sizeof a->home, "%s", pp->pw_dir ? pp->pw_dir : "");
	a->gid = pp->pw_gid;
	a->ngroups = RUN_CRED_GROUPS_MAX;
	if (getgrouplist(pp->pw_name, pp->pw_gid, a->groups, &a->ngroups) < 0)
		a->too_many = true;
	return a;
}

/* A root worker runs each task as the owner of its file, as atd and cron
 * do. Returns 1 with c filled; 0 when the worker is not root (the task
 * runs as the worker's user); -1 with t->errbuf and *refusal set when it
 * must not run. */
int acct_task_cred(struct worker *w, struct task *t, struct run_cred *c, const char **refusal)
{
	if (geteuid() != 0)
		return 0;
	if (t->uid == 0 && !w->pol->allow_root) {
		*refusal = "root_not_allowed";
		snprintf(t->errbuf, sizeof t->errbuf,
			 "task file owned by root; the policy does not allow root tasks "
			 "([sandbox] allow_root)");
		return -1;
	}
	*refusal = "setuid_failed";
	const struct acct *a = acct_get(t->uid);
	if (!a->found) {
		snprintf(t->errbuf, sizeof t->errbuf,
			 "the task file's owner (uid %u) has no account on this host",
			 (unsigned)t->uid);
		return -1;
	}
	if (a->too_many) {
		snprintf(t->errbuf, sizeof t->errbuf, "user %.64s is in more than %d groups",
			 a->name, RUN_CRED_GROUPS_MAX);
		return -1;
	}
	snprintf(t->user, sizeof t->user, "%s", a->name);
	c->uid = t->uid;
	c->gid = a->gid;
	c->ngroups = a->ngroups;
	memcpy(c->groups, a->groups, (size_t)a->ngroups * sizeof *c->groups);
	return 1;
}
