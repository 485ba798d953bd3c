/* SPDX-License-Identifier: MIT */
/* test_gguf.c - the GGUF header reader on generated valid and hostile files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpumem/internal/alloc_hooks.h"
#include "gpumem/modelfile.h"
#include "modelfile_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static enum gm_status parse(const struct tb *b, struct gm_modelfile *m, struct gm_error *e)
{
    enum gm_status st;
    gm_modelfile_init(m);
    st = gm_gguf_parse(b->p, b->len, b->len, NULL, m, e);
    if (st == GM_OK)
        st = gm_modelfile_finish(m, e);
    return st;
}

static void check_small(const struct gm_modelfile *m, uint32_t ver)
{
    assert_int_equal(m->format, GM_MODELFILE_GGUF);
    assert_int_equal(m->gguf_version, ver);
    assert_int_equal(m->n_tensors, 3);
    assert_int_equal(m->n_params, 192 + 512 + 64);
    assert_int_equal(m->n_bytes, 204 + 288 + 256);
    assert_int_equal(m->n_dtypes, 3);
    assert_string_equal(m->dtypes[0].name, "Q8_0");
    assert_int_equal(m->dtypes[0].n_bytes, 204);
    assert_string_equal(m->dtypes[1].name, "Q4_K");
    assert_int_equal(m->dtypes[1].n_bytes, 288);
    assert_string_equal(m->dtypes[2].name, "F32");
    assert_true(m->has_arch);
    assert_string_equal(m->arch.name, "llama");
    assert_string_equal(m->model_name, "Tiny Llama");
    assert_int_equal(m->gguf_file_type, 15);
    assert_int_equal(m->arch.n_layers, 2);
    assert_int_equal(m->arch.hidden, 64);
    assert_int_equal(m->arch.ffn, 172);
    assert_int_equal(m->arch.n_heads, 4);
    assert_int_equal(m->arch.n_kv_heads, 2);
    assert_int_equal(m->arch.context_length, 4096);
    assert_int_equal(m->arch.vocab, 3);
    assert_int_equal(m->arch.head_dim, 0); /* not in the file */
    assert_string_equal(m->largest_module, "blk.0.attn_q");
    assert_int_equal(m->largest_module_params, 512);
}

static void test_valid_v3_and_v2(void **state)
{
    struct tb b = {0};
    struct gm_modelfile m;
    struct gm_error e;
    (void)state;
    for (uint32_t ver = 2; ver <= 3; ver++) {
        tb_gguf_small(&b, ver);
        assert_int_equal(parse(&b, &m, &e), GM_OK);
        check_small(&m, ver);
        gm_modelfile_release(&m);
        tb_free(&b);
    }
}

/* A complete tiny llama in F32 (2 layers, hidden 64, 4 heads of 16, 2 KV heads, FFN 172,
 * ungated, 3 tokens, tied): token_embd, per layer attn_norm q k v output ffn_norm up down,
 * output_norm.  18 tensors, 69,120 parameters, which is what the architecture counts. */
