/* SPDX-License-Identifier: MIT */
/* buf.h - growable byte buffer with a hard cap (library-internal).
 *
 * GM_BUF_INIT allocates nothing; gm_buf_release(&b) frees; appending past 'max' fails
 * with GM_ERR_LIMIT instead of growing without bound. */
#ifndef GM_BASE_BUF_H
#define GM_BASE_BUF_H

#include "gpumem/error.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct gm_buf {
    char *data; /* NUL-terminated when len > 0 */
    size_t len; /* bytes */
    size_t cap; /* bytes allocated */
    size_t max; /* hard cap in bytes */
};

#define GM_BUF_INIT                                                                                \
    {                                                                                              \
        NULL, 0, 0, SIZE_MAX / 2                                                                   \
    }

void gm_buf_init(struct gm_buf *b, size_t max_bytes);
void gm_buf_release(struct gm_buf *b);
enum gm_status gm_buf_reserve(struct gm_buf *b, size_t extra, struct gm_error *err);
enum gm_status gm_buf_append(struct gm_buf *b, const void *p, size_t n, struct gm_error *err);
enum gm_status gm_buf_printf(struct gm_buf *b, struct gm_error *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* A FILE whose writes append to 'b' (a write past its cap fails: the FILE's error flag),
 * for a writer that takes a FILE* (the JSON writer): the text lands in b without the
 * zeroing of every doubling that open_memstream() does.  What was written is in b after
 * fflush() or fclose().  NULL when out of memory. */
FILE *gm_buf_file(struct gm_buf *b);

/* Read a whole file into 'b' (capped by b->max, GM_ERR_LIMIT naming the file), to its end
 * whatever size it reports; only a regular file is read (gm_file_open()).  GM_ERR_NOENT when
 * it does not exist. */
enum gm_status gm_buf_read_file(struct gm_buf *b, const char *path, struct gm_error *err);

#endif
