/* SPDX-License-Identifier: MIT */
/* test_outbuf.c - the buffered writer's own number formatting writes exactly what printf
 * and gm_format_bytes() write: edges of every unit, ties of the two-decimal rounding, a
 * million pseudo-random values of every magnitude (also through the formats that write into
 * a room of known size), and the memo of a field's digits along sequences that take each of
 * its routes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/outbuf.h"
#include "gpumem/units.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rnd_state = 88172645463325252ULL;

static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

static void check_iec(uint64_t v, unsigned width)
{
    char want[64], fb[48], got[64];
    char *end = gm_fmt_iec(got, v, width);
    *end = '\0';
    snprintf(want, sizeof(want), "%*s", (int)width,
             gm_format_bytes(fb, sizeof(fb), v, GM_UNITS_IEC));
    if (strcmp(want, got)) {
        fprintf(stderr, "bytes %" PRIu64 ": want '%s', got '%s'\n", v, want, got);
        fail();
    }
}

static void test_bytes(void **state)
{
    (void)state;
    for (unsigned sh = 0; sh < 64; sh++) {
        uint64_t p = (uint64_t)1 << sh;
        for (int64_t d = -3; d <= 3; d++)
            check_iec(p + (uint64_t)d, 11);
    }
    /* where %.2f rounds across .xx5 and where the value steps up to the next unit */
    for (uint64_t k = 1; k < 200000; k++) {
        check_iec(k * 1024 / 200 + 1, 0);
        check_iec(1024 * 1024 - k, 11);
        check_iec(k * 5 + 1024, 11);
    }
    check_iec(UINT64_MAX, 11);
    check_iec(0, 11);
    for (int i = 0; i < 1000000; i++)
        check_iec(rnd() >> (rnd() % 64), 11);
}

/* The formats with room write what printf writes, and nothing past their room. */
static void check_room(uint64_t v)
{
    char want[32], got[2 * GM_FMT_ROOM + 2], *end;
    int64_t sv = (int64_t)v;
    memset(got, 'Z', sizeof(got));
    end = gm_fmt_u64_room(got, v);
    for (size_t i = GM_FMT_ROOM; i < sizeof(got); i++)
        assert_int_equal(got[i], 'Z');
    *end = '\0';
    snprintf(want, sizeof(want), "%" PRIu64, v);
    assert_string_equal(want, got);
    memset(got, 'Z', sizeof(got));
    end = gm_fmt_i64_room(got, sv);
    for (size_t i = GM_FMT_ROOM + 1; i < sizeof(got); i++)
        assert_int_equal(got[i], 'Z');
    *end = '\0';
    snprintf(want, sizeof(want), "%" PRId64, sv);
    assert_string_equal(want, got);
}

static void test_ints(void **state)
{
    char want[80], got[80], *end;
    (void)state;
    /* each side of every digit-count step, in decimal and in hex (the count is computed, not
     * counted digit by digit) */
    for (uint64_t p10 = 1, p16 = 1, i = 0; i < 20; i++, p10 *= 10, p16 = i < 16 ? p16 * 16 : 0) {
        uint64_t vs[] = {p10 - 1, p10, p10 + 1, p16 - 1, p16, p16 + 1, UINT64_MAX};
        for (size_t j = 0; j < sizeof(vs) / sizeof(vs[0]); j++) {
            end = gm_fmt_u64(got, vs[j], 0);
            *end = '\0';
            snprintf(want, sizeof(want), "%" PRIu64, vs[j]);
            assert_string_equal(want, got);
            end = gm_fmt_hex(got, vs[j], 0);
            *end = '\0';
            snprintf(want, sizeof(want), "%" PRIx64, vs[j]);
            assert_string_equal(want, got);
            check_room(vs[j]);
            check_room(0 - vs[j]);
        }
    }
    for (int i = 0; i < 200000; i++) {
        uint64_t v = rnd() >> (rnd() % 64);
        unsigned w = (unsigned)(rnd() % 22);
        end = gm_fmt_u64(got, v, w);
        *end = '\0';
        snprintf(want, sizeof(want), "%*" PRIu64, (int)w, v);
        assert_string_equal(want, got);
        end = gm_fmt_hex(got, v, w);
        *end = '\0';
        snprintf(want, sizeof(want), "%0*" PRIx64, (int)w, v);
        assert_string_equal(want, got);
        {
            int64_t sv = (int64_t)(v >> 1) * ((rnd() & 1) ? -1 : 1);
            end = gm_fmt_i64(got, sv);
            *end = '\0';
            snprintf(want, sizeof(want), "%" PRId64, sv);
            assert_string_equal(want, got);
        }
        check_room(v);
        check_room(rnd());
        end = gm_fmt_i64(got, INT64_MIN);
        *end = '\0';
        assert_string_equal(got, "-9223372036854775808");
    }
    for (int i = 0; i < 200000; i++) {
        int64_t us = (int64_t)(rnd() >> (rnd() % 64));
        if (rnd() & 1)
            us = -us;
        end = gm_fmt_seconds(got, us, 12);
        *end = '\0';
        snprintf(want, sizeof(want), "%+12.6f", (double)us / 1e6);
        if (strcmp(want, got)) {
            fprintf(stderr, "us %" PRId64 ": want '%s', got '%s'\n", us, want, got);
            fail();
        }
    }
}

