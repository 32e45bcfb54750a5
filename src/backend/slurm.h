/* slurm.h - what backend_slurm.c (the loop's side) and slurm_thread.c
 * (the threads that talk to Slurm and the stage) share.
 *
 * A task is a job: the worker claims it as always, writes its run
 * record into the claim (claim_meta.run: the job's name and stage, then
 * its id), lays out its stage directory on the filesystem the nodes
 * share, and submits a batch job that runs kart-launch --job there
 * (launch_job.c), which builds the same sandbox a local run gets. Three
 * threads (slurm_thread.c: submitting, polling, the stage's files) do
 * everything that blocks (a fourth reads inotify on the stages): sbatch, the batched squeue and
 * sacct, scancel and scontrol, and the stage (the worker's, with the
 * submitter's job/ in it, read and written as the submitter in a
 * child). The loop hands them jobs and takes back what they learnt
 * through an eventfd. */
#ifndef KART_SLURM_H
#define KART_SLURM_H

#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "backend_local.h"
#include "binds.h"
#include "space.h"

/* Where a job is, between the thread and the loop (under slurm.mu). */
enum sj_phase {
	SJ_NEW,     /* prepared in the loop, not handed over yet */
	SJ_SUBMIT,  /* with the thread: to submit, or to find again (adopt) */
	SJ_WATCH,   /* submitted: followed by the batched polls */
	SJ_COLLECT, /* ended in Slurm: its stage to read */
	SJ_RECEIPT, /* read: sacct's record awaited (receipt_wait at most) */
	SJ_DONE,    /* everything known: the loop reaps it */
};

/* What the thread has for the loop (sjob.back, then the loop's tick). */
enum sj_back {
	SB_NONE,
	SB_SUBMITTED, /* TE_SPAWNED */
	SB_UNSPAWNED, /* TE_SPAWN_FAILED: refused (why), or given back unrun */
	SB_BEGAN,     /* it started on a node: the timeout's clock runs */
	SB_ENDED,     /* TE_EXIT */
};

/* kart's signals, in the order they come (sjob.want_stop). */
enum { STOP_TERM = 1, STOP_KILL = 2 };

/* How the run ended, once SJ_DONE. */
enum sj_end {
	SE_RAN,     /* it ran: the launcher's status, or Slurm's word */
	SE_REQUEUE, /* the node failed, or Slurm preempted it: the attempt is void */
};

#define SJ_STATE_MAX 32

/* Between two polls at least, and the first look at a job (ms). */
#define POLL_MIN 250
/* How long a job whose job/status appeared is polled every POLL_MIN:
 * the submitter can make one appear at will, long before the end. */
#define STATUS_SOON_MS 10000
/* A failed submission or lookup waits this much more each time, up to
 * [slurm] poll (slurmctld down, or not taking jobs): the worker is back
 * within one poll of slurmctld's return. */
#define BACKOFF_MIN 1000
/* The longest wait after a failed call, of a poll of pol_ms. */
#define BACKOFF_MAX(pol_ms) ((pol_ms) > BACKOFF_MIN ? (pol_ms) : BACKOFF_MIN)
#define CMD_TIMEOUT 60000
#define IDS_PER_CALL 1000

