/* SPDX-License-Identifier: MIT */
/* fuzz_pickle.c - the pickle VM on arbitrary bytes, with a small memory cap, a shallow
 * depth cap and an append hook that consumes every other list, so that recycling runs. */
#include "pickle/pickle.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static enum gm_status hook(void *ctx, const struct pk_append *a, bool *consumed,
                           struct gm_error *err)
{
    (void)ctx;
    (void)err;
    *consumed = (a->list_pos % 2) == 0;
    return GM_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pk_doc doc;
    struct pk_opts o;
    struct gm_error err;
    memset(&o, 0, sizeof o);
    o.max_memory = 64u << 20;
    o.max_depth = 200;
    if (pk_parse(&doc, data, size, &o, &err) == GM_OK)
        pk_doc_release(&doc);
    o.on_append = hook;
    if (pk_parse(&doc, data, size, &o, &err) == GM_OK) {
        const struct pk_node *n = pk_node(doc.root);
        const char *s;
        size_t len;
        int64_t i;
        double d;
        for (uint32_t k = 0; n && k < n->len && k < 64; k++) {
            (void)pk_get_str(&doc, n->items[k], &s, &len, NULL);
            (void)pk_get_i64(n->items[k], &i);
            (void)pk_get_double(n->items[k], &d);
            (void)pk_type_name(n->items[k]);
        }
        pk_doc_release(&doc);
    }
    return 0;
}
