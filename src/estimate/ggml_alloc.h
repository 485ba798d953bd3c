/* SPDX-License-Identifier: MIT */
/* ggml_alloc.h - a model of ggml-alloc's graph allocator (ggml_gallocr), which sizes the
 * compute buffer llama.cpp reserves: the tensors of one graph, in execution order, placed in
 * one buffer whose size is the highest end any tensor reached.
 *
 * Read in ggml-org/llama.cpp ggml/src/ggml-alloc.c at 0450e2f (ggml_dyn_tallocr_alloc,
 * ggml_dyn_tallocr_free_bytes, ggml_gallocr_allocate_node, ggml_gallocr_alloc_graph_impl):
 *   - a size is rounded up to the buffer's alignment;
 *   - a tensor goes into the smallest free block below the tail that holds it (of equal
 *     blocks the highest), else at the start of the free tail, which grows the buffer;
 *   - a freed range merges with the free blocks it touches;
 *   - graph inputs are placed first, in node order, before any node runs;
 *   - a node whose op may run in place (ggml_op_can_inplace) takes the range of its first
 *     parent that is the allocator's own, not a view, not a graph output, of the same layout,
 *     with no other consumer left and no view of it;
 *   - a view takes no bytes: it keeps its source alive until the view's last consumer ran;
 *   - after a node is placed its parents lose one consumer, and one left with none (and no
 *     live view) is freed, unless it is a graph output.
 * Weights, the KV cache and tensors of other backends are not in the graph at all: they are
 * never placed or freed here, and a node reading them lists only its parents in the buffer. */
#ifndef GM_ESTIMATE_GGML_ALLOC_H
#define GM_ESTIMATE_GGML_ALLOC_H

#include <stdbool.h>
#include <stdint.h>

#include "gpumem/error.h"

#define EST_GGML_MAX_SRC 4
#define EST_GGML_NONE    UINT32_MAX
#define EST_GGML_NOWHERE UINT64_MAX /* no offset: a view, or a tensor outside the buffer */

enum est_ggml_flag {
    EST_GGML_VIEW = 1 << 0,     /* VIEW/RESHAPE/PERMUTE/TRANSPOSE of view_src: no bytes */
    EST_GGML_EXTERNAL = 1 << 1, /* data outside this buffer (a KV-cache write, a weight) */
    EST_GGML_INPUT = 1 << 2,    /* a graph input: placed before the walk */
    EST_GGML_OUTPUT = 1 << 3,   /* a graph output: never freed, never written over */
    EST_GGML_INPLACE = 1 << 4,  /* the op may run in place over a parent */
};

/* A tensor's type and shape: ggml_are_same_layout compares these (all tensors here are
 * contiguous, so equal shapes have equal strides). */
struct est_ggml_layout {
    uint64_t ne[3]; /* elements per dimension */
    uint64_t type;  /* the element type (any key equal for equal types) */
};

/* One tensor of the graph, in execution order. */
struct est_ggml_tensor {
    uint64_t bytes;                 /* ggml_backend_buft_get_alloc_size */
    struct est_ggml_layout layout;  /* compared exactly for in-place reuse */
    uint32_t src[EST_GGML_MAX_SRC]; /* parents in this graph, EST_GGML_NONE when unused */
    uint32_t view_src;              /* the tensor a view reads, EST_GGML_NONE for none */
    uint32_t flags;                 /* enum est_ggml_flag */
};

/* A graph being built: tensors in execution order.  est_ggml_graph_release() frees it. */
struct est_ggml_graph {
    struct est_ggml_tensor *t;
    uint32_t n;
    uint32_t cap;
    enum gm_status status; /* GM_OK, or the first failure of est_ggml_push() */
};

/* Append a tensor of 'bytes' (of 'layout', 'flags') reading 'a' and 'b' (indices
 * of earlier tensors or EST_GGML_NONE); returns its index.  A failure to grow is recorded
 * in g->status and returns EST_GGML_NONE, which later pushes accept as "no parent". */
uint32_t est_ggml_push(struct est_ggml_graph *g, uint64_t bytes, struct est_ggml_layout layout,
                       uint32_t flags, uint32_t a, uint32_t b);
/* Append a view of tensor 'of' (its root when 'of' is itself a view). */
uint32_t est_ggml_view(struct est_ggml_graph *g, uint32_t of);
void est_ggml_graph_release(struct est_ggml_graph *g);

/* Run ggml-alloc's placement over 'g' with buffer alignment 'alignment' (a power of two) and
 * set *bytes to the buffer it reserves; 'offsets' (NULL, or g->n entries) receives where each
 * tensor was placed (in place: its parent's offset), EST_GGML_NOWHERE for a view or a tensor
 * outside the buffer.
 * GM_ERR_NOMEM; GM_ERR_LIMIT past ggml's 256 free blocks, for a tensor above UINT64_MAX / 4
 * bytes or a buffer past UINT64_MAX / 2; GM_ERR_INVALID for a malformed graph (a parent or a
 * view's source after the tensor, a view without a source). */
enum gm_status est_ggml_reserve(const struct est_ggml_graph *g, uint64_t alignment, uint64_t *bytes,
                                uint64_t *offsets, struct gm_error *err);

#endif
