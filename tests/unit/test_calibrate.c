/* SPDX-License-Identifier: MIT */
/* test_calibrate.c - gm_calibrate() on gpumem's own example snapshot (a GPT of 4 layers,
 * hidden 1024, vocabulary 32000, batch 8 x 512, fp32, AdamW foreach: example.h), whose job
 * is known: the measured highs are the analysis' own figures; the estimate's side is the
 * estimate's phase figures, split by the kind -> category map; the fit reproduces the
 * calibration run exactly when asked to predict it, and scales the workload with the
 * estimate when the batch doubles; inference and leaks are said; the prediction points
 * are parsed and checked; every allocation failure is reported; the JSON carries it all.
 * With eager attention the s x s scores are taken as the estimate computes them and the
 * rest of the workload is scaled, unless the run holds less than the scores alone.
 * How well the calibrated values predict other sizes is tested against synth-snapshot's
 * ground truth in tests/python/test_calibrate.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpumem/arena.h"
#include "gpumem/estimate.h"
#include "gpumem/example.h"
#include "gpumem/internal/alloc_hooks.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The example's model as a GPT-2 config: its blocks are GPT-2's (LayerNorm, fused qkv and
 * GELU MLP with biases); it has no position embedding, which the estimate counts (2 MiB at
 * 512 positions): the calibration's fixed offset says so. */
static const char example_config[] =
    "{\"model_type\": \"gpt2\", \"n_embd\": 1024, \"n_layer\": 4, \"n_head\": 16,"
    " \"n_positions\": 512, \"vocab_size\": 32000, \"tie_word_embeddings\": false}";

struct fixture {
    struct gm_snapshot *snap;
    struct gm_analysis *an;
    struct gm_model model;
    struct gm_job job;
    struct gm_calibration *cal;
};

static void set(struct gm_job *j, const char *name, const char *value)
{
    struct gm_error err;
    if (gm_job_set(j, name, value, &err) != GM_OK)
        fail_msg("--%s %s: %s", name, value ? value : "", err.msg);
}

static void load_example(struct fixture *f, bool leak)
{
    struct gm_example_opts eo;
    struct gm_error err;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    assert_non_null(m);
    gm_example_opts_init(&eo);
    eo.leak = leak;
    assert_int_equal(gm_example_write(m, &eo, &err), GM_OK);
    assert_int_equal(fclose(m), 0);
    assert_int_equal(gm_snapshot_load_mem(buf, len, NULL, &f->snap, &err), GM_OK);
    free(buf);
    assert_int_equal(gm_analysis_run(f->snap, NULL, &f->an, &err), GM_OK);
    gm_model_init(&f->model);
    assert_int_equal(
        gm_model_parse_hf_config(example_config, strlen(example_config), &f->model, &err), GM_OK);
    gm_calib_job_init(&f->job);
    f->job.model.model = &f->model;
    set(&f->job, "precision", "fp32");
    set(&f->job, "batch", "8");
    set(&f->job, "seq", "512");
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    if (!f)
        return -1;
    load_example(f, false);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    gm_calibration_free(f->cal);
    gm_analysis_free(f->an);
    gm_snapshot_free(f->snap);
    free(f);
    return 0;
}

/* gm_calibrate() into f->cal, the calibration before it released. */
static enum gm_status recalibrate(struct fixture *f, const struct gm_job *job,
                                  const struct gm_calib_opts *o, struct gm_error *err)
{
    gm_calibration_free(f->cal);
    f->cal = NULL;
    return gm_calibrate(job, f->an, o, &f->cal, err);
}

static void calibrate(struct fixture *f, const struct gm_job *job, const char *predict)
{
    struct gm_calib_opts o;
    struct gm_error err;
    gm_calib_opts_init(&o);
    if (predict)
        assert_int_equal(gm_calib_add_points(&o, predict, &err), GM_OK);
    if (recalibrate(f, job, &o, &err) != GM_OK)
        fail_msg("gm_calibrate: %s", err.msg);
}

static uint64_t sum(const uint64_t *v)
{
    uint64_t s = 0;
    for (int c = 0; c < GM_CATEGORY_COUNT; c++)
        s += v[c];
    return s;
}

