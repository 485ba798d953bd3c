/* SPDX-License-Identifier: MIT */
/* calibrate.c - the estimate of a job held against a memory snapshot of a real run of it,
 * the fit of what that run tells, and predictions of other sizes with it (estimate.h,
 * "calibration").
 *
 * Work order:
 *   1. the estimate of the job (gm_estimate_run), and per span the estimate's bytes at its
 *      moment, by snapshot category (gm_est_kind_category);
 *   2. the snapshot: one walk over the device's allocations in event order gives, per
 *      span, the highest allocated total and its categories (the analysis' allocations
 *      and phase runs, the timeline's definition: alive from the alloc to its
 *      free_completed); the timeline gives the peak reserved;
 *   3. the fit per span (fixed offset; the workload's s x s scores as predicted and one
 *      scale for the rest, or bytes per token) and the fragmentation;
 *   4. each prediction point: the estimate with one setting changed, the fit applied.
 * The calibration only reads the analysis; it keeps no pointer into it. */
#include "estimate/estimate_int.h"

#include "gpumem/arena.h"
#include "gpumem/json.h"
#include "gpumem/version.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gm_calib_job_init(struct gm_job *job)
{
    gm_job_init(job);
    job->mode = GM_EST_TRAIN;
}

void gm_calib_opts_init(struct gm_calib_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->device = -1;
}

const char *gm_calib_span_name(enum gm_calib_span_kind k)
{
    static const char *const names[GM_CALIB_SPAN__COUNT] = {"forward_backward", "optimizer_step",
                                                            "run"};
    return (unsigned)k < GM_CALIB_SPAN__COUNT ? names[k] : "unknown";
}

bool gm_calib_category_fixed(enum gm_category c)
{
    return c == GM_CATEGORY_PARAMETER || c == GM_CATEGORY_GRADIENT ||
           c == GM_CATEGORY_OPTIMIZER_STATE || c == GM_CATEGORY_OPTIMIZER_TEMP;
}

/* ---- prediction points ---- */

static enum gm_status add_point(struct gm_calib_opts *o, const char *name, const char *value,
                                size_t len, struct gm_error *err)
{
    struct gm_calib_point *p;
    struct gm_job scratch;
    enum gm_status st;

    if (o->n_points == GM_CALIB_MAX_POINTS)
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "--predict: more than %d points",
                       GM_CALIB_MAX_POINTS);
    p = &o->points[o->n_points];
    if (len == 0 || len >= sizeof(p->value))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--predict %s: %s value", name,
                       len ? "too long a" : "an empty");
    snprintf(p->setting, sizeof(p->setting), "%s", name);
    memcpy(p->value, value, len);
    p->value[len] = '\0';
    /* the value itself, as the setting checks it; whether it suits the job comes later */
    gm_job_init(&scratch);
    if ((st = gm_job_set(&scratch, p->setting, p->value, err)) != GM_OK) {
        if (err)
            gm_error_prefix(err, "--predict");
        return st;
    }
    o->n_points++;
    return GM_OK;
}

enum gm_status gm_calib_add_points(struct gm_calib_opts *o, const char *spec, struct gm_error *err)
{
    const char *eq = spec ? strchr(spec, '=') : NULL;
    const struct gm_job_setting *s;
    char name[32];
    size_t n;

    if (!eq || eq == spec || (size_t)(eq - spec) >= sizeof(name))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--predict: '%s' is not NAME=V1,V2,... (e.g. batch=8,16)", spec ? spec : "");
    n = (size_t)(eq - spec);
    memcpy(name, spec, n);
    name[n] = '\0';
    s = gm_job_setting_find(name);
    if (!s)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--predict: '%s' is not a job setting (batch, seq, context, ...)", name);
    if (s->type == GM_JOB_FLAG)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--predict: '%s' is a flag; give a setting that takes a value", s->name);
    for (const char *v = eq + 1;;) {
        const char *comma = strchr(v, ',');
        size_t len = comma ? (size_t)(comma - v) : strlen(v);
        enum gm_status st = add_point(o, s->name, v, len, err);
        if (st != GM_OK)
            return st;
        if (!comma)
            return GM_OK;
        v = comma + 1;
    }
}

/* ---- the estimate's side ---- */

/* The tokens one rank holds: training counts them as the estimate does (est_tokens:
 * --tokens-per-batch, or batch x seq divided over the context-parallel ranks); inference, the
 * prompt and the new tokens of every sequence. */
static uint64_t job_tokens(const struct gm_job *j)
{
    if (j->mode == GM_EST_TRAIN)
        return (uint64_t)est_tokens(j);
    return gm_mul_sat(j->workload.batch, gm_add_sat(j->workload.context, j->workload.new_tokens));
}

