/* SPDX-License-Identifier: MIT */
/* balance.c - the equation of one device of one process at one moment, from the counters
 * of a sample line:
 *
 *   used = context + modules + graphs + [device memory of each class of objects] + rounding
 *          + not seen
 *
 * in that order.  Device memory counts the kinds the driver keeps on the device for good
 * (gm_account_kind_in_equation(): cuMemAlloc, pitch, stream-ordered, VMM); managed memory
 * and reserved address space are reported beside the equation.  The classes come in the
 * order of enum gm_account_lib; objects of class OTHER are named one by one, the largest
 * first, up to GM_ACCOUNT_MAX_NAMED, the rest summed.  Rounding is what the driver's pages
 * add to cuMemAlloc and pitched allocations.  "Not seen" is the reading less every other
 * term: what no hooked call explains, reported as it is, negative when the terms exceed the
 * reading (memory counted but not resident). */
#include "account/account_int.h"

#include "gpumem/units.h"

#include <stdio.h>
#include <string.h>

/* Sums saturate: a file may hold any integers. */
static int64_t to_i64(uint64_t v)
{
    return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

uint64_t acc_seen(const struct acc_sample *s, const struct acc_object *objects, uint64_t *by_lib)
{
    uint64_t seen =
        gm_add_sat(gm_add_sat(s->context, s->modules), gm_add_sat(s->graphs, s->rounding));
    if (by_lib)
        memset(by_lib, 0, sizeof(uint64_t) * GM_ACCOUNT_LIB__COUNT);
    for (size_t i = 0; i < s->n_mem; i++) {
        if (!gm_account_kind_in_equation(s->mem[i].kind))
            continue;
        seen = gm_add_sat(seen, s->mem[i].bytes);
        if (by_lib) {
            uint64_t *b = &by_lib[acc_object_lib(objects, s->mem[i].object)];
            *b = gm_add_sat(*b, s->mem[i].bytes);
        }
    }
    return seen;
}

static struct gm_account_term *add(struct gm_account_balance *b, enum gm_account_term_kind kind)
{
    struct gm_account_term *t;
    if (b->n_terms == GM_ACCOUNT_MAX_TERMS)
        return NULL;
    t = &b->terms[b->n_terms++];
    memset(t, 0, sizeof(*t));
    t->kind = kind;
    return t;
}

static void measured(struct gm_account_balance *b, enum gm_account_term_kind kind, uint64_t bytes,
                     uint64_t count, enum gm_account_reading source)
{
    struct gm_account_term *t;
    if (!bytes && !count)
        return;
    if ((t = add(b, kind)) != NULL) {
        t->bytes = to_i64(bytes);
        t->count = count;
        t->source = source;
    }
}

/* One object's memory of the kinds in the equation. */
struct per_object {
    uint32_t object;
    enum gm_account_lib lib;
    uint64_t bytes;
    uint64_t calls[GM_ACCOUNT_KIND__COUNT];
};

static void add_to(struct gm_account_term *t, const struct per_object *o)
{
    t->bytes = to_i64(gm_add_sat((uint64_t)t->bytes, o->bytes));
    for (int k = 0; k < GM_ACCOUNT_KIND__COUNT; k++) {
        t->calls[k] = gm_add_sat(t->calls[k], o->calls[k]);
        t->count = gm_add_sat(t->count, o->calls[k]);
    }
}

/* The classes in the equation's order: the unknown caller last, after the other objects. */
static const enum gm_account_lib order[] = {
    GM_ACCOUNT_LIB_TORCH,  GM_ACCOUNT_LIB_NCCL,   GM_ACCOUNT_LIB_CUBLAS,  GM_ACCOUNT_LIB_CUBLASLT,
    GM_ACCOUNT_LIB_CUDNN,  GM_ACCOUNT_LIB_TRITON, GM_ACCOUNT_LIB_OTHER,   GM_ACCOUNT_LIB_RUNTIME,
    GM_ACCOUNT_LIB_DRIVER, GM_ACCOUNT_LIB_SELF,   GM_ACCOUNT_LIB_UNKNOWN,
};
_Static_assert(sizeof(order) / sizeof(order[0]) == GM_ACCOUNT_LIB__COUNT, "every class, once");

void acc_balance(const struct acc_sample *s, const struct acc_object *objects,
                 const struct gm_account_device *dev, struct gm_account_balance *b)
{
    struct per_object per[ACC_MAX_MEM];
    size_t n_per = 0, n_named = 0;
    struct gm_account_term *others = NULL;

    memset(b, 0, sizeof(*b));
    b->valid = true;
    b->at = s->at;
    b->t_ns = s->t_ns;
    b->used_t_ns = s->used_t_ns;
    b->used_valid = s->used_valid;
    b->used = s->used;
    b->used_source = s->used_source;
    b->consistent = s->consistent;
    b->virtual_reserved = s->virt;
    b->granularity = dev->granularity;
    b->granularity_measured = dev->granularity_measured;

    /* the memory of each object, kinds in the equation only */
    for (size_t i = 0; i < s->n_mem; i++) {
        const struct acc_mem *m = &s->mem[i];
        size_t k;
        if (m->kind == GM_ACCOUNT_KIND_MANAGED)
            b->managed = gm_add_sat(b->managed, m->bytes);
        if (!gm_account_kind_in_equation(m->kind) || (!m->bytes && !m->count))
            continue;
        for (k = 0; k < n_per && per[k].object != m->object; k++)
            ;
        if (k == n_per) {
            memset(&per[k], 0, sizeof(per[k]));
            per[k].object = m->object;
            per[k].lib = acc_object_lib(objects, m->object);
            n_per++;
        }
        per[k].bytes = gm_add_sat(per[k].bytes, m->bytes);
        per[k].calls[m->kind] = gm_add_sat(per[k].calls[m->kind], m->count);
    }
    /* OTHER objects by size, the largest first (insertion sort: a few dozen at most) */
    for (size_t i = 1; i < n_per; i++) {
        struct per_object o = per[i];
        size_t j = i;
        for (; j > 0 && per[j - 1].bytes < o.bytes; j--)
            per[j] = per[j - 1];
        per[j] = o;
    }

    measured(b, GM_ACCOUNT_TERM_CONTEXT, s->context, s->n_context, s->context_source);
    measured(b, GM_ACCOUNT_TERM_MODULES, s->modules, s->n_modules, s->modules_source);
    measured(b, GM_ACCOUNT_TERM_GRAPHS, s->graphs, s->n_graphs, s->graphs_source);
    for (size_t c = 0; c < sizeof(order) / sizeof(order[0]); c++) {
        struct gm_account_term *t = NULL;
        enum gm_account_lib cls = order[c];
        for (size_t i = 0; i < n_per; i++) {
            if (per[i].lib != cls)
                continue;
            if (cls == GM_ACCOUNT_LIB_OTHER) {
                if (n_named < GM_ACCOUNT_MAX_NAMED) {
                    if ((t = add(b, GM_ACCOUNT_TERM_LIBRARY)) == NULL)
                        break;
                    t->lib = GM_ACCOUNT_LIB_OTHER;
                    snprintf(t->object, sizeof(t->object), "%s",
                             acc_object_name(objects, per[i].object));
                    n_named++;
                } else {
                    if (!others && (others = add(b, GM_ACCOUNT_TERM_OTHERS)) == NULL)
                        break;
                    others->lib = GM_ACCOUNT_LIB_OTHER;
                    t = others;
                }
                add_to(t, &per[i]);
                continue;
            }
            if (!t) {
                if ((t = add(b, GM_ACCOUNT_TERM_LIBRARY)) == NULL)
                    break;
                t->lib = cls;
                snprintf(t->object, sizeof(t->object), "%s",
                         acc_object_name(objects, per[i].object));
            }
            add_to(t, &per[i]);
        }
    }
    measured(b, GM_ACCOUNT_TERM_ROUNDING, s->rounding, 0, GM_ACCOUNT_READING_NONE);
    b->seen = acc_seen(s, objects, NULL);
    if (b->used_valid) {
        struct gm_account_term *t = add(b, GM_ACCOUNT_TERM_NOT_SEEN);
        if (t)
            t->bytes = b->used >= b->seen ? to_i64(b->used - b->seen) : -to_i64(b->seen - b->used);
    }
}

const char *gm_account_moment_name(enum gm_account_moment m)
{
    switch (m) {
    case GM_ACCOUNT_AT_PEAK:
        return "peak";
    case GM_ACCOUNT_AT_EXIT:
        return "exit";
    case GM_ACCOUNT_AT_SIGNAL:
        return "signal";
    case GM_ACCOUNT_AT_LAST:
        return "last sample";
    }
    return "?";
}

const char *gm_account_term_object(const struct gm_account_term *t)
{
    return t->kind == GM_ACCOUNT_TERM_LIBRARY && t->lib == GM_ACCOUNT_LIB_OTHER && t->object[0]
               ? t->object
               : NULL;
}

const char *gm_account_term_title(const struct gm_account_term *t)
{
    switch (t->kind) {
    case GM_ACCOUNT_TERM_CONTEXT:
        return "context";
    case GM_ACCOUNT_TERM_MODULES:
        return "modules";
    case GM_ACCOUNT_TERM_GRAPHS:
        return "graphs";
    case GM_ACCOUNT_TERM_LIBRARY:
        return gm_account_term_object(t) ? t->object : gm_account_lib_title(t->lib);
    case GM_ACCOUNT_TERM_OTHERS:
        return "other libraries";
    case GM_ACCOUNT_TERM_ROUNDING:
        return "rounding";
    case GM_ACCOUNT_TERM_NOT_SEEN:
        return "not seen by the driver API";
    }
    return "?";
}

/* How a measured term's readings were taken, as words. */
static const char *reading_words(enum gm_account_reading r)
{
    switch (r) {
    case GM_ACCOUNT_READING_NVML_PROCESS:
        return "NVML usedGpuMemory of the process";
    case GM_ACCOUNT_READING_NVML_DEVICE:
        return "NVML device used";
    case GM_ACCOUNT_READING_MEM_GET_INFO:
        return "cuMemGetInfo";
    case GM_ACCOUNT_READING_MIXED:
        return "NVML and cuMemGetInfo";
    case GM_ACCOUNT_READING_NONE:
        break;
    }
    return NULL;
}

static const char *const kind_calls[GM_ACCOUNT_KIND__COUNT] = {
    [GM_ACCOUNT_KIND_DEVICE] = "cuMemAlloc",
    [GM_ACCOUNT_KIND_PITCH] = "cuMemAllocPitch",
    [GM_ACCOUNT_KIND_ASYNC] = "cuMemAllocAsync",
    [GM_ACCOUNT_KIND_VMM] = "cuMemCreate",
    [GM_ACCOUNT_KIND_MANAGED] = "cuMemAllocManaged",
    [GM_ACCOUNT_KIND_HOST] = "cuMemHostAlloc",
    [GM_ACCOUNT_KIND_HOST_REGISTERED] = "cuMemHostRegister",
};

void gm_account_term_source(const struct gm_account_term *t, const struct gm_account_balance *b,
                            char *buf, size_t n)
{
    const char *how = reading_words(t->source);
    const char *what = t->kind == GM_ACCOUNT_TERM_CONTEXT   ? "creation"
                       : t->kind == GM_ACCOUNT_TERM_MODULES ? "load"
                                                            : "instantiation";
    const char *unit = t->kind == GM_ACCOUNT_TERM_CONTEXT   ? "context"
                       : t->kind == GM_ACCOUNT_TERM_MODULES ? "module"
                                                            : "graph";
    size_t len = 0;
    buf[0] = '\0';
    switch (t->kind) {
    case GM_ACCOUNT_TERM_CONTEXT:
    case GM_ACCOUNT_TERM_MODULES:
    case GM_ACCOUNT_TERM_GRAPHS:
        if (how)
            snprintf(buf, n, "measured: %s around each %s (%llu %s%s)", how, what,
                     (unsigned long long)t->count, unit, t->count == 1 ? "" : "s");
        else
            snprintf(buf, n, "not measured: no reading around the %s (%llu %s%s)", what,
                     (unsigned long long)t->count, unit, t->count == 1 ? "" : "s");
        return;
    case GM_ACCOUNT_TERM_LIBRARY:
    case GM_ACCOUNT_TERM_OTHERS:
        for (int k = 0; k < GM_ACCOUNT_KIND__COUNT && len < n; k++) {
            if (!t->calls[k])
                continue;
            len += (size_t)snprintf(buf + len, n - len, "%s%s x%llu", len ? ", " : "",
                                    kind_calls[k], (unsigned long long)t->calls[k]);
        }
        if (len < n && t->kind == GM_ACCOUNT_TERM_LIBRARY && t->lib != GM_ACCOUNT_LIB_OTHER &&
            t->lib != GM_ACCOUNT_LIB_UNKNOWN && t->object[0])
            snprintf(buf + len, n - len, " by %s", t->object);
        return;
    case GM_ACCOUNT_TERM_ROUNDING:
        snprintf(buf, n, "cuMemAlloc and pitch allocations rounded up to %llu KiB pages (%s)",
                 (unsigned long long)(b->granularity >> 10),
                 b->granularity_measured ? "cuMemGetAllocationGranularity" : "assumed");
        return;
    case GM_ACCOUNT_TERM_NOT_SEEN:
        snprintf(buf, n, "%s less every term above",
                 reading_words(b->used_source) ? reading_words(b->used_source) : "device used");
        return;
    }
}
