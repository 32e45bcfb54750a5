/* policy_kind.c - [kind.NAME] sections of kart.conf: a task kind, its
 * runner, extensions and credentials, and the lookups task.c asks.
 * Below policy_conf.c, which reads its sections; above policy.c. */
#define _GNU_SOURCE
#include "policy_int.h"

#include <pwd.h>

#include "util.h"

bool kind_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n >= KIND_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == '-'))
			return false;
	return true;
}

const struct kind *policy_kind(const struct policy *pol, const char *name)
{
	for (int i = 0; i < pol->n_kinds; i++)
		if (strcmp(pol->kinds[i].name, name) == 0)
			return &pol->kinds[i];
	return NULL;
}

const struct kind *policy_kind_by_ext(const struct policy *pol, const char *fname)
{
	size_t fl = strlen(fname);
	for (int i = 0; i < pol->n_kinds; i++)
		for (int j = 0; j < pol->kinds[i].n_ext; j++) {
			const char *e = pol->kinds[i].ext[j];
			size_t el = strlen(e);
			if (fl > el && strcmp(fname + fl - el, e) == 0)
				return &pol->kinds[i];
		}
	return NULL;
}

/* The names the sandbox sets for a kind's task: a credential cannot
 * replace them. */
static bool env_name_kind_reserved(const char *s)
{
	static const char *const set[] = {"PATH", "HOME", "TMPDIR", "LANG", "KART_TASK_ID",
					  "KART_ATTEMPT", "KART_OUTDIR", "KART_LLM_ENDPOINT",
					  "KART_LLM_MODEL", "KART_LLM_SOCKET"};
	for (size_t i = 0; i < ARRAY_SIZE(set); i++)
		if (strcmp(s, set[i]) == 0)
			return true;
	return false;
}

int kind_open(struct policy *pol, const char *name, char *err, size_t errlen,
	      const char *where)
{
	if (!kind_name_ok(name))
		return ERR(-1, "%s: [kind.%s]: a kind's name is 1 to %d of a-z 0-9 _ -", where, name,
			   KIND_NAME_MAX - 1);
	if (policy_kind(pol, name))
		return 0; /* a second [kind.NAME] adds to the first */
	if (pol->n_kinds >= KIND_MAX)
		return ERR(-1, "%s: more than %d [kind.*] sections", where, KIND_MAX);
	struct kind *k = &pol->kinds[pol->n_kinds++];
	memset(k, 0, sizeof *k);
	k->endpoint_uid = -1;
	memcpy(k->name, name, strlen(name) + 1); /* checked: it fits */
	return 0;
}

