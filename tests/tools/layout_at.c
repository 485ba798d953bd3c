/* SPDX-License-Identifier: MIT */
/* layout_at.c - the library's allocator layout (gm_layout_at) of a snapshot, for tests.
 *
 *   gm_layout_at FILE DEVICE K...      the layout after each event K (-1: the start) as one
 *                                      JSON object per line: {"k", "reserved", "segments":
 *                                      [[addr, size, stream, flags, [[page addr, size]...],
 *                                      [[offset, size, bytes, category, stack, pending]...]]]}
 *                                      (flags: 1 small pool, 2 expandable), the form of the
 *                                      HTML report's allocator state
 *   gm_layout_at --check FILE          at every event of every device, the layout's reserved
 *                                      bytes equal the timeline's (gm_snapshot_walk), and the
 *                                      blocks lie inside their segment's pages, do not overlap,
 *                                      and with the allocations outside any page add up to
 *                                      the allocated bytes; exit 1 on the first difference
 *
 * Addresses and sizes are decimal.  Exit 0 ok, 1 a check failed, 2 usage or load error. */
#include "gpumem/analysis.h"
#include "gpumem/arena.h"
#include "gpumem/snapshot.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static enum gm_status print_layout(void *ctx, size_t i, const struct gm_layout *l,
                                   struct gm_error *err)
{
    (void)ctx;
    (void)i;
    (void)err;
    printf("{\"k\": %" PRId64 ", \"reserved\": %" PRIu64 ", \"segments\": [", l->event,
           l->reserved);
    for (size_t s = 0; s < l->n_segments; s++) {
        const struct gm_layout_segment *g = &l->segments[s];
        printf("%s[%" PRIu64 ", %" PRIu64 ", \"%" PRIu64 "\", %u, [", s ? ", " : "", g->addr,
               g->size, g->stream, (g->is_small ? 1u : 0u) | (g->is_expandable ? 2u : 0u));
        for (size_t r = 0; r < g->n_ranges; r++)
            printf("%s[%" PRIu64 ", %" PRIu64 "]", r ? ", " : "",
                   l->ranges[g->first_range + r].addr, l->ranges[g->first_range + r].size);
        printf("], [");
        for (size_t b = 0; b < g->n_blocks; b++) {
            const struct gm_layout_block *bl = &l->blocks[g->first_block + b];
            printf("%s[%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %u, %u, %u]", b ? ", " : "",
                   bl->addr - g->addr, bl->size, bl->bytes, bl->category, bl->stack,
                   bl->pending_free ? 1u : 0u);
        }
        printf("]]");
    }
    printf("]}\n");
    return GM_OK;
}

struct check {
    const struct gm_snapshot *snap;
    const struct gm_snapshot_device *sd;
    const struct gm_analysis_device *dev;
    const uint64_t *reserved; /* per moment, the timeline's */
    const uint64_t *allocated;
    int failed;
};

static enum gm_status check_layout(void *ctx, size_t i, const struct gm_layout *l,
                                   struct gm_error *err)
{
    struct check *c = ctx;
    uint64_t req = l->outside_bytes;
    (void)err;
    if (l->reserved != c->reserved[i]) {
        fprintf(stderr,
                "device %d event %" PRId64 ": layout reserves %" PRIu64 ", the timeline %" PRIu64
                "\n",
                (int)c->dev->device, l->event, l->reserved, c->reserved[i]);
        c->failed = 1;
        return GM_ERR_INTERNAL;
    }
    for (size_t s = 0; s < l->n_segments; s++) {
        const struct gm_layout_segment *g = &l->segments[s];
        uint64_t prev_end = 0;
        for (size_t b = 0; b < g->n_blocks; b++) {
            const struct gm_layout_block *bl = &l->blocks[g->first_block + b];
            bool in = false;
            for (size_t r = 0; r < g->n_ranges; r++) {
                const struct gm_layout_range *x = &l->ranges[g->first_range + r];
                in = in || (bl->addr >= x->addr && bl->addr + bl->size <= x->addr + x->size);
            }
            if (!in || bl->addr < prev_end) {
                fprintf(stderr, "device %d event %" PRId64 ": block at %" PRIu64 " %s\n",
                        (int)c->dev->device, l->event, bl->addr,
                        in ? "overlaps the one before" : "is outside its segment's pages");
                c->failed = 1;
                return GM_ERR_INTERNAL;
            }
            prev_end = bl->addr + bl->size;
            req += c->dev->allocs[bl->alloc].bytes;
        }
    }
    if (l->event == (int64_t)c->sd->n_events - 1 && c->sd->n_events) {
        /* the end of the trace is the file's own state: its segments, its active blocks */
        size_t nb = 0;
        if (l->n_segments != c->sd->n_segments) {
            fprintf(stderr, "device %d at the end: %zu segments, the file has %zu\n",
                    (int)c->dev->device, l->n_segments, c->sd->n_segments);
            c->failed = 1;
            return GM_ERR_INTERNAL;
        }
        for (size_t s = 0; s < l->n_segments; s++) {
            const struct gm_snapshot_segment *g = NULL;
            for (size_t j = 0; j < c->sd->n_segments; j++)
                if (c->snap->segments[c->sd->first_segment + j].address == l->segments[s].addr)
                    g = &c->snap->segments[c->sd->first_segment + j];
            if (!g || g->total_size != l->segments[s].size ||
                g->is_expandable != l->segments[s].is_expandable) {
                fprintf(stderr, "device %d at the end: segment at %" PRIu64 " is not the file's\n",
                        (int)c->dev->device, l->segments[s].addr);
                c->failed = 1;
                return GM_ERR_INTERNAL;
            }
            for (size_t b = 0; b < g->n_blocks; b++)
                nb += g->blocks[b].state == GM_BLOCK_ACTIVE_ALLOCATED ||
                      g->blocks[b].state == GM_BLOCK_ACTIVE_PENDING_FREE;
        }
        printf("device %d at the end: %zu segments as in the file, %zu blocks (the file: %zu "
               "active), %zu allocations outside\n",
               (int)c->dev->device, l->n_segments, l->n_blocks, nb, l->n_outside);
    }
    if (req != c->allocated[i]) {
        fprintf(stderr,
                "device %d event %" PRId64 ": blocks hold %" PRIu64
                " requested bytes, the timeline %" PRIu64 "\n",
                (int)c->dev->device, l->event, req, c->allocated[i]);
        c->failed = 1;
        return GM_ERR_INTERNAL;
    }
    return GM_OK;
}

