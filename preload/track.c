/* SPDX-License-Identifier: MIT */
/* track.c - what the interposer knows: live allocations, VMM handles and mappings, the
 * resources measured by a bracket (contexts, modules, graphs) and pools, in four sharded
 * hash tables; counters per device, object and kind; attribution of a call to a loaded
 * object; the largest allocations with their stacks.
 *
 * Concurrency: nothing here takes a process-wide lock on the path of an allocation.  A
 * table is 64 shards, each an open-addressing table (linear probing, tombstones, doubled
 * at a load of 1/2) under its own mutex, chosen by the key's hash; counters are atomics;
 * the caller cache is an insert-only lock-free table.  The library's one hash map
 * (src/base) is single-threaded and lives in a library this interposer must not load, so
 * these tables are its own.  The object list and the largest allocations take a mutex only
 * on their rare slow paths (a new object, a new largest allocation).
 *
 * Attribution: the return address of the wrapper is the caller, unless it lies in an object
 * that passes calls through (the CUDA runtime, the driver, this interposer): then the stack
 * is unwound (_Unwind_Backtrace, frame by frame, stopping there) to the first frame outside
 * them; the largest allocations keep their whole stack (backtrace(), warmed up at
 * activation).  A return address is resolved to its object with dladdr() once, then cached
 * by address. */
#define _GNU_SOURCE
#include "preload.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <stdlib.h>
#include <string.h>
#include <unwind.h>

struct acct account;

/* ---- sharded tables ---- */

#define SHARDS 64

struct shard {
    pthread_mutex_t mu;
    struct acct_live *slot;
    uint32_t cap;  /* power of two, 0 before the first insertion */
    uint32_t used; /* full + deleted slots */
};

struct table {
    struct shard shard[SHARDS];
};

static struct table t_alloc;  /* allocations by address */
static struct table t_handle; /* VMM handles */
static struct table t_map;    /* VMM mappings by address */
static struct table t_res;    /* contexts, modules, graphs, pools, reserved ranges by handle */
static struct table *const tables[] = {&t_alloc, &t_handle, &t_map, &t_res};

static uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
}

static struct shard *shard_of(struct table *t, uint64_t key, uint64_t *h)
{
    *h = mix(key);
    return &t->shard[*h & (SHARDS - 1)];
}

/* The slot of 'key' in 's' (full), or where it would go; NULL when the shard is empty. */
static struct acct_live *probe(struct shard *s, uint64_t h, uint64_t key, bool for_insert)
{
    struct acct_live *tomb = NULL;
    if (!s->cap)
        return NULL;
    for (uint32_t i = (uint32_t)(h >> 6) & (s->cap - 1), n = 0; n < s->cap;
         i = (i + 1) & (s->cap - 1), n++) {
        struct acct_live *e = &s->slot[i];
        if (e->state == 0)
            return for_insert && tomb ? tomb : for_insert ? e : NULL;
        if (e->state == 2) {
            if (!tomb)
                tomb = e;
            continue;
        }
        if (e->key == key)
            return e;
    }
    return for_insert ? tomb : NULL;
}

/* Double (or first allocate) a shard's slots; false when memory runs out. */
static bool grow(struct shard *s)
{
    uint32_t cap = s->cap ? s->cap * 2 : 64;
    struct acct_live *old = s->slot, *slot = calloc(cap, sizeof(*slot));
    uint32_t old_cap = s->cap;
    if (!slot)
        return false;
    s->slot = slot;
    s->cap = cap;
    s->used = 0;
    for (uint32_t i = 0; i < old_cap; i++) {
        if (old[i].state == 1) {
            struct acct_live *e = probe(s, mix(old[i].key), old[i].key, true);
            *e = old[i];
            s->used++;
        }
    }
    free(old);
    return true;
}

/* Insert (or replace) 'e'.  *replaced receives an entry of the same key that was there (a
 * release the interposer did not see).  false: no memory (the caller disables accounting). */
