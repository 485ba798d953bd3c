/* SPDX-License-Identifier: MIT */
/* load.c - build a struct gm_snapshot from the pickle of a torch CUDA memory snapshot
 * (schema: docs/snapshot.md, "File format"; the loader's files: load_int.h).
 *
 * The top level is a dict {segments, device_traces, allocator_settings,
 * external_annotations, ...} or, for memory_snapshot() and 1.13, a bare list of segments.
 * Only the key names are trusted, never the shape: every value is type-checked, unknown keys
 * are ignored, missing optional keys take the documented defaults.  Device traces are
 * streamed while the pickle is parsed (trace.c); everything else is read from the graph
 * once the parse is done. */
#include "snapshot/load_int.h"

#include "base/big.h"
#include "base/guard.h"

#include "gpumem/units.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The default memory limit: what a real snapshot needs is well below its size (its trace
 * packed, the analyses' arrays); a file that describes far more than that through shared
 * references is refused rather than allowed to take the machine's memory. */
#define DEFAULT_MEMORY_BASE   ((size_t)256 << 20)
#define DEFAULT_MEMORY_FACTOR 4

/* Pinned host memory: 'host_segments' (a list of segments) and 'host_traces', read as
 * device_traces is (PR pytorch/pytorch#182407 builds both "like" segments and
 * device_traces): one list of trace entries, or a list of such lists, one after the other.
 * Its events go into a trace of their own, never into a device's. */
static enum gm_status read_host(struct builder *b, pk_val segments, pk_val traces)
{
    struct gm_snapshot *s = &b->impl->pub;
    struct gm_snapshot_device *h = &s->host;
    const struct pk_node *l;
    struct ev_writer *tw;
    struct ev_sums sums;
    size_t unknown = 0;
    enum gm_status st;

    h->index = -1;
    if (segments != PK_HOLE && (st = snap_read_host_segments(b, segments)) != GM_OK)
        return st;
    h->n_segments = s->n_host_segments;
    if (traces == PK_HOLE)
        return GM_OK;
    if (!(l = snap_as_list(traces)))
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: 'host_traces' is a %s, expected a list", pk_type_name(traces));
    tw = &b->impl->traces[b->impl->n_traces++];
    memset(&sums, 0, sizeof(sums));
    h->has_trace = true;
    if (l->len && snap_as_list(l->items[0])) {
        for (uint32_t i = 0; i < l->len; i++)
            if ((st = snap_read_trace(b, -1, l->items[i], tw, &unknown, &sums)) != GM_OK)
                return gm_error_prefix(b->err, "host_traces");
    } else if ((st = snap_read_trace(b, -1, traces, tw, &unknown, &sums)) != GM_OK) {
        return gm_error_prefix(b->err, "host_traces");
    }
    snap_ev_writer_shrink(tw);
    h->n_events = tw->pk.n_events;
    if (h->n_events && !b->drop_events)
        h->packed = &tw->pk;
    memcpy(h->n_actions, tw->n_actions, sizeof(h->n_actions));
    b->impl->host_size_sum = sums.size_sum;
    return GM_OK;
}

static enum gm_status build(struct builder *b, pk_val root)
{
    struct gm_snapshot *s = &b->impl->pub;
    const struct pk_node *top = pk_node(root);
    pk_val segments = PK_HOLE, traces = PK_HOLE, host_segments = PK_HOLE, host_traces = PK_HOLE;
    const struct pk_node *trl = NULL;
    const struct gm_snapshot_segment *segs;
    struct gm_snapshot_device *devs;
    bool named[MAX_DEVICES];
    size_t n_named = 0;
    enum gm_status st;

