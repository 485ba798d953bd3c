/* SPDX-License-Identifier: MIT */
/* input.c - what a snapshot is read from (load_int.h, "input"): a regular file, mapped as
 * it is; a gzip'd file, or a pipe (standard input), streamed into a spool: an unlinked
 * temporary file (a memfd where no temporary file can be made) that is then mapped like a
 * regular file, so that the loader's window gives the pages behind it back and no
 * decompressed byte is held in memory beyond what it reads at a time.  And what the bytes
 * are when they are no pickle: JSON, text, a zip archive, other compression, named as such
 * instead of "unknown opcode".
 *
 * Gzip members are inflated one after the other (a concatenation of gzip files is one
 * stream, as gunzip reads it).  A compressed file that ends before its regular size says
 * is reported as changed while being read; one that ends inside its deflate stream as
 * truncated.  The first bytes that reach the spool are checked as they arrive (a pickle's
 * first opcode, or a format named by its magic bytes), so that a stream of zeros or of text
 * is refused at once instead of after it has been copied whole; and the spool never grows
 * past a bound: the caller's memory limit when given, else GM_SNAPSHOT_SPOOL_MAX or 90% of
 * the space left where the spool lives, whichever is less, and always the largest ratio
 * deflate reaches. */
#define _GNU_SOURCE /* memfd_create() */
#include "snapshot/load_int.h"

#include "gpumem/internal/file.h"
#include "gpumem/units.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

#define CHUNK ((size_t)256 << 10)

/* Deflate cannot compress by more than about 1032:1; a spool past this ratio is not data. */
#define MAX_RATIO 1100u

static int spool_open(void)
{
    FILE *t = tmpfile(); /* unlinked at once; in P_tmpdir */
    int fd = -1;
    if (t) {
        fd = dup(fileno(t));
        fclose(t);
    }
#ifdef MFD_CLOEXEC
    if (fd < 0)
        fd = memfd_create("gpumem-snapshot", MFD_CLOEXEC);
#endif
    return fd;
}

/* Where the copy goes and what bounds it. */
struct spool {
    int fd;
    const char *name; /* of the input, for messages */
    bool gz;          /* what is written is inflated */
    bool limit_given; /* 'bound' is the caller's memory limit */
    uint64_t bound;   /* bytes the spool may hold */
    uint64_t written; /* bytes */
};

uint64_t snap_spool_bound(int fd, uint64_t cap)
{
    struct statvfs vfs;
    uint64_t bound = GM_SNAPSHOT_SPOOL_MAX;
    if (cap != UINT64_MAX)
        return cap;
    if (fstatvfs(fd, &vfs) == 0 && vfs.f_frsize) {
        uint64_t left = gm_mul_sat((uint64_t)vfs.f_bavail, (uint64_t)vfs.f_frsize);
        if (left / 10 * 9 < bound)
            bound = left / 10 * 9;
    }
    return bound;
}

/* The first bytes of the pickle, checked before any is copied: a format named by its
 * magic bytes, or a first byte that starts no pickle (text, JSON, zeros) is refused as the
 * reader would refuse it, at byte 0. */
static enum gm_status check_head(const struct spool *s, const unsigned char *p, size_t n,
                                 struct gm_error *err)
{
    enum gm_status st = snap_input_sniff(p, n, s->name, s->gz, err);
    if (st != GM_OK || !n)
        return st;
    if (p[0] == 0x80 && n >= 2 && p[1] > 5)
        return gm_fail(err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET,
                       "'%s': pickle: protocol %u is newer than 5", s->name, (unsigned)p[1]);
    if (pk_opcode_name(p[0]))
        return GM_OK;
    gm_fail(err, GM_ERR_FORMAT, 0, "'%s': pickle: unknown opcode 0x%02x", s->name, (unsigned)p[0]);
    return snap_input_explain(p, n, s->name, s->gz, err);
}

