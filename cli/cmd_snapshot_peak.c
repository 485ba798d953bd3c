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

struct dev_peak {
    struct gm_snapshot_timeline tl;
    struct gm_snapshot_live_group *groups;
    size_t n_groups;
    long *apart; /* per group: the frame that tells it apart (gm_snapshot_stacks_apart()) */
    const char *user_phase; /* the user phase (gpumem.phase mark) around the peak, or NULL */
};

/* Stack frames the text shows of the callers of a group's user frame. */
#define PEAK_CALLERS 2

static void json_device(struct gm_json *w, const struct gm_snapshot *snap,
                        const struct gm_snapshot_device *d, const struct dev_peak *p, uint64_t top)
{
    const struct gm_snapshot_timeline *tl = &p->tl;
    struct gm_snapshot_oom oom;
    gm_json_begin_object(w);
    gm_json_kv_i64(w, "device", d->index);
    gm_json_kv_u64(w, "peak_bytes", tl->peak_bytes);
    gm_json_kv_i64(w, "peak_event_index", tl->peak_event_index);
    if (tl->peak_time_valid)
        gm_json_kv_i64(w, "peak_time_us", tl->peak_time_us);
    else
        gm_json_kv_null(w, "peak_time_us");
    gm_json_kv_u64(w, "peak_reserved_bytes", tl->peak_reserved_bytes);
    gm_json_kv_u64(w, "reserved_at_peak_bytes", tl->reserved_at_peak_bytes);
    gm_json_kv_u64(w, "initial_bytes", tl->initial_bytes);
    gm_json_kv_u64(w, "final_bytes", tl->final_bytes);
    gm_json_kv_u64(w, "trace_events", d->n_events);
    if (p->user_phase)
        gm_json_kv_str(w, "peak_user_phase", p->user_phase);
    else
        gm_json_kv_null(w, "peak_user_phase");
    gm_json_key(w, "first_oom");
    if (gm_snapshot_first_oom(snap, d, &oom)) {
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "event_index", oom.event);
        gm_json_kv_u64(w, "requested_bytes", oom.requested);
        gm_json_kv_u64(w, "device_free_bytes", oom.device_free);
        gm_json_end_object(w);
    } else {
        gm_json_null(w);
    }
    gm_json_kv_u64(w, "live_allocations", tl->n_live);
    gm_json_kv_u64(w, "live_groups", p->n_groups);
    gm_json_key(w, "live_at_peak");
    gm_json_begin_array(w);
    for (size_t g = 0; g < p->n_groups && (top == 0 || g < top); g++) {
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "bytes", p->groups[g].bytes);
        gm_json_kv_u64(w, "count", p->groups[g].count);
        gm_json_kv_u64(w, "stack", p->groups[g].stack);
        gm_json_key(w, "user_frame");
        snapcli_json_user_frame(w, snap, p->groups[g].stack);
        gm_json_key(w, "frames");
        snapcli_json_stack(w, snap, p->groups[g].stack, 0);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_end_object(w);
}

static void text_device(const struct gm_snapshot *snap, const struct gm_snapshot_device *d,
                        const struct dev_peak *p, uint64_t top)
{
    const struct gm_snapshot_timeline *tl = &p->tl;
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
    if (!tl->n_live) {
        printf("  nothing allocated at the peak\n");
        return;
    }
    printf("  %zu allocations alive at the peak, in %zu stacks%s:\n", tl->n_live, p->n_groups,
           top && p->n_groups > top ? " (largest first; --top to see more)" : " (largest first)");
    printf("  %16s %12s %6s %6s  where\n", "bytes", "GiB", "share", "count");
    for (size_t g = 0; g < p->n_groups && (top == 0 || g < top); g++) {
        const struct gm_snapshot_live_group *gr = &p->groups[g];
        printf("  %16" PRIu64 " %12s %5.1f%% %6" PRIu64 "  ", gr->bytes,
               gm_format_fixed(a, sizeof(a), gr->bytes, GM_GIB, "GiB"),
               tl->peak_bytes ? 100.0 * (double)gr->bytes / (double)tl->peak_bytes : 0.0,
               gr->count);
        snapcli_print_stack(stdout, snap, gr->stack, PEAK_CALLERS, p->apart ? p->apart[g] : -1, 51);
    }
}

