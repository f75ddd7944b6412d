#!/usr/bin/env bash
# Installs what building and testing uniccl needs, where it is missing.
# Debian/Ubuntu with apt-get (CI and developer machines). CUDA itself (nvcc)
# is expected at /usr/local/cuda or on PATH; the GPU machines already have
# meson, ninja, GoogleTest and MPI, and no network, so nothing is installed there.
set -euo pipefail

need=()
command -v meson >/dev/null || need+=(meson)
command -v ninja >/dev/null || need+=(ninja-build)
command -v pkg-config >/dev/null || need+=(pkg-config)
[ -e /usr/include/gtest/gtest.h ] || need+=(libgtest-dev libgmock-dev)
[ -e /usr/include/infiniband/verbs.h ] || need+=(libibverbs-dev librdmacm-dev)
command -v mpicxx >/dev/null || need+=(libopenmpi-dev openmpi-bin)
if [ "${UNICCL_SKIP_HIP:-0}" != 1 ]; then
  command -v hipcc >/dev/null || need+=(hipcc)
  [ -e /usr/include/hip/hip_runtime.h ] || need+=(libamdhip64-dev)
fi

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "ci/setup.sh: installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${need[@]}"
  else
    echo "ci/setup.sh: missing ${need[*]} and cannot install them (need root and apt-get)" >&2
    exit 1
  fi
fi

if ! command -v nvcc >/dev/null; then
  for d in /usr/local/cuda/bin /usr/local/cuda-13/bin; do
    if [ -x "$d/nvcc" ]; then export PATH="$d:$PATH"; break; fi
  done
fi
command -v nvcc >/dev/null || { echo "ci/setup.sh: nvcc not found (install the CUDA toolkit at /usr/local/cuda)" >&2; exit 1; }
