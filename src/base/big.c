/* SPDX-License-Identifier: MIT */
/* big.c - growable arrays of many megabytes (see big.h). */
#if defined(__linux__)
#define _GNU_SOURCE 1 /* mremap */
#endif
#include "base/big.h"

#include "gpumem/arena.h"

#include <string.h>

#if defined(__linux__) && !defined(GM_ARENA_MALLOC)
#include <sys/mman.h>
#define GM_BIG_MAPPED 1
#endif

#ifdef GM_BIG_MAPPED
/* Mapping sizes are whole 2 MiB units: an array that grows a little at a time is
 * remapped once per 2 MiB.  The pages of each new part are populated at once; no huge pages
 * are asked for (big.h). */
#define MAP_UNIT ((size_t)2 << 20)

static size_t map_round(size_t n)
{
    return (n + MAP_UNIT - 1) & ~(MAP_UNIT - 1);
}

/* Fault in the fresh pages [p, p + bytes) in one call, before they are written (big.h):
 * where the kernel has no MADV_POPULATE_WRITE (before Linux 5.14) the call fails and the pages
 * fault in one by one as they are written, as before. */
static void populate(void *p, size_t bytes)
{
#ifdef MADV_POPULATE_WRITE
    (void)madvise(p, bytes, MADV_POPULATE_WRITE);
#else
    (void)p;
    (void)bytes;
#endif
}

static void *map_new(size_t bytes)
{
    void *m =
        mmap(NULL, map_round(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    populate(m, map_round(bytes));
    return m;
}
#endif

void *gm_big_realloc(void *p, size_t old_bytes, size_t new_bytes)
{
#ifdef GM_BIG_MAPPED
    void *n;
    if (new_bytes > SIZE_MAX - MAP_UNIT)
        return NULL;
    if (old_bytes < GM_BIG_MIN && new_bytes < GM_BIG_MIN)
        return gm_realloc(p, new_bytes);
    if (gm_alloc_inject_failure()) /* a mapping counts as an allocation, too */
        return NULL;
    if (old_bytes < GM_BIG_MIN) {
        /* from the heap to a mapping of its own: one copy of less than GM_BIG_MIN */
        if (!(n = map_new(new_bytes)))
            return NULL;
        if (p)
            memcpy(n, p, old_bytes);
        gm_free(p);
        return n;
    }
    if (new_bytes < GM_BIG_MIN) {
        if (!(n = gm_malloc(new_bytes)))
            return NULL;
        memcpy(n, p, new_bytes);
        (void)munmap(p, map_round(old_bytes));
        return n;
    }
    if (map_round(new_bytes) == map_round(old_bytes))
        return p;
    n = mremap(p, map_round(old_bytes), map_round(new_bytes), MREMAP_MAYMOVE);
    if (n == MAP_FAILED)
        return NULL;
    if (map_round(new_bytes) > map_round(old_bytes))
        populate((char *)n + map_round(old_bytes), map_round(new_bytes) - map_round(old_bytes));
    return n;
#else
    (void)old_bytes;
    return gm_realloc(p, new_bytes);
#endif
}

void gm_big_free(void *p, size_t bytes)
{
    if (!p)
        return;
#ifdef GM_BIG_MAPPED
    if (bytes >= GM_BIG_MIN) {
        (void)munmap(p, map_round(bytes));
        return;
    }
#else
    (void)bytes;
#endif
    gm_free(p);
}
