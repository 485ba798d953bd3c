/* SPDX-License-Identifier: MIT */
/* floor_opcodes.c - the opcode-walk floor of `make bench`: step over every opcode of a
 * pickle (protocols 0 to 5) and its argument, building nothing, as the least a pickle
 * reader does.  The file is mapped and read front to back, as gpumem reads it.
 *
 * usage: floor_opcodes FILE   (prints the number of opcodes; exit 65 on a malformed file) */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t le(const unsigned char *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Bytes of argument after opcode 'op' at p[-1] (p: its first argument byte), or -1. */
static int64_t arg_len(unsigned char op, const unsigned char *p, const unsigned char *end)
{
    size_t left = (size_t)(end - p);
    const unsigned char *nl;
    switch (op) {
    case 'K':
    case 'h':
    case 'q':
    case 0x80:
    case 0x82:
        return 1;
    case 'M':
    case 0x83:
        return 2;
    case 'J':
    case 'j':
    case 'r':
    case 0x84:
        return 4;
    case 'G':
    case 0x95:
        return 8;
    case 0x8a:
    case 0x8c:
    case 'U':
    case 'C': /* 1-byte length */
        return left < 1 ? -1 : 1 + (int64_t)p[0];
    case 0x8b:
    case 'X':
    case 'T':
    case 'B': /* 4-byte length */
        return left < 4 ? -1 : 4 + (int64_t)le(p, 4);
    case 0x8d:
    case 0x8e:
    case 0x96: /* 8-byte length */
        return left < 8 ? -1 : 8 + (int64_t)le(p, 8);
    case 'F':
    case 'I':
    case 'L':
    case 'S':
    case 'V':
    case 'g':
    case 'p':
    case 'P':
        nl = memchr(p, '\n', left);
        return nl ? (int64_t)(nl - p) + 1 : -1;
    case 'c':
    case 'i': /* two lines */
        nl = memchr(p, '\n', left);
        if (!nl)
            return -1;
        nl = memchr(nl + 1, '\n', (size_t)(end - nl - 1));
        return nl ? (int64_t)(nl - p) + 1 : -1;
    default:
        return 0;
    }
}

int main(int argc, char **argv)
{
    struct stat st;
    const unsigned char *base, *p, *end;
    uint64_t n_ops = 0;
    int fd;
    if (argc != 2) {
        fprintf(stderr, "usage: floor_opcodes FILE\n");
        return 64;
    }
    fd = open(argv[1], O_RDONLY);
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size == 0) {
        perror(argv[1]);
        return 66;
    }
    base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        perror("mmap");
        return 74;
    }
    (void)madvise((void *)(uintptr_t)base, (size_t)st.st_size, MADV_SEQUENTIAL);
    p = base;
    end = base + st.st_size;
    while (p < end) {
        unsigned char op = *p++;
        int64_t n;
        n_ops++;
        if (op == '.')
            break;
        n = arg_len(op, p, end);
        if (n < 0 || (uint64_t)n > (uint64_t)(end - p)) {
            fprintf(stderr, "%s: malformed at byte %lld\n", argv[1], (long long)(p - 1 - base));
            return 65;
        }
        p += n;
    }
    munmap((void *)(uintptr_t)base, (size_t)st.st_size);
    printf("%llu opcodes\n", (unsigned long long)n_ops);
    return 0;
}
