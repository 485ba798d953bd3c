/* SPDX-License-Identifier: MIT */
/* llamacpp_graph.c - the tensors of the graph llama.cpp reserves its compute buffer for
 * (llama_context::graph_reserve: one micro-batch of n_ubatch tokens, each an output, over the
 * whole cache), in the order the GPU runs them, for the Llama layout (llama, mistral, qwen2)
 * and GPT-NeoX with every layer and the output layer on the GPU; est_ggml_reserve() then places
 * them as ggml-alloc does.  Read in ggml-org/llama.cpp:
 *   - src/models/qwen2.cpp @ 0215468 (llama's builder is the same without the q/k/v biases):
 *     per layer attn_norm, q/k/v, rope, attention, wo, the residual, ffn_norm, the MLP and the
 *     residual; on the last layer get_rows of the attention output and of the layer input by
 *     inp_out_ids; then result_norm (t_embd, a graph output) and the logits (t_logits);
 *   - GPT-NeoX: neox_layer() below;
 *   - src/llama-graph.cpp @ 00395eb: build_norm (rms_norm, then mul by the weight),
 *     build_ffn (LLM_FFN_SILU + LLM_FFN_PAR: gate and up matmuls, ggml_swiglu_split, down),
 *     build_attn (expands q, v, k in that order, then the KV-cache writes, ggml_set_rows),
 *     build_attn_mha (flash attention: ggml_flash_attn_ext on the cache and the mask, an f32
 *     output of head_dim x heads x tokens; else kq = k x q over the cache, soft_max_ext in
 *     place with the mask, kqv = v x kq, then ggml_cont_2d of its permutation);
 *   - the graph's node order is ggml_build_forward_expand's depth-first walk, parents in
 *     source order, from each expanded tensor: the MLP of a layer is reached from the next
 *     layer's q, so a layer runs wo, (get_rows,) the residual, ffn_norm, gate, up, swiglu,
 *     down, the residual;
 *   - ggml/src/ggml-backend.cpp (ggml_backend_sched_split_graph): graph inputs live on the
 *     CPU backend; the GPU split starts with a copy of each input it reads, in the order its
 *     nodes first read them: the token embeddings (get_rows on the host's token_embd), the
 *     positions, the K and V row indices of the cache writes (V transposed without flash
 *     attention: one I64 index per element), the f32 mask (cast to f16 on the GPU for flash
 *     attention) and inp_out_ids.
 * The ops that may run in place are ggml_op_can_inplace's (ggml-alloc.c): rms_norm, mul, add,
 * rope, soft_max; get_rows, mul_mat, the GLU ops, cont, cast and flash attention never do. */
#include <stdint.h>

#include "estimate/estimate_int.h"
#include "estimate/ggml_alloc.h"

#define N EST_GGML_NONE

/* ggml_type values (ggml.h) of the tensors the graph makes */
enum { F32 = 0, F16 = 1, I32 = 26, I64 = 27 };

static uint64_t type_bytes(uint64_t type)
{
    return type == F16 ? 2 : type == I64 ? 8 : 4;
}

/* A tensor of ne0 x ne1 x ne2 elements of ggml type 'type'; a size past 64 bits saturates,
 * and est_ggml_reserve() refuses it. */
static uint32_t add(struct est_ggml_graph *gr, uint64_t ne0, uint64_t ne1, uint64_t ne2,
                    uint64_t type, uint32_t flags, uint32_t a, uint32_t b)
{
    return est_ggml_push(gr, gm_mul_sat(gm_mul_sat(ne0, ne1), gm_mul_sat(ne2, type_bytes(type))),
                         (struct est_ggml_layout){{ne0, ne1, ne2}, type}, flags, a, b);
}

/* rms_norm, then mul by the norm's weight (build_norm, LLM_NORM_RMS) */
static uint32_t rms_norm(struct est_ggml_graph *gr, uint64_t h, uint64_t ub, uint32_t x,
                         uint32_t out_flags)
{
    uint32_t n = add(gr, h, ub, 1, F32, EST_GGML_INPLACE, x, N);
    return add(gr, h, ub, 1, F32, EST_GGML_INPLACE | out_flags, n, N);
}

/* a projection of 'x' to 'width' per token, with its bias added in place */
static uint32_t proj(struct est_ggml_graph *gr, uint64_t width, uint64_t ub, bool bias, uint32_t x)
{
    uint32_t y = add(gr, width, ub, 1, F32, 0, x, N);
    return bias ? add(gr, width, ub, 1, F32, EST_GGML_INPLACE, y, N) : y;
}

