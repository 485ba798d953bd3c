/* SPDX-License-Identifier: MIT */
/* html_state.c - the allocator's state at any event, and the segment timeline, as page data
 * that stays within a byte budget whatever the trace's length.
 *
 * The state at an event is the library's layout (gm_layout_at(), analysis.h): segments and
 * the blocks of the allocations alive.  The page rebuilds it for any event k of a "window"
 * [k0, k1] from:
 *   "spaces"   the segment identities of the trace [base, stream, flags] (flags: 1 small
 *              pool, 2 expandable: a stream and pool's expandable pages, whose runs of mapped
 *              pages are its segments, 4 a private pool: a CUDA graph's or a MemPool);
 *   "starts"   per window, the mapped pages after event k0: [[id, addr, size]...];
 *   "changes"  the segment events inside the windows, resolved: [k, id, op, addr, size]
 *              (op +1 maps the pages, -1 unmaps them);
 *   "A"        every allocation alive somewhere in a window: [addr, size, bytes, category,
 *              stack, k_alloc, k_free_requested, k_free] (size: gm_layout_block_size(); -1
 *              for an event that does not happen), in allocation order.
 * At k the segments are the start's pages with the changes of (k0, k] applied, the blocks
 * the allocations of A with k_alloc <= k < k_free, each in the segment (run of pages)
 * holding its address, its size clipped at that run's end, pending free when
 * k_free_requested <= k: the library's layout exactly, which the browser test checks block
 * for block against gm_layout_at.
 *
 * The windows: when every allocation and segment event fits the budget, one window holds
 * the whole trace (the state at every event).  Otherwise windows around the peak and the
 * first OOMs, as long as the budget allows, and the states at events spread over the
 * trace (windows of one event); the page names the events whose state it holds.
 *
 * The segment timeline ("segtl"): every cudaMalloc'ed segment's life [x0, x1, size, flags,
 * base, k0, k1] (the largest SEGTL_MAX when there are more), and per expandable space its
 * mapped bytes over time as a level-of-detail series (the most mapped in each of
 * SEGTL_BUCKETS buckets). */
#include "gpumem/arena.h"
#include "gpumem/json.h"
#include "gpumem/lod.h"

#include "analysis/made_by.h"
#include "base/bits.h"
#include "base/json_room.h"
#include "base/outbuf.h"
#include "report/report_int.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_BUDGET ((uint64_t)4 << 20)
#define A_BYTES        80u /* page bytes of one allocation in A, about */
#define CHANGE_BYTES   48u /* of one change or one start range */
#define N_SPREAD       32u /* states spread over the trace */
#define MAX_OOM_WIN    8u
#define SEGTL_MAX      4000u
#define SEGTL_BUCKETS  2048u

struct window {
    int64_t k0, k1;
};

static int cmp_window(const void *a, const void *b)
{
    const struct window *x = a, *y = b;
    return x->k0 < y->k0 ? -1 : x->k0 > y->k0;
}

/* Sorted and merged where they overlap or touch; their number. */
static size_t merge_windows(struct window *win, size_t nw)
{
    size_t m = 0;
    qsort(win, nw, sizeof(*win), cmp_window);
    for (size_t i = 0; i < nw; i++) {
        if (m && win[i].k0 <= win[m - 1].k1 + 1) {
            if (win[i].k1 > win[m - 1].k1)
                win[m - 1].k1 = win[i].k1;
        } else {
            win[m++] = win[i];
        }
    }
    return m;
}

/* The pass that measures what the states at a set of events cost: the allocations alive in
 * any of them (each once in A) and their pages. */
struct measure {
    uint64_t *seen; /* allocations counted (base/bits.h) */
    uint64_t n_allocs, n_ranges;
};

static enum gm_status count_state(void *ctx, size_t i, const struct gm_layout *l,
                                  struct gm_error *err)
{
    struct measure *m = ctx;
    (void)i;
    (void)err;
    for (size_t j = 0; j < l->n_live; j++)
        m->n_allocs += !gm_bits_set(m->seen, l->live[j]);
    m->n_ranges += l->n_ranges;
    return GM_OK;
}

