/* SPDX-License-Identifier: MIT */
/* output.c - the interposer's life and its file: configuration, activation at the first
 * tracked call, the event queue, the JSON lines (schema gpumem.account/1, read by
 * src/account/load.c), the sampler thread, and the end: exit, SIGTERM/SIGINT, fork.
 *
 * Configuration (environment, read by the constructor):
 *   GPUMEM_ACCOUNT_DIR          folder of the per-process files; unset: the interposer does
 *                               nothing at all (every call passes straight through)
 *   GPUMEM_ACCOUNT_INTERVAL_MS  sampling interval (default 100; 0: samples only at the end)
 *   GPUMEM_ACCOUNT_STACKS       largest allocations kept with a stack (default 8, at most 32)
 *   GPUMEM_ACCOUNT_FAIL_AT      tests: fail the Nth table insertion, as if memory ran out
 *   RANK, LOCAL_RANK, WORLD_SIZE  written in the start line and the file's name
 *
 * A process writes account-[rank<R>-][local<L>-]<pid>.jsonl only once it makes a tracked
 * call (processes that never touch the GPU, shells, DataLoader workers, leave no file).
 * Events go through a bounded lock-free queue (a full queue drops events and counts them:
 * the totals are counters, never rebuilt from events) that the sampler thread writes out
 * every interval with a sample line per device; the sample with the highest device used is
 * the peak, so a process killed without warning (SIGKILL, the OOM killer) still leaves its
 * peak and its last state in the file.  Every write is whole lines, formatted without stdio
 * or malloc (a signal handler uses the same code), appended with O_APPEND.
 *
 * The end, written once: at exit() (an atexit handler registered at activation, so it runs
 * before the runtime's own teardown handlers and the driver's destructors), or from a
 * handler of SIGTERM / SIGINT installed only where their action is the default, which
 * writes the counters with the last reading and re-raises the signal.  pthread_atfork
 * keeps the tables consistent across fork(); the child starts afresh (its own file, if it
 * uses the GPU). */
#define _GNU_SOURCE
#include "preload.h"

#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef GM_VERSION_STRING
#define GM_VERSION_STRING "unknown"
#endif

uint64_t acct_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the event queue: a bounded MPMC ring (a sequence number per cell) ---- */

#define RING 16384

struct cell {
    _Atomic uint64_t seq;
    struct acct_event ev;
};

static struct cell ring[RING];
static _Atomic uint64_t ring_head, ring_tail;

static void ring_init(void)
{
    for (uint64_t i = 0; i < RING; i++)
        atomic_store_explicit(&ring[i].seq, i, memory_order_relaxed);
    atomic_store(&ring_head, 0);
    atomic_store(&ring_tail, 0);
}

void acct_event_push(const struct acct_event *e)
{
    uint64_t pos = atomic_load_explicit(&ring_head, memory_order_relaxed);
    for (;;) {
        struct cell *c = &ring[pos & (RING - 1)];
        uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        int64_t dif = (int64_t)(seq - pos);
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&ring_head, &pos, pos + 1,
                                                      memory_order_relaxed, memory_order_relaxed)) {
                c->ev = *e;
                atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
                return;
            }
        } else if (dif < 0) {
            atomic_fetch_add(&account.n_dropped, 1);
            return;
        } else {
            pos = atomic_load_explicit(&ring_head, memory_order_relaxed);
        }
    }
}

/* The one consumer (sampler, exit, signal); false: the queue is someone else's now. */
static bool ring_pop(struct acct_event *e)
{
    uint64_t pos = atomic_load_explicit(&ring_tail, memory_order_relaxed);
    struct cell *c = &ring[pos & (RING - 1)];
    uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
    if ((int64_t)(seq - (pos + 1)) < 0)
        return false;
    *e = c->ev;
    atomic_store_explicit(&ring_tail, pos + 1, memory_order_relaxed);
    atomic_store_explicit(&c->seq, pos + RING, memory_order_release);
    return true;
}

