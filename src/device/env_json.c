/* SPDX-License-Identifier: MIT */
/* env_json.c - the environment (driver, devices, host, settings) as JSON members, shared by
 * `gpumem environment --json` and documents that embed it (gpumem measure).
 * Unknown values are null, never 0. */
#include "device/device_int.h"

#include "gpumem/arena.h"

#include <stdio.h>
#include <stdlib.h>

static void kv_reading(struct gm_json *w, const char *key, struct gm_reading r)
{
    if (r.valid)
        gm_json_kv_u64(w, key, r.value);
    else
        gm_json_kv_null(w, key);
}

static void kv_str_or_null(struct gm_json *w, const char *key, const char *s)
{
    if (s && *s)
        gm_json_kv_str(w, key, s);
    else
        gm_json_kv_null(w, key);
}

static void kv_version(struct gm_json *w, const char *key, int v, bool valid)
{
    char s[32];
    if (!valid) {
        gm_json_kv_null(w, key);
        return;
    }
    snprintf(s, sizeof(s), "%d.%d", v / 1000, (v % 1000) / 10);
    gm_json_kv_str(w, key, s);
}

static const char *state_name(enum gm_backend_state s)
{
    switch (s) {
    case GM_BACKEND_OK:
        return "ok";
    case GM_BACKEND_MISSING:
        return "missing";
    case GM_BACKEND_STUB:
        return "stub";
    case GM_BACKEND_NODEV:
        return "no_device";
    case GM_BACKEND_ERROR:
        return "error";
    }
    return "error";
}

static const char *source_name(enum gm_memory_source s)
{
    switch (s) {
    case GM_MEMORY_NVML_V2:
        return "nvml_v2";
    case GM_MEMORY_NVML_V1:
        return "nvml_v1";
    case GM_MEMORY_NONE:
        break;
    }
    return NULL;
}

static void write_device(struct gm_json *w, struct gm_devices *d, size_t i)
{
    const struct gm_device_info *info = gm_devices_info(d, i);
    struct gm_device_memory mem;
    struct gm_process_memory *procs = NULL;
    struct gm_error e;
    size_t n = 0;
    char cc[16];

    gm_json_begin_object(w);
    if (info->cuda_index >= 0)
        gm_json_kv_i64(w, "cuda_index", info->cuda_index);
    else
        gm_json_kv_null(w, "cuda_index");
    if (info->nvml_index >= 0)
        gm_json_kv_i64(w, "nvml_index", info->nvml_index);
    else
        gm_json_kv_null(w, "nvml_index");
    kv_str_or_null(w, "name", info->name);
    kv_str_or_null(w, "uuid", info->uuid);
    kv_str_or_null(w, "pci_bus_id", info->pci_bus_id);
    snprintf(cc, sizeof(cc), "%d.%d", info->cc_major, info->cc_minor);
    kv_str_or_null(w, "compute_capability", info->cc_valid ? cc : NULL);
    if (info->multiprocessors_valid)
        gm_json_kv_i64(w, "multiprocessors", info->multiprocessors);
    else
        gm_json_kv_null(w, "multiprocessors");

    gm_json_key(w, "memory");
    gm_json_begin_object(w);
    if (gm_devices_memory(d, i, &mem, &e) == GM_OK) {
        gm_json_kv_str(w, "source", source_name(mem.source));
        kv_reading(w, "total_bytes", mem.total);
        kv_reading(w, "free_bytes", mem.free);
        kv_reading(w, "used_bytes", mem.used);
        kv_reading(w, "reserved_bytes", mem.reserved);
    } else {
        gm_json_kv_null(w, "source");
        gm_json_kv_null(w, "total_bytes");
        gm_json_kv_null(w, "free_bytes");
        gm_json_kv_null(w, "used_bytes");
        gm_json_kv_null(w, "reserved_bytes");
        gm_json_kv_str(w, "error", e.msg);
    }
    kv_reading(w, "cuda_total_bytes", info->cuda_total);
    gm_json_end_object(w);

    if (gm_devices_process_list(d, i, &procs, &n, &e) == GM_OK) {
        gm_json_key(w, "processes");
        gm_json_begin_array(w);
        for (size_t k = 0; k < n; k++) {
            gm_json_begin_object(w);
            gm_json_kv_u64(w, "pid", procs[k].pid);
            gm_json_kv_str(w, "type", gm_process_kind_name(procs[k].kinds));
            kv_reading(w, "used_bytes", procs[k].used);
            gm_json_end_object(w);
        }
        gm_json_end_array(w);
    } else {
        gm_json_kv_null(w, "processes");
        gm_json_kv_str(w, "processes_error", e.msg);
    }
    gm_free(procs);
    gm_json_end_object(w);
}

