/* SPDX-License-Identifier: MIT */
/* term.c - terminal chart of a device's memory over time (see report.h).
 *
 * Layout (width W, plot height H):
 *   a title line with the peak marked by a triangle above its column,
 *   H rows: a y label (10 columns) and "┤", then one cell per column: allocated bytes as
 *   blocks (eighth blocks for the top cell), reserved as "─" where it lies above them,
 *   an x axis with the start, middle and end positions,
 *   a one-line legend.
 * Each column is one bucket of a level-of-detail series (gpumem/lod.h) over the device's
 * axis and shows the most that held in it, so the peak is never lost; row r of H shows the
 * values in (r, r+1] * ymax / H, so the top row draws the maximum itself. */
#include "gpumem/report.h"

#include "gpumem/arena.h"
#include "gpumem/lod.h"
#include "gpumem/units.h"

#include "report/report_int.h"

#include <string.h>

#define YLAB 11 /* "  4.55 GiB " */

static const char *const eighths[9] = {" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
static const char *const cat_ansi[GM_CATEGORY_COUNT] = {
    "\033[38;5;32m",  /* parameter: blue */
    "\033[38;5;97m",  /* input: purple */
    "\033[38;5;208m", /* activation: orange */
    "\033[38;5;220m", /* gradient: yellow */
    "\033[38;5;34m",  /* optimizer_state: green */
    "\033[38;5;160m", /* optimizer_temp: red */
    "\033[38;5;245m", /* other: grey */
};
static const char cat_char[GM_CATEGORY_COUNT] = {'P', 'i', 'a', 'g', 's', 't', '.'};
static const char *const cat_label[GM_CATEGORY_COUNT] = {
    "params", "inputs", "activations", "grads", "opt state", "opt temps", "other"};

#define ANSI_RESET "\033[0m"
#define ANSI_ALLOC "\033[38;5;32m"
#define ANSI_RES   "\033[38;5;240m"
#define ANSI_PEAK  "\033[1;31m"

static void fmt_x(char *out, size_t n, const struct gm_lod_axis *m, double x, double span)
{
    if (!m->time)
        snprintf(out, n, "event %.0f", x);
    else if (span >= 1e6)
        snprintf(out, n, "%.2f s", x / 1e6);
    else if (span >= 1e4)
        snprintf(out, n, "%.1f ms", x / 1e3);
    else
        snprintf(out, n, "%.0f us", x);
}

/* A short y label: "4.5 GiB", "512 MiB". */
static void fmt_short(char *out, size_t n, uint64_t b)
{
    gm_format_bytes(out, n, b, GM_UNITS_IEC);
}

static void put_rep(FILE *f, const char *s, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        fputs(s, f);
}

unsigned gm_report_plot_columns(const struct gm_plot_opts *o)
{
    unsigned width = o->width < 40 ? 40 : o->width;
    return width - YLAB - 1;
}

enum gm_status gm_report_plot(FILE *f, const struct gm_snapshot *snap, const struct gm_analysis *an,
                              int32_t device, const struct gm_plot_opts *o, struct gm_error *err)
{
    const struct gm_snapshot_device *sd = gm_snapshot_device_by_index(snap, device);
    const struct gm_analysis_device *ad = NULL;
    bool color = o->flags & GM_PLOT_COLOR, ascii = o->flags & GM_PLOT_ASCII;
    bool cats = o->flags & GM_PLOT_CATEGORIES;
    unsigned width = o->width < 40 ? 40 : o->width, height = o->height < 4 ? 4 : o->height;
    unsigned pw = gm_report_plot_columns(o), peak_col = 0;
    struct gm_snapshot_timeline tl;
    struct gm_lod_axis m;
    struct gm_lod al, rl;
    uint64_t(*cv)[GM_CATEGORY_COUNT] = NULL;
    uint64_t ymax = 1024; /* bytes; so that an empty trace still has an axis */
    double x1, span;
    enum gm_status st;
    char buf[64], buf2[64];

    if ((st = gm_analysis_require_series(an, "plot", err)) != GM_OK)
        return st;
    if (!sd)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "device %d is not in the snapshot",
                       (int)device);
    if (!sd->n_events) {
        /* no history: one moment is not a line over time (a chart would show ticks
         * "event 0 ... event 1" and a peak "at the start" of nothing) */
        char a[48], r[48];
        struct gm_snapshot_timeline t0;
        if ((st = gm_snapshot_timeline(snap, device, 0, &t0, err)) != GM_OK)
            return st;
        gm_format_bytes(a, sizeof(a), t0.initial_bytes, GM_UNITS_IEC);
        gm_format_bytes(r, sizeof(r), t0.initial_reserved_bytes, GM_UNITS_IEC);
        gm_snapshot_timeline_release(&t0);
        return gm_fail(err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET,
                       "device %d %s: the file holds only the moment it was written (%s "
                       "allocated, %s reserved in %zu segments), so there is no timeline to "
                       "plot; 'gpumem snapshot peak' and 'stats' show that moment",
                       (int)device, sd->has_trace ? "has an empty trace" : "has no trace", a, r,
                       sd->n_segments);
    }
    if (cats) {
        ad = an ? gm_analysis_device_by_index(an, device) : NULL;
        if (!ad || !ad->n_points)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "device %d: no category analysis to plot", (int)device);
    }
    st = gm_snapshot_timeline(snap, device, 0, &tl, err);
    if (st != GM_OK)
        return st;
    gm_lod_axis_init(&m, sd);
    x1 = m.x_end;
    span = x1 > 0 ? x1 : 1;
    /* one column a bucket: the most allocated and reserved bytes that held in it */
    if ((st = gm_lod_timeline(snap, sd, &tl, &m, pw, &al, &rl, err)) != GM_OK) {
        gm_snapshot_timeline_release(&tl);
        return st;
    }
    if (cats && !(cv = gm_calloc(pw, sizeof(*cv)))) {
        gm_lod_release(&al);
        gm_lod_release(&rl);
        gm_snapshot_timeline_release(&tl);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "plot: out of memory");
    }
    /* the peak's column: the first whose most is the peak */
    for (unsigned c = 0; c < pw; c++)
        if (al.b[c].max == tl.peak_bytes) {
            peak_col = c;
            break;
        }
    if (cats) {
        /* per column: the categories at the series point with the most bytes in it (the
         * analysis' series uses the same buckets when built for this width, see
         * gm_report_plot_columns()), else the point carried into it */
        uint64_t *best = gm_calloc(pw, sizeof(uint64_t));
        uint8_t *seen = gm_calloc(pw, 1);
        if (best && seen) {
            for (size_t i = 0; i < ad->n_points; i++) {
                const struct gm_analysis_point *pt = &ad->points[i];
                unsigned c = gm_lod_bucket_of(&al, gm_lod_axis_x(&m, pt->event));
                if (!seen[c] || pt->total >= best[c]) {
                    best[c] = pt->total;
                    memcpy(cv[c], pt->bytes, sizeof(cv[c]));
                    seen[c] = 1;
                }
            }
            for (unsigned c = 1; c < pw; c++)
                if (!seen[c]) {
                    memcpy(cv[c], cv[c - 1], sizeof(cv[c]));
                    seen[c] = 1;
                }
        }
        gm_free(best);
        gm_free(seen);
    }
    for (unsigned c = 0; c < pw; c++) {
        if (al.b[c].max > ymax)
            ymax = al.b[c].max;
        if (rl.b[c].max > ymax)
            ymax = rl.b[c].max;
    }

    /* title and peak marker */
    {
        char pk[64], at[64];
        gm_format_fixed(pk, sizeof(pk), tl.peak_bytes, GM_GIB, "GiB");
        if (tl.peak_event_index < 0)
            snprintf(at, sizeof(at), "the start");
        else
            fmt_x(at, sizeof(at), &m, gm_lod_axis_x(&m, tl.peak_event_index), span);
        fprintf(f, "device %d: allocated and reserved over %s\n", (int)device,
                m.time ? "time" : "trace events");
        char text[160];
        int tl_len = snprintf(text, sizeof(text), "peak %s at %s", pk, at);
        unsigned col = YLAB + 1 + peak_col, len = tl_len > 0 ? (unsigned)tl_len : 0;
        /* the text goes right of the marker when it fits, else left of it */
        if (col + 2 + len <= width || col < len + 1) {
            put_rep(f, " ", col);
            fprintf(f, "%s%s %s%s\n", color ? ANSI_PEAK : "", ascii ? "v" : "▼", text,
                    color ? ANSI_RESET : "");
        } else {
            put_rep(f, " ", col - len - 1);
            fprintf(f, "%s%s %s%s\n", color ? ANSI_PEAK : "", text, ascii ? "v" : "▼",
                    color ? ANSI_RESET : "");
        }
    }
    for (unsigned r = height; r-- > 0;) {
        double lo = (double)ymax * r / height, hi = (double)ymax * (r + 1) / height;
        const char *cur = NULL;
        if (r == height - 1 || r == 0 || r == height / 2) {
            fmt_short(buf, sizeof(buf), (uint64_t)(r == 0 ? 0.0 : hi));
            fprintf(f, "%*s %s", YLAB - 1, buf, ascii ? "|" : "┤");
        } else {
            fprintf(f, "%*s %s", YLAB - 1, "", ascii ? "|" : "│");
        }
        for (unsigned c = 0; c < pw; c++) {
            double a = (double)al.b[c].max, rs = (double)rl.b[c].max;
            const char *s, *col = NULL;
            char one[2] = {0, 0};
            /* row r shows (lo, hi]: the top row holds the maximum itself, and any value
             * above lo shows in the cell (never rounded away) */
            bool res_here = rs > lo && rs <= hi;
            if (a >= hi) {
                s = ascii ? "#" : "█";
            } else if (a > lo) {
                /* eighths rounded up (a value just above lo still shows), but never a
                 * full cell, which means the value reaches hi */
                double eighth = (a - lo) / (hi - lo) * 8;
                unsigned e = (unsigned)eighth;
                e += (double)e < eighth;
                e = e < 1 ? 1 : e > 7 ? 7 : e;
                if (ascii)
                    s = e >= 4 ? "#" : res_here ? "-" : "_";
                else
                    s = eighths[e > 8 ? 8 : e];
            } else if (res_here) {
                s = ascii ? "-" : "─";
                col = ANSI_RES;
            } else {
                s = " ";
            }
            if (cats && a > lo && s[0] != ' ' && s[0] != '-' && s[0] != '_' && strcmp(s, "─")) {
                /* the category at the middle of this cell */
                double mid = a >= hi ? (lo + hi) / 2 : lo, acc = 0;
                int k = GM_CATEGORY_OTHER;
                for (int q = 0; q < GM_CATEGORY_COUNT; q++) {
                    acc += (double)cv[c][q];
                    if (acc > mid) {
                        k = q;
                        break;
                    }
                }
                if (color) {
                    col = cat_ansi[k];
                } else {
                    one[0] = cat_char[k];
                    s = one;
                }
            } else if (!col && s[0] != ' ') {
                col = ANSI_ALLOC;
            }
            if (color && col != cur) {
                fputs(col ? col : ANSI_RESET, f);
                cur = col;
            }
            fputs(s, f);
        }
        if (color && cur)
            fputs(ANSI_RESET, f);
        fputc('\n', f);
    }
    /* x axis */
    fprintf(f, "%*s %s", YLAB - 1, "", ascii ? "+" : "└");
    for (unsigned c = 0; c < pw; c++)
        fputs(c == 0 || c == pw / 2 || c == pw - 1 ? (ascii ? "+" : "┬") : (ascii ? "-" : "─"), f);
    fputc('\n', f);
    {
        char a[48], b[48], e[48];
        size_t la, lb, le;
        unsigned pos;
        fmt_x(a, sizeof(a), &m, 0, span);
        fmt_x(b, sizeof(b), &m, span / 2, span);
        fmt_x(e, sizeof(e), &m, x1, span);
        la = strlen(a);
        lb = strlen(b);
        le = strlen(e);
        fprintf(f, "%*s%s", YLAB + 1, "", a);
        pos = (unsigned)la;
        if (pw / 2 > pos + lb / 2 + 1) {
            put_rep(f, " ", pw / 2 - (unsigned)(lb / 2) - pos);
            fputs(b, f);
            pos = pw / 2 - (unsigned)(lb / 2) + (unsigned)lb;
        }
        if (pw > pos + le + 1) {
            put_rep(f, " ", pw - (unsigned)le - pos);
            fputs(e, f);
        }
        fputc('\n', f);
    }
    /* legend */
    gm_format_bytes(buf, sizeof(buf), tl.peak_bytes, GM_UNITS_IEC);
    gm_format_bytes(buf2, sizeof(buf2), tl.peak_reserved_bytes, GM_UNITS_IEC);
    if (cats) {
        for (int k = 0; k < GM_CATEGORY_COUNT; k++) {
            bool used = false;
            for (unsigned c = 0; c < pw && !used; c++)
                used = cv[c][k] != 0;
            if (!used)
                continue; /* the legend lists only what the chart shows */
            if (color)
                fprintf(f, "%s%s%s %s ", cat_ansi[k], ascii ? "#" : "█", ANSI_RESET, cat_label[k]);
            else
                fprintf(f, "%c %s ", cat_char[k], cat_label[k]);
        }
    } else {
        fprintf(f, "%s%s%s allocated  ", color ? ANSI_ALLOC : "", ascii ? "#" : "█",
                color ? ANSI_RESET : "");
    }
    if (cats)
        fprintf(f, "%s reserved %s peak %s\n", ascii ? "-" : "─", ascii ? "v" : "▼", buf);
    else
        fprintf(f, "%s reserved (max %s)  %s peak %s (%llu bytes)\n", ascii ? "-" : "─", buf2,
                ascii ? "v" : "▼", buf, (unsigned long long)tl.peak_bytes);
    gm_lod_release(&al);
    gm_lod_release(&rl);
    gm_free(cv);
    gm_snapshot_timeline_release(&tl);
    if (ferror(f))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "plot: write error");
    return GM_OK;
}