/* The windows within the budget (sorted, disjoint) into win (room for 2 + MAX_OOM_WIN +
 * N_SPREAD); their number.  When the whole trace does not fit: the states at the targets
 * (the peak, the first OOMs) and at N_SPREAD + 1 events spread over the trace are measured
 * in one pass, and what the budget leaves goes to windows around the targets, as long as the
 * allocations they add allow. */
static enum gm_status choose_windows(struct gm_report_ctx *c, const struct gm_snapshot_device *sd,
                                     const struct gm_analysis_device *ad,
                                     const struct gm_layout_history *h,
                                     const struct gm_snapshot_timeline *tl, uint64_t budget,
                                     struct window *win, size_t *n_win, struct gm_error *err)
{
    int64_t last = (int64_t)sd->n_events - 1;
    uint64_t all =
        (uint64_t)ad->n_allocs * A_BYTES + (uint64_t)(h->n_changes + h->n_initial) * CHANGE_BYTES;
    size_t nw = 0, nt = 0;
    int64_t targets[1 + MAX_OOM_WIN], ks[2 + MAX_OOM_WIN + N_SPREAD];
    struct measure m = {NULL, 0, 0};
    enum gm_status st;
    if (all <= budget || sd->n_events == 0) {
        win[0] = (struct window){-1, last};
        *n_win = 1;
        return GM_OK;
    }
    targets[nt++] = tl->peak_event_index;
    for (size_t i = 0; i < ad->n_ooms && i < MAX_OOM_WIN; i++)
        targets[nt++] = ad->ooms[i].event;
    for (size_t i = 0; i < nt; i++)
        win[nw++] = (struct window){targets[i], targets[i]};
    for (unsigned i = 0; i <= N_SPREAD; i++) {
        int64_t k = (int64_t)((double)last * i / N_SPREAD);
        win[nw++] = (struct window){k, k};
    }
    nw = merge_windows(win, nw);
    for (size_t i = 0; i < nw; i++)
        ks[i] = win[i].k0;
    if (!(m.seen = gm_calloc(gm_bits_words(ad->n_allocs), sizeof(*m.seen))))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "report: out of memory");
    st = gm_layout_pages_at(c->an, ad, h, ks, nw, count_state, &m, err);
    gm_free(m.seen);
    if (st != GM_OK)
        return st;
    {
        uint64_t used = m.n_allocs * A_BYTES + m.n_ranges * CHANGE_BYTES;
        uint64_t per = budget > used ? (budget - used) / nt : 0;
        /* the allocations an event adds, about, and the segment events */
        double density = ((double)ad->n_allocs * A_BYTES + (double)h->n_changes * CHANGE_BYTES) /
                         (double)sd->n_events;
        int64_t len = (int64_t)((double)per / (density + 1e-9));
        if (len > 2 * (int64_t)sd->n_events)
            len = 2 * (int64_t)sd->n_events;
        for (size_t i = 0; i < nt; i++) {
            /* centred on the target, moved inside the trace when it would stick out */
            int64_t a = targets[i] - len / 2, b = a + len;
            if (a < -1) {
                b += -1 - a;
                a = -1;
            }
            if (b > last) {
                a -= b - last;
                b = last;
            }
            win[nw++] = (struct window){a < -1 ? -1 : a, b};
        }
    }
    *n_win = merge_windows(win, nw);
    return GM_OK;
}

/* What the pass over the window starts collects. */
struct starts {
    struct gm_report_ctx *c;
    uint64_t *chosen; /* allocations in A (base/bits.h) */
    const struct window *win;
};

