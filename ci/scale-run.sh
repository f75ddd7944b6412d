#!/usr/bin/env bash
# Runs on a machine with 4 or 8 GPUs: correctness of every
# collective with one process for all GPUs and with one process per GPU
# (fork and mpirun), the tree and the ring forced in turn, and the uniccl vs
# NCCL figures of ci/compare.sh, from a prebuilt tree (ci/pack-prebuilt.sh).
#
#   bash ci/scale-run.sh PREBUILT_DIR [STAGE...]
#   STAGE: tests (coll_test all modes, P2P; forced Tree/Ring; socket --quick)
#          mpi   (every collective and datatype checked by the benchmarks
#                 under mpirun -np NGPUS, one GPU each; both libraries at 8 B)
#          compare (ci/compare.sh, sizes 8 B..1 GiB by x8, eager and graph)
#          algo  (AllReduce 8 B..64 MiB with NCCL_ALGO=Tree and =Ring)
#          verify (backend, capture and watchdog GPU tests)
#          latency (ci/latency-probe.sh on 2 and on all GPUs)
#          sweep (tuning knobs against NCCL: SWEEP_VARIANTS; by default graph
#                 mode, 32 KiB-8 MiB, all_reduce and all_gather on 2 and on
#                 all GPUs; SWEEP_COLLS/_GPUS/_ARGS/_FIELD/_NAME change that)
#          protos (the sweep with each protocol forced: where LL, LL128 and
#                 Simple cross over, 8 KiB-64 MiB, five collectives; the
#                 run that sets the LL128 defaults, docs/algorithms.md)
# A prebuilt tree with a kernel filter (e.g. -Dkernel_filter=f32,f64, small
# enough to carry) runs the tests stage with COLL_TEST_ARGS='--filter=*/float/*':
# the filtered-out datatypes' cases would fail with their documented error
# (the forced Tree and Ring passes keep their own filters: every datatype).
# Each stage writes its logs under $OUT/<stage>/ and packs them into
# $OUT/<stage>.tgz (the device tool returns few files); a summary table
# goes to stdout at the end.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PB=$(cd "$1" && pwd); shift
STAGES=${*:-verify tests mpi compare algo latency}
OUTDIR=${OUT:-$ROOT/scale-out}
mkdir -p "$OUTDIR"
export LD_LIBRARY_PATH=$PB/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
NGPUS=${NGPUS:-$(nvidia-smi -L 2>/dev/null | wc -l)}
nccl_lib=$(python3 -c 'import nvidia.nccl as m,os; print(os.path.join(list(m.__path__)[0],"lib"))' 2>/dev/null)
table=()

verdict() {  # name, rc, seconds
  local v=PASS
  [[ $2 == 77 ]] && v=SKIP
  [[ $2 != 0 && $2 != 77 ]] && v="FAIL(rc=$2)"
  table+=("$(printf '%-34s %-12s %5ss' "$1" "$v" "$3")")
  echo "--- $1: $v ($3 s)"
}

run_logged() {  # dir, name, timeout, command...
  local dir=$1 name=$2 to=$3; shift 3
  local start=$SECONDS
  timeout "$to" "$@" >"$dir/$name.log" 2>&1
  local rc=$?
  verdict "$name" $rc $((SECONDS - start))
  tail -n 8 "$dir/$name.log"
}

pack() { tar czf "$OUTDIR/$1.tgz" -C "$OUTDIR" "$1" 2>/dev/null; }

# mpirun as root in a container: shared memory between the ranks, no UCX.
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$NGPUS"
        --mca pml ob1 --mca btl self,vader --mca osc ^ucx
        -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)

stage_tests() {
  local d=$OUTDIR/tests; mkdir -p "$d"
  local e=$PB/tests/coll_test
  local x=(${COLL_TEST_ARGS:-})
  run_logged "$d" coll-p2p 300 "$e" --ngpus="$NGPUS" --no-huge --no-perf "${x[@]}"
  NCCL_PROTO=LL128 run_logged "$d" coll-p2p-ll128 300 "$e" --ngpus="$NGPUS" --transport=p2p --quick --no-perf "${x[@]}"
  NCCL_ALGO=Tree run_logged "$d" coll-allreduce-tree 120 "$e" --ngpus="$NGPUS" --mode=A-all,B --filter=AllReduce,Batch --no-perf
  NCCL_ALGO=Ring run_logged "$d" coll-allreduce-ring 120 "$e" --ngpus="$NGPUS" --mode=A-all --filter=AllReduce --no-huge --no-perf
  run_logged "$d" coll-net-quick 150 "$e" --ngpus="$NGPUS" --transport=net --mode=A-all,B --quick "${x[@]}"
  run_logged "$d" coll-shm-quick 120 "$e" --ngpus="$NGPUS" --transport=shm --mode=B --quick "${x[@]}"
  pack tests
}

