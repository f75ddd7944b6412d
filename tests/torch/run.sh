#!/usr/bin/env bash
# Runs torch_nccl_test.py with uniccl's libnccl.so.2 preloaded into PyTorch.
#
#   bash tests/torch/run.sh /path/to/build/src/libnccl.so.2
#
# TORCH_PYTHON: the Python with PyTorch (default /opt/torch/.venv/bin/python,
# where the GPU machines have PyTorch 2.11 cu130). Exit 77 (skipped), with
# the reason, where that Python, PyTorch or the library is missing.
set -uo pipefail
lib=${1:?usage: run.sh PATH/TO/libnccl.so.2}
py=${TORCH_PYTHON:-/opt/torch/.venv/bin/python}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ ! -e $lib ]]; then echo "skip: $lib does not exist (build uniccl first)"; exit 77; fi
if [[ ! -x $py ]]; then echo "skip: no Python with PyTorch at $py (set TORCH_PYTHON)"; exit 77; fi
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "skip: '$py -c \"import torch\"' fails without uniccl; PyTorch is not usable here"; exit 77
fi
lib=$(realpath "$lib")
# Loading torch with uniccl in place of NVIDIA's NCCL is itself the first
# check: torch resolves NCCL symbols at load time (e.g. ncclDevCommDestroy),
# so a missing export fails here with "undefined symbol".
if ! LD_PRELOAD=$lib "$py" -c 'import torch' ; then
  echo "FAIL: 'import torch' fails with $lib preloaded"; exit 1
fi
# NCCL_DEBUG=WARN: uniccl's warnings land in the log next to the failing check.
LD_PRELOAD=$lib NCCL_DEBUG=${NCCL_DEBUG:-WARN} exec "$py" "$here/torch_nccl_test.py" "$lib"
