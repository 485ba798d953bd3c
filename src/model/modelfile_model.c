/* SPDX-License-Identifier: MIT */
/* modelfile_model.c - turn a weight-file summary into the struct gm_model the estimator
 * uses.  GGUF carries its architecture in metadata keys (llama.cpp's names); safetensors
 * files carry none, so the config.json beside them is read. */
#include "model/modelfile_int.h"

#include "gpumem/text.h"

#include <stdio.h>
#include <string.h>

int gm_modelfile_dominant_dtype(const struct gm_modelfile *mf)
{
    int best = -1;
    for (size_t i = 0; i < mf->n_dtypes; i++)
        if (best < 0 || mf->dtypes[i].n_bytes > mf->dtypes[best].n_bytes)
            best = (int)i;
    return best;
}

bool gm_modelfile_has_tensor(const struct gm_modelfile *mf, const char *name)
{
    for (size_t i = 0; i < mf->n_tensors; i++)
        if (strcmp(mf->tensors[i].name, name) == 0)
            return true;
    return false;
}

/* Plain float types map to a gm_dtype; quantised ones stay unknown (their bytes are in
 * weight_bytes_file). */
static enum gm_dtype plain_dtype(const char *name)
{
    static const struct {
        const char *name;
        enum gm_dtype t;
    } map[] = {
        {"F32", GM_DTYPE_F32}, {"F16", GM_DTYPE_F16},         {"BF16", GM_DTYPE_BF16},
        {"F64", GM_DTYPE_F64}, {"F8_E4M3", GM_DTYPE_F8_E4M3}, {"F8_E5M2", GM_DTYPE_F8_E5M2},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strcmp(map[i].name, name) == 0)
            return map[i].t;
    return GM_DTYPE_UNKNOWN;
}

static const struct {
    const char *gguf;
    enum gm_arch arch;
} gguf_archs[] = {
    {"llama", GM_ARCH_LLAMA}, {"mistral", GM_ARCH_MISTRAL}, {"qwen2", GM_ARCH_QWEN2},
    {"gemma", GM_ARCH_GEMMA}, {"gemma2", GM_ARCH_GEMMA2},   {"phi2", GM_ARCH_PHI},
    {"phi3", GM_ARCH_PHI3},   {"gpt2", GM_ARCH_GPT2},       {"gptneox", GM_ARCH_GPT_NEOX},
    {"bert", GM_ARCH_BERT},
};

static enum gm_status from_gguf(const struct gm_modelfile *mf, struct gm_model *m,
                                struct gm_error *err)
{
    const struct gm_modelfile_arch *a = &mf->arch;
    if (!mf->has_arch)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "GGUF file has no general.architecture key");
    if (a->n_layers == 0 || a->hidden == 0 || a->n_heads == 0)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET, "GGUF metadata lacks %s%s%s",
                       a->n_layers ? "" : "block_count ", a->hidden ? "" : "embedding_length ",
                       a->n_heads ? "" : "attention.head_count");
    /* display text: the architecture name comes raw from the file (model_name is escaped) */
    gm_text_escape(m->name, sizeof m->name, mf->model_name[0] ? mf->model_name : a->name);
    gm_text_escape(m->model_type, sizeof m->model_type, a->name);
    m->arch = GM_ARCH_UNKNOWN;
    for (size_t i = 0; i < sizeof(gguf_archs) / sizeof(gguf_archs[0]); i++)
        if (strcmp(gguf_archs[i].gguf, a->name) == 0)
            m->arch = gguf_archs[i].arch;
    if (m->arch == GM_ARCH_LLAMA && a->n_experts > 0)
        m->arch = GM_ARCH_MIXTRAL;
    m->head = m->arch == GM_ARCH_BERT ? GM_HEAD_ENCODER : GM_HEAD_CAUSAL_LM;
    m->hidden = a->hidden;
    m->n_layers = a->n_layers;
    m->n_heads = a->n_heads;
    m->n_kv_heads = a->n_kv_heads ? a->n_kv_heads : a->n_heads;
    m->head_dim = a->head_dim ? a->head_dim : a->hidden / a->n_heads;
    m->intermediate = a->n_experts && a->expert_ffn ? a->expert_ffn : a->ffn;
    m->vocab = a->vocab;
    m->max_positions = a->context_length;
    m->sliding_window = a->sliding_window;
    m->n_sliding_layers = a->sliding_window ? a->n_layers : 0;
    if (m->arch == GM_ARCH_GEMMA2 && a->sliding_window)
        m->n_sliding_layers = a->n_layers / 2; /* alternating local/global layers */
    m->n_experts = a->n_experts;
    m->n_experts_active = a->n_experts_used;
    m->norms_per_layer = m->arch == GM_ARCH_GEMMA2 ? 4 : m->arch == GM_ARCH_PHI ? 1 : 2;
    m->norm = (m->arch == GM_ARCH_PHI || m->arch == GM_ARCH_GPT2 || m->arch == GM_ARCH_GPT_NEOX ||
               m->arch == GM_ARCH_BERT)
                  ? GM_NORM_LAYER
                  : GM_NORM_RMS;
    m->act = m->norm == GM_NORM_LAYER ? GM_ACT_GELU : GM_ACT_SILU;
    m->tied_embeddings = !gm_modelfile_has_tensor(mf, "output.weight");
    m->gated_mlp = gm_modelfile_has_tensor(mf, "blk.0.ffn_gate.weight") ||
                   gm_modelfile_has_tensor(mf, "blk.0.ffn_gate_exps.weight") ||
                   gm_modelfile_has_tensor(mf, "blk.0.ffn_gate_up.weight");
    m->qkv_bias = gm_modelfile_has_tensor(mf, "blk.0.attn_q.bias") ||
                  gm_modelfile_has_tensor(mf, "blk.0.attn_qkv.bias");
    m->out_bias = gm_modelfile_has_tensor(mf, "blk.0.attn_output.bias");
    m->mlp_bias = gm_modelfile_has_tensor(mf, "blk.0.ffn_up.bias");
    m->lm_head_bias = gm_modelfile_has_tensor(mf, "output.bias");
    m->final_norm = gm_modelfile_has_tensor(mf, "output_norm.weight");
    if (gm_modelfile_has_tensor(mf, "position_embd.weight"))
        m->n_positions_learned = a->context_length;
    return GM_OK;
}

