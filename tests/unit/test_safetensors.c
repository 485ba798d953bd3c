/* SPDX-License-Identifier: MIT */
/* test_safetensors.c - the safetensors header reader (file, shards folder, index.json) on
 * generated valid and hostile files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpumem/internal/alloc_hooks.h"
#include "gpumem/modelfile.h"
#include "modelfile_build.h"
#include "testdata.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* embed [8,4] BF16 = 64 B at [0,64), layer.0.w [4,4] F32 = 64 B at [64,128),
 * layer.0.b [4] F32 = 16 B at [128,144), scale [] F8_E4M3 = 1 B at [144,145) */
static const char *const VALID =
    "{\"__metadata__\":{\"format\":\"pt\"},"
    "\"embed.weight\":{\"dtype\":\"BF16\",\"shape\":[8,4],\"data_offsets\":[0,64]},"
    "\"layer.0.w.weight\":{\"dtype\":\"F32\",\"shape\":[4,4],\"data_offsets\":[64,128]},"
    "\"layer.0.w.bias\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[128,144]},"
    "\"scale\":{\"dtype\":\"F8_E4M3\",\"shape\":[],\"data_offsets\":[144,145]}}";

static enum gm_status parse_json(const char *json, size_t data_len, struct gm_modelfile *m,
                                 struct gm_error *e)
{
    struct tb b = {0};
    enum gm_status st;
    tb_safetensors(&b, json, data_len);
    gm_modelfile_init(m);
    st = gm_safetensors_parse(b.p, b.len, b.len, NULL, m, e);
    if (st == GM_OK)
        st = gm_modelfile_finish(m, e);
    tb_free(&b);
    return st;
}

static void test_valid(void **state)
{
    struct gm_modelfile m;
    struct gm_error e;
    (void)state;
    assert_int_equal(parse_json(VALID, 145, &m, &e), GM_OK);
    assert_int_equal(m.format, GM_MODELFILE_SAFETENSORS);
    assert_int_equal(m.n_tensors, 4);
    assert_int_equal(m.n_params, 32 + 16 + 4 + 1);
    assert_int_equal(m.n_bytes, 145);
    assert_int_equal(m.n_dtypes, 3);
    for (size_t i = 0; i < m.n_dtypes; i++) {
        if (strcmp(m.dtypes[i].name, "F32") == 0) {
            assert_int_equal(m.dtypes[i].n_tensors, 2);
            assert_int_equal(m.dtypes[i].n_elements, 20);
            assert_int_equal(m.dtypes[i].n_bytes, 80);
        }
    }
    /* the module with the most parameters: embed (32) */
    assert_string_equal(m.largest_module, "embed");
    assert_int_equal(m.largest_module_params, 32);
    gm_modelfile_release(&m);
    assert_int_equal(gm_safetensors_dtype_bits("F4"), 4);
    assert_int_equal(gm_safetensors_dtype_bits("BF16"), 16);
    assert_int_equal(gm_safetensors_dtype_bits("Q4"), 0);
}

static void expect(const char *json, size_t data_len, enum gm_status want, const char *part)
{
    struct gm_modelfile m;
    struct gm_error e;
    enum gm_status st = parse_json(json, data_len, &m, &e);
    if (st != want || !strstr(e.msg, part))
        fail_msg("'%s': got %d '%s', want %d with '%s'", json, st, e.msg, want, part);
    gm_modelfile_release(&m);
}