void gm_devices_write_json(struct gm_json *w, struct gm_devices *d, const struct gm_host_info *h,
                           int only_cuda)
{
    const struct gm_driver_versions *v = gm_devices_versions(d);

    gm_json_key(w, "driver");
    gm_json_begin_object(w);
    kv_str_or_null(w, "version", v->driver);
    kv_str_or_null(w, "nvml_version", v->nvml);
    if (v->cuda_driver_api_valid)
        gm_json_kv_i64(w, "cuda_driver_api", v->cuda_driver_api);
    else
        gm_json_kv_null(w, "cuda_driver_api");
    kv_version(w, "cuda_driver_api_version", v->cuda_driver_api, v->cuda_driver_api_valid);
    kv_version(w, "nvml_cuda_version", v->nvml_cuda_version, v->nvml_cuda_version_valid);
    gm_json_end_object(w);

    gm_json_key(w, "backends");
    gm_json_begin_array(w);
    for (size_t b = 0; b < gm_devices_n_backends(d); b++) {
        const struct gm_backend_status *s = gm_devices_backend(d, b);
        gm_json_begin_object(w);
        gm_json_kv_str(w, "name", s->name);
        gm_json_kv_str(w, "state", state_name(s->state));
        gm_json_kv_str(w, "library", s->library);
        if (s->driver_code)
            gm_json_kv_i64(w, "code", s->driver_code);
        else
            gm_json_kv_null(w, "code");
        kv_str_or_null(w, "message", s->state == GM_BACKEND_OK ? NULL : s->msg);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);

    gm_json_key(w, "devices");
    gm_json_begin_array(w);
    for (size_t i = 0; i < gm_devices_count(d); i++) {
        if (only_cuda >= 0 && gm_devices_info(d, i)->cuda_index != only_cuda)
            continue;
        write_device(w, d, i);
    }
    gm_json_end_array(w);

    gm_json_key(w, "host");
    gm_json_begin_object(w);
    kv_str_or_null(w, "os", h->os);
    kv_str_or_null(w, "kernel", h->kernel);
    kv_str_or_null(w, "cpu", h->cpu);
    if (h->n_cpus)
        gm_json_kv_u64(w, "cpus", h->n_cpus);
    else
        gm_json_kv_null(w, "cpus");
    kv_reading(w, "memory_bytes", h->mem_total);
    kv_str_or_null(w, "container", h->in_container ? h->container : NULL);
    gm_json_kv_bool(w, "pid_namespace", h->pid_namespace);
    /* The driver has no notion of PID namespaces: its PIDs are the host's. */
    gm_json_kv_str(w, "nvml_pids", h->pid_namespace ? "host (not this namespace's)" : "host");
    gm_json_end_object(w);

    gm_json_key(w, "settings");
    gm_json_begin_object(w);
    for (const char *const *k = gm_memory_env_vars; *k; k++) {
        const char *val = gm_env_get(gm_devices_env(d), *k);
        if (val)
            gm_json_kv_str(w, *k, val);
        else
            gm_json_kv_null(w, *k);
    }
    gm_json_end_object(w);
}
