/* SPDX-License-Identifier: MIT */
/* classify.c - what a loaded object is, from its file name: the one table of file-name
 * patterns mapped to enum gm_account_lib, and the keys and titles of the account's enums.
 *
 * This file is compiled into the library and, unchanged, into the interposer
 * (libgpumem-account.so), which must not pull the rest of the library in: it includes
 * nothing but its public header and the C library, allocates nothing and keeps no state, so
 * it is safe inside a driver call of any thread.
 *
 * A row matches the last component of the path when the name starts with 'prefix' (so
 * "libcublas.so" matches "libcublas.so.12" and "libcublas.so.12.4.5.8") or, for rows with
 * a folder, when the path contains it.  Rows are tried in order: the longer prefixes of one
 * family come first (libcublasLt before libcublas). */
#include "gpumem/account.h"

#include <string.h>

struct lib_pattern {
    const char *folder; /* a path component sequence ("/.triton/"), or NULL */
    const char *prefix; /* the file name's start, or NULL (any file in 'folder') */
    enum gm_account_lib lib;
};

static const struct lib_pattern patterns[] = {
    /* passed through: the interposer, the runtime, the driver */
    {NULL, "libgpumem-account.so", GM_ACCOUNT_LIB_SELF},
    {NULL, "libcudart.so", GM_ACCOUNT_LIB_RUNTIME},
    {NULL, "libcuda.so", GM_ACCOUNT_LIB_DRIVER},
    /* PyTorch: c10's caching allocator, and libtorch_cuda (split into _cu/_cpp in 1.8-1.10) */
    {NULL, "libc10_cuda.so", GM_ACCOUNT_LIB_TORCH},
    {NULL, "libtorch_cuda", GM_ACCOUNT_LIB_TORCH},
    {NULL, "libnccl.so", GM_ACCOUNT_LIB_NCCL},
    {NULL, "libnccl-net", GM_ACCOUNT_LIB_NCCL},
    {NULL, "libcublasLt.so", GM_ACCOUNT_LIB_CUBLASLT},
    {NULL, "libcublas.so", GM_ACCOUNT_LIB_CUBLAS},
    /* cuDNN 8 and 9 split into libcudnn_ops, _cnn, _adv, _engines_*, _graph, _heuristic */
    {NULL, "libcudnn", GM_ACCOUNT_LIB_CUDNN},
    /* Triton: its runtime, and the launchers it compiles into its cache folder */
    {NULL, "libtriton.so", GM_ACCOUNT_LIB_TRITON},
    {NULL, "__triton_launcher", GM_ACCOUNT_LIB_TRITON},
    {"/.triton/cache/", NULL, GM_ACCOUNT_LIB_TRITON},
};

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

enum gm_account_lib gm_account_classify(const char *path)
{
    const char *name;
    if (!path || !*path)
        return GM_ACCOUNT_LIB_UNKNOWN;
    name = base_name(path);
    for (size_t i = 0; i < sizeof(patterns) / sizeof(patterns[0]); i++) {
        const struct lib_pattern *p = &patterns[i];
        if (p->folder && !strstr(path, p->folder))
            continue;
        if (p->prefix && strncmp(name, p->prefix, strlen(p->prefix)) != 0)
            continue;
        return p->lib;
    }
    return GM_ACCOUNT_LIB_OTHER;
}

bool gm_account_lib_passes_through(enum gm_account_lib lib)
{
    return lib == GM_ACCOUNT_LIB_RUNTIME || lib == GM_ACCOUNT_LIB_DRIVER ||
           lib == GM_ACCOUNT_LIB_SELF;
}

static const struct {
    const char *key;
    const char *title;
} libs[GM_ACCOUNT_LIB__COUNT] = {
    [GM_ACCOUNT_LIB_UNKNOWN] = {"unknown", "unknown caller"},
    [GM_ACCOUNT_LIB_TORCH] = {"torch", "PyTorch reserved"},
    [GM_ACCOUNT_LIB_NCCL] = {"nccl", "NCCL"},
    [GM_ACCOUNT_LIB_CUBLAS] = {"cublas", "cuBLAS"},
    [GM_ACCOUNT_LIB_CUBLASLT] = {"cublaslt", "cuBLASLt"},
    [GM_ACCOUNT_LIB_CUDNN] = {"cudnn", "cuDNN"},
    [GM_ACCOUNT_LIB_TRITON] = {"triton", "Triton"},
    [GM_ACCOUNT_LIB_OTHER] = {"other", "other libraries"},
    [GM_ACCOUNT_LIB_RUNTIME] = {"runtime", "CUDA runtime"},
    [GM_ACCOUNT_LIB_DRIVER] = {"driver", "CUDA driver"},
    [GM_ACCOUNT_LIB_SELF] = {"self", "gpumem account"},
};

