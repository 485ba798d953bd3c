/* SPDX-License-Identifier: MIT */
/* fuzz_calibrate.c - gpumem calibrate (and its --predict) on arbitrary bytes.
 *
 * Input: a --predict text up to the first newline, one job setting "NAME=VALUE" up to the
 * second, the snapshot's bytes after it.  The snapshot is loaded and analysed within 64 MiB,
 * then the job (the catalog's gpt2, training) is held against it and the points are
 * predicted; the record is written as JSON.  Nothing may crash or leak, and every refusal
 * names its problem. */
#include "gpumem/gpumem.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The text of data[0..size) up to its first newline into out[n]; returns the bytes taken
 * (the newline included). */
static size_t take_line(const uint8_t *data, size_t size, char *out, size_t n)
{
    const uint8_t *nl = memchr(data, '\n', size);
    size_t len = nl ? (size_t)(nl - data) : size;
    size_t keep = len < n ? len : n - 1;
    memcpy(out, data, keep);
    out[keep] = '\0';
    return nl ? len + 1 : len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct gm_job_source src;
    static int have_src = -1;
    struct gm_calibration *c = NULL;
    char predict[256], setting[256], *eq;
    struct gm_calib_opts co;
    struct gm_snapshot_opts so;
    struct gm_snapshot *snap = NULL;
    struct gm_analysis *an = NULL;
    struct gm_job job;
    struct gm_error err;
    size_t at;
    FILE *sink;

    if (have_src < 0)
        have_src = gm_job_source_load(&src, "gpt2", NULL, NULL) == GM_OK;
    if (!have_src)
        return 0;
    at = take_line(data, size, predict, sizeof(predict));
    at += take_line(data + at, size - at, setting, sizeof(setting));
    gm_calib_job_init(&job);
    gm_job_use_source(&job, &src);
    if ((eq = strchr(setting, '=')) != NULL) {
        *eq = '\0';
        (void)gm_job_set(&job, setting, eq + 1, NULL);
    }
    gm_calib_opts_init(&co);
    gm_error_clear(&err);
    if (predict[0] && gm_calib_add_points(&co, predict, &err) != GM_OK && !err.msg[0])
        abort();
    memset(&so, 0, sizeof(so));
    so.memory_limit = 64u << 20;
    if (gm_snapshot_load_mem(data + at, size - at, &so, &snap, NULL) != GM_OK)
        return 0;
    if (gm_analysis_run(snap, NULL, &an, NULL) == GM_OK) {
        gm_error_clear(&err);
        if (gm_calibrate(&job, an, &co, &c, &err) == GM_OK) {
            if ((sink = fopen("/dev/null", "w")) != NULL) {
                (void)gm_calibration_json(sink, c, NULL);
                fclose(sink);
            }
        } else if (!err.msg[0]) {
            abort();
        }
        gm_calibration_free(c);
        gm_analysis_free(an);
    }
    gm_snapshot_free(snap);
    return 0;
}
