#!/usr/bin/env bash
# GPU machine script: builds uniccl for sm_90 (or uses a prebuilt tree), runs
# the GPU test suite, then the benchmarks side by side with NCCL, and prints
# a short table at the end.
#
#   bash ci/gpu-test.sh                    # build in build-gpu, tests + benchmarks
#   bash ci/gpu-test.sh --prebuilt DIR     # DIR/lib, DIR/tests, DIR/bench from ci/pack-prebuilt.sh
#   GPU_TESTS="backend comm devapi kernels coll onerank rccl net stress profiler torch" BENCH=quick|full|none BENCH_NET=1 \
#     BENCH_ONERANK=0|1 bash ci/gpu-test.sh
#   TORCH_PYTHON=/path/to/python: the PyTorch the "torch" test runs (default /opt/torch/.venv/bin/python)
#   GPU_SHARE=auto|none SHARE_KS="2 8" bash ci/gpu-test.sh   # several ranks per GPU (below); default auto
#   GPU_TESTS=amdsync bash ci/gpu-test.sh  # only the amd_sync build's collectives (below; no main build,
#                                          # no share pass, no benchmarks unless asked for)
#
# amdsync (docs/amd.md): builds uniccl with -Damd_sync=true (the
# AMD path's sub-group barrier with 32-lane wavefronts, LL lines as 8-byte
# halves, relaxed counter polls + fences in CUDA kernels and in the Device
# API header), f32 kernels only, in its own build dir (AMD_SYNC_BUILD_DIR,
# default build-gpu-amdsync), and runs on ONE GPU (AMD_SYNC_GPU, default 0)
# with AMD_SYNC_KS ranks sharing it (default "2 4 8"):
#   coll_test's float cases (--quick, P2P) at each K, then one SHM pass at the first K;
#   device_api_gpu_test at each K: LSA barriers, the LL all-to-all, and GIN
#     (P2P and SHM off: every rank its own LSA team, puts through the proxy);
#   the symmetric kernels at each K: all_reduce_perf, all_gather_perf and
#     reduce_scatter_perf with -R 2 (buffers in symmetric windows) and
#     UNICCL_SYMMETRIC=1, 8 B .. 128 KiB, every result checked; a run
#     fails unless the tuner's trace shows collectives on the symmetric path.
# A target that fails to build is reported as such and its runs are skipped;
# the rest still run.
#
# Several ranks per GPU (docs/gpu-sharing.md, GPU_SHARE=auto): on a one-GPU machine the
# multi-rank suites run with 2, 3, 4 and 8 ranks sharing that GPU (coll_test
# in all three init modes, capture, watchdog, the kernel harness, the
# dead-peer cases); with several GPUs, one pass with 2 ranks per GPU. Mode B
# and the dead-peer cases put ranks of several processes on one GPU, which
# needs MPS: without an MPS server they check that init is refused instead.
# Every test runs under its own timeout, and a failing or skipped test never
# stops the script; it exits 1 when any test failed.
#
# Writes logs to ${OUT:-./gpu-test-out}. NVLink multicast stays off
# (NCCL_NVLS_ENABLE=0) for NCCL and is never used by uniccl.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUTDIR=${OUT:-$ROOT/gpu-test-out}
mkdir -p "$OUTDIR"
prebuilt=""
if [[ ${1:-} == --prebuilt ]]; then prebuilt=$(cd "$2" && pwd); fi
TESTS=${GPU_TESTS-backend comm devapi watchdog capture kernels coll onerank rccl net torch}
# Only the amd_sync pass asked for: no main build, and the share pass and
# benchmarks (which need it) are off unless asked for.
main_build=1
[[ $(echo $TESTS) == amdsync ]] && { main_build=0; GPU_SHARE=${GPU_SHARE:-none}; BENCH=${BENCH:-none}; }
BENCH=${BENCH:-quick}
table=()