static bool consumer_take(void)
{
    return atomic_exchange(&account.consumer, 1) == 0;
}

static void consumer_give(void)
{
    atomic_store(&account.consumer, 0);
}

/* ---- line formatting: no stdio, no malloc (also used in a signal handler) ---- */

struct out {
    char buf[4096];
    size_t n;
};

static void out_write(const char *p, size_t n)
{
    while (n && account.fd >= 0) {
        ssize_t w = write(account.fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static void out_flush(struct out *o)
{
    out_write(o->buf, o->n);
    o->n = 0;
}

/* Lines are flushed only between lines, so a write never splits one. */
static void out_line_end(struct out *o)
{
    if (o->n < sizeof(o->buf))
        o->buf[o->n++] = '\n';
    if (o->n > sizeof(o->buf) - 1024)
        out_flush(o);
}

static void put(struct out *o, const char *s, size_t n)
{
    if (n > sizeof(o->buf) - o->n - 2)
        n = sizeof(o->buf) - o->n - 2; /* a line never exceeds 3 KiB */
    memcpy(o->buf + o->n, s, n);
    o->n += n;
}

static void puts_(struct out *o, const char *s)
{
    put(o, s, strlen(s));
}

static void put_u64(struct out *o, uint64_t v)
{
    char d[24];
    int n = 0;
    do {
        d[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        put(o, &d[--n], 1);
}

static void put_i64(struct out *o, int64_t v)
{
    if (v < 0) {
        put(o, "-", 1);
        put_u64(o, (uint64_t) - (v + 1) + 1);
    } else {
        put_u64(o, (uint64_t)v);
    }
}

static void put_hex(struct out *o, uint64_t v)
{
    char d[20];
    int n = 0;
    do {
        d[n++] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    put(o, "\"0x", 3);
    while (n)
        put(o, &d[--n], 1);
    put(o, "\"", 1);
}

/* A JSON string: quotes, backslashes and control bytes escaped; other bytes as they are
 * (the reader checks UTF-8 and replaces what is not). */
static void put_str(struct out *o, const char *s)
{
    put(o, "\"", 1);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            put(o, e, 2);
        } else if (c < 0x20) {
            char e[6] = {
                '\\', 'u', '0', '0', "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15]};
            put(o, e, 6);
        } else {
            put(o, (const char *)&c, 1);
        }
    }
    put(o, "\"", 1);
}

static void key(struct out *o, const char *k)
{
    put(o, ",\"", 2);
    puts_(o, k);
    put(o, "\":", 2);
}

static void line_begin(struct out *o, const char *type)
{
    puts_(o, "{\"type\":\"");
    puts_(o, type);
    puts_(o, "\",\"pid\":");
    put_u64(o, (uint64_t)getpid());
}

static void line_end(struct out *o)
{
    put(o, "}", 1);
    out_line_end(o);
}

/* ---- lines ---- */

static const char *const op_names[ACCT_OP__COUNT] = {
    [ACCT_OP_ALLOC] = "alloc",     [ACCT_OP_FREE] = "free",
    [ACCT_OP_CONTEXT] = "context", [ACCT_OP_CONTEXT_END] = "context_end",
    [ACCT_OP_MODULE] = "module",   [ACCT_OP_MODULE_END] = "module_end",
    [ACCT_OP_GRAPH] = "graph",     [ACCT_OP_GRAPH_END] = "graph_end",
    [ACCT_OP_RESERVE] = "reserve", [ACCT_OP_RESERVE_END] = "reserve_end",
    [ACCT_OP_MAP] = "map",         [ACCT_OP_UNMAP] = "unmap",
    [ACCT_OP_POOL] = "pool",       [ACCT_OP_POOL_END] = "pool_end",
};

/* Object lines for objects not yet written (they are append-only). */
static void write_objects(struct out *o)
{
    uint32_t n = atomic_load_explicit(&account.n_objects, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++) {
        struct acct_object *ob = &account.objects[i];
        if (ob->written)
            continue;
        line_begin(o, "object");
        key(o, "id");
        put_u64(o, i);
        key(o, "lib");
        put_str(o, gm_account_lib_key(ob->lib));
        key(o, "path");
        put_str(o, ob->path);
        line_end(o);
        ob->written = true;
    }
}

static void write_devices(struct out *o)
{
    for (int i = 0; i < ACCT_MAX_DEV; i++) {
        struct acct_device *d = &account.dev[i];
        if (d->info_written || atomic_load(&d->ready) != 2)
            continue;
        line_begin(o, "device");
        key(o, "device");
        put_u64(o, (uint64_t)i);
        key(o, "uuid");
        put_str(o, d->uuid);
        key(o, "name");
        put_str(o, d->name);
        key(o, "total");
        put_u64(o, d->total);
        key(o, "granularity");
        put_u64(o, d->gran);
        key(o, "granularity_measured");
        puts_(o, d->gran_measured ? "true" : "false");
        line_end(o);
        d->info_written = true;
    }
}

static void write_event(struct out *o, const struct acct_event *e)
{
    line_begin(o, "event");
    key(o, "t");
    put_u64(o, e->t);
    key(o, "op");
    put_str(o, e->op < ACCT_OP__COUNT ? op_names[e->op] : "?");
    key(o, "api");
    put_str(o, acct_api_name(e->api));
    if (e->op == ACCT_OP_ALLOC || e->op == ACCT_OP_FREE) {
        key(o, "kind");
        put_str(o, gm_account_kind_key((enum gm_account_kind)e->kind));
    }
    key(o, "device");
    put_i64(o, e->dev == ACCT_HOST ? -1 : e->dev);
    key(o, "addr");
    put_hex(o, e->addr);
    key(o, "bytes");
    put_u64(o, e->bytes);
    key(o, "object");
    put_u64(o, e->obj);
    if (e->op == ACCT_OP_CONTEXT || e->op == ACCT_OP_MODULE || e->op == ACCT_OP_GRAPH) {
        key(o, "source");
        put_str(o, gm_account_reading_key((enum gm_account_reading)e->source));
    }
    line_end(o);
}

/* The reading a bitmask of sources stands for. */
static const char *source_of(unsigned mask)
{
    int n = 0, last = GM_ACCOUNT_READING_NONE;
    for (int i = 1; i <= GM_ACCOUNT_READING_MEM_GET_INFO; i++)
        if (mask & (1u << i))
            n++, last = i;
    return gm_account_reading_key(n > 1 ? GM_ACCOUNT_READING_MIXED : (enum gm_account_reading)last);
}

/* The counters of device slot 'i' as a sample line. */
static void write_sample(struct out *o, int i, const char *at, uint64_t t, bool used_valid,
                         uint64_t used, uint64_t used_t, bool consistent)
{
    struct acct_device *d = &account.dev[i];
    uint32_t n_obj = atomic_load(&d->n_obj_used);
    bool first = true;
    line_begin(o, "sample");
    key(o, "t");
    put_u64(o, t);
    key(o, "at");
    put_str(o, at);
    key(o, "device");
    put_i64(o, i == ACCT_HOST ? -1 : i);
    if (i != ACCT_HOST) {
        key(o, "used");
        if (used_valid)
            put_u64(o, used);
        else
            puts_(o, "null");
        key(o, "used_source");
        put_str(o, gm_account_reading_key(
                       used_valid ? (enum gm_account_reading)atomic_load(&d->used_source)
                                  : GM_ACCOUNT_READING_NONE));
        if (used_valid && used_t != t) {
            key(o, "used_t");
            put_u64(o, used_t);
        }
        key(o, "consistent");
        puts_(o, consistent ? "true" : "false");
        key(o, "context");
        put_u64(o, atomic_load(&d->ctx));
        key(o, "contexts");
        put_u64(o, atomic_load(&d->n_ctx));
        key(o, "context_source");
        put_str(o, source_of(atomic_load(&d->ctx_src)));
        key(o, "modules");
        put_u64(o, atomic_load(&d->mod));
        key(o, "module_count");
        put_u64(o, atomic_load(&d->n_mod));
        key(o, "modules_source");
        put_str(o, source_of(atomic_load(&d->mod_src)));
        key(o, "graphs");
        put_u64(o, atomic_load(&d->graph));
        key(o, "graph_count");
        put_u64(o, atomic_load(&d->n_graph));
        key(o, "graphs_source");
        put_str(o, source_of(atomic_load(&d->graph_src)));
        key(o, "rounding");
        put_u64(o, atomic_load(&d->rounding));
        key(o, "virtual");
        put_u64(o, atomic_load(&d->virt));
        key(o, "tracked_peak");
        put_u64(o, atomic_load(&d->tracked_peak));
        key(o, "tracked_peak_t");
        put_u64(o, atomic_load(&d->tracked_peak_t));
    }
    key(o, "memory");
    put(o, "[", 1);
    for (uint32_t obj = 0; obj < n_obj && obj < ACCT_MAX_OBJ; obj++) {
        for (int k = 0; k < GM_ACCOUNT_KIND__COUNT; k++) {
            uint64_t c = atomic_load_explicit(&d->count[obj][k], memory_order_relaxed);
            uint64_t b = atomic_load_explicit(&d->bytes[obj][k], memory_order_relaxed);
            if (!c && !b)
                continue;
            if (o->n > sizeof(o->buf) - 200)
                break; /* a line stays whole; 3 KiB hold ~60 (object, kind) pairs */
            put(o, first ? "[" : ",[", first ? 1 : 2);
            first = false;
            put_u64(o, obj);
            put(o, ",", 1);
            put_str(o, gm_account_kind_key((enum gm_account_kind)k));
            put(o, ",", 1);
            put_u64(o, b);
            put(o, ",", 1);
            put_u64(o, c);
            put(o, "]", 1);
        }
    }
    put(o, "]", 1);
    line_end(o);
}

static void write_stacks(struct out *o)
{
    pthread_mutex_lock(&account.big_lock);
    for (unsigned i = 0; i < account.n_big; i++) {
        struct acct_big *b = &account.big[i];
        if (b->written)
            continue;
        line_begin(o, "stack");
        key(o, "t");
        put_u64(o, b->t);
        key(o, "device");
        put_i64(o, b->dev == ACCT_HOST ? -1 : b->dev);
        key(o, "kind");
        put_str(o, gm_account_kind_key((enum gm_account_kind)b->kind));
        key(o, "api");
        put_str(o, acct_api_name(b->api));
        key(o, "addr");
        put_hex(o, b->addr);
        key(o, "bytes");
        put_u64(o, b->bytes);
        key(o, "object");
        put_u64(o, b->obj);
        key(o, "frames");
        put(o, "[", 1);
        for (int f = acct_stack_start(b->frames, b->n_frames), shown = 0; f < b->n_frames; f++) {
            Dl_info info;
            char frame[ACCT_PATH_MAX + 160];
            const char *name = "?";
            uintptr_t off = (uintptr_t)b->frames[f];
            if (dladdr(b->frames[f], &info) && info.dli_fname) {
                const char *slash = strrchr(info.dli_fname, '/');
                name = slash ? slash + 1 : info.dli_fname;
                off -= (uintptr_t)info.dli_fbase;
            } else {
                info.dli_sname = NULL;
            }
            snprintf(frame, sizeof(frame), "%s+0x%lx%s%s%s", name, (unsigned long)off,
                     info.dli_sname ? " (" : "", info.dli_sname ? info.dli_sname : "",
                     info.dli_sname ? ")" : "");
            if (shown++)
                put(o, ",", 1);
            put_str(o, frame);
        }
        put(o, "]", 1);
        line_end(o);
        b->written = true;
    }
    pthread_mutex_unlock(&account.big_lock);
}

/* Write what is queued; the caller is the consumer. */
static void drain(struct out *o)
{
    struct acct_event e;
    write_objects(o);
    write_devices(o);
    while (ring_pop(&e)) {
        if (o->n > sizeof(o->buf) - 1024)
            out_flush(o);
        /* an event may name an object interned after the last object lines */
        if (e.obj >= 2 && e.obj < ACCT_MAX_OBJ && !account.objects[e.obj].written)
            write_objects(o);
        write_event(o, &e);
        atomic_fetch_add(&account.n_events, 1);
    }
}

static void write_disabled(struct out *o)
{
    if (atomic_load(&account.state) != ACCT_DISABLED ||
        atomic_exchange(&account.disabled_written, 1))
        return;
    line_begin(o, "disabled");
    key(o, "t");
    put_u64(o, acct_now());
    key(o, "reason");
    put_str(o, account.disabled_reason);
    line_end(o);
}

/* A consistent sample of device 'i': no tracked call in flight and none finished while
 * the reading was taken.  Written when it changed since the last one. */
static void sample_device(struct out *o, int i, const char *at, bool force)
{
    struct acct_device *d = &account.dev[i];
    uint64_t used = 0, g1 = 0, t = 0;
    bool valid = false, consistent = false;
    if (!atomic_load(&d->touched))
        return;
    if (i == ACCT_HOST) {
        g1 = atomic_load(&account.gen);
        if (!force && d->written_any && d->written_gen == g1)
            return;
        write_sample(o, i, at, acct_now(), false, 0, 0, true);
        d->written_gen = g1;
        d->written_any = true;
        return;
    }
    for (int attempt = 0; attempt < 3 && !consistent; attempt++) {
        g1 = atomic_load(&account.gen);
        if (atomic_load(&account.inflight))
            continue;
        t = acct_now();
        valid = acct_read_used(d, &used);
        consistent = !atomic_load(&account.inflight) && atomic_load(&account.gen) == g1;
    }
    if (!t) {
        t = acct_now();
        valid = acct_read_used(d, &used);
    }
    if (valid && consistent) {
        atomic_store(&d->last_used, used);
        atomic_store(&d->last_used_t, t);
        atomic_store(&d->last_gen, g1);
        atomic_store(&d->last_valid, true);
    }
    if (!force && d->written_any && d->written_gen == g1 && d->written_used == used)
        return;
    write_sample(o, i, at, t, valid, used, t, consistent);
    d->written_gen = g1;
    d->written_used = used;
    d->written_any = true;
}

static void sample_all(struct out *o, const char *at, bool force)
{
    for (int i = 0; i <= ACCT_MAX_DEV; i++)
        sample_device(o, i, at, force);
}

/* ---- the sampler ---- */

/* Its sleep, cut short at exit (a condition variable on CLOCK_MONOTONIC). */
static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sleep_cond;

static void sleep_init(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&sleep_cond, &a);
    pthread_condattr_destroy(&a);
    pthread_mutex_init(&sleep_lock, NULL);
}

static void sampler_sleep(void)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)(account.interval_ms / 1000);
    until.tv_nsec += (long)(account.interval_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&sleep_lock);
    while (!atomic_load(&account.sampler_stop) &&
           pthread_cond_timedwait(&sleep_cond, &sleep_lock, &until) == 0)
        ;
    pthread_mutex_unlock(&sleep_lock);
}

static void sampler_wake(void)
{
    pthread_mutex_lock(&sleep_lock);
    atomic_store(&account.sampler_stop, true);
    pthread_cond_broadcast(&sleep_cond);
    pthread_mutex_unlock(&sleep_lock);
}

static void *sampler_main(void *arg)
{
    sigset_t all;
    (void)arg;
    /* signals are the job's: never run its handlers (or ours) on this thread */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    while (!atomic_load(&account.sampler_stop)) {
        struct out o;
        sampler_sleep();
        int s = atomic_load(&account.state);
        if (atomic_load(&account.sampler_stop) || (s != ACCT_ACTIVE && s != ACCT_DISABLED))
            continue;
        if (!consumer_take())
            continue;
        o.n = 0;
        write_disabled(&o);
        drain(&o);
        write_stacks(&o);
        if (s == ACCT_ACTIVE)
            sample_all(&o, "periodic", false);
        out_flush(&o);
        consumer_give();
    }
    return NULL;
}

/* ---- the end ---- */

static void write_end(struct out *o, const char *reason, int sig)
{
    line_begin(o, "end");
    key(o, "t");
    put_u64(o, acct_now());
    key(o, "reason");
    put_str(o, reason);
    if (sig) {
        key(o, "signal");
        put_u64(o, (uint64_t)sig);
    }
    key(o, "events");
    put_u64(o, atomic_load(&account.n_events));
    key(o, "dropped");
    put_u64(o, atomic_load(&account.n_dropped));
    key(o, "unhooked");
    put_u64(o, atomic_load(&account.n_unhooked));
    key(o, "unknown_frees");
    put_u64(o, atomic_load(&account.n_unknown_frees));
    key(o, "other_devices");
    put_u64(o, atomic_load(&account.n_other_devices));
    line_end(o);
}

static void at_exit(void)
{
    struct out o;
    int s = atomic_load(&account.state);
    if ((s != ACCT_ACTIVE && s != ACCT_DISABLED) ||
        !atomic_compare_exchange_strong(&account.state, &s, ACCT_FINISHED))
        return;
    if (account.sampler_running) {
        struct timespec deadline;
        sampler_wake();
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += 2;
        if (pthread_timedjoin_np(account.sampler, NULL, &deadline) == 0)
            account.sampler_running = false;
    }
    /* the sampler, if still stuck in a reading, owns the queue: wait for it a little */
    for (int i = 0; i < 200 && !consumer_take(); i++) {
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
    }
    o.n = 0;
    write_disabled(&o);
    drain(&o);
    write_stacks(&o);
    if (s == ACCT_ACTIVE)
        sample_all(&o, "exit", true);
    write_end(&o, "exit", 0);
    out_flush(&o);
    close(account.fd);
    account.fd = -1;
    acct_nvml_close();
}

/* SIGTERM / SIGINT at their default action: write what can be written without locks (the
 * queue if free, the counters with the last reading), then die of the signal as before. */
static void on_signal(int sig)
{
    int saved = errno;
    int s = atomic_load(&account.state);
    if (s == ACCT_ACTIVE && atomic_compare_exchange_strong(&account.state, &s, ACCT_FINISHED)) {
        struct out o;
        o.n = 0;
        if (consumer_take()) {
            struct acct_event e;
            write_objects(&o);
            while (ring_pop(&e)) {
                if (o.n > sizeof(o.buf) - 1024)
                    out_flush(&o);
                if (e.obj >= 2 && e.obj < ACCT_MAX_OBJ && !account.objects[e.obj].written)
                    write_objects(&o);
                write_event(&o, &e);
                atomic_fetch_add(&account.n_events, 1);
            }
        }
        for (int i = 0; i < ACCT_MAX_DEV; i++) {
            struct acct_device *d = &account.dev[i];
            bool valid = atomic_load(&d->last_valid);
            bool same = valid && atomic_load(&d->last_gen) == atomic_load(&account.gen) &&
                        !atomic_load(&account.inflight);
            if (!atomic_load(&d->touched))
                continue;
            write_sample(&o, i, "signal", acct_now(), valid, atomic_load(&d->last_used),
                         atomic_load(&d->last_used_t), same);
        }
        if (atomic_load(&account.dev[ACCT_HOST].touched))
            write_sample(&o, ACCT_HOST, "signal", acct_now(), false, 0, 0, true);
        write_end(&o, "signal", sig);
        out_flush(&o);
    }
    signal(sig, SIG_DFL);
    errno = saved;
    raise(sig);
}

static void install_signal(int sig)
{
    struct sigaction old, sa;
    if (sigaction(sig, NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
        return; /* the job handles it (Python's SIGINT, a launcher's SIGTERM) */
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(sig, &sa, NULL);
}

/* ---- activation ---- */

static long env_long(const char *name, long dflt, long lo, long hi)
{
    const char *s = getenv(name);
    char *end;
    long v;
    if (!s || !*s)
        return dflt;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return dflt;
    return v;
}

/* The command line, arguments joined by spaces. */
static void command_line(char *out, size_t n)
{
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, out, n - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (got <= 0) {
        out[0] = '\0';
        return;
    }
    for (ssize_t i = 0; i < got; i++)
        if (!out[i])
            out[i] = ' ';
    while (got > 0 && out[got - 1] == ' ')
        got--;
    out[got] = '\0';
}

static void say(const char *a, const char *b, const char *c)
{
    /* one line on the job's stderr: the job keeps running, unaccounted */
    struct out o;
    o.n = 0;
    puts_(&o, "gpumem account: ");
    puts_(&o, a);
    puts_(&o, b);
    puts_(&o, c);
    puts_(&o, "\n");
    if (write(2, o.buf, o.n) < 0)
        return;
}

static bool open_file(void)
{
    char path[1200], name[96];
    long rank = env_long("RANK", -1, 0, 1 << 24), local = env_long("LOCAL_RANK", -1, 0, 1 << 24);
    size_t n = 0;
    name[0] = '\0';
    if (rank >= 0)
        n += (size_t)snprintf(name + n, sizeof(name) - n, "rank%ld-", rank);
    if (local >= 0)
        n += (size_t)snprintf(name + n, sizeof(name) - n, "local%ld-", local);
    snprintf(name + n, sizeof(name) - n, "%ld", (long)getpid());
    snprintf(path, sizeof(path), "%s/account-%s.jsonl", account.dir, name);
    account.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (account.fd < 0) {
        say("cannot write ", path, ": accounting is off, the job runs unchanged");
        return false;
    }
    return true;
}

static void write_start(void)
{
    struct out o;
    char cmd[200];
    struct timespec rt;
    long rank = env_long("RANK", -1, 0, 1 << 24), local = env_long("LOCAL_RANK", -1, 0, 1 << 24);
    long world = env_long("WORLD_SIZE", -1, 1, 1 << 24);
    o.n = 0;
    clock_gettime(CLOCK_REALTIME, &rt);
    command_line(cmd, sizeof(cmd));
    puts_(&o, "{\"schema\":\"gpumem.account/1\"");
    key(&o, "type");
    put_str(&o, "start");
    key(&o, "pid");
    put_u64(&o, (uint64_t)getpid());
    key(&o, "ppid");
    put_u64(&o, (uint64_t)getppid());
    key(&o, "t");
    put_u64(&o, account.t_start);
    key(&o, "realtime_ns");
    put_u64(&o, (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec);
    if (rank >= 0) {
        key(&o, "rank");
        put_u64(&o, (uint64_t)rank);
    }
    if (local >= 0) {
        key(&o, "local_rank");
        put_u64(&o, (uint64_t)local);
    }
    if (world >= 0) {
        key(&o, "world_size");
        put_u64(&o, (uint64_t)world);
    }
    key(&o, "command");
    put_str(&o, cmd);
    key(&o, "interval_ms");
    put_u64(&o, account.interval_ms);
    key(&o, "version");
    put_str(&o, GM_VERSION_STRING);
    line_end(&o);
    out_flush(&o);
}

static bool activate(void)
{
    void *warm[2];
    account.t_start = acct_now();
    if (!open_file())
        return false;
    write_start();
    /* backtrace() loads the unwinder on its first call: do it here, not inside a hook */
    (void)backtrace(warm, 2);
    (void)acct_nvml_open(); /* without NVML: terms, but no device used and no "not seen" */
    install_signal(SIGTERM);
    install_signal(SIGINT);
    atexit(at_exit);
    atomic_store(&account.sampler_stop, false);
    account.sampler_running =
        account.interval_ms > 0 && pthread_create(&account.sampler, NULL, sampler_main, NULL) == 0;
    return true;
}

bool acct_begin(void)
{
    int s = atomic_load_explicit(&account.state, memory_order_acquire);
    while (s != ACCT_ACTIVE) {
        if (s == ACCT_CONFIGURED) {
            if (atomic_compare_exchange_strong(&account.state, &s, ACCT_ACTIVATING)) {
                bool ok = activate();
                if (!ok)
                    snprintf(account.disabled_reason, sizeof(account.disabled_reason),
                             "the account file could not be created");
                atomic_store(&account.state, ok ? ACCT_ACTIVE : ACCT_DISABLED);
                s = ok ? ACCT_ACTIVE : ACCT_DISABLED;
            }
            continue;
        }
        if (s != ACCT_ACTIVATING)
            return false;
        sched_yield();
        s = atomic_load_explicit(&account.state, memory_order_acquire);
    }
    atomic_fetch_add_explicit(&account.inflight, 1, memory_order_acq_rel);
    return true;
}

void acct_end(void)
{
    atomic_fetch_add_explicit(&account.gen, 1, memory_order_acq_rel);
    atomic_fetch_sub_explicit(&account.inflight, 1, memory_order_acq_rel);
}

void acct_disable(const char *reason)
{
    int s = ACCT_ACTIVE;
    /* said in the file (the sampler or the end writes it), not on the job's stderr */
    if (atomic_compare_exchange_strong(&account.state, &s, ACCT_DISABLED))
        snprintf(account.disabled_reason, sizeof(account.disabled_reason), "%s", reason);
}

/* ---- fork ---- */

static void fork_prepare(void)
{
    pthread_mutex_lock(&account.slow_lock);
    while (!consumer_take())
        sched_yield();
    acct_track_lock_all();
}

static void fork_parent(void)
{
    acct_track_unlock_all();
    consumer_give();
    pthread_mutex_unlock(&account.slow_lock);
}

static void fork_child(void)
{
    int s = atomic_load(&account.state);
    acct_track_reinit_locks();
    sleep_init();
    atomic_store(&account.consumer, 0);
    if (s == ACCT_OFF)
        return;
    /* the parent's allocations are not the child's; its file is not either */
    acct_track_reset();
    ring_init();
    if (account.fd >= 0)
        close(account.fd);
    account.fd = -1;
    account.sampler_running = false;
    atomic_store(&account.disabled_written, false);
    atomic_store(&account.state, ACCT_CONFIGURED);
}

__attribute__((constructor)) static void acct_init(void)
{
    const char *dir = getenv("GPUMEM_ACCOUNT_DIR");
    struct stat st;
    account.fd = -1;
    pthread_mutex_init(&account.obj_lock, NULL);
    pthread_mutex_init(&account.big_lock, NULL);
    pthread_mutex_init(&account.slow_lock, NULL);
    sleep_init();
    snprintf(account.objects[ACCT_OBJ_NONE].path, ACCT_PATH_MAX, "%s", "");
    account.objects[ACCT_OBJ_NONE].lib = GM_ACCOUNT_LIB_UNKNOWN;
    snprintf(account.objects[ACCT_OBJ_FULL].path, ACCT_PATH_MAX, "%s", "(more objects)");
    account.objects[ACCT_OBJ_FULL].lib = GM_ACCOUNT_LIB_OTHER;
    atomic_store(&account.n_objects, 2);
    ring_init();
    if (!dir || !*dir || strlen(dir) >= sizeof(account.dir) || stat(dir, &st) != 0 ||
        !S_ISDIR(st.st_mode))
        return; /* ACCT_OFF */
    snprintf(account.dir, sizeof(account.dir), "%s", dir);
    account.interval_ms = (uint64_t)env_long("GPUMEM_ACCOUNT_INTERVAL_MS", 100, 0, 3600000);
    account.n_big_max = (unsigned)env_long("GPUMEM_ACCOUNT_STACKS", 8, 0, ACCT_MAX_BIG);
    account.fail_insert_at = (int)env_long("GPUMEM_ACCOUNT_FAIL_AT", 0, 0, 1 << 30);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    atomic_store(&account.state, ACCT_CONFIGURED);
}
