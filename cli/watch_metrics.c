/* SPDX-License-Identifier: MIT */
/* watch_metrics.c - `gpumem watch --prometheus FILE` (watch_metrics.h). */
#include "watch_metrics.h"

#include "cli.h"

#include "gpumem/arena.h"
#include "gpumem/output.h"
#include "gpumem/sweep.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define WATCH_METRICS_EVERY_MS 1000

void watch_metrics_init(struct watch_metrics *m, const char *path)
{
    const char *node = getenv("SLURMD_NODENAME");
    memset(m, 0, sizeof(*m));
    m->path = path;
    m->listen_fd = -1;
    m->labels.job = getenv("SLURM_JOB_ID");
    m->labels.rank = getenv("SLURM_PROCID") ? getenv("SLURM_PROCID") : getenv("RANK");
    if (node && *node) {
        snprintf(m->host, sizeof(m->host), "%s", node);
        m->labels.hostname = m->host;
    } else if (gethostname(m->host, sizeof(m->host)) == 0) {
        m->host[sizeof(m->host) - 1] = '\0';
        m->labels.hostname = m->host;
    }
}

/* The metrics text: the watch's, then the account's. */
static enum gm_status metrics_text(FILE *f, const struct watch_metrics *m, const struct gm_watch *w,
                                   const struct gm_devices *d, struct gm_error *err)
{
    enum gm_status st = gm_watch_prometheus(f, w, d, &m->labels, err);
    if (st == GM_OK && m->account)
        st = gm_account_prometheus(f, m->account, &m->labels, err);
    if (st == GM_OK && m->series_dir[0])
        st = gm_measure_series_prometheus(f, (const struct gm_measure_series *const *)m->series,
                                          (const char *const *)m->ranks, m->n_series, &m->labels,
                                          err);
    return st;
}

#define SERIES_PREFIX "series-"
#define SERIES_SUFFIX ".json"

int watch_metrics_series_begin(struct watch_metrics *m, const char *cmd, char **envp,
                               char ***env_out)
{
    const char *tmp = getenv("TMPDIR");
    char path[sizeof(m->series_dir) + 32];
    struct gm_error err;
    *env_out = envp;
    if (!m->path && m->listen_fd < 0)
        return 0;
    snprintf(m->series_dir, sizeof(m->series_dir), "%s/gpumem-watch-XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(m->series_dir)) {
        cli_errorf(cmd, "cannot make a temporary folder in %s: %s", tmp && *tmp ? tmp : "/tmp",
                   strerror(errno));
        m->series_dir[0] = '\0';
        return GM_EXIT_CANTCREAT;
    }
    /* gpumem.torch puts each process's rank in place of {rank} */
    snprintf(path, sizeof(path), "%s/" SERIES_PREFIX "{rank}" SERIES_SUFFIX, m->series_dir);
    if (gm_watch_env_with(envp, GM_SWEEP_SERIES_ENV, path, &m->env, &err) != GM_OK)
        return cli_fail(cmd, &err);
    *env_out = m->env;
    return 0;
}

static void series_clear(struct watch_metrics *m)
{
    for (size_t k = 0; k < m->n_series; k++) {
        gm_measure_series_free(m->series[k]);
        free(m->ranks[k]);
    }
    free(m->series);
    free(m->ranks);
    m->series = NULL;
    m->ranks = NULL;
    m->n_series = 0;
}

/* The rank in a series file's name, NULL when it is not one (gpumem.torch's temporary files
 * begin with a dot). */
static char *series_rank(const char *name)
{
    size_t n = strlen(name), p = strlen(SERIES_PREFIX), s = strlen(SERIES_SUFFIX);
    if (n <= p + s || strncmp(name, SERIES_PREFIX, p) || strcmp(name + n - s, SERIES_SUFFIX))
        return NULL;
    return strndup(name + p, n - p - s);
}

/* Read the series' files again: those that cannot be read yet (a series just begun is an
 * empty file until its first write) are left out. */
static void series_refresh(struct watch_metrics *m)
{
    DIR *d = opendir(m->series_dir);
    struct dirent *e;
    if (!d)
        return;
    series_clear(m);
    while ((e = readdir(d)) != NULL) {
        char path[sizeof(m->series_dir) + 256], *rank = series_rank(e->d_name);
        struct gm_measure_series *s = NULL, **ns;
        char **nr;
        if (!rank)
            continue;
        snprintf(path, sizeof(path), "%s/%s", m->series_dir, e->d_name);
        ns = realloc(m->series, (m->n_series + 1) * sizeof(*ns));
        if (ns)
            m->series = ns;
        nr = realloc(m->ranks, (m->n_series + 1) * sizeof(*nr));
        if (nr)
            m->ranks = nr;
        if (!ns || !nr || gm_measure_series_load(path, &s, NULL) != GM_OK) {
            free(rank);
            continue;
        }
        m->series[m->n_series] = s;
        m->ranks[m->n_series++] = rank;
    }
    closedir(d);
}

/* Read the interposer's files again; the last good reading stays when they cannot be read
 * (none yet: no process has used the GPU; the command's end reports any bad file). */
