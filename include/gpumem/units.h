/* SPDX-License-Identifier: MIT */
/* units.h - byte quantities: formatting with explicit units and parsing size strings.
 *
 * Bytes are uint64_t everywhere.  GiB means 2^30 bytes and GB means 1e9 bytes; every
 * formatted figure carries its unit, and the two are never mixed in one figure. */
#ifndef GPUMEM_UNITS_H
#define GPUMEM_UNITS_H

#include "gpumem/error.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default) /* the public API (gpumem.h) */

#define GM_KIB ((uint64_t)1 << 10)
#define GM_MIB ((uint64_t)1 << 20)
#define GM_GIB ((uint64_t)1 << 30)
#define GM_TIB ((uint64_t)1 << 40)
#define GM_GB  ((uint64_t)1000000000)

enum gm_units {
    GM_UNITS_IEC,  /* KiB, MiB, GiB, TiB: the unit is chosen by magnitude */
    GM_UNITS_SI,   /* kB, MB, GB, TB */
    GM_UNITS_BYTES /* a plain integer followed by " B" */
};

/* Format 'bytes' into 'out' (at least 32 bytes) as "13.04 GiB", "14.00 GB" or
 * "14000000000 B" with two decimals, choosing the largest unit that keeps the value >= 1.
 * Returns 'out'. */
char *gm_format_bytes(char *out, size_t n, uint64_t bytes, enum gm_units units);

/* Format 'bytes' in one fixed unit: gm_format_fixed(buf, n, b, GM_GIB, "GiB") gives
 * "13.04 GiB" whatever the magnitude.  Returns 'out'. */
char *gm_format_fixed(char *out, size_t n, uint64_t bytes, uint64_t unit, const char *label);

/* Parse a size: a bare integer is bytes; "kB MB GB TB" (and "k M" spelled with B) are
 * decimal, "KiB MiB GiB TiB" binary; a decimal fraction is allowed with a unit ("1.5GiB").
 * Case of the unit letters is accepted loosely except that a bare "G"/"M"/"K" suffix is
 * rejected as ambiguous.  GM_ERR_INVALID with a message naming the problem. */
enum gm_status gm_parse_size(const char *s, uint64_t *out, struct gm_error *err);

/* The memory of a GPU, the one rule of every command that takes it (estimate, replay): a
 * size with a unit (gm_parse_size(): "80GiB", "24GB" = 24e9 bytes) or a bare number of GiB
 * ("80" = 80 GiB, "79.2"), above zero and at most 1 PiB.  A GPU's name is gm_gpu_lookup()'s
 * (estimate.h).  GM_ERR_INVALID about the setting "gpu_memory". */
enum gm_status gm_parse_gpu_memory(const char *s, uint64_t *out, struct gm_error *err);

/* Parse a whole non-negative decimal integer (no sign, no spaces, overflow checked);
 * "7e9" and "7_000_000_000" are accepted too as a convenience for parameter counts. */
enum gm_status gm_parse_u64(const char *s, uint64_t *out, struct gm_error *err);

/* Parse a count as people write it: a whole number ("7000000000", "7_000_000_000"), a
 * decimal or exponent form ("1.5e9", "27.4e9"), or a suffix K, M, B (or G), T for 1e3,
 * 1e6, 1e9, 1e12 ("8B", "70B", "1.5B", "500M").  The value must come out whole ("1.5"
 * is refused, "1.5K" is 1500); computed exactly, without floating point.  GM_ERR_INVALID
 * naming the problem. */
enum gm_status gm_parse_count(const char *s, uint64_t *out, struct gm_error *err);

/* Parse a finite double (strtod), the whole string. */
enum gm_status gm_parse_double(const char *s, double *out, struct gm_error *err);

/* a * b / c without intermediate overflow where the result fits; saturates at UINT64_MAX. */
uint64_t gm_mul_div_u64(uint64_t a, uint64_t b, uint64_t c);

/* Saturating helpers for byte arithmetic. */
uint64_t gm_add_sat(uint64_t a, uint64_t b);
uint64_t gm_mul_sat(uint64_t a, uint64_t b);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
