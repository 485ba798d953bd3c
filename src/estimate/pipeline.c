/* SPDX-License-Identifier: MIT */
/* pipeline.c - per-stage memory under pipeline parallelism (training, 1F1B schedule).
 *
 * With p stages each holding about L/p decoder layers (Narayanan et al. 2021, PipeDream-
 * Flush / Megatron 1F1B), stage s (0-based) has p - s micro-batches in flight at its
 * peak, so the first stage keeps p x L/p = L layers' worth of one micro-batch's
 * activations (Korthikanti et al. 2022, section 4.2) and the last stage L/p layers' worth
 * plus the logits and loss.  The first stage also holds the embedding, the last the final
 * norm and the lm_head (with tied embeddings both hold the matrix, as Megatron does).
 * Model state (weights, master copy, gradients, optimizer state and its temporaries)
 * scales with the parameters a stage holds; the gathered-layer and bucket terms of
 * sharding are per layer and stay.  Devices of one stage get the same figures; the
 * estimate kept is the stage with the largest device figure. */
#include "estimate/ext_int.h"

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

static void scale_stage(const struct gm_estimate *whole, const struct stage *s, uint64_t total,
                        uint64_t n_layers, struct gm_estimate *e)
{
    *e = *whole;
    for (size_t i = e->n_components; i-- > 0;) {
        struct gm_est_component *c = &e->components[i];
        enum ext_role r = ext_component_role(c);
        switch (r) {
        case ROLE_WEIGHTS:
        case ROLE_MASTER:
        case ROLE_AUTOCAST:
        case ROLE_GRADS:
        case ROLE_OPT_STATE:
        case ROLE_OPT_TEMP:
            /* per-layer buffers of sharding stay; model state follows the parameters */
            if (strncmp(c->name, "gathered", 8) != 0 && strncmp(c->name, "zero_", 5) != 0)
                c->bytes = gm_mul_div_u64(c->bytes, s->params, total ? total : 1);
            break;
        case ROLE_LOGITS:
            if (!s->last)
                ext_remove_component(e, i);
            break;
        case ROLE_ACT:
            if (strcmp(c->name, "activations") == 0 || strcmp(c->name, "lora_activations") == 0)
                c->bytes = (uint64_t)((double)c->bytes * s->act * (double)s->layers /
                                      (double)(n_layers ? n_layers : 1));
            else if (strncmp(c->name, "embeddings", 10) == 0 && !s->first && !s->last)
                ext_remove_component(e, i);
            break;
        default:
            break;
        }
    }
}

enum gm_status ext_apply_pipeline(const struct gm_estimate_inputs *in,
                                  const struct gm_estimate_ext *x, const struct gm_param_counts *pc,
                                  struct gm_estimate *e, struct gm_estimate_ext_result *res,
                                  struct gm_error *err)
{
    const struct gm_model *m = in->model;
    uint64_t p = x->pp, L, per_stage, layer, embed, head, total, per_group;
    struct stage st[3];
    size_t n_st = 0, worst = 0;
    struct gm_estimate *tmp;
    uint64_t worst_dev = 0;

    if (!m || !m->n_layers)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--pp needs a model with its layers");
    L = m->n_layers;
    if (p > L)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--pp %llu exceeds the %llu decoder layers", (unsigned long long)p,
                       (unsigned long long)L);
    per_stage = (L + p - 1) / p;
    layer = ext_layer_params(m, pc);
    embed = pc->embedding + pc->positions;
    head = pc->lm_head ? pc->lm_head : pc->embedding; /* tied: the last stage keeps a copy */
    total = pc->total ? pc->total : 1;
    per_group = x->gpus / p;
    /* first stage */
    st[n_st++] = (struct stage){
        "first stage", per_stage, layer * per_stage + embed, (double)p, true, false, 1};
    if (p > 2)
        st[n_st++] = (struct stage){
            "middle stages", per_stage, layer * per_stage, (double)(p - 1), false, false, p - 2};
    st[n_st++] = (struct stage){"last stage", L - per_stage * (p - 1), 0, 1.0, false, true, 1};
    st[n_st - 1].params = layer * st[n_st - 1].layers + head;
    tmp = gm_malloc(sizeof(*tmp));
    if (!tmp)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    res->n_groups = 0;
    for (size_t i = 0; i < n_st; i++) {
        struct gm_device_group *gr = &res->groups[res->n_groups++];
        scale_stage(e, &st[i], total, L, tmp);
        gm_estimate_finish(in, tmp);
        snprintf(gr->role, sizeof gr->role, "%s", st[i].role);
        /* ranks are stage-major: stage s holds ranks [s, s + 1) x gpus / p */
        gr->first_rank = i == 0 ? 0 : (i == n_st - 1 ? per_group * (p - 1) : per_group);
        gr->count = per_group * st[i].count;
        gr->layers = st[i].layers;
        gr->allocated_bytes = tmp->peak_allocated_bytes;
        gr->reserved_bytes = tmp->peak_reserved_bytes;
        gr->device_bytes = tmp->device_bytes;
        if (tmp->device_bytes > worst_dev) {
            worst_dev = tmp->device_bytes;
            worst = i;
        }
    }
    scale_stage(e, &st[worst], total, L, tmp);
    *e = *tmp;
    gm_free(tmp);
    gm_estimate_assume(e,
                       "pipeline of %llu stages (1F1B), %llu layers per stage; figures of the "
                       "%s, the largest (stage s keeps p - s micro-batches in flight)",
                       (unsigned long long)p, (unsigned long long)per_stage, st[worst].role);
    return GM_OK;
}