static void assert_near(uint64_t a, uint64_t b, uint64_t tol)
{
    if ((a > b ? a - b : b - a) > tol)
        fail_msg("%llu and %llu differ by more than %llu", (unsigned long long)a,
                 (unsigned long long)b, (unsigned long long)tol);
}

/* The two spans of a training step: the snapshot's side is the analysis' own peak (in
 * backward), the estimate's side its phase figures split by category. */
static void test_spans_of_the_example(void **state)
{
    struct fixture *f = *state;
    const struct gm_analysis_device *dev = &f->an->devices[0];
    const struct gm_calibration *c;
    const struct gm_calib_span *fb, *opt;

    calibrate(f, &f->job, NULL);
    c = f->cal;
    fb = &c->spans[0];
    opt = &c->spans[1];
    assert_int_equal(c->n_spans, 2);
    assert_int_equal(fb->kind, GM_CALIB_FORWARD_BACKWARD);
    assert_int_equal(opt->kind, GM_CALIB_OPTIMIZER_STEP);
    assert_true(fb->observed && opt->observed);
    assert_int_equal(c->tokens, 8 * 512);
    assert_int_equal(c->peak_bytes, dev->peak_bytes);
    assert_int_equal(dev->peak_phase, GM_PHASE_BACKWARD);
    assert_int_equal(c->peak_span, 0);
    assert_int_equal(fb->event, dev->peak_event);
    assert_int_equal(fb->measured_bytes, dev->peak_bytes);
    assert_memory_equal(fb->measured, dev->at_peak, sizeof(fb->measured));
    assert_true(opt->measured_bytes < fb->measured_bytes);
    /* the optimizer step holds the parameters, their gradients, both Adam moments and
     * the foreach temporaries: each of those is parameter-sized */
    assert_int_equal(opt->measured[GM_CATEGORY_GRADIENT], dev->at_peak[GM_CATEGORY_PARAMETER]);
    assert_int_equal(opt->measured[GM_CATEGORY_OPTIMIZER_TEMP],
                     dev->at_peak[GM_CATEGORY_PARAMETER]);
    assert_int_equal(opt->measured[GM_CATEGORY_OPTIMIZER_STATE],
                     2 * dev->at_peak[GM_CATEGORY_PARAMETER]);

    /* the example's job (batch 8 x 512 tokens, vocabulary 50257) peaks at the loss: the fp32
     * logits and their gradient outweigh the saved activations */
    assert_int_equal(fb->moment, GM_EST_PHASE_LOSS);
    assert_int_equal(fb->predicted_bytes, c->est->forward_backward_bytes);
    assert_int_equal(sum(fb->predicted), fb->predicted_bytes);
    assert_int_equal(opt->predicted_bytes, c->est->optimizer_step_bytes);
    assert_int_equal(fb->predicted[GM_CATEGORY_PARAMETER],
                     gm_estimate_kind_bytes(c->est, GM_KIND_WEIGHTS));
    assert_int_equal(fb->predicted_fixed + fb->predicted_workload, fb->predicted_bytes);
    assert_int_equal(fb->measured_fixed + fb->measured_workload, fb->measured_bytes);
    /* the estimate counts a position embedding the example does not have */
    assert_int_equal(fb->measured[GM_CATEGORY_PARAMETER] + 512 * 1024 * 4,
                     fb->predicted[GM_CATEGORY_PARAMETER]);
    assert_int_equal(fb->fixed_offset, (int64_t)fb->measured_fixed - (int64_t)fb->predicted_fixed);
    assert_true(fb->workload_scale > 0.5 && fb->workload_scale < 1.5);
    assert_true(fb->measured_per_token * 4096 > (double)fb->measured_workload - 1);
    assert_int_equal(c->peak_reserved_bytes - c->peak_bytes, c->measured_excess_bytes);
    assert_true(c->fragmentation > 0 && c->fragmentation < 1);
    assert_int_equal(c->leak_bytes_per_iteration, 0);
    /* SDPA: no s x s scores, one scale for the whole workload */
    assert_int_equal(fb->predicted_seq2, 0);
    assert_true(fb->per_token_scale == fb->workload_scale && fb->seq2_scale == 1.0);
    /* every parameter of the example has its gradient at the step: no buffers */
    assert_true(c->has_buffer_bytes);
    assert_int_equal(c->buffer_bytes, 0);
}

