#!/usr/bin/env python3
"""Counts meson test results for ci/test.sh.

  count_tests.py LABEL testlog.json   -> prints "LABEL passed failed skipped"
  count_tests.py --total FILE         -> sums such lines, prints a table and
                                         the closing "N passed, N failed" line
  count_tests.py --slowest N testlog.json -> the N longest tests and their seconds
                                         (where CI time goes, for ci/test.sh's log)
  count_tests.py --failures N testlog.json -> each failed test's name and the last N
                                         lines of its output (stdout and stderr: a
                                         gtest failure is on stdout, which meson's
                                         summary leaves out)
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


def slowest(n, path):
    runs = []
    try:
        with open(path) as f:
            for line in f:
                if line.strip():
                    t = json.loads(line)
                    runs.append((t.get("duration", 0.0), t.get("name", "?")))
    except OSError:
        return
    runs.sort(reverse=True)
    total_s = sum(d for d, _ in runs)
    print(f"slowest tests (of {len(runs)}, {total_s:.0f} s summed): " +
          ", ".join(f"{name} {d:.0f} s" for d, name in runs[:n]))


def failures(n, path):
    try:
        with open(path) as f:
            runs = [json.loads(line) for line in f if line.strip()]
    except OSError:
        return
    for t in runs:
        if t.get("result", "") in ("OK", "EXPECTEDFAIL", "SKIP"):
            continue
        lines = (t.get("stdout") or "").splitlines() + (t.get("stderr") or "").splitlines()
        print(f"--- {t.get('name', '?')}: {t.get('result', '?')}, last {min(n, len(lines))} of {len(lines)} lines ---")
        for line in lines[-n:]:
            print(line)


if __name__ == "__main__":
    if sys.argv[1] == "--failures":
        failures(int(sys.argv[2]), sys.argv[3])
    elif sys.argv[1] == "--slowest":
        slowest(int(sys.argv[2]), sys.argv[3])
    elif sys.argv[1] == "--total":
        total(sys.argv[2])
    else:
        count(sys.argv[1], sys.argv[2])
