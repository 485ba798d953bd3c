/* SPDX-License-Identifier: MIT */
/* error.c - gm_fail() and the status tables. */
#include "gpumem/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum gm_status gm_fail(struct gm_error *err, enum gm_status code, uint64_t offset, const char *fmt,
                       ...)
{
    if (err) {
        va_list ap;
        err->code = code;
        err->offset = offset;
        err->setting = NULL;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
    }
    return code;
}

enum gm_status gm_fail_setting(struct gm_error *err, enum gm_status code, const char *setting,
                               const char *fmt, ...)
{
    if (err) {
        va_list ap;
        err->code = code;
        err->offset = GM_NO_OFFSET;
        err->setting = setting;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
    }
    return code;
}

enum gm_status gm_error_prefix(struct gm_error *err, const char *fmt, ...)
{
    char pre[128];
    char old[sizeof(err->msg)];
    va_list ap;

    if (!err)
        return GM_ERR_INTERNAL;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof(pre), fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof(old));
    {
        /* Truncation is intended: the message keeps what fits. */
        size_t np = strlen(pre), no = strnlen(old, sizeof(old) - 1), cap = sizeof(err->msg) - 1;
        size_t k = 0;
        memcpy(err->msg, pre, np < cap ? np : cap);
        k = np < cap ? np : cap;
        if (k + 2 <= cap) {
            memcpy(err->msg + k, ": ", 2);
            k += 2;
        }
        if (no > cap - k)
            no = cap - k;
        memcpy(err->msg + k, old, no);
        err->msg[k + no] = '\0';
    }
    return err->code;
}

void gm_error_clear(struct gm_error *err)
{
    if (!err)
        return;
    err->code = GM_OK;
    err->offset = GM_NO_OFFSET;
    err->msg[0] = '\0';
    err->setting = NULL;
}

const char *gm_status_name(enum gm_status code)
{
    switch (code) {
    case GM_OK:
        return "ok";
    case GM_ERR_NOMEM:
        return "out of memory";
    case GM_ERR_IO:
        return "i/o error";
    case GM_ERR_NOENT:
        return "no such file";
    case GM_ERR_EXISTS:
        return "file exists";
    case GM_ERR_FORMAT:
        return "format error";
    case GM_ERR_UNSUPPORTED:
        return "unsupported";
    case GM_ERR_LIMIT:
        return "limit exceeded";
    case GM_ERR_NODEV:
        return "no device";
    case GM_ERR_DRIVER:
        return "driver error";
    case GM_ERR_INVALID:
        return "invalid argument";
    case GM_ERR_INTERNAL:
        return "internal error";
    }
    return "unknown error";
}

int gm_status_exit_code(enum gm_status code)
{
    switch (code) {
    case GM_OK:
        return GM_EXIT_OK;
    case GM_ERR_NODEV:
        return GM_EXIT_NODEV;
    case GM_ERR_INVALID:
        return GM_EXIT_USAGE;
    case GM_ERR_FORMAT:
    case GM_ERR_UNSUPPORTED:
    case GM_ERR_LIMIT:
        return GM_EXIT_DATAERR;
    case GM_ERR_NOENT:
        return GM_EXIT_NOINPUT;
    case GM_ERR_EXISTS:
        return GM_EXIT_CANTCREAT;
    case GM_ERR_IO:
        return GM_EXIT_IOERR;
    case GM_ERR_DRIVER:
        return GM_EXIT_FAILURE;
    case GM_ERR_NOMEM:
    case GM_ERR_INTERNAL:
        return GM_EXIT_SOFTWARE;
    }
    return GM_EXIT_SOFTWARE;
}