/* The s x s part of the workload at a moment of 'e' (the estimate's shares). */
static uint64_t seq2_at(const struct gm_estimate *e, unsigned moment)
{
    double q = 0;
    for (size_t i = 0; i < e->n_components; i++)
        if (e->components[i].phases & moment)
            q += e->components[i].seq2_share * (double)e->components[i].bytes;
    return (uint64_t)(q + 0.5);
}

/* The job described with eager attention: the estimate's scores (4 layers x 16 heads x 512
 * fp32 per token at the loss) are taken as predicted, the measured difference goes to the
 * rest; at twice the sequence the scores quadruple with the estimate and the rest doubles
 * at the fitted scale. */
static void test_scores_taken_as_predicted(void **state)
{
    struct fixture *f = *state;
    const struct gm_calibration *c;
    const struct gm_calib_span *fb;
    const struct gm_calib_prediction *same, *longer;
    struct gm_job j = f->job, j1024;
    struct gm_estimate *e = NULL;
    struct gm_error err;
    uint64_t q, w, fixed, bytes;

    set(&j, "attention", "eager");
    calibrate(f, &j, "seq=512,1024");
    c = f->cal;
    fb = &c->spans[0];
    assert_int_equal(fb->moment, GM_EST_PHASE_LOSS);
    assert_int_equal(fb->predicted_seq2, 4ull * 16 * 512 * 4 * 4096);
    assert_int_equal(fb->predicted_seq2, seq2_at(c->est, GM_EST_PHASE_LOSS));
    assert_true(fb->measured_workload > fb->predicted_seq2);
    assert_true(fb->seq2_scale == 1.0);
    assert_true(fabs(fb->per_token_scale * (double)(fb->predicted_workload - fb->predicted_seq2) -
                     (double)(fb->measured_workload - fb->predicted_seq2)) < 1);
    assert_true(fb->per_token_scale != fb->workload_scale);
    same = &c->predictions[0];
    longer = &c->predictions[1];
    assert_near(same->span_bytes[0], fb->measured_bytes, 1);

    j1024 = j;
    set(&j1024, "seq", "1024");
    assert_int_equal(gm_estimate_run(&j1024, &e, &err), GM_OK);
    q = seq2_at(e, GM_EST_PHASE_LOSS);
    assert_near(q, 4 * fb->predicted_seq2, 2);
    assert_true(e->loss_bytes > e->backward_start_bytes);
    /* fixed: the weights, the optimizer state and the cuBLAS workspaces (kept_at) */
    fixed = gm_estimate_kind_bytes(e, GM_KIND_WEIGHTS) +
            gm_estimate_kind_bytes(e, GM_KIND_OPTIMIZER_STATE) +
            gm_estimate_kind_bytes(e, GM_KIND_TORCH_WORKSPACE);
    w = e->loss_bytes - fixed;
    bytes = (uint64_t)((double)fixed + (double)fb->fixed_offset +
                       fb->per_token_scale * (double)(w - q) + (double)q + 0.5);
    assert_near(longer->span_bytes[0], bytes, 2);
    gm_estimate_free(e);
}

/* A job said to keep more s x s scores than the run holds workload memory (128 heads of 8
 * dimensions): one scale for the scores and the rest, and a note asking about eager
 * attention. */
static void test_scores_above_the_run(void **state)
{
    static const char heads[] =
        "{\"model_type\": \"gpt2\", \"n_embd\": 1024, \"n_layer\": 4, \"n_head\": 128,"
        " \"n_positions\": 512, \"vocab_size\": 32000, \"tie_word_embeddings\": false}";
    struct fixture *f = *state;
    const struct gm_calib_span *fb;
    struct gm_model m;
    struct gm_job j = f->job;
    struct gm_error err;
    bool said = false;

    gm_model_init(&m);
    assert_int_equal(gm_model_parse_hf_config(heads, strlen(heads), &m, &err), GM_OK);
    j.model.model = &m;
    set(&j, "attention", "eager");
    calibrate(f, &j, NULL);
    fb = &f->cal->spans[0];
    assert_true(fb->predicted_seq2 > fb->measured_workload);
    assert_true(fb->seq2_scale == fb->workload_scale);
    assert_true(fb->per_token_scale == fb->workload_scale);
    for (size_t i = 0; i < f->cal->n_notes; i++)
        said = said || strstr(f->cal->notes[i], "is the attention eager?") != NULL;
    assert_true(said);
}

