/* strset.h - a set of names, each with a small int of its user's (the
 * worker's: what it knows of an entry of new/). Chained FNV-1a buckets, a power of two of them, doubled
 * when the set outgrows them. */
#ifndef KART_STRSET_H
#define KART_STRSET_H

#include <stddef.h>

struct strset_ent {
	struct strset_ent *next;
	int st;
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

#endif