stage_mpi() {
  local d=$OUTDIR/mpi; mkdir -p "$d"
  "${MPIRUN[@]}" hostname >"$d/mpirun-probe.log" 2>&1 || echo "mpirun probe failed: $(tail -3 "$d/mpirun-probe.log")"
  local c
  for c in ${MPI_COLLS:-all_reduce reduce_scatter all_gather broadcast reduce sendrecv alltoall gather scatter}; do
    local args=(-g 1 -b 8 -e 8M -f 32 -c 1 -n 3 -w 1 -d all)
    [[ $c == all_reduce || $c == reduce_scatter || $c == reduce ]] && args+=(-o all)
    [[ $c == broadcast || $c == reduce || $c == gather || $c == scatter ]] && args+=(-r all)
    run_logged "$d" "mpi-$c" 120 "${MPIRUN[@]}" "$PB/bench/${c}_perf" "${args[@]}"
    local wrong
    wrong=$(awk '$1 ~ /^[0-9]+$/ && NF >= 13 { w += $9 + $13 } END { print w + 0 }' "$d/mpi-$c.log")
    echo "    rows $(awk '$1 ~ /^[0-9]+$/ && NF >= 13' "$d/mpi-$c.log" | wc -l), wrong $wrong"
  done
  run_logged "$d" mpi-example 60 "${MPIRUN[@]}" "$PB/bench/mpi_allreduce"
  # 8 B AllReduce latency with one process per GPU, both libraries.
  local lib
  for lib in ${MPI_LAT_LIBS-uniccl nccl}; do
    local exe=$PB/bench/all_reduce_perf lp=$LD_LIBRARY_PATH
    [[ $lib == nccl ]] && { exe+=_nccl; lp=$nccl_lib; }
    LD_LIBRARY_PATH=$lp run_logged "$d" "mpi-lat-$lib" 90 "${MPIRUN[@]}" "$exe" -g 1 -b 8 -e 64K -f 8 -n 1000 -w 100 -C 1
    LD_LIBRARY_PATH=$lp run_logged "$d" "mpi-lat-graph-$lib" 90 "${MPIRUN[@]}" "$exe" -g 1 -b 8 -e 64K -f 8 -n 100 -w 20 -G 10
  done
  pack mpi
}

stage_compare() {
  local d=$OUTDIR/compare; mkdir -p "$d"
  local start=$SECONDS
  BUILD_DIR=$PB COMPARE_SKIP_BUILD=1 NCCL_HOME=${nccl_lib%/lib} COMPARE_FACTOR=${COMPARE_FACTOR:-8} \
    COMPARE_TIMEOUT=150 NGPUS=$NGPUS bash "$ROOT/ci/compare.sh" "$d" >"$d/compare.txt" 2>&1
  verdict compare $? $((SECONDS - start))
  grep -E '^(all_|reduce|broad|sendrecv|alltoall)' "$d/compare.txt" | awk '$3 == 8 || $3 == 1073741824'
  sed -n '/geometric mean/,$p' "$d/compare.txt"
  pack compare
}

stage_algo() {
  local d=$OUTDIR/algo; mkdir -p "$d"
  local a
  for a in Tree Ring; do
    NCCL_ALGO=$a run_logged "$d" "allreduce-$a" 120 "$PB/bench/all_reduce_perf" -g "$NGPUS" -b 8 -e 64M -f 4 -n 200 -w 20
  done
  for a in Tree Ring; do
    NCCL_ALGO=$a LD_LIBRARY_PATH=$nccl_lib run_logged "$d" "nccl-allreduce-$a" 120 "$PB/bench/all_reduce_perf_nccl" -g "$NGPUS" -b 8 -e 64M -f 4 -n 200 -w 20
  done
  printf '%-12s' bytes; for f in allreduce-Tree allreduce-Ring nccl-allreduce-Tree nccl-allreduce-Ring; do printf ' %20s' "$f"; done; echo
  join <(awk '$1 ~ /^[0-9]+$/ && NF >= 13 {print $1, $6}' "$d/allreduce-Tree.log" | sort -k1,1) \
       <(awk '$1 ~ /^[0-9]+$/ && NF >= 13 {print $1, $6}' "$d/allreduce-Ring.log" | sort -k1,1) |
    join - <(awk '$1 ~ /^[0-9]+$/ && NF >= 13 {print $1, $6}' "$d/nccl-allreduce-Tree.log" | sort -k1,1) |
    join - <(awk '$1 ~ /^[0-9]+$/ && NF >= 13 {print $1, $6}' "$d/nccl-allreduce-Ring.log" | sort -k1,1) |
    sort -n | awk '{printf "%-12s %20s %20s %20s %20s\n", $1, $2, $3, $4, $5}' | tee "$d/algo_table.txt"
  pack algo
}

