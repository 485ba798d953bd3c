/* SPDX-License-Identifier: MIT */
/* device.c - the backend registry and the joined, vendor-neutral device list.
 *
 * Backends are an explicit array of ops tables; each is opened in turn and reports its own
 * state.  A device seen by several backends (NVML and CUDA see the same card) becomes one
 * entry, joined by UUID and then by normalised PCI bus id; each entry keeps the index it has
 * in every backend so that live readings go to the backend that can give them. */
#include "device/device_int.h"

#include "gpumem/arena.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct gm_device_ops *const backends[] = {&gm_nvml_ops, &gm_cuda_ops};
#define N_BACKENDS (sizeof(backends) / sizeof(backends[0]))

struct dev_entry {
    struct gm_device_info info;
    int backend_index[N_BACKENDS]; /* index in each backend, -1 when it does not see it */
};

struct gm_devices {
    void *ctx[N_BACKENDS];
    struct gm_backend_status status[N_BACKENDS];
    struct gm_driver_versions versions;
    struct dev_entry *dev;
    size_t n_dev;
    gm_env_fn env;
};

static bool same_device(const struct gm_device_info *a, const struct gm_device_info *b)
{
    if (a->uuid[0] && b->uuid[0])
        return !strcmp(a->uuid, b->uuid);
    return a->pci_bus_id[0] && b->pci_bus_id[0] && !strcmp(a->pci_bus_id, b->pci_bus_id);
}

/* Fill fields 'dst' does not know from 'src'. */
static void merge_info(struct gm_device_info *dst, const struct gm_device_info *src)
{
    if (src->cuda_index >= 0)
        dst->cuda_index = src->cuda_index;
    if (src->nvml_index >= 0)
        dst->nvml_index = src->nvml_index;
    if (!dst->name[0])
        memcpy(dst->name, src->name, sizeof(dst->name));
    if (!dst->uuid[0])
        memcpy(dst->uuid, src->uuid, sizeof(dst->uuid));
    if (!dst->pci_bus_id[0])
        memcpy(dst->pci_bus_id, src->pci_bus_id, sizeof(dst->pci_bus_id));
    if (!dst->cc_valid && src->cc_valid) {
        dst->cc_major = src->cc_major;
        dst->cc_minor = src->cc_minor;
        dst->cc_valid = true;
    }
    if (!dst->multiprocessors_valid && src->multiprocessors_valid) {
        dst->multiprocessors = src->multiprocessors;
        dst->multiprocessors_valid = true;
    }
    if (!dst->cuda_total.valid)
        dst->cuda_total = src->cuda_total;
}

static int entry_order(const void *pa, const void *pb)
{
    const struct gm_device_info *a = &((const struct dev_entry *)pa)->info;
    const struct gm_device_info *b = &((const struct dev_entry *)pb)->info;
    /* CUDA-visible devices first, in CUDA order; then the rest in NVML order. */
    if ((a->cuda_index >= 0) != (b->cuda_index >= 0))
        return a->cuda_index >= 0 ? -1 : 1;
    if (a->cuda_index != b->cuda_index)
        return a->cuda_index < b->cuda_index ? -1 : 1;
    return (a->nvml_index > b->nvml_index) - (a->nvml_index < b->nvml_index);
}

static enum gm_status add_device(struct gm_devices *d, size_t b, int idx,
                                 const struct gm_device_info *info, struct gm_error *err)
{
    struct dev_entry *e;
    for (size_t k = 0; k < d->n_dev; k++) {
        if (d->dev[k].backend_index[b] < 0 && same_device(&d->dev[k].info, info)) {
            merge_info(&d->dev[k].info, info);
            d->dev[k].backend_index[b] = idx;
            return GM_OK;
        }
    }
    e = gm_realloc(d->dev, (d->n_dev + 1) * sizeof(*d->dev));
    if (!e)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    d->dev = e;
    e = &d->dev[d->n_dev++];
    memset(e, 0, sizeof(*e));
    e->info = *info;
    for (size_t k = 0; k < N_BACKENDS; k++)
        e->backend_index[k] = -1;
    e->backend_index[b] = idx;
    return GM_OK;
}

enum gm_status gm_devices_open(struct gm_devices **out, gm_env_fn env, struct gm_error *err)
{
    struct gm_devices *d = gm_calloc(1, sizeof(*d));
    enum gm_status st;

