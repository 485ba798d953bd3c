/* SPDX-License-Identifier: MIT */
/* cmd_calibrate.c - gpumem calibrate SNAPSHOT [MODEL] [job settings]: the estimate of a job
 * held against a memory snapshot of a real run of it, per category and span; the fit of
 * what that run tells (fixed overhead, activation bytes per token, fragmentation); and
 * other sizes of the job predicted with it (--predict).  With --account FILE instead (gpumem
 * account of a run), the components the estimate assumes outside the caching allocator
 * (context, workspaces, NCCL, vLLM's non-torch memory) are set from what the driver saw.
 * The options are the estimator's job settings plus a few; gm_calibrate() and
 * gm_account_calibrate() do the work; this file renders it. */
#include "analysis_common.h"
#include "cli.h"
#include "commands.h"
#include "job_opts.h"
#include "opts.h"

#include "gpumem/account.h"
#include "gpumem/analysis.h"
#include "gpumem/estimate.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

static const char *span_title(enum gm_calib_span_kind k)
{
    return k == GM_CALIB_FORWARD_BACKWARD ? "forward/backward"
           : k == GM_CALIB_OPTIMIZER_STEP ? "optimizer step"
                                          : "the whole run";
}

/* "+1.2%": b against a (a > 0). */
static const char *percent(char *buf, size_t n, uint64_t a, uint64_t b)
{
    snprintf(buf, n, "%+.1f%%", ((double)b - (double)a) / (double)a * 100.0);
    return buf;
}

/* The estimate's moment of a span, in words. */
static const char *moment_text(unsigned moment)
{
    switch (moment) {
    case GM_EST_PHASE_FORWARD_BACKWARD:
        return "the start of backward";
    case GM_EST_PHASE_LOSS:
        return "the loss (logits and their gradient)";
    case GM_EST_PHASE_BACKWARD_END:
        return "the end of backward";
    case GM_EST_PHASE_OPTIMIZER_STEP:
        return "the optimizer step";
    case GM_EST_PHASE_PREFILL:
        return "prefill";
    case GM_EST_PHASE_DECODE:
        return "decode";
    }
    return "its peak";
}

static void row(FILE *f, const char *what, uint64_t predicted, bool observed, uint64_t measured)
{
    char a[32], b[32], d[32], p[16];
    fprintf(f, "  %-16s %14s %14s %14s", what, ana_cli_short(a, sizeof a, predicted),
            observed ? ana_cli_short(b, sizeof b, measured) : "-",
            observed ? ana_cli_delta(d, sizeof d, predicted, measured) : "-");
    if (observed && predicted)
        fprintf(f, " %8s", percent(p, sizeof p, predicted, measured));
    fputc('\n', f);
}

static void render_span(FILE *f, const struct gm_calib_span *s)
{
    char a[32], b[32], d[32];
    fprintf(f, "%s: the estimate at %s, ", span_title(s->kind), moment_text(s->moment));
    if (s->observed)
        fprintf(f, "the snapshot at its highest point (after event %" PRId64 ")\n", s->event);
    else
        fprintf(f, "the snapshot has no such span\n");
    fprintf(f, "  %-16s %14s %14s %14s\n", "category", "predicted", "measured", "difference");
    for (int c = 0; c < GM_CATEGORY_COUNT; c++)
        if (s->predicted[c] || s->measured[c])
            row(f, gm_category_name((enum gm_category)c), s->predicted[c], s->observed,
                s->measured[c]);
    row(f, "total", s->predicted_bytes, s->observed, s->measured_bytes);
    if (!s->observed)
        return;
    fprintf(f, "  fit: parameter-sized memory (parameters, gradients, optimizer) %s\n",
            ana_cli_delta(d, sizeof d, s->predicted_fixed, s->measured_fixed));
    ana_cli_short(a, sizeof a, (uint64_t)(s->measured_per_token + 0.5));
    if (s->predicted_workload && !s->predicted_seq2)
        fprintf(f,
                "       workload (activation, input, other) per token: %s measured, %s "
                "predicted, x%.3f\n",
                a, ana_cli_short(b, sizeof b, (uint64_t)(s->predicted_per_token + 0.5)),
                s->per_token_scale);
    else if (s->predicted_workload)
        fprintf(f,
                "       workload (activation, input, other) per token: %s measured, %s "
                "predicted;\n"
                "       of it the s x s attention scores (%s) %s, the rest x%.3f\n",
                a, ana_cli_short(b, sizeof b, (uint64_t)(s->predicted_per_token + 0.5)),
                ana_cli_short(d, sizeof d, s->predicted_seq2),
                s->seq2_scale == 1.0 ? "as predicted" : "scaled alike", s->per_token_scale);
    else
        fprintf(f,
                "       workload (activation, input, other) per token: %s measured, none "
                "predicted (kept per token)\n",
                a);
}

