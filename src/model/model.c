/* SPDX-License-Identifier: MIT */
/* model.c - validation, exact parameter counting and names for struct gm_model.
 *
 * The count walks the parameter tensors an HF implementation of each family creates,
 * shared tensors once.  The rules that matter (docs/estimate.md, "Parameter counts"):
 * tied models count the embedding once; Qwen2 has q/k/v biases; phi-2 and BERT have biases
 * everywhere, phi-2 also on lm_head; GPT-2 and BERT have learned positions; gemma-2 has
 * four norms per layer; MoE layers hold n_experts MLPs plus a router.  All arithmetic
 * saturates, so absurd fields cannot wrap around. */
#include "gpumem/model.h"

#include "gpumem/units.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

void gm_model_init(struct gm_model *m)
{
    memset(m, 0, sizeof(*m));
    m->arch = GM_ARCH_UNKNOWN;
    m->head = GM_HEAD_CAUSAL_LM;
    m->norm = GM_NORM_UNKNOWN;
    m->act = GM_ACT_UNKNOWN;
    m->dtype = GM_DTYPE_UNKNOWN;
}

static const char *const arch_names[GM_ARCH__COUNT] = {
    "unknown", "llama", "mistral", "mixtral",  "qwen2", "gemma", "gemma2",
    "phi",     "phi3",  "gpt2",    "gpt_neox", "bert",  "qwen3",
};

void gm_arch_known_list(char *out, size_t n)
{
    size_t len = 0;
    if (n)
        out[0] = '\0';
    for (int a = GM_ARCH_UNKNOWN + 1; a < GM_ARCH__COUNT && len + 1 < n; a++) {
        int w = snprintf(out + len, n - len, "%s%s", len ? ", " : "", arch_names[a]);
        if (w < 0)
            break;
        len += (size_t)w;
    }
}

const char *gm_arch_name(enum gm_arch a)
{
    if ((int)a < 0 || a >= GM_ARCH__COUNT)
        return "unknown";
    return arch_names[a];
}

static const struct {
    enum gm_dtype t;
    const char *name; /* canonical */
    unsigned bits;
    const char *aliases; /* space-separated, matched case-insensitively */
} dtypes[] = {
    {GM_DTYPE_F32, "f32", 32, "float32 fp32 float f32"},
    {GM_DTYPE_F16, "f16", 16, "float16 fp16 half f16"},
    {GM_DTYPE_BF16, "bf16", 16, "bfloat16 bf16"},
    {GM_DTYPE_F64, "f64", 64, "float64 fp64 double f64"},
    {GM_DTYPE_F8_E4M3, "f8_e4m3", 8, "float8_e4m3fn f8_e4m3 fp8 fp8_e4m3 e4m3"},
    {GM_DTYPE_F8_E5M2, "f8_e5m2", 8, "float8_e5m2 f8_e5m2 fp8_e5m2 e5m2"},
    {GM_DTYPE_I64, "i64", 64, "int64 i64"},
    {GM_DTYPE_I32, "i32", 32, "int32 i32"},
    {GM_DTYPE_I16, "i16", 16, "int16 i16"},
    {GM_DTYPE_I8, "i8", 8, "int8 i8"},
    {GM_DTYPE_U8, "u8", 8, "uint8 u8"},
    {GM_DTYPE_BOOL, "bool", 8, "bool"},
    {GM_DTYPE_INT4, "int4", 4, "int4 i4"},
    {GM_DTYPE_NF4, "nf4", 4, "nf4"},
};

const char *gm_dtype_name(enum gm_dtype t)
{
    for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
        if (dtypes[i].t == t)
            return dtypes[i].name;
    return "unknown";
}

unsigned gm_dtype_bits(enum gm_dtype t)
{
    for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
        if (dtypes[i].t == t)
            return dtypes[i].bits;
    return 0;
}

/* Whether 'word' is one of the space-separated words of 'list', ignoring case. */
static bool word_in(const char *list, const char *word)
{
    size_t n = strlen(word);
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, ' ');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncasecmp(p, word, n))
            return true;
        if (!e)
            break;
        p = e + 1;
    }
    return false;
}

enum gm_dtype gm_dtype_parse(const char *s)
{
    if (!s)
        return GM_DTYPE_UNKNOWN;
    if (!strncmp(s, "torch.", 6))
        s += 6;
    for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
        if (word_in(dtypes[i].aliases, s))
            return dtypes[i].t;
    return GM_DTYPE_UNKNOWN;
}

