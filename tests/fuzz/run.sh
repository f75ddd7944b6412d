#!/usr/bin/env bash
# Builds the bootstrap/config fuzz targets with clang + libFuzzer (ASan+UBSan)
# and runs each for a bounded time over its seed corpus in corpus/<target>/.
# Any crash, sanitizer report, leak, timeout or broken property fails the run.
# Ends with one line "fuzz: N targets, N passed, N failed".
#
#   bash tests/fuzz/run.sh                       # all targets, 20 s each
#   UNICCL_FUZZ_SECONDS=300 bash tests/fuzz/run.sh fuzz_root_hello
#
# Knobs: UNICCL_FUZZ_SECONDS (per target, default 20), UNICCL_FUZZ_JOBS
# (targets run at once, default nproc), UNICCL_FUZZ_DIR (work dir, default a
# fresh temp dir; crashing inputs are kept there under artifacts/).
# Not a meson test: the project compiles with g++/hipcc, libFuzzer needs clang.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
seconds=${UNICCL_FUZZ_SECONDS:-20}
jobs=${UNICCL_FUZZ_JOBS:-$(nproc)}
work=${UNICCL_FUZZ_DIR:-$(mktemp -d /tmp/uniccl-fuzz.XXXXXX)}
mkdir -p "$work/obj" "$work/bin" "$work/artifacts" "$work/logs" "$work/gen/common/util"

all_targets=(fuzz_header fuzz_root_hello fuzz_root_answer fuzz_link_hello fuzz_unique_id fuzz_socket_address
             fuzz_config fuzz_handshake)
[ $# -gt 0 ] && targets=("$@") || targets=("${all_targets[@]}")

# ---- toolchain: clang++ with the libFuzzer runtime
CXX=${UNICCL_FUZZ_CXX:-}
find_cxx() {
  for c in ${UNICCL_FUZZ_CXX:-} clang++ clang++-14 clang++-15 clang++-16; do
    command -v "$c" >/dev/null || continue
    echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$work/probe.cc"
    if "$c" -fsanitize=fuzzer,address,undefined "$work/probe.cc" -o "$work/probe" 2>/dev/null; then
      CXX=$c; return 0
    fi
  done
  return 1
}
if ! find_cxx; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "fuzz: installing clang and its libFuzzer runtime"
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -q && apt-get install -y -q --no-install-recommends clang libclang-rt-14-dev; } >"$work/apt.log" 2>&1 \
      || apt-get install -y -q --no-install-recommends clang >>"$work/apt.log" 2>&1
  fi
  if ! find_cxx; then
    echo "fuzz: SKIPPED: no clang++ with libFuzzer (-fsanitize=fuzzer) and cannot install one" \
         "(needs root and apt-get: apt-get install clang libclang-rt-14-dev)"
    exit 0
  fi
fi

# ---- the generated version header (meson writes it from version.h.in)
uniccl_version=$(sed -n "s/^  version: '\([^']*\)'.*/\1/p" meson.build | head -1)
nccl_version=$(sed -n "s/^nccl_api_version = '\([^']*\)'.*/\1/p" meson.build | head -1)
IFS=. read -r ma mi pa <<<"$nccl_version"
sed -e "s/@UNICCL_VERSION@/$uniccl_version/" -e "s/@NCCL_VERSION@/$nccl_version/" \
    -e "s/@NCCL_VERSION_CODE@/$((ma * 10000 + mi * 100 + pa))/" src/common/util/version.h.in \
    >"$work/gen/common/util/version.h"

# ---- build: the parsers' sources once, instrumented; one binary per target
cuda_inc=/usr/local/cuda/include
[ -d "$cuda_inc" ] || cuda_inc=/opt/rocm/include
flags=(-std=c++17 -O1 -g -fno-omit-frame-pointer -Iinclude -Isrc -Itests/common -I"$work/gen" -isystem "$cuda_inc"
       -fsanitize=address,undefined -fno-sanitize-recover=undefined -pthread)
lib_srcs=(src/common/bootstrap/wire.cc src/common/bootstrap/unique_id.cc src/common/bootstrap/root.cc
          src/common/bootstrap/handshake.cc src/common/bootstrap/listener_loop.cc
          src/common/util/auth.cc src/common/util/sha256.cc
          src/common/util/socket.cc src/common/util/socket_address.cc src/common/util/debug.cc
          src/common/util/param.cc src/common/util/knobs.cc src/common/util/name_list.cc
          src/common/core/config.cc)
start=$(date +%s)
build_failed=0
objs=()
for s in "${lib_srcs[@]}"; do
  o="$work/obj/$(basename "$s" .cc).o"
  objs+=("$o")
  "$CXX" "${flags[@]}" -fsanitize=fuzzer-no-link -c "$s" -o "$o" 2>"$o.log" &
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
done
wait
for o in "${objs[@]}"; do
  if [ ! -s "$o" ]; then echo "fuzz: compiling ${o##*/} FAILED:"; cat "$o.log"; build_failed=1; fi
done
if [ $build_failed = 0 ]; then
  for t in "${targets[@]}"; do
    "$CXX" "${flags[@]}" -fsanitize=fuzzer "tests/fuzz/$t.cc" "${objs[@]}" -ldl -o "$work/bin/$t" \
      2>"$work/logs/$t.build.log" &
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  done
  wait
fi
echo "fuzz: built with $CXX in $(( $(date +%s) - start )) s (work dir $work)"

# ---- run: each target for $seconds over a copy of its seed corpus
run_one() {  # target
  local t=$1 log="$work/logs/$1.log" corpus="$work/corpus/$1"
  mkdir -p "$corpus"
  # quiet logs (WARN lines for every rejected input would drown the output)
  NCCL_DEBUG=NONE NCCL_CONF_FILE=/dev/null ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$work/bin/$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$work/artifacts/$t-" "$corpus" "tests/fuzz/corpus/$t" >"$log" 2>&1
  echo $? >"$work/logs/$t.rc"
}
for t in "${targets[@]}"; do
  [ -x "$work/bin/$t" ] || continue
  run_one "$t" &
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
done
wait

passed=0 failed=0
for t in "${targets[@]}"; do
  if [ ! -x "$work/bin/$t" ]; then
    echo "FAIL $t: did not build"; cat "$work/logs/$t.build.log" 2>/dev/null | head -30
    failed=$((failed + 1)); continue
  fi
  rc=$(cat "$work/logs/$t.rc" 2>/dev/null || echo 1)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/logs/$t.log" | tail -1)
  secs=$(sed -n 's/^stat::.*//; s/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\2/p' "$work/logs/$t.log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$work/logs/$t.log" | tail -1)
  if [ "$rc" = 0 ]; then
    echo "PASS $t: ${execs:-?} executions in ${secs:-$seconds} s, ${cov:-cov: ?}, corpus $(ls "$work/corpus/$t" | wc -l) + $(ls "tests/fuzz/corpus/$t" 2>/dev/null | wc -l) seeds"
    passed=$((passed + 1))
  else
    echo "FAIL $t (exit $rc); log $work/logs/$t.log; crashing input under $work/artifacts/:"
    grep -E '^FAIL |ERROR|SUMMARY|runtime error|^ *#[0-9]+ |Test unit written|^Base64' "$work/logs/$t.log" | head -40
    failed=$((failed + 1))
  fi
done
echo "fuzz: ${#targets[@]} targets, $passed passed, $failed failed"
[ $failed = 0 ]
