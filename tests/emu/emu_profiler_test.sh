#!/usr/bin/env bash
# Profiler end to end on the CPU emulator: the trace plugin records a real
# AllReduce and a grouped send/recv of 2 ranks (emu_coll_test --profile), and
# every rank's Chrome-trace file must parse and nest, with KernelCh events
# placed by the (emulated) GPU timer.
#   emu_profiler_test.sh EMU_COLL_TEST TRACE_PLUGIN CHECK_TRACE_PY
set -euo pipefail
exe=$1 plugin=$2 checker=$3
dir=$(mktemp -d /tmp/uniccl_emu_trace.XXXXXX)
trap 'rm -rf "$dir"' EXIT
# The emulator's kernels are CPU threads: on a loaded machine a KernelCh can
# reach the plugin more than its default reorder window (100 ms) after the
# channel started, and would be written out of time order (counted as
# lateEvents), which check_trace.py rejects. This run is short: a window
# longer than the run has every event written in order.
NCCL_PROFILER_PLUGIN=$plugin UNICCL_PROFILER_TRACE_FILE=$dir/trace UNICCL_PROFILER_TRACE_MASK=0xfff \
  UNICCL_PROFILER_TRACE_REORDER_MS=600000 "$exe" --profile
n=0
for f in "$dir"/trace.*.json; do
  python3 "$checker" "$f" --gpu-clock \
    --expect CollApi:AllReduce --expect Coll:AllReduce --expect P2pApi:Send --expect P2p:Send \
    --expect P2p:Recv --expect KernelLaunch:'*' --expect KernelCh:'*' --expect GroupApi:'*'
  n=$((n + 1))
done
[[ $n == 2 ]] || { echo "emu_profiler_test: expected 2 trace files, found $n"; exit 1; }
echo "emu_profiler_test: $n trace files OK"
