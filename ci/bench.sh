#!/usr/bin/env bash
# The benchmark job: builds uniccl's *_perf tools if needed and runs them on
# every visible GPU of this machine (one process, -g <ngpus>). Where no GPU
# is visible, it builds the tools for uniccl's CPU emulator instead and runs
# them on emulated GPUs (docs/emulator.md): every result is checked, the
# times are the emulator's, not a GPU's.
#
#   ci/bench.sh                 all_reduce_perf -b 8 -e 1G -f 2 -g <ngpus>
#   ci/bench.sh --all           every *_perf tool
#   ci/bench.sh -- -d all -o all   extra arguments for the tools
#   ci/bench.sh --build-only [--nccl-home DIR]   just (re)build, optionally
#                               with the NCCL/RCCL comparison set (*_perf_nccl)
#   ci/bench.sh --count-gpus    print the number of visible GPUs
#
# Environment: BUILD_DIR (default build-bench; build-bench-emu on the
# emulator), NGPUS (default: visible GPUs; 4 emulated), GPU_BACKEND
# (cuda|hip, default: whichever compiler is found), UNICCL_BENCH_EMU (1: the
# emulator even where a GPU is visible; 0: never the emulator).
# Exit code: non-zero when a build or any benchmark (wrong results included) fails.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Install what is missing (README: both commands do). A CUDA machine needs no
# hipcc: do not ask apt for it there (GPU machines have no network anyway).
if [[ ${GPU_BACKEND:-} != hip ]] && { command -v nvcc > /dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; }; then
  export UNICCL_SKIP_HIP=${UNICCL_SKIP_HIP:-1}
fi
source "$ROOT/ci/setup.sh"   # never ends this script, leaves its options alone
BUILD_DIR_SET=${BUILD_DIR:-}
BUILD_DIR=${BUILD_DIR:-$ROOT/build-bench}
ALL=0
BUILD_ONLY=0
NCCL_HOME_ARG=""
EXTRA=()

# Whether a GPU is visible: a driver tool lists one. Without any, the
# emulator runs the benchmarks (UNICCL_BENCH_EMU overrides).
gpu_visible() {
  if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L 2> /dev/null | grep -q '^GPU'; then return 0; fi
  if command -v rocm-smi > /dev/null 2>&1 && rocm-smi --showuniqueid 2> /dev/null | grep -q 'Unique ID'; then return 0; fi
  return 1
}

count_gpus() {
  local list=${CUDA_VISIBLE_DEVICES:-${HIP_VISIBLE_DEVICES:-${ROCR_VISIBLE_DEVICES:-}}}
  if [[ -n $list ]]; then
    local ids
    IFS=, read -ra ids <<< "$list"
    echo "${#ids[@]}"
  elif command -v nvidia-smi > /dev/null 2>&1; then
    nvidia-smi -L | grep -c '^GPU'
  elif command -v rocm-smi > /dev/null 2>&1; then
    rocm-smi --showuniqueid | grep -c 'Unique ID'
  else
    echo 1
  fi
}

# Configures (once) and builds the benchmarks; with a prefix, also the
# comparison set built against the NCCL/RCCL found there.
bench_build() {
  local nccl_home=$1
  if [[ ! -f $BUILD_DIR/build.ninja ]]; then
    local backend=${GPU_BACKEND:-}
    if [[ -z $backend ]]; then
      if command -v nvcc > /dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then backend=cuda
      elif command -v hipcc > /dev/null 2>&1; then backend=hip
      else echo "bench.sh: neither nvcc nor hipcc found" >&2; exit 2
      fi
    fi
    local args=(-Dgpu_backend="$backend" -Dtests=false -Dbench=true)
    [[ -n $nccl_home ]] && args+=(-Dnccl_home="$nccl_home")
    if [[ $backend == hip ]]; then
      CXX=hipcc meson setup "$BUILD_DIR" "$ROOT" "${args[@]}"
    else
      PATH=/usr/local/cuda/bin:$PATH meson setup "$BUILD_DIR" "$ROOT" "${args[@]}"
    fi
  elif [[ -n $nccl_home ]]; then
    meson configure "$BUILD_DIR" -Dnccl_home="$nccl_home"
  fi
  PATH=/usr/local/cuda/bin:$PATH ninja -C "$BUILD_DIR"
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --all) ALL=1 ;;
    --build-only) BUILD_ONLY=1 ;;
    --nccl-home) shift; NCCL_HOME_ARG=${1:?--nccl-home needs a directory} ;;
    --count-gpus) count_gpus; exit 0 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

