/* SPDX-License-Identifier: MIT */
/* units.c - byte formatting and size parsing. */
#include "gpumem/units.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *gm_format_fixed(char *out, size_t n, uint64_t bytes, uint64_t unit, const char *label)
{
    snprintf(out, n, "%.2f %s", (double)bytes / (double)unit, label);
    return out;
}

char *gm_format_bytes(char *out, size_t n, uint64_t bytes, enum gm_units units)
{
    static const char *const iec[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    static const char *const si[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
    const char *const *names = units == GM_UNITS_SI ? si : iec;
    double base = units == GM_UNITS_SI ? 1000.0 : 1024.0;
    double v = (double)bytes;
    int i = 0;

    if (units == GM_UNITS_BYTES) {
        snprintf(out, n, "%llu B", (unsigned long long)bytes);
        return out;
    }
    if (bytes < (units == GM_UNITS_SI ? 1000u : 1024u)) {
        snprintf(out, n, "%llu B", (unsigned long long)bytes);
        return out;
    }
    while (v >= base && i < 6) {
        v /= base;
        i++;
    }
    /* Rounding may print "1024.00 KiB"; step up instead. */
    if (v >= base - 0.005 && i < 6) {
        v /= base;
        i++;
    }
    snprintf(out, n, "%.2f %s", v, names[i]);
    return out;
}

struct unit_name {
    const char *name;
    uint64_t mult;
};

static const struct unit_name size_units[] = {
    {"b", 1},        {"kb", 1000},    {"mb", 1000000}, {"gb", GM_GB},   {"tb", 1000 * GM_GB},
    {"kib", GM_KIB}, {"mib", GM_MIB}, {"gib", GM_GIB}, {"tib", GM_TIB},
};

enum gm_status gm_parse_size(const char *s, uint64_t *out, struct gm_error *err)
{
    const char *p = s;
    char unit[8];
    size_t ui = 0;
    uint64_t mult = 1;
    double v;
    char *endp;

    if (!s || !*s)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "empty size");
    while (*p && (isdigit((unsigned char)*p) || *p == '.'))
        p++;
    if (p == s)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "'%s': not a size (expected a number, e.g. 24GiB or 80GB)", s);
    while (*p == ' ')
        p++;
    for (const char *q = p; *q; q++) {
        if (ui + 1 >= sizeof(unit))
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "'%s': unknown unit", s);
        unit[ui++] = (char)tolower((unsigned char)*q);
    }
    unit[ui] = '\0';
    if (ui) {
        size_t i;
        if (!strcmp(unit, "k") || !strcmp(unit, "m") || !strcmp(unit, "g") || !strcmp(unit, "t"))
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "'%s': ambiguous unit: write %sB (decimal) or %siB (binary)", s, p, p);
        for (i = 0; i < sizeof(size_units) / sizeof(size_units[0]); i++)
            if (!strcmp(unit, size_units[i].name))
                break;
        if (i == sizeof(size_units) / sizeof(size_units[0]))
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "'%s': unknown unit '%s' (use B, kB, MB, GB, TB, KiB, MiB, GiB, TiB)", s,
                           p);
        mult = size_units[i].mult;
    }
    if (mult == 1) {
        /* Bytes must be a whole number. */
        uint64_t b;
        char num[32];
        size_t len = (size_t)(p - s);
        while (len && s[len - 1] == ' ')
            len--;
        if (len >= sizeof(num))
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "'%s': too large", s);
        memcpy(num, s, len);
        num[len] = '\0';
        if (gm_parse_u64(num, &b, err) != GM_OK)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "'%s': a size in bytes must be a whole number", s);
        *out = b;
        return GM_OK;
    }
    errno = 0;
    v = strtod(s, &endp);
    if (errno || endp == s || !isfinite(v) || v < 0)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "'%s': not a size", s);
    v *= (double)mult;
    if (v >= 18446744073709551616.0)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "'%s': too large", s);
    *out = (uint64_t)llround(v);
    return GM_OK;
}

enum gm_status gm_parse_gpu_memory(const char *s, uint64_t *out, struct gm_error *err)
{
    uint64_t b;
    if (*s && strspn(s, "0123456789.") == strlen(s)) {
        double d;
        if (gm_parse_double(s, &d, NULL) != GM_OK || !(d > 0) || d > 1048576.0)
            return gm_fail_setting(err, GM_ERR_INVALID, "gpu_memory",
                                   "'%s' is not a size in GiB between 0 and 1048576", s);
        *out = (uint64_t)llround(d * (double)GM_GIB);
        return GM_OK;
    }
    if (gm_parse_size(s, &b, err) != GM_OK) {
        if (err)
            err->setting = "gpu_memory";
        return GM_ERR_INVALID;
    }
    if (b == 0)
        return gm_fail_setting(err, GM_ERR_INVALID, "gpu_memory", "'%s': must be above zero", s);
    *out = b;
    return GM_OK;
}

