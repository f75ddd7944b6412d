#!/usr/bin/env bash
# The test command (README): sets up, builds gpu_backend=cuda and
# gpu_backend=hip, runs the host unit tests of both, again under ASan+UBSan
# and under TSan (and the GPU suite where a GPU is visible), installs the
# CUDA build into a temporary prefix and builds consumer programs against it
# alone (ci/check_install.sh), and ends with one line "N passed, N failed".
#
# What is not there is skipped with its reason, not failed: the HIP build
# where hipcc is missing and cannot be installed (GPU machines: no network),
# the NCCL comparison benchmarks where no NCCL is found (ci/find_nccl.sh:
# $UNICCL_NCCL_HOME, /usr/local/cuda, the nvidia-nccl-cu13 wheel).
#
#   bash ci/test.sh            # everything
#   UNICCL_SKIP_HIP=1 UNICCL_SKIP_SANITIZERS=1 bash ci/test.sh
#   UNICCL_KERNEL_FILTER=all bash ci/test.sh   # CI builds f32 GPU kernels, f32/bf16 emulated and HIP ones
#   UNICCL_KERNEL_OPS=all bash ci/test.sh      # GPU kernels with every reduction op (CI: sum)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
source ci/setup.sh   # never ends this script, leaves its options alone

# CI (no GPU) builds the f32 GPU kernels with the sum (a compile check:
# nothing runs them there) and f32 and bf16 emulated ones with every op (the
# emulator tests run them); where a GPU runs the GPU suite, every datatype
# and op (coll_test checks them all). Without a GPU the kernels are compiled
# to PTX only (-Dgpu_archs=compute_90): the same front end, without ptxas's
# three quarters of their compile time.
default_filter=f32 default_emu_filter=f32,bf16 default_archs=compute_90 default_ops=sum
nvidia-smi -L >/dev/null 2>&1 && default_filter=all default_emu_filter=all default_archs=auto default_ops=all
filter=${UNICCL_KERNEL_FILTER:-$default_filter}
emu_filter=${UNICCL_KERNEL_FILTER:-$default_emu_filter}
ops=${UNICCL_KERNEL_OPS:-$default_ops}
jobs=${UNICCL_JOBS:-$(nproc)}
# On a machine of a few cores (CI's has 2) every tier is a unity build: each
# batch of sources is one translation unit, so the library's and the tests'
# headers are parsed once per batch, not once per file (the library
# compiles in less than half the CPU time). With more cores the sources
# compile one by one, in parallel. The GPU kernels stay apart either way
# (kernel_build_options), and so do the ASan tier's static libraries
# (archive_build_options in meson.build says why).
unity=off
[ "$jobs" -le 4 ] && unity=on
# The per-test ThreadSanitizer builds (*-tsan) only where the TSan tier below
# does not run: it runs the same tests on a wholly instrumented build.
tsan_tests=false
[ "${UNICCL_SKIP_SANITIZERS:-0}" = 1 ] && tsan_tests=true
build=${UNICCL_BUILD_DIR:-$root/build}
summary=()

configure() {  # dir, extra args...
  local dir=$1; shift
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" || return 1
  else
    meson configure "$dir" "$@" >/dev/null || return 1
  fi
}

run_suite() {  # label, dir, suite [meson test options]
  local label=$1 dir=$2 suite=$3
  shift 3
  # Two test processes on a 2-core CI machine; half the cores on bigger ones
  # (the emulator tests run many threads each; timing checks need headroom).
  local procs=$(( jobs > 4 ? jobs / 2 : 2 ))
  meson test -C "$dir" --suite "$suite" --num-processes "$procs" --print-errorlogs "$@" >"$dir/test-$suite.log" 2>&1
  local rc=$?
  python3 "$root/ci/count_tests.py" "$label" "$dir/meson-logs/testlog.json" >>"$root/.test-counts"
  tail -n 25 "$dir/test-$suite.log"
  python3 "$root/ci/count_tests.py" --slowest 8 "$dir/meson-logs/testlog.json"
  # A failed test's own output (its gtest lines are on stdout, which the
  # summary above leaves out): enough to see which check failed.
  [ $rc -eq 0 ] || python3 "$root/ci/count_tests.py" --failures 60 "$dir/meson-logs/testlog.json"
  return $rc
}

