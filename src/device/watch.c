/* SPDX-License-Identifier: MIT */
/* watch.c - samples and peaks of a `gpumem watch` run, and its CSV / JSON files. */
#include "gpumem/watch.h"

#include "device/device_int.h"
#include "gpumem/arena.h"
#include "gpumem/json.h"
#include "gpumem/version.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void gm_watch_init(struct gm_watch *w, size_t max_samples)
{
    memset(w, 0, sizeof(*w));
    w->max_samples = max_samples ? max_samples : (size_t)4 << 20;
}

void gm_watch_release(struct gm_watch *w)
{
    gm_free(w->samples);
    w->samples = NULL;
    w->n_samples = w->cap_samples = 0;
}

int gm_watch_add_device(struct gm_watch *w, const char *label, const char *name,
                        struct gm_reading total, struct gm_reading baseline)
{
    struct gm_watch_device *d;
    if (w->n_dev >= GM_WATCH_MAX_DEVICES)
        return -1;
    d = &w->dev[w->n_dev];
    memset(d, 0, sizeof(*d));
    gm_strlcpy(d->label, label, sizeof(d->label));
    gm_strlcpy(d->name, name, sizeof(d->name));
    d->total = total;
    d->baseline = baseline;
    return (int)w->n_dev++;
}

static enum gm_status push(struct gm_watch *w, const struct gm_watch_sample *s,
                           struct gm_error *err)
{
    if (w->on_sample)
        w->on_sample(w, s, w->on_sample_arg);
    if (w->n_samples >= w->max_samples) {
        w->samples_dropped = true;
        return GM_OK;
    }
    if (w->n_samples == w->cap_samples) {
        size_t nc = w->cap_samples ? w->cap_samples * 2 : 1024;
        struct gm_watch_sample *p;
        if (nc > w->max_samples)
            nc = w->max_samples;
        p = gm_realloc(w->samples, nc * sizeof(*p));
        if (!p)
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory for samples");
        w->samples = p;
        w->cap_samples = nc;
    }
    w->samples[w->n_samples++] = *s;
    return GM_OK;
}

enum gm_status gm_watch_device_sample(struct gm_watch *w, uint64_t t_ms, uint32_t device,
                                      const struct gm_device_memory *m, struct gm_error *err)
{
    struct gm_watch_sample s;
    struct gm_watch_device *d;

    if (device >= w->n_dev)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "watch: no device %u", device);
    d = &w->dev[device];
    memset(&s, 0, sizeof(s));
    s.t_ms = t_ms;
    s.device = device;
    s.used = m->used;
    s.free = m->free;
    d->source = m->source;
    if (m->used.valid && (!d->peak.valid || m->used.value > d->peak.value)) {
        d->peak = m->used;
        d->peak_t_ms = t_ms;
    }
    w->n_device_reads++;
    if (t_ms > w->end_t_ms)
        w->end_t_ms = t_ms;
    return push(w, &s, err);
}

static struct gm_watch_proc *find_proc(struct gm_watch *w, uint32_t pid, uint32_t device)
{
    for (uint32_t k = 0; k < w->n_proc; k++)
        if (w->proc[k].pid == pid && w->proc[k].device == device)
            return &w->proc[k];
    if (w->n_proc >= GM_WATCH_MAX_PROCS)
        return NULL;
    memset(&w->proc[w->n_proc], 0, sizeof(w->proc[0]));
    w->proc[w->n_proc].pid = pid;
    w->proc[w->n_proc].device = device;
    return &w->proc[w->n_proc++];
}

enum gm_status gm_watch_process_sample(struct gm_watch *w, uint64_t t_ms, uint32_t device,
                                       const struct gm_process_memory *procs,
                                       const enum gm_watch_attr *attr, const char *const *names,
                                       size_t n, struct gm_error *err)
{
    struct gm_watch_device *d;
    uint64_t sum = 0;
    bool any = false;

    if (device >= w->n_dev)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "watch: no device %u", device);
    d = &w->dev[device];
    if (t_ms != w->round_t_ms || !w->n_process_reads) {
        w->round_t_ms = t_ms;
        w->round_total = 0;
    }
    w->n_process_reads++;
    for (size_t k = 0; k < n; k++) {
        struct gm_watch_sample s;
        struct gm_watch_proc *p;
        enum gm_status st;

        if (attr[k] == GM_WATCH_ATTR_NONE)
            continue;
        memset(&s, 0, sizeof(s));
        s.t_ms = t_ms;
        s.device = device;
        s.pid = procs[k].pid;
        s.used = procs[k].used;
        s.attr = attr[k];
        st = push(w, &s, err);
        if (st)
            return st;
        any = true;
        w->attr_seen |= 1u << attr[k];
        p = find_proc(w, procs[k].pid, device);
        if (p) {
            if (!p->first_t_ms && !p->last_t_ms)
                p->first_t_ms = t_ms;
            p->last_t_ms = t_ms;
            p->attr = attr[k];
            if (names && names[k] && names[k][0])
                gm_strlcpy(p->name, names[k], sizeof(p->name));
            if (procs[k].used.valid && procs[k].used.value > p->peak) {
                p->peak = procs[k].used.value;
                p->peak_t_ms = t_ms;
            }
        }
        if (procs[k].used.valid)
            sum += procs[k].used.value;
    }
    if (t_ms > w->end_t_ms)
        w->end_t_ms = t_ms;
    if (!any)
        return GM_OK;
    w->cmd_seen = true;
    if (!d->cmd_peak.valid || sum > d->cmd_peak.value) {
        d->cmd_peak = (struct gm_reading){sum, true};
        d->cmd_peak_t_ms = t_ms;
    }
    w->round_total += sum;
    if (w->round_total > w->cmd_peak) {
        w->cmd_peak = w->round_total;
        w->cmd_peak_t_ms = t_ms;
    }
    return GM_OK;
}

