/* SPDX-License-Identifier: MIT */
/* catalog.c - built-in architectures of common models, so estimates work offline.
 *
 * Each entry holds the fields of the model's published config.json (Hugging Face Hub,
 * "<org>/<model>/config.json"); the parameter count is derived from them by
 * gm_model_count_params() exactly as for a config file read from disk, and the unit tests
 * compare it with each model's published exact count. */
#include "gpumem/model.h"

#include "gpumem/error.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

struct entry {
    const char *hub_id;
    const char *aliases; /* space-separated, lowercase */
    struct gm_model m;
};

#define BASE(nm, type, ar, h, L, nh, nkv, hd, I, V, pos)                                           \
    .name = nm, .model_type = type, .arch = ar, .hidden = h, .n_layers = L, .n_heads = nh,         \
    .n_kv_heads = nkv, .head_dim = hd, .intermediate = I, .vocab = V, .max_positions = pos

/* Causal LM with a final norm and two norms per layer. */
#define STD .head = GM_HEAD_CAUSAL_LM, .final_norm = true, .norms_per_layer = 2

/* Llama layout: RMSNorm, SwiGLU, no biases. */
#define LLAMA_LIKE(nm, type, ar, h, L, nh, nkv, hd, I, V, pos, tied, dt)                           \
    {                                                                                              \
        BASE(nm, type, ar, h, L, nh, nkv, hd, I, V, pos), STD,                                     \
            .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .tied_embeddings = tied,   \
            .dtype = dt                                                                            \
    }

#define NEOX(nm, h, L, nh, I, V, pos)                                                              \
    {                                                                                              \
        BASE(nm, "gpt_neox", GM_ARCH_GPT_NEOX, h, L, nh, nh, (h) / (nh), I, V, pos), STD,          \
            .norm = GM_NORM_LAYER, .act = GM_ACT_GELU, .qkv_bias = true, .out_bias = true,         \
            .mlp_bias = true, .dtype = GM_DTYPE_F16                                                \
    }

#define BERT(nm, h, L, nh, I)                                                                      \
    {                                                                                              \
        BASE(nm, "bert", GM_ARCH_BERT, h, L, nh, nh, (h) / (nh), I, 30522, 512),                   \
            .head = GM_HEAD_ENCODER, .norms_per_layer = 2, .norm = GM_NORM_LAYER,                  \
            .act = GM_ACT_GELU, .qkv_bias = true, .out_bias = true, .mlp_bias = true,              \
            .n_positions_learned = 512, .n_token_types = 2, .attn_dropout = 0.1,                   \
            .hidden_dropout = 0.1, .dtype = GM_DTYPE_F32                                           \
    }

#define F16  GM_DTYPE_F16
#define BF16 GM_DTYPE_BF16