/* The estimate's moment of a span.  The forward/backward figure is the largest of its three
 * moments -- the start of backward, the loss (logits and their gradient), the end of
 * backward -- the start, then the end, on a tie (est_figures()). */
static unsigned span_moment(const struct gm_estimate *e, enum gm_calib_span_kind k)
{
    unsigned fb = e->backward_end_bytes > e->backward_start_bytes ? GM_EST_PHASE_BACKWARD_END
                                                                  : GM_EST_PHASE_FORWARD_BACKWARD;
    if (e->loss_bytes > e->backward_start_bytes && e->loss_bytes > e->backward_end_bytes)
        fb = GM_EST_PHASE_LOSS;
    if (k == GM_CALIB_FORWARD_BACKWARD)
        return fb;
    if (k == GM_CALIB_OPTIMIZER_STEP)
        return GM_EST_PHASE_OPTIMIZER_STEP;
    return e->peak_phase == GM_EST_PHASE_FORWARD_BACKWARD ? fb : (unsigned)e->peak_phase;
}

/* Bytes of the components live at 'moment', by the category they fall in on a real run;
 * runtime overheads (outside the caching allocator) are left out.  *seq2 gets the part
 * of the workload categories' bytes that grows with batch x seq^2 (the s x s scores). */
static void predicted_at(const struct gm_estimate *e, unsigned moment,
                         uint64_t out[GM_CATEGORY_COUNT], uint64_t *seq2)
{
    double q = 0;
    memset(out, 0, GM_CATEGORY_COUNT * sizeof(out[0]));
    for (size_t i = 0; i < e->n_components; i++) {
        const struct gm_est_component *c = &e->components[i];
        enum gm_category cat;
        if (!(c->phases & moment) || !est_component_categories(c, out))
            continue;
        if (gm_est_kind_category(c->kind, &cat) && !gm_calib_category_fixed(cat))
            q += c->seq2_share * (double)c->bytes;
    }
    *seq2 = est_round(q);
}

/* Bytes live at 'moment' that a snapshot counts in a workload category but that do not grow
 * with the workload: PyTorch's cuBLAS workspaces (category other, one per handle whatever the
 * batch: est_add_torch_workspaces()). */
static uint64_t kept_at(const struct gm_estimate *e, unsigned moment)
{
    uint64_t b = 0;
    for (size_t i = 0; i < e->n_components; i++)
        if (e->components[i].kind == GM_KIND_TORCH_WORKSPACE && (e->components[i].phases & moment))
            b = gm_add_sat(b, e->components[i].bytes);
    return b;
}

/* 'kept' bytes (kept_at()) moved from *workload to *fixed, as far as the category of
 * 'bytes' that counts a workspace (its kind's: other) holds them: a run whose snapshot has
 * no workspace (taken before the first GEMM, torch < 1.13, a CPU-made example) keeps all
 * its activation and input workload.  The bytes moved. */
static uint64_t keep_fixed(uint64_t kept, const uint64_t bytes[GM_CATEGORY_COUNT], uint64_t *fixed,
                           uint64_t *workload)
{
    enum gm_category cat = GM_CATEGORY_OTHER;
    uint64_t k;
    gm_est_kind_category(GM_KIND_TORCH_WORKSPACE, &cat);
    k = kept < bytes[cat] ? kept : bytes[cat];
    if (k > *workload)
        k = *workload;
    *fixed = gm_add_sat(*fixed, k);
    *workload -= k;
    return k;
}

/* Fixed and workload sums of a category split. */
static void split(const uint64_t *bytes, uint64_t *fixed, uint64_t *workload)
{
    *fixed = *workload = 0;
    for (int c = 0; c < GM_CATEGORY_COUNT; c++) {
        if (gm_calib_category_fixed((enum gm_category)c))
            *fixed = gm_add_sat(*fixed, bytes[c]);
        else
            *workload = gm_add_sat(*workload, bytes[c]);
    }
}

/* ---- the snapshot's side ---- */

struct high {
    bool seen; /* the span had events */
    int64_t event;
    uint64_t total;
    uint64_t bytes[GM_CATEGORY_COUNT];
};

/* An allocation freed during the trace, keyed by its free_completed event. */
struct free_at {
    int64_t event;
    size_t alloc;
};

static int by_event(const void *pa, const void *pb)
{
    const struct free_at *a = pa, *b = pb;
    if (a->event != b->event)
        return (a->event > b->event) - (a->event < b->event);
    return (a->alloc > b->alloc) - (a->alloc < b->alloc);
}

