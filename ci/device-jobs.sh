#!/usr/bin/env bash
# Long jobs on a lent GPU machine across several calls of the device tool.
# A call may run at most 10 minutes, but a process in its own session lives
# until the machine goes back; the next call (made while the machine is still
# warm) waits for it again. Logs and exit codes live in $JOBS_DIR.
#
#   ci/device-jobs.sh start NAME CMD...           run CMD in its own session
#   ci/device-jobs.sh after NAME PATTERN NAME2 CMD...
#                                                 start NAME2 once NAME's log has a
#                                                 line matching PATTERN (or NAME ended)
#   ci/device-jobs.sh wait SECONDS NAME...        wait until every NAME ended or SECONDS
#                                                 passed; copy the logs to $OUT; print one
#                                                 status line per job and each log's tail
#   ci/device-jobs.sh snapshot DIR                copy this tree (no build dirs) to DIR
# Exit code of wait: 0 all ended with 0, 1 one ended otherwise, 3 still running.
#
# Each device call copies the working tree over the repository again: a
# build still reading it then can miss a file (seen: "tuning.h: No such file"
# in a ci/test.sh build that outlived its call). Jobs that build and outlive
# a call run in a snapshot: ci/device-jobs.sh snapshot /tmp/tree && cd /tmp/tree.
set -uo pipefail
JOBS_DIR=${JOBS_DIR:-/tmp/device-jobs}
mkdir -p "$JOBS_DIR"
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

start_job() {  # name, cmd...
  local name=$1; shift
  rm -f "$JOBS_DIR/$name.rc"
  # Its own session: the device tool ends a call's processes, not these.
  (cd "$ROOT" && setsid bash -c '"$@" >"$0.log" 2>&1; echo $? >"$0.rc"' "$JOBS_DIR/$name" "$@" \
     </dev/null >/dev/null 2>&1 &)
  echo "started $name: $*"
}

case ${1:-} in
  start) shift; start_job "$@" ;;
  after)
    shift; first=$1 pattern=$2 name=$3; shift 3
    start_job "$name" bash -c 'until grep -qE "$1" "$2.log" 2>/dev/null || [ -f "$2.rc" ]; do sleep 5; done; shift 2; exec "$@"' \
      _ "$pattern" "$JOBS_DIR/$first" "$@" ;;
  wait)
    shift; limit=$1; shift
    deadline=$((SECONDS + limit))
    while :; do
      running=0
      for n in "$@"; do [ -f "$JOBS_DIR/$n.rc" ] || running=1; done
      [ $running = 0 ] || [ $SECONDS -ge $deadline ] && break
      sleep 5
    done
    [ -n "${OUT:-}" ] && cp -r "$JOBS_DIR"/. "$OUT/" 2>/dev/null
    status=0
    for n in "$@"; do
      echo "===== $n: $( [ -f "$JOBS_DIR/$n.rc" ] && echo "ended rc=$(cat "$JOBS_DIR/$n.rc")" || echo running)"
      tail -n "${TAIL_LINES:-25}" "$JOBS_DIR/$n.log" 2>/dev/null
      if [ ! -f "$JOBS_DIR/$n.rc" ]; then status=3
      elif [ "$(cat "$JOBS_DIR/$n.rc")" != 0 ] && [ $status = 0 ]; then status=1; fi
    done
    exit $status ;;
  snapshot)
    mkdir -p "$2" && (cd "$ROOT" && tar cf - --exclude='./build*' --exclude=./.carry .) | tar xf - -C "$2" ;;
  *) sed -n '2,20p' "$0"; exit 2 ;;
esac
