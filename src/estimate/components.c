/* SPDX-License-Identifier: MIT */
/* components.c - the estimate's components and what follows from them: the phase peaks,
 * the dominating phase and the figures, the kinds (names, where they live, the snapshot
 * category each lands in), and the names of the result's enums (the job's choices are
 * named by the settings table, job.c).
 *
 * Phase accounting: each component carries the set of phases during which it is live.  A
 * phase's allocated peak is the sum of its live components inside the caching allocator;
 * the job's peak allocated is the largest phase.  Reserved adds the allocator's excess on
 * transient memory (blocks freed and reused at different sizes leave cached but unused
 * segments): fragmentation x transient bytes of the peak phase, rounded up to the 2 MiB
 * segment granularity.  Device used adds the components that live outside the caching
 * allocator (CUDA context, workspaces, NCCL, an engine's non-torch memory). */
#include "estimate/estimate_int.h"

#include "gpumem/arena.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- the estimate's storage ---- */

struct gm_estimate *est_new(void)
{
    struct gm_estimate *e = gm_calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->store = gm_calloc(1, sizeof(*e->store));
    if (!e->store) {
        gm_free(e);
        return NULL;
    }
    return e;
}

void est_reset(struct gm_estimate *e)
{
    struct gm_est_component *components = e->components;
    char(*assumptions)[GM_EST_NOTE_MAX] = e->assumptions;
    struct gm_est_store *store = e->store;
    memset(e, 0, sizeof(*e));
    e->components = components;
    e->assumptions = assumptions;
    e->store = store;
    store->nomem = false;
}

void gm_estimate_free(struct gm_estimate *e)
{
    if (!e)
        return;
    if (e->store) {
        gm_estimate_free(e->store->ends[0]);
        gm_estimate_free(e->store->ends[1]);
        est_replay_memo_free(e->store->replays);
        est_load_memo_free(e->store->loads);
    }
    gm_free(e->components);
    gm_free(e->assumptions);
    gm_free(e->store);
    gm_free(e);
}

/* Room for one more element of a list of 'size'-byte elements at *v (n used, *cap held),
 * up to 'max' elements.  False when the list is at 'max' or the memory is not there. */
static bool grow(void **v, size_t *cap, size_t n, size_t size, size_t max)
{
    size_t want;
    void *p;
    if (n < *cap)
        return true;
    if (n >= max)
        return false;
    want = *cap ? *cap * 2 : 16;
    if (want > max)
        want = max;
    if (!(p = gm_realloc(*v, want * size)))
        return false;
    *v = p;
    *cap = want;
    return true;
}

enum gm_status est_copy_components(struct gm_estimate *to, const struct gm_estimate *from,
                                   struct gm_error *err)
{
    void *v = to->components;
    if (from->n_components > to->store->cap_components) {
        if (!(v = gm_realloc(v, from->n_components * sizeof(*from->components))))
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory (estimate components)");
        to->components = v;
        to->store->cap_components = from->n_components;
    }
    if (from->n_components)
        memcpy(to->components, from->components, from->n_components * sizeof(*from->components));
    to->n_components = from->n_components;
    return GM_OK;
}

enum gm_status est_add(struct gm_estimate *e, enum gm_est_kind kind, const char *name,
                       uint64_t bytes, unsigned phases, bool transient, enum gm_est_extent extent,
                       const char *note, struct gm_error *err)
{
    struct gm_est_component *c;
    void *v = e->components;
    if (e->n_components >= GM_EST_MAX_COMPONENTS)
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "estimate: more than %d components",
                       GM_EST_MAX_COMPONENTS);
    if (!grow(&v, &e->store->cap_components, e->n_components, sizeof(*c), GM_EST_MAX_COMPONENTS))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory (estimate components)");
    e->components = v;
    c = &e->components[e->n_components++];
    memset(c, 0, sizeof(*c));
    c->kind = kind;
    snprintf(c->name, sizeof(c->name), "%s", name);
    c->bytes = bytes;
    c->phases = phases;
    c->transient = transient;
    c->extent = extent;
    if (note)
        snprintf(c->note, sizeof(c->note), "%s", note);
    return GM_OK;
}

void est_remove(struct gm_estimate *e, size_t i)
{
    if (i >= e->n_components)
        return;
    memmove(&e->components[i], &e->components[i + 1],
            (e->n_components - i - 1) * sizeof(e->components[0]));
    e->n_components--;
}