/* Asked to predict the run it was fitted on, the fit gives back what was measured; with
 * twice the batch, the fixed part stays and the workload follows the estimate's. */
static void test_fit_reproduces_and_scales(void **state)
{
    struct fixture *f = *state;
    const struct gm_calibration *c;
    const struct gm_calib_prediction *same, *twice;
    struct gm_job j16 = f->job;
    struct gm_estimate *e16 = NULL;
    struct gm_error err;

    calibrate(f, &f->job, "batch=8,16");
    c = f->cal;
    assert_int_equal(c->n_predictions, 2);
    same = &c->predictions[0];
    twice = &c->predictions[1];
    assert_int_equal(same->status, GM_OK);
    assert_int_equal(same->tokens, c->tokens);
    assert_int_equal(same->estimate_allocated_bytes, c->est->peak_allocated_bytes);
    for (size_t i = 0; i < c->n_spans; i++)
        assert_near(same->span_bytes[i], c->spans[i].measured_bytes, 1);
    assert_near(same->allocated_bytes, c->peak_bytes, 1);
    assert_int_equal(same->peak_span, c->peak_span);
    assert_true(same->reserved_bytes >= same->allocated_bytes + c->measured_excess_bytes);

    set(&j16, "batch", "16");
    assert_int_equal(gm_estimate_run(&j16, &e16, &err), GM_OK);
    assert_int_equal(twice->tokens, 2 * c->tokens);
    assert_int_equal(twice->estimate_allocated_bytes, e16->peak_allocated_bytes);
    {
        const struct gm_calib_span *fb = &c->spans[0];
        uint64_t w16 = e16->forward_backward_bytes - fb->predicted_fixed;
        double want = (double)fb->measured_fixed + fb->workload_scale * (double)w16;
        assert_near(twice->span_bytes[0], (uint64_t)(want + 0.5), 1);
        /* the optimizer step keeps only the batch's logits: per token, as measured; the
         * cuBLAS workspaces (category other, as a snapshot counts them) are fixed */
        assert_true(gm_estimate_kind_bytes(c->est, GM_KIND_TORCH_WORKSPACE) > 0);
        assert_near(twice->span_bytes[1],
                    c->spans[1].measured_fixed + 2 * c->spans[1].measured_workload, 2);
    }
    assert_true(twice->allocated_bytes > same->allocated_bytes);
    gm_estimate_free(e16);
}

/* The estimate's cuBLAS workspaces are fixed on the snapshot's side only as far as the
 * snapshot's category other (where a workspace's block falls) holds them: a snapshot with
 * nothing in other (taken before the first GEMM, torch < 1.13, this CPU-made example with its
 * other relabelled as activation) keeps its whole workload, and its per-token figure is that
 * workload over the tokens, not less. */
static void test_workspaces_kept_from_other_only(void **state)
{
    struct fixture *f = *state;
    struct gm_analysis_device *dev = &f->an->devices[0];
    const struct gm_calib_span *fb;
    uint64_t fixed, work, moved;

    calibrate(f, &f->job, NULL);
    fb = &f->cal->spans[0];
    assert_true(gm_estimate_kind_bytes(f->cal->est, GM_KIND_TORCH_WORKSPACE) > 0);
    fixed = fb->measured[GM_CATEGORY_PARAMETER] + fb->measured[GM_CATEGORY_GRADIENT] +
            fb->measured[GM_CATEGORY_OPTIMIZER_STATE] + fb->measured[GM_CATEGORY_OPTIMIZER_TEMP];
    /* as the snapshot is: what moved to fixed is no more than other holds */
    moved = fb->measured_fixed - fixed;
    assert_true(moved <= fb->measured[GM_CATEGORY_OTHER]);
    assert_true(moved <= gm_estimate_kind_bytes(f->cal->est, GM_KIND_TORCH_WORKSPACE));

    for (size_t i = 0; i < dev->n_allocs; i++)
        if (dev->allocs[i].category == GM_CATEGORY_OTHER)
            dev->allocs[i].category = GM_CATEGORY_ACTIVATION;
    calibrate(f, &f->job, NULL);
    fb = &f->cal->spans[0];
    assert_int_equal(fb->measured[GM_CATEGORY_OTHER], 0);
    work = fb->measured[GM_CATEGORY_INPUT] + fb->measured[GM_CATEGORY_ACTIVATION];
    assert_int_equal(fb->measured_fixed, fixed);
    assert_int_equal(fb->measured_workload, work);
    assert_true(fb->measured_per_token == (double)work / (double)f->cal->tokens);
}