static void tb_gguf_tiny_llama(struct tb *b)
{
    static const struct {
        const char *name;
        uint64_t ne0, ne1;
    } per_layer[] = {
        {"attn_norm", 64, 1},    {"attn_q", 64, 64},  {"attn_k", 64, 32},  {"attn_v", 64, 32},
        {"attn_output", 64, 64}, {"ffn_norm", 64, 1}, {"ffn_up", 64, 172}, {"ffn_down", 172, 64},
    };
    uint64_t off = 0, ne[2];
    char name[64];
    size_t pad;
    tb_put(b, "GGUF", 4);
    tb_le(b, 3, 4);
    tb_le(b, 18, 8); /* tensors */
    tb_le(b, 8, 8);  /* kv */
    tb_gguf_kv_str(b, "general.architecture", "llama");
    tb_gguf_kv_str(b, "general.name", "Tiny Llama");
    tb_gguf_kv_u32(b, "llama.block_count", 2);
    tb_gguf_kv_u32(b, "llama.embedding_length", 64);
    tb_gguf_kv_u32(b, "llama.feed_forward_length", 172);
    tb_gguf_kv_u32(b, "llama.attention.head_count", 4);
    tb_gguf_kv_u32(b, "llama.attention.head_count_kv", 2);
    tb_gguf_kv_u32(b, "llama.vocab_size", 3);
    ne[0] = 64;
    ne[1] = 3;
    tb_gguf_tensor(b, "token_embd.weight", 2, ne, 0, off);
    off += 64 * 3 * 4;
    for (int l = 0; l < 2; l++) {
        for (size_t k = 0; k < sizeof(per_layer) / sizeof(per_layer[0]); k++) {
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, per_layer[k].name);
            ne[0] = per_layer[k].ne0;
            ne[1] = per_layer[k].ne1;
            tb_gguf_tensor(b, name, ne[1] > 1 ? 2 : 1, ne, 0, off);
            off += ne[0] * ne[1] * 4;
            off = (off + 31) / 32 * 32;
        }
    }
    ne[0] = 64;
    tb_gguf_tensor(b, "output_norm.weight", 1, ne, 0, off);
    off += 64 * 4;
    pad = (32 - b->len % 32) % 32;
    tb_zeros(b, pad);
    tb_zeros(b, (size_t)off);
}

/* The architecture keys and tensor names fill a struct gm_model; a file that holds far
 * less than its architecture (3 tensors of a 2-layer model) is refused. */
static void test_to_model(void **state)
{
    struct tb b = {0};
    struct gm_modelfile m;
    struct gm_model model;
    struct gm_error e;
    (void)state;
    tb_gguf_tiny_llama(&b);
    assert_int_equal(parse(&b, &m, &e), GM_OK);
    assert_int_equal(gm_modelfile_to_model(&m, &model, &e), GM_OK);
    assert_int_equal(model.arch, GM_ARCH_LLAMA);
    assert_string_equal(model.name, "Tiny Llama");
    assert_int_equal(model.n_layers, 2);
    assert_int_equal(model.hidden, 64);
    assert_int_equal(model.n_heads, 4);
    assert_int_equal(model.n_kv_heads, 2);
    assert_int_equal(model.head_dim, 16); /* no key_length: hidden / heads */
    assert_int_equal(model.intermediate, 172);
    assert_int_equal(model.vocab, 3);
    assert_true(model.tied_embeddings); /* no output.weight */
    assert_false(model.gated_mlp);
    assert_true(model.final_norm);
    assert_int_equal(model.n_params_file, 69120);
    assert_int_equal(model.dtype, GM_DTYPE_F32);
    gm_modelfile_release(&m);
    tb_free(&b);

    tb_gguf_small(&b, 3);
    assert_int_equal(parse(&b, &m, &e), GM_OK);
    assert_int_equal(m.arch.context_length, 4096);
    assert_int_equal(gm_modelfile_to_model(&m, &model, &e), GM_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "holds 3 tensors"));
    gm_modelfile_release(&m);
    tb_free(&b);

    /* no general.architecture */
    tb_put(&b, "GGUF", 4);
    tb_le(&b, 3, 4);
    tb_le(&b, 0, 8);
    tb_le(&b, 0, 8);
    assert_int_equal(parse(&b, &m, &e), GM_OK);
    assert_int_equal(gm_modelfile_to_model(&m, &model, &e), GM_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "general.architecture"));
    gm_modelfile_release(&m);
    tb_free(&b);
}