void est_assume(struct gm_estimate *e, const char *fmt, ...)
{
    va_list ap;
    void *v = e->assumptions;
    if (e->n_assumptions >= GM_EST_MAX_ASSUMPTIONS)
        return;
    if (!grow(&v, &e->store->cap_assumptions, e->n_assumptions, sizeof(e->assumptions[0]),
              GM_EST_MAX_ASSUMPTIONS)) {
        e->store->nomem = true; /* the run reports it (driver.c) */
        return;
    }
    e->assumptions = v;
    va_start(ap, fmt);
    vsnprintf(e->assumptions[e->n_assumptions++], GM_EST_NOTE_MAX, fmt, ap);
    va_end(ap);
}

void est_note_append(struct gm_est_component *c, const char *text)
{
    size_t len = strlen(c->note);
    if (len + strlen(text) + 3 < sizeof(c->note))
        snprintf(c->note + len, sizeof(c->note) - len, "%s%s", len ? "; " : "", text);
}

static double share(const struct gm_est_component *c, double part)
{
    double s = c->bytes ? part / (double)c->bytes : 0.0;
    return s > 1.0 ? 1.0 : s > 0.0 ? s : 0.0;
}

void est_set_stream(struct gm_estimate *e, enum gm_est_stream stream)
{
    if (e->n_components)
        e->components[e->n_components - 1].stream = stream;
}

void est_set_forward_local(struct gm_estimate *e)
{
    if (e->n_components)
        e->components[e->n_components - 1].forward_local = true;
}

void est_set_tensors(struct gm_estimate *e, unsigned n)
{
    if (e->n_components)
        e->components[e->n_components - 1].tensors = n;
}

void est_set_parts(struct gm_estimate *e, double seq2_bytes, double act_grad_bytes)
{
    struct gm_est_component *c;
    if (!e->n_components)
        return;
    c = &e->components[e->n_components - 1];
    c->seq2_share = share(c, seq2_bytes);
    c->act_grad_share = share(c, act_grad_bytes);
}

/* ---- kinds ---- */

static const struct {
    const char *name;
    bool outside; /* outside PyTorch's caching allocator */
    enum gm_category category;
} kinds[GM_KIND__COUNT] = {
    /* Categories as `gpumem snapshot categories` assigns them on a real run: autocast
     * copies are born in forward and freed in backward (saved, like activations); a
     * gathered layer lives within one pass (a temporary); generate()'s KV cache is born
     * in forward and kept by the caller. */
    [GM_KIND_WEIGHTS] = {"weights", false, GM_CATEGORY_PARAMETER},
    [GM_KIND_MASTER_WEIGHTS] = {"master_weights", false, GM_CATEGORY_PARAMETER},
    [GM_KIND_ADAPTERS] = {"adapters", false, GM_CATEGORY_PARAMETER},
    [GM_KIND_WEIGHT_COPIES] = {"weight_copies", false, GM_CATEGORY_ACTIVATION},
    [GM_KIND_GATHERED] = {"gathered", false, GM_CATEGORY_OTHER},
    [GM_KIND_GRADIENTS] = {"gradients", false, GM_CATEGORY_GRADIENT},
    [GM_KIND_OPTIMIZER_STATE] = {"optimizer_state", false, GM_CATEGORY_OPTIMIZER_STATE},
    [GM_KIND_OPTIMIZER_TEMP] = {"optimizer_temp", false, GM_CATEGORY_OPTIMIZER_TEMP},
    [GM_KIND_ACTIVATIONS] = {"activations", false, GM_CATEGORY_ACTIVATION},
    [GM_KIND_LOGITS] = {"logits", false, GM_CATEGORY_ACTIVATION},
    [GM_KIND_BACKWARD_TEMP] = {"backward_temp", false, GM_CATEGORY_OTHER},
    [GM_KIND_KV_CACHE] = {"kv_cache", false, GM_CATEGORY_ACTIVATION},
    [GM_KIND_COMM_BUFFERS] = {"comm_buffers", false, GM_CATEGORY_OTHER},
    [GM_KIND_ENGINE_POOL] = {"engine_pool", false, GM_CATEGORY_OTHER},
    [GM_KIND_TORCH_WORKSPACE] = {"torch_workspace", false, GM_CATEGORY_OTHER},
    [GM_KIND_CUDA_CONTEXT] = {"cuda_context", true, GM_CATEGORY_OTHER},
    [GM_KIND_WORKSPACE] = {"workspace", true, GM_CATEGORY_OTHER},
    [GM_KIND_NCCL] = {"nccl", true, GM_CATEGORY_OTHER},
    [GM_KIND_NON_TORCH] = {"non_torch", true, GM_CATEGORY_OTHER},
    [GM_KIND_RESERVE] = {"reserve", true, GM_CATEGORY_OTHER},
    [GM_KIND_MANAGED] = {"managed", true, GM_CATEGORY_OTHER},
    [GM_KIND_SYMM_MEM] = {"symm_mem", true, GM_CATEGORY_OTHER},
};