rm -f "$root/.test-counts"
status=0
# Wall time of each phase, printed before the closing line: where CI's
# minutes go (the budget is 30 on a 2-core machine).
phase_times=()
phase_start=0
phase_done() {  # label: the phase that just ended
  phase_times+=("$(printf '%-16s %5d s' "$1" $((SECONDS - phase_start)))")
  phase_start=$SECONDS
}
phase_done "setup"

# The NCCL comparison benchmarks only where an NCCL is found; a named
# UNICCL_NCCL_HOME without one is an error (find_nccl.sh says why).
if nccl_home=$(bash ci/find_nccl.sh); then
  if [ -n "$nccl_home" ]; then echo "comparison benchmarks against the NCCL in $nccl_home"
  else echo "comparison benchmarks SKIPPED: no NCCL found (UNICCL_NCCL_HOME, /usr/local/cuda, nvidia-nccl-cu13 wheel)"; fi
else
  echo "nccl-home 0 1" >>"$root/.test-counts"; status=1; nccl_home=""
fi

echo "=== cuda build (kernels: $filter, ops: $ops; emulated: $emu_filter) ==="
if configure "$build/cuda" -Dunity=$unity -Dgpu_backend=cuda -Dgpu_archs="$default_archs" -Dkernel_filter="$filter" -Dkernel_ops="$ops" -Demu_kernel_filter="$emu_filter" -Dnccl_home="$nccl_home" -Dtsan_tests=$tsan_tests \
   && ninja -C "$build/cuda" -j "$jobs"; then
  run_suite cuda-unit "$build/cuda" unit || status=1
  if nvidia-smi -L >/dev/null 2>&1; then run_suite cuda-gpu "$build/cuda" gpu || status=1; fi
  # The installed tree works on its own: tools find their libraries through
  # RUNPATH; programs, pkg-config and CMake projects build against the
  # installed prefix with NVIDIA's NCCL hidden (ci/check_install.sh).
  echo "=== install check ==="
  if bash ci/check_install.sh "$build/cuda" >"$build/cuda/install-check.log" 2>&1; then
    echo "install-check 1 0" >>"$root/.test-counts"
  else
    echo "install-check 0 1" >>"$root/.test-counts"; status=1
  fi
  tail -n 5 "$build/cuda/install-check.log"
  phase_done "cuda"
else
  echo "cuda build FAILED"; echo "cuda-build 0 1" >>"$root/.test-counts"; status=1
fi

# Host unit tests under AddressSanitizer + UndefinedBehaviorSanitizer and
# under ThreadSanitizer (bootstrap root thread, callbacks, watchdog). These
# builds only run the unit suite, so they build only what it needs
# (ci/suite_targets.py: not the GPU test programs), at -O1 as the
# sanitizers recommend (-O3 compiles 40% slower under ASan; NDEBUG as the
# release build, so both run the same code).
if [ "${UNICCL_SKIP_SANITIZERS:-0}" != 1 ]; then
  for san in address,undefined thread; do
    label=$( [ "$san" = thread ] && echo tsan || echo asan-ubsan )
    # ThreadSanitizer checks the tests whose code starts threads; the tests
    # of suite single-thread start none (the library's included).
    no_suites=$( [ "$san" = thread ] && echo "--exclude single-thread" )
    # UBSan's null and alignment checks double the library's compile time
    # under ASan: a null dereference is ASan's SEGV report anyway, and the
    # code that reads foreign bytes (the parsers) is fuzzed with every UBSan
    # check (tests/fuzz). Every other UBSan check stays.
    san_args=()
    [ "$san" = thread ] || san_args=(-Dcpp_args=-fno-sanitize=null,alignment -Dc_args=-fno-sanitize=null,alignment)
    echo "=== $label build ==="
    dir=$build/$label
    if configure "$dir" -Dunity=$unity -Dgpu_backend=cuda -Dkernel_filter=f32 -Dbench=false "${san_args[@]}" \
         -Db_sanitize=$san -Db_lundef=false -Doptimization=1 -Db_ndebug=true \
       && targets=$(python3 ci/suite_targets.py "$dir" unit --exclude emu $no_suites) \
       && ninja -C "$dir" -j "$jobs" $targets; then
      # Suite emu (tests/emu/meson.build): the CPU emulator's runs of the
      # whole library, hundreds of threads each, left to the release build
      # above; under a sanitizer on a 2-core machine they cost more than the
      # rest of CI together. These tiers check the host code's own tests.
      UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 TSAN_OPTIONS=halt_on_error=1 \
        run_suite "$label-unit" "$dir" unit --no-rebuild --no-suite emu ${no_suites/--exclude/--no-suite} || status=1
    else
      echo "$label build FAILED"; echo "$label-build 0 1" >>"$root/.test-counts"; status=1
    fi
    phase_done "$label"
  done
