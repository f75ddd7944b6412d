#!/usr/bin/env python3
"""Counts meson test results for ci/test.sh.

  count_tests.py LABEL testlog.json   -> prints "LABEL passed failed skipped"
  count_tests.py --total FILE         -> sums such lines, prints a table and
                                         the closing "N passed, N failed" line
"""
import json
import sys


def count(label, path):
    passed = failed = skipped = 0
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                r = json.loads(line).get("result", "")
                if r in ("OK", "EXPECTEDFAIL"):
                    passed += 1
                elif r == "SKIP":
                    skipped += 1
                else:
                    failed += 1
    except OSError:
        failed += 1
    print(f"{label} {passed} {failed} {skipped}")


def total(path):
    p = f = s = 0
    print(f"{'suite':<14}{'passed':>8}{'failed':>8}{'skipped':>9}")
    with open(path) as fh:
        for line in fh:
            parts = line.split()
            if len(parts) < 3:
                continue
            a, b = int(parts[1]), int(parts[2])
            c = int(parts[3]) if len(parts) > 3 else 0
            print(f"{parts[0]:<14}{a:>8}{b:>8}{c:>9}")
            p, f, s = p + a, f + b, s + c
    print(f"{p} passed, {f} failed" + (f", {s} skipped" if s else ""))


if __name__ == "__main__":
    if sys.argv[1] == "--total":
        total(sys.argv[2])
    else:
        count(sys.argv[1], sys.argv[2])