static void change(uint64_t *cur, uint64_t *total, const struct gm_analysis_alloc *a, bool add)
{
    unsigned c = a->category < GM_CATEGORY_COUNT ? a->category : GM_CATEGORY_OTHER;
    if (add) {
        cur[c] = gm_add_sat(cur[c], a->bytes);
        *total = gm_add_sat(*total, a->bytes);
    } else {
        cur[c] = cur[c] > a->bytes ? cur[c] - a->bytes : 0;
        *total = *total > a->bytes ? *total - a->bytes : 0;
    }
}

static void record(struct high *h, int64_t event, uint64_t total, const uint64_t *cur)
{
    if (!h->seen || total > h->total) {
        h->event = event;
        h->total = total;
        memcpy(h->bytes, cur, sizeof(h->bytes));
    }
    h->seen = true;
}

/* The highest allocated total of each span (GM_CALIB_RUN: the whole trace, the initial
 * state included) with its categories, walking the allocations in event order. */
static enum gm_status measure(const struct gm_analysis_device *dev,
                              struct high hi[GM_CALIB_SPAN__COUNT], struct gm_error *err)
{
    uint64_t cur[GM_CATEGORY_COUNT] = {0}, total = 0;
    struct free_at *frees;
    size_t n_frees = 0, ai = 0, fi = 0, run = 0;

    memset(hi, 0, GM_CALIB_SPAN__COUNT * sizeof(hi[0]));
    frees = gm_malloc((dev->n_allocs ? dev->n_allocs : 1) * sizeof(*frees));
    if (!frees)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "calibrate: out of memory");
    for (size_t i = 0; i < dev->n_allocs; i++)
        if (dev->allocs[i].free_event >= 0)
            frees[n_frees++] = (struct free_at){dev->allocs[i].free_event, i};
    qsort(frees, n_frees, sizeof(*frees), by_event);
    /* allocations come ordered by their alloc event, those alive from the start first */
    for (; ai < dev->n_allocs && dev->allocs[ai].alloc_event < 0; ai++)
        change(cur, &total, &dev->allocs[ai], true);
    record(&hi[GM_CALIB_RUN], -1, total, cur);
    for (size_t k = 0; k < dev->n_events; k++) {
        int64_t ev = (int64_t)k;
        enum gm_phase ph = GM_PHASE_OTHER;
        for (; ai < dev->n_allocs && dev->allocs[ai].alloc_event <= ev; ai++)
            change(cur, &total, &dev->allocs[ai], true);
        for (; fi < n_frees && frees[fi].event <= ev; fi++)
            change(cur, &total, &dev->allocs[frees[fi].alloc], false);
        while (run < dev->n_phases && dev->phases[run].last_event < ev)
            run++;
        if (run < dev->n_phases && dev->phases[run].first_event <= ev)
            ph = (enum gm_phase)dev->phases[run].phase;
        if (ph == GM_PHASE_FORWARD || ph == GM_PHASE_BACKWARD)
            record(&hi[GM_CALIB_FORWARD_BACKWARD], ev, total, cur);
        else if (ph == GM_PHASE_OPTIMIZER_STEP)
            record(&hi[GM_CALIB_OPTIMIZER_STEP], ev, total, cur);
        record(&hi[GM_CALIB_RUN], ev, total, cur);
    }
    gm_free(frees);
    return GM_OK;
}

static const struct gm_analysis_device *pick_device(const struct gm_analysis *an, int32_t want,
                                                    struct gm_error *err)
{
    const struct gm_analysis_device *best = NULL;
    if (want >= 0) {
        best = gm_analysis_device_by_index(an, want);
        if (!best)
            gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "the snapshot has no device %d", (int)want);
        return best;
    }
    if (gm_default_device(an->snap, an, &want, err) != GM_OK)
        return NULL;
    return gm_analysis_device_by_index(an, want);
}

/* ---- the fit and the predictions ---- */