enum gm_status gm_parse_u64(const char *s, uint64_t *out, struct gm_error *err)
{
    uint64_t v = 0;
    const char *p = s;
    int digits = 0;

    if (!s || !*s)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "empty number");
    for (; *p; p++) {
        unsigned d;
        if (*p == '_' && digits)
            continue;
        if (*p == 'e' || *p == 'E')
            break;
        if (!isdigit((unsigned char)*p))
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "'%s': not a non-negative whole number", s);
        d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "'%s': too large", s);
        v = v * 10 + d;
        digits++;
    }
    if (!digits)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "'%s': not a number", s);
    if (*p) { /* exponent: 7e9 */
        uint64_t e = 0;
        p++;
        if (!*p)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "'%s': bad exponent", s);
        for (; *p; p++) {
            if (!isdigit((unsigned char)*p) || e > 30)
                return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "'%s': bad exponent", s);
            e = e * 10 + (uint64_t)(*p - '0');
        }
        while (e--) {
            if (v > UINT64_MAX / 10)
                return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "'%s': too large", s);
            v *= 10;
        }
    }
    *out = v;
    return GM_OK;
}

/* Exact decimal arithmetic: a mantissa of up to 38 digits in 128 bits, scaled by a power
 * of ten that must leave a whole number. */
enum gm_status gm_parse_count(const char *s, uint64_t *out, struct gm_error *err)
{
    __extension__ unsigned __int128 v = 0;
    const char *p = s;
    int digits = 0, frac = 0, exp10 = 0;
    bool dot = false;

    if (!s || !*s)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "empty number");
    for (; *p; p++) {
        if (*p == '_' && digits)
            continue;
        if (*p == '.' && !dot) {
            dot = true;
            continue;
        }
        if (!isdigit((unsigned char)*p))
            break;
        if (digits >= 38)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "'%s': too many digits", s);
        v = v * 10 + (unsigned)(*p - '0');
        if (v || digits)
            digits++;
        if (dot)
            frac++;
    }
    if (p == s || (p == s + 1 && dot))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "'%s': not a non-negative whole number",
                       s);
    if (*p == 'e' || *p == 'E') {
        bool neg = false;
        int e = 0, n = 0;
        p++;
        if (*p == '+' || *p == '-')
            neg = *p++ == '-';
        for (; isdigit((unsigned char)*p); p++, n++) {
            if (e > 60)
                return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "'%s': bad exponent", s);
            e = e * 10 + (*p - '0');
        }
        if (!n)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "'%s': bad exponent", s);
        exp10 = neg ? -e : e;
    }
    if (*p) {
        /* one suffix letter, as parameter counts are written: 500M, 8B, 1.2T */
        static const char suffixes[] = "kKmMbBgGtT";
        const char *q = strchr(suffixes, *p);
        static const int powers[] = {3, 3, 6, 6, 9, 9, 9, 9, 12, 12};
        if (!q || p[1])
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "'%s': not a non-negative whole number", s);
        exp10 += powers[q - suffixes];
    }
    exp10 -= frac;
    for (; exp10 > 0; exp10--) {
        if (v > (__extension__(unsigned __int128) UINT64_MAX))
            break;
        v *= 10;
    }
    for (; exp10 < 0; exp10++) {
        if (v % 10)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "'%s': not a whole number", s);
        v /= 10;
    }
    if (v > UINT64_MAX)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "'%s': too large", s);
    *out = (uint64_t)v;
    return GM_OK;
}

enum gm_status gm_parse_double(const char *s, double *out, struct gm_error *err)
{
    char *end;
    double v;
    if (!s || !*s)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "empty number");
    errno = 0;
    v = strtod(s, &end);
    if (errno || *end || !isfinite(v))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "'%s': not a number", s);
    *out = v;
    return GM_OK;
}

uint64_t gm_add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

uint64_t gm_mul_sat(uint64_t a, uint64_t b)
{
    if (a && b > UINT64_MAX / a)
        return UINT64_MAX;
    return a * b;
}

__extension__ typedef unsigned __int128 u128;

uint64_t gm_mul_div_u64(uint64_t a, uint64_t b, uint64_t c)
{
    u128 r;
    if (c == 0)
        return UINT64_MAX;
    r = (u128)a * b / c;
    return r > UINT64_MAX ? UINT64_MAX : (uint64_t)r;
}
