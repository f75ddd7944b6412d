#!/usr/bin/env bash
# uniccl vs NCCL (or RCCL), side by side on the visible GPUs of this machine.
#
#   ci/compare.sh [OUT_DIR]        (default ./compare-out)
#
# Builds the benchmarks twice from the same sources (bench/*_perf against
# uniccl, bench/*_perf_nccl against the vendor library), runs both for
# all_reduce, all_gather, reduce_scatter, broadcast, reduce, sendrecv and
# alltoall in eager and graph (-G) mode over 8 B .. 1 GiB, and writes into
# OUT_DIR:
#   raw/<coll>_<mode>_<lib>.log   the benchmarks' own output
#   results.csv                   every parsed row (out-of-place columns)
#   compare.csv, compare.md       the ratio table: busbw uniccl/NCCL for sizes
#                                 >= 1 MiB (higher is better), time uniccl/NCCL
#                                 below (lower is better)
#   busbw.png                     busbw vs size of both (needs matplotlib)
# A failing benchmark is recorded in the tables and the run goes on; the exit
# code is 1 when anything failed or reported wrong results.
#
# Environment (defaults): NCCL_HOME (the nvidia-nccl-cu13 wheel, else
# /usr/local/cuda), BUILD_DIR (build-bench), NGPUS (visible GPUs),
# COMPARE_COLLS (the seven above), COMPARE_MIN_BYTES (8), COMPARE_MAX_BYTES (1G),
# COMPARE_FACTOR (2, size step), COMPARE_ITERS (20), COMPARE_WARMUP (20: the first size of each process otherwise carries one-time GPU slowness, docs/performance.md), COMPARE_GRAPH_LAUNCHES (5),
# COMPARE_CHECK (1), COMPARE_TIMEOUT (seconds per run, 1200),
# COMPARE_SKIP_BUILD (0; 1 = use the tools already in BUILD_DIR).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:-./compare-out}
BUILD_DIR=${BUILD_DIR:-$ROOT/build-bench}
export BUILD_DIR
COLLS=${COMPARE_COLLS:-all_reduce all_gather reduce_scatter broadcast reduce sendrecv alltoall}
MIN_BYTES=${COMPARE_MIN_BYTES:-8}
MAX_BYTES=${COMPARE_MAX_BYTES:-1G}
FACTOR=${COMPARE_FACTOR:-2}
ITERS=${COMPARE_ITERS:-20}
WARMUP=${COMPARE_WARMUP:-20}
GRAPH_LAUNCHES=${COMPARE_GRAPH_LAUNCHES:-5}
CHECK=${COMPARE_CHECK:-1}
TIMEOUT=${COMPARE_TIMEOUT:-1200}

export NCCL_NVLS_ENABLE=0   # NVLS (NVSwitch SHARP) off: compare the same data paths

find_nccl_home() {
  if [[ -n ${NCCL_HOME:-} ]]; then echo "$NCCL_HOME"; return; fi
  local wheel
  wheel=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)
  if [[ -n $wheel && -d $wheel/include ]]; then echo "$wheel"; return; fi
  local d
  for d in /usr/local/cuda /usr /opt/rocm; do
    if [[ -f $d/include/nccl.h || -f $d/include/rccl/rccl.h ]] &&
       compgen -G "$d/lib*/lib[nr]ccl.so*" > /dev/null; then
      echo "$d"; return
    fi
  done
}

# The directory of the vendor's libnccl.so* / librccl.so* under its prefix.
nccl_libdir() {
  local d
  for d in "$NCCL_HOME_DIR"/lib "$NCCL_HOME_DIR"/lib64 "$NCCL_HOME_DIR"/lib/x86_64-linux-gnu; do
    compgen -G "$d/lib[nr]ccl.so*" > /dev/null && { echo "$d"; return; }
  done
  echo "$NCCL_HOME_DIR/lib"
}

