#!/usr/bin/env bash
# Installs what building and testing uniccl needs, where it is missing, and
# puts CUDA's nvcc on PATH. Debian/Ubuntu with apt-get (CI and developer
# machines). CUDA itself (nvcc) is expected at /usr/local/cuda or on PATH.
#
#   source ci/setup.sh    (ci/test.sh, ci/bench.sh, ci/gpu-test.sh: keeps PATH)
#   bash ci/setup.sh      (exit 1 when something is still missing)
#
# It installs what it can and reports what it could not; it never ends the
# calling script, and it leaves the caller's shell options (set -e, -u, ...)
# as they were. GPU machines have meson, ninja, GoogleTest and MPI but no
# network: there apt-get fails, hipcc stays missing, and the callers skip the
# HIP build with that reason. After it runs, UNICCL_SETUP_MISSING holds the
# space-separated packages that are still missing (empty: none).
#
# Environment: UNICCL_SKIP_HIP=1 (do not ask for hipcc), UNICCL_APT_TIMEOUT
# (seconds per apt network request, default 20: offline machines fail fast).

_uniccl_setup() {
  local need=()
  command -v meson >/dev/null || need+=(meson)
  command -v ninja >/dev/null || need+=(ninja-build)
  command -v pkg-config >/dev/null || need+=(pkg-config)
  command -v cmake >/dev/null || need+=(cmake)   # the install check's CMake consumer
  [ -e /usr/include/gtest/gtest.h ] || need+=(libgtest-dev libgmock-dev)
  [ -e /usr/include/infiniband/verbs.h ] || need+=(libibverbs-dev librdmacm-dev)
  command -v mpicxx >/dev/null || need+=(libopenmpi-dev openmpi-bin)
  if [ "${UNICCL_SKIP_HIP:-0}" != 1 ]; then
    command -v hipcc >/dev/null || need+=(hipcc)
    [ -e /usr/include/hip/hip_runtime.h ] || need+=(libamdhip64-dev)
  fi

  UNICCL_SETUP_MISSING=""
  if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      echo "ci/setup.sh: installing ${need[*]}"
      local apt_opts=(-q -o "Acquire::http::Timeout=${UNICCL_APT_TIMEOUT:-20}"
                      -o "Acquire::https::Timeout=${UNICCL_APT_TIMEOUT:-20}" -o Acquire::Retries=0)
      DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" update ||
        echo "ci/setup.sh: apt-get update failed (no network?); trying the package lists at hand" >&2
      if ! DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y --no-install-recommends "${need[@]}"; then
        # One unavailable package fails the whole command: install the others one by one.
        local p failed=()
        for p in "${need[@]}"; do
          DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y --no-install-recommends "$p" \
            >/dev/null 2>&1 || failed+=("$p")
        done
        UNICCL_SETUP_MISSING="${failed[*]}"
      fi
    else
      UNICCL_SETUP_MISSING="${need[*]}"
      echo "ci/setup.sh: cannot install (needs root and apt-get)" >&2
    fi
  fi
  if [ -n "$UNICCL_SETUP_MISSING" ]; then
    echo "ci/setup.sh: still missing: $UNICCL_SETUP_MISSING (what needs them is skipped or fails with its own message)" >&2
  fi

  if ! command -v nvcc >/dev/null; then
    local d
    for d in /usr/local/cuda/bin /usr/local/cuda-13/bin; do
      if [ -x "$d/nvcc" ]; then export PATH="$d:$PATH"; break; fi
    done
  fi
  if ! command -v nvcc >/dev/null; then
    echo "ci/setup.sh: nvcc not found (install the CUDA toolkit at /usr/local/cuda)" >&2
    UNICCL_SETUP_MISSING="${UNICCL_SETUP_MISSING:+$UNICCL_SETUP_MISSING }nvcc"
  fi
  export UNICCL_SETUP_MISSING
}

_uniccl_setup
unset -f _uniccl_setup
# Executed (not sourced): the exit code tells whether anything is missing.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  [ -z "$UNICCL_SETUP_MISSING" ]
  exit $?
fi
true