    if (!top || (top->kind != PK_DICT && top->kind != PK_LIST))
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: the pickle holds a %s, not a memory snapshot (a dict or a "
                       "list of segments)",
                       pk_type_name(root));
    if (top->kind == PK_LIST) {
        s->is_list = true;
        segments = root;
    } else {
        for (uint32_t i = 0; i < top->len; i++) {
            pk_val k = top->items[2 * i], val = top->items[2 * i + 1];
            switch (snap_word_of(b, k)) {
            case W_SEGMENTS:
                segments = val;
                break;
            case W_DEVICE_TRACES:
                traces = val;
                break;
            case W_ALLOCATOR_SETTINGS:
                if ((st = snap_read_settings(b, val)) != GM_OK)
                    return st;
                break;
            case W_EXTERNAL_ANNOTATIONS:
                if ((st = snap_read_annotations(b, val)) != GM_OK)
                    return st;
                break;
            case W_HOST_SEGMENTS:
                host_segments = val;
                s->has_host_data = true;
                b->any_g9 = true;
                break;
            case W_HOST_TRACES:
                host_traces = val;
                s->has_host_data = true;
                b->any_g9 = true;
                break;
            default:
                break;
            }
        }
        if (segments == PK_HOLE)
            return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                           "snapshot: the dict has no 'segments' key: not a memory snapshot");
    }
    if (traces != PK_HOLE && !(trl = snap_as_list(traces)))
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: 'device_traces' is a %s, expected a list", pk_type_name(traces));
    if (trl && trl->len > MAX_DEVICES)
        return gm_fail(b->err, GM_ERR_LIMIT, GM_NO_OFFSET,
                       "snapshot: 'device_traces' has %u device lists (at most %d supported)",
                       trl->len, MAX_DEVICES);

    if ((st = snap_read_segments(b, segments)) != GM_OK)
        return st;
    segs = s->segments;

    /* devices: every trace slot and every segment device */
    memset(named, 0, sizeof(named));
    for (uint32_t i = 0; trl && i < trl->len; i++)
        named[i] = true;
    for (size_t i = 0; i < s->n_segments; i++)
        named[segs[i].device] = true;
    for (size_t i = 0; i < MAX_DEVICES; i++)
        n_named += named[i];
    devs = gm_arena_calloc(b->arena, n_named ? n_named : 1, sizeof(*devs));
    b->impl->size_sums = gm_arena_calloc(b->arena, n_named ? n_named : 1, sizeof(uint64_t));
    /* one writer per device and one for the host trace */
    b->impl->traces = gm_calloc(n_named + 1, sizeof(struct ev_writer));
    if (!devs || !b->impl->size_sums || !b->impl->traces)
        return snap_nomem(b);
    {
        size_t di = 0, si = 0;
        struct ev_sums span; /* the time range over all devices */
        memset(&span, 0, sizeof(span));
        for (int32_t i = 0; i < MAX_DEVICES; i++) {
            struct gm_snapshot_device *d;
            if (!named[i])
                continue;
            d = &devs[di++];
            d->index = i;
            while (si < s->n_segments && segs[si].device < i)
                si++;
            d->first_segment = si;
            while (si < s->n_segments && segs[si].device == i) {
                si++;
                d->n_segments++;
            }
            if (trl && (uint32_t)i < trl->len) {
                struct ev_writer *tw = &b->impl->traces[b->impl->n_traces];
                size_t unknown = 0;
                struct ev_sums sums;
                memset(&sums, 0, sizeof(sums));
                d->has_trace = true;
                if ((st = snap_read_trace(b, i, trl->items[i], tw, &unknown, &sums)) != GM_OK)
                    return st;
                b->impl->n_traces++;
                snap_ev_writer_shrink(tw);
                snap_ev_sums_merge(&span, &sums);
                b->impl->size_sums[di - 1] = sums.size_sum;
                d->n_events = tw->pk.n_events;
                if (d->n_events && (!b->drop_events || b->fold_only))
                    d->packed = &tw->pk; /* fold_only: no bytes, the fold */
                memcpy(d->n_actions, tw->n_actions, sizeof(d->n_actions));
                s->n_events += d->n_events;
                s->n_unknown_actions += unknown;
            }
        }
        s->has_time = span.has_time;
        s->time_first_us = span.t_min;
        s->time_last_us = span.t_max;
    }
    s->devices = devs;
    s->n_devices = n_named;
    if ((st = read_host(b, host_segments, host_traces)) != GM_OK)
        return st;
    s->device_kind = b->settings_generic_conf && !b->settings_cuda ? GM_DEVICE_XPU : GM_DEVICE_CUDA;

    /* generation: the newest evidence wins */
    if (s->is_list)
        s->gen = GM_SNAPSHOT_GEN_G0;
    else if (b->any_g9)
        s->gen = GM_SNAPSHOT_GEN_G9;
    else if (b->any_user_meta)
        s->gen = GM_SNAPSHOT_GEN_G8;
    else if (b->settings_g7)
        s->gen = GM_SNAPSHOT_GEN_G7;
    else if (b->any_compile_ctx)
        s->gen = GM_SNAPSHOT_GEN_G6;
    else if (s->has_annotations)
        s->gen = GM_SNAPSHOT_GEN_G5;
    else if (s->has_allocator_settings)
        s->gen = GM_SNAPSHOT_GEN_G4;
    else if (b->any_time)
        s->gen = GM_SNAPSHOT_GEN_G3;
    else if (b->any_block_frames || b->any_seg_g2)
        s->gen = GM_SNAPSHOT_GEN_G2;
    else
        s->gen = GM_SNAPSHOT_GEN_G1;
    return GM_OK;
}

