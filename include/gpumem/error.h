/* SPDX-License-Identifier: MIT */
/* error.h - the one error type of the gpumem library.
 *
 * Every fallible function returns an enum gm_status and takes a struct gm_error * last
 * (NULL allowed).  The library never prints and never exits; only the CLI maps a status
 * to an exit code (gm_status_exit_code()). */
#ifndef GPUMEM_ERROR_H
#define GPUMEM_ERROR_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default) /* the public API (gpumem.h) */

enum gm_status {
    GM_OK = 0,
    GM_ERR_NOMEM,       /* an allocation failed */
    GM_ERR_IO,          /* reading or writing a file failed */
    GM_ERR_NOENT,       /* an input file does not exist */
    GM_ERR_EXISTS,      /* refusing to overwrite an existing output */
    GM_ERR_FORMAT,      /* malformed input data */
    GM_ERR_UNSUPPORTED, /* well-formed input we cannot handle (e.g. a pickle GLOBAL) */
    GM_ERR_LIMIT,       /* a configured limit (size, depth, count) was exceeded */
    GM_ERR_NODEV,       /* no GPU, no driver, or device index out of range */
    GM_ERR_DRIVER,      /* the driver returned an unexpected error */
    GM_ERR_INVALID,     /* an invalid argument from the caller (bad option value) */
    GM_ERR_INTERNAL     /* a bug in gpumem */
};

#define GM_NO_OFFSET UINT64_MAX

struct gm_error {
    enum gm_status code;
    uint64_t offset; /* byte offset in the input, GM_NO_OFFSET if none */
    char msg[256];   /* "what failed: why", lowercase, no trailing period */
    /* The setting the failure is about, by its library name ("memory_limit",
     * "gpu_memory"; static storage), NULL when none.  Messages never name a command-line
     * flag: a caller names the setting as its users know it (the CLI's --memory-limit,
     * Python's memory_limit=). */
    const char *setting;
};

/* Fill 'err' (may be NULL) with 'code', 'offset' and a printf-style message, and return
 * 'code', so that a failure path is one line:
 *   return gm_fail(err, GM_ERR_FORMAT, off, "tensor '%s': shape overflows int64", name); */
enum gm_status gm_fail(struct gm_error *err, enum gm_status code, uint64_t offset, const char *fmt,
                       ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* gm_fail() (no offset) for a failure about the setting 'setting' (err->setting). */
enum gm_status gm_fail_setting(struct gm_error *err, enum gm_status code, const char *setting,
                               const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Prefix the message already in 'err' with "<context>: " (printf-style); returns err->code.
 * A no-op returning GM_ERR_INTERNAL when err is NULL. */
enum gm_status gm_error_prefix(struct gm_error *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Reset 'err' to GM_OK with an empty message. */
void gm_error_clear(struct gm_error *err);

/* A short lowercase name for a status ("format error"); static storage. */
const char *gm_status_name(enum gm_status code);

/* The process exit code the CLI uses for a status (the README lists them): 0 ok, 2 no GPU/driver,
 * 64 usage, 65 bad data, 66 missing input, 73 refusing to overwrite, 74 I/O, 70 internal. */
int gm_status_exit_code(enum gm_status code);

/* Exit codes, named once. */
enum gm_exit {
    GM_EXIT_OK = 0,
    GM_EXIT_FAILURE = 1,
    GM_EXIT_NODEV = 2,
    GM_EXIT_BORDERLINE = 3, /* estimate --check: the stated assumptions straddle the capacity
                               (1: does not fit) */
    GM_EXIT_USAGE = 64,
    GM_EXIT_DATAERR = 65,
    GM_EXIT_NOINPUT = 66,
    GM_EXIT_SOFTWARE = 70,
    GM_EXIT_CANTCREAT = 73,
    GM_EXIT_IOERR = 74
};

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
