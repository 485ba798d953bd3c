#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""skipped.py JUNIT_XML: how many tests ctest skipped, and why (the first line each printed).

Reads the file `ctest --output-junit` wrote.  Tests skip with exit 77 (SKIP_RETURN_CODE) when
what they need is absent: the third-party files (label third-party-data:
scripts/fetch-testdata.sh gets them), the snapshot generator beside the repository (label
shared-tools), Chromium for the browser test.
"""
import collections
import sys
import xml.etree.ElementTree as ET


def main():
    root = ET.parse(sys.argv[1]).getroot()
    cases = root.iter("testcase")
    reasons = collections.Counter()
    total = 0
    for case in cases:
        total += 1
        if case.find("skipped") is None:
            continue
        out = (case.findtext("system-out") or "").strip().splitlines()
        reason = out[0] if out else "(no reason printed)"
        for prefix in ("SKIPPED: ", "skipped: "):
            if reason.startswith(prefix):
                reason = reason[len(prefix):]
        reasons[reason] += 1
    n = sum(reasons.values())
    if not n:
        print("%d tests, none skipped" % total)
        return 0
    print("%d of %d tests skipped:" % (n, total))
    for reason, count in reasons.most_common():
        print("  %4d  %s" % (count, reason))
    return 0


if __name__ == "__main__":
    sys.exit(main())