static void builder_release(struct builder *b)
{
    snap_pipe_end(b); /* (a parse cut short: the file shrank under the mapping) */
    snap_trace_reader_release(&b->tr);
    snap_interner_release(&b->in);
}

/* No device holds 2^63 bytes, nor does a trace allocate and free that much.  A file whose
 * event sizes (every event: a free without its alloc counts from the start), block sizes
 * (reserved and requested) and segment sizes add up to that much on one device is damaged
 * or crafted; refusing it here means no later sum (timeline, categories, report) can
 * overflow. */
/* 'sum' plus the segment, block and requested sizes of segs[0..n). */
static uint64_t segments_size_sum(const struct gm_snapshot_segment *segs, size_t n, uint64_t sum)
{
    for (size_t si = 0; si < n; si++) {
        sum = snap_sat_add(sum, segs[si].total_size);
        for (size_t bi = 0; bi < segs[si].n_blocks; bi++) {
            sum = snap_sat_add(sum, segs[si].blocks[bi].size);
            sum = snap_sat_add(sum, segs[si].blocks[bi].requested_size);
        }
    }
    return sum;
}

static enum gm_status check_sizes(const struct snap_impl *impl, struct gm_error *err)
{
    const uint64_t limit = (uint64_t)1 << 63;
    const struct gm_snapshot *snap = &impl->pub;
    for (size_t di = 0; di < snap->n_devices; di++) {
        const struct gm_snapshot_device *d = &snap->devices[di];
        uint64_t sum = impl->size_sums ? impl->size_sums[di] : 0; /* the trace's events */
        sum = segments_size_sum(&snap->segments[d->first_segment], d->n_segments, sum);
        if (sum >= limit)
            return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                           "device %d: the sizes in the file add up to more than 2^63 bytes, "
                           "which no device can hold",
                           (int)d->index);
    }
    {
        uint64_t sum =
            segments_size_sum(snap->host_segments, snap->n_host_segments, impl->host_size_sum);
        if (sum >= limit)
            return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                           "host memory: the sizes in the file add up to more than 2^63 bytes");
    }
    return GM_OK;
}

/* The part of a load that reads the input: what it allocates stays reachable from 'r', so
 * that a fault of a mapped input (base/guard.h) can release it. */
