#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""prom_check.py FILE [NAME=VALUE...] [--label KEY=VALUE...] - check that FILE is valid
Prometheus text exposition format (0.0.4), by a parser of our own and, when it is installed,
by python3-prometheus-client's; then that each NAME has a sample of VALUE (every sample of
NAME when it has several: the first), and that every sample carries each label KEY=VALUE.
Exit 0, or 1 with the reasons."""
import math
import re
import sys

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
SAMPLE = re.compile(r"^(" + NAME + r")(\{(.*)\})? (\S+)( -?\d+)?$")
PAIR = re.compile(r"\s*(" + LABEL + r')="((?:[^"\\\n]|\\[\\"n])*)"\s*(,|$)')
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def unescape(v):
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), v)


def parse(text):
    """[(name, {label: value}, float)], or raises ValueError saying which line is wrong."""
    if text and not text.endswith("\n"):
        raise ValueError("the last line does not end in a newline")
    families, samples, seen, current = {}, [], set(), None
    for n, line in enumerate(text.split("\n")[:-1], 1):
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                if not re.fullmatch(NAME, parts[2]):
                    raise ValueError("line %d: bad metric name %r" % (n, parts[2]))
                fam = families.setdefault(parts[2], {})
                if parts[1] in fam:
                    raise ValueError("line %d: second %s for %s" % (n, parts[1], parts[2]))
                if parts[1] == "TYPE" and (len(parts) < 4 or parts[3] not in TYPES):
                    raise ValueError("line %d: bad type" % n)
                if parts[2] in seen and parts[2] != current:
                    raise ValueError("line %d: %s after its samples" % (n, parts[1]))
                fam[parts[1]] = parts[3] if len(parts) > 3 else ""
                current = parts[2]
            continue
        if not line.strip():
            continue
        m = SAMPLE.match(line)
        if not m:
            raise ValueError("line %d: not a sample: %r" % (n, line))
        name, labels_text, value = m.group(1), m.group(3) or "", m.group(4)
        if name != current:
            if name in seen:
                raise ValueError("line %d: %s's samples are not together" % (n, name))
            current = name
        seen.add(name)
        labels, pos = {}, 0
        while pos < len(labels_text):
            p = PAIR.match(labels_text, pos)
            if not p:
                raise ValueError("line %d: bad labels at %r" % (n, labels_text[pos:]))
            if p.group(1) in labels:
                raise ValueError("line %d: label %s twice" % (n, p.group(1)))
            labels[p.group(1)] = unescape(p.group(2))
            pos = p.end()
        try:
            v = float(value)
        except ValueError:
            raise ValueError("line %d: bad value %r" % (n, value))
        if name in families and "TYPE" in families[name] and families[name]["TYPE"] == "counter" and (v < 0 or math.isnan(v)):
            raise ValueError("line %d: a counter below 0" % n)
        samples.append((name, labels, v))
    keys = [(s[0], tuple(sorted(s[1].items()))) for s in samples]
    if len(keys) != len(set(keys)):
        raise ValueError("a series is given twice")
    return samples


def main():
    path, want, labels = sys.argv[1], {}, {}
    args = sys.argv[2:]
    i = 0
    while i < len(args):
        if args[i] == "--label":
            k, v = args[i + 1].split("=", 1)
            labels[k] = v
            i += 2
        else:
            k, v = args[i].split("=", 1)
            want[k] = float(v)
            i += 1
    text = open(path, encoding="utf-8").read()
    bad = []
    try:
        samples = parse(text)
    except ValueError as e:
        print("FAIL %s: %s" % (path, e))
        return 1
    try:
        from prometheus_client.parser import text_string_to_metric_families
        n = sum(len(f.samples) for f in text_string_to_metric_families(text))
        if n != len(samples):
            bad.append("prometheus_client reads %d samples, we read %d" % (n, len(samples)))
        else:
            print("prometheus_client's parser reads the same %d samples" % n)
    except ImportError:
        print("prometheus_client is not installed: our parser only")
    for k, v in want.items():
        got = [s[2] for s in samples if s[0] == k]
        if not got or got[0] != v:
            bad.append("%s is %s, expected %s" % (k, got[:1], v))
    for s in samples:
        for k, v in labels.items():
            if s[1].get(k) != v:
                bad.append("%s lacks the label %s=%r (%r)" % (s[0], k, v, s[1]))
    for b in bad:
        print("FAIL " + b)
    print("%d samples of %d metrics%s" % (len(samples), len({s[0] for s in samples}), "" if bad else ": ok"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
