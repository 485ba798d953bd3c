/* SPDX-License-Identifier: MIT */
/* test_base.c - arena, buffer, reader, units, JSON writer, errors, the hash map and the
 * growable array. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/big.h"
#include "base/bits.h"
#include "base/buf.h"
#include "base/json_load.h"
#include "base/json_room.h"
#include "base/map.h"
#include "base/reader.h"
#include "base/slab.h"
#include "base/vec.h"
#include "gpumem/gpumem.h"
#include "gpumem/internal/alloc_hooks.h"

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

static void test_parse_gpu_memory(void **state)
{
    uint64_t v;
    struct gm_error e;
    (void)state;
    /* a bare number is GiB; a unit means what it says (GB = 1e9 bytes) */
    assert_int_equal(gm_parse_gpu_memory("80", &v, &e), GM_OK);
    assert_true(v == 80 * GM_GIB);
    assert_int_equal(gm_parse_gpu_memory("79.5", &v, &e), GM_OK);
    assert_true(v == 159 * GM_GIB / 2);
    assert_int_equal(gm_parse_gpu_memory("80GB", &v, &e), GM_OK);
    assert_true(v == 80 * GM_GB);
    assert_int_equal(gm_parse_gpu_memory("24GiB", &v, &e), GM_OK);
    assert_true(v == 24 * GM_GIB);
    /* errors name the setting, never an option */
    assert_int_equal(gm_parse_gpu_memory("0", &v, &e), GM_ERR_INVALID);
    assert_string_equal(e.setting, "gpu_memory");
    assert_null(strstr(e.msg, "--"));
    assert_int_equal(gm_parse_gpu_memory("0GiB", &v, &e), GM_ERR_INVALID);
    assert_string_equal(e.setting, "gpu_memory");
    assert_int_equal(gm_parse_gpu_memory("lots", &v, &e), GM_ERR_INVALID);
    assert_string_equal(e.setting, "gpu_memory");
    assert_int_equal(gm_parse_gpu_memory("", &v, &e), GM_ERR_INVALID);
    assert_int_equal(gm_parse_gpu_memory("2000000", &v, &e), GM_ERR_INVALID);
    /* a failure about no setting has none */
    gm_fail(&e, GM_ERR_IO, GM_NO_OFFSET, "x");
    assert_null(e.setting);
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

/* Values of every kind, strings shorter and longer than the writer's buffer, escapes that
 * fall on its edge. */
static void doc_large(struct gm_json *w)
{
    static char text[3 * GM_JSON_BUF_SIZE];
    for (size_t i = 0; i < sizeof(text) - 1; i++)
        text[i] = "ab\"\\\n\x01\xc3\xa9\xffz"[i % 10];
    gm_json_begin_array(w);
    for (uint64_t i = 0; i < 20000; i++) {
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "u", i * 0x9E3779B97F4A7C15ull);
        gm_json_kv_i64(w, "i", -(int64_t)i * 1000003);
        gm_json_kv_double(w, "d", (double)i / 7.0);
        gm_json_kv_bool(w, "b", i & 1);
        gm_json_kv_null(w, "n");
        gm_json_key(w, "s");
        gm_json_strn(w, text + i % 97, i % 61);
        gm_json_end_object(w);
        if (i % 5000 == 0)
            gm_json_strn(w, text, sizeof(text) - 1 - i / 5000);
        if (i % 4000 == 1) {
            /* numbers in arrays (written in place in the buffer), the widest across its edge */
            gm_json_begin_array(w);
            for (uint64_t j = 0; j < 3000; j++) {
                gm_json_u64(w, j % 3 ? UINT64_MAX - j : j);
                gm_json_i64(w, j % 2 ? INT64_MIN + (int64_t)j : -(int64_t)j);
            }
            gm_json_end_array(w);
        }
    }
    gm_json_raw(w, "[1,2]");
    gm_json_end_array(w);
}

static void test_json_buffered_writes_what_unbuffered_writes(void **state)
{
    void (*docs[])(struct gm_json *) = {doc_basic, doc_large};
    (void)state;
    for (size_t d = 0; d < 2; d++) {
        for (unsigned pretty = 0; pretty <= GM_JSON_PRETTY; pretty += GM_JSON_PRETTY) {
            bool ok1, ok2;
            char *t1 = json_of(docs[d], pretty, &ok1);
            char *t2 = json_of(docs[d], pretty | GM_JSON_BUFFERED, &ok2);
            assert_true(ok1 && ok2);
            assert_true(strlen(t1) > (d ? 3u * GM_JSON_BUF_SIZE : 0u));
            assert_string_equal(t1, t2);
            free(t1);
            free(t2);
        }
    }
}

