/* SPDX-License-Identifier: MIT */
/* cuda.c - the CUDA driver API through dlopen("libcuda.so.1"), and the "cuda" backend.
 *
 * Our own declarations of only the calls we use (driver-abi.md §1.2); no cuda.h.  Every
 * size-carrying function is bound by its versioned export (cuMemAlloc_v2, cuMemGetInfo_v2,
 * cuDeviceTotalMem_v2, ...): the plain exports keep the legacy 32-bit ABI and would truncate
 * sizes of 4 GiB and more.  Where a _v2 appeared late (cuDevicePrimaryCtxRelease_v2 in 11.0,
 * cuDeviceGetUuid_v2 in 11.4) the older name with the same prototype is the fallback. */
#include "device/cuda_abi.h"
#include "device/device_int.h"

#include "gpumem/arena.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_JIT_INFO_LOG_BUFFER = 3,
    CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
    CU_JIT_ERROR_LOG_BUFFER = 5,
    CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
};

struct cu_api {
    CUresult (*init)(unsigned flags);
    CUresult (*driver_get_version)(int *v);
    CUresult (*device_get_count)(int *n);
    CUresult (*device_get)(CUdevice *d, int ordinal);
    CUresult (*device_get_name)(char *name, int len, CUdevice d);
    CUresult (*device_total_mem)(size_t *bytes, CUdevice d);
    CUresult (*device_get_attribute)(int *v, int attrib, CUdevice d);
    CUresult (*device_get_uuid)(unsigned char uuid[16], CUdevice d);
    CUresult (*device_get_pci_bus_id)(char *buf, int len, CUdevice d);
    CUresult (*primary_ctx_retain)(CUcontext *c, CUdevice d);
    CUresult (*primary_ctx_release)(CUdevice d);
    CUresult (*ctx_set_current)(CUcontext c);
    CUresult (*ctx_synchronize)(void);
    CUresult (*mem_get_info)(size_t *free_bytes, size_t *total_bytes);
    CUresult (*mem_alloc)(CUdeviceptr *p, size_t n);
    CUresult (*mem_free)(CUdeviceptr p);
    CUresult (*memcpy_htod)(CUdeviceptr dst, const void *src, size_t n);
    CUresult (*memcpy_dtoh)(void *dst, CUdeviceptr src, size_t n);
    CUresult (*memset_d8)(CUdeviceptr p, unsigned char v, size_t n);
    CUresult (*memset_d32)(CUdeviceptr p, unsigned v, size_t n);
    CUresult (*memcpy_dtod)(CUdeviceptr dst, CUdeviceptr src, size_t n);
    CUresult (*module_load_data_ex)(CUmodule *m, const void *image, unsigned n_opt,
                                    CUjit_option *opt, void **vals);
    CUresult (*module_get_function)(CUfunction *f, CUmodule m, const char *name);
    CUresult (*module_unload)(CUmodule m);
    CUresult (*launch_kernel)(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                              unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params,
                              void **extra);
    CUresult (*get_error_name)(CUresult e, const char **s);
    CUresult (*get_error_string)(CUresult e, const char **s);
};

#define SYM(field, req, ...)                                                                       \
    {                                                                                              \
        {__VA_ARGS__}, offsetof(struct cu_api, field), req                                         \
    }
