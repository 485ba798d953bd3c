/* SPDX-License-Identifier: MIT */
/* cmd_snapshot_stats.c - gpumem snapshot stats FILE...: the allocator state at snapshot time
 * per device and pool (the figures of torch.cuda._memory_viz stats, from the blocks). */
#include "cli.h"
#include "commands.h"
#include "opts.h"
#include "snapshot_cli.h"
#include "snapshot_ranks.h"

#include "gpumem/arena.h"
#include "gpumem/units.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char *fmt(char *b, uint64_t v)
{
    char x[48];
    snprintf(b, 80, "%s (%" PRIu64 " B)", gm_format_bytes(x, sizeof(x), v, GM_UNITS_IEC), v);
    return b;
}

static double pct(uint64_t a, uint64_t b)
{
    return b ? 100.0 * (double)a / (double)b : 0.0;
}

static void text_figures(const struct gm_snapshot_figures *f, const char *ind)
{
    char b[80];
    printf("%sreserved            %s in %" PRIu64 " segments\n", ind, fmt(b, f->reserved_bytes),
           f->n_segments);
    printf("%sallocated           %s in %" PRIu64 " blocks\n", ind, fmt(b, f->allocated_bytes),
           f->n_active_blocks);
    printf("%sactive              %s (allocated + %" PRIu64 " pending-free blocks)\n", ind,
           fmt(b, f->active_bytes), f->n_pending_free_blocks);
    printf("%srequested           %s\n", ind, fmt(b, f->requested_bytes));
    printf("%sfree, internal      %s (%.1f%% of allocated: rounding and split waste)\n", ind,
           fmt(b, f->internal_free_bytes), pct(f->internal_free_bytes, f->allocated_bytes));
    printf("%sfree, external      %s (%.1f%% of reserved: %" PRIu64 " inactive blocks)\n", ind,
           fmt(b, f->external_free_bytes), pct(f->external_free_bytes, f->reserved_bytes),
           f->n_inactive_blocks);
    printf("%slargest free block  %s\n", ind, fmt(b, f->largest_free_block_bytes));
}

struct file_stats {
    const char *path;
    size_t n_segments, n_blocks;
    struct gm_snapshot_stats st;
    bool done;              /* st holds figures */
    struct gm_analysis *an; /* several files: the analysis of the rank, until it is added */
};

/* What the files of one run share (snapcli_load_each()). */
struct stats_job {
    const char *cmd;
    char *const *paths;
    struct file_stats *files;
    struct rank_list *ranks;
    size_t n;
    struct gm_digest **digests; /* per file: the rank's digest, read in place of a snapshot */
};

/* In the thread that read the file: its figures, and with several files its analysis (the
 * rank's peak and the categories at it). */
static enum gm_status file_figures(void *ctx, size_t i, struct gm_snapshot *snap,
                                   struct gm_error *err)
{
    struct stats_job *j = ctx;
    struct file_stats *fs = &j->files[i];
    fs->path = j->paths[i];
    fs->n_segments = snap->n_segments;
    fs->n_blocks = snap->n_blocks;
    if (gm_snapshot_stats(snap, &fs->st, err) != GM_OK)
        return err->code;
    fs->done = true;
    if (j->n > 1 && gm_analysis_run(snap, NULL, &fs->an, err) != GM_OK)
        return gm_error_prefix(err, "%s", fs->path);
    return GM_OK;
}

/* In this thread, in argument order: the rank of each file, before its snapshot goes. */
static int file_ranks(void *ctx, size_t i, struct gm_snapshot *snap)
{
    struct stats_job *j = ctx;
    int rc = j->files[i].an ? ranks_add(j->ranks, j->cmd, j->files[i].an, i, j->paths[i], j->n)
             : j->digests[i]
                 ? ranks_add_digest(j->ranks, j->cmd, j->digests[i], i, j->paths[i], j->n)
                 : 0;
    (void)snap;
    gm_analysis_free(j->files[i].an);
    j->files[i].an = NULL;
    return rc;
}