static void render(FILE *f, const char *snapshot, const struct gm_calibration *c)
{
    const struct gm_estimate *e = c->est;
    char a[32], b[32], d[32], r[32];

    fprintf(f, "snapshot: %s, device %d: %u iterations, peak %s in %s", snapshot, (int)c->device,
            c->n_iterations, ana_cli_short(a, sizeof a, c->peak_bytes),
            gm_phase_name((enum gm_phase)c->peak_phase));
    if (c->peak_iteration >= 0)
        fprintf(f, " (iteration %d)", (int)c->peak_iteration + 1);
    fprintf(f, "\njob: %s of %s, batch %" PRIu64,
            c->mode == GM_EST_TRAIN ? "training" : "inference",
            c->model[0] ? c->model : "a parameter count", c->workload.batch);
    if (c->mode == GM_EST_TRAIN)
        fprintf(f, " x seq %" PRIu64, c->workload.seq);
    else
        fprintf(f, " x (context %" PRIu64 " + new %" PRIu64 ")", c->workload.context,
                c->workload.new_tokens);
    fprintf(f, " = %" PRIu64 " tokens, %" PRIu64 " parameters\n\n", c->tokens, e->n_params);
    for (size_t i = 0; i < c->n_spans; i++) {
        render_span(f, &c->spans[i]);
        fputc('\n', f);
    }
    fprintf(f, "peak\n");
    row(f, "allocated", e->peak_allocated_bytes, true, c->peak_bytes);
    row(f, "reserved", e->peak_reserved_bytes, true, c->peak_reserved_bytes);
    fprintf(f,
            "fragmentation: reserved exceeds the allocated peak by %s, %.3f of the workload "
            "memory at the peak (the estimate: %s, ",
            ana_cli_short(a, sizeof a, c->measured_excess_bytes), c->fragmentation,
            ana_cli_short(b, sizeof b, c->predicted_excess_bytes));
    if (e->replay.used && !e->replay.floor)
        fprintf(f, "from its step replayed through the caching allocator)\n");
    else
        fprintf(f, "%.2f of its transient memory)\n", c->assumed_fragmentation);
    if (c->n_predictions) {
        fprintf(f, "\npredictions with the calibrated values (allocated, reserved: peaks)\n");
        fprintf(f, "  %-22s %10s %14s %14s %14s %14s  %s\n", "change", "tokens", "estimate",
                "calibrated", "correction", "reserved", "peak in");
    }
    for (size_t i = 0; i < c->n_predictions; i++) {
        const struct gm_calib_prediction *q = &c->predictions[i];
        char what[96];
        snprintf(what, sizeof what, "%s=%s", q->point.setting, q->point.value);
        if (q->status != GM_OK) {
            fprintf(f, "  %-22s %s\n", what, q->error);
            continue;
        }
        fprintf(f, "  %-22s %10" PRIu64 " %14s %14s %14s %14s  %s\n", what, q->tokens,
                ana_cli_short(a, sizeof a, q->estimate_allocated_bytes),
                ana_cli_short(b, sizeof b, q->allocated_bytes),
                ana_cli_delta(d, sizeof d, q->estimate_allocated_bytes, q->allocated_bytes),
                ana_cli_short(r, sizeof r, q->reserved_bytes),
                span_title(c->spans[q->peak_span].kind));
    }
    if (c->n_notes)
        fprintf(f, "\nnotes:\n");
    for (size_t i = 0; i < c->n_notes; i++)
        fprintf(f, "  - %s\n", c->notes[i]);
}

