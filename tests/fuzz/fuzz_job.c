/* SPDX-License-Identifier: MIT */
/* fuzz_job.c - the job's settings and the units they are written in, on arbitrary text.
 *
 * Input: lines "NAME=VALUE" (or "NAME" for a flag).  Each goes through gm_job_set() (a
 * name that is no setting is refused there), a value also through the unit parsers (gm_parse_size,
 * _u64, _count, _double); then gm_job_check() judges the whole job, and a job it accepts with a
 * model of the catalog is estimated.  Nothing may crash, overflow or leak; a refusal must say why.
 */
#include "gpumem/gpumem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A refusal without a message is a bug: every error names its problem. */
static void said(enum gm_status st, const struct gm_error *err)
{
    if (st != GM_OK && !err->msg[0])
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct gm_job_source src;
    static int have_src = -1;
    static struct gm_estimate *est; /* reused from input to input */
    struct gm_job job;
    struct gm_error err;
    char line[512];
    size_t at = 0, n_lines = 0;

    if (have_src < 0)
        have_src = gm_job_source_load(&src, "gpt2", NULL, NULL) == GM_OK;
    gm_job_init(&job);
    while (at < size && n_lines++ < 64) {
        const uint8_t *nl = memchr(data + at, '\n', size - at);
        size_t n = nl ? (size_t)(nl - (data + at)) : size - at;
        char *eq;
        uint64_t u;
        double d;
        memcpy(line, data + at, n < sizeof(line) ? n : sizeof(line) - 1);
        line[n < sizeof(line) ? n : sizeof(line) - 1] = '\0';
        at += n + 1;
        eq = strchr(line, '=');
        gm_error_clear(&err);
        if (!eq) {
            said(gm_job_set(&job, line, NULL, &err), &err);
            continue;
        }
        *eq = '\0';
        gm_error_clear(&err);
        said(gm_job_set(&job, line, eq + 1, &err), &err);
        said(gm_parse_size(eq + 1, &u, &err), &err);
        said(gm_parse_u64(eq + 1, &u, &err), &err);
        said(gm_parse_count(eq + 1, &u, &err), &err);
        said(gm_parse_double(eq + 1, &d, &err), &err);
    }
    gm_error_clear(&err);
    if (gm_job_check(&job, &err) != GM_OK) {
        said(GM_ERR_INVALID, &err);
        return 0;
    }
    if (have_src && !job.model.model && job.search == GM_SEARCH_NONE) {
        gm_job_use_source(&job, &src);
        said(gm_estimate_run(&job, &est, &err), &err); /* est: NULL only when out of memory */
    }
    return 0;
}
