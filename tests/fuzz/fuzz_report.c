/* SPDX-License-Identifier: MIT */
/* fuzz_report.c - the HTML report and the terminal plot on whatever snapshot arbitrary
 * bytes load into, with and without the analysis; the page drawn from the timeline the
 * analysis kept (gm_analysis_opts.totals) must equal, byte for byte, the page that walks
 * the trace for it.  The corpus in corpus/report/ is written
 * by tests/report/make_corpus.py. */
#include "gpumem/gpumem.h"
#include "gpumem/report.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The page of 's' with 'an' into *out (free()), NULL when it could not be written. */
static char *page(const struct gm_snapshot *s, const struct gm_analysis *an,
                  const struct gm_report_opts *ro, size_t *n)
{
    struct gm_error err;
    char *p = NULL;
    FILE *f = open_memstream(&p, n);
    if (!f)
        return NULL;
    if (gm_report_html(f, s, an, ro, &err) != GM_OK) {
        fclose(f);
        free(p);
        return NULL;
    }
    fclose(f);
    return p;
}

/* The same page from an analysis that kept the totals as from one that did not. */
static void same_page_with_totals(const struct gm_snapshot *s, const struct gm_analysis *an,
                                  const struct gm_report_opts *ro)
{
    struct gm_analysis_opts at = {.max_points = 50, .totals = true};
    struct gm_analysis *ant = NULL;
    struct gm_error err;
    size_t n1 = 0, n2 = 0;
    char *p1, *p2;
    if (!an || gm_analysis_run(s, &at, &ant, &err) != GM_OK)
        return;
    p1 = page(s, an, ro, &n1);
    p2 = page(s, ant, ro, &n2);
    if (p1 && p2 && (n1 != n2 || memcmp(p1, p2, n1) != 0))
        abort();
    free(p1);
    free(p2);
    gm_analysis_free(ant);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gm_snapshot *s;
    struct gm_snapshot_opts o;
    struct gm_error err;
    struct gm_analysis *an = NULL;
    struct gm_analysis_opts ao = {.max_points = 50};
    struct gm_report_opts ro = {"fuzz", 5, 4, 0, NULL};
    FILE *sink;
    memset(&o, 0, sizeof o);
    o.memory_limit = 64u << 20;
    /* the first analysis takes the first pass made while loading; the second (with the totals,
     * same_page_with_totals()) walks, and the pages must agree */
    o.consumer = gm_analysis_first_pass_consumer();
    if (gm_snapshot_load_mem(data, size, &o, &s, &err) != GM_OK)
        return 0;
    sink = fopen("/dev/null", "w");
    if (!sink) {
        gm_snapshot_free(s);
        return 0;
    }
    if (gm_analysis_run(s, &ao, &an, &err) != GM_OK)
        an = NULL;
    (void)gm_report_html(sink, s, an, &ro, &err);
    (void)gm_report_html(sink, s, NULL, &ro, &err);
    same_page_with_totals(s, an, &ro);
    for (size_t d = 0; d < s->n_devices; d++) {
        static const unsigned flags[] = {0, GM_PLOT_ASCII, GM_PLOT_COLOR | GM_PLOT_CATEGORIES,
                                         GM_PLOT_ASCII | GM_PLOT_CATEGORIES};
        for (size_t f = 0; f < sizeof(flags) / sizeof(flags[0]); f++) {
            struct gm_plot_opts po = {40 + (unsigned)(d * 7 % 50), 4 + (unsigned)f, flags[f]};
            (void)gm_report_plot(sink, s, an, s->devices[d].index, &po, &err);
        }
    }
    fclose(sink);
    gm_analysis_free(an);
    gm_snapshot_free(s);
    return 0;
}