/* Arrays of numbers: fields of structs (a stride), of none, one and many values, across the
 * buffer's edge, after values already in the array, runs of equal ones; written one by one
 * (doc_numbers_each) or with gm_json_u64s() / gm_json_i64s() (doc_numbers_bulk). */
struct num_row {
    uint64_t u;
    int64_t i;
    uint32_t pad;
};

static struct num_row *num_rows(void)
{
    static struct num_row rows[5000];
    for (size_t j = 0; j < 5000; j++) {
        rows[j].u = j % 3 ? UINT64_MAX - j * 0x9E3779B97F4A7C15ull : j;
        rows[j].i = j % 2 ? INT64_MIN + (int64_t)j : -(int64_t)(j * 1000003);
        if (j % 5 >= 3) /* runs of equal values, which the bulk writer copies */
            rows[j] = rows[j - 1];
        rows[j].pad = (uint32_t)j;
    }
    return rows;
}

static void doc_numbers(struct gm_json *w, bool bulk)
{
    static const size_t counts[] = {0, 1, 2, 700, 5000};
    const struct num_row *r = num_rows();
    gm_json_begin_array(w);
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        size_t n = counts[c];
        gm_json_begin_array(w);
        if (c % 2)
            gm_json_u64(w, 42); /* not the first value of its array */
        if (bulk) {
            gm_json_u64s(w, &r[0].u, n, sizeof(r[0]));
            gm_json_i64s(w, &r[0].i, n, sizeof(r[0]));
        } else {
            for (size_t j = 0; j < n; j++)
                gm_json_u64(w, r[j].u);
            for (size_t j = 0; j < n; j++)
                gm_json_i64(w, r[j].i);
        }
        gm_json_end_array(w);
    }
    gm_json_end_array(w);
}

static void doc_numbers_each(struct gm_json *w)
{
    doc_numbers(w, false);
}

/* Rows of integers (gm_json_int_array()) or the same calls one by one: empty rows, rows of
 * one kind, rows of both, enough to cross the buffer's edge many times, inside arrays and
 * as the values of keys. */
static void doc_rows(struct gm_json *w, bool whole)
{
    const struct num_row *r = num_rows();
    gm_json_begin_object(w);
    gm_json_key(w, "rows");
    gm_json_begin_array(w);
    for (size_t j = 0; j < 3000; j++) {
        uint64_t u[6];
        int64_t s[6];
        size_t nu = j % 7 < 6 ? j % 7 : 0, ns = (j / 7) % 4;
        for (size_t q = 0; q < 6; q++) {
            u[q] = r[(j + q) % 5000].u;
            s[q] = r[(j + q) % 5000].i;
        }
        if (whole) {
            gm_json_int_array(w, u, nu, s, ns);
        } else {
            gm_json_begin_array(w);
            for (size_t q = 0; q < nu; q++)
                gm_json_u64(w, u[q]);
            for (size_t q = 0; q < ns; q++)
                gm_json_i64(w, s[q]);
            gm_json_end_array(w);
        }
    }
    gm_json_end_array(w);
    gm_json_key(w, "row");
    if (whole) {
        gm_json_int_array(w, &r[1].u, 1, &r[1].i, 1);
    } else {
        gm_json_begin_array(w);
        gm_json_u64(w, r[1].u);
        gm_json_i64(w, r[1].i);
        gm_json_end_array(w);
    }
    gm_json_end_object(w);
}

static void doc_rows_each(struct gm_json *w)
{
    doc_rows(w, false);
}

static void doc_rows_whole(struct gm_json *w)
{
    doc_rows(w, true);
}

/* The rows of doc_rows() formatted by the caller into gm_json_room() (or, where the writer
 * gives no room, a local buffer written with gm_json_raw()). */
static char *row_text(char *p, const uint64_t *u, size_t nu, const int64_t *s, size_t ns)
{
    char b[32];
    *p++ = '[';
    for (size_t q = 0; q < nu + ns; q++) {
        size_t n = q < nu ? (size_t)snprintf(b, sizeof(b), "%llu", (unsigned long long)u[q])
                          : (size_t)snprintf(b, sizeof(b), "%lld", (long long)s[q - nu]);
        if (q)
            *p++ = ',';
        memcpy(p, b, n);
        p += n;
    }
    *p++ = ']';
    return p;
}

static void room_row(struct gm_json *w, const uint64_t *u, size_t nu, const int64_t *s, size_t ns)
{
    char *p = gm_json_room(w, 2 + 12 * 22);
    if (p) {
        gm_json_room_end(w, row_text(p, u, nu, s, ns));
    } else {
        char row[2 + 12 * 22 + 1];
        *row_text(row, u, nu, s, ns) = '\0';
        gm_json_raw(w, row);
    }
}

