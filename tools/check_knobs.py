#!/usr/bin/env python3
"""docs/environment.md and the knob registry agree; nothing reads a knob around it.

    check_knobs.py KNOB_DUMP SOURCE_ROOT

KNOB_DUMP is tests/unit/util/knob_dump (prints every declared knob: the
library's src/common/util/knobs.def, the backends' src/*/knobs.def, the trace
plugin's). Checks:

1. every declared knob is documented in a table of docs/environment.md (its
   name, in backticks, in the row's first cell), and every row of it that has
   a "default" column shows the declared default (backticks aside);
2. every variable documented in those tables is declared (the section
   "Benchmarks and scripts" documents tools and scripts, not the library,
   and is left out);
3. no source of src/ or plugins/ reads the environment except through the
   registry: getenv, getEnv and paramInt appear only in the registry and the
   config layer (src/common/util/knobs.cc, param.cc) and in the trace plugin,
   which reads its own knobs.def (an ordinary plugin, built from the public
   headers).

Exit 0 when all hold; otherwise every disagreement is printed and it exits 1.
`--self-test` checks the Markdown reader on a small table.
"""
import os
import re
import subprocess
import sys

EXCLUDED_SECTIONS = {"Benchmarks and scripts"}
NAME = re.compile(r"`([A-Z][A-Z0-9_]*_[A-Z0-9_]+)`")
READS = re.compile(r"\b(secure_getenv|getenv|getEnv|paramInt|paramIntValue)\s*\(")
READ_ALLOWED = {
    "src/common/util/knobs.cc",
    "src/common/util/param.cc",
    "src/common/util/param.h",
    "plugins/trace/trace_plugin.cc",
}
# Literal names the allowed files may still pass (not knobs: the system's).
LITERAL_ALLOWED = {"HOME"}


def cells(line):
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|"):
        line = line[:-1]
    return [c.strip() for c in line.split("|")]


def is_separator(line):
    return re.match(r"^\s*\|(\s*:?-{3,}:?\s*\|)+\s*$", line) is not None


def normalize(text):
    return " ".join(text.replace("`", "").split())


def read_doc(lines):
    """{name: [default cell or None, ...]} of every table row outside EXCLUDED_SECTIONS."""
    documented = {}
    section = ""
    header = None
    prev = ""
    for line in lines:
        if line.startswith("## "):
            section = line[3:].strip()
        is_row = line.lstrip().startswith("|")
        if not is_row:
            header = None
        elif is_separator(line):
            header = [c.lower() for c in cells(prev)]
        elif header is not None and section not in EXCLUDED_SECTIONS:
            row = cells(line)
            dcol = header.index("default") if "default" in header else None
            for n in NAME.findall(row[0]):
                value = normalize(row[dcol]) if dcol is not None and dcol < len(row) else None
                documented.setdefault(n, []).append(value)
        prev = line
    return documented


def read_registry(dump_exe):
    out = subprocess.run([dump_exe], check=True, capture_output=True, text=True).stdout
    knobs = {}
    errors = []
    for line in out.splitlines():
        f = line.split("\t")
        if len(f) < 6:
            errors.append("knob_dump: malformed line %r" % line)
            continue
        name, default, _type, _source, where, _doc = f[:6]
        if name in knobs:
            errors.append("%s is declared twice (%s and %s)" % (name, knobs[name][1], where))
        knobs[name] = (normalize(default), where)
    return knobs, errors


def check_reads(root):
    errors = []
    for top in ("src", "plugins"):
        for dirpath, _dirs, files in os.walk(os.path.join(root, top)):
            for fn in files:
                if not fn.endswith((".cc", ".h", ".cpp", ".c", ".in", ".cu")):
                    continue
                path = os.path.join(dirpath, fn)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for no, text in enumerate(f, 1):
                        code = text.split("//")[0]
                        for m in READS.finditer(code):
                            lit = re.match(r'\s*"([^"]*)"', code[m.end():])
                            if rel in READ_ALLOWED and (lit is None or lit.group(1) in LITERAL_ALLOWED):
                                continue
                            errors.append("%s:%d: %s() outside the knob registry (declare the variable in a "
                                          "knobs.def and read it with knobValue/knobInt): %s"
                                          % (rel, no, m.group(1), text.strip()))
    return errors


def self_test():
    doc = [
        "## Logging", "", "| variable | default | meaning |", "| --- | --- | --- |",
        "| `NCCL_DEBUG` | unset | level |", "| `A_B`, `C_D` | `1` | two |",
        "## Benchmarks and scripts", "| variable | default | meaning |", "| --- | --- | --- |",
        "| `BENCH_ONLY` | 1 | x |",
        "## Config", "| variable | field |", "| --- | --- |", "| `NCCL_NET` | `netName` |",
    ]
    got = read_doc(doc)
    want = {"NCCL_DEBUG": ["unset"], "A_B": ["1"], "C_D": ["1"], "NCCL_NET": [None]}
    if got != want:
        print("self-test: read %r, expected %r" % (got, want))
        return 1
    print("self-test passed")
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) != 3:
        print(__doc__)
        return 2
    dump_exe, root = argv[1], argv[2]
    doc_path = os.path.join(root, "docs", "environment.md")
    with open(doc_path, encoding="utf-8") as f:
        documented = read_doc(f.read().splitlines())
    knobs, errors = read_registry(dump_exe)

    for name, (default, where) in sorted(knobs.items()):
        if name not in documented:
            errors.append("%s (%s) is not documented in docs/environment.md" % (name, where))
            continue
        shown = [d for d in documented[name] if d is not None]
        if not shown:
            errors.append("%s: docs/environment.md shows no default for it (declared: %r)" % (name, default))
        for d in shown:
            if d != default:
                errors.append("%s: docs/environment.md shows the default %r, %s declares %r" % (name, d, where, default))
    for name in sorted(documented):
        if name not in knobs:
            errors.append("%s is documented in docs/environment.md but declared in no knobs.def" % name)
    errors += check_reads(root)

    for e in errors:
        print(e)
    print("%d knobs declared, %d documented: %s" % (len(knobs), len(documented), "FAILED" if errors else "agree"))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
