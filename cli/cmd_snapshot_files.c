/* SPDX-License-Identifier: MIT */
/* cmd_snapshot_files.c - gpumem snapshot files FILE [B] [--file PATH-SUFFIX]: the memory of
 * each source file (or of each function of one file) at the peak and over the trace, and
 * with two snapshots the change per file or function. */
#include "analysis_common.h"
#include "cli.h"
#include "commands.h"
#include "opts.h"

#include "gpumem/arena.h"

#include <inttypes.h>
#include <string.h>

static void row_name(char *buf, size_t n, const char *suffix, const struct gm_analysis_file_row *r,
                     const char *filename, const char *function)
{
    char safe[256];
    if (suffix)
        snprintf(buf, n, "%s", snapcli_safe(safe, sizeof(safe), function ? function : "?"));
    else
        snprintf(buf, n, "%s", snapcli_safe(safe, sizeof(safe), snapcli_short_path(filename)));
    (void)r;
}

static void print_one(const struct gm_analysis_device *dev, const char *suffix,
                      const struct gm_analysis_files *f, uint64_t top)
{
    char b1[64], b2[64], name[256];
    printf("device %d: peak %s; %s\n", (int)dev->device,
           ana_cli_short(b1, sizeof(b1), dev->peak_bytes),
           suffix ? "by function of the files ending in"
                  : "by the file of each allocation's user frame");
    if (suffix)
        printf("  %s\n", suffix);
    if (!f->n) {
        printf("  no allocation passes through %s\n", suffix ? "that file" : "any frame");
        return;
    }
    printf("  %-44s %12s %7s %14s %8s\n",
           f->by_line ? "function:line"
           : suffix   ? "function (first line)"
                      : "file",
           "at peak", "count", "allocated", "count");
    for (size_t i = 0; i < f->n && (!top || i < top); i++) {
        const struct gm_analysis_file_row *r = &f->rows[i];
        char label[300];
        row_name(name, sizeof(name), suffix, r, r->filename, r->function);
        if (suffix)
            snprintf(label, sizeof(label), f->by_line ? "%s:%" PRId64 : "%s (%" PRId64 ")", name,
                     r->first_line);
        else
            snprintf(label, sizeof(label), "%s", name);
        printf("  %-44s %12s %7" PRIu64 " %14s %8" PRIu64 "\n", label,
               ana_cli_short(b1, sizeof(b1), r->bytes_at_peak), r->count_at_peak,
               ana_cli_short(b2, sizeof(b2), r->bytes_allocated), r->count_allocated);
    }
    if (top && f->n > top)
        printf("  ... %zu more (--top 0: all)\n", f->n - (size_t)top);
    printf("  %-44s %12s %7s %14s\n", suffix ? "(not through that file)" : "(no frame)",
           ana_cli_short(b1, sizeof(b1), f->other_at_peak), "",
           ana_cli_short(b2, sizeof(b2), f->other_allocated));
}

static void print_two(const char *suffix, bool lines, const struct gm_analysis_file_change *c,
                      size_t n, uint64_t top)
{
    char b1[64], b2[64], b3[64], name[256];
    printf("  %-44s %12s %12s %12s\n", suffix ? "function" : "file", "A at peak", "B at peak",
           "change");
    for (size_t i = 0; i < n && (!top || i < top); i++) {
        row_name(name, sizeof(name), suffix, NULL, c[i].filename, c[i].function);
        if (suffix && (c[i].a ? c[i].a : c[i].b)->first_line >= 0 && lines)
            snprintf(name + strlen(name), sizeof(name) - strlen(name), ":%" PRId64,
                     (c[i].a ? c[i].a : c[i].b)->first_line);
        uint64_t a = c[i].a ? c[i].a->bytes_at_peak : 0, b = c[i].b ? c[i].b->bytes_at_peak : 0;
        printf("  %-44s %12s %12s %12s%s\n", name, c[i].a ? ana_cli_short(b1, sizeof(b1), a) : "-",
               c[i].b ? ana_cli_short(b2, sizeof(b2), b) : "-", ana_cli_delta(b3, sizeof(b3), a, b),
               !c[i].a   ? "  (only in B)"
               : !c[i].b ? "  (only in A)"
                         : "");
    }
    if (top && n > top)
        printf("  ... %zu more (--top 0: all)\n", n - (size_t)top);
}

