/* SPDX-License-Identifier: MIT */
/* modelfile.c - the summary of a model's weight files, and loading it from a path.
 *
 * A path is a .safetensors file, a model.safetensors.index.json (its weight_map names the
 * shards, read from the same folder), a .gguf file, or a folder holding one of these.  Only
 * headers are read: a safetensors header is its 8-byte length plus that many bytes; a GGUF
 * header is read as a growing prefix of the file until the parser has everything it needs. */
#include "model/modelfile_int.h"

#include "base/buf.h"
#include "base/file.h"
#include "base/json_load.h"
#include "base/path.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void gm_modelfile_limits_default(struct gm_modelfile_limits *lim)
{
    lim->max_header_bytes = 100000000;
    lim->max_tensors = (uint64_t)1 << 22;
    lim->max_files = 16384;
    lim->max_string = (uint64_t)64 << 20;
    lim->max_array = (uint64_t)1 << 26;
}

void gm_modelfile_init(struct gm_modelfile *m)
{
    memset(m, 0, sizeof(*m));
    m->gguf_file_type = UINT64_MAX;
    gm_arena_init(&m->arena, 0);
}

void gm_modelfile_release(struct gm_modelfile *m)
{
    if (!m)
        return;
    gm_free(m->tensors);
    gm_arena_release(&m->arena);
    gm_modelfile_init(m);
}

enum gm_status gm_modelfile_dtype_index(struct gm_modelfile *m, const char *name, uint32_t *idx,
                                        struct gm_error *err)
{
    for (size_t i = 0; i < m->n_dtypes; i++) {
        if (strcmp(m->dtypes[i].name, name) == 0) {
            *idx = (uint32_t)i;
            return GM_OK;
        }
    }
    if (m->n_dtypes == GM_MODELFILE_MAX_DTYPES)
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "more than %d distinct dtypes",
                       GM_MODELFILE_MAX_DTYPES);
    snprintf(m->dtypes[m->n_dtypes].name, sizeof(m->dtypes[0].name), "%s", name);
    *idx = (uint32_t)m->n_dtypes++;
    return GM_OK;
}

enum gm_status gm_modelfile_add_tensor(struct gm_modelfile *m,
                                       const struct gm_modelfile_limits *lim, const char *name,
                                       size_t len, uint32_t dtype, uint32_t n_dims,
                                       const uint64_t *shape, uint64_t n_elements, uint64_t n_bytes,
                                       uint64_t offset, struct gm_error *err)
{
    struct gm_modelfile_tensor *t;
    if (m->n_tensors >= lim->max_tensors)
        return gm_fail(err, GM_ERR_LIMIT, offset, "more than %llu tensors",
                       (unsigned long long)lim->max_tensors);
    if (n_dims > GM_MODELFILE_MAX_DIMS)
        return gm_fail(err, GM_ERR_UNSUPPORTED, offset, "tensor '%.*s': %u dimensions (at most %d)",
                       (int)(len > 64 ? 64 : len), name, n_dims, GM_MODELFILE_MAX_DIMS);
    if (m->n_tensors == m->tensors_cap) {
        size_t cap = m->tensors_cap ? m->tensors_cap * 2 : 256;
        void *p;
        if (cap > SIZE_MAX / sizeof(*m->tensors))
            return gm_fail(err, GM_ERR_NOMEM, offset, "tensor table: too large");
        p = gm_realloc(m->tensors, cap * sizeof(*m->tensors));
        if (!p)
            return gm_fail(err, GM_ERR_NOMEM, offset, "tensor table: out of memory");
        m->tensors = p;
        m->tensors_cap = cap;
    }
    t = &m->tensors[m->n_tensors];
    memset(t, 0, sizeof(*t));
    t->name = gm_arena_strndup(&m->arena, name, len);
    if (!t->name)
        return gm_fail(err, GM_ERR_NOMEM, offset, "tensor name: out of memory");
    t->dtype = dtype;
    t->n_dims = n_dims;
    for (uint32_t i = 0; i < n_dims; i++)
        t->shape[i] = shape[i];
    t->n_elements = n_elements;
    t->n_bytes = n_bytes;
    m->n_tensors++;
    m->n_params = gm_add_sat(m->n_params, n_elements);
    m->n_bytes = gm_add_sat(m->n_bytes, n_bytes);
    m->dtypes[dtype].n_tensors++;
    m->dtypes[dtype].n_elements = gm_add_sat(m->dtypes[dtype].n_elements, n_elements);
    m->dtypes[dtype].n_bytes = gm_add_sat(m->dtypes[dtype].n_bytes, n_bytes);
    return GM_OK;
}

