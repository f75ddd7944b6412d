#!/usr/bin/env python3
"""Makes a view of a CUDA toolkit with every NCCL file left out, for
building programs against an installed uniccl with no way to read NVIDIA's
NCCL by mistake (ci/check_install.sh).

NVIDIA's NCCL may sit inside the toolkit (include/nccl*.h, include/nccl_device/,
lib/libnccl*), and nvcc puts the toolkit's include and library directories on
its search paths by itself (nvcc.profile: $(TOP)/<target>/include and lib),
where no -I order can take them off. nvcc finds TOP from the path it was
started by, so <DEST>/bin/nvcc, a link to the real one in a tree of links,
makes nvcc search <DEST>'s directories instead, which hold no NCCL file.

The view: a directory that holds an NCCL file somewhere below it is made
anew with links to its entries; any other entry is one link to the
original. Relative links inside the toolkit (targets/x86_64-linux/include ->
../../include) are kept relative, so they lead into the view.

usage: toolkit_without_nccl.py CUDA_HOME DEST     prints what it left out
"""

import os
import sys


def is_nccl(name):
    return name.startswith(('nccl', 'libnccl'))


def holds_nccl(path, seen=None):
    """True if an NCCL file is below path, links followed (the view must
    then be made anew down to it, so that links into it lead into the view)."""
    seen = set() if seen is None else seen
    real = os.path.realpath(path)
    if real in seen:
        return False
    seen.add(real)
    for name in os.listdir(path):
        p = os.path.join(path, name)
        if is_nccl(name) or (os.path.isdir(p) and holds_nccl(p, seen)):
            return True
    return False


def mirror(src, dst, root, left_out):
    os.makedirs(dst, exist_ok=True)
    for name in sorted(os.listdir(src)):
        s, d = os.path.join(src, name), os.path.join(dst, name)
        if is_nccl(name):
            left_out.append(s)
            continue
        if os.path.islink(s):
            target = os.readlink(s)
            real = os.path.realpath(s)
            if not os.path.isabs(target) and (real == root or real.startswith(root + os.sep)):
                os.symlink(target, d)   # leads into the view
                continue
            s = real                    # leads outside: treat as what it names
        # bin/ is made anew too: nvcc finds TOP as <its directory>/.., and
        # .. of a link to the toolkit's bin/ would be the toolkit itself.
        if os.path.isdir(s) and (holds_nccl(s) or (src == root and name == 'bin')):
            mirror(s, d, root, left_out)
        else:
            os.symlink(s, d)


def main(argv):
    if len(argv) != 3:
        print('usage: toolkit_without_nccl.py CUDA_HOME DEST')
        return 2
    root = os.path.realpath(argv[1])
    if not os.path.isfile(os.path.join(root, 'bin', 'nvcc')):
        print(f'toolkit_without_nccl: no bin/nvcc under {argv[1]}')
        return 1
    left_out = []
    mirror(root, argv[2], root, left_out)
    for p in left_out:
        print(f'left out {p}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
