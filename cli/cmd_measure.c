/* SPDX-License-Identifier: MIT */
/* cmd_measure.c - gpumem measure: run a small dense network on the GPU phase by phase and
 * record allocated/reserved (PyTorch's meaning, through the allocator model), device
 * memory from the driver, timings, and a CPU check of the results. */
#include "cli.h"
#include "commands.h"
#include "opts.h"

#include "gpumem/alloc.h"
#include "gpumem/device.h"
#include "gpumem/measure.h"
#include "gpumem/units.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const dtype_choices[] = {"float32", "bfloat16", NULL};

static void kv_reading(struct gm_json *w, const char *key, struct gm_reading r)
{
    if (r.valid)
        gm_json_kv_u64(w, key, r.value);
}

/* "key": {"begin": B, "end": E, "peak": P}: one of the allocator's counters over a phase. */
static void kv_counter(struct gm_json *w, const char *key, uint64_t begin, uint64_t end,
                       uint64_t peak)
{
    gm_json_key(w, key);
    gm_json_begin_object(w);
    gm_json_kv_u64(w, "begin", begin);
    gm_json_kv_u64(w, "end", end);
    gm_json_kv_u64(w, "peak", peak);
    gm_json_end_object(w);
}
static void json_phase(struct gm_json *w, enum gm_measure_phase_id id,
                       const struct gm_measure_phase *p)
{
    gm_json_begin_object(w);
    gm_json_kv_str(w, "name", gm_measure_phase_name(id));
    gm_json_kv_bool(w, "ran", p->ran);
    if (!p->ran) {
        gm_json_end_object(w);
        return;
    }
    gm_json_kv_bool(w, "ok", p->ok);
    if (!p->ok)
        gm_json_kv_str(w, "error", p->error);
    gm_json_kv_double(w, "seconds", p->seconds);
    if (p->passes) {
        gm_json_kv_u64(w, "passes", p->passes);
        gm_json_key(w, "pass_seconds");
        gm_json_begin_object(w);
        gm_json_kv_double(w, "min", p->pass_seconds_min);
        gm_json_kv_double(w, "mean", p->pass_seconds_mean);
        gm_json_kv_double(w, "max", p->pass_seconds_max);
        gm_json_end_object(w);
    }
    kv_counter(w, "allocated_bytes", p->allocated_begin, p->allocated_end, p->peak_allocated);
    kv_counter(w, "reserved_bytes", p->reserved_begin, p->reserved_end, p->peak_reserved);
    gm_json_key(w, "device_bytes");
    gm_json_begin_object(w);
    kv_reading(w, "free_begin", p->device_free_begin);
    kv_reading(w, "free_end", p->device_free_end);
    kv_reading(w, "used_begin", p->device_used_begin);
    kv_reading(w, "used_end", p->device_used_end);
    gm_json_end_object(w);
    gm_json_key(w, "estimate");
    gm_json_begin_object(w);
    gm_json_kv_u64(w, "peak_allocated_bytes", p->estimate_peak_allocated);
    gm_json_kv_u64(w, "peak_reserved_bytes", p->estimate_peak_reserved);
    gm_json_end_object(w);
    if (p->checked) {
        gm_json_key(w, "check");
        gm_json_begin_object(w);
        gm_json_kv_bool(w, "ok", p->check_ok);
        gm_json_kv_double(w, "seconds", p->check_seconds);
        gm_json_kv_double(w, "max_rel_error", p->max_rel_error);
        gm_json_end_object(w);
    }
    gm_json_end_object(w);
}