static void note(struct gm_calibration *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void note(struct gm_calibration *c, const char *fmt, ...)
{
    va_list ap;
    if (c->n_notes == c->cap_notes) {
        size_t cap = c->cap_notes ? 2 * c->cap_notes : 8;
        void *v;
        if (cap > GM_CALIB_MAX_NOTES || !(v = gm_realloc(c->notes, cap * sizeof(c->notes[0]))))
            return; /* notes past the cap (or the memory) are dropped */
        c->notes = v;
        c->cap_notes = cap;
    }
    va_start(ap, fmt);
    vsnprintf(c->notes[c->n_notes++], GM_EST_NOTE_MAX, fmt, ap);
    va_end(ap);
}

/* The fit of a measured span.  The workload's s x s scores are the shape of one tensor
 * per layer (batch x heads x seq^2 x bytes), which the estimate computes exactly when the
 * attention is eager; what it gets wrong is in the per-token tensors (which intermediates
 * a module keeps, what the script holds), so the measured difference goes there.  A run
 * that keeps less workload memory than the scores alone does not keep them all (not
 * eager attention, or fewer layers): one scale for both. */
static void fit_span(struct gm_calib_span *s, uint64_t tokens, uint64_t kept)
{
    uint64_t rest;
    split(s->predicted, &s->predicted_fixed, &s->predicted_workload);
    split(s->measured, &s->measured_fixed, &s->measured_workload);
    /* the run's own workspaces are in its workload categories as the estimate's are: fixed
     * on both sides, as far as each side holds them */
    kept = keep_fixed(kept, s->predicted, &s->predicted_fixed, &s->predicted_workload);
    keep_fixed(kept, s->measured, &s->measured_fixed, &s->measured_workload);
    if (s->predicted_seq2 > s->predicted_workload)
        s->predicted_seq2 = s->predicted_workload;
    if (!s->observed)
        return;
    s->fixed_offset = (int64_t)s->measured_fixed - (int64_t)s->predicted_fixed;
    s->workload_scale =
        s->predicted_workload ? (double)s->measured_workload / (double)s->predicted_workload : 0;
    rest = s->predicted_workload - s->predicted_seq2;
    if (rest && s->measured_workload >= s->predicted_seq2) {
        s->per_token_scale = (double)(s->measured_workload - s->predicted_seq2) / (double)rest;
        s->seq2_scale = 1.0;
    } else {
        s->per_token_scale = s->seq2_scale = s->workload_scale;
    }
    if (tokens) {
        s->predicted_per_token = (double)s->predicted_workload / (double)tokens;
        s->measured_per_token = (double)s->measured_workload / (double)tokens;
    }
}

/* The calibrated bytes of span 's' for an estimate 'e' of 'tokens' tokens: *workload gets
 * the workload part. */
static uint64_t calibrated(const struct gm_calib_span *s, const struct gm_estimate *e,
                           uint64_t tokens, uint64_t *workload)
{
    uint64_t bytes[GM_CATEGORY_COUNT], fixed, w, q;
    double f;
    predicted_at(e, span_moment(e, s->kind), bytes, &q);
    split(bytes, &fixed, &w);
    keep_fixed(kept_at(e, span_moment(e, s->kind)), bytes, &fixed, &w);
    if (q > w)
        q = w;
    if (!s->observed) {
        *workload = w;
        return gm_add_sat(fixed, w);
    }
    f = (double)fixed + (double)s->fixed_offset;
    if (s->predicted_workload)
        *workload = est_round(s->per_token_scale * (double)(w - q) + s->seq2_scale * (double)q);
    else
        *workload = est_round(s->measured_per_token * (double)tokens);
    return gm_add_sat(est_round(f), *workload);
}

static void predict(const struct gm_job *job, struct gm_calibration *c, struct gm_estimate *e,
                    struct gm_calib_prediction *p)
{
    struct gm_job j = *job;
    struct gm_error perr;
    double reserved = 0;

    p->status = gm_job_set(&j, p->point.setting, p->point.value, &perr);
    if (p->status == GM_OK)
        p->status = est_rerun(&j, e, &perr);
    if (p->status != GM_OK) {
        snprintf(p->error, sizeof(p->error), "%s", perr.msg);
        return;
    }
    p->tokens = job_tokens(&j);
    p->estimate_allocated_bytes = e->peak_allocated_bytes;
    p->estimate_reserved_bytes = e->peak_reserved_bytes;
    for (size_t i = 0; i < c->n_spans; i++) {
        uint64_t w;
        double r;
        p->span_bytes[i] = calibrated(&c->spans[i], e, p->tokens, &w);
        r = (double)p->span_bytes[i] +
            fmax(c->fragmentation * (double)w, (double)c->measured_excess_bytes);
        if (i == 0 || p->span_bytes[i] > p->allocated_bytes) {
            p->allocated_bytes = p->span_bytes[i];
            p->peak_span = i;
        }
        if (r > reserved)
            reserved = r;
    }
    p->reserved_bytes = est_round(reserved);
}

/* Parameter-category memory without a gradient, read at the optimizer step where the
 * estimate gives every parameter byte a gradient byte (full training, nothing sharded
 * apart): buffers the model registers and frozen parameters. */
static void buffers(struct gm_calibration *c)
{
    for (size_t i = 0; i < c->n_spans; i++) {
        const struct gm_calib_span *s = &c->spans[i];
        uint64_t p = s->measured[GM_CATEGORY_PARAMETER], g = s->measured[GM_CATEGORY_GRADIENT];
        if (s->kind != GM_CALIB_OPTIMIZER_STEP || !s->observed || !g || p < g ||
            s->predicted[GM_CATEGORY_GRADIENT] != s->predicted[GM_CATEGORY_PARAMETER])
            continue;
        c->has_buffer_bytes = true;
        c->buffer_bytes = p - g;
    }
}

/* A run holds its weights for its whole length: a snapshot whose device never holds half
 * the parameter bytes the estimate keeps on each GPU is no run of this job (another job,
 * or this one described with other settings), and a fit to it would be meaningless.  Half
 * leaves room for what an estimate can get wrong in good faith (a dtype, buffers, tied
 * weights); a model on another GPU is 10 to 100 times off. */
static enum gm_status same_job(const struct gm_estimate *e, const struct gm_analysis_device *dev,
                               struct gm_error *err)
{
    uint64_t pred[GM_CATEGORY_COUNT], seq2;
    char a[32], b[32];
    predicted_at(e, span_moment(e, GM_CALIB_RUN), pred, &seq2);
    if (dev->peak_bytes >= pred[GM_CATEGORY_PARAMETER] / 2)
        return GM_OK;
    return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                   "the snapshot cannot be a run of this job: device %d never holds more than %s, "
                   "under half the %s of parameters the job keeps per GPU: another job's "
                   "snapshot, or other settings (model, --precision, --gpus, sharding)",
                   (int)dev->device, gm_format_bytes(a, sizeof a, dev->peak_bytes, GM_UNITS_IEC),
                   gm_format_bytes(b, sizeof b, pred[GM_CATEGORY_PARAMETER], GM_UNITS_IEC));
}