static void test_type_sizes(void **state)
{
    uint64_t bytes = 0;
    const char *name = NULL;
    (void)state;
    /* ggml type table: block size and bytes per block */
    assert_true(gm_ggml_type_bytes(0, 10, &bytes, &name));
    assert_int_equal(bytes, 40);
    assert_string_equal(name, "F32");
    assert_true(gm_ggml_type_bytes(2, 64, &bytes, &name)); /* Q4_0: 32 -> 18 */
    assert_int_equal(bytes, 36);
    assert_true(gm_ggml_type_bytes(14, 512, &bytes, &name)); /* Q6_K: 256 -> 210 */
    assert_int_equal(bytes, 420);
    assert_string_equal(name, "Q6_K");
    assert_true(gm_ggml_type_bytes(30, 3, &bytes, &name)); /* BF16 */
    assert_int_equal(bytes, 6);
    assert_true(gm_ggml_type_bytes(39, 32, &bytes, &name)); /* MXFP4: 32 -> 17 */
    assert_int_equal(bytes, 17);
    assert_false(gm_ggml_type_bytes(4, 32, &bytes, &name));   /* Q4_2: removed */
    assert_false(gm_ggml_type_bytes(40, 32, &bytes, &name));  /* unknown */
    assert_false(gm_ggml_type_bytes(12, 100, &bytes, &name)); /* not whole blocks */
    /* bits per weight of common quantisations: Q4_K 4.5, Q8_0 8.5 */
    assert_true(gm_ggml_type_bytes(12, 256, &bytes, NULL));
    assert_int_equal(bytes * 8, 256 * 45 / 10);
    assert_true(gm_ggml_type_bytes(8, 32, &bytes, NULL));
    assert_int_equal(bytes * 8, 32 * 85 / 10);
}

/* Every prefix of a valid file is refused cleanly (no crash, no success). */
static void test_every_truncation(void **state)
{
    struct tb b = {0};
    struct gm_modelfile m;
    struct gm_error e;
    size_t hdr;
    (void)state;
    tb_gguf_small(&b, 3);
    hdr = b.len - 768;
    for (size_t n = 0; n < b.len; n++) {
        bool need_more = false;
        enum gm_status st;
        gm_modelfile_init(&m);
        /* as a file of n bytes: must fail */
        st = gm_gguf_parse(b.p, n, n, NULL, &m, &e);
        assert_int_not_equal(st, GM_OK);
        gm_modelfile_release(&m);
        /* as a prefix of the whole file: fails with need_more inside the header, and
         * succeeds once the header is complete */
        gm_modelfile_init(&m);
        (void)need_more;
        st = gm_gguf_parse(b.p, n, b.len, NULL, &m, &e);
        if (n + 31 < hdr) /* up to 31 bytes of padding end the header */
            assert_int_not_equal(st, GM_OK);
        gm_modelfile_release(&m);
    }
    tb_free(&b);
}

static void expect_fail(struct tb *b, enum gm_status want, const char *msg_part)
{
    struct gm_modelfile m;
    struct gm_error e;
    enum gm_status st = parse(b, &m, &e);
    if (st != want || !strstr(e.msg, msg_part))
        fail_msg("got %d '%s', want %d with '%s'", st, e.msg, want, msg_part);
    gm_modelfile_release(&m);
}

static void header(struct tb *b, uint32_t ver, uint64_t n_tensors, uint64_t n_kv)
{
    tb_put(b, "GGUF", 4);
    tb_le(b, ver, 4);
    tb_le(b, n_tensors, 8);
    tb_le(b, n_kv, 8);
}

