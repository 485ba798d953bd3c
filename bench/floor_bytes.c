/* SPDX-License-Identifier: MIT */
/* floor_bytes.c - the file-byte floor of `make bench`: read a file with read(2) in 1 MiB
 * pieces and sum its bytes, which is the least any reader of the whole file does.
 *
 * usage: floor_bytes FILE   (prints the byte count and the sum) */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    static unsigned char buf[1 << 20];
    uint64_t sum = 0, total = 0;
    ssize_t n;
    int fd;
    if (argc != 2) {
        fprintf(stderr, "usage: floor_bytes FILE\n");
        return 64;
    }
    fd = open(argv[1], O_RDONLY);
    if (fd < 0) {
        perror(argv[1]);
        return 66;
    }
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
        for (ssize_t i = 0; i < n; i++)
            sum += buf[i];
        total += (uint64_t)n;
    }
    close(fd);
    if (n < 0) {
        perror(argv[1]);
        return 74;
    }
    printf("%llu bytes, sum %llu\n", (unsigned long long)total, (unsigned long long)sum);
    return 0;
}
