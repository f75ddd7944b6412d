#!/usr/bin/env bash
# ci/setup.sh on a machine where apt-get fails (the GPU machines: no
# network) must install nothing, report what is missing, and neither end nor
# change the options of the script that sources it (ci/gpu-test.sh once
# stopped at a test's exit-77 skip because setup.sh turned on set -e).
#
#   setup_test.sh PATH/TO/ci/setup.sh
set -uo pipefail
setup=${1:?usage: setup_test.sh ci/setup.sh}
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
# A PATH with only a failing apt-get and an `id` that says root: every tool
# looks missing, installing fails the way an offline apt-get does.
printf '#!/bin/sh\necho "E: Failed to fetch (offline)" >&2\nexit 100\n' >"$fake/apt-get"
printf '#!/bin/sh\necho 0\n' >"$fake/id"
chmod +x "$fake/apt-get" "$fake/id"
fails=0
expect() {  # what, condition result
  if [[ $2 == 0 ]]; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails + 1)); fi
}

for opts in "+e" "-e"; do
  out=$( (
    set $opts
    before=$(set +o)
    PATH=$fake
    source "$setup" 2>/dev/null
    after=$(set +o)
    # Reaching this line at all is the point under set -e.
    echo "continued"
    [[ $before == "$after" ]] && echo "options kept"
    [[ " $UNICCL_SETUP_MISSING " == *" meson "* ]] && echo "meson reported missing"
    false   # a later failing command ends the script only where the caller asked for set -e
    echo "after false"
  ) )
  expect "caller with set $opts continues after source" "$([[ $out == *continued* ]]; echo $?)"
  expect "caller with set $opts keeps its options" "$([[ $out == *"options kept"* ]]; echo $?)"
  expect "missing packages reported (set $opts)" "$([[ $out == *"meson reported missing"* ]]; echo $?)"
  if [[ $opts == "+e" ]]; then
    expect "set +e stays off: a failing command does not end the caller" "$([[ $out == *"after false"* ]]; echo $?)"
  else
    expect "set -e stays on" "$([[ $out != *"after false"* ]]; echo $?)"
  fi
done

# Executed on its own, it says by its exit code that something is missing.
PATH=$fake /bin/bash "$setup" >/dev/null 2>&1
expect "bash ci/setup.sh exits non-zero when something is missing" "$([[ $? != 0 ]]; echo $?)"

echo "setup_test: $fails failure(s)"
[[ $fails == 0 ]]
