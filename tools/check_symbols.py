#!/usr/bin/env python3
"""Checks that shared libraries export the API and nothing else.

Every defined dynamic symbol (nm -D --defined-only) must be a function
ncclX or pncclX declared in one of the headers. Anything else -- libstdc++
template instances (_Z...), the statically linked vendor runtime, internal
extern "C" helpers -- is a leak that programs and other libraries could bind
to (src/exports.map keeps them out).

usage: check_symbols.py HEADER [HEADER ...] -- LIBRARY [LIBRARY ...]
exit 0: only the API is exported; 1: leaks (listed); 2: usage or tool failure.
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_exports import declared_functions, exported_symbols  # noqa: E402

API_NAME = re.compile(r"^p?nccl[A-Z]\w*$")
# Exported by NVIDIA's libnccl.so.2 without a public declaration, and bound
# by its clients (PyTorch 2.11 calls it): the drop-in exports it too.
UNDECLARED_EXPORTS = {"ncclResetDebugInitInternal"}


def check(lib, declared):
    symbols = exported_symbols(lib)
    # 'A' entries are version-node names a version script may add, not code or data.
    names = sorted(n for n, kind in symbols.items() if kind != "A")
    leaks = [n for n in names if not API_NAME.match(n)]
    # pnccl* are the profiling aliases NCCL_API makes of every API function
    # (NCCL exports them too; its device API headers declare only ncclX).
    undeclared = [n for n in names if API_NAME.match(n) and n not in declared and n.lstrip("p") not in declared
                  and n not in UNDECLARED_EXPORTS]
    print(f"{lib}: {len(names)} exported symbols, {len(leaks)} outside nccl*/pnccl*, "
          f"{len(undeclared)} nccl* names no header declares")
    for n in leaks[:40]:
        print(f"  leak: {n}")
    if len(leaks) > 40:
        print(f"  ... and {len(leaks) - 40} more")
    for n in undeclared:
        print(f"  undeclared: {n}")
    return not leaks and not undeclared and bool(names)


def main(argv):
    if "--" not in argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    i = argv.index("--")
    headers, libs = argv[1:i], argv[i + 1:]
    if not headers or not libs:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    declared = set()
    for h in headers:
        declared.update(declared_functions(h))
    if len(declared) < 80:
        print(f"check_symbols: parsed only {len(declared)} functions from {headers}", file=sys.stderr)
        return 2
    ok = all([check(lib, declared) for lib in libs])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