static void doc_rows_room(struct gm_json *w)
{
    const struct num_row *r = num_rows();
    gm_json_begin_object(w);
    gm_json_key(w, "rows");
    gm_json_begin_array(w);
    for (size_t j = 0; j < 3000; j++) {
        uint64_t u[6];
        int64_t s[6];
        size_t nu = j % 7 < 6 ? j % 7 : 0, ns = (j / 7) % 4;
        for (size_t q = 0; q < 6; q++) {
            u[q] = r[(j + q) % 5000].u;
            s[q] = r[(j + q) % 5000].i;
        }
        room_row(w, u, nu, s, ns);
    }
    gm_json_end_array(w);
    gm_json_key(w, "row");
    room_row(w, &r[1].u, 1, &r[1].i, 1);
    gm_json_end_object(w);
}

static void doc_numbers_bulk(struct gm_json *w)
{
    doc_numbers(w, true);
}

static void test_json_number_arrays(void **state)
{
    (void)state;
    for (unsigned flags = 0; flags <= (GM_JSON_PRETTY | GM_JSON_BUFFERED); flags++) {
        bool ok1, ok2;
        char *t1 = json_of(doc_numbers_each, flags, &ok1);
        char *t2 = json_of(doc_numbers_bulk, flags, &ok2);
        assert_true(ok1 && ok2);
        assert_true(strlen(t1) > 4u * GM_JSON_BUF_SIZE);
        assert_string_equal(t1, t2);
        free(t1);
        free(t2);
        t1 = json_of(doc_rows_each, flags, &ok1);
        t2 = json_of(doc_rows_whole, flags, &ok2);
        assert_true(ok1 && ok2);
        assert_true(strlen(t1) > 4u * GM_JSON_BUF_SIZE);
        assert_string_equal(t1, t2);
        free(t2);
        /* the same rows formatted by the caller in the writer's own buffer, or as raw text
         * (compact: the caller's) where the writer gives no room */
        t2 = json_of(doc_rows_room, flags, &ok2);
        assert_true(ok2);
        if (!(flags & GM_JSON_PRETTY))
            assert_string_equal(t1, t2);
        free(t1);
        free(t2);
    }
}

/* A room's end outside the room (before its start, or past the writer's buffer: a row that
 * outgrew the room it asked for) fails the writer instead of moving its fill mark there
 * (without the check in gm_json_room_end() both documents finish "ok"). */
static void doc_room_end_before(struct gm_json *w)
{
    char *p;
    gm_json_begin_array(w);
    gm_json_u64(w, 1);
    p = gm_json_room(w, 8);
    assert_non_null(p);
    gm_json_room_end(w, p - 2);
    gm_json_end_array(w);
}

static void doc_room_end_past(struct gm_json *w)
{
    char *p;
    gm_json_begin_array(w);
    p = gm_json_room(w, 8);
    assert_non_null(p);
    gm_json_room_end(w, w->buf + sizeof(w->buf) + 1);
    gm_json_end_array(w);
}