/* LayerNorm with weight and bias (build_norm, LLM_NORM); ggml_norm is not an in-place op */
static uint32_t layer_norm(struct est_ggml_graph *gr, uint64_t h, uint64_t ub, uint32_t x,
                           uint32_t out_flags)
{
    uint32_t n = add(gr, h, ub, 1, F32, 0, x, N);
    n = add(gr, h, ub, 1, F32, EST_GGML_INPLACE, n, N);
    return add(gr, h, ub, 1, F32, EST_GGML_INPLACE | out_flags, n, N);
}

/* The graph's inputs and what one layer reads of them. */
struct inputs {
    uint32_t embd, pos, k_idxs, v_idxs, mask, out_ids;
    uint32_t mask_fa; /* the f16 cast of the mask, made where the first layer reads it */
};

/* The cache writes of roped 'k' and of 'v' (both land in the KV buffer), then attention of
 * roped 'q' over the cache (build_attn_mha): its output, q_width x ub. */
static uint32_t attention(struct est_ggml_graph *gr, const struct est_llamacpp_graph *g,
                          struct inputs *in, uint32_t q, uint32_t k, uint32_t v)
{
    const uint64_t ub = g->n_ubatch, hd = g->head_dim ? g->head_dim : 1, heads = g->heads,
                   cells = g->cells;
    uint32_t att;
    add(gr, 0, 0, 0, F16, EST_GGML_EXTERNAL, est_ggml_view(gr, k), in->k_idxs);
    add(gr, 0, 0, 0, F16, EST_GGML_EXTERNAL, est_ggml_view(gr, v), in->v_idxs);
    q = est_ggml_view(gr, est_ggml_view(gr, q)); /* view_4d by stream, permute */
    if (g->flash_attn) {
        if (in->mask_fa == N)
            in->mask_fa = add(gr, cells, ub, 1, F16, 0, in->mask, N);
        return est_ggml_view(gr, add(gr, hd, heads, ub, F32, 0, q, in->mask_fa));
    }
    att = add(gr, cells, ub, heads, F32, 0, q, N);
    att = add(gr, cells, ub, heads, F32, EST_GGML_INPLACE, att, in->mask); /* soft_max_ext */
    att = add(gr, hd, ub, heads, F32, 0, att, N);                          /* v x kq */
    return add(gr, g->q_width, ub, 1, F32, 0, est_ggml_view(gr, att), N);  /* cont_2d */
}

/* llm_build_llama / llm_build_qwen2: one layer over 'inp', its output */
static uint32_t llama_layer(struct est_ggml_graph *gr, const struct est_llamacpp_graph *g,
                            struct inputs *in, uint32_t inp, bool last)
{
    const uint64_t ub = g->n_ubatch, h = g->hidden, hd = g->head_dim ? g->head_dim : 1;
    uint32_t cur, q, k, v, res, ffn_inp, gate, up, x;
    cur = rms_norm(gr, h, ub, inp, 0);
    /* q: projection, reshape, rope; then v; then k (build_attn's expand order) */
    q = proj(gr, g->q_width, ub, g->qkv_bias, cur);
    q = add(gr, hd, g->heads, ub, F32, EST_GGML_INPLACE, est_ggml_view(gr, q), in->pos);
    v = est_ggml_view(gr, proj(gr, g->kv_width, ub, g->qkv_bias, cur));
    k = proj(gr, g->kv_width, ub, g->qkv_bias, cur);
    k = add(gr, hd, g->kv_width / hd, ub, F32, EST_GGML_INPLACE, est_ggml_view(gr, k), in->pos);
    cur = add(gr, h, ub, 1, F32, 0, attention(gr, g, in, q, k, v), N); /* wo */
    res = inp;
    if (last) {
        cur = add(gr, h, ub, 1, F32, 0, cur, in->out_ids);
        res = add(gr, h, ub, 1, F32, 0, inp, in->out_ids);
    }
    ffn_inp = add(gr, h, ub, 1, F32, EST_GGML_INPLACE, cur, res);
    cur = rms_norm(gr, h, ub, ffn_inp, 0);
    gate = add(gr, g->ff, ub, 1, F32, 0, cur, N);
    up = add(gr, g->ff, ub, 1, F32, 0, cur, N);
    x = add(gr, g->ff, ub, 1, F32, 0, gate, up); /* swiglu */
    x = add(gr, h, ub, 1, F32, 0, x, N);         /* down */
    return add(gr, h, ub, 1, F32, EST_GGML_INPLACE, x, ffn_inp);
}

