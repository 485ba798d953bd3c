/* SPDX-License-Identifier: MIT */
/* conf.c - PYTORCH_CUDA_ALLOC_CONF: defaults, parser, canonical form, size rounding.
 *
 * Grammar (PyTorch's lexer): the string is cut into tokens at ',' ':' '[' ']' (each of
 * which is a token of its own); spaces are dropped.  The token stream is
 *   option (',' option)*      option = key ':' value | key ':' '[' k ':' v (',' k ':' v)* ']'
 * Only roundup_power2_divisions takes the bracketed list; its keys are interval starts in
 * MiB (powers of two) or '>' for "all remaining intervals".  PyTorch rejects unknown keys,
 * and so do we; unlike PyTorch's stoi/stod we also reject trailing garbage ("12abc"). */
#include "alloc/alloc_int.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKENS 256
#define TOKEN_MAX  64

struct token {
    char text[TOKEN_MAX];
    uint64_t offset; /* byte offset of the token in the input */
};

struct lexer {
    struct token tok[MAX_TOKENS];
    size_t n;
};

static bool is_sep(char c)
{
    return c == ',' || c == ':' || c == '[' || c == ']';
}

static enum gm_status lex(const char *s, struct lexer *lx, struct gm_error *err)
{
    size_t i = 0;
    lx->n = 0;
    while (s[i]) {
        struct token *t;
        size_t len = 0;
        if (s[i] == ' ') {
            i++;
            continue;
        }
        if (lx->n == MAX_TOKENS)
            return gm_fail(err, GM_ERR_INVALID, i, "allocator settings: more than %d tokens",
                           MAX_TOKENS);
        t = &lx->tok[lx->n++];
        t->offset = i;
        if (is_sep(s[i])) {
            t->text[0] = s[i++];
            t->text[1] = '\0';
            continue;
        }
        /* a run of non-separators; interior spaces are dropped as PyTorch does */
        while (s[i] && !is_sep(s[i])) {
            if (s[i] != ' ') {
                if (len + 1 >= TOKEN_MAX)
                    return gm_fail(err, GM_ERR_INVALID, t->offset,
                                   "allocator settings: token longer than %d bytes", TOKEN_MAX - 1);
                t->text[len++] = s[i];
            }
            i++;
        }
        t->text[len] = '\0';
    }
    return GM_OK;
}

static bool is_pow2(uint64_t v)
{
    return v && !(v & (v - 1));
}

/* floor(log2(v)), 0 for 0: one instruction (the allocator rounds every request with it) */
static unsigned log2_floor(uint64_t v)
{
    return v ? 63u - (unsigned)__builtin_clzll(v) : 0;
}

static enum gm_status tok_u64(const struct token *t, const char *key, uint64_t *out,
                              struct gm_error *err)
{
    uint64_t v = 0;
    const char *p = t->text;
    if (!*p)
        return gm_fail(err, GM_ERR_INVALID, t->offset, "%s: expected a number", key);
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return gm_fail(err, GM_ERR_INVALID, t->offset,
                           "%s: '%s' is not a whole non-negative number", key, t->text);
        if (v > (UINT64_MAX - 9) / 10)
            return gm_fail(err, GM_ERR_INVALID, t->offset, "%s: '%s' is too large", key, t->text);
        v = v * 10 + (uint64_t)(*p - '0');
    }
    *out = v;
    return GM_OK;
}

static enum gm_status tok_bool(const struct token *t, const char *key, bool *out,
                               struct gm_error *err)
{
    if (!strcmp(t->text, "True")) {
        *out = true;
        return GM_OK;
    }
    if (!strcmp(t->text, "False")) {
        *out = false;
        return GM_OK;
    }
    return gm_fail(err, GM_ERR_INVALID, t->offset,
                   "%s: expected True or False, got '%s' (the case matters)", key, t->text);
}

struct parser {
    const struct lexer *lx;
    size_t i;     /* next token */
    uint64_t end; /* byte offset of the end of the input */
};

static const struct token *next_tok(struct parser *ps)
{
    return ps->i < ps->lx->n ? &ps->lx->tok[ps->i++] : NULL;
}

