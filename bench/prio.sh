#!/usr/bin/env bash
# bench/prio.sh — priorities: the proportions a weighted worker gives its
# queues, and its drain rate.
#
#   bench/prio.sh                       # build (if needed), run, print a table
#   N=10000 WEIGHTS="6 3 1" WORKERS=1 SKIP_BUILD=1 bench/prio.sh
#
# Starts its own redis-server (unix socket, no persistence), fills three
# queues (critical, default, low) with more than their share of N noop jobs
# each (so every queue stays full), starts WORKERS workers with
# `-q critical:W1 -q default:W2 -q low:W3` and log level info, waits until
# N jobs finished, and counts the queues of the first N "job finished" log
# lines (a job's line is written when it ends; with noop jobs that is the
# order they started within a few). Then the same with `low` empty: its
# share goes to the others. Stops everything it started, by pid.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
N=${N:-10000}
WORKERS=${WORKERS:-1}
read -r W1 W2 W3 <<<"${WEIGHTS:-6 3 1}"
log() { echo "[prio $(date +%T)] $*" >&2; }

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  [ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
  cmake --build "$BUILD" -j2 --target jobrunner bench_job jr_peer >/dev/null || { log "build failed"; exit 1; }
fi
JR=$BUILD/bin/jobrunner
PEER=$BUILD/bench/jr_peer
PLUGIN=$BUILD/bench/bench_job.so

WORK=$(mktemp -d /tmp/prio.XXXXXX)
PIDS=()
REDIS_PID=
. "$HERE/lib.sh"
cleanup() { [ ${#PIDS[@]} -gt 0 ] && stop_pids "${PIDS[@]}"; PIDS=(); stop_redis; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
start_redis "$WORK" || { log "redis did not start"; exit 1; }
URL=unix://$SOCK
export BENCH_SOCKET=$SOCK BENCH_HANDLER=noop

# run LABEL N_CRITICAL N_DEFAULT N_LOW: fill, drain N with the workers, print a row
run() {
  local label=$1 i t0 t1
  rc flushall >/dev/null
  [ "$2" -gt 0 ] && BENCH_QUEUE=critical "$PEER" bulk "$2" >/dev/null
  [ "$3" -gt 0 ] && BENCH_QUEUE=default "$PEER" bulk "$3" >/dev/null
  [ "$4" -gt 0 ] && BENCH_QUEUE=low "$PEER" bulk "$4" >/dev/null
  rm -f "$WORK"/w.*.log
  t0=$("$PEER" mono)
  for ((i = 0; i < WORKERS; i++)); do
    "$JR" worker --redis "$URL" --plugin "$PLUGIN" -q "critical:$W1" -q "default:$W2" -q "low:$W3" \
      >"$WORK/w.$i.log" 2>&1 </dev/null &
    PIDS+=($!)
  done
  local deadline=$((SECONDS + 300))
  while [ "$(cat "$WORK"/w.*.log 2>/dev/null | grep -c 'job finished')" -lt "$N" ]; do
    [ $SECONDS -lt $deadline ] || { log "$label: $N jobs did not finish within 300 s"; break; }
    sleep 0.1
  done
  t1=$("$PEER" mono)
  stop_pids "${PIDS[@]}"; PIDS=()
  sort -s -k1,1 "$WORK"/w.*.log | grep 'job finished' | head -n "$N" |
    sed -n 's/.* queue=\([^ ]*\) .*/\1/p' | sort | uniq -c |
    awk -v label="$label" -v n="$N" -v t0="$t0" -v t1="$t1" '
      { c[$2] = $1 }
      END { printf "%-34s critical %5.1f%%  default %5.1f%%  low %5.1f%%   (%d jobs in %.2f s incl. start-up)\n",
                   label, 100 * c["critical"] / n, 100 * c["default"] / n, 100 * c["low"] / n, n, (t1 - t0) / 1000 }'
}

log "weights $W1:$W2:$W3, $WORKERS worker(s), first $N jobs"
TOT=$((W1 + W2 + W3))
run "all full ($W1:$W2:$W3)" $((N * W1 / TOT * 12 / 10 + 100)) $((N * W2 / TOT * 12 / 10 + 100)) $((N * W3 / TOT * 12 / 10 + 100))
run "low empty ($W1:$W2 of the rest)" $((N * W1 / (W1 + W2) * 12 / 10 + 100)) $((N * W2 / (W1 + W2) * 12 / 10 + 100)) 0