static void write_json(FILE *f, struct gm_devices *devs, const struct gm_host_info *host,
                       const struct gm_measure_opts *o, const char *conf_str,
                       const struct gm_measure_result *r)
{
    struct gm_json w;
    char dev[32];
    uint64_t rows = (uint64_t)o->batch * o->context;
    cli_json_begin(&w, f, "measure");
    gm_json_kv_str(&w, "source", "gpumem measure");
    gm_json_key(&w, "environment");
    gm_json_begin_object(&w);
    gm_devices_write_json(&w, devs, host, o->device);
    gm_json_end_object(&w);
    snprintf(dev, sizeof(dev), "cuda:%d", o->device);
    gm_json_key(&w, "dimensions");
    gm_json_begin_object(&w);
    gm_json_kv_str(&w, "device", dev);
    gm_json_kv_str(&w, "network", "dense: layers x Linear(width, width), ReLU between");
    gm_json_kv_u64(&w, "batch", o->batch);
    gm_json_kv_u64(&w, "context", o->context);
    gm_json_kv_u64(&w, "rows", rows);
    gm_json_kv_u64(&w, "width", o->width);
    gm_json_kv_u64(&w, "layers", o->layers);
    gm_json_kv_str(&w, "dtype", dtype_choices[o->dtype]);
    gm_json_kv_u64(&w, "parameters", ((uint64_t)o->width * o->width + o->width) * o->layers);
    gm_json_kv_u64(&w, "parameter_bytes", r->parameter_bytes);
    gm_json_kv_u64(&w, "input_bytes", r->input_bytes);
    gm_json_kv_u64(&w, "activation_bytes", r->activation_bytes);
    gm_json_end_object(&w);
    gm_json_key(&w, "settings");
    gm_json_begin_object(&w);
    gm_json_kv_bool(&w, "train", o->train);
    gm_json_kv_u64(&w, "warmup", o->warmup);
    gm_json_kv_u64(&w, "repeats", o->repeats);
    gm_json_kv_bool(&w, "repeats_in_same_process", true);
    gm_json_kv_str(&w, "alloc_conf", conf_str ? conf_str : "");
    if (o->train) {
        gm_json_kv_str(&w, "optimizer", "SGD with momentum");
        gm_json_kv_double(&w, "lr", (double)o->lr);
        gm_json_kv_double(&w, "momentum", (double)o->momentum);
        gm_json_kv_str(&w, "loss", "mean of y^2 / 2 (target 0)");
    }
    gm_json_kv_str(&w, "kernels",
                   "embedded PTX (.version 7.0, .target sm_70) generated from "
                   "src/measure/kernels.cu by nvcc");
    gm_json_end_object(&w);
    gm_json_key(&w, "device");
    gm_json_begin_object(&w);
    kv_reading(&w, "total_bytes", r->device_total);
    kv_reading(&w, "used_after_context_bytes", r->used_after_context);
    gm_json_end_object(&w);
    gm_json_key(&w, "phases");
    gm_json_begin_array(&w);
    for (int id = 0; id < GM_MEASURE_N_PHASES; id++)
        if (o->train || (id != GM_MEASURE_BACKWARD && id != GM_MEASURE_OPTIMIZER_STEP))
            json_phase(&w, (enum gm_measure_phase_id)id, &r->phases[id]);
    gm_json_end_array(&w);
    gm_json_key(&w, "estimate");
    gm_json_begin_object(&w);
    gm_json_kv_str(&w, "method",
                   "the allocator model alone over the same allocation sequence (no GPU)");
    gm_json_kv_u64(&w, "peak_allocated_bytes", r->estimate_peak_allocated);
    gm_json_kv_u64(&w, "peak_reserved_bytes", r->estimate_peak_reserved);
    gm_json_end_object(&w);
    gm_json_key(&w, "measured");
    gm_json_begin_object(&w);
    gm_json_kv_u64(&w, "peak_allocated_bytes", r->peak_allocated);
    gm_json_kv_u64(&w, "peak_reserved_bytes", r->peak_reserved);
    gm_json_end_object(&w);
    gm_json_key(&w, "memory_stats");
    gm_alloc_stats_write_json(&w, &r->stats);
    gm_json_kv_bool(&w, "ok", r->all_ok && r->all_checks_ok);
    gm_json_end_object(&w);
    gm_json_finish(&w);
}

static const char *b(char *buf, size_t n, uint64_t v)
{
    return gm_format_bytes(buf, n, v, GM_UNITS_IEC);
}

