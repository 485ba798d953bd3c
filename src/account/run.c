/* SPDX-License-Identifier: MIT */
/* run.c - what running a command under the interposer needs: where libgpumem-account.so
 * is, and the command's environment (LD_PRELOAD and the interposer's settings). */
#include "gpumem/account.h"

#include "gpumem/arena.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PRELOAD_NAME "libgpumem-account.so"

#ifndef GM_PRELOAD_FROM_BIN
#define GM_PRELOAD_FROM_BIN "../lib/gpumem"
#endif

static bool exists(const char *path)
{
    return access(path, R_OK) == 0;
}

enum gm_status gm_account_preload_path(const char *given, char *out, size_t n, struct gm_error *err)
{
    char exe[PATH_MAX], *slash;
    const char *rel[] = {"", "/../lib/gpumem", "/" GM_PRELOAD_FROM_BIN};
    ssize_t len;
    if (given && *given) {
        if (!exists(given))
            return gm_fail(err, GM_ERR_NOENT, GM_NO_OFFSET, "the interposer '%s' does not exist",
                           given);
        snprintf(out, n, "%s", given);
        return GM_OK;
    }
    len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len <= 0)
        return gm_fail(err, GM_ERR_NOENT, GM_NO_OFFSET,
                       "cannot find " PRELOAD_NAME ": /proc/self/exe unreadable");
    exe[len] = '\0';
    if ((slash = strrchr(exe, '/')) != NULL)
        *slash = '\0';
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof(path), "%s%s/" PRELOAD_NAME, exe, rel[i]);
        if (exists(path)) {
            char *real = realpath(path, NULL);
            snprintf(out, n, "%s", real ? real : path);
            free(real);
            return GM_OK;
        }
    }
    return gm_fail(err, GM_ERR_NOENT, GM_NO_OFFSET,
                   "cannot find " PRELOAD_NAME " beside '%s' or in %s/../lib/gpumem", exe, exe);
}

enum gm_status gm_account_env(char *const *envp, const struct gm_account_env_opts *o, char ***out,
                              struct gm_error *err)
{
    static const char *const ours[] = {"LD_PRELOAD=", "GPUMEM_ACCOUNT_DIR=",
                                       "GPUMEM_ACCOUNT_INTERVAL_MS=", "GPUMEM_ACCOUNT_STACKS="};
    const char *preload_before = NULL;
    size_t n = 0, bytes = 0, k = 0;
    char **env, *p, *end;
    for (; envp && envp[n]; n++) {
        bool mine = false;
        for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++)
            mine |= !strncmp(envp[n], ours[i], strlen(ours[i]));
        if (!strncmp(envp[n], "LD_PRELOAD=", 11))
            preload_before = envp[n] + 11;
        if (!mine)
            bytes += strlen(envp[n]) + 1;
    }
    bytes += strlen(o->preload) + (preload_before ? strlen(preload_before) : 0) + 16;
    bytes += strlen(o->dir) + 24 + 64 + 64;
    env = gm_malloc((n + 5) * sizeof(*env) + bytes);
    if (!env)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    p = (char *)(env + n + 5);
    end = p + bytes;
    for (size_t i = 0; i < n; i++) {
        bool mine = false;
        for (size_t j = 0; j < sizeof(ours) / sizeof(ours[0]); j++)
            mine |= !strncmp(envp[i], ours[j], strlen(ours[j]));
        if (mine)
            continue;
        env[k++] = p;
        p += snprintf(p, (size_t)(end - p), "%s", envp[i]) + 1;
    }
    env[k++] = p;
    if (preload_before && *preload_before)
        p += snprintf(p, (size_t)(end - p), "LD_PRELOAD=%s:%s", preload_before, o->preload) + 1;
    else
        p += snprintf(p, (size_t)(end - p), "LD_PRELOAD=%s", o->preload) + 1;
    env[k++] = p;
    p += snprintf(p, (size_t)(end - p), "GPUMEM_ACCOUNT_DIR=%s", o->dir) + 1;
    env[k++] = p;
    p += snprintf(p, (size_t)(end - p), "GPUMEM_ACCOUNT_INTERVAL_MS=%llu",
                  (unsigned long long)o->interval_ms) +
         1;
    env[k++] = p;
    snprintf(p, (size_t)(end - p), "GPUMEM_ACCOUNT_STACKS=%llu", (unsigned long long)o->stacks);
    env[k] = NULL;
    *out = env;
    return GM_OK;
}
