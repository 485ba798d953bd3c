/* SPDX-License-Identifier: MIT */
/* cmd_snapshot_peak.c - gpumem snapshot peak FILE: the peak of the Active Memory Timeline
 * per device and the allocations alive at it, grouped by stack. */
#include "cli.h"
#include "commands.h"
#include "opts.h"
#include "snapshot_cli.h"
#include "snapshot_folded.h"
#include "snapshot_ranks.h"

#include "gpumem/arena.h"
#include "gpumem/units.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static void text_device(const struct gm_snapshot *snap, const struct gm_snapshot_device *d,
                        const struct gm_peak_device *p, uint64_t top)
{
    const struct gm_snapshot_timeline *tl = &p->timeline;
    char a[48], b[48], t[64];
    printf("device %d: peak %s (%" PRIu64 " bytes)", d->index,
           gm_format_fixed(a, sizeof(a), tl->peak_bytes, GM_GIB, "GiB"), tl->peak_bytes);
    if (!d->n_events)
        printf(" in the snapshot, which has %s: the moment it was written",
               d->has_trace ? "an empty trace" : "no trace");
    else if (tl->peak_event_index < 0)
        printf(" at the start of the trace (%zu events)", d->n_events);
    else
        printf(" after event %" PRId64 " of %zu%s%s", tl->peak_event_index, d->n_events,
               tl->peak_time_valid ? ", at " : "",
               tl->peak_time_valid ? snapcli_time(t, sizeof(t), tl->peak_time_us) : "");
    if (p->user_phase)
        printf(", in your phase '%s'", p->user_phase);
    printf("\n");
    if (!d->n_events) {
        printf("  reserved %s\n",
               gm_format_bytes(a, sizeof(a), tl->reserved_at_peak_bytes, GM_UNITS_IEC));
    } else {
        printf("  reserved at the peak %s; most reserved %s\n",
               gm_format_bytes(a, sizeof(a), tl->reserved_at_peak_bytes, GM_UNITS_IEC),
               gm_format_bytes(b, sizeof(b), tl->peak_reserved_bytes, GM_UNITS_IEC));
        printf("  allocated at the start %s, at the end %s\n",
               gm_format_bytes(a, sizeof(a), tl->initial_bytes, GM_UNITS_IEC),
               gm_format_bytes(b, sizeof(b), tl->final_bytes, GM_UNITS_IEC));
    }
    if (!p->n_live) {
        printf("  nothing allocated at the peak\n");
        return;
    }
    printf("  %" PRIu64 " allocations alive at the peak, in %zu stacks%s:\n", p->n_live,
           p->n_groups,
           top && p->n_groups > top ? " (largest first; --top to see more)" : " (largest first)");
    printf("  %16s %12s %6s %6s  where\n", "bytes", "GiB", "share", "count");
    for (size_t g = 0; g < p->n_groups && (top == 0 || g < top); g++) {
        const struct gm_snapshot_live_group *gr = &p->groups[g];
        printf("  %16" PRIu64 " %12s %5.1f%% %6" PRIu64 "  ", gr->bytes,
               gm_format_fixed(a, sizeof(a), gr->bytes, GM_GIB, "GiB"),
               tl->peak_bytes ? 100.0 * (double)gr->bytes / (double)tl->peak_bytes : 0.0,
               gr->count);
        snapcli_print_stack(stdout, snap, gr->stack, GM_PEAK_CALLERS,
                            g < p->n_apart ? p->apart[g] : -1, 51);
        if (p->group_user_stack && p->group_user_stack[g]) {
            /* a stack with a user frame (gm_snapshot_event_user_stack()) */
            const struct gm_snapshot_stack *fs = &snap->stacks[p->group_user_stack[g]];
            long u = gm_snapshot_stack_user_frame(snap, p->group_user_stack[g]);
            char line[512];
            if (u >= 0)
                printf("%50s from your code at %s\n", "",
                       gm_snapshot_frame_text(line, sizeof(line), &snap->frames[fs->frames[u]]));
        }
        if (p->group_metadata && p->group_metadata[g]) {
            char m[256];
            printf("%50s metadata %s\n", "", snapcli_safe(m, sizeof(m), p->group_metadata[g]));
        }
    }
}

/* One file's peaks, computed in the thread that loaded it. */
struct file_peaks {
    struct gm_analysis_peaks peaks;
    bool has_device;        /* the device asked for is in the file */
    struct gm_analysis *an; /* several files: the analysis of the rank */
};

struct peak_work {
    char *const *paths;
    struct file_peaks *files;
    int32_t want;
    uint64_t top;
    bool ranks;    /* several files: each a rank */
    bool analysis; /* --folded --at: what is alive at an event needs the analysis */
    const struct gm_category_rules *rules; /* --categories: the groups' categories by them */
};

/* With several files (the ranks) or --folded --at the analysis runs first, and the peaks
 * read it: the trace is replayed once. */
