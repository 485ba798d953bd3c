/* SPDX-License-Identifier: MIT */
/* fuzz_snapshot.c - snapshot loading, stats, timeline and grouping on arbitrary bytes, the
 * host trace and the events' forward stacks included. */
#include "gpumem/gpumem.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gm_snapshot *s;
    struct gm_snapshot_opts o;
    struct gm_error err;
    memset(&o, 0, sizeof o);
    o.memory_limit = 64u << 20;
    if (gm_snapshot_load_mem(data, size, &o, &s, &err) != GM_OK)
        return 0;
    {
        struct gm_snapshot_stats st;
        if (gm_snapshot_stats(s, &st, &err) == GM_OK)
            gm_snapshot_stats_release(&st);
    }
    for (size_t i = 0; i < s->n_devices; i++) {
        struct gm_snapshot_timeline tl;
        struct gm_snapshot_live_group *g;
        size_t ng;
        if (gm_snapshot_timeline(s, s->devices[i].index, GM_TIMELINE_LIVE, &tl, &err) != GM_OK)
            continue;
        if (gm_snapshot_group_live(&tl, &g, &ng, &err) == GM_OK) {
            for (size_t k = 0; k < ng; k++)
                (void)gm_snapshot_stack_user_frame(s, g[k].stack);
            gm_free(g);
        }
        gm_snapshot_timeline_release(&tl);
    }
    for (size_t i = 0; i <= s->n_devices; i++) {
        /* every device, then the host trace */
        struct gm_snapshot_cursor c;
        const struct gm_snapshot_event *e;
        gm_snapshot_cursor_init(&c, i < s->n_devices ? &s->devices[i] : &s->host, 0);
        while ((e = gm_snapshot_cursor_next(&c)) != NULL) {
            (void)gm_snapshot_event_extra_of(s, e);
            (void)gm_snapshot_stack_user_frame(s, gm_snapshot_event_user_stack(s, e));
        }
    }
    {
        struct gm_snapshot_figures f;
        gm_snapshot_host_figures(s, &f);
    }
    gm_snapshot_free(s);
    return 0;
}