static void account_refresh(struct watch_metrics *m)
{
    struct gm_account *a = NULL;
    if (gm_account_new(&a, NULL) != GM_OK)
        return;
    if (gm_account_add_file(a, m->account_dir, NULL) != GM_OK) {
        gm_account_free(a);
        return;
    }
    gm_account_free(m->account);
    m->account = a;
}

int watch_metrics_write(struct watch_metrics *m, const char *cmd, const struct gm_watch *w,
                        const struct gm_devices *d, uint64_t t_ms, bool final)
{
    struct gm_output o;
    struct gm_error err;
    int rc;
    if ((!m->path && m->listen_fd < 0) ||
        (!final && m->written && t_ms < m->written_ms + WATCH_METRICS_EVERY_MS))
        return 0;
    m->written = true;
    m->written_ms = t_ms;
    if (m->account_dir)
        account_refresh(m);
    if (m->series_dir[0])
        series_refresh(m);
    if (!m->path)
        return 0;
    if ((rc = cli_output_open(&o, cmd, m->path, true)) != 0)
        return rc;
    if (metrics_text(o.f, m, w, d, &err) != GM_OK)
        return cli_output_fail(&o, cmd, &err);
    return cli_output_commit(&o, cmd);
}

int watch_metrics_listen(struct watch_metrics *m, const char *cmd, const char *addr)
{
    char host[256];
    const char *colon = strrchr(addr, ':');
    struct addrinfo hints, *res = NULL;
    struct sockaddr_storage sa;
    socklen_t sl = sizeof(sa);
    char port_text[16];
    int fd, one = 1, e;
    if (!colon || colon == addr || (size_t)(colon - addr) >= sizeof(host) || !colon[1])
        return cli_usage(cmd, "--listen: give ADDR:PORT (127.0.0.1:9400, *:9400)");
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    if ((e = getaddrinfo(strcmp(host, "*") ? host : NULL, colon + 1, &hints, &res)) != 0)
        return cli_usage(cmd, "--listen '%s': %s", addr, gai_strerror(e));
    fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 16) != 0 ||
        fcntl(fd, F_SETFL, O_NONBLOCK) != 0) {
        cli_errorf(cmd, "--listen '%s': %s", addr, strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(res);
        return GM_EXIT_IOERR;
    }
    freeaddrinfo(res);
    if (getsockname(fd, (struct sockaddr *)&sa, &sl) == 0 &&
        getnameinfo((struct sockaddr *)&sa, sl, host, sizeof(host), port_text, sizeof(port_text),
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0)
        cli_errorf(cmd, "serving the metrics at http://%s:%s/metrics", host, port_text);
    m->listen_fd = fd;
    return 0;
}

static void respond(int fd, const char *status, const char *body, size_t len)
{
    char head[256];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.0 %s\r\nContent-Type: text/plain; version=0.0.4; "
                     "charset=utf-8\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                     status, len);
    if (n > 0 && write(fd, head, (size_t)n) == n && len)
        (void)!write(fd, body, len);
}

/* One client: its request line, then the answer. */
static void serve_one(int fd, const struct watch_metrics *m, const struct gm_watch *w,
                      const struct gm_devices *d)
{
    char req[4096] = "";
    size_t got = 0;
    struct timeval tv = {0, 200000};
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    while (got < sizeof(req) - 1 && !memchr(req, '\n', got)) {
        ssize_t r = read(fd, req + got, sizeof(req) - 1 - got);
        if (r <= 0)
            return;
        got += (size_t)r;
    }
    req[got] = '\0';
    if (strncmp(req, "GET ", 4)) {
        respond(fd, "405 Method Not Allowed", "", 0);
    } else if (strncmp(req + 4, "/metrics", 8) ||
               (req[12] != ' ' && req[12] != '?' && req[12] != '\r' && req[12] != '\n')) {
        respond(fd, "404 Not Found", "not found: the metrics are at /metrics\n", 39);
    } else {
        char *body = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&body, &len);
        bool ok = f && metrics_text(f, m, w, d, NULL) == GM_OK;
        if (f)
            fclose(f);
        if (ok)
            respond(fd, "200 OK", body, len);
        else
            respond(fd, "500 Internal Server Error", "", 0);
        free(body);
    }
}

void watch_metrics_serve(struct watch_metrics *m, const struct gm_watch *w,
                         const struct gm_devices *d)
{
    for (int k = 0; m->listen_fd >= 0 && k < 16; k++) {
        int fd = accept(m->listen_fd, NULL, NULL);
        if (fd < 0)
            return; /* none waiting (EAGAIN), or a client gone */
        (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
        (void)fcntl(fd, F_SETFL, 0); /* blocking, within the timeouts below */
        serve_one(fd, m, w, d);
        close(fd);
    }
}

void watch_metrics_close(struct watch_metrics *m)
{
    series_clear(m);
    gm_free(m->env);
    m->env = NULL;
    if (m->series_dir[0]) {
        DIR *d = opendir(m->series_dir);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            char path[sizeof(m->series_dir) + 256];
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(path, sizeof(path), "%s/%s", m->series_dir, e->d_name);
                unlink(path);
            }
        }
        if (d)
            closedir(d);
        (void)rmdir(m->series_dir);
        m->series_dir[0] = '\0';
    }
    gm_account_free(m->account);
    m->account = NULL;
    if (m->listen_fd >= 0)
        close(m->listen_fd);
    m->listen_fd = -1;
}
