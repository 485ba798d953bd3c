/* SPDX-License-Identifier: MIT */
/* quant.c - weight formats as the model module knows them: names, each scheme's defaults,
 * and which roles a scheme leaves in 16 bit.
 *
 * What each scheme quantises (docs/estimate.md, "Weight formats", has the sources):
 *  - GPTQ (AutoGPTQ / GPTQModel / optimum) and AWQ (AutoAWQ) quantise the linear layers of
 *    the decoder blocks; embeddings, norms and the lm_head stay in the checkpoint's float
 *    dtype, and so does the MoE router (AutoAWQ lists "gate" in modules_to_not_convert);
 *  - FP8 (compressed-tensors, vLLM, DeepSeek's block-wise checkpoints) likewise: Linear
 *    targets, lm_head ignored, router kept in 16 bit;
 *  - MXFP4 (gpt-oss) quantises the MoE experts only; NVFP4 (ModelOpt, compressed-tensors)
 *    the linears of the decoder layers, as FP8;
 *  - bitsandbytes (transformers' replace_with_bnb_linear) converts every nn.Linear except
 *    the output embedding and llm_int8_skip_modules: the router and a classifier are
 *    quantised too; embeddings and norms are not nn.Linear and stay. */
#include "gpumem/model.h"

#include <ctype.h>
#include <string.h>

static const char *const quant_names[GM_QUANT__COUNT] = {
    "none", "int8", "nf4", "fp4", "gptq", "awq", "fp8", "int", "gguf", "mxfp4", "nvfp4",
};

const char *gm_quant_method_name(enum gm_quant_method q)
{
    return (unsigned)q < GM_QUANT__COUNT ? quant_names[q] : "unknown";
}

static const char *const role_names[GM_ROLE__COUNT] = {
    "embedding", "attention", "mlp", "router", "norm", "lm_head", "other",
};

const char *gm_param_role_name(enum gm_param_role r)
{
    return (unsigned)r < GM_ROLE__COUNT ? role_names[r] : "unknown";
}

void gm_quant_init(struct gm_quant *q, enum gm_quant_method method)
{
    memset(q, 0, sizeof(*q));
    q->method = method;
    switch (method) {
    case GM_QUANT_GPTQ:
        q->bits = 4;
        q->group_size = 128;
        q->zeros = true;
        q->g_idx = true;
        break;
    case GM_QUANT_AWQ:
        q->bits = 4;
        q->group_size = 128;
        q->zeros = true;
        break;
    case GM_QUANT_INT:
        q->bits = 4;
        q->group_size = 128;
        q->scale = GM_SCALE_GROUP;
        break;
    case GM_QUANT_FP8:
        q->bits = 8;
        q->scale = GM_SCALE_TENSOR;
        q->block_rows = q->block_cols = 128;
        break;
    case GM_QUANT_BNB_INT8:
        q->bits = 8;
        break;
    case GM_QUANT_MXFP4:
        q->bits = 4;
        q->group_size = 32; /* OCP MX block: 32 elements share one e8m0 scale */
        q->scale = GM_SCALE_GROUP;
        break;
    case GM_QUANT_NVFP4:
        q->bits = 4;
        q->group_size = 16; /* one fp8 e4m3 scale per 16 elements */
        q->scale = GM_SCALE_GROUP;
        break;
    case GM_QUANT_BNB_NF4:
    case GM_QUANT_BNB_FP4:
        q->bits = 4;
        q->group_size = 64; /* absmax blocks */
        break;
    default:
        break;
    }
}

unsigned gm_quant_kept_roles(const struct gm_quant *q)
{
    unsigned keep = (1u << GM_ROLE_EMBEDDING) | (1u << GM_ROLE_NORM) | q->keep;
    if (!q->lm_head)
        keep |= 1u << GM_ROLE_LM_HEAD;
    switch (q->method) {
    case GM_QUANT_GPTQ:
    case GM_QUANT_AWQ:
    case GM_QUANT_FP8:
    case GM_QUANT_INT:
    case GM_QUANT_NVFP4:
        keep |= (1u << GM_ROLE_ROUTER) | (1u << GM_ROLE_OTHER);
        break;
    case GM_QUANT_MXFP4:
        /* transformers' Mxfp4HfQuantizer and vLLM's Mxfp4MoEMethod quantise the MoE experts
         * only: attention, router and dense layers stay in the checkpoint's float dtype */
        keep |= (1u << GM_ROLE_ATTENTION) | (1u << GM_ROLE_ROUTER) | (1u << GM_ROLE_OTHER);
        break;
    case GM_QUANT_NONE:
        keep = (1u << GM_ROLE__COUNT) - 1;
        break;
    default:
        break;
    }
    return keep;
}

static bool word_char(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

/* Whether 'word' appears in 's' as a whole component ("mlp.gate", not "gate_proj"). */
static bool has_part(const char *s, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = strstr(s, word); p; p = strstr(p + 1, word)) {
        bool start = p == s || !word_char(p[-1]);
        bool end = !word_char(p[n]);
        if (start && end)
            return true;
    }
    return false;
}

unsigned gm_quant_module_roles(const char *name)
{
    unsigned r = 0;
    for (const char *p = name; *p; p++)
        if (isdigit((unsigned char)*p) && p > name && p[-1] == '.')
            return 0; /* one layer's module: not a role */
    if (has_part(name, "lm_head"))
        r |= 1u << GM_ROLE_LM_HEAD;
    if (has_part(name, "gate") || has_part(name, "router") || has_part(name, "shared_expert_gate"))
        r |= 1u << GM_ROLE_ROUTER;
    if (strstr(name, "embed"))
        r |= 1u << GM_ROLE_EMBEDDING;
    if (has_part(name, "self_attn") || has_part(name, "attn") || has_part(name, "attention"))
        r |= 1u << GM_ROLE_ATTENTION;
    if (has_part(name, "mlp") || has_part(name, "experts") || has_part(name, "feed_forward"))
        if (!(r & (1u << GM_ROLE_ROUTER)))
            r |= 1u << GM_ROLE_MLP;
    return r;
}
