/* SPDX-License-Identifier: MIT */
/* rank_names.c - which rank a file is (analysis.h, "ranks"): the rank its name carries, by
 * the names launchers and trainers give rank files, the order of several files, and the
 * rank files of a folder.
 *
 * Names read (the file's own name first, then its folders from the innermost out):
 *   rankR, rank_R, rank-R anywhere, "rank" not preceded by a letter   rank3_memory_snapshot.pickle
 *     (torchtitan memory_snapshot/iteration_N/rankR_memory_snapshot.pickle, oom_rankR.pickle,
 *     snapshot_oom_rank-R.pickle, rank3/snapshot.pickle)
 *   snapshot_R followed by an extension or nothing                     snapshot_3.pickle
 *     (Megatron-Bridge)
 * A folder argument stands for its rank files (names that carry a rank, and digests); a
 * folder with none but iteration_N folders (torchtitan) stands for the last iteration's. */
#include "analysis/analysis_int.h"

#include "base/path.h"
#include "base/vec.h"
#include "gpumem/arena.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Caps: a folder argument lists at most this many files, names at most this long. */
#define RANK_FILES_MAX   (1u << 20)
#define RANK_NAME_DIGITS 9 /* a rank below 10^9 */

static bool is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* The decimal number of at most RANK_NAME_DIGITS digits at s[0..n): its length, 0 if none. */
static size_t number_at(const char *s, size_t n, uint64_t *v)
{
    size_t k = 0;
    *v = 0;
    while (k < n && is_digit(s[k]) && k < RANK_NAME_DIGITS)
        *v = *v * 10 + (uint64_t)(s[k++] - '0');
    return k < n && is_digit(s[k]) ? 0 : k;
}

/* The rank one path component s[0..n) carries. */
static bool rank_in_component(const char *s, size_t n, uint64_t *rank)
{
    static const char snap[] = "snapshot_";
    for (size_t i = 0; i + 4 < n; i++) {
        size_t j = i + 4, k;
        if (lower(s[i]) != 'r' || lower(s[i + 1]) != 'a' || lower(s[i + 2]) != 'n' ||
            lower(s[i + 3]) != 'k' || (i && is_alpha(s[i - 1])))
            continue;
        if (s[j] == '_' || s[j] == '-')
            j++;
        k = number_at(s + j, n - j, rank);
        if (k && (j + k == n || !is_digit(s[j + k])))
            return true;
    }
    if (n > sizeof(snap) - 1 && !strncmp(s, snap, sizeof(snap) - 1)) {
        size_t j = sizeof(snap) - 1, k = number_at(s + j, n - j, rank);
        if (k && (j + k == n || s[j + k] == '.'))
            return true;
    }
    return false;
}

bool gm_rank_from_name(const char *path, uint64_t *rank)
{
    size_t end = path ? strlen(path) : 0;
    while (end > 0) {
        size_t start = end;
        while (start > 0 && !gm_path_is_sep(path[start - 1]))
            start--;
        if (rank_in_component(path + start, end - start, rank))
            return true;
        end = start ? start - 1 : 0;
    }
    return false;
}

int gm_rank_name_cmp(const char *a, const char *b)
{
    while (*a && *b) {
        if (is_digit(*a) && is_digit(*b)) {
            const char *x = a, *y = b;
            size_t lx, ly;
            while (*x == '0' && is_digit(x[1]))
                x++;
            while (*y == '0' && is_digit(y[1]))
                y++;
            for (lx = 0; is_digit(x[lx]); lx++)
                ;
            for (ly = 0; is_digit(y[ly]); ly++)
                ;
            if (lx != ly)
                return lx < ly ? -1 : 1;
            for (size_t i = 0; i < lx; i++)
                if (x[i] != y[i])
                    return x[i] < y[i] ? -1 : 1;
            a = x + lx;
            b = y + ly;
            continue;
        }
        if (*a != *b)
            return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
        a++;
        b++;
    }
    return *a ? 1 : *b ? -1 : 0;
}