/* Append p[0..n) to the spool, within its bound. */
static enum gm_status spool_write(struct spool *s, const void *p, size_t n, struct gm_error *err)
{
    const unsigned char *b = p;
    enum gm_status st;
    char have[32], most[32];
    if (!n)
        return GM_OK;
    if (!s->written && (st = check_head(s, b, n, err)) != GM_OK)
        return st;
    if (n > s->bound - s->written) {
        if (s->limit_given)
            return gm_fail_setting(err, GM_ERR_LIMIT, "memory_limit",
                                   "'%s': %s more than %s: over the memory limit", s->name,
                                   s->gz ? "decompresses to" : "holds",
                                   gm_format_bytes(have, sizeof(have), s->bound, GM_UNITS_IEC));
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET,
                       "'%s': %s more than %s, the most gpumem copies to a temporary file to "
                       "read it (%s, or 90%% of the space left in the temporary folder); save "
                       "it to a file and give its name",
                       s->name, s->gz ? "decompresses to" : "holds",
                       gm_format_bytes(have, sizeof(have), s->bound, GM_UNITS_IEC),
                       gm_format_bytes(most, sizeof(most), GM_SNAPSHOT_SPOOL_MAX, GM_UNITS_IEC));
    }
    while (n) {
        ssize_t k = write(s->fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET,
                           "'%s': cannot write the temporary copy it is read from: %s", s->name,
                           strerror(k < 0 ? errno : ENOSPC));
        b += k;
        n -= (size_t)k;
        s->written += (uint64_t)k;
    }
    return GM_OK;
}

/* read() retrying EINTR; 0 at the end. */
static ssize_t read_some(int fd, void *p, size_t n)
{
    for (;;) {
        ssize_t k = read(fd, p, n);
        if (k >= 0 || errno != EINTR)
            return k;
    }
}

static enum gm_status read_failed(const char *name, struct gm_error *err)
{
    return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "cannot read '%s': %s", name, strerror(errno));
}

/* Whether the first bytes start a gzip member. */
static bool is_gzip(const unsigned char *p, size_t n)
{
    return n >= 2 && p[0] == 0x1f && p[1] == 0x8b;
}

bool gm_snapshot_head_plausible(const unsigned char *p, size_t n)
{
    return (n >= 1 && p[0] == 0x80) || is_gzip(p, n);
}

/* Copy or inflate everything from 'fd' (after the 'n_head' bytes already read into 'head')
 * into a new spool of at most 'cap' bytes (UINT64_MAX: the default bound).  'regular': fd
 * is a regular file of 'size' bytes (a shorter read means it changed).  Returns the spool's
 * descriptor in *spool and its length in *len. */
