/* SPDX-License-Identifier: MIT */
/* file.c - input files opened without blocking and read exactly (see file.h). */
#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *gm_file_kind(mode_t mode)
{
    if (S_ISREG(mode))
        return "a regular file";
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    if (S_ISLNK(mode))
        return "a symbolic link";
    return "not a file";
}

enum gm_status gm_file_open(const char *path, int *fd, uint64_t *size, struct gm_error *err)
{
    struct stat st;
    int flags, e;
    /* O_NONBLOCK: opening a FIFO with no writer, or a serial line, returns at once instead
     * of waiting; the descriptor is made blocking again once it is known to be a file. */
    int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);

    if (f < 0) {
        e = errno;
        if (e == ENOENT || e == ENOTDIR)
            return gm_fail(err, GM_ERR_NOENT, GM_NO_OFFSET, "'%s': no such file", path);
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "cannot open '%s': %s", path, strerror(e));
    }
    if (fstat(f, &st) != 0) {
        e = errno;
        close(f);
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "'%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(f);
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "'%s' is %s, not a regular file", path,
                       gm_file_kind(st.st_mode));
    }
    flags = fcntl(f, F_GETFL);
    if (flags < 0 || fcntl(f, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        e = errno;
        close(f);
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "'%s': %s", path, strerror(e));
    }
    *fd = f;
    *size = st.st_size > 0 ? (uint64_t)st.st_size : 0;
    return GM_OK;
}

enum gm_status gm_file_read_at(int fd, const char *path, uint64_t off, void *buf, size_t n,
                               struct gm_error *err)
{
    size_t done = 0;
    while (done < n) {
        ssize_t got;
        if (off + done > (uint64_t)INT64_MAX)
            return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "'%s': offset out of range", path);
        got = pread(fd, (char *)buf + done, n - done, (off_t)(off + done));
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "reading '%s' failed: %s", path,
                           strerror(errno));
        }
        if (got == 0)
            return gm_fail(err, GM_ERR_IO, off + done,
                           "'%s' changed while being read: it ends at byte %llu, %llu expected",
                           path, (unsigned long long)(off + done), (unsigned long long)(off + n));
        done += (size_t)got;
    }
    return GM_OK;
}

enum gm_status gm_file_too_short(int fd, const char *path, uint64_t size, const char *what,
                                 struct gm_error *err)
{
    char probe;
    ssize_t got;
    if (size == 0) {
        do
            got = pread(fd, &probe, 1, 0);
        while (got < 0 && errno == EINTR);
        if (got > 0)
            return gm_fail(err, GM_ERR_FORMAT, 0,
                           "'%s' reports 0 bytes but has content (a /proc or /sys file): not %s",
                           path, what);
        return gm_fail(err, GM_ERR_FORMAT, 0, "'%s' is empty: not %s", path, what);
    }
    return gm_fail(err, GM_ERR_FORMAT, 0, "'%s': %llu bytes, too short for %s", path,
                   (unsigned long long)size, what);
}