static void notes(struct gm_calibration *c, const struct gm_analysis_device *dev,
                  const struct high *run, bool phased)
{
    uint64_t outside = est_outside_bytes(c->est);
    char a[32], b[32];
    if (c->leak_bytes_per_iteration)
        note(c,
             "the snapshot leaks %s per iteration (gpumem snapshot leaks): the measured figures "
             "and the fit include it",
             gm_format_bytes(a, sizeof a, c->leak_bytes_per_iteration, GM_UNITS_IEC));
    if (c->mode == GM_EST_TRAIN && !phased)
        note(c,
             "the snapshot has no forward/backward phases (%s): the whole run is compared with "
             "the estimate's peak",
             dev->has_frames ? "its stack frames show no backward pass"
                             : "no stack frames were recorded");
    if (phased && !c->spans[1].observed)
        note(c, "the snapshot has no optimizer step: that span is the estimate's alone");
    for (size_t i = 0; i < c->n_spans; i++) {
        const struct gm_calib_span *s = &c->spans[i];
        if (s->observed && s->measured_workload < s->predicted_seq2)
            note(c,
                 "%s of workload memory measured, less than the %s of s x s attention scores "
                 "the estimate predicts (is the attention eager?): both scaled by x%.3f",
                 gm_format_bytes(a, sizeof a, s->measured_workload, GM_UNITS_IEC),
                 gm_format_bytes(b, sizeof b, s->predicted_seq2, GM_UNITS_IEC), s->seq2_scale);
    }
    if (c->has_buffer_bytes && c->buffer_bytes)
        note(c,
             "%s of parameter memory has no gradient (buffers: a causal mask, rotary tables; or "
             "frozen weights): kept as measured, so a buffer sized by the sequence does not "
             "follow --predict seq",
             gm_format_bytes(a, sizeof a, c->buffer_bytes, GM_UNITS_IEC));
    if (phased && run->total > c->spans[c->peak_span].measured_bytes)
        note(c,
             "the snapshot's peak (%s) is outside the forward/backward and optimizer phases "
             "(phase '%s'): each span is compared at its own highest point",
             gm_format_bytes(a, sizeof a, run->total, GM_UNITS_IEC),
             gm_phase_name((enum gm_phase)dev->peak_phase));
    if (outside)
        note(c,
             "the %s the estimate puts outside the caching allocator (CUDA context, workspaces, "
             "NCCL) are in no snapshot and not checked",
             gm_format_bytes(a, sizeof a, outside, GM_UNITS_IEC));
}

static enum gm_status calibrate(const struct gm_job *job, const struct gm_analysis *an,
                                const struct gm_calib_opts *o, struct gm_calibration *out,
                                struct gm_error *err)
{
    struct high hi[GM_CALIB_SPAN__COUNT];
    const struct gm_analysis_device *dev;
    struct gm_estimate *scratch;
    uint64_t workload_at_peak, fixed_at_peak;
    enum gm_status st;
    bool phased;