fi

# Fuzz the bootstrap and config parsers (clang + libFuzzer, ASan+UBSan), 5 s
# per target here (UNICCL_FUZZ_SECONDS; tests/fuzz/run.sh alone: 20 s) over
# the seed corpus: a smoke run on every change (each target runs 50 000 to
# 2 million inputs in that time on a CI core), longer runs by hand.
if [ "${UNICCL_SKIP_FUZZ:-0}" != 1 ]; then
  echo "=== fuzz ==="
  mkdir -p "$build"
  UNICCL_FUZZ_SECONDS=${UNICCL_FUZZ_SECONDS:-5} UNICCL_FUZZ_JOBS=$jobs bash tests/fuzz/run.sh >"$build/fuzz.log" 2>&1 || status=1
  tail -n 12 "$build/fuzz.log"
  if grep -q '^fuzz: SKIPPED' "$build/fuzz.log"; then echo "fuzz 0 0 1" >>"$root/.test-counts"
  else sed -n 's/^fuzz: [0-9]* targets, \([0-9]*\) passed, \([0-9]*\) failed$/fuzz \1 \2 0/p' "$build/fuzz.log" >>"$root/.test-counts"; fi
  phase_done "fuzz"
fi

if [ "${UNICCL_SKIP_HIP:-0}" != 1 ] && ! command -v hipcc >/dev/null; then
  echo "=== hip build SKIPPED: hipcc not found and ci/setup.sh could not install it (no network or no apt-get) ==="
  echo "hip-build 0 0 1" >>"$root/.test-counts"
elif [ "${UNICCL_SKIP_HIP:-0}" != 1 ]; then
  # f32 kernels with the sum only: CI is the only place the HIP kernels
  # are compiled; the other datatypes differ from f32 only in the port
  # layer's conversions, which port-check-amd compiles for every AMD target
  # (a bf16 collective kernel alone took hipcc longer than the rest of this
  # tier), and the other ops only in reduce.h's functors, which every
  # emulated build compiles (and runs). hipcc (ROCm 5.2) inlines the whole
  # kernel into one function, whose compile time grows faster than its
  # size: the two f32 kernels took 93 and 82 s with every op, 21 and 17 s
  # with the sum.
  hip_filter=${UNICCL_KERNEL_FILTER:-f32}
  hip_ops=${UNICCL_KERNEL_OPS:-sum}   # the CPU machine's default, on a GPU machine too (no AMD GPU runs them)
  echo "=== hip build (kernels: $hip_filter; ops: $hip_ops) ==="
  # Kernels for gfx90a; the p2p kernel (all protocol code) also for gfx940,
  # gfx1030 and gfx1100 where the compiler has its device libraries (the
  # summary names the ones left out), and the port-check-amd test reads the
  # port layer's code for all four. Every link line names the targets
  # (meson.build), so hipcc never asks for this machine's GPUs. The HIP build
  # also proves the benchmarks build without MPI. The host unit tests on the
  # fake GPU stay with the CUDA tier (-Dhost_tests=false): src/common is the
  # same code for both backends; this tier runs the tests that depend on the
  # backend and its compiler (headers, exports, device code checks, the
  # benchmark self-test).
  if CXX=hipcc configure "$build/hip" -Dunity=$unity -Dgpu_backend=hip -Dkernel_filter="$hip_filter" -Dkernel_ops="$hip_ops" -Dmpi=disabled -Dtsan_tests=false -Dhost_tests=false \
     -Dgpu_archs=gfx90a -Dgpu_check_archs=gfx940,gfx1030,gfx1100 \
     && ninja -C "$build/hip" -j "$jobs"; then
    # The emulator's runs are the CUDA tier's (the same single-source code).
    run_suite hip-unit "$build/hip" unit --no-suite emu || status=1
  else
    echo "hip build FAILED"; echo "hip-build 0 1" >>"$root/.test-counts"; status=1
  fi
  phase_done "hip"
fi

echo "=== time per phase (total $SECONDS s) ==="
printf '%s\n' "${phase_times[@]}"

python3 ci/count_tests.py --total "$root/.test-counts"
exit $status
