/* launch_job.h - kart-launch --job=DIR (launch_job.c): a task's run as
 * a batch system's job, from the stage the worker prepared. */
#ifndef KART_LAUNCH_JOB_H
#define KART_LAUNCH_JOB_H

/* The stage's files, by their names in the job's directory, which is
 * the worker's: what the submitter's job only reads. */
#define JOB_LAUNCH "launch" /* what to run: NUL-separated job, fd, real, arg and env records */
#define JOB_TASK "task"
#define JOB_FILTER "filter"
#define JOB_INPUTS "inputs"
/* $KART_OUTDIR: the submitter's, made by the worker in its own
 * directory, where she can neither rename nor replace it. */
#define JOB_OUT "out"
/* The submitter's directory in it, where the job writes the rest. */
#define JOB_OWN "job"
#define JOB_RUN JOB_OWN "/run"       /* -> the id of the job that took the attempt */
#define JOB_STATUS JOB_OWN "/status" /* how it went, written last */
#define JOB_STDOUT JOB_OWN "/stdout"
#define JOB_STDERR JOB_OWN "/stderr"

int launch_job_main(int argc, char **argv);

#endif