static enum gm_status at_start(void *ctx, size_t i, const struct gm_layout *l, struct gm_error *err)
{
    struct starts *s = ctx;
    struct gm_json *w = s->c->w;
    (void)i;
    (void)err;
    for (size_t j = 0; j < l->n_live; j++)
        (void)gm_bits_set(s->chosen, l->live[j]);
    gm_json_begin_array(w);
    for (size_t g = 0; g < l->n_segments; g++) {
        const struct gm_layout_segment *sg = &l->segments[g];
        for (size_t r = 0; r < sg->n_ranges; r++) {
            const struct gm_layout_range *x = &l->ranges[sg->first_range + r];
            const uint64_t row[3] = {sg->id, x->addr, x->size};
            gm_json_int_array(w, row, 3, NULL, 0);
        }
    }
    gm_json_end_array(w);
    return GM_OK;
}

static bool in_windows(const struct window *win, size_t nw, int64_t k)
{
    size_t lo = 0, hi = nw;
    /* the last window with k0 < k; windows hold (k0, k1] of changes and allocations */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (win[mid].k0 < k)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && k <= win[lo - 1].k1;
}

/* in_windows() for events asked about in increasing order (the changes, the allocations'
 * allocs): the window is found by walking on from the last one, not searched again; an
 * event before the last asked about is searched. */
struct win_walk {
    const struct window *win;
    size_t nw, j;
    int64_t last;
    int64_t until; /* the answer for 'last' holds up to this event */
    bool in;
};

#define WIN_WALK(win, nw) ((struct win_walk){(win), (nw), 0, INT64_MIN, INT64_MIN, false})

static inline bool in_windows_walk(struct win_walk *ww, int64_t k)
{
    if (k < ww->last)
        return in_windows(ww->win, ww->nw, k);
    ww->last = k;
    if (k <= ww->until)
        return ww->in;
    /* the first window that ends at or after k; the windows are disjoint and sorted */
    while (ww->j < ww->nw && ww->win[ww->j].k1 < k)
        ww->j++;
    if (ww->j == ww->nw) {
        ww->in = false;
        ww->until = INT64_MAX;
    } else if (ww->win[ww->j].k0 < k) {
        ww->in = true; /* inside (k0, k1] */
        ww->until = ww->win[ww->j].k1;
    } else {
        ww->in = false; /* before it */
        ww->until = ww->win[ww->j].k0;
    }
    return ww->in;
}

/* The GM_FMT_ROOM bytes at s to p, which starts inside them whenever the number at s is
 * shorter than the room (memcpy on overlapping ranges is undefined, C11 7.24.2.1p2): all
 * read into locals, then written; GCC -O2 keeps them in registers (no call, unlike memmove,
 * and no copy through the stack, unlike one array). */
_Static_assert(GM_FMT_ROOM == 20, "copy_room() copies 8 + 8 + 4 bytes");
static GM_INLINE_ALWAYS void copy_room(char *p, const char *s)
{
    uint64_t a, b;
    uint32_t c;
    memcpy(&a, s, 8);
    memcpy(&b, s + 8, 8);
    memcpy(&c, s + 16, 4);
    memcpy(p, &a, 8);
    memcpy(p + 8, &b, 8);
    memcpy(p + 16, &c, 4);
}

/* Allocation 'a' of A as its row [addr, size, bytes, category, stack, k_alloc,
 * k_free_requested, k_free] at p (A_ROW_MAX bytes of room); the end of the row.  Most rows
 * repeat a number of their own: bytes equal to the block's size, a free completed at the
 * event after its request; their digits are copied (and the last one counted up). */
#define A_ROW_MAX (2 + 8 * (GM_FMT_ROOM + 2))
#define A_ROWS    24u /* rows written into one room of the writer's buffer */
static GM_INLINE_ALWAYS char *a_row(char *p, const struct gm_analysis_alloc *a, uint64_t size)
{
    char *s;
    size_t n;
    *p++ = '[';
    p = gm_fmt_u64_room(p, a->addr);
    *p++ = ',';
    s = p;
    p = gm_fmt_u64_room(p, size);
    n = (size_t)(p - s);
    *p++ = ',';
    if (a->bytes == size) {
        copy_room(p, s);
        p += n;
    } else {
        p = gm_fmt_u64_room(p, a->bytes);
    }
    *p++ = ',';
    p = gm_fmt_u64_room(p, a->category);
    *p++ = ',';
    p = gm_fmt_u64_room(p, a->stack);
    *p++ = ',';
    p = gm_fmt_i64_room(p, a->alloc_event);
    *p++ = ',';
    s = p;
    p = gm_fmt_i64_room(p, a->free_requested_event);
    n = (size_t)(p - s);
    *p++ = ',';
    if (a->free_requested_event >= 0 && a->free_event == a->free_requested_event + 1 &&
        p[-2] != '9') {
        copy_room(p, s);
        p += n;
        p[-1]++;
    } else {
        p = gm_fmt_i64_room(p, a->free_event);
    }
    *p++ = ']';
    return p;
}