stage_verify() {
  local d=$OUTDIR/verify; mkdir -p "$d"
  run_logged "$d" backend 120 "$PB/tests/gpu_backend_test"
  run_logged "$d" capture 120 "$PB/tests/capture_test"
  run_logged "$d" watchdog 180 "$PB/tests/watchdog_gpu_test"
  pack verify
}

stage_latency() {
  local d=$OUTDIR/latency; mkdir -p "$d"
  local g
  for g in 2 "$NGPUS"; do
    NGPUS=$g PROBE_ITERS=${PROBE_ITERS:-1000} bash "$ROOT/ci/latency-probe.sh" "$PB/bench" "$d/g$g" >/dev/null 2>&1
    echo "--- latency probe, $g GPUs"; cat "$d/g$g/summary.txt"
  done
  pack latency
}

stage_sweep() {
  # SWEEP_NAME (output folder), SWEEP_COLLS, SWEEP_GPUS, SWEEP_ARGS (benchmark
  # arguments), SWEEP_FIELD (time: out-of-place us, or busbw: GB/s) and
  # SWEEP_VARIANTS ("label:ENV=V,ENV2=V ..."; @PB@ in a value is the prebuilt
  # folder, so LD_LIBRARY_PATH=@PB@/lib-x picks another build of the library).
  local name=${SWEEP_NAME:-sweep}
  local d=$OUTDIR/$name; mkdir -p "$d"
  local variants=${SWEEP_VARIANTS:-"base: ll256:UNICCL_LL_THRESHOLD=262144 ll1m:UNICCL_LL_THRESHOLD=1048576 ch16:UNICCL_SIMPLE_CHANNEL_BYTES=16384 ll256ch16:UNICCL_LL_THRESHOLD=262144,UNICCL_SIMPLE_CHANNEL_BYTES=16384 llch4:UNICCL_LL_CHANNEL_BYTES=4096"}
  local field=${SWEEP_FIELD:-time} col=5
  [[ $field == busbw ]] && col=7
  local g c v
  for g in ${SWEEP_GPUS:-2 $NGPUS}; do
    for c in ${SWEEP_COLLS:-all_reduce all_gather}; do
      local args=(-g "$g" ${SWEEP_ARGS:--b 32K -e 8M -f 2 -n 50 -w 10 -G 5})
      LD_LIBRARY_PATH=$nccl_lib timeout 150 "$PB/bench/${c}_perf_nccl" "${args[@]}" >"$d/g${g}_${c}_nccl.log" 2>&1
      for v in $variants; do
        local label=${v%%:*} envs=${v#*:}
        envs=${envs//@PB@/$PB}
        env ${envs//,/ } timeout 150 "$PB/bench/${c}_perf" "${args[@]}" >"$d/g${g}_${c}_${label}.log" 2>&1
      done
      echo "--- $name: $c, $g GPUs, ${args[*]:2}, out-of-place $field"
      local files=("$d/g${g}_${c}_nccl.log") labels=(nccl)
      for v in $variants; do files+=("$d/g${g}_${c}_${v%%:*}.log"); labels+=("${v%%:*}"); done
      python3 - "$col" "${files[@]}" <<PY
import sys
col = int(sys.argv[1])
rows = {}
for i, f in enumerate(sys.argv[2:]):
    for line in open(f):
        p = line.split()
        if len(p) >= 13 and p[0].isdigit():
            rows.setdefault(int(p[0]), {})[i] = p[col] + ("!" if p[8] not in ("0", "N/A") else "")
labels = "${labels[*]}".split()
print("%10s " % "bytes" + " ".join("%10s" % l for l in labels))
for b in sorted(rows):
    print("%10d " % b + " ".join("%10s" % rows[b].get(i, "-") for i in range(len(labels))))
PY
    done
  done | tee "$d/$name.txt"
  pack "$name"
}

stage_protos() {
  SWEEP_NAME=${SWEEP_NAME:-protos} SWEEP_COLLS=${SWEEP_COLLS:-all_reduce all_gather reduce_scatter broadcast reduce} \
  SWEEP_GPUS=${SWEEP_GPUS:-$NGPUS 2} SWEEP_ARGS=${SWEEP_ARGS:--b 8K -e 64M -f 2 -n 40 -w 10 -G 5} \
  SWEEP_VARIANTS=${SWEEP_VARIANTS:-"base: LL:NCCL_PROTO=LL LL128:NCCL_PROTO=LL128 Simple:NCCL_PROTO=Simple"} stage_sweep
}

nvidia-smi -L; nvidia-smi topo -m 2>/dev/null | head -8
for s in $STAGES; do "stage_$s"; done
echo
echo "=== scale run ($NGPUS GPUs) ==="
printf '%s\n' "${table[@]}"
