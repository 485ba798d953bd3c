/* SPDX-License-Identifier: MIT */
/* text.h - strings from outside (file contents, process names, environment values, paths)
 * made safe to show on a terminal.
 *
 * A terminal acts on control characters: ESC starts a sequence that can move the cursor,
 * rewrite the screen, set the window title or (on some terminals) answer back, so a
 * snapshot frame, a tensor name or a process name must never reach it raw.  The escape
 * writes every C0 control (0x00-0x1f), DEL (0x7f), every C1 control (U+0080-U+009F, in
 * UTF-8 or as a raw byte) and every byte that is not part of valid UTF-8 as a visible
 * "\xNN" (one per byte); printable ASCII and valid UTF-8 pass through unchanged. */
#ifndef GPUMEM_TEXT_H
#define GPUMEM_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default) /* the public API (gpumem.h) */

/* 's' escaped into out[n] (always NUL-terminated when n > 0), truncated at a character
 * or escape boundary when it does not fit.  Returns 'out'. */
char *gm_text_escape(char *out, size_t n, const char *s);

/* Whether 's' would be changed by gm_text_escape() (it holds something to escape). */
bool gm_text_needs_escape(const char *s);

/* Write 's' escaped to 'f', whatever its length.  false on a write error. */
bool gm_text_write_escaped(FILE *f, const char *s);

/* The "did you mean" of a mistyped name: of 'names' (n of them), the one closest to the
 * first 'len' bytes of 'word' within the edits a slip makes (insertions, deletions,
 * substitutions and swaps of two neighbours: 1 for words under 5 letters, 2 from 5, 3 from
 * 9), or one 'word' is a prefix of (3 letters or more); NULL when none is that close.
 * 'fold_case' compares ASCII letters without case.  Names over 64 bytes are skipped. */
const char *gm_text_closest(const char *word, size_t len, const char *const *names, size_t n,
                            bool fold_case);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
