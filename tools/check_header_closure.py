#!/usr/bin/env python3
"""Checks that a header tree is closed: every #include of the project's own
headers made by a header in the tree finds its file in the same tree. Run on
an installed <prefix>/include, it proves that a program including any
installed header compiles without the source tree; run on the source
include/, it catches a dangling include before it is installed.

What counts as the project's own:
  #include "x"   every quoted include. It must resolve next to the including
                 file or at the tree's root (as -I<root> finds it), and stay
                 inside the tree.
  #include <x>   when x's first path component starts with nccl, rccl or
                 uniccl (<nccl.h>, <nccl_device/core.h>, <rccl/rccl.h>), or
                 names an entry of the tree's root. It must resolve at the root.
Other angle includes (<cuda_runtime.h>, <stdint.h>, <new>) are the toolchain's.
Includes inside #if branches are checked too: a program may take any branch.
A file that is not a header (*.h, *.hpp, *.cuh, *.inl) is reported as a
warning: installing include/ as a directory would ship it.

usage: check_header_closure.py INCLUDE_DIR     exit 0: closed; 1: not; 2: usage
       check_header_closure.py --self-test     exit 0: the check finds what it must
"""

import os
import re
import sys
import tempfile

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
HEADER_SUFFIXES = ('.h', '.hpp', '.cuh', '.inl')
OWN_PREFIXES = ('nccl', 'rccl', 'uniccl')


def inside(path, root):
    path, root = os.path.realpath(path), os.path.realpath(root)
    return path == root or path.startswith(root + os.sep)


def check_tree(root):
    """Returns (headers checked, own includes checked, problems, warnings)."""
    root_entries = set(os.listdir(root))
    problems, warnings = [], []
    n_headers = n_includes = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if not name.endswith(HEADER_SUFFIXES):
                warnings.append(f'{rel}: not a header, but in the header tree')
                continue
            n_headers += 1
            with open(path, encoding='utf-8', errors='replace') as f:
                lines = f.readlines()
            for lineno, line in enumerate(lines, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                kind, target = m.group(1), m.group(2).strip()
                first = target.split('/')[0]
                if kind == '"':
                    candidates = [os.path.join(dirpath, target), os.path.join(root, target)]
                elif first.startswith(OWN_PREFIXES) or first in root_entries:
                    candidates = [os.path.join(root, target)]
                else:
                    continue
                n_includes += 1
                found = [c for c in candidates if os.path.isfile(c)]
                shown = f'{kind}{target}{">" if kind == "<" else kind}'
                if not found:
                    problems.append(f'{rel}:{lineno}: #include {shown}: not in the tree')
                elif not inside(found[0], root):
                    problems.append(f'{rel}:{lineno}: #include {shown}: resolves outside the tree '
                                    f'({os.path.normpath(found[0])})')
    return n_headers, n_includes, problems, warnings


def run(root):
    if not os.path.isdir(root):
        print(f'check_header_closure: {root}: not a directory')
        return 2
    n_headers, n_includes, problems, warnings = check_tree(root)
    for w in warnings:
        print(f'check_header_closure: warning: {w}')
    for p in problems:
        print(f'check_header_closure: {p}')
    if n_headers == 0:
        print(f'check_header_closure: FAIL: no headers under {root}')
        return 1
    verdict = 'FAIL' if problems else 'OK'
    print(f'check_header_closure: {verdict}: {n_headers} headers, {n_includes} includes of the '
          f'project\'s own, {len(problems)} not found in {root}')
    return 1 if problems else 0


def self_test():
    """The check passes a closed tree and fails each kind of hole."""
    closed = {
        'nccl.h': '#include "uniccl.h"\n',
        'uniccl.h': '#include <cuda_runtime.h>\n#include <stdint.h>\n',
        'nccl_device.h': '#include "nccl_device/core.h"\n#include <nccl_device/gin.h>\n',
        'nccl_device/core.h': '#include "../nccl.h"\n#include "impl/port.h"\n',
        'nccl_device/gin.h': '#if 0\n#  include "core.h"\n#endif\n',
        'nccl_device/impl/port.h': '#include "../core.h"\n',
        'rccl/rccl.h': '#include "../uniccl.h"\n',
    }
    cases = [
        ('closed tree', {}, 0),
        ('quoted include missing', {'nccl_device.h': '#include "nccl_device/missing.h"\n'}, 1),
        ('angle include of an own header missing', {'nccl.h': '#include <nccl_device/gone.h>\n'}, 1),
        ('include under #if missing', {'nccl_device/gin.h': '#if 0\n#include "absent.h"\n#endif\n'}, 1),
        # ../outside.h exists next to the tree (written below), not in it.
        ('quoted include escaping the tree', {'rccl/rccl.h': '#include "../../outside.h"\n'}, 1),
    ]
    failures = 0
    for label, change, want in cases:
        files = dict(closed)
        files.update(change)
        with tempfile.TemporaryDirectory(prefix='header-closure-') as top:
            root = os.path.join(top, 'include')
            with open(os.path.join(top, 'outside.h'), 'w') as f:
                f.write('\n')
            for rel, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
                with open(os.path.join(root, rel), 'w') as f:
                    f.write(text)
            _, _, problems, _ = check_tree(root)
        got = 1 if problems else 0
        failures += got != want
        print(f'self-test: {label}: {"flagged" if got else "passed"} ({"ok" if got == want else "WRONG"})')
        for p in problems:
            print(f'  {p}')
    print(f'self-test: {len(cases) - failures} of {len(cases)} verdicts right')
    return 1 if failures else 0


def main(argv):
    if len(argv) == 2 and argv[1] == '--self-test':
        return self_test()
    if len(argv) != 2:
        print('usage: check_header_closure.py INCLUDE_DIR | --self-test')
        return 2
    return run(argv[1])


if __name__ == '__main__':
    sys.exit(main(sys.argv))