struct load_run {
    struct builder *b;
    struct pk_doc *doc;
    const void *data;
    size_t len;
    const struct pk_opts *po;
    enum gm_status st;
};

static void read_input(void *ctx)
{
    struct load_run *r = ctx;
    struct builder *b = r->b;
    r->st = pk_parse(r->doc, r->data, r->len, r->po, b->err);
    /* the consumers have seen every batch: the build reads their states */
    snap_pipe_end(b);
    if (r->st != GM_OK)
        return;
    b->impl->pub.protocol = r->doc->protocol;
    b->impl->pub.n_flat_batches = r->doc->n_flat_batches;
    r->st = build(b, r->doc->root);
    if (r->st == GM_OK)
        r->st = snap_intern_finish(b);
    if (r->st == GM_OK)
        r->st = check_sizes(b->impl, b->err);
    pk_doc_release(r->doc);
}

/* Whether a load with 'opts' consumes the device traces' events (keeps none).  Not under a
 * memory limit the caller gave: a load that holds less than one keeping the events could pass
 * a limit that one fails, and the limit's answer is that of the load with the events. */
static bool consumes(const struct gm_snapshot_opts *opts)
{
    return opts && opts->consume_events && opts->consumer && !opts->drop_events &&
           !opts->timeline_only && !opts->memory_limit;
}

static enum gm_status load_once(const void *data, size_t len, const struct gm_snapshot_opts *opts,
                                bool mapped, struct gm_snapshot **out, struct gm_error *err)
{
    struct pk_opts po;
    struct pk_stream stream;
    struct pk_doc doc;
    struct builder *b;
    struct snap_impl *impl;
    size_t cap, held = 0;
    enum gm_status st;
    struct gm_error local;
    bool b_consume;

    *out = NULL;
    if (!err) {
        gm_error_clear(&local);
        err = &local;
    }
    if (opts && opts->memory_limit)
        cap = opts->memory_limit > SIZE_MAX ? SIZE_MAX : (size_t)opts->memory_limit;
    else
        cap = len > (SIZE_MAX - DEFAULT_MEMORY_BASE) / DEFAULT_MEMORY_FACTOR
                  ? SIZE_MAX
                  : len * DEFAULT_MEMORY_FACTOR + DEFAULT_MEMORY_BASE;

    impl = gm_calloc(1, sizeof(*impl));
    b = gm_calloc(1, sizeof(*b));
    if (!impl || !b) {
        gm_free(impl);
        gm_free(b);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "snapshot: out of memory");
    }
    gm_arena_init(&impl->arena, cap);
    /* one cap for everything the load holds: the snapshot's arena, the parse's nodes and
     * arrays, the packed traces and the interner's tables */
    gm_arena_share(&impl->arena, &held);
    b->held = &held;
    b->limit_given = opts && opts->memory_limit;
    impl->pub.file_size = len;
    impl->pub.pickle_size = len;
    b->doc = &doc;
    b->impl = impl;
    b->arena = &impl->arena;
    b->err = err;

    memset(&po, 0, sizeof(po));
    po.memory_limit = cap;
    po.limit_given = opts && opts->memory_limit;
    po.shared = &held;
    po.max_depth = opts ? opts->max_depth : 0;
    if (opts) {
        po.progress = opts->progress;
        po.progress_ctx = opts->progress_ctx;
    }
    stream = snap_trace_stream_ops;
    stream.ctx = b;
    po.stream = &stream;
    po.general_only = opts && opts->reader == GM_SNAPSHOT_READER_GENERAL;
    b->drop_events = opts && (opts->drop_events || opts->timeline_only);
    b->fold_only = opts && opts->timeline_only && !opts->drop_events;
    impl->pub.events_dropped = b->drop_events;
    b->consume = consumes(opts);
    snap_trace_consumers_init(b, opts ? opts->consumer : NULL);
    snap_pipe_start(b, opts ? opts->threads : 0, len);
    po.drop_behind = mapped;

    /* stack id 0 is the empty stack */
    memset(&doc, 0, sizeof(doc));
    if (!grow_arr((void **)&b->in.stacks, &b->in.cap_stacks, 1, sizeof(struct stack_rec))) {
        st = snap_nomem(b);
    } else {
        struct load_run r = {b, &doc, data, len, &po, GM_OK};
        b->in.stacks[0].off = 0;
        b->in.stacks[0].n = 0;
        b->in.n_stacks = 1;
        if (!mapped) {
            read_input(&r);
            st = r.st;
        } else if (gm_guard_run(read_input, &r, data, len)) {
            st = r.st;
        } else {
            /* the file shrank under the mapping: what the parse held goes with the rest */
            pk_doc_abandon(&doc);
            st = gm_fail(err, GM_ERR_IO, GM_NO_OFFSET,
                         "the file changed while being read (it is shorter than when it was "
                         "opened: written again meanwhile?)");
        }
    }
    b_consume = b->consume;
    builder_release(b);
    gm_free(b);
    gm_arena_share(&impl->arena, NULL);
    if (st != GM_OK) {
        gm_snapshot_free(&impl->pub);
        return st;
    }
    impl->pub.memory_limit = cap;
    impl->pub.memory_bytes = impl->arena.reserved;
    for (size_t i = 0; i < impl->n_traces; i++)
        impl->pub.memory_bytes += snap_ev_writer_capacity(&impl->traces[i]);
    for (size_t i = 0; i < impl->pub.n_devices; i++) {
        const struct gm_snapshot_device *d = &impl->pub.devices[i];
        if (d->packed && d->packed->fold)
            snap_fold_finish(d->packed->fold, &impl->pub, d);
    }
    /* what the consumers keep for after the load is the snapshot's */
    impl->pub.memory_bytes += impl->consumers.used;
    for (size_t i = 0; b_consume && i < impl->pub.n_devices; i++)
        if (!snap_events_stored(&impl->pub.devices[i]))
            impl->pub.events_consumed = true;
    *out = &impl->pub;
    return GM_OK;
}

