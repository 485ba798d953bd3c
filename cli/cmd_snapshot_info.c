/* SPDX-License-Identifier: MIT */
/* cmd_snapshot_info.c - gpumem snapshot info FILE: what the file is and holds. */
#include "cli.h"
#include "commands.h"
#include "opts.h"
#include "snapshot_cli.h"

#include "gpumem/analysis.h"
#include "gpumem/units.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static void print_setting(const struct gm_snapshot_setting *s)
{
    char kb[256];
    printf("  %-36s ", snapcli_safe(kb, sizeof(kb), s->key));
    switch (s->type) {
    case GM_SETTING_INT:
        printf("%" PRId64 "\n", s->i);
        break;
    case GM_SETTING_FLOAT:
        printf(s->d == (double)(int64_t)s->d ? "%.1f\n" : "%g\n", s->d);
        break;
    case GM_SETTING_BOOL:
        printf("%s\n", s->i ? "True" : "False");
        break;
    case GM_SETTING_STR: {
        char buf[512];
        printf("\"%s\"\n", snapcli_safe(buf, sizeof(buf), s->s));
        break;
    }
    case GM_SETTING_NONE:
        printf("None\n");
        break;
    default:
        printf("(%s)\n", s->s ? s->s : "?");
        break;
    }
}

/* Pinned host memory (host_segments / host_traces): its own lines, never a device's. */
static void info_host(const struct gm_snapshot *s)
{
    struct gm_snapshot_figures f;
    char a[48], b[48];
    gm_snapshot_host_figures(s, &f);
    printf("host memory        pinned (CPU), apart from the devices: %zu segments (%zu blocks), "
           "%s reserved, %s allocated\n",
           s->n_host_segments, s->n_host_blocks,
           gm_format_bytes(a, sizeof(a), f.reserved_bytes, GM_UNITS_IEC),
           gm_format_bytes(b, sizeof(b), f.allocated_bytes, GM_UNITS_IEC));
    if (s->host.has_trace)
        printf("host trace events  %zu\n", s->host.n_events);
}

static void info_text(const char *path, const struct gm_snapshot *s)
{
    char b1[64], b2[64];
    snapcli_print_oom_banner(stdout, s, path);
    printf("file               %s (%" PRIu64 " bytes, %s", snapcli_name(path), s->file_size,
           gm_format_bytes(b1, sizeof(b1), s->file_size, GM_UNITS_IEC));
    if (s->compressed)
        printf("; gzip'd: %" PRIu64 " bytes of pickle, %s", s->pickle_size,
               gm_format_bytes(b2, sizeof(b2), s->pickle_size, GM_UNITS_IEC));
    printf(")\n");
    printf("generation         %s (torch %s)%s\n", gm_snapshot_gen_name(s->gen),
           gm_snapshot_gen_torch(s->gen),
           s->is_list ? ", top-level list of segments: no trace" : "");
    printf("pickle protocol    %d\n", s->protocol);
    printf("devices            ");
    if (s->device_kind != GM_DEVICE_CUDA && s->n_devices)
        printf("%s ", gm_device_kind_name(s->device_kind));
    if (!s->n_devices)
        printf("none");
    for (size_t i = 0; i < s->n_devices; i++) {
        const struct gm_snapshot_device *d = &s->devices[i];
        printf("%s%d (%zu segments, %zu events%s)", i ? ", " : "", d->index, d->n_segments,
               d->n_events, d->has_trace ? "" : ", no trace");
    }
    printf("\n");
    printf("segments           %zu (%zu blocks)\n", s->n_segments, s->n_blocks);
    printf("trace events       %zu", s->n_events);
    if (s->n_events) {
        const char *sep = " (";
        for (int a = 0; a < GM_ACTION_COUNT; a++) {
            uint64_t n = gm_snapshot_action_count(s, (enum gm_snapshot_action)a);
            if (n) {
                printf("%s%s %" PRIu64, sep, gm_snapshot_action_name((enum gm_snapshot_action)a),
                       n);
                sep = ", ";
            }
        }
        printf(")");
    }
    printf("\n");
    printf("frames             %zu unique frames in %zu unique stacks\n", s->n_frames,
           s->n_stacks ? s->n_stacks - 1 : 0);
    if (s->has_time)
        printf("time span          %s .. %s (%.3f s)\n",
               snapcli_time(b1, sizeof(b1), s->time_first_us),
               snapcli_time(b2, sizeof(b2), s->time_last_us),
               (double)(s->time_last_us - s->time_first_us) / 1e6);
    else
        printf("time span          unknown (no time_us in the trace)\n");
    if (s->has_allocator_settings) {
        printf("allocator settings\n");
        for (size_t i = 0; i < s->n_settings; i++) {
            const char *key = s->settings[i].key, *dot = strchr(key, '.');
            if (dot && s->settings[i].type == GM_SETTING_INT) {
                /* a nested dict (roundup_power2_divisions): one line of "k=v" */
                int plen = (int)(dot - key);
                const char *sep = "";
                printf("  %-36.*s ", plen, key);
                while (i < s->n_settings && s->settings[i].type == GM_SETTING_INT &&
                       !strncmp(s->settings[i].key, key, (size_t)plen + 1)) {
                    printf("%s%s=%" PRId64, sep, s->settings[i].key + plen + 1, s->settings[i].i);
                    sep = " ";
                    i++;
                }
                printf("\n");
                i--;
                continue;
            }
            print_setting(&s->settings[i]);
        }
    } else {
        printf("allocator settings not in the file (written by torch >= 2.3)\n");
    }
    if (s->has_annotations) {
        printf("annotations        %zu\n", s->n_annotations);
        for (size_t i = 0; i < s->n_annotations && i < 20; i++) {
            const struct gm_snapshot_annotation *a = &s->annotations[i];
            char st[16], nm[512];
            printf("  device %d %-5s %s  %s\n", a->device, snapcli_safe(st, sizeof(st), a->stage),
                   snapcli_time(b1, sizeof(b1), a->time_us), snapcli_safe(nm, sizeof(nm), a->name));
        }
        if (s->n_annotations > 20)
            printf("  ... %zu more\n", s->n_annotations - 20);
    } else {
        printf("annotations        not in the file (written by torch >= 2.4)\n");
    }
    if (s->has_host_data)
        info_host(s);
    if (s->trace_overflowed)
        printf("warning            the trace ring buffer overflowed: the oldest events are lost\n");
}

