/* SPDX-License-Identifier: MIT */
/* amdsmi.c - the "amdsmi" backend: AMD GPUs through AMD SMI (libamd_smi.so, ROCm), loaded
 * with dlopen like NVML: versions, devices, VRAM and per-process VRAM.
 *
 * Our own declarations from the ABI facts of ROCm/amdsmi's include/amd_smi/amdsmi.h (no AMD
 * header; docs/device.md cites the versions read).  Layouts (LP64):
 *   amdsmi_version_t  see read_version(): three layouts, told apart by their values.
 *   amdsmi_bdf_t      u64: function bits 0-2, device 3-7, bus 8-15, domain 16-63.
 *   amdsmi_asic_info_t  market_name first in every version (64 B, 256 B from ROCm 6.2); the
 *                     struct grows, so it is read into a 4 KiB zeroed buffer.
 *   amdsmi_proc_info_t  {name; u32 pid; u64 mem; engine_usage 64 B; memory_usage {u64 gtt,
 *                     cpu, vram; u32 reserved[10]}; container_name; ...}:
 *                     name and container_name 32 B (224 B in all) in lib 23.x-24.x; 256 B
 *                     (704 B in all, with cu_occupancy) in lib 26.x.
 *   Process lists: lib 23.x - 24.5 (ROCm 5.7-6.1) amdsmi_get_gpu_process_list fills PIDs (u32)
 *   and amdsmi_get_gpu_process_info one 224-byte entry per PID; lib 24.6 - 24.x (ROCm 6.2-6.3)
 *   fills 224-byte entries; lib 26.x (ROCm 7.0-7.1) 704-byte entries.  Any other version (25.x
 *   of ROCm 6.4, whose layout we have not seen; 27.x and later; 5.6 and older): processes are
 *   not read (GM_ERR_UNSUPPORTED with the reason) rather than misread.
 * A process's figure is memory_usage.vram_mem (bytes of VRAM, from the kernel's DRM fdinfo),
 * not 'mem' (VRAM + GTT + CPU). */
#include "device/device_int.h"

#include "device/amdsmi_abi.h"

#include "gpumem/arena.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define AMD_MAX_GPUS 64u /* sockets x processors we take */

enum proc_abi {
    PROC_ABI_UNKNOWN = 0,
    PROC_ABI_PIDS, /* lib < 24.6: PIDs, then amdsmi_get_gpu_process_info per PID */
    PROC_ABI_V24,  /* lib 24.6 - 24.x: 224-byte entries */
    PROC_ABI_V26   /* lib 26.x: 704-byte entries */
};

struct amd_api {
    amd_status (*init)(uint64_t flags);
    amd_status (*shut_down)(void);
    amd_status (*status_string)(amd_status s, const char **out);
    amd_status (*lib_version)(void *v);
    amd_status (*socket_handles)(uint32_t *count, amd_handle *sockets);
    amd_status (*processor_handles)(amd_handle socket, uint32_t *count, amd_handle *procs);
    amd_status (*memory_total)(amd_handle p, int type, uint64_t *bytes);
    amd_status (*memory_usage)(amd_handle p, int type, uint64_t *bytes);
    amd_status (*device_uuid)(amd_handle p, unsigned *len, char *uuid);
    amd_status (*device_bdf)(amd_handle p, uint64_t *bdf);
    amd_status (*asic_info)(amd_handle p, void *info);
    amd_status (*process_list)(amd_handle p, uint32_t *max, void *list);
    amd_status (*process_info)(amd_handle p, uint32_t pid, void *info);
};

#define SYM(field, req, ...)                                                                       \
    {                                                                                              \
        {__VA_ARGS__}, offsetof(struct amd_api, field), req                                        \
    }
static const struct gm_dl_sym amd_syms[] = {
    SYM(init, true, "amdsmi_init"),
    SYM(shut_down, true, "amdsmi_shut_down"),
    SYM(status_string, false, "amdsmi_status_code_to_string"),
    SYM(lib_version, false, "amdsmi_get_lib_version"),
    SYM(socket_handles, true, "amdsmi_get_socket_handles"),
    SYM(processor_handles, true, "amdsmi_get_processor_handles"),
    SYM(memory_total, false, "amdsmi_get_gpu_memory_total"),
    SYM(memory_usage, false, "amdsmi_get_gpu_memory_usage"),
    SYM(device_uuid, false, "amdsmi_get_gpu_device_uuid"),
    SYM(device_bdf, false, "amdsmi_get_gpu_device_bdf"),
    SYM(asic_info, false, "amdsmi_get_gpu_asic_info"),
    SYM(process_list, false, "amdsmi_get_gpu_process_list"),
    SYM(process_info, false, "amdsmi_get_gpu_process_info"),
};
#undef SYM

