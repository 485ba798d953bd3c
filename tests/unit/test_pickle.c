/* SPDX-License-Identifier: MIT */
/* test_pickle.c - the pickle VM: every data opcode, memo sharing, refused opcodes with
 * their offsets, truncation and lying lengths, caps, allocation failures, the append hook. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpumem/internal/alloc_hooks.h"
#include "pickle/pickle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define P(lit) (const uint8_t *)(lit), sizeof(lit) - 1

static enum gm_status parse(struct pk_doc *d, const uint8_t *p, size_t n, struct gm_error *e)
{
    gm_error_clear(e);
    return pk_parse(d, p, n, NULL, e);
}

static void test_ints(void **state)
{
    struct pk_doc d;
    struct gm_error e;
    const struct pk_node *l;
    int64_t i;
    uint64_t u;
    /* [1, 300, -2, 2**40 (LONG1 6), -2**63 (LONG1 8), 2**64-1 (LONG1 9), 2**70 (LONG1 9+) ] */
    static const uint8_t pk[] = {
        0x80, 4,    ']',  '(',  'K',  1,   'M',  0x2c, 0x01, 'J',  0xfe, 0xff, 0xff, 0xff,
        0x8a, 6,    0,    0,    0,    0,   0,    1,    0x8a, 8,    0,    0,    0,    0,
        0,    0,    0,    0x80, 0x8a, 9,   0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0,    0x8a, 10,   0,    0,    0,   0,    0,    0,    0,    0,    0x40, 0,    'I',
        '4',  '2',  '\n', 'L',  '-',  '7', 'L',  '\n', 'I',  '0',  '1',  '\n', 'e',  '.'};
    (void)state;
    assert_int_equal(parse(&d, pk, sizeof pk, &e), GM_OK);
    l = pk_node_of_kind(d.root, PK_LIST);
    assert_non_null(l);
    assert_int_equal(l->len, 10);
    assert_true(pk_get_i64(l->items[0], &i) && i == 1);
    assert_true(pk_get_i64(l->items[1], &i) && i == 300);
    assert_true(pk_get_i64(l->items[2], &i) && i == -2);
    assert_false(pk_get_u64(l->items[2], &u));
    assert_true(pk_get_i64(l->items[3], &i) && i == ((int64_t)1 << 40));
    assert_true(pk_get_i64(l->items[4], &i) && i == INT64_MIN);
    assert_true(pk_get_u64(l->items[5], &u) && u == UINT64_MAX);
    assert_false(pk_get_i64(l->items[5], &i));
    assert_false(pk_get_i64(l->items[6], &i));
    assert_false(pk_get_u64(l->items[6], &u));
    assert_string_equal(pk_type_name(l->items[6]), "int");
    assert_true(pk_get_i64(l->items[7], &i) && i == 42);
    assert_true(pk_get_i64(l->items[8], &i) && i == -7);
    assert_true(l->items[9] == PK_TRUE);
    pk_doc_release(&d);
}

static void test_strings_floats_consts(void **state)
{
    struct pk_doc d;
    struct gm_error e;
    const struct pk_node *t;
    const char *s;
    size_t n;
    bool is_bytes;
    double x;
    static const uint8_t pk[] = {0x80, 5,    0x95, 30,  0, 0, 0, 0,   0,   0,    0,    '(',  0x8c,
                                 2,    'h',  'i',  'X', 3, 0, 0, 0,   'a', 'b',  'c',  0x8d, 1,
                                 0,    0,    0,    0,   0, 0, 0, 'z', 'C', 2,    0,    1,    'G',
                                 0x3f, 0xf8, 0,    0,   0, 0, 0, 0,   'N', 0x88, 0x89, 't',  '.'};
    (void)state;
    assert_int_equal(parse(&d, pk, sizeof pk, &e), GM_OK);
    assert_int_equal(d.protocol, 5);
    t = pk_node_of_kind(d.root, PK_TUPLE);
    assert_non_null(t);
    assert_int_equal(t->len, 8);
    assert_true(pk_get_str(&d, t->items[0], &s, &n, &is_bytes));
    assert_int_equal(n, 2);
    assert_memory_equal(s, "hi", 2);
    assert_false(is_bytes);
    assert_true(pk_str_eq(&d, t->items[1], "abc"));
    assert_true(pk_str_eq(&d, t->items[2], "z"));
    assert_true(pk_get_str(&d, t->items[3], &s, &n, &is_bytes) && is_bytes && n == 2);
    assert_true(pk_get_double(t->items[4], &x) && x == 1.5);
    assert_true(t->items[5] == PK_NONE && t->items[6] == PK_TRUE && t->items[7] == PK_FALSE);
    pk_doc_release(&d);
}

