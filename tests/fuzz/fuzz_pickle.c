/* SPDX-License-Identifier: MIT */
/* fuzz_pickle.c - the pickle VM on arbitrary bytes, with a small memory limit, a shallow
 * depth cap, and a second time streaming the records of the lists under a key (which some
 * corpus files have), naming every list value, so that recycling and the flat reader run
 * (with its named runs: names_by_items is set, though these names are not the items' own,
 * since memory safety is what is checked); a third time with the general reader alone. */
#include "pickle/pickle.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static enum gm_status on_rec(void *ctx, uint32_t list_index, const struct pk_record *r,
                             struct gm_error *err)
{
    (void)ctx;
    (void)err;
    for (uint32_t k = 0; r->is_dict && k < r->n; k++)
        if (pk_record_can_name(r, r->pairs[2 * k + 1]))
            (void)pk_record_name(r, r->pairs[2 * k + 1], list_index + k);
    return list_index == 3 ? GM_ERR_FORMAT : GM_OK;
}

static void on_end(void *ctx, uint32_t list_index, bool commit)
{
    (void)ctx;
    (void)list_index;
    (void)commit;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pk_doc doc;
    struct pk_opts o;
    struct gm_error err;
    memset(&o, 0, sizeof o);
    o.memory_limit = 64u << 20;
    o.max_depth = 200;
    if (pk_parse(&doc, data, size, &o, &err) == GM_OK)
        pk_doc_release(&doc);
    struct pk_stream st = {"device_traces", 16, on_rec, on_end, NULL, true};
    o.stream = &st;
    for (int general = 0; general < 2; general++) {
        o.general_only = general;
        if (pk_parse(&doc, data, size, &o, &err) != GM_OK)
            continue;
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