static void test_hostile(void **state)
{
    struct tb b = {0};
    uint64_t ne[5] = {32, 1, 1, 1, 1};
    (void)state;

    tb_put(&b, "GGUX", 4);
    tb_zeros(&b, 60);
    expect_fail(&b, GM_ERR_FORMAT, "bad magic");
    tb_free(&b);

    header(&b, 1, 0, 0);
    expect_fail(&b, GM_ERR_UNSUPPORTED, "version 1");
    tb_free(&b);

    header(&b, 0x03000000, 0, 0);
    expect_fail(&b, GM_ERR_UNSUPPORTED, "big-endian");
    tb_free(&b);

    header(&b, 7, 0, 0);
    expect_fail(&b, GM_ERR_UNSUPPORTED, "version 7");
    tb_free(&b);

    header(&b, 3, 0, UINT64_MAX);
    expect_fail(&b, GM_ERR_FORMAT, "metadata count");
    tb_free(&b);

    header(&b, 3, UINT64_MAX / 2, 0);
    expect_fail(&b, GM_ERR_FORMAT, "tensor count");
    tb_free(&b);

    /* a key whose string length is absurd */
    header(&b, 3, 0, 1);
    tb_le(&b, UINT64_MAX - 3, 8);
    tb_zeros(&b, 64);
    expect_fail(&b, GM_ERR_LIMIT, "string of");
    tb_free(&b);

    /* a string length past the end of the file (under the limit) */
    header(&b, 3, 0, 1);
    tb_le(&b, 1000, 8);
    tb_zeros(&b, 64);
    expect_fail(&b, GM_ERR_FORMAT, "exceeds the file size");
    tb_free(&b);

    /* unknown value type */
    header(&b, 3, 0, 1);
    tb_gguf_str(&b, "k");
    tb_le(&b, 13, 4);
    tb_zeros(&b, 16);
    expect_fail(&b, GM_ERR_FORMAT, "unknown value type");
    tb_free(&b);

    /* an array of strings whose count cannot fit */
    header(&b, 3, 0, 1);
    tb_gguf_str(&b, "tokenizer.ggml.tokens");
    tb_le(&b, 9, 4);
    tb_le(&b, 8, 4);
    tb_le(&b, (uint64_t)1 << 40, 8);
    tb_zeros(&b, 32);
    expect_fail(&b, GM_ERR_LIMIT, "array of");
    tb_free(&b);

    header(&b, 3, 0, 1);
    tb_gguf_str(&b, "tokenizer.ggml.tokens");
    tb_le(&b, 9, 4);
    tb_le(&b, 8, 4);
    tb_le(&b, 1000, 8);
    tb_zeros(&b, 32);
    expect_fail(&b, GM_ERR_FORMAT, "cannot fit");
    tb_free(&b);

    /* nested array */
    header(&b, 3, 0, 1);
    tb_gguf_str(&b, "a");
    tb_le(&b, 9, 4);
    tb_le(&b, 9, 4);
    tb_le(&b, 1, 8);
    tb_zeros(&b, 32);
    expect_fail(&b, GM_ERR_FORMAT, "bad array element type");
    tb_free(&b);

    /* five dimensions */
    header(&b, 3, 1, 0);
    tb_gguf_tensor(&b, "t", 5, ne, 0, 0);
    tb_zeros(&b, 256);
    expect_fail(&b, GM_ERR_FORMAT, "dimensions");
    tb_free(&b);

    /* unknown and removed ggml types */
    header(&b, 3, 1, 0);
    tb_gguf_tensor(&b, "t", 1, ne, 99, 0);
    tb_zeros(&b, 256);
    expect_fail(&b, GM_ERR_UNSUPPORTED, "unknown ggml type");
    tb_free(&b);
    header(&b, 3, 1, 0);
    tb_gguf_tensor(&b, "t", 1, ne, 5, 0);
    tb_zeros(&b, 256);
    expect_fail(&b, GM_ERR_UNSUPPORTED, "unknown ggml type");
    tb_free(&b);

    /* a row that is not whole blocks: 48 elements of Q4_0 in rows of 16 */
    {
        uint64_t e2[2] = {16, 2};
        header(&b, 3, 1, 0);
        tb_gguf_tensor(&b, "t", 2, e2, 2, 0);
        tb_zeros(&b, 256);
        expect_fail(&b, GM_ERR_FORMAT, "not whole");
        tb_free(&b);
    }

    /* shape overflow */
    {
        uint64_t big[2] = {(uint64_t)1 << 40, (uint64_t)1 << 40};
        header(&b, 3, 1, 0);
        tb_gguf_tensor(&b, "t", 2, big, 0, 0);
        tb_zeros(&b, 256);
        expect_fail(&b, GM_ERR_FORMAT, "overflows");
        tb_free(&b);
    }

    /* data past the end of the file */
    header(&b, 3, 1, 0);
    tb_gguf_tensor(&b, "t", 1, ne, 0, 1 << 20);
    tb_zeros(&b, 256);
    expect_fail(&b, GM_ERR_FORMAT, "exceeds the file size");
    tb_free(&b);
    {
        uint64_t e16[1] = {16};
        header(&b, 3, 1, 0);
        tb_gguf_tensor(&b, "t", 1, e16, 0, 32);
        tb_zeros(&b, 64);
    }
    expect_fail(&b, GM_ERR_FORMAT, "past the end");
    tb_free(&b);

    /* misaligned offset */
    header(&b, 3, 1, 0);
    tb_gguf_tensor(&b, "t", 1, ne, 0, 4);
    tb_zeros(&b, 512);
    expect_fail(&b, GM_ERR_FORMAT, "alignment");
    tb_free(&b);

    /* alignment not a power of two; a power of two past the 2^30 cap says so */
    header(&b, 3, 0, 1);
    tb_gguf_kv_u32(&b, "general.alignment", 24);
    tb_zeros(&b, 64);
    expect_fail(&b, GM_ERR_FORMAT, "not a power of two");
    tb_free(&b);
    header(&b, 3, 0, 1);
    tb_gguf_kv_u32(&b, "general.alignment", (uint32_t)1 << 31);
    tb_zeros(&b, 64);
    expect_fail(&b, GM_ERR_LIMIT, "is a power of two but larger than the 2^30");
    tb_free(&b);

    /* 1000 tensors whose data all start at offset 0: they overlap */
    {
        uint64_t e6400[1] = {6400};
        char name[32];
        header(&b, 3, 1000, 0);
        for (int i = 0; i < 1000; i++) {
            snprintf(name, sizeof name, "t%d", i);
            tb_gguf_tensor(&b, name, 1, e6400, 0, 0);
        }
        tb_zeros(&b, (32 - b.len % 32) % 32 + 6400 * 4);
        expect_fail(&b, GM_ERR_FORMAT, "overlap");
        tb_free(&b);
    }

    /* one part of a llama-gguf-split set */
    header(&b, 3, 0, 2);
    tb_gguf_str(&b, "split.count");
    tb_le(&b, 2, 4); /* u16 */
    tb_le(&b, 3, 2);
    tb_gguf_str(&b, "split.no");
    tb_le(&b, 2, 4);
    tb_le(&b, 0, 2);
    tb_zeros(&b, 64);
    expect_fail(&b, GM_ERR_UNSUPPORTED, "part 1 of a GGUF model split into 3 files");
    tb_free(&b);

    /* an empty tensor name */
    header(&b, 3, 1, 0);
    tb_gguf_tensor(&b, "", 1, ne, 0, 0);
    tb_zeros(&b, 256);
    expect_fail(&b, GM_ERR_FORMAT, "name of 0 bytes");
    tb_free(&b);

    /* the same tensor twice */
    header(&b, 3, 2, 0);
    tb_gguf_tensor(&b, "t", 1, ne, 0, 0);
    tb_gguf_tensor(&b, "t", 1, ne, 0, 128);
    tb_zeros(&b, 512);
    expect_fail(&b, GM_ERR_FORMAT, "stored twice");
    tb_free(&b);
}