/* Caps on architecture fields: far above any real model, low enough that products of a
 * few of them stay meaningful (the arithmetic saturates anyway). */
#define CAP_DIM   ((uint64_t)1 << 24) /* hidden, intermediate, head_dim */
#define CAP_COUNT ((uint64_t)1 << 20) /* layers, heads, positions, experts */
#define CAP_VOCAB ((uint64_t)1 << 28)

enum gm_status gm_model_validate(const struct gm_model *m, struct gm_error *err)
{
    char missing[200] = "";
    char bad[200] = "";
#define NEED(field, key)                                                                           \
    do {                                                                                           \
        if (m->field == 0)                                                                         \
            snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), "%s%s",         \
                     missing[0] ? ", " : "", key);                                                 \
    } while (0)
#define CAP(field, key, cap)                                                                       \
    do {                                                                                           \
        if (m->field > (cap))                                                                      \
            snprintf(bad + strlen(bad), sizeof(bad) - strlen(bad), "%s%s=%llu",                    \
                     bad[0] ? ", " : "", key, (unsigned long long)m->field);                       \
    } while (0)
    NEED(hidden, "hidden_size");
    NEED(n_layers, "num_hidden_layers");
    NEED(n_heads, "num_attention_heads");
    NEED(intermediate, "intermediate_size");
    NEED(vocab, "vocab_size");
    if (missing[0])
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET, "model%s%s%s: missing fields: %s",
                       m->model_type[0] ? " type '" : "", m->model_type,
                       m->model_type[0] ? "'" : "", missing);
    CAP(hidden, "hidden_size", CAP_DIM);
    CAP(intermediate, "intermediate_size", CAP_DIM);
    CAP(head_dim, "head_dim", CAP_DIM);
    CAP(n_layers, "num_hidden_layers", CAP_COUNT);
    CAP(n_heads, "num_attention_heads", CAP_COUNT);
    CAP(n_kv_heads, "num_key_value_heads", CAP_COUNT);
    CAP(vocab, "vocab_size", CAP_VOCAB);
    CAP(n_positions_learned, "max_position_embeddings", CAP_COUNT * 16);
    CAP(n_experts, "num_local_experts", CAP_COUNT);
    CAP(n_token_types, "type_vocab_size", CAP_COUNT);
#undef NEED
#undef CAP
    if (bad[0])
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET, "model: absurd field values: %s", bad);
    if (m->n_kv_heads == 0 || m->head_dim == 0)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "model: head_dim or num_key_value_heads unknown");
    if (m->n_heads % m->n_kv_heads != 0 || m->n_kv_heads > m->n_heads)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "model: num_attention_heads (%llu) is not a multiple of "
                       "num_key_value_heads (%llu)",
                       (unsigned long long)m->n_heads, (unsigned long long)m->n_kv_heads);
    if (m->n_experts_active > m->n_experts)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "model: num_experts_per_tok (%llu) exceeds num_local_experts (%llu)",
                       (unsigned long long)m->n_experts_active, (unsigned long long)m->n_experts);
    if (m->n_sliding_layers > m->n_layers)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET, "model: more sliding layers than layers");
    if (m->arch == GM_ARCH_UNKNOWN) {
        char known[160];
        gm_arch_known_list(known, sizeof known);
        return gm_fail(err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET,
                       "model type '%s' is not an architecture gpumem counts (known: %s); give "
                       "--parameters N to size it with a llama-like layout",
                       m->model_type[0] ? m->model_type : "?", known);
    }
    return GM_OK;
}

static void tensor(struct gm_param_counts *c, uint64_t *role, uint64_t rows, uint64_t cols,
                   uint64_t copies, bool matmul)
{
    uint64_t n = gm_mul_sat(rows, cols);
    uint64_t all = gm_mul_sat(n, copies);
    if (copies == 0 || n == 0)
        return;
    *role = gm_add_sat(*role, all);
    c->total = gm_add_sat(c->total, all);
    c->n_tensors = gm_add_sat(c->n_tensors, copies);
    if (n > c->largest_tensor)
        c->largest_tensor = n;
    if (matmul)
        c->matmul = gm_add_sat(c->matmul, all);
    /* Adafactor keeps a row and a column accumulator for a matrix, a full one for a
     * vector. */
    if (rows > 1 && cols > 1)
        c->factored_state =
            gm_add_sat(c->factored_state, gm_mul_sat(gm_add_sat(rows, cols), copies));
    else
        c->factored_state = gm_add_sat(c->factored_state, all);
}

