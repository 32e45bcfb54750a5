/* credfwd.h - a kind's credentials, added by the worker's forwarder and
 * never handed to the task.
 *
 * A task of a kind with an endpoint and credentials (kart.conf(5)) gets,
 * instead of the credential, a Unix socket bound into its sandbox at
 * SANDBOX_CRED_SOCKET ($KART_LLM_SOCKET). Behind it, kart-credfwd, run
 * by the worker as the worker (root on a shared spool), forwards each
 * HTTP request to the policy's endpoint alone, adding "Authorization:
 * Bearer VALUE" once it has proven the peer is the service (https: its
 * certificate; http://: a socket of the kind's endpoint_uid, at a port
 * of this host or at endpoint_socket). The runner and its host-side
 * bwrap run as the submitter: nothing of theirs holds the value, so no
 * process the submitter can read (/proc/PID/environ, cmdline, mem) does.
 *
 * One forwarder per task, not one per worker: the socket is the task's
 * alone (no peer to tell apart, no routing table), and the forwarder
 * watches the task's pidfd and ends with it, whatever ends the task or
 * the worker. Its cost, a Python start (about 20 ms) beside the task's,
 * is paid only by tasks that send requests over a network anyway. */
#ifndef KART_CREDFWD_H
#define KART_CREDFWD_H

#include <stdbool.h>
#include <sys/types.h>

#include "policy.h"
#include "task.h"

struct credfwd {
	int lfd;        /* the listening socket, until handed to the forwarder; or -1 */
	char dir[64];   /* its directory, root's, 0711, made for this task; or "" */
	char path[96];  /* dir + "/s", the socket, the submitter's, 0600 */
	const struct kind *kind;
};
#define CREDFWD_INIT {.lfd = -1}

/* The kind whose credentials spec's task gets through a forwarder (a
 * kind with an endpoint and credentials, and the task with network, as
 * credentials were always given), or NULL. */
const struct kind *credfwd_kind(const struct policy *pol, const struct task_spec *spec);

/* The task's socket, listening (connections wait in its backlog until
 * the forwarder runs), connectable by run_uid alone. 0, or -errno with
 * err set. Nothing to do (0, f->path "") unless credfwd_kind. */
int credfwd_open(struct credfwd *f, const struct policy *pol, const struct task_spec *spec,
		 uid_t run_uid, gid_t run_gid, char *err, size_t errlen);

/* Once the task runs: kart-credfwd, detached (the worker never waits for
 * it), given the socket, a pidfd of the task (task_pidfd, dup'd) and the
 * credential's value from env. Hands over the socket in any case. 0 or
 * -errno (logged by the caller; the task's requests then fail). */
int credfwd_start(struct credfwd *f, int task_pidfd, char *const *env);

/* Whatever credfwd_start did not hand over: closed and removed. */
void credfwd_close(struct credfwd *f);

#endif
