/* SPDX-License-Identifier: MIT */
/* test_base.c - arena, buffer, reader, units, JSON writer, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/big.h"
#include "base/buf.h"
#include "base/json_load.h"
#include "base/reader.h"
#include "gpumem/gpumem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_format_bytes(void **state)
{
    char b[64];
    (void)state;
    assert_string_equal(gm_format_bytes(b, sizeof b, 14000000000ull, GM_UNITS_IEC), "13.04 GiB");
    assert_string_equal(gm_format_bytes(b, sizeof b, 14000000000ull, GM_UNITS_SI), "14.00 GB");
    assert_string_equal(gm_format_bytes(b, sizeof b, 14000000000ull, GM_UNITS_BYTES),
                        "14000000000 B");
    assert_string_equal(gm_format_bytes(b, sizeof b, 512, GM_UNITS_IEC), "512 B");
    assert_string_equal(gm_format_bytes(b, sizeof b, 1024, GM_UNITS_IEC), "1.00 KiB");
    /* 1048575 bytes would round to "1024.00 KiB": it steps up to MiB. */
    assert_string_equal(gm_format_bytes(b, sizeof b, 1048575, GM_UNITS_IEC), "1.00 MiB");
    assert_string_equal(gm_format_bytes(b, sizeof b, UINT64_MAX, GM_UNITS_IEC), "16.00 EiB");
    assert_string_equal(gm_format_fixed(b, sizeof b, 4 * GM_GIB + 14000000000ull, GM_GIB, "GiB"),
                        "17.04 GiB");
}

static void test_parse_size(void **state)
{
    uint64_t v;
    struct gm_error e;
    (void)state;
    assert_int_equal(gm_parse_size("24GiB", &v, &e), GM_OK);
    assert_true(v == 24 * GM_GIB);
    assert_int_equal(gm_parse_size("80GB", &v, &e), GM_OK);
    assert_true(v == 80 * GM_GB);
    assert_int_equal(gm_parse_size("1.5 GiB", &v, &e), GM_OK);
    assert_true(v == 3 * GM_GIB / 2);
    assert_int_equal(gm_parse_size("4096", &v, &e), GM_OK);
    assert_true(v == 4096);
    assert_int_equal(gm_parse_size("24G", &v, &e), GM_ERR_INVALID);
    assert_non_null(strstr(e.msg, "ambiguous"));
    assert_int_equal(gm_parse_size("-1GB", &v, &e), GM_ERR_INVALID);
    assert_int_equal(gm_parse_size("1.5", &v, &e), GM_ERR_INVALID);
    assert_int_equal(gm_parse_size("99999999999EB", &v, &e), GM_ERR_INVALID);
    assert_int_equal(gm_parse_size("12 parsecs", &v, &e), GM_ERR_INVALID);
    assert_int_equal(gm_parse_size("", &v, &e), GM_ERR_INVALID);
}

static void test_parse_u64(void **state)
{
    uint64_t v;
    (void)state;
    assert_int_equal(gm_parse_u64("7000000000", &v, NULL), GM_OK);
    assert_true(v == 7000000000ull);
    assert_int_equal(gm_parse_u64("7e9", &v, NULL), GM_OK);
    assert_true(v == 7000000000ull);
    assert_int_equal(gm_parse_u64("7_000_000_000", &v, NULL), GM_OK);
    assert_true(v == 7000000000ull);
    assert_int_equal(gm_parse_u64("18446744073709551615", &v, NULL), GM_OK);
    assert_true(v == UINT64_MAX);
    assert_int_equal(gm_parse_u64("18446744073709551616", &v, NULL), GM_ERR_INVALID);
    assert_int_equal(gm_parse_u64("1e30", &v, NULL), GM_ERR_INVALID);
    assert_int_equal(gm_parse_u64("-5", &v, NULL), GM_ERR_INVALID);
    assert_int_equal(gm_parse_u64("12x", &v, NULL), GM_ERR_INVALID);
}

static void test_saturating(void **state)
{
    (void)state;
    assert_true(gm_add_sat(UINT64_MAX, 1) == UINT64_MAX);
    assert_true(gm_mul_sat(UINT64_MAX / 2, 3) == UINT64_MAX);
    assert_true(gm_mul_div_u64(UINT64_MAX / 2, 4, 8) == UINT64_MAX / 4);
}

static char *json_of(void (*fn)(struct gm_json *), unsigned flags, bool *ok)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    struct gm_json w;
    gm_json_init(&w, f, flags);
    fn(&w);
    *ok = gm_json_finish(&w);
    fclose(f);
    return text;
}