static enum gm_status expect(struct parser *ps, char c, const char *key, struct gm_error *err)
{
    const struct token *t = next_tok(ps);
    if (!t)
        return gm_fail(err, GM_ERR_INVALID, ps->end, "%s: expected '%c' at the end", key, c);
    if (t->text[0] != c || t->text[1])
        return gm_fail(err, GM_ERR_INVALID, t->offset, "%s: expected '%c', got '%s'", key, c,
                       t->text);
    return GM_OK;
}

static enum gm_status value_tok(struct parser *ps, const char *key, const struct token **out,
                                struct gm_error *err)
{
    const struct token *t = next_tok(ps);
    if (!t)
        return gm_fail(err, GM_ERR_INVALID, ps->end, "%s: missing value", key);
    if (is_sep(t->text[0]))
        return gm_fail(err, GM_ERR_INVALID, t->offset, "%s: missing value before '%s'", key,
                       t->text);
    *out = t;
    return GM_OK;
}

static enum gm_status parse_mb(struct parser *ps, const char *key, uint64_t *dest,
                               struct gm_error *err)
{
    const struct token *t;
    uint64_t mb;
    enum gm_status st = value_tok(ps, key, &t, err);
    if (st)
        return st;
    st = tok_u64(t, key, &mb, err);
    if (st)
        return st;
    if (mb < GM_ALLOC_LARGE_BUFFER >> 20)
        return gm_fail(err, GM_ERR_INVALID, t->offset, "%s: %llu is too small, must be >= %llu",
                       key, (unsigned long long)mb,
                       (unsigned long long)(GM_ALLOC_LARGE_BUFFER >> 20));
    if (mb > (UINT64_MAX >> 20))
        mb = UINT64_MAX >> 20; /* PyTorch clamps to SIZE_MAX / 1 MiB */
    *dest = mb << 20;
    return GM_OK;
}

static enum gm_status check_division(const struct token *t, uint64_t v, struct gm_error *err)
{
    if (v != 0 && !is_pow2(v))
        return gm_fail(err, GM_ERR_INVALID, t->offset,
                       "roundup_power2_divisions: %llu is not a power of two (or 0 for off)",
                       (unsigned long long)v);
    if (v > UINT32_MAX)
        return gm_fail(err, GM_ERR_INVALID, t->offset,
                       "roundup_power2_divisions: %llu is too large", (unsigned long long)v);
    return GM_OK;
}

static enum gm_status parse_divisions(struct parser *ps, struct gm_alloc_conf *c,
                                      struct gm_error *err)
{
    const char *key = "roundup_power2_divisions";
    const struct token *t;
    uint64_t v;
    size_t last = 0;
    bool any = false, any_interval = false;
    enum gm_status st;
    if (ps->i < ps->lx->n && !strcmp(ps->lx->tok[ps->i].text, "[")) {
        ps->i++;
    } else {
        /* one number for every interval (the older form) */
        st = value_tok(ps, key, &t, err);
        if (st)
            return st;
        st = tok_u64(t, key, &v, err);
        if (st)
            return st;
        st = check_division(t, v, err);
        if (st)
            return st;
        for (size_t i = 0; i < GM_ALLOC_ROUNDUP_INTERVALS; i++)
            c->roundup_power2_divisions[i] = (uint32_t)v;
        return GM_OK;
    }
    for (;;) {
        const struct token *k = next_tok(ps);
        if (!k)
            return gm_fail(err, GM_ERR_INVALID, ps->end, "%s: missing ']'", key);
        if (!strcmp(k->text, "]")) {
            if (!any)
                return gm_fail(err, GM_ERR_INVALID, k->offset, "%s: empty list", key);
            return GM_OK;
        }
        if (is_sep(k->text[0]))
            return gm_fail(err, GM_ERR_INVALID, k->offset, "%s: expected an interval, got '%s'",
                           key, k->text);
        st = expect(ps, ':', key, err);
        if (st)
            return st;
        st = value_tok(ps, key, &t, err);
        if (st)
            return st;
        st = tok_u64(t, key, &v, err);
        if (st)
            return st;
        st = check_division(t, v, err);
        if (st)
            return st;
        if (!strcmp(k->text, ">")) {
            /* every interval above the last one named (all of them if none was) */
            for (size_t i = any_interval ? last + 1 : 0; i < GM_ALLOC_ROUNDUP_INTERVALS; i++)
                c->roundup_power2_divisions[i] = (uint32_t)v;
        } else {
            uint64_t mb;
            size_t idx;
            st = tok_u64(k, key, &mb, err);
            if (st)
                return st;
            if (!is_pow2(mb))
                return gm_fail(err, GM_ERR_INVALID, k->offset,
                               "%s: interval %llu MiB is not a power of two", key,
                               (unsigned long long)mb);
            idx = log2_floor(mb);
            if (idx > GM_ALLOC_ROUNDUP_INTERVALS - 1)
                idx = GM_ALLOC_ROUNDUP_INTERVALS - 1;
            /* the first interval given also covers every interval below it */
            if (!any_interval)
                for (size_t i = 0; i < idx; i++)
                    c->roundup_power2_divisions[i] = (uint32_t)v;
            c->roundup_power2_divisions[idx] = (uint32_t)v;
            last = idx;
            any_interval = true;
        }
        any = true;
        t = next_tok(ps);
        if (!t)
            return gm_fail(err, GM_ERR_INVALID, ps->end, "%s: missing ']'", key);
        if (!strcmp(t->text, "]"))
            return GM_OK;
        if (strcmp(t->text, ","))
            return gm_fail(err, GM_ERR_INVALID, t->offset, "%s: expected ',' or ']', got '%s'", key,
                           t->text);
    }
}