static void text_file(const struct file_stats *fs)
{
    const struct gm_snapshot_stats *st = &fs->st;
    char a[48], c[48], e[48];
    printf("%s: %zu devices, %zu segments, %zu blocks\n", snapcli_name(fs->path), st->n_devices,
           fs->n_segments, fs->n_blocks);
    for (size_t i = 0; i < st->n_devices; i++) {
        const struct gm_snapshot_device_stats *d = &st->devices[i];
        printf("\ndevice %d\n", d->device);
        if (!d->fig.n_segments) {
            printf("  no segments at snapshot time\n");
            continue;
        }
        text_figures(&d->fig, "  ");
        for (size_t p = 0; p < d->n_pools; p++) {
            const struct gm_snapshot_pool_stats *ps = &d->pools[p];
            printf("  %s pool%s", ps->is_small ? "small (<= 1 MiB)" : "large",
                   ps->is_expandable ? ", expandable segments" : "");
            if (ps->pool_id[0] || ps->pool_id[1])
                printf(", private pool (%" PRId64 ", %" PRId64 ")", ps->pool_id[0], ps->pool_id[1]);
            printf("\n");
            text_figures(&ps->fig, "    ");
        }
        printf("  segment sizes\n");
        for (size_t h = 0; h < d->n_hist; h++)
            printf("    [%10s, %10s)  %6" PRIu64 " segments  %s\n",
                   gm_format_bytes(a, sizeof(a), d->hist[h].lo, GM_UNITS_IEC),
                   gm_format_bytes(c, sizeof(c), d->hist[h].hi, GM_UNITS_IEC),
                   d->hist[h].n_segments,
                   gm_format_bytes(e, sizeof(e), d->hist[h].bytes, GM_UNITS_IEC));
    }
    if (st->has_host) {
        printf("\nhost (pinned CPU memory, counted in no device)\n");
        if (!st->host.n_segments)
            printf("  no segments at snapshot time\n");
        else
            text_figures(&st->host, "  ");
    }
}

int cmd_snapshot_stats(int argc, char **argv)
{
    bool json = false;
    int n_pos = 0, rc = 0;
    uint64_t mem_limit = 0;
    const struct opt opts[] = {
        OPT_JSON(&json, "gpumem.snapshot.stats/1"),
        SNAPCLI_OPT_MEMORY(&mem_limit),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem snapshot stats [--json] FILE...",
        "Per device and pool: reserved, allocated, active and requested bytes, free bytes inside "
        "segments (internal: rounding and split waste; external: inactive blocks), the largest "
        "free block and a segment size histogram, summed from the blocks at snapshot time. "
        "Several files are read at the same time as the ranks of one job, each by its device "
        "whatever its index (rank 1 on cuda:1 beside rank 0 on cuda:0): a table compares their "
        "peaks and reserved bytes, with the spread and the imbalance (the largest peak over "
        "the smallest, and the category that makes the difference); --json then writes "
        "{\"files\": [{\"file\", \"devices\"}...], \"ranks\", \"spread\", \"imbalance\"}.",
        "gpumem snapshot stats profile.pkl\ngpumem snapshot stats --json rank0.pickle"};
    struct file_stats *files;
    struct gm_digest **digests;
    struct rank_list ranks = {0};

    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    if (n_pos < 1)
        return cli_usage(argv[0], "missing FILE");
    struct snapcli_rank_args ra = {0};
    {
        int arc = snapcli_rank_argv(&argv, &n_pos, &ra);
        if (arc)
            return arc;
    }
    files = gm_calloc((size_t)n_pos, sizeof(*files));
    digests = gm_calloc((size_t)n_pos, sizeof(*digests));
    if (!files || !digests) {
        gm_free(files);
        gm_free(digests);
        snapcli_rank_argv_release(&ra);
        return GM_EXIT_SOFTWARE;
    }
    /* Read everything first, so that a bad file leaves no partial output; one file needs
     * only the snapshot state, several the timeline of each (the ranks table). */
    {
        struct stats_job j = {argv[0], argv + 1, files, &ranks, (size_t)n_pos, digests};
        struct snapcli_load_opts lo = {
            .memory_limit = mem_limit, .drop_events = n_pos == 1, .digests = digests};
        rc = snapcli_load_each(argv[0], argv + 1, (size_t)n_pos, &lo, file_figures, file_ranks, &j);
    }
    if (rc == 0 && json) {
        struct gm_analysis_doc_file *df = gm_calloc((size_t)n_pos, sizeof(*df));
        struct gm_analysis_doc doc = {.kind = GM_DOC_STATS,
                                      .files = df,
                                      .n_files = (size_t)n_pos,
                                      .ranks = ranks.v,
                                      .n_ranks = ranks.n,
                                      .digests = (const struct gm_digest *const *)digests};
        struct gm_error err;
        for (int i = 0; df && i < n_pos; i++)
            df[i] = (struct gm_analysis_doc_file){.path = files[i].path, .stats = &files[i].st};
        rc = df ? cli_json_status(argv[0], gm_analysis_json(stdout, &doc, &err), &err)
                : GM_EXIT_SOFTWARE;
        gm_free(df);
    } else if (rc == 0) {
        for (int i = 0; i < n_pos; i++) {
            if (i)
                printf("\n");
            if (digests[i])
                ranks_print_digest(stdout, argv[i + 1], digests[i]);
            else
                text_file(&files[i]);
        }
        if (n_pos > 1)
            ranks_print(stdout, &ranks, argv + 1);
    }
    ranks_release(&ranks);
    for (int i = 0; i < n_pos; i++) {
        if (files[i].done)
            gm_snapshot_stats_release(&files[i].st);
        gm_analysis_free(files[i].an); /* a file read before a failure stopped the rest */
        gm_digest_free(digests[i]);
    }
    gm_free(files);
    gm_free(digests);
    snapcli_rank_argv_release(&ra);
    return rc;
}
