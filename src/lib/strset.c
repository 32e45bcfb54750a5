/* strset.c - a set of names (strset.h). */
#include "strset.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

size_t strset_hash(const char *s)
{
	size_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static struct strset_ent **strset_find(const struct strset *k, const char *name)
{
	if (!k->nb)
		return NULL;
	struct strset_ent **pp = &k->b[strset_hash(name) & (k->nb - 1)];
	for (; *pp; pp = &(*pp)->next)
		if (strcmp((*pp)->name, name) == 0)
			return pp;
	return NULL;
}

int strset_get(struct strset *k, const char *name)
{
	struct strset_ent **pp = strset_find(k, name);
	return pp ? (*pp)->st : 0;
}

/* A new entry for name, not in the set yet: the buckets doubled first
 * when the set has outgrown them. */
static struct strset_ent *strset_add(struct strset *k, const char *name)
{
	if (k->n + 1 > k->nb) {
		size_t nb = k->nb ? k->nb * 2 : 1024;
		struct strset_ent **b = xcalloc(nb, sizeof *b);
		for (size_t i = 0; i < k->nb; i++)
			for (struct strset_ent *e = k->b[i], *nx; e; e = nx) {
				nx = e->next;
				size_t j = strset_hash(e->name) & (nb - 1);
				e->next = b[j];
				b[j] = e;
			}
		free(k->b);
		k->b = b;
		k->nb = nb;
	}
	size_t len = strlen(name);
	struct strset_ent *e = xmalloc(sizeof *e + len + 1);
	memcpy(e->name, name, len + 1);
	size_t j = strset_hash(name) & (k->nb - 1);
	e->next = k->b[j];
	k->b[j] = e;
	k->n++;
	return e;
}

void strset_put(struct strset *k, const char *name, int st)
{
	struct strset_ent **pp = strset_find(k, name);
	struct strset_ent *e = pp ? *pp : strset_add(k, name);
	e->st = st;
}

void *strset_getp(const struct strset *k, const char *name)
{
	struct strset_ent **pp = strset_find(k, name);
	return pp ? (*pp)->p : NULL;
}

const char *strset_putp(struct strset *k, const char *name, void *p)
{
	struct strset_ent **pp = strset_find(k, name);
	struct strset_ent *e = pp ? *pp : strset_add(k, name);
	e->p = p;
	return e->name;
}

void strset_del(struct strset *k, const char *name)
{
	struct strset_ent **pp = strset_find(k, name);
	if (!pp)
		return;
	struct strset_ent *e = *pp;
	*pp = e->next;
	free(e);
	k->n--;
}

void strset_free(struct strset *k)
{
	for (size_t i = 0; i < k->nb; i++)
		for (struct strset_ent *e = k->b[i], *nx; e; e = nx) {
			nx = e->next;
			free(e);
		}
	free(k->b);
	*k = (struct strset){0};
}
