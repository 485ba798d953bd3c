/* SPDX-License-Identifier: MIT */
/* cmd_snapshot_replay.c - gpumem snapshot replay FILE [--alloc-conf STRING]: replay a
 * snapshot's alloc/free trace through the caching-allocator model; validate against the
 * recorded segment events, and predict reserved memory under other settings. */
#include "analysis_common.h"
#include "cli.h"
#include "commands.h"
#include "opts.h"
#include "snapshot_cli.h"

#include "gpumem/alloc.h"
#include "gpumem/arena.h"
#include "gpumem/estimate.h"
#include "gpumem/replay.h"
#include "gpumem/snapshot.h"
#include "gpumem/units.h"

#include <stdio.h>
#include <string.h>

static const char *fmt(char *buf, size_t n, uint64_t v)
{
    return gm_format_bytes(buf, n, v, GM_UNITS_IEC);
}

static void print_row(const char *label, const char *rec, const char *own, const char *wi)
{
    if (wi)
        printf("  %-46s %14s %14s %14s\n", label, rec, own, wi);
    else
        printf("  %-46s %14s %14s\n", label, rec, own);
}

static void print_device(const struct gm_replay_device *d, bool what_if)
{
    char r[32], o[32], x[32];
    printf("device %d: %llu trace events\n", d->device, (unsigned long long)d->n_trace_events);
    if (!d->replayable) {
        printf("  not replayable: %s\n", d->reason);
        printf("  recorded: %llu segment events, peak reserved %s (trace and final segments)\n",
               (unsigned long long)d->recorded_segment_events,
               fmt(r, sizeof(r), d->recorded_peak_reserved_bytes));
        return;
    }
    if (d->late_start) {
        printf("  started late: %s\n", d->late_start_note);
        printf("  replayed from the state at the start: %llu segments (%s reserved) and %llu "
               "allocations (%s)\n",
               (unsigned long long)d->initial_segments,
               fmt(r, sizeof(r), d->initial_reserved_bytes),
               (unsigned long long)d->initial_allocations,
               fmt(o, sizeof(o), d->initial_allocated_bytes));
        printf("  unknown: %s\n", d->late_start_unknown);
    }
    if (!d->has_divergence)
        printf("  validation: all %llu recorded segment events reproduced in order\n",
               (unsigned long long)d->recorded_segment_events);
    else
        printf("  validation: %llu of %llu recorded segment events reproduced before the first "
               "divergence\n",
               (unsigned long long)d->segment_events_matched,
               (unsigned long long)d->recorded_segment_events);
    if (d->has_divergence) {
        const struct gm_replay_divergence *v = &d->first_divergence;
        printf("  first divergence at segment event %llu: recorded ", (unsigned long long)v->index);
        if (v->has_recorded)
            printf("%s %s (trace event %lld)", gm_alloc_event_name(v->recorded.kind),
                   fmt(r, sizeof(r), v->recorded.size), (long long)v->recorded.trace_index);
        else
            printf("nothing");
        printf(", model ");
        if (v->has_predicted)
            printf("%s %s (at trace event %lld)\n", gm_alloc_event_name(v->predicted.kind),
                   fmt(o, sizeof(o), v->predicted.size), (long long)v->predicted.trace_index);
        else
            printf("nothing\n");
    }
    printf("  final segments: %llu in the snapshot, %llu in the model, sizes %s\n",
           (unsigned long long)d->final_segments_recorded,
           (unsigned long long)d->final_segments_model,
           d->final_segments_match ? "match" : "differ");
    printf("  allocated blocks at the end: %llu in the snapshot, %llu in the model, sizes %s\n",
           (unsigned long long)d->final_blocks_recorded, (unsigned long long)d->final_blocks_model,
           d->final_blocks_match ? "match" : "differ");
    if (d->n_inferred_empty_cache)
        printf("  empty_cache() inferred at %llu trace positions\n",
               (unsigned long long)d->n_inferred_empty_cache);
    print_row("", "recorded", "model", what_if ? "what-if" : NULL);
    snprintf(r, sizeof(r), "%llu", (unsigned long long)d->recorded_segment_events);
    snprintf(o, sizeof(o), "%llu", (unsigned long long)d->own.segment_events);
    snprintf(x, sizeof(x), "%llu", (unsigned long long)d->what_if.segment_events);
    print_row("segment events", r, o, what_if ? x : NULL);
    fmt(r, sizeof(r), d->recorded_peak_reserved_bytes);
    fmt(o, sizeof(o), d->own.peak_reserved_bytes);
    fmt(x, sizeof(x), d->what_if.peak_reserved_bytes);
    print_row("peak reserved", r, o, what_if ? x : NULL);
    fmt(o, sizeof(o), d->own.peak_allocated_bytes);
    fmt(x, sizeof(x), d->what_if.peak_allocated_bytes);
    print_row("peak allocated", "-", o, what_if ? x : NULL);
    fmt(o, sizeof(o), d->own.unallocated_at_peak_allocated_bytes);
    fmt(x, sizeof(x), d->what_if.unallocated_at_peak_allocated_bytes);
    print_row("reserved but unallocated at the allocated peak", "-", o, what_if ? x : NULL);
    fmt(r, sizeof(r), d->recorded_final_reserved_bytes);
    fmt(o, sizeof(o), d->own.final_reserved_bytes);
    fmt(x, sizeof(x), d->what_if.final_reserved_bytes);
    print_row("final reserved", r, o, what_if ? x : NULL);
    snprintf(r, sizeof(r), "%llu", (unsigned long long)d->recorded_ooms);
    snprintf(o, sizeof(o), "%llu", (unsigned long long)d->own.n_ooms);
    snprintf(x, sizeof(x), "%llu", (unsigned long long)d->what_if.n_ooms);
    print_row("out-of-memory errors", r, o, what_if ? x : NULL);
    if (what_if && d->what_if.n_ooms_at_start)
        printf("  what-if: %llu of the allocations alive at the start of the trace would not "
               "fit\n",
               (unsigned long long)d->what_if.n_ooms_at_start);
    if (what_if && d->what_if.first_oom_event >= 0)
        printf("  what-if: the first allocation that would not fit is trace event %lld (%s "
               "requested)\n",
               (long long)d->what_if.first_oom_event,
               fmt(x, sizeof(x), d->what_if.first_oom_request_bytes));
    if (what_if && d->has_divergence)
        printf("  note: the model did not reproduce the recording exactly, so the what-if "
               "figures are approximate\n");
}