enum gm_status gm_watch_setup(struct gm_watch *w, struct gm_devices *d, int only_cuda,
                              struct gm_error *err)
{
    for (size_t i = 0; i < gm_devices_count(d) && w->n_dev < GM_WATCH_MAX_DEVICES; i++) {
        const struct gm_device_info *info = gm_devices_info(d, i);
        struct gm_device_memory m;
        struct gm_process_memory procs[GM_WATCH_BASELINE_PIDS];
        struct gm_watch_device *wd;
        char label[16];
        size_t n = 0;
        enum gm_status st;
        int k;

        if (only_cuda >= 0 && info->cuda_index != only_cuda)
            continue;
        if (info->cuda_index >= 0)
            snprintf(label, sizeof(label), "cuda:%d", info->cuda_index);
        else
            snprintf(label, sizeof(label), "nvml:%d", info->nvml_index);
        st = gm_devices_memory(d, i, &m, err);
        if (st)
            return gm_error_prefix(err, "%s", label);
        k = gm_watch_add_device(w, label, info->name, m.total, m.used);
        if (k < 0)
            break;
        wd = &w->dev[k];
        wd->pos = i;
        if (gm_devices_processes(d, i, procs, GM_WATCH_BASELINE_PIDS, &n, NULL) == GM_OK)
            for (size_t j = 0; j < n && j < GM_WATCH_BASELINE_PIDS; j++)
                wd->baseline_pids[wd->n_baseline_pids++] = procs[j].pid;
    }
    return GM_OK;
}

void gm_watch_poll_devices(struct gm_watch *w, struct gm_devices *d, uint64_t t_ms)
{
    for (uint32_t k = 0; k < w->n_dev; k++) {
        struct gm_device_memory m;
        struct gm_error e;
        if (gm_devices_memory(d, w->dev[k].pos, &m, &e) == GM_OK)
            gm_watch_device_sample(w, t_ms, k, &m, &e);
    }
}

static bool contains(const uint32_t *v, size_t n, uint32_t x)
{
    for (size_t k = 0; k < n; k++)
        if (v[k] == x)
            return true;
    return false;
}

#define POLL_TREE  1024
#define POLL_PROCS 128

void gm_watch_poll_processes(struct gm_watch *w, struct gm_devices *d, uint64_t t_ms, uint32_t root,
                             bool attached)
{
    uint32_t tree[POLL_TREE];
    size_t n_tree = gm_proc_tree(root, tree, POLL_TREE);

    if (n_tree > POLL_TREE)
        n_tree = POLL_TREE;
    for (uint32_t k = 0; k < w->n_dev; k++) {
        const struct gm_watch_device *wd = &w->dev[k];
        struct gm_process_memory procs[POLL_PROCS];
        enum gm_watch_attr attr[POLL_PROCS];
        char names[POLL_PROCS][32];
        const char *name_ptr[POLL_PROCS];
        struct gm_error e;
        size_t n = 0;

        if (gm_devices_processes(d, wd->pos, procs, POLL_PROCS, &n, &e) != GM_OK)
            continue;
        if (n > POLL_PROCS)
            n = POLL_PROCS;
        for (size_t j = 0; j < n; j++) {
            uint32_t pid = procs[j].pid;
            attr[j] = GM_WATCH_ATTR_NONE;
            names[j][0] = '\0';
            name_ptr[j] = names[j];
            if (contains(tree, n_tree, pid))
                attr[j] = GM_WATCH_ATTR_PID_TREE;
            else if (!attached && !gm_proc_exists(pid) &&
                     !contains(wd->baseline_pids, wd->n_baseline_pids, pid))
                attr[j] = GM_WATCH_ATTR_NEW_PID; /* a host PID we cannot see: PID namespace */
            if (attr[j] == GM_WATCH_ATTR_PID_TREE)
                gm_proc_name(pid, names[j], sizeof(names[j]));
        }
        gm_watch_process_sample(w, t_ms, k, procs, attr, name_ptr, n, &e);
    }
}

