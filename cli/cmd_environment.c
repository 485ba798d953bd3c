/* SPDX-License-Identifier: MIT */
/* cmd_environment.c - gpumem environment: driver, devices with memory and processes, host,
 * and the settings that change GPU memory behaviour.  No GPU (no driver, stub library, no
 * device, index out of range): one sentence on stderr and exit 2; with --json the document
 * is still written, with "available": false and the reason. */
#include "cli.h"
#include "commands.h"
#include "opts.h"

#include "gpumem/arena.h"
#include "gpumem/device.h"
#include "gpumem/text.h"
#include "gpumem/units.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *state_word(enum gm_backend_state s)
{
    switch (s) {
    case GM_BACKEND_OK:
        return "ok";
    case GM_BACKEND_MISSING:
        return "not found";
    case GM_BACKEND_STUB:
        return "stub library";
    case GM_BACKEND_NODEV:
        return "no device";
    case GM_BACKEND_ERROR:
        return "error";
    }
    return "error";
}

/* "80.00 GiB (85899345920 B)", "0 B" or "unknown". */
static const char *bytes_text(char *out, size_t n, struct gm_reading r)
{
    char h[32];
    if (!r.valid)
        return "unknown";
    if (r.value < 1024) /* already exact */
        return gm_format_bytes(out, n, r.value, GM_UNITS_IEC);
    snprintf(out, n, "%s (%" PRIu64 " B)", gm_format_bytes(h, sizeof(h), r.value, GM_UNITS_IEC),
             r.value);
    return out;
}

static void print_version(const char *label, int v, bool valid)
{
    if (valid)
        printf("%s %d.%d", label, v / 1000, (v % 1000) / 10);
    else
        printf("%s unknown", label);
}

static void print_device(struct gm_devices *d, size_t i, const struct gm_host_info *host)
{
    const struct gm_device_info *info = gm_devices_info(d, i);
    char name[sizeof(info->name) * 4];
    struct gm_device_memory mem;
    struct gm_process_memory *procs = NULL;
    struct gm_error e;
    size_t n = 0;
    char b[64];

    gm_text_escape(name, sizeof(name), info->name[0] ? info->name : "(no name)");
    if (info->cuda_index >= 0)
        printf("\ncuda:%d  %s\n", info->cuda_index, name);
    else
        printf("\nnvml:%d  %s  (not visible to CUDA here)\n", info->nvml_index, name);
    printf("  uuid               %s\n", info->uuid[0] ? info->uuid : "unknown");
    printf("  pci bus id         %s\n", info->pci_bus_id[0] ? info->pci_bus_id : "unknown");
    if (info->nvml_index >= 0)
        printf("  nvml index         %d\n", info->nvml_index);
    if (info->cc_valid)
        printf("  compute capability %d.%d\n", info->cc_major, info->cc_minor);
    else
        printf("  compute capability unknown\n");
    if (info->multiprocessors_valid)
        printf("  multiprocessors    %d\n", info->multiprocessors);
    if (gm_devices_memory(d, i, &mem, &e) == GM_OK) {
        printf("  memory (%s)\n", mem.source == GM_MEMORY_NVML_V2
                                      ? "NVML v2: used excludes reserved"
                                      : "NVML v1: used includes reserved");
        printf("    total            %s\n", bytes_text(b, sizeof(b), mem.total));
        printf("    used             %s\n", bytes_text(b, sizeof(b), mem.used));
        printf("    free             %s\n", bytes_text(b, sizeof(b), mem.free));
        printf("    reserved         %s\n", bytes_text(b, sizeof(b), mem.reserved));
    } else {
        printf("  memory             unknown: %s\n", gm_text_escape(name, sizeof(name), e.msg));
    }
    if (info->cuda_total.valid)
        printf("  CUDA total         %s (cuDeviceTotalMem_v2)\n",
               bytes_text(b, sizeof(b), info->cuda_total));
    if (gm_devices_process_list(d, i, &procs, &n, &e) != GM_OK) {
        printf("  processes          unknown: %s\n", gm_text_escape(name, sizeof(name), e.msg));
        return;
    }
    printf("  processes          %zu%s\n", n,
           n ? " (PID as NVML reports it, a host PID; C compute, G graphics)" : "");
    for (size_t k = 0; k < n; k++) {
        bool visible = gm_proc_exists(procs[k].pid);
        printf("    pid %-10" PRIu32 " %-3s  %s%s\n", procs[k].pid,
               gm_process_kind_name(procs[k].kinds), bytes_text(b, sizeof(b), procs[k].used),
               visible               ? ""
               : host->pid_namespace ? "  (not in this PID namespace)"
                                     : "  (no such process here)");
    }
    gm_free(procs);
}

