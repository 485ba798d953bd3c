/* SPDX-License-Identifier: MIT */
/* resolve.c - the real functions behind the interposer's wrappers, and the three ways a
 * program reaches the driver's entry points (driver-abi.md §4.1):
 *
 *   1. by symbol: a library linked against libcuda.so.1 binds cuMemAlloc_v2 & co. to the
 *      first definition in the global scope, our export; the wrapper finds the driver's
 *      function with dlsym(RTLD_NEXT) or in the driver's handle;
 *   2. by dlsym on a handle of libcuda.so.1 (the runtime, static or not, gets
 *      cuGetProcAddress that way): such a lookup ignores LD_PRELOAD, so our dlsym answers
 *      hooked names with the wrapper (dlsym_entry.S, acct_dlsym_filter below);
 *   3. by cuGetProcAddress / cuGetProcAddress_v2 (the runtime and PyTorch get everything
 *      else so): the driver's answer is replaced by our wrapper when it is the driver's own
 *      export of a hooked name (compared by address, so version suffixes and _ptsz need no
 *      guessing), else, for a pointer that is no export, by (name, version, _ptsz) from
 *      the backend's table, but only when that hook has no other real function yet.
 *
 * dlopen is not wrapped: glibc searches a relative name in the caller's RPATH/RUNPATH,
 * found from dlopen's return address, so a wrapper would break libraries that rely on
 * $ORIGIN.  The driver's handle is found with dlopen(soname, RTLD_NOLOAD) or from the
 * handles dlsym is called with. */
#define _GNU_SOURCE
#include "preload.h"

#include <dlfcn.h>
#include <string.h>

/* libc's dlsym: the default version on glibc >= 2.34, libdl's on older ones (x86-64,
 * AArch64). */
typedef void *(*dlsym_fn)(void *, const char *);
static _Atomic(dlsym_fn) libc_dlsym;

ACCT_EARLY static dlsym_fn get_libc_dlsym(void)
{
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
    dlsym_fn f = atomic_load_explicit(&libc_dlsym, memory_order_acquire);
    if (f)
        return f;
    for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]) && !f; i++) {
        void *p = dlvsym(RTLD_NEXT, "dlsym", versions[i]);
        memcpy(&f, &p, sizeof(f));
    }
    atomic_store_explicit(&libc_dlsym, f, memory_order_release);
    return f;
}

void *acct_real_dlsym(void *handle, const char *name)
{
    dlsym_fn f = get_libc_dlsym();
    return f ? f(handle, name) : NULL;
}

/* ---- the driver ---- */

static const struct acct_backend *const backends[] = {&acct_cuda_backend};

static void *driver_handle(void)
{
    void *h = __atomic_load_n(&account.driver, __ATOMIC_ACQUIRE);
    if (!h) {
        h = dlopen(acct_cuda_backend.driver_soname, RTLD_NOW | RTLD_NOLOAD);
        if (h)
            __atomic_store_n(&account.driver, h, __ATOMIC_RELEASE);
    }
    return h;
}

void *acct_driver_sym(const char *name)
{
    void *h = driver_handle();
    void *p = h ? acct_real_dlsym(h, name) : NULL;
    return p ? p : acct_real_dlsym(RTLD_NEXT, name);
}

/* The driver's export of every hook, once the driver is known. */
static void learn_exports(const struct acct_backend *b)
{
    void *h = driver_handle();
    if (!h)
        return;
    for (size_t i = 0; i < b->n_hooks; i++) {
        struct acct_hook *k = &b->hooks[i];
        void *p;
        if (atomic_load(&k->driver_export))
            continue;
        p = acct_real_dlsym(h, k->name);
        if (p && p != k->wrapper)
            atomic_store(&k->driver_export, p);
    }
}

void *acct_real(int i)
{
    struct acct_hook *k = &acct_cuda_backend.hooks[i];
    void *p = atomic_load_explicit(&k->real, memory_order_acquire);
    if (p)
        return p;
    /* a program bound to our export: the next definition, else the driver's handle */
    p = acct_real_dlsym(RTLD_NEXT, k->name);
    if (!p || p == k->wrapper) {
        void *h = driver_handle();
        p = h ? acct_real_dlsym(h, k->name) : NULL;
    }
    if (p == k->wrapper)
        p = NULL;
    if (p) {
        void *expected = NULL;
        if (!atomic_compare_exchange_strong(&k->real, &expected, p))
            p = expected;
    }
    return p;
}

