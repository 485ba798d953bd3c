/* SPDX-License-Identifier: MIT */
/* analysis_common.c - helpers of the snapshot analysis commands. */
#include "analysis_common.h"

#include "cli.h"
#include "snapshot_cli.h"

#include "gpumem/units.h"

#include <inttypes.h>
#include <string.h>

/* gm_analysis_run(), or an analysis for one purpose of the same signature */
typedef enum gm_status (*analyse_fn)(const struct gm_snapshot *snap,
                                     const struct gm_analysis_opts *opts, struct gm_analysis **out,
                                     struct gm_error *err);

struct open_ctx {
    char *const *paths;
    struct gm_analysis **ans;
    const struct gm_category_rules *rules;
    analyse_fn run;
};

static enum gm_status analyse(void *ctx, size_t i, struct gm_snapshot *snap, struct gm_error *err)
{
    struct open_ctx *c = ctx;
    struct gm_analysis_opts ao = {.rules = c->rules};
    if (c->run(snap, &ao, &c->ans[i], err) != GM_OK)
        return gm_error_prefix(err, "%s", c->paths[i]);
    return GM_OK;
}

/* 'first': the first pass of 'run' for the load (gm_analysis_first_pass_consumer() or a
 * narrower one for the same analysis). */
static int open_many(const char *cmd, char *const *paths, size_t n,
                     const struct snapcli_load_opts *o, analyse_fn run,
                     const struct gm_snapshot_consumer *first, struct gm_snapshot **snaps,
                     struct gm_analysis **ans)
{
    struct open_ctx c = {paths, ans, o ? o->rules : NULL, run};
    struct snapcli_load_opts lo;
    int rc;
    /* the analysis's first pass done while each file is read */
    if (o)
        lo = *o;
    else
        memset(&lo, 0, sizeof(lo));
    lo.consumer = first;
    memset(ans, 0, n * sizeof(*ans));
    rc = snapcli_load_many(cmd, paths, n, &lo, analyse, &c, snaps);
    if (rc) {
        for (size_t i = 0; i < n; i++) {
            gm_analysis_free(ans[i]);
            ans[i] = NULL;
        }
    }
    return rc;
}

int ana_cli_open_many(const char *cmd, char *const *paths, size_t n,
                      const struct snapcli_load_opts *o, struct gm_snapshot **snaps,
                      struct gm_analysis **ans)
{
    return open_many(cmd, paths, n, o, gm_analysis_run, gm_analysis_first_pass_consumer(), snaps,
                     ans);
}

int ana_cli_open_figures(const char *cmd, char *const *paths, size_t n,
                         const struct snapcli_load_opts *o, struct gm_snapshot **snaps,
                         struct gm_analysis **ans)
{
    return open_many(cmd, paths, n, o, gm_analysis_run_figures, gm_analysis_first_pass_consumer(),
                     snaps, ans);
}

int ana_cli_open_diff(const char *cmd, char *const *paths, const struct snapcli_load_opts *o,
                      struct gm_snapshot **snaps, struct gm_analysis **ans)
{
    return open_many(cmd, paths, 2, o, gm_analysis_diff_prepare,
                     gm_analysis_diff_first_pass_consumer(), snaps, ans);
}

void ana_cli_close_many(struct gm_snapshot **snaps, struct gm_analysis **ans, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ana_cli_close(snaps[i], ans[i]);
}

int ana_cli_open(const char *cmd, char *path, const struct snapcli_load_opts *o,
                 struct gm_snapshot **snap, struct gm_analysis **an)
{
    char *paths[1] = {path};
    return ana_cli_open_many(cmd, paths, 1, o, snap, an);
}

int ana_cli_show(const char *cmd, char *path, const struct snapcli_load_opts *lo, bool figures,
                 bool json, const struct gm_analysis_doc *doc, ana_cli_text_fn text,
                 const void *ctx)
{
    struct gm_snapshot *snap;
    struct gm_analysis *an;
    char *paths[1] = {path};
    int rc = figures ? ana_cli_open_figures(cmd, paths, 1, lo, &snap, &an)
                     : ana_cli_open(cmd, path, lo, &snap, &an);
    if (rc)
        return rc;
    if (json) {
        struct gm_analysis_doc_file file = {.path = path, .an = an};
        struct gm_analysis_doc d = *doc;
        struct gm_error err;
        d.files = &file;
        d.n_files = 1;
        rc = cli_json_status(cmd, gm_analysis_json(stdout, &d, &err), &err);
    } else {
        text(ctx, an);
    }
    ana_cli_close(snap, an);
    return rc;
}

void ana_cli_close(struct gm_snapshot *snap, struct gm_analysis *an)
{
    gm_analysis_free(an);
    gm_snapshot_free(snap);
}

const struct gm_analysis_device *ana_cli_device(const struct gm_analysis *an, int32_t want)
{
    if (want >= 0)
        return gm_analysis_device_by_index(an, want);
    for (size_t d = 0; d < an->n_devices; d++)
        if (an->devices[d].n_events)
            return &an->devices[d];
    return NULL;
}

const char *ana_cli_short(char *buf, size_t n, uint64_t bytes)
{
    if (bytes < 1024)
        snprintf(buf, n, "%" PRIu64 " B", bytes);
    else
        gm_format_bytes(buf, n, bytes, GM_UNITS_IEC);
    return buf;
}

const char *ana_cli_bytes(char *buf, size_t n, uint64_t bytes)
{
    if (bytes < 1024) {
        snprintf(buf, n, "%" PRIu64 " B", bytes);
    } else {
        char s[32];
        snprintf(buf, n, "%s (%" PRIu64 " B)", gm_format_bytes(s, sizeof(s), bytes, GM_UNITS_IEC),
                 bytes);
    }
    return buf;
}

const char *ana_cli_delta(char *buf, size_t n, uint64_t a, uint64_t b)
{
    char s[32];
    uint64_t d = a > b ? a - b : b - a;
    if (d == 0) {
        snprintf(buf, n, "0 B");
        return buf;
    }
    snprintf(buf, n, "%c%s", b >= a ? '+' : '-', ana_cli_short(s, sizeof(s), d));
    return buf;
}