/* Whether a snapshot loaded with timeline_only answers without its events: every trace with
 * events folded, none with an out-of-memory event or per-event notes (what the peak reads
 * from the events besides the timeline). */
static bool folds_suffice(const struct gm_snapshot *s)
{
    for (size_t i = 0; i < s->n_devices; i++) {
        const struct gm_snapshot_device *d = &s->devices[i];
        if ((d->n_events && !snap_fold_ready(d)) || d->n_actions[GM_ACTION_OOM])
            return false;
    }
    return !snap_has_event_notes(s);
}

/* Whether a snapshot loaded with consume_events answers without the events it did not keep:
 * each such trace followed whole by the timeline's fold and by the caller's consumer, which
 * needs nothing of the stored trace after, and its events kept aside (side.c). */
static bool consumed_suffice(const struct gm_snapshot *s)
{
    for (size_t i = 0; i < s->n_devices; i++) {
        const struct gm_snapshot_device *d = &s->devices[i];
        const struct gm_snapshot_packed *pk = d->packed;
        if (snap_events_stored(d))
            continue;
        if (!pk || !pk->side || !snap_fold_ready(d) || !pk->consumed ||
            !pk->consumed_ops->needs_trace || pk->consumed_ops->needs_trace(pk->consumed, s, d))
            return false;
    }
    return true;
}

