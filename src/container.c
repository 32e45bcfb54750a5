/* container.c - host-side calls of backend container's CLI. */
#define _GNU_SOURCE
#include "container.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

void container_label(const char *spool_path, const char *worker_id, char *out, size_t len)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (const unsigned char *p = (const unsigned char *)spool_path; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	char id[48];
	size_t n = 0;
	for (const char *c = worker_id; *c && n < sizeof id - 1; c++)
		id[n++] = (char)((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
					 (*c >= '0' && *c <= '9') || *c == '_' || *c == '-'
				 ? *c
				 : '_');
	id[n] = '\0';
	snprintf(out, len, "%016llx.%s", (unsigned long long)h, id);
}

void container_name(const char *label, unsigned long seq, char *out, size_t len)
{
	snprintf(out, len, "kart-%s-%d-%lu", label, (int)getpid(), seq);
}

int host_run(char *const argv[], char *out, size_t len, int timeout_ms)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		if (host_child_setup(p[1]) < 0)
			_exit(127);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	size_t n = 0;
	int64_t end = now_mono_ms() + timeout_ms;
	bool timed_out = false;
	for (;;) {
		int64_t left = end - now_mono_ms();
		if (left <= 0) {
			timed_out = true;
			break;
		}
		struct pollfd pf = {.fd = p[0], .events = POLLIN};
		int r = poll(&pf, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			timed_out = r == 0;
			break;
		}
		char buf[4096];
		ssize_t k = read(p[0], buf, sizeof buf);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		size_t take = (size_t)k;
		if (len && n + take > len - 1)
			take = len - 1 - n;
		if (out && take)
			memcpy(out + n, buf, take);
		n += take;
	}
	close(p[0]);
	if (out && len)
		out[n] = '\0';
	if (timed_out)
		(void)kill(pid, SIGKILL);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (timed_out || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

int container_oom_killed(const struct policy *pol, const char *name, int timeout_ms)
{
	char *const argv[] = {(char *)pol->container_cmd, "inspect", "--format",
			      "{{.State.OOMKilled}}", (char *)name, NULL};
	char out[64];
	if (host_run(argv, out, sizeof out, timeout_ms) != 0)
		return -1;
	if (strncmp(out, "true", 4) == 0)
		return 1;
	if (strncmp(out, "false", 5) == 0)
		return 0;
	return -1;
}

int container_sweep(const struct policy *pol, const char *label, const char *keep, int timeout_ms)
{
	char filter[256];
	snprintf(filter, sizeof filter, "label=kart.worker=%s", label);
	char *const ps[] = {(char *)pol->container_cmd, "ps", "--all", "--filter", filter,
			    "--format", "{{.Names}}", NULL};
	char out[16384];
	if (host_run(ps, out, sizeof out, timeout_ms) != 0)
		return -1;
	/* rm --force NAME...: one call for all of them. */
	struct strv rm = {0};
	strv_add(&rm, pol->container_cmd);
	strv_add(&rm, "rm");
	strv_add(&rm, "--force");
	int n = 0;
	char *save = NULL;
	for (char *c = strtok_r(out, " \t\n", &save); c; c = strtok_r(NULL, " \t\n", &save)) {
		/* Only names of ours (container_name), never an option. */
		if (strncmp(c, "kart-", 5) != 0 ||
		    strspn(c, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
			    strlen(c))
			continue;
		if (keep && strncmp(c, keep, strlen(keep)) == 0)
			continue;
		strv_add(&rm, c);
		n++;
	}
	int r = n ? host_run(rm.v, NULL, 0, timeout_ms) : 0;
	strv_free(&rm);
	return r == 0 ? n : -1;
}
