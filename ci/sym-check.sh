#!/usr/bin/env bash
# One *_perf tool on the symmetric kernels (docs/device_api.md, "Symmetric
# collectives"): buffers in NCCL_WIN_COLL_SYMMETRIC windows (-R 2),
# UNICCL_SYMMETRIC=1, 8 B to 128 KiB (UNICCL_SYMMETRIC_MAX_BYTES; from 64 KiB
# out of place and in place AllReduce runs two-shot), every result checked.
# The tuner's trace (NCCL_DEBUG=TRACE, TUNING) says which collectives took
# the symmetric path: the run fails when none did, so a build or a machine
# where the symmetric path silently fell back to the ring cannot pass.
#
#   bash ci/sym-check.sh BUILD/bench/all_reduce_perf [more *_perf args, e.g. -g 1 -P 2]
set -uo pipefail
tool=${1:?usage: sym-check.sh PERF_TOOL [ARGS...]}
shift
log=$(mktemp)
trap 'rm -f "$log"' EXIT
UNICCL_SYMMETRIC=1 NCCL_DEBUG=TRACE NCCL_DEBUG_SUBSYS=TUNING \
  "$tool" -b 8 -e 128K -f 4 -R 2 -n 5 -w 2 -c 1 "$@" >"$log" 2>&1
rc=$?
grep -v " NCCL TRACE " "$log"
sym=$(grep -c ": Symmetric" "$log")
two=$(grep -c ": Symmetric (two-shot)" "$log")
other=$(grep " NCCL TRACE " "$log" | grep -c -E ": (Ring|Tree|PAT)")
echo "symmetric collectives: $sym (two-shot: $two); ring/tree/PAT: $other"
[[ $rc == 0 ]] || { echo "FAIL: $(basename "$tool") exited $rc"; exit "$rc"; }
[[ $sym -gt 0 ]] || { echo "FAIL: no collective took the symmetric path"; exit 1; }
echo "PASS"
