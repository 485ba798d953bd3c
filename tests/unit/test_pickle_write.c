/* SPDX-License-Identifier: MIT */
/* test_pickle_write.c - the pickle writer gives CPython's bytes for the same object graph
 * (expected bytes from pickle.dumps of the same object, protocols 4 and 2), rejects misuse,
 * and the example snapshot writer produces a well-formed file. */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "gpumem/example.h"
#include "gpumem/pickle_write.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* {'a': [1, 300, 70000, -1, 2**40, -2**40, 2**63, 1.5, True, False, None, (x, x), (),
 *        (1, 2, 3, 4)], 'b': 'é', 'c': [L, L], 'd': {'k': 0}} with x = 'x', L = [] */
static void write_object(struct gm_pickle_writer *w)
{
    uint32_t x = GM_PICKLE_NO_MEMO, l;
    gm_pickle_dict_begin(w, 4);
    gm_pickle_str(w, "a");
    gm_pickle_list_begin(w, 14);
    gm_pickle_int(w, 1);
    gm_pickle_int(w, 300);
    gm_pickle_int(w, 70000);
    gm_pickle_int(w, -1);
    gm_pickle_int(w, (int64_t)1 << 40);
    gm_pickle_int(w, -((int64_t)1 << 40));
    gm_pickle_uint(w, (uint64_t)1 << 63);
    gm_pickle_float(w, 1.5);
    gm_pickle_bool(w, true);
    gm_pickle_bool(w, false);
    gm_pickle_none(w);
    gm_pickle_tuple_begin(w, 2);
    gm_pickle_str_shared(w, "x", &x);
    gm_pickle_str_shared(w, "x", &x);
    gm_pickle_tuple_end(w);
    gm_pickle_tuple_begin(w, 0);
    assert_int_equal(gm_pickle_tuple_end(w), GM_PICKLE_NO_MEMO);
    gm_pickle_tuple_begin(w, 4);
    for (int i = 1; i <= 4; i++)
        gm_pickle_int(w, i);
    gm_pickle_tuple_end(w);
    gm_pickle_list_end(w);
    gm_pickle_str(w, "b");
    gm_pickle_str(w, "\xc3\xa9");
    gm_pickle_str(w, "c");
    gm_pickle_list_begin(w, 2);
    l = gm_pickle_list_begin(w, 0);
    gm_pickle_list_end(w);
    gm_pickle_get(w, l);
    gm_pickle_list_end(w);
    gm_pickle_str(w, "d");
    gm_pickle_dict_begin(w, 1);
    gm_pickle_str(w, "k");
    gm_pickle_int(w, 0);
    gm_pickle_dict_end(w);
    gm_pickle_dict_end(w);
}

static size_t dump(int proto, void (*fn)(struct gm_pickle_writer *), unsigned char *out, size_t cap,
                   enum gm_status *st)
{
    FILE *f = tmpfile();
    struct gm_pickle_writer *w;
    struct gm_error err;
    size_t n;
    assert_non_null(f);
    assert_int_equal(gm_pickle_writer_new(f, proto, &w, &err), GM_OK);
    fn(w);
    *st = gm_pickle_writer_finish(w, &err);
    rewind(f);
    n = fread(out, 1, cap, f);
    fclose(f);
    return n;
}

static void test_protocol4_bytes(void **state)
{
    static const unsigned char want[] = {
        0x80, 0x04, 0x95, 0x79, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x7d, 0x94, 0x28, 0x8c,
        0x01, 0x61, 0x94, 0x5d, 0x94, 0x28, 0x4b, 0x01, 0x4d, 0x2c, 0x01, 0x4a, 0x70, 0x11, 0x01,
        0x00, 0x4a, 0xff, 0xff, 0xff, 0xff, 0x8a, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x8a,
        0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0x8a, 0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x80, 0x00, 0x47, 0x3f, 0xf8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x88, 0x89, 0x4e,
        0x8c, 0x01, 0x78, 0x94, 0x68, 0x03, 0x86, 0x94, 0x29, 0x28, 0x4b, 0x01, 0x4b, 0x02, 0x4b,
        0x03, 0x4b, 0x04, 0x74, 0x94, 0x65, 0x8c, 0x01, 0x62, 0x94, 0x8c, 0x02, 0xc3, 0xa9, 0x94,
        0x8c, 0x01, 0x63, 0x94, 0x5d, 0x94, 0x28, 0x5d, 0x94, 0x68, 0x0a, 0x65, 0x8c, 0x01, 0x64,
        0x94, 0x7d, 0x94, 0x8c, 0x01, 0x6b, 0x94, 0x4b, 0x00, 0x73, 0x75, 0x2e};
    unsigned char got[512];
    enum gm_status st;
    size_t n = dump(4, write_object, got, sizeof(got), &st);
    (void)state;
    assert_int_equal(st, GM_OK);
    assert_int_equal(n, sizeof(want));
    assert_memory_equal(got, want, sizeof(want));
}

