#!/usr/bin/env bash
# Installs a configured and built uniccl tree into a temporary directory and
# checks that the installed tree is complete and usable on its own:
#  1. the installed tools start: they carry a RUNPATH relative to themselves
#     ($ORIGIN/../<libdir>), so they find the installed libuniccl.so.0 with no
#     LD_LIBRARY_PATH, wherever the tree is copied;
#  2. every installed header finds the project headers it includes in the
#     installed tree (tools/check_header_closure.py);
#  3. programs build against the installed prefix only, as consumer projects
#     build them (tests/install/): the host API and the Device API host part
#     (g++ with pkg-config's flags), a Device API kernel with its host code
#     (nvcc for sm_90, -lnccl as nccl-tests link), <rccl/rccl.h> (g++), C11
#     (gcc), and a CMake project (find_package(uniccl CONFIG)); the host
#     programs run (ncclGetVersion needs no GPU).
# NVIDIA's NCCL may sit in the CUDA toolkit (include/nccl*.h, lib/libnccl*),
# which nvcc searches by itself: the builds use a view of the toolkit without
# it (ci/toolkit_without_nccl.py), and every nccl/rccl/uniccl header the
# compilers read and every such library the linker took must lie in the
# install, or the check fails. About half a minute, most of it nvcc.
#
#   bash ci/check_install.sh BUILD_DIR     exit 0: all of the above held
set -uo pipefail
build=${1:?usage: check_install.sh BUILD_DIR}
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/uniccl-install.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
say() { echo "check_install: $*"; }
# On failure, let a compile running in the background end before the
# temporary directory goes.
fail() { say "FAIL: $*"; [[ -n ${nvcc_job:-} ]] && wait "$nvcc_job" 2>/dev/null; exit 1; }
# Nothing from the environment may lead a compiler or the loader elsewhere.
unset CPATH C_INCLUDE_PATH CPLUS_INCLUDE_PATH LIBRARY_PATH LD_LIBRARY_PATH PKG_CONFIG_PATH

# DESTDIR puts <prefix> below $tmp/stage; a relative RUNPATH does not care.
if ! meson install -C "$build" --no-rebuild --quiet --destdir "$tmp/stage" >"$tmp/install.log" 2>&1; then
  cat "$tmp/install.log"; fail "meson install failed"
