/* SPDX-License-Identifier: MIT */
/* text.c - terminal-safe copies of outside strings (see gpumem/text.h). */
#include "gpumem/text.h"

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
