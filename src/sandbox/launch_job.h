/* launch_job.h - kart-launch --job=DIR (launch_job.c): a task's run as
 * a batch system's job, from the stage the worker prepared. */
#ifndef KART_LAUNCH_JOB_H
#define KART_LAUNCH_JOB_H

/* The stage's files, by their names in the job's directory. */
#define JOB_LAUNCH "launch" /* what to run: NUL-separated fd, arg and env records */
#define JOB_RUN "run"       /* -> the id of the job that took the attempt */
#define JOB_STATUS "status" /* how it went, written last */
#define JOB_STDOUT "stdout"
#define JOB_STDERR "stderr"

int launch_job_main(int argc, char **argv);

#endif