struct info_job {
    const char *cmd;
    bool json;
    uint64_t mem_limit;
};

static int info_one(void *ctx, char *path)
{
    const struct info_job *j = ctx;
    struct gm_snapshot *snap;
    /* the counts and sums of the trace are all info shows of it: its events are not kept */
    struct snapcli_load_opts lo = {.memory_limit = j->mem_limit, .drop_events = true};
    int rc = snapcli_load(j->cmd, path, &lo, &snap);
    if (rc)
        return rc;
    if (j->json) {
        struct gm_analysis_doc_file file = {.path = path, .snap = snap};
        struct gm_analysis_doc doc = {.kind = GM_DOC_INFO, .files = &file, .n_files = 1};
        struct gm_error err;
        rc = cli_json_status(j->cmd, gm_analysis_json(stdout, &doc, &err), &err);
    } else {
        info_text(path, snap);
    }
    gm_snapshot_free(snap);
    return rc;
}

int cmd_snapshot_info(int argc, char **argv)
{
    bool json = false;
    int n_pos = 0;
    uint64_t mem_limit = 0;
    const struct opt opts[] = {
        OPT_JSON(&json, "gpumem.snapshot.info/1"),
        SNAPCLI_OPT_MEMORY(&mem_limit),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem snapshot info [--json] FILE...",
        "Describe a PyTorch CUDA memory snapshot (torch.cuda.memory._dump_snapshot()): format "
        "generation, pickle protocol, devices, segment/block/trace counts, time span, allocator "
        "settings and annotations. Nothing in the file is executed. Several files, or a folder "
        "of rank files, are described one after the other in rank order, each after a line "
        "that names its rank and where the number comes from (the file name: rankR, "
        "snapshot_R; else the argument order); --json then writes an array of documents.",
        "gpumem snapshot info profile.pkl\ngpumem snapshot info memory_snapshot/"};

    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    if (n_pos < 1)
        return cli_usage(argv[0], "missing FILE");
    struct info_job j = {argv[0], json, mem_limit};
    return snapcli_each_rank_file(argv[0], argv + 1, (size_t)n_pos, json, info_one, &j);
}
