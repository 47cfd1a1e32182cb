#!/usr/bin/env bash
# bench/durable.sh — what redis.wait_replicas: 1 costs, against off, in the
# same run: a primary and one replica (redis-server --replicaof) on 127.0.0.1.
#
#   bench/durable.sh                      # build (BUILD_DIR, default build-durable, RelWithDebInfo), run
#   N_ONE=20000 N_BULK=100000 REPS=1 bench/durable.sh
#
# Figures, each for wait_replicas 0 and 1 (the modes alternate within a rep):
#   enqueue_one   N_ONE calls of one job each (client library; one WAIT per call)
#   enqueue_bulk  N_BULK jobs in calls of 1,000 over 40 queues (one WAIT per call)
#   drain         N_BULK noop jobs enqueued first, then 2 workers (worker defaults,
#                 log level warn): launch to empty (one WAIT per flush of results)
# Prints one line per figure. Every process started here is stopped by its pid.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-durable}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
N_ONE=${N_ONE:-20000}
N_BULK=${N_BULK:-100000}
REPS=${REPS:-1}

log() { echo "[durable $(date +%T)] $*" >&2; }

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
fi
cmake --build "$BUILD" -j2 --target jobrunner bench_job jr_peer client_enqueue >/dev/null || { log "build failed"; exit 1; }
JR=$BUILD/bin/jobrunner
PEER=$BUILD/bench/jr_peer
ENQ=$BUILD/bench/client_enqueue
PLUGIN=$BUILD/bench/bench_job.so
for f in "$JR" "$PEER" "$ENQ" "$PLUGIN"; do [ -e "$f" ] || { log "missing $f"; exit 1; }; done

. "$HERE/lib.sh" # stop_pids
WORK=$(mktemp -d /tmp/jr-durable.XXXXXX)
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORT=${DURABLE_PORT:-6420}
while port_busy "$PORT" || port_busy $((PORT + 1)); do PORT=$((PORT + 2)); done
RPORT=$((PORT + 1))
URL=redis://127.0.0.1:$PORT
PIDS=()
PRIMARY_PID= REPLICA_PID=
cleanup() {
  [ ${#PIDS[@]} -gt 0 ] && stop_pids "${PIDS[@]}"
  PIDS=()
  for p in $REPLICA_PID $PRIMARY_PID; do
    kill "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  log "primary and replica stopped; logs in $WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$WORK/p" "$WORK/r"
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK/p" \
  --repl-diskless-sync-delay 0 --logfile "$WORK/p/redis.log" --daemonize no &
PRIMARY_PID=$!
redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK/r" \
  --replicaof 127.0.0.1 "$PORT" --logfile "$WORK/r/redis.log" --daemonize no &
REPLICA_PID=$!
rc() { redis-cli -h 127.0.0.1 -p "$PORT" "$@"; }
for _ in $(seq 200); do
  redis-cli -h 127.0.0.1 -p "$RPORT" info replication 2>/dev/null | grep -q master_link_status:up && break
  sleep 0.05
done
redis-cli -h 127.0.0.1 -p "$RPORT" info replication | grep -q master_link_status:up || { log "the replica did not sync"; exit 1; }
log "primary pid $PRIMARY_PID on 127.0.0.1:$PORT, replica pid $REPLICA_PID on :$RPORT (dir $WORK)"

conf() { # wait_replicas -> path of a worker config
  local f=$WORK/w$1.yaml
  printf 'redis:\n  wait_replicas: %s\n  wait_timeout: 5s\nlog:\n  level: warn\n' "$1" >"$f"
  echo "$f"
}
export BENCH_URL=$URL BENCH_QUEUE=bench
"$PEER" bulk 10 >/dev/null || { log "enqueue failed"; exit 1; } # loads the function library

for k in $(seq "$REPS"); do
  for w in 0 1; do
    rc flushall >/dev/null
    "$PEER" bulk 10 >/dev/null
    out=$("$ENQ" "$URL" "$N_ONE" 1 1 "$w") || { log "enqueue_one failed: $out"; continue; }
    echo "workload=enqueue_one wait_replicas=$w rep=$k jobs=$N_ONE jobs_per_s=$(sed -n 's/.* \([0-9]*\) jobs\/s/\1/p' <<<"$out")"
    rc flushall >/dev/null
    "$PEER" bulk 10 >/dev/null
    out=$("$ENQ" "$URL" "$N_BULK" 40 1000 "$w") || { log "enqueue_bulk failed: $out"; continue; }
    echo "workload=enqueue_bulk wait_replicas=$w rep=$k jobs=$N_BULK batch=1000 jobs_per_s=$(sed -n 's/.* \([0-9]*\) jobs\/s/\1/p' <<<"$out")"
  done
  for w in 0 1; do
    rc flushall >/dev/null
    BENCH_HANDLER=noop "$PEER" bulk "$N_BULK" >/dev/null
    rc config resetstat >/dev/null
    t_launch=$("$PEER" mono)
    WCONF=$(conf "$w")
    for i in 1 2; do
      env BENCH_N=0 "$JR" worker -c "$WCONF" --redis "$URL" -q bench --plugin "$PLUGIN" >>"$WORK/worker$w.log" 2>&1 </dev/null &
      PIDS+=($!)
    done
    out=$(BENCH_HANDLER=noop "$PEER" waitempty 120)
    ok=$?
    stop_pids "${PIDS[@]}"
    PIDS=()
    t_empty=$(sed -n 's/.*t_empty=\([^ ]*\).*/\1/p' <<<"$out")
    if [ $ok != 0 ]; then
      echo "workload=drain wait_replicas=$w rep=$k jobs=$N_BULK error=queue_not_empty_after_120s"
      continue
    fi
    echo "workload=drain wait_replicas=$w rep=$k jobs=$N_BULK workers=2 wall_s=$(awk -v a="$t_launch" -v b="$t_empty" 'BEGIN{printf "%.3f", (b-a)/1000}') jobs_per_s=$(awk -v a="$t_launch" -v b="$t_empty" -v n="$N_BULK" 'BEGIN{printf "%.0f", n/((b-a)/1000)}') waits=$(rc info commandstats | sed -n 's/^cmdstat_wait:calls=\([0-9]*\).*/\1/p')"
  done
done
