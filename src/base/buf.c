/* SPDX-License-Identifier: MIT */
/* buf.c - capped growable buffer. */
#define _GNU_SOURCE /* fopencookie(): gm_buf_file() */
#include "base/buf.h"

#include "base/file.h"
#include "base/vec.h"
#include "gpumem/arena.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void gm_buf_init(struct gm_buf *b, size_t max_bytes)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max_bytes;
}

void gm_buf_release(struct gm_buf *b)
{
    gm_free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

enum gm_status gm_buf_reserve(struct gm_buf *b, size_t extra, struct gm_error *err)
{
    size_t need;

    if (extra > b->max || b->len > b->max - extra)
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "buffer: over its limit of %zu bytes",
                       b->max);
    need = b->len + extra + 1; /* room for the terminating NUL */
    b->data = gm_vec_grow(b->data, &b->cap, need, 1, 0, NULL);
    if (need > b->cap)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "buffer: out of memory for %zu bytes",
                       need);
    return GM_OK;
}

enum gm_status gm_buf_append(struct gm_buf *b, const void *p, size_t n, struct gm_error *err)
{
    enum gm_status st = gm_buf_reserve(b, n, err);
    if (st != GM_OK)
        return st;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return GM_OK;
}

static ssize_t buf_file_write(void *cookie, const char *p, size_t n)
{
    return gm_buf_append(cookie, p, n, NULL) == GM_OK ? (ssize_t)n : -1;
}

FILE *gm_buf_file(struct gm_buf *b)
{
    cookie_io_functions_t io = {NULL, buf_file_write, NULL, NULL};
    return fopencookie(b, "w", io);
}

enum gm_status gm_buf_printf(struct gm_buf *b, struct gm_error *err, const char *fmt, ...)
{
    va_list ap;
    int n;
    enum gm_status st;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return gm_fail(err, GM_ERR_INTERNAL, GM_NO_OFFSET, "buffer: bad format");
    st = gm_buf_reserve(b, (size_t)n, err);
    if (st != GM_OK)
        return st;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return GM_OK;
}

enum gm_status gm_buf_read_file(struct gm_buf *b, const char *path, struct gm_error *err)
{
    char tmp[65536];
    uint64_t size;
    int fd;
    enum gm_status st = gm_file_open(path, &fd, &size, err);

    if (st != GM_OK)
        return st;
    /* Read to the end whatever fstat() said: /proc files report 0 bytes. */
    for (;;) {
        ssize_t n = read(fd, tmp, sizeof(tmp));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            st = gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "reading '%s' failed: %s", path,
                         strerror(errno));
            break;
        }
        if (n == 0)
            break;
        st = gm_buf_append(b, tmp, (size_t)n, err);
        if (st == GM_ERR_LIMIT) {
            st = gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET,
                         "'%s' is larger than the limit of %zu bytes for this kind of file", path,
                         b->max);
            break;
        }
        if (st != GM_OK)
            break;
    }
    close(fd);
    if (st == GM_OK && !b->data)
        st = gm_buf_reserve(b, 0, err); /* an empty file still gives a NUL-terminated buffer */
    if (st == GM_OK)
        b->data[b->len] = '\0';
    return st;
}
