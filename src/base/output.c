/* SPDX-License-Identifier: MIT */
/* output.c - output files written whole or not at all (see gpumem/output.h). */
#define _GNU_SOURCE /* fopencookie(): a FILE that keeps the errno of a failed write */
#include "gpumem/output.h"

#include "gpumem/file.h"

#include "base/path.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static ssize_t sink_write(void *cookie, const char *buf, size_t n)
{
    struct gm_sink *s = cookie;
    size_t done = 0;
    while (done < n) {
        ssize_t k = write(s->fd, buf + done, n - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (!s->err)
                s->err = k < 0 ? errno : EIO;
            return done ? (ssize_t)done : -1;
        }
        done += (size_t)k;
    }
    return (ssize_t)n;
}

FILE *gm_sink_open(struct gm_sink *s, int fd)
{
    cookie_io_functions_t io = {NULL, sink_write, NULL, NULL};
    s->fd = fd;
    s->err = 0;
    return fopencookie(s, "w", io);
}

const char *gm_errno_text(char *buf, size_t n, int e)
{
    static const struct {
        int e;
        const char *name;
    } names[] = {
        {ENOSPC, "ENOSPC"}, {EDQUOT, "EDQUOT"}, {EFBIG, "EFBIG"},   {EIO, "EIO"},
        {EPIPE, "EPIPE"},   {EROFS, "EROFS"},   {EACCES, "EACCES"}, {EBADF, "EBADF"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (names[i].e == e) {
            snprintf(buf, n, "%s (%s)", strerror(e), names[i].name);
            return buf;
        }
    snprintf(buf, n, "%s", strerror(e));
    return buf;
}

/* The process's umask, read where no other thread can see it change: /proc (Linux 4.7 and
 * later); else by setting and restoring it, which a thread creating a file at that moment
 * could see. */
static mode_t current_umask(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[128];
    mode_t u;
    if (f) {
        while (fgets(line, sizeof(line), f))
            if (!strncmp(line, "Umask:", 6)) {
                fclose(f);
                return (mode_t)(strtoul(line + 6, NULL, 8) & 0777);
            }
        fclose(f);
    }
    u = umask(022);
    umask(u);
    return u;
}

/* GM_OK when an existing 'path' (lstat() gave 'st') may be replaced: a regular file, with
 * 'force'. */
static enum gm_status refuse_existing(const char *path, const struct stat *st, bool force,
                                      struct gm_error *err)
{
    if (S_ISDIR(st->st_mode))
        return gm_fail(err, GM_ERR_EXISTS, GM_NO_OFFSET,
                       "'%s' is a directory: give the name of a file to write", path);
    if (!force)
        return gm_fail(err, GM_ERR_EXISTS, GM_NO_OFFSET, "'%s' exists: refusing to overwrite it",
                       path);
    if (!S_ISREG(st->st_mode))
        return gm_fail(err, GM_ERR_EXISTS, GM_NO_OFFSET,
                       "'%s' is %s: only a regular file is ever replaced", path,
                       gm_file_kind(st->st_mode));
    return GM_OK;
}

enum gm_status gm_output_check(const char *path, bool force, struct gm_error *err)
{
    struct stat st;
    char dir[GM_OUTPUT_PATH_MAX];
    const char *base = strrchr(path, '/');
    size_t len = strlen(path);
    long name_max;

    base = base ? base + 1 : path;
    if (len == 0)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "the output file name is empty");
    if (!strcmp(path, "-"))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "'-' is no output file name: name a file ('./-' for a file named '-')");
    if (len >= GM_OUTPUT_PATH_MAX - 32)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "output path too long: %zu bytes (at most %d)", len,
                       GM_OUTPUT_PATH_MAX - 33);
    if (!*base)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "'%s' names a folder: give the name of a file to write", path);
    gm_path_folder(path, dir, sizeof(dir));
    name_max = pathconf(dir, _PC_NAME_MAX);
    if (name_max <= 0)
        name_max = 255;
    if (strlen(base) > (size_t)name_max)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "output file name too long: %zu bytes (at most %ld)", strlen(base),
                       name_max);
    if (lstat(path, &st) == 0)
        return refuse_existing(path, &st, force, err);
    if (stat(dir, &st) != 0) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR)
            return gm_fail(err, GM_ERR_NOENT, GM_NO_OFFSET,
                           "folder '%s' does not exist (for the output '%s')", dir, path);
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "folder '%s': %s", dir, strerror(e));
    }
    if (!S_ISDIR(st.st_mode))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "'%s' is not a folder (for the output '%s')",
                       dir, path);
    if (access(dir, W_OK | X_OK) != 0)
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "cannot create files in folder '%s': %s", dir,
                       strerror(errno));
    return GM_OK;
}

enum gm_status gm_output_open(struct gm_output *o, const char *path, bool force,
                              struct gm_error *err)
{
    char dir[GM_OUTPUT_PATH_MAX - 32]; /* gm_output_check(): the path is shorter */
    enum gm_status st;
    int fd;