static void doc_basic(struct gm_json *w)
{
    gm_json_begin_object(w);
    gm_json_kv_u64(w, "big", UINT64_MAX);
    gm_json_kv_i64(w, "neg", INT64_MIN);
    gm_json_kv_str(w, "s", "a\"b\\c\n\x01\xff\xc3\xa9");
    gm_json_kv_double(w, "d", 0.1);
    gm_json_kv_double(w, "two", 2.0);
    gm_json_kv_double(w, "nan", 0.0 / 0.0);
    gm_json_key(w, "list");
    gm_json_begin_array(w);
    gm_json_bool(w, true);
    gm_json_null(w);
    gm_json_begin_object(w);
    gm_json_end_object(w);
    gm_json_begin_array(w);
    gm_json_end_array(w);
    gm_json_end_array(w);
    gm_json_end_object(w);
}

static void test_json_compact(void **state)
{
    bool ok;
    char *t = json_of(doc_basic, 0, &ok);
    (void)state;
    assert_true(ok);
    assert_string_equal(t, "{\"big\":18446744073709551615,\"neg\":-9223372036854775808,"
                           "\"s\":\"a\\\"b\\\\c\\n\\u0001\\ufffd\xc3\xa9\",\"d\":0.1,"
                           "\"two\":2.0,\"nan\":null,\"list\":[true,null,{},[]]}\n");
    free(t);
}

static void test_json_pretty(void **state)
{
    bool ok;
    char *t = json_of(doc_basic, GM_JSON_PRETTY, &ok);
    (void)state;
    assert_true(ok);
    assert_non_null(strstr(t, "{\n  \"big\": 18446744073709551615,\n"));
    assert_non_null(strstr(t, "\"list\": [\n    true,\n    null,\n    {},\n    []\n  ]\n}\n"));
    free(t);
}

static void doc_misuse_value_without_key(struct gm_json *w)
{
    gm_json_begin_object(w);
    gm_json_u64(w, 1);
    gm_json_end_object(w);
}

static void doc_unbalanced(struct gm_json *w)
{
    gm_json_begin_array(w);
}

static void test_json_misuse(void **state)
{
    bool ok;
    char *t = json_of(doc_misuse_value_without_key, 0, &ok);
    (void)state;
    assert_false(ok);
    free(t);
    t = json_of(doc_unbalanced, 0, &ok);
    assert_false(ok);
    free(t);
}

static void test_arena(void **state)
{
    struct gm_arena a;
    char *s;
    void *big;
    (void)state;
    gm_arena_init(&a, 1 << 20);
    s = gm_arena_strndup(&a, "hello world", 5);
    assert_string_equal(s, "hello");
    for (int i = 0; i < 1000; i++) {
        uint64_t *p = gm_arena_alloc(&a, sizeof(uint64_t), 8);
        assert_non_null(p);
        assert_true(((uintptr_t)p & 7) == 0);
        *p = (uint64_t)i;
    }
    big = gm_arena_alloc(&a, 200000, 16);
    assert_non_null(big);
    memset(big, 1, 200000);
    /* The cap: 1 MiB in all. */
    assert_null(gm_arena_alloc(&a, 2 << 20, 16));
    assert_true(a.limit_hit);
    assert_null(gm_arena_calloc(&a, SIZE_MAX / 2, 4));
    gm_arena_release(&a);
}

static void test_alloc_failure_injection(void **state)
{
    struct gm_buf b = GM_BUF_INIT;
    struct gm_error e;
    (void)state;
    gm_alloc_fail_after(0);
    assert_int_equal(gm_buf_append(&b, "x", 1, &e), GM_ERR_NOMEM);
    gm_alloc_fail_after(-1);
    assert_int_equal(gm_buf_append(&b, "x", 1, &e), GM_OK);
    gm_buf_release(&b);
}

/* A big array keeps its bytes as it grows from the heap into a mapping of its own, grows
 * there, and shrinks back; every step can be failed by the allocation hook, leaving the
 * array as it was. */
static void check_pattern(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i += 4093)
        assert_int_equal(p[i], (unsigned char)(i * 7 + 1));
}

static void test_big_array(void **state)
{
    static const size_t sizes[] = {4096,      (1u << 20) - 8, 3u << 20,   (10u << 20) + 24,
                                   40u << 20, 12u << 20,      700u << 10, 100};
    unsigned char *p = NULL;
    size_t cap = 0;
    (void)state;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t keep = cap < sizes[k] ? cap : sizes[k];
        unsigned char *n;
        gm_alloc_fail_after(0);
        n = gm_big_realloc(p, cap, sizes[k]);
        gm_alloc_fail_after(-1);
        if (!n) { /* refused: the array is as it was */
            check_pattern(p, cap);
            n = gm_big_realloc(p, cap, sizes[k]);
        }
        assert_non_null(n);
        check_pattern(n, keep);
        for (size_t i = 0; i < sizes[k]; i += 4093)
            n[i] = (unsigned char)(i * 7 + 1);
        n[sizes[k] - 1] = 0xee; /* the whole array is writable */
        p = n;
        cap = sizes[k];
    }
    gm_big_free(p, cap);
    gm_big_free(NULL, 0);
}