/* --account: predicted against measured for each component outside the allocator. */
static void render_account(FILE *f, const char *file, const struct gm_account_calibration *c)
{
    char a[32], b[32], d[32], k[32];
    fprintf(f, "account: %s, process %u", file, (unsigned)c->pid);
    if (c->rank >= 0)
        fprintf(f, " (rank %d)", (int)c->rank);
    fprintf(f, ", cuda:%d at its peak: device used %s (NVML)\n\n", (int)c->device,
            ana_cli_short(a, sizeof a, c->measured_used));
    fprintf(f, "  %-26s %12s %12s %12s %12s  %s\n", "outside the allocator", "predicted",
            "measured", "difference", "calibrated", "setting");
    for (int i = 0; i < GM_ACCOUNT_COMP__COUNT; i++) {
        const struct gm_account_calib_row *r = &c->rows[i];
        fprintf(f, "  %-26s %12s %12s %12s %12s  ", gm_account_component_name(r->what),
                r->applies ? ana_cli_short(a, sizeof a, r->predicted) : "-",
                ana_cli_short(b, sizeof b, r->measured),
                r->applies ? ana_cli_delta(d, sizeof d, r->predicted, r->measured) : "-",
                r->applies ? ana_cli_short(k, sizeof k, r->calibrated) : "-");
        if (r->set && r->communicators > 1)
            fprintf(f, "--%s %llu (%llu communicators)\n", r->setting, (unsigned long long)r->value,
                    (unsigned long long)r->communicators);
        else if (r->set)
            fprintf(f, "--%s %llu\n", r->setting, (unsigned long long)r->value);
        else
            fprintf(f, "%s\n", r->note);
    }
    fprintf(f, "\n  %-26s %12s %12s %12s %12s\n", "device (nvidia-smi view)",
            ana_cli_short(a, sizeof a, c->device_before),
            ana_cli_short(b, sizeof b, c->measured_used),
            ana_cli_delta(d, sizeof d, c->device_before, c->measured_used),
            ana_cli_short(k, sizeof k, c->device_after));
}

static int calibrate_account(const char *cmd, const char *file, struct gm_job *job, bool json)
{
    struct gm_account *a = NULL;
    struct gm_account_calibration c;
    struct gm_error err;
    int rc = 0;
    if (gm_account_new(&a, &err) != GM_OK || gm_account_add_file(a, file, &err) != GM_OK ||
        gm_account_calibrate(a, job, &c, &err) != GM_OK)
        rc = cli_fail(cmd, &err);
    else if (json)
        rc = gm_account_calibration_json(stdout, &c, &err) == GM_OK ? 0 : cli_fail(cmd, &err);
    else
        render_account(stdout, file, &c);
    gm_account_free(a);
    return rc;
}

/* MODEL as `gpumem estimate` takes it (a Hub id found in the local Hugging Face cache too). */
static enum gm_status load_model(struct gm_job_source *src, const char *spec, struct gm_error *err)
{
    char cache[4096];
    bool have_cache = gm_hf_hub_cache(getenv, cache, sizeof cache);
    return gm_job_source_load(src, spec, have_cache ? cache : NULL, err);
}

static const struct opt_usage usage = {
    "gpumem calibrate SNAPSHOT [MODEL] [JOB SETTINGS] [--predict NAME=V1,V2,...] [OPTIONS]\n"
    "       gpumem calibrate --account FILE [MODEL] [JOB SETTINGS] [--json]",
    "Hold gpumem estimate of a job against a memory snapshot of a real run of it\n"
    "(torch.cuda.memory._dump_snapshot()): per category (parameter, activation,\n"
    "gradient, ...) predicted against measured at the highest point of the\n"
    "forward/backward pass and of the optimizer step, and the peaks.  Then fit what\n"
    "the short run tells - the fixed overhead (parameter-sized memory the estimate\n"
    "does not count), the activation bytes per token, the fragmentation - and predict\n"
    "other batch sizes or sequence lengths with the calibrated values (--predict).\n"
    "MODEL and the job settings are those of gpumem estimate (training unless --infer).\n"
    "With --account (the timeline of gpumem account, or its folder of files) instead of a\n"
    "snapshot: the components the estimate assumes outside the caching allocator - the CUDA\n"
    "context and modules, library workspaces, NCCL buffers per communicator, vLLM's\n"
    "non-torch memory - are set from what the driver saw at the busiest process's peak,\n"
    "predicted against measured for each, and the device figure estimated again.",
    "  gpumem calibrate run-b4.pickle gpt2 --batch 4 --seq 1024 --precision fp32 \\\n"
    "      --predict batch=8,16,32\n"
    "  gpumem calibrate run.pickle llama-3-8b --batch 1 --seq 4096 --predict seq=8192 --json\n"
    "  gpumem calibrate --account run.account.jsonl llama-3-8b --batch 1 --seq 4096"};