const char *gm_rank_source_name(enum gm_rank_source s)
{
    static const char *const names[] = {"argument order", "device", "file name"};
    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

/* ---- the files of several arguments ---- */

struct name_list {
    struct gm_arena *arena;
    char **v;
    size_t n, cap;
};

static enum gm_status add_name(struct name_list *l, const char *dir, const char *name,
                               struct gm_error *err)
{
    size_t ld = dir ? strlen(dir) : 0, ln = strlen(name);
    char *p = gm_arena_alloc(l->arena, ld + 1 + ln + 1, 1);
    if (!p || !GM_VEC_RESERVE(l->v, l->cap, l->n + 1, NULL))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "rank files: out of memory");
    if (dir) {
        memcpy(p, dir, ld);
        if (ld && dir[ld - 1] != '/')
            p[ld++] = '/';
    }
    memcpy(p + ld, name, ln + 1);
    l->v[l->n++] = p;
    return GM_OK;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static bool is_rank_name(const char *name)
{
    uint64_t r;
    return name[0] != '.' && (gm_rank_from_name(name, &r) || ends_with(name, ".digest"));
}

/* A rank's file of a folder: a digest by its name, a snapshot by its first bytes (a job's
 * folder also holds rank-named logs and JSON series). */
static bool is_rank_content(const char *path, const char *name)
{
    unsigned char head[2];
    size_t n = 0;
    FILE *f;
    if (ends_with(name, ".digest"))
        return true;
    if (!(f = fopen(path, "rb")))
        return false;
    n = fread(head, 1, sizeof(head), f);
    fclose(f);
    return gm_snapshot_head_plausible(head, n);
}

static int cmp_names(const void *a, const void *b)
{
    return gm_rank_name_cmp(*(const char *const *)a, *(const char *const *)b);
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Whether dir/name is a regular file holding a rank (never opens anything else). */
static bool is_rank_file(const char *dir, const char *name, struct gm_arena *scratch)
{
    size_t ld = strlen(dir), ln = strlen(name);
    char *p = gm_arena_alloc(scratch, ld + ln + 2, 1);
    struct stat st;
    if (!p)
        return false;
    memcpy(p, dir, ld);
    p[ld] = '/';
    memcpy(p + ld + 1, name, ln + 1);
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && is_rank_content(p, name);
}

/* Drop from the sorted names l->v[first..n) every snapshot whose digest is among them (its
 * name less the extension, plus ".digest": as gpumem.torch's record() writes them side by
 * side): one rank, which its digest stands for (the same rank figures, kilobytes read). */
static enum gm_status drop_digested(struct name_list *l, size_t first, struct gm_arena *scratch,
                                    struct gm_error *err)
{
    size_t n = l->n - first, w = first;
    bool *drop = n ? gm_arena_alloc(scratch, n * sizeof(*drop), 1) : NULL;
    if (n && !drop)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "rank files: out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *p = l->v[first + i], *slash = strrchr(p, '/');
        const char *dot = strrchr(slash ? slash + 1 : p, '.');
        char *want;
        drop[i] = false;
        if (!dot || ends_with(p, ".digest"))
            continue;
        if (!(want = gm_arena_alloc(scratch, (size_t)(dot - p) + sizeof(".digest"), 1)))
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "rank files: out of memory");
        memcpy(want, p, (size_t)(dot - p));
        memcpy(want + (dot - p), ".digest", sizeof(".digest"));
        drop[i] = bsearch(&want, l->v + first, n, sizeof(*l->v), cmp_names) != NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (!drop[i])
            l->v[w++] = l->v[first + i];
    l->n = w;
    return GM_OK;
}

/* The rank files of folder 'dir' (or of its last iteration_N folder), in natural order. */
static enum gm_status list_dir(struct name_list *l, const char *dir, int depth,
                               struct gm_error *err)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    struct gm_arena scratch;
    size_t first = l->n, n_seen = 0;
    const char *last_iter = NULL;
    enum gm_status st = GM_OK;
    if (!d)
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "'%s': cannot list the folder", dir);
    gm_arena_init(&scratch, 0);
    while (st == GM_OK && (e = readdir(d)) != NULL) {
        if (++n_seen > RANK_FILES_MAX) {
            st = gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "'%s': more than %u entries", dir,
                         RANK_FILES_MAX);
        } else if (is_rank_name(e->d_name) && is_rank_file(dir, e->d_name, &scratch)) {
            st = add_name(l, dir, e->d_name, err);
        } else if (!strncmp(e->d_name, "iteration_", 10) &&
                   (!last_iter || gm_rank_name_cmp(e->d_name, last_iter) > 0)) {
            last_iter = gm_arena_strndup(&scratch, e->d_name, strlen(e->d_name));
        }
    }
    closedir(d);
    if (st == GM_OK && l->n == first && last_iter && depth == 0) {
        size_t ld = strlen(dir);
        char *sub = gm_arena_alloc(&scratch, ld + strlen(last_iter) + 2, 1);
        if (!sub) {
            st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "rank files: out of memory");
        } else {
            memcpy(sub, dir, ld);
            sub[ld] = '/';
            memcpy(sub + ld + 1, last_iter, strlen(last_iter) + 1);
            st = list_dir(l, sub, depth + 1, err);
        }
    } else if (st == GM_OK && l->n == first) {
        st = gm_fail(err, GM_ERR_NOENT, GM_NO_OFFSET,
                     "'%s' is a folder without rank files (names with rankR or snapshot_R, "
                     "or .digest files): give a snapshot file, or '-' for standard input",
                     dir);
    }
    if (st == GM_OK) {
        qsort(l->v + first, l->n - first, sizeof(*l->v), cmp_names);
        st = drop_digested(l, first, &scratch, err);
    }
    gm_arena_release(&scratch);
    return st;
}

