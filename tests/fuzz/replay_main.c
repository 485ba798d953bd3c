/* SPDX-License-Identifier: MIT */
/* replay_main.c - run a fuzz target over every file of a corpus folder (or the files named
 * on the command line), so CI replays the corpus without libFuzzer. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    long len;
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return 1;
    }
    if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return 1;
    }
    buf = malloc((size_t)len + 1);
    if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        fclose(f);
        return 1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)len);
    free(buf);
    return 0;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    int n = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: no such file or folder\n", argv[i]);
            return 1;
        }
        if (S_ISDIR(st.st_mode)) {
            DIR *d = opendir(argv[i]);
            struct dirent *e;
            char **names = NULL;
            size_t nn = 0, cap = 0;
            if (!d)
                return 1;
            while ((e = readdir(d))) {
                if (e->d_name[0] == '.')
                    continue;
                if (nn == cap) {
                    cap = cap ? cap * 2 : 64;
                    names = realloc(names, cap * sizeof(*names));
                    if (!names)
                        return 1;
                }
                names[nn] = malloc(strlen(argv[i]) + strlen(e->d_name) + 2);
                if (!names[nn])
                    return 1;
                snprintf(names[nn], strlen(argv[i]) + strlen(e->d_name) + 2, "%s/%s", argv[i],
                         e->d_name);
                nn++;
            }
            closedir(d);
            if (nn)
                qsort(names, nn, sizeof(*names), cmp);
            for (size_t j = 0; j < nn; j++) {
                bad |= run_file(names[j]);
                free(names[j]);
                n++;
            }
            free(names);
        } else {
            bad |= run_file(argv[i]);
            n++;
        }
    }
    if (n == 0) {
        fprintf(stderr, "replay: empty corpus\n");
        return 1;
    }
    printf("replayed %d inputs\n", n);
    return bad;
}