    memset(o, 0, sizeof(*o));
    o->fd = -1;
    o->force = force;
    if ((st = gm_output_check(path, force, err)) != GM_OK)
        return st;
    snprintf(o->path, sizeof(o->path), "%s", path);
    snprintf(o->written, sizeof(o->written), "%s", path);
    o->mode = 0666 & ~current_umask();
    gm_path_folder(path, dir, sizeof(dir));
    snprintf(o->tmp, sizeof(o->tmp), "%s/.gpumem-tmp-XXXXXX", dir);
    fd = mkostemp(o->tmp, O_CLOEXEC); /* 0600 while it is written */
    if (fd < 0) {
        int e = errno;
        o->tmp[0] = '\0';
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "cannot create a file beside '%s': %s", path,
                       strerror(e));
    }
    o->fd = fd;
    o->f = gm_sink_open(&o->sink, fd);
    if (!o->f) {
        int e = errno;
        gm_output_abort(o);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "cannot open '%s': %s", path, strerror(e));
    }
    return GM_OK;
}

/* "name-1.csv" for "name.csv": a name beside 'path' with 'k' before the extension. */
static void beside_name(char *out, size_t n, const char *path, unsigned k)
{
    const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
    if (!dot || (slash && dot < slash) || dot == (slash ? slash + 1 : path))
        dot = path + strlen(path);
    snprintf(out, n, "%.*s-%u%s", (int)(dot - path), path, k, dot);
}

/* Move the finished temporary file to a free name beside o->path (o->beside). */
static enum gm_status commit_beside(struct gm_output *o, struct gm_error *err)
{
    for (unsigned k = 1; k < 1000; k++) {
        beside_name(o->written, sizeof(o->written), o->path, k);
        if (link(o->tmp, o->written) == 0) {
            unlink(o->tmp);
            o->tmp[0] = '\0';
            return GM_OK;
        }
        if (errno != EEXIST)
            break;
    }
    /* the data stays in o->tmp: the caller says where, and keeps it */
    return gm_fail(err, GM_ERR_EXISTS, GM_NO_OFFSET,
                   "cannot write '%s' or a name beside it: %s; the data is in '%s'", o->path,
                   strerror(errno), o->tmp);
}

enum gm_status gm_output_commit(struct gm_output *o, struct gm_error *err)
{
    char why[128];
    struct stat st;
    mode_t mode = (mode_t)o->mode;
    enum gm_status rc;
    int e;

    if (fflush(o->f) != 0 && !o->sink.err)
        o->sink.err = errno ? errno : EIO;
    if (!o->sink.err && ferror(o->f))
        o->sink.err = EIO;
    if (!o->sink.err && fsync(o->fd) != 0 && errno != EINVAL && errno != EROFS)
        o->sink.err = errno;
    e = o->sink.err;
    fclose(o->f);
    o->f = NULL;
    if (e) {
        gm_output_abort(o);
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "writing '%s' failed: %s", o->path,
                       gm_errno_text(why, sizeof(why), e));
    }
    if (lstat(o->path, &st) == 0) {
        if (o->beside && !(o->force && S_ISREG(st.st_mode))) {
            (void)fchmod(o->fd, mode);
            close(o->fd);
            o->fd = -1;
            return commit_beside(o, err);
        }
        if ((rc = refuse_existing(o->path, &st, o->force, err)) != GM_OK) {
            gm_output_abort(o);
            return rc;
        }
        /* the permissions of the file replaced, never its setuid, setgid or sticky bits:
         * gpumem's output is no program of the file's owner */
        mode = st.st_mode & 0777;
    }
    (void)fchmod(o->fd, mode);
    close(o->fd);
    o->fd = -1;
    if (o->force) {
        if (rename(o->tmp, o->path) != 0) {
            e = errno;
            gm_output_abort(o);
            return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "cannot write '%s': %s", o->path,
                           strerror(e));
        }
        o->tmp[0] = '\0';
        return GM_OK;
    }
    /* link() fails if the target exists, so a file created meanwhile is never replaced */
    if (link(o->tmp, o->path) != 0) {
        e = errno;
        if (e == EEXIST && o->beside)
            return commit_beside(o, err);
        gm_output_abort(o);
        if (e == EEXIST)
            return gm_fail(err, GM_ERR_EXISTS, GM_NO_OFFSET,
                           "'%s' exists: refusing to overwrite it", o->path);
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "cannot write '%s': %s", o->path, strerror(e));
    }
    unlink(o->tmp);
    o->tmp[0] = '\0';
    return GM_OK;
}

void gm_output_abort(struct gm_output *o)
{
    if (o->f)
        fclose(o->f);
    o->f = NULL;
    if (o->fd >= 0)
        close(o->fd);
    o->fd = -1;
    if (o->tmp[0])
        unlink(o->tmp);
    o->tmp[0] = '\0';
}