int cmd_calibrate(int argc, char **argv)
{
    const char *cmd = argv[0];
    struct job_opts jo;
    struct opt opts[JOB_OPTS_MAX + 8];
    struct opt_list predict = {{NULL}, 0};
    struct gm_job job;
    struct gm_job_source src;
    struct gm_calib_opts co;
    struct gm_calibration *c = NULL;
    struct gm_snapshot *snap = NULL;
    struct gm_analysis *an = NULL;
    struct gm_error err;
    bool json = false, have_src = false, has_device = false;
    const char *account = NULL;
    int device = -1, n_pos = 0, rc;
    uint64_t mem_limit = 0;
    size_t n = 0;

    job_opts_add(opts, &n, &jo);
    opts[n++] = (struct opt)OPT_LIST(
        "predict", 0, &predict, "NAME=V1,V2",
        "predict the job with a setting at other values (batch=8,16; seq=4096); repeatable");
    opts[n++] = (struct opt)OPT_INT(
        "device", 0, &device, "N", "the snapshot's device (default: the one with the largest peak)",
        &has_device);
    opts[n++] = (struct opt)SNAPCLI_OPT_MEMORY(&mem_limit);
    opts[n++] = (struct opt)OPT_STRING(
        "account", 0, &account, "FILE",
        "calibrate the components outside the allocator from gpumem account of a run instead");
    opts[n++] = (struct opt)OPT_JSON(&json, "gpumem.calibrate/1");
    opts[n] = (struct opt)OPT_END;
    if ((rc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos)) >= 0)
        return rc;
    if (account) {
        if (n_pos > 1)
            return cli_usage(cmd, "with --account, give at most the MODEL (no snapshot)");
        if (predict.n || has_device || mem_limit)
            return cli_usage(cmd, "--predict, --device and --memory-limit are for a snapshot");
        gm_calib_job_init(&job);
        if ((rc = job_opts_fill(cmd, &jo, &job)) != 0)
            return rc;
        if (n_pos == 1) {
            if (load_model(&src, argv[1], &err) != GM_OK)
                return cli_fail(cmd, &err);
            gm_job_use_source(&job, &src);
        }
        rc = calibrate_account(cmd, account, &job, json);
        if (n_pos == 1)
            gm_job_source_release(&src);
        return rc;
    }
    if (n_pos < 1)
        return cli_usage(cmd, "give the SNAPSHOT of a run and the MODEL of its job");
    if (n_pos > 2)
        return cli_usage(cmd, "unexpected argument '%s'", argv[3]);
    gm_calib_job_init(&job);
    if ((rc = job_opts_fill(cmd, &jo, &job)) != 0)
        return rc;
    gm_calib_opts_init(&co);
    if (has_device && device < 0)
        return cli_usage(cmd, "--device: a CUDA index (0, 1, ...)");
    co.device = device;
    for (int i = 0; i < predict.n; i++)
        if (gm_calib_add_points(&co, predict.items[i], &err) != GM_OK)
            return cli_usage(cmd, "%s", err.msg);
    if (n_pos == 2) {
        if (load_model(&src, argv[2], &err) != GM_OK)
            return cli_fail(cmd, &err);
        have_src = true;
        gm_job_use_source(&job, &src);
    }
    struct snapcli_load_opts lo = {.memory_limit = mem_limit};
    if ((rc = ana_cli_open(cmd, argv[1], &lo, &snap, &an)) != 0)
        goto out;
    if (gm_calibrate(&job, an, &co, &c, &err) != GM_OK)
        rc = cli_fail(cmd, &err);
    else if (json)
        rc = gm_calibration_json(stdout, c, &err) == GM_OK ? 0 : cli_fail(cmd, &err);
    else
        render(stdout, argv[1], c);
out:
    gm_calibration_free(c);
    ana_cli_close(snap, an);
    if (have_src)
        gm_job_source_release(&src);
    return rc;
}
