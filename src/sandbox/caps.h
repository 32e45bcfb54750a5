/* caps.h - the worker's own capabilities (libcap). A worker started with
 * capabilities (as root) keeps only those its later work needs, in every
 * set and in the bounding set, once start-up is done. The tasks' own
 * capabilities are bwrap's business (--cap-drop ALL, no_new_privs). */
#ifndef KART_CAPS_H
#define KART_CAPS_H

#include <stddef.h>

/* Drop every capability outside caps_worker_keep from the bounding,
 * inheritable and ambient sets and keep the rest permitted and
 * effective. A process without capabilities is left as it is (returns
 * 0, *kept 0). Returns 0 or -errno with err saying which step failed;
 * *kept is a mask of what was kept. */
int caps_drop_worker(unsigned long long *kept, char *err, size_t errlen);

/* "cap_chown,cap_kill,..." for a mask; buf must hold 512 bytes. */
void caps_mask_names(unsigned long long mask, char *buf, size_t len);

#endif
