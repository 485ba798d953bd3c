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
#include <unistd.h>
#define GM_BIG_MAPPED 1
#endif

#ifdef GM_BIG_MAPPED
/* A growing mapped array of 'bytes' is memory up to its capacity, the new part populated
 * at once when it grows (big.h); behind that its mapping reserves address space up to
 * map_reserve(bytes), the next power of two, which no page backs until the array grows
 * into it: growth within the reservation populates in place (no mremap, no page table
 * moved).  Capacities are whole 2 MiB units (gm_big_room()); after a shrink the array may
 * keep up to a unit more in memory than its new capacity.  Both sizes are functions of the
 * capacity alone, which is all the caller keeps. */
#define MAP_UNIT ((size_t)2 << 20)

static size_t map_round(size_t n)
{
    return (n + MAP_UNIT - 1) & ~(MAP_UNIT - 1);
}

static size_t map_reserve(size_t n)
{
    size_t r = MAP_UNIT, m = map_round(n);
    while (r < m && r <= SIZE_MAX / 2)
        r *= 2;
    return r < m ? m : r;
}

/* When an array grows, fault in the pages of bytes [from, to) of the mapping 'm' in one
 * call, before they are written (big.h): the array's capacity only, not the rest of its last 2 MiB
 * unit, so that what is in memory is what the caller's budget counted.  Where the kernel has no
 * MADV_POPULATE_WRITE (before Linux 5.14) the call fails and the pages fault in one by one
 * as they are written, as before. */
static void populate(void *m, size_t from, size_t to)
{
#ifdef MADV_POPULATE_WRITE
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    from &= ~(page - 1); /* the page holding 'from' is already in memory, or the first one */
    if (to > from)
        (void)madvise((char *)m + from, to - from, MADV_POPULATE_WRITE);
#else
    (void)m;
    (void)from;
    (void)to;
#endif
}

static void *map_new(size_t bytes)
{
    void *m = mmap(NULL, map_reserve(bytes), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    populate(m, 0, bytes);
    return m;
}
#endif

size_t gm_big_room(size_t bytes)
{
#ifdef GM_BIG_MAPPED
    return bytes <= SIZE_MAX - MAP_UNIT ? map_round(bytes) : bytes;
#else
    return bytes <= SIZE_MAX - bytes / 4 ? bytes + bytes / 4 : bytes;
#endif
}

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
        (void)munmap(p, map_reserve(old_bytes));
        return n;
    }
    n = p;
    if (map_reserve(new_bytes) != map_reserve(old_bytes)) {
        n = mremap(p, map_reserve(old_bytes), map_reserve(new_bytes), MREMAP_MAYMOVE);
        if (n == MAP_FAILED)
            return NULL;
    }
    if (new_bytes > old_bytes) {
        populate(n, old_bytes, new_bytes);
    } else if (map_round(new_bytes) < map_round(old_bytes)) {
        /* the units given up are memory no more (what is still reserved of them) */
        size_t hi = map_round(old_bytes) < map_reserve(new_bytes) ? map_round(old_bytes)
                                                                  : map_reserve(new_bytes);
        if (hi > map_round(new_bytes))
            (void)madvise((char *)n + map_round(new_bytes), hi - map_round(new_bytes),
                          MADV_DONTNEED);
    }
    return n;
#else
    (void)old_bytes;
    return gm_realloc(p, new_bytes);
#endif
}

void *gm_big_zalloc(size_t bytes)
{
#ifdef GM_BIG_MAPPED
    if (bytes >= GM_BIG_MIN)
        return gm_big_realloc(NULL, 0, bytes); /* a new anonymous mapping: zero */
#endif
    return gm_calloc(1, bytes ? bytes : 1);
}

void gm_big_free(void *p, size_t bytes)
{
    if (!p)
        return;
#ifdef GM_BIG_MAPPED
    if (bytes >= GM_BIG_MIN) {
        (void)munmap(p, map_reserve(bytes));
        return;
    }
#else
    (void)bytes;
#endif
    gm_free(p);
}