/* Length of the module part of a tensor name: up to its last '.', or the whole name. */
static size_t module_len(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot ? (size_t)(dot - name) : strlen(name);
}

static int cmp_tensor_module(const void *a, const void *b)
{
    const struct gm_modelfile_tensor *const *x = a, *const *y = b;
    size_t lx = module_len((*x)->name), ly = module_len((*y)->name);
    int c = memcmp((*x)->name, (*y)->name, lx < ly ? lx : ly);
    if (c)
        return c;
    return lx < ly ? -1 : lx > ly;
}

static int cmp_tensor_name(const void *a, const void *b)
{
    const struct gm_modelfile_tensor *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

enum gm_status gm_modelfile_finish(struct gm_modelfile *m, struct gm_error *err)
{
    const struct gm_modelfile_tensor **v;
    size_t i = 0;
    m->largest_module[0] = '\0';
    m->largest_module_params = 0;
    if (m->n_tensors == 0)
        return GM_OK;
    v = gm_calloc(m->n_tensors, sizeof(*v));
    if (!v)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "module table: out of memory");
    for (size_t k = 0; k < m->n_tensors; k++)
        v[k] = &m->tensors[k];
    /* A tensor name stored twice (in one GGUF file or in two shards) would be counted
     * twice: refuse it. */
    qsort(v, m->n_tensors, sizeof(*v), cmp_tensor_name);
    for (size_t k = 1; k < m->n_tensors; k++) {
        if (strcmp(v[k]->name, v[k - 1]->name) == 0) {
            enum gm_status st = gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                                        "tensor '%.160s' is stored twice", v[k]->name);
            gm_free(v);
            return st;
        }
    }
    qsort(v, m->n_tensors, sizeof(*v), cmp_tensor_module);
    while (i < m->n_tensors) {
        size_t j = i + 1;
        uint64_t sum = v[i]->n_elements;
        while (j < m->n_tensors && cmp_tensor_module(&v[i], &v[j]) == 0)
            sum = gm_add_sat(sum, v[j++]->n_elements);
        if (sum > m->largest_module_params) {
            size_t len = module_len(v[i]->name);
            m->largest_module_params = sum;
            snprintf(m->largest_module, sizeof(m->largest_module), "%.*s",
                     (int)(len > 150 ? 150 : len), v[i]->name);
        }
        i = j;
    }
    gm_free(v);
    return GM_OK;
}

/* ---- loading from a path ---- */

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Read the first 'want' bytes of 'fd' into a fresh buffer (*out, gm_free it). */
static enum gm_status read_prefix(int fd, const char *path, uint64_t want, uint8_t **out,
                                  struct gm_error *err)
{
    uint8_t *p;
    enum gm_status st;
    if (want > SIZE_MAX - 1)
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "'%s': header too large", path);
    p = gm_malloc((size_t)want + 1);
    if (!p)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "'%s': out of memory", path);
    st = gm_file_read_at(fd, path, 0, p, (size_t)want, err);
    if (st) {
        gm_free(p);
        return st;
    }
    *out = p;
    return GM_OK;
}

static enum gm_status load_safetensors_file(const char *path, const struct gm_modelfile_limits *lim,
                                            struct gm_modelfile *m, struct gm_error *err)
{
    uint64_t size, hlen;
    uint8_t *data = NULL;
    int fd;
    enum gm_status st = gm_file_open(path, &fd, &size, err);
    if (st)
        return st;
    if (size < 8) {
        st = gm_file_too_short(fd, path, size, "a safetensors file", err);
        goto out;
    }
    st = read_prefix(fd, path, 8, &data, err);
    if (st)
        goto out;
    hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | data[i];
    gm_free(data);
    data = NULL;
    /* The length is checked here as well as in the parser so that a hostile length never
     * reaches the allocation. */
    if (hlen > lim->max_header_bytes) {
        st = gm_fail(err, GM_ERR_LIMIT, 0, "'%s': header of %llu bytes exceeds the limit of %llu",
                     path, (unsigned long long)hlen, (unsigned long long)lim->max_header_bytes);
        goto out;
    }
    if (hlen > size - 8) {
        st =
            gm_fail(err, GM_ERR_FORMAT, 0, "'%s': header length %llu runs past the end of the file",
                    path, (unsigned long long)hlen);
        goto out;
    }
    st = read_prefix(fd, path, 8 + hlen, &data, err);
    if (st)
        goto out;
    st = gm_safetensors_parse(data, (size_t)(8 + hlen), size, lim, m, err);
    if (st)
        gm_error_prefix(err, "%s", path);
    m->n_files++;
    m->file_bytes = gm_add_sat(m->file_bytes, size);
    m->header_bytes = gm_add_sat(m->header_bytes, 8 + hlen);
out:
    gm_free(data);
    close(fd);
    return st;
}