const char *gm_account_lib_key(enum gm_account_lib lib)
{
    return (unsigned)lib < GM_ACCOUNT_LIB__COUNT ? libs[lib].key : "unknown";
}

const char *gm_account_lib_title(enum gm_account_lib lib)
{
    return (unsigned)lib < GM_ACCOUNT_LIB__COUNT ? libs[lib].title : "unknown caller";
}

/* Whether 'key' (n bytes) spells 'word'. */
static bool is_key(const char *key, size_t n, const char *word)
{
    return strlen(word) == n && memcmp(key, word, n) == 0;
}

bool gm_account_lib_from_key(const char *key, size_t n, enum gm_account_lib *out)
{
    for (int i = 0; i < GM_ACCOUNT_LIB__COUNT; i++) {
        if (is_key(key, n, libs[i].key)) {
            *out = (enum gm_account_lib)i;
            return true;
        }
    }
    return false;
}

static const char *const kinds[GM_ACCOUNT_KIND__COUNT] = {
    [GM_ACCOUNT_KIND_DEVICE] = "device",
    [GM_ACCOUNT_KIND_PITCH] = "pitch",
    [GM_ACCOUNT_KIND_ASYNC] = "async",
    [GM_ACCOUNT_KIND_VMM] = "vmm",
    [GM_ACCOUNT_KIND_MANAGED] = "managed",
    [GM_ACCOUNT_KIND_HOST] = "host",
    [GM_ACCOUNT_KIND_HOST_REGISTERED] = "host_registered",
};

const char *gm_account_kind_key(enum gm_account_kind k)
{
    return (unsigned)k < GM_ACCOUNT_KIND__COUNT ? kinds[k] : "device";
}

bool gm_account_kind_from_key(const char *key, size_t n, enum gm_account_kind *out)
{
    for (int i = 0; i < GM_ACCOUNT_KIND__COUNT; i++) {
        if (is_key(key, n, kinds[i])) {
            *out = (enum gm_account_kind)i;
            return true;
        }
    }
    return false;
}

bool gm_account_kind_in_equation(enum gm_account_kind k)
{
    return k == GM_ACCOUNT_KIND_DEVICE || k == GM_ACCOUNT_KIND_PITCH ||
           k == GM_ACCOUNT_KIND_ASYNC || k == GM_ACCOUNT_KIND_VMM;
}

bool gm_account_kind_rounded(enum gm_account_kind k)
{
    return k == GM_ACCOUNT_KIND_DEVICE || k == GM_ACCOUNT_KIND_PITCH;
}

static const char *const readings[] = {
    [GM_ACCOUNT_READING_NONE] = "none",
    [GM_ACCOUNT_READING_NVML_PROCESS] = "nvml_process",
    [GM_ACCOUNT_READING_NVML_DEVICE] = "nvml_device",
    [GM_ACCOUNT_READING_MEM_GET_INFO] = "mem_get_info",
    [GM_ACCOUNT_READING_MIXED] = "mixed",
};

const char *gm_account_reading_key(enum gm_account_reading r)
{
    return (unsigned)r <= GM_ACCOUNT_READING_MIXED ? readings[r] : "none";
}

bool gm_account_reading_from_key(const char *key, size_t n, enum gm_account_reading *out)
{
    for (int i = 0; i <= GM_ACCOUNT_READING_MIXED; i++) {
        if (is_key(key, n, readings[i])) {
            *out = (enum gm_account_reading)i;
            return true;
        }
    }
    return false;
}

static const char *const term_keys[] = {
    [GM_ACCOUNT_TERM_CONTEXT] = "context",   [GM_ACCOUNT_TERM_MODULES] = "modules",
    [GM_ACCOUNT_TERM_GRAPHS] = "graphs",     [GM_ACCOUNT_TERM_LIBRARY] = "library",
    [GM_ACCOUNT_TERM_OTHERS] = "others",     [GM_ACCOUNT_TERM_ROUNDING] = "rounding",
    [GM_ACCOUNT_TERM_NOT_SEEN] = "not_seen",
};

const char *gm_account_term_key(enum gm_account_term_kind k)
{
    return (unsigned)k <= GM_ACCOUNT_TERM_NOT_SEEN ? term_keys[k] : "not_seen";
}
