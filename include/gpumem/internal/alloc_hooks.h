/* SPDX-License-Identifier: MIT */
/* alloc_hooks.h - the test hooks of the library's allocation wrappers (arena.h): fail the
 * Nth allocation, count them.  For gpumem's own tests (include/gpumem/internal/: not
 * installed, not exported). */
#ifndef GPUMEM_INTERNAL_ALLOC_HOOKS_H
#define GPUMEM_INTERNAL_ALLOC_HOOKS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Make the allocation wrappers fail once 'n' more calls have succeeded; n < 0 turns
 * failure injection off.  Per thread. */
void gm_alloc_fail_after(long n);

/* The same, but only that one call fails: the calls after it succeed again (an error path
 * that goes on without what it could not allocate, and the work after it). */
void gm_alloc_fail_once_after(long n);

/* How many allocation calls were made on this thread since the last
 * gm_alloc_fail_after(). */
long gm_alloc_count(void);

#ifdef __cplusplus
}
#endif
#endif
