/* SPDX-License-Identifier: MIT */
/* frames.c - whose code a stack's frames are, and how a stack is shown: the one rule that
 * names "the user frame" for every command and the report (snapshot.h, "frames").
 *
 * A frame is the user's when it is a Python frame of the program's own code: not in the
 * torch package, not in an installed package (site-packages, dist-packages), not the
 * Python standard library, not a frozen or generated module ("<frozen importlib...>").
 * A stack is shown folded: its first user frame, the user frames that called it, the
 * innermost frame ("via": what the user's line called), and a count of the rest (torch
 * internals, C++ frames, library code).  Stacks that would show alike are told apart by
 * the first frame in which they differ (gm_snapshot_stacks_apart()). */
#include "snapshot/snapshot_int.h"

#include "base/path.h"

#include "gpumem/arena.h"
#include "gpumem/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

bool gm_frame_path_in_torch(const char *fn)
{
    return gm_path_has(fn, "/torch/") || gm_path_starts(fn, "torch/");
}

bool gm_frame_path_in_packages(const char *fn)
{
    return gm_path_has(fn, "site-packages") || gm_path_has(fn, "dist-packages");
}

static bool has_python(const char *c, size_t len)
{
    for (size_t i = 0; i + 6 <= len; i++)
        if (!strncasecmp(c + i, "python", 6))
            return true;
    return false;
}

/* The standard library: a folder lib (lib64, Lib) inside a Python's folder or holding one:
 * .../lib/python3.11/... (Linux, macOS, conda, venvs), C:\Python311\Lib\...,
 * C:\py\cpython-3.10-windows\lib\..., and any ...\Lib\... (Windows installs). */
static bool in_stdlib(const char *fn)
{
    const char *c = fn;
    bool after_lib = false, prev_python = false;
    while (*c) {
        const char *e = c;
        size_t len;
        bool is_lib;
        while (*e && !gm_path_is_sep(*e))
            e++;
        len = (size_t)(e - c);
        if (!*e)
            break; /* the file name itself */
        if (after_lib && len >= 6 && !strncasecmp(c, "python", 6))
            return true;
        is_lib = (len == 3 && !strncasecmp(c, "lib", 3)) || (len == 5 && !strncmp(c, "lib64", 5));
        if (is_lib && (prev_python || !strncmp(c, "Lib", 3)))
            return true;
        after_lib = is_lib;
        prev_python = has_python(c, len);
        c = e + 1;
    }
    return false;
}

bool gm_snapshot_file_is_user(const char *filename)
{
    const char *fn = filename ? filename : "";
    return fn[0] != '<' && !gm_frame_path_in_torch(fn) && !gm_frame_path_in_packages(fn) &&
           !in_stdlib(fn);
}

bool gm_snapshot_frame_is_user(const struct gm_snapshot_frame *f)
{
    if (!f->is_python || f->is_noise)
        return false;
    return f->user_known ? f->user_file : gm_snapshot_file_is_user(f->filename);
}

static const struct gm_snapshot_frame *frame_of(const struct gm_snapshot *snap,
                                                const struct gm_snapshot_stack *st, uint32_t i)
{
    return st->frames[i] < snap->n_frames ? &snap->frames[st->frames[i]] : NULL;
}

long gm_snapshot_stack_user_frame(const struct gm_snapshot *snap, uint32_t stack)
{
    const struct gm_snapshot_stack *st;
    long first_clean = -1;
    if (stack >= snap->n_stacks)
        return -1;
    st = &snap->stacks[stack];
    for (uint32_t i = 0; i < st->n_frames; i++) {
        const struct gm_snapshot_frame *f = frame_of(snap, st, i);
        if (!f || f->is_noise)
            continue;
        if (first_clean < 0)
            first_clean = (long)i;
        if (gm_snapshot_frame_is_user(f))
            return (long)i;
    }
    return first_clean;
}

/* Whether stack 'stack' (0: none) has a user frame. */
static bool has_user_frame(const struct gm_snapshot *snap, uint32_t stack)
{
    long u;
    if (!stack || stack >= snap->n_stacks || (u = gm_snapshot_stack_user_frame(snap, stack)) < 0)
        return false;
    return gm_snapshot_frame_is_user(frame_of(snap, &snap->stacks[stack], (uint32_t)u));
}