/* Where a library of each ABI generation is found by SONAME (SOVERSION = the library's
 * major: .so.24 for ROCm 6.0-6.3, .25 for 6.4, .26 for 7.x), then the development name. */
static const char *const amd_sonames[] = {"libamd_smi.so.26", "libamd_smi.so.25",
                                          "libamd_smi.so.24", "libamd_smi.so"};

struct amd_ctx {
    void *dl;
    struct amd_api api;
    enum proc_abi proc_abi;
    size_t name_cap;  /* bytes of amdsmi_asic_info_t.market_name */
    char version[80]; /* "" unknown */
    uint32_t n_gpus;
    amd_handle gpu[AMD_MAX_GPUS];
};

static const char *amd_err(const struct amd_ctx *c, amd_status r)
{
    const char *s = NULL;
    if (c->api.status_string && c->api.status_string(r, &s) != AMDSMI_STATUS_SUCCESS)
        s = NULL;
    return s ? s : "AMD SMI error";
}

/* The library's version and, from it, the process-list ABI.  amdsmi_version_t has had three
 * layouts: {u32 major, minor, patch; ptr; u32 reserved[4]} (ROCm 5.6, 40 B), {u32 year, major,
 * minor, release; ptr} (ROCm 5.7-6.4; 6.4 keeps the year field but numbers the library 25.x)
 * and {u32 major, minor, release; ptr} (ROCm 7).  The call gets a zeroed 64-byte buffer so
 * none of them overruns it; minors are small, majors from 25 on, years 23 and 24. */
static void read_version(struct amd_ctx *c)
{
    uint32_t v[16];
    uint32_t major = 0, minor = 0, release = 0;

    memset(v, 0, sizeof(v));
    c->proc_abi = PROC_ABI_UNKNOWN;
    c->name_cap = 64; /* market_name grew to 256 bytes in ROCm 6.2 (24.6) */
    if (!c->api.lib_version || c->api.lib_version(v) != AMDSMI_STATUS_SUCCESS)
        return;
    if (v[1] >= 25) { /* {year, major, minor, release}: ROCm 6.4 */
        major = v[1];
        minor = v[2];
        release = v[3];
    } else if (v[0] >= 25) { /* {major, minor, release} */
        major = v[0];
        minor = v[1];
        release = v[2];
    } else if (v[0] == 23 || v[0] == 24) { /* {year, major, minor, release} */
        snprintf(c->version, sizeof(c->version), "%u.%u.%u.%u", v[0], v[1], v[2], v[3]);
        c->proc_abi = v[0] == 24 && v[1] >= 6 ? PROC_ABI_V24 : PROC_ABI_PIDS;
        if (c->proc_abi == PROC_ABI_V24)
            c->name_cap = 256;
        return;
    } else {
        return; /* ROCm 5.6 or older, or no version at all: nothing is read by layout */
    }
    snprintf(c->version, sizeof(c->version), "%u.%u.%u", major, minor, release);
    c->name_cap = 256;
    if (major == 26)
        c->proc_abi = PROC_ABI_V26;
}

static void fail_open(struct amd_ctx *c, struct gm_backend_status *s, enum gm_backend_state state,
                      amd_status r, const char *what)
{
    s->state = state;
    s->driver_code = (int)r;
    snprintf(s->msg, sizeof(s->msg), "%s (AMD SMI returned %u, %.80s)", what, r, amd_err(c, r));
}

