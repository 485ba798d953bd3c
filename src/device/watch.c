/* SPDX-License-Identifier: MIT */
/* watch.c - samples and peaks of a `gpumem watch` run, its CSV / JSON files, and running a
 * command on a sampling cadence (the start and the clock `gpumem watch` and `gpumem sweep`
 * share). */
#include "gpumem/watch.h"

#include "base/vec.h"
#include "device/device_int.h"
#include "gpumem/arena.h"
#include "gpumem/json.h"
#include "gpumem/units.h"
#include "gpumem/version.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
    gm_free(w->proc);
    w->proc = NULL;
    w->n_proc = w->cap_proc = 0;
    gm_free(w->tree);
    w->tree = NULL;
    w->n_tree = 0;
    for (uint32_t k = 0; k < w->n_dev; k++) {
        gm_free(w->dev[k].baseline_pids);
        w->dev[k].baseline_pids = NULL;
        w->dev[k].n_baseline_pids = 0;
    }
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
    d->others_base = baseline.valid ? baseline.value : 0;
    return (int)w->n_dev++;
}

static enum gm_status push(struct gm_watch *w, const struct gm_watch_sample *s,
                           struct gm_error *err)
{
    if (w->on_sample)
        w->on_sample(w, s, w->on_sample_arg);
    if (w->n_samples >= w->max_samples) {
        if (!w->samples_dropped)
            w->first_dropped_t_ms = s->t_ms;
        w->samples_dropped = true;
        w->n_samples_dropped++;
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

/* A new highest value for the whole command. */
static void command_peak(struct gm_watch *w, uint64_t v, uint64_t t_ms, enum gm_watch_source src)
{
    if (v > w->cmd_peak || w->cmd_peak_source == GM_WATCH_SOURCE_NONE) {
        w->cmd_peak = v;
        w->cmd_peak_t_ms = t_ms;
        w->cmd_peak_source = src;
    }
}

static void device_peak(struct gm_watch_device *d, uint64_t v, uint64_t t_ms,
                        enum gm_watch_source src)
{
    if (!d->cmd_peak.valid || v > d->cmd_peak.value) {
        d->cmd_peak = (struct gm_reading){v, true};
        d->cmd_peak_t_ms = t_ms;
        d->cmd_peak_source = src;
    }
}

/* Whether the device readings of 'd' may be credited to the command (see watch.h). */
static bool creditable(const struct gm_watch_device *d)
{
    return !d->others_seen && d->baseline.valid;
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
    if (m->used.valid && d->last_used.valid &&
        (m->used.value > d->last_used.value
             ? m->used.value - d->last_used.value
             : d->last_used.value - m->used.value) >= GM_WATCH_CHANGE_BYTES)
        w->process_due = true;
    if (m->used.valid)
        d->last_used = m->used;
    /* The command's memory now, for the credits: the device delta where only the command
     * runs, else what the latest process reading said.  Devices read at one moment add. */
    if (!w->dev_round_open || t_ms != w->dev_round_t_ms || (w->dev_round_mask & (1u << device))) {
        w->dev_round_open = true;
        w->dev_round_t_ms = t_ms;
        w->dev_round_total = 0;
        w->dev_round_mask = 0;
    }
    w->dev_round_mask |= 1u << device;
    {
        uint64_t now = d->last_proc_sum;
        if (creditable(d) && m->used.valid) {
            now = m->used.value > d->others_base ? m->used.value - d->others_base : 0;
            if (!d->pending.valid || now > d->pending.value) {
                d->pending = (struct gm_reading){now, true};
                d->pending_t_ms = t_ms;
            }
        }
        w->dev_round_total = gm_add_sat(w->dev_round_total, now);
        if (w->dev_round_total > w->pending_total) {
            w->pending_total = w->dev_round_total;
            w->pending_total_t_ms = t_ms;
        }
    }
    w->n_device_reads++;
    if (t_ms > w->end_t_ms)
        w->end_t_ms = t_ms;
    return push(w, &s, err);
}

static struct gm_watch_proc *find_proc(struct gm_watch *w, uint32_t pid, uint32_t device,
                                       struct gm_error *err)
{
    for (uint32_t k = 0; k < w->n_proc; k++)
        if (w->proc[k].pid == pid && w->proc[k].device == device)
            return &w->proc[k];
    if (w->n_proc == w->cap_proc) {
        size_t cap = w->cap_proc;
        if (w->n_proc == UINT32_MAX || !GM_VEC_RESERVE(w->proc, cap, (size_t)w->n_proc + 1, NULL)) {
            gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory for the process table");
            return NULL;
        }
        w->cap_proc = cap > UINT32_MAX ? UINT32_MAX : (uint32_t)cap;
    }
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
    bool any = false, others = false, all_known = true;

    if (device >= w->n_dev)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "watch: no device %u", device);
    d = &w->dev[device];
    /* a new moment, or a device read twice at one moment: a new round */
    if (t_ms != w->round_t_ms || !w->n_process_reads || (w->round_mask & (1u << device))) {
        w->round_t_ms = t_ms;
        w->round_total = 0;
        w->round_mask = 0;
        w->round_others = false;
    }
    w->n_process_reads++;
    for (size_t k = 0; k < n; k++) {
        struct gm_watch_sample s;
        struct gm_watch_proc *p;
        enum gm_status st;

        if (attr[k] == GM_WATCH_ATTR_NONE) {
            others = true;
            continue;
        }
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
        p = find_proc(w, procs[k].pid, device, err);
        if (!p)
            return GM_ERR_NOMEM;
        if (!p->first_t_ms && !p->last_t_ms)
            p->first_t_ms = t_ms;
        if (attr[k] == GM_WATCH_ATTR_AFTER_EXIT && p->attr != GM_WATCH_ATTR_AFTER_EXIT)
            w->n_after_exit++;
        p->last_t_ms = t_ms;
        p->attr = attr[k];
        p->last_used = procs[k].used.valid ? procs[k].used.value : 0;
        if (names && names[k] && names[k][0])
            gm_strlcpy(p->name, names[k], sizeof(p->name));
        if (procs[k].used.valid && procs[k].used.value > p->peak) {
            p->peak = procs[k].used.value;
            p->peak_t_ms = t_ms;
        }
        if (procs[k].used.valid)
            sum += procs[k].used.value;
        else
            all_known = false;
    }
    if (t_ms > w->end_t_ms)
        w->end_t_ms = t_ms;

    /* The first reading of an attached command: what it already held is part of the
     * baseline, and is the command's, not the others'. */
    if (!d->listed && w->attached && d->baseline.valid && all_known)
        d->others_base = sum < d->baseline.value ? d->baseline.value - sum : 0;
    if (!d->listed && w->attached && !all_known)
        d->others_seen = true; /* what the command held at the start is unknown */
    d->listed = true;
    d->last_proc_sum = sum;

    /* The process sums first: a device credit of the same size adds nothing. */
    if (any) {
        w->cmd_seen = true;
        if (!d->proc_peak.valid || sum > d->proc_peak.value) {
            d->proc_peak = (struct gm_reading){sum, true};
            d->proc_peak_t_ms = t_ms;
        }
        device_peak(d, sum, t_ms, GM_WATCH_SOURCE_PROCESSES);
        w->round_total += sum;
        command_peak(w, w->round_total, t_ms, GM_WATCH_SOURCE_PROCESSES);
    }

    /* Device credits since the last reading: confirmed when no other process is listed,
     * dropped for good when one is. */
    if (others || d->others_seen) {
        d->others_seen = true;
        w->round_others = true;
    } else if (d->pending.valid) {
        device_peak(d, d->pending.value, d->pending_t_ms, GM_WATCH_SOURCE_DEVICE);
    }
    d->pending = GM_READING_NONE;
    w->round_mask |= 1u << device;
    if (w->round_mask == (w->n_dev >= 32 ? UINT32_MAX : (1u << w->n_dev) - 1)) {
        /* every device listed at this moment: the window's total is confirmed or dropped */
        if (!w->round_others && w->pending_total > w->cmd_peak)
            command_peak(w, w->pending_total, w->pending_total_t_ms, GM_WATCH_SOURCE_DEVICE);
        w->pending_total = 0;
        w->dev_round_open = false;
    }
    return GM_OK;
}

uint64_t gm_watch_unexplained_bytes(const struct gm_watch *w, uint32_t device)
{
    const struct gm_watch_device *d;
    uint64_t delta, cmd, slack;
    if (device >= w->n_dev)
        return 0;
    d = &w->dev[device];
    if (!d->peak.valid || !d->baseline.valid)
        return 0;
    delta = d->peak.value > d->others_base ? d->peak.value - d->others_base : 0;
    cmd = d->cmd_peak.valid ? d->cmd_peak.value : 0;
    slack = cmd / 100 > ((uint64_t)16 << 20) ? cmd / 100 : (uint64_t)16 << 20;
    return delta > cmd + slack ? delta - cmd : 0;
}

enum gm_status gm_watch_setup(struct gm_watch *w, struct gm_devices *d, int only_cuda,
                              struct gm_error *err)
{
    for (size_t i = 0; i < gm_devices_count(d) && w->n_dev < GM_WATCH_MAX_DEVICES; i++) {
        const struct gm_device_info *info = gm_devices_info(d, i);
        struct gm_device_memory m;
        struct gm_process_memory *procs = NULL;
        struct gm_watch_device *wd;
        char label[16];
        size_t n = 0;
        enum gm_status st;
        int k;

        if (only_cuda >= 0 && info->cuda_index != only_cuda)
            continue;
        if (info->cuda_index >= 0)
            snprintf(label, sizeof(label), "cuda:%d", info->cuda_index);
        else if (info->vendor == GM_VENDOR_AMD)
            snprintf(label, sizeof(label), "amd:%d", info->amdsmi_index);
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
        if (gm_devices_process_list(d, i, &procs, &n, NULL) == GM_OK && n) {
            wd->baseline_pids = gm_calloc(n, sizeof(*wd->baseline_pids));
            if (!wd->baseline_pids) {
                gm_free(procs);
                return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
            }
            for (size_t j = 0; j < n; j++)
                wd->baseline_pids[wd->n_baseline_pids++] = procs[j].pid;
        }
        gm_free(procs);
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

/* The command's process tree now, kept in w->tree; when 'root' has ended, the part of the
 * last known tree that still runs (orphans of the command). */
static void update_tree(struct gm_watch *w, uint32_t root, bool *after_exit)
{
    uint32_t *t, *u;
    size_t n, k = 0, m = 0;
    *after_exit = root == 0 || !gm_proc_running(root);
    if (!*after_exit) {
        if (gm_proc_tree_list(root, &t, &n, NULL) != GM_OK)
            return; /* keep the last known tree */
        if (gm_proc_running(root)) {
            gm_free(w->tree);
            w->tree = t;
            w->n_tree = n;
            return;
        }
        /* The root ended during the listing: its children were reparented as it died, so
         * the listing may lack them.  The last known tree, with what the listing found
         * beside it, is the tree after the exit. */
        u = gm_calloc(w->n_tree + n ? w->n_tree + n : 1, sizeof(*u));
        if (u) {
            if (w->n_tree)
                memcpy(u, w->tree, w->n_tree * sizeof(*u));
            for (size_t j = 0; j < n; j++)
                if (!contains(w->tree, w->n_tree, t[j]))
                    u[w->n_tree + m++] = t[j];
            gm_free(w->tree);
            w->tree = u;
            w->n_tree += m;
        }
        gm_free(t);
        *after_exit = true;
    }
    for (size_t j = 0; j < w->n_tree; j++)
        if (w->tree[j] != root && gm_proc_running(w->tree[j]))
            w->tree[k++] = w->tree[j];
    w->n_tree = k;
}

void gm_watch_poll_processes(struct gm_watch *w, struct gm_devices *d, uint64_t t_ms, uint32_t root,
                             bool attached)
{
    bool after_exit;

    w->attached = attached;
    w->process_due = false;
    update_tree(w, root, &after_exit);
    for (uint32_t k = 0; k < w->n_dev; k++) {
        const struct gm_watch_device *wd = &w->dev[k];
        struct gm_process_memory *procs = NULL;
        enum gm_watch_attr *attr;
        char(*names)[32];
        const char **name_ptr;
        struct gm_error e;
        size_t n = 0;

        if (gm_devices_process_list(d, wd->pos, &procs, &n, &e) != GM_OK)
            continue;
        attr = gm_calloc(n ? n : 1, sizeof(*attr));
        names = gm_calloc(n ? n : 1, sizeof(*names));
        name_ptr = gm_calloc(n ? n : 1, sizeof(*name_ptr));
        if (!attr || !names || !name_ptr) {
            gm_free(attr);
            gm_free(names);
            gm_free(name_ptr);
            gm_free(procs);
            continue;
        }
        for (size_t j = 0; j < n; j++) {
            uint32_t pid = procs[j].pid;
            attr[j] = GM_WATCH_ATTR_NONE;
            name_ptr[j] = names[j];
            if (contains(w->tree, w->n_tree, pid))
                attr[j] = after_exit ? GM_WATCH_ATTR_AFTER_EXIT : GM_WATCH_ATTR_PID_TREE;
            else if (!attached && !gm_proc_exists(pid) &&
                     !contains(wd->baseline_pids, wd->n_baseline_pids, pid))
                /* a host PID we cannot see (PID namespace): new since the start */
                attr[j] = after_exit ? GM_WATCH_ATTR_AFTER_EXIT : GM_WATCH_ATTR_NEW_PID;
            if (attr[j] == GM_WATCH_ATTR_PID_TREE || attr[j] == GM_WATCH_ATTR_AFTER_EXIT)
                gm_proc_name(pid, names[j], sizeof(names[j]));
        }
        gm_watch_process_sample(w, t_ms, k, procs, attr, name_ptr, n, &e);
        gm_free(attr);
        gm_free(names);
        gm_free(name_ptr);
        gm_free(procs);
    }
}

const char *gm_watch_attr_name(enum gm_watch_attr a)
{
    switch (a) {
    case GM_WATCH_ATTR_PID_TREE:
        return "process tree";
    case GM_WATCH_ATTR_NEW_PID:
        return "new PID (not visible here)";
    case GM_WATCH_ATTR_AFTER_EXIT:
        return "still running after the command exited";
    case GM_WATCH_ATTR_NONE:
        break;
    }
    return "device";
}

static const char *source_key(enum gm_watch_source s)
{
    switch (s) {
    case GM_WATCH_SOURCE_PROCESSES:
        return "process_readings";
    case GM_WATCH_SOURCE_DEVICE:
        return "device_readings";
    case GM_WATCH_SOURCE_NONE:
        break;
    }
    return "none";
}

static const char *attr_key(enum gm_watch_attr a)
{
    switch (a) {
    case GM_WATCH_ATTR_PID_TREE:
        return "pid_tree";
    case GM_WATCH_ATTR_NEW_PID:
        return "new_pid";
    case GM_WATCH_ATTR_AFTER_EXIT:
        return "after_exit";
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
    if (w->samples_dropped)
        fprintf(f, "%" PRIu64 ",,,,,samples_dropped\n", w->first_dropped_t_ms);
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
    if (run->term_signal > 0 && gm_signal_name(run->term_signal))
        gm_json_kv_str(j, "signal", gm_signal_name(run->term_signal));
    else if (run->term_signal > 0)
        gm_json_kv_i64(j, "signal", run->term_signal);
    else
        gm_json_kv_null(j, "signal");
    gm_json_kv_bool(j, "samples_dropped", w->samples_dropped);
    gm_json_kv_u64(j, "n_samples_stored", w->n_samples);
    gm_json_kv_u64(j, "n_samples_dropped", w->n_samples_dropped);
    kv_time(j, "first_dropped_ms", w->samples_dropped, w->first_dropped_t_ms);
    gm_json_kv_u64(j, "n_device_reads", w->n_device_reads);
    gm_json_kv_u64(j, "n_process_reads", w->n_process_reads);
    gm_json_kv_u64(j, "n_triggered_process_reads", w->n_triggered_reads);
    if (w->cmd_seen)
        gm_json_kv_u64(j, "peak_bytes", w->cmd_peak);
    else
        gm_json_kv_null(j, "peak_bytes");
    kv_time(j, "peak_time_ms", w->cmd_seen, w->cmd_peak_t_ms);
    gm_json_kv_str(j, "peak_source", w->cmd_seen ? source_key(w->cmd_peak_source) : "none");
    gm_json_kv_u64(j, "n_after_exit", w->n_after_exit);

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
                       : d->source == GM_MEMORY_AMDSMI  ? "amdsmi"
                                                        : "none");
        kv_reading(j, "total_bytes", d->total);
        kv_reading(j, "baseline_used_bytes", d->baseline);
        kv_reading(j, "peak_used_bytes", d->peak);
        kv_time(j, "peak_used_time_ms", d->peak.valid, d->peak_t_ms);
        kv_reading(j, "command_peak_bytes", d->cmd_peak);
        kv_time(j, "command_peak_time_ms", d->cmd_peak.valid, d->cmd_peak_t_ms);
        gm_json_kv_str(j, "command_peak_source", source_key(d->cmd_peak_source));
        kv_reading(j, "process_readings_peak_bytes", d->proc_peak);
        gm_json_kv_bool(j, "other_processes_seen", d->others_seen);
        gm_json_kv_u64(j, "unexplained_bytes", gm_watch_unexplained_bytes(w, k));
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
        gm_json_kv_bool(j, "after_exit", p->attr == GM_WATCH_ATTR_AFTER_EXIT);
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

/* The status of a JSON write: GM_ERR_IO when it failed. */
static enum gm_status json_done(struct gm_json *j, struct gm_error *err)
{
    if (!gm_json_finish(j))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "writing the watch JSON failed");
    return GM_OK;
}

enum gm_status gm_watch_json(FILE *f, const struct gm_watch *w, const struct gm_watch_run *run,
                             struct gm_error *err)
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
    return json_done(&j, err);
}

enum gm_status gm_watch_jsonl_start(FILE *f, const struct gm_watch *w,
                                    const struct gm_watch_run *run, struct gm_error *err)
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
    return json_done(&j, err);
}

enum gm_status gm_watch_jsonl_sample(FILE *f, const struct gm_watch *w,
                                     const struct gm_watch_sample *s, struct gm_error *err)
{
    struct gm_json j;
    gm_json_init(&j, f, 0);
    gm_json_begin_object(&j);
    gm_json_kv_str(&j, "type", s->pid ? "process" : "device");
    write_sample(&j, w, s);
    gm_json_end_object(&j);
    return json_done(&j, err);
}

enum gm_status gm_watch_jsonl_end(FILE *f, const struct gm_watch *w, const struct gm_watch_run *run,
                                  struct gm_error *err)
{
    struct gm_json j;
    gm_json_init(&j, f, 0);
    gm_json_begin_object(&j);
    gm_json_kv_str(&j, "type", "end");
    write_summary(&j, w, run);
    gm_json_end_object(&j);
    return json_done(&j, err);
}

/* ------------------------------------------------------------------------------------ */
/* Running a command and sampling it */

enum gm_status gm_watch_env_with(char *const *envp, const char *name, const char *value,
                                 char ***out, struct gm_error *err)
{
    size_t n = 0, k = 0, nlen = strlen(name), vlen = strlen(value);
    char **env, *var;
    while (envp && envp[n])
        n++;
    env = gm_malloc((n + 2) * sizeof(*env) + nlen + vlen + 2);
    if (!env)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory for the environment");
    var = (char *)(env + n + 2);
    memcpy(var, name, nlen);
    var[nlen] = '=';
    memcpy(var + nlen + 1, value, vlen + 1);
    for (size_t i = 0; i < n; i++)
        if (strncmp(envp[i], name, nlen) != 0 || envp[i][nlen] != '=')
            env[k++] = envp[i];
    env[k++] = var;
    env[k] = NULL;
    *out = env;
    return GM_OK;
}

enum gm_status gm_watch_spawn(const struct gm_watch_command *c, pid_t *pid, int *exec_errno,
                              struct gm_error *err)
{
    static const int defaults[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT, SIGPIPE,
                                   SIGXFSZ, SIGALRM, SIGUSR1, SIGUSR2};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t def, none;
    short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
    enum gm_status st = GM_OK;
    bool setup;
    int rc, out_fd = -1;

