/* SPDX-License-Identifier: MIT */
/* gguf.c - read the header of a GGUF file (versions 2 and 3; never the tensor data).
 *
 * Layout, all little-endian:
 *   "GGUF" | u32 version | u64 n_tensors | u64 n_kv
 *   n_kv x { string key | u32 value_type | value }
 *   n_tensors x { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml_type | u64 offset }
 *   padding to general.alignment (u32, default 32) | tensor data
 * string = u64 length | bytes (no NUL).  value types: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32,
 * 5 i32, 6 f32, 7 bool, 8 string, 9 array (u32 elem_type | u64 n | n values), 10 u64,
 * 11 i64, 12 f64.  Tensor offsets are relative to the start of the data and multiples of
 * the alignment; a tensor of ggml type T holds ne[0]*ne[1]*... elements in blocks of
 * block_size(T) elements of type_size(T) bytes (ne[0] a whole number of blocks).
 * Version 1 (u32 counts) is refused; a big-endian file shows its version byte-swapped and
 * is refused with that hint. */
#include "model/modelfile_int.h"

#include "base/reader.h"
#include "gpumem/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ggml's type table: block size (elements) and type size (bytes per block).  Removed
 * types have block size 0. */
static const struct {
    const char *name;
    uint32_t blck;
    uint32_t size;
} ggml_types[] = {
    [0] = {"F32", 1, 4},         [1] = {"F16", 1, 2},         [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},      [4] = {"Q4_2", 0, 0},        [5] = {"Q4_3", 0, 0},
    [6] = {"Q5_0", 32, 22},      [7] = {"Q5_1", 32, 24},      [8] = {"Q8_0", 32, 34},
    [9] = {"Q8_1", 32, 36},      [10] = {"Q2_K", 256, 84},    [11] = {"Q3_K", 256, 110},
    [12] = {"Q4_K", 256, 144},   [13] = {"Q5_K", 256, 176},   [14] = {"Q6_K", 256, 210},
    [15] = {"Q8_K", 256, 292},   [16] = {"IQ2_XXS", 256, 66}, [17] = {"IQ2_XS", 256, 74},
    [18] = {"IQ3_XXS", 256, 98}, [19] = {"IQ1_S", 256, 50},   [20] = {"IQ4_NL", 32, 18},
    [21] = {"IQ3_S", 256, 110},  [22] = {"IQ2_S", 256, 82},   [23] = {"IQ4_XS", 256, 136},
    [24] = {"I8", 1, 1},         [25] = {"I16", 1, 2},        [26] = {"I32", 1, 4},
    [27] = {"I64", 1, 8},        [28] = {"F64", 1, 8},        [29] = {"IQ1_M", 256, 56},
    [30] = {"BF16", 1, 2},       [31] = {"Q4_0_4_4", 0, 0},   [32] = {"Q4_0_4_8", 0, 0},
    [33] = {"Q4_0_8_8", 0, 0},   [34] = {"TQ1_0", 256, 54},   [35] = {"TQ2_0", 256, 66},
    [36] = {"IQ4_NL_4_4", 0, 0}, [37] = {"IQ4_NL_4_8", 0, 0}, [38] = {"IQ4_NL_8_8", 0, 0},
    [39] = {"MXFP4", 32, 17},
};
#define N_GGML_TYPES (sizeof(ggml_types) / sizeof(ggml_types[0]))

bool gm_ggml_type_bytes(uint32_t type, uint64_t n_elements, uint64_t *bytes, const char **name)
{
    uint64_t blocks;
    if (type >= N_GGML_TYPES || ggml_types[type].blck == 0)
        return false;
    if (name)
        *name = ggml_types[type].name;
    if (n_elements % ggml_types[type].blck != 0)
        return false;
    blocks = n_elements / ggml_types[type].blck;
    if (blocks > UINT64_MAX / ggml_types[type].size)
        return false;
    *bytes = blocks * ggml_types[type].size;
    return true;
}