/* --compare: the common settings ranked for each replayable device, and the verdict. */
static void print_comparison(const struct gm_replay_comparison *c, uint64_t device_bytes)
{
    const struct gm_replay_choice *best = &c->choices[0], *rec = &c->choices[c->recorded];
    char a[32], b[32], d[32];
    printf("\ndevice %d: the common settings, each one change from the recorded ones, best "
           "first%s%s:\n",
           (int)c->device, device_bytes ? " on a device of " : "",
           device_bytes ? fmt(a, sizeof(a), device_bytes) : "");
    printf("  %-36s %14s %14s %10s %10s\n", "settings", "peak reserved", "vs recorded",
           "OOM errors", "cudaMalloc");
    for (size_t i = 0; i < c->n_choices; i++) {
        const struct gm_replay_choice *ch = &c->choices[i];
        printf(
            "  %-36s %14s %14s %10llu %10llu\n", ch->change[0] ? ch->change : "(recorded settings)",
            fmt(a, sizeof(a), ch->run.peak_reserved_bytes),
            i == c->recorded ? "-"
                             : ana_cli_delta(b, sizeof(b), rec->run.peak_reserved_bytes,
                                             ch->run.peak_reserved_bytes),
            (unsigned long long)ch->run.n_ooms, (unsigned long long)ch->run.stats.num_device_alloc);
    }
    switch ((enum gm_replay_verdict)c->verdict) {
    case GM_REPLAY_KEEP:
        printf("  verdict: keep the recorded settings: no single change saves 5%% or 64 MiB of "
               "peak reserved memory\n");
        break;
    case GM_REPLAY_CHANGE:
        printf("  verdict: set %s: peak reserved %s instead of %s (%s)\n", best->change,
               fmt(a, sizeof(a), best->run.peak_reserved_bytes),
               fmt(b, sizeof(b), rec->run.peak_reserved_bytes),
               ana_cli_delta(d, sizeof(d), rec->run.peak_reserved_bytes,
                             best->run.peak_reserved_bytes));
        break;
    case GM_REPLAY_AVOIDS_OOM:
        printf("  verdict: set %s: it fits where the recorded settings run out of memory %llu "
               "time%s\n",
               best->change, (unsigned long long)rec->run.n_ooms, rec->run.n_ooms == 1 ? "" : "s");
        break;
    case GM_REPLAY_NOTHING_FITS:
        printf("  verdict: no setting makes it fit (at best %llu out-of-memory error%s): the job "
               "needs less memory, not other allocator settings\n",
               (unsigned long long)best->run.n_ooms, best->run.n_ooms == 1 ? "" : "s");
        break;
    }
}