/* Whether every stored dtype is a plain float type: then one stored element is one
 * parameter.  Packed integer storage (GPTQ/AWQ qweight in I32, bitsandbytes in U8) holds
 * several parameters per element, so its element count says nothing about completeness. */
static bool all_plain(const struct gm_modelfile *mf)
{
    for (size_t i = 0; i < mf->n_dtypes; i++)
        if (plain_dtype(mf->dtypes[i].name) == GM_DTYPE_UNKNOWN)
            return false;
    return true;
}

/* "the GGUF file holds" / "the safetensors files hold" */
static const char *files_hold(enum gm_modelfile_format f)
{
    return f == GM_MODELFILE_GGUF ? "the GGUF file holds" : "the safetensors files hold";
}

/* The weights must hold the model the architecture describes: a folder with one shard of
 * four, or one tensor beside a config.json, would otherwise be sized as a quarter of the
 * model or as 4 parameters.  Fewer than half the tensors the architecture has, or (for
 * plain float storage) under 90% of its parameters, is refused: real checkpoints match
 * the architecture's count to within a few percent (extra tensors, such as vision towers,
 * only add). */
static enum gm_status check_complete(const struct gm_modelfile *mf, const struct gm_model *m,
                                     struct gm_error *err)
{
    struct gm_param_counts pc;
    struct gm_error ignored;
    const char *what = m->model_type[0] ? m->model_type : gm_arch_name(m->arch);

    if (m->arch == GM_ARCH_UNKNOWN || gm_model_count_params(m, &pc, &ignored) != GM_OK)
        return GM_OK; /* no architecture to hold the files against */
    if (mf->n_tensors * 2 < pc.n_tensors)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "%s %llu tensor%s, but a %s model of this configuration has %llu: "
                       "shards or tensors are missing (give every shard, or the config.json "
                       "alone to size the model from its architecture)",
                       files_hold(mf->format), (unsigned long long)mf->n_tensors,
                       mf->n_tensors == 1 ? "" : "s", what, (unsigned long long)pc.n_tensors);
    if (all_plain(mf) && mf->n_params < pc.total / 10 * 9)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "%s %llu parameters, but a %s model of this configuration has "
                       "%llu (%.1f%% of them present): shards or tensors are missing (give every "
                       "shard, or the config.json alone to size the model from its architecture)",
                       files_hold(mf->format), (unsigned long long)mf->n_params, what,
                       (unsigned long long)pc.total,
                       100.0 * (double)mf->n_params / (double)pc.total);
    return GM_OK;
}

enum gm_status gm_modelfile_to_model(const struct gm_modelfile *mf, struct gm_model *out,
                                     struct gm_error *err)
{
    enum gm_status st;
    int dom = gm_modelfile_dominant_dtype(mf);
    gm_model_init(out);
    if (mf->format == GM_MODELFILE_GGUF) {
        st = from_gguf(mf, out, err);
    } else if (mf->format == GM_MODELFILE_SAFETENSORS) {
        if (!mf->config_path[0])
            return gm_fail(err, GM_ERR_NOENT, GM_NO_OFFSET,
                           "no config.json beside the safetensors files: the architecture is "
                           "not in them (copy the model's config.json there, or pass "
                           "--parameters)");
        st = gm_model_load_hf_config(mf->config_path, out, err);
    } else {
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "no model file loaded");
    }
    if (st)
        return st;
    st = check_complete(mf, out, err);
    if (st)
        return st;
    out->n_params_file = mf->n_params;
    out->weight_bytes_file = mf->n_bytes;
    if (dom >= 0 && plain_dtype(mf->dtypes[dom].name) != GM_DTYPE_UNKNOWN &&
        (mf->format == GM_MODELFILE_GGUF || out->dtype == GM_DTYPE_UNKNOWN))
        out->dtype = plain_dtype(mf->dtypes[dom].name);
    return GM_OK;
}
