/* SPDX-License-Identifier: MIT */
/* slab.h - the library's one pool of fixed-size records (library-internal).
 *
 * A structure that makes and drops hundreds of thousands of small records of one size (the
 * allocator model's blocks, the ordered set's nodes) takes them from a pool: slabs of many
 * records from the heap, a record given back is the next one handed out, and the slabs are
 * freed at once by gm_slab_release().  A record given back holds the free list's link in its
 * first bytes; a record handed out is uninitialised.  The sanitizer build (GM_ARENA_MALLOC)
 * gives each record its own allocation instead, freed when given back, so that ASan sees a
 * use after free.  GM_SLAB_INIT allocates nothing. */
#ifndef GM_BASE_SLAB_H
#define GM_BASE_SLAB_H

#include "gpumem/arena.h"
#include "gpumem/error.h"

#include <stddef.h>

struct gm_slab {
    size_t elem;     /* bytes of a record (a multiple of 8, at least a pointer) */
    size_t per_slab; /* records a slab holds */
    void *slabs;     /* linked through their first bytes */
    void *spare;     /* records given back or never handed out */
    size_t n_spare;
};

#define GM_SLAB_INIT(type, per_slab)                                                               \
    {                                                                                              \
        sizeof(type), (per_slab), NULL, NULL, 0                                                    \
    }

/* At least 'n' spare records: GM_OK or GM_ERR_NOMEM. */
enum gm_status gm_slab_reserve(struct gm_slab *s, size_t n);

/* A record, uninitialised; NULL when none is spare and none can be had.  Borrowed: valid
 * until given back or gm_slab_release(). */
static inline void *gm_slab_take(struct gm_slab *s)
{
    void *p;
    if (!s->n_spare && gm_slab_reserve(s, 1))
        return NULL;
    p = s->spare;
    s->spare = *(void **)p;
    s->n_spare--;
    return p;
}

/* Give back a record 'p' of 's' (NULL is a no-op). */
static inline void gm_slab_give(struct gm_slab *s, void *p)
{
    if (!p)
        return;
#ifdef GM_ARENA_MALLOC
    (void)s;
    gm_free(p);
#else
    *(void **)p = s->spare;
    s->spare = p;
    s->n_spare++;
#endif
}

/* Free the pool's memory, every record given back first; 's' is empty and usable again. */
void gm_slab_release(struct gm_slab *s);

#endif