static enum gm_status file_peaks(void *ctx, size_t f, struct gm_snapshot *snap,
                                 struct gm_error *err)
{
    struct peak_work *pw = ctx;
    struct file_peaks *fp = &pw->files[f];
    struct gm_analysis_peaks_opts po = {pw->want, pw->top ? (size_t)pw->top : SIZE_MAX};
    fp->has_device = pw->want < 0 || gm_snapshot_device_by_index(snap, pw->want);
    if (!fp->has_device)
        return GM_OK;
    struct gm_analysis_opts ao = {.rules = pw->rules};
    if ((pw->ranks || pw->analysis || pw->rules) &&
        gm_analysis_run(snap, &ao, &fp->an, err) != GM_OK)
        return gm_error_prefix(err, "%s", pw->paths[f]);
    return gm_analysis_peaks(snap, fp->an, &po, &fp->peaks, err);
}

static void file_peaks_release(struct file_peaks *fp)
{
    gm_analysis_peaks_release(&fp->peaks);
    gm_analysis_free(fp->an);
}

static void text_file(const char *path, const struct gm_snapshot *snap, const struct file_peaks *fp,
                      uint64_t top)
{
    snapcli_print_oom_banner(stdout, snap, path);
    for (size_t i = 0; i < fp->peaks.n_devices; i++) {
        const struct gm_peak_device *p = &fp->peaks.devices[i];
        if (i)
            printf("\n");
        text_device(snap, gm_snapshot_device_by_index(snap, p->device), p, top);
    }
    if (!snap->n_devices)
        printf("the file names no device\n");
}

/* --folded: what is alive at the peak of each device (or after event 'at'), as folded
 * stacks; 0 or an exit code. */
static int write_folded(const char *cmd, const struct gm_snapshot *snap,
                        const struct file_peaks *fp, bool at_seen, int at)
{
    for (size_t i = 0; i < fp->peaks.n_devices; i++) {
        const struct gm_peak_device *p = &fp->peaks.devices[i];
        struct gm_snapshot_live_group *g = NULL;
        size_t n = 0;
        struct gm_error err;
        if (!at_seen) {
            folded_write(stdout, snap, p->device, p->groups, p->n_groups);
            continue;
        }
        if (gm_analysis_group_live_at(fp->an, gm_analysis_device_by_index(fp->an, p->device), at,
                                      &g, &n, &err) != GM_OK)
            return cli_fail(cmd, &err);
        folded_write(stdout, snap, p->device, g, n);
        gm_free(g);
    }
    return 0;
}

