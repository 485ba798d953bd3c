/* SPDX-License-Identifier: MIT */
/* json_in.h - typed reads of members of gpumem's own JSON documents, parsed by jansson
 * (library-internal).
 *
 * gpumem's documents write a byte count as a non-negative integer and leave out (or write
 * null) what was not measured.  These helpers keep that meaning: a member that is absent,
 * null, negative or not an integer is an invalid reading, never 0; a string member that is
 * absent or not a string is NULL.  Nothing here allocates. */
#ifndef GM_BASE_JSON_IN_H
#define GM_BASE_JSON_IN_H

#include "gpumem/device.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* obj[key] as a reading of bytes (or any non-negative count). */
static inline struct gm_reading gm_jin_reading(const json_t *obj, const char *key)
{
    const json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return GM_READING_NONE;
    return (struct gm_reading){(uint64_t)json_integer_value(v), true};
}

/* obj[key] as a string, borrowed from the document; NULL when not a string. */
static inline const char *gm_jin_str(const json_t *obj, const char *key)
{
    const json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* obj[key] as a boolean; 'dflt' when absent or not a boolean. */
static inline bool gm_jin_bool(const json_t *obj, const char *key, bool dflt)
{
    const json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

/* obj[key] when it is an object (or an array for gm_jin_array), else NULL. */
static inline json_t *gm_jin_object(const json_t *obj, const char *key)
{
    json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    return json_is_object(v) ? v : NULL;
}

static inline json_t *gm_jin_array(const json_t *obj, const char *key)
{
    json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    return json_is_array(v) ? v : NULL;
}

/* A scalar member as text into out[n]: a string as it is, a number, boolean or null as
 * JSON writes it, an object or array as "{...}" / "[...]".  Returns 'out'. */
static inline const char *gm_jin_text(const json_t *v, char *out, size_t n)
{
    char *text;
    if (json_is_string(v)) {
        snprintf(out, n, "%s", json_string_value(v));
    } else if (json_is_object(v) || json_is_array(v) || !v) {
        snprintf(out, n, "%s", !v ? "" : json_is_object(v) ? "{...}" : "[...]");
    } else if ((text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT)) != NULL) {
        snprintf(out, n, "%s", text);
        free(text);
    } else {
        snprintf(out, n, "?");
    }
    return out;
}

#endif
