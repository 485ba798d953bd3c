/* SPDX-License-Identifier: MIT */
/* slab.c - the library's one pool of fixed-size records (see slab.h). */
#include "base/slab.h"

#include "gpumem/arena.h"

/* a slab: its link, then its records (16-byte aligned, as malloc returns it) */
#define SLAB_HEAD 16

enum gm_status gm_slab_reserve(struct gm_slab *s, size_t n)
{
    while (s->n_spare < n) {
#ifdef GM_ARENA_MALLOC
        void *p = gm_malloc(s->elem);
        if (!p)
            return GM_ERR_NOMEM;
        *(void **)p = s->spare;
        s->spare = p;
        s->n_spare++;
#else
        char *sl = gm_malloc(SLAB_HEAD + s->per_slab * s->elem);
        if (!sl)
            return GM_ERR_NOMEM;
        *(void **)sl = s->slabs;
        s->slabs = sl;
        for (size_t i = s->per_slab; i-- > 0;) {
            void *p = sl + SLAB_HEAD + i * s->elem;
            *(void **)p = s->spare;
            s->spare = p;
        }
        s->n_spare += s->per_slab;
#endif
    }
    return GM_OK;
}

void gm_slab_release(struct gm_slab *s)
{
#ifdef GM_ARENA_MALLOC
    while (s->spare) {
        void *p = s->spare;
        s->spare = *(void **)p;
        gm_free(p);
    }
#endif
    while (s->slabs) {
        void *sl = s->slabs;
        s->slabs = *(void **)sl;
        gm_free(sl);
    }
    s->spare = NULL;
    s->n_spare = 0;
}