static enum gm_status parse_option(struct parser *ps, const struct token *k,
                                   struct gm_alloc_conf *c, struct gm_error *err)
{
    const char *key = k->text;
    const struct token *t;
    enum gm_status st;

    if (!strcmp(key, "max_split_size_mb"))
        return parse_mb(ps, key, &c->max_split_size, err);
    if (!strcmp(key, "max_non_split_rounding_mb"))
        return parse_mb(ps, key, &c->max_non_split_rounding_size, err);
    if (!strcmp(key, "roundup_power2_divisions"))
        return parse_divisions(ps, c, err);
    st = value_tok(ps, key, &t, err);
    if (st)
        return st;
    if (!strcmp(key, "garbage_collection_threshold")) {
        char *end = NULL;
        double v;
        errno = 0;
        v = strtod(t->text, &end);
        if (errno || !end || *end || end == t->text || !isfinite(v))
            return gm_fail(err, GM_ERR_INVALID, t->offset, "%s: '%s' is not a number", key,
                           t->text);
        if (v <= 0.0 || v >= 1.0)
            return gm_fail(err, GM_ERR_INVALID, t->offset,
                           "%s: %s is out of range, must be strictly between 0.0 and 1.0", key,
                           t->text);
        c->garbage_collection_threshold = v;
        return GM_OK;
    }
    if (!strcmp(key, "expandable_segments"))
        return tok_bool(t, key, &c->expandable_segments, err);
    if (!strcmp(key, "release_lock_on_cudamalloc"))
        return tok_bool(t, key, &c->release_lock_on_cudamalloc, err);
    if (!strcmp(key, "pinned_use_cuda_host_register"))
        return tok_bool(t, key, &c->pinned_use_cuda_host_register, err);
    if (!strcmp(key, "pinned_use_background_threads"))
        return tok_bool(t, key, &c->pinned_use_background_threads, err);
    if (!strcmp(key, "pinned_num_register_threads")) {
        uint64_t v;
        st = tok_u64(t, key, &v, err);
        if (st)
            return st;
        if (!is_pow2(v) || v > 128)
            return gm_fail(err, GM_ERR_INVALID, t->offset,
                           "%s: %llu must be a power of two between 1 and 128", key,
                           (unsigned long long)v);
        c->pinned_num_register_threads = v;
        return GM_OK;
    }
    if (!strcmp(key, "backend")) {
        if (!strcmp(t->text, "native"))
            c->backend = GM_ALLOC_BACKEND_NATIVE;
        else if (!strcmp(t->text, "cudaMallocAsync"))
            c->backend = GM_ALLOC_BACKEND_CUDA_MALLOC_ASYNC;
        else
            return gm_fail(err, GM_ERR_INVALID, t->offset,
                           "backend: '%s' is unknown (native or cudaMallocAsync)", t->text);
        return GM_OK;
    }
    return gm_fail(err, GM_ERR_INVALID, k->offset,
                   "unknown allocator option '%s' (known: max_split_size_mb, "
                   "max_non_split_rounding_mb, roundup_power2_divisions, "
                   "garbage_collection_threshold, expandable_segments, backend, "
                   "release_lock_on_cudamalloc, pinned_*)",
                   key);
}

