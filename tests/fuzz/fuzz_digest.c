/* SPDX-License-Identifier: MIT */
/* fuzz_digest.c - a rank's digest (gm_digest_parse()): any bytes must give GM_OK or a clean
 * error, and a digest that parses must give a rank that the ranks' spread and imbalance
 * take without crashing or overflowing. */
#include "gpumem/analysis.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gm_digest *d;
    struct gm_error err;
    struct gm_rank r[2];
    struct gm_ranks rs;
    bool has = false;
    if (gm_digest_parse(data, size, &d, &err) != GM_OK)
        return 0;
    gm_digest_rank(d, 0, "rank1.digest", &r[0], &has);
    if (has) {
        r[1] = r[0];
        r[1].file = 1;
        r[1].name_rank = 0;
        if (gm_analysis_ranks(r, 2, &rs, &err) == GM_OK)
            gm_analysis_ranks_release(&rs);
    }
    for (size_t i = 0; i < d->n_series; i++)
        (void)(d->series[i].total + d->series[i].reserved);
    gm_digest_free(d);
    return 0;
}
