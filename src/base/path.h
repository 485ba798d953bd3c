/* SPDX-License-Identifier: MIT */
/* path.h - file paths as a snapshot's frames write them (library-internal): Linux and
 * Windows programs both, so '/' and '\\' are the same character in every comparison. */
#ifndef GM_BASE_PATH_H
#define GM_BASE_PATH_H

#include <stdbool.h>
#include <stddef.h>

/* Whether 'path' contains 'needle', '/' and '\\' alike. */
bool gm_path_has(const char *path, const char *needle);

/* Whether 'path' starts with 'prefix', '/' and '\\' alike. */
bool gm_path_starts(const char *path, const char *prefix);

/* Whether 'path' ends with the whole components of 'suffix' ("gpt/model.py" ends
 * "/home/u/gpt/model.py", "model.py" does not end "mymodel.py"), '/' and '\\' alike. */
bool gm_path_ends(const char *path, const char *suffix);

/* The folder of a path on this machine ('/' only) into out[n]: "." when it has none, "/"
 * for a file at the root. */
void gm_path_folder(const char *path, char *out, size_t n);

/* Whether 'c' separates path components. */
static inline bool gm_path_is_sep(char c)
{
    return c == '/' || c == '\\';
}

#endif