const char *gm_est_kind_name(enum gm_est_kind k)
{
    return (unsigned)k < GM_KIND__COUNT ? kinds[k].name : "unknown";
}

bool gm_est_kind_outside_allocator(enum gm_est_kind k)
{
    return (unsigned)k < GM_KIND__COUNT && kinds[k].outside;
}

bool gm_est_kind_category(enum gm_est_kind k, enum gm_category *out)
{
    if ((unsigned)k >= GM_KIND__COUNT || kinds[k].outside)
        return false;
    *out = kinds[k].category;
    return true;
}

bool est_component_categories(const struct gm_est_component *c, uint64_t out[GM_CATEGORY_COUNT])
{
    enum gm_category cat;
    uint64_t grad;
    if (!gm_est_kind_category(c->kind, &cat))
        return false;
    grad = est_round(c->act_grad_share * (double)c->bytes);
    if (grad > c->bytes)
        grad = c->bytes;
    out[cat] = gm_add_sat(out[cat], c->bytes - grad);
    out[GM_CATEGORY_OTHER] = gm_add_sat(out[GM_CATEGORY_OTHER], grad);
    return true;
}

uint64_t gm_estimate_kind_bytes(const struct gm_estimate *e, enum gm_est_kind kind)
{
    uint64_t s = 0;
    for (size_t i = 0; i < e->n_components; i++)
        if (e->components[i].kind == kind)
            s = gm_add_sat(s, e->components[i].bytes);
    return s;
}

/* ---- figures ---- */

static uint64_t phase_sum(const struct gm_estimate *e, unsigned phase, bool transient_only)
{
    uint64_t s = 0;
    for (size_t i = 0; i < e->n_components; i++) {
        const struct gm_est_component *c = &e->components[i];
        if (gm_est_kind_outside_allocator(c->kind))
            continue;
        if ((c->phases & phase) && (!transient_only || c->transient))
            s = gm_add_sat(s, c->bytes);
    }
    return s;
}

void est_figures(struct gm_estimate *e, double fragmentation)
{
    static const unsigned order[] = {GM_EST_PHASE_FORWARD_BACKWARD, GM_EST_PHASE_LOSS,
                                     GM_EST_PHASE_BACKWARD_END,     GM_EST_PHASE_OPTIMIZER_STEP,
                                     GM_EST_PHASE_PREFILL,          GM_EST_PHASE_DECODE};
    unsigned best = 0;
    uint64_t peak = 0, transient, frag, reserved;

    e->backward_start_bytes = phase_sum(e, GM_EST_PHASE_FORWARD_BACKWARD, false);
    e->backward_end_bytes = phase_sum(e, GM_EST_PHASE_BACKWARD_END, false);
    e->loss_bytes = phase_sum(e, GM_EST_PHASE_LOSS, false);
    e->forward_backward_bytes = e->backward_start_bytes > e->backward_end_bytes
                                    ? e->backward_start_bytes
                                    : e->backward_end_bytes;
    if (e->loss_bytes > e->forward_backward_bytes)
        e->forward_backward_bytes = e->loss_bytes;
    e->optimizer_step_bytes = phase_sum(e, GM_EST_PHASE_OPTIMIZER_STEP, false);
    e->prefill_bytes = phase_sum(e, GM_EST_PHASE_PREFILL, false);
    e->decode_bytes = phase_sum(e, GM_EST_PHASE_DECODE, false);
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
        uint64_t s = phase_sum(e, order[i], false);
        if (s > peak) {
            peak = s;
            best = order[i];
        }
    }
    /* The loss and the end of backward belong to the forward/backward phase. */
    e->peak_phase = best == GM_EST_PHASE_BACKWARD_END || best == GM_EST_PHASE_LOSS
                        ? GM_EST_PHASE_FORWARD_BACKWARD
                        : (enum gm_est_phase)(best ? best : GM_EST_PHASE_PREFILL);
    if (e->mode == GM_EST_WEIGHTS)
        e->peak_phase = GM_EST_PHASE_PREFILL;
    e->peak_allocated_bytes = peak;
    if (e->mode == GM_EST_WEIGHTS) {
        /* Weights loaded once: nothing is freed and reused. */
        e->peak_reserved_bytes = peak;
        return;
    }
    transient = best ? (e->mode == GM_EST_TRAIN ? phase_sum(e, GM_EST_PHASE_TRAIN_ALL, true)
                                                : phase_sum(e, best, true))
                     : 0;
    frag = est_round((double)transient * (fragmentation > 0 ? fragmentation : 0));
    reserved = gm_add_sat(peak, frag);
    if (reserved % (2 * GM_MIB))
        reserved = gm_add_sat(reserved, 2 * GM_MIB - reserved % (2 * GM_MIB));
    e->peak_reserved_bytes = reserved;
}

