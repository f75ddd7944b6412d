#!/usr/bin/env python3
"""Folders of the library include each other one way only.

    check_folder_includes.py REPO_ROOT        exit 0: no folder pair but KNOWN includes both ways
    check_folder_includes.py --self-test      exit 0: the check finds what it must

A folder is a directory of src/common (core, transport, profiler, ...) or of
src itself (net, device, cuda, hip). Every quoted include of a source or
header under src/ is mapped to the folder of the file it names:
"common/<folder>/..." and "<folder>/..." as the build's include path finds
them, "x.h" and "../x/y.h" relative to the including file. An include of a
file in another folder is an edge of the folder graph; a pair of folders
with an edge each way is reported with one include of each direction, and
the check fails.

KNOWN lists the pairs allowed to include each other until they are
untangled (none today), each by giving the lower folder a narrow interface
instead of the communicator: the check fails on any other pair, and on a
listed pair that no longer includes both ways (take it off the list, so
that it cannot come back).

Why: when two folders include each other, neither can be read, tested or
changed without the other, and a subsystem ends up knowing the layout of
the code that calls it. The lower folder takes a narrow interface instead
(docs/architecture.md, "Layout").
"""

import os
import re
import sys
import tempfile

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SOURCE_SUFFIXES = ('.h', '.hpp', '.cc', '.cpp', '.cu', '.inl', '.def', '.in')


# Pairs (sorted) that include each other today, each one the lower folder
# reading ncclComm (core/comm.h) where it should take its own state. None:
# a pair only goes here with a reason, until it is untangled.
KNOWN = set()


def folder_of(rel):
    """The folder of a path relative to src/, or None (files at the top of src/ or src/common/)."""
    parts = rel.split('/')
    if parts[0] == 'common':
        return 'common/' + parts[1] if len(parts) > 2 else None
    return parts[0] if len(parts) > 1 else None


def resolve(src_root, including_rel, target):
    """The included file as a path relative to src/, or None when it is not the library's."""
    here = os.path.dirname(os.path.join(src_root, including_rel))
    for base in (here, src_root):
        path = os.path.normpath(os.path.join(base, target))
        if os.path.isfile(path):
            rel = os.path.relpath(path, src_root)
            return None if rel.startswith('..') else rel.replace(os.sep, '/')
    return None


def folder_edges(src_root):
    """{(from, to): 'file:line: #include "x"'} for every include that crosses folders."""
    edges = {}
    for dirpath, dirnames, filenames in os.walk(src_root):
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith(SOURCE_SUFFIXES):
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), src_root).replace(os.sep, '/')
            src_folder = folder_of(rel)
            if src_folder is None:
                continue
            with open(os.path.join(src_root, rel), encoding='utf-8', errors='replace') as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE_RE.match(line)
                    if not m:
                        continue
                    target = resolve(src_root, rel, m.group(1))
                    dst_folder = folder_of(target) if target else None
                    if dst_folder is None or dst_folder == src_folder:
                        continue
                    edges.setdefault((src_folder, dst_folder), f'src/{rel}:{lineno}: #include "{m.group(1)}"')
    return edges


def mutual_pairs(edges):
    return sorted((a, b) for (a, b) in edges if a < b and (b, a) in edges)


def check(src_root, known):
    edges = folder_edges(src_root)
    pairs = mutual_pairs(edges)
    folders = sorted({f for e in edges for f in e})
    for a, b in pairs:
        print(f'{a} <-> {b}:{"  (known)" if (a, b) in known else ""}')
        print(f'  {edges[(a, b)]}')
        print(f'  {edges[(b, a)]}')
    print(f'{len(folders)} folders, {len(edges)} one-way include edges, {len(pairs)} folder pairs that include '
          f'each other ({len([p for p in pairs if p in known])} of them known)')
    new = [p for p in pairs if p not in known]
    gone = sorted(p for p in known if p not in pairs)
    for a, b in new:
        print(f'FAIL: {a} and {b} now include each other; the lower one takes a narrow interface instead')
    for a, b in gone:
        print(f'FAIL: {a} and {b} no longer include each other: take the pair off KNOWN in {sys.argv[0]}')
    return 1 if new or gone else 0


def self_test():
    files = {
        'common/a/x.h': '#include "common/b/y.h"\n',
        'common/a/x.cc': '#include "x.h"\n#include "common/util/u.h"\n',
        'common/b/y.h': '#pragma once\n',
        'common/b/y.cc': '#include "../a/x.h"\n',          # relative: b -> a
        'common/util/u.h': '#pragma once\n',
        'net/n.cc': '#include "common/util/u.h"\n#include "net/n.h"\n',
        'net/n.h': '#pragma once\n',
        'common/gpu.h': '#include "common/util/u.h"\n',    # top-level files belong to no folder
    }
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), 'w') as f:
                f.write(text)
        edges = folder_edges(root)
        want = {('common/a', 'common/b'), ('common/a', 'common/util'), ('common/b', 'common/a'),
                ('net', 'common/util')}
        if set(edges) != want:
            print(f'self-test: edges {sorted(edges)}, expected {sorted(want)}')
            return 1
        if mutual_pairs(edges) != [('common/a', 'common/b')]:
            print(f'self-test: pairs {mutual_pairs(edges)}')
            return 1
        if check(root, set()) != 1 or check(root, {('common/a', 'common/b')}) != 0:
            print('self-test: a new pair must fail, a known one pass')
            return 1
        os.remove(os.path.join(root, 'common/b/y.cc'))
        if mutual_pairs(folder_edges(root)):
            print('self-test: a one-way include reported as mutual')
            return 1
        if check(root, {('common/a', 'common/b')}) != 1:
            print('self-test: a known pair that went must fail')
            return 1
    print('self-test passed')
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] == '--self-test':
        return self_test()
    if len(argv) != 2:
        print(__doc__)
        return 2
    src_root = os.path.join(argv[1], 'src')
    if not os.path.isdir(os.path.join(src_root, 'common')):
        # Given src/ itself (or a wrong path) the walk would find no folder
        # and report every KNOWN pair as gone.
        print('%s has no src/common: give the repository root' % argv[1])
        return 2
    return check(src_root, KNOWN)


if __name__ == '__main__':
    sys.exit(main(sys.argv))