static void print_text(const struct gm_measure_opts *o, const struct gm_device_info *info,
                       const struct gm_measure_result *r)
{
    char s1[32], s2[32], s3[32], s4[32], s5[32];
    printf("gpumem measure: cuda:%d %s, %s, %u x Linear(%u, %u), input %u x %u rows, %s\n",
           o->device, info && info->name[0] ? info->name : "(unnamed)", dtype_choices[o->dtype],
           o->layers, o->width, o->width, o->batch, o->context,
           o->train ? "training (SGD, momentum)" : "inference");
    printf("parameters %s, input %s, one activation %s\n", b(s1, sizeof s1, r->parameter_bytes),
           b(s2, sizeof s2, r->input_bytes), b(s3, sizeof s3, r->activation_bytes));
    if (r->used_after_context.valid)
        printf("device: %s used after creating the context and loading the kernels\n",
               b(s1, sizeof s1, r->used_after_context.value));
    printf("\n%-15s %12s %12s %12s %12s %12s %10s  %s\n", "phase", "allocated", "peak alloc",
           "reserved", "peak reserv", "device used", "time", "check");
    for (int id = 0; id < GM_MEASURE_N_PHASES; id++) {
        const struct gm_measure_phase *p = &r->phases[id];
        char t[32], chk[48];
        if (!o->train && (id == GM_MEASURE_BACKWARD || id == GM_MEASURE_OPTIMIZER_STEP))
            continue;
        if (!p->ran) {
            printf("%-15s %12s\n", gm_measure_phase_name((enum gm_measure_phase_id)id),
                   "(skipped)");
            continue;
        }
        snprintf(t, sizeof t, "%.3f ms", p->seconds * 1e3);
        if (p->checked)
            snprintf(chk, sizeof chk, "%s (%.1e)", p->check_ok ? "ok" : "WRONG", p->max_rel_error);
        else
            snprintf(chk, sizeof chk, "-");
        printf("%-15s %12s %12s %12s %12s %12s %10s  %s\n",
               gm_measure_phase_name((enum gm_measure_phase_id)id),
               b(s1, sizeof s1, p->allocated_end), b(s2, sizeof s2, p->peak_allocated),
               b(s3, sizeof s3, p->reserved_end), b(s4, sizeof s4, p->peak_reserved),
               p->device_used_end.valid ? b(s5, sizeof s5, p->device_used_end.value) : "?", t, chk);
        if (!p->ok)
            printf("  error: %s\n", p->error);
    }
    if (r->phases[GM_MEASURE_WARM_FORWARD].ran && r->phases[GM_MEASURE_WARM_FORWARD].passes)
        printf("\nwarm forward: %u passes in this process, mean %.3f ms (min %.3f, max %.3f)\n",
               r->phases[GM_MEASURE_WARM_FORWARD].passes,
               r->phases[GM_MEASURE_WARM_FORWARD].pass_seconds_mean * 1e3,
               r->phases[GM_MEASURE_WARM_FORWARD].pass_seconds_min * 1e3,
               r->phases[GM_MEASURE_WARM_FORWARD].pass_seconds_max * 1e3);
    printf("estimate (allocator model alone, no GPU): peak allocated %s, peak reserved %s\n",
           b(s1, sizeof s1, r->estimate_peak_allocated),
           b(s2, sizeof s2, r->estimate_peak_reserved));
    printf("measured: peak allocated %s, peak reserved %s, %llu cuMemAlloc, %llu cuMemFree\n",
           b(s1, sizeof s1, r->peak_allocated), b(s2, sizeof s2, r->peak_reserved),
           (unsigned long long)r->stats.num_device_alloc,
           (unsigned long long)r->stats.num_device_free);
}

