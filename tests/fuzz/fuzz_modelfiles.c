/* SPDX-License-Identifier: MIT */
/* fuzz_modelfiles.c - the model-file readers on a whole folder: a config.json beside
 * safetensors shards, an index.json or a GGUF file, loaded with gm_modelfile_load() (the
 * folder and each file in it) and held against the config with gm_modelfile_to_model().
 *
 * The input is a list of files:
 *   entry = u8 kind | u16 LE length | length bytes | (kind & 0x80: u32 LE size)
 * kind & 0x7f picks the name (names[] below, modulo its length); with 0x80 the file is
 * then extended with a hole to 'size' bytes (at most 16 GiB, sparse: it costs nothing), so
 * that a small header can describe the tensor data of a large checkpoint.  A later entry
 * with the same name replaces the earlier one.  Everything happens in one private folder
 * of the system's temporary directory, emptied before each input. */
#include "gpumem/modelfile.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const names[] = {
    "config.json",
    "model.safetensors.index.json",
    "model-00001-of-00002.safetensors",
    "model-00002-of-00002.safetensors",
    "model.safetensors",
    "model.gguf",
    "extra.safetensors",
    "model-00001-of-00003.safetensors",
};
#define N_NAMES (sizeof(names) / sizeof(names[0]))

static char dir[256];

static void path_of(char *out, size_t n, size_t k)
{
    snprintf(out, n, "%s/%s", dir, names[k]);
}

static void clear(void)
{
    char p[512];
    for (size_t k = 0; k < N_NAMES; k++) {
        path_of(p, sizeof p, k);
        unlink(p);
    }
}

static void remove_dir(void)
{
    clear();
    rmdir(dir);
}

static void load(const char *path)
{
    struct gm_modelfile m;
    struct gm_modelfile_limits lim;
    struct gm_model model;
    struct gm_error err;
    gm_modelfile_limits_default(&lim);
    lim.max_header_bytes = 1 << 20;
    lim.max_tensors = 4096;
    lim.max_array = 1 << 16;
    gm_modelfile_init(&m);
    if (gm_modelfile_load(path, &lim, &m, &err) == GM_OK)
        (void)gm_modelfile_to_model(&m, &model, &err);
    gm_modelfile_release(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char p[512];
    size_t off = 0;

    if (!dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/gm_fuzz_modelfiles_XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir))
            return 0;
        atexit(remove_dir);
    }
    clear();
    while (off + 3 <= size) {
        uint8_t kind = data[off];
        size_t len = (size_t)data[off + 1] | (size_t)data[off + 2] << 8;
        uint64_t extend = 0;
        int fd;
        off += 3;
        if (len > size - off)
            len = size - off;
        path_of(p, sizeof p, (kind & 0x7f) % N_NAMES);
        fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
            return 0;
        if (len && write(fd, data + off, len) != (ssize_t)len) {
            close(fd);
            return 0;
        }
        off += len;
        if ((kind & 0x80) && off + 4 <= size) {
            extend = (uint64_t)data[off] | (uint64_t)data[off + 1] << 8 |
                     (uint64_t)data[off + 2] << 16 | (uint64_t)data[off + 3] << 24;
            off += 4;
            extend <<= 2; /* up to 16 GiB */
            if (extend > len)
                (void)ftruncate(fd, (off_t)extend);
        }
        close(fd);
    }
    load(dir);
    for (size_t k = 0; k < N_NAMES; k++) {
        path_of(p, sizeof p, k);
        if (access(p, F_OK) == 0)
            load(p);
    }
    clear();
    return 0;
}
