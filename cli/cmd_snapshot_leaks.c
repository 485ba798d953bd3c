/* SPDX-License-Identifier: MIT */
/* cmd_snapshot_leaks.c - gpumem snapshot leaks FILE: the training iterations of each
 * device (peak and bytes still alive at the end of each) and the allocation sites whose
 * memory grows from iteration to iteration, with the likely cause and the fix. */
#include "analysis_common.h"
#include "cli.h"
#include "commands.h"
#include "opts.h"

#include <inttypes.h>
#include <stdbool.h>

static void json_device(struct gm_json *w, const struct gm_snapshot *snap,
                        const struct gm_analysis_device *dev, uint64_t top)
{
    gm_json_begin_object(w);
    gm_json_kv_i64(w, "device", dev->device);
    gm_json_kv_u64(w, "iterations", dev->n_iterations);
    gm_json_key(w, "iteration_list");
    gm_json_begin_array(w);
    for (size_t i = 0; i < dev->n_iterations; i++) {
        const struct gm_analysis_iteration *it = &dev->iterations[i];
        gm_json_begin_object(w);
        gm_json_kv_i64(w, "first_event", it->first_event);
        gm_json_kv_i64(w, "last_event", it->last_event);
        gm_json_kv_i64(w, "backward_event", it->backward_event);
        gm_json_kv_i64(w, "step_event", it->step_event);
        gm_json_kv_u64(w, "start_bytes", it->start_bytes);
        gm_json_kv_u64(w, "peak_bytes", it->peak_bytes);
        gm_json_kv_i64(w, "peak_event_index", it->peak_event);
        gm_json_kv_str(w, "peak_phase", gm_phase_name((enum gm_phase)it->peak_phase));
        gm_json_kv_u64(w, "end_bytes", it->end_bytes);
        if (it->has_time) {
            gm_json_kv_i64(w, "start_time_us", it->start_us);
            gm_json_kv_i64(w, "end_time_us", it->end_us);
        }
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_key(w, "leaks");
    gm_json_begin_array(w);
    for (size_t i = 0; i < dev->n_leaks && i < top; i++) {
        const struct gm_analysis_leak *l = &dev->leaks[i];
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "bytes_per_iteration", l->bytes_per_iteration);
        gm_json_kv_u64(w, "total_bytes", l->total_bytes);
        gm_json_kv_u64(w, "count", l->count);
        gm_json_kv_u64(w, "n_iterations", l->n_iterations);
        gm_json_kv_str(w, "kind", gm_leak_kind_name((enum gm_leak_kind)l->kind));
        gm_json_kv_str(w, "category", gm_category_name((enum gm_category)l->category));
        gm_json_kv_str(w, "advice", gm_leak_kind_advice((enum gm_leak_kind)l->kind));
        gm_json_key(w, "frames");
        ana_cli_json_frames(w, snap, l->stack);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_end_object(w);
}

static void print_device(const struct gm_snapshot *snap, const struct gm_analysis_device *dev,
                         uint64_t top)
{
    char b1[64], b2[64];
    printf("device %d: %zu iteration%s", (int)dev->device, dev->n_iterations,
           dev->n_iterations == 1 ? "" : "s");
    if (!dev->n_events) {
        printf(" (no trace: iterations and leaks need the allocation history)\n\n");
        return;
    }
    printf("\n");
    if (dev->n_iterations) {
        char b3[64];
        printf("  %5s %12s %14s %14s %-15s %14s\n", "iter", "first event", "start", "peak",
               "peak phase", "end");
        for (size_t i = 0; i < dev->n_iterations; i++) {
            const struct gm_analysis_iteration *it = &dev->iterations[i];
            printf("  %5zu %12" PRId64 " %14s %14s %-15s %14s\n", i + 1, it->first_event,
                   ana_cli_short(b1, sizeof(b1), it->start_bytes),
                   ana_cli_short(b2, sizeof(b2), it->peak_bytes),
                   gm_phase_name((enum gm_phase)it->peak_phase),
                   ana_cli_short(b3, sizeof(b3), it->end_bytes));
        }
        if (dev->n_iterations >= 2) {
            char b4[64];
            const struct gm_analysis_iteration *a = &dev->iterations[0];
            const struct gm_analysis_iteration *b = &dev->iterations[dev->n_iterations - 1];
            printf("  alive at the end of an iteration: %s after the first, %s after the "
                   "last (%s)\n",
                   ana_cli_short(b1, sizeof(b1), a->end_bytes),
                   ana_cli_short(b2, sizeof(b2), b->end_bytes),
                   ana_cli_delta(b4, sizeof(b4), a->end_bytes, b->end_bytes));
        }
    }
    if (dev->n_iterations < 3) {
        printf("  leak finding needs at least 3 iterations in the trace\n\n");
        return;
    }
    if (!dev->n_leaks) {
        printf("  no leak: no allocation site keeps memory from one iteration to the next\n\n");
        return;
    }
    uint64_t per_it = 0, kept = 0;
    for (size_t i = 0; i < dev->n_leaks; i++) {
        per_it += dev->leaks[i].bytes_per_iteration;
        kept += dev->leaks[i].total_bytes;
    }
    printf("  LEAK: %zu allocation site%s keep memory from iteration to iteration: %s per "
           "iteration, %s kept at the end\n",
           dev->n_leaks, dev->n_leaks == 1 ? "" : "s", ana_cli_short(b1, sizeof(b1), per_it),
           ana_cli_short(b2, sizeof(b2), kept));
    for (size_t i = 0; i < dev->n_leaks && i < top; i++) {
        const struct gm_analysis_leak *l = &dev->leaks[i];
        bool same = i > 0 && l->kind == dev->leaks[i - 1].kind;
        printf("  leak %zu: %s per iteration, %s kept at the end (%" PRIu64
               " allocations from %u iterations), %s, %s\n",
               i + 1, ana_cli_short(b1, sizeof(b1), l->bytes_per_iteration),
               ana_cli_short(b2, sizeof(b2), l->total_bytes), l->count, l->n_iterations,
               gm_category_name((enum gm_category)l->category),
               gm_leak_kind_name((enum gm_leak_kind)l->kind));
        printf("    allocated at:\n");
        ana_cli_print_stack(stdout, snap, l->stack, "      ", 8);
        if (!same)
            printf("    why and fix: %s\n", gm_leak_kind_advice((enum gm_leak_kind)l->kind));
    }
    if (dev->n_leaks > top)
        printf("  ... %zu more leaking sites (--top)\n", dev->n_leaks - (size_t)top);
    printf("\n");
}

int cmd_snapshot_leaks(int argc, char **argv)
{
    bool json = false;
    uint64_t top = 10, mem_limit = 0;
    int n_pos = 0;
    const struct opt opts[] = {
        OPT_JSON(&json, "gpumem.snapshot.leaks/1"),
        OPT_U64("top", 'n', &top, "N", "show at most N leaking sites per device (10)", NULL),
        SNAPCLI_OPT_MEMORY(&mem_limit),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem snapshot leaks [--json] [--top N] FILE",
        "Find the training iterations in a PyTorch memory snapshot (forward, backward, "
        "optimizer step) and the allocation sites whose memory grows from one iteration to "
        "the next: bytes per iteration, bytes kept, the allocating stack, the likely cause "
        "(a loss accumulated without .detach()/.item(), evaluation without no_grad, a "
        "growing list) and the fix.",
        "gpumem snapshot leaks snapshot.pickle"};
    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    if (n_pos != 1)
        return cli_usage(argv[0], "expected one snapshot file");
    struct gm_snapshot *snap;
    struct gm_analysis *an;
    struct snapcli_load_opts lo = {mem_limit, false};
    int rc = ana_cli_open(argv[0], argv[1], &lo, &snap, &an);
    if (rc)
        return rc;
    if (json) {
        struct gm_json w;
        cli_json_begin(&w, stdout, "snapshot.leaks");
        gm_json_key(&w, "devices");
        gm_json_begin_array(&w);
        for (size_t d = 0; d < an->n_devices; d++)
            json_device(&w, snap, &an->devices[d], top);
        gm_json_end_array(&w);
        rc = cli_json_end(&w, argv[0]);
    } else {
        for (size_t d = 0; d < an->n_devices; d++)
            print_device(snap, &an->devices[d], top);
    }
    ana_cli_close(snap, an);
    return rc;
}
