#!/usr/bin/env bash
# bench/finished.sh — what keep_finished costs on the drain rate, against
# off, in the same run, on one private redis-server (unix socket).
#
#   bench/finished.sh                     # build (BUILD_DIR, default build-finished, RelWithDebInfo), run
#   N_BULK=50000 REPS=1 bench/finished.sh
#
# Per rep, the modes alternate: off (no keep_finished), and on (queues.bench.
# keep_finished {count: KEEP, age: 1h}; KEEP default 10000, so the trim runs
# for most of the drain when N_BULK > KEEP). Each: N_BULK noop jobs enqueued
# first, then 2 workers (defaults, log level warn), launch to empty. Also
# prints the records' memory (MEMORY USAGE of jr:{bench}:finished and its
# index) after the "on" drain, per record. Every process started here is
# stopped by its pid. PROFILE=1 adds, per mode, Redis's time per job by
# command (INFO commandstats, the 8 that took most).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-finished}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
N_BULK=${N_BULK:-100000}
REPS=${REPS:-1}
KEEP=${KEEP:-10000}

log() { echo "[finished $(date +%T)] $*" >&2; }

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
fi
cmake --build "$BUILD" -j2 --target jobrunner bench_job jr_peer >/dev/null || { log "build failed"; exit 1; }
JR=$BUILD/bin/jobrunner
PEER=$BUILD/bench/jr_peer
PLUGIN=$BUILD/bench/bench_job.so
for f in "$JR" "$PEER" "$PLUGIN"; do [ -e "$f" ] || { log "missing $f"; exit 1; }; done

. "$HERE/lib.sh" # stop_pids, start_redis, rc, stop_redis
WORK=$(mktemp -d /tmp/jr-finished.XXXXXX)
PIDS=()
cleanup() {
  [ ${#PIDS[@]} -gt 0 ] && stop_pids "${PIDS[@]}"
  PIDS=()
  stop_redis
  log "redis stopped; logs in $WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
start_redis "$WORK" || { log "redis-server did not start"; exit 1; }
URL=unix://$SOCK

conf() { # off|on -> path of a worker config
  local f=$WORK/$1.yaml
  printf 'log:\n  level: warn\n' >"$f"
  [ "$1" = on ] && printf 'queues:\n  bench: {keep_finished: {count: %s, age: 1h}}\n' "$KEEP" >>"$f"
  echo "$f"
}
export BENCH_URL=$URL BENCH_QUEUE=bench
"$PEER" bulk 10 >/dev/null || { log "enqueue failed"; exit 1; } # loads the function library

for k in $(seq "$REPS"); do
  for mode in off on; do
    rc flushall >/dev/null
    BENCH_HANDLER=noop "$PEER" bulk "$N_BULK" >/dev/null
    WCONF=$(conf "$mode")
    rc config resetstat >/dev/null
    t_launch=$("$PEER" mono)
    for i in 1 2; do
      env BENCH_N=0 "$JR" worker -c "$WCONF" --redis "$URL" -q bench --plugin "$PLUGIN" >>"$WORK/worker-$mode.log" 2>&1 </dev/null &
      PIDS+=($!)
    done
    out=$(BENCH_HANDLER=noop "$PEER" waitempty 120)
    ok=$?
    stop_pids "${PIDS[@]}"
    PIDS=()
    t_empty=$(sed -n 's/.*t_empty=\([^ ]*\).*/\1/p' <<<"$out")
    if [ $ok != 0 ]; then
      if [ "${PROFILE:-0}" = 1 ]; then
      rc info commandstats | tr -d '\r' | sed -n 's/^cmdstat_\([^:]*\):calls=\([0-9]*\),usec=\([0-9]*\).*/\3 \1 \2/p' | sort -rn | head -8 |
        awk -v n="$N_BULK" -v m="$mode" '{printf "profile keep_finished=%s cmd=%s calls_per_job=%.2f redis_us_per_job=%.3f\n", m, $2, $3/n, $1/n}'
    fi
    echo "workload=drain keep_finished=$mode rep=$k jobs=$N_BULK error=queue_not_empty_after_120s"
      continue
    fi
    extra=
    if [ "$mode" = on ]; then
      n=$(rc xlen 'jr:{bench}:finished')
      mem=$(( $(rc memory usage 'jr:{bench}:finished' samples 0) + $(rc memory usage 'jr:{bench}:finished:ids' samples 0) ))
      extra="records=$n bytes_per_record=$(awk -v m="$mem" -v n="$n" 'BEGIN{printf "%.0f", n ? m/n : 0}')"
    fi
    if [ "${PROFILE:-0}" = 1 ]; then
      rc info commandstats | tr -d '\r' | sed -n 's/^cmdstat_\([^:]*\):calls=\([0-9]*\),usec=\([0-9]*\).*/\3 \1 \2/p' | sort -rn | head -8 |
        awk -v n="$N_BULK" -v m="$mode" '{printf "profile keep_finished=%s cmd=%s calls_per_job=%.2f redis_us_per_job=%.3f\n", m, $2, $3/n, $1/n}'
    fi
    echo "workload=drain keep_finished=$mode rep=$k jobs=$N_BULK workers=2 wall_s=$(awk -v a="$t_launch" -v b="$t_empty" 'BEGIN{printf "%.3f", (b-a)/1000}') jobs_per_s=$(awk -v a="$t_launch" -v b="$t_empty" -v n="$N_BULK" 'BEGIN{printf "%.0f", n/((b-a)/1000)}') $extra"
  done
done