/* The memo writes its key and what printf writes for a field's values in sequence, by each
 * of its routes (the same value, one more, the same digits above the last eight, or above
 * the last nine or ten, anew), and nothing past its room. */
static char *memo_short(char *p, uint64_t v, struct gm_fmt_memo *m)
{
    return gm_fmt_u64_memo_short(p, v, m);
}

static char *memo_long(char *p, uint64_t v, struct gm_fmt_memo *m)
{
    return gm_fmt_u64_memo(p, v, m);
}

/* The route test_memo() checks: gm_fmt_u64_memo, or its short copy for a short key. */
static char *(*memo_fmt)(char *p, uint64_t v, struct gm_fmt_memo *m) = memo_long;

static void check_memo(struct gm_fmt_memo *m, const char *key, uint64_t v)
{
    char want[64], got[2 * GM_FMT_MEMO_ROOM], *end;
    memset(got, 'Z', sizeof(got));
    end = memo_fmt(got, v, m);
    for (size_t i = GM_FMT_MEMO_ROOM; i < sizeof(got); i++)
        assert_int_equal(got[i], 'Z');
    *end = '\0';
    snprintf(want, sizeof(want), "%s%" PRIu64, key, v);
    if (strcmp(want, got)) {
        fprintf(stderr, "memo %" PRIu64 ": want '%s', got '%s'\n", v, want, got);
        fail();
    }
}

/* The counting route writes what printf writes, from any value before. */
static void test_memo_next(void **state)
{
    struct gm_fmt_memo m;
    char want[64], got[2 * GM_FMT_MEMO_ROOM], *end;
    static const uint64_t starts[] = {0, 5, 99, 12345, 99999999, UINT64_C(9999999999999999999)};
    (void)state;
    assert_true(gm_fmt_memo_init(&m, ",\"index\":"));
    for (size_t si = 0; si < sizeof(starts) / sizeof(starts[0]); si++)
        for (uint64_t v = starts[si]; v - starts[si] < 300 && v >= starts[si]; v++) {
            end = gm_fmt_u64_memo_next(got, v, &m);
            *end = '\0';
            snprintf(want, sizeof(want), ",\"index\":%" PRIu64, v);
            assert_string_equal(got, want);
        }
    /* the short copy, nothing written past it but on the slow route */
    assert_true(gm_fmt_memo_init(&m, ",\"index\":"));
    for (size_t si = 0; si < sizeof(starts) / sizeof(starts[0]); si++)
        for (uint64_t v = starts[si]; v - starts[si] < 300 && v >= starts[si]; v++) {
            memset(got, 'Z', sizeof(got));
            end = gm_fmt_u64_memo_next_copy(got, v, &m, GM_FMT_SHORT_ROOM);
            for (size_t i = GM_FMT_MEMO_ROOM; i < sizeof(got); i++)
                assert_int_equal(got[i], 'Z');
            *end = '\0';
            snprintf(want, sizeof(want), ",\"index\":%" PRIu64, v);
            assert_string_equal(got, want);
        }
    /* one more than the largest wraps to 0 */
    end = gm_fmt_u64_memo_next(got, UINT64_MAX, &m);
    end = gm_fmt_u64_memo_next(got, 0, &m);
    *end = '\0';
    assert_string_equal(got, ",\"index\":0");
}

