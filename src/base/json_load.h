/* SPDX-License-Identifier: MIT */
/* json_load.h - JSON input through jansson within a memory budget (library-internal).
 *
 * jansson builds a full tree: an empty object costs about 250 bytes, an array 150, a
 * string 90 plus its length, a number 50 (measured with jansson 2.14 on glibc, allocator
 * overhead included).  Ordinary documents take 3 to 15 times their size; a hostile one
 * made of "{}," takes 85 times (a 90 MB safetensors header of empty objects needs 7.6 GB).
 * So the bytes are scanned first (strings, brackets, separators and scalars counted, not
 * parsed) and the tree's size is estimated from those counts with the costs above rounded
 * up; a document whose estimate exceeds the budget is refused before json_loadb() is
 * called.  The budget is GM_JSON_BUDGET_FLOOR plus GM_JSON_BUDGET_RATIO times the size of
 * the text: every real config.json, index.json and safetensors header stays far below it. */
#ifndef GM_BASE_JSON_LOAD_H
#define GM_BASE_JSON_LOAD_H

#include "gpumem/error.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define GM_JSON_BUDGET_FLOOR   ((uint64_t)64 << 20) /* bytes */
#define GM_JSON_BUDGET_RATIO   24                   /* bytes of tree per byte of text */
#define GM_JSON_LOAD_MAX_DEPTH 512                  /* nested objects and arrays */

/* What the pre-scan found. */
struct gm_json_scan {
    uint64_t n_objects;
    uint64_t n_arrays;
    uint64_t n_strings; /* keys included */
    uint64_t string_bytes;
    uint64_t n_scalars; /* numbers, true, false, null */
    uint64_t n_separators;
    uint64_t max_depth;
    uint64_t estimate; /* bytes the parsed tree would take */
};

/* Count what 'data' holds (never fails: malformed text is jansson's to report). */
void gm_json_scan(const char *data, size_t len, struct gm_json_scan *out);

/* The budget for a document of 'len' bytes. */
uint64_t gm_json_budget(size_t len);

/* Parse 'len' bytes of 'data' (JSON_REJECT_DUPLICATES) into *out (json_decref() it).
 * GM_ERR_LIMIT when the tree would exceed gm_json_budget(len) or nest deeper than
 * GM_JSON_LOAD_MAX_DEPTH, saying how much it would take; GM_ERR_FORMAT "invalid JSON: <why>
 * (line L, column C)" at offset 'base' + the position of the error; GM_ERR_NOMEM when
 * memory runs out all the same. */
enum gm_status gm_json_load(const char *data, size_t len, uint64_t base, json_t **out,
                            struct gm_error *err);

/* gm_json_load() within the caller's memory limit: the text and its tree together must fit
 * 'limit' bytes (0: gm_json_budget(len) for the tree, as gm_json_load()). */
enum gm_status gm_json_load_limit(const char *data, size_t len, uint64_t base, uint64_t limit,
                                  json_t **out, struct gm_error *err);

#endif