static void test_hostile(void **state)
{
    struct gm_modelfile m;
    struct gm_error e;
    uint8_t small[16] = {0};
    struct tb b = {0};
    (void)state;

    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8, GM_ERR_FORMAT,
           "invalid JSON");
    expect("[1,2]", 0, GM_ERR_FORMAT, "start with '{'");
    expect("{\"a\":1}", 0, GM_ERR_FORMAT, "not an object");
    expect("{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, GM_ERR_FORMAT, "dtype");
    expect("{\"a\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, GM_ERR_UNSUPPORTED,
           "unknown dtype");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, GM_ERR_FORMAT,
           "not a count");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}",
           8, GM_ERR_FORMAT, "overflows");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
           GM_ERR_UNSUPPORTED, "dimensions");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, GM_ERR_FORMAT,
           "data_offsets");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, GM_ERR_FORMAT,
           "outside");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,16]}}", 8, GM_ERR_FORMAT,
           "outside");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, GM_ERR_FORMAT,
           "expected");
    expect("{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2, GM_ERR_FORMAT,
           "whole bytes");
    /* overlap, hole, and bytes left over after the last tensor */
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
           12, GM_ERR_FORMAT, "overlap");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}",
           20, GM_ERR_FORMAT, "hole");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 9, GM_ERR_FORMAT,
           "cover 8 of the 9");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
           16, GM_ERR_FORMAT, "duplicate");
    expect("{\"__metadata__\":[1]}", 0, GM_ERR_FORMAT, "__metadata__");

    /* lengths: too short, header past the file, header over the cap */
    gm_modelfile_init(&m);
    assert_int_equal(gm_safetensors_parse(small, 4, 4, NULL, &m, &e), GM_ERR_FORMAT);
    small[0] = 100;
    assert_int_equal(gm_safetensors_parse(small, 16, 16, NULL, &m, &e), GM_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "past the end"));
    memset(small, 0xff, 8);
    assert_int_equal(gm_safetensors_parse(small, 16, 16, NULL, &m, &e), GM_ERR_LIMIT);
    gm_modelfile_release(&m);

    /* every truncation of a valid file fails cleanly */
    tb_safetensors(&b, VALID, 145);
    for (size_t n = 0; n < b.len; n++) {
        gm_modelfile_init(&m);
        assert_int_not_equal(gm_safetensors_parse(b.p, n, n, NULL, &m, &e), GM_OK);
        gm_modelfile_release(&m);
    }
    tb_free(&b);
}

static char tmpdir[64];

static void write_file(const char *name, const char *json, size_t data_len)
{
    char p[256];
    struct tb b = {0};
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    if (json)
        tb_safetensors(&b, json, data_len);
    assert_int_equal(tb_write(&b, p), 0);
    tb_free(&b);
}

static void write_text(const char *name, const char *text)
{
    char p[256];
    FILE *f;
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void rm(const char *name)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    unlink(p);
}

static const char *const SHARD1 =
    "{\"model.embed.weight\":{\"dtype\":\"BF16\",\"shape\":[10,4],\"data_offsets\":[0,80]}}";
static const char *const SHARD2 =
    "{\"lm_head.weight\":{\"dtype\":\"BF16\",\"shape\":[10,4],\"data_offsets\":[0,80]},"
    "\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[80,96]}}";
static const char *const INDEX = "{\"metadata\":{\"total_size\":176},\"weight_map\":{"
                                 "\"model.embed.weight\":\"model-00001-of-00002.safetensors\","
                                 "\"lm_head.weight\":\"model-00002-of-00002.safetensors\","
                                 "\"model.norm.weight\":\"model-00002-of-00002.safetensors\"}}";