/* A list of 'n' memoized short strings (protocol 4: SHORT_BINUNICODE then MEMOIZE each, the
 * flat reader's fast case) parses, and its last string reads back, at sizes whose memo
 * capacity runs past the last memo page 'n' needs (the base of every page below the memo's
 * capacity must exist: under AddressSanitizer, where the memo grows on the heap by a
 * quarter, a base array sized by 'n' alone was read past its end). */
static void test_many_memoized_strings(void **state)
{
    static const size_t sizes[] = {70000, 530000, 1000000, 1100000, 1300000};
    (void)state;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k], len = 0;
        uint8_t *buf = malloc(16 + n * 10);
        struct pk_doc d;
        struct gm_error e;
        const struct pk_node *l;
        const char *str;
        size_t sn;
        bool is_bytes;
        assert_non_null(buf);
        buf[len++] = 0x80, buf[len++] = 4, buf[len++] = ']', buf[len++] = 0x94, buf[len++] = '(';
        for (size_t i = 0; i < n; i++) {
            buf[len++] = 0x8c, buf[len++] = 6; /* SHORT_BINUNICODE of 6 bytes */
            len += (size_t)snprintf((char *)buf + len, 7, "%06zu", i % 1000000);
            buf[len++] = 0x94; /* MEMOIZE */
        }
        buf[len++] = 'e', buf[len++] = '.'; /* APPENDS, STOP */
        if (parse(&d, buf, len, &e) != GM_OK)
            fail_msg("%zu strings: %s", n, e.msg);
        l = pk_node_of_kind(d.root, PK_LIST);
        assert_non_null(l);
        assert_int_equal(l->len, n);
        assert_true(pk_get_str(&d, l->items[n - 1], &str, &sn, &is_bytes) && !is_bytes);
        assert_int_equal(sn, 6);
        assert_int_equal(strtoul(str, NULL, 10), (n - 1) % 1000000);
        pk_doc_release(&d);
        free(buf);
    }
}

static void test_containers_and_memo(void **state)
{
    struct pk_doc d;
    struct gm_error e;
    const struct pk_node *top, *a, *b, *tup;
    /* {"a": L, "b": L} with L = [1] memoized (protocol 2 BINPUT/BINGET) plus tuples */
    static const uint8_t pk[] = {0x80, 2,   '}',  'q', 0,   '(', 'X', 1,    0,    0,   0,
                                 'a',  ']', 'q',  1,   'K', 1,   'a', 'X',  1,    0,   0,
                                 0,    'b', 'h',  1,   'X', 1,   0,   0,    0,    't', ')',
                                 'K',  1,   0x85, 'K', 1,   'K', 2,   0x86, 0x87, 'u', '.'};
    (void)state;
    assert_int_equal(parse(&d, pk, sizeof pk, &e), GM_OK);
    top = pk_node_of_kind(d.root, PK_DICT);
    assert_non_null(top);
    assert_int_equal(top->len, 3);
    a = pk_node(pk_dict_get(&d, top, "a"));
    b = pk_node(pk_dict_get(&d, top, "b"));
    assert_non_null(a);
    assert_ptr_equal(a, b); /* shared, not copied */
    assert_true(a->flags & PK_NODE_SHARED);
    tup = pk_node_of_kind(pk_dict_get(&d, top, "t"), PK_TUPLE);
    assert_non_null(tup);
    assert_int_equal(tup->len, 3);
    assert_true(pk_dict_get(&d, top, "missing") == PK_HOLE);
    pk_doc_release(&d);

    /* protocol 0/1: DICT, LIST, TUPLE with MARK, PUT/GET, POP, DUP, POP_MARK */
    {
        static const uint8_t p0[] = "(K\x01K\x02lp0\n(K\x03K\x04K\x05"
                                    "1g0\n2"
                                    "0d.";
        /* MARK 1 2 LIST; PUT 0; MARK 3 4 5 POP_MARK; GET 0; DUP; POP; DICT without MARK */
        assert_int_equal(parse(&d, (const uint8_t *)p0, sizeof p0 - 1, &e), GM_ERR_FORMAT);
    }
    {
        static const uint8_t p1[] = "(X\x01\x00\x00\x00kK\x07"
                                    "d.";
        assert_int_equal(parse(&d, (const uint8_t *)p1, sizeof p1 - 1, &e), GM_OK);
        assert_non_null(pk_node_of_kind(d.root, PK_DICT));
        pk_doc_release(&d);
    }
}