struct keyed {
    char *path;
    uint64_t rank;
    size_t order;
};

static int cmp_keyed(const void *a, const void *b)
{
    const struct keyed *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

enum gm_status gm_rank_files_list(const char *const *args, size_t n, struct gm_rank_files *out,
                                  struct gm_error *err)
{
    struct name_list l = {0};
    struct keyed *k = NULL;
    bool named = true;
    enum gm_status st = GM_OK;
    memset(out, 0, sizeof(*out));
    if (!(l.arena = gm_calloc(1, sizeof(*l.arena))))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "rank files: out of memory");
    gm_arena_init(l.arena, 0);
    for (size_t i = 0; i < n && st == GM_OK; i++)
        st = strcmp(args[i], "-") && is_dir(args[i]) ? list_dir(&l, args[i], 0, err)
                                                     : add_name(&l, NULL, args[i], err);
    /* every name carries a rank: the files in rank order (stable: a rank named twice keeps
     * the arguments' order); otherwise the arguments' order */
    if (st == GM_OK && l.n > 1 && !(k = gm_calloc(l.n, sizeof(*k))))
        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "rank files: out of memory");
    for (size_t i = 0; k && i < l.n && named; i++) {
        k[i] = (struct keyed){l.v[i], 0, i};
        named = gm_rank_from_name(l.v[i], &k[i].rank);
    }
    if (k && named) {
        qsort(k, l.n, sizeof(*k), cmp_keyed);
        for (size_t i = 0; i < l.n; i++)
            l.v[i] = k[i].path;
    }
    gm_free(k);
    if (st != GM_OK) {
        gm_free(l.v);
        gm_arena_release(l.arena);
        gm_free(l.arena);
        return st;
    }
    out->arena = l.arena;
    out->paths = l.v;
    out->n = l.n;
    return GM_OK;
}

void gm_rank_files_release(struct gm_rank_files *f)
{
    if (!f)
        return;
    gm_free(f->paths);
    if (f->arena) {
        gm_arena_release(f->arena);
        gm_free(f->arena);
    }
    memset(f, 0, sizeof(*f));
}
