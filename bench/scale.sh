#!/usr/bin/env bash
# bench/scale.sh — optional scale test: 10 million delayed jobs in one queue.
#
#   BUILD_DIR=build-bench bench/scale.sh          # N_SCALE=10000000 (~3 GB of Redis memory)
#   N_SCALE=1000000 bench/scale.sh
#
# On a private redis-server (unix socket, --save '' --appendonly no):
#   1. enqueues N_SCALE delayed jobs (due in 1 h, 50-byte payload) with jr_peer
#      bulkdelayed (C API, pipelined, chunks of 1000): enqueue rate, and
#      used_memory per delayed job at that size;
#   2. with those N_SCALE jobs still waiting, starts a scheduler and 2 workers,
#      warms them up, and runs the delayed workload of jobpath.sh (1,000 jobs over
#      1 s, due +2 s): lateness min/p50/p99/max and early count — does a 10M-member
#      sorted set slow down the job that is due now?
# Appends a key=value line to bench/results/scale.txt. Stops what it started by pid.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
N_SCALE=${N_SCALE:-10000000}
JR=$BUILD/bin/jobrunner PEER=$BUILD/bench/jr_peer PLUGIN=$BUILD/bench/bench_job.so
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  [ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
  cmake --build "$BUILD" -j2 --target jobrunner bench_job jr_peer >/dev/null || exit 1
fi
log() { echo "[scale $(date +%T)] $*" >&2; }

WORK=$(mktemp -d /tmp/jr-scale.XXXXXX)
PIDS=()
REDIS_PID=
. "$HERE/lib.sh"  # stop_pids, start_redis, rc, stop_redis
cleanup() {
  [ ${#PIDS[@]} -gt 0 ] && stop_pids "${PIDS[@]}"
  stop_redis
  if [ "${OK:-0}" = 1 ] && [ "${KEEP_WORK:-0}" != 1 ]; then rm -rf "$WORK"; else log "logs kept in $WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
start_redis "$WORK" || { log "redis did not start"; exit 1; }
export BENCH_SOCKET=$SOCK BENCH_QUEUE=bench
CONF=$WORK/jobrunner.yaml
printf 'log:\n  level: warn\n' >"$CONF"
used() { rc info memory | sed -n 's/^used_memory:\([0-9]*\).*/\1/p'; }

"$PEER" bulk 10 >/dev/null && rc flushall >/dev/null && sleep 0.5
before=$(used)
log "enqueueing $N_SCALE delayed jobs (due in 1 h)"
ENQ=$(BENCH_PAYLOAD_BYTES=50 "$PEER" bulkdelayed "$N_SCALE" 3600000) || { log "enqueue failed"; exit 1; }
sleep 0.5
after=$(used)
BPJ=$(( (after - before) / N_SCALE ))
log "$ENQ; $BPJ bytes per delayed job"

"$JR" scheduler -c "$CONF" --redis "unix://$SOCK" -q bench >>"$WORK/scheduler.log" 2>&1 </dev/null &
PIDS+=($!)
for i in 1 2; do
  BENCH_N=0 "$JR" worker -c "$CONF" --redis "unix://$SOCK" -q bench --plugin "$PLUGIN" >>"$WORK/worker.log" 2>&1 </dev/null &
  PIDS+=($!)
done
"$PEER" warm 200 >/dev/null
"$PEER" waitkey get bench:done 200 60 >/dev/null || { log "warm-up did not complete"; exit 1; }
sleep 1
rc del bench:lat >/dev/null
log "delayed workload with $N_SCALE jobs waiting"
DENQ=$("$PEER" delayed 1000 1000 2000)
"$PEER" waitkey llen bench:lat 1000 60 >/dev/null
LEFT=$("$JR" stats --json --redis "unix://$SOCK" -q bench)
stop_pids "${PIDS[@]}"; PIDS=()
read -r LMIN L50 L99 LMAX EARLY <<<"$(rc lrange bench:lat 0 -1 | sort -g | awk '
  { v[NR] = $1; if ($1 < 0) e++ }
  function p(q,  i) { i = int(q * (NR - 1) + 0.5) + 1; return v[i] }
  END { printf "%.2f %.2f %.2f %.2f %d\n", v[1], p(0.5), p(0.99), v[NR], e }')"
LINE="scale stamp=$(date -u +%Y-%m-%dT%H:%M:%SZ) delayed_jobs=$N_SCALE $(echo "$ENQ" | tr -s ' ') used_before=$before used_after=$after bytes_per_delayed_job=$BPJ late_min_ms=$LMIN late_p50_ms=$L50 late_p99_ms=$L99 late_max_ms=$LMAX early=$EARLY"
mkdir -p "$HERE/results"
echo "$LINE" | tee -a "$HERE/results/scale.txt"
echo "stats after: $LEFT"
OK=1