/* Every event of every device, in chunks of moments. */
static int check_all(const struct gm_snapshot *snap, const struct gm_analysis *an)
{
    enum { CHUNK = 4096 };
    static int64_t ks[CHUNK];
    static uint64_t res[CHUNK], all[CHUNK];
    struct gm_error err;
    size_t n_checked = 0;
    for (size_t d = 0; d < snap->n_devices; d++) {
        const struct gm_snapshot_device *sd = &snap->devices[d];
        const struct gm_analysis_device *ad = &an->devices[d];
        struct gm_layout_history h;
        struct gm_snapshot_timeline tl;
        struct gm_snapshot_walk w;
        struct check c = {snap, sd, ad, res, all, 0};
        size_t n = 0;
        if (gm_layout_history_build(snap, sd, &h, &err) != GM_OK ||
            gm_snapshot_timeline(snap, sd->index, 0, &tl, &err) != GM_OK ||
            gm_snapshot_walk_init(&w, snap, sd, &tl, &err) != GM_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return 2;
        }
        ks[n] = -1;
        res[n] = w.reserved;
        all[n++] = w.allocated;
        for (;;) {
            bool more = gm_snapshot_walk_next(&w) != NULL;
            if (more) {
                ks[n] = (int64_t)w.cur.index;
                res[n] = w.reserved;
                all[n++] = w.allocated;
            }
            if (n == CHUNK || (!more && n)) {
                /* one pass per chunk: each starts again from the first event */
                if (gm_layout_at(an, ad, &h, ks, n, check_layout, &c, &err) != GM_OK) {
                    if (!c.failed)
                        fprintf(stderr, "%s\n", err.msg);
                    return c.failed ? 1 : 2;
                }
                n_checked += n;
                n = 0;
            }
            if (!more)
                break;
        }
        gm_snapshot_walk_release(&w);
        gm_snapshot_timeline_release(&tl);
        gm_layout_history_release(&h);
    }
    printf("%zu moments checked\n", n_checked);
    return 0;
}

int main(int argc, char **argv)
{
    struct gm_snapshot *snap = NULL;
    struct gm_analysis *an = NULL;
    struct gm_error err;
    bool check = argc == 3 && !strcmp(argv[1], "--check");
    const char *path = check ? argv[2] : argv[1];
    int rc = 0;

    if (!check && argc < 4) {
        fprintf(stderr, "usage: gm_layout_at FILE DEVICE K... | --check FILE\n");
        return 2;
    }
    if (gm_snapshot_load(path, NULL, &snap, &err) != GM_OK ||
        gm_analysis_run(snap, NULL, &an, &err) != GM_OK) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        gm_snapshot_free(snap);
        return 2;
    }
    if (check) {
        rc = check_all(snap, an);
    } else {
        const struct gm_analysis_device *dev =
            gm_analysis_device_by_index(an, (int32_t)strtol(argv[2], NULL, 10));
        size_t n = (size_t)argc - 3;
        int64_t *ks = gm_malloc(n * sizeof(*ks));
        if (!dev || !ks) {
            fprintf(stderr, "no device %s\n", argv[2]);
            rc = 2;
        } else {
            for (size_t i = 0; i < n; i++)
                ks[i] = strtoll(argv[3 + i], NULL, 10);
            for (size_t i = 1; i < n; i++)
                if (ks[i] < ks[i - 1]) {
                    fprintf(stderr, "events must ascend\n");
                    rc = 2;
                }
            if (!rc && gm_layout_at(an, dev, NULL, ks, n, print_layout, NULL, &err) != GM_OK) {
                fprintf(stderr, "%s\n", err.msg);
                rc = 2;
            }
        }
        gm_free(ks);
    }
    gm_analysis_free(an);
    gm_snapshot_free(snap);
    return rc;
}