static enum gm_status fill_spool(int fd, const char *name, bool regular, uint64_t size,
                                 const unsigned char *head, size_t n_head, uint64_t cap, int *spool,
                                 uint64_t *len, uint64_t *read_bytes, struct gm_error *err)
{
    unsigned char *in = gm_malloc(CHUNK), *out = gm_malloc(CHUNK);
    bool gz = is_gzip(head, n_head), ended = !gz, eof = false;
    bool pending = false; /* inflate filled its output: more may come without more input */
    uint64_t total_in = 0;
    enum gm_status st = GM_OK;
    struct spool sp = {-1, name, gz, false, 0, 0};
    z_stream z;
    int zr;

    *spool = -1;
    memset(&z, 0, sizeof(z));
    if (!in || !out) {
        gm_free(in);
        gm_free(out);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "'%s': out of memory", name);
    }
    if (gz && inflateInit2(&z, 15 + 32) != Z_OK) {
        gm_free(in);
        gm_free(out);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "'%s': cannot start to inflate", name);
    }
    sp.fd = spool_open();
    if (sp.fd < 0) {
        st = gm_fail(err, GM_ERR_IO, GM_NO_OFFSET,
                     "'%s': cannot make a temporary copy to read it from: %s", name,
                     strerror(errno));
        goto out;
    }
    sp.limit_given = cap != UINT64_MAX;
    sp.bound = snap_spool_bound(sp.fd, cap);
    memcpy(in, head, n_head);
    z.next_in = in;
    z.avail_in = (uInt)n_head;
    total_in = n_head;
    for (;;) {
        if (!z.avail_in && !eof) {
            ssize_t k = read_some(fd, in, CHUNK);
            if (k < 0) {
                st = read_failed(name, err);
                break;
            }
            eof = k == 0;
            total_in += (uint64_t)k;
            z.next_in = in;
            z.avail_in = (uInt)k;
        }
        if (!gz) {
            /* a pipe holding a pickle: copied as it comes */
            if ((st = spool_write(&sp, z.next_in, z.avail_in, err)) != GM_OK)
                break;
            z.avail_in = 0;
            if (eof)
                break;
            continue;
        }
        if (eof && !z.avail_in && !pending)
            break; /* the end: complete when the last member ended, else truncated */
        if (ended) {
            /* after a member: another one (concatenated gzip files), or trailing bytes */
            if (!is_gzip(z.next_in, z.avail_in)) {
                if (z.avail_in == 1 && !eof && z.next_in[0] == 0x1f) {
                    /* the second magic byte is in the next read */
                    in[0] = 0x1f;
                    ssize_t k = read_some(fd, in + 1, CHUNK - 1);
                    if (k < 0) {
                        st = read_failed(name, err);
                        break;
                    }
                    eof = k == 0;
                    total_in += (uint64_t)k;
                    z.next_in = in;
                    z.avail_in = (uInt)k + 1;
                    continue;
                }
                break; /* trailing garbage is ignored, as gunzip does with zeros */
            }
            inflateReset(&z);
            ended = false;
        }
        z.next_out = out;
        z.avail_out = (uInt)CHUNK;
        zr = inflate(&z, Z_NO_FLUSH);
        if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
            st = gm_fail(err, GM_ERR_FORMAT, total_in - z.avail_in,
                         "'%s': the gzip data is damaged (%s)", name,
                         z.msg ? z.msg : "inflate failed");
            break;
        }
        {
            size_t got = CHUNK - z.avail_out;
            if (got && sp.written + got > MAX_RATIO * total_in + ((uint64_t)1 << 20)) {
                st = gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET,
                             "'%s': decompresses past the largest ratio deflate reaches (%llu "
                             "bytes so far): not a compressed snapshot",
                             name, (unsigned long long)(sp.written + got));
                break;
            }
            if ((st = spool_write(&sp, out, got, err)) != GM_OK)
                break;
        }
        pending = z.avail_out == 0 && zr != Z_STREAM_END;
        if (zr == Z_STREAM_END)
            ended = true;
        else if (zr == Z_BUF_ERROR && eof && !z.avail_in && !pending)
            break; /* truncated: reported below */
    }
    if (st == GM_OK && gz && !ended)
        st = regular && total_in < size
                 ? gm_fail(err, GM_ERR_IO, GM_NO_OFFSET,
                           "the file changed while being read (it is shorter than when it was "
                           "opened: written again meanwhile?)")
                 : gm_fail(err, GM_ERR_FORMAT, total_in,
                           "'%s': the gzip data ends inside its compressed stream: truncated?",
                           name);
    if (st == GM_OK && regular && total_in < size)
        st = gm_fail(err, GM_ERR_IO, GM_NO_OFFSET,
                     "the file changed while being read (it is shorter than when it was "
                     "opened: written again meanwhile?)");
out:
    if (gz)
        inflateEnd(&z);
    gm_free(in);
    gm_free(out);
    if (st != GM_OK) {
        if (sp.fd >= 0)
            close(sp.fd);
        return st;
    }
    *spool = sp.fd;
    *len = sp.written;
    *read_bytes = total_in;
    return GM_OK;
}

/* Printable text (UTF-8 allowed) in the first bytes: no NUL, few control characters. */
static bool looks_text(const unsigned char *p, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!p[i])
            return false;
        if (p[i] < 0x20 && p[i] != '\n' && p[i] != '\r' && p[i] != '\t')
            bad++;
    }
    return n && bad * 50 <= n;
}

enum gm_status snap_input_sniff(const unsigned char *p, size_t n, const char *name, bool compressed,
                                struct gm_error *err)
{
    const char *what = NULL, *hint = "";
    if (n && p[0] == 0x80)
        return GM_OK; /* PROTO: a pickle of protocol 2 or later */
    if (n >= 4 && !memcmp(p, "PK\x03\x04", 4)) {
        what = "zip archive";
        hint = " (torch.save() writes zip archives; a memory snapshot is the pickle "
               "torch.cuda.memory._dump_snapshot() writes)";
    } else if (n >= 3 && !memcmp(p, "BZh", 3)) {
        what = "file compressed with bzip2";
    } else if (n >= 6 && !memcmp(p,
                                 "\xfd"
                                 "7zXZ\x00",
                                 6)) {
        what = "file compressed with xz";
    } else if (n >= 4 && !memcmp(p, "\x28\xb5\x2f\xfd", 4)) {
        what = "file compressed with zstd";
    }
    if (!what)
        return GM_OK; /* the pickle reader judges the rest */
    if (!*hint)
        hint = " (decompress it first, or gzip it: gzip'd snapshots are read directly)";
    return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET, "'%s' is a %s%s, not a memory snapshot%s",
                   name, compressed ? "gzip'd " : "", what, hint);
}