static void test_shards(void **state)
{
    struct gm_modelfile m;
    struct gm_error e;
    char p[256];
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/gm_test_st_XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    write_file("model-00001-of-00002.safetensors", SHARD1, 80);
    write_file("model-00002-of-00002.safetensors", SHARD2, 96);
    write_text("config.json", "{\"model_type\":\"llama\"}");

    /* the folder, without an index: every shard */
    gm_modelfile_init(&m);
    assert_int_equal(gm_modelfile_load(tmpdir, NULL, &m, &e), GM_OK);
    assert_int_equal(m.n_files, 2);
    assert_int_equal(m.n_params, 40 + 40 + 4);
    assert_int_equal(m.n_bytes, 176);
    assert_int_equal(m.index_total_size, 0);
    snprintf(p, sizeof p, "%s/config.json", tmpdir);
    assert_string_equal(m.config_path, p);
    gm_modelfile_release(&m);

    /* with an index: the folder and the index path give the same summary */
    write_text("model.safetensors.index.json", INDEX);
    assert_int_equal(gm_modelfile_load(tmpdir, NULL, &m, &e), GM_OK);
    assert_int_equal(m.n_files, 2);
    assert_int_equal(m.n_bytes, 176);
    assert_int_equal(m.index_total_size, 176);
    gm_modelfile_release(&m);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", tmpdir);
    assert_int_equal(gm_modelfile_load(p, NULL, &m, &e), GM_OK);
    assert_int_equal(m.n_params, 84);
    assert_true(gm_modelfile_is_weights(p));
    assert_true(gm_modelfile_is_weights(tmpdir));
    gm_modelfile_release(&m);

    /* an index that puts a tensor in a shard that does not hold it */
    write_text("model.safetensors.index.json",
               "{\"weight_map\":{\"model.embed.weight\":\"model-00001-of-00002.safetensors\","
               "\"model.layers.0.w\":\"model-00001-of-00002.safetensors\","
               "\"lm_head.weight\":\"model-00002-of-00002.safetensors\"}}");
    assert_int_equal(gm_modelfile_load(tmpdir, NULL, &m, &e), GM_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "puts tensor 'model.layers.0.w' in"));
    write_text("model.safetensors.index.json", INDEX);

    /* one shard file alone is one part of the model: refused, naming the folder */
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", tmpdir);
    assert_int_equal(gm_modelfile_load(p, NULL, &m, &e), GM_ERR_INVALID);
    assert_non_null(strstr(e.msg, "is shard 2 of 2"));

    /* without an index, a shard the names promise is missing */
    rm("model.safetensors.index.json");
    rm("model-00002-of-00002.safetensors");
    assert_int_equal(gm_modelfile_load(tmpdir, NULL, &m, &e), GM_ERR_NOENT);
    assert_non_null(strstr(e.msg, "shard 'model-00002-of-00002.safetensors' is missing"));
    write_file("model-00002-of-00002.safetensors", SHARD2, 96);
    write_text("model.safetensors.index.json", INDEX);

    /* a shard named by the index is missing */
    rm("model-00002-of-00002.safetensors");
    assert_int_equal(gm_modelfile_load(tmpdir, NULL, &m, &e), GM_ERR_NOENT);
    assert_non_null(strstr(e.msg, "model-00002-of-00002.safetensors"));

    /* an index naming a path outside the folder */
    write_text("model.safetensors.index.json", "{\"weight_map\":{\"a\":\"../../etc/passwd\"}}");
    assert_int_equal(gm_modelfile_load(tmpdir, NULL, &m, &e), GM_ERR_FORMAT);
    write_text("model.safetensors.index.json", "{\"weight_map\":3}");
    assert_int_equal(gm_modelfile_load(tmpdir, NULL, &m, &e), GM_ERR_FORMAT);
    rm("model.safetensors.index.json");

    /* the same tensor in two shards */
    write_file("model-00002-of-00002.safetensors", SHARD1, 80);
    assert_int_equal(gm_modelfile_load(tmpdir, NULL, &m, &e), GM_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "stored twice"));

    /* a truncated shard (header length past the end) */
    write_file("model-00002-of-00002.safetensors", NULL, 0);
    assert_int_equal(gm_modelfile_load(tmpdir, NULL, &m, &e), GM_ERR_FORMAT);

    rm("model-00001-of-00002.safetensors");
    rm("model-00002-of-00002.safetensors");
    rm("config.json");
    assert_int_equal(gm_modelfile_load(tmpdir, NULL, &m, &e), GM_ERR_NOENT);
    rmdir(tmpdir);
    assert_int_equal(gm_modelfile_load("/nonexistent/x.safetensors", NULL, &m, &e), GM_ERR_NOENT);
}

/* A folder with a real config.json (third-party data) and shards: the model comes from the
 * config, the exact counts from the headers. */
