/* policy_int.h - what the policy's own files share, and no one else
 * includes: one section per file. The files are layers, each calling
 * only those below it: policy.c (the values), policy_kind.c ([kind.*]),
 * policy_conf.c (kart.conf), policy_load.c (the effective policy). The
 * rest of kart sees policy.h only. */
#ifndef KART_POLICY_INT_H
#define KART_POLICY_INT_H

#include <stddef.h>

#include "policy.h"

/* ---- policy.c: the values ----------------------------------------------- */

/* "auto", "require" or "off"; -1 for anything else. */
int cgroup_use_parse(const char *v, enum cgroup_use *out);
/* What a list's words must be: paths to bind, variable names, names or
 * PREFIX* patterns, container engine options. */
enum plist_kind { PL_PATHS, PL_ENV, PL_ENV_PAT, PL_ARGS };
int set_plist(struct plist *l, const char *v, enum plist_kind kind, char *err, size_t errlen,
	      const char *where, const char *key);
/* yes/true/on/1 or no/false/off/0; -1 for anything else. */
int parse_bool(const char *v, bool *out);
bool env_name_ok(const char *s);
/* An absolute path with no "." or ".." component, not "/" itself. */
bool bind_path_ok(const char *s);
int container_cmd_set(struct policy *pol, const char *v);
int container_image_set(struct policy *pol, const char *v);
int slurm_name_set(char *dst, size_t len, const char *v);

/* ---- policy_kind.c: [kind.NAME] ----------------------------------------- */

/* A [kind.NAME] header: the kind added, or found to add to. */
int kind_open(struct policy *pol, const char *name, char *err, size_t errlen, const char *where);
/* One key of an open [kind.NAME]. */
int conf_kind(struct policy *pol, const char *name, const char *key, const char *val,
	      char *err, size_t errlen, const char *where);
/* After the whole file: the kinds agree with each other and the policy. */
int kinds_check(struct policy *pol, const char *fname, char *err, size_t errlen);

/* ---- policy_conf.c: kart.conf's keys ------------------------------------ */

/* [network] allow_uids, and KART_NET_UIDS over it. */
int set_net_uids(struct policy *pol, const char *v, char *err, size_t errlen, const char *where);

#endif
