/* SPDX-License-Identifier: MIT */
/* fuzz_category_rules.c - the --categories reader, both forms (JSON, and the YAML subset
 * for input that does not start with '[' or '{'; the corpus holds both): any bytes must
 * give GM_OK or a clean error, and rules that parse must classify every allocation of a small
 * example snapshot (its frames and annotations searched by the rules' expressions) without
 * crashing, hanging or leaving a category outside the built-in ones. */
#include "gpumem/analysis.h"
#include "gpumem/example.h"
#include "gpumem/snapshot.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One example snapshot of one iteration, made once. */
static struct gm_snapshot *example(void)
{
    static struct gm_snapshot *snap;
    static bool tried;
    char *buf = NULL;
    size_t len = 0;
    FILE *f;
    struct gm_error err;
    struct gm_example_opts eo;
    struct gm_snapshot_opts so;

    if (tried)
        return snap;
    tried = true;
    memset(&eo, 0, sizeof eo);
    eo.iterations = 1;
    if (!(f = open_memstream(&buf, &len)))
        return NULL;
    if (gm_example_write(f, &eo, &err) != GM_OK) {
        fclose(f);
        free(buf);
        return NULL;
    }
    fclose(f);
    memset(&so, 0, sizeof so);
    if (gm_snapshot_load_mem(buf, len, &so, &snap, &err) != GM_OK)
        snap = NULL;
    free(buf);
    return snap;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gm_category_rules *r;
    struct gm_analysis *an;
    struct gm_snapshot *snap;
    struct gm_error err;

    if (gm_category_rules_parse((const char *)data, size, &r, &err) != GM_OK)
        return 0;
    snap = example();
    if (snap) {
        struct gm_analysis_opts ao = {.max_points = 50, .rules = r};
        if (gm_analysis_run(snap, &ao, &an, &err) == GM_OK) {
            for (size_t d = 0; d < an->n_devices; d++)
                for (size_t i = 0; i < an->devices[d].n_allocs; i++)
                    if (an->devices[d].allocs[i].category >= GM_CATEGORY_COUNT)
                        abort();
            gm_analysis_free(an);
        }
    }
    gm_category_rules_free(r);
    return 0;
}
