/* SPDX-License-Identifier: MIT */
/* load.c - read account files (schema gpumem.account/1), written by the interposer
 * (preload/output.c), one per process, or merged into one by gm_account_merge().
 *
 * Layout: JSON lines, each an object with "type" and "pid" (the process it belongs to);
 * times are CLOCK_MONOTONIC nanoseconds ("t"), bytes are integers.
 *   start    first line of a process: "schema":"gpumem.account/1", ppid, t, realtime_ns,
 *            rank, local_rank, world_size (when set), command, interval_ms, version
 *   merged   first line of a merged file: "schema", files (a header; no pid)
 *   object   id, lib (gm_account_lib_key()), path: a loaded object credited by events
 *   device   device (CUDA ordinal), uuid, name, total, granularity, granularity_measured
 *   event    t, op (alloc free context context_end module module_end graph graph_end
 *            reserve reserve_end map unmap pool pool_end), api, kind, device, addr, bytes,
 *            object, source (measured ops)
 *   sample   t, at (periodic, exit, signal), device (-1: pinned host memory), used (null:
 *            unknown), used_source, used_t, consistent, context, contexts, context_source,
 *            modules, module_count, modules_source, graphs, graph_count, graphs_source,
 *            rounding, virtual, tracked_peak, tracked_peak_t, memory [[object, kind,
 *            bytes, count], ...]: the process's counters at t
 *   stack    one of the largest allocations: t, device, kind, api, addr, bytes, object,
 *            frames ["object+0xoffset (symbol)", ...]
 *   disabled t, reason: the interposer stopped accounting
 *   end      t, reason (exit, signal), signal, events, dropped, unhooked, ...
 * A process's lines follow its start line.  A last line without its newline (the process
 * was killed while writing it) is ignored when it does not parse.
 *
 * For each device of a process: the peak is the consistent sample with the highest device
 * used (the highest counted sum where nothing was read); the end is the exit or signal
 * sample, else the last sample.  Their equations are made by balance.c. */
#include "account/account_int.h"

#include "base/buf.h"
#include "base/json_in.h"
#include "base/json_load.h"
#include "gpumem/arena.h"
#include "gpumem/units.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum gm_status gm_account_new(struct gm_account **out, struct gm_error *err)
{
    *out = gm_calloc(1, sizeof(**out));
    return *out ? GM_OK : gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
}

static void process_release(struct gm_account_process *p, struct acc_process_state *st)
{
    for (size_t d = 0; d < p->n_devices; d++)
        gm_free(p->devices[d].points);
    gm_free(p->devices);
    gm_free(p->largest);
    gm_free(st->objects);
    gm_free(st->dev);
}

void gm_account_free(struct gm_account *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n_processes; i++)
        process_release(&a->processes[i], &a->states[i]);
    gm_free(a->processes);
    gm_free(a->states);
    gm_free(a);
}

size_t gm_account_n_processes(const struct gm_account *a)
{
    return a ? a->n_processes : 0;
}

const struct gm_account_process *gm_account_process(const struct gm_account *a, size_t i)
{
    return a && i < a->n_processes ? &a->processes[i] : NULL;
}

enum gm_account_lib acc_object_lib(const struct acc_object *objects, uint32_t id)
{
    if (!objects || id >= ACC_MAX_OBJECTS)
        return GM_ACCOUNT_LIB_UNKNOWN;
    return objects[id].name[0] || objects[id].lib != GM_ACCOUNT_LIB_UNKNOWN
               ? objects[id].lib
               : GM_ACCOUNT_LIB_UNKNOWN;
}

const char *acc_object_name(const struct acc_object *objects, uint32_t id)
{
    return objects && id < ACC_MAX_OBJECTS ? objects[id].name : "";
}

/* ---- reading one line ---- */

struct reader {
    struct gm_account *a;
    const char *name;
    uint64_t line_no;
    uint64_t offset; /* of the line */
    size_t first;    /* processes before this data: pids are looked up from here */
    size_t last;     /* the process of the previous line (a cache) */
    bool header_seen;
};