/* A linear layer out x in, with an optional bias vector, repeated 'copies' times. */
static void linear(struct gm_param_counts *c, uint64_t *role, uint64_t out, uint64_t in, bool bias,
                   uint64_t copies)
{
    tensor(c, role, out, in, copies, true);
    if (bias)
        tensor(c, role, 1, out, copies, false);
}

static void norm(struct gm_param_counts *c, const struct gm_model *m, uint64_t copies)
{
    tensor(c, &c->norms, 1, m->hidden, copies, false);
    if (m->norm == GM_NORM_LAYER)
        tensor(c, &c->norms, 1, m->hidden, copies, false);
}

enum gm_status gm_model_count_params(const struct gm_model *m, struct gm_param_counts *out,
                                     struct gm_error *err)
{
    struct gm_param_counts c;
    enum gm_status st = gm_model_validate(m, err);
    uint64_t L, h, q, kv, I, experts, mlp_one = 0, mlp_active;
    if (st != GM_OK)
        return st;
    memset(&c, 0, sizeof(c));
    L = m->n_layers;
    h = m->hidden;
    q = gm_mul_sat(m->n_heads, m->head_dim);
    kv = gm_mul_sat(m->n_kv_heads, m->head_dim);
    I = m->intermediate;

    /* Embeddings: the token table is a lookup, not a matmul, unless it doubles as the
     * tied lm_head; autocast then casts it for the logits product. */
    tensor(&c, &c.embedding, m->vocab, h, 1, m->tied_embeddings && m->head == GM_HEAD_CAUSAL_LM);
    tensor(&c, &c.positions, m->n_positions_learned, h, 1, false);
    tensor(&c, &c.positions, m->n_token_types, h, 1, false);
    if (m->arch == GM_ARCH_BERT)
        norm(&c, m, 1); /* embeddings LayerNorm */

    /* Attention, every layer. */
    linear(&c, &c.attention, q, h, m->qkv_bias, L);
    linear(&c, &c.attention, kv, h, m->qkv_bias, L);
    linear(&c, &c.attention, kv, h, m->qkv_bias, L);
    linear(&c, &c.attention, h, q, m->out_bias, L);

    /* MLP: dense, or n_experts copies plus a router. */
    experts = m->n_experts ? m->n_experts : 1;
    {
        uint64_t before = c.mlp;
        uint64_t copies = gm_mul_sat(L, experts);
        if (m->gated_mlp) {
            linear(&c, &c.mlp, I, h, m->mlp_bias, copies); /* gate */
            linear(&c, &c.mlp, I, h, m->mlp_bias, copies); /* up */
        } else {
            linear(&c, &c.mlp, I, h, m->mlp_bias, copies); /* fc1 */
        }
        linear(&c, &c.mlp, h, I, m->mlp_bias, copies); /* down / fc2 */
        mlp_one = (c.mlp - before) / (copies ? copies : 1);
        if (m->n_experts)
            linear(&c, &c.mlp, m->n_experts, h, false, L); /* router */
    }

    /* Norms in the layers and after the last one; qwen3 also normalises q and k per head. */
    norm(&c, m, gm_mul_sat(L, m->norms_per_layer));
    if (m->qk_norm)
        tensor(&c, &c.norms, 1, m->head_dim, gm_mul_sat(L, 2), false);
    if (m->final_norm)
        norm(&c, m, 1);

    /* Head. */
    if (m->head == GM_HEAD_CAUSAL_LM && !m->tied_embeddings)
        linear(&c, &c.lm_head, m->vocab, h, m->lm_head_bias, 1);
    if (m->head == GM_HEAD_ENCODER && m->arch == GM_ARCH_BERT)
        linear(&c, &c.other, h, h, true, 1); /* pooler */

    /* Per-token active parameters: only the top-k experts run. */
    mlp_active = c.mlp;
    if (m->n_experts && m->n_experts_active)
        mlp_active = gm_add_sat(gm_mul_sat(gm_mul_sat(mlp_one, m->n_experts_active), L),
                                gm_mul_sat(gm_mul_sat(m->n_experts, h), L));
    c.active = c.total - c.mlp + mlp_active;
    *out = c;
    return GM_OK;
}
