/* SPDX-License-Identifier: MIT */
/* cmd_estimate.c - gpumem estimate: will this training or inference job fit on my GPU,
 * and what would make it fit?  The options are the library's job settings
 * (gm_job_settings()); the command loads MODEL, runs gm_estimate_report_run() and
 * renders the report. */
#include "cli.h"
#include "commands.h"
#include "estimate_lists.h"
#include "estimate_render.h"
#include "job_opts.h"
#include "opts.h"

#include "gpumem/estimate.h"
#include "gpumem/model.h"
#include "gpumem/units.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void segments_json(const struct gm_est_segments *l, const struct gm_estimate *e,
                          struct gm_json *w)
{
    cli_json_begin(w, stdout, "estimate.replay_segments");
    gm_json_key(w, "segments");
    gm_json_begin_array(w);
    for (size_t i = 0; i < l->n; i++) {
        const struct gm_est_replay_segment *seg = &l->v[i];
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "pass", seg->pass);
        gm_json_kv_u64(w, "step", seg->step);
        gm_json_kv_str(w, "at", gm_est_replay_at_name(seg->at));
        gm_json_kv_u64(w, "layer", seg->layer);
        gm_json_kv_str(w, "stream", gm_est_stream_name(seg->stream));
        gm_json_kv_u64(w, "bytes", seg->bytes);
        gm_json_kv_u64(w, "request_bytes", seg->request);
        gm_json_kv_u64(w, "live_bytes", seg->live);
        gm_json_kv_u64(w, "reserved_bytes", seg->reserved);
        gm_json_kv_bool(w, "measured", seg->measured);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_kv_u64(w, "steps", e->replay.steps);
    gm_json_kv_u64(w, "reserved_peak_bytes", e->replay.reserved_peak);
}

static void segments_text(const struct gm_est_segments *l, const struct gm_estimate *e)
{
    char b[32], q[32], lv[32], rs[32], where[48];
    uint64_t total = 0;
    if (!e->replay.steps) {
        printf("no step replay for this job (its peak reserved does not come from a replayed "
               "training step)\n");
        return;
    }
    printf("pass step  at             stream              segment      request         live     "
           "reserved\n");
    for (size_t i = 0; i < l->n; i++) {
        const struct gm_est_replay_segment *seg = &l->v[i];
        total += seg->bytes;
        if (seg->layer)
            snprintf(where, sizeof where, "%s %u", gm_est_replay_at_name(seg->at), seg->layer);
        else
            snprintf(where, sizeof where, "%s", gm_est_replay_at_name(seg->at));
        printf("%4u %4u  %-14s %-14s %12s %12s %12s %12s%s\n", seg->pass, seg->step, where,
               gm_est_stream_name(seg->stream),
               gm_format_bytes(b, sizeof b, seg->bytes, GM_UNITS_IEC),
               gm_format_bytes(q, sizeof q, seg->request, GM_UNITS_IEC),
               gm_format_bytes(lv, sizeof lv, seg->live, GM_UNITS_IEC),
               gm_format_bytes(rs, sizeof rs, seg->reserved, GM_UNITS_IEC),
               seg->measured ? "  measured: the FOAK loss cache block" : "");
    }
    printf("%zu segments, %s, in %llu replayed steps; replay peak reserved %s\n", l->n,
           gm_format_bytes(b, sizeof b, total, GM_UNITS_IEC), (unsigned long long)e->replay.steps,
           gm_format_bytes(rs, sizeof rs, e->replay.reserved_peak, GM_UNITS_IEC));
}

/* The estimate's step replay, segment by segment, in the order it took them. */
static int replay_segments(const char *cmd, const struct gm_job *job, bool json)
{
    struct gm_estimate *e = NULL;
    struct gm_est_segments l;
    struct gm_json w;
    struct gm_error err;
    int rc;
    if (gm_estimate_run_segments(job, &e, &l, &err) != GM_OK) {
        rc = cli_fail(cmd, &err);
    } else if (json) {
        segments_json(&l, e, &w);
        rc = cli_json_end(&w, "gpumem estimate");
    } else {
        segments_text(&l, e);
        rc = fflush(stdout) != 0 ? GM_EXIT_IOERR : 0;
    }
    gm_est_segments_free(&l);
    gm_estimate_free(e);
    return rc;
}

