/* SPDX-License-Identifier: MIT */
/* dl.c - loading a vendor library by SONAME and binding its symbols from a table. */
#include "device/device_int.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gm_strlcpy(char *dst, const char *src, size_t n)
{
    size_t len;
    if (!n)
        return;
    len = src ? strlen(src) : 0;
    if (len >= n)
        len = n - 1;
    if (len)
        memcpy(dst, src, len);
    dst[len] = '\0';
}

const char *gm_env_get(gm_env_fn env, const char *name)
{
    return env && name ? env(name) : NULL;
}

void *gm_dl_open(gm_env_fn env, const char *override, const char *soname, char *library, size_t n,
                 char *why, size_t nw)
{
    const char *path = gm_env_get(env, override);
    void *h;
    const char *e;

    if (!path || !*path)
        path = soname;
    gm_strlcpy(library, path, n);
    /* RTLD_LOCAL: the driver's symbols must not satisfy anyone else's lookups. */
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h)
        return h;
    e = dlerror();
    gm_strlcpy(why, e ? e : "dlopen failed", nw);
    return NULL;
}

bool gm_dl_bind(void *handle, const struct gm_dl_sym *syms, size_t n_syms, void *table,
                char *missing, size_t nm)
{
    for (size_t i = 0; i < n_syms; i++) {
        void *p = NULL;
        for (int k = 0; k < 3 && syms[i].names[k] && !p; k++)
            p = dlsym(handle, syms[i].names[k]);
        if (!p && syms[i].required) {
            gm_strlcpy(missing, syms[i].names[0], nm);
            return false;
        }
        /* dlsym returns an object pointer; POSIX guarantees it can hold a function
         * pointer, and memcpy avoids the ISO C cast between the two. */
        memcpy((char *)table + syms[i].offset, &p, sizeof(p));
    }
    return true;
}

bool gm_pci_normalise(const char *in, char *out, size_t n)
{
    unsigned dom, bus, dev, fn;
    char tail;
    /* Only hex digits and separators: sscanf's %x would also take "0x" prefixes. */
    if (!in || strspn(in, "0123456789abcdefABCDEF:.") != strlen(in) ||
        sscanf(in, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) != 4)
        return false;
    if (bus > 0xff || dev > 0x1f || fn > 7)
        return false;
    snprintf(out, n, "%08X:%02X:%02X.%X", dom, bus, dev, fn);
    return true;
}
