/* SPDX-License-Identifier: MIT */
/* snapshot_folded.c - folded stacks of what is alive (snapshot_folded.h). */
#include "snapshot_folded.h"

#include "snapshot_cli.h"

#include "gpumem/text.h"

#include <inttypes.h>
#include <string.h>

/* A frame's name for a folded line: escaped, with no ';' (the separator). */
static void frame_name(char *buf, size_t n, const struct gm_snapshot_frame *f)
{
    char raw[600];
    if (f->is_python)
        snprintf(raw, sizeof(raw), "%s (%s:%" PRId64 ")", f->name, snapcli_short_path(f->filename),
                 f->line);
    else
        snprintf(raw, sizeof(raw), "%.300s", f->name);
    gm_text_escape(buf, n, raw);
    for (char *p = buf; *p; p++)
        if (*p == ';')
            *p = ',';
}

void folded_write(FILE *f, const struct gm_snapshot *snap, int32_t device,
                  const struct gm_snapshot_live_group *g, size_t n)
{
    uint32_t ids[256];
    char name[700];
    for (size_t i = 0; i < n; i++) {
        size_t nf = gm_snapshot_stack_frames(snap, g[i].stack, ids, 256);
        if (nf > 256)
            nf = 256;
        fprintf(f, "cuda:%d", (int)device);
        if (!nf)
            fprintf(f, ";(no stack recorded)");
        for (size_t k = nf; k-- > 0;) {
            frame_name(name, sizeof(name), &snap->frames[ids[k]]);
            fprintf(f, ";%s", name);
        }
        fprintf(f, " %" PRIu64 "\n", g[i].bytes);
    }
}
