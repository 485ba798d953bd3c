/* SPDX-License-Identifier: MIT */
/* file.h - opening and reading the files gpumem is given (library-internal).
 *
 * An input path may name anything: a FIFO, whose open() blocks until a writer comes; a
 * terminal or a device node, whose reads block or never end; a directory; or a regular
 * file that another process truncates while we read it.  Every input is opened here:
 * non-blocking, close-on-exec, never as a controlling terminal, then checked with fstat()
 * before a single byte is read, so that nothing but a regular file is ever read and the
 * refusal names what the path really is.  Reads are exact: a file that ends before the
 * size fstat() gave is reported as changed while being read, never as silently short. */
#ifndef GM_BASE_FILE_H
#define GM_BASE_FILE_H

#include "gpumem/error.h"
#include "gpumem/internal/file.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Open 'path' for reading when it is a regular file (symbolic links are followed):
 * *fd gets a blocking, close-on-exec descriptor (close() it), *size the size fstat()
 * reports (0 for /proc and /sys files, whatever they hold).  Errors: GM_ERR_NOENT when it
 * does not exist; GM_ERR_IO when it cannot be opened or is not a regular file ("'p' is a
 * FIFO, not a regular file"). */
enum gm_status gm_file_open(const char *path, int *fd, uint64_t *size, struct gm_error *err);

/* Read exactly 'n' bytes at offset 'off' of 'fd' (retrying short reads and EINTR).  A
 * file that ends first fails with GM_ERR_IO "'path' changed while being read: it ends at
 * byte X" (it was truncated under us); a read error with GM_ERR_IO and the reason. */
enum gm_status gm_file_read_at(int fd, const char *path, uint64_t off, void *buf, size_t n,
                               struct gm_error *err);

/* The error for a regular file too short to be 'what' ("a safetensors file"): when fstat()
 * says 0 bytes but a read finds data, the file is a /proc or /sys file whose size the
 * kernel does not report ("'p' reports 0 bytes but has content (a /proc or /sys file):
 * not a safetensors file"); otherwise "'p' is empty: not a ..." or "'p': N bytes, too
 * short for ...".  Always GM_ERR_FORMAT at offset 0. */
enum gm_status gm_file_too_short(int fd, const char *path, uint64_t size, const char *what,
                                 struct gm_error *err);

#endif