static enum gm_status load_gguf_file(const char *path, const struct gm_modelfile_limits *lim,
                                     struct gm_modelfile *m, struct gm_error *err)
{
    uint64_t size, want;
    int fd;
    enum gm_status st = gm_file_open(path, &fd, &size, err);
    if (st)
        return st;
    if (size == 0) {
        st = gm_file_too_short(fd, path, size, "a GGUF file", err);
        close(fd);
        return st;
    }
    /* Start with 4 MiB and double until the header fits: most GGUF headers are a few MB
     * (the tokenizer vocabulary dominates). */
    want = (uint64_t)4 << 20;
    for (;;) {
        uint8_t *data = NULL;
        uint64_t len = want < size ? want : size;
        bool whole = len == size;
        bool need_more = false;
        if (len > lim->max_header_bytes) {
            len = lim->max_header_bytes;
            whole = len == size;
        }
        st = read_prefix(fd, path, len, &data, err);
        if (st)
            break;
        gm_modelfile_release(m);
        st = gm_gguf_parse_prefix(data, (size_t)len, size, lim, m, &need_more, err);
        gm_free(data);
        if (st && need_more) {
            /* The parser ran out of the prefix: read more, or give up at the cap. */
            if (whole) {
                st = gm_fail(err, GM_ERR_FORMAT, size, "'%s': truncated GGUF header", path);
                break;
            }
            if (len >= lim->max_header_bytes) {
                st = gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET,
                             "'%s': GGUF header larger than the limit of %llu bytes", path,
                             (unsigned long long)lim->max_header_bytes);
                break;
            }
            want = len * 2;
            continue;
        }
        if (st) {
            gm_error_prefix(err, "%s", path);
            break;
        }
        m->n_files = 1;
        m->file_bytes = size;
        break;
    }
    close(fd);
    return st;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Join folder and name into 'out'. */
static enum gm_status join(char *out, size_t n, const char *dir, const char *name,
                           struct gm_error *err)
{
    int k = snprintf(out, n, "%s/%s", dir, name);
    if (k < 0 || (size_t)k >= n)
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "path too long: '%s/%s'", dir, name);
    return GM_OK;
}

/* The config.json beside the weights, when there is one.  Whatever it is (a FIFO, a
 * folder): reading it later says what is wrong, rather than "no config.json". */
static void set_config_path(struct gm_modelfile *m, const char *dir)
{
    char p[4096];
    struct stat st;
    if (snprintf(p, sizeof p, "%s/config.json", dir) < (int)sizeof p && stat(p, &st) == 0)
        snprintf(m->config_path, sizeof m->config_path, "%s", p);
}

/* Every tensor an index's weight_map names must be in the shards that were read: an index
 * that promises tensors its shards do not hold describes another checkpoint. */
static enum gm_status check_index_covered(const char *path, json_t *map,
                                          const struct gm_modelfile *m, struct gm_error *err)
{
    const char **names;
    const char *key;
    json_t *v;
    enum gm_status st = GM_OK;

    names = gm_calloc(m->n_tensors ? m->n_tensors : 1, sizeof(*names));
    if (!names)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "'%s': out of memory", path);
    for (size_t i = 0; i < m->n_tensors; i++)
        names[i] = m->tensors[i].name;
    qsort(names, m->n_tensors, sizeof(*names), cmp_str);
    json_object_foreach(map, key, v)
    {
        if (!bsearch(&key, names, m->n_tensors, sizeof(*names), cmp_str)) {
            st = gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                         "'%s': the index puts tensor '%.160s' in '%.160s', which does not hold "
                         "it",
                         path, key, json_string_value(v));
            break;
        }
    }
    gm_free(names);
    return st;
}

