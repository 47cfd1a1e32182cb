#!/usr/bin/env bash
# bench/promote.sh — promotion rate: how fast a scheduler moves a backlog of
# due delayed jobs into the stream (issue 4: >= 200,000 jobs/s).
#
#   BUILD_DIR=build-bench bench/promote.sh        # N_PROMOTE=1000000
#   PROMOTE_DELAY_MS=1 bench/promote.sh           # through the sorted set only
#   PROMOTE_BATCH=5000 bench/promote.sh           # scheduler.batch (default: the config's)
#
# On a private redis-server (unix socket, no persistence): enqueues N_PROMOTE
# delayed jobs due PROMOTE_DELAY_MS (default 3000) after their enqueue
# (jr_peer bulkdelayed), with no scheduler running, and waits until all of
# them are due; then starts one `jobrunner scheduler` and times it from
# launch until no delayed job is left (sorted set and time wheel) and the
# stream holds every job. No workers run. A delay of 2,000 ms or more puts
# the jobs in the time wheel (promoted bucket by bucket, straight into the
# stream); less, in the sorted set. Appends a key=value line to
# bench/results/promote.txt. Stops what it started by pid.
# PROMOTE_PERF=FILE: also record redis-server with `perf record -g` while the
# scheduler promotes (perf report -i FILE: where Redis spends each job).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
N=${N_PROMOTE:-1000000}
DELAY=${PROMOTE_DELAY_MS:-3000}
JR=$BUILD/bin/jobrunner PEER=$BUILD/bench/jr_peer
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  [ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
  cmake --build "$BUILD" -j2 --target jobrunner jr_peer >/dev/null || exit 1
fi
WORK=$(mktemp -d /tmp/jr-promote.XXXXXX)
REDIS_PID= SCHED_PID= PERF_PID=
. "$HERE/lib.sh"  # start_redis, rc, stop_redis, stop_pids
cleanup() {
  [ -n "$SCHED_PID" ] && stop_pids "$SCHED_PID"
  [ -n "$PERF_PID" ] && STOP_GRACE=30 stop_pids_int "$PERF_PID"
  stop_redis
  rm -rf "$WORK"
}
trap cleanup EXIT
# perf writes its file on SIGINT
stop_pids_int() {
  kill -INT "$1" 2>/dev/null
  local end=$((SECONDS + ${STOP_GRACE:-8}))
  while kill -0 "$1" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.05; done
  kill -0 "$1" 2>/dev/null && kill -KILL "$1" 2>/dev/null
  wait "$1" 2>/dev/null
  return 0
}
start_redis "$WORK" || { echo "redis did not start"; exit 1; }
export BENCH_SOCKET=$SOCK BENCH_QUEUE=bench
# delayed jobs of both tiers: the sorted set and the time wheel's counter
delayed() { rc eval "return redis.call('ZCARD', KEYS[1]) + (tonumber(redis.call('GET', KEYS[2]) or '0'))" 2 'jr:{bench}:delayed' 'jr:{bench}:wheel:n'; }
enq=$("$PEER" bulkdelayed "$N" "$DELAY") || { echo "enqueue failed"; exit 1; }
sleep "$(awk -v d="$DELAY" 'BEGIN{printf "%.3f", d / 1000 + 1.1}')"
queued=$(delayed)
printf 'redis:\n  url: unix://%s\nscheduler:\n  queues: [bench]\n%blog:\n  level: warn\n' "$SOCK" "${PROMOTE_BATCH:+  batch: $PROMOTE_BATCH\n}" >"$WORK/c.yaml"
rc config resetstat >/dev/null
if [ -n "${PROMOTE_PERF:-}" ]; then
  perf record -g -o "$PROMOTE_PERF" -p "$REDIS_PID" 2>"$WORK/perf.log" >&2 &
  PERF_PID=$!
  sleep 0.5
fi
# Redis's own CPU time (user + system ticks of the redis-server process):
# unlike wall time, not inflated when other processes share the cores
cpu_ticks() { awk '{print $14 + $15}' "/proc/$REDIS_PID/stat"; }
c0=$(cpu_ticks)
t0=$("$PEER" mono)
"$JR" scheduler -c "$WORK/c.yaml" 2>"$WORK/sched.log" &
SCHED_PID=$!
while [ "$(delayed)" != 0 ]; do sleep 0.01; done
t1=$("$PEER" mono)
c1=$(cpu_ticks)
if [ -n "$PERF_PID" ]; then STOP_GRACE=30 stop_pids_int "$PERF_PID"; PERF_PID=; fi
streamed=$(rc xlen 'jr:{bench}:ready')
# Redis CPU per promoted job, by command (INFO commandstats: the commands a
# function runs count on their own line too): fcall = the whole call
prof=$(rc info commandstats | tr -d '\r' | awk -F'[:=,]' -v n="$queued" '
  /^cmdstat_fcall:/ { printf " fcall_calls=%d", $3 }
  /^cmdstat_/ { sub("cmdstat_", "", $1); if (n > 0 && $5 / n >= 0.01) printf " us_per_job_%s=%.3f", $1, $5 / n }')
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", (b-a)/1000}')
rate=$(awk -v n="$queued" -v s="$secs" 'BEGIN{printf "%.0f", n/s}')
line="promote stamp=$(date -u +%FT%TZ) build=$BUILD batch=${PROMOTE_BATCH:-default} jobs=$N delay_ms=$DELAY due_at_start=$queued promoted=$streamed promote_s=$secs promote_jobs_per_s=$rate redis_cpu_us_per_job=$(awk -v a="$c0" -v b="$c1" -v n="$queued" -v hz="$(getconf CLK_TCK)" 'BEGIN{printf "%.2f", (b-a)*1e6/hz/n}')$prof $enq"
mkdir -p "$HERE/results"
echo "$line" >>"$HERE/results/promote.txt"
echo "$line"
[ "$streamed" = "$N" ] || { echo "FAIL: $streamed entries in the stream for $N jobs"; exit 1; }
