#!/usr/bin/env bash
# Several "hosts" on one machine: H hosts x G GPUs, every host a group of
# processes (one per GPU; --gpus-per-proc K: G/K processes of K GPUs) with
# its own host identity (NCCL_HOSTID, which
# uniccl and NCCL both read), so that ranks on different hosts talk through
# the network transport as across machines. Runs uniccl's benchmarks and the
# same benchmarks built against NCCL (*_perf_nccl) side by side, every
# collective, eager and graph, and prints the ratio table.
#
#   ci/multihost.sh H G [options]
#
# The network between the hosts:
#   netns     (as root, where `ip netns add` works) each host in its own
#             network namespace, joined by veth pairs to a bridge in the root
#             namespace; each veth end shaped with tc: tbf at --rate (default
#             200gbit, 25 GB/s, a fast NIC) and, where the sch_netem module
#             exists, netem --delay (default 2us) before it.
#   loopback  otherwise (or --loopback): every host on lo.
# The script says which one ran and which shaping was applied.
#
# Both libraries use their socket transport between the hosts (NCCL_IB_DISABLE=1:
# RDMA devices are not separated by network namespaces and would bypass the shaping).
#
# Without a visible GPU (or UNICCL_BENCH_EMU=1) it runs uniccl's CPU emulator
# benchmarks (*_perf_emu, docs/emulator.md): every result checked, the times
# the emulator's, no NCCL column (NCCL needs a GPU), one process per host
# (the emulator maps GPU memory between the ranks of one process only).
#
# Options:
#   -b SIZE / -e SIZE   size range (default 8 .. 1G; emulator 8 .. 64K)
#   -f FACTOR           size step (default 2; emulator 8)
#   -n ITERS / -w WARMUP  iterations (default 10 / 5; emulator 2 / 1)
#   --colls "A B"       collectives (default: all_reduce all_gather reduce_scatter
#                       broadcast reduce alltoall sendrecv)
#   --modes "eager graph"  (default both; graph = -G GRAPH_LAUNCHES, default 5)
#   --no-nccl           uniccl only
#   --loopback          never create namespaces
#   --rate RATE / --delay DELAY   tc shaping (tbf rate, netem delay)
#   --out DIR           logs and tables (default ./multihost-out)
#   --timeout S         per benchmark run (default 1200)
#   --gpus-per-proc K   GPUs per process (-g K; default 1, emulator G)
#   --one-gpu           every host's processes on the first visible GPU (G = 1):
#                       a machine with one GPU. Processes of both libraries then
#                       share it, which needs an MPS server (uniccl refuses
#                       ranks of several processes on one GPU without one): the
#                       script starts one for the run where none runs and the
#                       control command exists, and stops it after. The times
#                       show the network transport, not the GPU's bandwidth
# Environment: BUILD_DIR (default build-bench; build-bench-emu on the
# emulator), the libraries' own knobs (passed through to every process).
# Exit code: non-zero when a run failed or reported wrong results.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage() { sed -n '2,51p' "${BASH_SOURCE[0]}"; }
[[ ${1:-} == -h || ${1:-} == --help ]] && { usage; exit 0; }
[[ $# -ge 2 && $1 =~ ^[1-9][0-9]*$ && $2 =~ ^[1-9][0-9]*$ ]] || { echo "multihost.sh: usage: ci/multihost.sh H G [options] (--help)" >&2; exit 2; }
H=$1 G=$2
shift 2
MINB="" MAXB="" FACTOR="" ITERS="" WARMUP="" GRAPH_LAUNCHES=${GRAPH_LAUNCHES:-5}
COLLS="all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv"
PER_PROC="" MODES="eager graph" NCCL=1 LOOPBACK=0 ONE_GPU=0 RATE=200gbit DELAY=2us OUT=./multihost-out TIMEOUT=1200
while [[ $# -gt 0 ]]; do
  case "$1" in
    -b) MINB=$2; shift ;;
    -e) MAXB=$2; shift ;;
    -f) FACTOR=$2; shift ;;
    -n) ITERS=$2; shift ;;
    -w) WARMUP=$2; shift ;;
    --colls) COLLS=$2; shift ;;
    --modes) MODES=$2; shift ;;
    --no-nccl) NCCL=0 ;;
    --loopback) LOOPBACK=1 ;;
    --rate) RATE=$2; shift ;;
    --delay) DELAY=$2; shift ;;
    --out) OUT=$2; shift ;;
    --timeout) TIMEOUT=$2; shift ;;
    --gpus-per-proc) PER_PROC=$2; shift ;;
    --one-gpu) ONE_GPU=1 ;;
    *) echo "multihost.sh: unknown option '$1' (--help)" >&2; exit 2 ;;
  esac
  shift
