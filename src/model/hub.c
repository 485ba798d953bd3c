/* SPDX-License-Identifier: MIT */
/* hub.c - Hugging Face Hub ids resolved offline, from the local hub cache that
 * huggingface_hub (huggingface-cli download, from_pretrained) fills.
 *
 * Where the cache is (huggingface_hub's constants.py): HF_HUB_CACHE, else the older
 * HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
 * ~/.cache/huggingface/hub.  The environment is read through the caller's lookup function
 * (the library reads no environment of its own).
 *
 * Layout of one model ("org/name"; a name without an organisation is "name" alone):
 *   <cache>/models--org--name/refs/<revision>       the commit a branch or tag points to
 *   <cache>/models--org--name/snapshots/<commit>/   config.json, *.safetensors, *.gguf ...
 *                                                   (symbolic links into ../../blobs)
 * The snapshot is the one refs/<revision> names (refs/main without a revision), or the
 * folder the revision names when it is a commit; when no ref says, the newest snapshot
 * that holds a config.json.  Ids and revisions are checked to be names (letters, digits,
 * '.', '-', '_'), never paths, before any is joined to the cache folder. */
#include "gpumem/model.h"

#include "gpumem/error.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static bool name_ok(const char *s, size_t n)
{
    if (n == 0 || n > 96 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_'))
            return false;
    }
    return true;
}

bool gm_hf_id_parse(const char *spec, struct gm_hf_id *out)
{
    const char *at, *slash, *name;
    size_t n_org = 0, n_name;
    memset(out, 0, sizeof(*out));
    if (!spec)
        return false;
    at = strchr(spec, '@');
    n_name = at ? (size_t)(at - spec) : strlen(spec);
    slash = memchr(spec, '/', n_name);
    name = spec;
    if (slash) {
        n_org = (size_t)(slash - spec);
        name = slash + 1;
        n_name -= n_org + 1;
        if (!name_ok(spec, n_org))
            return false;
    }
    if (!name_ok(name, n_name) || (at && !name_ok(at + 1, strlen(at + 1))))
        return false;
    if (n_org >= sizeof out->org || n_name >= sizeof out->name ||
        (at && strlen(at + 1) >= sizeof out->revision))
        return false;
    memcpy(out->org, spec, n_org);
    memcpy(out->name, name, n_name);
    if (at)
        snprintf(out->revision, sizeof out->revision, "%s", at + 1);
    return true;
}

bool gm_hf_hub_cache(gm_env_fn env, char *out, size_t n)
{
    const char *v;
    int w;
    if (!env || !n)
        return false;
    if ((v = env("HF_HUB_CACHE")) && *v)
        w = snprintf(out, n, "%s", v);
    else if ((v = env("HUGGINGFACE_HUB_CACHE")) && *v)
        w = snprintf(out, n, "%s", v);
    else if ((v = env("HF_HOME")) && *v)
        w = snprintf(out, n, "%s/hub", v);
    else if ((v = env("XDG_CACHE_HOME")) && *v)
        w = snprintf(out, n, "%s/huggingface/hub", v);
    else if ((v = env("HOME")) && *v)
        w = snprintf(out, n, "%s/.cache/huggingface/hub", v);
    else
        return false;
    return w > 0 && (size_t)w < n;
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The commit refs/<rev> names (a 40-hex line), into commit[41]. */
static bool read_ref(const char *repo, const char *rev, char commit[41])
{
    char path[4096], line[64];
    FILE *f;
    size_t k = 0;
    if ((size_t)snprintf(path, sizeof path, "%s/refs/%s", repo, rev) >= sizeof path ||
        !(f = fopen(path, "r")))
        return false;
    if (!fgets(line, sizeof line, f))
        line[0] = '\0';
    fclose(f);
    while (k < 40 && ((line[k] >= '0' && line[k] <= '9') || (line[k] >= 'a' && line[k] <= 'f')))
        k++;
    if (k != 40)
        return false;
    memcpy(commit, line, 40);
    commit[40] = '\0';
    return true;
}

/* The newest snapshot of 'repo' that holds a config.json, into commit[]. */
static bool newest_snapshot(const char *repo, char *commit, size_t n)
{
    char dir[4096], path[4096];
    DIR *d;
    struct dirent *e;
    long long best = -1;
    if ((size_t)snprintf(dir, sizeof dir, "%s/snapshots", repo) >= sizeof dir ||
        !(d = opendir(dir)))
        return false;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        if (!name_ok(e->d_name, strlen(e->d_name)) ||
            (size_t)snprintf(path, sizeof path, "%s/%s/config.json", dir, e->d_name) >=
                sizeof path ||
            stat(path, &st) != 0 || (long long)st.st_mtime <= best)
            continue;
        best = (long long)st.st_mtime;
        snprintf(commit, n, "%s", e->d_name);
    }
    closedir(d);
    return best >= 0;
}

enum gm_status gm_hf_hub_snapshot(const char *cache, const struct gm_hf_id *id, char *out, size_t n,
                                  char commit[41], struct gm_error *err)
{
    char repo[4096], found[41] = "";
    const char *rev = id->revision[0] ? id->revision : "main";
    int w;
    if (!cache || !*cache)
        return gm_fail(err, GM_ERR_NOENT, GM_NO_OFFSET, "no Hugging Face cache");
    if (id->org[0])
        w = snprintf(repo, sizeof repo, "%s/models--%s--%s", cache, id->org, id->name);
    else
        w = snprintf(repo, sizeof repo, "%s/models--%s", cache, id->name);
    if (w < 0 || (size_t)w >= sizeof repo)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "Hugging Face cache path too long");
    if (!is_dir(repo))
        return gm_fail(err, GM_ERR_NOENT, GM_NO_OFFSET, "not in the Hugging Face cache");
    if (!read_ref(repo, rev, found)) {
        /* a commit given as the revision names its snapshot; else the newest one */
        if (id->revision[0])
            snprintf(found, sizeof found, "%.40s", id->revision);
        else if (!newest_snapshot(repo, found, sizeof found))
            return gm_fail(err, GM_ERR_NOENT, GM_NO_OFFSET,
                           "the Hugging Face cache holds no snapshot of it with a config.json");
    }
    w = snprintf(out, n, "%s/snapshots/%s", repo, found);
    if (w < 0 || (size_t)w >= n)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "Hugging Face cache path too long");
    if (!is_dir(out))
        return gm_fail(err, GM_ERR_NOENT, GM_NO_OFFSET,
                       "the Hugging Face cache has no snapshot for revision '%s'", rev);
    if (commit)
        snprintf(commit, 41, "%s", found);
    return GM_OK;
}