static bool table_put(struct table *t, const struct acct_live *e, struct acct_live *replaced,
                      bool *had)
{
    uint64_t h;
    struct shard *s = shard_of(t, e->key, &h);
    struct acct_live *slot;
    bool ok = true;
    uint64_t n = atomic_fetch_add(&account.n_inserts, 1) + 1;
    *had = false;
    if (account.fail_insert_at > 0 && n == (uint64_t)account.fail_insert_at)
        return false;
    pthread_mutex_lock(&s->mu);
    if ((uint64_t)(s->used + 1) * 2 > s->cap && !grow(s)) {
        ok = false;
    } else {
        slot = probe(s, h, e->key, true);
        if (slot->state == 1) {
            *replaced = *slot;
            *had = true;
        } else {
            s->used += slot->state == 0;
        }
        *slot = *e;
        slot->state = 1;
    }
    pthread_mutex_unlock(&s->mu);
    return ok;
}

/* Find 'key': true and *out filled when it is there; with 'take', remove it too. */
static bool table_find(struct table *t, uint64_t key, struct acct_live *out, bool take)
{
    uint64_t h;
    struct shard *s = shard_of(t, key, &h);
    struct acct_live *e;
    pthread_mutex_lock(&s->mu);
    e = probe(s, h, key, false);
    if (e) {
        *out = *e;
        if (take)
            e->state = 2;
    }
    pthread_mutex_unlock(&s->mu);
    return e != NULL;
}

static bool table_take(struct table *t, uint64_t key, struct acct_live *out)
{
    return table_find(t, key, out, true);
}

/* Change a VMM handle's mappings by 'delta' and/or mark it released; when it is released
 * and unmapped it leaves the table: true then, *out its last state. */