/* build_gptneox (ggerganov/llama.cpp src/llama.cpp @ 0026c81; parallel residual): LayerNorms
 * with biases, one fused qkv projection whose q, k and v are made contiguous (ggml_cont of a
 * view), attention (llm_build_kv expands its output before wo), and beside it the GELU MLP on
 * the same input; the layer adds MLP, input and attention.  The MLP is reached first from the
 * next layer (l_out = (ffn_out + inpL) + attn_out), so wo runs after it. */
static uint32_t neox_layer(struct est_ggml_graph *gr, const struct est_llamacpp_graph *g,
                           struct inputs *in, uint32_t inp, bool last)
{
    const uint64_t ub = g->n_ubatch, h = g->hidden, hd = g->head_dim ? g->head_dim : 1;
    uint32_t cur, qkv, q, k, v, att, res, x;
    cur = layer_norm(gr, h, ub, inp, 0);
    qkv = proj(gr, gm_add_sat(g->q_width, gm_mul_sat(2, g->kv_width)), ub, true, cur);
    q = add(gr, g->q_width, ub, 1, F32, 0, est_ggml_view(gr, qkv), N);
    q = add(gr, hd, g->heads, ub, F32, EST_GGML_INPLACE, est_ggml_view(gr, q), in->pos);
    k = add(gr, g->kv_width, ub, 1, F32, 0, est_ggml_view(gr, qkv), N);
    k = add(gr, hd, g->kv_width / hd, ub, F32, EST_GGML_INPLACE, est_ggml_view(gr, k), in->pos);
    v = add(gr, g->kv_width, ub, 1, F32, 0, est_ggml_view(gr, qkv), N);
    att = attention(gr, g, in, q, k, v);
    res = last ? add(gr, h, ub, 1, F32, 0, inp, in->out_ids) : inp;
    cur = layer_norm(gr, h, ub, res, 0);
    x = proj(gr, g->ff, ub, true, cur);
    x = add(gr, g->ff, ub, 1, F32, EST_GGML_INPLACE, x, N); /* gelu */
    x = proj(gr, h, ub, true, x);                           /* down */
    x = add(gr, h, ub, 1, F32, EST_GGML_INPLACE, x, res);
    att = proj(gr, h, ub, true, att); /* wo */
    if (last)
        att = add(gr, h, ub, 1, F32, 0, att, in->out_ids);
    return add(gr, h, ub, 1, F32, EST_GGML_INPLACE, x, att);
}

static void build(struct est_ggml_graph *gr, const struct est_llamacpp_graph *g)
{
    const uint64_t ub = g->n_ubatch, h = g->hidden;
    struct inputs in;
    uint32_t x;

    /* the split's input copies, in the order its nodes first read them */
    in.embd = add(gr, h, ub, 1, F32, 0, N, N);
    in.pos = add(gr, ub, 1, 1, I32, 0, N, N);
    if (g->kv_cpy) {
        in.k_idxs = in.v_idxs = N;
    } else {
        in.k_idxs = add(gr, ub, 1, 1, I64, 0, N, N);
        in.v_idxs = g->flash_attn ? add(gr, ub, 1, 1, I64, 0, N, N)
                                  : add(gr, 1, gm_mul_sat(g->kv_width, ub), 1, I64, 0, N, N);
    }
    in.mask = add(gr, g->cells, ub, 1, F32, 0, N, N);
    in.out_ids = add(gr, ub, 1, 1, I32, 0, N, N);
    in.mask_fa = N;

    x = in.embd;
    for (uint64_t il = 0; il < g->n_layers; il++)
        x = g->layout == EST_LLAMACPP_NEOX ? neox_layer(gr, g, &in, x, il + 1 == g->n_layers)
                                           : llama_layer(gr, g, &in, x, il + 1 == g->n_layers);
    x = g->layout == EST_LLAMACPP_NEOX ? layer_norm(gr, h, ub, x, EST_GGML_OUTPUT)
                                       : rms_norm(gr, h, ub, x, EST_GGML_OUTPUT);
    add(gr, g->vocab, ub, 1, F32, EST_GGML_OUTPUT, x, N);
}

enum gm_status est_llamacpp_placed_bytes(const struct est_llamacpp_graph *g, uint64_t *bytes,
                                         struct gm_error *err)
{
    struct est_ggml_graph gr = {0};
    enum gm_status st;
    build(&gr, g);
    /* CUDA's buffer alignment (ggml_backend_cuda_buffer_type_get_alignment): 128 bytes */
    st = est_ggml_reserve(&gr, 128, bytes, NULL, err);
    est_ggml_graph_release(&gr);
    return st;
}
