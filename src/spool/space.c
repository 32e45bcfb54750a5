/* space.c - the spool's free space, against [worker] min_free. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>

#include "policy.h"
#include "space.h"
#include "util.h"

int min_free_parse(const char *s, uint64_t *bytes, unsigned *pct)
{
	char buf[64];
	if (strlen(s) >= sizeof buf)
		return -EINVAL;
	snprintf(buf, sizeof buf, "%s", s);
	uint64_t b = 0;
	unsigned p = 0;
	bool seen_b = false, seen_p = false;
	char *save = NULL;
	for (char *w = strtok_r(buf, ", \t", &save); w; w = strtok_r(NULL, ", \t", &save)) {
		size_t l = strlen(w);
		if (l > 1 && w[l - 1] == '%') {
			long long n;
			w[l - 1] = '\0';
			if (seen_p || parse_int(w, 0, 99, &n) < 0)
				return -EINVAL;
			p = (unsigned)n;
			seen_p = true;
		} else {
			if (seen_b || parse_size(w, &b) < 0)
				return -EINVAL;
			seen_b = true;
		}
	}
	if (!seen_b && !seen_p)
		return -EINVAL;
	*bytes = b;
	*pct = p;
	return 0;
}

const char *space_fs_known(unsigned long f_type)
{
	static const struct {
		unsigned long magic;
		const char *name;
	} fs[] = {
		{0xEF53, "ext2/3/4"}, {0x58465342, "xfs"},   {0x9123683E, "btrfs"},
		{0x01021994, "tmpfs"}, {0x794C7630, "overlay"}, {0x2FC12FC1, "zfs"},
		{0xF2F52010, "f2fs"},  {0x65735546, "fuse"},  {0x01021997, "9p"},
		{0x6969, "nfs"},       {0xFE534D42, "smb2"},  {0xFF534D42, "cifs"},
	};
	f_type &= 0xffffffffUL;
	for (size_t i = 0; i < ARRAY_SIZE(fs); i++)
		if (fs[i].magic == f_type)
			return fs[i].name;
	return NULL;
}

void space_fs_name(unsigned long f_type, char *buf, size_t len)
{
	const char *n = space_fs_known(f_type);
	if (n)
		snprintf(buf, len, "%s", n);
	else
		snprintf(buf, len, "type 0x%lx", f_type & 0xffffffffUL);
}

int space_check(int fd, uint64_t min_bytes, unsigned min_pct, struct space *out)
{
	struct statvfs sv;
	struct statfs sf;
	memset(out, 0, sizeof *out);
	if (fstatvfs(fd, &sv) < 0 || fstatfs(fd, &sf) < 0)
		return -errno;
	space_fs_name((unsigned long)sf.f_type, out->fs, sizeof out->fs);
	uint64_t frsize = sv.f_frsize ? sv.f_frsize : sv.f_bsize;
	out->free_bytes = (uint64_t)sv.f_bavail * frsize;
	out->total_bytes = (uint64_t)sv.f_blocks * frsize;
	out->free_inodes = sv.f_favail;
	out->total_inodes = sv.f_files;
	/* Both given: the lesser holds, so that 64M does not stop a small
	 * filesystem nor 1 % keep 100G idle on a large one. */
	uint64_t by_pct = min_pct ? out->total_bytes / 100 * min_pct : 0;
	if (min_bytes && by_pct)
		out->min_bytes = min_bytes < by_pct ? min_bytes : by_pct;
	else
		out->min_bytes = min_bytes ? min_bytes : by_pct;
	/* Inodes only by the percentage: a filesystem without a count of
	 * them (btrfs says 0) is never low on them. */
	out->min_inodes = min_pct ? out->total_inodes / 100 * min_pct : 0;
	out->low = out->free_bytes < out->min_bytes || out->free_inodes < out->min_inodes;
	return 0;
}

static void human(uint64_t v, char *buf, size_t len)
{
	static const char unit[] = "KMGT";
	if (v < 1024) {
		snprintf(buf, len, "%llu bytes", (unsigned long long)v);
		return;
	}
	int u = -1;
	double d = (double)v;
	while (d >= 1024 && u < 3) {
		d /= 1024;
		u++;
	}
	snprintf(buf, len, "%.1f%ciB", d, unit[u]);
}

void space_describe(const struct space *s, const char *spool, char *buf, size_t len)
{
	char fb[32], mb[32];
	human(s->free_bytes, fb, sizeof fb);
	human(s->min_bytes, mb, sizeof mb);
	if (s->free_inodes < s->min_inodes)
		snprintf(buf, len,
			 "the spool's filesystem (%s, holding %s) has %llu free inodes, below "
			 "min_free (%llu)",
			 s->fs, spool, (unsigned long long)s->free_inodes,
			 (unsigned long long)s->min_inodes);
	else
		snprintf(buf, len, "the spool's filesystem (%s, holding %s) has %s free, %s min_free (%s)",
			 s->fs, spool, fb, s->low ? "below" : "above", mb);
}

bool space_low(int rootfd, const struct policy *pol, const char *spool, char *why, size_t len)
{
	struct space s;
	if ((!pol->min_free_bytes && !pol->min_free_pct) ||
	    space_check(rootfd, pol->min_free_bytes, pol->min_free_pct, &s) < 0 || !s.low)
		return false;
	space_describe(&s, spool, why, len);
	return true;
}
