/* SPDX-License-Identifier: MIT */
/* estimate.h - predict the GPU memory of a training or inference job before launching it.
 *
 * The caller fills a struct gm_estimate_inputs (start from gm_estimate_inputs_init(), which
 * sets every documented default, so fields added later keep working), and
 * gm_estimate_run() returns a struct gm_estimate: a list of components (name, bytes, the
 * phases during which each is live), the peak of each phase, and three predicted figures
 * named as users see them:
 *   peak allocated  torch.cuda.max_memory_allocated()
 *   peak reserved   torch.cuda.max_memory_reserved() (allocator rounding and fragmentation)
 *   device used     what nvidia-smi shows for the process (adds the CUDA context and the
 *                   library workspaces outside the caching allocator)
 * plus every assumption made, as sentences.  Formulas and sources: docs/estimate.md.
 *
 * Extension points: new job kinds add fields to the inputs (keep gm_estimate_inputs_init
 * defaults neutral) and add components with gm_estimate_add_component(); new phases are
 * appended to enum gm_est_phase. */
#ifndef GPUMEM_ESTIMATE_H
#define GPUMEM_ESTIMATE_H

#include "gpumem/error.h"
#include "gpumem/model.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum gm_est_mode {
    GM_EST_WEIGHTS = 0, /* weights only (+ an optional flat reserve) */
    GM_EST_TRAIN,
    GM_EST_INFER
};

enum gm_precision {
    GM_PREC_FP32 = 0,   /* everything fp32 */
    GM_PREC_FP16_MIXED, /* torch autocast fp16: fp32 weights/grads/state, fp16 activations */
    GM_PREC_BF16_MIXED, /* torch autocast bf16 */
    GM_PREC_BF16,       /* pure bf16: weights, grads and optimizer state in bf16 */
    GM_PREC__COUNT
};

enum gm_optimizer {
    GM_OPT_ADAMW = 0,
    GM_OPT_ADAM,
    GM_OPT_SGD,
    GM_OPT_SGD_MOMENTUM,
    GM_OPT_ADAMW_8BIT,
    GM_OPT_ADAFACTOR,
    GM_OPT_LION,
    GM_OPT__COUNT
};

/* How the optimizer step walks the parameters (decides the step temporaries). */
enum gm_optim_impl {
    GM_OPTIM_FOREACH = 0, /* torch default on CUDA: one temporary the size of all params */
    GM_OPTIM_FUSED,       /* fused kernel: no temporaries */
    GM_OPTIM_FOR_LOOP,    /* one parameter at a time: temporaries of the largest tensor */
    GM_OPTIM__COUNT
};

enum gm_grad_ckpt { GM_CKPT_NONE = 0, GM_CKPT_FULL, GM_CKPT__COUNT };

enum gm_attention {
    GM_ATTN_SDPA = 0, /* SDPA / flash: the s*s scores are never stored */
    GM_ATTN_EAGER,    /* scores and probabilities materialised and saved for backward */
    GM_ATTN__COUNT
};

enum gm_method {
    GM_METHOD_ARCH = 0, /* per-tensor accounting from the model's architecture */
    GM_METHOD_BLOG,     /* HF blog: N*P + 2NP + max(2NP, A*B*L*P) */
    GM_METHOD__COUNT
};

/* When gradients are released: PyTorch >= 2.0 zero_grad() frees them (set_to_none), so
 * they do not coexist with the next forward's activations; older code kept them. */
enum gm_zero_grad { GM_ZERO_GRAD_SET_TO_NONE = 0, GM_ZERO_GRAD_ZEROS, GM_ZERO_GRAD__COUNT };

/* Phases of a step; a component is live during a set of them (flags). */
enum gm_est_phase {
    GM_EST_PHASE_FORWARD_BACKWARD = 1 << 0,
    GM_EST_PHASE_OPTIMIZER_STEP = 1 << 1,
    GM_EST_PHASE_PREFILL = 1 << 2,
    GM_EST_PHASE_DECODE = 1 << 3,
    /* The end of the backward pass: every gradient allocated, activations released.  The
     * forward/backward peak is the larger of its start and its end. */
    GM_EST_PHASE_BACKWARD_END = 1 << 4
};
#define GM_EST_PHASE_TRAIN_ALL                                                                     \
    (GM_EST_PHASE_FORWARD_BACKWARD | GM_EST_PHASE_BACKWARD_END | GM_EST_PHASE_OPTIMIZER_STEP)
#define GM_EST_PHASE_INFER_ALL (GM_EST_PHASE_PREFILL | GM_EST_PHASE_DECODE)
#define GM_PHASE_ALL           (GM_EST_PHASE_TRAIN_ALL | GM_EST_PHASE_INFER_ALL)

struct gm_estimate_inputs {
    enum gm_est_mode mode;
    enum gm_method method;
    const struct gm_model *model; /* borrowed; NULL for plain numbers */
    uint64_t n_params;            /* overrides the model's count; required without a model */

    /* weights */
    double weight_bits;     /* bits per weight for inference / weights mode; 0 = from
                               precision (training) or the model dtype (else 16) */
    uint64_t reserve_bytes; /* flat reserve added in weights mode (an assumption) */

