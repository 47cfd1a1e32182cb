#!/usr/bin/env bash
# bench/promote.sh — promotion rate: how fast a scheduler moves a backlog of
# due delayed jobs into the stream (issue 4: >= 200,000 jobs/s).
#
#   BUILD_DIR=build-bench bench/promote.sh        # N_PROMOTE=1000000
#
# On a private redis-server (unix socket, no persistence): enqueues N_PROMOTE
# delayed jobs due 1 ms after their enqueue (jr_peer bulkdelayed), with no
# scheduler running, so all of them are due when it starts; then starts one
# `jobrunner scheduler` and times it from launch until the delayed set is
# empty and the stream holds every job. No workers run. Appends a key=value
# line to bench/results/promote.txt. Stops what it started by pid.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
N=${N_PROMOTE:-1000000}
JR=$BUILD/bin/jobrunner PEER=$BUILD/bench/jr_peer
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  [ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
  cmake --build "$BUILD" -j2 --target jobrunner jr_peer >/dev/null || exit 1
fi
WORK=$(mktemp -d /tmp/jr-promote.XXXXXX)
REDIS_PID= SCHED_PID=
. "$HERE/lib.sh"  # start_redis, rc, stop_redis, stop_pids
cleanup() {
  [ -n "$SCHED_PID" ] && stop_pids "$SCHED_PID"
  stop_redis
  rm -rf "$WORK"
}
trap cleanup EXIT
start_redis "$WORK" || { echo "redis did not start"; exit 1; }
export BENCH_SOCKET=$SOCK BENCH_QUEUE=bench
enq=$("$PEER" bulkdelayed "$N" 1) || { echo "enqueue failed"; exit 1; }
sleep 0.1
queued=$(rc zcard 'jr:{bench}:delayed')
printf 'redis:\n  url: unix://%s\nscheduler:\n  queues: [bench]\nlog:\n  level: warn\n' "$SOCK" >"$WORK/c.yaml"
t0=$("$PEER" mono)
"$JR" scheduler -c "$WORK/c.yaml" 2>"$WORK/sched.log" &
SCHED_PID=$!
while [ "$(rc zcard 'jr:{bench}:delayed')" != 0 ]; do sleep 0.01; done
t1=$("$PEER" mono)
streamed=$(rc xlen 'jr:{bench}:ready')
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", (b-a)/1000}')
rate=$(awk -v n="$queued" -v s="$secs" 'BEGIN{printf "%.0f", n/s}')
line="promote stamp=$(date -u +%FT%TZ) jobs=$N due_at_start=$queued promoted=$streamed promote_s=$secs promote_jobs_per_s=$rate $enq"
mkdir -p "$HERE/results"
echo "$line" >>"$HERE/results/promote.txt"
echo "$line"
[ "$streamed" = "$N" ] || { echo "FAIL: $streamed entries in the stream for $N jobs"; exit 1; }
