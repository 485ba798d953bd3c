/* SPDX-License-Identifier: MIT */
/* stage_pipeline.c - the pipeline stage: per-stage memory under pipeline parallelism
 * (training: 1F1B and interleaved 1F1B schedules).
 *
 * With p stages each holding about L/p decoder layers (Narayanan et al. 2021, PipeDream-
 * Flush / Megatron 1F1B), stage s (0-based) has p - s micro-batches in flight at its
 * peak, so the first stage keeps p x L/p = L layers' worth of one micro-batch's
 * activations (Korthikanti et al. 2022, section 4.2) and the last stage L/p layers' worth
 * plus the logits and loss.  The first stage also holds the embedding, the last the final
 * norm and the lm_head (with tied embeddings both hold the matrix, as Megatron does).
 * Model state (weights, master copy, gradients, optimizer state and its temporaries)
 * scales with the parameters a stage holds; the gathered-layer and bucket terms of
 * sharding are per layer and stay.  A component's extent says which of these it is.
 * Devices of one stage get the same figures; the estimate kept is the stage with the
 * largest figures (every device adds the same runtime overheads, stage_runtime.c).
 *
 * Interleaved 1F1B (--pp-schedule interleaved-1f1b, torch ScheduleInterleaved1F1B): rank r
 * holds v looped stages (r, r + p, ...; torchtitan stage_ids_this_rank, style "loop") of
 * about L/(p v) layers each, the first rank the embedding, the last the head.  Each rank
 * runs W_r forwards before its first backward, W_r = min((v - 1) x mpr + 2 (p - 1 - r),
 * n x v) with n micro-batches in rounds of mpr = n / max(1, n / p), then one forward
 * before each backward (torch/distributed/pipelining/schedules.py,
 * ScheduleInterleaved1F1B._calculate_single_rank_operations and _get_1f1b_rank_ops):
 * W_r + 1 stage-forwards in flight at its peak, W_r when the warmup ran them all.  In
 * units of one micro-batch through all the rank's layers that is (W_r + 1) / v.  W_r falls
 * with r, so the middle group takes rank 1's figure, the largest of the middle ranks'. */
#include "estimate/estimate_int.h"

#include "gpumem/arena.h"

#include <stdio.h>
#include <string.h>

struct stage {
    const char *role;
    uint64_t layers;
    uint64_t params;
    double act; /* factor on per-layer activations */
    bool first, last;
    uint64_t count; /* stages of this kind */
};

/* 'e' (an estimate of its own) gets the components of 'whole' as stage 's' holds them. */
static enum gm_status scale_stage(const struct gm_estimate *whole, const struct stage *s,
                                  uint64_t total, uint64_t n_layers, struct gm_estimate *e,
                                  struct gm_error *err)
{
    enum gm_status st;
    est_reset(e);
    e->mode = whole->mode;
    if ((st = est_copy_components(e, whole, err)) != GM_OK)
        return st;
    for (size_t i = e->n_components; i-- > 0;) {
        struct gm_est_component *c = &e->components[i];
        switch (c->extent) {
        case GM_EXTENT_ALL_LAYERS:
            if (c->kind == GM_KIND_ACTIVATIONS)
                c->bytes = (uint64_t)((double)c->bytes * s->act * (double)s->layers /
                                      (double)(n_layers ? n_layers : 1));
            else
                c->bytes = gm_mul_div_u64(c->bytes, s->params, total ? total : 1);
            break;
        case GM_EXTENT_ENDS:
            if (!s->first && !s->last)
                est_remove(e, i);
            break;
        case GM_EXTENT_HEAD:
            if (!s->last)
                est_remove(e, i);
            break;
        case GM_EXTENT_ONE_LAYER:
            break;
        }
    }
    return GM_OK;
}

uint64_t est_pp_microbatches(const struct gm_job *j)
{
    if (j->parallel.pp_microbatches)
        return j->parallel.pp_microbatches;
    if (j->workload.grad_accum > 1)
        return j->workload.grad_accum;
    return j->parallel.pp ? j->parallel.pp : 1;
}

uint64_t gm_est_pp_interleaved_in_flight(uint64_t p, uint64_t v, uint64_t n_mb, uint64_t rank)
{
    uint64_t rounds, per_round, warmup, total = n_mb * v;
    if (!p || !v || !n_mb || rank >= p)
        return 0;
    rounds = n_mb / p ? n_mb / p : 1;
    per_round = n_mb / rounds;
    warmup = (v - 1) * per_round + 2 * (p - 1 - rank);
    return warmup >= total ? total : warmup + 1;
}

