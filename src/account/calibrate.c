/* SPDX-License-Identifier: MIT */
/* calibrate.c - the estimate's components outside PyTorch's caching allocator set from an
 * account of a real run (gpumem calibrate --account).
 *
 * The equation used is the one at the peak of the process and device with the highest device
 * used (a job's ranks are alike; the busiest is the one that decides a fit).  Its terms map
 * to the estimator's components (docs/account.md):
 *   CUDA context and modules  = context + modules                      -> --cuda-context
 *   library workspaces        = cuBLAS + cuBLASLt + cuDNN              -> --workspace
 *   NCCL buffers              = NCCL / the job's communicators per rank -> --nccl
 *   vLLM's non-torch memory   = everything but the context, modules,
 *                               PyTorch reserved and NCCL (cuBLAS, graphs, rounding, what no
 *                               hook saw, ...)                          -> --non-torch
 * Only the public estimate API is used: the settings by name, gm_estimate_run(), the bytes
 * of each component kind. */
#include "account/account_int.h"

#include "gpumem/arena.h"
#include "gpumem/estimate.h"
#include "gpumem/json.h"
#include "gpumem/units.h"
#include "gpumem/version.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    const char *setting;
    enum gm_est_kind kind;
} comps[GM_ACCOUNT_COMP__COUNT] = {
    [GM_ACCOUNT_COMP_CONTEXT] = {"CUDA context and modules", "cuda-context", GM_KIND_CUDA_CONTEXT},
    [GM_ACCOUNT_COMP_WORKSPACE] = {"library workspaces", "workspace", GM_KIND_WORKSPACE},
    [GM_ACCOUNT_COMP_NCCL] = {"NCCL buffers", "nccl", GM_KIND_NCCL},
    [GM_ACCOUNT_COMP_NON_TORCH] = {"vLLM non-torch memory", "non-torch", GM_KIND_NON_TORCH},
};

const char *gm_account_component_name(enum gm_account_component c)
{
    return (unsigned)c < GM_ACCOUNT_COMP__COUNT ? comps[c].name : "?";
}

/* The equation to calibrate against: the highest device used at a peak. */
static const struct gm_account_balance *busiest(const struct gm_account *a,
                                                struct gm_account_calibration *out)
{
    const struct gm_account_balance *best = NULL;
    for (size_t i = 0; i < gm_account_n_processes(a); i++) {
        const struct gm_account_process *p = gm_account_process(a, i);
        for (size_t d = 0; d < p->n_devices; d++) {
            const struct gm_account_balance *b = &p->devices[d].peak;
            if (!b->valid || !b->used_valid || (best && b->used <= best->used))
                continue;
            best = b;
            out->pid = p->pid;
            out->rank = p->rank;
            out->device = p->devices[d].cuda;
            out->measured_used = b->used;
        }
    }
    return best;
}

static uint64_t measured(const struct gm_account_balance *b, enum gm_account_component c)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < b->n_terms; i++) {
        const struct gm_account_term *t = &b->terms[i];
        bool lib = t->kind == GM_ACCOUNT_TERM_LIBRARY;
        bool in = false;
        switch (c) {
        case GM_ACCOUNT_COMP_CONTEXT:
            in = t->kind == GM_ACCOUNT_TERM_CONTEXT || t->kind == GM_ACCOUNT_TERM_MODULES;
            break;
        case GM_ACCOUNT_COMP_WORKSPACE:
            in = lib && (t->lib == GM_ACCOUNT_LIB_CUBLAS || t->lib == GM_ACCOUNT_LIB_CUBLASLT ||
                         t->lib == GM_ACCOUNT_LIB_CUDNN);
            break;
        case GM_ACCOUNT_COMP_NCCL:
            in = lib && t->lib == GM_ACCOUNT_LIB_NCCL;
            break;
        case GM_ACCOUNT_COMP_NON_TORCH:
            in = t->kind != GM_ACCOUNT_TERM_CONTEXT && t->kind != GM_ACCOUNT_TERM_MODULES &&
                 !(lib && (t->lib == GM_ACCOUNT_LIB_TORCH || t->lib == GM_ACCOUNT_LIB_NCCL));
            break;
        case GM_ACCOUNT_COMP__COUNT:
            break;
        }
        if (in && t->bytes > 0)
            sum = gm_add_sat(sum, (uint64_t)t->bytes);
    }
    return sum;
}

