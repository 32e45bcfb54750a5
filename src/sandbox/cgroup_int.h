/* cgroup_int.h - what cgroup_host.c lends cgroup.c: the v1 hierarchies'
 * names, the control-file helpers and the v2 parent's preparation.
 * cgroup.c calls cgroup_host.c, never the reverse. Nothing here is for
 * the rest of kart (cgroup.h is). */
#ifndef KART_CGROUP_INT_H
#define KART_CGROUP_INT_H

#include "cgroup.h"

/* The v1 hierarchy of each slot, as named in /proc/self/cgroup and
 * mounted at ROOT/<name>. */
extern const char *const cg_v1_name[CG__SLOTS];

/* Does dir/file exist? */
bool cg_exists(const char *dir, const char *file);
/* Write val to dir/file (fake: create it, appending). 0 or -errno. */
int cg_write_file(const char *dir, const char *file, const char *val, bool fake);
int cg_writef(const char *dir, const char *file, bool fake, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* dir/file's text into *out (the caller frees it). keep: a descriptor
 * of it kept open by the caller (opened beside dirfd, or by path, on
 * first use) and read again from offset 0; NULL: opened and closed. */
int cg_read_text_kept(int *keep, int dirfd, const char *dir, const char *file, char **out);
int cg_read_text(const char *dir, const char *file, char **out);

/* v2: enable the controllers for the leaves in the parent, once (the
 * worker may move itself into a leaf of its own first). 0, or -errno
 * with err saying why. */
int cg_v2_prepare(struct cg_host *h, char *err, size_t errlen);

#endif
