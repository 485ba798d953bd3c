/* SPDX-License-Identifier: MIT */
/* hint.h - branch hints for the per-event loops (library-internal): which way a test
 * nearly always goes, so that the compiler keeps the usual path straight and its values in
 * registers; and GM_INLINE_ALWAYS, for a per-event loop written once and compiled once per
 * value of a constant argument (each copy without the tests the constant decides).  A hint
 * never changes what the code does. */
#ifndef GM_BASE_HINT_H
#define GM_BASE_HINT_H

#if defined(__GNUC__) || defined(__clang__)
#define GM_LIKELY(x)     __builtin_expect(!!(x), 1)
#define GM_UNLIKELY(x)   __builtin_expect(!!(x), 0)
#define GM_INLINE_ALWAYS __attribute__((always_inline)) inline
#else
#define GM_LIKELY(x)     (x)
#define GM_UNLIKELY(x)   (x)
#define GM_INLINE_ALWAYS inline
#endif

#endif