/* Exit 65 when no device could be replayed, with the reason: what the file lacks. */
static int not_replayable(const char *cmd, const char *path, const struct gm_replay_result *res)
{
    for (size_t i = 0; i < res->n_devices; i++)
        if (res->devices[i].replayable)
            return 0;
    if (!res->n_devices)
        cli_errorf(cmd,
                   "%s: not replayable: no device has trace entries (record with "
                   "torch.cuda.memory._record_memory_history() before allocating)",
                   path);
    for (size_t i = 0; i < res->n_devices; i++)
        cli_errorf(cmd, "%s: device %d not replayable: %s", path, (int)res->devices[i].device,
                   res->devices[i].reason);
    return GM_EXIT_DATAERR;
}

int cmd_snapshot_replay(int argc, char **argv)
{
    const char *conf_str = NULL, *gpu = NULL, *gpu_mem = NULL, *device_mem_alias = NULL;
    bool json = false, have_mem = false, have_frac = false, compare = false;
    uint64_t device_mem = 0, mem_limit = 0;
    double fraction = 0.0;
    int n_pos = 0, rc;
    struct gm_alloc_conf what_if;
    char what_if_str[256];
    struct gm_snapshot *snap = NULL;
    struct gm_replay_result res;
    struct gm_replay_opts ro;
    struct gm_replay_comparison *cmp = NULL;
    size_t n_cmp = 0;
    struct gm_error err;
    const struct opt opts[] = {
        OPT_STRING("alloc-conf", 0, &conf_str, "STRING",
                   "predict with these PYTORCH_CUDA_ALLOC_CONF settings, applied on top of the "
                   "recorded ones (e.g. expandable_segments:True)"),
        OPT_STRING("gpu", 0, &gpu, "NAME",
                   "predict on this GPU's memory (a name of gpumem estimate --list-gpus: H100, "
                   "A100-40GB, RTX 4090)"),
        OPT_STRING("gpu-memory", 0, &gpu_mem, "SIZE",
                   "predict on a GPU of this memory (80GiB, 24GB; a bare number is GiB, as in "
                   "gpumem estimate): a larger need is reported as out of memory; default "
                   "unlimited"),
        OPT_STRING("device-memory", 0, &device_mem_alias, "SIZE", "the same as --gpu-memory"),
        OPT_DOUBLE("memory-fraction", 0, &fraction, "F",
                   "set_per_process_memory_fraction(F) for the prediction; needs --gpu or "
                   "--gpu-memory (garbage_collection_threshold acts only with it)",
                   &have_frac),
        OPT_FLAG("compare", 0, &compare,
                 "rank the common settings for this file (expandable_segments, "
                 "max_split_size_mb, garbage_collection_threshold, roundup_power2_divisions), "
                 "each one change from the recorded ones, with a verdict"),
        OPT_JSON(&json, "gpumem.snapshot.replay/1"),
        SNAPCLI_OPT_MEMORY(&mem_limit),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem snapshot replay FILE [--alloc-conf STRING] [--gpu NAME | --gpu-memory SIZE] "
        "[--compare] [--json]",
        "Replay the alloc/free trace of a memory snapshot through gpumem's model of PyTorch's "
        "CUDA caching allocator. With the recorded settings (the file's allocator_settings; the "
        "environment's PYTORCH_CUDA_ALLOC_CONF is never read) the model must reproduce the "
        "recorded segment events (cudaMalloc/cudaFree, map/unmap): the match is reported, and "
        "the first divergence if any. A trace that starts after memory was already allocated "
        "is replayed from the segments and allocations the file records at its start, and "
        "what is then unknown is said. With --alloc-conf it predicts peak reserved memory and "
        "fragmentation under other settings, for the same allocation sequence; "
        "--gpu or --gpu-memory alone predicts the recorded settings on a GPU of that memory; "
        "--compare ranks the common settings. A file with nothing replayable exits 65 with "
        "the reason.",
        "gpumem snapshot replay snap.pickle\n"
        "gpumem snapshot replay snap.pickle --alloc-conf expandable_segments:True\n"
        "gpumem snapshot replay snap.pickle --gpu-memory 24GiB\n"
        "gpumem snapshot replay snap.pickle --compare --gpu H100\n"
        "gpumem snapshot replay snap.pickle --alloc-conf max_split_size_mb:256 --json"};

    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    if (n_pos == 0)
        return cli_usage(argv[0], "missing the snapshot FILE");
    if (n_pos > 1)
        return cli_usage(argv[0], "expected one snapshot file, got %d arguments", n_pos);
    if (gpu_mem && device_mem_alias)
        return cli_usage(argv[0], "--device-memory is --gpu-memory: give one of them");
    if (device_mem_alias)
        gpu_mem = device_mem_alias;
    if (gpu && gpu_mem)
        return cli_usage(argv[0], "--gpu and --gpu-memory both name the memory: give one");
    if (gpu) {
        const struct gm_gpu *g;
        if (gm_gpu_lookup(gpu, &g, &err) != GM_OK)
            return cli_usage(argv[0], "--gpu: %s", err.msg);
        device_mem = g->memory_bytes;
        have_mem = true;
    } else if (gpu_mem) {
        if (gm_parse_gpu_memory(gpu_mem, &device_mem, &err) != GM_OK)
            return cli_usage(argv[0], "--gpu-memory: %s", err.msg);
        have_mem = true;
    }
    if (have_frac && !have_mem)
        return cli_usage(argv[0], "--memory-fraction needs --gpu or --gpu-memory");
    if (have_frac && !(fraction > 0.0 && fraction <= 1.0))
        return cli_usage(argv[0], "--memory-fraction %g is out of range (0, 1]", fraction);
    if (compare && conf_str)
        return cli_usage(argv[0], "--compare tries the common settings itself: leave out "
                                  "--alloc-conf");

    struct snapcli_load_opts lo = {.memory_limit = mem_limit};
    if ((rc = snapcli_load(argv[0], argv[1], &lo, &snap)) != 0)
        return rc;
    memset(&ro, 0, sizeof(ro));
    if (conf_str) {
        bool assumed;
        gm_replay_snapshot_conf(snap, &what_if, &assumed);
        if (gm_alloc_conf_parse(&what_if, conf_str, &err) != GM_OK) {
            gm_snapshot_free(snap);
            return cli_usage(argv[0], "--alloc-conf: %s (at byte %llu)", err.msg,
                             (unsigned long long)err.offset);
        }
        if (what_if.backend != GM_ALLOC_BACKEND_NATIVE) {
            gm_snapshot_free(snap);
            return cli_usage(argv[0], "--alloc-conf: backend:cudaMallocAsync is not modelled");
        }
        gm_alloc_conf_format(&what_if, what_if_str, sizeof(what_if_str));
        ro.what_if = &what_if;
    }
    ro.device_bytes = device_mem;
    ro.memory_fraction = fraction;
    rc = gm_replay_snapshot(snap, &ro, &res, &err);
    if (rc != GM_OK) {
        gm_snapshot_free(snap);
        return cli_fail(argv[0], &err);
    }
    if (compare && gm_replay_compare(snap, &ro, &cmp, &n_cmp, &err) != GM_OK) {
        gm_replay_release(&res);
        gm_snapshot_free(snap);
        return cli_fail(argv[0], &err);
    }
    if (json) {
        struct gm_replay_doc doc = {.path = argv[1],
                                    .snap = snap,
                                    .result = &res,
                                    .what_if = conf_str ? what_if_str : NULL,
                                    .device_bytes = device_mem,
                                    .comparisons = compare ? cmp : NULL,
                                    .n_comparisons = n_cmp};
        rc = cli_json_status(argv[0], gm_replay_json(stdout, &doc, &err), &err);
    } else if (compare) {
        printf("snapshot: %s (%s, torch %s)\n", argv[1], gm_snapshot_gen_name(snap->gen),
               gm_snapshot_gen_torch(snap->gen));
        printf("recorded settings: %s%s\n",
               res.own_conf_string[0] ? res.own_conf_string : "(defaults)",
               res.own_conf_assumed ? " (assumed: the file predates allocator_settings)" : "");
        if (!device_mem)
            printf("note: without --gpu or --gpu-memory the device is unlimited, so no setting "
                   "runs out of memory and garbage_collection_threshold (which acts only under "
                   "a memory fraction) is not tried\n");
        for (size_t i = 0; i < n_cmp; i++)
            print_comparison(&cmp[i], device_mem);
        rc = 0;
    } else {
        bool any_replayed = false;
        printf("snapshot: %s (%s, torch %s)\n", argv[1], gm_snapshot_gen_name(snap->gen),
               gm_snapshot_gen_torch(snap->gen));
        printf("recorded settings: %s%s\n",
               res.own_conf_string[0] ? res.own_conf_string : "(defaults)",
               res.own_conf_assumed ? " (assumed: the file predates allocator_settings)" : "");
        if (conf_str)
            printf("what-if settings:  %s\n", what_if_str[0] ? what_if_str : "(defaults)");
        else if (device_mem)
            printf("what-if settings:  the recorded ones\n");
        if (device_mem) {
            char dm[32];
            printf("what-if device:    %s\n", fmt(dm, sizeof(dm), device_mem));
        }
        if (conf_str && what_if.garbage_collection_threshold > 0.0 && !have_frac)
            printf("note: garbage_collection_threshold acts only with a memory fraction "
                   "(--memory-fraction)\n");
        if (!res.n_devices)
            printf("nothing to replay: no device has trace entries (record with "
                   "torch.cuda.memory._record_memory_history() before allocating)\n");
        for (size_t i = 0; i < res.n_devices; i++) {
            printf("\n");
            print_device(&res.devices[i], res.devices[i].has_what_if);
        }
        for (size_t i = 0; i < res.n_devices; i++)
            any_replayed = any_replayed || res.devices[i].replayable;
        if (any_replayed)
            printf("\nfigures are for the same allocation sequence; a program that sizes its "
                   "caches from free memory would allocate differently\n");
        rc = 0;
    }
    if (rc == 0)
        rc = not_replayable(argv[0], argv[1], &res);
    gm_free(cmp);
    gm_replay_release(&res);
    gm_snapshot_free(snap);
    return rc;
}
