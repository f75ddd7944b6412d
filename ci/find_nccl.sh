#!/usr/bin/env bash
# Prints the prefix of an NVIDIA NCCL install to build the comparison
# benchmarks (*_perf_nccl) against, or nothing when there is none.
#
#   nccl_home=$(bash ci/find_nccl.sh)
#
# Order: $UNICCL_NCCL_HOME when set (an error, exit 2, if it holds no NCCL:
# a name given on purpose must not be skipped silently), /usr/local/cuda
# (the CI image ships NCCL there), then the python wheel nvidia-nccl-cu13
# (the GPU machines: no NCCL in the toolkit). A prefix counts when it has
# include/nccl.h and lib/ or lib64/ libnccl.so or libnccl.so.2, as
# bench/meson.build needs.
set -uo pipefail

has_nccl() {  # prefix
  [[ -f $1/include/nccl.h ]] || return 1
  local d n
  for d in lib lib64; do
    for n in libnccl.so libnccl.so.2; do [[ -f $1/$d/$n ]] && return 0; done
  done
  return 1
}

if [[ -n ${UNICCL_NCCL_HOME:-} ]]; then
  if has_nccl "$UNICCL_NCCL_HOME"; then echo "$UNICCL_NCCL_HOME"; exit 0; fi
  echo "find_nccl.sh: UNICCL_NCCL_HOME=$UNICCL_NCCL_HOME has no include/nccl.h with lib/ or lib64/ libnccl.so[.2]" >&2
  exit 2
fi
if has_nccl /usr/local/cuda; then echo /usr/local/cuda; exit 0; fi
wheel=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || true)
if [[ -n $wheel ]] && has_nccl "$wheel"; then echo "$wheel"; exit 0; fi
exit 0