/* "model-00002-of-00004.safetensors": *no = 2, *of = 4, *prefix_len = length of "model".
 * false for a name without that pattern (transformers' shard naming). */
static bool shard_name(const char *name, unsigned long *no, unsigned long *of, size_t *prefix_len)
{
    const char *dot = strstr(name, ".safetensors"), *p;
    char *end;
    size_t n = strlen(name);
    if (!dot || (size_t)(dot - name) + 12 != n)
        return false;
    /* "-NNNNN-of-MMMMM" ends right before ".safetensors" */
    for (p = dot; p > name && p[-1] != '-'; p--) {
    }
    if (p == name || p - name < 4 || strncmp(p - 4, "-of-", 4) != 0)
        return false;
    *of = strtoul(p, &end, 10);
    if (end != dot || *of == 0)
        return false;
    for (p -= 4; p > name && p[-1] != '-'; p--) {
    }
    if (p == name)
        return false;
    *no = strtoul(p, &end, 10);
    if (strncmp(end, "-of-", 4) != 0 || *no == 0)
        return false;
    *prefix_len = (size_t)(p - 1 - name);
    return true;
}

struct shard {
    const char *name;
    size_t prefix_len;
    unsigned long no, of;
};

/* Shards of one set share the prefix and the total. */
static int cmp_set(const struct shard *x, const struct shard *y)
{
    size_t n = x->prefix_len < y->prefix_len ? x->prefix_len : y->prefix_len;
    int c = memcmp(x->name, y->name, n);
    if (c)
        return c;
    if (x->prefix_len != y->prefix_len)
        return x->prefix_len < y->prefix_len ? -1 : 1;
    return x->of < y->of ? -1 : x->of > y->of;
}

static int cmp_shard(const void *a, const void *b)
{
    const struct shard *x = a, *y = b;
    int c = cmp_set(x, y);
    if (c)
        return c;
    return x->no < y->no ? -1 : x->no > y->no;
}

/* Shards named "<prefix>-i-of-n" must all be there: with one of four, a folder would be
 * summarised as a quarter of the model.  GM_ERR_NOENT naming the first missing shard. */
static enum gm_status check_shards_complete(const char *dir, char *const *names, size_t n,
                                            struct gm_error *err)
{
    struct shard *v = gm_calloc(n ? n : 1, sizeof(*v));
    size_t k = 0;
    enum gm_status st = GM_OK;

    if (!v)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "'%s': out of memory", dir);
    for (size_t i = 0; i < n; i++) {
        v[k].name = names[i];
        if (shard_name(names[i], &v[k].no, &v[k].of, &v[k].prefix_len))
            k++;
    }
    qsort(v, k, sizeof(*v), cmp_shard);
    /* each group (same prefix, same total) must number 1, 2, ..., of */
    for (size_t i = 0; i < k && st == GM_OK;) {
        size_t j = i;
        unsigned long want = 1;
        while (j < k && cmp_set(&v[i], &v[j]) == 0) {
            if (v[j].no == want)
                want++;
            j++;
        }
        if (want <= v[i].of) {
            const char *num = v[i].name + v[i].prefix_len + 1;
            int width = (int)(strchr(num, '-') - num);
            st = gm_fail(err, GM_ERR_NOENT, GM_NO_OFFSET,
                         "'%s': shard '%.*s-%0*lu-of-%s' is missing (the names say %lu shards, "
                         "%zu present)",
                         dir, (int)v[i].prefix_len, v[i].name, width, want, num + width + 4,
                         v[i].of, j - i);
        } else if (j - i > v[i].of) {
            st = gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                         "'%s': %zu shards named '%.*s-*-of-%lu', more than the names say", dir,
                         j - i, (int)v[i].prefix_len, v[i].name, v[i].of);
        }
        i = j;
    }
    gm_free(v);
    return st;
}

/* The shards named by an index's weight_map, deduplicated and sorted. */
static enum gm_status load_index(const char *path, const struct gm_modelfile_limits *lim,
                                 struct gm_modelfile *m, struct gm_error *err)
{
    struct gm_buf b = GM_BUF_INIT;
    json_t *root = NULL, *map, *meta, *v;
    const char *key;
    const char **files = NULL;
    size_t n = 0;
    char dir[4096], p[4096];
    enum gm_status st;