enum gguf_vtype {
    GGUF_U8 = 0,
    GGUF_I8,
    GGUF_U16,
    GGUF_I16,
    GGUF_U32,
    GGUF_I32,
    GGUF_F32,
    GGUF_BOOL,
    GGUF_STRING,
    GGUF_ARRAY,
    GGUF_U64,
    GGUF_I64,
    GGUF_F64,
    GGUF_N_TYPES
};

static const unsigned scalar_size[GGUF_N_TYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* The data range of one tensor, relative to the start of the data. */
struct span {
    uint64_t begin, end;
    uint64_t index; /* tensor info number */
};

static int cmp_span(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

struct parser {
    struct gm_reader r;
    const struct gm_modelfile_limits *lim;
    struct gm_modelfile *m;
    uint64_t file_size;
    size_t prefix_len;
    bool *need_more;
    struct gm_error *err;
    uint64_t alignment;
    uint64_t split_count; /* split.count: the file is one part of a llama-gguf-split set */
    uint64_t split_no;    /* split.no, 0-based */
    struct span *spans;   /* each tensor's data range, for the overlap check */
    /* architecture keys are "<arch>.<suffix>"; the arch name comes first in real files but
     * the order is not guaranteed, so the values are kept by suffix and resolved at the end */
    char arch[64];
};

/* Running out of bytes: either the prefix was too short (ask for more) or the file is. */
static enum gm_status truncated(struct parser *ps, const char *what)
{
    if (ps->prefix_len < ps->file_size)
        *ps->need_more = true;
    return gm_fail(ps->err, GM_ERR_FORMAT, gm_reader_offset(&ps->r), "truncated %s", what);
}

static enum gm_status read_u32(struct parser *ps, uint32_t *v, const char *what)
{
    uint64_t x;
    if (!gm_reader_le(&ps->r, 4, &x))
        return truncated(ps, what);
    *v = (uint32_t)x;
    return GM_OK;
}

static enum gm_status read_u64(struct parser *ps, uint64_t *v, const char *what)
{
    if (!gm_reader_le(&ps->r, 8, v))
        return truncated(ps, what);
    return GM_OK;
}

static enum gm_status read_string(struct parser *ps, const char **s, size_t *len, const char *what)
{
    uint64_t n, off = gm_reader_offset(&ps->r);
    const uint8_t *p;
    enum gm_status st = read_u64(ps, &n, what);
    if (st)
        return st;
    if (n > ps->lim->max_string)
        return gm_fail(ps->err, GM_ERR_LIMIT, off, "%s: string of %llu bytes exceeds the limit",
                       what, (unsigned long long)n);
    if (n > ps->file_size)
        return gm_fail(ps->err, GM_ERR_FORMAT, off, "%s: string length %llu exceeds the file size",
                       what, (unsigned long long)n);
    if (!gm_reader_bytes(&ps->r, (size_t)n, &p))
        return truncated(ps, what);
    *s = (const char *)p;
    *len = (size_t)n;
    return GM_OK;
}

/* An integer value of any integer type (negative ones rejected). */
static bool int_value(uint32_t type, const uint8_t *p, uint64_t *out)
{
    uint64_t v = 0;
    unsigned n;
    if (type >= GGUF_N_TYPES || type == GGUF_F32 || type == GGUF_F64 || type == GGUF_STRING ||
        type == GGUF_ARRAY || type == GGUF_BOOL)
        return false;
    n = scalar_size[type];
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    if ((type == GGUF_I8 || type == GGUF_I16 || type == GGUF_I32 || type == GGUF_I64) &&
        (v >> (8 * n - 1)) & 1)
        return false;
    *out = v;
    return true;
}

/* What one architecture key sets. */
static uint64_t *arch_field(struct gm_modelfile_arch *a, const char *suffix, size_t n)
{
    static const struct {
        const char *suffix;
        size_t off;
    } keys[] = {
        {"block_count", offsetof(struct gm_modelfile_arch, n_layers)},
        {"embedding_length", offsetof(struct gm_modelfile_arch, hidden)},
        {"feed_forward_length", offsetof(struct gm_modelfile_arch, ffn)},
        {"attention.head_count", offsetof(struct gm_modelfile_arch, n_heads)},
        {"attention.head_count_kv", offsetof(struct gm_modelfile_arch, n_kv_heads)},
        {"attention.key_length", offsetof(struct gm_modelfile_arch, head_dim)},
        {"attention.value_length", offsetof(struct gm_modelfile_arch, head_dim_v)},
        {"context_length", offsetof(struct gm_modelfile_arch, context_length)},
        {"vocab_size", offsetof(struct gm_modelfile_arch, vocab)},
        {"expert_count", offsetof(struct gm_modelfile_arch, n_experts)},
        {"expert_used_count", offsetof(struct gm_modelfile_arch, n_experts_used)},
        {"expert_feed_forward_length", offsetof(struct gm_modelfile_arch, expert_ffn)},
        {"attention.sliding_window", offsetof(struct gm_modelfile_arch, sliding_window)},
        {"attention.q_lora_rank", offsetof(struct gm_modelfile_arch, q_lora_rank)},
        {"attention.kv_lora_rank", offsetof(struct gm_modelfile_arch, kv_lora_rank)},
        {"attention.key_length_mla", offsetof(struct gm_modelfile_arch, head_dim_mla)},
        {"attention.value_length_mla", offsetof(struct gm_modelfile_arch, head_dim_v_mla)},
        {"rope.dimension_count", offsetof(struct gm_modelfile_arch, rope_dims)},
        {"expert_shared_count", offsetof(struct gm_modelfile_arch, n_shared_experts)},
        {"leading_dense_block_count", offsetof(struct gm_modelfile_arch, n_dense_layers)},
        {"expert_shared_feed_forward_length",
         offsetof(struct gm_modelfile_arch, shared_expert_ffn)},
    };
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (strlen(keys[i].suffix) == n && memcmp(keys[i].suffix, suffix, n) == 0)
            return (uint64_t *)(void *)((char *)a + keys[i].off);
    return NULL;
}

/* Pending "<prefix>.<suffix>" integer keys, resolved against general.architecture at the
 * end (the key order in a file is not guaranteed). */
#define MAX_PENDING 64
struct pending {
    char prefix[64];
    char suffix[40];
    uint64_t value;
};

struct kvstate {
    struct pending pend[MAX_PENDING];
    size_t n_pend;
    uint64_t n_tokens; /* tokenizer.ggml.tokens length */
};

static void note_int(struct parser *ps, struct kvstate *kv, const char *key, size_t klen,
                     uint64_t v)
{
    const char *dot = memchr(key, '.', klen);
    size_t plen, slen;
    struct gm_modelfile_arch probe;
    if (klen == 17 && memcmp(key, "general.file_type", 17) == 0) {
        ps->m->gguf_file_type = v;
        return;
    }
    if (klen == 17 && memcmp(key, "general.alignment", 17) == 0) {
        ps->alignment = v;
        return;
    }
    if (klen == 11 && memcmp(key, "split.count", 11) == 0) {
        ps->split_count = v;
        return;
    }
    if (klen == 8 && memcmp(key, "split.no", 8) == 0) {
        ps->split_no = v;
        return;
    }
    if (!dot)
        return;
    plen = (size_t)(dot - key);
    slen = klen - plen - 1;
    if (plen == 0 || plen >= sizeof(kv->pend[0].prefix) || slen >= sizeof(kv->pend[0].suffix) ||
        !arch_field(&probe, dot + 1, slen))
        return;
    for (size_t i = 0; i < kv->n_pend; i++) {
        struct pending *q = &kv->pend[i];
        if (strlen(q->prefix) == plen && memcmp(q->prefix, key, plen) == 0 &&
            strlen(q->suffix) == slen && memcmp(q->suffix, dot + 1, slen) == 0) {
            if (v > q->value) /* per-layer arrays: keep the largest */
                q->value = v;
            return;
        }
    }
    if (kv->n_pend == MAX_PENDING)
        return;
    memcpy(kv->pend[kv->n_pend].prefix, key, plen);
    kv->pend[kv->n_pend].prefix[plen] = '\0';
    memcpy(kv->pend[kv->n_pend].suffix, dot + 1, slen);
    kv->pend[kv->n_pend].suffix[slen] = '\0';
    kv->pend[kv->n_pend].value = v;
    kv->n_pend++;
}

static bool key_is(const char *key, size_t klen, const char *want)
{
    return strlen(want) == klen && memcmp(key, want, klen) == 0;
}

static enum gm_status parse_kv(struct parser *ps, struct kvstate *kv, uint64_t index)
{
    const char *key, *s;
    size_t klen, slen;
    uint32_t type;
    uint64_t off = gm_reader_offset(&ps->r), v;
    const uint8_t *p = NULL;
    char what[48];
    enum gm_status st;

    snprintf(what, sizeof what, "metadata key %llu", (unsigned long long)index);
    st = read_string(ps, &key, &klen, what);
    if (!st)
        st = read_u32(ps, &type, what);
    if (st)
        return st;
    if (klen == 0)
        return gm_fail(ps->err, GM_ERR_FORMAT, off, "%s: empty key", what);
    if (type >= GGUF_N_TYPES)
        return gm_fail(ps->err, GM_ERR_FORMAT, off, "key '%.*s': unknown value type %u",
                       (int)(klen > 64 ? 64 : klen), key, type);
    if (type == GGUF_STRING) {
        st = read_string(ps, &s, &slen, what);
        if (st)
            return st;
        if (key_is(key, klen, "general.architecture")) {
            if (slen == 0 || slen >= sizeof(ps->arch))
                return gm_fail(ps->err, GM_ERR_FORMAT, off, "general.architecture of %zu bytes",
                               slen);
            memcpy(ps->arch, s, slen);
            ps->arch[slen] = '\0';
        } else if (key_is(key, klen, "general.name")) {
            /* display text: control characters escaped (gm_text_escape()) */
            char raw[sizeof(ps->m->model_name)];
            snprintf(raw, sizeof(raw), "%.*s", (int)(slen > 127 ? 127 : slen), s);
            gm_text_escape(ps->m->model_name, sizeof(ps->m->model_name), raw);
        }
        return GM_OK;
    }
    if (type == GGUF_ARRAY) {
        uint32_t et;
        uint64_t n;
        st = read_u32(ps, &et, what);
        if (!st)
            st = read_u64(ps, &n, what);
        if (st)
            return st;
        if (et >= GGUF_N_TYPES || et == GGUF_ARRAY)
            return gm_fail(ps->err, GM_ERR_FORMAT, off, "key '%.*s': bad array element type %u",
                           (int)(klen > 64 ? 64 : klen), key, et);
        if (n > ps->lim->max_array)
            return gm_fail(ps->err, GM_ERR_LIMIT, off,
                           "key '%.*s': array of %llu elements exceeds the limit",
                           (int)(klen > 64 ? 64 : klen), key, (unsigned long long)n);
        if (key_is(key, klen, "tokenizer.ggml.tokens"))
            kv->n_tokens = n;
        if (et == GGUF_STRING) {
            /* Each string has at least its 8-byte length: a count the file cannot hold is
             * refused before the loop. */
            if (n > ps->file_size / 8)
                return gm_fail(ps->err, GM_ERR_FORMAT, off,
                               "key '%.*s': %llu strings cannot fit in the file",
                               (int)(klen > 64 ? 64 : klen), key, (unsigned long long)n);
            for (uint64_t i = 0; i < n; i++) {
                st = read_string(ps, &s, &slen, what);
                if (st)
                    return st;
            }
            return GM_OK;
        }
        if (n > ps->file_size / scalar_size[et])
            return gm_fail(ps->err, GM_ERR_FORMAT, off,
                           "key '%.*s': array of %llu elements exceeds the file size",
                           (int)(klen > 64 ? 64 : klen), key, (unsigned long long)n);
        if (gm_reader_left(&ps->r) < n * scalar_size[et]) {
            gm_reader_skip(&ps->r, gm_reader_left(&ps->r));
            return truncated(ps, what);
        }
        for (uint64_t i = 0; i < n; i++) {
            if (gm_reader_bytes(&ps->r, scalar_size[et], &p) && int_value(et, p, &v))
                note_int(ps, kv, key, klen, v);
        }
        return GM_OK;
    }
    if (!gm_reader_bytes(&ps->r, scalar_size[type], &p))
        return truncated(ps, what);
    if (int_value(type, p, &v))
        note_int(ps, kv, key, klen, v);
    return GM_OK;
}

static enum gm_status parse_tensor_info(struct parser *ps, uint64_t index, uint64_t *max_end)
{
    const char *name, *tname = NULL;
    size_t nlen;
    uint32_t n_dims, type, idx;
    uint64_t ne[GM_MODELFILE_MAX_DIMS], numel = 1, offset, bytes, off = gm_reader_offset(&ps->r);
    char what[48];
    enum gm_status st;

    snprintf(what, sizeof what, "tensor info %llu", (unsigned long long)index);
    st = read_string(ps, &name, &nlen, what);
    if (!st)
        st = read_u32(ps, &n_dims, what);
    if (st)
        return st;
    /* ggml names are under 64 bytes (GGML_MAX_NAME); allow some slack, not megabytes */
    if (nlen == 0 || nlen > 1024)
        return gm_fail(ps->err, GM_ERR_FORMAT, off, "%s: name of %zu bytes (1 to 1024)", what,
                       nlen);
    if (n_dims == 0 || n_dims > 4)
        return gm_fail(ps->err, GM_ERR_FORMAT, off, "tensor '%.*s': %u dimensions (1 to 4)",
                       (int)(nlen > 64 ? 64 : nlen), name, n_dims);
    for (uint32_t i = 0; i < n_dims; i++) {
        st = read_u64(ps, &ne[i], what);
        if (st)
            return st;
        if (ne[i] > INT64_MAX || (ne[i] != 0 && numel > (uint64_t)INT64_MAX / ne[i]))
            return gm_fail(ps->err, GM_ERR_FORMAT, off, "tensor '%.*s': shape overflows int64",
                           (int)(nlen > 64 ? 64 : nlen), name);
        numel *= ne[i];
    }
    st = read_u32(ps, &type, what);
    if (!st)
        st = read_u64(ps, &offset, what);
    if (st)
        return st;
    if (!gm_ggml_type_bytes(type, numel, &bytes, &tname)) {
        if (type < N_GGML_TYPES && ggml_types[type].blck)
            return gm_fail(ps->err, GM_ERR_FORMAT, off,
                           "tensor '%.*s': %llu elements are not whole %s blocks of %u",
                           (int)(nlen > 64 ? 64 : nlen), name, (unsigned long long)numel, tname,
                           ggml_types[type].blck);
        return gm_fail(ps->err, GM_ERR_UNSUPPORTED, off, "tensor '%.*s': unknown ggml type %u",
                       (int)(nlen > 64 ? 64 : nlen), name, type);
    }
    if (ne[0] % ggml_types[type].blck != 0)
        return gm_fail(ps->err, GM_ERR_FORMAT, off,
                       "tensor '%.*s': row of %llu elements is not whole %s blocks",
                       (int)(nlen > 64 ? 64 : nlen), name, (unsigned long long)ne[0], tname);
    if (offset > ps->file_size || bytes > ps->file_size - offset)
        return gm_fail(ps->err, GM_ERR_FORMAT, off,
                       "tensor '%.*s': data [%llu, +%llu) exceeds the file size",
                       (int)(nlen > 64 ? 64 : nlen), name, (unsigned long long)offset,
                       (unsigned long long)bytes);
    if (offset % ps->alignment != 0)
        return gm_fail(ps->err, GM_ERR_FORMAT, off,
                       "tensor '%.*s': data offset %llu is not a multiple of the alignment %llu",
                       (int)(nlen > 64 ? 64 : nlen), name, (unsigned long long)offset,
                       (unsigned long long)ps->alignment);
    if (offset + bytes > *max_end)
        *max_end = offset + bytes;
    ps->spans[index] = (struct span){offset, offset + bytes, index};
    st = gm_modelfile_dtype_index(ps->m, tname, &idx, ps->err);
    if (st)
        return st;
    return gm_modelfile_add_tensor(ps->m, ps->lim, name, nlen, idx, n_dims, ne, numel, bytes, off,
                                   ps->err);
}

enum gm_status gm_gguf_parse_prefix(const void *data, size_t len, uint64_t file_size,
                                    const struct gm_modelfile_limits *lim, struct gm_modelfile *m,
                                    bool *need_more, struct gm_error *err)
{
    struct gm_modelfile_limits def;
    struct parser ps;
    struct kvstate *kv;
    uint32_t version, magic;
    uint64_t n_tensors, n_kv, max_end = 0, data_start, pad;
    enum gm_status st;

    if (!lim) {
        gm_modelfile_limits_default(&def);
        lim = &def;
    }
    *need_more = false;
    memset(&ps, 0, sizeof(ps));
    gm_reader_init(&ps.r, data, len, 0);
    ps.lim = lim;
    ps.m = m;
    ps.file_size = file_size;
    ps.prefix_len = len;
    ps.need_more = need_more;
    ps.err = err;
    ps.alignment = 32;

    if ((st = read_u32(&ps, &magic, "magic")) != GM_OK)
        return st;
    if (memcmp(data, "GGUF", 4) != 0)
        return gm_fail(err, GM_ERR_FORMAT, 0, "not a GGUF file (bad magic)");
    if ((st = read_u32(&ps, &version, "version")) != GM_OK)
        return st;
    if (version == 1)
        return gm_fail(err, GM_ERR_UNSUPPORTED, 4, "GGUF version 1 is not supported (2 and 3 are)");
    if (version == 0x02000000 || version == 0x03000000)
        return gm_fail(err, GM_ERR_UNSUPPORTED, 4, "big-endian GGUF is not supported");
    if (version != 2 && version != 3)
        return gm_fail(err, GM_ERR_UNSUPPORTED, 4, "GGUF version %u is not supported (2 and 3 are)",
                       version);
    if ((st = read_u64(&ps, &n_tensors, "tensor count")) != GM_OK ||
        (st = read_u64(&ps, &n_kv, "metadata count")) != GM_OK)
        return st;
    /* A key-value pair takes at least 8 + 1 + 4 + 1 bytes and a tensor info 8 + 1 + 4 + 8 +
     * 4 + 8: counts the file cannot hold are refused before any loop. */
    if (n_kv > file_size / 14)
        return gm_fail(err, GM_ERR_FORMAT, 16, "metadata count %llu cannot fit in the file",
                       (unsigned long long)n_kv);
    if (n_tensors > file_size / 33)
        return gm_fail(err, GM_ERR_FORMAT, 8, "tensor count %llu cannot fit in the file",
                       (unsigned long long)n_tensors);
    if (n_tensors > lim->max_tensors)
        return gm_fail(err, GM_ERR_LIMIT, 8, "tensor count %llu exceeds the limit of %llu",
                       (unsigned long long)n_tensors, (unsigned long long)lim->max_tensors);
    kv = gm_calloc(1, sizeof(*kv));
    if (!kv)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    m->gguf_version = version;
    for (uint64_t i = 0; i < n_kv; i++) {
        st = parse_kv(&ps, kv, i);
        if (st)
            goto out;
    }
    if (ps.alignment == 0 || (ps.alignment & (ps.alignment - 1)) != 0) {
        st = gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                     "general.alignment %llu is not a power of two",
                     (unsigned long long)ps.alignment);
        goto out;
    }
    if (ps.alignment > ((uint64_t)1 << 30)) {
        st = gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET,
                     "general.alignment %llu is a power of two but larger than the 2^30 "
                     "bytes gpumem accepts",
                     (unsigned long long)ps.alignment);
        goto out;
    }
    if (ps.split_count > 1) {
        st = gm_fail(err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET,
                     "part %llu of a GGUF model split into %llu files (llama-gguf-split): this "
                     "part holds only some of the tensors; merge the parts with "
                     "'llama-gguf-split --merge' and give the merged file",
                     (unsigned long long)ps.split_no + 1, (unsigned long long)ps.split_count);
        goto out;
    }
    ps.spans = gm_calloc(n_tensors ? n_tensors : 1, sizeof(*ps.spans));
    if (!ps.spans) {
        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory for %llu tensors",
                     (unsigned long long)n_tensors);
        goto out;
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        st = parse_tensor_info(&ps, i, &max_end);
        if (st)
            goto out;
    }
    /* Two tensors never share bytes: sorted by start, each begins at or after the end of
     * the one before (empty tensors take no bytes and cannot overlap). */
    qsort(ps.spans, n_tensors, sizeof(*ps.spans), cmp_span);
    for (uint64_t i = 1, last = UINT64_MAX; i <= n_tensors; i++) {
        const struct span *a, *b = &ps.spans[i - 1];
        if (b->begin == b->end)
            continue;
        if (last != UINT64_MAX) {
            a = &ps.spans[last];
            if (b->begin < a->end) {
                const struct gm_modelfile_tensor
                    *ta = &m->tensors[m->n_tensors - n_tensors + a->index],
                    *tb = &m->tensors[m->n_tensors - n_tensors + b->index];
                st = gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                             "tensors '%.64s' [%llu, %llu) and '%.64s' [%llu, %llu) overlap in "
                             "the tensor data",
                             ta->name, (unsigned long long)a->begin, (unsigned long long)a->end,
                             tb->name, (unsigned long long)b->begin, (unsigned long long)b->end);
                goto out;
            }
        }
        last = i - 1;
    }
    if (gm_reader_offset(&ps.r) > lim->max_header_bytes) {
        st = gm_fail(err, GM_ERR_LIMIT, gm_reader_offset(&ps.r),
                     "header larger than the limit of %llu bytes",
                     (unsigned long long)lim->max_header_bytes);
        goto out;
    }
    pad = gm_reader_offset(&ps.r) % ps.alignment;
    data_start = gm_reader_offset(&ps.r) + (pad ? ps.alignment - pad : 0);
    /* a file without tensor data need not carry the padding */
    if (max_end > 0 && (data_start > file_size || max_end > file_size - data_start)) {
        st = gm_fail(err, GM_ERR_FORMAT, gm_reader_offset(&ps.r),
                     "tensor data ends at %llu, past the end of the %llu-byte file",
                     (unsigned long long)(data_start + max_end), (unsigned long long)file_size);
        goto out;
    }
    m->header_bytes = gm_reader_offset(&ps.r);
    m->format = GM_MODELFILE_GGUF;
    if (ps.arch[0]) {
        m->has_arch = true;
        snprintf(m->arch.name, sizeof m->arch.name, "%s", ps.arch);
        for (size_t i = 0; i < kv->n_pend; i++) {
            uint64_t *f;
            if (strcmp(kv->pend[i].prefix, ps.arch) != 0)
                continue;
            f = arch_field(&m->arch, kv->pend[i].suffix, strlen(kv->pend[i].suffix));
            if (f)
                *f = kv->pend[i].value;
        }
        if (m->arch.vocab == 0)
            m->arch.vocab = kv->n_tokens;
    }
out:
    gm_free(ps.spans);
    gm_free(kv);
    return st;
}

enum gm_status gm_gguf_parse(const void *data, size_t len, uint64_t file_size,
                             const struct gm_modelfile_limits *lim, struct gm_modelfile *m,
                             struct gm_error *err)
{
    bool need_more;
    return gm_gguf_parse_prefix(data, len, file_size, lim, m, &need_more, err);
}
