/* SPDX-License-Identifier: MIT */
/* outbuf.c - a buffered text writer with its own number formatting (see gpumem/outbuf.h).
 *
 * The one subtle case is "%.2f" of a double, which gm_format_bytes() prints: printf rounds
 * the exact binary value of the double to two decimals, ties to even.  A double in [0.5,
 * 1024) is m * 2^-k with m < 2^53 and 43 <= k <= 53, so 100 * m fits 64 bits and the
 * rounding is done exactly in integers. */
#include "base/outbuf.h"

#include <inttypes.h>

void gm_outbuf_init(struct gm_outbuf *o, FILE *f)
{
    o->f = f;
    o->n = 0;
    o->failed = false;
}

bool gm_outbuf_flush(struct gm_outbuf *o)
{
    if (!o->failed && o->n && fwrite(o->buf, 1, o->n, o->f) != o->n)
        o->failed = true;
    o->n = 0;
    return !o->failed;
}

void gm_outbuf_put(struct gm_outbuf *o, const char *s, size_t n)
{
    while (n) {
        size_t k = n < GM_OUTBUF_SIZE / 2 ? n : GM_OUTBUF_SIZE / 2;
        gm_outbuf_commit(o, gm_fmt_str(gm_outbuf_reserve(o, k), s, k));
        s += k;
        n -= k;
    }
}

/* n spaces, eight a store (no call to memset for a few columns): up to seven bytes past
 * them are written too. */
static inline char *pad(char *p, size_t n)
{
    for (size_t i = 0; i < n; i += 8)
        gm_store64(p + i, UINT64_C(0x2020202020202020));
    return p + n;
}

char *gm_fmt_left(char *p, const char *s, size_t n, unsigned width)
{
    p = gm_fmt_str(p, s, n);
    return n < width ? pad(p, width - n) : p;
}

/* Digits of v in decimal: the bit length gives log10 within one (1233 / 4096 ~ log10 2),
 * one comparison settles it.  Millions of numbers go through here (a trace, a report's
 * series), so no loop per digit. */
static inline unsigned n_digits(uint64_t v)
{
    static const uint64_t pow10[20] = {1u,
                                       10u,
                                       100u,
                                       1000u,
                                       10000u,
                                       100000u,
                                       1000000u,
                                       10000000u,
                                       100000000u,
                                       1000000000u,
                                       10000000000u,
                                       100000000000u,
                                       1000000000000u,
                                       10000000000000u,
                                       100000000000000u,
                                       1000000000000000u,
                                       10000000000000000u,
                                       100000000000000000u,
                                       1000000000000000000u,
                                       10000000000000000000u};
    unsigned t;
    if (v < 10)
        return 1;
    t = (unsigned)(64 - __builtin_clzll(v)) * 1233u >> 12;
    return t + (v >= pow10[t]);
}

static const char pairs[201] = "00010203040506070809"
                               "10111213141516171819"
                               "20212223242526272829"
                               "30313233343536373839"
                               "40414243444546474849"
                               "50515253545556575859"
                               "60616263646566676869"
                               "70717273747576777879"
                               "80818283848586878889"
                               "90919293949596979899";

/* w < 10^n, n <= 8, in exactly n digits ending at p + n, two digits a step (for a few
 * digits cheaper than making eight). */
static inline char *put_short(char *p, uint32_t w, unsigned n)
{
    char *end = p + n;
    while (end - p >= 2) {
        end -= 2;
        memcpy(end, pairs + 2 * (w % 100), 2);
        w /= 100;
    }
    if (end > p)
        *--end = (char)('0' + w % 10);
    return p + n;
}

/* put_digits() of more than eight digits: the last eight at a time (gm_digits8), the
 * leading ones two at a time. */
static char *put_long(char *p, uint64_t v, unsigned n)
{
    if (n > 16) {
        /* v < 2^64 < 10^20: the leading part is below 10^4 */
        p = put_short(p, (uint32_t)(v / UINT64_C(10000000000000000)), n - 16);
        v %= UINT64_C(10000000000000000);
        n = 16;
    }
    p = put_short(p, (uint32_t)(v / 100000000u), n - 8);
    gm_store64(p, gm_digits8((uint32_t)(v % 100000000u)) | GM_ASCII_ZEROS);
    return p + 8;
}

/* v < 10^n in decimal, exactly 'n' digits ending at p + n (leading zeros where v is
 * shorter); small enough to be inlined where n is a constant. */
static inline char *put_digits(char *p, uint64_t v, unsigned n)
{
    return n > 8 ? put_long(p, v, n) : put_short(p, (uint32_t)v, n);
}