/* The file loader reads a growing prefix: a header of more than 4 MiB (a long token list)
 * still loads, and a header over the limit is refused. */
static void test_load_big_header(void **state)
{
    struct tb b = {0};
    struct gm_modelfile m;
    struct gm_modelfile_limits lim;
    struct gm_error e;
    char path[] = "/tmp/gm_test_gguf_XXXXXX";
    int fd = mkstemp(path);
    uint64_t ne[1] = {32};
    size_t pad;
    (void)state;
    assert_true(fd >= 0);
    close(fd);
    header(&b, 3, 1, 2);
    tb_gguf_kv_str(&b, "general.architecture", "qwen2");
    tb_gguf_str(&b, "tokenizer.ggml.tokens");
    tb_le(&b, 9, 4);
    tb_le(&b, 8, 4);
    tb_le(&b, 600000, 8);
    for (int i = 0; i < 600000; i++)
        tb_gguf_str(&b, "tok");
    tb_gguf_tensor(&b, "t.weight", 1, ne, 1, 0);
    pad = (32 - b.len % 32) % 32;
    tb_zeros(&b, pad + 64);
    assert_true(b.len > ((size_t)6 << 20));
    assert_int_equal(tb_write(&b, path), 0);
    gm_modelfile_init(&m);
    assert_int_equal(gm_modelfile_load(path, NULL, &m, &e), GM_OK);
    assert_int_equal(m.n_params, 32);
    assert_int_equal(m.n_bytes, 64);
    assert_int_equal(m.arch.vocab, 600000);
    assert_string_equal(m.arch.name, "qwen2");
    assert_int_equal(m.n_files, 1);
    gm_modelfile_release(&m);

    gm_modelfile_limits_default(&lim);
    lim.max_header_bytes = (uint64_t)5 << 20;
    assert_int_equal(gm_modelfile_load(path, &lim, &m, &e), GM_ERR_LIMIT);

    /* cut inside the header: a truncated file */
    assert_int_equal(truncate(path, 5 << 20), 0);
    assert_int_equal(gm_modelfile_load(path, NULL, &m, &e), GM_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "truncated"));
    unlink(path);
    tb_free(&b);
}