fi
opts=$(meson introspect --buildoptions "$build" | python3 -c '
import json, sys
o = {x["name"]: x["value"] for x in json.load(sys.stdin)}
print(o["prefix"], o["libdir"], o["includedir"], o["gpu_backend"])') || fail "meson introspect failed"
read -r prefix libdir includedir backend <<<"$opts"
under() { case $1 in /*) echo "$tmp/stage$1" ;; *) echo "$tmp/stage$prefix/$1" ;; esac; }
P=$tmp/stage$prefix
lib=$(under "$libdir")
inc=$(under "$includedir")

# 1. The installed tools.
tool=$P/bin/all_reduce_perf
[[ -f $tool && -f $lib/libuniccl.so.0 ]] ||
  fail "no bin/all_reduce_perf or $libdir/libuniccl.so.0 under the install (built with -Dbench=false?)"
say "installed $tool, $lib/libuniccl.so.0"
runpath=$(readelf -d "$tool" | sed -n 's/.*(\(RUNPATH\|RPATH\)).*\[\(.*\)\]/\2/p')
say "RUNPATH of all_reduce_perf: ${runpath:-none}"
# shellcheck disable=SC2016  # the literal text $ORIGIN
case $runpath in
  *'$ORIGIN'*) ;;
  *) fail "the installed tool has no \$ORIGIN-relative RUNPATH" ;;
esac
if ! "$tool" --self-test >"$tmp/selftest.log" 2>&1; then
  tail -n 20 "$tmp/selftest.log"; fail "the installed all_reduce_perf did not start (see above)"
fi
# ldd LIB: "NAME => PATH (address)" per library: the real paths of uniccl's.
loaded() { ldd "$1" | sed -n 's/^\s*\(lib\(uniccl\|nccl\|rccl\)\.so[^ ]*\) => \([^ ]*\) .*/\3/p' | xargs -r realpath; }
reallib=$(realpath "$lib")
resolved=$(loaded "$tool")
say "libuniccl.so.0 of all_reduce_perf: ${resolved:-not found}"
[[ $resolved == "$reallib"/* ]] || fail "libuniccl.so.0 not resolved from the installed tree"

# 2. The installed headers are closed under #include.
python3 "$src/tools/check_header_closure.py" "$inc" || fail "an installed header includes what is not installed"

if [[ $backend != cuda ]]; then
  say "consumer builds SKIPPED: written for CUDA builds (this is a $backend build)"
  say "OK ($SECONDS s)"; exit 0
fi

# 3. Consumer builds against the installed prefix.
# The GPU runtime's headers: where the installed pkg-config file says.
gpuinc=$(sed -n 's/^gpuincludedir=//p' "$lib/pkgconfig/uniccl.pc")
cuda_home=$(dirname "${gpuinc:-/nonexistent/include}")
[[ -x $cuda_home/bin/nvcc ]] || fail "no nvcc in $cuda_home, the toolkit uniccl.pc names (gpuincludedir=$gpuinc)"
python3 "$src/ci/toolkit_without_nccl.py" "$cuda_home" "$tmp/cuda" >"$tmp/hidden.log" || fail "could not make a toolkit view without NCCL"
say "toolkit view without NCCL: $(grep -c '^left out' "$tmp/hidden.log") NCCL entries of $cuda_home left out"
cuda=$tmp/cuda
nvcc=$cuda/bin/nvcc
t=$src/tests/install
out=$tmp/out
mkdir -p "$out"

# Flags a consumer gets from pkg-config (the toolkit view in place of the
# recorded toolkit; prefix moved to the staged tree).
if command -v pkg-config >/dev/null; then
  pc() { PKG_CONFIG_LIBDIR=$lib/pkgconfig pkg-config --define-variable=prefix="$P" \
           --define-variable=gpuincludedir="$cuda/include" "$@" uniccl; }
  cflags=$(pc --cflags) || fail "pkg-config --cflags uniccl failed"
  libs=$(pc --libs) || fail "pkg-config --libs uniccl failed"
  say "pkg-config --cflags --libs uniccl: ${cflags//$tmp/<tmp>} ${libs//$tmp/<tmp>}"
else
  say "pkg-config SKIPPED: not installed; the host programs use -I/-L flags instead"
  cflags="-I$inc -I$cuda/include"; libs="-L$lib -luniccl"
fi

# build NAME COMMAND...: runs a build with the linker's trace in $out/NAME.trace.
build_one() {
  local name=$1; shift
  if ! "$@" >"$out/$name.log" 2>&1; then
    cat "$out/$name.log"; fail "$name did not build: $*"
  fi
}
# A program built here finds the installed library through its RUNPATH.
run_one() {
  local name=$1; shift
  local dep
  dep=$(loaded "$out/$name")
  [[ -n $dep ]] || fail "$name loads no uniccl library"
  while read -r path; do
    [[ $path == "$reallib"/* ]] || fail "$name loads a library from outside the install: $path"
  done <<<"$dep"
  "$out/$name" "$@" >"$out/$name.run" 2>&1 || { cat "$out/$name.run"; fail "$name failed"; }
  say "ran $name: $(sed 's/^[a-z_]*: //' "$out/$name.run")"
}
rpath=("-Wl,-rpath,$lib" "-Wl,--trace")

# As nccl-tests' Makefile with NCCL_HOME=<prefix>: nvcc, -I and -L of the
# prefix, -lnccl (uniccl's drop-in libnccl.so.2).
( build_one device_api_compile "$nvcc" -std=c++17 -arch=sm_90 -I"$inc" -MD -MF "$out/device_api.d" \
  -c "$t/device_api.cu" -o "$out/device_api.o" ) &
nvcc_job=$!   # the longest step, beside the host builds
# shellcheck disable=SC2086  # pkg-config output is a list of flags
build_one host_api g++ -std=c++17 -MD -MF "$out/host_api.d" $cflags "$t/host_api.cc" -o "$out/host_api" \
  $libs "${rpath[@]}"
# shellcheck disable=SC2086
build_one rccl_api g++ -std=c++17 -MD -MF "$out/rccl_api.d" $cflags "$t/rccl_api.cc" -o "$out/rccl_api" \
  $libs "${rpath[@]}"
# shellcheck disable=SC2086
build_one c_api gcc -std=c11 -MD -MF "$out/c_api.d" $cflags "$t/c_api.c" -o "$out/c_api" $libs "${rpath[@]}"
wait "$nvcc_job" || exit 1
build_one device_api "$nvcc" -arch=sm_90 "$out/device_api.o" -o "$out/device_api" -L"$lib" -lnccl \
  -Xlinker -rpath="$lib" -Xlinker --trace
run_one host_api
run_one rccl_api
run_one c_api
run_one device_api

# Every nccl/rccl/uniccl header read and library linked came from the install.
own_header='(^|/)(nccl[^/]*\.h|uniccl[^/]*\.h|rccl/[^/]*\.h|nccl_device/.*)$'
check_headers() {  # label, file with one path per line
  local label=$1 list=$2 n bad
  n=$(grep -cE "$own_header" "$list")
  bad=$(grep -E "$own_header" "$list" | while read -r f; do
          r=$(realpath -m "$f"); [[ $r == "$(realpath "$inc")"/* ]] || echo "$f"; done)
  [[ -z $bad ]] || fail "$label read headers from outside the install: $bad"
  [[ $n -gt 0 ]] || fail "$label read no uniccl header (the check would prove nothing)"
  say "$label: $n nccl/rccl/uniccl headers read, all from the install"
}
for d in host_api rccl_api c_api device_api; do
  sed -e 's/^[^:]*://' -e 's/\\$//' "$out/$d.d" | tr ' ' '\n' | grep -v '^$' >"$out/$d.deps"
  check_headers "$d" "$out/$d.deps"
done
for l in host_api rccl_api c_api device_api; do
  bad=$(grep -oE '[^ ()]*lib(uniccl|nccl|rccl)[^ ()/]*\.(so|a)[^ ()/]*' "$out/$l.log" | sort -u | grep -v "^$lib/")
  [[ -z $bad ]] || fail "$l linked a library from outside the install: $bad"
  grep -qE "$lib/lib(uniccl|nccl)\.so" "$out/$l.log" || fail "$l: the linker trace shows no library of the install"
done
say "linker: every uniccl/nccl library taken from $lib"

# A CMake consumer: find_package(uniccl CONFIG REQUIRED) with CMAKE_PREFIX_PATH.
if command -v cmake >/dev/null; then
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  if ! cmake -S "$t/cmake" -B "$out/cmake" "${gen[@]}" -DCMAKE_PREFIX_PATH="$P" \
        -DUNICCL_GPU_INCLUDE_DIRS="$cuda/include" -DCMAKE_CXX_FLAGS=-H >"$out/cmake.log" 2>&1 \
     || ! cmake --build "$out/cmake" >>"$out/cmake.log" 2>&1; then
    cat "$out/cmake.log"; fail "the CMake consumer did not build"
  fi
  found=$(sed -n 's/^uniccl_DIR:PATH=//p' "$out/cmake/CMakeCache.txt")
  [[ $found == "$lib/cmake/uniccl" ]] || fail "CMake found uniccl in $found, not in the install"
  say "cmake: find_package(uniccl) found ${found//$tmp/<tmp>}"
  # g++ -H: one line per header read, dots for its depth.
  sed -n 's/^\.\+ //p' "$out/cmake.log" >"$out/cmake.deps"
  check_headers cmake "$out/cmake.deps"
  for exe in host_api_uniccl host_api_nccl; do
    cp "$out/cmake/$exe" "$out/$exe" && run_one "$exe"
  done
else
  say "cmake consumer SKIPPED: cmake not installed (ci/setup.sh installs it where apt-get works)"
fi
say "OK ($SECONDS s)"
