/* space.h - the spool's free space, against [worker] min_free.
 * Below it a worker claims nothing new (Postfix's queue_minfree): a task
 * started on a full disk could store neither its output nor its result. */
#ifndef KART_SPACE_H
#define KART_SPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct space {
	uint64_t free_bytes, total_bytes;
	uint64_t free_inodes, total_inodes;
	uint64_t min_bytes;  /* the threshold as it applies to this filesystem; 0: none */
	uint64_t min_inodes;
	bool low;            /* below it, in bytes or in inodes */
	char fs[32];         /* "tmpfs", "ext4", ... or "type 0x..." */
};

/* "64M", "1%", "64M, 1%" (both: the lesser of the two holds), or "0"
 * (no threshold). Returns 0 or -EINVAL. */
int min_free_parse(const char *s, uint64_t *bytes, unsigned *pct);

/* statvfs of the directory fd against the threshold. 0 or -errno. */
int space_check(int fd, uint64_t min_bytes, unsigned min_pct, struct space *out);

/* One sentence for a log line or a warning: what is free and what
 * min_free asks, naming the filesystem that holds spool. */
void space_describe(const struct space *s, const char *spool, char *buf, size_t len);

struct policy;
/* For the commands: is the spool below the policy's min_free? If so,
 * why (space_describe) and true; false when not, or not known. */
bool space_low(int rootfd, const struct policy *pol, const char *spool, char *why, size_t len);

/* The filesystem's name for a statfs f_type, as above. */
/* A filesystem's name by its statfs magic, or NULL where unknown. */
const char *space_fs_known(unsigned long f_type);
void space_fs_name(unsigned long f_type, char *buf, size_t len);

#endif