/* The activations a rank keeps at its peak, in micro-batches through all its layers. */
static double in_flight(const struct gm_job *j, uint64_t rank)
{
    uint64_t p = j->parallel.pp, v = j->parallel.pp_stages_per_rank;
    if (j->parallel.pp_schedule != GM_PP_INTERLEAVED_1F1B)
        return (double)(p - rank); /* Schedule1F1B: p - s forwards before the first backward */
    return (double)gm_est_pp_interleaved_in_flight(p, v, est_pp_microbatches(j), rank) / (double)v;
}

enum gm_status est_stage_pipeline(struct est_ctx *cx, struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    const struct gm_model *m = cx->m;
    const struct gm_param_counts *pc = &cx->pc;
    struct gm_estimate *e = cx->e;
    struct gm_est_layout *l = &e->layout;
    uint64_t p = j->parallel.pp, L, per_stage, layer, embed, head, total, per_group;
    double frag;
    struct stage st[3];
    size_t n_st = 0, worst = 0;
    struct gm_estimate *tmp;
    uint64_t worst_reserved = 0;
    enum gm_status sst = GM_OK;

    if (j->mode != GM_EST_TRAIN || p <= 1)
        return GM_OK;
    frag = est_run_fragmentation(cx);
    if (!m || !m->n_layers)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--pp needs a model with its layers");
    L = m->n_layers;
    if (p > L)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--pp %llu exceeds the %llu decoder layers", (unsigned long long)p,
                       (unsigned long long)L);
    if (j->parallel.pp_schedule == GM_PP_INTERLEAVED_1F1B && p * j->parallel.pp_stages_per_rank > L)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--pp %llu x --pp-stages-per-rank %llu exceeds the %llu decoder layers",
                       (unsigned long long)p, (unsigned long long)j->parallel.pp_stages_per_rank,
                       (unsigned long long)L);
    per_stage = (L + p - 1) / p;
    layer = est_layer_params(m, pc);
    embed = pc->embedding + pc->positions;
    head = pc->lm_head ? pc->lm_head : pc->embedding; /* tied: the last stage keeps a copy */
    total = pc->total ? pc->total : 1;
    per_group = l->gpus / p;
    /* first stage */
    st[n_st++] = (struct stage){
        "first stage", per_stage, layer * per_stage + embed, in_flight(j, 0), true, false, 1};
    if (p > 2)
        st[n_st++] = (struct stage){
            "middle stages", per_stage, layer * per_stage, in_flight(j, 1), false, false, p - 2};
    st[n_st++] = (struct stage){
        "last stage", L - per_stage * (p - 1), 0, in_flight(j, p - 1), false, true, 1};
    st[n_st - 1].params = layer * st[n_st - 1].layers + head;
    tmp = est_new();
    if (!tmp)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    l->n_groups = 0;
    for (size_t i = 0; i < n_st; i++) {
        struct gm_device_group *gr = &l->groups[l->n_groups++];
        if ((sst = scale_stage(e, &st[i], total, L, tmp, err)) != GM_OK)
            goto out_free;
        est_figures(tmp, frag);
        snprintf(gr->role, sizeof gr->role, "%s", st[i].role);
        /* ranks are stage-major: stage s holds ranks [s, s + 1) x gpus / p */
        gr->first_rank = i == 0 ? 0 : (i == n_st - 1 ? per_group * (p - 1) : per_group);
        gr->count = per_group * st[i].count;
        gr->layers = st[i].layers;
        gr->allocated_bytes = tmp->peak_allocated_bytes;
        gr->reserved_bytes = tmp->peak_reserved_bytes;
        if (tmp->peak_reserved_bytes > worst_reserved) {
            worst_reserved = tmp->peak_reserved_bytes;
            worst = i;
        }
    }
    if ((sst = scale_stage(e, &st[worst], total, L, tmp, err)) != GM_OK ||
        (sst = est_copy_components(e, tmp, err)) != GM_OK)
        goto out_free;
    if (j->parallel.pp_schedule == GM_PP_INTERLEAVED_1F1B)
        est_assume(e,
                   "pipeline of %llu ranks (interleaved 1F1B, %llu stages per rank, %llu "
                   "micro-batches), %llu layers per rank; figures of the %s, the largest (it "
                   "keeps %.2f micro-batches of its layers in flight)",
                   (unsigned long long)p, (unsigned long long)j->parallel.pp_stages_per_rank,
                   (unsigned long long)est_pp_microbatches(j), (unsigned long long)per_stage,
                   st[worst].role, st[worst].act);
    else
        est_assume(e,
                   "pipeline of %llu stages (1F1B), %llu layers per stage; figures of the "
                   "%s, the largest (stage s keeps p - s micro-batches in flight)",
                   (unsigned long long)p, (unsigned long long)per_stage, st[worst].role);
out_free:
    gm_estimate_free(tmp);
    return sst;
}
