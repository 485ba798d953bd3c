/* SPDX-License-Identifier: MIT */
/* ggml_alloc.c - ggml-alloc's graph allocator, replayed over a list of tensor sizes (rules
 * and source in ggml_alloc.h).  One buffer, one chunk: the backends gpumem models report no
 * maximum buffer size below what a compute buffer needs. */
#include "estimate/ggml_alloc.h"

#include <string.h>

#include "gpumem/arena.h"

#define MAX_FREE_BLOCKS 256 /* ggml-alloc.c MAX_FREE_BLOCKS */

uint32_t est_ggml_push(struct est_ggml_graph *g, uint64_t bytes, struct est_ggml_layout layout,
                       uint32_t flags, uint32_t a, uint32_t b)
{
    struct est_ggml_tensor *t;
    if (g->status != GM_OK)
        return EST_GGML_NONE;
    if (g->n == g->cap) {
        uint32_t cap = g->cap ? g->cap * 2 : 256;
        struct est_ggml_tensor *p = cap > g->cap ? gm_realloc(g->t, cap * sizeof *p) : NULL;
        if (!p) {
            g->status = GM_ERR_NOMEM;
            return EST_GGML_NONE;
        }
        g->t = p;
        g->cap = cap;
    }
    t = &g->t[g->n];
    t->bytes = bytes;
    t->layout = layout;
    t->src[0] = a;
    t->src[1] = b;
    t->src[2] = t->src[3] = EST_GGML_NONE;
    t->view_src = EST_GGML_NONE;
    t->flags = flags;
    return g->n++;
}

uint32_t est_ggml_view(struct est_ggml_graph *g, uint32_t of)
{
    uint32_t v, root = of;
    if (of != EST_GGML_NONE && of < g->n && g->t[of].view_src != EST_GGML_NONE)
        root = g->t[of].view_src;
    v = est_ggml_push(g, 0, (struct est_ggml_layout){{0, 0, 0}, 0}, EST_GGML_VIEW, of,
                      EST_GGML_NONE);
    if (v != EST_GGML_NONE)
        g->t[v].view_src = root;
    return v;
}

void est_ggml_graph_release(struct est_ggml_graph *g)
{
    gm_free(g->t);
    memset(g, 0, sizeof *g);
}

struct free_block {
    uint64_t offset;
    uint64_t size;
};

struct tallocr {
    struct free_block blocks[MAX_FREE_BLOCKS]; /* sorted by offset; the last is the tail */
    int n;
    uint64_t alignment;
    uint64_t max_size; /* bytes: the highest end reached */
    bool full;         /* more than MAX_FREE_BLOCKS were needed */
    bool too_big;      /* a tensor past the end of the tail */
};

struct state {
    int32_t n_children;
    int32_t n_views;
    bool allocated; /* placed by this allocator and not yet freed */
    uint64_t offset;
};

static uint64_t align_up(uint64_t size, uint64_t alignment)
{
    return (size + alignment - 1) & ~(alignment - 1);
}

static void remove_block(struct tallocr *a, int i)
{
    memmove(&a->blocks[i], &a->blocks[i + 1], (size_t)(a->n - i - 1) * sizeof a->blocks[0]);
    a->n--;
}

/* ggml_dyn_tallocr_alloc: the best fit below the tail, else the tail */
static uint64_t talloc(struct tallocr *a, uint64_t size)
{
    int best = -1;
    uint64_t best_size = UINT64_MAX, addr;
    size = align_up(size, a->alignment);
    for (int i = 0; i < a->n - 1; i++)
        if (a->blocks[i].size >= size && a->blocks[i].size <= best_size) {
            best = i;
            best_size = a->blocks[i].size;
        }
    if (best < 0) {
        best = a->n - 1;
        if (a->blocks[best].size < size) {
            a->too_big = true;
            return 0;
        }
    }
    addr = a->blocks[best].offset;
    a->blocks[best].offset += size;
    a->blocks[best].size -= size;
    if (a->blocks[best].size == 0)
        remove_block(a, best);
    if (addr + size > a->max_size)
        a->max_size = addr + size;
    return addr;
}

/* ggml_dyn_tallocr_free_bytes: merge with a touching block, else insert in address order */
static void tfree(struct tallocr *a, uint64_t offset, uint64_t size)
{
    int pos = 0;
    size = align_up(size, a->alignment);
    for (int i = 0; i < a->n; i++) {
        struct free_block *b = &a->blocks[i];
        if (b->offset + b->size == offset) {
            b->size += size;
            if (i < a->n - 1 && b->offset + b->size == a->blocks[i + 1].offset) {
                b->size += a->blocks[i + 1].size;
                remove_block(a, i + 1);
            }
            return;
        }
        if (offset + size == b->offset) {
            b->offset = offset;
            b->size += size;
            if (i > 0 && a->blocks[i - 1].offset + a->blocks[i - 1].size == b->offset) {
                a->blocks[i - 1].size += b->size;
                remove_block(a, i);
            }
            return;
        }
    }
    if (a->n == MAX_FREE_BLOCKS) {
        a->full = true;
        return;
    }
    while (pos < a->n && a->blocks[pos].offset < offset)
        pos++;
    memmove(&a->blocks[pos + 1], &a->blocks[pos], (size_t)(a->n - pos) * sizeof a->blocks[0]);
    a->blocks[pos].offset = offset;
    a->blocks[pos].size = size;
    a->n++;
}

static bool is_view(const struct est_ggml_tensor *t)
{
    return (t->flags & EST_GGML_VIEW) != 0;
}