static const struct gm_dl_sym cu_syms[] = {
    SYM(init, true, "cuInit"),
    SYM(driver_get_version, true, "cuDriverGetVersion"),
    SYM(device_get_count, true, "cuDeviceGetCount"),
    SYM(device_get, true, "cuDeviceGet"),
    SYM(device_get_name, true, "cuDeviceGetName"),
    SYM(device_total_mem, true, "cuDeviceTotalMem_v2"),
    SYM(device_get_attribute, true, "cuDeviceGetAttribute"),
    SYM(device_get_uuid, false, "cuDeviceGetUuid_v2", "cuDeviceGetUuid"),
    SYM(device_get_pci_bus_id, false, "cuDeviceGetPCIBusId"),
    SYM(primary_ctx_retain, true, "cuDevicePrimaryCtxRetain"),
    SYM(primary_ctx_release, true, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"),
    SYM(ctx_set_current, true, "cuCtxSetCurrent"),
    SYM(ctx_synchronize, true, "cuCtxSynchronize"),
    SYM(mem_get_info, true, "cuMemGetInfo_v2"),
    SYM(mem_alloc, true, "cuMemAlloc_v2"),
    SYM(mem_free, true, "cuMemFree_v2"),
    SYM(memcpy_htod, true, "cuMemcpyHtoD_v2"),
    SYM(memcpy_dtoh, true, "cuMemcpyDtoH_v2"),
    SYM(memset_d8, true, "cuMemsetD8_v2"),
    SYM(memset_d32, true, "cuMemsetD32_v2"),
    SYM(memcpy_dtod, true, "cuMemcpyDtoD_v2"),
    SYM(module_load_data_ex, true, "cuModuleLoadDataEx"),
    SYM(module_get_function, true, "cuModuleGetFunction"),
    SYM(module_unload, true, "cuModuleUnload"),
    SYM(launch_kernel, true, "cuLaunchKernel"),
    SYM(get_error_name, false, "cuGetErrorName"),
    SYM(get_error_string, false, "cuGetErrorString"),
};
#undef SYM

struct gm_cuda {
    void *dl;
    struct cu_api api;
    int last; /* CUresult of the last call */
    char library[256];
    CUcontext ctx; /* retained primary context, NULL when none */
    CUdevice ctx_device;
};

static const char *err_name(const struct gm_cuda *cu, CUresult r)
{
    const char *s = NULL;
    if (cu->api.get_error_name && cu->api.get_error_name(r, &s) == 0 && s)
        return s;
    switch (r) {
    case 2:
        return "CUDA_ERROR_OUT_OF_MEMORY";
    case 34:
        return "CUDA_ERROR_STUB_LIBRARY";
    case 100:
        return "CUDA_ERROR_NO_DEVICE";
    default:
        return "CUDA error";
    }
}

static const char *err_text(const struct gm_cuda *cu, CUresult r)
{
    const char *s = NULL;
    if (cu->api.get_error_string && cu->api.get_error_string(r, &s) == 0 && s)
        return s;
    return "no description";
}

/* Record 'r' and turn a failure into a gm_error naming the call. */
static enum gm_status check(struct gm_cuda *cu, CUresult r, const char *call, struct gm_error *err)
{
    cu->last = r;
    if (r == 0)
        return GM_OK;
    if (r == GM_CU_ERROR_OUT_OF_MEMORY)
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "%s: out of device memory (%s, %d)", call,
                       err_name(cu, r), r);
    return gm_fail(err, GM_ERR_DRIVER, GM_NO_OFFSET, "%s failed: %s (%d): %s", call,
                   err_name(cu, r), r, err_text(cu, r));
}

/* The sentence for a cuInit failure that means "no usable GPU" (driver-abi.md §1.1), or
 * NULL when the code is an ordinary driver error. */
static const char *init_reason(CUresult r)
{
    switch (r) {
    case 34:
        return "only the CUDA stub library was found (cuInit returned 34, "
               "CUDA_ERROR_STUB_LIBRARY): no NVIDIA driver is installed, or a toolkit's stubs "
               "directory is on the library path";
    case 100:
        return "no CUDA device (cuInit returned 100, CUDA_ERROR_NO_DEVICE)";
    case 35:
        return "the NVIDIA driver is older than this CUDA needs (cuInit returned 35, "
               "CUDA_ERROR_INSUFFICIENT_DRIVER)";
    case 803:
        return "the NVIDIA driver and its kernel module do not match (cuInit returned 803, "
               "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)";
    case 804:
        return "the forward-compatibility driver does not support this GPU (cuInit returned "
               "804, CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE)";
    case 999:
        return "the NVIDIA driver failed to initialise (cuInit returned 999, "
               "CUDA_ERROR_UNKNOWN): often a driver/kernel module mismatch or a GPU in a bad "
               "state";
    default:
        return NULL;
    }
}

/* gm_cuda_load() that also says how it failed: *kind is the backend state and *code the
 * failing CUresult (0 when no driver call failed). */
