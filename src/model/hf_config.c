/* SPDX-License-Identifier: MIT */
/* hf_config.c - read a Hugging Face config.json into struct gm_model (jansson).
 *
 * Input: one JSON object.  The keys read depend on model_type (or, when it is absent, on
 * the first entry of "architectures"):
 *   common   hidden_size num_hidden_layers num_attention_heads num_key_value_heads
 *            head_dim intermediate_size vocab_size max_position_embeddings
 *            tie_word_embeddings torch_dtype|dtype sliding_window attention_dropout
 *   gpt2     n_embd n_layer n_head n_inner (null: 4*n_embd) n_positions attn_pdrop resid_pdrop
 *   bert     type_vocab_size hidden_dropout_prob attention_probs_dropout_prob
 *   qwen2/3  use_sliding_window max_window_layers (qwen3: q_norm/k_norm always present)
 *   mixtral  num_local_experts num_experts_per_tok
 * A config whose top level has no hidden size but a "text_config" object is read from that
 * object (multimodal wrappers).
 * Integers must be non-negative whole numbers (a real with an integral value is accepted);
 * null counts as absent.  Unknown model types are read with the common keys and marked
 * GM_ARCH_UNKNOWN, so the caller can still use them with an explicit parameter count. */
#include "gpumem/model.h"
#include "gpumem/text.h"

#include "base/buf.h"
#include "base/json_load.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define CONFIG_MAX_BYTES ((size_t)16 << 20)

struct reader {
    json_t *root;
    char missing[200];
    struct gm_error *err;
    enum gm_status st;
};

static void add_missing(struct reader *r, const char *key)
{
    size_t n = strlen(r->missing);
    snprintf(r->missing + n, sizeof(r->missing) - n, "%s%s", n ? ", " : "", key);
}

/* Read a non-negative integer field.  Returns true when present; a wrong type sets r->st. */
static bool get_u64(struct reader *r, const char *key, uint64_t *out)
{
    json_t *v = json_object_get(r->root, key);
    if (!v || json_is_null(v) || r->st != GM_OK)
        return false;
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < 0) {
            r->st = gm_fail(r->err, GM_ERR_FORMAT, GM_NO_OFFSET, "'%s' is negative (%lld)", key,
                            (long long)i);
            return false;
        }
        *out = (uint64_t)i;
        return true;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d >= 0 && d < 9.0e15 && floor(d) == d) {
            *out = (uint64_t)d;
            return true;
        }
    }
    r->st = gm_fail(r->err, GM_ERR_FORMAT, GM_NO_OFFSET, "'%s' must be a non-negative whole number",
                    key);
    return false;
}

/* A count that must be at least 1 when given: 0 is an error of its own, never "missing". */
static bool get_count(struct reader *r, const char *key, uint64_t *out)
{
    uint64_t v;
    if (!get_u64(r, key, &v))
        return false;
    if (v == 0) {
        r->st =
            gm_fail(r->err, GM_ERR_FORMAT, GM_NO_OFFSET, "'%s' is 0: it must be at least 1", key);
        return false;
    }
    *out = v;
    return true;
}

static uint64_t need_u64(struct reader *r, const char *key)
{
    uint64_t v = 0;
    if (!get_count(r, key, &v) && r->st == GM_OK)
        add_missing(r, key);
    return v;
}

static bool get_bool(struct reader *r, const char *key, bool dflt)
{
    json_t *v = json_object_get(r->root, key);
    if (!v || json_is_null(v))
        return dflt;
    if (json_is_boolean(v))
        return json_is_true(v);
    if (r->st == GM_OK)
        r->st = gm_fail(r->err, GM_ERR_FORMAT, GM_NO_OFFSET, "'%s' must be true or false", key);
    return dflt;
}

static double get_double(struct reader *r, const char *key, double dflt)
{
    json_t *v = json_object_get(r->root, key);
    if (!v || json_is_null(v))
        return dflt;
    if (json_is_number(v)) {
        double d = json_number_value(v);
        if (d >= 0 && d <= 1)
            return d;
    }
    if (r->st == GM_OK)
        r->st = gm_fail(r->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                        "'%s' must be a probability between 0 and 1", key);
    return dflt;
}

