/* SPDX-License-Identifier: MIT */
/* snapshot_ranks.c - the ranks of several snapshot files, rendered (snapshot_ranks.h). */
#include "snapshot_ranks.h"

#include "analysis_common.h"
#include "cli.h"

#include "gpumem/arena.h"
#include "gpumem/units.h"

#include <inttypes.h>
#include <string.h>

static int push(struct rank_list *l, const char *cmd, const struct gm_rank *r, size_t n_files)
{
    if (!l->v && !(l->v = gm_calloc(n_files, sizeof(*l->v)))) {
        cli_errorf(cmd, "out of memory");
        return GM_EXIT_SOFTWARE;
    }
    l->v[l->n++] = *r;
    return 0;
}

int ranks_add(struct rank_list *l, const char *cmd, const struct gm_analysis *an, size_t file,
              const char *path, size_t n_files)
{
    struct gm_error err;
    struct gm_rank r;
    bool has = false;
    if (gm_analysis_rank(an, file, path, &r, &has, &err) != GM_OK)
        return cli_fail(cmd, &err);
    return has ? push(l, cmd, &r, n_files) : 0;
}

int ranks_add_digest(struct rank_list *l, const char *cmd, const struct gm_digest *d, size_t file,
                     const char *path, size_t n_files)
{
    struct gm_rank r;
    bool has = false;
    gm_digest_rank(d, file, path, &r, &has);
    return has ? push(l, cmd, &r, n_files) : 0;
}

void ranks_print_digest(FILE *f, const char *path, const struct gm_digest *d)
{
    char a[32], b[32];
    fprintf(f, "%s: the digest of %s (host %s", path, d->file, d->host ? d->host : "unknown");
    if (d->has_rank)
        fprintf(f, ", rank %" PRIu64, d->rank);
    fprintf(f, ")\n");
    if (!d->has_figures) {
        fprintf(f, "  no device with a trace or segments\n");
        return;
    }
    fprintf(f, "  cuda:%d peak %s after event %" PRId64 " (%s), reserved %s at most\n",
            (int)d->figures.device, ana_cli_short(a, sizeof(a), d->figures.value[GM_RANK_PEAK]),
            d->figures.peak_event, gm_phase_name((enum gm_phase)d->figures.peak_phase),
            ana_cli_short(b, sizeof(b), d->figures.value[GM_RANK_PEAK_RESERVED]));
    fprintf(
        f, "  %" PRIu64 " iterations, %" PRIu64 " out-of-memory events, leaking %s per iteration\n",
        d->n_iterations, d->n_ooms, ana_cli_short(a, sizeof(a), d->leak_bytes_per_iteration));
}

void ranks_release(struct rank_list *l)
{
    gm_free(l->v);
    memset(l, 0, sizeof(*l));
}

static const char *const metric_label[GM_RANK_METRIC_COUNT] = {"peak", "peak reserved", "reserved",
                                                               "allocated"};

static void print_imbalance(FILE *f, const struct gm_ranks *rs, char *const *paths)
{
    const struct gm_rank_spread *p = &rs->spread[GM_RANK_PEAK];
    const struct gm_rank *hi = &rs->ranks[p->max_rank], *lo = &rs->ranks[p->min_rank];
    char a[32], b[32], c[32];
    if (p->max == p->min) {
        fprintf(f, "imbalance: none, every rank peaks at %s\n",
                ana_cli_short(a, sizeof(a), p->max));
        return;
    }
    fprintf(f, "imbalance: ");
    if (rs->peak_ratio > 0)
        fprintf(f, "the largest peak is %.2fx the smallest", rs->peak_ratio);
    else
        fprintf(f, "one rank peaks at 0 B");
    fprintf(f, ": rank %" PRIu64 " (%s, cuda:%d) %s against rank %" PRIu64 " (%s, cuda:%d) %s, %s;",
            hi->id, paths[hi->file], (int)hi->device, ana_cli_short(a, sizeof(a), p->max), lo->id,
            paths[lo->file], (int)lo->device, ana_cli_short(b, sizeof(b), p->min),
            ana_cli_delta(c, sizeof(c), p->min, p->max));
    if (rs->category_bytes >= 0)
        ana_cli_delta(a, sizeof(a), 0, (uint64_t)rs->category_bytes);
    else
        ana_cli_delta(a, sizeof(a), (uint64_t)-rs->category_bytes, 0);
    fprintf(f, " %s makes the largest part of the difference (%s)\n",
            gm_category_name((enum gm_category)rs->category), a);
}