static void test_json_room_end_checked(void **state)
{
    bool ok;
    char *t;
    (void)state;
    t = json_of(doc_room_end_before, GM_JSON_BUFFERED, &ok);
    assert_false(ok);
    free(t);
    t = json_of(doc_room_end_past, GM_JSON_BUFFERED, &ok);
    assert_false(ok);
    free(t);
    t = json_of(doc_rows_room, GM_JSON_BUFFERED, &ok); /* ends inside their rooms: fine */
    assert_true(ok);
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
    t = json_of(doc_misuse_value_without_key, GM_JSON_BUFFERED, &ok);
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

/* gm_alloc_fail_after(n) fails call n and every one after it; gm_alloc_fail_once_after(n)
 * call n alone; both count the calls from 0. */
static void test_alloc_failure_injection_once(void **state)
{
    void *p[4];
    (void)state;
    for (int once = 0; once < 2; once++) {
        if (once)
            gm_alloc_fail_once_after(1);
        else
            gm_alloc_fail_after(1);
        for (int i = 0; i < 4; i++)
            p[i] = gm_malloc(16);
        assert_int_equal(gm_alloc_count(), 4);
        gm_alloc_fail_after(-1);
        assert_non_null(p[0]);
        assert_null(p[1]);
        assert_true(once ? p[2] && p[3] : !p[2] && !p[3]);
        for (int i = 0; i < 4; i++)
            gm_free(p[i]);
    }
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

/* A big array grows to what it needs rounded up to whole 2 MiB mapping units where arrays are
 * mapped (its whole capacity is populated, big.h), by a quarter on the heap (the sanitizer
 * build); a small one still doubles. */
static void test_big_grows_to_whole_units(void **state)
{
    void *p = NULL;
    size_t cap = 0;
    (void)state;
    assert_true(gm_big_grow(&p, &cap, 100, 8, 64));
    assert_int_equal(cap, 128); /* on the heap: 64, then doubled */
    assert_true(gm_big_grow(&p, &cap, 2u << 20, 8, 64));
    assert_int_equal(cap, 2u << 20); /* 128 doubled up to 2 Mi elements (16 MiB) */
    assert_true(gm_big_grow(&p, &cap, (2u << 20) + 1, 8, 64));
#if defined(__linux__) && !defined(GM_ARENA_MALLOC)
    assert_int_equal(cap, (18u << 20) / 8); /* 16 MiB + 8 bytes: 9 units of 2 MiB */
    assert_true(gm_big_grow(&p, &cap, 4000000, 8, 64));
    assert_int_equal(cap, (32u << 20) / 8); /* 32,000,000 bytes: 16 units */
#else
    assert_int_equal(cap, ((16u << 20) + 8 + ((16u << 20) + 8) / 4) / 8);
    assert_true(gm_big_grow(&p, &cap, 4000000, 8, 64));
    assert_int_equal(cap, (32000000 + 32000000 / 4) / 8);
#endif
    memset(p, 0xab, cap * 8); /* all of it writable */
    gm_big_free(p, cap * 8);
}

#if defined(__linux__) && !defined(GM_ARENA_MALLOC)
#include <sys/mman.h>
#include <unistd.h>

/* How many of the pages [p, p + bytes) are in memory (mincore). */
static size_t resident_pages(void *p, size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), n = (bytes + page - 1) / page, in = 0;
    unsigned char *vec = malloc(n);
    assert_non_null(vec);
    assert_int_equal(mincore(p, bytes, vec), 0);
    for (size_t i = 0; i < n; i++)
        in += vec[i] & 1;
    free(vec);
    return in;
}

/* Whether this kernel populates a mapping in one call (MADV_POPULATE_WRITE, Linux 5.14);
 * elsewhere pages fault in as they are written, and the tests of what is in memory skip. */
static bool kernel_populates(void)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    bool ok = false;
    void *probe = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(probe != MAP_FAILED);
#ifdef MADV_POPULATE_WRITE
    ok = madvise(probe, page, MADV_POPULATE_WRITE) == 0;
#endif
    munmap(probe, page);
    return ok;
}

/* The pages of a new mapping, and of the part a mapping grows by, are in memory before the
 * array writes them (populated in one call, not faulted in a page at a time), and no page
 * past the array's capacity is, where the kernel can populate (MADV_POPULATE_WRITE, Linux
 * 5.14); skipped elsewhere. */
static void test_big_pages_populated(void **state)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *p;
    (void)state;
    if (!kernel_populates())
        skip();
    /* 5 MiB and a page: in a 6 MiB mapping, of which only those pages are in memory (what a
     * caller's budget counts), then grown within the mapping and past it */
    p = gm_big_realloc(NULL, 0, (5u << 20) + page);
    assert_non_null(p);
    assert_int_equal(resident_pages(p, 6u << 20), (5u << 20) / page + 1);
    p = gm_big_realloc(p, (5u << 20) + page, (5u << 20) + 3 * page);
    assert_non_null(p);
    assert_int_equal(resident_pages(p, 6u << 20), (5u << 20) / page + 3);
    p = gm_big_realloc(p, (5u << 20) + 3 * page, 20u << 20);
    assert_non_null(p);
    assert_int_equal(resident_pages(p, 20u << 20), (20u << 20) / page);
    gm_big_free(p, 20u << 20);
}

/* A mapped array is memory up to its capacity, no more (big.c, populate()): the address
 * space reserved behind it (up to the next power of two) holds no page until the array grows
 * into it, in place; and what a shrink gives up is memory no more.  Skipped where the kernel
 * cannot populate. */
static void test_big_grows_in_place(void **state)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *p, *q;
    (void)state;
    if (!kernel_populates())
        skip();
    p = gm_big_realloc(NULL, 0, 5u << 20); /* 3 units, in a reservation of 8 MiB */
    assert_non_null(p);
    assert_int_equal(resident_pages(p, 8u << 20), (5u << 20) / page);
    p[(3u << 20) - 1] = 6;
    p[(5u << 20) - 1] = 7;
    q = gm_big_realloc(p, 5u << 20, 7u << 20); /* the fourth unit: in place */
    assert_ptr_equal(q, p);
    assert_int_equal(resident_pages(p, 8u << 20), (7u << 20) / page);
    assert_int_equal(p[(5u << 20) - 1], 7);
    p[(7u << 20) - 1] = 8;
    q = gm_big_realloc(p, 7u << 20, 5u << 20); /* back to 3 units: the fourth given back */
    assert_ptr_equal(q, p);
    assert_int_equal(resident_pages(p, 8u << 20), (6u << 20) / page);
    assert_int_equal(p[(5u << 20) - 1], 7);
    q = gm_big_realloc(p, 5u << 20, 3u << 20); /* 2 units, in 4 MiB */
    assert_ptr_equal(q, p);
    assert_int_equal(resident_pages(p, 4u << 20), (4u << 20) / page);
    q = gm_big_realloc(p, 3u << 20, 9u << 20); /* past the reservation: 16 MiB, kept bytes */
    assert_non_null(q);
    assert_int_equal(q[(3u << 20) - 1], 6);
    assert_int_equal(resident_pages(q, 16u << 20), (9u << 20) / page);
    q[(9u << 20) - 1] = 9;
    gm_big_free(q, 9u << 20);
}
#endif