done
NRANKS=$((H * G))
[[ $H -le 200 ]] || { echo "multihost.sh: at most 200 hosts (one /24 of addresses)" >&2; exit 2; }

# ------------------------------------------------------------ GPUs or emulator
EMU=${UNICCL_BENCH_EMU:-}
if [[ -z $EMU ]]; then
  if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L 2> /dev/null | grep -q '^GPU'; then EMU=0; else EMU=1; fi
fi
if [[ $EMU == 1 ]]; then
  BUILD_DIR=${BUILD_DIR:-$ROOT/build-bench-emu}
  MINB=${MINB:-8} MAXB=${MAXB:-64K} FACTOR=${FACTOR:-8} ITERS=${ITERS:-2} WARMUP=${WARMUP:-1}
  SUFFIX=_emu
  PER_PROC=${PER_PROC:-$G}
  if [[ $NCCL == 1 ]]; then echo "# multihost.sh: CPU emulator: uniccl only (NCCL needs a GPU)"; NCCL=0; fi
  if [[ " $MODES " == *" graph "* ]]; then
    echo "# multihost.sh: CPU emulator: eager only (the emulator has no graph capture)"
    MODES=${MODES//graph/}
  fi
  echo "# multihost.sh: no GPU: uniccl's CPU emulator, $G emulated GPUs per host process group;" \
       "times are the emulator's, results are checked"
else
  BUILD_DIR=${BUILD_DIR:-$ROOT/build-bench}
  MINB=${MINB:-8} MAXB=${MAXB:-1G} FACTOR=${FACTOR:-2} ITERS=${ITERS:-10} WARMUP=${WARMUP:-5}
  SUFFIX=""
  PER_PROC=${PER_PROC:-1}
  IFS=, read -ra GPUS <<< "${CUDA_VISIBLE_DEVICES:-$(nvidia-smi -L | awk '/^GPU/ {sub(":", "", $2); printf "%s%s", s, $2; s=","}')}"
  if [[ $ONE_GPU == 1 ]]; then
    [[ $G == 1 ]] || { echo "multihost.sh: --one-gpu runs hosts of one GPU each (G = 1)" >&2; exit 2; }
    first=${GPUS[0]}
    GPUS=()
    for ((k = 0; k < NRANKS; k++)); do GPUS+=("$first"); done
    echo "# multihost.sh: --one-gpu: all $H hosts on GPU $first (processes share it through MPS)"
  fi
  if [[ ${#GPUS[@]} -lt $NRANKS ]]; then
    echo "multihost.sh: $H hosts x $G GPUs need $NRANKS GPUs, ${#GPUS[@]} visible" >&2
    exit 2
  fi
fi
[[ $PER_PROC =~ ^[1-9][0-9]*$ && $((G % PER_PROC)) == 0 ]] || { echo "multihost.sh: --gpus-per-proc must divide G" >&2; exit 2; }
PROCS=$((G / PER_PROC))   # processes per host
LIBS=(uniccl)
[[ $NCCL == 1 ]] && LIBS+=(nccl)
for coll in $COLLS; do
  for lib in "${LIBS[@]}"; do
    exe=$BUILD_DIR/bench/${coll}_perf$SUFFIX
    [[ $lib == nccl ]] && exe=$BUILD_DIR/bench/${coll}_perf_nccl
    if [[ ! -x $exe ]]; then
      if [[ $EMU == 1 ]]; then
        echo "multihost.sh: $exe missing: build it with UNICCL_BENCH_EMU=1 ci/bench.sh --all --build-only" \
             "(or ninja -C BUILD_DIR bench/${coll}_perf_emu in a build with tests and -Dbench=true)" >&2
      else
        echo "multihost.sh: $exe missing: build with ci/bench.sh --build-only --nccl-home \$(ci/find_nccl.sh)" >&2
      fi
      exit 2
    fi
  done
done

# ------------------------------------------------------------ the network
NS_PREFIX=uccl-mh$$-
BRIDGE=uccl-br$$
SUBNET=10.213.$(($$ % 250)).
NETNS=0
SHAPING="none"
MPS_STARTED=0
cleanup() {
  [[ $MPS_STARTED == 1 ]] && echo quit | nvidia-cuda-mps-control > /dev/null 2>&1
  if [[ $NETNS == 1 ]]; then
    for ((h = 0; h < H; h++)); do
      ip netns del "${NS_PREFIX}$h" 2> /dev/null
      ip link del "uccl-v$$-$h" 2> /dev/null
    done
    ip link del "$BRIDGE" 2> /dev/null
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Shapes one veth end (in namespace $1, "" = root): netem delay where the
# module exists, tbf rate under it (or alone). Prints what it applied.
shape() {
  local ns=$1 dev=$2 pre=()
  [[ -n $ns ]] && pre=(ip netns exec "$ns")
  if "${pre[@]}" tc qdisc add dev "$dev" root handle 1: netem delay "$DELAY" 2> /dev/null; then
    if "${pre[@]}" tc qdisc add dev "$dev" parent 1:1 handle 10: tbf rate "$RATE" burst 4mb latency 50ms 2> /dev/null; then
      echo "tbf rate $RATE + netem delay $DELAY"
    else
      echo "netem delay $DELAY (tbf failed)"
    fi
  elif "${pre[@]}" tc qdisc add dev "$dev" root tbf rate "$RATE" burst 4mb latency 50ms 2> /dev/null; then
    echo "tbf rate $RATE (no netem delay: the sch_netem module is not available)"
  else
    echo "none (tc failed)"
  fi
}

setup_netns() {
  [[ $(id -u) == 0 ]] || { echo "not root"; return 1; }
  command -v ip > /dev/null || { echo "no ip command"; return 1; }
  ip netns add "${NS_PREFIX}probe" 2> /dev/null || { echo "ip netns add failed"; return 1; }
  ip netns del "${NS_PREFIX}probe"
  NETNS=1
  ip link add "$BRIDGE" type bridge || return 1
  ip link set "$BRIDGE" up || return 1
  local h ns in out
  for ((h = 0; h < H; h++)); do
    ns=${NS_PREFIX}$h out=uccl-v$$-$h in=uccl-p$$-$h
    ip netns add "$ns" || return 1
    ip link add "$out" mtu 9000 type veth peer name "$in" mtu 9000 || return 1
    ip link set "$in" netns "$ns" || return 1
    ip link set "$out" master "$BRIDGE" || return 1
    ip link set "$out" up || return 1
    ip -n "$ns" link set lo up || return 1
    ip -n "$ns" addr add "${SUBNET}$((h + 1))/24" dev "$in" || return 1
    ip -n "$ns" link set "$in" up || return 1
    local a b
    a=$(shape "$ns" "$in")    # what leaves the host (its NIC's send side)
    b=$(shape "" "$out")      # what enters it
    SHAPING=$a
    [[ $a == "$b" ]] || SHAPING="$a / $b"
  done
  return 0
}

why=""
if [[ $LOOPBACK == 0 ]]; then
  whyfile=$(mktemp)
  setup_netns > "$whyfile" 2>&1 || NETNS=2   # 2: failed half-way, cleaned up below
  why=$(tail -n 1 "$whyfile")
  rm -f "$whyfile"
fi
if [[ $NETNS == 1 ]]; then
  echo "# multihost.sh: network: netns+tc - $H namespaces (${NS_PREFIX}0..), veth pairs to bridge $BRIDGE," \
       "${SUBNET}1..$H; shaping per veth end: $SHAPING"
else
  [[ $NETNS == 2 ]] && { NETNS=1; cleanup; }
  NETNS=0
  [[ $LOOPBACK == 1 ]] && why="--loopback"
  echo "# multihost.sh: network: loopback - every host on lo, no shaping (namespaces not used: ${why:-?})"
fi

# ------------------------------------------------------------ runs
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
if [[ $ONE_GPU == 1 && $EMU == 0 ]]; then
  if pgrep -x nvidia-cuda-mps-control > /dev/null 2>&1 || pgrep -x nvidia-cuda-mps-server > /dev/null 2>&1; then
    echo "# multihost.sh: --one-gpu: an MPS server runs already"
  elif command -v nvidia-cuda-mps-control > /dev/null 2>&1; then
    # Its pipe and log directories belong to this run; every benchmark
    # process inherits them.
    export CUDA_MPS_PIPE_DIRECTORY=$OUT/mps-pipe CUDA_MPS_LOG_DIRECTORY=$OUT/mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if nvidia-cuda-mps-control -d; then
      MPS_STARTED=1
      echo "# multihost.sh: --one-gpu: started an MPS server for this run"
    else
      echo "# multihost.sh: --one-gpu: nvidia-cuda-mps-control -d failed; uniccl will refuse to share the GPU" >&2
    fi
  else
    echo "# multihost.sh: --one-gpu: no nvidia-cuda-mps-control; uniccl will refuse to share the GPU" >&2
  fi
fi
rm -f "$OUT"/bench_*.log
echo "# multihost.sh: $H hosts x $G GPUs ($NRANKS ranks, $PROCS process(es) of $PER_PROC GPU(s) per host), sizes $MINB..$MAXB (x$FACTOR), iters $ITERS," \
     "warmup $WARMUP, modes: $MODES, build $BUILD_DIR, output $OUT"

# Runs one benchmark on every rank; rank 0's output is the log.
run_one() {
  local exe=$1 log=$2
  shift 2
  local port=$((20000 + RANDOM % 30000)) addr ifname pids=() h l rank rc=0
  if [[ $NETNS == 1 ]]; then addr=${SUBNET}1; else addr=127.0.0.1; fi
  for ((h = 0; h < H; h++)); do
    if [[ $NETNS == 1 ]]; then ifname=uccl-p$$-$h; else ifname=lo; fi
    for ((l = 0; l < PROCS; l++)); do
      rank=$((h * PROCS + l))   # process rank; its GPUs are ranks rank*PER_PROC ..
      local envs=(NCCL_HOSTID="multihost-$h" NCCL_COMM_ID="$addr:$port" RANK=$rank WORLD_SIZE=$((H * PROCS))
                  LOCAL_RANK=$l LOCAL_WORLD_SIZE=$PROCS NCCL_SOCKET_IFNAME="$ifname" NCCL_IB_DISABLE=1 NCCL_NVLS_ENABLE=0)
      if [[ $EMU == 1 ]]; then
        envs+=(UNICCL_EMU_DEVICES=$G UNICCL_P2P_NCHANNELS=${UNICCL_P2P_NCHANNELS:-1})
      else
        local vis="" k
        for ((k = 0; k < G; k++)); do vis+=${vis:+,}${GPUS[$((h * G + k))]}; done
        envs+=(CUDA_VISIBLE_DEVICES="$vis")
      fi
      local cmd=(env "${envs[@]}" timeout "$TIMEOUT" "$exe" "$@")
      [[ $NETNS == 1 ]] && cmd=(ip netns exec "${NS_PREFIX}$h" "${cmd[@]}")
      if [[ $rank == 0 ]]; then "${cmd[@]}" > "$log" 2>&1 &
      else "${cmd[@]}" > "$log.rank$rank" 2>&1 &
      fi
      pids+=($!)
    done
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  echo "rc=$rc" >> "$log"
  return $rc
}

status=0
for coll in $COLLS; do
  for mode in $MODES; do
    for lib in "${LIBS[@]}"; do
      exe=$BUILD_DIR/bench/${coll}_perf$SUFFIX
      [[ $lib == nccl ]] && exe=$BUILD_DIR/bench/${coll}_perf_nccl
      args=(-b "$MINB" -e "$MAXB" -f "$FACTOR" -g "$PER_PROC" -n "$ITERS" -w "$WARMUP" -c 1)
      [[ $EMU == 1 ]] && args+=(-d float)
      [[ $mode == graph ]] && args+=(-G "$GRAPH_LAUNCHES")
      log=$OUT/bench_${coll}_${mode}_${lib}.log
      echo "# running $lib $coll ($mode): $(basename "$exe") ${args[*]}"
      if ! run_one "$exe" "$log" "${args[@]}"; then
        status=1
        echo "#   FAILED: see $log (and $log.rank*)" >&2
        tail -n 5 "$log" >&2
      elif awk '$1 ~ /^[0-9]+$/ && NF >= 13 && (($9 != "0" && $9 != "N/A") || ($13 != "0" && $13 != "N/A")) { bad = 1 }
                END { exit !bad }' "$log"; then
        status=1
        echo "#   WRONG results: see $log" >&2
      fi
    done
  done
done

echo "# multihost.sh: $H hosts x $G GPUs, network: $([[ $NETNS == 1 ]] && echo "netns+tc ($SHAPING)" || echo loopback)"
python3 "$ROOT/ci/bench_table.py" "$OUT" | tee "$OUT/table.txt"
exit $status