uint32_t gm_snapshot_event_user_stack(const struct gm_snapshot *snap,
                                      const struct gm_snapshot_event *e)
{
    const struct gm_snapshot_event_extra *x =
        e->extra && e->extra <= snap->n_extras ? &snap->extras[e->extra - 1] : NULL;
    if (x && has_user_frame(snap, x->forward_stack))
        return x->forward_stack;
    if (snap->frame_fx_origin && e->stack < snap->n_stacks) {
        const struct gm_snapshot_stack *st = &snap->stacks[e->stack];
        for (uint32_t i = 0; i < st->n_frames; i++) {
            uint32_t f = st->frames[i];
            if (f < snap->n_frames && has_user_frame(snap, snap->frame_fx_origin[f]))
                return snap->frame_fx_origin[f];
        }
    }
    return e->stack;
}

/* Whether frame i of a stack is shown at all: its Python frames when it has any (the C++
 * frames under them are the interpreter and the operator machinery), else those that are
 * not noise. */
static bool shown(const struct gm_snapshot_frame *f, bool any_py)
{
    return f && (any_py ? f->is_python : !f->is_noise);
}

static bool any_python(const struct gm_snapshot *snap, const struct gm_snapshot_stack *st)
{
    for (uint32_t i = 0; i < st->n_frames; i++) {
        const struct gm_snapshot_frame *f = frame_of(snap, st, i);
        if (f && f->is_python)
            return true;
    }
    return false;
}

size_t gm_snapshot_stack_frames(const struct gm_snapshot *snap, uint32_t stack, uint32_t *ids,
                                size_t cap)
{
    const struct gm_snapshot_stack *st;
    size_t n = 0;
    bool py;
    if (!snap || stack >= snap->n_stacks)
        return 0;
    st = &snap->stacks[stack];
    py = any_python(snap, st);
    for (uint32_t i = 0; i < st->n_frames; i++) {
        if (!shown(frame_of(snap, st, i), py))
            continue;
        if (n < cap)
            ids[n] = st->frames[i];
        n++;
    }
    return n;
}