    if (job->mode == GM_EST_WEIGHTS)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "a weights-only estimate has nothing a run could correct "
                       "(--train or --infer)");
    if (job->search != GM_SEARCH_NONE)
        return gm_fail(
            err, GM_ERR_INVALID, GM_NO_OFFSET,
            "--max-batch and --max-context do not apply to a calibration (use --predict)");
    if (!(dev = pick_device(an, o->device, err)))
        return GM_ERR_INVALID;
    if (!dev->n_allocs || !dev->peak_bytes)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "device %d of the snapshot has no allocations to calibrate against",
                       (int)dev->device);
    if ((st = gm_estimate_run(job, &out->est, err)) != GM_OK)
        return st;
    if ((st = measure(dev, hi, err)) != GM_OK)
        return st;
    if ((st = same_job(out->est, dev, err)) != GM_OK)
        return st;
    out->peak_reserved_bytes = dev->timeline.peak_reserved_bytes; /* the analysis's timeline */

    out->device = dev->device;
    out->mode = job->mode;
    if (job->model.model)
        snprintf(out->model, sizeof(out->model), "%s", job->model.model->name);
    out->workload = job->workload;
    out->tokens = job_tokens(job);
    out->peak_bytes = dev->peak_bytes;
    out->peak_phase = dev->peak_phase;
    out->peak_iteration = dev->peak_iteration;
    out->n_iterations = (uint32_t)dev->n_iterations;
    for (size_t i = 0; i < dev->n_leaks; i++)
        out->leak_bytes_per_iteration =
            gm_add_sat(out->leak_bytes_per_iteration, dev->leaks[i].bytes_per_iteration);

    phased = job->mode == GM_EST_TRAIN && hi[GM_CALIB_FORWARD_BACKWARD].seen;
    out->n_spans = phased ? 2 : 1;
    for (size_t i = 0; i < out->n_spans; i++) {
        struct gm_calib_span *s = &out->spans[i];
        const struct high *h;
        s->kind = phased ? (enum gm_calib_span_kind)i : GM_CALIB_RUN;
        h = &hi[s->kind];
        s->moment = span_moment(out->est, s->kind);
        predicted_at(out->est, s->moment, s->predicted, &s->predicted_seq2);
        s->observed = h->seen;
        s->event = h->seen ? h->event : -1;
        memcpy(s->measured, h->bytes, sizeof(s->measured));
        for (int k = 0; k < GM_CATEGORY_COUNT; k++) {
            s->predicted_bytes = gm_add_sat(s->predicted_bytes, s->predicted[k]);
            s->measured_bytes = gm_add_sat(s->measured_bytes, s->measured[k]);
        }
        fit_span(s, out->tokens, kept_at(out->est, s->moment));
        if (s->measured_bytes > out->spans[out->peak_span].measured_bytes)
            out->peak_span = i;
    }

    out->assumed_fragmentation = job->runtime.fragmentation;
    out->predicted_excess_bytes =
        out->est->peak_reserved_bytes > out->est->peak_allocated_bytes
            ? out->est->peak_reserved_bytes - out->est->peak_allocated_bytes
            : 0;
    out->measured_excess_bytes =
        out->peak_reserved_bytes > out->peak_bytes ? out->peak_reserved_bytes - out->peak_bytes : 0;
    split(hi[GM_CALIB_RUN].bytes, &fixed_at_peak, &workload_at_peak);
    out->fragmentation =
        workload_at_peak ? (double)out->measured_excess_bytes / (double)workload_at_peak : 0;
    buffers(out);
    notes(out, dev, &hi[GM_CALIB_RUN], phased);

    scratch = est_new();
    out->predictions = gm_calloc(o->n_points ? o->n_points : 1, sizeof(*out->predictions));
    if (!scratch || !out->predictions) {
        gm_estimate_free(scratch);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "calibrate: out of memory");
    }
    for (size_t i = 0; i < o->n_points; i++) {
        struct gm_calib_prediction *p = &out->predictions[out->n_predictions++];
        p->point = o->points[i];
        predict(job, out, scratch, p);
    }
    gm_estimate_free(scratch);
    return GM_OK;
}

enum gm_status gm_calibrate(const struct gm_job *job, const struct gm_analysis *an,
                            const struct gm_calib_opts *o, struct gm_calibration **out,
                            struct gm_error *err)
{
    enum gm_status st = gm_analysis_require_whole(an, "calibrate", err);
    *out = NULL;
    if (st != GM_OK)
        return st;
    if (!(*out = gm_calloc(1, sizeof(**out))))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "calibrate: out of memory");
    return calibrate(job, an, o, *out, err);
}