/* Every GPU of every socket, in AMD SMI's order. */
static amd_status list_gpus(struct amd_ctx *c)
{
    amd_handle sockets[AMD_MAX_GPUS];
    uint32_t n_sockets = 0;
    amd_status r = c->api.socket_handles(&n_sockets, NULL);
    if (r != AMDSMI_STATUS_SUCCESS)
        return r;
    if (n_sockets > AMD_MAX_GPUS)
        n_sockets = AMD_MAX_GPUS;
    r = c->api.socket_handles(&n_sockets, sockets);
    if (r != AMDSMI_STATUS_SUCCESS)
        return r;
    for (uint32_t k = 0; k < n_sockets && k < AMD_MAX_GPUS && c->n_gpus < AMD_MAX_GPUS; k++) {
        uint32_t n = 0;
        if (c->api.processor_handles(sockets[k], &n, NULL) != AMDSMI_STATUS_SUCCESS || n == 0)
            continue;
        if (n > AMD_MAX_GPUS - c->n_gpus)
            n = AMD_MAX_GPUS - c->n_gpus;
        if (c->api.processor_handles(sockets[k], &n, c->gpu + c->n_gpus) != AMDSMI_STATUS_SUCCESS)
            continue;
        c->n_gpus += n < AMD_MAX_GPUS - c->n_gpus ? n : AMD_MAX_GPUS - c->n_gpus;
    }
    return AMDSMI_STATUS_SUCCESS;
}

static void *amd_open(struct gm_backend_status *s, struct gm_driver_versions *v, gm_env_fn env)
{
    struct amd_ctx *c = gm_calloc(1, sizeof(*c));
    const char *override = gm_env_get(env, "GPUMEM_AMDSMI_LIBRARY");
    char why[512], missing[64];
    amd_status r;

    if (!c) {
        s->state = GM_BACKEND_ERROR;
        gm_strlcpy(s->msg, "out of memory", sizeof(s->msg));
        return NULL;
    }
    for (size_t k = 0; k < sizeof(amd_sonames) / sizeof(amd_sonames[0]) && !c->dl; k++) {
        char tried[256], e[512];
        c->dl = gm_dl_open(env, "GPUMEM_AMDSMI_LIBRARY", amd_sonames[k], tried, sizeof(tried), e,
                           sizeof(e));
        if (c->dl || k == 0) {
            gm_strlcpy(s->library, tried, sizeof(s->library));
            gm_strlcpy(why, c->dl ? "" : e, sizeof(why));
        }
        if (override && *override)
            break; /* the override is the only file tried */
    }
    if (!c->dl) {
        if (!override || !*override)
            gm_strlcpy(s->library, "libamd_smi.so", sizeof(s->library));
        s->state = GM_BACKEND_MISSING;
        snprintf(s->msg, sizeof(s->msg),
                 "no AMD GPU library: AMD SMI (libamd_smi.so) could not be loaded (%.180s)", why);
        gm_free(c);
        return NULL;
    }
    if (!gm_dl_bind(c->dl, amd_syms, sizeof(amd_syms) / sizeof(amd_syms[0]), &c->api, missing,
                    sizeof(missing))) {
        s->state = GM_BACKEND_ERROR;
        snprintf(s->msg, sizeof(s->msg), "%.150s does not export %.60s: not an AMD SMI library",
                 s->library, missing);
        gm_free(c);
        return NULL;
    }
    r = c->api.init(AMDSMI_INIT_AMD_GPUS);
    if (r != AMDSMI_STATUS_SUCCESS) {
        /* The kernel driver (amdgpu) not loaded, or no GPU to initialise: "no GPU". */
        bool nodev = r == AMDSMI_STATUS_DRIVER_NOT_LOADED || r == AMDSMI_STATUS_NOT_FOUND ||
                     r == AMDSMI_STATUS_INIT_ERROR;
        fail_open(c, s, nodev ? GM_BACKEND_NODEV : GM_BACKEND_ERROR, r,
                  r == AMDSMI_STATUS_DRIVER_NOT_LOADED ? "the amdgpu kernel driver is not loaded"
                  : nodev                              ? "no AMD GPU: amdsmi_init found none"
                                                       : "AMD SMI failed to initialise");
        gm_free(c);
        return NULL;
    }
    r = list_gpus(c);
    if (r != AMDSMI_STATUS_SUCCESS || c->n_gpus == 0) {
        if (r == AMDSMI_STATUS_SUCCESS) {
            s->state = GM_BACKEND_NODEV;
            gm_strlcpy(s->msg, "no AMD GPU: AMD SMI reports 0 GPUs", sizeof(s->msg));
        } else {
            fail_open(c, s, GM_BACKEND_ERROR, r, "amdsmi_get_socket_handles failed");
        }
        c->api.shut_down();
        gm_free(c);
        return NULL;
    }
    read_version(c);
    gm_strlcpy(v->amdsmi, c->version, sizeof(v->amdsmi));
    s->state = GM_BACKEND_OK;
    return c;
}