mkdir -p "$OUT/raw" || exit 2
OUT=$(cd "$OUT" && pwd)
NCCL_HOME_DIR=$(find_nccl_home)
if [[ -z $NCCL_HOME_DIR ]]; then
  echo "compare.sh: no NCCL/RCCL found: set NCCL_HOME=<prefix with include/nccl.h and lib/libnccl.so*>" >&2
  exit 2
fi
echo "# compare.sh: vendor library from $NCCL_HOME_DIR, build $BUILD_DIR, output $OUT"
if [[ ${COMPARE_SKIP_BUILD:-0} != 1 ]] &&
   ! "$ROOT/ci/bench.sh" --build-only --nccl-home "$NCCL_HOME_DIR" > "$OUT/raw/build.log" 2>&1; then
  echo "compare.sh: build failed, see $OUT/raw/build.log" >&2
  tail -n 30 "$OUT/raw/build.log" >&2
  exit 2
fi
NGPUS=${NGPUS:-$("$ROOT/ci/bench.sh" --count-gpus)}
echo "# $NGPUS GPU(s), sizes $MIN_BYTES..$MAX_BYTES, iters $ITERS, warmup $WARMUP, graph launches $GRAPH_LAUNCHES"

RESULTS=$OUT/results.csv
RUNS=$OUT/runs.csv
echo "collective,mode,library,size,time_us,algbw,busbw,wrong" > "$RESULTS"
echo "collective,mode,library,rc,rows" > "$RUNS"
status=0

for coll in $COLLS; do
  for mode in eager graph; do
    for lib in uniccl nccl; do
      exe=$BUILD_DIR/bench/${coll}_perf
      [[ $lib == nccl ]] && exe+=_nccl
      args=(-b "$MIN_BYTES" -e "$MAX_BYTES" -f "$FACTOR" -g "$NGPUS" -n "$ITERS" -w "$WARMUP" -c "$CHECK")
      [[ $mode == graph ]] && args+=(-G "$GRAPH_LAUNCHES")
      log=$OUT/raw/${coll}_${mode}_${lib}.log
      echo "# running $lib $coll ($mode): $(basename "$exe") ${args[*]}"
      # The vendor set runs on the vendor's library whatever LD_LIBRARY_PATH
      # says: a prebuilt tree's lib/ holds uniccl's drop-in libnccl.so.2,
      # and a path that names it would compare uniccl with itself.
      libpath=${LD_LIBRARY_PATH:-}
      [[ $lib == nccl ]] && libpath=$(nccl_libdir)${libpath:+:$libpath}
      if [[ -x $exe ]]; then
        LD_LIBRARY_PATH=$libpath timeout "$TIMEOUT" "$exe" "${args[@]}" > "$log" 2>&1
        rc=$?
      else
        echo "missing executable $exe" > "$log"
        rc=127
      fi
      # Table rows: size count type redop root | time algbw busbw #wrong (out-of-place) | ...
      rows=$(awk -v c="$coll" -v m="$mode" -v l="$lib" \
        '$1 ~ /^[0-9]+$/ && NF >= 13 { print c "," m "," l "," $1 "," $6 "," $7 "," $8 "," $9 }' "$log")
      nrows=0
      if [[ -n $rows ]]; then
        echo "$rows" >> "$RESULTS"
        nrows=$(echo "$rows" | wc -l)
      fi
      echo "$coll,$mode,$lib,$rc,$nrows" >> "$RUNS"
      if [[ $rc != 0 ]]; then
        status=1
        echo "#   FAILED (exit code $rc$([[ $rc == 124 ]] && echo ', timeout')): see $log" >&2
        tail -n 5 "$log" >&2
      fi
    done
  done
done