/* The groups listed (the first 'top', 0: all) told apart where they would read alike. */
static enum gm_status tell_apart(const struct gm_snapshot *snap, struct dev_peak *p, uint64_t top,
                                 struct gm_error *err)
{
    size_t n = top && top < p->n_groups ? (size_t)top : p->n_groups;
    struct gm_snapshot_stack_ref *refs = gm_malloc((n ? n : 1) * sizeof(*refs));
    p->apart = gm_malloc((n ? n : 1) * sizeof(*p->apart));
    if (!refs || !p->apart) {
        gm_free(refs);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    }
    for (size_t g = 0; g < n; g++)
        refs[g] = (struct gm_snapshot_stack_ref){snap, p->groups[g].stack};
    gm_snapshot_stacks_apart(refs, n, PEAK_CALLERS, p->apart);
    gm_free(refs);
    return GM_OK;
}

/* One file's peaks, computed in the thread that loaded it. */
struct file_peaks {
    struct dev_peak *peaks; /* per snapshot device */
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
};

static enum gm_status file_peaks(void *ctx, size_t f, struct gm_snapshot *snap,
                                 struct gm_error *err)
{
    struct peak_work *pw = ctx;
    struct file_peaks *fp = &pw->files[f];
    fp->has_device = pw->want < 0 || gm_snapshot_device_by_index(snap, pw->want);
    if (!fp->has_device)
        return GM_OK;
    fp->peaks = gm_calloc(snap->n_devices ? snap->n_devices : 1, sizeof(*fp->peaks));
    if (!fp->peaks)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    for (size_t i = 0; i < snap->n_devices; i++) {
        const struct gm_snapshot_device *d = &snap->devices[i];
        struct dev_peak *p = &fp->peaks[i];
        enum gm_status st;
        if (pw->want >= 0 && d->index != pw->want)
            continue;
        if ((st = gm_snapshot_timeline(snap, d->index, GM_TIMELINE_LIVE, &p->tl, err)) != GM_OK ||
            (st = gm_snapshot_group_live(&p->tl, &p->groups, &p->n_groups, err)) != GM_OK)
            return st;
        if ((st = tell_apart(snap, p, pw->top, err)) != GM_OK)
            return st;
        if (p->tl.peak_time_valid) {
            struct gm_snapshot_user_range *r = NULL;
            size_t n = 0;
            if ((st = gm_snapshot_user_ranges(snap, d->index, &r, &n, err)) != GM_OK)
                return st;
            p->user_phase = gm_snapshot_user_phase_at(r, n, p->tl.peak_time_us);
            gm_free(r);
        }
    }
    if ((pw->ranks || pw->analysis) && gm_analysis_run(snap, NULL, &fp->an, err) != GM_OK)
        return gm_error_prefix(err, "%s", pw->paths[f]);
    return GM_OK;
}

static void file_peaks_release(struct file_peaks *fp, const struct gm_snapshot *snap)
{
    for (size_t i = 0; fp->peaks && snap && i < snap->n_devices; i++) {
        gm_snapshot_timeline_release(&fp->peaks[i].tl);
        gm_free(fp->peaks[i].groups);
        gm_free(fp->peaks[i].apart);
    }
    gm_free(fp->peaks);
    gm_analysis_free(fp->an);
}

static void json_file(struct gm_json *w, const char *path, const struct gm_snapshot *snap,
                      const struct file_peaks *fp, int32_t want, uint64_t top)
{
    gm_json_kv_str(w, "file", path);
    gm_json_kv_str(w, "sizes", "requested bytes as recorded in the trace");
    gm_json_key(w, "devices");
    gm_json_begin_array(w);
    for (size_t i = 0; i < snap->n_devices; i++)
        if (want < 0 || snap->devices[i].index == want)
            json_device(w, snap, &snap->devices[i], &fp->peaks[i], top);
    gm_json_end_array(w);
}

