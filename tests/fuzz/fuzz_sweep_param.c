/* SPDX-License-Identifier: MIT */
/* fuzz_sweep_param.c - `gpumem sweep --param` and the plan it makes, on arbitrary bytes.
 *
 * Input: the --param text up to the first newline; the bytes after it decide, run by run,
 * whether each value the plan asks for fits, fails for want of memory or fails otherwise
 * (and which other fields the run carries).  The plan must end (within GM_SWEEP_MAX_RUNS),
 * and its record must read back (gm_sweep_write_json, gm_sweep_load_mem) as it was written. */
#include "gpumem/gpumem.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct gm_sweep s, back; /* large: keep them off the stack */
    char spec[512], *text = NULL, arg[96];
    const uint8_t *nl = memchr(data, '\n', size), *p, *end = data + size;
    size_t n = nl ? (size_t)(nl - data) : size, len = 0, runs = 0;
    char *argv[3] = {arg, spec, NULL};
    uint64_t v;
    bool bis;
    FILE *f;

    if (n >= sizeof(spec))
        n = sizeof(spec) - 1;
    memcpy(spec, data, n);
    spec[n] = '\0';
    if (gm_sweep_parse_param(&s, spec, NULL) != GM_OK)
        return 0;
    snprintf(arg, sizeof(arg), "--batch={%s}", s.param);
    if (!gm_sweep_command_uses(&s, argv))
        abort(); /* "{NAME}" in an argument is a use */
    p = nl ? nl + 1 : end;
    if (p < end)
        s.bisect = (*p++ & 1) == 0;
    if (p < end)
        s.max_runs = *p++ % (GM_SWEEP_MAX_RUNS + 1);
    while (gm_sweep_next(&s, &v, &bis)) {
        struct gm_sweep_run r;
        uint8_t b = p < end ? *p++ : 0;
        if (++runs > GM_SWEEP_MAX_RUNS)
            abort(); /* the plan must end */
        memset(&r, 0, sizeof(r));
        r.value = v;
        r.bisection = bis;
        r.outcome = (enum gm_sweep_outcome)(b % 6);
        r.exit_status = r.outcome == GM_SWEEP_RUN_OK ? 0 : (int)(b >> 3);
        r.has_series = (b & 0x40) != 0;
        r.oom = (b & 0x80) != 0;
        r.n_phases_failed = r.outcome == GM_SWEEP_RUN_OK ? 0 : 1;
        r.n_left = b & 0x20 ? 1 : 0;
        snprintf(r.error, sizeof(r.error), "%.*s", (int)(end - p < 16 ? end - p : 16),
                 (const char *)p);
        gm_sweep_record(&s, &r);
    }
    f = open_memstream(&text, &len);
    if (!f)
        return 0;
    if (!gm_sweep_write_json(&s, NULL, f))
        abort();
    fclose(f);
    if (gm_sweep_load_mem(&back, text, len, 0, NULL) != GM_OK || back.n_runs != s.n_runs ||
        back.n_values != s.n_values || gm_sweep_end(&back) != gm_sweep_end(&s))
        abort(); /* what the sweep writes, it reads back */
    free(text);
    return 0;
}