enum gm_status snap_input_explain(const unsigned char *p, size_t n, const char *name,
                                  bool compressed, struct gm_error *err)
{
    size_t i = 0;
    if (!looks_text(p, n < 512 ? n : 512))
        return err ? err->code : GM_ERR_FORMAT;
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
        i++;
    return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                   "'%s' is a %s%s, not a memory snapshot (a memory snapshot is the binary "
                   "pickle torch.cuda.memory._dump_snapshot() writes, with protocol 2 or later)",
                   name, compressed ? "gzip'd " : "",
                   i < n && (p[i] == '{' || p[i] == '[') ? "JSON document" : "text file");
}

enum gm_status snap_input_open(int fd, const char *name, uint64_t cap, struct snap_input *in,
                               struct gm_error *err)
{
    struct stat st;
    unsigned char head[4096];
    size_t n_head = 0;
    bool regular;

    memset(in, 0, sizeof(*in));
    in->spool = -1;
    if (fstat(fd, &st) != 0)
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "cannot read '%s': %s", name, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return gm_fail(err, GM_ERR_NOENT, GM_NO_OFFSET,
                       "'%s' is a directory: give a snapshot file (the pickle "
                       "torch.cuda.memory._dump_snapshot() writes)",
                       name);
    regular = S_ISREG(st.st_mode);
    if (!regular && !S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode) && !S_ISCHR(st.st_mode))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "'%s' is %s, not a regular file", name,
                       gm_file_kind(st.st_mode));
    if (regular && (uint64_t)st.st_size > SIZE_MAX)
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "'%s' is too large", name);
    in->file_size = regular ? (uint64_t)st.st_size : 0;
    /* the first bytes: a gzip file or a stream is spooled, a regular file mapped */
    if (regular) {
        ssize_t k = pread(fd, head, sizeof(head), 0);
        if (k < 0)
            return read_failed(name, err);
        n_head = (size_t)k;
        if (!n_head)
            return gm_fail(err, GM_ERR_FORMAT, 0, "'%s' is empty: not a pickle", name);
        if (!is_gzip(head, n_head)) {
            in->fd = fd;
            in->len = (uint64_t)st.st_size;
            return snap_input_sniff(head, n_head, name, false, err);
        }
        if (lseek(fd, (off_t)n_head, SEEK_SET) < 0)
            return read_failed(name, err);
    } else {
        /* a pipe: the first bytes decide, and are the start of what is spooled */
        while (n_head < 2) {
            ssize_t k = read_some(fd, head + n_head, sizeof(head) - n_head);
            if (k < 0)
                return read_failed(name, err);
            if (!k)
                break;
            n_head += (size_t)k;
        }
        if (!n_head)
            return gm_fail(err, GM_ERR_FORMAT, 0, "'%s' is empty: not a pickle", name);
    }
    in->gzip = is_gzip(head, n_head);
    {
        uint64_t read_bytes = 0;
        enum gm_status s = fill_spool(fd, name, regular, in->file_size, head, n_head, cap,
                                      &in->spool, &in->len, &read_bytes, err);
        if (s != GM_OK)
            return s;
        in->fd = in->spool;
        if (!regular)
            in->file_size = read_bytes;
    }
    if (!in->len) {
        snap_input_close(in);
        return gm_fail(err, GM_ERR_FORMAT, 0, "'%s' %s: not a pickle", name,
                       in->gzip ? "decompresses to nothing" : "is empty");
    }
    {
        ssize_t k = pread(in->fd, head, sizeof(head), 0);
        enum gm_status s;
        if (k < 0) {
            snap_input_close(in);
            return read_failed(name, err);
        }
        s = snap_input_sniff(head, (size_t)k, name, in->gzip, err);
        if (s != GM_OK)
            snap_input_close(in);
        return s;
    }
}

void snap_input_close(struct snap_input *in)
{
    if (in->spool >= 0)
        close(in->spool);
    in->spool = -1;
}