int cmd_snapshot_files(int argc, char **argv)
{
    bool json = false, lines = false;
    uint64_t top = 20, mem_limit = 0;
    int device = -1, n_pos = 0, rc;
    const char *suffix = NULL;
    const struct opt opts[] = {
        OPT_STRING("file", 0, &suffix, "PATH-SUFFIX",
                   "by function of the source file(s) whose path ends with PATH-SUFFIX (whole "
                   "components: model.py, gpt/model.py), each allocation attributed to the "
                   "innermost frame in that file"),
        OPT_FLAG("lines", 0, &lines,
                 "with --file: a row per line of the file (methods of one name in two classes "
                 "apart)"),
        OPT_INT("device", 'd', &device, "N", "this CUDA device (default: the first with a trace)",
                NULL),
        OPT_U64("top", 'n', &top, "N", "rows to show (20; 0: all)", NULL),
        OPT_JSON(&json, "gpumem.snapshot.files/1"),
        SNAPCLI_OPT_MEMORY(&mem_limit),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem snapshot files [--file PATH-SUFFIX [--lines]] [--device N] [--top N] [--json] FILE "
        "[B]",
        "The memory of a PyTorch memory snapshot by source file: each allocation attributed to "
        "the file of its user frame, with the bytes alive at the device's peak and those "
        "allocated over the trace; with --file, by function of that one file instead (each "
        "allocation attributed to the innermost frame in it; a snapshot records a function's "
        "name, not its class). With two snapshots A and B, the same rows matched by file (or "
        "function) and compared at their peaks, the largest change first.",
        "gpumem snapshot files snapshot.pickle\n"
        "gpumem snapshot files --file gpt/model.py snapshot.pickle\n"
        "gpumem snapshot files --file model.py before.pickle after.pickle"};
    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    if (n_pos < 1 || n_pos > 2)
        return cli_usage(argv[0], n_pos ? "give one snapshot FILE, or two to compare"
                                        : "missing snapshot FILE");
    if (suffix && !*suffix)
        return cli_usage(argv[0], "--file: give the end of a path");
    if (lines && !suffix)
        return cli_usage(argv[0], "--lines goes with --file");
    struct gm_snapshot *snaps[2] = {NULL, NULL};
    struct gm_analysis *ans[2] = {NULL, NULL};
    struct gm_analysis_files fs[2];
    struct snapcli_load_opts lo = {.memory_limit = mem_limit};
    struct gm_error err;
    memset(fs, 0, sizeof(fs));
    if ((rc = ana_cli_open_many(argv[0], argv + 1, (size_t)n_pos, &lo, snaps, ans)) != 0)
        return rc;
    const struct gm_analysis_device *devs[2] = {NULL, NULL};
    for (int i = 0; i < n_pos && rc == 0; i++) {
        devs[i] = ana_cli_device(ans[i], device);
        if (!devs[i] && device < 0 && ans[i]->n_devices)
            devs[i] = &ans[i]->devices[0]; /* no trace: what the snapshot holds */
        if (!devs[i] && device >= 0)
            rc = cli_usage(argv[0], "%s has no device %d", snapcli_name(argv[i + 1]), device);
        else if (!devs[i])
            rc = cli_usage(argv[0], "%s has no trace events", snapcli_name(argv[i + 1]));
        else if (gm_analysis_files(ans[i], devs[i], suffix, lines, &fs[i], &err) != GM_OK)
            rc = cli_fail(argv[0], &err);
    }
    struct gm_analysis_file_change *ch = NULL;
    size_t n_ch = 0;
    if (rc == 0 && n_pos == 2 && gm_analysis_files_compare(&fs[0], &fs[1], &ch, &n_ch, &err))
        rc = cli_fail(argv[0], &err);
    if (rc == 0 && json) {
        const char *paths[2] = {argv[1], n_pos == 2 ? argv[2] : NULL};
        rc = cli_json_status(argv[0],
                             gm_analysis_files_json(stdout, paths, devs[0]->device, suffix, &fs[0],
                                                    n_pos == 2 ? &fs[1] : NULL, ch, n_ch, &err),
                             &err);
    } else if (rc == 0 && n_pos == 1) {
        print_one(devs[0], suffix, &fs[0], top);
    } else if (rc == 0) {
        char b1[64], b2[64];
        printf("A: %s, device %d, peak %s\nB: %s, device %d, peak %s\n", snapcli_name(argv[1]),
               (int)devs[0]->device, ana_cli_short(b1, sizeof(b1), devs[0]->peak_bytes),
               snapcli_name(argv[2]), (int)devs[1]->device,
               ana_cli_short(b2, sizeof(b2), devs[1]->peak_bytes));
        if (suffix)
            printf("by function of the files ending in %s\n", suffix);
        print_two(suffix, lines, ch, n_ch, top);
    }
    gm_free(ch);
    for (int i = 0; i < 2; i++)
        gm_analysis_files_release(&fs[i]);
    ana_cli_close_many(snaps, ans, (size_t)n_pos);
    return rc;
}
