#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""run.py MODULE [NEED]: run one module of the Python tests (unittest, verbose).

Without NEED, the tests that need nothing outside the repository; with NEED
('third-party-data' or 'shared-tools'), only the tests marked @needs(NEED) (common.py), which
ctest runs as python/<suite>/<NEED> through tests/needs.sh.  Exit 0 when every selected test
passed (or was skipped by the test itself), 1 otherwise.
"""
import sys
import unittest


def flatten(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from flatten(t)
        else:
            yield t


def need_of(test):
    method = getattr(test, getattr(test, "_testMethodName", ""), None)
    return getattr(method, "gm_needs", None) or getattr(type(test), "gm_needs", None)


def main():
    module = sys.argv[1]
    need = sys.argv[2] if len(sys.argv) > 2 else None
    tests = [t for t in flatten(unittest.defaultTestLoader.loadTestsFromName(module))
             if need_of(t) == need]
    if not tests:
        print("run.py: %s has no test %s" % (module, "marked @needs(%r)" % need if need else "without @needs"))
        return 1
    result = unittest.TextTestRunner(verbosity=2).run(unittest.TestSuite(tests))
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