/* A prediction counts the tokens one rank holds as the estimate does: under context
 * parallelism each rank holds seq / cp of every sequence. */
static void test_tokens_per_rank(void **state)
{
    struct fixture *f = *state;
    const struct gm_calibration *c;
    struct gm_job j = f->job;
    set(&j, "gpus", "2");
    set(&j, "fsdp", NULL);
    set(&j, "fsdp-version", "2");
    calibrate(f, &j, "cp=1,2");
    c = f->cal;
    assert_int_equal(c->n_predictions, 2);
    assert_int_equal(c->predictions[0].status, GM_OK);
    assert_int_equal(c->predictions[1].status, GM_OK);
    assert_int_equal(c->predictions[0].tokens, 8 * 512);
    assert_int_equal(c->predictions[1].tokens, 8 * 512 / 2);
}

/* Inference is held against the whole run; a failing point keeps its error. */
static void test_inference_is_one_span(void **state)
{
    struct fixture *f = *state;
    const struct gm_calibration *c;
    struct gm_job j;
    gm_calib_job_init(&j);
    j.model.model = &f->model;
    set(&j, "infer", NULL);
    set(&j, "context", "512");
    {
        struct gm_calib_opts o;
        struct gm_error err;
        gm_calib_opts_init(&o);
        assert_int_equal(gm_calib_add_points(&o, "context=1024", &err), GM_OK);
        assert_int_equal(gm_calib_add_points(&o, "seq=1024", &err), GM_OK);
        assert_int_equal(recalibrate(f, &j, &o, &err), GM_OK);
    }
    c = f->cal;
    assert_int_equal(c->mode, GM_EST_INFER);
    assert_int_equal(c->n_spans, 1);
    assert_int_equal(c->spans[0].kind, GM_CALIB_RUN);
    assert_int_equal(c->spans[0].measured_bytes, f->an->devices[0].peak_bytes);
    assert_memory_equal(c->spans[0].measured, f->an->devices[0].at_peak,
                        sizeof(c->spans[0].measured));
    assert_int_equal(c->predictions[0].status, GM_OK);
    assert_int_not_equal(c->predictions[1].status, GM_OK);
    assert_non_null(strstr(c->predictions[1].error, "--seq"));
}

static void test_leak_is_said(void **state)
{
    struct fixture *leaky = calloc(1, sizeof(*leaky));
    (void)state;
    assert_non_null(leaky);
    load_example(leaky, true);
    calibrate(leaky, &leaky->job, NULL);
    assert_true(leaky->cal->leak_bytes_per_iteration > 0);
    assert_true(leaky->cal->n_notes > 0);
    assert_non_null(strstr(leaky->cal->notes[0], "leaks"));
    teardown((void **)&leaky);
}

static void test_refusals(void **state)
{
    struct fixture *f = *state;
    struct gm_calib_opts o;
    struct gm_job j = f->job;
    struct gm_error err;

    gm_calib_opts_init(&o);
    o.device = 3;
    assert_int_equal(recalibrate(f, &f->job, &o, &err), GM_ERR_INVALID);
    assert_string_equal(err.msg, "the snapshot has no device 3");
    gm_calib_opts_init(&o);
    set(&j, "max-batch", NULL);
    assert_int_equal(recalibrate(f, &j, &o, &err), GM_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--predict"));
    gm_job_init(&j);
    j.model.model = &f->model;
    assert_int_equal(recalibrate(f, &j, &o, &err), GM_ERR_INVALID);
    assert_non_null(strstr(err.msg, "weights-only"));
}

static void test_points(void **state)
{
    static const char *const bad[] = {
        "batch",      "=8",         "nosuch=1",   "train=1", "batch=",
        "batch=8,,9", "batch=zero", "batch=8,-1", "seq=0",   "precision=fp64",
    };
    struct gm_calib_opts o;
    struct gm_error err;
    char many[256] = "batch=1";
    (void)state;

    gm_calib_opts_init(&o);
    assert_int_equal(gm_calib_add_points(&o, "batch=8,16", &err), GM_OK);
    assert_int_equal(gm_calib_add_points(&o, "max_model_len=4096", &err), GM_OK);
    assert_int_equal(gm_calib_add_points(&o, "precision=bf16-mixed", &err), GM_OK);
    assert_int_equal(o.n_points, 4);
    assert_string_equal(o.points[1].setting, "batch");
    assert_string_equal(o.points[1].value, "16");
    assert_string_equal(o.points[2].setting, "max-model-len");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        gm_calib_opts_init(&o);
        if (gm_calib_add_points(&o, bad[i], &err) == GM_OK)
            fail_msg("'%s' was accepted", bad[i]);
        assert_int_equal(err.code, GM_ERR_INVALID);
        assert_non_null(strstr(err.msg, "--predict"));
    }
    for (int i = 2; i <= GM_CALIB_MAX_POINTS + 1; i++)
        snprintf(many + strlen(many), sizeof(many) - strlen(many), ",%d", i);
    gm_calib_opts_init(&o);
    assert_int_equal(gm_calib_add_points(&o, many, &err), GM_ERR_LIMIT);
}