static void test_protocol2_bytes(void **state)
{
    static const unsigned char want[] = {
        0x80, 0x02, 0x7d, 0x71, 0x00, 0x28, 0x58, 0x01, 0x00, 0x00, 0x00, 0x61, 0x71, 0x01, 0x5d,
        0x71, 0x02, 0x28, 0x4b, 0x01, 0x4d, 0x2c, 0x01, 0x4a, 0x70, 0x11, 0x01, 0x00, 0x4a, 0xff,
        0xff, 0xff, 0xff, 0x8a, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x8a, 0x06, 0x00, 0x00,
        0x00, 0x00, 0x00, 0xff, 0x8a, 0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x00,
        0x47, 0x3f, 0xf8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x88, 0x89, 0x4e, 0x58, 0x01, 0x00,
        0x00, 0x00, 0x78, 0x71, 0x03, 0x68, 0x03, 0x86, 0x71, 0x04, 0x29, 0x28, 0x4b, 0x01, 0x4b,
        0x02, 0x4b, 0x03, 0x4b, 0x04, 0x74, 0x71, 0x05, 0x65, 0x58, 0x01, 0x00, 0x00, 0x00, 0x62,
        0x71, 0x06, 0x58, 0x02, 0x00, 0x00, 0x00, 0xc3, 0xa9, 0x71, 0x07, 0x58, 0x01, 0x00, 0x00,
        0x00, 0x63, 0x71, 0x08, 0x5d, 0x71, 0x09, 0x28, 0x5d, 0x71, 0x0a, 0x68, 0x0a, 0x65, 0x58,
        0x01, 0x00, 0x00, 0x00, 0x64, 0x71, 0x0b, 0x7d, 0x71, 0x0c, 0x58, 0x01, 0x00, 0x00, 0x00,
        0x6b, 0x71, 0x0d, 0x4b, 0x00, 0x73, 0x75, 0x2e};
    unsigned char got[512];
    enum gm_status st;
    size_t n = dump(2, write_object, got, sizeof(got), &st);
    (void)state;
    assert_int_equal(st, GM_OK);
    assert_int_equal(n, sizeof(want));
    assert_memory_equal(got, want, sizeof(want));
}

static void short_list(struct gm_pickle_writer *w)
{
    gm_pickle_list_begin(w, 3);
    gm_pickle_int(w, 1);
    gm_pickle_int(w, 2);
    gm_pickle_list_end(w);
}

static void unclosed(struct gm_pickle_writer *w)
{
    gm_pickle_dict_begin(w, 1);
    gm_pickle_str(w, "k");
}

static void bad_get(struct gm_pickle_writer *w)
{
    gm_pickle_get(w, 7);
}

static void test_misuse(void **state)
{
    unsigned char got[256];
    enum gm_status st;
    struct gm_pickle_writer *w;
    (void)state;
    dump(4, short_list, got, sizeof(got), &st);
    assert_int_equal(st, GM_ERR_INVALID);
    dump(4, unclosed, got, sizeof(got), &st);
    assert_int_equal(st, GM_ERR_INVALID);
    dump(4, bad_get, got, sizeof(got), &st);
    assert_int_equal(st, GM_ERR_INVALID);
    assert_int_equal(gm_pickle_writer_new(stdout, 1, &w, NULL), GM_ERR_INVALID);
    assert_int_equal(gm_pickle_writer_new(stdout, 6, &w, NULL), GM_ERR_INVALID);
}

/* A big list of long strings: frames of at least 64 KiB, each announced with its length. */
static void many_strings(struct gm_pickle_writer *w)
{
    char s[600];
    memset(s, 'z', sizeof(s));
    gm_pickle_list_begin(w, 2500);
    for (int i = 0; i < 2500; i++)
        gm_pickle_strn(w, s, sizeof(s));
    gm_pickle_list_end(w);
}

static void test_frames(void **state)
{
    size_t cap = 4u << 20, n, pos = 2, frames = 0;
    unsigned char *buf = malloc(cap);
    enum gm_status st;
    (void)state;
    assert_non_null(buf);
    n = dump(4, many_strings, buf, cap, &st);
    assert_int_equal(st, GM_OK);
    while (pos < n) {
        uint64_t len = 0;
        assert_int_equal(buf[pos], 0x95);
        for (int i = 0; i < 8; i++)
            len |= (uint64_t)buf[pos + 1 + i] << (8 * i);
        pos += 9 + len;
        frames++;
        if (pos < n)
            assert_true(len >= 64 * 1024 && len < 64 * 1024 + 700);
    }
    assert_int_equal(pos, n);
    assert_true(frames > 20);
    assert_int_equal(buf[n - 1], '.');
    free(buf);
}

static void test_example_writes(void **state)
{
    struct gm_example_opts o;
    struct gm_error err;
    FILE *f = tmpfile();
    long size;
    (void)state;
    gm_example_opts_init(&o);
    o.iterations = 2;
    assert_int_equal(gm_example_write(f, &o, &err), GM_OK);
    size = ftell(f);
    assert_true(size > 50000);
    fclose(f);
    o.iterations = 0;
    assert_int_equal(gm_example_write(stdout, &o, &err), GM_ERR_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_protocol4_bytes), cmocka_unit_test(test_protocol2_bytes),
        cmocka_unit_test(test_misuse),          cmocka_unit_test(test_frames),
        cmocka_unit_test(test_example_writes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
