/* SPDX-License-Identifier: MIT */
/* big.h - growable arrays of many megabytes (library-internal).
 *
 * Reading a large snapshot fills a few arrays of tens of megabytes (the trace events, the
 * pickle memo, the analysis's per-event and per-allocation arrays), and a larger realloc()
 * may copy.  An array that reaches GM_BIG_MIN bytes moves to an anonymous mapping of its
 * own that grows with mremap(), which moves page tables instead of bytes.  Smaller arrays,
 * other systems and the sanitizer build (GM_ARENA_MALLOC, so that AddressSanitizer sees
 * every array) use gm_realloc().  The caller keeps the capacity in bytes, which tells the
 * two kinds apart.  Both go through the allocation-failure hook.
 *
 * The mappings ask for no transparent huge pages (the system's default applies: none where
 * THP is "madvise").  On a virtual machine whose balloon reports free memory to the host
 * (virtio-balloon free page reporting, of blocks of 2 MiB and more, which the host then
 * discards), a fresh huge page is exactly such a block: its first write faults in the host
 * as well.  Measured on the build machine (a guest with reporting on, page_reporting_order 9),
 * writing 400 MB of fresh memory took 0.49 to 0.92 s of system time in huge pages against
 * 0.12 to 0.19 s in 4 KiB pages (from free memory the guest had not reported), and
 * `gpumem snapshot categories` of a 1 GB snapshot 1.09 s of system time against 0.38 s.
 *
 * Each new part of a mapping is populated in one madvise(MADV_POPULATE_WRITE) call (Linux
 * 5.14 and later; elsewhere its pages fault in as they are written), not by a page fault per
 * 4 KiB page: on a later build machine (a Firecracker guest, Linux 6.18) writing 400 MB of
 * fresh memory one fault a page took 1.41 s, populated first 0.50 s; `gpumem snapshot peak`
 * of the 1 GB snapshot went 1.56 -> 1.38 s and categories 3.03 -> 2.0-2.4 s.  The first
 * write of each populated page still costs there: 192 MB populated in 55-97 ms, then written
 * one byte a 64 in 463-492 ms (9.4-10.0 us a 4 KiB page; unpopulated 18-20 us), written again
 * in 12-21 ms (load 5-7); pages given back (a new mapping at a freed one's address, or
 * MADV_DONTNEED) cost as much again (128 MB unpopulated: 0.72 s fresh, 0.73 and 0.77 s
 * again).  So an array is best made in pages the process wrote before and still holds (the
 * analysis's totals take the loader's stacks' array, snapshot_int.h).  Since the
 * whole capacity is then memory, a mapped array grows to what it needs rounded up to whole
 * 2 MiB units (vec.c, gm_big_room()), in place: its mapping reserves address space beyond
 * its capacity, up to the next power of two, that no page backs (big.c).  (Growing by a
 * quarter instead left the pickle memo of the 1 GB snapshot 142 MB of memory for 97 MB of
 * cells.)  That reservation is address space: MAP_NORESERVE keeps it out of the kernel's
 * commit charge in the default overcommit modes, but it counts against `ulimit -v` (and
 * against the commit limit under vm.overcommit_memory=2), up to twice an array's capacity. */
#ifndef GM_BASE_BIG_H
#define GM_BASE_BIG_H

#include <stdbool.h>
#include <stddef.h>

#define GM_BIG_MIN ((size_t)1 << 20)

/* Grow (or shrink) 'p', an array of 'old_bytes' capacity made by these functions (NULL
 * with 0), to 'new_bytes'; the first min(old, new) bytes are kept.  NULL when out of
 * memory ('p' is then unchanged). */
void *gm_big_realloc(void *p, size_t old_bytes, size_t new_bytes);

/* The capacity in bytes that an array of GM_BIG_MIN bytes or more, growing, takes to hold
 * 'bytes': where arrays are mapped, 'bytes' rounded up to whole mapping units (it grows in
 * place); elsewhere (the heap) a quarter more than 'bytes', so that growth is not
 * quadratic. */
size_t gm_big_room(size_t bytes);

/* Make room for 'need' elements of 'elem' bytes in the array *p of *cap elements, doubling
 * from 'first' (elements): gm_vec_grow() (vec.h) of a GM_VEC_BIG array with its first
 * capacity chosen.  false when out of memory or the size overflows (*p and *cap are then
 * unchanged). */
bool gm_big_grow(void **p, size_t *cap, size_t need, size_t elem, size_t first);

/* A zeroed array of 'bytes' made as gm_big_realloc(NULL, 0, bytes) makes it (a mapping of
 * its own, populated, from GM_BIG_MIN bytes), with no clearing of a new mapping's pages,
 * which are zero already; released by gm_big_free(p, bytes).  NULL when out of memory. */
void *gm_big_zalloc(size_t bytes);

/* Release 'p', of 'bytes' capacity (as last passed to gm_big_realloc()). */
void gm_big_free(void *p, size_t bytes);

/* The allocation-failure hook of arena.h (gm_alloc_fail_after()): true when this
 * allocation is to fail.  For allocators that do not go through gm_malloc(). */
bool gm_alloc_inject_failure(void);

/* Whether the allocation-failure hook is armed on this thread (a test is failing the Nth
 * allocation): work that would go to another thread, whose allocations the hook does not
 * see, is then done on this one. */
bool gm_alloc_injecting(void);

#endif