    *out = NULL;
    if (!d)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    d->env = env;
    for (size_t b = 0; b < N_BACKENDS; b++) {
        struct gm_backend_status *s = &d->status[b];
        int n;
        s->name = backends[b]->name;
        d->ctx[b] = backends[b]->open(s, &d->versions, env);
        if (!d->ctx[b])
            continue;
        n = backends[b]->count(d->ctx[b]);
        for (int i = 0; i < n; i++) {
            struct gm_device_info info;
            struct gm_error e;
            if (backends[b]->info(d->ctx[b], i, &info, &e) != GM_OK)
                continue; /* a device we cannot describe (no permission, fallen off the bus) */
            st = add_device(d, b, i, &info, err);
            if (st) {
                gm_devices_close(d);
                return st;
            }
        }
    }
    if (d->n_dev > 1)
        qsort(d->dev, d->n_dev, sizeof(*d->dev), entry_order);
    *out = d;
    return GM_OK;
}

void gm_devices_close(struct gm_devices *d)
{
    if (!d)
        return;
    for (size_t b = 0; b < N_BACKENDS; b++)
        if (d->ctx[b])
            backends[b]->close(d->ctx[b]);
    gm_free(d->dev);
    gm_free(d);
}

static const struct gm_backend_status *find_backend(const struct gm_devices *d, const char *name)
{
    for (size_t b = 0; b < N_BACKENDS; b++)
        if (!strcmp(d->status[b].name, name))
            return &d->status[b];
    return NULL;
}

gm_env_fn gm_devices_env(const struct gm_devices *d)
{
    return d->env;
}

enum gm_status gm_devices_check(const struct gm_devices *d, struct gm_error *err)
{
    const struct gm_backend_status *nv = find_backend(d, "nvml");
    const struct gm_backend_status *cu = find_backend(d, "cuda");
    const char *cvd = gm_env_get(d->env, "CUDA_VISIBLE_DEVICES");

    /* The stub library means CUDA programs cannot run, whatever NVML says. */
    if (cu && cu->state == GM_BACKEND_STUB)
        return gm_fail(err, GM_ERR_NODEV, GM_NO_OFFSET, "%s (%s)", cu->msg, cu->library);
    if (d->n_dev > 0 && (!cu || cu->state == GM_BACKEND_OK || cu->state == GM_BACKEND_MISSING))
        return GM_OK;
    if (cu && cu->state == GM_BACKEND_NODEV && nv && nv->state == GM_BACKEND_OK && cvd)
        return gm_fail(
            err, GM_ERR_NODEV, GM_NO_OFFSET,
            "no CUDA device visible: NVML sees %zu device%s but CUDA_VISIBLE_DEVICES=\"%s\" "
            "hides %s (%s)",
            d->n_dev, d->n_dev == 1 ? "" : "s", cvd, d->n_dev == 1 ? "it" : "them", cu->msg);
    if (cu && cu->state == GM_BACKEND_NODEV)
        return gm_fail(err, GM_ERR_NODEV, GM_NO_OFFSET, "%s", cu->msg);
    if (nv && cu && nv->state == GM_BACKEND_MISSING && cu->state == GM_BACKEND_MISSING)
        return gm_fail(err, GM_ERR_NODEV, GM_NO_OFFSET,
                       "no NVIDIA driver: neither %s nor %s could be loaded", nv->library,
                       cu->library);
    if (nv && nv->state == GM_BACKEND_NODEV)
        return gm_fail(err, GM_ERR_NODEV, GM_NO_OFFSET, "%s", nv->msg);
    if (cu && cu->state == GM_BACKEND_ERROR)
        return gm_fail(err, GM_ERR_DRIVER, GM_NO_OFFSET, "%s", cu->msg);
    if (nv && nv->state == GM_BACKEND_ERROR)
        return gm_fail(err, GM_ERR_DRIVER, GM_NO_OFFSET, "%s", nv->msg);
    if (d->n_dev == 0)
        return gm_fail(err, GM_ERR_NODEV, GM_NO_OFFSET, "no NVIDIA GPU found");
    return GM_OK;
}

size_t gm_devices_n_backends(const struct gm_devices *d)
{
    (void)d;
    return N_BACKENDS;
}

const struct gm_backend_status *gm_devices_backend(const struct gm_devices *d, size_t i)
{
    return i < N_BACKENDS ? &d->status[i] : NULL;
}

const struct gm_driver_versions *gm_devices_versions(const struct gm_devices *d)
{
    return &d->versions;
}

size_t gm_devices_count(const struct gm_devices *d)
{
    return d->n_dev;
}

const struct gm_device_info *gm_devices_info(const struct gm_devices *d, size_t i)
{
    return i < d->n_dev ? &d->dev[i].info : NULL;
}