int cmd_measure(int argc, char **argv)
{
    struct gm_measure_opts o;
    const char *device = "cuda:0", *conf_str = NULL, *output = NULL;
    int dtype = 0, n_pos = 0, rc = 0;
    uint64_t batch = 2, context = 128, width = 1024, layers = 4, warmup = 3, repeats = 5;
    bool train = false, json = false, force = false;
    struct gm_alloc_conf conf;
    struct gm_error err;
    struct gm_devices *devs = NULL;
    struct gm_cuda *cu = NULL;
    struct gm_host_info host;
    struct gm_measure_result res;
    struct gm_output out;
    size_t pos = 0;
    const struct opt opts[] = {
        OPT_STRING("device", 0, &device, "cuda:N", "the GPU to measure (default cuda:0)"),
        OPT_U64("batch", 0, &batch, "N", "samples per pass (default 2)", NULL),
        OPT_U64("context", 0, &context, "N", "rows per sample (default 128)", NULL),
        OPT_U64("width", 0, &width, "N", "features of every layer (default 1024)", NULL),
        OPT_U64("layers", 0, &layers, "N", "Linear layers (default 4)", NULL),
        OPT_CHOICE("dtype", 0, &dtype, dtype_choices,
                   "tensor type: float32 (default) or bfloat16 (float32 arithmetic)", NULL),
        OPT_U64("warmup", 0, &warmup, "N", "passes in the warmup phase (default 3)", NULL),
        OPT_U64("repeats", 0, &repeats, "N", "timed passes in warm_forward (default 5)", NULL),
        OPT_FLAG("train", 0, &train, "also measure backward and an SGD (momentum) step"),
        OPT_STRING("alloc-conf", 0, &conf_str, "STRING",
                   "PYTORCH_CUDA_ALLOC_CONF settings for the allocator model"),
        OPT_STRING("output", 'o', &output, "FILE",
                   "write the JSON result to FILE (never "
                   "replaced unless --force)"),
        OPT_FLAG("force", 0, &force, "replace an existing --output file"),
        OPT_JSON(&json, "gpumem.measure/1"),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem measure [--device cuda:N] [--batch N] [--context N] [--width N] [--layers N]\n"
        "               [--dtype float32|bfloat16] [--warmup N] [--repeats N] [--train]\n"
        "               [--output FILE] [--json]",
        "Run a small dense network on the GPU, phase by phase (model_load, inputs, "
        "cold_forward, warmup, warm_forward; with --train also backward and optimizer_step), "
        "and record PyTorch's allocated and reserved memory (current and peak) through "
        "gpumem's caching-allocator model, the driver's device memory, and timings. Results "
        "are checked against a CPU computation. Needs an NVIDIA driver (exit 2 without one).",
        "gpumem measure --batch 2 --context 128 --width 1024 --warmup 3 --repeats 5 "
        "--output results.json\n"
        "gpumem measure --train --layers 8 --width 2048 --json"};

    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    if (n_pos)
        return cli_usage(argv[0], "unexpected argument '%s'", argv[1]);
    gm_measure_opts_init(&o);
    o.dtype = dtype == 1 ? GM_MEASURE_BF16 : GM_MEASURE_F32;
    if (gm_device_parse_spec(device, &o.device, &err) != GM_OK)
        return cli_usage(argv[0], "--device: %s", err.msg);
    if (batch > UINT32_MAX || context > UINT32_MAX || width > UINT32_MAX || layers > 4096 ||
        warmup > 100000 || repeats > 100000)
        return cli_usage(argv[0], "a dimension is too large");
    o.batch = (uint32_t)batch;
    o.context = (uint32_t)context;
    o.width = (uint32_t)width;
    o.layers = (uint32_t)layers;
    o.warmup = (uint32_t)warmup;
    o.repeats = (uint32_t)repeats;
    o.train = train;
    if (gm_measure_opts_check(&o, &err) != GM_OK)
        return cli_usage(argv[0], "%s", err.msg);
    gm_alloc_conf_init(&conf);
    if (conf_str && gm_alloc_conf_parse(&conf, conf_str, &err) != GM_OK)
        return cli_usage(argv[0], "--alloc-conf: %s (at byte %llu)", err.msg,
                         (unsigned long long)err.offset);
    if (conf.expandable_segments || conf.backend != GM_ALLOC_BACKEND_NATIVE)
        return cli_usage(argv[0], "--alloc-conf: expandable_segments and backend:cudaMallocAsync "
                                  "are not supported by measure yet (they need the driver's "
                                  "virtual memory calls)");
    o.conf = &conf;
    memset(&res, 0, sizeof(res));
    memset(&out, 0, sizeof(out));

    /* the output file is claimed first: a run is not wasted on a file we may not write */
    if (output) {
        rc = cli_output_open(&out, argv[0], output, force);
        if (rc)
            return rc;
    }
    if (gm_measure_estimate(&o, &res, &err) != GM_OK) {
        rc = cli_fail(argv[0], &err);
        goto out_abort;
    }
    if (gm_devices_open(&devs, getenv, &err) != GM_OK) {
        rc = cli_fail(argv[0], &err);
        goto out_abort;
    }
    if (gm_devices_check(devs, &err) != GM_OK ||
        gm_devices_find_cuda(devs, o.device, &pos, &err) != GM_OK ||
        gm_cuda_load(&cu, getenv, &err) != GM_OK) {
        rc = cli_fail(argv[0], &err);
        goto out_abort;
    }
    gm_host_probe(&host, getenv);
    if (gm_measure_run(cu, &o, &res, &err) != GM_OK) {
        rc = cli_fail(argv[0], &err);
        goto out_abort;
    }
    if (json)
        write_json(stdout, devs, &host, &o, conf_str, &res);
    else
        print_text(&o, gm_devices_info(devs, pos), &res);
    if (output) {
        write_json(out.f, devs, &host, &o, conf_str, &res);
        rc = cli_output_commit(&out, argv[0]);
        if (rc)
            goto out_close;
        if (!json)
            printf("wrote %s\n", output);
    }
    rc = res.all_ok && res.all_checks_ok ? 0 : GM_EXIT_FAILURE;
    goto out_close;
out_abort:
    if (output)
        cli_output_abort(&out);
out_close:
    gm_cuda_unload(cu);
    gm_devices_close(devs);
    return rc;
}