static enum gm_status load(const void *data, size_t len, const struct gm_snapshot_opts *opts,
                           bool mapped, struct gm_snapshot **out, struct gm_error *err)
{
    enum gm_status st = load_once(data, len, opts, mapped, out, err);
    struct gm_snapshot_opts again;
    if (!opts)
        return st;
    if (st == GM_ERR_LIMIT && consumes(opts)) {
        /* over the memory limit without the events: so is a load with them (it holds more),
         * whose failure is the one to tell (where it stopped) */
        again = *opts;
        again.consume_events = false;
        return load_once(data, len, &again, mapped, out, err);
    }
    if (st != GM_OK)
        return st;
    if (opts->timeline_only && !opts->drop_events && !folds_suffice(*out)) {
        /* the events are needed after all: read the input again, keeping them */
        again = *opts;
        again.timeline_only = false;
    } else if ((*out)->events_consumed && !consumed_suffice(*out)) {
        again = *opts;
        again.consume_events = false;
    } else {
        return st;
    }
    gm_snapshot_free(*out);
    return load_once(data, len, &again, mapped, out, err);
}

enum gm_status gm_snapshot_load_mem(const void *data, size_t len,
                                    const struct gm_snapshot_opts *opts, struct gm_snapshot **out,
                                    struct gm_error *err)
{
    return load(data, len, opts, false, out, err);
}

uint64_t gm_snapshot_memory_estimate(uint64_t file_bytes)
{
    return file_bytes / 2 + ((uint64_t)64 << 20);
}

/* Load from an open descriptor (borrowed): mapped as it is or through a spool
 * (snap_input_open()), the mapping read under the SIGBUS guard. */
static enum gm_status load_input(int fd, const char *name, const struct gm_snapshot_opts *opts,
                                 struct gm_snapshot **out, struct gm_error *err)
{
    struct snap_input in;
    uint64_t cap = opts && opts->memory_limit ? opts->memory_limit : UINT64_MAX;
    enum gm_status rc;
    void *map;

    *out = NULL;
    if ((rc = snap_input_open(fd, name, cap, &in, err)) != GM_OK)
        return rc;
    if (in.len > SIZE_MAX) {
        snap_input_close(&in);
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "'%s' is too large", name);
    }
    map = mmap(NULL, (size_t)in.len, PROT_READ, MAP_PRIVATE, in.fd, 0);
    if (map == MAP_FAILED) {
        int e = errno;
        snap_input_close(&in);
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "cannot map '%s': %s", name, strerror(e));
    }
    (void)madvise(map, (size_t)in.len, MADV_SEQUENTIAL);
    rc = load(map, (size_t)in.len, opts, true, out, err);
    if (rc != GM_OK && rc != GM_ERR_IO && in.spool < 0) {
        /* A file cut short inside a page reads as zeros up to the page's end, not as a
         * fault: what the reader then met ("unknown opcode 0x00") is the change, not the
         * file's content. */
        struct stat now;
        if (fstat(in.fd, &now) == 0 && (uint64_t)now.st_size != in.len) {
            munmap(map, (size_t)in.len);
            snap_input_close(&in);
            return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET,
                           "%s: the file changed while being read (it is %s than when it was "
                           "opened: written again meanwhile?)",
                           name, (uint64_t)now.st_size < in.len ? "shorter" : "longer");
        }
    }
    if (rc == GM_ERR_FORMAT && err && err->offset != GM_NO_OFFSET && err->offset < 4096) {
        /* failed at once: the file may be JSON or text given as a snapshot */
        unsigned char head[512];
        ssize_t k = pread(in.fd, head, sizeof(head), 0);
        if (k > 0)
            rc = snap_input_explain(head, (size_t)k, name, in.gzip, err);
        if (err->offset == GM_NO_OFFSET) {
            munmap(map, (size_t)in.len);
            snap_input_close(&in);
            return rc;
        }
    }
    munmap(map, (size_t)in.len);
    snap_input_close(&in);
    if (rc != GM_OK) {
        if (err)
            gm_error_prefix(err, "%s", name);
        return rc;
    }
    (*out)->file_size = in.file_size;
    (*out)->pickle_size = in.len;
    (*out)->compressed = in.gzip;
    return GM_OK;
}

enum gm_status gm_snapshot_load(const char *path, const struct gm_snapshot_opts *opts,
                                struct gm_snapshot **out, struct gm_error *err)
{
    int fd;
    struct stat st;
    enum gm_status rc;