if [[ -z $prebuilt ]]; then
  # A CUDA build only: no hipcc wanted. setup.sh leaves this script's options
  # alone (no set -e here: every test runs even when one skips or fails).
  UNICCL_SKIP_HIP=1 source "$ROOT/ci/setup.sh"
  B=${BUILD_DIR:-$ROOT/build-gpu}
  if [[ $main_build == 1 ]]; then
    nccl_home=$(bash "$ROOT/ci/find_nccl.sh")
    [[ -d $B ]] || meson setup "$B" -Dgpu_backend=cuda -Dgpu_archs=sm_90 ${nccl_home:+-Dnccl_home=$nccl_home} >"$OUTDIR/setup.log" 2>&1
    ninja -C "$B" >"$OUTDIR/build.log" 2>&1 || { tail -30 "$OUTDIR/build.log"; exit 1; }
  fi
  LIB=$B/src; TDIR=$B/tests/gpu; BDIR=$B; TRACE_PLUGIN=$B/plugins/trace/libnccl-profiler-trace.so
else
  LIB=$prebuilt/lib; TDIR=$prebuilt/tests; BDIR=$prebuilt; TRACE_PLUGIN=$prebuilt/lib/libnccl-profiler-trace.so
fi
export LD_LIBRARY_PATH=$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
NGPUS=$(nvidia-smi -L 2>/dev/null | wc -l)
nvidia-smi -L; nvidia-smi topo -m 2>/dev/null | head -5

nfail=0 npass=0 nskip=0
# What a test's log says it checked: coll_test's case counts, the Device API
# test's wrong words / values, sym-check.sh's symmetric collectives.
log_detail() {
  grep -E -o '^[0-9]+ passed, [0-9]+ failed|[0-9]+ wrong (words|values)|[0-9]+ wrong;|symmetric collectives: [0-9]+( \(two-shot: [0-9]+\))?' \
    "$1" 2>/dev/null | tail -1 | sed 's/;$//'
}
run_test() {  # name, timeout, command...
  local name=$1 to=$2; shift 2
  local start=$SECONDS rc=0
  echo "+ $*" >"$OUTDIR/$name.log"
  timeout -k 10 "$to" "$@" >>"$OUTDIR/$name.log" 2>&1 || rc=$?
  local verdict=PASS
  [[ $rc == 77 ]] && verdict=SKIP
  [[ $rc == 124 || $rc == 137 ]] && verdict="TIMEOUT(${to}s)"
  [[ $rc != 0 && $rc != 77 && $rc != 124 && $rc != 137 ]] && verdict="FAIL(rc=$rc)"
  [[ $rc != 0 && $rc != 77 ]] && nfail=$((nfail + 1))
  [[ $rc == 0 ]] && npass=$((npass + 1))
  [[ $rc == 77 ]] && nskip=$((nskip + 1))
  # The refusal checks (ranks of several processes on one GPU without MPS) pass, and say so.
  grep -q "EXPECTED REFUSAL" "$OUTDIR/$name.log" 2>/dev/null && verdict+=" (MPS refusal checked)"
  table+=("$(printf '%-30s %-12s %5ss  %s' "$name" "$verdict" $((SECONDS - start)) "$(log_detail "$OUTDIR/$name.log")")")
  echo "--- $name: $verdict"; tail -n 15 "$OUTDIR/$name.log"
}

