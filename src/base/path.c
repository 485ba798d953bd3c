/* SPDX-License-Identifier: MIT */
/* path.c - path comparisons with '/' and '\\' alike, and a path's folder (path.h). */
#include "base/path.h"

#include <stdio.h>
#include <string.h>

static bool same_char(char a, char b)
{
    return a == b || (gm_path_is_sep(a) && gm_path_is_sep(b));
}

bool gm_path_starts(const char *path, const char *prefix)
{
    size_t i = 0;
    while (prefix[i] && path[i] && same_char(path[i], prefix[i]))
        i++;
    return prefix[i] == '\0';
}

bool gm_path_has(const char *path, const char *needle)
{
    if (!*needle)
        return true;
    for (const char *p = path; *p; p++)
        if (gm_path_starts(p, needle))
            return true;
    return false;
}

bool gm_path_ends(const char *path, const char *suffix)
{
    size_t lp = strlen(path), ls = strlen(suffix);
    if (!ls || ls > lp || !gm_path_starts(path + lp - ls, suffix))
        return false;
    /* whole components: "model.py" is not the end of "mymodel.py" */
    return ls == lp || gm_path_is_sep(path[lp - ls - 1]) || gm_path_is_sep(suffix[0]);
}

void gm_path_folder(const char *path, char *out, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, n, ".");
    else if (slash == path)
        snprintf(out, n, "/");
    else
        snprintf(out, n, "%.*s", (int)(slash - path), path);
}