static void test_refused(void **state)
{
    static const struct {
        const char *pk;
        size_t len;
        const char *name;
        uint64_t off;
    } cases[] = {
        {"cos\nsystem\n(S'x'\ntR.", 21, "os.system", 0},
        {"\x80\x04N\x8c\x02os\x8c\x06system\x93.", 17, "os.system", 15},
        {"\x80\x04NNR.", 6, "REDUCE", 4},
        {"\x80\x04NNb.", 6, "BUILD", 4},
        {"\x80\x02NN\x81.", 6, "NEWOBJ", 4},
        {"\x80\x04(o.", 5, "OBJ", 3},
        {"\x80\x04(imod\nname\n.", 16, "mod.name", 3},
        {"\x80\x04NQ.", 5, "BINPERSID", 3},
        {"\x80\x04Pid\n.", 7, "PERSID", 2},
        {"\x80\x04\x82\x01.", 5, "EXT1", 2},
        {"\x80\x05\x97.", 4, "NEXT_BUFFER", 2},
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct pk_doc d;
        struct gm_error e;
        assert_int_equal(parse(&d, (const uint8_t *)cases[i].pk, cases[i].len, &e),
                         GM_ERR_UNSUPPORTED);
        assert_non_null(strstr(e.msg, cases[i].name));
        assert_int_equal(e.offset, cases[i].off);
    }
}

static void test_malformed(void **state)
{
    static const struct {
        const char *pk;
        size_t len;
        enum gm_status st;
    } cases[] = {
        {"", 0, GM_ERR_FORMAT},
        {"\x80\x04", 2, GM_ERR_FORMAT},                   /* no STOP */
        {"\x80\x04.", 3, GM_ERR_FORMAT},                  /* STOP, empty stack */
        {"\x80\x04NN.", 5, GM_ERR_FORMAT},                /* two values at STOP */
        {"\x80\x04X\xff\xff\xff\xff.", 8, GM_ERR_FORMAT}, /* lying length */
        {"\x80\x04\x8c\x05"
         "ab.",
         6, GM_ERR_FORMAT},
        {"\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\x7fN.", 13, GM_ERR_FORMAT},
        {"\x80\x04\x8a\xff\x00.", 6, GM_ERR_FORMAT},
        {"\x80\x04\x8b\xff\xff\xff\xff.", 8, GM_ERR_FORMAT},
        {"\x80\x04h\x00.", 5, GM_ERR_FORMAT},              /* empty memo slot */
        {"\x80\x02Nr\xff\xff\xff\x7f.", 9, GM_ERR_FORMAT}, /* memo index far away */
        {"\x80\x04"
         "e.",
         4, GM_ERR_FORMAT}, /* APPENDS without MARK */
        {"\x80\x04"
         "(e.",
         5, GM_ERR_FORMAT},                  /* APPENDS without list */
        {"\x80\x04N(Ke.", 7, GM_ERR_FORMAT}, /* truncated BININT1 */
        {"\x80\x04}K\x01"
         "a.",
         7, GM_ERR_FORMAT},                      /* APPEND to a dict */
        {"\x80\x04}(K\x01u.", 7, GM_ERR_FORMAT}, /* odd SETITEMS */
        {"\x80\x04\xff.", 4, GM_ERR_FORMAT},     /* unknown opcode */
        {"\x80\x07N.", 4, GM_ERR_UNSUPPORTED},   /* protocol 7 */
        {"\x80\x04"
         "1.",
         4, GM_ERR_FORMAT},                    /* POP_MARK without MARK */
        {"\x80\x04I12x\n.", 8, GM_ERR_FORMAT}, /* bad INT */
        {"\x80\x04"
         "0.",
         4, GM_ERR_FORMAT}, /* POP on empty */
        {"\x80\x04)N\x86"
         "a.",
         7, GM_ERR_FORMAT}, /* APPEND to a tuple */
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct pk_doc d;
        struct gm_error e;
        enum gm_status st = parse(&d, (const uint8_t *)cases[i].pk, cases[i].len, &e);
        if (st != cases[i].st)
            print_error("case %zu: status %d, want %d (%s)\n", i, st, cases[i].st, e.msg);
        assert_int_equal(st, cases[i].st);
        assert_true(e.msg[0] != '\0');
    }
}