static enum gm_status load(struct gm_cuda **out, gm_env_fn env, enum gm_backend_state *kind,
                           int *code, struct gm_error *err)
{
    struct gm_cuda *cu;
    char why[512], missing[64];
    CUresult r;
    int n = 0;

    *out = NULL;
    *kind = GM_BACKEND_ERROR;
    *code = 0;
    cu = gm_calloc(1, sizeof(*cu));
    if (!cu)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    cu->dl = gm_dl_open(env, "GPUMEM_CUDA_LIBRARY", "libcuda.so.1", cu->library,
                        sizeof(cu->library), why, sizeof(why));
    if (!cu->dl) {
        gm_free(cu);
        *kind = GM_BACKEND_MISSING;
        return gm_fail(err, GM_ERR_NODEV, GM_NO_OFFSET,
                       "no NVIDIA driver: the CUDA driver library could not be loaded (%s)", why);
    }
    if (!gm_dl_bind(cu->dl, cu_syms, sizeof(cu_syms) / sizeof(cu_syms[0]), &cu->api, missing,
                    sizeof(missing))) {
        gm_fail(err, GM_ERR_DRIVER, GM_NO_OFFSET,
                "%s does not export %s: the driver is too old or this is not libcuda", cu->library,
                missing);
        gm_cuda_unload(cu);
        return GM_ERR_DRIVER;
    }
    r = cu->api.init(0);
    cu->last = r;
    *code = r;
    if (r != 0) {
        const char *reason = init_reason(r);
        *kind = r == GM_CU_ERROR_STUB_LIBRARY ? GM_BACKEND_STUB
                : reason                      ? GM_BACKEND_NODEV
                                              : GM_BACKEND_ERROR;
        if (reason)
            gm_fail(err, GM_ERR_NODEV, GM_NO_OFFSET, "%s", reason);
        else
            check(cu, r, "cuInit", err);
        gm_cuda_unload(cu);
        return reason ? GM_ERR_NODEV : GM_ERR_DRIVER;
    }
    r = cu->api.device_get_count(&n);
    if (r == 0 && n <= 0) {
        gm_cuda_unload(cu);
        *kind = GM_BACKEND_NODEV;
        return gm_fail(err, GM_ERR_NODEV, GM_NO_OFFSET,
                       "no CUDA device: the driver is loaded but reports 0 devices");
    }
    *kind = GM_BACKEND_OK;
    *out = cu;
    return GM_OK;
}

enum gm_status gm_cuda_load(struct gm_cuda **out, gm_env_fn env, struct gm_error *err)
{
    enum gm_backend_state kind;
    int code;
    return load(out, env, &kind, &code, err);
}

void gm_cuda_unload(struct gm_cuda *cu)
{
    if (!cu)
        return;
    if (cu->ctx)
        gm_cuda_context_end(cu, NULL);
    /* The real driver is never unloaded from a process that initialised it (its threads
     * would run on unmapped code); a handle leak of one library is the safe choice. */
    gm_free(cu);
}

int gm_cuda_last_result(const struct gm_cuda *cu)
{
    return cu->last;
}

const char *gm_cuda_library(const struct gm_cuda *cu)
{
    return cu->library;
}

enum gm_status gm_cuda_driver_version(struct gm_cuda *cu, int *version, struct gm_error *err)
{
    return check(cu, cu->api.driver_get_version(version), "cuDriverGetVersion", err);
}

enum gm_status gm_cuda_device_count(struct gm_cuda *cu, int *n, struct gm_error *err)
{
    return check(cu, cu->api.device_get_count(n), "cuDeviceGetCount", err);
}

static enum gm_status get_device(struct gm_cuda *cu, int ordinal, CUdevice *d, struct gm_error *err)
{
    int n = 0;
    enum gm_status st = gm_cuda_device_count(cu, &n, err);
    if (st)
        return st;
    if (ordinal < 0 || ordinal >= n)
        return gm_fail(err, GM_ERR_NODEV, GM_NO_OFFSET,
                       "device cuda:%d is out of range: %d CUDA device%s visible", ordinal, n,
                       n == 1 ? "" : "s");
    return check(cu, cu->api.device_get(d, ordinal), "cuDeviceGet", err);
}

enum gm_status gm_cuda_device_attribute(struct gm_cuda *cu, int ordinal, int attribute, int *value,
                                        struct gm_error *err)
{
    CUdevice d;
    enum gm_status st = get_device(cu, ordinal, &d, err);
    if (st)
        return st;
    return check(cu, cu->api.device_get_attribute(value, attribute, d), "cuDeviceGetAttribute",
                 err);
}

