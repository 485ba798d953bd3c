/* SPDX-License-Identifier: MIT */
/* output.h - output files written whole or not at all, never over what they must not
 * replace; the one writer of the command line and the Python package.
 *
 * The data goes to a temporary file beside the target (mode 0600, close-on-exec), which is
 * moved into place once every byte is written and synced: a failed or interrupted write
 * never leaves half a file under the target's name.  An existing target is replaced only
 * when the caller says so ('force'), and only when it is a regular file: never a directory,
 * a FIFO, a device, a socket or a symbolic link (a dangling one included).  Without
 * 'force' the file is moved into place with link(), which fails when the name exists, so a
 * file that appears while the data is written is never replaced either.  The result gets
 * the permissions of the file it replaces (never its setuid, setgid or sticky bits), else
 * 0666 less the umask.
 *
 * Writes go through a FILE that keeps the errno of the first failed write(2) (struct
 * gm_sink), so that a full disk is said as ENOSPC and a file-size limit as EFBIG, with the
 * file's name, not as a bare "write error".  The library installs no signal handler: a
 * caller that wants the temporary file gone when a signal ends the process removes
 * o->tmp itself (the command line does). */
#ifndef GPUMEM_OUTPUT_H
#define GPUMEM_OUTPUT_H

#include "gpumem/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Where a FILE of gm_sink_open() writes, and the errno of its first failed write. */
struct gm_sink {
    int fd;
    int err; /* 0: none */
};

/* A FILE (fully buffered) writing to descriptor 'fd' with write(2), retrying short writes
 * and EINTR, keeping the errno of the first failure in s->err; NULL when none can be made.
 * fclose() leaves 'fd' open. */
FILE *gm_sink_open(struct gm_sink *s, int fd);

/* strerror(e) with the errno's name for the ones people search for: "No space left on
 * device (ENOSPC)".  Returns 'buf'. */
const char *gm_errno_text(char *buf, size_t n, int e);

#define GM_OUTPUT_PATH_MAX 4096 /* bytes of a path, its NUL included */

struct gm_output {
    FILE *f;                          /* where the data is written (gm_output_open()) */
    char path[GM_OUTPUT_PATH_MAX];    /* the target */
    char tmp[GM_OUTPUT_PATH_MAX];     /* the temporary file beside it; "" when there is none */
    char written[GM_OUTPUT_PATH_MAX]; /* where the data went: 'path', or the name beside it */
    bool force;                       /* replace an existing regular file */
    bool beside; /* a file that appears at 'path' meanwhile: write "name-1.ext" beside it */
    int fd;
    unsigned mode; /* of a new file: 0666 less the umask */
    struct gm_sink sink;
};

/* The checks of gm_output_open() without creating anything, for a caller to make before a
 * long piece of work.  GM_ERR_INVALID: an empty name, "-", a name too long or ending in '/';
 * GM_ERR_EXISTS: a directory, an existing file without 'force', anything but a regular
 * file with it; GM_ERR_NOENT: the folder does not exist; GM_ERR_IO: it is not a folder or
 * cannot be written. */
enum gm_status gm_output_check(const char *path, bool force, struct gm_error *err);

/* Check 'path' and create the temporary file beside it; o->f is ready.  Errors of
 * gm_output_check(), and GM_ERR_IO when the temporary file cannot be made. */
enum gm_status gm_output_open(struct gm_output *o, const char *path, bool force,
                              struct gm_error *err);

/* Flush, check every write, sync, and move the file into place (then o->tmp is "").
 * GM_ERR_IO "writing 'path' failed: <reason (ENAME)>" when a write failed (the temporary
 * file is removed); GM_ERR_EXISTS when the target appeared meanwhile (with o->beside the
 * data goes to a free name beside it instead: GM_OK, o->written says where). */
enum gm_status gm_output_commit(struct gm_output *o, struct gm_error *err);

/* Close and remove the temporary file (nothing is left); safe to call twice. */
void gm_output_abort(struct gm_output *o);

#ifdef __cplusplus
}
#endif
#endif
