/* cgroup_host.c - the host's cgroups (see cgroup.h): /proc/self/cgroup
 * and the cgroupfs read to find the mode and the leaves' parents, the v2
 * parent prepared once, and the control-file helpers the leaf code
 * (cgroup.c) shares through cgroup_int.h. Nothing here calls cgroup.c. */
#define _GNU_SOURCE
#include "cgroup_int.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#include "util.h"

/* The v1 hierarchy of each slot, as named in /proc/self/cgroup and
 * mounted at ROOT/<name>. */
const char *const cg_v1_name[CG__SLOTS] = {
	[CG_MEMORY] = "memory", [CG_PIDS] = "pids", [CG_CPU] = "cpu",
	[CG_CPUACCT] = "cpuacct", [CG_FREEZER] = "freezer",
};

/* The worker leaf of v2: the worker itself, out of the way of the
 * no-internal-processes rule. Task leaves are "kart.<pid>.<seq>". */
#define CG_WORKER_LEAF "kart.worker"

const char *cg_mode_name(enum cg_mode m)
{
	return m == CG_MODE_V2 ? "v2" : m == CG_MODE_V1 ? "v1" : "none";
}

/* ---- parsing ------------------------------------------------------------- */

int cg_parse_int(const char *text, int64_t *out)
{
	char *end;
	if (!text)
		return -EINVAL;
	while (*text == ' ' || *text == '\t')
		text++;
	if (*text < '0' || *text > '9')
		return -EINVAL;
	errno = 0;
	long long v = strtoll(text, &end, 10);
	if (errno)
		return -errno;
	while (*end == ' ' || *end == '\t' || *end == '\n')
		end++;
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

int cg_parse_keyed(const char *text, const char *key, int64_t *out)
{
	size_t kl = strlen(key);
	for (const char *l = text; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);
		if (len > kl && strncmp(l, key, kl) == 0 && (l[kl] == ' ' || l[kl] == '\t')) {
			char val[32];
			size_t vl = len - kl - 1;
			if (vl >= sizeof val)
				return -ERANGE;
			memcpy(val, l + kl + 1, vl);
			val[vl] = '\0';
			return cg_parse_int(val, out);
		}
		l = nl ? nl + 1 : NULL;
	}
	return -ENOENT;
}

int cg_parse_pressure(const char *text, const char *line, int64_t *total)
{
	size_t ll = strlen(line);
	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (strncmp(l, line, ll) != 0 || l[ll] != ' ')
			continue;
		const char *e = strchr(l, '\n'), *t = strstr(l, " total=");
		if (!t || (e && t > e))
			return -EINVAL;
		char *end;
		errno = 0;
		long long v = strtoll(t + 7, &end, 10);
		if (errno || end == t + 7 || v < 0 || (*end && *end != '\n' && *end != ' '))
			return -EINVAL;
		*total = v;
		return 0;
	}
	return -ENOENT;
}

unsigned cg_parse_ctls(const char *text)
{
	unsigned m = 0;
	char buf[1024];
	snprintf(buf, sizeof buf, "%s", text ? text : "");
	char *save = NULL;
	for (char *w = strtok_r(buf, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save)) {
		if (*w == '+')
			w++;
		if (strcmp(w, "memory") == 0)
			m |= CG_CTL_MEMORY;
		else if (strcmp(w, "pids") == 0)
			m |= CG_CTL_PIDS;
		else if (strcmp(w, "cpu") == 0)
			m |= CG_CTL_CPU;
	}
	return m;
}

/* In /proc/self/cgroup text, the path of hierarchy ctl ("" for the v2
 * line "0::PATH"). */
static int self_path(const char *text, const char *ctl, char *out, size_t outlen)
{
	for (const char *l = text; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);
		char line[CG_PATH_MAX + 128];
		if (len < sizeof line) {
			memcpy(line, l, len);
			line[len] = '\0';
			char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
			if (c2) {
				*c2 = '\0';
				const char *ctls = c1 + 1, *path = c2 + 1;
				bool match = false;
				if (!*ctl) {
					match = !*ctls && strncmp(line, "0:", 2) == 0;
				} else {
					char cbuf[256], *save = NULL;
					snprintf(cbuf, sizeof cbuf, "%s", ctls);
					for (char *w = strtok_r(cbuf, ",", &save); w && !match;
					     w = strtok_r(NULL, ",", &save))
						match = strcmp(w, ctl) == 0;
				}
				if (match && path[0] == '/')
					return pathfmt(out, outlen, "%s", path);
			}
		}
		l = nl ? nl + 1 : NULL;
	}
	return -ENOENT;
}

/* ---- files ------------------------------------------------------------------ */