    *exec_errno = 0;
    sigemptyset(&none);
    sigemptyset(&def);
    /* a disposition gpumem set (a handler, or SIG_IGN, which exec would keep) is not the
     * command's */
    for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
        sigaddset(&def, defaults[i]);
    if (c->own_group)
        flags |= POSIX_SPAWN_SETPGROUP;
    if (c->output) {
        /* created here, never opened through a symbolic link nor over an existing file: a
         * log folder others can write to cannot turn the run's output into a write over
         * one of the user's files */
        out_fd = open(c->output, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (out_fd < 0 && errno == EEXIST)
            return gm_fail(err, GM_ERR_EXISTS, GM_NO_OFFSET,
                           "'%s' exists: refusing to write a run's output over it", c->output);
        if (out_fd < 0)
            return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "cannot create '%s': %s", c->output,
                           strerror(errno));
    }
    if (posix_spawn_file_actions_init(&fa) != 0) {
        if (out_fd >= 0)
            close(out_fd);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "posix_spawn: out of memory");
    }
    if (posix_spawnattr_init(&at) != 0) {
        posix_spawn_file_actions_destroy(&fa);
        if (out_fd >= 0)
            close(out_fd);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "posix_spawn: out of memory");
    }
    setup = posix_spawnattr_setsigdefault(&at, &def) == 0 &&
            posix_spawnattr_setsigmask(&at, &none) == 0 &&
            (!c->own_group || posix_spawnattr_setpgroup(&at, 0) == 0) &&
            posix_spawnattr_setflags(&at, flags) == 0;
    if (setup && c->output)
        setup = posix_spawn_file_actions_adddup2(&fa, out_fd, 1) == 0 &&
                posix_spawn_file_actions_adddup2(&fa, 1, 2) == 0;
    else if (setup && c->stdout_to_stderr)
        setup = posix_spawn_file_actions_adddup2(&fa, 2, 1) == 0;
    if (!setup) {
        st = gm_fail(err, GM_ERR_INTERNAL, GM_NO_OFFSET, "posix_spawn: cannot set up the command");
    } else {
        fflush(NULL); /* the child must not write what the parent buffered */
        rc = posix_spawnp(pid, c->argv[0], &fa, &at, c->argv, c->envp);
        if (rc != 0)
            *exec_errno = rc;
    }
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (out_fd >= 0)
        close(out_fd);
    return st;
}

