/* SPDX-License-Identifier: MIT */
/* measure.c - run a command and print its wall time, CPU time and peak resident memory, for
 * `make bench`.  A small process of its own starts the command, so that the peak RSS the
 * kernel reports for it (which keeps the high-water mark across exec) is the command's and
 * not that of a large parent such as the Python driver.
 *
 * usage: measure OUT CMD [ARG...]   (stdout and stderr are the command's; OUT receives one
 * line "wall_s cpu_s maxrss_bytes exit_status"; exits with the command's status) */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    struct timespec t0, t1;
    struct rusage ru;
    int status = 0, code;
    pid_t pid;
    FILE *out;
    if (argc < 3) {
        fprintf(stderr, "usage: measure OUT CMD [ARG...]\n");
        return 64;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid = fork();
    if (pid < 0) {
        perror("fork");
        return 71;
    }
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        perror(argv[2]);
        _exit(127);
    }
    if (wait4(pid, &status, 0, &ru) != pid) {
        perror("wait4");
        return 71;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    out = fopen(argv[1], "w");
    if (!out) {
        perror(argv[1]);
        return 73;
    }
    fprintf(out, "%.6f %.6f %lld %d\n",
            (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
            (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6,
            (long long)ru.ru_maxrss * 1024, code);
    fclose(out);
    return code;
}