int cmd_snapshot_peak(int argc, char **argv)
{
    bool json = false, folded = false, at_seen = false;
    int at = -1;
    uint64_t top = 10, mem_limit = 0;
    const char *device = NULL;
    int32_t want = -1;
    int n_pos = 0, rc;
    struct gm_snapshot **snaps;
    struct file_peaks *files;
    struct gm_digest **digests;
    struct rank_list ranks = {0};
    bool top_seen = false;
    const char *rules_path = NULL;
    struct gm_category_rules *rules = NULL;
    const struct opt opts[] = {
        OPT_U64("top", 'n', &top, "N", "stacks to show per device (0: all; default 10)", &top_seen),
        OPT_STRING("device", 'd', &device, "N", "only this device (default: all)"),
        OPT_JSON(&json, "gpumem.snapshot.peak/1"),
        OPT_FLAG("folded", 0, &folded,
                 "write what is alive at the peak as folded stacks (device;frame;...;frame "
                 "bytes), the input of flamegraph.pl and speedscope"),
        OPT_INT("at", 0, &at, "K",
                "with --folded: what is alive after event K instead (-1: before the first)",
                &at_seen),
        SNAPCLI_OPT_CATEGORIES(&rules_path),
        SNAPCLI_OPT_MEMORY(&mem_limit),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem snapshot peak [--top N] [--device N] [--json] FILE...\n"
        "       gpumem snapshot peak --folded [--at K] [--device N] FILE...",
        "The peak of memory_viz's Active Memory Timeline per device: live allocations at the "
        "sizes the trace records (requested bytes), counting blocks allocated at snapshot time "
        "and frees without an alloc in the trace from the start. Then the allocations alive at "
        "the peak, grouped by stack, largest first, user frames first and torch internals "
        "folded. --json lists every group unless --top is given. Several files are read at the "
        "same time as the ranks of one job, each by its device whatever its index, and "
        "compared: the spread of their peaks and the imbalance (the largest peak over the "
        "smallest, and the category that makes the difference); --json then writes "
        "{\"files\": [{\"file\", \"devices\"}...], \"ranks\", \"spread\", \"imbalance\"}.",
        "gpumem snapshot peak profile.pkl\ngpumem snapshot peak --json --top 5 profile.pkl\n"
        "gpumem snapshot peak rank*.pickle\n"
        "gpumem snapshot peak --folded profile.pkl > peak.folded   # flamegraph.pl peak.folded > "
        "peak.svg"};

    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    if (n_pos < 1)
        return cli_usage(argv[0], "missing FILE");
    if ((rc = snapcli_device_arg(argv[0], device, &want)) != 0)
        return rc;
    if (json && folded)
        return cli_usage(argv[0], "--folded and --json are two outputs: choose one");
    if (at_seen && !folded)
        return cli_usage(argv[0], "--at goes with --folded");
    if (json && !top_seen)
        top = 0;
    if ((rc = snapcli_rules_load(argv[0], rules_path, &rules)) != 0)
        return rc;
    struct snapcli_rank_args ra = {0};
    {
        int arc = snapcli_rank_argv(&argv, &n_pos, &ra);
        if (arc) {
            gm_category_rules_free(rules);
            return arc;
        }
    }
    snaps = gm_calloc((size_t)n_pos, sizeof(*snaps));
    files = gm_calloc((size_t)n_pos, sizeof(*files));
    digests = gm_calloc((size_t)n_pos, sizeof(*digests));
    if (!snaps || !files || !digests) {
        gm_free(snaps);
        gm_free(files);
        gm_free(digests);
        snapcli_rank_argv_release(&ra);
        gm_category_rules_free(rules);
        return GM_EXIT_SOFTWARE;
    }
    {
        struct peak_work pw = {argv + 1, files, want, top, n_pos > 1 && !folded, at_seen, rules};
        /* --folded draws stacks: digests only for the peaks and the ranks */
        struct snapcli_load_opts lo = {.memory_limit = mem_limit,
                                       .digests = folded ? NULL : digests,
                                       .timeline_only = !(pw.ranks || pw.analysis || pw.rules)};
        rc = snapcli_load_many(argv[0], argv + 1, (size_t)n_pos, &lo, file_peaks, &pw, snaps);
    }
    gm_category_rules_free(rules); /* the analyses are made */
    for (int f = 0; f < n_pos && rc == 0; f++) {
        if (digests[f] && want >= 0 && digests[f]->figures.device != want) {
            cli_errorf(argv[0], "'%s' is the digest of a rank on device %d, not %d", argv[f + 1],
                       (int)digests[f]->figures.device, want);
            rc = GM_EXIT_USAGE;
        } else if (!digests[f] && !files[f].has_device) {
            cli_errorf(argv[0], "'%s' has no device %d", argv[f + 1], want);
            rc = GM_EXIT_USAGE;
        }
    }
    for (int f = 0; f < n_pos && rc == 0 && n_pos > 1 && !folded; f++)
        rc = digests[f]
                 ? ranks_add_digest(&ranks, argv[0], digests[f], (size_t)f, argv[f + 1],
                                    (size_t)n_pos)
                 : ranks_add(&ranks, argv[0], files[f].an, (size_t)f, argv[f + 1], (size_t)n_pos);
    if (rc == 0 && folded) {
        for (int f = 0; f < n_pos && rc == 0; f++)
            rc = write_folded(argv[0], snaps[f], &files[f], at_seen, at);
    } else if (rc == 0 && json) {
        struct gm_analysis_doc_file *df = gm_calloc((size_t)n_pos, sizeof(*df));
        struct gm_analysis_doc doc = {.kind = GM_DOC_PEAK,
                                      .files = df,
                                      .n_files = (size_t)n_pos,
                                      .ranks = ranks.v,
                                      .n_ranks = ranks.n,
                                      .top = top,
                                      .digests = (const struct gm_digest *const *)digests};
        struct gm_error err;
        for (int f = 0; df && f < n_pos; f++)
            df[f] = (struct gm_analysis_doc_file){
                .path = argv[f + 1], .snap = snaps[f], .peaks = &files[f].peaks};
        rc = df ? cli_json_status(argv[0], gm_analysis_json(stdout, &doc, &err), &err)
                : GM_EXIT_SOFTWARE;
        gm_free(df);
    } else if (rc == 0) {
        for (int f = 0; f < n_pos; f++) {
            if (n_pos > 1)
                printf("%s==> %s <==\n", f ? "\n" : "", argv[f + 1]);
            if (digests[f])
                ranks_print_digest(stdout, argv[f + 1], digests[f]);
            else
                text_file(argv[f + 1], snaps[f], &files[f], top);
        }
        if (n_pos > 1)
            ranks_print(stdout, &ranks, argv + 1);
        printf("\nnote: trace sizes are requested bytes, below what "
               "torch.cuda.max_memory_allocated() counts after rounding to 512 B blocks\n");
    }
    for (int f = 0; f < n_pos; f++) {
        file_peaks_release(&files[f]);
        gm_snapshot_free(snaps[f]);
        gm_digest_free(digests[f]);
    }
    ranks_release(&ranks);
    gm_free(files);
    gm_free(digests);
    gm_free(snaps);
    snapcli_rank_argv_release(&ra);
    return rc;
}