enum gm_status gm_cuda_device_info(struct gm_cuda *cu, int ordinal, struct gm_device_info *out,
                                   struct gm_error *err)
{
    CUdevice d;
    unsigned char u[16];
    char pci[64];
    size_t total = 0;
    int major = 0, minor = 0, sms = 0;
    enum gm_status st;

    memset(out, 0, sizeof(*out));
    out->cuda_index = ordinal;
    out->nvml_index = -1;
    st = get_device(cu, ordinal, &d, err);
    if (st)
        return st;
    st = check(cu, cu->api.device_get_name(out->name, (int)sizeof(out->name), d), "cuDeviceGetName",
               err);
    if (st)
        return st;
    out->name[sizeof(out->name) - 1] = '\0';
    if (cu->api.device_total_mem(&total, d) == 0)
        out->cuda_total = (struct gm_reading){(uint64_t)total, true};
    if (cu->api.device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d) ==
            0 &&
        cu->api.device_get_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d) ==
            0) {
        out->cc_major = major;
        out->cc_minor = minor;
        out->cc_valid = true;
    }
    if (cu->api.device_get_attribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d) == 0) {
        out->multiprocessors = sms;
        out->multiprocessors_valid = true;
    }
    if (cu->api.device_get_uuid && cu->api.device_get_uuid(u, d) == 0)
        snprintf(out->uuid, sizeof(out->uuid),
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                 u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                 u[14], u[15]);
    if (cu->api.device_get_pci_bus_id &&
        cu->api.device_get_pci_bus_id(pci, (int)sizeof(pci), d) == 0) {
        pci[sizeof(pci) - 1] = '\0';
        if (!gm_pci_normalise(pci, out->pci_bus_id, sizeof(out->pci_bus_id)))
            gm_strlcpy(out->pci_bus_id, pci, sizeof(out->pci_bus_id));
    }
    cu->last = 0;
    return GM_OK;
}

enum gm_status gm_cuda_context_begin(struct gm_cuda *cu, int ordinal, struct gm_error *err)
{
    CUdevice d;
    CUcontext c = NULL;
    enum gm_status st;

    if (cu->ctx)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "a context is already current: call gm_cuda_context_end() first");
    st = get_device(cu, ordinal, &d, err);
    if (st)
        return st;
    st = check(cu, cu->api.primary_ctx_retain(&c, d), "cuDevicePrimaryCtxRetain", err);
    if (st)
        return st;
    st = check(cu, cu->api.ctx_set_current(c), "cuCtxSetCurrent", err);
    if (st) {
        cu->api.primary_ctx_release(d);
        return st;
    }
    cu->ctx = c;
    cu->ctx_device = d;
    return GM_OK;
}

enum gm_status gm_cuda_context_end(struct gm_cuda *cu, struct gm_error *err)
{
    CUresult r;
    if (!cu->ctx)
        return GM_OK;
    cu->api.ctx_set_current(NULL);
    r = cu->api.primary_ctx_release(cu->ctx_device);
    cu->ctx = NULL;
    return check(cu, r, "cuDevicePrimaryCtxRelease_v2", err);
}

static enum gm_status need_ctx(struct gm_cuda *cu, const char *call, struct gm_error *err)
{
    if (cu->ctx)
        return GM_OK;
    return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                   "%s: no current context (call gm_cuda_context_begin() first)", call);
}

static enum gm_status fits_size_t(uint64_t n, const char *call, struct gm_error *err)
{
    if (n > SIZE_MAX)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "%s: %llu bytes do not fit size_t", call,
                       (unsigned long long)n);
    return GM_OK;
}

enum gm_status gm_cuda_mem_get_info(struct gm_cuda *cu, uint64_t *free_bytes, uint64_t *total_bytes,
                                    struct gm_error *err)
{
    size_t f = 0, t = 0;
    enum gm_status st = need_ctx(cu, "cuMemGetInfo_v2", err);
    if (st)
        return st;
    st = check(cu, cu->api.mem_get_info(&f, &t), "cuMemGetInfo_v2", err);
    if (st)
        return st;
    *free_bytes = f;
    *total_bytes = t;
    return GM_OK;
}