static bool starts(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

/* A C++-only stack (no Python frames recorded, as with stacks="cpp" or an autograd engine
 * thread) is named by its ATen operator and the autograd node that ran it. */
static void cpp_view(const struct gm_snapshot *snap, const struct gm_snapshot_stack *st,
                     struct gm_snapshot_stack_view *v)
{
    long op = -1, node = -1;
    for (uint32_t i = 0; i < st->n_frames; i++) {
        const struct gm_snapshot_frame *f = frame_of(snap, st, i);
        if (!f || f->is_noise)
            continue;
        if (op < 0 && starts(f->name, "at::_ops::"))
            op = (long)i;
        if (node < 0 && starts(f->name, "torch::autograd::generated::") &&
            strstr(f->name, "::apply("))
            node = (long)i;
    }
    if (op >= 0 || node >= 0) {
        v->first = op >= 0 ? op : node;
        if (op >= 0 && node >= 0)
            v->callers[v->n_callers++] = node;
    }
}

void gm_snapshot_stack_view(const struct gm_snapshot *snap, uint32_t stack,
                            struct gm_snapshot_stack_view *v)
{
    const struct gm_snapshot_stack *st;
    uint32_t n_shown = 0, n_visible = 0;
    bool py;
    memset(v, 0, sizeof(*v));
    v->first = v->via = -1;
    if (!snap || stack >= snap->n_stacks || !snap->stacks[stack].n_frames)
        return;
    st = &snap->stacks[stack];
    py = any_python(snap, st);
    v->first = gm_snapshot_stack_user_frame(snap, stack);
    if (v->first < 0)
        return;
    v->first_is_user = gm_snapshot_frame_is_user(frame_of(snap, st, (uint32_t)v->first));
    if (!py) {
        cpp_view(snap, st, v);
    } else {
        /* the innermost shown frame, when the user's line called into a library */
        for (uint32_t i = 0; i < (uint32_t)v->first; i++)
            if (shown(frame_of(snap, st, i), py)) {
                v->via = (long)i;
                break;
            }
        for (uint32_t i = (uint32_t)v->first + 1;
             i < st->n_frames && v->n_callers < GM_SNAPSHOT_VIEW_CALLERS; i++) {
            const struct gm_snapshot_frame *f = frame_of(snap, st, i);
            if (f && gm_snapshot_frame_is_user(f))
                v->callers[v->n_callers++] = (long)i;
        }
    }
    for (uint32_t i = 0; i < st->n_frames; i++) {
        const struct gm_snapshot_frame *f = frame_of(snap, st, i);
        if (f && !f->is_noise)
            n_visible++;
    }
    n_shown = 1 + (v->via >= 0) + (uint32_t)v->n_callers;
    v->n_folded = n_visible > n_shown ? n_visible - n_shown : 0;
}

/* ---- telling stacks apart ---- */

static bool same_frame(const struct gm_snapshot_frame *a, const struct gm_snapshot_frame *b)
{
    if (!a || !b)
        return a == b;
    return a->line == b->line && !strcmp(a->name, b->name) && !strcmp(a->filename, b->filename);
}

static const struct gm_snapshot_frame *ref_frame(const struct gm_snapshot_stack_ref *r, long i)
{
    const struct gm_snapshot_stack *st;
    if (i < 0 || r->stack >= r->snap->n_stacks)
        return NULL;
    st = &r->snap->stacks[r->stack];
    return (uint32_t)i < st->n_frames ? frame_of(r->snap, st, (uint32_t)i) : NULL;
}

/* Whether two stacks show alike folded with up to 'callers' callers: the same first and
 * via frames and the same callers shown. */
static bool show_alike(const struct gm_snapshot_stack_ref *a,
                       const struct gm_snapshot_stack_view *va,
                       const struct gm_snapshot_stack_ref *b,
                       const struct gm_snapshot_stack_view *vb, size_t callers)
{
    size_t na = va->n_callers < callers ? va->n_callers : callers;
    size_t nb = vb->n_callers < callers ? vb->n_callers : callers;
    if (na != nb || !same_frame(ref_frame(a, va->first), ref_frame(b, vb->first)) ||
        !same_frame(ref_frame(a, va->via), ref_frame(b, vb->via)))
        return false;
    for (size_t i = 0; i < na; i++)
        if (!same_frame(ref_frame(a, va->callers[i]), ref_frame(b, vb->callers[i])))
            return false;
    return true;
}

/* Index (in a's stack) of the first non-noise frame, innermost first, in which a and b
 * differ; -1 when one's non-noise frames are the other's. */
static long first_difference(const struct gm_snapshot_stack_ref *a,
                             const struct gm_snapshot_stack_ref *b)
{
    const struct gm_snapshot_stack *sa = &a->snap->stacks[a->stack];
    const struct gm_snapshot_stack *sb = &b->snap->stacks[b->stack];
    uint32_t i = 0, j = 0;
    for (;;) {
        const struct gm_snapshot_frame *fa = NULL, *fb = NULL;
        while (i < sa->n_frames && (!(fa = frame_of(a->snap, sa, i)) || fa->is_noise))
            i++;
        while (j < sb->n_frames && (!(fb = frame_of(b->snap, sb, j)) || fb->is_noise))
            j++;
        if (i >= sa->n_frames)
            return -1;
        if (j >= sb->n_frames || !same_frame(fa, fb))
            return (long)i;
        i++;
        j++;
    }
}

static uint64_t frame_hash(const struct gm_snapshot_frame *f, uint64_t h)
{
    if (!f)
        return gm_hash_mix(h ^ 0x9e3779b97f4a7c15ULL);
    h = gm_hash_bytes(f->filename, strlen(f->filename), h);
    h = gm_hash_bytes(f->name, strlen(f->name), h);
    return gm_hash_mix(h ^ (uint64_t)f->line);
}

/* A hash of what a stack shows (equal for stacks that show alike). */
static uint64_t view_hash(const struct gm_snapshot_stack_ref *r,
                          const struct gm_snapshot_stack_view *v, size_t callers)
{
    uint64_t h = frame_hash(ref_frame(r, v->first), 1);
    h = frame_hash(ref_frame(r, v->via), h);
    for (size_t i = 0; i < v->n_callers && i < callers; i++)
        h = frame_hash(ref_frame(r, v->callers[i]), h);
    return h;
}

/* Stacks that read alike compared pair by pair up to this many (beyond: with neighbours in
 * the order of their frames). */
#define APART_ALL_PAIRS 64

struct keyed {
    uint64_t hash;
    size_t i;
};

static int cmp_keyed(const void *pa, const void *pb)
{
    const struct keyed *a = pa, *b = pb;
    if (a->hash != b->hash)
        return a->hash < b->hash ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

/* Order of two stacks by their non-noise frames, innermost first (filename, line, name). */
static int cmp_frames(const struct gm_snapshot_stack_ref *a, const struct gm_snapshot_stack_ref *b)
{
    const struct gm_snapshot_stack *sa = &a->snap->stacks[a->stack];
    const struct gm_snapshot_stack *sb = &b->snap->stacks[b->stack];
    uint32_t i = 0, j = 0;
    for (;;) {
        const struct gm_snapshot_frame *fa = NULL, *fb = NULL;
        int c;
        while (i < sa->n_frames && (!(fa = frame_of(a->snap, sa, i)) || fa->is_noise))
            i++;
        while (j < sb->n_frames && (!(fb = frame_of(b->snap, sb, j)) || fb->is_noise))
            j++;
        if (i >= sa->n_frames || j >= sb->n_frames)
            return (i < sa->n_frames) - (j < sb->n_frames);
        if ((c = strcmp(fa->filename, fb->filename)) != 0 || (c = strcmp(fa->name, fb->name)) != 0)
            return c;
        if (fa->line != fb->line)
            return fa->line < fb->line ? -1 : 1;
        i++;
        j++;
    }
}

/* Sort v[0..n) by the frames of their stacks (a merge sort: qsort() has no context). */
static void sort_by_frames(const struct gm_snapshot_stack_ref *refs, struct keyed *v, size_t n)
{
    struct keyed *tmp;
    if (n < 2 || !(tmp = gm_malloc(n * sizeof(*tmp))))
        return;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t a = lo, b = mid, o = lo;
            while (a < mid || b < hi)
                tmp[o++] = b >= hi || (a < mid && cmp_frames(&refs[v[a].i], &refs[v[b].i]) <= 0)
                               ? v[a++]
                               : v[b++];
        }
        memcpy(v, tmp, n * sizeof(*v));
    }
    gm_free(tmp);
}