/* A FILE over a buffer holds every byte written through it, in order, small writes and
 * large ones; past the buffer's cap the FILE reports the error. */
static void test_buf_file(void **state)
{
    struct gm_buf b = GM_BUF_INIT;
    char big[20000];
    FILE *f;
    (void)state;
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (char)('a' + i % 26);
    f = gm_buf_file(&b);
    assert_non_null(f);
    fputs("head,", f);
    for (int i = 0; i < 5; i++)
        assert_int_equal(fwrite(big, 1, sizeof(big), f), sizeof(big));
    fputc('!', f);
    assert_int_equal(fflush(f), 0);
    assert_int_equal(b.len, 5 + 5 * sizeof(big) + 1);
    assert_memory_equal(b.data, "head,", 5);
    for (int i = 0; i < 5; i++)
        assert_memory_equal(b.data + 5 + i * sizeof(big), big, sizeof(big));
    assert_int_equal(b.data[b.len - 1], '!');
    assert_int_equal(fclose(f), 0);
    gm_buf_release(&b);
    gm_buf_init(&b, 100);
    f = gm_buf_file(&b);
    assert_non_null(f);
    fwrite(big, 1, sizeof(big), f);
    assert_true(fflush(f) != 0 || ferror(f));
    fclose(f);
    assert_true(b.len <= 100);
    gm_buf_release(&b);
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

/* ---- the hash map, held against a plain array of what it should hold ---- */

#define REF_KEYS 4096

/* keys that probe into each other: multiples of 512 (device addresses), 0, small ones */
static uint64_t ref_key(unsigned i)
{
    return i % 3 == 0 ? (uint64_t)(i + 3) * 512 : i % 3 == 1 ? i / 3 : UINT64_MAX - i;
}

/* The record pool: a record given back is the next handed out; a reservation covers that
 * many takes even when every allocation fails; release frees everything, and the pool
 * serves again. */
static void test_slab_reuse_reserve_release(void **state)
{
    struct rec {
        uint64_t a, b, c;
    };
    struct gm_slab s = GM_SLAB_INIT(struct rec, 4);
    struct rec *r[10], *more[16];
    size_t n_more = 0;
    (void)state;
    for (int i = 0; i < 10; i++) {
        assert_non_null(r[i] = gm_slab_take(&s));
        r[i]->a = (uint64_t)i;
    }
    for (int i = 0; i < 10; i++)
        assert_int_equal(r[i]->a, (uint64_t)i); /* distinct records */
    gm_slab_give(&s, r[3]);
    gm_slab_give(&s, NULL);
#ifndef GM_ARENA_MALLOC
    assert_ptr_equal(gm_slab_take(&s), r[3]);
#else
    assert_non_null(r[3] = gm_slab_take(&s));
#endif
    assert_int_equal(gm_slab_reserve(&s, 9), GM_OK);
    assert_true(s.n_spare >= 9 && s.n_spare <= 16);
    gm_alloc_fail_after(0); /* the reserved records only */
    while (s.n_spare)
        assert_non_null(more[n_more++] = gm_slab_take(&s));
    assert_true(n_more >= 9);
    assert_null(gm_slab_take(&s));
    assert_int_equal(gm_slab_reserve(&s, 1), GM_ERR_NOMEM);
    gm_alloc_fail_after(-1);
    for (int i = 0; i < 10; i++)
        gm_slab_give(&s, r[i]);
    for (size_t i = 0; i < n_more; i++)
        gm_slab_give(&s, more[i]);
    gm_slab_release(&s);
    assert_int_equal(s.n_spare, 0);
    assert_non_null(r[0] = gm_slab_take(&s));
    gm_slab_give(&s, r[0]);
    gm_slab_release(&s);
}

static void test_map_by_key_matches_a_reference(void **state)
{
    struct gm_map m = GM_MAP_INIT;
    static uint64_t want[REF_KEYS];
    static bool in[REF_KEYS];
    uint32_t rnd = 12345;
    size_t n = 0;
    (void)state;
    memset(in, 0, sizeof(in));
    for (int step = 0; step < 200000; step++) {
        unsigned i;
        uint64_t v;
        rnd = rnd * 1103515245u + 12345u;
        i = (rnd >> 8) % REF_KEYS;
        if ((rnd >> 4) % 3) {
            bool added;
            uint64_t *p = gm_map_at(&m, ref_key(i), &added);
            assert_non_null(p);
            assert_int_equal(added, !in[i]);
            if (!in[i])
                assert_true(*p == 0);
            *p = want[i] = rnd;
            n += !in[i];
            in[i] = true;
        } else {
            assert_int_equal(gm_map_take(&m, ref_key(i), &v), in[i]);
            if (in[i])
                assert_true(v == want[i]);
            n -= in[i];
            in[i] = false;
        }
        assert_int_equal(gm_map_count(&m), n);
    }
    for (unsigned i = 0; i < REF_KEYS; i++) {
        uint64_t v = 0;
        assert_int_equal(gm_map_get(&m, ref_key(i), &v), in[i]);
        if (in[i])
            assert_true(v == want[i]);
    }
    {
        /* the walk sees every entry once */
        size_t pos = 0, seen = 0;
        uint64_t k, v;
        while (gm_map_next(&m, &pos, &k, &v)) {
            bool found = false;
            for (unsigned i = 0; i < REF_KEYS && !found; i++)
                found = in[i] && ref_key(i) == k && want[i] == v;
            assert_true(found);
            seen++;
        }
        assert_int_equal(seen, n);
    }
    gm_map_release(&m);
    assert_int_equal(gm_map_count(&m), 0);
    assert_false(gm_map_get(&m, 0, NULL));
    assert_false(gm_map_take(&m, 512, NULL));
}

static void test_map_key_zero_is_an_ordinary_key(void **state)
{
    struct gm_map m = GM_MAP_INIT;
    uint64_t v = 1;
    (void)state;
    assert_false(gm_map_get(&m, 0, &v));
    assert_true(gm_map_put(&m, 0, 7));
    assert_true(gm_map_put(&m, 0x9E3779B97F4A7C15ULL, 8));
    assert_true(gm_map_get(&m, 0, &v) && v == 7);
    assert_true(gm_map_get(&m, 0x9E3779B97F4A7C15ULL, &v) && v == 8);
    assert_int_equal(gm_map_count(&m), 2);
    assert_true(gm_map_take(&m, 0, &v) && v == 7);
    assert_false(gm_map_get(&m, 0, NULL));
    assert_int_equal(gm_map_count(&m), 1);
    gm_map_release(&m);
}

static void test_map_reserve_then_inserts_cannot_fail(void **state)
{
    struct gm_map m = GM_MAP_INIT;
    (void)state;
    assert_true(gm_map_reserve(&m, 1000));
    gm_alloc_fail_after(0);
    {
        bool ok = true;
        for (uint64_t k = 1; k <= 1000; k++)
            ok &= gm_map_put(&m, k << 9, k);
        gm_alloc_fail_after(-1);
        assert_true(ok);
    }
    assert_int_equal(gm_map_count(&m), 1000);
    /* the map is at most half full: past that it needs more slots, which cannot be had now */
    for (uint64_t k = 1001; k <= (m.mask + 1) / 2; k++)
        assert_true(gm_map_put(&m, k << 9, k));
    gm_alloc_fail_after(0);
    {
        bool ok = gm_map_put(&m, ((m.mask + 1) / 2 + 1) << 9, 1);
        gm_alloc_fail_after(-1);
        assert_false(ok);
    }
    for (uint64_t k = 1; k <= 1000; k++) {
        uint64_t v;
        assert_true(gm_map_get(&m, k << 9, &v) && v == k);
    }
    gm_map_release(&m);
}

/* A map takes entries until half its slots hold one, and grows at the next insert only; an
 * emptied map (gm_map_clear()) keeps its slots and takes as many again; a released one
 * starts over (the count at which it grows is kept beside the slots). */
static void test_map_grows_past_half_full(void **state)
{
    struct gm_map m = GM_MAP_INIT;
    (void)state;
    for (int round = 0; round < 3; round++) {
        size_t slots;
        uint64_t k = 1;
        assert_true(gm_map_put(&m, k++ << 9, 1)); /* the first slots */
        slots = m.mask + 1;
        while (gm_map_count(&m) < slots / 2)
            assert_true(gm_map_put(&m, k++ << 9, 1));
        assert_int_equal(m.mask + 1, slots);
        assert_true(gm_map_put(&m, k << 9, 1));
        assert_int_equal(m.mask + 1, 2 * slots);
        /* taking entries back does not shrink it, and adding them again does not grow it */
        for (uint64_t j = 1; j <= k; j++)
            assert_true(gm_map_take(&m, j << 9, NULL));
        while (gm_map_count(&m) < slots)
            assert_true(gm_map_put(&m, k++ << 9, 1));
        assert_int_equal(m.mask + 1, 2 * slots);
        if (round == 0) {
            gm_map_clear(&m);
            assert_int_equal(gm_map_count(&m), 0);
            while (gm_map_count(&m) < slots)
                assert_true(gm_map_put(&m, k++ << 9, 1));
            assert_int_equal(m.mask + 1, 2 * slots);
        }
        gm_map_release(&m);
        assert_null(m.slots);
    }
}

static void test_map_growth_is_charged_to_its_budget(void **state)
{
    struct gm_budget b = gm_budget_make(4096, 0);
    struct gm_map m;
    size_t k = 1;
    (void)state;
    gm_map_init(&m, &b);
    while (gm_map_put(&m, k, k))
        k++;
    assert_true(b.over);
    assert_true(b.used <= b.limit);
    assert_true(b.used == (uint64_t)(m.mask + 1) * sizeof(struct gm_map_slot));
    for (size_t i = 1; i < k; i++)
        assert_true(gm_map_get(&m, i, NULL));
    gm_map_release(&m);
    assert_true(b.used == 0);
}

struct name_ctx {
    const char *const *names;
    const char *want;
};

static bool name_eq(void *ctx, uint64_t val)
{
    const struct name_ctx *c = ctx;
    return strcmp(c->names[val], c->want) == 0;
}

static void test_map_index_tells_entries_of_one_hash_apart(void **state)
{
    static const char *const names[] = {"alpha", "beta", "gamma", "delta"};
    struct gm_map m = GM_MAP_INIT;
    struct name_ctx c = {names, NULL};
    uint64_t v;
    (void)state;
    /* every name under the same hash (0 among them): only 'eq' tells them apart */
    for (uint64_t i = 0; i < 4; i++)
        assert_true(gm_map_add(&m, i < 2 ? 0 : 42, i));
    for (uint64_t i = 0; i < 4; i++) {
        c.want = names[i];
        assert_true(gm_map_find(&m, i < 2 ? 0 : 42, name_eq, &c, &v));
        assert_true(v == i);
    }
    c.want = "alpha";
    assert_false(gm_map_find(&m, 42, name_eq, &c, &v));
    assert_true(gm_map_find(&m, 42, NULL, NULL, &v) && v >= 2);
    assert_int_equal(gm_map_count(&m), 4);
    assert_true(gm_hash_bytes("ab", 2, 0) != gm_hash_bytes("ba", 2, 0));
    assert_true(gm_hash_bytes("ab", 2, 0) != gm_hash_bytes("ab", 2, 1));
    gm_map_release(&m);
}

/* ---- the growable array ---- */

static void test_vec_push_keeps_every_element(void **state)
{
    uint64_t *v = NULL, *e;
    size_t n = 0, cap = 0;
    (void)state;
    for (uint64_t i = 0; i < 100000; i++) {
        assert_non_null(e = GM_VEC_PUSH(v, n, cap, NULL));
        *e = i * 3;
    }
    assert_int_equal(n, 100000);
    assert_true(cap >= n && cap < 2 * n);
    for (size_t i = 0; i < n; i++)
        assert_true(v[i] == i * 3);
    gm_free(v);
}

static void test_vec_failure_leaves_the_array_as_it_was(void **state)
{
    int *v = NULL;
    size_t n = 0, cap = 0;
    struct gm_budget b = gm_budget_make(100 * sizeof(int), 0);
    (void)state;
    for (int i = 0; i < GM_VEC_FIRST; i++)
        *GM_VEC_PUSH(v, n, cap, &b) = i;
    assert_int_equal(cap, GM_VEC_FIRST);
    /* out of memory */
    gm_alloc_fail_after(0);
    {
        int *e = GM_VEC_PUSH(v, n, cap, &b);
        gm_alloc_fail_after(-1);
        assert_null(e);
    }
    assert_false(b.over);
    assert_int_equal(n, GM_VEC_FIRST);
    assert_int_equal(cap, GM_VEC_FIRST);
    assert_true(b.used == GM_VEC_FIRST * sizeof(int));
    /* a size that overflows */
    assert_false(GM_VEC_RESERVE(v, cap, SIZE_MAX / 2, NULL));
    assert_int_equal(cap, GM_VEC_FIRST);
    /* the budget: 64 elements fit under 100, 128 do not */
    assert_true(GM_VEC_RESERVE(v, cap, 64, &b));
    assert_false(GM_VEC_RESERVE(v, cap, 65, &b));
    assert_true(b.over);
    assert_int_equal(cap, 64);
    assert_true(b.used == 64 * sizeof(int));
    for (int i = 0; i < GM_VEC_FIRST; i++)
        assert_int_equal(v[i], i);
    gm_free(v);
}

static void test_vec_big_arrays_grow_past_the_mapping_size(void **state)
{
    uint8_t *v = NULL;
    size_t cap = 0;
    (void)state;
    assert_true(GM_VEC_RESERVE_BIG(v, cap, 1000, NULL));
    memset(v, 0xab, 1000);
    assert_true(GM_VEC_RESERVE_BIG(v, cap, 3 * GM_BIG_MIN, NULL));
    assert_true(cap >= 3 * GM_BIG_MIN);
    for (size_t i = 0; i < 1000; i++)
        assert_int_equal(v[i], 0xab);
    v[3 * GM_BIG_MIN - 1] = 1;
    gm_big_free(v, cap);
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

/* bits.h: a set of indexes marks each once (gm_bits_set() says whether it was), and
 * gm_bits_next() finds the marked ones in order from any index, across words, up to a limit
 * that is not a word's end, and none past the last. */
static void test_bits_set_and_next(void **state)
{
    const size_t n = 1000, marked[] = {0, 1, 63, 64, 65, 127, 128, 500, 998, 999};
    const size_t nm = sizeof(marked) / sizeof(marked[0]);
    uint64_t *b = calloc(gm_bits_words(n), sizeof(*b));
    size_t i = 0, k = 0;
    (void)state;
    assert_true(gm_bits_words(n) * 64 > n);
    for (size_t j = 0; j < nm; j++)
        assert_false(gm_bits_set(b, marked[j]));
    assert_true(gm_bits_set(b, 64)); /* already */
    /* every marked one in order, nothing else */
    while ((i = gm_bits_next(b, i, n)) < n) {
        assert_true(k < nm);
        assert_int_equal(i, marked[k++]);
        i++;
    }
    assert_int_equal(k, nm);
    /* from inside a word, and a limit inside a word */
    assert_int_equal(gm_bits_next(b, 2, n), 63);
    assert_int_equal(gm_bits_next(b, 129, n), 500);
    assert_int_equal(gm_bits_next(b, 129, 500), 500); /* 500 itself is past the limit */
    assert_int_equal(gm_bits_next(b, 501, 998), 998);
    assert_int_equal(gm_bits_next(b, 501, 997), 997);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_bytes),
        cmocka_unit_test(test_slab_reuse_reserve_release),
        cmocka_unit_test(test_map_by_key_matches_a_reference),
        cmocka_unit_test(test_map_key_zero_is_an_ordinary_key),
        cmocka_unit_test(test_map_reserve_then_inserts_cannot_fail),
        cmocka_unit_test(test_map_grows_past_half_full),
        cmocka_unit_test(test_map_growth_is_charged_to_its_budget),
        cmocka_unit_test(test_map_index_tells_entries_of_one_hash_apart),
        cmocka_unit_test(test_vec_push_keeps_every_element),
        cmocka_unit_test(test_vec_failure_leaves_the_array_as_it_was),
        cmocka_unit_test(test_vec_big_arrays_grow_past_the_mapping_size),
        cmocka_unit_test(test_parse_size),
        cmocka_unit_test(test_parse_gpu_memory),
        cmocka_unit_test(test_parse_u64),
        cmocka_unit_test(test_saturating),
        cmocka_unit_test(test_json_compact),
        cmocka_unit_test(test_json_pretty),
        cmocka_unit_test(test_json_buffered_writes_what_unbuffered_writes),
        cmocka_unit_test(test_json_number_arrays),
        cmocka_unit_test(test_json_room_end_checked),
        cmocka_unit_test(test_json_misuse),
        cmocka_unit_test(test_arena),
        cmocka_unit_test(test_alloc_failure_injection),
        cmocka_unit_test(test_alloc_failure_injection_once),
        cmocka_unit_test(test_big_array),
        cmocka_unit_test(test_big_grows_to_whole_units),
#if defined(__linux__) && !defined(GM_ARENA_MALLOC)
        cmocka_unit_test(test_big_pages_populated),
        cmocka_unit_test(test_big_grows_in_place),
#endif
        cmocka_unit_test(test_buf_cap),
        cmocka_unit_test(test_buf_file),
        cmocka_unit_test(test_reader),
        cmocka_unit_test(test_text_escape),
        cmocka_unit_test(test_text_closest),
        cmocka_unit_test(test_json_budget),
        cmocka_unit_test(test_error),
        cmocka_unit_test(test_bits_set_and_next),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