/* A bad line: GM_ERR_FORMAT "<name>: line N: <why>" at the line's offset. */
static enum gm_status bad(const struct reader *r, struct gm_error *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static enum gm_status bad(const struct reader *r, struct gm_error *err, const char *fmt, ...)
{
    char why[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    return gm_fail(err, GM_ERR_FORMAT, r->offset, "%s: line %llu: %s", r->name,
                   (unsigned long long)r->line_no, why);
}

#define BAD(r, err, ...) bad((r), (err), __VA_ARGS__)

static bool get_u64(const json_t *o, const char *k, uint64_t *v)
{
    struct gm_reading r = gm_jin_reading(o, k);
    if (r.valid)
        *v = r.value;
    return r.valid;
}

/* obj[k] as a key of one of the account's enums. */
static bool get_lib(const json_t *o, const char *k, enum gm_account_lib *out)
{
    const json_t *v = json_object_get(o, k);
    return json_is_string(v) &&
           gm_account_lib_from_key(json_string_value(v), json_string_length(v), out);
}

static bool get_kind(const json_t *o, const char *k, enum gm_account_kind *out)
{
    const json_t *v = json_object_get(o, k);
    return json_is_string(v) &&
           gm_account_kind_from_key(json_string_value(v), json_string_length(v), out);
}

static bool get_reading(const json_t *o, const char *k, enum gm_account_reading *out)
{
    const json_t *v = json_object_get(o, k);
    return json_is_string(v) &&
           gm_account_reading_from_key(json_string_value(v), json_string_length(v), out);
}

static bool get_int(const json_t *o, const char *k, int64_t lo, int64_t hi, int64_t *v)
{
    const json_t *j = json_object_get(o, k);
    if (!json_is_integer(j) || json_integer_value(j) < lo || json_integer_value(j) > hi)
        return false;
    *v = json_integer_value(j);
    return true;
}

static void copy_str(char *dst, size_t n, const char *src)
{
    size_t len = src ? strlen(src) : 0;
    if (len >= n)
        len = n - 1;
    if (len)
        memcpy(dst, src, len);
    dst[len] = '\0';
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static struct gm_account_process *find(struct reader *r, uint32_t pid, size_t *index)
{
    struct gm_account *a = r->a;
    if (r->last < a->n_processes && r->last >= r->first && a->processes[r->last].pid == pid) {
        *index = r->last;
        return &a->processes[r->last];
    }
    for (size_t i = a->n_processes; i-- > r->first;) {
        if (a->processes[i].pid == pid) {
            r->last = *index = i;
            return &a->processes[i];
        }
    }
    return NULL;
}

static enum gm_status line_start(struct reader *r, const json_t *o, uint32_t pid,
                                 struct gm_error *err)
{
    struct gm_account *a = r->a;
    struct gm_account_process *p;
    int64_t v;
    if (a->n_processes == ACC_MAX_PROCESSES)
        return gm_fail(err, GM_ERR_LIMIT, r->offset, "%s: more than %d processes", r->name,
                       ACC_MAX_PROCESSES);
    if (a->n_processes == a->cap_processes) {
        size_t cap = a->cap_processes ? a->cap_processes * 2 : 8;
        struct gm_account_process *np = gm_realloc(a->processes, cap * sizeof(*np));
        struct acc_process_state *ns;
        if (!np)
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
        a->processes = np;
        ns = gm_realloc(a->states, cap * sizeof(*ns));
        if (!ns)
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
        a->states = ns;
        a->cap_processes = cap;
    }
    p = &a->processes[a->n_processes];
    memset(p, 0, sizeof(*p));
    memset(&a->states[a->n_processes], 0, sizeof(a->states[0]));
    p->pid = pid;
    p->rank = p->local_rank = -1;
    p->end = GM_ACCOUNT_END_NONE;
    if (get_int(o, "ppid", 0, UINT32_MAX, &v))
        p->ppid = (uint32_t)v;
    if (get_int(o, "rank", 0, INT32_MAX, &v))
        p->rank = (int32_t)v;
    if (get_int(o, "local_rank", 0, INT32_MAX, &v))
        p->local_rank = (int32_t)v;
    if (!get_u64(o, "t", &p->t_start_ns))
        return BAD(r, err, "start without its time \"t\"");
    p->t_end_ns = p->t_start_ns;
    copy_str(p->command, sizeof(p->command), gm_jin_str(o, "command"));
    copy_str(p->file, sizeof(p->file), base_name(r->name));
    r->last = a->n_processes++;
    return GM_OK;
}

static enum gm_status line_object(struct reader *r, const json_t *o, struct acc_process_state *st,
                                  struct gm_error *err)
{
    int64_t id;
    enum gm_account_lib lib;
    const char *path = gm_jin_str(o, "path");
    if (!get_int(o, "id", 0, ACC_MAX_OBJECTS - 1, &id) || !path || !get_lib(o, "lib", &lib))
        return BAD(r, err, "object without a valid id (0-%d), lib and path", ACC_MAX_OBJECTS - 1);
    if (!st->objects && !(st->objects = gm_calloc(ACC_MAX_OBJECTS, sizeof(*st->objects))))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    st->objects[id].lib = lib;
    copy_str(st->objects[id].name, sizeof(st->objects[id].name), base_name(path));
    return GM_OK;
}

/* The device entry of ordinal 'cuda', added when new. */
static enum gm_status device_of(struct reader *r, struct gm_account_process *p,
                                struct acc_process_state *st, int64_t cuda, size_t *out,
                                struct gm_error *err)
{
    for (size_t i = 0; i < p->n_devices; i++) {
        if (p->devices[i].cuda == cuda) {
            *out = i;
            return GM_OK;
        }
    }
    if (p->n_devices == ACC_MAX_DEVICES)
        return BAD(r, err, "more than %d devices in one process", ACC_MAX_DEVICES);
    if (p->n_devices == st->cap_devices) {
        size_t cap = st->cap_devices ? st->cap_devices * 2 : 2;
        struct gm_account_device *nd = gm_realloc(p->devices, cap * sizeof(*nd));
        struct acc_device_state *ns;
        if (!nd)
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
        p->devices = nd;
        if (!(ns = gm_realloc(st->dev, cap * sizeof(*ns))))
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
        st->dev = ns;
        st->cap_devices = cap;
    }
    /* devices stay in CUDA order */
    {
        size_t at = p->n_devices;
        while (at > 0 && p->devices[at - 1].cuda > cuda)
            at--;
        memmove(&p->devices[at + 1], &p->devices[at], (p->n_devices - at) * sizeof(*p->devices));
        memmove(&st->dev[at + 1], &st->dev[at], (p->n_devices - at) * sizeof(*st->dev));
        memset(&p->devices[at], 0, sizeof(*p->devices));
        memset(&st->dev[at], 0, sizeof(*st->dev));
        p->devices[at].cuda = (int32_t)cuda;
        p->devices[at].granularity = (uint64_t)2 << 20;
        p->n_devices++;
        *out = at;
    }
    return GM_OK;
}

static enum gm_status line_device(struct reader *r, const json_t *o, struct gm_account_process *p,
                                  struct acc_process_state *st, struct gm_error *err)
{
    int64_t cuda;
    size_t i;
    struct gm_account_device *d;
    enum gm_status s;
    if (!get_int(o, "device", 0, INT32_MAX, &cuda))
        return BAD(r, err, "device line without its CUDA ordinal");
    if ((s = device_of(r, p, st, cuda, &i, err)) != GM_OK)
        return s;
    d = &p->devices[i];
    copy_str(d->uuid, sizeof(d->uuid), gm_jin_str(o, "uuid"));
    copy_str(d->name, sizeof(d->name), gm_jin_str(o, "name"));
    (void)get_u64(o, "total", &d->total);
    if (get_u64(o, "granularity", &d->granularity) && !d->granularity)
        return BAD(r, err, "a device's granularity of 0 bytes");
    d->granularity_measured = gm_jin_bool(o, "granularity_measured", false);
    return GM_OK;
}

/* The sample's fields into *s. */
static enum gm_status parse_sample(struct reader *r, const json_t *o, bool host,
                                   struct acc_sample *s, struct gm_error *err)
{
    const json_t *mem = gm_jin_array(o, "memory"), *u;
    const char *at = gm_jin_str(o, "at");
    size_t i;
    memset(s, 0, sizeof(*s));
    s->present = true;
    if (!get_u64(o, "t", &s->t_ns) || !at || !mem)
        return BAD(r, err, "sample without t, at and memory");
    s->at = !strcmp(at, "exit")     ? GM_ACCOUNT_AT_EXIT
            : !strcmp(at, "signal") ? GM_ACCOUNT_AT_SIGNAL
                                    : GM_ACCOUNT_AT_PEAK;
    if (!host) {
        u = json_object_get(o, "used");
        s->used_valid = json_is_integer(u) && json_integer_value(u) >= 0;
        s->used = s->used_valid ? (uint64_t)json_integer_value(u) : 0;
        if (s->used_valid && !get_reading(o, "used_source", &s->used_source))
            return BAD(r, err, "sample with a reading but no valid used_source");
        if (!get_u64(o, "used_t", &s->used_t_ns))
            s->used_t_ns = s->t_ns;
        s->consistent = gm_jin_bool(o, "consistent", false);
        (void)get_u64(o, "context", &s->context);
        (void)get_u64(o, "contexts", &s->n_context);
        (void)get_u64(o, "modules", &s->modules);
        (void)get_u64(o, "module_count", &s->n_modules);
        (void)get_u64(o, "graphs", &s->graphs);
        (void)get_u64(o, "graph_count", &s->n_graphs);
        (void)get_u64(o, "rounding", &s->rounding);
        (void)get_u64(o, "virtual", &s->virt);
        (void)get_reading(o, "context_source", &s->context_source);
        (void)get_reading(o, "modules_source", &s->modules_source);
        (void)get_reading(o, "graphs_source", &s->graphs_source);
    }
    if (json_array_size(mem) > ACC_MAX_MEM)
        return BAD(r, err, "sample with more than %d memory entries", ACC_MAX_MEM);
    json_array_foreach(mem, i, u)
    {
        const json_t *ob = json_array_get(u, 0), *kd = json_array_get(u, 1);
        const json_t *by = json_array_get(u, 2), *ct = json_array_get(u, 3);
        struct acc_mem *m = &s->mem[s->n_mem];
        if (!json_is_array(u) || json_array_size(u) != 4 || !json_is_integer(ob) ||
            json_integer_value(ob) < 0 || json_integer_value(ob) >= ACC_MAX_OBJECTS ||
            !json_is_string(kd) ||
            !gm_account_kind_from_key(json_string_value(kd), json_string_length(kd), &m->kind) ||
            !json_is_integer(by) || json_integer_value(by) < 0 || !json_is_integer(ct) ||
            json_integer_value(ct) < 0)
            return BAD(r, err, "memory entry %zu is not [object, kind, bytes, count]", i);
        m->object = (uint32_t)json_integer_value(ob);
        m->bytes = (uint64_t)json_integer_value(by);
        m->count = (uint64_t)json_integer_value(ct);
        s->n_mem++;
    }
    return GM_OK;
}

static enum gm_status add_point(struct gm_account_device *d, struct acc_device_state *ds,
                                const struct acc_sample *s, const struct acc_object *objects,
                                struct gm_error *err)
{
    struct gm_account_point *pt;
    if (d->n_points == ACC_MAX_POINTS)
        return GM_OK; /* the timeline keeps its first points; peaks and ends still count */
    if (d->n_points == ds->cap_points) {
        size_t cap = ds->cap_points ? ds->cap_points * 2 : 64;
        struct gm_account_point *np = gm_realloc(d->points, cap * sizeof(*np));
        if (!np)
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
        d->points = np;
        ds->cap_points = cap;
    }
    pt = &d->points[d->n_points++];
    memset(pt, 0, sizeof(*pt));
    pt->t_ns = s->t_ns;
    pt->used_valid = s->used_valid;
    pt->used = s->used;
    pt->seen = acc_seen(s, objects, pt->by_lib);
    pt->context = gm_add_sat(gm_add_sat(s->context, s->modules), s->graphs);
    return GM_OK;
}

static enum gm_status line_sample(struct reader *r, const json_t *o, struct gm_account_process *p,
                                  struct acc_process_state *st, struct gm_error *err)
{
    struct acc_sample s;
    int64_t cuda;
    size_t i;
    enum gm_status rc;
    struct gm_account_device *d;
    struct acc_device_state *ds;
    uint64_t seen;
    if (!get_int(o, "device", -1, INT32_MAX, &cuda))
        return BAD(r, err, "sample without its device");
    if ((rc = parse_sample(r, o, cuda < 0, &s, err)) != GM_OK)
        return rc;
    if (cuda < 0) {
        /* pinned host memory: its highest, by class */
        uint64_t total = 0, by[GM_ACCOUNT_LIB__COUNT] = {0};
        for (size_t k = 0; k < s.n_mem; k++) {
            uint64_t *b = &by[acc_object_lib(st->objects, s.mem[k].object)];
            total = gm_add_sat(total, s.mem[k].bytes);
            *b = gm_add_sat(*b, s.mem[k].bytes);
            if (s.mem[k].kind == GM_ACCOUNT_KIND_HOST_REGISTERED &&
                s.mem[k].bytes > p->host_registered_peak)
                p->host_registered_peak = s.mem[k].bytes;
        }
        st->host_now = total;
        if (total >= p->host_peak) {
            p->host_peak = total;
            memcpy(p->host_bytes, by, sizeof(by));
        }
        return GM_OK;
    }
    if ((rc = device_of(r, p, st, cuda, &i, err)) != GM_OK)
        return rc;
    d = &p->devices[i];
    ds = &st->dev[i];
    (void)get_u64(o, "tracked_peak", &d->tracked_peak);
    (void)get_u64(o, "tracked_peak_t", &d->tracked_peak_t_ns);
    seen = acc_seen(&s, st->objects, NULL);
    /* the peak: a consistent reading above the best so far; without readings, the most
     * counted */
    if (s.used_valid && s.consistent &&
        (!ds->peak.present || !ds->peak.used_valid || s.used > ds->peak.used))
        ds->peak = s, ds->peak_seen = seen;
    else if (!s.used_valid && (!ds->peak.present || (!ds->peak.used_valid && seen > ds->peak_seen)))
        ds->peak = s, ds->peak_seen = seen;
    /* the end: an exit or signal sample wins over periodic ones */
    if (s.at != GM_ACCOUNT_AT_PEAK || !ds->end.present || ds->end.at == GM_ACCOUNT_AT_PEAK)
        ds->end = s;
    return add_point(d, ds, &s, st->objects, err);
}

static enum gm_status line_stack(struct reader *r, const json_t *o, struct gm_account_process *p,
                                 struct acc_process_state *st, struct gm_error *err)
{
    const json_t *frames = gm_jin_array(o, "frames"), *f;
    struct gm_account_alloc a;
    int64_t dev, obj;
    size_t i, at;
    memset(&a, 0, sizeof(a));
    if (!get_u64(o, "t", &a.t_ns) || !get_u64(o, "bytes", &a.bytes) ||
        !get_int(o, "device", -1, INT32_MAX, &dev) ||
        !get_int(o, "object", 0, ACC_MAX_OBJECTS - 1, &obj) || !get_kind(o, "kind", &a.kind) ||
        !frames)
        return BAD(r, err, "stack without t, bytes, device, object, kind and frames");
    a.device = (int32_t)dev;
    a.lib = acc_object_lib(st->objects, (uint32_t)obj);
    copy_str(a.object, sizeof(a.object), acc_object_name(st->objects, (uint32_t)obj));
    copy_str(a.api, sizeof(a.api), gm_jin_str(o, "api"));
    {
        const char *addr = gm_jin_str(o, "addr");
        a.addr = addr ? strtoull(addr, NULL, 16) : 0;
    }
    json_array_foreach(frames, i, f)
    {
        if (!json_is_string(f))
            return BAD(r, err, "stack frame %zu is not a string", i);
        if (a.n_frames < GM_ACCOUNT_MAX_FRAMES)
            copy_str(a.frames[a.n_frames++], sizeof(a.frames[0]), json_string_value(f));
    }
    /* keep the largest, largest first */
    if (p->n_largest == ACC_MAX_LARGEST && a.bytes <= p->largest[p->n_largest - 1].bytes)
        return GM_OK;
    if (p->n_largest == st->cap_largest) {
        size_t cap = st->cap_largest ? st->cap_largest * 2 : 8;
        struct gm_account_alloc *nl;
        if (cap > ACC_MAX_LARGEST)
            cap = ACC_MAX_LARGEST;
        if (cap > st->cap_largest) {
            if (!(nl = gm_realloc(p->largest, cap * sizeof(*nl))))
                return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
            p->largest = nl;
            st->cap_largest = cap;
        }
    }
    if (p->n_largest == ACC_MAX_LARGEST)
        p->n_largest--;
    for (at = p->n_largest; at > 0 && p->largest[at - 1].bytes < a.bytes; at--)
        ;
    memmove(&p->largest[at + 1], &p->largest[at], (p->n_largest - at) * sizeof(a));
    p->largest[at] = a;
    p->n_largest++;
    return GM_OK;
}

static enum gm_status line_end(struct reader *r, const json_t *o, struct gm_account_process *p,
                               struct gm_error *err)
{
    const char *reason = gm_jin_str(o, "reason");
    int64_t sig;
    if (!reason)
        return BAD(r, err, "end without its reason");
    p->end = !strcmp(reason, "signal") ? GM_ACCOUNT_END_SIGNAL : GM_ACCOUNT_END_EXIT;
    if (get_int(o, "signal", 0, 128, &sig))
        p->signal = (int)sig;
    (void)get_u64(o, "dropped", &p->n_dropped);
    (void)get_u64(o, "unhooked", &p->n_unhooked);
    return GM_OK;
}

static enum gm_status parse_line(struct reader *r, const char *line, size_t len,
                                 struct gm_error *err)
{
    json_t *o = NULL;
    const char *type, *schema;
    int64_t pid;
    size_t index;
    struct gm_account_process *p;
    struct acc_process_state *st;
    enum gm_status rc;
    uint64_t t;

    if ((rc = gm_json_load(line, len, r->offset, &o, err)) != GM_OK) {
        if (err)
            gm_error_prefix(err, "%s: line %llu", r->name, (unsigned long long)r->line_no);
        return rc;
    }
    type = gm_jin_str(o, "type");
    schema = gm_jin_str(o, "schema");
    rc = GM_OK;
    if (!json_is_object(o) || !type) {
        rc = BAD(r, err, "not an object with a \"type\"");
        goto out;
    }
    if (schema && strcmp(schema, "gpumem.account/1") != 0) {
        rc = BAD(r, err, "schema '%s', expected gpumem.account/1", schema);
        goto out;
    }
    if (!r->header_seen && !schema) {
        rc = BAD(r, err, "not an account file: its first line declares no schema");
        goto out;
    }
    r->header_seen = true;
    if (!strcmp(type, "merged"))
        goto out;
    if (!get_int(o, "pid", 1, UINT32_MAX, &pid)) {
        rc = BAD(r, err, "%s line without a valid pid", type);
        goto out;
    }
    if (!strcmp(type, "start")) {
        rc = line_start(r, o, (uint32_t)pid, err);
        goto out;
    }
    if (!(p = find(r, (uint32_t)pid, &index))) {
        rc = BAD(r, err, "%s line of process %lld before its start line", type, (long long)pid);
        goto out;
    }
    st = &r->a->states[index];
    if (get_u64(o, "t", &t) && t > p->t_end_ns)
        p->t_end_ns = t;
    if (!strcmp(type, "object"))
        rc = line_object(r, o, st, err);
    else if (!strcmp(type, "device"))
        rc = line_device(r, o, p, st, err);
    else if (!strcmp(type, "event"))
        p->n_events++;
    else if (!strcmp(type, "sample"))
        rc = line_sample(r, o, p, st, err);
    else if (!strcmp(type, "stack"))
        rc = line_stack(r, o, p, st, err);
    else if (!strcmp(type, "end"))
        rc = line_end(r, o, p, err);
    else if (!strcmp(type, "disabled")) {
        p->disabled = true;
        (void)get_u64(o, "t", &p->disabled_t_ns);
        copy_str(p->disabled_reason, sizeof(p->disabled_reason), gm_jin_str(o, "reason"));
    } else
        rc = BAD(r, err, "unknown line type '%s'", type);
out:
    json_decref(o);
    return rc;
}

/* The equations of the processes read from this data. */
static void finish(struct gm_account *a, size_t first)
{
    for (size_t i = first; i < a->n_processes; i++) {
        struct gm_account_process *p = &a->processes[i];
        struct acc_process_state *st = &a->states[i];
        for (size_t k = 0; k < p->n_devices; k++) {
            struct gm_account_device *d = &p->devices[k];
            struct acc_device_state *ds = &st->dev[k];
            memset(&d->peak, 0, sizeof(d->peak));
            memset(&d->end, 0, sizeof(d->end));
            if (ds->peak.present) {
                acc_balance(&ds->peak, st->objects, d, &d->peak);
                d->peak.at = GM_ACCOUNT_AT_PEAK;
            }
            if (ds->end.present) {
                acc_balance(&ds->end, st->objects, d, &d->end);
                if (ds->end.at == GM_ACCOUNT_AT_PEAK)
                    d->end.at = GM_ACCOUNT_AT_LAST;
            }
        }
    }
}

bool gm_account_is_account_data(const void *data, size_t len)
{
    const char *s = data, *nl = memchr(s, '\n', len);
    size_t n = nl ? (size_t)(nl - s) : len;
    json_t *o = NULL;
    bool ok;
    if (n > ACC_MAX_LINE || gm_json_load(s, n, 0, &o, NULL) != GM_OK)
        return false;
    ok = json_is_object(o) && gm_jin_str(o, "schema") &&
         !strcmp(gm_jin_str(o, "schema"), "gpumem.account/1");
    json_decref(o);
    return ok;
}

enum gm_status gm_account_add_data(struct gm_account *a, const char *name, const void *data,
                                   size_t len, struct gm_error *err)
{
    struct reader r;
    const char *s = data;
    size_t pos = 0;
    enum gm_status rc = GM_OK;
    memset(&r, 0, sizeof(r));
    r.a = a;
    r.name = name ? name : "account";
    r.first = r.last = a->n_processes;
    while (pos < len && rc == GM_OK) {
        const char *nl = memchr(s + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - (s + pos)) : len - pos;
        r.line_no++;
        r.offset = pos;
        if (n > ACC_MAX_LINE) {
            rc = BAD(&r, err, "a line of more than %zu bytes", ACC_MAX_LINE);
            break;
        }
        if (n) {
            rc = parse_line(&r, s + pos, n, err);
            if (rc == GM_ERR_FORMAT && !nl && r.header_seen) {
                /* the last line, cut short: its process died while writing it */
                rc = GM_OK;
                gm_error_clear(err);
            }
        }
        pos += n + (nl ? 1 : 0);
    }
    if (rc == GM_OK && !r.header_seen)
        rc = gm_fail(err, GM_ERR_FORMAT, 0, "%s: empty: not an account file", r.name);
    finish(a, r.first);
    return rc;
}

#define MAX_FILE_BYTES ((size_t)4 << 30)

static int by_name(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

static bool account_file_name(const char *n)
{
    size_t len = strlen(n);
    return !strncmp(n, "account-", 8) && len > 14 && !strcmp(n + len - 6, ".jsonl");
}

/* The account files of folder 'dir', sorted, into *names (n each "dir/name"; gm_free() each
 * and the array). */
static enum gm_status list_dir(const char *dir, char ***names, size_t *n, struct gm_error *err)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t cap = 0;
    *names = NULL;
    *n = 0;
    if (!d)
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "cannot read folder '%s': %s", dir,
                       strerror(errno));
    while ((e = readdir(d)) != NULL) {
        size_t len;
        char *path;
        if (!account_file_name(e->d_name))
            continue;
        if (*n == cap) {
            char **nn = gm_realloc(*names, (cap = cap ? cap * 2 : 16) * sizeof(*nn));
            if (!nn)
                goto nomem;
            *names = nn;
        }
        len = strlen(dir) + strlen(e->d_name) + 2;
        if (!(path = gm_malloc(len)))
            goto nomem;
        snprintf(path, len, "%s/%s", dir, e->d_name);
        (*names)[(*n)++] = path;
    }
    closedir(d);
    if (*n > 1)
        qsort(*names, *n, sizeof(**names), by_name);
    return GM_OK;
nomem:
    closedir(d);
    return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        gm_free(names[i]);
    gm_free(names);
}

static enum gm_status add_one_file(struct gm_account *a, const char *path, struct gm_error *err)
{
    struct gm_buf b;
    enum gm_status st;
    gm_buf_init(&b, MAX_FILE_BYTES);
    st = gm_buf_read_file(&b, path, err);
    if (st == GM_OK)
        st = gm_account_add_data(a, path, b.data ? b.data : "", b.len, err);
    gm_buf_release(&b);
    return st;
}

enum gm_status gm_account_add_file(struct gm_account *a, const char *path, struct gm_error *err)
{
    struct stat sb;
    char **names;
    size_t n;
    enum gm_status st;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return add_one_file(a, path, err);
    if ((st = list_dir(path, &names, &n, err)) != GM_OK)
        return st;
    if (n == 0)
        st = gm_fail(err, GM_ERR_NOENT, GM_NO_OFFSET,
                     "no account file (account-*.jsonl) in '%s': did the command use the GPU?",
                     path);
    for (size_t i = 0; i < n && st == GM_OK; i++)
        st = add_one_file(a, names[i], err);
    free_names(names, n);
    return st;
}

/* ---- merging files into one timeline ---- */

static const char merged_header[] = "{\"schema\":\"gpumem.account/1\",\"type\":\"merged\",";

struct part {
    struct gm_buf b;
    uint64_t t; /* the first start line's time */
};

static int by_start(const void *x, const void *y)
{
    const struct part *a = x, *b = y;
    return a->t < b->t ? -1 : a->t > b->t;
}

enum gm_status gm_account_merge(FILE *f, const char *const *paths, size_t n, struct gm_error *err)
{
    struct part *parts = NULL;
    size_t n_parts = 0, cap = 0;
    enum gm_status st = GM_OK;
    for (size_t i = 0; i < n && st == GM_OK; i++) {
        char **names = NULL, *one[1];
        size_t m = 1;
        struct stat sb;
        bool dir = stat(paths[i], &sb) == 0 && S_ISDIR(sb.st_mode);
        if (dir) {
            if ((st = list_dir(paths[i], &names, &m, err)) != GM_OK)
                break;
        } else {
            one[0] = (char *)(uintptr_t)paths[i];
        }
        for (size_t k = 0; k < m && st == GM_OK; k++) {
            const char *path = dir ? names[k] : one[0];
            struct gm_account *check = NULL;
            struct part *p;
            if (n_parts == cap) {
                struct part *np = gm_realloc(parts, (cap = cap ? cap * 2 : 8) * sizeof(*np));
                if (!np) {
                    st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
                    break;
                }
                parts = np;
            }
            p = &parts[n_parts];
            gm_buf_init(&p->b, MAX_FILE_BYTES);
            if ((st = gm_buf_read_file(&p->b, path, err)) != GM_OK ||
                (st = gm_account_new(&check, err)) != GM_OK ||
                (st = gm_account_add_data(check, path, p->b.data ? p->b.data : "", p->b.len,
                                          err)) != GM_OK) {
                gm_account_free(check);
                gm_buf_release(&p->b);
                break;
            }
            p->t = check->n_processes ? check->processes[0].t_start_ns : 0;
            gm_account_free(check);
            n_parts++;
        }
        if (dir)
            free_names(names, m);
    }
    if (st == GM_OK) {
        if (n_parts > 1)
            qsort(parts, n_parts, sizeof(*parts), by_start);
        fprintf(f, "%s\"files\":%zu}\n", merged_header, n_parts);
        for (size_t i = 0; i < n_parts; i++) {
            const char *s = parts[i].b.data;
            size_t len = parts[i].b.len, pos = 0;
            while (pos < len) {
                const char *nl = memchr(s + pos, '\n', len - pos);
                size_t k;
                if (!nl)
                    break; /* a line cut short stays out */
                k = (size_t)(nl - (s + pos)) + 1;
                /* the header of a merged input is not repeated */
                if (k < sizeof(merged_header) - 1 ||
                    memcmp(s + pos, merged_header, sizeof(merged_header) - 1) != 0)
                    fwrite(s + pos, 1, k, f);
                pos += k;
            }
        }
        if (fflush(f) != 0 || ferror(f))
            st = gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "writing the merged account failed: %s",
                         strerror(errno));
    }
    for (size_t i = 0; i < n_parts; i++)
        gm_buf_release(&parts[i].b);
    gm_free(parts);
    return st;
}
