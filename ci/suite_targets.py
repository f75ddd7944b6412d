#!/usr/bin/env python3
"""Prints the ninja targets one meson test suite needs, one per line.

  suite_targets.py BUILD_DIR SUITE [--exclude OTHER_SUITE ...]

A build directory that only runs a suite (the sanitizer tiers of
ci/test.sh) builds these instead of everything: the tests' executables,
what they depend on, and every build output named in their command lines
or environment (plugins, scripts' inputs). ninja builds the libraries they
link by itself.
"""
import json
import os
import re
import subprocess
import sys


def introspect(build, what):
    out = subprocess.run(["meson", "introspect", what, build], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    build, suite = os.path.realpath(sys.argv[1]), sys.argv[2]
    rest = sys.argv[3:]
    excluded = {rest[i + 1] for i in range(len(rest) - 1) if rest[i] == "--exclude"}

    def in_suite(t, name):
        return any(s.split(":")[-1] == name for s in t["suite"])

    tests = [t for t in introspect(build, "--tests")
             if in_suite(t, suite) and not any(in_suite(t, x) for x in excluded)]
    by_id = {t["id"]: t["filename"] for t in introspect(build, "--targets")}
    known = set()
    for line in subprocess.run(["ninja", "-C", build, "-t", "targets", "all"], check=True, capture_output=True,
                               text=True).stdout.splitlines():
        known.add(line.split(":")[0])
    wanted = set()

    def add(path):
        path = os.path.normpath(path)
        if path.startswith(build + os.sep):
            rel = os.path.relpath(path, build)
            if rel in known:
                wanted.add(rel)

    for t in tests:
        for dep in t.get("depends", []):
            for f in by_id.get(dep, []):
                add(f)
        words = list(t["cmd"]) + [v for v in t.get("env", {}).values()]
        for w in words:
            for piece in re.split(r"[=:,]", w):
                if piece.startswith("/"):
                    add(piece)
    for w in sorted(wanted):
        print(w)


if __name__ == "__main__":
    main()