enum gm_status gm_cuda_mem_alloc(struct gm_cuda *cu, uint64_t bytes, uint64_t *dptr,
                                 struct gm_error *err)
{
    CUdeviceptr p = 0;
    enum gm_status st = need_ctx(cu, "cuMemAlloc_v2", err);
    if (!st)
        st = fits_size_t(bytes, "cuMemAlloc_v2", err);
    if (st)
        return st;
    st = check(cu, cu->api.mem_alloc(&p, (size_t)bytes), "cuMemAlloc_v2", err);
    if (st)
        return st;
    *dptr = p;
    return GM_OK;
}

enum gm_status gm_cuda_mem_free(struct gm_cuda *cu, uint64_t dptr, struct gm_error *err)
{
    enum gm_status st = need_ctx(cu, "cuMemFree_v2", err);
    if (st)
        return st;
    return check(cu, cu->api.mem_free(dptr), "cuMemFree_v2", err);
}

enum gm_status gm_cuda_memset_d8(struct gm_cuda *cu, uint64_t dptr, uint8_t value, uint64_t n,
                                 struct gm_error *err)
{
    enum gm_status st = need_ctx(cu, "cuMemsetD8_v2", err);
    if (!st)
        st = fits_size_t(n, "cuMemsetD8_v2", err);
    if (st)
        return st;
    return check(cu, cu->api.memset_d8(dptr, value, (size_t)n), "cuMemsetD8_v2", err);
}

enum gm_status gm_cuda_memset_d32(struct gm_cuda *cu, uint64_t dptr, uint32_t value, uint64_t n,
                                  struct gm_error *err)
{
    enum gm_status st = need_ctx(cu, "cuMemsetD32_v2", err);
    if (!st)
        st = fits_size_t(n, "cuMemsetD32_v2", err);
    if (st)
        return st;
    return check(cu, cu->api.memset_d32(dptr, value, (size_t)n), "cuMemsetD32_v2", err);
}

enum gm_status gm_cuda_memcpy_dtod(struct gm_cuda *cu, uint64_t dst, uint64_t src, uint64_t n,
                                   struct gm_error *err)
{
    enum gm_status st = need_ctx(cu, "cuMemcpyDtoD_v2", err);
    if (!st)
        st = fits_size_t(n, "cuMemcpyDtoD_v2", err);
    if (st)
        return st;
    return check(cu, cu->api.memcpy_dtod(dst, src, (size_t)n), "cuMemcpyDtoD_v2", err);
}

enum gm_status gm_cuda_memcpy_htod(struct gm_cuda *cu, uint64_t dst, const void *src, uint64_t n,
                                   struct gm_error *err)
{
    enum gm_status st = need_ctx(cu, "cuMemcpyHtoD_v2", err);
    if (!st)
        st = fits_size_t(n, "cuMemcpyHtoD_v2", err);
    if (st)
        return st;
    return check(cu, cu->api.memcpy_htod(dst, src, (size_t)n), "cuMemcpyHtoD_v2", err);
}

enum gm_status gm_cuda_memcpy_dtoh(struct gm_cuda *cu, void *dst, uint64_t src, uint64_t n,
                                   struct gm_error *err)
{
    enum gm_status st = need_ctx(cu, "cuMemcpyDtoH_v2", err);
    if (!st)
        st = fits_size_t(n, "cuMemcpyDtoH_v2", err);
    if (st)
        return st;
    return check(cu, cu->api.memcpy_dtoh(dst, src, (size_t)n), "cuMemcpyDtoH_v2", err);
}

enum gm_status gm_cuda_module_load_ptx(struct gm_cuda *cu, const char *ptx,
                                       struct gm_cuda_module **out, struct gm_error *err)
{
    char info_log[4096], error_log[4096];
    CUjit_option opt[4] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                           CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[4];
    CUmodule m = NULL;
    CUresult r;
    enum gm_status st = need_ctx(cu, "cuModuleLoadDataEx", err);

