/* SPDX-License-Identifier: MIT */
/* fuzz_report.c - the HTML report and the terminal plot on whatever snapshot arbitrary
 * bytes load into, with and without the analysis.  The corpus in corpus/report/ is written
 * by tests/report/make_corpus.py. */
#include "gpumem/gpumem.h"
#include "gpumem/report.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gm_snapshot *s;
    struct gm_snapshot_opts o;
    struct gm_error err;
    struct gm_analysis *an = NULL;
    struct gm_analysis_opts ao = {50, NULL};
    struct gm_report_opts ro = {"fuzz", 5, 4, 0, NULL};
    FILE *sink;
    memset(&o, 0, sizeof o);
    o.memory_limit = 64u << 20;
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
