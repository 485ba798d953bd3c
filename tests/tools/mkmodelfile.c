/* SPDX-License-Identifier: MIT */
/* mkmodelfile.c - write model files for the CLI golden tests: real headers, sparse data
 * (the tensor bytes are a hole made by ftruncate, so a "5 GB" checkpoint costs nothing).
 *
 *   mkmodelfile gguf-llama PATH LAYERS HIDDEN HEADS KV_HEADS FFN VOCAB CTX
 *       a llama GGUF v3 quantised like Q4_K_M: attn_v and ffn_down Q6_K, output Q6_K,
 *       other matrices Q4_K, norms F32
 *   mkmodelfile safetensors PATH NAME:DTYPE:D0xD1... [...]
 *       one safetensors file with these tensors, in this order
 *   mkmodelfile hf-llama DIR LAYERS HIDDEN HEADS KV_HEADS FFN VOCAB SHARDS
 *       a transformers Llama checkpoint in bf16: DIR/model-0000i-of-0000n.safetensors with
 *       the real tensor names, layers spread over the shards, and the index.json
 *   mkmodelfile gguf-quant PATH FTYPE LAYERS HIDDEN HEADS KV_HEADS FFN VOCAB CTX [f16-emb|minimal]
 *       a llama GGUF v3 whose tensor types follow llama.cpp's llama_tensor_get_type() for
 *       FTYPE (q2_K q3_K_S q3_K_M q3_K_L q4_K_S q4_K_M q5_K_S q5_K_M q6_K q8_0 q4_0 q4_1
 *       q5_0 q5_1 f16 bf16); f16-emb keeps token_embd and output in F16 (the
 *       "unquantised embedding" variants), minimal leaves vocab_size,
 *       feed_forward_length and head_count_kv out of the metadata (the shapes say them)
 *   mkmodelfile hf-gptq DIR LAYERS HIDDEN HEADS KV_HEADS FFN VOCAB BITS GROUP
 *       a GPTQ checkpoint of a Llama (qweight / qzeros I32, scales F16, g_idx I32 for every
 *       linear of the layers; embeddings, norms, lm_head F16) with its config.json */
#include "modelfile_build.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t num(const char *s)
{
    return strtoull(s, NULL, 10);
}

struct t {
    char name[64];
    uint32_t n_dims;
    uint64_t ne[2];
    uint32_t type;
    uint64_t bytes;
};

static uint64_t type_bytes(uint32_t type, uint64_t n)
{
    switch (type) {
    case 0:
        return 4 * n;
    case 2: /* Q4_0 */
        return n / 32 * 18;
    case 3: /* Q4_1 */
        return n / 32 * 20;
    case 6: /* Q5_0 */
        return n / 32 * 22;
    case 7: /* Q5_1 */
        return n / 32 * 24;
    case 8: /* Q8_0 */
        return n / 32 * 34;
    case 10: /* Q2_K */
        return n / 256 * 84;
    case 11: /* Q3_K */
        return n / 256 * 110;
    case 12:
        return n / 256 * 144;
    case 13: /* Q5_K */
        return n / 256 * 176;
    case 14:
        return n / 256 * 210;
    default:
        return 2 * n;
    }
}

static int finish(struct tb *b, const char *path, uint64_t total)
{
    if (tb_write(b, path) != 0)
        return 1;
    if (truncate(path, (off_t)total) != 0)
        return 1;
    return 0;
}

