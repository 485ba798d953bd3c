/* SPDX-License-Identifier: MIT */
/* modelfile_build.h - build small safetensors and GGUF files in memory for the reader tests
 * (test-only, header-only). */
#ifndef GM_TEST_MODELFILE_BUILD_H
#define GM_TEST_MODELFILE_BUILD_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tb {
    uint8_t *p;
    size_t len, cap;
};

static inline void tb_put(struct tb *b, const void *src, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        if (!b->p)
            abort();
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, src, n);
    b->len += n;
}

static inline void tb_le(struct tb *b, uint64_t v, unsigned n)
{
    uint8_t x[8];
    for (unsigned i = 0; i < n; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    tb_put(b, x, n);
}

static inline void tb_zeros(struct tb *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        tb_le(b, 0, 1);
}

static inline void tb_free(struct tb *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

/* safetensors: 8-byte length, the JSON text, then 'data_len' zero bytes. */
static inline void tb_safetensors(struct tb *b, const char *json, size_t data_len)
{
    tb_le(b, strlen(json), 8);
    tb_put(b, json, strlen(json));
    tb_zeros(b, data_len);
}

/* GGUF pieces */
static inline void tb_gguf_str(struct tb *b, const char *s)
{
    tb_le(b, strlen(s), 8);
    tb_put(b, s, strlen(s));
}

static inline void tb_gguf_kv_u32(struct tb *b, const char *key, uint32_t v)
{
    tb_gguf_str(b, key);
    tb_le(b, 4, 4);
    tb_le(b, v, 4);
}

static inline void tb_gguf_kv_str(struct tb *b, const char *key, const char *v)
{
    tb_gguf_str(b, key);
    tb_le(b, 8, 4);
    tb_gguf_str(b, v);
}

static inline void tb_gguf_tensor(struct tb *b, const char *name, uint32_t n_dims,
                                  const uint64_t *ne, uint32_t type, uint64_t offset)
{
    tb_gguf_str(b, name);
    tb_le(b, n_dims, 4);
    for (uint32_t i = 0; i < n_dims; i++)
        tb_le(b, ne[i], 8);
    tb_le(b, type, 4);
    tb_le(b, offset, 8);
}

/* A small valid GGUF (version 'ver') of a llama-like model: 2 layers, 4 heads, 2 KV heads,
 * hidden 64, a 3-token vocabulary, and three tensors:
 *   token_embd.weight  Q8_0 [64, 3]   -> 6 blocks of 34 bytes = 204 bytes
 *   blk.0.attn_q.weight Q4_K [256, 2] -> 2 blocks of 144 bytes = 288 bytes
 *   output_norm.weight  F32 [64]      -> 256 bytes
 * with data at the default alignment of 32. */
static inline void tb_gguf_small(struct tb *b, uint32_t ver)
{
    uint64_t e1[2] = {64, 3}, e2[2] = {256, 2}, e3[1] = {64};
    size_t pad;
    tb_put(b, "GGUF", 4);
    tb_le(b, ver, 4);
    tb_le(b, 3, 8);  /* tensors */
    tb_le(b, 11, 8); /* kv */
    tb_gguf_kv_str(b, "general.architecture", "llama");
    tb_gguf_kv_str(b, "general.name", "Tiny Llama");
    tb_gguf_kv_u32(b, "general.file_type", 15);
    tb_gguf_kv_u32(b, "llama.block_count", 2);
    tb_gguf_kv_u32(b, "llama.embedding_length", 64);
    tb_gguf_kv_u32(b, "llama.feed_forward_length", 172);
    tb_gguf_kv_u32(b, "llama.attention.head_count", 4);
    /* head_count_kv as a u64 to exercise a second integer type */
    tb_gguf_str(b, "llama.attention.head_count_kv");
    tb_le(b, 10, 4);
    tb_le(b, 2, 8);
    tb_gguf_kv_u32(b, "llama.context_length", 4096);
    /* tokenizer.ggml.tokens: array of 3 strings */
    tb_gguf_str(b, "tokenizer.ggml.tokens");
    tb_le(b, 9, 4);
    tb_le(b, 8, 4);
    tb_le(b, 3, 8);
    tb_gguf_str(b, "<s>");
    tb_gguf_str(b, "a");
    tb_gguf_str(b, "b");
    /* an f32 array that must be skipped */
    tb_gguf_str(b, "tokenizer.ggml.scores");
    tb_le(b, 9, 4);
    tb_le(b, 6, 4);
    tb_le(b, 3, 8);
    tb_zeros(b, 12);
    tb_gguf_tensor(b, "token_embd.weight", 2, e1, 8, 0);
    tb_gguf_tensor(b, "blk.0.attn_q.weight", 2, e2, 12, 224);
    tb_gguf_tensor(b, "output_norm.weight", 1, e3, 0, 512);
    pad = (32 - b->len % 32) % 32;
    tb_zeros(b, pad);
    tb_zeros(b, 512 + 256);
}

static inline int tb_write(const struct tb *b, const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    if (b->len && fwrite(b->p, 1, b->len, f) != b->len) {
        fclose(f);
        return -1;
    }
    return fclose(f);
}

#endif