static bool handle_edit(uint64_t key, int delta, bool release, struct acct_live *out, bool *found)
{
    uint64_t h;
    struct shard *s = shard_of(&t_handle, key, &h);
    struct acct_live *e;
    bool gone = false;
    pthread_mutex_lock(&s->mu);
    e = probe(s, h, key, false);
    *found = e != NULL;
    if (e) {
        if (delta < 0 && e->maps > 0)
            e->maps--;
        else if (delta > 0)
            e->maps++;
        if (release)
            e->released = 1;
        if (e->released && e->maps == 0) {
            *out = *e;
            e->state = 2;
            gone = true;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return gone;
}

void acct_track_lock_all(void)
{
    for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
        for (int i = 0; i < SHARDS; i++)
            pthread_mutex_lock(&tables[t]->shard[i].mu);
    pthread_mutex_lock(&account.obj_lock);
    pthread_mutex_lock(&account.big_lock);
}

void acct_track_unlock_all(void)
{
    pthread_mutex_unlock(&account.big_lock);
    pthread_mutex_unlock(&account.obj_lock);
    for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
        for (int i = 0; i < SHARDS; i++)
            pthread_mutex_unlock(&tables[t]->shard[i].mu);
}

void acct_track_reinit_locks(void)
{
    for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
        for (int i = 0; i < SHARDS; i++)
            pthread_mutex_init(&tables[t]->shard[i].mu, NULL);
    pthread_mutex_init(&account.obj_lock, NULL);
    pthread_mutex_init(&account.big_lock, NULL);
    pthread_mutex_init(&account.slow_lock, NULL);
}

/* ---- objects and attribution ---- */

#define CALLERS 4096
/* return address << 16 | (object + 1); 0 empty.  User-space addresses fit in 48 bits. */
static _Atomic uint64_t callers[CALLERS];

/* The object id of the loaded object at 'path' (interned). */
static uint32_t intern(const char *path, uintptr_t base)
{
    uint32_t n = atomic_load_explicit(&account.n_objects, memory_order_acquire), id;
    for (uint32_t i = 2; i < n; i++)
        if (account.objects[i].base == base && !strcmp(account.objects[i].path, path))
            return i;
    pthread_mutex_lock(&account.obj_lock);
    n = atomic_load(&account.n_objects);
    for (id = 2; id < n; id++)
        if (account.objects[id].base == base && !strcmp(account.objects[id].path, path))
            break;
    if (id == n) {
        if (n >= ACCT_MAX_OBJ) {
            id = ACCT_OBJ_FULL;
        } else {
            struct acct_object *o = &account.objects[n];
            size_t len = strlen(path);
            if (len >= sizeof(o->path))
                len = sizeof(o->path) - 1;
            memcpy(o->path, path, len);
            o->path[len] = '\0';
            o->base = base;
            o->lib = gm_account_classify(path);
            o->written = false;
            atomic_store_explicit(&account.n_objects, n + 1, memory_order_release);
        }
    }
    pthread_mutex_unlock(&account.obj_lock);
    return id;
}

static uint32_t object_of(uintptr_t a)
{
    uint64_t h = mix(a), want = (uint64_t)a << 16;
    Dl_info info;
    uint32_t id;
    if (a >> 48)
        return ACCT_OBJ_NONE;
    for (uint32_t i = 0; i < 8; i++) {
        uint64_t v = atomic_load_explicit(&callers[(h + i) & (CALLERS - 1)], memory_order_acquire);
        if (!v)
            break;
        if ((v & ~(uint64_t)0xffff) == want)
            return (uint32_t)(v & 0xffff) - 1;
    }
    if (!dladdr((void *)a, &info) || !info.dli_fname)
        id = ACCT_OBJ_NONE;
    else
        id = intern(info.dli_fname, (uintptr_t)info.dli_fbase);
    for (uint32_t i = 0; i < 8; i++) {
        uint64_t expected = 0;
        _Atomic uint64_t *c = &callers[(h + i) & (CALLERS - 1)];
        if (atomic_compare_exchange_strong(c, &expected, want | (id + 1)) ||
            (expected & ~(uint64_t)0xffff) == want)
            break;
    }
    return id;
}

bool acct_is_self(void *addr)
{
    uint32_t id = object_of((uintptr_t)addr);
    return id >= 2 && id < ACCT_MAX_OBJ && account.objects[id].lib == GM_ACCOUNT_LIB_SELF;
}

static enum gm_account_lib lib_of(uint32_t id)
{
    return id >= 2 && id < ACCT_MAX_OBJ ? account.objects[id].lib
           : id == ACCT_OBJ_FULL        ? GM_ACCOUNT_LIB_OTHER
                                        : GM_ACCOUNT_LIB_UNKNOWN;
}

int acct_stack_start(void *const *frames, int n)
{
    /* a sanitizer's backtrace() interceptor may come before the interposer's own frames */
    int last_self = -1;
    for (int i = 0; i < n; i++) {
        if (acct_is_self(frames[i]))
            last_self = i;
        else if (last_self >= 0)
            break;
    }
    return last_self + 1;
}

/* The walk of acct_attribute(): frames before the interposer's (a sanitizer's) and the
 * interposer's own are skipped, then those that pass calls through; the first other frame
 * ends the walk. */
struct walk {
    bool seen_self;
    int frames;
    uint32_t found;
};

static _Unwind_Reason_Code walk_step(struct _Unwind_Context *ctx, void *arg)
{
    struct walk *w = arg;
    uintptr_t ip = (uintptr_t)_Unwind_GetIP(ctx);
    enum gm_account_lib lib;
    uint32_t id;
    if (!ip || ++w->frames > 64)
        return _URC_END_OF_STACK;
    /* a return address points after the call: -1 stays inside the calling function */
    id = object_of(ip - 1);
    lib = lib_of(id);
    if (lib == GM_ACCOUNT_LIB_SELF)
        w->seen_self = true;
    if (!w->seen_self || gm_account_lib_passes_through(lib))
        return _URC_NO_REASON;
    w->found = id;
    return _URC_END_OF_STACK;
}

uint32_t acct_attribute(void *ra)
{
    struct walk w = {false, 0, ACCT_OBJ_NONE};
    uint32_t id = object_of((uintptr_t)ra);
    if (!gm_account_lib_passes_through(lib_of(id)))
        return id;
    /* unwound frame by frame, and only as far as the caller (glibc's backtrace() would
     * unwind a fixed depth) */
    _Unwind_Backtrace(walk_step, &w);
    return w.found;
}

/* ---- counters ---- */

static struct acct_device *slot_of(int dev)
{
    if (dev == ACCT_HOST)
        return &account.dev[ACCT_HOST];
    if (dev < 0 || dev >= ACCT_MAX_DEV) {
        atomic_fetch_add(&account.n_other_devices, 1);
        return NULL;
    }
    return &account.dev[dev];
}

static void tracked_add(struct acct_device *d, int64_t delta)
{
    uint64_t now, peak;
    if (delta >= 0)
        now = atomic_fetch_add(&d->tracked, (uint64_t)delta) + (uint64_t)delta;
    else
        now = atomic_fetch_sub(&d->tracked, (uint64_t)-delta) - (uint64_t)-delta;
    peak = atomic_load_explicit(&d->tracked_peak, memory_order_relaxed);
    while (now > peak) {
        if (atomic_compare_exchange_weak(&d->tracked_peak, &peak, now)) {
            atomic_store_explicit(&d->tracked_peak_t, acct_now(), memory_order_relaxed);
            break;
        }
    }
}

static uint64_t rounding_of(struct acct_device *d, enum gm_account_kind kind, uint64_t bytes)
{
    uint64_t g = d->gran ? d->gran : (uint64_t)2 << 20;
    if (!gm_account_kind_rounded(kind) || !bytes)
        return 0;
    return (bytes + g - 1) / g * g - bytes;
}

/* Add (sign +1) or remove (-1) an allocation from its device's counters. */
static void count(const struct acct_live *e, int sign)
{
    struct acct_device *d = slot_of(e->dev);
    uint32_t obj = e->obj < ACCT_MAX_OBJ ? e->obj : ACCT_OBJ_FULL;
    uint64_t r;
    if (!d)
        return;
    if (sign > 0) {
        uint32_t used = atomic_load_explicit(&d->n_obj_used, memory_order_relaxed);
        while (obj + 1 > used && !atomic_compare_exchange_weak(&d->n_obj_used, &used, obj + 1))
            ;
        atomic_store_explicit(&d->touched, true, memory_order_relaxed);
        atomic_fetch_add(&d->bytes[obj][e->kind], e->bytes);
        atomic_fetch_add(&d->count[obj][e->kind], 1);
    } else {
        atomic_fetch_sub(&d->bytes[obj][e->kind], e->bytes);
        atomic_fetch_sub(&d->count[obj][e->kind], 1);
    }
    if (e->dev == ACCT_HOST || !gm_account_kind_in_equation((enum gm_account_kind)e->kind))
        return;
    r = rounding_of(d, (enum gm_account_kind)e->kind, e->bytes);
    if (sign > 0)
        atomic_fetch_add(&d->rounding, r);
    else
        atomic_fetch_sub(&d->rounding, r);
    tracked_add(d, sign * (int64_t)(e->bytes + r));
}

static void event(uint8_t op, const struct acct_live *e, uint64_t bytes)
{
    struct acct_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.t = e->t ? e->t : acct_now();
    ev.addr = e->key;
    ev.bytes = bytes;
    ev.obj = e->obj;
    ev.dev = e->dev;
    ev.op = op;
    ev.kind = e->kind;
    ev.api = e->api;
    ev.source = e->source;
    acct_event_push(&ev);
}

/* Keep the stack of an allocation among the largest ones. */
static void maybe_big(const struct acct_live *e, void *ra)
{
    struct acct_big *b;
    unsigned min = 0;
    if (!account.n_big_max ||
        e->bytes <= atomic_load_explicit(&account.big_floor, memory_order_relaxed))
        return;
    pthread_mutex_lock(&account.big_lock);
    if (account.n_big < account.n_big_max) {
        b = &account.big[account.n_big++];
    } else {
        for (unsigned i = 1; i < account.n_big; i++)
            if (account.big[i].bytes < account.big[min].bytes)
                min = i;
        b = &account.big[min];
        if (e->bytes <= b->bytes) {
            pthread_mutex_unlock(&account.big_lock);
            return;
        }
    }
    memset(b, 0, sizeof(*b));
    b->t = e->t;
    b->addr = e->key;
    b->bytes = e->bytes;
    b->obj = e->obj;
    b->dev = e->dev;
    b->kind = e->kind;
    b->api = e->api;
    b->n_frames = backtrace(b->frames, ACCT_STACK);
    if (b->n_frames <= 0) {
        b->frames[0] = ra;
        b->n_frames = 1;
    }
    if (account.n_big == account.n_big_max) {
        uint64_t floor = account.big[0].bytes;
        for (unsigned i = 1; i < account.n_big; i++)
            if (account.big[i].bytes < floor)
                floor = account.big[i].bytes;
        atomic_store(&account.big_floor, floor);
    }
    pthread_mutex_unlock(&account.big_lock);
}

/* A new allocation or VMM handle in table 't': credited, counted, queued, maybe kept with its
 * stack. */
static void track_new(struct table *t, enum gm_account_kind kind, uint8_t api, int dev,
                      uint64_t key, uint64_t bytes, void *ra)
{
    struct acct_live e, old;
    bool had;
    if (dev != ACCT_HOST && (dev < 0 || dev >= ACCT_MAX_DEV)) {
        atomic_fetch_add(&account.n_other_devices, 1);
        return;
    }
    if (dev != ACCT_HOST)
        acct_device(dev);
    memset(&e, 0, sizeof(e));
    e.key = key;
    e.bytes = bytes;
    e.t = acct_now();
    e.obj = acct_attribute(ra);
    e.dev = (int16_t)dev;
    e.kind = (uint8_t)kind;
    e.api = api;
    if (!table_put(t, &e, &old, &had)) {
        acct_disable(t == &t_alloc ? "out of memory in the allocation table"
                                   : "out of memory in the VMM handle table");
        return;
    }
    if (had)
        count(&old, -1);
    count(&e, +1);
    event(ACCT_OP_ALLOC, &e, bytes);
    maybe_big(&e, ra);
}

void acct_track_alloc(enum gm_account_kind kind, uint8_t api, int dev, uint64_t addr,
                      uint64_t bytes, void *ra)
{
    track_new(&t_alloc, kind, api, dev, addr, bytes, ra);
}

bool acct_track_free(uint64_t addr, unsigned kinds, uint8_t api, struct acct_live *undo)
{
    struct acct_live e;
    if (!table_take(&t_alloc, addr, &e)) {
        atomic_fetch_add(&account.n_unknown_frees, 1);
        return false;
    }
    if (!(kinds & (1u << e.kind))) {
        /* not this call's kind (cuMemFreeHost of device memory): the driver will refuse */
        bool had;
        struct acct_live old;
        table_put(&t_alloc, &e, &old, &had);
        return false;
    }
    *undo = e;
    count(&e, -1);
    e.t = acct_now();
    e.api = api;
    event(ACCT_OP_FREE, &e, e.bytes);
    return true;
}

void acct_track_restore(const struct acct_live *undo)
{
    struct acct_live old;
    bool had;
    if (table_put(&t_alloc, undo, &old, &had))
        count(undo, +1);
}

void acct_track_vmm_create(CUmemGenericAllocationHandle h, uint64_t bytes, int dev, uint8_t api,
                           void *ra)
{
    track_new(&t_handle, GM_ACCOUNT_KIND_VMM, api, dev < 0 ? ACCT_MAX_DEV + 1 : dev, h, bytes, ra);
}

static void vmm_gone(struct acct_live *e, uint8_t op)
{
    count(e, -1);
    e->t = acct_now();
    event(op, e, e->bytes);
}

void acct_track_vmm_release(CUmemGenericAllocationHandle h, uint8_t api)
{
    struct acct_live e;
    bool found;
    if (handle_edit(h, 0, true, &e, &found)) {
        e.api = api;
        vmm_gone(&e, ACCT_OP_FREE);
    } else if (!found) {
        atomic_fetch_add(&account.n_unknown_frees, 1);
    }
}

void acct_track_vmm_map(uint64_t va, uint64_t size, CUmemGenericAllocationHandle h)
{
    struct acct_live m, old, gone;
    bool had, found;
    memset(&m, 0, sizeof(m));
    m.key = va;
    m.bytes = size;
    m.aux = h;
    if (!table_put(&t_map, &m, &old, &had)) {
        acct_disable("out of memory in the VMM mapping table");
        return;
    }
    if (had)
        (void)handle_edit(old.aux, -1, false, &gone, &found);
    (void)handle_edit(h, +1, false, &gone, &found);
}

void acct_track_vmm_unmap(uint64_t va, uint64_t size, uint8_t api)
{
    /* a range may hold many mappings (PyTorch unmaps runs of pages at once): look them up
     * at each granule of the range */
    uint64_t g = (uint64_t)2 << 20, end = va + size;
    for (int i = 0; i < ACCT_MAX_DEV; i++)
        if (account.dev[i].gran && account.dev[i].gran < g)
            g = account.dev[i].gran;
    for (uint64_t a = va; a < end && a >= va;) {
        struct acct_live m, e;
        bool found;
        if (!table_take(&t_map, a, &m)) {
            a += g;
            continue;
        }
        if (handle_edit(m.aux, -1, false, &e, &found)) {
            e.api = api;
            vmm_gone(&e, ACCT_OP_FREE);
        }
        a += m.bytes ? m.bytes : g;
    }
}

void acct_track_reserve(uint64_t va, uint64_t size, int dev, uint8_t api, void *ra)
{
    struct acct_live e, old;
    bool had;
    struct acct_device *d = slot_of(dev < 0 ? 0 : dev);
    memset(&e, 0, sizeof(e));
    e.key = va;
    e.bytes = size;
    e.t = acct_now();
    e.obj = acct_attribute(ra);
    e.dev = (int16_t)(dev < 0 ? 0 : dev);
    e.api = api;
    e.what = 0xff; /* an address range, not an enum acct_res */
    if (!d || !table_put(&t_res, &e, &old, &had)) {
        if (d)
            acct_disable("out of memory in the resource table");
        return;
    }
    atomic_fetch_add(&d->virt, size);
    atomic_store(&d->touched, true);
    event(ACCT_OP_RESERVE, &e, size);
}

void acct_track_unreserve(uint64_t va, uint8_t api)
{
    struct acct_live e;
    struct acct_device *d;
    if (!table_take(&t_res, va, &e))
        return;
    if ((d = slot_of(e.dev)) != NULL)
        atomic_fetch_sub(&d->virt, e.bytes);
    e.t = acct_now();
    e.api = api;
    event(ACCT_OP_RESERVE_END, &e, e.bytes);
}

/* The counters of a measured resource kind on a device. */
static void res_counters(struct acct_device *d, enum acct_res what, _Atomic uint64_t **bytes,
                         _Atomic uint64_t **n, _Atomic unsigned **src)
{
    switch (what) {
    case ACCT_RES_CONTEXT:
        *bytes = &d->ctx, *n = &d->n_ctx, *src = &d->ctx_src;
        break;
    case ACCT_RES_MODULE:
        *bytes = &d->mod, *n = &d->n_mod, *src = &d->mod_src;
        break;
    default:
        *bytes = &d->graph, *n = &d->n_graph, *src = &d->graph_src;
        break;
    }
}

static uint8_t res_op(enum acct_res what, bool end)
{
    switch (what) {
    case ACCT_RES_CONTEXT:
        return end ? ACCT_OP_CONTEXT_END : ACCT_OP_CONTEXT;
    case ACCT_RES_MODULE:
        return end ? ACCT_OP_MODULE_END : ACCT_OP_MODULE;
    case ACCT_RES_GRAPH:
        return end ? ACCT_OP_GRAPH_END : ACCT_OP_GRAPH;
    default:
        return end ? ACCT_OP_POOL_END : ACCT_OP_POOL;
    }
}

static void res_count(struct acct_device *d, enum acct_res what, uint64_t bytes,
                      enum gm_account_reading source, int sign)
{
    _Atomic uint64_t *b, *n;
    _Atomic unsigned *src;
    if (what == ACCT_RES_POOL)
        return;
    res_counters(d, what, &b, &n, &src);
    if (sign > 0) {
        atomic_fetch_add(b, bytes);
        atomic_fetch_add(n, 1);
        atomic_fetch_or(src, 1u << source);
        atomic_store(&d->touched, true);
    } else {
        atomic_fetch_sub(b, bytes);
        atomic_fetch_sub(n, 1);
    }
    tracked_add(d, sign * (int64_t)bytes);
}

void acct_track_resource(enum acct_res what, uint64_t handle, int dev, uint64_t bytes,
                         enum gm_account_reading source, uint8_t api, void *ra)
{
    struct acct_live e, old;
    bool had;
    struct acct_device *d = dev >= 0 && dev < ACCT_MAX_DEV ? &account.dev[dev] : NULL;
    memset(&e, 0, sizeof(e));
    e.key = handle;
    e.bytes = d ? bytes : 0;
    e.t = acct_now();
    e.obj = acct_attribute(ra);
    e.dev = (int16_t)(d ? dev : -1);
    e.api = api;
    e.what = (uint8_t)what;
    e.source = (uint8_t)source;
    if (!table_put(&t_res, &e, &old, &had)) {
        acct_disable("out of memory in the resource table");
        return;
    }
    if (had && old.dev >= 0 && old.what == what)
        res_count(&account.dev[old.dev], what, old.bytes, GM_ACCOUNT_READING_NONE, -1);
    if (d)
        res_count(d, what, e.bytes, source, +1);
    event(res_op(what, false), &e, e.bytes);
}

bool acct_track_resource_end(enum acct_res what, uint64_t handle, uint8_t api, int *dev)
{
    struct acct_live e;
    if (!table_take(&t_res, handle, &e))
        return false;
    if (dev)
        *dev = e.dev;
    if (e.dev >= 0 && e.dev < ACCT_MAX_DEV)
        res_count(&account.dev[e.dev], what, e.bytes, GM_ACCOUNT_READING_NONE, -1);
    e.t = acct_now();
    e.api = api;
    event(res_op(what, true), &e, e.bytes);
    return true;
}

int acct_resource_device(uint64_t handle)
{
    struct acct_live e;
    return table_find(&t_res, handle, &e, false) ? e.dev : -1;
}

void acct_track_primary(int dev, bool retain, uint64_t bytes, enum gm_account_reading source,
                        uint8_t api, void *ra)
{
    struct acct_device *d = dev >= 0 && dev < ACCT_MAX_DEV ? &account.dev[dev] : NULL;
    struct acct_live e;
    if (!d)
        return;
    memset(&e, 0, sizeof(e));
    e.key = (uint64_t)dev;
    e.bytes = bytes;
    e.t = acct_now();
    e.obj = acct_attribute(ra);
    e.dev = (int16_t)dev;
    e.source = (uint8_t)source;
    e.api = api;
    res_count(d, ACCT_RES_CONTEXT, bytes, source, retain ? +1 : -1);
    event(retain ? ACCT_OP_CONTEXT : ACCT_OP_CONTEXT_END, &e, bytes);
}

void acct_track_reset(void)
{
    for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
        for (int i = 0; i < SHARDS; i++) {
            struct shard *s = &tables[t]->shard[i];
            free(s->slot);
            s->slot = NULL;
            s->cap = s->used = 0;
        }
    }
    /* the devices' facts are kept (the same GPUs); their counters start again */
    for (int i = 0; i <= ACCT_MAX_DEV; i++) {
        struct acct_device *d = &account.dev[i];
        memset(d->bytes, 0, sizeof(d->bytes));
        memset(d->count, 0, sizeof(d->count));
        atomic_store(&d->n_obj_used, 0);
        atomic_store(&d->rounding, 0);
        atomic_store(&d->virt, 0);
        atomic_store(&d->ctx, 0);
        atomic_store(&d->n_ctx, 0);
        atomic_store(&d->mod, 0);
        atomic_store(&d->n_mod, 0);
        atomic_store(&d->graph, 0);
        atomic_store(&d->n_graph, 0);
        atomic_store(&d->ctx_src, 0);
        atomic_store(&d->mod_src, 0);
        atomic_store(&d->graph_src, 0);
        atomic_store(&d->tracked, 0);
        atomic_store(&d->tracked_peak, 0);
        atomic_store(&d->tracked_peak_t, 0);
        atomic_store(&d->last_valid, false);
        atomic_store(&d->touched, false);
        d->primary_refs = 0;
        d->primary_bytes = 0;
        d->info_written = false;
        d->written_any = false;
        d->baseline_valid = false;
        atomic_store(&d->used_source, GM_ACCOUNT_READING_NONE);
    }
    for (uint32_t i = 0; i < ACCT_MAX_OBJ; i++)
        account.objects[i].written = false;
    account.n_big = 0;
    atomic_store(&account.big_floor, 0);
    atomic_store(&account.n_events, 0);
    atomic_store(&account.n_dropped, 0);
    atomic_store(&account.n_unhooked, 0);
    atomic_store(&account.n_unknown_frees, 0);
    atomic_store(&account.n_other_devices, 0);
    atomic_store(&account.inflight, 0);
}
