#!/usr/bin/env bash
# Installs a configured and built uniccl tree into a temporary directory and
# checks that the installed tools start on their own: the executables carry
# a RUNPATH relative to themselves ($ORIGIN/../<libdir>), so they find the
# installed libuniccl.so.0 with no LD_LIBRARY_PATH, wherever the tree is
# copied. Cheap: copies files and runs one host-only self-test.
#
#   bash ci/check_install.sh BUILD_DIR     exit 0: the installed tool ran
set -uo pipefail
build=${1:?usage: check_install.sh BUILD_DIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/uniccl-install.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT

# DESTDIR puts <prefix> below $tmp; a relative RUNPATH does not care.
if ! meson install -C "$build" --no-rebuild --quiet --destdir "$tmp" >"$tmp.log" 2>&1; then
  cat "$tmp.log"; rm -f "$tmp.log"
  echo "check_install: meson install failed"; exit 1
fi
rm -f "$tmp.log"
tool=$(find "$tmp" -path '*/bin/all_reduce_perf' -type f | head -1)
lib=$(find "$tmp" -name 'libuniccl.so.0' | head -1)
if [[ -z $tool || -z $lib ]]; then
  echo "check_install: no bin/all_reduce_perf or libuniccl.so.0 under the install (built with -Dbench=false?)"; exit 1
fi
echo "check_install: installed $tool, $lib"
runpath=$(readelf -d "$tool" | sed -n 's/.*(\(RUNPATH\|RPATH\)).*\[\(.*\)\]/\2/p')
echo "check_install: RUNPATH of all_reduce_perf: ${runpath:-none}"
case $runpath in
  *'$ORIGIN'*) ;;
  *) echo "check_install: FAIL: the installed tool has no \$ORIGIN-relative RUNPATH"; exit 1 ;;
esac
# The installed tool, with nothing from the build tree on the loader path.
if ! env -u LD_LIBRARY_PATH "$tool" --self-test >"$tmp/selftest.log" 2>&1; then
  tail -n 20 "$tmp/selftest.log"
  echo "check_install: FAIL: the installed all_reduce_perf did not start (see above)"; exit 1
fi
resolved=$(env -u LD_LIBRARY_PATH ldd "$tool" | grep 'libuniccl.so.0')
echo "check_install: $resolved"
case $resolved in
  *"$tmp"*) echo "check_install: OK" ;;
  *) echo "check_install: FAIL: libuniccl.so.0 not resolved from the installed tree"; exit 1 ;;
esac
