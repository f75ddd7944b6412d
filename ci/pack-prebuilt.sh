#!/usr/bin/env bash
# Copies what ci/gpu-test.sh --prebuilt needs out of a build directory:
#   ci/pack-prebuilt.sh BUILD_DIR OUT_DIR
# (lib/libuniccl.so.0, the drop-in lib/libnccl.so.2 the torch test preloads,
# the trace profiler plugin, tests/<GPU test
# executables>, bench/<*_perf, *_perf_nccl>)
# so a GPU machine without a compiler toolchain can run them.
set -euo pipefail
b=$1 out=$2
rm -rf "$out"; mkdir -p "$out/lib" "$out/tests" "$out/bench"
cp -L "$b/src/libuniccl.so.0" "$out/lib/"
[ -e "$b/src/libnccl.so.2" ] && cp -L "$b/src/libnccl.so.2" "$out/lib/"
[ -f "$b/plugins/trace/libnccl-profiler-trace.so" ] && cp "$b/plugins/trace/libnccl-profiler-trace.so" "$out/lib/"
find "$b/tests/gpu" -maxdepth 2 -type f -perm -u+x ! -name '*.so*' -exec cp {} "$out/tests/" \;
find "$b/bench" -maxdepth 1 -type f -perm -u+x -name '*_perf*' -exec cp {} "$out/bench/" \;
[ -x "$b/examples/mpi_allreduce" ] && cp "$b/examples/mpi_allreduce" "$out/bench/"
strip --strip-unneeded "$out"/bench/* "$out"/tests/* 2>/dev/null || true
du -sh "$out"