void gm_calibration_free(struct gm_calibration *c)
{
    if (!c)
        return;
    gm_estimate_free(c->est);
    gm_free(c->predictions);
    gm_free(c->notes);
    gm_free(c);
}

/* ---- the JSON document ---- */

static void json_categories(struct gm_json *w, const struct gm_calib_span *s)
{
    gm_json_key(w, "categories");
    gm_json_begin_object(w);
    for (int c = 0; c < GM_CATEGORY_COUNT; c++) {
        gm_json_key(w, gm_category_name((enum gm_category)c));
        gm_json_begin_object(w);
        gm_json_kv_bool(w, "fixed", gm_calib_category_fixed((enum gm_category)c));
        gm_json_kv_u64(w, "predicted_bytes", s->predicted[c]);
        if (s->observed) {
            gm_json_kv_u64(w, "measured_bytes", s->measured[c]);
            gm_json_kv_i64(w, "residual_bytes", (int64_t)s->measured[c] - (int64_t)s->predicted[c]);
        }
        gm_json_end_object(w);
    }
    gm_json_end_object(w);
}

static void json_span(struct gm_json *w, const struct gm_calib_span *s)
{
    gm_json_begin_object(w);
    gm_json_kv_str(w, "span", gm_calib_span_name(s->kind));
    gm_json_kv_str(w, "estimate_moment", gm_est_phase_name((enum gm_est_phase)s->moment));
    gm_json_kv_bool(w, "observed", s->observed);
    if (s->observed)
        gm_json_kv_i64(w, "event", s->event); /* -1: the initial state */
    else
        gm_json_kv_null(w, "event");
    gm_json_kv_u64(w, "predicted_bytes", s->predicted_bytes);
    if (s->observed)
        gm_json_kv_u64(w, "measured_bytes", s->measured_bytes);
    else
        gm_json_kv_null(w, "measured_bytes");
    json_categories(w, s);
    gm_json_key(w, "fixed");
    gm_json_begin_object(w);
    gm_json_kv_u64(w, "predicted_bytes", s->predicted_fixed);
    if (s->observed) {
        gm_json_kv_u64(w, "measured_bytes", s->measured_fixed);
        gm_json_kv_i64(w, "offset_bytes", s->fixed_offset);
    }
    gm_json_end_object(w);
    gm_json_key(w, "workload");
    gm_json_begin_object(w);
    gm_json_kv_u64(w, "predicted_bytes", s->predicted_workload);
    gm_json_kv_u64(w, "predicted_seq2_bytes", s->predicted_seq2);
    if (s->observed) {
        gm_json_kv_u64(w, "measured_bytes", s->measured_workload);
        if (s->predicted_workload) {
            gm_json_kv_double(w, "scale", s->workload_scale);
            gm_json_kv_double(w, "per_token_scale", s->per_token_scale);
            gm_json_kv_double(w, "seq2_scale", s->seq2_scale);
        } else {
            gm_json_kv_null(w, "scale");
            gm_json_kv_null(w, "per_token_scale");
            gm_json_kv_null(w, "seq2_scale");
        }
        gm_json_kv_double(w, "predicted_bytes_per_token", s->predicted_per_token);
        gm_json_kv_double(w, "measured_bytes_per_token", s->measured_per_token);
    }
    gm_json_end_object(w);
    gm_json_end_object(w);
}

static void json_prediction(struct gm_json *w, const struct gm_calibration *c,
                            const struct gm_calib_prediction *p)
{
    gm_json_begin_object(w);
    gm_json_kv_str(w, "setting", p->point.setting);
    gm_json_kv_str(w, "value", p->point.value);
    if (p->status != GM_OK) {
        gm_json_kv_str(w, "error", p->error);
        gm_json_end_object(w);
        return;
    }
    gm_json_kv_null(w, "error");
    gm_json_kv_u64(w, "tokens", p->tokens);
    gm_json_key(w, "estimate");
    gm_json_begin_object(w);
    gm_json_kv_u64(w, "allocated_bytes", p->estimate_allocated_bytes);
    gm_json_kv_u64(w, "reserved_bytes", p->estimate_reserved_bytes);
    gm_json_end_object(w);
    gm_json_key(w, "calibrated");
    gm_json_begin_object(w);
    gm_json_kv_u64(w, "allocated_bytes", p->allocated_bytes);
    gm_json_kv_u64(w, "reserved_bytes", p->reserved_bytes);
    gm_json_kv_str(w, "peak_span", gm_calib_span_name(c->spans[p->peak_span].kind));
    gm_json_key(w, "spans");
    gm_json_begin_object(w);
    for (size_t i = 0; i < c->n_spans; i++)
        gm_json_kv_u64(w, gm_calib_span_name(c->spans[i].kind), p->span_bytes[i]);
    gm_json_end_object(w);
    gm_json_end_object(w);
    gm_json_end_object(w);
}