/* The command's own options, beside the job settings. */
struct est_cli {
    bool list_models, list_gpus, list_archs, segments, json, check, brief, all_suggestions;
    const char *from;
    int color;
};

/* One option per job setting, then the command's own. */
static void build_options(struct opt *opts, struct job_opts *c, struct est_cli *o)
{
    size_t n = 0;
    job_opts_add(opts, &n, c);
    opts[n++] = (struct opt)OPT_STRING("from", 0, &o->from, "CMD",
                                       "the job an engine command runs: 'vllm serve MODEL ...', "
                                       "'python -m sglang.launch_server ...', 'llama-server -m "
                                       "MODEL ...'");
    opts[n++] = (struct opt)OPT_FLAG("check", 0, &o->check,
                                     "exit 0 if it fits, 1 if it does not, 3 if borderline");
    opts[n++] = (struct opt)OPT_FLAG("brief", 0, &o->brief,
                                     "one line: the verdict, device used, the margin");
    opts[n++] = (struct opt)OPT_FLAG("all-suggestions", 0, &o->all_suggestions,
                                     "every change that helps, not the first five");
    opts[n++] = (struct opt)OPT_FLAG("list-models", 0, &o->list_models,
                                     "list the built-in models (MODEL: those whose name or Hub "
                                     "id holds it)");
    opts[n++] = (struct opt)OPT_FLAG("list-gpus", 0, &o->list_gpus, "list the GPU catalog");
    opts[n++] = (struct opt)OPT_FLAG("list-archs", 0, &o->list_archs,
                                     "list the architectures (model_type) gpumem knows");
    opts[n++] = (struct opt)OPT_FLAG("replay-segments", 0, &o->segments,
                                     "list the segments the step replay takes, in order, with "
                                     "where in the step and what was live (training)");
    opts[n++] = (struct opt)OPT_JSON(&o->json, "gpumem.estimate/1");
    opts[n++] = (struct opt)OPT_COLOR(&o->color);
    opts[n] = (struct opt)OPT_END;
}

static const struct opt_usage usage = {
    "gpumem estimate [MODEL] [--train|--infer] [OPTIONS]",
    "Predict peak GPU memory before launching: peak allocated, peak reserved and\n"
    "device used as nvidia-smi shows it, with every component and assumption, the\n"
    "fit verdict on a GPU, what to change when it does not fit, and for a\n"
    "serving job that fits the engine's own command line.\n"
    "MODEL is a built-in name (--list-models), a Hugging Face id (the local\n"
    "hub cache, else the built-in model of that name), a config.json or a\n"
    "directory holding one, or weight files read from their headers: a\n"
    ".safetensors file, a folder of shards or its model.safetensors.index.json,\n"
    "or a .gguf file.  Without --train or --infer only the weights are sized.\n"
    "--check exits 0 when the job fits, 1 when it does not, 3 if borderline.",
    "  gpumem estimate --parameters 7B --bits 16 --reserve-gib 4\n"
    "  gpumem estimate llama-3-8b --train --batch 4 --seq 2048 --gpu H100\n"
    "  gpumem estimate meta-llama/Llama-3.1-8B-Instruct --infer --engine vllm --gpu L4\n"
    "  gpumem estimate mistral-7b --infer --batch 8 --context 8192 --kv-dtype fp8\n"
    "  gpumem estimate llama-3.1-70b --infer --engine vllm --gpus 2 --gpu H100\n"
    "  gpumem estimate --from 'vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 32768' "
    "--gpu L40S\n"
    "  gpumem estimate model.gguf --infer --engine llama.cpp --context 8192 --gpu RTX-4090"};