    gm_buf_init(&b, (size_t)lim->max_header_bytes);
    st = gm_buf_read_file(&b, path, err);
    if (st)
        goto out;
    st = gm_json_load(b.data ? b.data : "", b.len, 0, &root, err);
    if (st) {
        gm_error_prefix(err, "'%s'", path);
        goto out;
    }
    map = json_object_get(root, "weight_map");
    if (!json_is_object(map)) {
        st = gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET, "'%s': no \"weight_map\" object", path);
        goto out;
    }
    meta = json_object_get(root, "metadata");
    if (json_is_object(meta) && json_is_integer(json_object_get(meta, "total_size")) &&
        json_integer_value(json_object_get(meta, "total_size")) > 0)
        m->index_total_size = (uint64_t)json_integer_value(json_object_get(meta, "total_size"));
    files = gm_calloc(json_object_size(map) + 1, sizeof(*files));
    if (!files) {
        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "'%s': out of memory", path);
        goto out;
    }
    json_object_foreach(map, key, v)
    {
        const char *s = json_string_value(v);
        if (!s || !*s || strchr(s, '/') || strcmp(s, "..") == 0) {
            st = gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                         "'%s': weight_map entry '%s' is not a file name in the same folder", path,
                         key);
            goto out;
        }
        files[n++] = s;
    }
    if (n == 0) {
        st = gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET, "'%s': empty weight_map", path);
        goto out;
    }
    qsort(files, n, sizeof(*files), cmp_str);
    gm_path_folder(path, dir, sizeof dir);
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && strcmp(files[i], files[i - 1]) == 0)
            continue;
        if (m->n_files >= lim->max_files) {
            st = gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "'%s': more than %llu shards", path,
                         (unsigned long long)lim->max_files);
            goto out;
        }
        st = join(p, sizeof p, dir, files[i], err);
        if (st)
            goto out;
        st = load_safetensors_file(p, lim, m, err);
        if (st) {
            if (st == GM_ERR_NOENT)
                gm_fail(err, GM_ERR_NOENT, GM_NO_OFFSET,
                        "'%s': shard '%s' named by the index is missing", path, files[i]);
            goto out;
        }
    }
    st = check_index_covered(path, map, m, err);
    if (st)
        goto out;
    m->format = GM_MODELFILE_SAFETENSORS;
    set_config_path(m, dir);
out:
    gm_free(files);
    json_decref(root);
    gm_buf_release(&b);
    return st;
}

/* A folder: an index if there is one, else every *.safetensors in name order, else a
 * single *.gguf. */
static enum gm_status load_dir(const char *dir, const struct gm_modelfile_limits *lim,
                               struct gm_modelfile *m, struct gm_error *err)
{
    DIR *d;
    struct dirent *e;
    char **st_files = NULL, **gguf = NULL;
    size_t n_st = 0, n_gguf = 0, cap = 0, cap_g = 0;
    char p[4096];
    enum gm_status st = GM_OK;

