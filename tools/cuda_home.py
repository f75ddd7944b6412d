#!/usr/bin/env python3
"""Prints the CUDA toolkit root that the given nvcc belongs to.

nvcc is often reached through a symlink or a wrapper script (for example
/usr/local/bin/nvcc running /usr/local/cuda-13.0/bin/nvcc), so the directory
it was found in says nothing about where cuda_runtime.h lives. nvcc itself
knows: its -dryrun output names the directory of the real binary (_HERE_).
"""
import os
import subprocess
import sys


def toolkit_root(nvcc):
    try:
        out = subprocess.run([nvcc, '-dryrun', '-E', '-x', 'cu', os.devnull],
                             capture_output=True, text=True, timeout=60)
        for line in (out.stdout + out.stderr).splitlines():
            if line.startswith('#$ _HERE_='):
                return os.path.dirname(os.path.realpath(line.split('=', 1)[1].strip()))
    except (OSError, subprocess.SubprocessError):
        pass
    return os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))


def main():
    if len(sys.argv) != 2:
        sys.exit('usage: cuda_home.py NVCC')
    root = toolkit_root(sys.argv[1])
    if not os.path.exists(os.path.join(root, 'include', 'cuda_runtime.h')):
        sys.exit('cuda_home.py: no include/cuda_runtime.h under %s (the toolkit of %s)'
                 % (root, sys.argv[1]))
    print(root)


if __name__ == '__main__':
    main()