static bool same_layout(const struct est_ggml_layout *x, const struct est_ggml_layout *y)
{
    return x->ne[0] == y->ne[0] && x->ne[1] == y->ne[1] && x->ne[2] == y->ne[2] &&
           x->type == y->type;
}

/* ggml_gallocr_allocate_node */
static void place(const struct est_ggml_graph *g, struct state *s, struct tallocr *a, uint32_t i)
{
    const struct est_ggml_tensor *t = &g->t[i];
    if (s[i].allocated || (t->flags & EST_GGML_EXTERNAL) || is_view(t))
        return;
    s[i].allocated = true;
    if (t->flags & EST_GGML_INPLACE)
        for (int k = 0; k < EST_GGML_MAX_SRC; k++) {
            uint32_t p = t->src[k];
            if (p == EST_GGML_NONE || !s[p].allocated)
                continue; /* not the allocator's own (views never are) */
            if ((g->t[p].flags & EST_GGML_OUTPUT) || !same_layout(&g->t[p].layout, &t->layout))
                continue;
            if (s[p].n_children == 1 && s[p].n_views == 0) {
                s[i].offset = s[p].offset;
                s[p].allocated = false; /* the child owns the range now */
                return;
            }
        }
    s[i].offset = talloc(a, t->bytes);
}

static void release(const struct est_ggml_graph *g, struct state *s, struct tallocr *a, uint32_t i)
{
    if (g->t[i].flags & EST_GGML_OUTPUT)
        return;
    tfree(a, s[i].offset, g->t[i].bytes);
    s[i].allocated = false;
}

/* A graph est_ggml_reserve() can run: parents and a view's source before the tensor, sizes
 * that cannot wrap when aligned and added up. */
static enum gm_status check_graph(const struct est_ggml_graph *g, struct gm_error *err)
{
    for (uint32_t i = 0; i < g->n; i++) {
        const struct est_ggml_tensor *t = &g->t[i];
        for (int k = 0; k < EST_GGML_MAX_SRC; k++)
            if (t->src[k] != EST_GGML_NONE && t->src[k] >= i)
                return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                               "ggml graph: tensor %u reads tensor %u, which comes after it", i,
                               t->src[k]);
        if (is_view(t) && (t->view_src == EST_GGML_NONE || t->view_src >= i))
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "ggml graph: view %u has no source before it", i);
        if (t->bytes > UINT64_MAX / 4)
            return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET,
                           "ggml graph: tensor %u of %llu bytes is too large", i,
                           (unsigned long long)t->bytes);
    }
    return GM_OK;
}

enum gm_status est_ggml_reserve(const struct est_ggml_graph *g, uint64_t alignment, uint64_t *bytes,
                                uint64_t *offsets, struct gm_error *err)
{
    struct tallocr *a;
    struct state *s;
    enum gm_status st;
    if (g->status != GM_OK)
        return gm_fail(err, g->status, GM_NO_OFFSET, "ggml graph: could not be built");
    if (!alignment || (alignment & (alignment - 1)))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "ggml graph: alignment %llu is not a power of two",
                       (unsigned long long)alignment);
    if ((st = check_graph(g, err)))
        return st;
    a = gm_calloc(1, sizeof *a);
    s = gm_calloc(g->n ? g->n : 1, sizeof *s);
    if (!a || !s) {
        gm_free(a);
        gm_free(s);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "ggml graph: out of memory");
    }
    a->alignment = alignment;
    a->n = 1;
    a->blocks[0].size = UINT64_MAX / 2; /* the tail: as much as the buffer may grow */

    /* count consumers and views; place the inputs first, in node order */
    for (uint32_t i = 0; i < g->n; i++) {
        const struct est_ggml_tensor *t = &g->t[i];
        if (is_view(t))
            s[t->view_src].n_views++;
        if (t->flags & EST_GGML_INPUT)
            place(g, s, a, i);
        for (int k = 0; k < EST_GGML_MAX_SRC; k++)
            if (t->src[k] != EST_GGML_NONE)
                s[t->src[k]].n_children++;
    }
    /* run the nodes: place each, then free the parents it was the last consumer of */
    for (uint32_t i = 0; i < g->n; i++) {
        const struct est_ggml_tensor *t = &g->t[i];
        place(g, s, a, i);
        for (int k = 0; k < EST_GGML_MAX_SRC; k++) {
            uint32_t p = t->src[k];
            if (p == EST_GGML_NONE || --s[p].n_children != 0 || s[p].n_views != 0)
                continue;
            if (is_view(&g->t[p])) {
                uint32_t v = g->t[p].view_src;
                if (--s[v].n_views == 0 && s[v].n_children == 0 && s[v].allocated)
                    release(g, s, a, v);
            } else if (s[p].allocated) {
                release(g, s, a, p);
            }
        }
    }
    *bytes = a->max_size;
    for (uint32_t i = 0; offsets && i < g->n; i++) {
        bool nowhere = is_view(&g->t[i]) || (g->t[i].flags & EST_GGML_EXTERNAL);
        offsets[i] = nowhere ? EST_GGML_NOWHERE : s[i].offset;
    }
    st = GM_OK;
    if (a->full)
        st = gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "ggml graph: more than %d free blocks",
                     MAX_FREE_BLOCKS);
    else if (a->too_big)
        st =
            gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "ggml graph: the buffer would pass %llu bytes",
                    (unsigned long long)(UINT64_MAX / 2));
    gm_free(a);
    gm_free(s);
    return st;
}