/* The rows of A go into the writer's buffer A_ROWS at a time, as one piece of text (the
 * commas between them written here): a room asked for each row cost as much as its
 * numbers. */
struct a_rows {
    struct gm_report_ctx *c;
    const struct gm_layout_history *h;
    char *p, *end; /* the room being filled, NULL when none */
    size_t n;      /* rows written */
};

static GM_INLINE_ALWAYS void a_rows_put(struct a_rows *ar, const struct gm_analysis_alloc *a)
{
    struct gm_json *w = ar->c->w;
    if (ar->p && ar->end - ar->p >= (ptrdiff_t)A_ROW_MAX + 1) {
        *ar->p++ = ',';
        ar->p = a_row(ar->p, a, gm_layout_block_size(ar->h, a));
    } else {
        if (ar->p)
            gm_json_room_end(w, ar->p);
        ar->p = gm_json_room(w, A_ROWS * (A_ROW_MAX + 1));
        if (ar->p) {
            ar->end = ar->p + A_ROWS * (A_ROW_MAX + 1);
            ar->p = a_row(ar->p, a, gm_layout_block_size(ar->h, a));
        } else {
            char row[A_ROW_MAX + 1];
            *a_row(row, a, gm_layout_block_size(ar->h, a)) = '\0';
            gm_json_raw(w, row);
        }
    }
    gm_report_use_stack(ar->c, a->stack);
    ar->n++;
}

static void a_rows_end(struct a_rows *ar)
{
    if (ar->p)
        gm_json_room_end(ar->c->w, ar->p);
    ar->p = NULL;
}