enum gm_status gm_calibration_json(FILE *f, const struct gm_calibration *c, struct gm_error *err)
{
    const struct gm_estimate *e = c->est;
    struct gm_json w;

    gm_json_init(&w, f, GM_JSON_PRETTY);
    gm_json_begin_object(&w);
    gm_json_kv_str(&w, "schema", "gpumem.calibrate/1");
    gm_json_kv_str(&w, "gpumem_version", gm_version());
    gm_json_key(&w, "job");
    gm_json_begin_object(&w);
    gm_json_kv_str(&w, "mode", c->mode == GM_EST_TRAIN ? "train" : "infer");
    if (c->model[0])
        gm_json_kv_str(&w, "model", c->model);
    else
        gm_json_kv_null(&w, "model");
    gm_json_kv_u64(&w, "parameters", e->n_params);
    gm_json_kv_u64(&w, "batch", c->workload.batch);
    if (c->mode == GM_EST_TRAIN) {
        gm_json_kv_u64(&w, "seq", c->workload.seq);
    } else {
        gm_json_kv_u64(&w, "context", c->workload.context);
        gm_json_kv_u64(&w, "new_tokens", c->workload.new_tokens);
    }
    gm_json_kv_u64(&w, "tokens", c->tokens);
    gm_json_end_object(&w);
    gm_json_key(&w, "snapshot");
    gm_json_begin_object(&w);
    gm_json_kv_i64(&w, "device", c->device);
    gm_json_kv_u64(&w, "peak_bytes", c->peak_bytes);
    gm_json_kv_u64(&w, "peak_reserved_bytes", c->peak_reserved_bytes);
    gm_json_kv_str(&w, "peak_phase", gm_phase_name((enum gm_phase)c->peak_phase));
    if (c->peak_iteration < 0) /* numbered from 1, as the CLI says it */
        gm_json_kv_null(&w, "peak_iteration");
    else
        gm_json_kv_i64(&w, "peak_iteration", (int64_t)c->peak_iteration + 1);
    gm_json_kv_u64(&w, "iterations", c->n_iterations);
    gm_json_kv_u64(&w, "leak_bytes_per_iteration", c->leak_bytes_per_iteration);
    if (c->has_buffer_bytes)
        gm_json_kv_u64(&w, "buffer_bytes", c->buffer_bytes);
    else
        gm_json_kv_null(&w, "buffer_bytes");
    gm_json_end_object(&w);
    gm_json_key(&w, "estimate");
    gm_json_begin_object(&w);
    gm_json_kv_u64(&w, "allocated_bytes", e->peak_allocated_bytes);
    gm_json_kv_u64(&w, "reserved_bytes", e->peak_reserved_bytes);
    gm_json_kv_u64(&w, "device_bytes", e->device_bytes);
    gm_json_kv_str(&w, "phase", gm_est_phase_name(e->peak_phase));
    gm_json_end_object(&w);
    gm_json_kv_str(&w, "peak_span", gm_calib_span_name(c->spans[c->peak_span].kind));
    gm_json_key(&w, "spans");
    gm_json_begin_array(&w);
    for (size_t i = 0; i < c->n_spans; i++)
        json_span(&w, &c->spans[i]);
    gm_json_end_array(&w);
    gm_json_key(&w, "fragmentation");
    gm_json_begin_object(&w);
    gm_json_kv_double(&w, "assumed", c->assumed_fragmentation);
    gm_json_kv_u64(&w, "predicted_excess_bytes", c->predicted_excess_bytes);
    gm_json_kv_u64(&w, "measured_excess_bytes", c->measured_excess_bytes);
    gm_json_kv_double(&w, "fitted", c->fragmentation);
    gm_json_end_object(&w);
    gm_json_key(&w, "predictions");
    gm_json_begin_array(&w);
    for (size_t i = 0; i < c->n_predictions; i++)
        json_prediction(&w, c, &c->predictions[i]);
    gm_json_end_array(&w);
    gm_json_key(&w, "notes");
    gm_json_begin_array(&w);
    for (size_t i = 0; i < c->n_notes; i++)
        gm_json_str(&w, c->notes[i]);
    gm_json_end_array(&w);
    gm_json_end_object(&w);
    if (!gm_json_finish(&w))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "writing the JSON document failed");
    return GM_OK;
}