/* A key outside GM_FMT_KEY_MIN..GM_FMT_KEY_MAX bytes is refused and the memo left as it
 * was (a shorter one would put the text's last eight bytes before the text: up to seven
 * bytes before the output pointer); the bounds themselves are taken. */
static void test_memo_key_bounds(void **state)
{
    static const char shortest[] = ",\"ke\":", longest[] = ",\"a_key_of_24_bytes___\":";
    static const char too_long[] = ",\"a_key_of_25_bytes____\":";
    struct gm_fmt_memo m, before;
    char got[2 * GM_FMT_MEMO_ROOM], *end;
    (void)state;
    assert_int_equal(strlen(shortest), GM_FMT_KEY_MIN - 1);
    assert_int_equal(strlen(too_long), GM_FMT_KEY_MAX + 1);
    assert_true(gm_fmt_memo_init(&m, ",\"key\":"));
    before = m;
    assert_false(gm_fmt_memo_init(&m, shortest));
    assert_false(gm_fmt_memo_init(&m, ""));
    assert_false(gm_fmt_memo_init(&m, too_long));
    assert_memory_equal(&m, &before, sizeof(m));
    end = gm_fmt_u64_memo(got, 7, &m); /* still the memo it was */
    *end = '\0';
    assert_string_equal(got, ",\"key\":7");
    assert_true(gm_fmt_memo_init(&m, longest));
    end = gm_fmt_u64_memo(got, 42, &m);
    *end = '\0';
    assert_string_equal(got, ",\"a_key_of_24_bytes___\":42");
}

static void test_memo(void **state)
{
    /* the shortest key (the text's last eight bytes then reach into it for one digit), a
     * trace's key, the longest key; then the short copy with the shortest key and the
     * longest short key */
    static const char *const keys[] = {",\"key\":", ",\"allocated_bytes\":",
                                       ",\"a_key_of_24_bytes___\":", ",\"key\":", ",\"a_key_12\":"};
    (void)state;
    assert_int_equal(strlen(keys[0]), GM_FMT_KEY_MIN);
    assert_int_equal(strlen(keys[2]), GM_FMT_KEY_MAX);
    assert_int_equal(strlen(keys[4]), GM_FMT_SHORT_KEY);
    for (size_t ki = 0; ki < sizeof(keys) / sizeof(keys[0]); ki++) {
        const char *key = keys[ki];
        struct gm_fmt_memo m;
        uint64_t v = 0;
        memo_fmt = ki < 3 ? memo_long : memo_short;
        assert_true(gm_fmt_memo_init(&m, key));
        check_memo(&m, key, 0);
        check_memo(&m, key, 0);
        /* an index: each step one more, with its carries */
        for (uint64_t k = 1; k < 1200; k++)
            check_memo(&m, key, k);
        /* counting up across every digit-count step, and each 10^8 block's end */
        for (uint64_t p10 = 10; p10 <= UINT64_C(10000000000000000000); p10 *= 10) {
            for (uint64_t k = p10 - 3; k < p10 + 3; k++)
                check_memo(&m, key, k);
            for (uint64_t k = p10 + 99999997; k < p10 + 100000003; k++)
                check_memo(&m, key, k);
            if (p10 > UINT64_MAX / 10)
                break;
        }
        for (uint64_t k = UINT64_MAX - 3; k != 0; k++)
            check_memo(&m, key, k);
        check_memo(&m, key, UINT64_MAX);
        check_memo(&m, key, 1);
        /* steps of a few 10^8 either way that keep the digits above the last nine or ten
         * (the wide span) or leave them, from numbers of every length from nine digits, and
         * near 2^64 where a span would reach past it */
        for (uint64_t p10 = 100000000u; p10 <= UINT64_C(10000000000000000000); p10 *= 10) {
            static const int64_t steps[] = {300000001, -200000007, 9,          700000000,
                                            -1,        2500000000, -900000000, 100000000};
            v = p10 + 123456789u;
            check_memo(&m, key, v);
            for (int r = 0; r < 40; r++) {
                v += (uint64_t)steps[r % 8];
                check_memo(&m, key, v);
            }
            if (p10 > UINT64_MAX / 10)
                break;
        }
        for (uint64_t k = UINT64_MAX - UINT64_C(12000000000); k < UINT64_MAX - 1000000000u;
             k += 700000001u) {
            check_memo(&m, key, k);
            check_memo(&m, key, k - UINT64_MAX / 2);
            check_memo(&m, key, k);
            check_memo(&m, key, k + 100000000u);
        }
        check_memo(&m, key, 5);
        /* a random walk: mostly small steps either way, now and then a jump of any size */
        for (int i = 0; i < (ki % 3 ? 300000 : 2000000); i++) {
            uint64_t r = rnd();
            if ((r & 15) == 0)
                v = rnd() >> (rnd() % 64);
            else if ((r & 15) < 4)
                v += 1;
            else if ((r & 15) < 6)
                ; /* the same again */
            else
                v += (r & 16) ? (r >> 40) >> (r % 24) : 0 - ((r >> 40) >> (r % 24));
            check_memo(&m, key, v);
        }
    }
}