# Ratio table: one line per (collective, mode, size) present in either run.
awk -F, -v md="$OUT/compare.md" -v csv="$OUT/compare.csv" '
  FNR == 1 { next }
  FILENAME ~ /runs.csv$/ { rc[$1 "," $2 "," $3] = $4; next }
  {
    k = $1 "," $2 "," $4
    if (!(k in seen)) { seen[k] = 1; order[++n] = k }
    t[k "," $3] = $5; bw[k "," $3] = $7; wr[k "," $3] = $8
  }
  function failnote(c, m, lib) {
    r = rc[c "," m "," lib]
    return (r != "" && r != 0) ? sprintf(" (%s exit %s)", lib, r) : ""
  }
  END {
    print "collective,mode,size,metric,uniccl,nccl,ratio,note" > csv
    print "| collective | mode | size (B) | metric | uniccl | NCCL | uniccl/NCCL | note |" > md
    print "|---|---|---:|---|---:|---:|---:|---|" > md
    printf "%-15s %-6s %12s %-10s %10s %10s %8s  %s\n", "collective", "mode", "size(B)", "metric", "uniccl", "NCCL", "ratio", "note"
    for (i = 1; i <= n; i++) {
      k = order[i]; split(k, f, ",")
      big = f[3] >= 1048576
      metric = big ? "busbw GB/s" : "time us"
      u = big ? bw[k ",uniccl"] : t[k ",uniccl"]
      v = big ? bw[k ",nccl"] : t[k ",nccl"]
      note = ""
      if (wr[k ",uniccl"] != "" && wr[k ",uniccl"] != "0" && wr[k ",uniccl"] != "N/A") note = note " uniccl WRONG=" wr[k ",uniccl"]
      if (wr[k ",nccl"] != "" && wr[k ",nccl"] != "0" && wr[k ",nccl"] != "N/A") note = note " nccl WRONG=" wr[k ",nccl"]
      if (u == "") { u = "-"; note = note " uniccl missing" failnote(f[1], f[2], "uniccl") }
      if (v == "") { v = "-"; note = note " nccl missing" failnote(f[1], f[2], "nccl") }
      ratio = (u != "-" && v != "-" && v + 0 > 0) ? sprintf("%.3f", u / v) : "-"
      cm = f[1] "," f[2]
      if (!(cm in lcnt)) { lcnt[cm] = 0; cmorder[++ncm] = cm }
      if (big && ratio != "-" && u + 0 > 0) { lsum[cm] += log(u / v); lcnt[cm]++ }
      printf "%-15s %-6s %12s %-10s %10s %10s %8s %s\n", f[1], f[2], f[3], metric, u, v, ratio, note
      printf "%s,%s,%s,%s,%s,%s,%s,%s\n", f[1], f[2], f[3], metric, u, v, ratio, note > csv
      printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", f[1], f[2], f[3], metric, u, v, ratio, note > md
    }
    print "" > md
    print "Geometric mean of the busbw ratio uniccl/NCCL over sizes >= 1 MiB:" > md
    print ""
    print "geometric mean busbw ratio uniccl/NCCL (sizes >= 1 MiB):"
    for (j = 1; j <= ncm; j++) {
      k = cmorder[j]
      if (lcnt[k] == 0) continue
      split(k, f, ",")
      printf "  %-15s %-6s %.3f\n", f[1], f[2], exp(lsum[k] / lcnt[k])
      printf "- %s (%s): %.3f\n", f[1], f[2], exp(lsum[k] / lcnt[k]) > md
    }
    # Runs that produced no row at all still get a line.
    for (r in rc) if (rc[r] != 0) {
      printf "FAILED run: %s (exit %s)\n", r, rc[r]
      printf "- FAILED run: %s (exit %s)\n", r, rc[r] > md
    }
  }' "$RUNS" "$RESULTS"

if python3 "$ROOT/ci/plot_compare.py" "$RESULTS" "$OUT/busbw.png"; then
  :
else
  echo "compare.sh: plot not written (see message above)"
fi
grep -q 'WRONG' "$OUT/compare.csv" 2>/dev/null && status=1
echo "# compare.sh: results in $OUT (compare.md, compare.csv, results.csv, raw/)"
exit $status