static void print_text(struct gm_devices *d, const struct gm_host_info *h, int only_cuda)
{
    const struct gm_driver_versions *v = gm_devices_versions(d);
    char b[64], t[1024];

    printf("driver             %s\n",
           v->driver[0] ? gm_text_escape(t, sizeof(t), v->driver) : "unknown");
    printf("versions           ");
    print_version("CUDA driver API", v->cuda_driver_api, v->cuda_driver_api_valid);
    printf(", NVML %s", v->nvml[0] ? gm_text_escape(t, sizeof(t), v->nvml) : "unknown");
    print_version(" (CUDA", v->nvml_cuda_version, v->nvml_cuda_version_valid);
    printf(")\n");
    for (size_t k = 0; k < gm_devices_n_backends(d); k++) {
        const struct gm_backend_status *s = gm_devices_backend(d, k);
        printf("backend %-10s %s, %s\n", s->name, state_word(s->state),
               gm_text_escape(t, sizeof(t), s->library));
        if (s->state != GM_BACKEND_OK)
            printf("                   %s\n", gm_text_escape(t, sizeof(t), s->msg));
    }
    for (size_t i = 0; i < gm_devices_count(d); i++)
        if (only_cuda < 0 || gm_devices_info(d, i)->cuda_index == only_cuda)
            print_device(d, i, h);

    printf("\nhost\n");
    printf("  os                 %s\n", h->os[0] ? gm_text_escape(t, sizeof(t), h->os) : "unknown");
    printf("  kernel             %s\n",
           h->kernel[0] ? gm_text_escape(t, sizeof(t), h->kernel) : "unknown");
    printf("  cpu                %s", h->cpu[0] ? gm_text_escape(t, sizeof(t), h->cpu) : "unknown");
    if (h->n_cpus)
        printf(", %u logical CPUs", h->n_cpus);
    printf("\n  host memory        %s\n", bytes_text(b, sizeof(b), h->mem_total));
    if (h->pid_namespace)
        printf("  container          %s with its own PID namespace: NVML reports host PIDs, "
               "which do not match this container's (run with --pid=host to match them)\n",
               h->in_container ? gm_text_escape(t, sizeof(t), h->container) : "a container");
    else if (h->in_container)
        printf("  container          %s, sharing the host's PID namespace (NVML PIDs match)\n",
               gm_text_escape(t, sizeof(t), h->container));
    else
        printf("  container          no\n");
    printf("\nsettings\n");
    for (const char *const *k = gm_memory_env_vars; *k; k++) {
        const char *val = getenv(*k);
        if (val) {
            printf("  %-31s \"", *k);
            gm_text_write_escaped(stdout, val);
            printf("\"\n");
        } else
            printf("  %-31s (unset)\n", *k);
    }
}

int cmd_environment(int argc, char **argv)
{
    bool json = false;
    const char *device = NULL;
    int n_pos = 0, only_cuda = -1, rc = 0;
    struct gm_devices *d = NULL;
    struct gm_host_info host;
    struct gm_error err, nodev;
    bool available;
    const struct opt opts[] = {
        OPT_STRING("device", 'd', &device, "cuda:N", "only this CUDA device (as CUDA numbers it)"),
        OPT_JSON(&json, "gpumem.environment/1"),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem environment [--device cuda:N] [--json]",
        "Show the NVIDIA driver and CUDA versions, each GPU with its memory (NVML v2: total, used, "
        "free, reserved) and the processes using it, the host (OS, kernel, CPU, container), and "
        "the environment settings that change GPU memory behaviour. Exit status 2 when there is "
        "no usable GPU or driver, with a sentence saying why.",
        "gpumem environment\ngpumem environment --device cuda:1 --json"};

    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    if (n_pos)
        return cli_usage(argv[0], "unexpected argument '%s'", argv[1]);
    if (device && gm_device_parse_spec(device, &only_cuda, &err))
        return cli_usage(argv[0], "%s", err.msg);
    if (gm_devices_open(&d, getenv, &err))
        return cli_fail(argv[0], &err);
    gm_host_probe(&host, getenv);

    gm_error_clear(&nodev);
    available = gm_devices_check(d, &nodev) == GM_OK;
    if (available && only_cuda >= 0) {
        size_t pos;
        available = gm_devices_find_cuda(d, only_cuda, &pos, &nodev) == GM_OK;
    }
    if (json) {
        struct gm_json w;
        cli_json_begin(&w, stdout, "environment");
        gm_json_kv_bool(&w, "available", available);
        if (available)
            gm_json_kv_null(&w, "reason");
        else
            gm_json_kv_str(&w, "reason", nodev.msg);
        gm_devices_write_json(&w, d, &host, available ? only_cuda : -2);
        rc = cli_json_end(&w, argv[0]);
    } else if (available) {
        print_text(d, &host, only_cuda);
    }
    if (!available)
        rc = cli_fail(argv[0], &nodev);
    gm_devices_close(d);
    return rc;
}