static const struct entry catalog[] = {
    /* Llama 2 / 3 / 3.1 / 3.2 */
    {"meta-llama/Llama-2-7b-hf", "llama-2-7b llama2-7b",
     LLAMA_LIKE("Llama-2-7b-hf", "llama", GM_ARCH_LLAMA, 4096, 32, 32, 32, 128, 11008, 32000, 4096,
                false, F16)},
    {"meta-llama/Llama-2-13b-hf", "llama-2-13b llama2-13b",
     LLAMA_LIKE("Llama-2-13b-hf", "llama", GM_ARCH_LLAMA, 5120, 40, 40, 40, 128, 13824, 32000, 4096,
                false, F16)},
    {"meta-llama/Llama-2-70b-hf", "llama-2-70b llama2-70b",
     LLAMA_LIKE("Llama-2-70b-hf", "llama", GM_ARCH_LLAMA, 8192, 80, 64, 8, 128, 28672, 32000, 4096,
                false, F16)},
    {"meta-llama/Meta-Llama-3-8B", "llama-3-8b llama3-8b",
     LLAMA_LIKE("Meta-Llama-3-8B", "llama", GM_ARCH_LLAMA, 4096, 32, 32, 8, 128, 14336, 128256,
                8192, false, BF16)},
    {"meta-llama/Meta-Llama-3-70B", "llama-3-70b llama3-70b",
     LLAMA_LIKE("Meta-Llama-3-70B", "llama", GM_ARCH_LLAMA, 8192, 80, 64, 8, 128, 28672, 128256,
                8192, false, BF16)},
    {"meta-llama/Llama-3.1-8B", "llama-3.1-8b llama3.1-8b meta-llama-3.1-8b",
     LLAMA_LIKE("Llama-3.1-8B", "llama", GM_ARCH_LLAMA, 4096, 32, 32, 8, 128, 14336, 128256, 131072,
                false, BF16)},
    {"meta-llama/Llama-3.1-70B", "llama-3.1-70b llama3.1-70b meta-llama-3.1-70b",
     LLAMA_LIKE("Llama-3.1-70B", "llama", GM_ARCH_LLAMA, 8192, 80, 64, 8, 128, 28672, 128256,
                131072, false, BF16)},
    {"meta-llama/Llama-3.1-405B", "llama-3.1-405b llama3.1-405b meta-llama-3.1-405b",
     LLAMA_LIKE("Llama-3.1-405B", "llama", GM_ARCH_LLAMA, 16384, 126, 128, 8, 128, 53248, 128256,
                131072, false, BF16)},
    {"meta-llama/Llama-3.2-1B", "llama-3.2-1b llama3.2-1b",
     LLAMA_LIKE("Llama-3.2-1B", "llama", GM_ARCH_LLAMA, 2048, 16, 32, 8, 64, 8192, 128256, 131072,
                true, BF16)},
    {"meta-llama/Llama-3.2-3B", "llama-3.2-3b llama3.2-3b",
     LLAMA_LIKE("Llama-3.2-3B", "llama", GM_ARCH_LLAMA, 3072, 28, 24, 8, 128, 8192, 128256, 131072,
                true, BF16)},
    /* Mistral / Mixtral */
    {"mistralai/Mistral-7B-v0.1",
     "mistral-7b mistral-7b-v0.1",
     {BASE("Mistral-7B-v0.1", "mistral", GM_ARCH_MISTRAL, 4096, 32, 32, 8, 128, 14336, 32000,
           32768),
      STD, .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .sliding_window = 4096,
      .n_sliding_layers = 32, .dtype = BF16}},
    {"mistralai/Mixtral-8x7B-v0.1",
     "mixtral-8x7b mixtral-8x7b-v0.1",
     {BASE("Mixtral-8x7B-v0.1", "mixtral", GM_ARCH_MIXTRAL, 4096, 32, 32, 8, 128, 14336, 32000,
           32768),
      STD, .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .n_experts = 8,
      .n_experts_active = 2, .dtype = BF16}},
    /* Qwen2.5: q/k/v biases; the small ones are tied. */
    {"Qwen/Qwen2.5-0.5B",
     "qwen2.5-0.5b",
     {BASE("Qwen2.5-0.5B", "qwen2", GM_ARCH_QWEN2, 896, 24, 14, 2, 64, 4864, 151936, 32768), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qkv_bias = true,
      .tied_embeddings = true, .dtype = BF16}},
    {"Qwen/Qwen2.5-1.5B",
     "qwen2.5-1.5b",
     {BASE("Qwen2.5-1.5B", "qwen2", GM_ARCH_QWEN2, 1536, 28, 12, 2, 128, 8960, 151936, 131072), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qkv_bias = true,
      .tied_embeddings = true, .dtype = BF16}},
    {"Qwen/Qwen2.5-3B",
     "qwen2.5-3b",
     {BASE("Qwen2.5-3B", "qwen2", GM_ARCH_QWEN2, 2048, 36, 16, 2, 128, 11008, 151936, 32768), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qkv_bias = true,
      .tied_embeddings = true, .dtype = BF16}},
    {"Qwen/Qwen2.5-7B",
     "qwen2.5-7b",
     {BASE("Qwen2.5-7B", "qwen2", GM_ARCH_QWEN2, 3584, 28, 28, 4, 128, 18944, 152064, 131072), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qkv_bias = true, .dtype = BF16}},
    {"Qwen/Qwen2.5-14B",
     "qwen2.5-14b",
     {BASE("Qwen2.5-14B", "qwen2", GM_ARCH_QWEN2, 5120, 48, 40, 8, 128, 13824, 152064, 131072), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qkv_bias = true, .dtype = BF16}},
    {"Qwen/Qwen2.5-32B",
     "qwen2.5-32b",
     {BASE("Qwen2.5-32B", "qwen2", GM_ARCH_QWEN2, 5120, 64, 40, 8, 128, 27648, 152064, 131072), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qkv_bias = true, .dtype = BF16}},
    {"Qwen/Qwen2.5-72B",
     "qwen2.5-72b",
     {BASE("Qwen2.5-72B", "qwen2", GM_ARCH_QWEN2, 8192, 80, 64, 8, 128, 29568, 152064, 131072), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qkv_bias = true, .dtype = BF16}},
    /* Qwen3: explicit head_dim 128, q/k RMSNorm, no biases; the small ones are tied. */
    {"Qwen/Qwen3-0.6B",
     "qwen3-0.6b",
     {BASE("Qwen3-0.6B", "qwen3", GM_ARCH_QWEN3, 1024, 28, 16, 8, 128, 3072, 151936, 40960), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qk_norm = true,
      .tied_embeddings = true, .dtype = BF16}},
    {"Qwen/Qwen3-4B",
     "qwen3-4b",
     {BASE("Qwen3-4B", "qwen3", GM_ARCH_QWEN3, 2560, 36, 32, 8, 128, 9728, 151936, 40960), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qk_norm = true,
      .tied_embeddings = true, .dtype = BF16}},
    {"Qwen/Qwen3-8B",
     "qwen3-8b",
     {BASE("Qwen3-8B", "qwen3", GM_ARCH_QWEN3, 4096, 36, 32, 8, 128, 12288, 151936, 40960), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qk_norm = true, .dtype = BF16}},
    {"Qwen/Qwen3-14B",
     "qwen3-14b",
     {BASE("Qwen3-14B", "qwen3", GM_ARCH_QWEN3, 5120, 40, 40, 8, 128, 17408, 151936, 40960), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qk_norm = true, .dtype = BF16}},
    /* Gemma: explicit head_dim, tied, GeGLU; gemma-2 adds two norms and a window on every
     * other layer. */
    {"google/gemma-2b",
     "gemma-2b",
     {BASE("gemma-2b", "gemma", GM_ARCH_GEMMA, 2048, 18, 8, 1, 256, 16384, 256000, 8192), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_GELU, .gated_mlp = true, .tied_embeddings = true,
      .dtype = BF16}},
    {"google/gemma-7b",
     "gemma-7b",
     {BASE("gemma-7b", "gemma", GM_ARCH_GEMMA, 3072, 28, 16, 16, 256, 24576, 256000, 8192), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_GELU, .gated_mlp = true, .tied_embeddings = true,
      .dtype = BF16}},
    {"google/gemma-2-9b",
     "gemma-2-9b gemma2-9b",
     {BASE("gemma-2-9b", "gemma2", GM_ARCH_GEMMA2, 3584, 42, 16, 8, 256, 14336, 256000, 8192),
      .head = GM_HEAD_CAUSAL_LM, .final_norm = true, .norm = GM_NORM_RMS, .act = GM_ACT_GELU,
      .gated_mlp = true, .tied_embeddings = true, .norms_per_layer = 4, .sliding_window = 4096,
      .n_sliding_layers = 21, .dtype = F16}},
    {"google/gemma-2-27b",
     "gemma-2-27b gemma2-27b",
     {BASE("gemma-2-27b", "gemma2", GM_ARCH_GEMMA2, 4608, 46, 32, 16, 128, 36864, 256000, 8192),
      .head = GM_HEAD_CAUSAL_LM, .final_norm = true, .norm = GM_NORM_RMS, .act = GM_ACT_GELU,
      .gated_mlp = true, .tied_embeddings = true, .norms_per_layer = 4, .sliding_window = 4096,
      .n_sliding_layers = 23, .dtype = F16}},
    /* Phi */
    {"microsoft/phi-2",
     "phi-2 phi2",
     {BASE("phi-2", "phi", GM_ARCH_PHI, 2560, 32, 32, 32, 80, 10240, 51200, 2048),
      .head = GM_HEAD_CAUSAL_LM, .final_norm = true, .norms_per_layer = 1, .norm = GM_NORM_LAYER,
      .act = GM_ACT_GELU_NEW, .qkv_bias = true, .out_bias = true, .mlp_bias = true,
      .lm_head_bias = true, .hidden_dropout = 0.1, .dtype = F16}},
    {"microsoft/Phi-3-mini-4k-instruct",
     "phi-3-mini phi-3-mini-4k phi3-mini",
     {BASE("Phi-3-mini-4k-instruct", "phi3", GM_ARCH_PHI3, 3072, 32, 32, 32, 96, 8192, 32064, 4096),
      STD, .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .sliding_window = 2047,
      .n_sliding_layers = 32, .dtype = BF16}},
    /* GPT-2 (124M): learned positions, tied, gelu_new. */
    {"openai-community/gpt2",
     "gpt2 gpt-2",
     {BASE("gpt2", "gpt2", GM_ARCH_GPT2, 768, 12, 12, 12, 64, 3072, 50257, 1024), STD,
      .norm = GM_NORM_LAYER, .act = GM_ACT_GELU_NEW, .qkv_bias = true, .out_bias = true,
      .mlp_bias = true, .tied_embeddings = true, .n_positions_learned = 1024, .attn_dropout = 0.1,
      .hidden_dropout = 0.1, .dtype = F16}},
    /* Pythia / GPT-NeoX */
    {"EleutherAI/pythia-160m", "pythia-160m", NEOX("pythia-160m", 768, 12, 12, 3072, 50304, 2048)},
    {"EleutherAI/pythia-1b", "pythia-1b", NEOX("pythia-1b", 2048, 16, 8, 8192, 50304, 2048)},
    {"EleutherAI/pythia-6.9b", "pythia-6.9b",
     NEOX("pythia-6.9b", 4096, 32, 32, 16384, 50432, 2048)},
    {"EleutherAI/pythia-12b", "pythia-12b", NEOX("pythia-12b", 5120, 36, 40, 20480, 50688, 2048)},
    {"EleutherAI/gpt-neox-20b", "gpt-neox-20b neox-20b",
     NEOX("gpt-neox-20b", 6144, 44, 64, 24576, 50432, 2048)},
    /* BERT (BertModel with pooler) */
    {"google-bert/bert-base-uncased", "bert-base-uncased bert-base",
     BERT("bert-base-uncased", 768, 12, 12, 3072)},
    {"google-bert/bert-large-uncased", "bert-large-uncased bert-large",
     BERT("bert-large-uncased", 1024, 24, 16, 4096)},
};

