/* SPDX-License-Identifier: MIT */
/* json_room.h - library-internal: one value of a gm_json writer (json.h) formatted by the
 * caller straight into the writer's buffer, for the many short rows of a report's page data
 * (no copy, no call per number):
 *
 *   char *p = gm_json_room(w, ROW_MAX);
 *   if (p)
 *       gm_json_room_end(w, format_row(p, ...));
 *   else
 *       ... format_row() into a local buffer, written with gm_json_raw() ...
 *
 * The text must be valid JSON of at most the 'n' bytes asked for (bytes past its end up to
 * there may be overwritten: room for gm_fmt_*_room()). */
#ifndef GM_BASE_JSON_ROOM_H
#define GM_BASE_JSON_ROOM_H

#include "gpumem/json.h"

#include <stddef.h>

/* Where the next value of at most 'n' bytes goes, its separator written; NULL when the
 * writer is not compact and buffered, or 'n' is beyond its buffer (the caller writes the
 * value with gm_json_raw() then). */
char *gm_json_room(struct gm_json *w, size_t n);

/* The value written at gm_json_room()'s pointer ends at 'end'; an 'end' before that pointer
 * or past the writer's buffer fails the writer (gm_json_finish() says false). */
void gm_json_room_end(struct gm_json *w, char *end);

#endif
