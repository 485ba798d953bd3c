/* SPDX-License-Identifier: MIT */
/* snapshot_cli.c - helpers of the `gpumem snapshot` sub-commands (see snapshot_cli.h). */
#include "snapshot_cli.h"

#include "cli.h"

#include "gpumem/units.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct progress {
    const char *path;
    int shown;
};

static void on_progress(uint64_t done, uint64_t total, void *ctx)
{
    struct progress *p = ctx;
    unsigned pct = total ? (unsigned)(done * 100 / total) : 100;
    fprintf(stderr, "\rreading %s: %3u%%", p->path, pct);
    if (done >= total)
        fputc('\n', stderr);
    fflush(stderr);
    p->shown = 1;
}

int snapcli_load(const char *cmd, const char *path, struct gm_snapshot **out)
{
    struct gm_error err;
    struct gm_snapshot_opts opts;
    struct progress pr = {path, 0};
    const char *rd;
    enum gm_status st;

    memset(&opts, 0, sizeof(opts));
    /* a testing knob (docs/snapshot.md): the general reader only, to hold it against the
     * flat one */
    rd = getenv("GPUMEM_SNAPSHOT_READER");
    if (rd && !strcmp(rd, "general"))
        opts.reader = GM_SNAPSHOT_READER_GENERAL;
    else if (rd && *rd && strcmp(rd, "auto"))
        return cli_usage(cmd, "GPUMEM_SNAPSHOT_READER is '%s': 'auto' or 'general'", rd);
    if (cli_stderr_is_tty()) {
        opts.progress = on_progress;
        opts.progress_ctx = &pr;
    }
    gm_error_clear(&err);
    st = gm_snapshot_load(path, &opts, out, &err);
    if (st != GM_OK) {
        if (pr.shown)
            fputc('\n', stderr);
        return cli_fail(cmd, &err);
    }
    return 0;
}

char *snapcli_safe(char *buf, size_t n, const char *s)
{
    size_t i = 0;
    if (!n)
        return buf;
    for (; s[i] && i + 1 < n; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[i] = (char)((c < 0x20 || c == 0x7f) ? '?' : c);
    }
    buf[i] = '\0';
    return buf;
}

char *snapcli_frame(char *buf, size_t n, const struct gm_snapshot_frame *f)
{
    if (f->filename[0] && strcmp(f->filename, "??"))
        snprintf(buf, n, "%s (%s:%" PRId64 ")", f->name, f->filename, f->line);
    else
        snprintf(buf, n, "%s", f->name[0] ? f->name : "??");
    /* in place: the result only gets shorter or stays the same */
    for (char *p = buf; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    return buf;
}

char *snapcli_time(char *buf, size_t n, int64_t time_us)
{
    time_t s = (time_t)(time_us / 1000000);
    long us = (long)(time_us % 1000000);
    struct tm tm;
    if (us < 0) {
        us += 1000000;
        s -= 1;
    }
    if (!gmtime_r(&s, &tm)) {
        snprintf(buf, n, "%" PRId64 " us", time_us);
        return buf;
    }
    snprintf(buf, n, "%04d-%02d-%02d %02d:%02d:%02d.%06ld UTC", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, us);
    return buf;
}

void snapcli_json_stack(struct gm_json *w, const struct gm_snapshot *snap, uint32_t stack, int all)
{
    const struct gm_snapshot_stack *s = stack < snap->n_stacks ? &snap->stacks[stack] : NULL;
    gm_json_begin_array(w);
    for (uint32_t i = 0; s && i < s->n_frames; i++) {
        const struct gm_snapshot_frame *f = &snap->frames[s->frames[i]];
        if (!all && f->is_noise)
            continue;
        gm_json_begin_object(w);
        gm_json_kv_str(w, "filename", f->filename);
        gm_json_kv_i64(w, "line", f->line);
        gm_json_kv_str(w, "name", f->name);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
}

void snapcli_print_stack(FILE *f, const struct gm_snapshot *snap, uint32_t stack, int callers,
                         int indent)
{
    const struct gm_snapshot_stack *s = stack < snap->n_stacks ? &snap->stacks[stack] : NULL;
    long u = gm_snapshot_stack_user_frame(snap, stack);
    char buf[512];
    int shown = 0;
    uint32_t folded = 0;
    if (!s || u < 0) {
        fprintf(f, "(no stack recorded)\n");
        return;
    }
    fprintf(f, "%s\n", snapcli_frame(buf, sizeof(buf), &snap->frames[s->frames[u]]));
    for (uint32_t i = (uint32_t)u + 1; i < s->n_frames; i++) {
        const struct gm_snapshot_frame *fr = &snap->frames[s->frames[i]];
        if (fr->is_noise || !fr->is_python || shown >= callers) {
            folded++;
            continue;
        }
        fprintf(f, "%*s<- %s\n", indent, "", snapcli_frame(buf, sizeof(buf), fr));
        shown++;
    }
    folded += (uint32_t)u;
    if (folded)
        fprintf(f, "%*s(%u more frames folded: torch internals, C++ and callers)\n", indent, "",
                folded);
}

int snapcli_device_arg(const char *cmd, const char *s, int32_t *dev)
{
    uint64_t v;
    struct gm_error err;
    if (!s || !strcmp(s, "all")) {
        *dev = -1;
        return 0;
    }
    if (gm_parse_u64(s, &v, &err) != GM_OK || v > INT32_MAX)
        return cli_usage(cmd, "--device wants a device index or 'all', not '%s'", s);
    *dev = (int32_t)v;
    return 0;
}