const char *gm_watch_attr_name(enum gm_watch_attr a)
{
    switch (a) {
    case GM_WATCH_ATTR_PID_TREE:
        return "process tree";
    case GM_WATCH_ATTR_NEW_PID:
        return "new PID (not visible here)";
    case GM_WATCH_ATTR_NONE:
        break;
    }
    return "device";
}

static const char *attr_key(enum gm_watch_attr a)
{
    switch (a) {
    case GM_WATCH_ATTR_PID_TREE:
        return "pid_tree";
    case GM_WATCH_ATTR_NEW_PID:
        return "new_pid";
    case GM_WATCH_ATTR_NONE:
        break;
    }
    return "device";
}

static void csv_reading(FILE *f, struct gm_reading r)
{
    if (r.valid)
        fprintf(f, "%" PRIu64, r.value);
}

bool gm_watch_write_csv(const struct gm_watch *w, FILE *f)
{
    fprintf(f, "time_ms,device,pid,used_bytes,free_bytes,attribution\n");
    for (size_t k = 0; k < w->n_samples; k++) {
        const struct gm_watch_sample *s = &w->samples[k];
        fprintf(f, "%" PRIu64 ",%s,", s->t_ms, w->dev[s->device].label);
        if (s->pid)
            fprintf(f, "%" PRIu32, s->pid);
        fputc(',', f);
        csv_reading(f, s->used);
        fputc(',', f);
        if (!s->pid)
            csv_reading(f, s->free);
        fprintf(f, ",%s\n", attr_key(s->attr));
    }
    fflush(f);
    return !ferror(f);
}

static void kv_reading(struct gm_json *j, const char *key, struct gm_reading r)
{
    if (r.valid)
        gm_json_kv_u64(j, key, r.value);
    else
        gm_json_kv_null(j, key);
}

static const char *attribution(const struct gm_watch *w)
{
    if (!w->cmd_seen)
        return "device_delta";
    if (w->attr_seen & (1u << GM_WATCH_ATTR_NEW_PID))
        return w->attr_seen & (1u << GM_WATCH_ATTR_PID_TREE) ? "pid_tree+new_pid" : "new_pid";
    return "pid_tree";
}

static void kv_time(struct gm_json *j, const char *key, bool valid, uint64_t t_ms)
{
    if (valid)
        gm_json_kv_u64(j, key, t_ms);
    else
        gm_json_kv_null(j, key);
}

static void write_command(struct gm_json *j, const struct gm_watch_run *run)
{
    gm_json_key(j, "command");
    if (run->command) {
        gm_json_begin_array(j);
        for (char *const *a = run->command; *a; a++)
            gm_json_str(j, *a);
        gm_json_end_array(j);
    } else {
        gm_json_null(j);
    }
    gm_json_kv_u64(j, "pid", run->pid);
    gm_json_kv_u64(j, "interval_ms", run->interval_ms);
    gm_json_kv_u64(j, "process_interval_ms", run->process_interval_ms);
}

/* The summary members: outcome, peaks, devices, processes (no samples). */
static void write_summary(struct gm_json *j, const struct gm_watch *w,
                          const struct gm_watch_run *run)
{
    if (run->exit_status >= 0)
        gm_json_kv_i64(j, "exit_status", run->exit_status);
    else
        gm_json_kv_null(j, "exit_status");
    gm_json_kv_bool(j, "interrupted", run->interrupted);
    gm_json_kv_u64(j, "duration_ms", w->end_t_ms);
    gm_json_kv_str(j, "attribution", attribution(w));
    gm_json_kv_bool(j, "samples_dropped", w->samples_dropped);
    if (w->cmd_seen)
        gm_json_kv_u64(j, "peak_bytes", w->cmd_peak);
    else
        gm_json_kv_null(j, "peak_bytes");
    kv_time(j, "peak_time_ms", w->cmd_seen, w->cmd_peak_t_ms);

    gm_json_key(j, "devices");
    gm_json_begin_array(j);
    for (uint32_t k = 0; k < w->n_dev; k++) {
        const struct gm_watch_device *d = &w->dev[k];
        gm_json_begin_object(j);
        gm_json_kv_str(j, "device", d->label);
        gm_json_kv_str(j, "name", d->name);
        gm_json_kv_str(j, "memory_source",
                       d->source == GM_MEMORY_NVML_V2   ? "nvml_v2"
                       : d->source == GM_MEMORY_NVML_V1 ? "nvml_v1"
                                                        : "none");
        kv_reading(j, "total_bytes", d->total);
        kv_reading(j, "baseline_used_bytes", d->baseline);
        kv_reading(j, "peak_used_bytes", d->peak);
        kv_time(j, "peak_used_time_ms", d->peak.valid, d->peak_t_ms);
        kv_reading(j, "command_peak_bytes", d->cmd_peak);
        kv_time(j, "command_peak_time_ms", d->cmd_peak.valid, d->cmd_peak_t_ms);
        gm_json_end_object(j);
    }
    gm_json_end_array(j);

    gm_json_key(j, "processes");
    gm_json_begin_array(j);
    for (uint32_t k = 0; k < w->n_proc; k++) {
        const struct gm_watch_proc *p = &w->proc[k];
        gm_json_begin_object(j);
        gm_json_kv_u64(j, "pid", p->pid);
        gm_json_kv_str(j, "device", w->dev[p->device].label);
        if (p->name[0])
            gm_json_kv_str(j, "name", p->name);
        else
            gm_json_kv_null(j, "name");
        gm_json_kv_str(j, "attribution", attr_key(p->attr));
        gm_json_kv_u64(j, "peak_bytes", p->peak);
        gm_json_kv_u64(j, "peak_time_ms", p->peak_t_ms);
        gm_json_kv_u64(j, "first_seen_ms", p->first_t_ms);
        gm_json_kv_u64(j, "last_seen_ms", p->last_t_ms);
        gm_json_end_object(j);
    }
    gm_json_end_array(j);
}