    if (join(p, sizeof p, dir, "model.safetensors.index.json", NULL) == GM_OK &&
        access(p, R_OK) == 0)
        return load_index(p, lim, m, err);
    d = opendir(dir);
    if (!d)
        return gm_fail(err, errno == ENOENT ? GM_ERR_NOENT : GM_ERR_IO, GM_NO_OFFSET, "'%s': %s",
                       dir, strerror(errno));
    while ((e = readdir(d)) != NULL) {
        char ***list;
        size_t *nn, *cc;
        if (e->d_name[0] == '.')
            continue;
        if (ends_with(e->d_name, ".safetensors")) {
            list = &st_files, nn = &n_st, cc = &cap;
        } else if (ends_with(e->d_name, ".gguf")) {
            list = &gguf, nn = &n_gguf, cc = &cap_g;
        } else {
            continue;
        }
        if (*nn >= lim->max_files) {
            st = gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "'%s': more than %llu weight files", dir,
                         (unsigned long long)lim->max_files);
            goto out;
        }
        if (*nn == *cc) {
            size_t c = *cc ? *cc * 2 : 16;
            char **q = gm_realloc(*list, c * sizeof(**list));
            if (!q) {
                st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "'%s': out of memory", dir);
                goto out;
            }
            *list = q;
            *cc = c;
        }
        (*list)[*nn] = gm_malloc(strlen(e->d_name) + 1);
        if (!(*list)[*nn]) {
            st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "'%s': out of memory", dir);
            goto out;
        }
        memcpy((*list)[*nn], e->d_name, strlen(e->d_name) + 1);
        (*nn)++;
    }
    if (n_st > 0) {
        qsort(st_files, n_st, sizeof(*st_files), cmp_str);
        st = check_shards_complete(dir, st_files, n_st, err);
        for (size_t i = 0; i < n_st && !st; i++) {
            st = join(p, sizeof p, dir, st_files[i], err);
            if (!st)
                st = load_safetensors_file(p, lim, m, err);
        }
        if (!st) {
            m->format = GM_MODELFILE_SAFETENSORS;
            set_config_path(m, dir);
        }
    } else if (n_gguf == 1) {
        st = join(p, sizeof p, dir, gguf[0], err);
        if (!st)
            st = load_gguf_file(p, lim, m, err);
    } else if (n_gguf > 1) {
        st = gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                     "'%s' holds %zu GGUF files: name the one to use", dir, n_gguf);
    } else {
        st = gm_fail(err, GM_ERR_NOENT, GM_NO_OFFSET,
                     "'%s': no *.safetensors, model.safetensors.index.json or *.gguf", dir);
    }
out:
    for (size_t i = 0; i < n_st; i++)
        gm_free(st_files[i]);
    for (size_t i = 0; i < n_gguf; i++)
        gm_free(gguf[i]);
    gm_free(st_files);
    gm_free(gguf);
    closedir(d);
    return st;
}

bool gm_modelfile_is_weights(const char *path)
{
    struct stat st;
    if (ends_with(path, ".safetensors") || ends_with(path, ".gguf") ||
        ends_with(path, ".safetensors.index.json"))
        return true;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        bool found = false;
        if (!d)
            return false;
        while (!found && (e = readdir(d)) != NULL)
            found = ends_with(e->d_name, ".safetensors") || ends_with(e->d_name, ".gguf") ||
                    strcmp(e->d_name, "model.safetensors.index.json") == 0;
        closedir(d);
        return found;
    }
    return false;
}

enum gm_status gm_modelfile_load(const char *path, const struct gm_modelfile_limits *lim,
                                 struct gm_modelfile *out, struct gm_error *err)
{
    struct gm_modelfile_limits def;
    struct stat sb;
    enum gm_status st;
    char dir[4096];

    if (!lim) {
        gm_modelfile_limits_default(&def);
        lim = &def;
    }
    gm_modelfile_release(out);
    if (stat(path, &sb) != 0)
        return gm_fail(err, errno == ENOENT ? GM_ERR_NOENT : GM_ERR_IO, GM_NO_OFFSET, "'%s': %s",
                       path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) {
        st = load_dir(path, lim, out, err);
    } else if (ends_with(path, ".json")) {
        st = load_index(path, lim, out, err);
    } else if (ends_with(path, ".gguf")) {
        st = load_gguf_file(path, lim, out, err);
    } else {
        /* Decide by content: GGUF files start with the magic "GGUF". */
        unsigned char magic[4] = {0};
        uint64_t size;
        int fd;
        bool is_gguf;
        st = gm_file_open(path, &fd, &size, err);
        if (st)
            return st;
        is_gguf = size >= 4 && gm_file_read_at(fd, path, 0, magic, 4, NULL) == GM_OK &&
                  memcmp(magic, "GGUF", 4) == 0;
        close(fd);
        if (is_gguf) {
            st = load_gguf_file(path, lim, out, err);
        } else {
            const char *slash = strrchr(path, '/');
            unsigned long no, of;
            size_t plen;
            if (shard_name(slash ? slash + 1 : path, &no, &of, &plen) && of > 1)
                return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                               "'%s' is shard %lu of %lu: give the folder that holds all of them",
                               path, no, of);
            st = load_safetensors_file(path, lim, out, err);
            if (!st) {
                out->format = GM_MODELFILE_SAFETENSORS;
                gm_path_folder(path, dir, sizeof dir);
                set_config_path(out, dir);
            }
        }
    }
    if (!st)
        st = gm_modelfile_finish(out, err);
    if (st)
        gm_modelfile_release(out);
    return st;
}
