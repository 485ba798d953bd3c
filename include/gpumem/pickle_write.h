/* SPDX-License-Identifier: MIT */
/* pickle_write.h - a streaming pickle writer (protocols 2 to 5) for built-in types only.
 *
 * It writes what CPython's C pickler writes for the same object graph, byte for byte:
 * memoization of every str, list, dict and non-empty tuple (MEMOIZE from protocol 4, BINPUT
 * before), 64 KiB framing from protocol 4 (a frame is closed at the start of the first value
 * written once it holds 64 KiB or more), list and dict items in batches of 1000 (APPEND and
 * SETITEM for a one-element container), the smallest integer opcode, BINFLOAT big-endian.
 * Sharing is the caller's decision: every memoized object gets the next memo index, which the
 * caller keeps and passes to gm_pickle_get() to refer to the same object again, so that
 * pickle.dumps(pickle.loads(out)) == out holds when the caller shares what the original
 * program shared.
 *
 * Containers are announced with their element count, then their elements are written
 * (dict: key, value, key, value...), then they are closed.  Misuse (a count that does not
 * match, an unbalanced end) and write errors are reported by gm_pickle_writer_finish(). */
#ifndef GPUMEM_PICKLE_WRITE_H
#define GPUMEM_PICKLE_WRITE_H

#include "gpumem/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default) /* the public API (gpumem.h) */

/* No memo index yet: the initial value of a caller's slot for gm_pickle_str_shared(). */
#define GM_PICKLE_NO_MEMO UINT32_MAX

struct gm_pickle_writer;

/* Start a pickle of 'protocol' (2 to 5) on 'f' (borrowed; not closed).  *out is freed by
 * gm_pickle_writer_finish() or gm_pickle_writer_free().  GM_ERR_INVALID or GM_ERR_NOMEM. */
enum gm_status gm_pickle_writer_new(FILE *f, int protocol, struct gm_pickle_writer **out,
                                    struct gm_error *err);

/* Write STOP, flush the last frame, check that every container was closed with as many
 * elements as announced, and free 'w'.  GM_ERR_IO on a write error, GM_ERR_INVALID on
 * misuse. */
enum gm_status gm_pickle_writer_finish(struct gm_pickle_writer *w, struct gm_error *err);

/* Free without finishing (after an error).  NULL is a no-op. */
void gm_pickle_writer_free(struct gm_pickle_writer *w);

/* Bytes written to the file so far (after the last flushed frame). */
uint64_t gm_pickle_writer_bytes(const struct gm_pickle_writer *w);

void gm_pickle_none(struct gm_pickle_writer *w);
void gm_pickle_bool(struct gm_pickle_writer *w, bool v);
void gm_pickle_int(struct gm_pickle_writer *w, int64_t v);
void gm_pickle_uint(struct gm_pickle_writer *w, uint64_t v);
void gm_pickle_float(struct gm_pickle_writer *w, double v);

/* A new str object (UTF-8, 'n' bytes); returns its memo index. */
uint32_t gm_pickle_strn(struct gm_pickle_writer *w, const char *s, size_t n);
uint32_t gm_pickle_str(struct gm_pickle_writer *w, const char *s);

/* The str in *slot if it was written before (a reference to the same object), else a new
 * one whose memo index is stored in *slot.  *slot starts as GM_PICKLE_NO_MEMO. */
void gm_pickle_str_shared(struct gm_pickle_writer *w, const char *s, uint32_t *slot);

/* A reference to the object with memo index 'memo' (BINGET / LONG_BINGET). */
void gm_pickle_get(struct gm_pickle_writer *w, uint32_t memo);

/* A list of 'n' elements / a dict of 'n' key-value pairs / a tuple of 'n' elements.  The
 * list and dict begin functions return the container's memo index; a tuple gets its memo
 * index from gm_pickle_tuple_end() (GM_PICKLE_NO_MEMO for the empty tuple, which is not
 * memoized). */
uint32_t gm_pickle_list_begin(struct gm_pickle_writer *w, size_t n);
void gm_pickle_list_end(struct gm_pickle_writer *w);
uint32_t gm_pickle_dict_begin(struct gm_pickle_writer *w, size_t n);
void gm_pickle_dict_end(struct gm_pickle_writer *w);
void gm_pickle_tuple_begin(struct gm_pickle_writer *w, size_t n);
uint32_t gm_pickle_tuple_end(struct gm_pickle_writer *w);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