/* A folder holding one GGUF file loads it; two are ambiguous. */
static void test_load_dir(void **state)
{
    struct tb b = {0};
    struct gm_modelfile m;
    struct gm_error e;
    char dir[] = "/tmp/gm_test_ggufdir_XXXXXX", p1[64], p2[64];
    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(p1, sizeof p1, "%s/a.gguf", dir);
    snprintf(p2, sizeof p2, "%s/b.gguf", dir);
    tb_gguf_small(&b, 3);
    assert_int_equal(tb_write(&b, p1), 0);
    gm_modelfile_init(&m);
    assert_true(gm_modelfile_is_weights(dir));
    assert_int_equal(gm_modelfile_load(dir, NULL, &m, &e), GM_OK);
    check_small(&m, 3);
    gm_modelfile_release(&m);
    /* by content: a GGUF file without the .gguf suffix */
    assert_int_equal(rename(p1, p2), 0);
    snprintf(p1, sizeof p1, "%s/model.bin", dir);
    assert_int_equal(rename(p2, p1), 0);
    assert_int_equal(gm_modelfile_load(p1, NULL, &m, &e), GM_OK);
    check_small(&m, 3);
    gm_modelfile_release(&m);
    snprintf(p2, sizeof p2, "%s/a.gguf", dir);
    assert_int_equal(rename(p1, p2), 0);
    snprintf(p1, sizeof p1, "%s/b.gguf", dir);
    assert_int_equal(tb_write(&b, p1), 0);
    assert_int_equal(gm_modelfile_load(dir, NULL, &m, &e), GM_ERR_INVALID);
    assert_non_null(strstr(e.msg, "2 GGUF files"));
    unlink(p1);
    unlink(p2);
    rmdir(dir);
    tb_free(&b);
}

static void test_alloc_failures(void **state)
{
    struct tb b = {0};
    (void)state;
    tb_gguf_small(&b, 3);
    for (long n = 0; n < 64; n++) {
        struct gm_modelfile m;
        struct gm_error e;
        enum gm_status st;
        gm_modelfile_init(&m);
        gm_alloc_fail_after(n);
        st = gm_gguf_parse(b.p, b.len, b.len, NULL, &m, &e);
        if (st == GM_OK)
            st = gm_modelfile_finish(&m, &e);
        gm_alloc_fail_after(-1);
        assert_true(st == GM_OK || st == GM_ERR_NOMEM);
        if (st == GM_OK)
            check_small(&m, 3);
        gm_modelfile_release(&m);
    }
    tb_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_v3_and_v2), cmocka_unit_test(test_to_model),
        cmocka_unit_test(test_type_sizes),      cmocka_unit_test(test_every_truncation),
        cmocka_unit_test(test_hostile),         cmocka_unit_test(test_load_big_header),
        cmocka_unit_test(test_load_dir),        cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