find_exe() { find "$TDIR" -name "$1" -type f -perm -u+x 2>/dev/null | head -1; }
missing() { table+=("$(printf '%-28s %-12s' "$1" "NOT BUILT")"); nfail=$((nfail + 1)); }
for t in $TESTS; do
  case $t in
    backend) e=$(find_exe gpu_backend_test); if [[ -n $e ]]; then run_test backend 120 "$e"; else missing backend; fi ;;
    comm) e=$(find_exe comm_api_test); if [[ -n $e ]]; then run_test comm-api 300 "$e"; else missing comm; fi ;;
    devapi) e=$(find_exe device_api_gpu_test); if [[ -n $e ]]; then run_test device-api 180 "$e" --ranks-per-gpu=1; else missing devapi; fi ;;
    watchdog) e=$(find_exe watchdog_gpu_test); if [[ -n $e ]]; then run_test watchdog 120 "$e"; else missing watchdog; fi ;;
    capture) e=$(find_exe capture_test); if [[ -n $e ]]; then run_test capture 120 "$e"; else missing capture; fi ;;
    kernels) e=$(find_exe kernel_harness); if [[ -n $e ]]; then run_test kernels 300 "$e" ${KERNEL_ARGS:-}; else missing kernels; fi ;;
    coll)
      e=$(find_exe coll_test)
      if [[ -n $e ]]; then
        run_test coll-p2p 600 "$e" ${COLL_ARGS:-}
        NCCL_P2P_DISABLE=1 run_test coll-shm 600 "$e" ${COLL_SHM_ARGS:-${COLL_ARGS:-}}
      fi ;;
    rccl)  # RCCL's names: ncclAllToAllv (uneven, zero counts, gaps) and ncclAllToAll on every GPU
      e=$(find_exe rccl_api_test); if [[ -n $e ]]; then run_test rccl-api 300 "$e"; else missing rccl; fi ;;
    stress)  # dead peers (P2P, SHM, socket), leak cycles, load, many comms, thread per comm
      e=$(find_exe stress_test); if [[ -n $e ]]; then run_test stress 420 "$e" ${STRESS_CASES:-}; else missing stress; fi ;;
    profiler)  # the trace plugin on real runs: traces checked; overhead at 1 MiB (docs/profiler.md)
      if [[ -f $TRACE_PLUGIN ]]; then
        tdir=$OUTDIR/traces; rm -rf "$tdir"; mkdir -p "$tdir"
        run_test profiler-trace 300 bash -c "
          NCCL_PROFILER_PLUGIN=$TRACE_PLUGIN UNICCL_PROFILER_TRACE_FILE=$tdir/ar $BDIR/bench/all_reduce_perf -b 1M -e 1M -g $NGPUS -n 5 -w 1 &&
          NCCL_PROFILER_PLUGIN=$TRACE_PLUGIN UNICCL_PROFILER_TRACE_FILE=$tdir/sr $BDIR/bench/sendrecv_perf -b 1M -e 1M -g $NGPUS -n 5 -w 1 &&
          for f in $tdir/ar.*.json; do python3 $ROOT/tests/unit/profiler/check_trace.py \$f --gpu-clock --expect Coll:AllReduce --expect KernelCh:'*' --expect KernelLaunch:'*' || exit 1; done &&
          for f in $tdir/sr.*.json; do python3 $ROOT/tests/unit/profiler/check_trace.py \$f --gpu-clock --expect P2p:Send --expect P2p:Recv --expect KernelCh:'*' || exit 1; done"
        # Overhead: the same 1 MiB AllReduce without and with the trace plugin, alternating.
        for rep in 1 2 3; do
          for mode in none trace; do
            plug=none; [[ $mode == trace ]] && plug=$TRACE_PLUGIN
            NCCL_PROFILER_PLUGIN=$plug UNICCL_PROFILER_TRACE_FILE=$tdir/ovh timeout 120 \
              "$BDIR/bench/all_reduce_perf" -b 1M -e 1M -g "$NGPUS" -n 500 -w 50 >"$OUTDIR/prof_overhead_${mode}_$rep.log" 2>&1
            echo "profiler overhead $mode rep $rep: $(grep -E '^ +1048576 ' "$OUTDIR/prof_overhead_${mode}_$rep.log" | awk '{print $6 " us"}')"
          done
        done | tee "$OUTDIR/prof_overhead.txt"
      fi ;;
    onerank)  # communicators of one rank (core/one_rank.h): every collective a copy on the stream or nothing
      e=$(find_exe coll_test)
      [[ -n $e ]] && run_test coll-1rank 600 "$e" --ngpus=1 ${COLL_ARGS:-} ;;
    amdsync)  # -Damd_sync=true: the AMD path's synchronization in CUDA kernels (docs/amd.md; see the top)
      [[ -n $prebuilt ]] && UNICCL_SKIP_HIP=1 source "$ROOT/ci/setup.sh"
      AB=${AMD_SYNC_BUILD_DIR:-$ROOT/build-gpu-amdsync}
      amd_opts=(-Dgpu_archs=sm_90 -Dkernel_filter=f32 -Damd_sync=true -Dbench=true -Dmpi=disabled)
      # An existing build dir gets these options (an older one had no benchmarks); one
      # that meson cannot read any more is made again.
      { [[ -d $AB ]] && meson configure "$AB" "${amd_opts[@]}"; } >"$OUTDIR/amdsync-setup.log" 2>&1 ||
        meson setup --wipe "$AB" -Dgpu_backend=cuda "${amd_opts[@]}" >>"$OUTDIR/amdsync-setup.log" 2>&1 ||
        meson setup "$AB" -Dgpu_backend=cuda "${amd_opts[@]}" >>"$OUTDIR/amdsync-setup.log" 2>&1
      amd_targets=(tests/gpu/coll/coll_test tests/gpu/device_api/device_api_gpu_test
                   bench/all_reduce_perf bench/all_gather_perf bench/reduce_scatter_perf)
      # -k 0: a target that fails leaves the others built; each run needs only its own.
      ninja -C "$AB" -k 0 "${amd_targets[@]}" >"$OUTDIR/amdsync-build.log" 2>&1 ||
        tail -30 "$OUTDIR/amdsync-setup.log" "$OUTDIR/amdsync-build.log"
      amd_built=()
      for t in "${amd_targets[@]}"; do
        # Up to date after the build, or it failed (an older binary would not be this source).
        if [[ -x $AB/$t ]] && ninja -C "$AB" -n "$t" 2>/dev/null | grep -q "no work to do"; then amd_built+=("$t")
        else table+=("$(printf '%-28s %-12s' "amdsync:${t##*/}" "BUILD FAILED")"); nfail=$((nfail + 1)); fi
      done
      amd_has() { [[ " ${amd_built[*]} " == *" $1 "* ]]; }
      amd_gpu=${AMD_SYNC_GPU:-0}
      amd_lib=$AB/src${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
      aks=${AMD_SYNC_KS:-2 4 8}; k0=${aks%% *}
      if amd_has tests/gpu/coll/coll_test; then
        for k in $aks; do
          CUDA_VISIBLE_DEVICES=$amd_gpu LD_LIBRARY_PATH=$amd_lib run_test "amdsync-coll-p2p-x$k" 300 \
            "$AB/tests/gpu/coll/coll_test" --mode=A-all --transport=p2p --ranks-per-gpu=$k --quick '--filter=*/float/*'
        done
        CUDA_VISIBLE_DEVICES=$amd_gpu LD_LIBRARY_PATH=$amd_lib run_test "amdsync-coll-shm-x$k0" 300 \
          "$AB/tests/gpu/coll/coll_test" --mode=A-all --transport=shm --ranks-per-gpu=$k0 --quick '--filter=*/float/*'
      fi
      if amd_has tests/gpu/device_api/device_api_gpu_test; then
        da=$AB/tests/gpu/device_api/device_api_gpu_test
        for k in $aks; do
          CUDA_VISIBLE_DEVICES=$amd_gpu LD_LIBRARY_PATH=$amd_lib run_test "amdsync-devapi-lsa-x$k" 180 "$da" --ranks-per-gpu=$k
          CUDA_VISIBLE_DEVICES=$amd_gpu LD_LIBRARY_PATH=$amd_lib run_test "amdsync-devapi-ll-x$k" 180 "$da" \
            --ranks-per-gpu=$k --ll=1 --rounds=100
        done
        # GIN: P2P and SHM off, so every rank is its own LSA team and puts go through the proxy.
        CUDA_VISIBLE_DEVICES=$amd_gpu LD_LIBRARY_PATH=$amd_lib NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 \
          NCCL_NET=Socket NCCL_SOCKET_IFNAME=${NET_IFNAME:-lo} \
          run_test "amdsync-devapi-gin-x$k0" 300 "$da" --ranks-per-gpu=$k0 --gin=1 --rounds=50
      fi
      for c in all_reduce all_gather reduce_scatter; do
        amd_has bench/${c}_perf || continue
        for k in $aks; do
          CUDA_VISIBLE_DEVICES=$amd_gpu LD_LIBRARY_PATH=$amd_lib run_test "amdsync-sym-$c-x$k" 180 \
            bash "$ROOT/ci/sym-check.sh" "$AB/bench/${c}_perf" -g 1 -P "$k"
        done
      done ;;
    torch)  # PyTorch's "nccl" backend and symmetric memory on uniccl's libnccl.so.2 (a rank per GPU; skipped without PyTorch)
      run_test torch 600 bash "$ROOT/tests/torch/run.sh" "$LIB/libnccl.so.2" ;;
    net)  # every collective over the socket transport (loopback) between the local GPUs
      e=$(find_exe coll_test)
      if [[ -n $e ]]; then
        NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=${NET_IFNAME:-lo} \
          run_test coll-net 600 "$e" ${COLL_NET_ARGS:-${COLL_ARGS:-}}
      fi ;;
  esac
done

# ---- several ranks per GPU (docs/gpu-sharing.md) ----
# One GPU: the multi-rank matrix on that GPU at 2, 3, 4 and 8 ranks. K=2 is
# the full coll_test pass (every default case but the 64 Mi-element ones and
# the 1 GiB Perf case, which coll_test leaves out when ranks share a GPU);
# K=3, 4, 8 use --quick (no 1 Mi-element counts), K=8 also fewer roots.
# SHARE_KS overrides the list of K. Mode B needs MPS (else its init refusal
# is checked). The kernel harness's default run above already
# has 2, 3 and 4 ranks on GPU 0; the share pass adds 8. The dead-peer cases
# have two ranks, so K >= 2 always puts both on GPU 0: run once, at K=2.
# Several GPUs: one pass with 2 ranks per GPU.
GPU_SHARE=${GPU_SHARE:-auto}
if [[ $GPU_SHARE != none && $NGPUS -ge 1 ]]; then
  coll=$(find_exe coll_test); cap=$(find_exe capture_test); wd=$(find_exe watchdog_gpu_test)
  kh=$(find_exe kernel_harness); st=$(find_exe stress_test)
  if [[ $NGPUS -eq 1 ]]; then share_ks=${SHARE_KS:-2 3 4 8}; else share_ks=${SHARE_KS:-2}; fi
  for k in $share_ks; do
    # K=2: the full pass; larger K: --quick, and at K=8 the roots 0 and 7 of
    # the rooted collectives (r1..r6 left out), which keeps the case count
    # near K=2's (about 3100 cases instead of 7150).
    coll_args=(--quick); coll_to=240
    [[ $k == 2 && $NGPUS -eq 1 ]] && { coll_args=(); coll_to=420; }
    [[ $k == 8 ]] && coll_args+=("--filter=-*/r[1-6]")
    if [[ -n $coll ]]; then
      run_test "coll-x$k" $coll_to "$coll" --mode=A-all,A-group,B --transport=p2p --ranks-per-gpu=$k "${coll_args[@]}"
    else missing "coll-x$k"; fi
    if [[ -n $cap ]]; then run_test "capture-x$k" 180 "$cap" --ranks-per-gpu=$k; else missing "capture-x$k"; fi
    if [[ -n $wd ]]; then run_test "watchdog-x$k" 180 "$wd" --ranks=$((k * NGPUS)); else missing "watchdog-x$k"; fi
    # The Device API: windows, device communicators, a user kernel with LSA barriers.
    da=$(find_exe device_api_gpu_test)
    if [[ -n $da ]]; then run_test "device-api-x$k" 180 "$da" --ranks-per-gpu=$k; else missing "device-api-x$k"; fi
  done
  if [[ -n $kh ]]; then
    if [[ $NGPUS -eq 1 ]]; then run_test "kernels-x8" 300 "$kh" --ranks 8
    else run_test "kernels-x2" 300 "$kh" --gpus "$NGPUS" --ranks $((2 * NGPUS > 8 ? 8 : 2 * NGPUS)); fi
  else missing kernels-share; fi
  if [[ -n $st ]]; then
    run_test "deadpeer-x2" 240 "$st" --ranks-per-gpu=2 deadpeer-p2p deadpeer-shm deadpeer-net
  else missing deadpeer-x2; fi
fi

if [[ $BENCH != none && $NGPUS -ge 1 ]]; then
  nccl_lib=$(python3 -c 'import nvidia.nccl as m,os; print(os.path.join(list(m.__path__)[0],"lib"))' 2>/dev/null)
  colls="all_reduce all_gather reduce_scatter broadcast sendrecv alltoall"
  maxb=1G; [[ $BENCH == quick ]] && { colls="all_reduce all_gather sendrecv"; }
  for c in $colls; do
    for lib in uniccl nccl; do
      exe=$BDIR/bench/${c}_perf; [[ $lib == nccl ]] && exe+=_nccl
      [[ -x $exe ]] || continue
      for mode in eager graph; do
        args=(-b 8 -e $maxb -f 8 -g "$NGPUS" -n 20 -w 5)
        [[ $mode == graph ]] && args+=(-G 5)
        log=$OUTDIR/bench_${c}_${mode}_${lib}.log
        if [[ $lib == nccl ]]; then
          LD_LIBRARY_PATH=$nccl_lib timeout 300 "$exe" "${args[@]}" >"$log" 2>&1
        else
          timeout 300 "$exe" "${args[@]}" >"$log" 2>&1
        fi
        echo "rc=$?" >>"$log"
      done
    done
  done
  python3 "$ROOT/ci/bench_table.py" "$OUTDIR" | tee "$OUTDIR/bench_table.txt"
fi

# Communicators of one rank, both libraries: one GPU, every collective, in
# and out of place (alltoall_perf in place too); one rank's collective is a
# device copy (or nothing in place), so both should be at the copy's speed.
if [[ $BENCH != none && ${BENCH_ONERANK:-1} == 1 && $NGPUS -ge 1 ]]; then
  nccl_lib=$(python3 -c 'import nvidia.nccl as m,os; print(os.path.join(list(m.__path__)[0],"lib"))' 2>/dev/null)
  for c in all_reduce broadcast reduce all_gather reduce_scatter alltoall sendrecv; do
    for lib in uniccl nccl; do
      exe=$BDIR/bench/${c}_perf; [[ $lib == nccl ]] && exe+=_nccl
      [[ -x $exe ]] || continue
      log=$OUTDIR/bench_onerank_${c}_${lib}.log
      libpath=$LD_LIBRARY_PATH; [[ $lib == nccl ]] && libpath=$nccl_lib
      LD_LIBRARY_PATH=$libpath timeout 300 "$exe" -b 8 -e 256M -f 4 -g 1 -n 20 -w 5 >"$log" 2>&1
      echo "rc=$?" >>"$log"
      echo "--- one rank $c $lib"; grep -E '^ +(8|268435456) ' "$log" | head -2
    done
  done
fi

# AllReduce over the socket transport on loopback (P2P, SHM and IB off), both
# libraries in the same run (for reference, NCCL 2.28.9 on 2x H200: about
# 3.5 GB/s at 1 GiB and 28 us at 8 B).
if [[ ${BENCH_NET:-0} == 1 && $NGPUS -ge 2 ]]; then
  nccl_lib=$(python3 -c 'import nvidia.nccl as m,os; print(os.path.join(list(m.__path__)[0],"lib"))' 2>/dev/null)
  for lib in uniccl nccl; do
    exe=$BDIR/bench/all_reduce_perf; [[ $lib == nccl ]] && exe+=_nccl
    [[ -x $exe ]] || continue
    log=$OUTDIR/bench_net_${lib}.log
    libpath=$LD_LIBRARY_PATH; [[ $lib == nccl ]] && libpath=$nccl_lib
    env NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo \
      LD_LIBRARY_PATH=$libpath timeout 300 "$exe" -b 8 -e 1G -f 8 -g "$NGPUS" -n ${BENCH_NET_ITERS:-5} -w 2 \
      >"$log" 2>&1
    echo "rc=$?" >>"$log"
    echo "--- net $lib"; grep -E '^ +(8|1073741824) ' "$log" | head -4
  done
fi

# Two ranks sharing GPU 0 in the benchmark (-P): checked results, and the
# header says the bandwidth is that of one shared GPU.
if [[ $GPU_SHARE != none && $BENCH != none && -x $BDIR/bench/all_reduce_perf ]]; then
  run_test "bench-ar-x2" 180 "$BDIR/bench/all_reduce_perf" -b 8 -e 64M -f 8 -g 1 -P 2 -n 20 -w 5
fi

echo
echo "=== GPU tests ($NGPUS GPU(s)) ==="
printf '%s\n' "${table[@]}"
echo "$npass passed, $nfail failed (or timed out, or not built), $nskip skipped"
[[ $nfail == 0 ]]
