/* SPDX-License-Identifier: MIT */
/* fuzz_account.c - account files (gpumem.account/1 JSON lines): any bytes must give GM_OK or
 * a clean error, and whatever was read must make its equations and its JSON summary without
 * crashing, overflowing or hanging. */
#include "gpumem/account.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gm_account *a = NULL;
    struct gm_error err;
    FILE *sink;
    if (gm_account_new(&a, &err) != GM_OK)
        return 0;
    (void)gm_account_is_account_data(data, size);
    (void)gm_account_add_data(a, "fuzz", data, size, &err);
    for (size_t i = 0; i < gm_account_n_processes(a); i++) {
        const struct gm_account_process *p = gm_account_process(a, i);
        for (size_t d = 0; d < p->n_devices; d++) {
            const struct gm_account_balance *b = &p->devices[d].peak;
            for (size_t t = 0; t < b->n_terms; t++) {
                char src[256];
                gm_account_term_source(&b->terms[t], b, src, sizeof(src));
                (void)gm_account_term_title(&b->terms[t]);
            }
        }
    }
    if ((sink = fopen("/dev/null", "w")) != NULL) {
        (void)gm_account_write_json(sink, a, &err);
        fclose(sink);
    }
    gm_account_free(a);
    return 0;
}