EMU=${UNICCL_BENCH_EMU:-}
if [[ -z $EMU ]]; then
  if gpu_visible; then EMU=0; else EMU=1; fi
fi

# The emulator: the tools built as *_perf_emu (bench/meson.build) with the
# f32 kernels compiled for the CPU, nothing else of the build; 8 B to 1 MiB
# and few iterations (each GPU thread is an OS thread: larger sizes take
# seconds per operation on 2 cores).
emu_build() {
  if [[ ! -f $BUILD_DIR/build.ninja ]]; then
    PATH=/usr/local/cuda/bin:$PATH meson setup "$BUILD_DIR" "$ROOT" -Dgpu_backend=cuda -Dtests=false -Dbench=true \
      -Dkernel_filter=f32 -Dmpi=disabled
  fi
  local targets=()
  for tool in "${TOOLS[@]}"; do targets+=("bench/${tool}_emu"); done
  PATH=/usr/local/cuda/bin:$PATH ninja -C "$BUILD_DIR" "${targets[@]}"
}

TOOLS=(all_reduce_perf)
if [[ $ALL == 1 ]]; then
  TOOLS=(all_reduce_perf all_gather_perf reduce_scatter_perf broadcast_perf reduce_perf
         alltoall_perf sendrecv_perf gather_perf scatter_perf)
fi

if [[ $EMU == 1 ]]; then
  [[ -n $NCCL_HOME_ARG ]] && { echo "bench.sh: --nccl-home needs a GPU (the emulator runs uniccl only)" >&2; exit 2; }
  [[ -z $BUILD_DIR_SET ]] && BUILD_DIR=$ROOT/build-bench-emu
  echo "# bench.sh: no GPU visible: building the benchmarks for uniccl's CPU emulator (docs/emulator.md)"
  emu_build
  [[ $BUILD_ONLY == 1 ]] && exit 0
  NGPUS=${NGPUS:-4}
  # Emulated GPUs (UNICCL_EMU_DEVICES), one channel each: every GPU thread
  # is an OS thread. float32 data (the kernels built), results checked.
  export UNICCL_EMU_DEVICES=$NGPUS UNICCL_P2P_NCHANNELS=${UNICCL_P2P_NCHANNELS:-1}
  echo "# bench.sh: $NGPUS emulated GPUs on $(nproc) CPU cores, build $BUILD_DIR"
  echo "# NOTE: these are the CPU emulator's times, not a GPU's: they show that uniccl runs and computes correct"
  echo "# results (every size checked), not how fast it is. On a machine with a GPU this command measures the GPU."
  failed=()
  for tool in "${TOOLS[@]}"; do
    echo "# ---- $tool (CPU emulator)"
    if ! "$BUILD_DIR/bench/${tool}_emu" -b 8 -e 1M -f 4 -n 3 -w 1 -c 1 -d float -g "$NGPUS" "${EXTRA[@]}"; then
      failed+=("$tool")
    fi
  done
  if [[ ${#failed[@]} -gt 0 ]]; then
    echo "bench.sh: FAILED on the CPU emulator: ${failed[*]}" >&2
    exit 1
  fi
  echo "bench.sh: all benchmarks passed on the CPU emulator (results checked; times are the emulator's, not a GPU's)"
  exit 0
fi

bench_build "$NCCL_HOME_ARG"
[[ $BUILD_ONLY == 1 ]] && exit 0

export NCCL_NVLS_ENABLE=0   # measure the paths uniccl implements; NVLS (NVSwitch SHARP) off
NGPUS=${NGPUS:-$(count_gpus)}
echo "# bench.sh: $NGPUS GPU(s), build $BUILD_DIR"

failed=()
for tool in "${TOOLS[@]}"; do
  echo "# ---- $tool"
  if ! "$BUILD_DIR/bench/$tool" -b 8 -e 1G -f 2 -g "$NGPUS" "${EXTRA[@]}"; then
    failed+=("$tool")
  fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "bench.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "bench.sh: all benchmarks passed"