/* The padded writers write what printf writes and nothing past their room: the padding and
 * the hex digits a word at a time (seven bytes past the end), seconds GM_FMT_ROOM past the
 * end, a byte count 16 + width from the start. */
/* The value slots write the key and what printf writes, nothing past GM_FMT_MEMO_ROOM:
 * from their first state (every slot holds 0, so 0 is found in whichever slot), for values
 * found in their slot, for values that take a slot from another (with few slots almost all
 * collide), and after the memo behind them moved on to other values. */
static void test_slots(void **state)
{
    struct gm_fmt_memo m, ms;
    struct gm_fmt_slot slots[4], slots_short[4];
    char want[64], got[2 * GM_FMT_MEMO_ROOM], *end;
    uint64_t set[24];
    (void)state;
    assert_true(gm_fmt_memo_init(&m, ",\"allocated_bytes\":"));
    gm_fmt_slots_init(slots, 4, &m);
    assert_true(gm_fmt_memo_init(&ms, ",\"a_key_12\":"));
    gm_fmt_slots_init(slots_short, 4, &ms);
    for (size_t i = 0; i < 24; i++) {
        unsigned shift = (unsigned)(rnd() % 64);
        set[i] = i < 4 ? (uint64_t)i : rnd() >> shift; /* 0-3, and numbers of every length */
    }
    set[4] = UINT64_MAX;
    set[5] = UINT64_C(10000000000000000000);
    for (int round = 0; round < 6000; round++) {
        /* first each value in turn, then a few at random (hits), then any value */
        uint64_t v = round < 24     ? set[round]
                     : round < 3000 ? set[rnd() % (round < 1500 ? 3 : 24)]
                                    : rnd() >> (rnd() % 64);
        memset(got, 'Z', sizeof(got));
        end = gm_fmt_u64_slot(got, v, slots, 2, &m);
        for (size_t i = GM_FMT_MEMO_ROOM; i < sizeof(got); i++)
            assert_int_equal(got[i], 'Z');
        *end = '\0';
        snprintf(want, sizeof(want), ",\"allocated_bytes\":%" PRIu64, v);
        if (strcmp(want, got)) {
            fprintf(stderr, "slot %" PRIu64 ": want '%s', got '%s'\n", v, want, got);
            fail();
        }
        /* the short copy of a short key's slots */
        memset(got, 'Z', sizeof(got));
        end = gm_fmt_u64_slot_short(got, v, slots_short, 2, &ms);
        for (size_t i = GM_FMT_MEMO_ROOM; i < sizeof(got); i++)
            assert_int_equal(got[i], 'Z');
        *end = '\0';
        snprintf(want, sizeof(want), ",\"a_key_12\":%" PRIu64, v);
        if (strcmp(want, got)) {
            fprintf(stderr, "short slot %" PRIu64 ": want '%s', got '%s'\n", v, want, got);
            fail();
        }
    }
}