static void test_to_model(void **state)
{
    struct gm_modelfile m;
    struct gm_model model;
    struct gm_error e;
    char src[512], dst[256], buf[8192];
    FILE *in, *out;
    size_t n;
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/gm_test_st_XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    gm_testdata_path(src, sizeof src, "configs", "Qwen2.5-0.5B.json");
    snprintf(dst, sizeof dst, "%s/config.json", tmpdir);
    in = fopen(src, "rb");
    assert_non_null(in);
    out = fopen(dst, "wb");
    assert_non_null(out);
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
    write_file("model.safetensors", SHARD2, 96);
    gm_modelfile_init(&m);
    /* two tensors beside the config of a 24-layer model: refused, not "44 parameters"
     * (the complete case is the CLI test estimate_safetensors_dir) */
    assert_int_equal(gm_modelfile_load(tmpdir, NULL, &m, &e), GM_OK);
    assert_int_equal(gm_modelfile_to_model(&m, &model, &e), GM_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "hold 2 tensors, but a qwen2 model of this configuration has"));
    gm_modelfile_release(&m);
    /* without config.json: sized from the header alone, the layout generic and said so */
    unlink(dst);
    assert_int_equal(gm_modelfile_load(tmpdir, NULL, &m, &e), GM_OK);
    assert_int_equal(gm_modelfile_to_model(&m, &model, &e), GM_OK);
    assert_true(model.no_config && model.generic);
    assert_int_equal(model.n_params_file, m.n_params);
    assert_int_equal(model.weight_bytes_file, m.n_bytes);
    gm_modelfile_release(&m);
    rm("model.safetensors");
    rmdir(tmpdir);
}

/* A header as large as real checkpoints get (100,000 tensors, about 11 MB of JSON with
 * the shapes of an 8B model's matrices) stays inside the JSON memory budget and loads. */
static void test_large_real_header(void **state)
{
    const size_t n = 100000;
    const uint64_t bytes = (uint64_t)4096 * 4096 * 2;
    struct tb b = {0};
    struct gm_modelfile m;
    struct gm_error e;
    char *json = malloc(n * 128 + 16), *p = json;
    (void)state;
    assert_non_null(json);
    *p++ = '{';
    for (size_t i = 0; i < n; i++)
        p += snprintf(p, 128,
                      "%s\"model.layers.%zu.self_attn.q_proj.weight\":{\"dtype\":\"BF16\","
                      "\"shape\":[4096,4096],\"data_offsets\":[%llu,%llu]}",
                      i ? "," : "", i, (unsigned long long)(i * bytes),
                      (unsigned long long)((i + 1) * bytes));
    *p++ = '}';
    *p = '\0';
    tb_le(&b, strlen(json), 8);
    tb_put(&b, json, strlen(json));
    gm_modelfile_init(&m);
    /* only the header is in memory: the file it describes is 3.4 TB */
    assert_int_equal(gm_safetensors_parse(b.p, b.len, b.len + n * bytes, NULL, &m, &e), GM_OK);
    assert_int_equal(m.n_tensors, n);
    gm_modelfile_release(&m);
    tb_free(&b);
    free(json);
}

static void test_alloc_failures(void **state)
{
    (void)state;
    for (long n = 0; n < 64; n++) {
        struct gm_modelfile m;
        struct gm_error e;
        enum gm_status st;
        gm_alloc_fail_after(n);
        st = parse_json(VALID, 145, &m, &e);
        gm_alloc_fail_after(-1);
        assert_true(st == GM_OK || st == GM_ERR_NOMEM);
        if (st == GM_OK)
            assert_int_equal(m.n_params, 53);
        gm_modelfile_release(&m);
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_valid),
    cmocka_unit_test(test_hostile),
    cmocka_unit_test(test_shards),
    cmocka_unit_test(test_alloc_failures),
    cmocka_unit_test(test_large_real_header),
};

/* a real config.json */
static const struct CMUnitTest third_party_tests[] = {
    cmocka_unit_test(test_to_model),
};

GM_TEST_MAIN(tests, third_party_tests)
