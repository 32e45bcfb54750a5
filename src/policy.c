/* policy.c - the effective policy: safe defaults, the host's capacity as
 * ceilings, then KART_* environment overrides. A bad override is an error
 * naming the variable, never a silent fallback. */
#define _GNU_SOURCE
#include "policy.h"

#include <limits.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "util.h"

#include "config.h" /* LIBEXECDIR, written by the Makefile */

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
			/* Beside the binary: a build tree, or a bin/ that holds both. */
			if (pathfmt(out, len, "%s/kart-launch", self) == 0 && access(out, X_OK) == 0)
				return;
		}
	}
	if (pathfmt(out, len, "%s/kart-launch", LIBEXECDIR) < 0)
		out[0] = '\0';
}

static int set_net_uids(struct policy *pol, const char *v, char *err, size_t errlen,
			const char *where)
{
	_cleanup_free_ char *copy = xstrdup(v);
	char *save = NULL;
	pol->net_all = false;
	pol->n_net_uids = 0;
	for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
		long long u;
		if (strcmp(t, "*") == 0) {
			pol->net_all = true;
			continue;
		}
		if (parse_int(t, 0, UINT32_MAX - 1, &u) < 0)
			return ERR("%s: '%s' is not a uid", where, t);
		if (pol->n_net_uids >= (int)ARRAY_SIZE(pol->net_uids))
			return ERR("%s: more than %zu uids", where, ARRAY_SIZE(pol->net_uids));
		pol->net_uids[pol->n_net_uids++] = (uid_t)u;
	}
	return 0;
}

/* One key of kart.conf: "section.key" = value. */
static int conf_set(struct policy *pol, const char *sec, const char *key, const char *val,
		    char *err, size_t errlen, const char *where)
{
	char k[128];
	long long n;
	int64_t d;
	uint64_t sz;
	snprintf(k, sizeof k, "%s.%s", sec, key);
	if (strcmp(k, "worker.backend") == 0) {
		if (strcmp(val, "bwrap") == 0)
			pol->backend = BACKEND_BWRAP;
		else if (strcmp(val, "none") == 0)
			pol->backend = BACKEND_NONE;
		else
			return ERR("%s: backend = %s: not a backend (bwrap or none)", where, val);
	} else if (strcmp(k, "worker.slots") == 0 || strcmp(k, "worker.batch_slots") == 0) {
		if (parse_int(val, 0, 4096, &n) < 0)
			return ERR("%s: %s = %s: not a number from 0 to 4096", where, key, val);
		pol->slots[key[0] == 'b' ? 1 : 0] = (int)n;
	} else if (strcmp(k, "worker.term_grace") == 0) {
		if (parse_duration_s(val, &d) < 0 || d > 3600)
			return ERR("%s: term_grace = %s: not a duration up to 1h", where, val);
		pol->term_grace_s = (int)d;
	} else if (strcmp(k, "worker.retries") == 0) {
		if (parse_int(val, 0, 100, &n) < 0)
			return ERR("%s: retries = %s: not a number from 0 to 100", where, val);
		pol->retries_default = (int)n;
	} else if (strcmp(k, "limits.timeout_default") == 0 || strcmp(k, "limits.timeout_max") == 0) {
		if (parse_duration_s(val, &d) < 0 || d == 0)
			return ERR("%s: %s = %s: not a duration (90, 90s, 5m, 2h)", where, key, val);
		if (key[8] == 'd')
			pol->timeout_default_s = d;
		else
			pol->timeout_max_s = d;
	} else if (strcmp(k, "limits.output_default") == 0 || strcmp(k, "limits.output_max") == 0 ||
		   strcmp(k, "limits.task_max") == 0) {
		if (parse_size(val, &sz) < 0 || sz == 0)
			return ERR("%s: %s = %s: not a size (512K, 256M, 2G)", where, key, val);
		if (strcmp(key, "output_default") == 0)
			pol->output_default = sz;
		else if (strcmp(key, "output_max") == 0)
			pol->output_max = sz;
		else
			pol->task_max_bytes = sz;
	} else if (strcmp(k, "network.allow_uids") == 0) {
		return set_net_uids(pol, val, err, errlen, where);
	} else {
		return ERR("%s: unknown key '%s' in section [%s]", where, key, sec);
	}
	return 0;
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	char *e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

int policy_parse_conf(struct policy *pol, const char *text, const char *fname, char *err,
		      size_t errlen)
{
	_cleanup_free_ char *copy = xstrdup(text);
	char sec[64] = "";
	int lineno = 0;
	char *save = NULL;
	for (char *p = copy, *line; (line = strsep(&p, "\n"));) {
		char where[512];
		lineno++;
		snprintf(where, sizeof where, "%s line %d", fname, lineno);
		line = trim(line);
		if (!p && !*line)
			break;
		if (!*line || *line == '#' || *line == ';')
			continue;
		if (*line == '[') {
			char *end = strchr(line, ']');
			if (!end || end[1] || end - line - 1 >= (long)sizeof sec)
				return ERR("%s: malformed section header '%s'", where, line);
			*end = '\0';
			snprintf(sec, sizeof sec, "%s", trim(line + 1));
			if (strcmp(sec, "worker") && strcmp(sec, "limits") && strcmp(sec, "network"))
				return ERR("%s: unknown section [%s] (known: worker, limits, network)",
					   where, sec);
			continue;
		}
		char *eq = strchr(line, '=');
		if (!eq)
			return ERR("%s: expected 'key = value', got '%s'", where, line);
		if (!*sec)
			return ERR("%s: '%s' is outside any section", where, line);
		*eq = '\0';
		char *key = trim(line), *val = trim(eq + 1);
		if (!*val)
			return ERR("%s: %s has no value", where, key);
		if (conf_set(pol, sec, key, val, err, errlen, where) < 0)
			return -1;
	}
	(void)save;
	return 0;
}

int policy_load(struct policy *pol, const char *spool_dir, char *err, size_t errlen)
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

	if (spool_dir) {
		char path[4096];
		_cleanup_free_ char *text = NULL;
		if (pathfmt(path, sizeof path, "%s/kart.conf", spool_dir) < 0)
			return ERR("%s/kart.conf: path too long", spool_dir);
		int r = read_file_at(AT_FDCWD, path, 1 << 20, &text, NULL);
		if (r < 0 && r != -ENOENT)
			return ERR("%s: cannot read: %s", path, strerror(-r));
		if (r == 0 && policy_parse_conf(pol, text, path, err, errlen) < 0)
			return -1;
	}

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
	if ((v = getenv("KART_NET_UIDS")) && *v && set_net_uids(pol, v, err, errlen, "KART_NET_UIDS") < 0)
		return -1;
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
