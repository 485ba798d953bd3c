/* SPDX-License-Identifier: MIT */
/* host.c - facts about the host that matter for GPU memory: OS, kernel, CPU, container and
 * PID namespace (NVML always reports host PIDs), and the process tree under a PID. */
#include "device/device_int.h"

#include "base/vec.h"
#include "gpumem/arena.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

const char *const gm_memory_env_vars[] = {
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_ALLOC_CONF",
    "PYTORCH_NO_CUDA_MEMORY_CACHING",
    "CUDA_MODULE_LOADING",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_MPS_PIPE_DIRECTORY",
    "TF_FORCE_GPU_ALLOW_GROWTH",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "PYTORCH_HIP_ALLOC_CONF",
    NULL,
};

/* The value after "key" up to the end of the line, trimmed, from the first line of file
 * 'path' that starts with 'key'. */
static bool file_field(const char *path, const char *key, char *out, size_t n)
{
    FILE *f = fopen(path, "r");
    char line[512];
    size_t klen = strlen(key);
    bool found = false;

    if (!f)
        return false;
    while (fgets(line, sizeof(line), f)) {
        char *v, *e;
        if (strncmp(line, key, klen))
            continue;
        v = line + klen;
        while (*v == ' ' || *v == '\t' || *v == ':' || *v == '=')
            v++;
        if (*v == '"')
            v++;
        e = v + strlen(v);
        while (e > v && (e[-1] == '\n' || e[-1] == ' ' || e[-1] == '"' || e[-1] == '\t'))
            *--e = '\0';
        gm_strlcpy(out, v, n);
        found = true;
        break;
    }
    fclose(f);
    return found;
}

static bool file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    bool found = false;
    if (!f)
        return false;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

static void detect_container(struct gm_host_info *h, gm_env_fn env)
{
    const char *c = gm_env_get(env, "container");
    if (access("/.dockerenv", F_OK) == 0)
        gm_strlcpy(h->container, "docker", sizeof(h->container));
    else if (access("/run/.containerenv", F_OK) == 0)
        gm_strlcpy(h->container, "podman", sizeof(h->container));
    else if (gm_env_get(env, "KUBERNETES_SERVICE_HOST"))
        gm_strlcpy(h->container, "kubernetes", sizeof(h->container));
    else if (c && *c)
        gm_strlcpy(h->container, c, sizeof(h->container));
    else if (file_contains("/proc/1/cgroup", "docker") ||
             file_contains("/proc/1/cgroup", "kubepods"))
        gm_strlcpy(h->container, "container", sizeof(h->container));
    h->in_container = h->container[0] != '\0';
}

/* NSpid lists our PID in each nested namespace: more than one entry means we are not in
 * the initial PID namespace, so NVML's host PIDs will not match ours. */
static bool in_pid_namespace(void)
{
    char v[256];
    int fields = 0;
    if (!file_field("/proc/self/status", "NSpid", v, sizeof(v)))
        return false;
    for (const char *p = v; *p;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            break;
        fields++;
        while (*p && *p != ' ' && *p != '\t')
            p++;
    }
    return fields > 1;
}

void gm_host_probe(struct gm_host_info *h, gm_env_fn env)
{
    struct utsname u;
    char mem[64];

    memset(h, 0, sizeof(*h));
    if (!file_field("/etc/os-release", "PRETTY_NAME", h->os, sizeof(h->os)))
        file_field("/usr/lib/os-release", "PRETTY_NAME", h->os, sizeof(h->os));
    if (uname(&u) == 0)
        snprintf(h->kernel, sizeof(h->kernel), "%.40s %.60s %.20s", u.sysname, u.release,
                 u.machine);
    if (!file_field("/proc/cpuinfo", "model name", h->cpu, sizeof(h->cpu)))
        file_field("/proc/cpuinfo", "Model", h->cpu, sizeof(h->cpu)); /* aarch64 boards */
    h->n_cpus = gm_cpus_online();
    if (file_field("/proc/meminfo", "MemTotal", mem, sizeof(mem))) {
        char *end;
        unsigned long long kib;
        errno = 0;
        kib = strtoull(mem, &end, 10);
        if (!errno && end != mem)
            h->mem_total = (struct gm_reading){(uint64_t)kib * 1024u, true};
    }
    detect_container(h, env);
    h->pid_namespace = in_pid_namespace();
}

bool gm_proc_exists(uint32_t pid)
{
    char path[64];
    if (pid == 0)
        return false;
    snprintf(path, sizeof(path), "/proc/%u", (unsigned)pid);
    return access(path, F_OK) == 0;
}

void gm_proc_name(uint32_t pid, char *out, size_t n)
{
    char path[64];
    FILE *f;
    if (!n)
        return;
    out[0] = '\0';
    snprintf(path, sizeof(path), "/proc/%u/comm", (unsigned)pid);
    f = fopen(path, "r");
    if (!f)
        return;
    if (n > 1 && fgets(out, (int)(n < 4096 ? n : 4096), f))
        out[strcspn(out, "\n")] = '\0';
    else
        out[0] = '\0';
    fclose(f);
}

/* State, PPID and process group of 'pid' from /proc/<pid>/stat; the command name may hold
 * spaces and parentheses, so parse after the last ')'. */