struct sjob {
	struct sjob *next; /* slurm.jobs, every job the thread knows (under mu) */
	struct task *t;    /* the loop's */
	/* Set by prepare (or adopt), read-only once handed over: */
	char name[TASK_NAME_MAX + 1]; /* the claim's */
	char jname[96];               /* the job's: kart-RANDOM-NAME */
	char key[64];                 /* the spool's directory in the stage */
	char dir[PATH_MAX];           /* the stage directory */
	struct run_cred cred;         /* the submitter (as_user: sbatch --uid/--gid) */
	bool as_user;
	bool adopt;                   /* from a claim's record: looked up before any submission */
	uid_t owner;                  /* the task file's (its results' reader) */
	int64_t claimed_ms;           /* for sacct's window */
	struct strv args;             /* sbatch's options */
	char *script;                 /* its batch script */
	char *launch;                 /* the stage's launch file */
	size_t launch_len;
	struct strv reals;            /* "real" records: where each bind led when it was checked */
	unsigned char *filter;        /* the seccomp program, into the stage */
	size_t filter_len;
	/* after='s inputs, opened in done/ (O_PATH), copied into the stage */
	struct sj_input {
		char id[TASK_NAME_MAX + 1];
		int out_fd, stdout_fd; /* -1: it has none */
	} in[TASK_AFTER_MAX];
	int n_in;
	const struct task_spec *spec; /* its binds, checked as the submitter (the task's) */
	uint64_t out_cap;             /* output=, per stream */
	uint64_t art_bytes, art_files; /* $KART_OUTDIR copied back up to one past these */
	int art_depth;
	bool staged;                  /* its stage directory was made (removed at the end) */
	/* Under mu: */
	enum sj_phase phase;
	unsigned back;         /* 1 << enum sj_back, for the loop; 0 once taken */
	bool queued_back;      /* on slurm.back */
	struct sjob *back_next;
	bool busy;             /* the thread works on it outside the lock */
	bool handed;           /* SB_SUBMITTED went back: the loop runs it */
	bool gone;             /* the loop let go of it (out of jobs; on dead once not busy) */
	long long id;          /* the job's id; 0 unknown */
	char state[SJ_STATE_MAX], reason[64], nodes[256], partition[64];
	int wstatus;           /* squeue's exit_code (a wait status); -1 unknown */
	int64_t began_mono;    /* it started running then (0: not yet) */
	int64_t ended_mono;    /* it ended in Slurm then */
	unsigned poll_round, poll_call; /* watch_pick's marks */
	int iwd;               /* its job/'s inotify watch (0: none yet, -1: none to be had) */
	bool status_seen;      /* job/status is there: its end is near, polled for soon */
	int64_t status_mono;   /* when it was first seen: "soon" lasts STATUS_SOON_MS */
	int want_stop;         /* the loop asks: STOP_TERM, then STOP_KILL (0: nothing) */
	int sent_stop;
	int want_pause;        /* the loop asks: 1 pause, -1 resume (0: nothing) */
	bool held;             /* paused while pending: held, released on resume */
	int64_t submit_next;   /* its next try (a lookup, a submission) */
	int64_t ask_next;      /* Slurm did not answer slurm_job_ours: asked again then */
	int64_t ask_wait;      /* and the wait before that, doubled each time (slurm_ask_later) */
	/* Refused (SB_UNSPAWNED): why, or status NULL to give it back unrun. */
	bool refused;
	const char *why_status, *why_refusal;
	char why[512];
	/* Once SJ_DONE: */
	enum sj_end end;
	bool launched;         /* its stage says the launcher ran */
	char report[1024];     /* the launcher's status lines */
	int wrapper;           /* bwrap's wait status */
	int64_t start_ms, end_ms;
	long long peak, cpu_user_us, cpu_sys_us;
	int out_fd, err_fd;    /* the claim's capture files, filled */
	uint64_t out_bytes, err_bytes;
	bool out_trunc, err_trunc;
	/* sacct's receipt (-1: not there), and whether it came at all */
	bool receipt;
	const char *receipt_why; /* no receipt: why (a literal), for the result */
	long long max_rss, total_cpu_ms, elapsed_s, energy_j;
	char exit_code[16];    /* Slurm's A:B */
	char *section;         /* the result's "slurm" object, JSON text (the loop's) */
};

/* The backend's state, one worker per process. */
struct slurm {
	pthread_t th[3];    /* slurm_thread.c's roles */
	pthread_t ino_th;   /* reads ifd */
	int ifd;            /* inotify, on each watched job's job/ (-1: none) */
	bool ino_gone;      /* under mu: ino_main could not read it, and ended */
	int ino_wake;       /* an eventfd that stops ino_th */
	bool started, quit, stopping;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int efd;            /* the thread's doorbell to the loop */
	struct src src;
	struct sjob *jobs;  /* every job the thread knows */
	struct sjob *back;  /* what it has for the loop, oldest first */
	struct sjob **back_tail;
	struct sjob *dead;  /* let go by the loop, done with by the thread: freed in the tick */
	struct strv rm;     /* stage directories to remove: "UID GID PATH" */
	const struct policy *pol;
	struct worker *w;
	char bin[PATH_MAX]; /* where the commands are ("" PATH) */
	char stage_key[PATH_MAX]; /* stage/KEY */
	char key[64];
	/* What the thread says of Slurm (under mu): why it cannot submit
	 * or watch now, "" when it can; since when. */
	char stalled[512];
	int64_t stalled_ms;
	bool stalled_told;  /* the loop has written the note as it is */
	bool accounting;    /* sacct works (-1 first: not asked yet) */
	int acct_known;
	int64_t poll_every; /* the current interval between polls */
	int64_t backoff;    /* submissions wait this long after a failed one */
	int64_t poll_next, submit_next, receipt_next;
	int64_t poll_last;  /* when the last poll began */
	unsigned poll_round, poll_call; /* watch_pick's: a round looks at every job once */
};

extern struct slurm slurm;

