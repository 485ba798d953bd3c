/* SPDX-License-Identifier: MIT */
/* sheet.h - the one-page record of a memory investigation, made from gpumem's own JSON
 * documents: `gpumem estimate --json` (gpumem.estimate/1), `gpumem measure --output` and
 * gpumem.torch series (gpumem.measure/1), `gpumem sweep --json` (gpumem.sweep/1),
 * `gpumem environment --json` (gpumem.environment/1) and the timeline of `gpumem account
 * --output` (gpumem.account/1, JSON lines: where each process's device memory went).  A
 * document's kind is its "schema".
 *
 * The page keeps apart what was computed (the estimate's prediction), what was observed
 * (phases that ran or failed with the allocator's four counters, the largest load the sweep
 * tried, the environment) and what is still assumed (the estimate's assumptions and defaults,
 * caveats of the measurement, and what nothing measured yet), and lists the settings chosen.
 * It is written as Markdown for the terminal or as an HTML page in the style of the snapshot
 * report; both come from one description of the page, so they never say different things.
 * Byte figures are labelled (GiB = 2^30 bytes) with the exact bytes beside the key ones. */
#ifndef GPUMEM_SHEET_H
#define GPUMEM_SHEET_H

#include "gpumem/error.h"

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GM_SHEET_MAX_DOCS 16 /* documents of each kind */

struct gm_sheet;

/* An empty sheet; release it with gm_sheet_free().  GM_ERR_NOMEM. */
enum gm_status gm_sheet_new(struct gm_sheet **out, struct gm_error *err);
/* NULL is a no-op. */
void gm_sheet_free(struct gm_sheet *sh);

/* The memory one document may take while it is read: its text and its parsed tree
 * together ('bytes'; 0, the default: a budget relative to the size of the text, see
 * docs/security.md).  A document over it is refused with GM_ERR_LIMIT. */
void gm_sheet_set_memory_limit(struct gm_sheet *sh, uint64_t bytes);

/* Add the document in 'len' bytes at 'data' (borrowed during the call), shown as 'name'.
 * GM_ERR_FORMAT when it is not JSON or not one of the five schemas (named in the message),
 * GM_ERR_LIMIT past GM_SHEET_MAX_DOCS of one kind, GM_ERR_NOMEM. */
enum gm_status gm_sheet_add(struct gm_sheet *sh, const char *name, const void *data, size_t len,
                            struct gm_error *err);
/* The same for the file at 'path' (GM_ERR_NOENT, GM_ERR_IO besides). */
enum gm_status gm_sheet_add_file(struct gm_sheet *sh, const char *path, struct gm_error *err);

enum gm_sheet_format {
    GM_SHEET_MARKDOWN = 0, /* for the terminal, and for a ticket or a notebook */
    GM_SHEET_HTML          /* one self-contained page, the snapshot report's style */
};

/* Write the sheet.  GM_ERR_INVALID when it holds no document, GM_ERR_IO on a write error. */
enum gm_status gm_sheet_write(const struct gm_sheet *sh, enum gm_sheet_format format, FILE *f,
                              struct gm_error *err);

#ifdef __cplusplus
}
#endif
#endif