uint64_t gm_watch_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void gm_watch_sleep_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

void gm_watch_clock_start(struct gm_watch_clock *c, uint64_t interval_ms,
                          uint64_t process_interval_ms)
{
    c->start_ms = gm_watch_now_ms();
    c->interval_ms = interval_ms ? interval_ms : 1;
    c->process_interval_ms = process_interval_ms;
    c->next_process_ms = 0;
}

uint64_t gm_watch_clock_ms(const struct gm_watch_clock *c)
{
    return gm_watch_now_ms() - c->start_ms;
}

uint64_t gm_watch_tick(struct gm_watch *w, struct gm_devices *d, struct gm_watch_clock *c,
                       uint32_t root, bool attached)
{
    uint64_t t = gm_watch_clock_ms(c);
    bool scheduled = t >= c->next_process_ms;
    gm_watch_poll_devices(w, d, t);
    if (scheduled || w->process_due) {
        if (!scheduled)
            w->n_triggered_reads++;
        gm_watch_poll_processes(w, d, t, root, attached);
        if (scheduled)
            c->next_process_ms = t + c->process_interval_ms;
    }
    return t;
}

void gm_watch_wait(const struct gm_watch_clock *c, uint64_t t)
{
    gm_watch_sleep_ms(c->interval_ms - (gm_watch_clock_ms(c) - t) % c->interval_ms);
}