enum gm_status gm_alloc_conf_parse(struct gm_alloc_conf *conf, const char *s, struct gm_error *err)
{
    struct lexer *lx;
    struct parser ps;
    struct gm_alloc_conf c;
    enum gm_status st = GM_OK;

    if (!s || !*s)
        return GM_OK;
    lx = gm_malloc(sizeof(*lx));
    if (!lx)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator settings: out of memory");
    st = lex(s, lx, err);
    if (st)
        goto out_free_lexer;
    c = *conf;
    ps.lx = lx;
    ps.i = 0;
    ps.end = strlen(s);
    while (ps.i < lx->n) {
        const struct token *k = next_tok(&ps);
        if (is_sep(k->text[0])) {
            st = gm_fail(err, GM_ERR_INVALID, k->offset,
                         "allocator settings: expected an option name, got '%s'", k->text);
            goto out_free_lexer;
        }
        st = expect(&ps, ':', k->text, err);
        if (st)
            goto out_free_lexer;
        st = parse_option(&ps, k, &c, err);
        if (st)
            goto out_free_lexer;
        if (ps.i < lx->n) {
            const struct token *t = next_tok(&ps);
            if (strcmp(t->text, ",")) {
                st = gm_fail(err, GM_ERR_INVALID, t->offset,
                             "%s: expected ',' before the next option, got '%s'", k->text, t->text);
                goto out_free_lexer;
            }
            if (ps.i == lx->n) {
                st = gm_fail(err, GM_ERR_INVALID, t->offset, "allocator settings: trailing ','");
                goto out_free_lexer;
            }
        }
    }
    *conf = c;
out_free_lexer:
    gm_free(lx);
    return st;
}

void gm_alloc_conf_init(struct gm_alloc_conf *conf)
{
    memset(conf, 0, sizeof(*conf));
    conf->max_split_size = GM_ALLOC_NO_SPLIT_LIMIT;
    conf->max_non_split_rounding_size = GM_ALLOC_LARGE_BUFFER;
    conf->pinned_num_register_threads = 1;
}

