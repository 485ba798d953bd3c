/* SPDX-License-Identifier: MIT */
/* text.c - terminal-safe copies of outside strings (see gpumem/text.h). */
#include "gpumem/text.h"

#include <ctype.h>
#include <stdint.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at 's' that is printable (not a C1 control), or 0
 * when the byte at 's' must be escaped.  Overlong forms, surrogates and code points past
 * U+10FFFF are invalid. */
static size_t printable_len(const unsigned char *s)
{
    unsigned char c = s[0];
    uint32_t cp;
    size_t n;

    if (c >= 0x20 && c < 0x7f)
        return 1;
    if (c < 0xc2 || c > 0xf4)
        return 0; /* C0, DEL, a continuation byte, an overlong lead or past U+10FFFF */
    n = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    cp = c & (0x7f >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0; /* includes the terminating NUL */
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    if (cp >= 0x80 && cp <= 0x9f)
        return 0; /* C1 controls: CSI (U+009B) acts like ESC [ on some terminals */
    return n;
}

static const char hex[] = "0123456789abcdef";

char *gm_text_escape(char *out, size_t n, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t k = 0;

    if (n == 0)
        return out;
    while (*p) {
        size_t len = printable_len(p);
        if (len) {
            if (k + len >= n)
                break;
            memcpy(out + k, p, len);
            k += len;
            p += len;
        } else {
            if (k + 4 >= n)
                break;
            out[k++] = '\\';
            out[k++] = 'x';
            out[k++] = hex[*p >> 4];
            out[k++] = hex[*p & 15];
            p++;
        }
    }
    out[k] = '\0';
    return out;
}

bool gm_text_needs_escape(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t len = printable_len(p);
        if (!len)
            return true;
        p += len;
    }
    return false;
}

bool gm_text_write_escaped(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t len = printable_len(p);
        if (len) {
            /* a run of printable characters in one write */
            size_t run = 0;
            while (p[run] && (len = printable_len(p + run)) != 0)
                run += len;
            if (fwrite(p, 1, run, f) != run)
                return false;
            p += run;
        } else {
            char e[4] = {'\\', 'x', hex[*p >> 4], hex[*p & 15]};
            if (fwrite(e, 1, 4, f) != 4)
                return false;
            p++;
        }
    }
    return !ferror(f);
}

#define NAME_MAX_CLOSE 64

static bool same_char(char a, char b, bool fold)
{
    return fold ? tolower((unsigned char)a) == tolower((unsigned char)b) : a == b;
}

/* Edit distance (insertions, deletions, substitutions, swaps of two neighbours) between
 * a[0..na) and b[0..nb), both at most NAME_MAX_CLOSE bytes: three rolling rows. */
static size_t distance(const char *a, size_t na, const char *b, size_t nb, bool fold)
{
    size_t rows[3][NAME_MAX_CLOSE + 1], *prev2 = rows[0], *prev = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= nb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= na; i++) {
        size_t *t;
        cur[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t sub = prev[j - 1] + !same_char(a[i - 1], b[j - 1], fold);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            size_t best = sub < del ? sub : del;
            best = best < ins ? best : ins;
            if (i > 1 && j > 1 && same_char(a[i - 1], b[j - 2], fold) &&
                same_char(a[i - 2], b[j - 1], fold) && prev2[j - 2] + 1 < best)
                best = prev2[j - 2] + 1;
            cur[j] = best;
        }
        t = prev2;
        prev2 = prev;
        prev = cur;
        cur = t;
    }
    return prev[nb];
}

static bool is_prefix(const char *word, size_t len, const char *name, bool fold)
{
    for (size_t i = 0; i < len; i++)
        if (!name[i] || !same_char(word[i], name[i], fold))
            return false;
    return true;
}

const char *gm_text_closest(const char *word, size_t len, const char *const *names, size_t n,
                            bool fold_case)
{
    const char *best = NULL;
    size_t best_d = SIZE_MAX;
    /* close enough to be a slip: 1 edit for short words, 2 from 5 letters, 3 from 9 */
    size_t allowed = len < 5 ? 1 : len < 9 ? 2 : 3;
    if (len > NAME_MAX_CLOSE)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(names[i]), dd;
        if (nl > NAME_MAX_CLOSE)
            continue;
        if (nl > len && len >= 3 && is_prefix(word, len, names[i], fold_case))
            dd = 0; /* a prefix of the name ("--dev" for --device, "leak" for leaks) */
        else
            dd = distance(word, len, names[i], nl, fold_case);
        if (dd <= allowed && dd < best_d) {
            best = names[i];
            best_d = dd;
        }
    }
    return best;
}