static void test_limits(void **state)
{
    struct pk_doc d;
    struct gm_error e;
    struct pk_opts o;
    uint8_t buf[5000];
    (void)state;
    memset(&o, 0, sizeof o);
    /* 3000 MARKs */
    buf[0] = 0x80;
    buf[1] = 4;
    memset(buf + 2, '(', 3000);
    buf[3002] = '.';
    assert_int_equal(pk_parse(&d, buf, 3003, &o, &e), GM_ERR_LIMIT);
    /* 4000 lists on the stack with a stack cap of 1000 */
    memset(buf + 2, ']', 4000);
    buf[4002] = '.';
    o.max_stack = 1000;
    assert_int_equal(pk_parse(&d, buf, 4003, &o, &e), GM_ERR_LIMIT);
    /* memory limit */
    o.max_stack = 0;
    o.memory_limit = 4096;
    assert_int_equal(pk_parse(&d, buf, 4003, &o, &e), GM_ERR_LIMIT);
}

static void test_alloc_failures(void **state)
{
    static const uint8_t pk[] = {0x80, 4, '}', 0x94, '(', 0x8c, 1, 'a', 0x94, ']', 0x94, '(',
                                 'K',  1, 'K', 2,    'e', 0x8c, 1, 'b', 'h',  2,   'u',  '.'};
    bool ok = false;
    (void)state;
    for (long n = 0; n < 200 && !ok; n++) {
        struct pk_doc d;
        struct gm_error e;
        enum gm_status st;
        gm_alloc_fail_after(n);
        st = pk_parse(&d, pk, sizeof pk, NULL, &e);
        gm_alloc_fail_after(-1);
        assert_true(st == GM_OK || st == GM_ERR_NOMEM);
        if (st == GM_OK) {
            ok = true;
            pk_doc_release(&d);
        }
    }
    assert_true(ok);
}

struct stream_state {
    size_t records, ends, named;
};

/* Streams every item of device_traces-like lists; names the first list value of a record
 * 7. */
static enum gm_status on_rec(void *ctx, uint32_t list_index, const struct pk_record *r,
                             struct gm_error *err)
{
    struct stream_state *h = ctx;
    (void)err;
    assert_int_equal(list_index, 0);
    h->records++;
    for (uint32_t k = 0; r->is_dict && k < r->n; k++)
        if (pk_node_of_kind(r->pairs[2 * k + 1], PK_LIST) &&
            pk_record_can_name(r, r->pairs[2 * k + 1]))
            h->named += pk_record_name(r, r->pairs[2 * k + 1], 7);
    return GM_OK;
}

static void on_end(void *ctx, uint32_t list_index, bool commit)
{
    struct stream_state *h = ctx;
    (void)list_index;
    assert_true(commit);
    h->ends++;
}

static void test_stream(void **state)
{
    struct pk_doc d;
    struct gm_error e;
    struct pk_opts o;
    struct stream_state h = {0, 0, 0};
    struct pk_stream s = {"k", 8, on_rec, on_end, &h, false};
    uint32_t idx;
    /* {"k": [[{}, {}]]} with memoized dicts; then a BINGET of a consumed dict must fail */
    static const uint8_t ok_pk[] = {0x80, 4,   '}', 0x94, 0x8c, 1,    'k', 0x94, ']', 0x94, ']',
                                    0x94, '(', '}', 0x94, '}',  0x94, 'e', 'a',  's', '.'};
    static const uint8_t bad_pk[] = {0x80, 4,    '}', 0x94, 0x8c, 1,   'k',  0x94,
                                     ']',  0x94, ']', 0x94, '(',  '}', 0x94, '}',
                                     0x94, 'e',  'a', 's',  'h',  4,   0x86, '.'};
    (void)state;
    memset(&o, 0, sizeof o);
    o.stream = &s;
    assert_int_equal(pk_parse(&d, ok_pk, sizeof ok_pk, &o, &e), GM_OK);
    assert_int_equal(h.records, 2);
    assert_int_equal(h.ends, 1);
    {
        const struct pk_node *outer = pk_node(pk_dict_get(&d, pk_node(d.root), "k"));
        assert_non_null(outer);
        assert_int_equal(outer->len, 1);
        assert_true(pk_list_streamed(outer->items[0], &idx));
        assert_int_equal(idx, 0);
        assert_int_equal(pk_node(outer->items[0])->len, 0);
        assert_false(pk_list_streamed(d.root, &idx));
    }
    pk_doc_release(&d);
    assert_int_equal(pk_parse(&d, bad_pk, sizeof bad_pk, &o, &e), GM_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "consumed"));
    /* the general reader alone streams the same */
    h.records = h.ends = 0;
    o.general_only = true;
    assert_int_equal(pk_parse(&d, ok_pk, sizeof ok_pk, &o, &e), GM_OK);
    assert_int_equal(h.records, 2);
    pk_doc_release(&d);
}

