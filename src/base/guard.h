/* SPDX-License-Identifier: MIT */
/* guard.h - reading a mapped file that may change under us (library-internal).
 *
 * A snapshot is read through a mapping of its file.  When the file shrinks while it is
 * read (PyTorch rewriting a snapshot that someone analyses), a read of a page past the new
 * end raises SIGBUS, which by default kills the process.  gm_guard_run() runs a function
 * with a SIGBUS handler that turns such a fault, inside the mapping it names and on the
 * thread that runs it, into a return of false: the caller then releases what the function
 * had allocated (everything it allocates must stay reachable from the caller's side for
 * that) and reports the file as changed.  A SIGBUS anywhere else goes to the handler that
 * was installed before (or kills the process as it would have).
 *
 * Signal dispositions belong to the process, so this is the one place of the library with
 * process-wide state: the handler is installed while at least one guard runs (a count under
 * a mutex, so that guards on several threads share it) and the previous one restored after
 * the last; each thread's guard is thread-local.  The function must not hold locks or be
 * inside the allocator when it reads the mapping (true of the pickle reader: the mapping is
 * read only by its own code and by memcpy/memcmp on it). */
#ifndef GM_BASE_GUARD_H
#define GM_BASE_GUARD_H

#include <stdbool.h>
#include <stddef.h>

/* Run fn(ctx) guarding reads of [base, base + len); false when such a read faulted (fn did
 * not finish), true otherwise.  Where no handler can be installed fn runs unguarded. */
bool gm_guard_run(void (*fn)(void *ctx), void *ctx, const void *base, size_t len);

#endif
