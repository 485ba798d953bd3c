/* SPDX-License-Identifier: MIT */
/* fuzz_measure_json.c - the readers of gpumem's own result documents: any bytes must give
 * GM_OK or a clean error from the series reader (gpumem.measure/1), the environment reader
 * (gpumem.environment/1) and the sweep reader (gpumem.sweep/1), and a sheet made of a
 * document that reads must be written, as Markdown and as HTML, without a crash. */
#include "gpumem/measure.h"
#include "gpumem/sheet.h"
#include "gpumem/sweep.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct gm_sweep sweep; /* large: keep it off the stack */
    struct gm_measure_series *s = NULL;
    struct gm_sheet *sh = NULL;
    FILE *sink;

    if (gm_measure_series_load_mem(data, size, 0, &s, NULL) == GM_OK)
        gm_measure_series_free(s);
    if (gm_measure_env_load_mem(data, size, 0, &s, NULL) == GM_OK)
        gm_measure_series_free(s);
    (void)gm_sweep_load_mem(&sweep, data, size, 0, NULL);
    if (gm_sheet_new(&sh, NULL) != GM_OK)
        return 0;
    if (gm_sheet_add(sh, "input.json", data, size, NULL) == GM_OK) {
        sink = fopen("/dev/null", "w");
        if (sink) {
            (void)gm_sheet_write(sh, GM_SHEET_MARKDOWN, sink, NULL);
            (void)gm_sheet_write(sh, GM_SHEET_HTML, sink, NULL);
            fclose(sink);
        }
    }
    gm_sheet_free(sh);
    return 0;
}
