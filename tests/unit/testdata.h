/* SPDX-License-Identifier: MIT */
/* testdata.h - unit tests that read the third-party files of scripts/testdata.manifest (real
 * snapshots and config.json files, never in the repository).  They form a group of their
 * own: GM_TEST_MAIN(tests, third_party_tests) runs 'tests' by default and
 * 'third_party_tests' with --third-party-data, which ctest does as
 * unit/<name>/third-party-data through tests/needs.sh: that finds the files and exports
 * GM_TESTDATA (the folder holding snapshots/ and configs/), or skips the test with the reason
 * when they are absent.  Include after <cmocka.h>. */
#ifndef GM_TESTS_TESTDATA_H
#define GM_TESTS_TESTDATA_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "GM_TESTDATA/kind/name" into buf (kind: "snapshots" or "configs"); fails the test when
 * GM_TESTDATA is not set. */
static inline const char *gm_testdata_path(char *buf, size_t n, const char *kind, const char *name)
{
    const char *dir = getenv("GM_TESTDATA");
    if (!dir || !*dir)
        fail_msg("GM_TESTDATA is not set: run this group through tests/needs.sh third-party-data");
    snprintf(buf, n, "%s/%s/%s", dir, kind, name);
    return buf;
}

#define GM_TEST_MAIN(tests, third_party_tests)                                                     \
    int main(int argc, char **argv)                                                                \
    {                                                                                              \
        if (argc > 1 && strcmp(argv[1], "--third-party-data") == 0)                                \
            return cmocka_run_group_tests(third_party_tests, NULL, NULL);                          \
        return cmocka_run_group_tests(tests, NULL, NULL);                                          \
    }

#endif