    *out = NULL;
    /* O_NONBLOCK: a FIFO (or a device) is refused below instead of blocking the open until
     * a writer comes; it changes nothing for the regular file that is read */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        return gm_fail(err, e == ENOENT ? GM_ERR_NOENT : GM_ERR_IO, GM_NO_OFFSET,
                       "cannot open '%s': %s", path, strerror(e));
    }
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "cannot read '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        close(fd);
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET,
                       "'%s' is %s, not a regular file: a snapshot is read from a file", path,
                       S_ISFIFO(st.st_mode)                         ? "a FIFO (named pipe)"
                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                       : S_ISSOCK(st.st_mode)                       ? "a socket"
                                                                    : "not a file");
    }
    rc = load_input(fd, path, opts, out, err);
    close(fd);
    return rc;
}

enum gm_status gm_snapshot_load_fd(int fd, const char *name, const struct gm_snapshot_opts *opts,
                                   struct gm_snapshot **out, struct gm_error *err)
{
    return load_input(fd, name ? name : "standard input", opts, out, err);
}

void gm_snapshot_free(struct gm_snapshot *snap)
{
    struct snap_impl *impl = (struct snap_impl *)snap;
    if (!snap)
        return;
    for (size_t i = 0; i < impl->n_traces; i++)
        snap_ev_writer_release(&impl->traces[i]);
    gm_free(impl->traces);
    gm_arena_release(&impl->arena);
    gm_free(impl);
}

const struct gm_snapshot_device *gm_snapshot_device_by_index(const struct gm_snapshot *snap,
                                                             int32_t index)
{
    for (size_t i = 0; i < snap->n_devices; i++)
        if (snap->devices[i].index == index)
            return &snap->devices[i];
    return NULL;
}

const struct gm_snapshot_event_extra *gm_snapshot_event_extra_of(const struct gm_snapshot *snap,
                                                                 const struct gm_snapshot_event *e)
{
    if (!e->extra || e->extra > snap->n_extras)
        return NULL;
    return &snap->extras[e->extra - 1];
}

const char *gm_device_kind_name(enum gm_device_kind kind)
{
    return kind == GM_DEVICE_XPU ? "xpu" : "cuda";
}

const char *gm_snapshot_gen_name(enum gm_snapshot_gen gen)
{
    static const char *const names[] = {"g0", "g1", "g2", "g3", "g4", "g5", "g6", "g7", "g8", "g9"};
    return (unsigned)gen < sizeof(names) / sizeof(names[0]) ? names[gen] : "?";
}

const char *gm_snapshot_gen_torch(enum gm_snapshot_gen gen)
{
    static const char *const torch[] = {"1.13+ (list of segments)",
                                        "2.0",
                                        "2.1",
                                        "2.2",
                                        "2.3",
                                        "2.4-2.7",
                                        "2.8",
                                        "2.9",
                                        "2.10+",
                                        "2026 (2.12+?)"};
    return (unsigned)gen < sizeof(torch) / sizeof(torch[0]) ? torch[gen] : "?";
}

const char *gm_block_state_name(enum gm_block_state s)
{
    switch (s) {
    case GM_BLOCK_INACTIVE:
        return "inactive";
    case GM_BLOCK_ACTIVE_ALLOCATED:
        return "active_allocated";
    case GM_BLOCK_ACTIVE_PENDING_FREE:
        return "active_pending_free";
    default:
        return "unknown";
    }
}

const char *gm_snapshot_action_name(enum gm_snapshot_action a)
{
    static const char *const names[GM_ACTION_COUNT] = {
        "alloc",       "free_requested", "free_completed", "segment_alloc", "segment_free",
        "segment_map", "segment_unmap",  "snapshot",       "oom",           "other"};
    return (unsigned)a < GM_ACTION_COUNT ? names[a] : "other";
}
