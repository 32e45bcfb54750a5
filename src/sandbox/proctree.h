/* proctree.h - a process below another, found by its name in /proc: the
 * launcher under bwrap, which passes a SIGTERM on to everything in the
 * sandbox (bwrap itself would die of it, and the sandbox at once). Libc
 * only: kart-launch links it too (its --job side, on a batch system's
 * node). */
#ifndef KART_PROCTREE_H
#define KART_PROCTREE_H

#include <sys/types.h>

/* sig to the first process named comm below root (its children, theirs,
 * and theirs: breadth first, so that the launcher is met before
 * anything the task may have named like it), through a pidfd, its name
 * checked again once pinned: 0, or -ESRCH where there is none. */
int proc_signal_below(pid_t root, const char *comm, int sig);

#endif
