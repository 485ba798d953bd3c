/* SPDX-License-Identifier: MIT */
/* file.h - what a path names, in words, for the messages that refuse it (an input that is
 * a FIFO, an output that --force may not replace).
 *
 * include/gpumem/internal/ holds what the library shares with gpumem's own CLI and tests
 * and with nothing else: not installed, not part of the API, its symbols not exported from
 * the shared library (as curl's curlx). */
#ifndef GPUMEM_INTERNAL_FILE_H
#define GPUMEM_INTERNAL_FILE_H

#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "a regular file", "a directory", "a FIFO", "a character device", "a block device",
 * "a socket", "a symbolic link" for a st_mode (from stat() or lstat()); static. */
const char *gm_file_kind(mode_t mode);

#ifdef __cplusplus
}
#endif
#endif