enum gm_status gm_devices_find_cuda(const struct gm_devices *d, int cuda_index, size_t *pos,
                                    struct gm_error *err)
{
    size_t n_cuda = 0;
    for (size_t k = 0; k < d->n_dev; k++) {
        if (d->dev[k].info.cuda_index >= 0)
            n_cuda++;
        if (d->dev[k].info.cuda_index == cuda_index && cuda_index >= 0) {
            *pos = k;
            return GM_OK;
        }
    }
    return gm_fail(err, GM_ERR_NODEV, GM_NO_OFFSET,
                   "device cuda:%d is out of range: %zu CUDA device%s visible%s", cuda_index,
                   n_cuda, n_cuda == 1 ? "" : "s",
                   n_cuda ? "" : " (the CUDA driver library did not load or found no device)");
}

enum gm_status gm_device_parse_spec(const char *spec, int *cuda_index, struct gm_error *err)
{
    const char *p = spec;
    char *end;
    long v;
    if (!strncmp(p, "cuda:", 5))
        p += 5;
    if (*p < '0' || *p > '9')
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "bad device '%s': expected cuda:N (N = 0, 1, ...)", spec);
    errno = 0;
    v = strtol(p, &end, 10);
    if (errno || *end || v > 1 << 20)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "bad device '%s': expected cuda:N (N = 0, 1, ...)", spec);
    *cuda_index = (int)v;
    return GM_OK;
}

/* Live readings come from NVML only: say why it is not there. */
static enum gm_status no_backend(const struct gm_devices *d, const char *what, struct gm_error *err)
{
    const struct gm_backend_status *nv = find_backend(d, "nvml");
    return gm_fail(err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET, "cannot %s this device without NVML (%s)",
                   what, nv && nv->state != GM_BACKEND_OK ? nv->msg : "NVML does not see it");
}

enum gm_status gm_devices_memory(struct gm_devices *d, size_t i, struct gm_device_memory *out,
                                 struct gm_error *err)
{
    enum gm_status st = GM_OK;
    bool tried = false;
    memset(out, 0, sizeof(*out));
    if (i >= d->n_dev)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "device %zu out of range", i);
    for (size_t b = 0; b < N_BACKENDS; b++) {
        if (!d->ctx[b] || !backends[b]->memory || d->dev[i].backend_index[b] < 0)
            continue;
        tried = true;
        st = backends[b]->memory(d->ctx[b], d->dev[i].backend_index[b], out, err);
        if (st == GM_OK)
            return GM_OK;
    }
    if (!tried)
        return no_backend(d, "read the memory of", err);
    return st;
}

enum gm_status gm_devices_processes(struct gm_devices *d, size_t i, struct gm_process_memory *out,
                                    size_t cap, size_t *n, struct gm_error *err)
{
    *n = 0;
    if (i >= d->n_dev)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "device %zu out of range", i);
    for (size_t b = 0; b < N_BACKENDS; b++) {
        if (!d->ctx[b] || !backends[b]->processes || d->dev[i].backend_index[b] < 0)
            continue;
        return backends[b]->processes(d->ctx[b], d->dev[i].backend_index[b], out, cap, n, err);
    }
    return no_backend(d, "list the processes of", err);
}

enum gm_status gm_devices_process_list(struct gm_devices *d, size_t i,
                                       struct gm_process_memory **out, size_t *n,
                                       struct gm_error *err)
{
    size_t cap = 256;
    *out = NULL;
    *n = 0;
    for (int attempt = 0; attempt < 4; attempt++) {
        struct gm_process_memory *p = gm_calloc(cap, sizeof(*p));
        enum gm_status st;
        if (!p)
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory for %zu processes", cap);
        st = gm_devices_processes(d, i, p, cap, n, err);
        if (st == GM_OK && *n <= cap) {
            *out = p;
            return GM_OK;
        }
        gm_free(p);
        if (st)
            return st;
        cap = *n + 64; /* more than the buffer held: read again with room for them */
    }
    return gm_fail(err, GM_ERR_DRIVER, GM_NO_OFFSET,
                   "the process list of device %zu kept growing while it was read", i);
}

const char *gm_process_kind_name(unsigned kinds)
{
    switch (kinds & (GM_PROCESS_COMPUTE | GM_PROCESS_GRAPHICS)) {
    case GM_PROCESS_COMPUTE:
        return "C";
    case GM_PROCESS_GRAPHICS:
        return "G";
    case GM_PROCESS_COMPUTE | GM_PROCESS_GRAPHICS:
        return "C+G";
    default:
        return "-";
    }
}