char *gm_fmt_u64(char *p, uint64_t v, unsigned width)
{
    if (width > 1) {
        /* up to eight spaces in one word: the number's room past them takes what spills */
        unsigned n = n_digits(v);
        if (n + 8 >= width) {
            gm_store64(p, UINT64_C(0x2020202020202020));
            p += n < width ? width - n : 0;
        } else {
            p = pad(p, width - n);
        }
    }
    return gm_fmt_u64_room(p, v);
}

/* The key of 'm' before its n_digits digits, and where they start (the key's bytes are the
 * last of m->key: one copy of a fixed size, the bytes before the key are never written
 * out). */
static inline void memo_place_key(struct gm_fmt_memo *m, unsigned n_digits)
{
    m->n = (uint8_t)(n_digits + m->n_key);
    m->off = (uint8_t)(GM_FMT_MEMO_END - m->n);
    memcpy(m->s + GM_FMT_MEMO_END - n_digits - GM_FMT_KEY_MAX, m->key, GM_FMT_KEY_MAX);
    m->last8 = gm_load64(m->s + GM_FMT_MEMO_END - 8);
}

bool gm_fmt_memo_init(struct gm_fmt_memo *m, const char *key)
{
    size_t n_key = strlen(key);
    if (n_key < GM_FMT_KEY_MIN || n_key > GM_FMT_KEY_MAX)
        return false;
    memset(m, 0, sizeof(*m));
    memcpy(m->key + GM_FMT_KEY_MAX - n_key, key, n_key);
    m->n_key = (uint8_t)n_key;
    memset(m->s, '0', GM_FMT_MEMO_END);
    memo_place_key(m, 1);
    return true;
}

void gm_fmt_slots_init(struct gm_fmt_slot *slots, size_t n_slots, const struct gm_fmt_memo *m)
{
    for (size_t i = 0; i < n_slots; i++) {
        slots[i].v = 0;
        slots[i].n = m->n;
        (void)gm_fmt_memo_put(slots[i].s, m, GM_FMT_MEMO_ROOM);
    }
}

char *gm_fmt_memo_slow(char *p, uint64_t v, struct gm_fmt_memo *m)
{
    char *last = m->s + GM_FMT_MEMO_END - 8; /* the last group's place */
    uint64_t lead;                           /* the digit word of the first group */
    unsigned n;                              /* digits before the first group's */
    uint64_t r = v - m->wide_base;
    if (r < m->wide_span) {
        /* the digits above the last nine or ten stand */
        uint64_t q = r / 100000000u, lo = r - q * 100000000u; /* q < 100 */
        if (m->wide_span > 1000000000u)
            memcpy(last - 2, pairs + 2 * q, 2);
        else
            last[-1] = (char)('0' + q);
        m->last8 = gm_digits8((uint32_t)lo) | GM_ASCII_ZEROS; /* (s[]'s copy may be stale) */
        m->base = v - lo; /* below wide_base + wide_span: the block lies below 2^64 */
        m->block = true;
        m->v = v;
        return gm_fmt_memo_put(p, m, GM_FMT_MEMO_ROOM);
    }
    m->wide_span = 0;
    if (v < 100000000u) {
        lead = gm_digits8((uint32_t)v);
        m->block = false;
        n = 0;
    } else {
        uint64_t hi = v / 100000000u, lo = v - hi * 100000000u;
        m->base = v - lo;
        m->block = m->base <= UINT64_MAX - 99999999u;
        gm_store64(last, gm_digits8((uint32_t)lo) | GM_ASCII_ZEROS);
        if (hi < 100000000u) {
            lead = gm_digits8((uint32_t)hi);
            n = 8;
        } else {
            uint64_t top = hi / 100000000u; /* v < 2^64 < 10^20: top < 10^4 */
            gm_store64(last - 8, gm_digits8((uint32_t)(hi - top * 100000000u)) | GM_ASCII_ZEROS);
            lead = gm_digits8((uint32_t)top);
            n = 16;
        }
        /* the wide span: ten digits below eleven or more, nine below ten; none where it
         * would reach past 2^64 (v - wide_base would wrap into it) */
        if (v >= UINT64_C(1000000000)) {
            m->wide_span =
                v >= UINT64_C(10000000000) ? UINT64_C(10000000000) : UINT64_C(1000000000);
            m->wide_base = v - v % m->wide_span;
            if (m->wide_base > UINT64_MAX - (m->wide_span - 1))
                m->wide_span = 0;
        }
    }
    gm_store64(last - n, lead | GM_ASCII_ZEROS);
    /* the first group less its leading zeros (the zero bytes at its low end) */
    n += 8 - (lead ? (unsigned)__builtin_ctzll(lead) >> 3 : 7);
    memo_place_key(m, n);
    m->v = v;
    return gm_fmt_memo_put(p, m, GM_FMT_MEMO_ROOM);
}