/* base + a cgroup path ("/" is the base itself). */
static int cgpath(char *out, const char *base, const char *rel)
{
	if (!rel || !*rel || strcmp(rel, "/") == 0)
		return pathfmt(out, CG_PATH_MAX, "%s", base);
	return pathfmt(out, CG_PATH_MAX, "%s%s%s", base, rel[0] == '/' ? "" : "/", rel);
}

bool cg_exists(const char *dir, const char *file)
{
	char p[CG_PATH_MAX + 64];
	struct stat st;
	return pathfmt(p, sizeof p, "%s/%s", dir, file) == 0 && stat(p, &st) == 0;
}

int cg_write_file(const char *dir, const char *file, const char *val, bool fake)
{
	char p[CG_PATH_MAX + 64];
	int r = pathfmt(p, sizeof p, "%s/%s", dir, file);
	if (r < 0)
		return r;
	/* A real cgroupfs makes its own files; the fake tree gets them
	 * here, each one a log of what was written to it. */
	int flags = O_WRONLY | O_CLOEXEC | (fake ? O_CREAT | O_APPEND : 0);
	_cleanup_close_ int fd = open(p, flags, 0644);
	if (fd < 0)
		return -errno;
	size_t len = strlen(val);
	ssize_t n = write(fd, val, len);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

int cg_writef(const char *dir, const char *file, bool fake, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int cg_writef(const char *dir, const char *file, bool fake, const char *fmt, ...)
{
	char val[128];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(val, sizeof val, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof val)
		return -EINVAL;
	return cg_write_file(dir, file, val, fake);
}

/* A control file, whole. kernfs hands a file's text over in one read when
 * the buffer holds it (a short read is the end): one read, where a loop
 * would make a second to see the end, and no 64 KiB buffer; a longer
 * file (cgroup.procs of a big tree) is read to its end. */
/* dir/file's text into *out. keep: a descriptor of it kept open by the
 * caller (opened beside dirfd, or by path, on first use) and read again
 * from offset 0, which kernfs answers with the current values; NULL:
 * opened and closed here. */
int cg_read_text_kept(int *keep, int dirfd, const char *dir, const char *file, char **out)
{
	char p[CG_PATH_MAX + 64];
	int r = pathfmt(p, sizeof p, "%s/%s", dir, file);
	if (r < 0)
		return r;
	int local = -1, *fd = keep ? keep : &local;
	if (*fd < 0)
		*fd = dirfd >= 0 ? openat(dirfd, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
				 : open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (*fd < 0)
		return -errno;
	char buf[1024];
	ssize_t n;
	while ((n = pread(*fd, buf, sizeof buf, 0)) < 0 && errno == EINTR)
		;
	if (n < 0)
		r = -errno;
	else if ((size_t)n < sizeof buf) {
		char *t = xmalloc((size_t)n + 1);
		memcpy(t, buf, (size_t)n);
		t[n] = '\0';
		*out = t;
	} else
		r = read_file_at(AT_FDCWD, p, 65536, out, NULL);
	if (local >= 0)
		close(local);
	return r;
}

int cg_read_text(const char *dir, const char *file, char **out)
{
	return cg_read_text_kept(NULL, -1, dir, file, out);
}

/* ---- the host ------------------------------------------------------------------ */

int cg_host_init(struct cg_host *h, const char *root, const char *self_cgroup,
		 const char *parent)
{
	memset(h, 0, sizeof *h);
	for (int s = 0; s < CG__SLOTS; s++)
		h->alias[s] = -1;
	int r = pathfmt(h->root, sizeof h->root, "%s", root ? root : CG_ROOT_DEFAULT);
	if (r < 0)
		return r;
	if (parent && !*parent)
		parent = NULL;
	_cleanup_free_ char *own = NULL;
	if (!self_cgroup) {
		r = read_file_at(AT_FDCWD, "/proc/self/cgroup", 65536, &own, NULL);
		if (r < 0)
			return r;
		self_cgroup = own;
	}
	char self[CG_PATH_MAX], base[CG_PATH_MAX];

	if (cg_exists(h->root, "cgroup.controllers")) {
		/* Pure v2: ROOT is the cgroup2 mount. */
		h->mode = CG_MODE_V2;
		if (self_path(self_cgroup, "", self, sizeof self) < 0)
			snprintf(self, sizeof self, "/");
		r = cgpath(h->parent[CG_UNIFIED], h->root, parent ? parent : self);
		if (r < 0)
			return r;
		/* Only the true root may hold processes and leaves alike; the
		 * "/" of a cgroup namespace is not it (it has cgroup.type). */
		bool true_root = strcmp(self, "/") == 0 &&
				 !cg_exists(h->parent[CG_UNIFIED], "cgroup.type");
		h->self_in_parent = (!parent || strcmp(parent, self) == 0) && !true_root;
		return 0;
	}

	for (int s = CG_MEMORY; s < CG__SLOTS; s++) {
		char real[PATH_MAX];
		struct stat st;
		if (pathfmt(base, sizeof base, "%s/%s", h->root, cg_v1_name[s]) < 0 ||
		    stat(base, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		if (self_path(self_cgroup, cg_v1_name[s], self, sizeof self) < 0)
			continue;
		if ((r = cgpath(h->parent[s], base, parent ? parent : self)) < 0)
			return r;
		h->mode = CG_MODE_V1;
		/* cpu,cpuacct mounted together: one directory for both. */
		if (realpath(base, real))
			for (int o = CG_MEMORY; o < s; o++) {
				char oreal[PATH_MAX], ob[CG_PATH_MAX];
				if (h->parent[o][0] && h->alias[o] < 0 &&
				    pathfmt(ob, sizeof ob, "%s/%s", h->root, cg_v1_name[o]) == 0 &&
				    realpath(ob, oreal) && strcmp(real, oreal) == 0)
					h->alias[s] = o;
			}
	}
	if (h->mode == CG_MODE_NONE)
		return 0;
	/* Hybrid: a cgroup2 mount without controllers, good for
	 * cgroup.kill, cgroup.events and cpu.stat. */
	if (pathfmt(base, sizeof base, "%s/unified", h->root) == 0 &&
	    cg_exists(base, "cgroup.procs")) {
		if (self_path(self_cgroup, "", self, sizeof self) < 0)
			snprintf(self, sizeof self, "/");
		if ((r = cgpath(h->parent[CG_UNIFIED], base, parent ? parent : self)) < 0)
			return r;
	}
	h->memsw = h->parent[CG_MEMORY][0] &&
		   cg_exists(h->parent[CG_MEMORY], "memory.memsw.limit_in_bytes");
	return 0;
}

/* v2: enable the controllers for the leaves in the parent, once. The
 * parent must hold no process then: where the worker itself sits in it,
 * it moves into a leaf of its own first. */
int cg_v2_prepare(struct cg_host *h, char *err, size_t errlen)
{
	const char *P = h->parent[CG_UNIFIED];
	_cleanup_free_ char *avail = NULL, *on = NULL, *procs = NULL;
	int r;
	if (h->prepared)
		return 0;
	if ((r = cg_read_text(P, "cgroup.controllers", &avail)) < 0) {
		snprintf(err, errlen, "%s/cgroup.controllers: %s", P, strerror(-r));
		return r;
	}
	unsigned want = cg_parse_ctls(avail);
	if ((r = cg_read_text(P, "cgroup.subtree_control", &on)) < 0) {
		snprintf(err, errlen, "%s/cgroup.subtree_control: %s", P, strerror(-r));
		return r;
	}
	unsigned have = cg_parse_ctls(on);
	if ((have & want) != want) {
		if (h->self_in_parent && cg_read_text(P, "cgroup.procs", &procs) == 0 &&
		    strspn(procs, " \n") != strlen(procs)) {
			char wl[CG_PATH_MAX];
			if ((r = pathfmt(wl, sizeof wl, "%s/%s", P, CG_WORKER_LEAF)) < 0 ||
			    (mkdir(wl, 0755) < 0 && errno != EEXIST && (r = -errno)) ||
			    (r = cg_writef(wl, "cgroup.procs", h->fake, "%d\n", (int)getpid())) < 0) {
				snprintf(err, errlen, "moving the worker into %s/%s: %s", P,
					 CG_WORKER_LEAF, strerror(-r));
				return r;
			}
		}
		static const struct {
			unsigned bit;
			const char *w;
		} ctl[] = {
			{CG_CTL_MEMORY, "+memory\n"},
			{CG_CTL_PIDS, "+pids\n"},
			{CG_CTL_CPU, "+cpu\n"},
		};
		/* One at a time: one that cannot be enabled leaves the others. */
		h->enable_err = 0;
		for (size_t i = 0; i < ARRAY_SIZE(ctl); i++) {
			if (!(want & ctl[i].bit) || (have & ctl[i].bit))
				continue;
			if ((r = cg_write_file(P, "cgroup.subtree_control", ctl[i].w, h->fake)) == 0)
				have |= ctl[i].bit;
			else
				h->enable_err = r;
		}
		if (!h->fake) {
			free(on);
			on = NULL;
			if ((r = cg_read_text(P, "cgroup.subtree_control", &on)) < 0) {
				snprintf(err, errlen, "%s/cgroup.subtree_control: %s", P,
					 strerror(-r));
				return r;
			}
			have = cg_parse_ctls(on);
		}
	}
	h->avail = want;
	h->ctls = have & want;
	/* Not all there (EBUSY: other processes in the parent): try again
	 * at the next leaf. */
	h->prepared = h->ctls == want;
	return 0;
}