/* The verdict as --check's exit code: 0 fits, 1 does not, 3 borderline. */
static int check_code(const struct gm_estimate_report *r)
{
    const struct gm_est_fit *fit = &r->est->fit;
    if (fit->verdict == GM_VERDICT_BORDERLINE)
        return GM_EXIT_BORDERLINE;
    return fit->fits ? GM_EXIT_OK : GM_EXIT_FAILURE;
}

/* MODEL from the command line, or from the engine command --from read. */
static int load_model(const char *cmd, const char *spec, struct gm_job_source *src,
                      struct gm_job *job)
{
    struct gm_error err;
    char cache[4096];
    bool have_cache = gm_hf_hub_cache(getenv, cache, sizeof cache);
    if (gm_job_source_load(src, spec, have_cache ? cache : NULL, &err) != GM_OK)
        return cli_fail(cmd, &err);
    gm_job_use_source(job, src);
    return 0;
}

int cmd_estimate(int argc, char **argv)
{
    const char *cmd = argv[0], *model;
    struct job_opts c;
    struct opt opts[JOB_OPTS_MAX + 12];
    struct est_cli o = {0};
    struct gm_job job;
    struct gm_job_source src;
    struct gm_estimate_report *r = NULL;
    struct gm_error err;
    char from_model[512] = "", from_note[GM_EST_NOTE_MAX - 64], from_text[GM_EST_NOTE_MAX];
    bool have_src = false;
    int n_pos = 0, rc;

    build_options(opts, &c, &o);
    if ((rc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos)) >= 0)
        return rc;
    if (o.list_models)
        return est_list_models(n_pos == 1 ? argv[1] : NULL, o.json);
    if (o.list_gpus)
        return est_list_gpus(o.json);
    if (o.list_archs)
        return est_list_archs(o.json);
    if (n_pos > 1)
        return cli_usage(cmd, "unexpected argument '%s'", argv[2]);
    gm_job_init(&job);
    if (o.from) {
        if (gm_job_read_command(&job, o.from, from_model, sizeof from_model, from_note,
                                sizeof from_note, &err) != GM_OK)
            return cli_usage(cmd, "%s", err.msg);
        snprintf(from_text, sizeof from_text, "read from the %s command line%s%s",
                 gm_engine_name(job.engine.kind), from_note[0] ? "; not read: " : "", from_note);
        job.from = from_text;
    }
    if ((rc = job_opts_fill(cmd, &c, &job)) != 0)
        return rc;
    model = n_pos == 1 ? argv[1] : from_model[0] ? from_model : NULL;
    if (!model && !job.model.n_params)
        return cli_usage(cmd, "give a MODEL or --parameters N");
    if (o.check && !job.gpu.memory_bytes)
        return cli_usage(cmd, "--check judges the fit on a GPU: give --gpu or --gpu-memory");
    if (model) {
        if ((rc = load_model(cmd, model, &src, &job)) != 0)
            return rc;
        have_src = true;
    }
    if (o.segments) {
        rc = replay_segments(cmd, &job, o.json);
        goto out;
    }
    if (gm_estimate_report_run(&job, &r, &err) != GM_OK) {
        rc = cli_fail(cmd, &err);
    } else {
        struct est_render_opts ro = {cli_use_color((enum cli_color)o.color, stdout),
                                     o.all_suggestions ? 0 : 5};
        if (o.json)
            rc = gm_estimate_report_json(stdout, r, &err) == GM_OK ? 0 : cli_fail(cmd, &err);
        else if (o.brief)
            est_render_brief(stdout, r);
        else
            est_render_text(stdout, r, &ro);
        if (!o.json)
            rc = fflush(stdout) != 0 ? GM_EXIT_IOERR : 0;
        if (rc == 0 && o.check)
            rc = check_code(r);
    }
    gm_estimate_report_free(r);
out:
    if (have_src)
        gm_job_source_release(&src);
    return rc;
}
