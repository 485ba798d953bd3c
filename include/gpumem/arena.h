/* SPDX-License-Identifier: MIT */
/* arena.h - region allocation for parsed artifacts, and the library's allocation hooks.
 *
 * Each parsed artifact (snapshot, model, ...) owns one arena: strings, arrays and nodes
 * all live in it and are released together.  The arena has a hard cap on the bytes it
 * hands out, so a hostile file cannot make the library take all memory.  Compiled with
 * GM_ARENA_MALLOC (the asan preset), every allocation is its own malloc() so that
 * AddressSanitizer sees overflows between neighbouring objects. */
#ifndef GPUMEM_ARENA_H
#define GPUMEM_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct gm_arena_chunk;

struct gm_arena {
    struct gm_arena_chunk *head; /* newest chunk first */
    size_t cap;                  /* bytes the arena may hand out in total, 0 = no cap */
    size_t used;                 /* bytes handed out (payload, with alignment) */
    size_t reserved;             /* bytes obtained from malloc */
    bool limit_hit;              /* the last failure was the cap, not malloc */
    size_t *shared; /* NULL, or the bytes held by everything that shares 'cap' with this
                       arena (its own 'used' included): the cap then bounds their sum */
};

#define GM_ARENA_INIT                                                                              \
    {                                                                                              \
        NULL, 0, 0, 0, false, NULL                                                                 \
    }

/* Prepare 'a' with a cap of 'cap' bytes (0: no cap).  Allocates nothing. */
void gm_arena_init(struct gm_arena *a, size_t cap);

/* Count what 'a' holds in '*shared' from now on, its cap bounding the sum (NULL: its own
 * 'used' again); what it already holds moves into or out of the count. */
void gm_arena_share(struct gm_arena *a, size_t *shared);

/* Release everything 'a' handed out; 'a' may be reused after gm_arena_init(). */
void gm_arena_release(struct gm_arena *a);

/* 'size' bytes aligned to 'align' (a power of two <= 16), uninitialised.  NULL when malloc
 * fails or the cap would be exceeded (then a->limit_hit is true).  Borrowed: valid until
 * gm_arena_release(). */
void *gm_arena_alloc(struct gm_arena *a, size_t size, size_t align);

/* Like gm_arena_alloc() for 'n' elements of 'size' bytes, zeroed, with overflow check. */
void *gm_arena_calloc(struct gm_arena *a, size_t n, size_t size);

/* A NUL-terminated copy of the 'len' bytes at 's' (which need not be terminated). */
char *gm_arena_strndup(struct gm_arena *a, const char *s, size_t len);

/* Library allocation wrappers.  All heap allocation in the library goes through these so
 * that tests can fail the Nth call (gm_alloc_fail_after()). */
void *gm_malloc(size_t size);
void *gm_calloc(size_t n, size_t size);
void *gm_realloc(void *p, size_t size);
void gm_free(void *p);

/* Test hook: make the allocation wrappers fail once 'n' more calls have succeeded;
 * n < 0 turns failure injection off.  Per thread. */
void gm_alloc_fail_after(long n);

/* Test hook: how many allocation calls were made on this thread since the last
 * gm_alloc_fail_after(). */
long gm_alloc_count(void);

#ifdef __cplusplus
}
#endif
#endif