#define N_CATALOG (sizeof(catalog) / sizeof(catalog[0]))

size_t gm_model_catalog_count(void)
{
    return N_CATALOG;
}

const struct gm_model *gm_model_catalog_get(size_t i)
{
    return i < N_CATALOG ? &catalog[i].m : NULL;
}

const char *gm_model_catalog_hub_id(size_t i)
{
    return i < N_CATALOG ? catalog[i].hub_id : NULL;
}

static bool alias_match(const char *aliases, const char *name)
{
    size_t n = strlen(name);
    const char *p = aliases;
    while (*p) {
        const char *e = strchr(p, ' ');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncasecmp(p, name, n))
            return true;
        if (!e)
            break;
        p = e + 1;
    }
    return false;
}

const struct gm_model *gm_model_catalog_find(const char *name)
{
    const char *slash;
    if (!name || !*name)
        return NULL;
    slash = strrchr(name, '/');
    for (size_t i = 0; i < N_CATALOG; i++) {
        const struct entry *e = &catalog[i];
        if (!strcasecmp(name, e->hub_id) || !strcasecmp(name, e->m.name) ||
            alias_match(e->aliases, name))
            return &e->m;
    }
    /* "someorg/Llama-2-7b-hf": match on the last component. */
    if (slash && slash[1])
        for (size_t i = 0; i < N_CATALOG; i++)
            if (!strcasecmp(slash + 1, catalog[i].m.name) ||
                alias_match(catalog[i].aliases, slash + 1))
                return &catalog[i].m;
    return NULL;
}

