/* SPDX-License-Identifier: MIT */
/* fuzz_mapped.c - the ways a snapshot reaches the reader: a file mapped under the SIGBUS
 * guard and read through its window (gm_snapshot_load), the same bytes gzip'd (inflated
 * into a spool, its first bytes checked as they arrive), and on a pipe (standard input,
 * copied into a spool), each within a 64 MiB memory limit.  The other snapshot targets load
 * from memory (gm_snapshot_load_mem) and never reach this code.
 *
 * The files are memfds (no disk, nothing left behind), named through /proc/self/fd.  A
 * reading must agree across the three ways: the same events and frames, or a refusal. */
#define _GNU_SOURCE /* memfd_create(), F_SETPIPE_SZ */
#include "gpumem/gpumem.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t k = write(fd, b, n);
        if (k <= 0)
            return false;
        b += k;
        n -= (size_t)k;
    }
    return true;
}

/* A memfd holding p[0..n), or -1. */
static int memfile(const void *p, size_t n)
{
    int fd = memfd_create("gpumem-fuzz", MFD_CLOEXEC);
    if (fd >= 0 && !write_all(fd, p, n)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Load through the path of 'fd'; the snapshot or NULL. */
static struct gm_snapshot *load_path(int fd, const struct gm_snapshot_opts *o)
{
    char path[64];
    struct gm_snapshot *s = NULL;
    struct gm_error err;
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    if (gm_snapshot_load(path, o, &s, &err) != GM_OK) {
        if (!err.msg[0])
            abort(); /* every refusal names its problem */
        return NULL;
    }
    return s;
}

/* p[0..n) gzip'd into a new buffer (*out, *n_out; free()), false when it cannot be. */
static bool gzip(const uint8_t *p, size_t n, uint8_t **out, size_t *n_out)
{
    z_stream z;
    size_t cap = n + n / 1000 + 64;
    memset(&z, 0, sizeof(z));
    if (!(*out = malloc(cap)) || deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY)) {
        free(*out);
        return false;
    }
    z.next_in = (Bytef *)(uintptr_t)p;
    z.avail_in = (uInt)n;
    z.next_out = *out;
    z.avail_out = (uInt)cap;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
        deflateEnd(&z);
        free(*out);
        return false;
    }
    *n_out = z.total_out;
    deflateEnd(&z);
    return true;
}

static void same(const struct gm_snapshot *a, const struct gm_snapshot *b)
{
    if (!a || !b)
        return;
    if (a->n_events != b->n_events || a->n_frames != b->n_frames ||
        a->n_segments != b->n_segments || a->n_devices != b->n_devices)
        abort(); /* the way the bytes came changed what they say */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gm_snapshot_opts o;
    struct gm_snapshot *mapped = NULL, *gz = NULL, *piped = NULL;
    uint8_t *z = NULL;
    size_t nz = 0;
    int fd, pfd[2];

    memset(&o, 0, sizeof(o));
    o.max_memory = 64u << 20;
    if ((fd = memfile(data, size)) >= 0) {
        mapped = load_path(fd, &o);
        close(fd);
    }
    if (gzip(data, size, &z, &nz) && (fd = memfile(z, nz)) >= 0) {
        gz = load_path(fd, &o);
        close(fd);
    }
    free(z);
    /* a pipe large enough to hold the input: written whole, then read as standard input */
    if (pipe2(pfd, O_CLOEXEC) == 0) {
        struct gm_error err;
        if (fcntl(pfd[1], F_SETPIPE_SZ, 1 << 20) >= 0 && size <= (1u << 20) &&
            write_all(pfd[1], data, size)) {
            close(pfd[1]);
            pfd[1] = -1;
            if (gm_snapshot_load_fd(pfd[0], "standard input", &o, &piped, &err) != GM_OK &&
                !err.msg[0])
                abort();
        }
        if (pfd[1] >= 0)
            close(pfd[1]);
        close(pfd[0]);
    }
    /* a gzip'd input is inflated on every way but the second, which gzips it again */
    if (!(size >= 2 && data[0] == 0x1f && data[1] == 0x8b))
        same(mapped, gz);
    same(mapped, piped);
    gm_snapshot_free(mapped);
    gm_snapshot_free(gz);
    gm_snapshot_free(piped);
    return 0;
}