uint64_t est_outside_bytes(const struct gm_estimate *e)
{
    uint64_t s = 0;
    for (size_t i = 0; i < e->n_components; i++)
        if (gm_est_kind_outside_allocator(e->components[i].kind))
            s = gm_add_sat(s, e->components[i].bytes);
    return s;
}

/* ---- names ---- */

static const char *const shard_names[GM_SHARD__COUNT] = {"ddp", "zero-1", "zero-2", "zero-3",
                                                         "fsdp"};
static const char *const fit_names[GM_FIT__COUNT] = {
    "not_judged",         "fits",         "fits_paged", "device_over", "engine_would_not_start",
    "engine_concurrency", "context_over",
};

const char *gm_shard_name(enum gm_shard s)
{
    return (unsigned)s < GM_SHARD__COUNT ? shard_names[s] : "unknown";
}

const char *gm_fit_reason_name(enum gm_fit_reason r)
{
    return (unsigned)r < GM_FIT__COUNT ? fit_names[r] : "unknown";
}

const char *gm_fit_verdict_name(enum gm_fit_verdict v)
{
    static const char *const names[GM_VERDICT__COUNT] = {"not_judged", "fits", "borderline",
                                                         "does_not_fit"};
    return (unsigned)v < GM_VERDICT__COUNT ? names[v] : "unknown";
}

const char *gm_est_uncertainty_name(unsigned flag)
{
    switch (flag) {
    case GM_UNCERTAIN_FRAGMENTATION:
        return "fragmentation";
    case GM_UNCERTAIN_CUDA_CONTEXT:
        return "cuda_context";
    case GM_UNCERTAIN_NCCL:
        return "nccl";
    case GM_UNCERTAIN_ENGINE:
        return "engine_defaults";
    case GM_UNCERTAIN_APPROX:
        return "approximations";
    case GM_UNCERTAIN_STREAM_TIMING:
        return "stream_timing";
    default:
        return "unknown";
    }
}

const char *gm_est_phase_name(enum gm_est_phase p)
{
    switch (p) {
    case GM_EST_PHASE_FORWARD_BACKWARD:
        return "forward_backward";
    case GM_EST_PHASE_OPTIMIZER_STEP:
        return "optimizer_step";
    case GM_EST_PHASE_PREFILL:
        return "prefill";
    case GM_EST_PHASE_DECODE:
        return "decode";
    case GM_EST_PHASE_BACKWARD_END:
        return "backward_end";
    case GM_EST_PHASE_LOSS:
        return "loss";
    }
    return "unknown";
}

const char *gm_est_phases_name(unsigned phases)
{
    if ((phases & GM_EST_PHASE_TRAIN_ALL) == GM_EST_PHASE_TRAIN_ALL ||
        (phases & GM_EST_PHASE_INFER_ALL) == GM_EST_PHASE_INFER_ALL)
        return "persistent";
    if (phases == (GM_EST_PHASE_BACKWARD_END | GM_EST_PHASE_OPTIMIZER_STEP))
        return "backward+optimizer_step";
    if (phases & (GM_EST_PHASE_FORWARD_BACKWARD | GM_EST_PHASE_LOSS))
        return "forward_backward";
    if (phases & GM_EST_PHASE_OPTIMIZER_STEP)
        return "optimizer_step";
    if (phases & GM_EST_PHASE_BACKWARD_END)
        return "backward_end";
    if (phases & GM_EST_PHASE_PREFILL)
        return "prefill";
    if (phases & GM_EST_PHASE_DECODE)
        return "decode";
    return "none";
}