static void test_record_name(void **state)
{
    struct pk_doc d;
    struct gm_error e;
    struct pk_opts o;
    struct stream_state h = {0, 0, 0};
    struct pk_stream s = {"k", 8, on_rec, on_end, &h, false};
    const struct pk_node *t;
    /* ({"k": [[{"f": L}]]}, L) where L = [1] is first seen inside the streamed record (memo
     * slot 6), then fetched again: it comes back as the name the consumer gave it */
    static const uint8_t pk[] = {0x80, 4,   '}', 0x94, 0x8c, 1,   'k', 0x94, ']',  0x94, ']',
                                 0x94, '(', '}', 0x94, 0x8c, 1,   'f', 0x94, ']',  0x94, 'K',
                                 1,    'a', 's', 'e',  'a',  's', 'h', 6,    0x86, '.'};
    (void)state;
    memset(&o, 0, sizeof o);
    o.stream = &s;
    assert_int_equal(pk_parse(&d, pk, sizeof pk, &o, &e), GM_OK);
    assert_int_equal(h.records, 1);
    assert_int_equal(h.named, 1);
    t = pk_node_of_kind(d.root, PK_TUPLE);
    assert_non_null(t);
    assert_true(pk_is_token(t->items[1]));
    assert_int_equal(pk_token_id(t->items[1]), 7);
    pk_doc_release(&d);
}

/* What a record's list values came as: 'L' a list, 'T' a name (pk_token), 'O' anything else. */
struct run_state {
    char kinds[16];
    size_t n;
};

/* Names every list value 7 (a name its items decide, trivially: the same for all). */
static enum gm_status on_run_rec(void *ctx, uint32_t list_index, const struct pk_record *r,
                                 struct gm_error *err)
{
    struct run_state *h = ctx;
    (void)list_index;
    (void)err;
    for (uint32_t k = 0; r->is_dict && k < r->n; k++) {
        pk_val v = r->pairs[2 * k + 1];
        char c = pk_node_of_kind(v, PK_LIST)             ? 'L'
                 : pk_is_token(v) && pk_token_id(v) == 7 ? 'T'
                                                         : 'O';
        if (h->n + 1 < sizeof(h->kinds))
            h->kinds[h->n++] = c;
        if (pk_record_can_name(r, v))
            (void)pk_record_name(r, v, 7);
    }
    return GM_OK;
}

static void on_run_end(void *ctx, uint32_t list_index, bool commit)
{
    (void)ctx;
    (void)list_index;
    (void)commit;
}

/* Parse 'pk' streaming "k" (names_by_items as given) into h, the flat reader reading
 * 'flat_batches' batches; the root must be a pair whose second item is the name 7 (the memo
 * slot of the second streamed record's list). */
static void parse_runs(const uint8_t *pk, size_t n, bool by_items, uint64_t flat_batches,
                       struct run_state *h)
{
    struct pk_doc d;
    struct gm_error e;
    struct pk_opts o;
    struct pk_stream s = {"k", 8, on_run_rec, on_run_end, h, by_items};
    const struct pk_node *t;
    memset(&o, 0, sizeof o);
    memset(h, 0, sizeof(*h));
    o.stream = &s;
    assert_int_equal(pk_parse(&d, pk, n, &o, &e), GM_OK);
    assert_int_equal(d.n_flat_batches, flat_batches);
    t = pk_node_of_kind(d.root, PK_TUPLE);
    assert_non_null(t);
    assert_true(pk_is_token(t->items[1]));
    assert_int_equal(pk_token_id(t->items[1]), 7);
    pk_doc_release(&d);
}

