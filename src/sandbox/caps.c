/* caps.c - the worker drops what it does not need.
 *
 * What a root worker still does after start-up, and the capability each
 * needs (see docs/SECURITY.md, "The worker's capabilities"):
 *   - run a task as its submitter: setuid/setgid/setgroups in the child
 *     (CAP_SETUID, CAP_SETGID);
 *   - read, claim, mark (user.kart xattr) and lease other users' task
 *     files, hand $KART_OUTDIR to the submitter and clean up what the task
 *     left there (CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_CHOWN, CAP_LEASE);
 *     CAP_DAC_READ_SEARCH goes: DAC_OVERRIDE covers every check it would
 *     pass, and nothing here uses open_by_handle_at or AT_EMPTY_PATH;
 *   - kill a task's processes that run as another user (CAP_KILL);
 *   - start bwrap as root for a task that runs as root: bwrap then maps
 *     uid 0 into its user namespace, which needs CAP_SETFCAP (Linux 5.12+);
 *   - empty a task's bounding set: in the child before setuid, and with
 *     backend none in kart-launch for a root task, which would otherwise
 *     get it back at execve (CAP_SETPCAP).
 * bwrap itself needs nothing more: it builds the sandbox in a user
 * namespace of its own. cgroup directories and files belong to root,
 * so uid 0 writes them as their owner. Everything else goes, from the
 * bounding set too, so that nothing the worker execs (bwrap, the
 * on_done hook) can get it back. */
#define _GNU_SOURCE
#include "caps.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>

#include "util.h"

static const cap_value_t keep[] = {
	CAP_SETUID, CAP_SETGID, CAP_DAC_OVERRIDE, CAP_FOWNER,
	CAP_CHOWN,  CAP_LEASE,  CAP_KILL,         CAP_SETFCAP,
	CAP_SETPCAP,
};

static int kept_cap(cap_value_t c)
{
	for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
		if (keep[i] == c)
			return 1;
	return 0;
}

void caps_mask_names(unsigned long long mask, char *buf, size_t len)
{
	size_t n = 0;
	buf[0] = '\0';
	for (cap_value_t c = 0; c < 64 && n < len; c++) {
		if (!(mask & (1ULL << c)))
			continue;
		char *name = cap_to_name(c);
		if (!name)
			continue;
		int k = snprintf(buf + n, len - n, "%s%s", n ? "," : "", name);
		cap_free(name);
		if (k < 0 || (size_t)k >= len - n)
			break;
		n += (size_t)k;
	}
	if (!n)
		snprintf(buf, len, "none");
}

int caps_drop_worker(unsigned long long *kept, char *err, size_t errlen)
{
	int r = 0;
	*kept = 0;
	cap_t cur = cap_get_proc();
	if (!cur) {
		r = -errno;
		return ERR(r, "cap_get_proc: %s", strerror(errno));
	}
	cap_value_t max = (cap_value_t)cap_max_bits();
	unsigned long long have = 0;
	for (cap_value_t c = 0; c < max && c < 64; c++) {
		cap_flag_value_t v = CAP_CLEAR;
		if (cap_get_flag(cur, c, CAP_PERMITTED, &v) == 0 && v == CAP_SET)
			have |= 1ULL << c;
	}
	cap_free(cur);
	if (!have)
		return 0; /* an unprivileged worker: nothing to give up */

	/* The bounding set first, while CAP_SETPCAP is still ours. */
	for (cap_value_t c = 0; c < max; c++) {
		if (kept_cap(c) || cap_get_bound(c) <= 0)
			continue;
		if (cap_drop_bound(c) < 0) {
			r = -errno;
			return ERR(r, "dropping capability %d from the bounding set: %s", (int)c, strerror(errno));
		}
	}
	if (CAP_AMBIENT_SUPPORTED() && cap_reset_ambient() < 0) {
		r = -errno;
		return ERR(r, "clearing the ambient set: %s", strerror(errno));
	}
	cap_t want = cap_init(); /* everything clear, inheritable included */
	if (!want) {
		r = -errno;
		return ERR(r, "cap_init: %s", strerror(errno));
	}
	cap_value_t list[sizeof keep / sizeof keep[0]];
	int n = 0;
	for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
		if (keep[i] < 64 && (have & (1ULL << keep[i])))
			list[n++] = keep[i];
	if ((n && (cap_set_flag(want, CAP_PERMITTED, n, list, CAP_SET) < 0 ||
		   cap_set_flag(want, CAP_EFFECTIVE, n, list, CAP_SET) < 0)) ||
	    cap_set_proc(want) < 0) {
		r = -errno;
		ERR(r, "cap_set_proc: %s", strerror(errno));
		cap_free(want);
		return r;
	}
	cap_free(want);

	/* Check what the kernel holds now rather than trust the calls. */
	cur = cap_get_proc();
	if (!cur) {
		r = -errno;
		return ERR(r, "cap_get_proc: %s", strerror(errno));
	}
	for (cap_value_t c = 0; c < max; c++) {
		cap_flag_value_t p = CAP_CLEAR, e = CAP_CLEAR, i = CAP_CLEAR;
		(void)cap_get_flag(cur, c, CAP_PERMITTED, &p);
		(void)cap_get_flag(cur, c, CAP_EFFECTIVE, &e);
		(void)cap_get_flag(cur, c, CAP_INHERITABLE, &i);
		int b = cap_get_bound(c);
		if (i == CAP_SET || (!kept_cap(c) && (p == CAP_SET || e == CAP_SET || b > 0))) {
			ERR(-EPERM, "capability %d is still held after the drop", (int)c);
			cap_free(cur);
			return -EPERM;
		}
		if (p == CAP_SET && c < 64)
			*kept |= 1ULL << c;
	}
	cap_free(cur);
	return 0;
}
