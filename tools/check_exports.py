#!/usr/bin/env python3
"""Checks that a shared library exports the whole public API of a header.

Every function declared in the header (nccl* and pnccl*) must be a defined
dynamic symbol of the library. As in NCCL (src/common/api_export.h), ncclX
is a weak symbol, so profilers and interposers can replace it, and pncclX a
strong one they can call through; a wrong binding is reported as an error.

usage: check_exports.py HEADER [HEADER ...] LIBRARY [LIBRARY ...]
(arguments ending in .h are headers; e.g. include/uniccl.h and
include/rccl/rccl.h for RCCL's extra names)
exit 0: everything exported; 1: something missing or mis-bound; 2: usage or
tool failure.
"""

import re
import shutil
import subprocess
import sys


def strip_c(text):
    """Removes comments, string/char literals and preprocessor lines."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    text = re.sub(r"'(?:\\.|[^'\\])*'", "''", text)
    out, in_directive = [], False
    for line in text.split("\n"):
        if in_directive or line.lstrip().startswith("#"):
            in_directive = line.rstrip().endswith("\\")
            continue
        out.append(line)
    return "\n".join(out)


def declared_functions(header_path):
    with open(header_path, encoding="utf-8") as f:
        code = strip_c(f.read())
    # A declaration: NAME ( ... ) ; at file scope, preceded by a type word or '*'.
    pattern = re.compile(r"(?:[\w*]\s*|\*)\b(p?nccl\w+)\s*\([^;{}]*\)\s*;")
    return sorted(set(pattern.findall(code)))


def exported_symbols(lib_path):
    nm = shutil.which("nm")
    if nm is None:
        sys.exit("check_exports: nm not found (install binutils)")
    res = subprocess.run([nm, "-D", "--defined-only", lib_path], capture_output=True, text=True)
    if res.returncode != 0:
        print(f"check_exports: nm failed on {lib_path}: {res.stderr.strip()}", file=sys.stderr)
        sys.exit(2)
    symbols = {}
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            name = parts[2].split("@")[0]  # drop symbol versions
            symbols[name] = parts[1]
    return symbols


def check(functions, lib_path):
    symbols = exported_symbols(lib_path)
    missing = [f for f in functions if f not in symbols]
    misbound = []
    for f in functions:
        kind = symbols.get(f)
        if kind is None:
            continue
        if f.startswith("pnccl") and kind not in ("T", "i"):
            misbound.append(f"{f} is '{kind}', expected a strong definition 'T'")
        if f.startswith("nccl") and kind not in ("W", "V"):
            misbound.append(f"{f} is '{kind}', expected a weak definition 'W'")
    public = [f for f in functions if f.startswith("nccl")]
    done = sum(1 for f in public if f in symbols and "p" + f in symbols)
    print(f"{lib_path}: {done}/{len(public)} API functions exported with their p-twin")
    for f in missing:
        print(f"  missing: {f}")
    for m in misbound:
        print(f"  wrong binding: {m}")
    return not missing and not misbound


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    headers = [a for a in argv[1:] if a.endswith(".h")]
    libs = [a for a in argv[1:] if not a.endswith(".h")]
    if not headers or not libs:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    functions = sorted(set(f for h in headers for f in declared_functions(h)))
    # Guard the parser itself: the headers declare ~40 functions, each twice.
    if len(functions) < 80 or any(("p" + f) not in functions for f in functions if f.startswith("nccl")):
        print(f"check_exports: parsed only {len(functions)} functions from {headers}, "
              "or some lack their p-twin: the header parser needs a look", file=sys.stderr)
        return 2
    ok = all([check(functions, lib) for lib in libs])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