/* The flat reader's named runs (pk_stream.names_by_items): a list whose items are the same
 * run of memo references as a list named before under the same key comes as that name, and
 * its memo slot reads as the name; never when the stream did not ask, when a slot of the run
 * was written again since, under another key, or after the flat reader gave a batch up. */
static void test_named_runs(void **state)
{
    /* {"x": ["a", "b"], "k": [[{"f": None}, {"f": L}, {"f": L}, {"f": L}]], "z": 40 * "p"}
     * with each L = ["a", "b"] a new list of BINGETs of slots 3 and 4, in three batches
     * (the general reader reads the first, which makes the list a stream; the flat reader
     * the others: two records, then one); between the last two batches a string is put into
     * a new slot; then the memo slot of the second record's list (13) fetched again */
    static const uint8_t run_plain[] = {
        128, 4,   '}', 148, '(', 140, 1,   'x', 148, ']', 148, '(', 140, 1,   'a', 148, 140, 1,
        'b', 148, 'e', 140, 1,   'k', 148, ']', 148, ']', 148, '(', '}', 148, '(', 140, 1,   'f',
        148, 'N', 'u', 'e', '(', '}', 148, '(', 'h', 9,   ']', 148, '(', 'h', 3,   'h', 4,   'e',
        'u', '}', 148, '(', 'h', 9,   ']', 148, '(', 'h', 3,   'h', 4,   'e', 'u', 'e', 140, 1,
        'c', 'q', 14,  '0', '(', '}', 148, '(', 'h', 9,   ']', 148, '(', 'h', 3,   'h', 4,   'e',
        'u', 'e', 'a', 140, 1,   'z', 140, '(', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p',
        'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p',
        'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'u', 'h', 13,  134, '.'};
    static const uint8_t run_abandoned[] = {
        128, 4,   '}', 148, '(', 140, 1,   'x', 148, ']', 148, '(', 140, 1,   'a', 148, 140, 1,
        'b', 148, 'e', 140, 1,   'k', 148, ']', 148, ']', 148, '(', '}', 148, '(', 140, 1,   'f',
        148, 'N', 'u', 'e', '(', '}', 148, '(', 'h', 9,   ']', 148, '(', 'h', 3,   'h', 4,   'e',
        'u', '}', 148, '(', 'h', 9,   ']', 148, '(', 'h', 3,   'h', 4,   'e', 'u', '}', 148, '(',
        'h', 9,   'G', 0,   0,   0,   0,   0,   0,   0,   0,   'u', 'e', 140, 1,   'c', 'q', 15,
        '0', '(', '}', 148, '(', 'h', 9,   ']', 148, '(', 'h', 3,   'h', 4,   'e', 'u', 'e', 'a',
        140, 1,   'z', 140, '(', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p',
        'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p',
        'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'u', 'h', 13,  134, '.'};
    static const uint8_t run_other_key[] = {
        128, 4,   '}', 148, '(', 140, 1,   'x', 148, ']', 148, '(', 140, 1,   'a', 148, 140,
        1,   'b', 148, 'e', 140, 1,   'k', 148, ']', 148, ']', 148, '(', '}', 148, '(', 140,
        1,   'f', 148, 'N', 'u', 'e', '(', '}', 148, '(', 'h', 9,   ']', 148, '(', 'h', 3,
        'h', 4,   'e', 'u', '}', 148, '(', 'h', 9,   ']', 148, '(', 'h', 3,   'h', 4,   'e',
        'u', 'e', 140, 1,   'c', 'q', 14,  '0', '(', '}', 148, '(', 140, 1,   'g', 148, ']',
        148, '(', 'h', 3,   'h', 4,   'e', 'u', 'e', 'a', 140, 1,   'z', 140, '(', 'p', 'p',
        'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p',
        'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p', 'p',
        'p', 'p', 'p', 'p', 'u', 'h', 13,  134, '.'};
    uint8_t run_overwritten[sizeof run_plain];
    struct run_state h;
    (void)state;
    parse_runs(run_plain, sizeof run_plain, true, 2, &h);
    assert_string_equal(h.kinds, "OLTT");
    parse_runs(run_plain, sizeof run_plain, false, 2, &h);
    assert_string_equal(h.kinds, "OLLL");
    /* the same, but the string between the batches is put into slot 3 (BINPUT 3, not 14, at
     * byte 73): the last batch's list reads "c", "b" and must come as a list */
    memcpy(run_overwritten, run_plain, sizeof run_plain);
    assert_int_equal(run_overwritten[73], 'q');
    run_overwritten[74] = 3;
    parse_runs(run_overwritten, sizeof run_overwritten, true, 2, &h);
    assert_string_equal(h.kinds, "OLTL");
    /* a third record with a float value in the second batch: the flat reader gives the
     * batch up after two records, the general reader reads all three, then the flat reader
     * the last batch, whose list comes as a list */
    parse_runs(run_abandoned, sizeof run_abandoned, true, 1, &h);
    assert_string_equal(h.kinds, "OLTLLOL");
    /* the last record's list under another key ("g", a new string): a list */
    parse_runs(run_other_key, sizeof run_other_key, true, 2, &h);
    assert_string_equal(h.kinds, "OLTL");
}

/* pk_short_str_word(): one word per short SHORT_BINUNICODE string, equal for equal strings
 * (two literals of "N/A"), different for different ones of the same length; 0 for a string
 * of more than 6 bytes, a non-string, and a string within 8 bytes of the end of the input;
 * pk_short_str_is_word() says the same of each value and word. */
static void test_short_str_word(void **state)
{
    /* ("N/A", "N/A", "N/B", "abcdefg", 1, "abcdef", "abcdef", "abcdeX", "xy"): a 6-byte
     * string fills the whole word; the last string lies within 8 bytes of the end */
    static const uint8_t pk[] = {0x80, 4,    '(', 0x8c, 3,   'N',  '/',  'A', 0x8c, 3,    'N', '/',
                                 'A',  0x8c, 3,   'N',  '/', 'B',  0x8c, 7,   'a',  'b',  'c', 'd',
                                 'e',  'f',  'g', 'K',  1,   0x8c, 6,    'a', 'b',  'c',  'd', 'e',
                                 'f',  0x8c, 6,   'a',  'b', 'c',  'd',  'e', 'f',  0x8c, 6,   'a',
                                 'b',  'c',  'd', 'e',  'X', 0x8c, 2,    'x', 'y',  't',  '.'};
    struct pk_doc d;
    struct gm_error e;
    const struct pk_node *t;
    (void)state;
    assert_int_equal(pk_parse(&d, pk, sizeof pk, NULL, &e), GM_OK);
    t = pk_node_of_kind(d.root, PK_TUPLE);
    assert_non_null(t);
    assert_int_equal(t->len, 9);
    assert_int_not_equal(pk_short_str_word(&d, t->items[0]), 0);
    assert_int_equal(pk_short_str_word(&d, t->items[0]), pk_short_str_word(&d, t->items[1]));
    assert_int_not_equal(pk_short_str_word(&d, t->items[2]), 0);
    assert_int_not_equal(pk_short_str_word(&d, t->items[0]), pk_short_str_word(&d, t->items[2]));
    assert_int_equal(pk_short_str_word(&d, t->items[3]), 0);
    assert_int_equal(pk_short_str_word(&d, t->items[4]), 0);
    assert_int_not_equal(pk_short_str_word(&d, t->items[5]), 0);
    assert_int_equal(pk_short_str_word(&d, t->items[5]), pk_short_str_word(&d, t->items[6]));
    assert_int_not_equal(pk_short_str_word(&d, t->items[5]), pk_short_str_word(&d, t->items[7]));
    assert_int_equal(pk_short_str_word(&d, t->items[8]), 0);
    /* pk_short_str_is_word(v, w) for each word w given above: whether v's word is w */
    for (uint32_t j = 0; j < t->len; j++) {
        uint64_t w = pk_short_str_word(&d, t->items[j]);
        for (uint32_t i = 0; w && i < t->len; i++)
            assert_int_equal(pk_short_str_is_word(&d, t->items[i], w),
                             pk_short_str_word(&d, t->items[i]) == w);
    }
    pk_doc_release(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ints),
        cmocka_unit_test(test_strings_floats_consts),
        cmocka_unit_test(test_containers_and_memo),
        cmocka_unit_test(test_many_memoized_strings),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_alloc_failures),
        cmocka_unit_test(test_stream),
        cmocka_unit_test(test_record_name),
        cmocka_unit_test(test_named_runs),
        cmocka_unit_test(test_short_str_word),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