static const char *get_str(struct reader *r, const char *key)
{
    json_t *v = json_object_get(r->root, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Names from the file are display text: kept with their control characters escaped
 * (gm_text_escape()), so that no renderer can send a file's terminal escapes raw. */
static void copy_str(char *dst, size_t n, const char *src)
{
    gm_text_escape(dst, n, src);
}

static enum gm_act parse_act(const char *s, enum gm_act dflt)
{
    if (!s)
        return dflt;
    if (!strcmp(s, "silu") || !strcmp(s, "swish"))
        return GM_ACT_SILU;
    if (!strcmp(s, "gelu_new") || !strcmp(s, "gelu_fast"))
        return GM_ACT_GELU_NEW;
    if (!strncmp(s, "gelu", 4))
        return GM_ACT_GELU;
    if (!strcmp(s, "relu"))
        return GM_ACT_RELU;
    return dflt;
}

static const struct {
    const char *model_type;
    const char *arch_prefix; /* "architectures" entry prefix */
    enum gm_arch arch;
} families[] = {
    {"llama", "Llama", GM_ARCH_LLAMA},       {"mistral", "Mistral", GM_ARCH_MISTRAL},
    {"mixtral", "Mixtral", GM_ARCH_MIXTRAL}, {"qwen2", "Qwen2For", GM_ARCH_QWEN2},
    {"gemma2", "Gemma2", GM_ARCH_GEMMA2},    {"gemma", "Gemma", GM_ARCH_GEMMA},
    {"phi3", "Phi3", GM_ARCH_PHI3},          {"phi", "Phi", GM_ARCH_PHI},
    {"gpt2", "GPT2", GM_ARCH_GPT2},          {"gpt_neox", "GPTNeoX", GM_ARCH_GPT_NEOX},
    {"bert", "Bert", GM_ARCH_BERT},          {"qwen3", "Qwen3For", GM_ARCH_QWEN3},
};

static enum gm_arch find_arch(const char *model_type, json_t *archs)
{
    size_t n = sizeof(families) / sizeof(families[0]);
    if (model_type) {
        for (size_t i = 0; i < n; i++)
            if (!strcmp(families[i].model_type, model_type))
                return families[i].arch;
        return GM_ARCH_UNKNOWN;
    }
    if (json_is_array(archs) && json_is_string(json_array_get(archs, 0))) {
        const char *a = json_string_value(json_array_get(archs, 0));
        for (size_t i = 0; i < n; i++)
            if (!strncmp(a, families[i].arch_prefix, strlen(families[i].arch_prefix)))
                return families[i].arch;
    }
    return GM_ARCH_UNKNOWN;
}

/* The per-family layout: which tensors exist and their defaults. */
static void set_layout(struct gm_model *m)
{
    m->norm = GM_NORM_RMS;
    m->norms_per_layer = 2;
    m->final_norm = true;
    m->gated_mlp = true;
    m->act = GM_ACT_SILU;
    switch (m->arch) {
    case GM_ARCH_QWEN2:
        m->qkv_bias = true;
        break;
    case GM_ARCH_QWEN3:
        m->qk_norm = true;
        break;
    case GM_ARCH_GEMMA:
    case GM_ARCH_GEMMA2:
        m->tied_embeddings = true;
        m->act = GM_ACT_GELU;
        if (m->arch == GM_ARCH_GEMMA2)
            m->norms_per_layer = 4;
        break;
    case GM_ARCH_PHI:
        m->norm = GM_NORM_LAYER;
        m->norms_per_layer = 1;
        m->gated_mlp = false;
        m->qkv_bias = m->out_bias = m->mlp_bias = m->lm_head_bias = true;
        m->act = GM_ACT_GELU_NEW;
        break;
    case GM_ARCH_GPT2:
        m->norm = GM_NORM_LAYER;
        m->gated_mlp = false;
        m->qkv_bias = m->out_bias = m->mlp_bias = true;
        m->tied_embeddings = true;
        m->act = GM_ACT_GELU_NEW;
        break;
    case GM_ARCH_GPT_NEOX:
        m->norm = GM_NORM_LAYER;
        m->gated_mlp = false;
        m->qkv_bias = m->out_bias = m->mlp_bias = true;
        m->act = GM_ACT_GELU;
        break;
    case GM_ARCH_BERT:
        m->norm = GM_NORM_LAYER;
        m->gated_mlp = false;
        m->final_norm = false;
        m->qkv_bias = m->out_bias = m->mlp_bias = true;
        m->act = GM_ACT_GELU;
        m->head = GM_HEAD_ENCODER;
        break;
    default:
        break;
    }
}

static enum gm_status parse_root(struct reader *r, struct gm_model *m)
{
    const char *mt = get_str(r, "model_type");
    const char *s;
    uint64_t v = 0;
    bool gpt2;

    m->arch = find_arch(mt, json_object_get(r->root, "architectures"));
    if (mt)
        copy_str(m->model_type, sizeof(m->model_type), mt);
    else if (m->arch != GM_ARCH_UNKNOWN)
        copy_str(m->model_type, sizeof(m->model_type), gm_arch_name(m->arch));
    if ((s = get_str(r, "_name_or_path")) && *s)
        copy_str(m->name, sizeof(m->name), s);
    set_layout(m);
    gpt2 = m->arch == GM_ARCH_GPT2;

    m->hidden = need_u64(r, gpt2 ? "n_embd" : "hidden_size");
    m->n_layers = need_u64(r, gpt2 ? "n_layer" : "num_hidden_layers");
    m->n_heads = need_u64(r, gpt2 ? "n_head" : "num_attention_heads");
    m->vocab = need_u64(r, "vocab_size");
    if (gpt2) {
        if (!get_count(r, "n_inner", &m->intermediate))
            m->intermediate = 4 * m->hidden;
        get_u64(r, "n_positions", &m->max_positions);
        m->n_positions_learned = m->max_positions;
        m->attn_dropout = get_double(r, "attn_pdrop", 0);
        m->hidden_dropout = get_double(r, "resid_pdrop", 0);
    } else {
        m->intermediate = need_u64(r, "intermediate_size");
        get_u64(r, "max_position_embeddings", &m->max_positions);
        m->attn_dropout = get_double(r, "attention_dropout", 0);
        m->hidden_dropout = get_double(r, "hidden_dropout", 0);
    }
    if (r->st != GM_OK)
        return r->st;
    if (r->missing[0] && m->arch == GM_ARCH_UNKNOWN) {
        /* not a layout gpumem reads (gpt_bigcode, t5, ...): say so, not which keys lack */
        char known[160];
        gm_arch_known_list(known, sizeof known);
        return gm_fail(r->err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET,
                       "model type '%s' is not an architecture gpumem knows (known: %s)",
                       m->model_type[0] ? m->model_type : "?", known);
    }
    if (r->missing[0])
        return gm_fail(r->err, GM_ERR_FORMAT, GM_NO_OFFSET, "model type '%s': missing fields: %s",
                       m->model_type[0] ? m->model_type : "?", r->missing);

    m->n_kv_heads = m->n_heads;
    get_count(r, "num_key_value_heads", &m->n_kv_heads);
    if (!get_count(r, "head_dim", &m->head_dim) && m->n_heads)
        m->head_dim = m->hidden / m->n_heads;
    m->tied_embeddings = get_bool(r, "tie_word_embeddings", m->tied_embeddings);
    if (get_bool(r, "attention_bias", false))
        m->qkv_bias = m->out_bias = true;
    if (get_bool(r, "mlp_bias", false))
        m->mlp_bias = true;
    m->act = parse_act(get_str(r, "hidden_activation"), m->act);
    if (m->arch != GM_ARCH_GEMMA && m->arch != GM_ARCH_GEMMA2)
        m->act = parse_act(get_str(r, gpt2 ? "activation_function" : "hidden_act"), m->act);
    s = get_str(r, "torch_dtype");
    if (!s)
        s = get_str(r, "dtype");
    m->dtype = gm_dtype_parse(s);

    /* Sliding window: which layers use it depends on the family. */
    if (get_u64(r, "sliding_window", &v) && v > 0) {
        switch (m->arch) {
        case GM_ARCH_QWEN2:
        case GM_ARCH_QWEN3:
            if (get_bool(r, "use_sliding_window", false)) {
                uint64_t full = m->n_layers;
                get_u64(r, "max_window_layers", &full);
                m->sliding_window = v;
                m->n_sliding_layers = full < m->n_layers ? m->n_layers - full : 0;
            }
            break;
        case GM_ARCH_GEMMA2:
            m->sliding_window = v;
            m->n_sliding_layers = (m->n_layers + 1) / 2; /* even-numbered layers */
            break;
        default:
            m->sliding_window = v;
            m->n_sliding_layers = m->n_layers;
            break;
        }
        if (m->n_sliding_layers == 0)
            m->sliding_window = 0;
    }

    switch (m->arch) {
    case GM_ARCH_MIXTRAL:
        m->n_experts = need_u64(r, "num_local_experts");
        m->n_experts_active = need_u64(r, "num_experts_per_tok");
        break;
    case GM_ARCH_PHI:
        m->attn_dropout = get_double(r, "attention_dropout", 0);
        m->hidden_dropout = get_double(r, "resid_pdrop", 0);
        break;
    case GM_ARCH_BERT:
        m->n_positions_learned = m->max_positions;
        m->n_token_types = 2;
        get_u64(r, "type_vocab_size", &m->n_token_types);
        m->attn_dropout = get_double(r, "attention_probs_dropout_prob", 0);
        m->hidden_dropout = get_double(r, "hidden_dropout_prob", 0);
        break;
    default:
        break;
    }
    if (r->st != GM_OK)
        return r->st;
    if (r->missing[0])
        return gm_fail(r->err, GM_ERR_FORMAT, GM_NO_OFFSET, "model type '%s': missing fields: %s",
                       m->model_type, r->missing);
    if (m->arch == GM_ARCH_UNKNOWN)
        return GM_OK; /* generic fields only; gm_model_validate() says what is missing */
    return gm_model_validate(m, r->err);
}

enum gm_status gm_model_parse_hf_config(const char *json, size_t len, struct gm_model *out,
                                        struct gm_error *err)
{
    struct reader r;
    struct gm_model m;
    enum gm_status st;

    if (len > CONFIG_MAX_BYTES)
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "larger than %zu bytes", CONFIG_MAX_BYTES);
    memset(&r, 0, sizeof(r));
    r.err = err;
    st = gm_json_load(json, len, 0, &r.root, err);
    if (st)
        return st;
    if (!json_is_object(r.root)) {
        json_decref(r.root);
        return gm_fail(err, GM_ERR_FORMAT, 0, "top level is not an object");
    }
    /* Multimodal configs (Llava, Mllama, Gemma-3) nest the language model in "text_config";
     * size that one when the top level has no hidden size of its own. */
    if (!json_object_get(r.root, "hidden_size") && !json_object_get(r.root, "n_embd") &&
        json_is_object(json_object_get(r.root, "text_config"))) {
        json_t *text = json_incref(json_object_get(r.root, "text_config"));
        json_decref(r.root);
        r.root = text;
    }
    gm_model_init(&m);
    st = parse_root(&r, &m);
    json_decref(r.root);
    if (st == GM_OK)
        *out = m;
    return st;
}

enum gm_status gm_model_load_hf_config(const char *path, struct gm_model *out, struct gm_error *err)
{
    struct gm_buf b;
    struct stat sb;
    char file[4096];
    enum gm_status st;

    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        int n = snprintf(file, sizeof(file), "%s/config.json", path);
        if (n < 0 || (size_t)n >= sizeof(file))
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "'%s': path too long", path);
    } else {
        size_t n = strlen(path);
        if (n >= sizeof(file))
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "path too long");
        memcpy(file, path, n + 1);
    }
    gm_buf_init(&b, CONFIG_MAX_BYTES);
    st = gm_buf_read_file(&b, file, err);
    if (st != GM_OK) {
        gm_buf_release(&b);
        return st;
    }
    st = gm_model_parse_hf_config(b.data ? b.data : "", b.len, out, err);
    gm_buf_release(&b);
    if (st != GM_OK)
        return gm_error_prefix(err, "%s", file);
    return GM_OK;
}