static void append(char *out, size_t n, size_t *len, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static void append(char *out, size_t n, size_t *len, const char *fmt, ...)
{
    va_list ap;
    int w;
    if (*len >= n)
        return;
    if (*len > 0 && *len + 1 < n) {
        out[(*len)++] = ',';
        out[*len] = '\0';
    }
    va_start(ap, fmt);
    w = vsnprintf(out + *len, n - *len, fmt, ap);
    va_end(ap);
    if (w > 0)
        *len = *len + (size_t)w < n ? *len + (size_t)w : n - 1;
}

char *gm_alloc_conf_format(const struct gm_alloc_conf *c, char *out, size_t n)
{
    size_t len = 0;
    bool same = true;
    if (!n)
        return out;
    out[0] = '\0';
    if (c->backend == GM_ALLOC_BACKEND_CUDA_MALLOC_ASYNC)
        append(out, n, &len, "backend:cudaMallocAsync");
    if (c->expandable_segments)
        append(out, n, &len, "expandable_segments:True");
    if (c->max_split_size != GM_ALLOC_NO_SPLIT_LIMIT)
        append(out, n, &len, "max_split_size_mb:%llu",
               (unsigned long long)(c->max_split_size >> 20));
    if (c->max_non_split_rounding_size != GM_ALLOC_LARGE_BUFFER)
        append(out, n, &len, "max_non_split_rounding_mb:%llu",
               (unsigned long long)(c->max_non_split_rounding_size >> 20));
    if (c->garbage_collection_threshold > 0.0)
        append(out, n, &len, "garbage_collection_threshold:%g", c->garbage_collection_threshold);
    for (size_t i = 1; i < GM_ALLOC_ROUNDUP_INTERVALS; i++)
        if (c->roundup_power2_divisions[i] != c->roundup_power2_divisions[0])
            same = false;
    if (same && c->roundup_power2_divisions[0])
        append(out, n, &len, "roundup_power2_divisions:%u", c->roundup_power2_divisions[0]);
    if (!same) {
        char list[GM_ALLOC_ROUNDUP_INTERVALS * 16] = "[";
        size_t l = 1;
        for (size_t i = 0; i < GM_ALLOC_ROUNDUP_INTERVALS; i++) {
            int w = snprintf(list + l, sizeof(list) - l, "%s%llu:%u", i ? "," : "",
                             (unsigned long long)1 << i, c->roundup_power2_divisions[i]);
            if (w > 0 && l + (size_t)w < sizeof(list))
                l += (size_t)w;
        }
        if (l + 1 < sizeof(list)) {
            list[l++] = ']';
            list[l] = '\0';
        }
        append(out, n, &len, "roundup_power2_divisions:%s", list);
    }
    if (c->release_lock_on_cudamalloc)
        append(out, n, &len, "release_lock_on_cudamalloc:True");
    if (c->pinned_use_cuda_host_register)
        append(out, n, &len, "pinned_use_cuda_host_register:True");
    if (c->pinned_num_register_threads != 1)
        append(out, n, &len, "pinned_num_register_threads:%llu",
               (unsigned long long)c->pinned_num_register_threads);
    if (c->pinned_use_background_threads)
        append(out, n, &len, "pinned_use_background_threads:True");
    return out;
}

/* roundup_power2_next_division(): round up to the next of 'div' equal steps between two
 * powers of two; a power of two maps to itself. */
static uint64_t next_division(uint64_t size, uint64_t div)
{
    uint64_t floor2, step, low;
    if (is_pow2(size))
        return size;
    floor2 = (uint64_t)1 << log2_floor(size);
    step = floor2 >> log2_floor(div);
    if (step == 0)
        return floor2 << 1;
    low = size & ~(step - 1);
    return low == size ? size : low + step;
}

uint64_t gm_alloc_round_size(const struct gm_alloc_conf *c, uint64_t size)
{
    uint64_t div;
    int idx;
    if (size == 0)
        return 0;
    if (size < GM_ALLOC_MIN_BLOCK)
        return GM_ALLOC_MIN_BLOCK;
    idx = (int)log2_floor(size) - 20;
    if (idx < 0)
        idx = 0;
    if (idx > GM_ALLOC_ROUNDUP_INTERVALS - 1)
        idx = GM_ALLOC_ROUNDUP_INTERVALS - 1;
    div = c->roundup_power2_divisions[idx];
    if (div > 1 && size > GM_ALLOC_MIN_BLOCK * div)
        return next_division(size, div);
    if (size > UINT64_MAX - GM_ALLOC_MIN_BLOCK)
        return UINT64_MAX - (GM_ALLOC_MIN_BLOCK - 1);
    return (size + GM_ALLOC_MIN_BLOCK - 1) / GM_ALLOC_MIN_BLOCK * GM_ALLOC_MIN_BLOCK;
}

uint64_t gm_alloc_segment_size(uint64_t rounded)
{
    if (rounded <= GM_ALLOC_SMALL_SIZE)
        return GM_ALLOC_SMALL_BUFFER;
    if (rounded < GM_ALLOC_MIN_LARGE_ALLOC)
        return GM_ALLOC_LARGE_BUFFER;
    if (rounded > UINT64_MAX - GM_ALLOC_ROUND_LARGE)
        return UINT64_MAX - (GM_ALLOC_ROUND_LARGE - 1);
    return (rounded + GM_ALLOC_ROUND_LARGE - 1) / GM_ALLOC_ROUND_LARGE * GM_ALLOC_ROUND_LARGE;
}