/* slurm_thread.c */
void slurm_thread_start(struct worker *w);
void slurm_thread_stop(void);
/* Wake the thread (under mu or not). */
void slurm_kick(void);
/* A job's end, its section of the result (JSON text), from what is
 * known; the caller frees. */
char *slurm_section(const struct sjob *j);
/* A Slurm command (bin/NAME) to run, its stdin, where its stdout and
 * stderr go (NUL-terminated), and its exit status (-1: it could not run,
 * or timed out). */
struct slurm_run {
	char *const *argv;
	const char *in;
	char *out, *err;
	size_t outlen, errlen;
	int rc;
	int fd[2];
};
/* n of them at once (sbatch for a batch of jobs, SLURM_RUNS_MAX at
 * most): until each has ended, timeout_ms at most. */
#define SLURM_RUNS_MAX 16
void slurm_cmds(const char *bin, struct slurm_run *c, int n, int timeout_ms);
/* One: its exit status, or -1. */
int slurm_cmd(const char *bin, char *const argv[], const char *in, char *out, size_t outlen,
	      char *err, size_t errlen, int timeout_ms);
void sjob_free(struct sjob *j);
/* The jobs of j's name and its user's that Slurm knows (up to max):
 * their number, or -1 when Slurm did not answer (why). */
int slurm_ids(const struct sjob *j, long long *ids, int max, char *why, size_t len);
/* Is id one of them (1, else 0)? The stage's run link is the
 * submitter's to write: a job it names is followed (and cancelled) only
 * if so. -1 when Slurm did not answer: nothing is decided then (the
 * job may be the one that runs the task), and it is asked again. */
int slurm_job_ours(const struct sjob *j, long long id);
/* After slurm_job_ours's answer r, under mu: -1 sets j's next try
 * (BACKOFF_MIN, doubled each time up to [slurm] poll, at least 30 s);
 * an answer clears it. */
void slurm_ask_later(struct sjob *j, int r);


/* ---- slurm_stage.c: a job's stage ------------------------------------------ */

/* fn in a child that has the job's submitter's rights on files (with
 * as_user: fsuid, fsgid and groups, and no capability; else the worker,
 * who is the submitter), its words in msg (NUL-terminated): fn's exit
 * status, or -1. A child, so that nothing of hers reaches the worker's
 * threads; root's real and saved ids, so that she cannot stop it (its
 * thread waits for it, everyone's). */
typedef int child_fn(const struct sjob *j, void *arg, int msgfd);
int stage_as_submitter(const struct sjob *j, child_fn *fn, void *arg, char *msg, size_t msglen);
/* A line for the worker's log, written to msgfd by a child_fn; 1. */
int stage_say(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int stage_make(const struct sjob *j, int task_fd, char *why, size_t len);
int stage_fill(const struct sjob *j, void *arg, int msg);
int stage_seal(const struct sjob *j, char *why, size_t len);
bool stage_sealed(const struct sjob *j);
/* What the run left in its stage, read as the submitter: the run link,
 * the status, its stdout and stderr into the claim's capture files, its
 * $KART_OUTDIR into the claim's .NAME.out. */
struct gather {
	int out_fd, err_fd, art_fd; /* the claim's files, made by the worker */
};
/* Moves the job's outputs into the claim's files (arg: a struct gather). */
int stage_read(const struct sjob *j, void *arg, int msg);
int stage_empty(const struct sjob *j, void *arg, int msg);
int stage_rm_own(int pfd, const char *name, int depth);
/* j's stage removed: its submitter's part as them (stage_empty), then
 * the worker's (stage_rm_own). 0 (also when it is gone), or -errno. */
int stage_remove(const struct sjob *j);
int stage_user_dir(const struct sjob *j, char *why, size_t len);


/* ---- slurm_thread.c and slurm_watch.c: the thread's two halves --------------- */

void watch_receipts(void);
bool watch_remove_one(void);
void watch_poll(void);
/* The ids of the jobs the next squeue asks after, max at most: in turns
 * when more are followed (each once a round, a round of as many calls as
 * it takes), all of them each call when they fit. Under mu. */
void watch_pick(struct strv *ids, size_t max);
/* A status renamed into a job's job/ (the ino thread's read): the next
 * poll brought forward. Under mu. */
void watch_status_seen(int wd);
bool watch_control_one(void);
void watch_collect(struct sjob *j);
void slurm_let_go(struct sjob *j);
bool slurm_ctld_down(const char *err);
void slurm_oneline(char *s);
void slurm_unstalled(void);
void slurm_stalled(const char *why);
int slurm_record(struct sjob *j, int *keep);
void slurm_back(struct sjob *j, enum sj_back b);

#endif