    *out = NULL;
    if (st)
        return st;
    info_log[0] = error_log[0] = '\0';
    vals[0] = info_log;
    vals[1] = (void *)(uintptr_t)sizeof(info_log);
    vals[2] = error_log;
    vals[3] = (void *)(uintptr_t)sizeof(error_log);
    r = cu->api.module_load_data_ex(&m, ptx, 4, opt, vals);
    cu->last = r;
    if (r != 0) {
        size_t len;
        error_log[sizeof(error_log) - 1] = '\0';
        len = strlen(error_log);
        while (len && (error_log[len - 1] == '\n' || error_log[len - 1] == '\r'))
            error_log[--len] = '\0';
        return gm_fail(err, GM_ERR_DRIVER, GM_NO_OFFSET, "cuModuleLoadDataEx failed: %s (%d)%s%s",
                       err_name(cu, r), r, len ? ": " : "", error_log);
    }
    *out = (struct gm_cuda_module *)m;
    return GM_OK;
}

enum gm_status gm_cuda_module_unload(struct gm_cuda *cu, struct gm_cuda_module *m,
                                     struct gm_error *err)
{
    if (!m)
        return GM_OK;
    return check(cu, cu->api.module_unload((CUmodule)m), "cuModuleUnload", err);
}

enum gm_status gm_cuda_module_function(struct gm_cuda *cu, struct gm_cuda_module *m,
                                       const char *name, struct gm_cuda_function **out,
                                       struct gm_error *err)
{
    CUfunction f = NULL;
    CUresult r = cu->api.module_get_function(&f, (CUmodule)m, name);
    enum gm_status st;

    *out = NULL;
    st = check(cu, r, "cuModuleGetFunction", err);
    if (st)
        return gm_error_prefix(err, "kernel '%s'", name);
    *out = (struct gm_cuda_function *)f;
    return GM_OK;
}

enum gm_status gm_cuda_launch(struct gm_cuda *cu, struct gm_cuda_function *f,
                              const struct gm_cuda_launch_dims *dims, void **params,
                              struct gm_error *err)
{
    enum gm_status st = need_ctx(cu, "cuLaunchKernel", err);
    if (st)
        return st;
    return check(cu,
                 cu->api.launch_kernel((CUfunction)f, dims->grid[0], dims->grid[1], dims->grid[2],
                                       dims->block[0], dims->block[1], dims->block[2],
                                       dims->shared_bytes, NULL, params, NULL),
                 "cuLaunchKernel", err);
}

enum gm_status gm_cuda_synchronize(struct gm_cuda *cu, struct gm_error *err)
{
    enum gm_status st = need_ctx(cu, "cuCtxSynchronize", err);
    if (st)
        return st;
    return check(cu, cu->api.ctx_synchronize(), "cuCtxSynchronize", err);
}

/* ---- the "cuda" backend of the device registry ---- */

static void *cuda_open(struct gm_backend_status *s, struct gm_driver_versions *v, gm_env_fn env)
{
    struct gm_cuda *cu = NULL;
    struct gm_error e;
    int ver = 0;
    enum gm_status st = load(&cu, env, &s->state, &s->driver_code, &e);

    if (st) {
        const char *lib = gm_env_get(env, "GPUMEM_CUDA_LIBRARY");
        gm_strlcpy(s->library, lib && *lib ? lib : "libcuda.so.1", sizeof(s->library));
        gm_strlcpy(s->msg, e.msg, sizeof(s->msg));
        return NULL;
    }
    gm_strlcpy(s->library, cu->library, sizeof(s->library));
    if (cu->api.driver_get_version(&ver) == 0) {
        v->cuda_driver_api = ver;
        v->cuda_driver_api_valid = true;
    }
    s->state = GM_BACKEND_OK;
    return cu;
}

static void cuda_close(void *ctx)
{
    gm_cuda_unload(ctx);
}

static int cuda_count(void *ctx)
{
    int n = 0;
    struct gm_cuda *cu = ctx;
    if (cu->api.device_get_count(&n) != 0)
        return 0;
    return n;
}

static enum gm_status cuda_info(void *ctx, int i, struct gm_device_info *out, struct gm_error *err)
{
    return gm_cuda_device_info(ctx, i, out, err);
}

const struct gm_device_ops gm_cuda_ops = {
    "cuda", cuda_open, cuda_close, cuda_count, cuda_info, NULL, NULL,
};