static void amd_close(void *ctx)
{
    struct amd_ctx *c = ctx;
    if (!c)
        return;
    c->api.shut_down();
    /* Like NVML, the library stays mapped: it may keep threads of its own. */
    gm_free(c);
}

static int amd_count(void *ctx)
{
    struct amd_ctx *c = ctx;
    return (int)c->n_gpus;
}

static enum gm_status gpu(struct amd_ctx *c, int i, amd_handle *p, struct gm_error *err)
{
    if (i < 0 || (uint32_t)i >= c->n_gpus)
        return gm_fail(err, GM_ERR_NODEV, GM_NO_OFFSET, "AMD GPU %d is out of range", i);
    *p = c->gpu[i];
    return GM_OK;
}

static enum gm_status amd_info(void *ctx, int i, struct gm_device_info *out, struct gm_error *err)
{
    struct amd_ctx *c = ctx;
    amd_handle p = NULL;
    enum gm_status st;

    memset(out, 0, sizeof(*out));
    out->vendor = GM_VENDOR_AMD;
    out->cuda_index = -1;
    out->nvml_index = -1;
    out->amdsmi_index = i;
    st = gpu(c, i, &p, err);
    if (st)
        return st;
    if (c->api.asic_info) {
        /* market_name comes first in every layout; the rest of the struct is not read. */
        static const size_t asic_bytes = 4096;
        char *asic = gm_calloc(1, asic_bytes);
        if (asic && c->api.asic_info(p, asic) == AMDSMI_STATUS_SUCCESS) {
            size_t len = strnlen(asic, c->name_cap);
            if (len < c->name_cap && len < sizeof(out->name))
                memcpy(out->name, asic, len + 1);
        }
        gm_free(asic);
    }
    if (c->api.device_uuid) {
        char uuid[128];
        unsigned len = (unsigned)sizeof(uuid);
        memset(uuid, 0, sizeof(uuid));
        if (c->api.device_uuid(p, &len, uuid) == AMDSMI_STATUS_SUCCESS) {
            uuid[sizeof(uuid) - 1] = '\0';
            gm_strlcpy(out->uuid, uuid, sizeof(out->uuid));
        }
    }
    if (c->api.device_bdf) {
        uint64_t bdf[4] = {0, 0, 0, 0}; /* room to spare: only the first u64 is the union */
        if (c->api.device_bdf(p, bdf) == AMDSMI_STATUS_SUCCESS) {
            char raw[32];
            snprintf(raw, sizeof(raw), "%04x:%02x:%02x.%x", (unsigned)(bdf[0] >> 16 & 0xffff),
                     (unsigned)(bdf[0] >> 8 & 0xff), (unsigned)(bdf[0] >> 3 & 0x1f),
                     (unsigned)(bdf[0] & 0x7));
            if (!gm_pci_normalise(raw, out->pci_bus_id, sizeof(out->pci_bus_id)))
                gm_strlcpy(out->pci_bus_id, raw, sizeof(out->pci_bus_id));
        }
    }
    return GM_OK;
}

static enum gm_status amd_memory(void *ctx, int i, struct gm_device_memory *out,
                                 struct gm_error *err)
{
    struct amd_ctx *c = ctx;
    uint64_t total = 0, used = 0;
    amd_handle p = NULL;
    amd_status r;
    enum gm_status st;

    memset(out, 0, sizeof(*out));
    st = gpu(c, i, &p, err);
    if (st)
        return st;
    if (!c->api.memory_total || !c->api.memory_usage)
        return gm_fail(err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET,
                       "this AMD SMI has no amdsmi_get_gpu_memory_total/_usage");
    r = c->api.memory_total(p, AMDSMI_MEM_TYPE_VRAM, &total);
    if (r == AMDSMI_STATUS_SUCCESS)
        r = c->api.memory_usage(p, AMDSMI_MEM_TYPE_VRAM, &used);
    if (r != AMDSMI_STATUS_SUCCESS)
        return gm_fail(err, r == AMDSMI_STATUS_NOT_SUPPORTED ? GM_ERR_UNSUPPORTED : GM_ERR_DRIVER,
                       GM_NO_OFFSET, "AMD SMI cannot read the VRAM of GPU %d: %s (%u)", i,
                       amd_err(c, r), r);
    out->total = (struct gm_reading){total, true};
    out->used = (struct gm_reading){used, true};
    if (used <= total)
        out->free = (struct gm_reading){total - used, true};
    out->source = GM_MEMORY_AMDSMI; /* reserved: AMD SMI has no such figure, stays unknown */
    return GM_OK;
}

