/* SPDX-License-Identifier: MIT */
/* redact.h - a snapshot made fit to share: the same pickle with the text that tells about the
 * program (file paths, function names, record_function annotation names, compile contexts,
 * user metadata) replaced by stable hashes, and everything gpumem's figures read kept as it
 * was: sizes, addresses, times, streams, actions, states, pools, settings, and the shape of
 * every stack (frame count, line numbers, which frames are Python).
 *
 * A hash is the same for the same text, in one file and across files redacted with the same
 * salt, so two redacted snapshots still compare (snapshot diff) and a stack still reads as
 * the same stack.  A hash hides a text, not a name anyone can guess: whoever hashes a list of
 * likely names with the same salt finds those; give a secret salt to prevent it. */
#ifndef GPUMEM_REDACT_H
#define GPUMEM_REDACT_H

#include "gpumem/error.h"

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default) /* the public API (gpumem.h) */

enum gm_redact_flags {
    /* Keep frames that are not the program's own code (torch, installed packages, the
     * standard library, C++ frames: gm_snapshot_file_is_user() false) as they are, so that
     * the analysis still finds modules, autograd and the optimizer by their frames. */
    GM_REDACT_KEEP_LIBRARY_FRAMES = 1 << 0,
};

struct gm_redact_opts {
    unsigned flags;        /* enum gm_redact_flags */
    const char *salt;      /* mixed into every hash; NULL or "": none */
    uint64_t memory_limit; /* bytes for the input and its object graph; 0: 256 MiB + 4 x file */
};

/* What a redaction replaced. */
struct gm_redact_stats {
    uint64_t n_paths;       /* distinct file paths hashed */
    uint64_t n_functions;   /* distinct function names hashed */
    uint64_t n_annotations; /* distinct annotation names hashed */
    uint64_t n_other;       /* distinct compile contexts and user metadata hashed */
};

/* Read the snapshot at 'path' (gzip'd or not; it must load as a snapshot) and write its
 * redacted pickle (same protocol) to 'out'.  'o' and 'stats' may be NULL.  Errors:
 * GM_ERR_NOENT, GM_ERR_IO, GM_ERR_FORMAT (not a snapshot), GM_ERR_UNSUPPORTED (a value no
 * snapshot holds: bytes, a set, an integer wider than 64 bits), GM_ERR_LIMIT, GM_ERR_NOMEM. */
enum gm_status gm_snapshot_redact(const char *path, FILE *out, const struct gm_redact_opts *o,
                                  struct gm_redact_stats *stats, struct gm_error *err);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