static bool read_stat_group(uint32_t pid, char *state, uint32_t *ppid, uint32_t *pgrp)
{
    char path[64], buf[1024];
    FILE *f;
    size_t n;
    char *p;
    unsigned pp, pg;

    snprintf(path, sizeof(path), "/proc/%u/stat", (unsigned)pid);
    f = fopen(path, "r");
    if (!f)
        return false;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    if (!p || sscanf(p + 1, " %c %u %u", state, &pp, &pg) != 3)
        return false;
    *ppid = pp;
    *pgrp = pg;
    return true;
}

static bool read_stat(uint32_t pid, char *state, uint32_t *ppid)
{
    uint32_t pgrp;
    return read_stat_group(pid, state, ppid, &pgrp);
}

static bool read_ppid(uint32_t pid, uint32_t *ppid)
{
    char state;
    return read_stat(pid, &state, ppid);
}

bool gm_proc_running(uint32_t pid)
{
    char state;
    uint32_t ppid;
    if (pid == 0 || !read_stat(pid, &state, &ppid))
        return false;
    return state != 'Z' && state != 'X' && state != 'x';
}

size_t gm_proc_group(uint32_t pgid, uint32_t *out, size_t cap)
{
    size_t n = 0;
    DIR *dir;
    struct dirent *de;
    if (pgid == 0 || !(dir = opendir("/proc")))
        return 0;
    while ((de = readdir(dir))) {
        char *end, state;
        unsigned long v = strtoul(de->d_name, &end, 10);
        uint32_t ppid, pgrp;
        if (*end || !v || v > UINT32_MAX || !read_stat_group((uint32_t)v, &state, &ppid, &pgrp) ||
            pgrp != pgid || state == 'Z' || state == 'X' || state == 'x')
            continue;
        if (n < cap)
            out[n] = (uint32_t)v;
        n++;
    }
    closedir(dir);
    return n;
}

const char *gm_signal_name(int sig)
{
    static const struct {
        int sig;
        const char *name;
    } names[] = {
        {SIGHUP, "SIGHUP"},       {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
        {SIGTRAP, "SIGTRAP"},     {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
        {SIGKILL, "SIGKILL"},     {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
        {SIGPIPE, "SIGPIPE"},     {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGCHLD, "SIGCHLD"},
        {SIGCONT, "SIGCONT"},     {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"}, {SIGTTIN, "SIGTTIN"},
        {SIGTTOU, "SIGTTOU"},     {SIGURG, "SIGURG"},   {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"},
        {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"}, {SIGSYS, "SIGSYS"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (names[i].sig == sig)
            return names[i].name;
    return NULL;
}

enum gm_status gm_proc_tree_list(uint32_t root, uint32_t **out, size_t *n_out, struct gm_error *err)
{
    uint32_t *pid = NULL, *ppid = NULL, *tree = NULL;
    size_t n = 0, alloc = 0, n_tree = 0;
    enum gm_status st = GM_OK;
    DIR *dir;
    struct dirent *de;

    *out = NULL;
    *n_out = 0;
    if (!gm_proc_exists(root))
        return GM_OK;
    dir = opendir("/proc");
    if (dir) {
        while ((de = readdir(dir))) {
            char *end;
            unsigned long v = strtoul(de->d_name, &end, 10);
            uint32_t pp;
            if (*end || !v || v > UINT32_MAX || !read_ppid((uint32_t)v, &pp))
                continue;
            if (n == alloc) {
                /* two arrays of one capacity, each grown by the same rule */
                size_t c_pid = alloc, c_ppid = alloc;
                if (!GM_VEC_RESERVE(pid, c_pid, n + 1, NULL) ||
                    !GM_VEC_RESERVE(ppid, c_ppid, n + 1, NULL)) {
                    st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory for /proc");
                    break;
                }
                alloc = c_ppid;
            }
            pid[n] = (uint32_t)v;
            ppid[n] = pp;
            n++;
        }
        closedir(dir);
    }
    tree = st ? NULL : gm_malloc((n + 1) * sizeof(*tree));
    if (!tree) {
        gm_free(pid);
        gm_free(ppid);
        return st ? st : gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory for /proc");
    }
    tree[n_tree++] = root;
    /* Breadth-first over the snapshot: each pass adds the children of what is known. */
    for (size_t k = 0; k < n_tree; k++)
        for (size_t j = 0; j < n; j++)
            if (ppid[j] == tree[k] && pid[j] != root && n_tree <= n)
                tree[n_tree++] = pid[j];
    gm_free(pid);
    gm_free(ppid);
    *out = tree;
    *n_out = n_tree;
    return GM_OK;
}

size_t gm_proc_tree(uint32_t root, uint32_t *out, size_t cap)
{
    uint32_t *tree;
    size_t n;
    if (gm_proc_tree_list(root, &tree, &n, NULL) != GM_OK) {
        /* no memory to walk /proc: the root alone, which is known to exist */
        if (cap)
            out[0] = root;
        return 1;
    }
    for (size_t k = 0; k < n && k < cap; k++)
        out[k] = tree[k];
    gm_free(tree);
    return n;
}
