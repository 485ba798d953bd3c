/* SPDX-License-Identifier: MIT */
/* rules_yaml.c - the YAML form of the user's category rules (analysis.h): the small subset
 * of YAML block style that the rules need, turned into the same JSON tree that the JSON form
 * gives, so that rules.c validates both with one reader.
 *
 * Read: block sequences ("- ") and block mappings ("key: value") nested by indentation with
 * spaces, values that are plain, 'single-quoted' ('' for a quote) or "double-quoted" (YAML's
 * escapes) scalars on one line, read as text; "#" comments, blank lines and one leading "---".
 * Refused, naming the line: tabs in indentation, anchors, aliases, tags, flow collections,
 * block and multi-line scalars, quoted or complex keys, duplicate keys, a key without a value,
 * more than one document, nesting deeper than the rules need. */
#include "analysis/analysis_int.h"

#include "base/json_in.h"

#include <stdio.h>
#include <string.h>

/* A top-level mapping of sequences of mappings of scalars: three levels and a spare. */
#define YAML_MAX_DEPTH 4

struct yline {
    size_t start, end; /* the content: after the indentation, before the newline */
    size_t indent;     /* columns of spaces before 'start' */
    size_t number;     /* 1-based line number in the file */
};

struct yreader {
    const char *text;
    struct yline *lines; /* lines with content, in order */
    size_t n, at;        /* their count; the next one to read */
    struct gm_error *err;
};

static enum gm_status refuse(struct yreader *y, size_t line, const char *why)
{
    return gm_fail(y->err, GM_ERR_FORMAT, GM_NO_OFFSET, "line %zu: %s", line, why);
}

/* Split 'text' into lines with content (not blank, not only a comment). */
static enum gm_status split_lines(struct yreader *y, size_t len)
{
    size_t cap = 1, pos = 0, number = 0;
    bool content_seen = false;

