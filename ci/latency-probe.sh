#!/usr/bin/env bash
# Small-message AllReduce probe: eager time, graph time and host CPU time per
# iteration (-C 1) for uniccl (with and without the timeout watchdog) and
# NCCL, in one run, so a latency change can be attributed before and after a
# variant (docs/performance-history.md keeps the tuning notes).
#
#   bash ci/latency-probe.sh BENCH_DIR [OUTDIR]
#
# BENCH_DIR holds all_reduce_perf and all_reduce_perf_nccl (a build's bench/
# or ci/pack-prebuilt.sh's bench/). NCCL comes from the nvidia-nccl-cu13 wheel.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
BDIR=$1
OUTDIR=${2:-${OUT:-.}/latency-probe}
mkdir -p "$OUTDIR"
NGPUS=${NGPUS:-$(nvidia-smi -L 2>/dev/null | wc -l)}
nccl_lib=$(python3 -c 'import nvidia.nccl as m,os; print(os.path.join(list(m.__path__)[0],"lib"))' 2>/dev/null)
SIZES=(${PROBE_SIZES:-8 1024 65536})

run() {  # label, env..., -- args...
  local label=$1; shift
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  local exe=$BDIR/all_reduce_perf libpath=${LD_LIBRARY_PATH:-}
  [[ $label == nccl* ]] && { exe+=_nccl; libpath=$nccl_lib; }
  env "${envs[@]}" LD_LIBRARY_PATH=$libpath timeout 120 "$exe" -b "${SIZES[0]}" -e "${SIZES[-1]}" -f 8 \
    -g "$NGPUS" ${PROBE_ARGS:-} -n ${PROBE_ITERS:-2000} -w 200 "$@" >"$OUTDIR/$label.log" 2>&1
}

for rep in 1 2; do
  run "uniccl-eager-$rep" X=1 -- -C 1
  run "uniccl-nowd-eager-$rep" UNICCL_TIMEOUT=0 -- -C 1
  run "nccl-eager-$rep" X=1 -- -C 1
  run "uniccl-graph-$rep" X=1 -- -G 10 -n 100
  run "uniccl-nowd-graph-$rep" UNICCL_TIMEOUT=0 -- -G 10 -n 100
  run "nccl-graph-$rep" X=1 -- -G 10 -n 100
done

# One line per run and size: out-of-place time (and cpu for eager runs).
printf '%-24s %10s %10s %10s\n' run bytes time_us cpu_us | tee "$OUTDIR/summary.txt"
for f in "$OUTDIR"/*.log; do
  label=$(basename "$f" .log)
  awk -v l="$label" '$1 ~ /^[0-9]+$/ && NF > 8 {
      cpu = (l ~ /eager/) ? $7 : "-";
      printf "%-24s %10s %10s %10s\n", l, $1, $6, cpu }' "$f"
done | sort | tee -a "$OUTDIR/summary.txt"