static void add_process(struct gm_process_memory *out, size_t cap, size_t *n, uint32_t pid,
                        uint64_t vram)
{
    if (*n < cap) {
        out[*n].pid = pid;
        out[*n].used = (struct gm_reading){vram, true};
        out[*n].kinds = GM_PROCESS_COMPUTE;
    }
    (*n)++;
}

static size_t entry_size(enum proc_abi abi)
{
    switch (abi) {
    case PROC_ABI_PIDS:
        return sizeof(uint32_t);
    case PROC_ABI_V24:
        return sizeof(struct amd_proc_v24);
    case PROC_ABI_V26:
        return sizeof(struct amd_proc_v26);
    case PROC_ABI_UNKNOWN:
        break;
    }
    return 0;
}

static enum gm_status amd_processes(void *ctx, int i, struct gm_process_memory *out, size_t cap,
                                    size_t *n, struct gm_error *err)
{
    struct amd_ctx *c = ctx;
    size_t stride = entry_size(c->proc_abi);
    unsigned char *buf = NULL;
    uint32_t count = 0, alloc_n = 0;
    amd_status r = AMDSMI_STATUS_SUCCESS;
    amd_handle p = NULL;
    enum gm_status st;

    *n = 0;
    st = gpu(c, i, &p, err);
    if (st)
        return st;
    if (!c->api.process_list || (c->proc_abi == PROC_ABI_PIDS && !c->api.process_info))
        return gm_fail(err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET,
                       "this AMD SMI has no amdsmi_get_gpu_process_list");
    if (c->proc_abi == PROC_ABI_UNKNOWN)
        return gm_fail(err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET,
                       "per-process memory not read: the process entry layout of AMD SMI %s is "
                       "not one gpumem knows (23.x, 24.x, 26.x)",
                       c->version[0] ? c->version : "(unknown version)");
    /* Processes come and go between the size query and the call: retry with headroom. */
    for (int attempt = 0; attempt < 4; attempt++) {
        uint32_t want = 0;
        r = c->api.process_list(p, &want, NULL);
        if (r != AMDSMI_STATUS_SUCCESS && r != AMDSMI_STATUS_OUT_OF_RESOURCES)
            break;
        if (want == 0)
            return GM_OK;
        if (want > (1u << 20))
            return gm_fail(err, GM_ERR_DRIVER, GM_NO_OFFSET,
                           "AMD SMI reports %u processes on GPU %d", want, i);
        alloc_n = want * 2 + 5;
        buf = gm_calloc(alloc_n, stride);
        if (!buf)
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
        count = alloc_n;
        r = c->api.process_list(p, &count, buf);
        if (r == AMDSMI_STATUS_SUCCESS)
            break;
        gm_free(buf);
        buf = NULL;
        if (r != AMDSMI_STATUS_OUT_OF_RESOURCES)
            break;
    }
    if (r != AMDSMI_STATUS_SUCCESS)
        return gm_fail(err, GM_ERR_DRIVER, GM_NO_OFFSET,
                       "amdsmi_get_gpu_process_list failed: %s (%u)", amd_err(c, r), r);
    if (count > alloc_n)
        count = alloc_n; /* never trust a count past our buffer */
    for (uint32_t k = 0; k < count; k++) {
        const unsigned char *e = buf + (size_t)k * stride;
        if (c->proc_abi == PROC_ABI_PIDS) {
            struct amd_proc_v24 info;
            uint32_t pid;
            memcpy(&pid, e, sizeof(pid));
            memset(&info, 0, sizeof(info));
            /* A process may end between the list and this call: leave it out then. */
            if (c->api.process_info(p, pid, &info) == AMDSMI_STATUS_SUCCESS)
                add_process(out, cap, n, pid, info.u.vram_mem);
        } else if (c->proc_abi == PROC_ABI_V24) {
            struct amd_proc_v24 info;
            memcpy(&info, e, sizeof(info));
            add_process(out, cap, n, info.pid, info.u.vram_mem);
        } else {
            struct amd_proc_v26 info;
            memcpy(&info, e, sizeof(info));
            add_process(out, cap, n, info.pid, info.u.vram_mem);
        }
    }
    gm_free(buf);
    return GM_OK;
}

const struct gm_device_ops gm_amdsmi_ops = {
    "amdsmi", amd_open, amd_close, amd_count, amd_info, amd_memory, amd_processes,
};
