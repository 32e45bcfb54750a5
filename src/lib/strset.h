/* strset.h - a set of names, each with a small int of its user's (the
 * worker's: what it knows of an entry of new/). Chained FNV-1a buckets, a power of two of them, doubled
 * when the set outgrows them. */
#ifndef KART_STRSET_H
#define KART_STRSET_H

#include <stddef.h>

struct strset_ent {
	struct strset_ent *next;
	union {
		int st;  /* strset_get, strset_put */
		void *p; /* strset_getp, strset_putp */
	};
	char name[];
};

struct strset {
	struct strset_ent **b;
	size_t nb, n;
};

/* The name's value, or 0 when it is not in the set. */
int strset_get(struct strset *k, const char *name);
/* Add the name, or set its value if it is there. */
void strset_put(struct strset *k, const char *name, int st);
void strset_del(struct strset *k, const char *name);
/* Every entry freed; the set is empty and may be used again. */
void strset_free(struct strset *k);

/* The same set with a pointer of its user's for each name instead of an
 * int (depend.c's nodes; a set uses one or the other). strset_getp: the
 * name's pointer, or NULL. strset_putp: the set's copy of the name,
 * which stays where it is until the name is deleted. Iterate with
 * STRSET_EACH (no change to the set meanwhile). */
void *strset_getp(const struct strset *k, const char *name);
const char *strset_putp(struct strset *k, const char *name, void *p);
#define STRSET_EACH(k, e) \
	for (size_t strset_i_ = 0; strset_i_ < (k)->nb; strset_i_++) \
		for (struct strset_ent *e = (k)->b[strset_i_]; e; e = e->next)

/* FNV-1a, the set's hash, for a table of its user's. */
size_t strset_hash(const char *s);

#endif