enum gm_status gm_account_calibrate(const struct gm_account *a, struct gm_job *job,
                                    struct gm_account_calibration *out, struct gm_error *err)
{
    const struct gm_account_balance *b;
    struct gm_estimate *e = NULL; /* one estimate, run twice */
    enum gm_status st;
    memset(out, 0, sizeof(*out));
    out->rank = -1;
    if (!(b = busiest(a, out))) {
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "the account has no equation with device used read at a peak: nothing "
                       "to calibrate against");
    }
    if ((st = gm_estimate_run(job, &e, err)) != GM_OK)
        goto out;
    out->device_before = e->device_bytes;
    for (int c = 0; c < GM_ACCOUNT_COMP__COUNT; c++) {
        struct gm_account_calib_row *r = &out->rows[c];
        char value[32];
        r->what = (enum gm_account_component)c;
        snprintf(r->setting, sizeof(r->setting), "%s", comps[c].setting);
        r->predicted = gm_estimate_kind_bytes(e, comps[c].kind);
        r->applies = r->predicted > 0 || (c == GM_ACCOUNT_COMP_CONTEXT);
        r->measured = measured(b, (enum gm_account_component)c);
        r->value = r->measured;
        if (c == GM_ACCOUNT_COMP_NCCL && r->predicted)
            r->communicators = e->layout.nccl_communicators;
        if (!r->applies) {
            snprintf(r->note, sizeof(r->note), "the estimate has no such component for this job%s",
                     c == GM_ACCOUNT_COMP_NCCL && r->measured
                         ? " (one GPU as described: give its parallel layout to use the NCCL "
                           "measured)"
                         : "");
            continue;
        }
        if (!r->measured) {
            snprintf(r->note, sizeof(r->note), "not seen in the account: left as assumed");
            continue;
        }
        if (c == GM_ACCOUNT_COMP_NCCL && r->communicators > 1)
            r->value = r->measured / r->communicators;
        snprintf(value, sizeof(value), "%" PRIu64, r->value);
        {
            struct gm_error e2;
            if (gm_job_set(job, comps[c].setting, value, &e2) != GM_OK) {
                snprintf(r->note, sizeof(r->note), "not set: %.180s", e2.msg);
                continue;
            }
        }
        r->set = true;
    }
    if ((st = gm_estimate_run(job, &e, err)) != GM_OK)
        goto out;
    out->device_after = e->device_bytes;
    for (int c = 0; c < GM_ACCOUNT_COMP__COUNT; c++)
        out->rows[c].calibrated = gm_estimate_kind_bytes(e, comps[c].kind);
out:
    gm_estimate_free(e);
    return st;
}

enum gm_status gm_account_calibration_json(FILE *f, const struct gm_account_calibration *c,
                                           struct gm_error *err)
{
    struct gm_json w;
    gm_json_init(&w, f, GM_JSON_PRETTY);
    gm_json_begin_object(&w);
    gm_json_kv_str(&w, "schema", "gpumem.calibrate.account/1");
    gm_json_kv_str(&w, "gpumem_version", gm_version());
    gm_json_key(&w, "equation");
    gm_json_begin_object(&w);
    gm_json_kv_u64(&w, "pid", c->pid);
    if (c->rank >= 0)
        gm_json_kv_i64(&w, "rank", c->rank);
    else
        gm_json_kv_null(&w, "rank");
    gm_json_kv_i64(&w, "device", c->device);
    gm_json_kv_u64(&w, "device_used", c->measured_used);
    gm_json_end_object(&w);
    gm_json_key(&w, "components");
    gm_json_begin_array(&w);
    for (int i = 0; i < GM_ACCOUNT_COMP__COUNT; i++) {
        const struct gm_account_calib_row *r = &c->rows[i];
        gm_json_begin_object(&w);
        gm_json_kv_str(&w, "component", gm_account_component_name(r->what));
        gm_json_kv_str(&w, "setting", r->setting);
        gm_json_kv_bool(&w, "applies", r->applies);
        gm_json_kv_u64(&w, "predicted_bytes", r->predicted);
        gm_json_kv_u64(&w, "measured_bytes", r->measured);
        gm_json_kv_u64(&w, "calibrated_bytes", r->calibrated);
        if (r->what == GM_ACCOUNT_COMP_NCCL)
            gm_json_kv_u64(&w, "communicators", r->communicators);
        gm_json_kv_bool(&w, "set", r->set);
        if (r->set)
            gm_json_kv_u64(&w, "value", r->value);
        else
            gm_json_kv_null(&w, "value");
        gm_json_kv_str(&w, "note", r->note);
        gm_json_end_object(&w);
    }
    gm_json_end_array(&w);
    gm_json_key(&w, "device");
    gm_json_begin_object(&w);
    gm_json_kv_u64(&w, "predicted_bytes", c->device_before);
    gm_json_kv_u64(&w, "calibrated_bytes", c->device_after);
    gm_json_kv_u64(&w, "measured_bytes", c->measured_used);
    gm_json_end_object(&w);
    gm_json_end_object(&w);
    if (!gm_json_finish(&w))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "writing the calibration failed: %s",
                       strerror(errno));
    return GM_OK;
}