/* Make 'fn' hook k's real function unless it has another; true when it is k's now. */
static bool adopt(struct acct_hook *k, void *fn)
{
    void *expected = NULL;
    if (atomic_compare_exchange_strong(&k->real, &expected, fn))
        return true;
    return expected == fn;
}

ACCT_EARLY static int hook_by_name(const struct acct_backend *b, const char *name)
{
    for (size_t i = 0; i < b->n_hooks; i++)
        if (!strcmp(b->hooks[i].name, name))
            return (int)i;
    return -1;
}

void *acct_proc_swap(const char *symbol, void *fn, int version, unsigned long long flags)
{
    const struct acct_backend *b = &acct_cuda_backend;
    const struct acct_proc_name *best = NULL;
    bool ptds = (flags & 2) != 0; /* CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */

    if (!fn || !symbol || atomic_load(&account.state) == ACCT_OFF)
        return fn;
    learn_exports(b);
    for (size_t i = 0; i < b->n_hooks; i++) {
        struct acct_hook *k = &b->hooks[i];
        if (fn == k->wrapper)
            return fn;
        if (fn == atomic_load(&k->driver_export))
            return adopt(k, fn) ? k->wrapper : fn;
    }
    for (size_t i = 0; i < b->n_names; i++) {
        const struct acct_proc_name *p = &b->names[i];
        if (p->ptds != ptds || p->version > version || strcmp(p->base, symbol) != 0)
            continue;
        if (!best || p->version > best->version)
            best = p;
    }
    if (!best)
        return fn;
    if (adopt(&b->hooks[best->hook], fn))
        return b->hooks[best->hook].wrapper;
    atomic_fetch_add(&account.n_unhooked, 1);
    return fn;
}

/* ---- dlsym ---- */

void *acct_dlsym_filter(void *handle, const char *name) ACCT_HIDDEN;
void *acct_dlsym_hooked(void *handle, const char *name) ACCT_HIDDEN;

/* Which function answers dlsym(handle, name) (called by dlsym_entry.S before anything of
 * ours ran, too): libc's dlsym, unless the name is a hooked entry point looked up in a
 * handle or the default scope while accounting is on. */
ACCT_EARLY void *acct_dlsym_filter(void *handle, const char *name)
{
    void *libc = NULL;
    dlsym_fn f = get_libc_dlsym();
    memcpy(&libc, &f, sizeof(libc));
    if (handle == RTLD_NEXT || !name || name[0] != 'c' || name[1] != 'u' ||
        atomic_load_explicit(&account.state, memory_order_relaxed) == ACCT_OFF)
        return libc;
    for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
        if (hook_by_name(backends[i], name) >= 0) {
            void *hooked;
            void *(*fp)(void *, const char *) = acct_dlsym_hooked;
            memcpy(&hooked, &fp, sizeof(hooked));
            return hooked;
        }
    return libc;
}

void *acct_dlsym_hooked(void *handle, const char *name)
{
    const struct acct_backend *b = &acct_cuda_backend;
    void *p = acct_real_dlsym(handle, name);
    int i = hook_by_name(b, name);
    struct acct_hook *k;
    if (!p || i < 0)
        return p;
    k = &b->hooks[i];
    if (p == k->wrapper)
        return p; /* the default scope found our export */
    /* a handle of the driver: remember it, and its export of this name */
    if (handle != RTLD_DEFAULT && !__atomic_load_n(&account.driver, __ATOMIC_ACQUIRE))
        __atomic_store_n(&account.driver, handle, __ATOMIC_RELEASE);
    {
        void *expected = NULL;
        atomic_compare_exchange_strong(&k->driver_export, &expected, p);
    }
    if (adopt(k, p))
        return k->wrapper;
    atomic_fetch_add(&account.n_unhooked, 1);
    return p;
}