void gm_snapshot_stacks_apart(const struct gm_snapshot_stack_ref *refs, size_t n, size_t callers,
                              long *apart)
{
    struct gm_snapshot_stack_view *views = gm_malloc((n ? n : 1) * sizeof(*views));
    struct keyed *k = gm_malloc((n ? n : 1) * sizeof(*k));
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        apart[i] = -1;
    if (!views || !k) {
        gm_free(views);
        gm_free(k);
        return; /* nothing told apart: the stacks are still listed, only alike */
    }
    for (size_t i = 0; i < n; i++) {
        if (refs[i].stack >= refs[i].snap->n_stacks)
            continue;
        gm_snapshot_stack_view(refs[i].snap, refs[i].stack, &views[i]);
        k[m].hash = view_hash(&refs[i], &views[i], callers);
        k[m++].i = i;
    }
    /* Only stacks with the same hash can show alike: compare within those runs, which are
     * short, so that thousands of stacks cost a sort. */
    qsort(k, m, sizeof(*k), cmp_keyed);
    for (size_t lo = 0, hi; lo < m; lo = hi) {
        for (hi = lo + 1; hi < m && k[hi].hash == k[lo].hash; hi++)
            ;
        /* few: every pair; many: sorted by their frames, the stack a stack shares the most
         * frames with is a neighbour */
        bool all_pairs = hi - lo <= APART_ALL_PAIRS;
        if (!all_pairs)
            sort_by_frames(refs, k + lo, hi - lo);
        for (size_t x = lo; x < hi; x++) {
            size_t i = k[x].i, y0 = all_pairs || x == lo ? lo : x - 1;
            size_t y1 = all_pairs || x + 2 > hi ? hi : x + 2;
            for (size_t y = y0; y < y1; y++) {
                size_t j = k[y].i;
                long d;
                if (y == x || !show_alike(&refs[i], &views[i], &refs[j], &views[j], callers))
                    continue;
                /* where it parts from the stack that reads alike and shares the most with it */
                d = first_difference(&refs[i], &refs[j]);
                if (d > apart[i])
                    apart[i] = d;
            }
        }
    }
    gm_free(views);
    gm_free(k);
}

size_t gm_snapshot_unique_stacks(const struct gm_snapshot *snap)
{
    return snap->n_stacks > 0 ? snap->n_stacks - 1 : 0;
}

char *gm_snapshot_frame_text(char *buf, size_t n, const struct gm_snapshot_frame *f)
{
    char raw[1024];
    if (f->filename[0] && strcmp(f->filename, "??"))
        snprintf(raw, sizeof(raw), "%s (%s:%lld)", f->name, f->filename, (long long)f->line);
    else
        snprintf(raw, sizeof(raw), "%s", f->name[0] ? f->name : "??");
    return gm_text_escape(buf, n, raw);
}