static enum gm_status write_windows(struct gm_report_ctx *c, const struct gm_snapshot_device *sd,
                                    const struct gm_analysis_device *ad,
                                    const struct gm_layout_history *h,
                                    const struct gm_snapshot_timeline *tl, struct gm_error *err)
{
    struct gm_json *w = c->w;
    uint64_t budget = c->o->state_budget ? c->o->state_budget : DEFAULT_BUDGET;
    struct window *win = gm_malloc((4 + 2 * MAX_OOM_WIN + N_SPREAD) * sizeof(*win));
    int64_t *ks = gm_malloc((4 + 2 * MAX_OOM_WIN + N_SPREAD) * sizeof(*ks));
    struct starts s = {c, gm_calloc(gm_bits_words(ad->n_allocs), sizeof(uint64_t)), NULL};
    size_t nw = 0, n_a = 0;
    struct win_walk ww;
    enum gm_status st;

    if (!win || !ks || !s.chosen) {
        gm_free(win);
        gm_free(ks);
        gm_free(s.chosen);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "report: out of memory");
    }
    if ((st = choose_windows(c, sd, ad, h, tl, budget, win, &nw, err)) != GM_OK)
        goto out;
    s.win = win;
    gm_json_kv_bool(w, "every_event",
                    nw == 1 && win[0].k0 == -1 && win[0].k1 == (int64_t)sd->n_events - 1);
    gm_json_key(w, "windows");
    gm_json_begin_array(w);
    for (size_t i = 0; i < nw; i++) {
        gm_json_begin_array(w);
        gm_json_i64(w, win[i].k0);
        gm_json_i64(w, win[i].k1);
        gm_json_end_array(w);
        ks[i] = win[i].k0;
    }
    gm_json_end_array(w);
    gm_json_key(w, "spaces");
    gm_json_begin_array(w);
    for (size_t i = 0; i < h->n_segments; i++) {
        const struct gm_layout_segment_info *g = &h->segments[i];
        gm_json_begin_array(w);
        gm_json_u64(w, g->base);
        gm_report_stream(w, g->stream);
        gm_json_u64(w, (g->is_small ? 1u : 0u) | (g->is_expandable ? 2u : 0u) |
                           (g->pool_id[0] || g->pool_id[1] ? 4u : 0u));
        gm_json_end_array(w);
    }
    gm_json_end_array(w);
    gm_json_key(w, "starts");
    gm_json_begin_array(w);
    st = gm_layout_pages_at(c->an, ad, h, ks, nw, at_start, &s, err);
    gm_json_end_array(w);
    if (st != GM_OK)
        goto out;
    gm_json_key(w, "changes");
    gm_json_begin_array(w);
    ww = WIN_WALK(win, nw);
    for (size_t i = 0; i < h->n_changes; i++) {
        const struct gm_layout_change *ch = &h->changes[i];
        if (!in_windows_walk(&ww, ch->event))
            continue;
        gm_json_begin_array(w);
        gm_json_i64(w, ch->event);
        gm_json_u64(w, ch->segment);
        gm_json_i64(w, ch->op);
        gm_json_u64(w, ch->addr);
        gm_json_u64(w, ch->size);
        gm_json_end_array(w);
    }
    gm_json_end_array(w);
    gm_json_key(w, "A");
    gm_json_begin_array(w);
    {
        /* in alloc order: those alive at a window's start (chosen), found a word of
         * the set at a time between the windows, and every one made inside a window, a
         * run of the order */
        struct a_rows ar = {c, h, NULL, NULL, 0};
        size_t i = 0;
        for (size_t j = 0; j <= nw; j++) {
            size_t lo = j < nw ? gm_analysis_made_by(ad, i, win[j].k0) : ad->n_allocs;
            size_t hi = j < nw ? gm_analysis_made_by(ad, lo, win[j].k1) : ad->n_allocs;
            while ((i = gm_bits_next(s.chosen, i, lo)) < lo)
                a_rows_put(&ar, &ad->allocs[i++]);
            for (i = lo; i < hi; i++)
                a_rows_put(&ar, &ad->allocs[i]);
        }
        a_rows_end(&ar);
        n_a = ar.n;
    }
    gm_json_end_array(w);
    gm_json_kv_u64(w, "n_A", n_a);
out:
    gm_free(win);
    gm_free(ks);
    gm_free(s.chosen);
    return st;
}

/* ---- the moments the state view names ---- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void write_marks(struct gm_report_ctx *c, const struct gm_snapshot_device *sd,
                        const struct gm_analysis_device *ad, const struct gm_snapshot_timeline *tl)
{
    struct gm_json *w = c->w;
    uint32_t max = c->o->max_moments ? c->o->max_moments : 12;
    int64_t ks[64 + 2];
    size_t nk = 0;
    int64_t end = (int64_t)sd->n_events - 1;
    if (max > 64)
        max = 64;
    ks[nk++] = end;
    if (sd->n_events)
        ks[nk++] = tl->peak_event_index;
    for (size_t i = 0; ad && i < ad->n_ooms && nk < max; i++)
        ks[nk++] = ad->ooms[i].event;
    if (ad && ad->n_iterations && nk < max) {
        size_t room = max - nk, n = ad->n_iterations;
        for (size_t i = 0; i < n && i < room; i++)
            ks[nk++] = ad->iterations[room >= n ? i : i * n / room].peak_event;
    }
    qsort(ks, nk, sizeof(ks[0]), cmp_i64);
    /* [k, what]: what is a bit set: 1 the end, 2 the peak, 4 an oom, 8 an iteration's peak */
    gm_json_key(w, "marks");
    gm_json_begin_array(w);
    for (size_t i = 0; i < nk; i++) {
        unsigned what = 0;
        if (i && ks[i] == ks[i - 1])
            continue;
        what |= ks[i] == end ? 1u : 0u;
        what |= sd->n_events && ks[i] == tl->peak_event_index ? 2u : 0u;
        for (size_t o = 0; ad && o < ad->n_ooms; o++)
            what |= ad->ooms[o].event == ks[i] ? 4u : 0u;
        for (size_t it = 0; ad && it < ad->n_iterations; it++)
            what |= ad->iterations[it].peak_event == ks[i] ? 8u : 0u;
        gm_json_begin_array(w);
        gm_json_i64(w, ks[i]);
        gm_json_u64(w, what);
        gm_json_end_array(w);
    }
    gm_json_end_array(w);
}