char *gm_fmt_i64(char *p, int64_t v)
{
    return gm_fmt_i64_room(p, v);
}

/* The eight hex digits of x (leading zeros kept) in ASCII, the first in the lowest byte:
 * each nibble spread into a byte of its own by three shift-and-mask steps, the order turned
 * by a byte swap, and 'a'-'f' set apart from '0'-'9' by a carry out of the nibble. */
static inline uint64_t hex8(uint32_t x)
{
    uint64_t v = x;
    v = (v | v << 16) & UINT64_C(0x0000ffff0000ffff);
    v = (v | v << 8) & UINT64_C(0x00ff00ff00ff00ff);
    v = (v | v << 4) & UINT64_C(0x0f0f0f0f0f0f0f0f);
    v = __builtin_bswap64(v);
    return v + GM_ASCII_ZEROS +
           39 * (((v + UINT64_C(0x0606060606060606)) >> 4) & UINT64_C(0x0101010101010101));
}

char *gm_fmt_hex(char *p, uint64_t v, unsigned width)
{
    unsigned n = v ? (67u - (unsigned)__builtin_clzll(v)) / 4 : 1; /* hex digits */
    unsigned m = n < width ? width : n;                            /* with the zeros before */
    for (; m > 16; m--)
        *p++ = '0';
    /* the last m digits of the sixteen: each word shifted past the digits it does not show */
    if (m > 8) {
        gm_store64(p, hex8((uint32_t)(v >> 32)) >> (8 * (16 - m)));
        gm_store64(p + m - 8, hex8((uint32_t)v));
    } else {
        gm_store64(p, hex8((uint32_t)v) >> (8 * (8 - m)));
    }
    return p + m;
}

char *gm_fmt_seconds(char *p, int64_t us, unsigned width)
{
    uint64_t a = us < 0 ? 0 - (uint64_t)us : (uint64_t)us;
    unsigned n;
    if (a >= ((uint64_t)1 << 52)) {
        /* beyond where the double's digits are those of the integer */
        int len = snprintf(p, 48, "%+*.6f", (int)(width > 40 ? 40 : width), (double)us / 1e6);
        return p + (len > 0 ? len : 0);
    }
    n = n_digits(a / 1000000) + 8; /* sign, integer part, point, six decimals */
    if (n < width)
        p = pad(p, width - n);
    *p++ = us < 0 ? '-' : '+';
    p = gm_fmt_u64_room(p, a / 1000000);
    *p++ = '.';
    /* the six decimals: the last six of eight digits */
    gm_store64(p, (gm_digits8((uint32_t)(a % 1000000)) | GM_ASCII_ZEROS) >> 16);
    return p + 6;
}

/* "%.2f" of v, 0.5 <= v < 1024, into out[16]; returns the length. */
static size_t fixed2(char *out, double v)
{
    uint64_t bits, m, x, q, rem, half;
    unsigned k, n;
    memcpy(&bits, &v, sizeof(bits));
    m = (bits & (((uint64_t)1 << 52) - 1)) | ((uint64_t)1 << 52);
    k = 1075u - (unsigned)((bits >> 52) & 0x7ff);
    x = m * 100u;
    q = x >> k;
    rem = x & (((uint64_t)1 << k) - 1);
    half = (uint64_t)1 << (k - 1);
    if (rem > half || (rem == half && (q & 1)))
        q++;
    n = n_digits(q / 100);
    put_digits(out, q / 100, n);
    out[n] = '.';
    put_digits(out + n + 1, q % 100, 2);
    return n + 3;
}

/* gm_format_bytes(bytes, GM_UNITS_IEC) into out[24]; returns the length. */
static size_t format_iec(char *out, uint64_t bytes)
{
    static const char *const iec[] = {" B", " KiB", " MiB", " GiB", " TiB", " PiB", " EiB"};
    double v = (double)bytes;
    int i = 0;
    size_t n;
    if (bytes < 1024u) {
        n = n_digits(bytes);
        put_digits(out, bytes, (unsigned)n);
        memcpy(out + n, " B", 2);
        return n + 2;
    }
    /* the steps of gm_format_bytes(), with the same double arithmetic */
    while (v >= 1024.0 && i < 6) {
        v /= 1024.0;
        i++;
    }
    if (v >= 1024.0 - 0.005 && i < 6) {
        v /= 1024.0;
        i++;
    }
    n = fixed2(out, v);
    memcpy(out + n, iec[i], 4);
    return n + 4;
}

char *gm_fmt_iec(char *p, uint64_t bytes, unsigned width)
{
    char b[24] = {0};
    size_t n = format_iec(b, bytes); /* at most 11 bytes ("1023.99 KiB") */
    if (n < width)
        p = pad(p, width - n);
    memcpy(p, b, 16); /* one fixed copy: the room is there */
    return p + n;
}