int conf_kind(struct policy *pol, const char *name, const char *key, const char *val,
	      char *err, size_t errlen, const char *where)
{
	struct kind *k = (struct kind *)policy_kind(pol, name);
	if (!k)
		return ERR(-1, "%s: [kind.%s] is not open", where, name);
	if (strcmp(key, "runner") == 0) {
		if (!bind_path_ok(val) || strlen(val) >= sizeof k->runner || strpbrk(val, " \t"))
			return ERR(-1, "%s: runner = %s: not an absolute path to a program (under %zu "
				   "bytes, without spaces, . or ..)", where, val, sizeof k->runner);
		snprintf(k->runner, sizeof k->runner, "%s", val);
	} else if (strcmp(key, "extensions") == 0 || strcmp(key, "credentials") == 0) {
		bool ext = key[0] == 'e';
		_cleanup_free_ char *copy = xstrdup(val);
		char *save = NULL;
		int *n = ext ? &k->n_ext : &k->n_cred;
		*n = 0;
		for (char *t = strtok_r(copy, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
			if (*n >= (ext ? KIND_EXT_MAX : KIND_CRED_MAX))
				return ERR(-1, "%s: %s: more than %d", where, key,
					   ext ? KIND_EXT_MAX : KIND_CRED_MAX);
			if (ext) {
				bool ok = t[0] == '.' && t[1] && strlen(t) < sizeof k->ext[0];
				for (const char *c = t + 1; ok && *c; c++)
					ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
					     (*c >= '0' && *c <= '9') || *c == '_' || *c == '-' || *c == '.';
				if (!ok)
					return ERR(-1, "%s: extensions: '%s' is not an extension (.py: a dot, "
						   "then up to %zu of A-Z a-z 0-9 _ - .)", where, t,
						   sizeof k->ext[0] - 2);
				snprintf(k->ext[(*n)++], sizeof k->ext[0], "%s", t);
			} else {
				if (!env_name_ok(t) || strlen(t) >= sizeof k->cred[0])
					return ERR(-1, "%s: credentials: '%s' is not a variable name", where, t);
				if (env_name_kind_reserved(t))
					return ERR(-1, "%s: credentials: '%s' is set by the sandbox itself",
						   where, t);
				snprintf(k->cred[(*n)++], sizeof k->cred[0], "%s", t);
			}
		}
	} else if (strcmp(key, "net") == 0) {
		if (parse_bool(val, &k->net) < 0)
			return ERR(-1, "%s: net = %s: not yes or no", where, val);
	} else if (strcmp(key, "endpoint") == 0 || strcmp(key, "model") == 0) {
		bool ep = key[0] == 'e';
		size_t cap = ep ? sizeof k->endpoint : sizeof k->model;
		if (strlen(val) >= cap || strpbrk(val, " \t"))
			return ERR(-1, "%s: %s = %s: longer than %zu bytes, or with a space", where, key, val,
				   cap - 1);
		if (ep && strncmp(val, "http://", 7) != 0 && strncmp(val, "https://", 8) != 0)
			return ERR(-1, "%s: endpoint = %s: not an http:// or https:// URL", where, val);
		snprintf(ep ? k->endpoint : k->model, cap, "%s", val);
	} else if (strcmp(key, "endpoint_uid") == 0) {
		struct passwd pw, *pp = NULL;
		char buf[4096];
		long long n;
		if (parse_int(val, 0, UINT32_MAX - 1, &n) == 0)
			k->endpoint_uid = n;
		else if (getpwnam_r(val, &pw, buf, sizeof buf, &pp) == 0 && pp)
			k->endpoint_uid = pp->pw_uid;
		else
			return ERR(-1, "%s: endpoint_uid = %s: not a user (a name or a number)", where, val);
	} else if (strcmp(key, "endpoint_socket") == 0) {
		if (!bind_path_ok(val) || strlen(val) >= sizeof k->endpoint_socket || strpbrk(val, " \t"))
			return ERR(-1, "%s: endpoint_socket = %s: not an absolute path to a Unix socket (under "
				   "%zu bytes, without spaces, . or ..)", where, val, sizeof k->endpoint_socket);
		snprintf(k->endpoint_socket, sizeof k->endpoint_socket, "%s", val);
	} else {
		return ERR(-1, "%s: unknown key '%s' in section [kind.%s] (known: runner, extensions, net, "
			   "credentials, endpoint, endpoint_uid, endpoint_socket, model)", where, key, name);
	}
	return 0;
}

/* After the whole file: every kind has a runner (llm: our kart-llm by
 * default), no extension names two kinds, a kind's credential is
 * neither passed to every task nor to every network task, and it has
 * an endpoint, to which the worker's forwarder adds it (credfwd.h): no
 * task is ever handed it. */
int kinds_check(struct policy *pol, const char *fname, char *err, size_t errlen)
{
	for (int i = 0; i < pol->n_kinds; i++) {
		struct kind *k = &pol->kinds[i];
		if (!k->runner[0] && strcmp(k->name, "llm") == 0)
			find_libexec("kart-llm", k->runner, sizeof k->runner);
		if (!k->runner[0])
			return ERR(-1, "%s: [kind.%s] has no runner", fname, k->name);
		for (int j = 0; j < k->n_ext; j++)
			for (int m = i + 1; m < pol->n_kinds; m++)
				for (int e = 0; e < pol->kinds[m].n_ext; e++)
					if (strcmp(pol->kinds[m].ext[e], k->ext[j]) == 0)
						return ERR(-1, "%s: extension %s is in both [kind.%s] and "
							   "[kind.%s]", fname, k->ext[j], k->name,
							   pol->kinds[m].name);
		for (int j = 0; j < k->n_cred; j++)
			if (plist_has(&pol->env_pass, k->cred[j]) || plist_has(&pol->cred_env, k->cred[j]))
				return ERR(-1, "%s: %s is a credential of [kind.%s] and also in %s", fname,
					   k->cred[j], k->name,
					   plist_has(&pol->env_pass, k->cred[j]) ? "[sandbox] env_pass"
										 : "[network] cred_env");
		if (k->n_cred && !k->endpoint[0])
			return ERR(-1, "%s: [kind.%s] has credentials but no endpoint: they are added to the "
				   "requests the worker forwards there, never handed to a task", fname,
				   k->name);
		/* The forwarder proves whom it gives the key to: a certificate,
		 * or, over http://, the uid of the socket at the other end (a
		 * port of this host, or endpoint_socket). Whoever binds the
		 * port while the service is down gets nothing. */
		bool https = strncmp(k->endpoint, "https://", 8) == 0;
		if (k->n_cred && !https && k->endpoint_uid < 0)
			return ERR(-1, "%s: [kind.%s]: endpoint %s is http://, and its forwarder sends the "
				   "key only to a peer it can prove: set endpoint_uid to the user the "
				   "service runs as (its port must be on this host, or at endpoint_socket), "
				   "or use https://", fname, k->name, k->endpoint);
		if (https && (k->endpoint_uid >= 0 || k->endpoint_socket[0]))
			return ERR(-1, "%s: [kind.%s]: endpoint_uid and endpoint_socket are for an http:// "
				   "endpoint; an https:// one is proven by its certificate", fname, k->name);
		if ((k->endpoint_uid >= 0 || k->endpoint_socket[0]) && !k->n_cred)
			return ERR(-1, "%s: [kind.%s]: endpoint_uid and endpoint_socket are for the forwarder "
				   "of credentials, and the kind has none", fname, k->name);
	}
	return 0;
}