static void test_json(void **state)
{
    struct fixture *f = *state;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    struct gm_error err;
    json_error_t jerr;
    json_t *root, *spans, *pred;

    calibrate(f, &f->job, "batch=16");
    assert_non_null(m);
    assert_int_equal(gm_calibration_json(m, f->cal, &err), GM_OK);
    assert_int_equal(fclose(m), 0);
    root = json_loadb(buf, len, 0, &jerr);
    free(buf);
    assert_non_null(root);
    assert_string_equal(json_string_value(json_object_get(root, "schema")), "gpumem.calibrate/1");
    spans = json_object_get(root, "spans");
    assert_int_equal(json_array_size(spans), 2);
    assert_int_equal(
        json_integer_value(json_object_get(json_array_get(spans, 0), "measured_bytes")),
        (json_int_t)f->cal->spans[0].measured_bytes);
    assert_int_equal(
        json_integer_value(json_object_get(
            json_object_get(json_object_get(json_array_get(spans, 0), "categories"), "parameter"),
            "residual_bytes")),
        -512 * 1024 * 4);
    {
        json_t *w = json_object_get(json_array_get(spans, 0), "workload");
        assert_int_equal(json_integer_value(json_object_get(w, "predicted_seq2_bytes")), 0);
        assert_true(json_real_value(json_object_get(w, "per_token_scale")) ==
                    f->cal->spans[0].per_token_scale);
        assert_true(json_is_real(json_object_get(w, "seq2_scale")));
    }
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(root, "snapshot"), "buffer_bytes")), 0);
    pred = json_array_get(json_object_get(root, "predictions"), 0);
    assert_string_equal(json_string_value(json_object_get(pred, "setting")), "batch");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(pred, "calibrated"), "allocated_bytes")),
        (json_int_t)f->cal->predictions[0].allocated_bytes);
    json_decref(root);
}

/* Every allocation of a calibration failing in turn: GM_ERR_NOMEM, never a crash. */
static void test_allocation_failures(void **state)
{
    struct fixture *f = *state;
    struct gm_calib_opts o;
    struct gm_error err;
    enum gm_status st = GM_ERR_NOMEM;
    long n;
    gm_calib_opts_init(&o);
    assert_int_equal(gm_calib_add_points(&o, "batch=16", &err), GM_OK);
    /* the estimate replays its training step through the allocator model: thousands of
     * allocations before the calibration completes */
    for (n = 0; n < 100000 && st == GM_ERR_NOMEM; n++) {
        gm_alloc_fail_after(n);
        st = recalibrate(f, &f->job, &o, &err);
        gm_alloc_fail_after(-1);
    }
    assert_int_equal(st, GM_OK);
    assert_true(n > 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_spans_of_the_example, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fit_reproduces_and_scales, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tokens_per_rank, setup, teardown),
        cmocka_unit_test_setup_teardown(test_workspaces_kept_from_other_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scores_taken_as_predicted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scores_above_the_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inference_is_one_span, setup, teardown),
        cmocka_unit_test(test_leak_is_said),
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
        cmocka_unit_test(test_points),
        cmocka_unit_test_setup_teardown(test_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_allocation_failures, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