/* ---- the segment timeline ---- */

struct life {
    uint32_t id;
    int64_t k0, k1; /* created after k0 (-1: before the trace), gone after k1 (-1: never) */
    uint64_t size;
};

static int cmp_life_size(const void *a, const void *b)
{
    const struct life *x = a, *y = b;
    if (x->size != y->size)
        return x->size < y->size ? 1 : -1;
    return x->k0 < y->k0 ? -1 : x->k0 > y->k0;
}

static void write_segtl(struct gm_report_ctx *c, const struct gm_snapshot_device *sd,
                        const struct gm_layout_history *h, const struct gm_lod_axis *ax)
{
    struct gm_json *w = c->w;
    size_t nl = 0, cap = h->n_initial + h->n_changes + 1;
    struct life *lv = gm_malloc(cap * sizeof(*lv));
    size_t *open = gm_malloc((h->n_segments + 1) * sizeof(*open)); /* per id: its open life */
    double *xs = gm_malloc((h->n_changes + 1) * sizeof(*xs));
    uint64_t *mapped = gm_calloc(h->n_segments + 1, sizeof(*mapped));
    struct gm_lod *lods = gm_calloc(h->n_segments + 1, sizeof(*lods));

    gm_json_key(w, "segtl");
    if (!lv || !open || !xs || !mapped || !lods) {
        c->nomem = true;
        gm_json_null(w);
        goto out;
    }
    /* the x of every change (events of the trace), in one pass at most */
    {
        int64_t *ks = gm_malloc((h->n_changes + 1) * sizeof(*ks));
        for (size_t i = 0; ks && i < h->n_changes; i++)
            ks[i] = h->changes[i].event;
        if (!ks || gm_lod_axis_xs(ax, ks, xs, h->n_changes, NULL) != GM_OK)
            c->nomem = true;
        for (size_t i = 0; ks && i < h->n_changes; i++)
            if (ks[i] >= (int64_t)sd->n_events)
                xs[i] = ax->x_end;
        gm_free(ks);
    }
    for (size_t i = 0; i < h->n_segments; i++) {
        open[i] = SIZE_MAX;
        if (h->segments[i].is_expandable &&
            gm_lod_init(&lods[i], 0.0, ax->x_end, SEGTL_BUCKETS, NULL) != GM_OK)
            c->nomem = true;
    }
    for (size_t i = 0; i < h->n_initial && !c->nomem; i++) {
        const struct gm_layout_change *ch = &h->initial[i];
        mapped[ch->segment] += ch->size;
        if (!h->segments[ch->segment].is_expandable && open[ch->segment] == SIZE_MAX) {
            open[ch->segment] = nl;
            lv[nl++] = (struct life){ch->segment, -1, -1, 0};
        }
        if (!h->segments[ch->segment].is_expandable)
            lv[open[ch->segment]].size += ch->size;
    }
    for (size_t i = 0; i < h->n_segments && !c->nomem; i++)
        if (h->segments[i].is_expandable)
            gm_lod_add(&lods[i], 0.0, -1, mapped[i]);
    for (size_t i = 0; i < h->n_changes && !c->nomem; i++) {
        const struct gm_layout_change *ch = &h->changes[i];
        uint32_t id = ch->segment;
        if (ch->op > 0)
            mapped[id] += ch->size;
        else
            mapped[id] = mapped[id] > ch->size ? mapped[id] - ch->size : 0;
        if (h->segments[id].is_expandable) {
            gm_lod_add(&lods[id], xs[i], ch->event, mapped[id]);
        } else if (ch->op > 0 && open[id] == SIZE_MAX) {
            open[id] = nl;
            lv[nl++] = (struct life){id, ch->event, -1, ch->size};
        } else if (ch->op < 0 && open[id] != SIZE_MAX) {
            lv[open[id]].k1 = ch->event;
            open[id] = SIZE_MAX;
        }
    }
    gm_json_begin_object(w);
    /* the largest lives, drawn in address order */
    if (nl > SEGTL_MAX) {
        qsort(lv, nl, sizeof(*lv), cmp_life_size);
        nl = SEGTL_MAX;
    }
    gm_json_key(w, "fixed");
    gm_json_begin_array(w);
    for (size_t i = 0; i < nl && !c->nomem; i++) {
        const struct gm_layout_segment_info *g = &h->segments[lv[i].id];
        gm_json_begin_array(w);
        gm_report_num(w, lv[i].k0 < 0 ? 0.0 : gm_lod_axis_x(ax, lv[i].k0));
        gm_report_num(w, lv[i].k1 < 0 ? ax->x_end : gm_lod_axis_x(ax, lv[i].k1));
        gm_json_u64(w, lv[i].size);
        gm_json_u64(w, g->is_small ? 1u : 0u);
        gm_json_u64(w, g->base);
        gm_json_i64(w, lv[i].k0);
        gm_json_i64(w, lv[i].k1);
        gm_json_end_array(w);
    }
    gm_json_end_array(w);
    gm_json_kv_u64(w, "n_fixed", nl);
    gm_json_kv_u64(w, "buckets", SEGTL_BUCKETS);
    gm_json_key(w, "spaces");
    gm_json_begin_array(w);
    for (size_t i = 0; i < h->n_segments && !c->nomem; i++) {
        const struct gm_layout_segment_info *g = &h->segments[i];
        uint64_t prev = UINT64_MAX;
        if (!g->is_expandable)
            continue;
        gm_lod_finish(&lods[i]);
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "base", g->base);
        gm_json_key(w, "stream");
        gm_report_stream(w, g->stream);
        gm_json_kv_u64(w, "small", g->is_small);
        /* [bucket, most mapped] where it changes */
        gm_json_key(w, "steps");
        gm_json_begin_array(w);
        for (unsigned b = 0; b < SEGTL_BUCKETS; b++) {
            if (lods[i].b[b].max == prev)
                continue;
            prev = lods[i].b[b].max;
            gm_json_begin_array(w);
            gm_json_u64(w, b);
            gm_json_u64(w, prev);
            gm_json_end_array(w);
        }
        gm_json_end_array(w);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_end_object(w);
out:
    for (size_t i = 0; lods && i < h->n_segments; i++)
        gm_lod_release(&lods[i]);
    gm_free(lods);
    gm_free(lv);
    gm_free(open);
    gm_free(xs);
    gm_free(mapped);
}

enum gm_status gm_report_state(struct gm_report_ctx *c, const struct gm_snapshot_device *sd,
                               const struct gm_analysis_device *ad,
                               const struct gm_snapshot_timeline *tl, const struct gm_lod_axis *ax,
                               struct gm_error *err)
{
    struct gm_json *w = c->w;
    /* the analysis's history of the device, else one built here */
    const struct gm_layout_history *kept = gm_analysis_layout_history(ad);
    struct gm_layout_history own;
    const struct gm_layout_history *h = kept;
    enum gm_status st = GM_OK;
    memset(&own, 0, sizeof(own));
    if (!kept)
        h = &own;
    if (!kept && (st = gm_layout_history_build(c->snap, sd, &own, err)) != GM_OK)
        return st;
    write_segtl(c, sd, h, ax);
    write_marks(c, sd, ad, tl);
    gm_json_key(w, "state");
    if (!ad) {
        gm_json_null(w); /* the allocations' lives come from the analysis */
    } else {
        gm_json_begin_object(w);
        st = write_windows(c, sd, ad, h, tl, err);
        gm_json_end_object(w);
    }
    gm_layout_history_release(&own);
    return st;
}
