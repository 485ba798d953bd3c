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
 *       the real tensor names, layers spread over the shards, and the index.json */
#include "modelfile_build.h"

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
    case 12:
        return n / 256 * 144;
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
        bits = strcmp(dtype, "F32") == 0 ? 32 : 16;
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

int main(int argc, char **argv)
{
    if (argc >= 10 && strcmp(argv[1], "hf-llama") == 0)
        return hf_llama(argv + 2);
    if (argc >= 10 && strcmp(argv[1], "gguf-llama") == 0)
        return gguf_llama(argv + 2);
    if (argc >= 4 && strcmp(argv[1], "safetensors") == 0)
        return safetensors(argc - 2, argv + 2);
    fprintf(stderr, "usage: mkmodelfile gguf-llama PATH L H HEADS KV FFN VOCAB CTX | "
                    "safetensors PATH NAME:DTYPE:SHAPE...\n");
    return 64;
}