/* One sample's members. */
static void write_sample(struct gm_json *j, const struct gm_watch *w,
                         const struct gm_watch_sample *s)
{
    gm_json_kv_u64(j, "t_ms", s->t_ms);
    gm_json_kv_str(j, "device", w->dev[s->device].label);
    if (s->pid)
        gm_json_kv_u64(j, "pid", s->pid);
    else
        gm_json_kv_null(j, "pid");
    kv_reading(j, "used_bytes", s->used);
    if (!s->pid)
        kv_reading(j, "free_bytes", s->free);
    gm_json_kv_str(j, "attribution", attr_key(s->attr));
}

bool gm_watch_write_json(const struct gm_watch *w, const struct gm_watch_run *run, FILE *f)
{
    struct gm_json j;

    gm_json_init(&j, f, 0);
    gm_json_begin_object(&j);
    gm_json_kv_str(&j, "schema", "gpumem.watch/1");
    gm_json_kv_str(&j, "gpumem_version", gm_version());
    write_command(&j, run);
    write_summary(&j, w, run);
    gm_json_key(&j, "samples");
    gm_json_begin_array(&j);
    for (size_t k = 0; k < w->n_samples; k++) {
        gm_json_begin_object(&j);
        write_sample(&j, w, &w->samples[k]);
        gm_json_end_object(&j);
    }
    gm_json_end_array(&j);
    gm_json_end_object(&j);
    return gm_json_finish(&j);
}

bool gm_watch_jsonl_start(const struct gm_watch *w, const struct gm_watch_run *run, FILE *f)
{
    struct gm_json j;
    gm_json_init(&j, f, 0);
    gm_json_begin_object(&j);
    gm_json_kv_str(&j, "schema", "gpumem.watch.stream/1");
    gm_json_kv_str(&j, "gpumem_version", gm_version());
    gm_json_kv_str(&j, "type", "start");
    write_command(&j, run);
    gm_json_key(&j, "devices");
    gm_json_begin_array(&j);
    for (uint32_t k = 0; k < w->n_dev; k++) {
        gm_json_begin_object(&j);
        gm_json_kv_str(&j, "device", w->dev[k].label);
        gm_json_kv_str(&j, "name", w->dev[k].name);
        kv_reading(&j, "total_bytes", w->dev[k].total);
        kv_reading(&j, "baseline_used_bytes", w->dev[k].baseline);
        gm_json_end_object(&j);
    }
    gm_json_end_array(&j);
    gm_json_end_object(&j);
    return gm_json_finish(&j);
}

bool gm_watch_jsonl_sample(const struct gm_watch *w, const struct gm_watch_sample *s, FILE *f)
{
    struct gm_json j;
    gm_json_init(&j, f, 0);
    gm_json_begin_object(&j);
    gm_json_kv_str(&j, "type", s->pid ? "process" : "device");
    write_sample(&j, w, s);
    gm_json_end_object(&j);
    return gm_json_finish(&j);
}

bool gm_watch_jsonl_end(const struct gm_watch *w, const struct gm_watch_run *run, FILE *f)
{
    struct gm_json j;
    gm_json_init(&j, f, 0);
    gm_json_begin_object(&j);
    gm_json_kv_str(&j, "type", "end");
    write_summary(&j, w, run);
    gm_json_end_object(&j);
    return gm_json_finish(&j);
}
