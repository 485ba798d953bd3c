/* SPDX-License-Identifier: MIT */
/* arena.c - chunked bump allocator with a cap, and the allocation hooks.
 *
 * Chunks grow geometrically (64 KiB up to 64 MiB); a request larger than half a chunk gets
 * a chunk of its own, so big arrays do not waste the tail of the current chunk. */
#include "gpumem/arena.h"
#include "gpumem/internal/alloc_hooks.h"

#include "base/big.h"

#include <stdlib.h>
#include <string.h>

struct gm_arena_chunk {
    struct gm_arena_chunk *next;
    size_t size; /* payload bytes */
    size_t pos;  /* bytes used */
    /* payload follows, 16-byte aligned */
};

#define CHUNK_HDR ((sizeof(struct gm_arena_chunk) + 15u) & ~(size_t)15u)
#define CHUNK_MIN ((size_t)64 << 10)
#define CHUNK_MAX ((size_t)64 << 20)

static _Thread_local long fail_after = -1;
static _Thread_local bool fail_once; /* the failure turns injection off */
static _Thread_local long n_calls;

void gm_alloc_fail_after(long n)
{
    fail_after = n;
    fail_once = false;
    n_calls = 0;
}

void gm_alloc_fail_once_after(long n)
{
    gm_alloc_fail_after(n);
    fail_once = n >= 0;
}

long gm_alloc_count(void)
{
    return n_calls;
}

bool gm_alloc_injecting(void)
{
    return fail_after >= 0;
}

bool gm_alloc_inject_failure(void)
{
    n_calls++;
    if (fail_after < 0)
        return false;
    if (fail_after == 0) {
        if (fail_once)
            fail_after = -1;
        return true;
    }
    fail_after--;
    return false;
}

void *gm_malloc(size_t size)
{
    if (gm_alloc_inject_failure())
        return NULL;
    return malloc(size ? size : 1);
}

void *gm_calloc(size_t n, size_t size)
{
    if (gm_alloc_inject_failure())
        return NULL;
    return calloc(n ? n : 1, size ? size : 1);
}

void *gm_realloc(void *p, size_t size)
{
    if (gm_alloc_inject_failure())
        return NULL;
    return realloc(p, size ? size : 1);
}

void gm_free(void *p)
{
    free(p);
}

void gm_arena_init(struct gm_arena *a, size_t cap)
{
    a->head = NULL;
    a->cap = cap;
    a->used = 0;
    a->reserved = 0;
    a->limit_hit = false;
    a->shared = NULL;
}

void gm_arena_share(struct gm_arena *a, size_t *shared)
{
    if (a->shared)
        *a->shared -= a->used;
    a->shared = shared;
    if (shared)
        *shared += a->used;
}

/* Count 'size' more bytes handed out. */
static void *take(struct gm_arena *a, size_t size, void *p)
{
    a->used += size;
    if (a->shared)
        *a->shared += size;
    return p;
}

void gm_arena_release(struct gm_arena *a)
{
    struct gm_arena_chunk *c = a->head;
    while (c) {
        struct gm_arena_chunk *next = c->next;
        gm_free(c);
        c = next;
    }
    a->head = NULL;
    if (a->shared)
        *a->shared -= a->used;
    a->used = 0;
    a->reserved = 0;
}

static struct gm_arena_chunk *new_chunk(struct gm_arena *a, size_t payload)
{
    struct gm_arena_chunk *c;
    if (payload > SIZE_MAX - CHUNK_HDR)
        return NULL;
    c = gm_malloc(CHUNK_HDR + payload);
    if (!c)
        return NULL;
    c->size = payload;
    c->pos = 0;
    a->reserved += CHUNK_HDR + payload;
    return c;
}

void *gm_arena_alloc(struct gm_arena *a, size_t size, size_t align)
{
    struct gm_arena_chunk *c = a->head;
    size_t held = a->shared ? *a->shared : a->used;

    if (align == 0)
        align = 1;
    if (size > SIZE_MAX / 2 || (a->cap && (size > a->cap || held > a->cap - size))) {
        a->limit_hit = true;
        return NULL;
    }
#ifdef GM_ARENA_MALLOC
    /* One malloc per object, so that ASan can see overflows between objects. */
    c = new_chunk(a, size);
    if (!c) {
        a->limit_hit = false;
        return NULL;
    }
    c->pos = size;
    c->next = a->head;
    a->head = c;
    return take(a, size, (char *)c + CHUNK_HDR);
#else
    if (c) {
        size_t pos = (c->pos + (align - 1)) & ~(align - 1);
        if (pos <= c->size && c->size - pos >= size) {
            c->pos = pos + size;
            return take(a, size, (char *)c + CHUNK_HDR + pos);
        }
    }
    if (size > CHUNK_MIN / 2) {
        /* A big request gets its own chunk, placed behind the current one so the
         * current chunk's free tail stays usable. */
        struct gm_arena_chunk *big = new_chunk(a, size);
        if (!big) {
            a->limit_hit = false;
            return NULL;
        }
        big->pos = size;
        if (c) {
            big->next = c->next;
            c->next = big;
        } else {
            big->next = NULL;
            a->head = big;
        }
        return take(a, size, (char *)big + CHUNK_HDR);
    }
    {
        size_t want = c ? c->size * 2 : CHUNK_MIN;
        struct gm_arena_chunk *n;
        if (want > CHUNK_MAX)
            want = CHUNK_MAX;
        n = new_chunk(a, want);
        if (!n) {
            a->limit_hit = false;
            return NULL;
        }
        n->next = a->head;
        a->head = n;
        n->pos = size;
        return take(a, size, (char *)n + CHUNK_HDR);
    }
#endif
}

void *gm_arena_calloc(struct gm_arena *a, size_t n, size_t size)
{
    void *p;
    if (size && n > SIZE_MAX / size) {
        a->limit_hit = true;
        return NULL;
    }
    p = gm_arena_alloc(a, n * size, 16);
    if (p)
        memset(p, 0, n * size);
    return p;
}

char *gm_arena_strndup(struct gm_arena *a, const char *s, size_t len)
{
    char *p;
    if (len == SIZE_MAX)
        return NULL;
    p = gm_arena_alloc(a, len + 1, 1);
    if (!p)
        return NULL;
    if (len)
        memcpy(p, s, len);
    p[len] = '\0';
    return p;
}