    for (size_t i = 0; i < len; i++)
        cap += y->text[i] == '\n';
    y->lines = gm_calloc(cap, sizeof(*y->lines));
    if (!y->lines)
        return gm_fail(y->err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    while (pos < len) {
        size_t eol = pos, s = pos;
        const char *nl = memchr(y->text + pos, '\n', len - pos);
        eol = nl ? (size_t)(nl - y->text) : len;
        number++;
        if (memchr(y->text + pos, '\0', eol - pos))
            return refuse(y, number, "holds a NUL byte");
        while (s < eol && y->text[s] == ' ')
            s++;
        size_t e = eol;
        if (e > s && y->text[e - 1] == '\r')
            e--;
        while (e > s && (y->text[e - 1] == ' ' || y->text[e - 1] == '\t'))
            e--;
        if (s < e && y->text[s] == '\t')
            return refuse(y, number, "a tab in the indentation (YAML indents with spaces)");
        if (s < e && y->text[s] != '#') {
            bool marker = e - s >= 3 &&
                          (!memcmp(y->text + s, "---", 3) || !memcmp(y->text + s, "...", 3)) &&
                          (e - s == 3 || y->text[s + 3] == ' ');
            if (marker && (content_seen || s != pos || y->text[s] == '.' || e - s != 3))
                return refuse(y, number, "a document marker (one document, \"---\" only first)");
            if (!marker)
                y->lines[y->n++] = (struct yline){s, e, s - pos, number};
            content_seen = true;
        }
        pos = eol + 1;
    }
    return GM_OK;
}

/* Append the UTF-8 encoding of 'cp' to 'out' (at least 4 bytes of room). */
static size_t put_utf8(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The escape after a backslash at text[*i] (a double-quoted scalar), written to 'out'. */
static bool unescape(const char *text, size_t *i, size_t end, char *out, size_t *n)
{
    static const char simple_in[] = "0abtnvfre \"/\\\t";
    static const char simple_out[] = "\0\a\b\t\n\v\f\r\x1b \"/\\\t";
    const char *hit;
    char c = *i < end ? text[*i] : '\0';
    int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
    uint32_t cp = 0;

    if (!c)
        return false;
    if ((hit = memchr(simple_in, c, sizeof(simple_in) - 1))) {
        out[(*n)++] = simple_out[hit - simple_in];
        (*i)++;
        return true;
    }
    if (c == 'N' || c == '_' || c == 'L' || c == 'P') {
        cp = c == 'N' ? 0x85 : c == '_' ? 0xA0 : c == 'L' ? 0x2028 : 0x2029;
        *n += put_utf8(out + *n, cp);
        (*i)++;
        return true;
    }
    if (!digits || end - *i < (size_t)digits + 1)
        return false;
    for (int d = 1; d <= digits; d++) {
        int v = hex_value(text[*i + (size_t)d]);
        if (v < 0)
            return false;
        cp = cp << 4 | (uint32_t)v;
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return false;
    *n += put_utf8(out + *n, cp);
    *i += (size_t)digits + 1;
    return true;
}

/* The scalar at text[s, e) of line 'ln' as a JSON string in *out. */
static enum gm_status read_scalar(struct yreader *y, const struct yline *ln, size_t s, json_t **out)
{
    const char *t = y->text;
    size_t e = ln->end, n = 0, i = s;
    char *buf;
    char q = t[s];

    if (strchr("&*![]{}|>@`,%?", q)) {
        const char *why = q == '&'   ? "an anchor (&) is not supported"
                          : q == '*' ? "an alias (*) is not supported"
                          : q == '!' ? "a tag (!) is not supported"
                          : q == '[' || q == '{' || q == ']' || q == '}'
                              ? "a flow collection ([...] or {...}) is not supported; quote "
                                "a value that starts with one"
                          : q == '|' || q == '>' ? "a block scalar (| or >) is not supported"
                                                 : "a value cannot start with this character "
                                                   "unquoted; quote it";
        return refuse(y, ln->number, why);
    }
    if (q == '-' && (s + 1 == e || t[s + 1] == ' '))
        return refuse(y, ln->number, "a sequence cannot follow a key on the same line");
    /* No escape writes more than 3 bytes per 2 read ("\\L": U+2028). */
    buf = gm_malloc(2 * (e - s) + 4);
    if (!buf)
        return gm_fail(y->err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    if (q == '"' || q == '\'') {
        bool closed = false;
        for (i = s + 1; i < e && !closed;) {
            if (t[i] == q) {
                if (q == '\'' && i + 1 < e && t[i + 1] == '\'') {
                    buf[n++] = '\'';
                    i += 2;
                } else {
                    closed = true;
                    i++;
                }
            } else if (q == '"' && t[i] == '\\') {
                i++;
                if (!unescape(t, &i, e, buf, &n)) {
                    gm_free(buf);
                    return refuse(y, ln->number,
                                  "an unknown or incomplete escape in a "
                                  "double-quoted value");
                }
            } else {
                buf[n++] = t[i++];
            }
        }
        if (!closed) {
            gm_free(buf);
            return refuse(y, ln->number,
                          "a quoted value not closed on its line (multi-line values are not "
                          "supported)");
        }
        while (i < e && (t[i] == ' ' || t[i] == '\t'))
            i++;
        if (i < e && t[i] != '#') {
            gm_free(buf);
            return refuse(y, ln->number, "text after a closing quote");
        }
    } else {
        for (; i < e; i++) {
            if (t[i] == '#' && i > s && (t[i - 1] == ' ' || t[i - 1] == '\t'))
                break;
            if (t[i] == ':' && (i + 1 == e || t[i + 1] == ' ')) {
                gm_free(buf);
                return refuse(y, ln->number, "\": \" inside a plain value; quote the value");
            }
            buf[n++] = t[i];
        }
        while (n && (buf[n - 1] == ' ' || buf[n - 1] == '\t'))
            n--;
    }
    *out = json_stringn(buf, n);
    gm_free(buf);
    if (!*out)
        return refuse(y, ln->number, "a value that is not UTF-8 text");
    return GM_OK;
}

/* Where the key of a "key: value" line ends (the ':'), or 0 when the line is no such key. */
static size_t key_end(const struct yreader *y, const struct yline *ln)
{
    const char *t = y->text;
    if (strchr("-?:,[]{}#&*!|>'\"%@`", t[ln->start]))
        return 0;
    for (size_t i = ln->start; i < ln->end; i++) {
        if (t[i] == '#' && (t[i - 1] == ' ' || t[i - 1] == '\t'))
            return 0;
        if (t[i] == ':' && (i + 1 == ln->end || t[i + 1] == ' '))
            return i;
    }
    return 0;
}

static bool is_item(const struct yreader *y, const struct yline *ln)
{
    return y->text[ln->start] == '-' && (ln->start + 1 == ln->end || y->text[ln->start + 1] == ' ');
}

static enum gm_status read_node(struct yreader *y, size_t indent, int depth, json_t **out);

/* The value of the block whose first line is the next one, indented more than 'parent'
 * ('parent' itself for a sequence under a mapping's key). */
static enum gm_status read_nested(struct yreader *y, const struct yline *key_line, size_t parent,
                                  bool sequence_may_align, int depth, json_t **out)
{
    if (y->at < y->n) {
        const struct yline *next = &y->lines[y->at];
        if (next->indent > parent ||
            (sequence_may_align && next->indent == parent && is_item(y, next)))
            return read_node(y, next->indent, depth + 1, out);
    }
    return refuse(y, key_line->number, "a key or \"-\" without a value");
}

static enum gm_status read_sequence(struct yreader *y, size_t indent, int depth, json_t *seq)
{
    enum gm_status st;
    while (y->at < y->n && y->lines[y->at].indent == indent && is_item(y, &y->lines[y->at])) {
        struct yline *ln = &y->lines[y->at];
        json_t *item = NULL;
        size_t s = ln->start + 1;
        while (s < ln->end && y->text[s] == ' ')
            s++;
        if (s == ln->end || y->text[s] == '#') {
            y->at++;
            st = read_nested(y, ln, indent, false, depth, &item);
        } else {
            /* "- key: value": the rest of the line is the item's first line, at its column */
            ln->indent += s - ln->start;
            ln->start = s;
            st = read_node(y, ln->indent, depth + 1, &item);
        }
        if (st != GM_OK)
            return st;
        if (json_array_append_new(seq, item))
            return gm_fail(y->err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    }
    return GM_OK;
}

static enum gm_status read_mapping(struct yreader *y, size_t indent, int depth, json_t *map)
{
    enum gm_status st;
    while (y->at < y->n && y->lines[y->at].indent == indent && !is_item(y, &y->lines[y->at])) {
        const struct yline *ln = &y->lines[y->at];
        size_t colon = key_end(y, ln), s;
        size_t klen;
        json_t *val = NULL;
        char key[128];

        if (!colon)
            return refuse(y, ln->number,
                          "expected \"key: value\" (plain keys only; multi-line values are not "
                          "supported)");
        klen = colon - ln->start;
        while (klen && (y->text[ln->start + klen - 1] == ' '))
            klen--;
        if (klen >= sizeof(key))
            return refuse(y, ln->number, "a key longer than 127 bytes");
        memcpy(key, y->text + ln->start, klen);
        key[klen] = '\0';
        if (json_object_get(map, key))
            return refuse(y, ln->number, "a duplicate key");
        for (s = colon + 1; s < ln->end && y->text[s] == ' '; s++)
            ;
        y->at++;
        if (s == ln->end || y->text[s] == '#')
            st = read_nested(y, ln, indent, true, depth, &val);
        else
            st = read_scalar(y, ln, s, &val);
        if (st != GM_OK)
            return st;
        if (json_object_set_new(map, key, val))
            return refuse(y, ln->number, "a key that is not UTF-8 text");
    }
    return GM_OK;
}

/* The block (sequence, mapping or single scalar) whose first line is the next one, at
 * column 'indent'; its lines end at one indented less or at the end. */
static enum gm_status read_node(struct yreader *y, size_t indent, int depth, json_t **out)
{
    const struct yline *first = &y->lines[y->at];
    enum gm_status st;
    json_t *node;

    if (depth > YAML_MAX_DEPTH)
        return refuse(y, first->number, "nested deeper than category rules go");
    if (!is_item(y, first) && !key_end(y, first)) {
        y->at++;
        if ((st = read_scalar(y, first, first->start, out)) != GM_OK)
            return st;
    } else {
        bool seq = is_item(y, first);
        node = seq ? json_array() : json_object();
        if (!node)
            return gm_fail(y->err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
        st = seq ? read_sequence(y, indent, depth, node) : read_mapping(y, indent, depth, node);
        if (st != GM_OK) {
            json_decref(node);
            return st;
        }
        *out = node;
    }
    if (y->at < y->n && y->lines[y->at].indent >= indent) {
        const struct yline *next = &y->lines[y->at];
        /* a key after a sequence at its column is its parent mapping's next key */
        bool parents = next->indent == indent && json_is_array(*out) && !is_item(y, next);
        if (!parents) {
            json_decref(*out);
            *out = NULL;
            return refuse(y, next->number,
                          next->indent > indent
                              ? "unexpected indentation (multi-line values are not supported)"
                              : "a sequence item and a key at the same level, or a second "
                                "value");
        }
    }
    return GM_OK;
}

enum gm_status ana_rules_yaml(const char *text, size_t len, json_t **out, struct gm_error *err)
{
    struct yreader y = {text, NULL, 0, 0, err};
    enum gm_status st;
    size_t top = 0; /* the document's column ("- key" lines' columns change as read) */

    *out = NULL;
    if ((st = split_lines(&y, len)) == GM_OK) {
        if (!y.n)
            st = gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET, "no rules (an empty document)");
        else if ((st = read_node(&y, top = y.lines[0].indent, 1, out)) == GM_OK && y.at < y.n) {
            json_decref(*out);
            *out = NULL;
            st = refuse(&y, y.lines[y.at].number,
                        y.lines[y.at].indent == top
                            ? "a sequence item and a key at the same level, or a second value"
                            : "unexpected indentation");
        }
    }
    gm_free(y.lines);
    return st;
}