static void test_buf_cap(void **state)
{
    struct gm_buf b;
    struct gm_error e;
    (void)state;
    gm_buf_init(&b, 10);
    assert_int_equal(gm_buf_append(&b, "0123456789", 10, &e), GM_OK);
    assert_int_equal(gm_buf_append(&b, "x", 1, &e), GM_ERR_LIMIT);
    assert_int_equal(gm_buf_printf(&b, &e, "%d", 5), GM_ERR_LIMIT);
    assert_string_equal(b.data, "0123456789");
    gm_buf_release(&b);
    gm_buf_init(&b, 1 << 20);
    assert_int_equal(gm_buf_read_file(&b, "/nonexistent/x", &e), GM_ERR_NOENT);
    gm_buf_release(&b);
}

static void test_reader(void **state)
{
    const uint8_t data[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    struct gm_reader r;
    uint64_t v;
    const uint8_t *p;
    (void)state;
    gm_reader_init(&r, data, sizeof data, 100);
    assert_true(gm_reader_le(&r, 4, &v));
    assert_true(v == 0x04030201u);
    assert_true(gm_reader_offset(&r) == 104);
    assert_false(gm_reader_le(&r, 8, &v)); /* only 5 left: no move */
    assert_true(gm_reader_offset(&r) == 104);
    assert_true(gm_reader_bytes(&r, 5, &p));
    assert_int_equal(p[0], 5);
    assert_false(gm_reader_skip(&r, 1));
}

/* Control characters, C1 controls and broken UTF-8 come out as visible \xNN; printable
 * ASCII and valid UTF-8 pass through; truncation never splits a character or an escape. */
static void test_text_escape(void **state)
{
    char out[64];
    char big[6];
    FILE *f;
    char *mem = NULL;
    size_t len = 0;
    (void)state;
    assert_string_equal(gm_text_escape(out, sizeof out, "plain/path.json"), "plain/path.json");
    assert_string_equal(gm_text_escape(out, sizeof out, "a\033[2Jb"), "a\\x1b[2Jb");
    assert_string_equal(gm_text_escape(out, sizeof out, "t\tn\nd\177"), "t\\x09n\\x0ad\\x7f");
    assert_string_equal(gm_text_escape(out, sizeof out, "caf\xc3\xa9 \xe2\x82\xac"),
                        "caf\xc3\xa9 \xe2\x82\xac"); /* é and € are kept */
    assert_string_equal(gm_text_escape(out, sizeof out, "x\xc2\x9by"), "x\\xc2\\x9by"); /* C1 CSI */
    assert_string_equal(gm_text_escape(out, sizeof out, "\x9b"), "\\x9b"); /* raw C1 byte */
    assert_string_equal(gm_text_escape(out, sizeof out, "\xc0\xaf"), "\\xc0\\xaf"); /* overlong */
    assert_string_equal(gm_text_escape(out, sizeof out, "\xed\xa0\x80"), "\\xed\\xa0\\x80");
    assert_string_equal(gm_text_escape(out, sizeof out, "\xe2\x82"), "\\xe2\\x82"); /* cut */
    assert_string_equal(gm_text_escape(big, sizeof big, "abc\033def"), "abc"); /* no half escape */
    assert_string_equal(gm_text_escape(big, sizeof big, "abcd\xc3\xa9"), "abcd");
    assert_true(gm_text_needs_escape("a\033"));
    assert_false(gm_text_needs_escape("caf\xc3\xa9"));
    f = open_memstream(&mem, &len);
    assert_non_null(f);
    assert_true(gm_text_write_escaped(f, "ok \033]0;title\007 done"));
    fclose(f);
    assert_string_equal(mem, "ok \\x1b]0;title\\x07 done");
    free(mem);
}

/* The JSON pre-scan counts what jansson would build; a document of tiny objects whose tree
 * would exceed the budget is refused before parsing, ordinary documents load, and nesting
 * past the depth limit is refused. */
static void test_json_budget(void **state)
{
    struct gm_json_scan sc;
    struct gm_error e;
    json_t *root = NULL;
    const char *doc = "{\"a\": [1, 2.5, true, null], \"b\": {\"c\": \"x\\\"y\"}}";
    size_t n = 1000000;
    char *many = malloc(3 * n + 2), *deep = malloc(2 * 600 + 1);
    (void)state;
    assert_non_null(many);
    assert_non_null(deep);
    gm_json_scan(doc, strlen(doc), &sc);
    assert_int_equal(sc.n_objects, 2);
    assert_int_equal(sc.n_arrays, 1);
    assert_int_equal(sc.n_strings, 4);
    assert_int_equal(sc.string_bytes, 1 + 1 + 1 + 3); /* the escaped quote counts once */
    assert_int_equal(sc.n_scalars, 4);
    assert_int_equal(sc.max_depth, 2);
    assert_int_equal(gm_json_load(doc, strlen(doc), 0, &root, &e), GM_OK);
    json_decref(root);

    many[0] = '[';
    for (size_t i = 0; i < n; i++)
        memcpy(many + 1 + 3 * i, i + 1 < n ? "{}," : "{}]", 3);
    many[3 * n] = '\0'; /* 3,000,000 bytes: about 244 MiB of tree, budget 133 MiB */
    assert_int_equal(gm_json_load(many, strlen(many), 8, &root, &e), GM_ERR_LIMIT);
    assert_null(root);
    assert_non_null(strstr(e.msg, "over the budget"));
    assert_true(e.offset == 8);

    memset(deep, '[', 600);
    memset(deep + 600, ']', 600);
    deep[1200] = '\0';
    assert_int_equal(gm_json_load(deep, 1200, 0, &root, &e), GM_ERR_LIMIT);
    assert_non_null(strstr(e.msg, "levels deep"));

    assert_int_equal(gm_json_load("{\"a\":", 5, 100, &root, &e), GM_ERR_FORMAT);
    assert_true(e.offset >= 100);
    assert_non_null(strstr(e.msg, "invalid JSON"));
    free(many);
    free(deep);
}

static void test_error(void **state)
{
    struct gm_error e;
    (void)state;
    assert_int_equal(gm_fail(&e, GM_ERR_FORMAT, 12, "bad %s", "thing"), GM_ERR_FORMAT);
    assert_string_equal(e.msg, "bad thing");
    assert_true(e.offset == 12);
    gm_error_prefix(&e, "file '%s'", "x.pkl");
    assert_string_equal(e.msg, "file 'x.pkl': bad thing");
    assert_int_equal(gm_fail(NULL, GM_ERR_IO, 0, "ignored"), GM_ERR_IO);
    assert_int_equal(gm_status_exit_code(GM_ERR_FORMAT), 65);
    assert_int_equal(gm_status_exit_code(GM_ERR_NOENT), 66);
    assert_int_equal(gm_status_exit_code(GM_ERR_EXISTS), 73);
    assert_int_equal(gm_status_exit_code(GM_ERR_NODEV), 2);
    assert_int_equal(gm_status_exit_code(GM_ERR_INVALID), 64);
    assert_int_equal(gm_status_exit_code(GM_ERR_INTERNAL), 70);
}

/* The "did you mean" of a slip: a few edits, a swap, a prefix; case folded when asked. */
static void test_text_closest(void **state)
{
    static const char *const names[] = {"batch", "seq", "max-model-len", "Llama-3.1-8B"};
    (void)state;
    assert_string_equal(gm_text_closest("bach", 4, names, 4, false), "batch");
    assert_string_equal(gm_text_closest("bacth", 5, names, 4, false), "batch");
    assert_string_equal(gm_text_closest("max-model", 9, names, 4, false), "max-model-len");
    assert_null(gm_text_closest("LLAMA-3.1-8B-X", 14, names, 4, false));
    assert_string_equal(gm_text_closest("LLAMA-3.1-8B-X", 14, names, 4, true), "Llama-3.1-8B");
    assert_string_equal(gm_text_closest("lama-3.1-8b", 11, names, 4, true), "Llama-3.1-8B");
    assert_null(gm_text_closest("zzzz", 4, names, 4, true));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_bytes),
        cmocka_unit_test(test_parse_size),
        cmocka_unit_test(test_parse_u64),
        cmocka_unit_test(test_saturating),
        cmocka_unit_test(test_json_compact),
        cmocka_unit_test(test_json_pretty),
        cmocka_unit_test(test_json_misuse),
        cmocka_unit_test(test_arena),
        cmocka_unit_test(test_alloc_failure_injection),
        cmocka_unit_test(test_big_array),
        cmocka_unit_test(test_buf_cap),
        cmocka_unit_test(test_reader),
        cmocka_unit_test(test_text_escape),
        cmocka_unit_test(test_text_closest),
        cmocka_unit_test(test_json_budget),
        cmocka_unit_test(test_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