/* From GM_RANK_OUTLIERS_MIN ranks: those whose peak stands out (gm_analysis_rank_outliers()). */
static void print_outliers(FILE *f, const struct gm_ranks *rs, char *const *paths)
{
    size_t *idx = rs->n_ranks ? gm_calloc(rs->n_ranks, sizeof(*idx)) : NULL;
    size_t n = idx ? gm_analysis_rank_outliers(rs, idx) : 0;
    char a[32];
    if (rs->n_ranks >= GM_RANK_OUTLIERS_MIN) {
        fprintf(f, "outliers: ");
        if (!n)
            fprintf(f, "none, every peak is near the others'");
        for (size_t i = 0; i < n; i++) {
            const struct gm_rank *r = &rs->ranks[idx[i]];
            double d = rs->spread[GM_RANK_PEAK].mean > 0
                           ? 100.0 *
                                 ((double)r->value[GM_RANK_PEAK] - rs->spread[GM_RANK_PEAK].mean) /
                                 rs->spread[GM_RANK_PEAK].mean
                           : 0.0;
            fprintf(f, "%srank %" PRIu64 " (%s) %s, %+.1f%% of the mean", i ? "; " : "", r->id,
                    paths[r->file], ana_cli_short(a, sizeof(a), r->value[GM_RANK_PEAK]), d);
        }
        fprintf(f, "\n");
    }
    gm_free(idx);
}

void ranks_print(FILE *f, const struct rank_list *l, char *const *paths)
{
    struct gm_ranks rs;
    struct gm_error err;
    char v[GM_RANK_METRIC_COUNT][32], a[32], b[32], c[32];
    int w = 4;
    if (gm_analysis_ranks(l->v, l->n, &rs, &err) != GM_OK)
        return;
    for (size_t i = 0; i < rs.n_ranks; i++) {
        size_t n = strlen(paths[rs.ranks[i].file]);
        if ((int)n > w)
            w = n > 60 ? 60 : (int)n;
    }
    fprintf(f, "\nranks (each file one rank, numbered by %s):\n",
            gm_rank_source_name((enum gm_rank_source)rs.source));
    fprintf(f, "  %4s  %-*s %6s %12s %14s %12s %12s  %s\n", "rank", w, "file", "device", "peak",
            "peak reserved", "reserved", "allocated", "peak phase");
    for (size_t i = 0; i < rs.n_ranks; i++) {
        const struct gm_rank *r = &rs.ranks[i];
        for (int m = 0; m < GM_RANK_METRIC_COUNT; m++)
            ana_cli_short(v[m], sizeof(v[m]), r->value[m]);
        fprintf(f, "  %4" PRIu64 "  %-*.*s %6d %12s %14s %12s %12s  %s\n", r->id, w, w,
                paths[r->file], (int)r->device, v[0], v[1], v[2], v[3],
                gm_phase_name((enum gm_phase)r->peak_phase));
    }
    if (rs.n_ranks >= 2) {
        fprintf(f, "spread over %zu ranks:\n", rs.n_ranks);
        for (int m = 0; m < GM_RANK_METRIC_COUNT; m++) {
            const struct gm_rank_spread *s = &rs.spread[m];
            double pct = s->mean > 0 ? 100.0 * (double)(s->max - s->min) / s->mean : 0.0;
            fprintf(f,
                    "  %-14s min %12s  max %12s  max-min %12s (%.1f%% of the mean)  max on "
                    "rank %" PRIu64 "\n",
                    metric_label[m], ana_cli_short(a, sizeof(a), s->min),
                    ana_cli_short(b, sizeof(b), s->max),
                    ana_cli_short(c, sizeof(c), s->max - s->min), pct, rs.ranks[s->max_rank].id);
        }
        print_imbalance(f, &rs, paths);
        print_outliers(f, &rs, paths);
    }
    gm_analysis_ranks_release(&rs);
}