static void check_written(const char *buf, const char *end, size_t room_end, const char *want)
{
    size_t n = (size_t)(end - buf);
    if (n != strlen(want) || memcmp(buf, want, n)) {
        fprintf(stderr, "want '%s', got '%.*s'\n", want, (int)n, buf);
        fail();
    }
    for (size_t i = room_end; i < 128; i++)
        assert_int_equal(buf[i], 'Z');
}

static void test_padded_room(void **state)
{
    char got[128], want[128], fb[48];
    char *end;
    (void)state;
    for (int i = 0; i < 300000; i++) {
        uint64_t v = rnd() >> (rnd() % 64);
        unsigned w = (unsigned)(rnd() % 40);
        int64_t us = (int64_t)(v >> (rnd() % 20)) * ((rnd() & 1) ? -1 : 1);
        static const char *const names[] = {"", "oom", "free_requested", "a_name_of_sixteen"};
        const char *s = names[rnd() % 4];

        memset(got, 'Z', sizeof(got));
        end = gm_fmt_hex(got, v, w);
        snprintf(want, sizeof(want), "%0*" PRIx64, (int)w, v);
        check_written(got, end, (size_t)(end - got) + 7, want);

        memset(got, 'Z', sizeof(got));
        end = gm_fmt_left(got, s, strlen(s), w);
        snprintf(want, sizeof(want), "%-*s", (int)w, s);
        check_written(got, end, (size_t)(end - got) + 7, want);

        if ((us < 0 ? 0 - (uint64_t)us : (uint64_t)us) < ((uint64_t)1 << 52)) {
            memset(got, 'Z', sizeof(got));
            end = gm_fmt_seconds(got, us, w);
            snprintf(want, sizeof(want), "%+*.6f", (int)w, (double)us / 1e6);
            check_written(got, end, (size_t)(end - got) + GM_FMT_ROOM, want);
        }

        memset(got, 'Z', sizeof(got));
        end = gm_fmt_iec(got, v, w);
        snprintf(want, sizeof(want), "%*s", (int)w,
                 gm_format_bytes(fb, sizeof(fb), v, GM_UNITS_IEC));
        check_written(got, end, 16 + w, want);
    }
}

static void test_writer(void **state)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    static struct gm_outbuf o;
    char big[100000];
    (void)state;
    assert_non_null(f);
    memset(big, 'x', sizeof(big));
    gm_outbuf_init(&o, f);
    for (int i = 0; i < 3000; i++) {
        char *p = gm_outbuf_reserve(&o, 64);
        p = gm_fmt_u64(p, (uint64_t)i, 5);
        p = gm_fmt_lit(p, "|\n");
        gm_outbuf_commit(&o, p);
    }
    gm_outbuf_put(&o, big, sizeof(big));
    assert_true(gm_outbuf_flush(&o));
    fclose(f);
    assert_int_equal(len, 3000 * 7 + sizeof(big));
    assert_memory_equal(buf, "    0|\n    1|\n", 14);
    free(buf);
    /* a write error sticks */
    f = fopen("/dev/full", "w");
    if (f) {
        gm_outbuf_init(&o, f);
        gm_outbuf_put(&o, big, sizeof(big));
        assert_false(gm_outbuf_flush(&o) && fflush(f) == 0);
        fclose(f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes),       cmocka_unit_test(test_ints),
        cmocka_unit_test(test_memo),        cmocka_unit_test(test_memo_next),
        cmocka_unit_test(test_padded_room), cmocka_unit_test(test_writer),
        cmocka_unit_test(test_slots),       cmocka_unit_test(test_memo_key_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
