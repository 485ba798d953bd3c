/* SPDX-License-Identifier: MIT */
/* device_int.h - internals of src/device/: the backend ops table and the symbol binder.
 *
 * A backend (NVML, CUDA, later ROCm SMI) is one const struct gm_device_ops; device.c keeps
 * an explicit array of them (no constructors).  A backend's state lives in the ctx its
 * open() returns, never in file statics. */
#ifndef GM_DEVICE_DEVICE_INT_H
#define GM_DEVICE_DEVICE_INT_H

#include "gpumem/device.h"

#include <stdbool.h>
#include <stddef.h>

struct gm_device_ops {
    const char *name; /* "nvml", "cuda" */
    /* Load and initialise ('env' gives the library's override variable).  Fills 'st'
     * (state, library, reason) and the versions this backend knows; returns the backend
     * context, or NULL when st->state != OK. */
    void *(*open)(struct gm_backend_status *st, struct gm_driver_versions *v, gm_env_fn env);
    void (*close)(void *ctx);
    int (*count)(void *ctx);
    /* Static facts of device 'i' (the backend's own index).  The backend sets its own
     * index field (cuda_index or nvml_index) and leaves the other at -1. */
    enum gm_status (*info)(void *ctx, int i, struct gm_device_info *out, struct gm_error *err);
    /* Optional (NULL): live memory and process list. */
    enum gm_status (*memory)(void *ctx, int i, struct gm_device_memory *out, struct gm_error *err);
    enum gm_status (*processes)(void *ctx, int i, struct gm_process_memory *out, size_t cap,
                                size_t *n, struct gm_error *err);
};

extern const struct gm_device_ops gm_nvml_ops;
extern const struct gm_device_ops gm_cuda_ops;

/* One symbol to bind: up to three names tried in order (versioned first), where to store
 * the function pointer (offset into the caller's table), and whether it is required. */
struct gm_dl_sym {
    const char *names[3];
    size_t offset;
    bool required;
};

/* The environment lookup 'd' was opened with. */
gm_env_fn gm_devices_env(const struct gm_devices *d);

/* The value of 'name' through 'env' (NULL for an empty environment), or NULL when unset. */
const char *gm_env_get(gm_env_fn env, const char *name);

/* dlopen 'soname', or the path 'env' gives for variable 'override' when set and not empty.
 * Writes what was tried to library[n].  NULL with the reason in why[nw]. */
void *gm_dl_open(gm_env_fn env, const char *override, const char *soname, char *library, size_t n,
                 char *why, size_t nw);

/* Bind every symbol of 'syms' into 'table'.  Returns false and names the first missing
 * required symbol in missing[nm]; optional symbols that are missing stay NULL. */
bool gm_dl_bind(void *handle, const struct gm_dl_sym *syms, size_t n_syms, void *table,
                char *missing, size_t nm);

/* Normalise a PCI bus id ("0000:17:00.0" or "00000000:17:00.0") into "00000000:17:00.0" (upper-case
 * hex, as nvidia-smi prints it); false when it does not parse. */
bool gm_pci_normalise(const char *in, char *out, size_t n);

/* Copy a string into a fixed buffer, always terminated. */
void gm_strlcpy(char *dst, const char *src, size_t n);

#endif
