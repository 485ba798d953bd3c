/* SPDX-License-Identifier: MIT */
/* cmd_snapshot_regions.c - gpumem snapshot regions FILE: the memory at the start and the end
 * of every record_function range of a snapshot (or, with --compile, of every run of one
 * torch.compile context) and the most inside it. */
#include "analysis_common.h"
#include "cli.h"
#include "commands.h"
#include "opts.h"

#include "gpumem/arena.h"

#include <inttypes.h>
#include <string.h>

struct regions_job {
    const char *cmd;
    bool json, compile;
    int32_t device;
    uint64_t top, mem_limit;
};

static void print_device(const struct gm_analysis_device *dev, const struct gm_analysis_regions *r,
                         const struct regions_job *j)
{
    char b1[64], b2[64], b3[64], b4[64], name[41], ev[48];
    const char *what = j->compile ? "torch.compile context runs" : "record_function ranges";
    printf("device %d: ", (int)dev->device);
    if (!r->n) {
        printf("no %s%s\n", what,
               j->compile ? " (no trace entry names a compile_context other than N/A)" : "");
        return;
    }
    printf("%zu %s; the device's peak %s\n", r->n, what,
           ana_cli_short(b1, sizeof(b1), dev->peak_bytes));
    printf("  %-40s %15s %12s %12s %12s %10s\n", j->compile ? "compile context" : "range", "events",
           "at start", "peak inside", "at end", "change");
    for (size_t i = 0; i < r->n && (!j->top || i < j->top); i++) {
        const struct gm_analysis_region *g = &r->v[i];
        snapcli_safe(name, sizeof(name), g->name ? g->name : "");
        if (g->first_event <= g->last_event)
            snprintf(ev, sizeof(ev), "%" PRId64 "-%" PRId64, g->first_event, g->last_event);
        else
            snprintf(ev, sizeof(ev), "none");
        printf("  %-40s %15s %12s %12s %12s %10s%s\n", name, ev,
               ana_cli_short(b1, sizeof(b1), g->start_bytes),
               ana_cli_short(b2, sizeof(b2), g->peak_bytes),
               ana_cli_short(b3, sizeof(b3), g->end_bytes),
               ana_cli_delta(b4, sizeof(b4), g->start_bytes, g->end_bytes),
               g->peak_bytes == dev->peak_bytes && g->first_event <= g->last_event ? "  <- the peak"
                                                                                   : "");
    }
    if (j->top && r->n > j->top)
        printf("  ... %zu more (--top 0: all)\n", r->n - (size_t)j->top);
}

static int regions_one(void *ctx, char *path)
{
    const struct regions_job *j = ctx;
    enum gm_region_kind kind = j->compile ? GM_REGION_COMPILE : GM_REGION_ANNOTATION;
    struct snapcli_load_opts lo = {.memory_limit = j->mem_limit};
    struct gm_snapshot *snap;
    struct gm_analysis *an;
    struct gm_error err;
    int rc = ana_cli_open(j->cmd, path, &lo, &snap, &an);
    if (rc)
        return rc;
    const struct gm_analysis_device **devs = gm_calloc(an->n_devices + 1, sizeof(*devs));
    struct gm_analysis_regions *regs = gm_calloc(an->n_devices + 1, sizeof(*regs));
    size_t n = 0;
    if (!devs || !regs)
        rc = GM_EXIT_SOFTWARE;
    for (size_t d = 0; rc == 0 && d < an->n_devices; d++) {
        if (j->device >= 0 && an->devices[d].device != j->device)
            continue;
        devs[n] = &an->devices[d];
        if (gm_analysis_regions(an, devs[n], kind, &regs[n], &err) != GM_OK)
            rc = cli_fail(j->cmd, &err);
        n++;
    }
    if (rc == 0 && j->device >= 0 && !n)
        rc = cli_usage(j->cmd, "%s has no device %d", snapcli_name(path), (int)j->device);
    if (rc == 0 && j->json)
        rc = cli_json_status(
            j->cmd, gm_analysis_regions_json(stdout, path, kind, devs, regs, n, &err), &err);
    else if (rc == 0)
        for (size_t d = 0; d < n; d++)
            print_device(devs[d], &regs[d], j);
    for (size_t d = 0; regs && d < n; d++)
        gm_analysis_regions_release(&regs[d]);
    gm_free(regs);
    gm_free(devs);
    ana_cli_close(snap, an);
    return rc;
}

int cmd_snapshot_regions(int argc, char **argv)
{
    bool json = false, compile = false;
    uint64_t top = 30, mem_limit = 0;
    int device = -1, n_pos = 0;
    const struct opt opts[] = {
        OPT_JSON(&json, "gpumem.snapshot.regions/1"),
        OPT_FLAG("compile", 0, &compile,
                 "the runs of trace entries that share a torch.compile context "
                 "(compile_context) instead of the record_function ranges"),
        OPT_INT("device", 'd', &device, "N", "only this CUDA device", NULL),
        OPT_U64("top", 'n', &top, "N", "show at most N regions per device (30; 0: all)", NULL),
        SNAPCLI_OPT_MEMORY(&mem_limit),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem snapshot regions [--compile] [--json] [--device N] [--top N] FILE...",
        "The memory of every record_function range of a PyTorch memory snapshot (any name: "
        "your own `with record_function(\"attention\"):`, Optimizer.step#AdamW.step, "
        "enumerate(DataLoader)#..., ProfilerStep#N, gpumem phases), paired START to END by "
        "time: the allocated bytes at its start, the most inside it (the device's peak is "
        "marked), at its end and the change, in the order they started. With --compile, the "
        "runs of trace entries made under one torch.compile context (compile_context, "
        "PyTorch 2.8+) instead. --json lists every region. Several files, or a folder of "
        "rank files, are read one after the other in rank order.",
        "gpumem snapshot regions snapshot.pickle\n"
        "gpumem snapshot regions --compile --json snapshot.pickle"};
    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    if (n_pos < 1)
        return cli_usage(argv[0], "missing snapshot FILE");
    struct regions_job j = {argv[0], json, compile, device, top, mem_limit};
    return snapcli_each_rank_file(argv[0], argv + 1, (size_t)n_pos, json, regions_one, &j);
}
