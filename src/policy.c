/* policy.c - the effective policy: safe defaults, the host's capacity as
 * ceilings, then KART_* environment overrides. A bad override is an error
 * naming the variable, never a silent fallback. */
#define _GNU_SOURCE
#include "policy.h"

#include <limits.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "util.h"

#ifndef LIBEXECDIR
#define LIBEXECDIR "/usr/local/libexec/kart"
#endif

const char *backend_name(enum backend b) { return b == BACKEND_NONE ? "none" : "bwrap"; }

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)

static void find_launcher(char *out, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			char cand[PATH_MAX + 32];
			snprintf(cand, sizeof cand, "%s/kart-launch", self);
			if (access(cand, X_OK) == 0 && strlen(cand) < len) {
				snprintf(out, len, "%s", cand);
				return;
			}
		}
	}
	snprintf(out, len, "%s/kart-launch", LIBEXECDIR);
}

int policy_load(struct policy *pol, char *err, size_t errlen)
{
	struct sysinfo si;
	const char *v;
	memset(pol, 0, sizeof *pol);
	pol->backend = BACKEND_BWRAP;
	pol->slots[0] = 3;
	pol->slots[1] = 1;
	pol->output_default = 8ull << 20;
	pol->output_max = 1ull << 30;
	pol->task_max_bytes = 16ull << 20;
	pol->retries_default = 2;
	pol->timeout_default_s = -1;
	pol->timeout_max_s = -1;
	pol->memory_max = sysinfo(&si) == 0 ? (uint64_t)si.totalram * si.mem_unit : UINT64_MAX;
	pol->pids_max = 4194304;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	pol->cpu_max_milli = (uint32_t)(ncpu > 0 ? ncpu : 1) * 1000;
	pol->term_grace_s = 10;
	snprintf(pol->bwrap, sizeof pol->bwrap, "bwrap");
	find_launcher(pol->launcher, sizeof pol->launcher);

	if ((v = getenv("KART_BACKEND")) && *v) {
		if (strcmp(v, "bwrap") == 0)
			pol->backend = BACKEND_BWRAP;
		else if (strcmp(v, "none") == 0)
			pol->backend = BACKEND_NONE;
		else
			return ERR("KART_BACKEND=%s: not a backend (bwrap or none)", v);
	}
	if ((v = getenv("KART_BWRAP")) && *v) {
		if (strlen(v) >= sizeof pol->bwrap)
			return ERR("KART_BWRAP: path too long");
		snprintf(pol->bwrap, sizeof pol->bwrap, "%s", v);
	}
	if ((v = getenv("KART_TERM_GRACE")) && *v) {
		int64_t s;
		if (parse_duration_s(v, &s) < 0 || s > 3600)
			return ERR("KART_TERM_GRACE=%s: not a duration up to 1h", v);
		pol->term_grace_s = (int)s;
	}
	if ((v = getenv("KART_TIMEOUT_MAX")) && *v) {
		if (parse_duration_s(v, &pol->timeout_max_s) < 0)
			return ERR("KART_TIMEOUT_MAX=%s: not a duration", v);
	}
	if ((v = getenv("KART_NET_UIDS")) && *v) {
		_cleanup_free_ char *copy = xstrdup(v);
		char *save = NULL;
		for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
			long long u;
			if (strcmp(t, "*") == 0) {
				pol->net_all = true;
				continue;
			}
			if (parse_int(t, 0, UINT32_MAX - 1, &u) < 0)
				return ERR("KART_NET_UIDS=%s: '%s' is not a uid", v, t);
			if (pol->n_net_uids >= (int)ARRAY_SIZE(pol->net_uids))
				return ERR("KART_NET_UIDS: more than %zu uids",
					   ARRAY_SIZE(pol->net_uids));
			pol->net_uids[pol->n_net_uids++] = (uid_t)u;
		}
	}
	return 0;
}

bool policy_net_allowed(const struct policy *pol, uid_t uid)
{
	if (pol->net_all)
		return true;
	for (int i = 0; i < pol->n_net_uids; i++)
		if (pol->net_uids[i] == uid)
			return true;
	return false;
}