/* The last component of [path, end), trailing slashes dropped. */
static const char *last_component(const char *path, const char **end)
{
    const char *e = *end, *start;
    while (e > path + 1 && e[-1] == '/')
        e--;
    start = e;
    while (start > path && start[-1] != '/')
        start--;
    *end = e;
    return start;
}

void gm_model_name_from_path(struct gm_model *m, const char *path)
{
    const char *end = path + strlen(path), *start;
    if (m->name[0])
        return;
    start = last_component(path, &end);
    /* ".../m/config.json" is better known by its folder */
    if ((size_t)(end - start) == strlen("config.json") && !strncmp(start, "config.json", 11) &&
        start > path) {
        const char *pend = start - 1, *pstart = last_component(path, &pend);
        size_t n = (size_t)(pend - pstart);
        if (n && !(n == 1 && *pstart == '.') && !(n == 2 && !strncmp(pstart, "..", 2)) &&
            *pstart != '/') {
            start = pstart;
            end = pend;
        }
    }
    snprintf(m->name, sizeof(m->name), "%.*s", (int)(end - start), start);
}

enum gm_status gm_model_resolve(const char *spec, struct gm_model *out, struct gm_error *err)
{
    const struct gm_model *m;
    struct stat sb;
    if (!spec || !*spec)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "empty model name");
    /* An existing path wins over a catalog name. */
    if (stat(spec, &sb) == 0) {
        enum gm_status st = gm_model_load_hf_config(spec, out, err);
        if (st == GM_OK)
            gm_model_name_from_path(out, spec);
        return st;
    }
    m = gm_model_catalog_find(spec);
    if (m) {
        *out = *m;
        return GM_OK;
    }
    if (strchr(spec, '/') || strstr(spec, ".json"))
        return gm_fail(err, GM_ERR_NOENT, GM_NO_OFFSET, "'%s': no such file", spec);
    return gm_fail(err, GM_ERR_NOENT, GM_NO_OFFSET,
                   "'%s': not a built-in model and no such file (see 'gpumem estimate "
                   "--list-models')",
                   spec);
}