static void text_file(const char *path, const struct gm_snapshot *snap, const struct file_peaks *fp,
                      int32_t want, uint64_t top)
{
    bool first = true;
    snapcli_print_oom_banner(stdout, snap, path);
    for (size_t i = 0; i < snap->n_devices; i++) {
        if (want >= 0 && snap->devices[i].index != want)
            continue;
        if (!first)
            printf("\n");
        first = false;
        text_device(snap, &snap->devices[i], &fp->peaks[i], top);
    }
    if (!snap->n_devices)
        printf("the file names no device\n");
}

/* --folded: what is alive at the peak of each device (or after event 'at'), as folded
 * stacks; 0 or an exit code. */
static int write_folded(const char *cmd, const struct gm_snapshot *snap,
                        const struct file_peaks *fp, int32_t want, bool at_seen, int at)
{
    for (size_t i = 0; i < snap->n_devices; i++) {
        const struct gm_snapshot_device *d = &snap->devices[i];
        struct gm_snapshot_live_group *g = NULL;
        size_t n = 0;
        struct gm_error err;
        if (want >= 0 && d->index != want)
            continue;
        if (!at_seen) {
            folded_write(stdout, snap, d->index, fp->peaks[i].groups, fp->peaks[i].n_groups);
            continue;
        }
        if (gm_analysis_group_live_at(fp->an, &fp->an->devices[i], at, &g, &n, &err) != GM_OK)
            return cli_fail(cmd, &err);
        folded_write(stdout, snap, d->index, g, n);
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
    struct rank_list ranks = {0};
    bool top_seen = false;
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
    snaps = gm_calloc((size_t)n_pos, sizeof(*snaps));
    files = gm_calloc((size_t)n_pos, sizeof(*files));
    if (!snaps || !files) {
        gm_free(snaps);
        gm_free(files);
        return GM_EXIT_SOFTWARE;
    }
    {
        struct peak_work pw = {argv + 1, files, want, top, n_pos > 1 && !folded, at_seen};
        struct snapcli_load_opts lo = {mem_limit, false};
        rc = snapcli_load_many(argv[0], argv + 1, (size_t)n_pos, &lo, file_peaks, &pw, snaps);
    }
    for (int f = 0; f < n_pos && rc == 0; f++) {
        if (!files[f].has_device) {
            cli_errorf(argv[0], "'%s' has no device %d", argv[f + 1], want);
            rc = GM_EXIT_USAGE;
        }
    }
    for (int f = 0; f < n_pos && rc == 0 && n_pos > 1 && !folded; f++)
        rc = ranks_add(&ranks, argv[0], files[f].an, (size_t)f);
    if (rc == 0 && folded) {
        for (int f = 0; f < n_pos && rc == 0; f++)
            rc = write_folded(argv[0], snaps[f], &files[f], want, at_seen, at);
    } else if (rc == 0 && json) {
        struct gm_json w;
        cli_json_begin(&w, stdout, "snapshot.peak");
        if (n_pos == 1) {
            json_file(&w, argv[1], snaps[0], &files[0], want, top);
        } else {
            gm_json_key(&w, "files");
            gm_json_begin_array(&w);
            for (int f = 0; f < n_pos; f++) {
                gm_json_begin_object(&w);
                json_file(&w, argv[f + 1], snaps[f], &files[f], want, top);
                gm_json_end_object(&w);
            }
            gm_json_end_array(&w);
            ranks_json(&w, &ranks, argv + 1);
        }
        rc = cli_json_end(&w, argv[0]);
    } else if (rc == 0) {
        for (int f = 0; f < n_pos; f++) {
            if (n_pos > 1)
                printf("%s==> %s <==\n", f ? "\n" : "", argv[f + 1]);
            text_file(argv[f + 1], snaps[f], &files[f], want, top);
        }
        if (n_pos > 1)
            ranks_print(stdout, &ranks, argv + 1);
        printf("\nnote: trace sizes are requested bytes, below what "
               "torch.cuda.max_memory_allocated() counts after rounding to 512 B blocks\n");
    }
    for (int f = 0; f < n_pos; f++) {
        file_peaks_release(&files[f], snaps[f]);
        gm_snapshot_free(snaps[f]);
    }
    ranks_release(&ranks);
    gm_free(files);
    gm_free(snaps);
    return rc;
}