static void add(struct t *ts, size_t *n, const char *name, uint32_t nd, uint64_t a, uint64_t b,
                uint32_t type)
{
    struct t *t = &ts[(*n)++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = nd;
    t->ne[0] = a;
    t->ne[1] = b;
    t->type = type;
    t->bytes = type_bytes(type, nd == 2 ? a * b : a);
}

static int gguf_llama(char **av)
{
    uint64_t L = num(av[1]), h = num(av[2]), nh = num(av[3]), kv = num(av[4]), ffn = num(av[5]),
             V = num(av[6]), ctx = num(av[7]), hd = h / nh, off = 0;
    size_t n = 0;
    struct t *ts = calloc(L * 9 + 3, sizeof(*ts));
    struct tb b = {0};
    char nm[64];
    if (!ts)
        return 1;
    add(ts, &n, "token_embd.weight", 2, h, V, 12);
    for (uint64_t i = 0; i < L; i++) {
#define T(suffix, nd, a, bb, ty)                                                                   \
    snprintf(nm, sizeof nm, "blk.%llu." suffix, (unsigned long long)i);                            \
    add(ts, &n, nm, nd, a, bb, ty)
        T("attn_norm.weight", 1, h, 0, 0);
        T("attn_q.weight", 2, h, nh * hd, 12);
        T("attn_k.weight", 2, h, kv * hd, 12);
        T("attn_v.weight", 2, h, kv * hd, 14);
        T("attn_output.weight", 2, nh * hd, h, 12);
        T("ffn_norm.weight", 1, h, 0, 0);
        T("ffn_gate.weight", 2, h, ffn, 12);
        T("ffn_up.weight", 2, h, ffn, 12);
        T("ffn_down.weight", 2, ffn, h, 14);
#undef T
    }
    add(ts, &n, "output_norm.weight", 1, h, 0, 0);
    add(ts, &n, "output.weight", 2, h, V, 14);
    tb_put(&b, "GGUF", 4);
    tb_le(&b, 3, 4);
    tb_le(&b, n, 8);
    tb_le(&b, 10, 8);
    tb_gguf_kv_str(&b, "general.architecture", "llama");
    tb_gguf_kv_str(&b, "general.name", "test-llama");
    tb_gguf_kv_u32(&b, "general.file_type", 15);
    tb_gguf_kv_u32(&b, "llama.block_count", (uint32_t)L);
    tb_gguf_kv_u32(&b, "llama.context_length", (uint32_t)ctx);
    tb_gguf_kv_u32(&b, "llama.embedding_length", (uint32_t)h);
    tb_gguf_kv_u32(&b, "llama.feed_forward_length", (uint32_t)ffn);
    tb_gguf_kv_u32(&b, "llama.attention.head_count", (uint32_t)nh);
    tb_gguf_kv_u32(&b, "llama.attention.head_count_kv", (uint32_t)kv);
    tb_gguf_kv_u32(&b, "llama.vocab_size", (uint32_t)V);
    for (size_t i = 0; i < n; i++) {
        tb_gguf_tensor(&b, ts[i].name, ts[i].n_dims, ts[i].ne, ts[i].type, off);
        off += (ts[i].bytes + 31) / 32 * 32;
    }
    tb_zeros(&b, (32 - b.len % 32) % 32);
    off += b.len;
    free(ts);
    if (finish(&b, av[0], off))
        return 1;
    tb_free(&b);
    return 0;
}

static int safetensors(int ac, char **av)
{
    struct tb js = {0}, b = {0};
    uint64_t off = 0;
    tb_put(&js, "{", 1);
    for (int i = 1; i < ac; i++) {
        char name[128], dtype[16], shape[64], item[512];
        uint64_t numel = 1, d;
        unsigned bits;
        char *p;
        if (sscanf(av[i], "%127[^:]:%15[^:]:%63s", name, dtype, shape) != 3)
            return 1;
        bits = !strcmp(dtype, "F32") || !strcmp(dtype, "I32")                              ? 32
               : !strcmp(dtype, "U8") || !strcmp(dtype, "I8") || !strcmp(dtype, "F8_E4M3") ? 8
                                                                                           : 16;
        snprintf(item, sizeof item, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i > 1 ? "," : "",
                 name, dtype);
        tb_put(&js, item, strlen(item));
        p = shape;
        for (int k = 0; *p; k++) {
            d = strtoull(p, &p, 10);
            numel *= d;
            snprintf(item, sizeof item, "%s%llu", k ? "," : "", (unsigned long long)d);
            tb_put(&js, item, strlen(item));
            if (*p == 'x')
                p++;
        }
        snprintf(item, sizeof item, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                 (unsigned long long)(off + numel * bits / 8));
        tb_put(&js, item, strlen(item));
        off += numel * bits / 8;
    }
    tb_put(&js, "}", 1);
    tb_le(&b, js.len, 8);
    tb_put(&b, js.p, js.len);
    off += b.len;
    tb_free(&js);
    if (finish(&b, av[0], off))
        return 1;
    tb_free(&b);
    return 0;
}

struct hf_t {
    char name[96];
    uint64_t d0, d1; /* d1 = 0: a vector */
};

static int write_shard(const char *path, const struct hf_t *ts, size_t n)
{
    struct tb js = {0}, b = {0};
    uint64_t off = 0;
    char item[256];
    tb_put(&js, "{", 1);
    for (size_t i = 0; i < n; i++) {
        uint64_t bytes = 2 * ts[i].d0 * (ts[i].d1 ? ts[i].d1 : 1);
        if (ts[i].d1)
            snprintf(
                item, sizeof item,
                "%s\"%s\":{\"dtype\":\"BF16\",\"shape\":[%llu,%llu],\"data_offsets\":[%llu,%llu]}",
                i ? "," : "", ts[i].name, (unsigned long long)ts[i].d0,
                (unsigned long long)ts[i].d1, (unsigned long long)off,
                (unsigned long long)(off + bytes));
        else
            snprintf(item, sizeof item,
                     "%s\"%s\":{\"dtype\":\"BF16\",\"shape\":[%llu],\"data_offsets\":[%llu,%llu]}",
                     i ? "," : "", ts[i].name, (unsigned long long)ts[i].d0,
                     (unsigned long long)off, (unsigned long long)(off + bytes));
        tb_put(&js, item, strlen(item));
        off += bytes;
    }
    tb_put(&js, "}", 1);
    tb_le(&b, js.len, 8);
    tb_put(&b, js.p, js.len);
    off += b.len;
    tb_free(&js);
    if (finish(&b, path, off))
        return 1;
    tb_free(&b);
    return 0;
}

static uint64_t vec_bytes(uint64_t d0, uint64_t d1)
{
    return 2 * d0 * (d1 ? d1 : 1);
}

static int hf_llama(char **av)
{
    const char *dir = av[0];
    uint64_t L = num(av[1]), h = num(av[2]), nh = num(av[3]), kv = num(av[4]), ffn = num(av[5]),
             V = num(av[6]), S = num(av[7]), hd = h / nh, total = 0;
    struct hf_t *ts = calloc(L * 9 + 3, sizeof(*ts));
    size_t n = 0, start = 0;
    char path[512];
    FILE *idx;
    if (!ts || S == 0 || S > L)
        return 1;
#define ADD(d0_, d1_, ...)                                                                         \
    do {                                                                                           \
        snprintf(ts[n].name, sizeof ts[n].name, __VA_ARGS__);                                      \
        ts[n].d0 = d0_;                                                                            \
        ts[n].d1 = d1_;                                                                            \
        total += vec_bytes(d0_, d1_);                                                              \
        n++;                                                                                       \
    } while (0)
    ADD(V, h, "model.embed_tokens.weight");
    for (uint64_t i = 0; i < L; i++) {
        unsigned long long li = (unsigned long long)i;
        ADD(h, 0, "model.layers.%llu.input_layernorm.weight", li);
        ADD(nh * hd, h, "model.layers.%llu.self_attn.q_proj.weight", li);
        ADD(kv * hd, h, "model.layers.%llu.self_attn.k_proj.weight", li);
        ADD(kv * hd, h, "model.layers.%llu.self_attn.v_proj.weight", li);
        ADD(h, nh * hd, "model.layers.%llu.self_attn.o_proj.weight", li);
        ADD(h, 0, "model.layers.%llu.post_attention_layernorm.weight", li);
        ADD(ffn, h, "model.layers.%llu.mlp.gate_proj.weight", li);
        ADD(ffn, h, "model.layers.%llu.mlp.up_proj.weight", li);
        ADD(h, ffn, "model.layers.%llu.mlp.down_proj.weight", li);
    }
    ADD(h, 0, "model.norm.weight");
    ADD(V, h, "lm_head.weight");
#undef ADD
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    idx = fopen(path, "w");
    if (!idx)
        return 1;
    fprintf(idx, "{\"metadata\": {\"total_size\": %llu}, \"weight_map\": {",
            (unsigned long long)total);
    for (uint64_t s = 0; s < S; s++) {
        /* shard s: an equal share of the tensors, the last takes the rest */
        size_t end = s + 1 == S ? n : (size_t)((s + 1) * n / S);
        snprintf(path, sizeof path, "%s/model-%05llu-of-%05llu.safetensors", dir,
                 (unsigned long long)(s + 1), (unsigned long long)S);
        if (write_shard(path, ts + start, end - start))
            return 1;
        for (size_t i = start; i < end; i++)
            fprintf(idx, "%s\"%s\": \"model-%05llu-of-%05llu.safetensors\"", i ? ", " : "",
                    ts[i].name, (unsigned long long)(s + 1), (unsigned long long)S);
        start = end;
    }
    fprintf(idx, "}}\n");
    free(ts);
    return fclose(idx) != 0;
}

/* ---- gguf-quant: llama.cpp's tensor types for an ftype ---- */

enum {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    BF16 = 30
};

static const struct {
    const char *name;
    uint32_t base;
    uint32_t llama_ftype; /* general.file_type */
} ftypes[] = {
    {"q2_K", Q2_K, 10},   {"q3_K_S", Q3_K, 11}, {"q3_K_M", Q3_K, 12}, {"q3_K_L", Q3_K, 13},
    {"q4_K_S", Q4_K, 14}, {"q4_K_M", Q4_K, 15}, {"q5_K_S", Q5_K, 16}, {"q5_K_M", Q5_K, 17},
    {"q6_K", Q6_K, 18},   {"q8_0", Q8_0, 7},    {"q4_0", Q4_0, 2},    {"q4_1", Q4_1, 3},
    {"q5_0", Q5_0, 8},    {"q5_1", Q5_1, 9},    {"f16", F16, 1},      {"bf16", BF16, 32},
};

/* llama.cpp's use_more_bits(i_layer, n_layers) */
static bool more_bits(uint64_t i, uint64_t n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* The type of one tensor (llama_tensor_get_type for a dense llama with n_gqa >= 4; the
 * branches of IQ types and of MoE and 70B models are not needed here). */
static uint32_t quant_type(const char *ft, uint32_t base, const char *role, uint64_t i, uint64_t L)
{
    if (base == F16 || base == BF16)
        return base;
    if (!strcmp(role, "output"))
        return base == Q8_0 ? Q8_0 : Q6_K;
    if (!strcmp(role, "attn_v")) {
        if (!strcmp(ft, "q2_K"))
            return Q4_K;
        if (!strcmp(ft, "q3_K_M"))
            return i < 2 ? Q5_K : Q4_K;
        if (!strcmp(ft, "q3_K_L"))
            return Q5_K;
        if ((!strcmp(ft, "q4_K_M") || !strcmp(ft, "q5_K_M")) && more_bits(i, L))
            return Q6_K;
        if (!strcmp(ft, "q4_K_S") && i < 4)
            return Q5_K;
        return base;
    }
    if (!strcmp(role, "ffn_down")) {
        if (!strcmp(ft, "q2_K"))
            return Q3_K;
        if (!strcmp(ft, "q3_K_M"))
            return i < L / 16 ? Q5_K : Q4_K;
        if (!strcmp(ft, "q3_K_L"))
            return Q5_K;
        if ((!strcmp(ft, "q4_K_M") || !strcmp(ft, "q5_K_M")) && more_bits(i, L))
            return Q6_K;
        if (!strcmp(ft, "q4_K_S") && i < L / 8)
            return Q5_K;
        return base;
    }
    if (!strcmp(role, "attn_output")) {
        if (!strcmp(ft, "q2_K"))
            return Q3_K;
        if (!strcmp(ft, "q3_K_M"))
            return Q4_K;
        if (!strcmp(ft, "q3_K_L"))
            return Q5_K;
        return base;
    }
    return base;
}

static int gguf_quant(int ac, char **av)
{
    const char *ft = av[1];
    uint64_t L = num(av[2]), h = num(av[3]), nh = num(av[4]), kv = num(av[5]), ffn = num(av[6]),
             V = num(av[7]), ctx = num(av[8]), hd = h / nh, off = 0, nkv = 0;
    bool f16emb = ac > 9 && !strcmp(av[9], "f16-emb"),
         minimal = ac > 9 && !strcmp(av[9], "minimal");
    uint32_t base = UINT32_MAX, ftype = 0;
    size_t n = 0;
    struct t *ts = calloc(L * 9 + 3, sizeof(*ts));
    struct tb b = {0};
    char nm[64];
    for (size_t i = 0; i < sizeof ftypes / sizeof ftypes[0]; i++)
        if (!strcmp(ftypes[i].name, ft)) {
            base = ftypes[i].base;
            ftype = ftypes[i].llama_ftype;
        }
    if (!ts || base == UINT32_MAX)
        return 1;
    add(ts, &n, "token_embd.weight", 2, h, V, f16emb ? F16 : base);
    for (uint64_t i = 0; i < L; i++) {
#define T(suffix, role, nd, a, bb)                                                                 \
    snprintf(nm, sizeof nm, "blk.%llu." suffix, (unsigned long long)i);                            \
    add(ts, &n, nm, nd, a, bb, nd == 1 ? F32 : quant_type(ft, base, role, i, L))
        T("attn_norm.weight", "norm", 1, h, 0);
        T("attn_q.weight", "attn_q", 2, h, nh * hd);
        T("attn_k.weight", "attn_k", 2, h, kv * hd);
        T("attn_v.weight", "attn_v", 2, h, kv * hd);
        T("attn_output.weight", "attn_output", 2, nh * hd, h);
        T("ffn_norm.weight", "norm", 1, h, 0);
        T("ffn_gate.weight", "ffn_gate", 2, h, ffn);
        T("ffn_up.weight", "ffn_up", 2, h, ffn);
        T("ffn_down.weight", "ffn_down", 2, ffn, h);
#undef T
    }
    add(ts, &n, "output_norm.weight", 1, h, 0, F32);
    add(ts, &n, "output.weight", 2, h, V, f16emb ? F16 : quant_type(ft, base, "output", 0, L));
    nkv = minimal ? 6 : 9;
    tb_put(&b, "GGUF", 4);
    tb_le(&b, 3, 4);
    tb_le(&b, n, 8);
    tb_le(&b, nkv, 8);
    tb_gguf_kv_str(&b, "general.architecture", "llama");
    tb_gguf_kv_str(&b, "general.name", "test-llama");
    tb_gguf_kv_u32(&b, "general.file_type", ftype);
    tb_gguf_kv_u32(&b, "llama.block_count", (uint32_t)L);
    tb_gguf_kv_u32(&b, "llama.embedding_length", (uint32_t)h);
    tb_gguf_kv_u32(&b, "llama.attention.head_count", (uint32_t)nh);
    if (!minimal) {
        tb_gguf_kv_u32(&b, "llama.context_length", (uint32_t)ctx);
        tb_gguf_kv_u32(&b, "llama.feed_forward_length", (uint32_t)ffn);
        tb_gguf_kv_u32(&b, "llama.attention.head_count_kv", (uint32_t)kv);
    }
    for (size_t i = 0; i < n; i++) {
        tb_gguf_tensor(&b, ts[i].name, ts[i].n_dims, ts[i].ne, ts[i].type, off);
        off += (ts[i].bytes + 31) / 32 * 32;
    }
    tb_zeros(&b, (32 - b.len % 32) % 32);
    off += b.len;
    free(ts);
    if (finish(&b, av[0], off))
        return 1;
    tb_free(&b);
    return 0;
}

/* ---- hf-gptq: a GPTQ checkpoint in one safetensors file ---- */

struct st_t {
    char name[96];
    const char *dtype;
    unsigned bits;
    uint64_t d0, d1; /* d1 = 0: a vector */
};

static int write_st(const char *path, const struct st_t *ts, size_t n)
{
    struct tb js = {0}, b = {0};
    uint64_t off = 0;
    char item[320];
    tb_put(&js, "{", 1);
    for (size_t i = 0; i < n; i++) {
        uint64_t bytes = ts[i].d0 * (ts[i].d1 ? ts[i].d1 : 1) * ts[i].bits / 8;
        char shape[48];
        if (ts[i].d1)
            snprintf(shape, sizeof shape, "%llu,%llu", (unsigned long long)ts[i].d0,
                     (unsigned long long)ts[i].d1);
        else
            snprintf(shape, sizeof shape, "%llu", (unsigned long long)ts[i].d0);
        snprintf(item, sizeof item,
                 "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%llu,%llu]}",
                 i ? "," : "", ts[i].name, ts[i].dtype, shape, (unsigned long long)off,
                 (unsigned long long)(off + bytes));
        tb_put(&js, item, strlen(item));
        off += bytes;
    }
    tb_put(&js, "}", 1);
    tb_le(&b, js.len, 8);
    tb_put(&b, js.p, js.len);
    off += b.len;
    tb_free(&js);
    if (finish(&b, path, off))
        return 1;
    tb_free(&b);
    return 0;
}

static int hf_gptq(char **av)
{
    const char *dir = av[0];
    uint64_t L = num(av[1]), h = num(av[2]), nh = num(av[3]), kv = num(av[4]), ffn = num(av[5]),
             V = num(av[6]), bits = num(av[7]), group = num(av[8]), hd = h / nh;
    struct st_t *ts = calloc(L * 30 + 4, sizeof(*ts));
    size_t n = 0;
    char path[512];
    FILE *cfg;
    static const char *const proj[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                       "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                       "mlp.down_proj"};
    if (!ts || !bits || 32 % bits)
        return 1;
#define ADD(dt, b_, d0_, d1_, ...)                                                                 \
    do {                                                                                           \
        snprintf(ts[n].name, sizeof ts[n].name, __VA_ARGS__);                                      \
        ts[n].dtype = dt;                                                                          \
        ts[n].bits = b_;                                                                           \
        ts[n].d0 = d0_;                                                                            \
        ts[n].d1 = d1_;                                                                            \
        n++;                                                                                       \
    } while (0)
    ADD("F16", 16, V, h, "model.embed_tokens.weight");
    for (uint64_t i = 0; i < L; i++) {
        unsigned long long li = (unsigned long long)i;
        uint64_t outs[] = {nh * hd, kv * hd, kv * hd, h, ffn, ffn, h};
        uint64_t ins[] = {h, h, h, nh * hd, h, h, ffn};
        ADD("F16", 16, h, 0, "model.layers.%llu.input_layernorm.weight", li);
        ADD("F16", 16, h, 0, "model.layers.%llu.post_attention_layernorm.weight", li);
        for (int k = 0; k < 7; k++) {
            uint64_t g = group ? (ins[k] + group - 1) / group : 1;
            ADD("I32", 32, ins[k] * bits / 32, outs[k], "model.layers.%llu.%s.qweight", li,
                proj[k]);
            ADD("I32", 32, g, outs[k] * bits / 32, "model.layers.%llu.%s.qzeros", li, proj[k]);
            ADD("F16", 16, g, outs[k], "model.layers.%llu.%s.scales", li, proj[k]);
            ADD("I32", 32, ins[k], 0, "model.layers.%llu.%s.g_idx", li, proj[k]);
        }
    }
    ADD("F16", 16, h, 0, "model.norm.weight");
    ADD("F16", 16, V, h, "lm_head.weight");
#undef ADD
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (write_st(path, ts, n))
        return 1;
    free(ts);
    snprintf(path, sizeof path, "%s/config.json", dir);
    cfg = fopen(path, "w");
    if (!cfg)
        return 1;
    fprintf(cfg,
            "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", "
            "\"hidden_size\": %llu, \"num_hidden_layers\": %llu, \"num_attention_heads\": %llu, "
            "\"num_key_value_heads\": %llu, \"intermediate_size\": %llu, \"vocab_size\": %llu, "
            "\"max_position_embeddings\": 8192, \"torch_dtype\": \"float16\", "
            "\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": %llu, "
            "\"group_size\": %lld, \"desc_act\": true, \"sym\": true}}\n",
            (unsigned long long)h, (unsigned long long)L, (unsigned long long)nh,
            (unsigned long long)kv, (unsigned long long)ffn, (unsigned long long)V,
            (unsigned long long)bits, group ? (long long)group : -1LL);
    return fclose(cfg) != 0;
}

int main(int argc, char **argv)
{
    if (argc >= 10 && strcmp(argv[1], "hf-llama") == 0)
        return hf_llama(argv + 2);
    if (argc >= 10 && strcmp(argv[1], "gguf-llama") == 0)
        return gguf_llama(argv + 2);
    if (argc >= 4 && strcmp(argv[1], "safetensors") == 0)
        return safetensors(argc - 2, argv + 2);
    if (argc >= 11 && strcmp(argv[1], "gguf-quant") == 0)
        return gguf_quant(argc - 2, argv + 2);
    if (argc >= 11 && strcmp(argv[1], "hf-gptq") == 0)
        return hf_gptq(argv + 2);
    fprintf(stderr, "usage: mkmodelfile gguf-llama PATH L H HEADS KV FFN VOCAB CTX | "
                    "safetensors PATH NAME:DTYPE:SHAPE...\n");
    return 64;
}