    /* training */
    enum gm_precision precision;
    enum gm_optimizer optimizer;
    enum gm_optim_impl optim_impl;
    enum gm_grad_ckpt grad_ckpt;
    enum gm_attention attention;
    enum gm_zero_grad zero_grad;
    uint64_t batch;               /* micro-batch (training) or concurrent sequences (inference) */
    uint64_t seq;                 /* training sequence length, tokens */
    double activations_per_token; /* blog method: A (elements per token); 0 = the blog's fit */

    /* inference */
    uint64_t context;       /* prompt tokens per sequence */
    uint64_t new_tokens;    /* generated tokens per sequence */
    enum gm_dtype kv_dtype; /* KV cache element type; UNKNOWN = activation dtype */
    bool full_logits;       /* prefill computes logits for every position */

    /* runtime overheads (defaults documented in docs/estimate.md) */
    uint64_t cuda_context_bytes; /* CUDA context + loaded kernels, outside the allocator */
    uint64_t workspace_bytes;    /* cuBLAS/cuDNN workspaces, outside the allocator */
    double fragmentation;        /* reserved/allocated excess on transient memory (0.25) */

    /* fit */
    uint64_t gpu_memory_bytes; /* capacity to judge against; 0 = none */
    const char *gpu_name;      /* borrowed, for messages; may be NULL */
};

#define GM_EST_MAX_COMPONENTS  32
#define GM_EST_MAX_ASSUMPTIONS 32
#define GM_EST_NAME_MAX        48
#define GM_EST_NOTE_MAX        200

struct gm_est_component {
    char name[GM_EST_NAME_MAX]; /* "weights", "kv_cache", ... (stable, snake_case) */
    uint64_t bytes;
    unsigned phases;            /* enum gm_est_phase flags */
    bool transient;             /* freed within the phase (counted as dynamic memory) */
    char note[GM_EST_NOTE_MAX]; /* how it was computed, human-readable */
};

struct gm_estimate {
    enum gm_est_mode mode;
    uint64_t n_params;     /* parameters used */
    uint64_t weight_bytes; /* weights as stored for this job */
    struct gm_est_component components[GM_EST_MAX_COMPONENTS];
    size_t n_components;
    uint64_t forward_backward_bytes; /* training phase peaks (allocated): max of the two */
    uint64_t backward_start_bytes;   /*   moments of the forward/backward phase */
    uint64_t backward_end_bytes;
    uint64_t optimizer_step_bytes;
    uint64_t prefill_bytes; /* inference phase peaks (allocated) */
    uint64_t decode_bytes;
    enum gm_est_phase peak_phase; /* the phase that dominates */
    uint64_t peak_allocated_bytes;
    uint64_t peak_reserved_bytes;
    uint64_t device_bytes;        /* nvidia-smi view */
    uint64_t cuda_context_bytes;  /* as used */
    uint64_t workspace_bytes;     /* as used */
    double activations_per_token; /* blog method: A as used */
    char assumptions[GM_EST_MAX_ASSUMPTIONS][GM_EST_NOTE_MAX];
    size_t n_assumptions;
};

/* Defaults: weights mode, arch method, bf16-mixed, adamw, foreach, no checkpointing, sdpa,
 * set_to_none, batch 1, seq 2048, context 2048, new tokens 0, CUDA context 450 MiB,
 * workspaces 64 MiB, fragmentation 0.25. */
void gm_estimate_inputs_init(struct gm_estimate_inputs *in);

/* Compute the estimate.  GM_ERR_INVALID naming the bad input (zero batch, absurd sizes
 * whose result would overflow 2^64 bytes, no model and no n_params, ...), or the model's
 * validation error. */
enum gm_status gm_estimate_run(const struct gm_estimate_inputs *in, struct gm_estimate *out,
                               struct gm_error *err);

/* Append a component; 'note' may be NULL.  Used by gm_estimate_run() and by extensions
 * (LoRA, ZeRO, serving engines) before gm_estimate_finish().  GM_ERR_LIMIT when full. */
enum gm_status gm_estimate_add_component(struct gm_estimate *e, const char *name, uint64_t bytes,
                                         unsigned phases, bool transient, const char *note,
                                         struct gm_error *err);
/* Append an assumption sentence (printf-style); silently dropped when the list is full. */
void gm_estimate_assume(struct gm_estimate *e, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Recompute phase peaks, the dominating phase and the three predicted figures from the
 * components and the overheads in 'in'. */
void gm_estimate_finish(const struct gm_estimate_inputs *in, struct gm_estimate *e);

/* Stable names for enums (CLI choices and JSON). */
const char *gm_precision_name(enum gm_precision p);
const char *gm_optimizer_name(enum gm_optimizer o);
const char *gm_est_phase_name(enum gm_est_phase p);
/* "persistent", "forward_backward", ... for a set of phase flags; static storage. */
const char *gm_est_phases_name(unsigned phases);

/* GPU catalog: memory as nvidia-smi reports the total (MiB-exact where known). */
struct gm_gpu {
    const char *name;      /* "H100-80GB" */
    const char *aliases;   /* space-separated lowercase aliases ("h100 h100-sxm") */
    uint64_t memory_bytes; /* total device memory */
    const char *kind;      /* "data-centre" or "consumer" */
};
size_t gm_gpu_catalog_count(void);
const struct gm_gpu *gm_gpu_catalog_get(size_t i);
/* Case-insensitive name or alias; NULL when unknown. */
const struct gm_gpu *gm_gpu_find(const char *name);

#ifdef __cplusplus
}
#endif
#endif
