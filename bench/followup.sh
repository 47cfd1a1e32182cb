#!/usr/bin/env bash
# bench/followup.sh — drain rate of jobs whose handler enqueues follow-up
# jobs (api->enqueue, written with the acknowledgement by jr_ack_follow),
# against the same jobs without follow-ups, in both isolation modes.
#
#   bench/followup.sh                   # N=20000 jobs per run, 1 worker
#   N=50000 FOLLOW="0 1 5" bench/followup.sh
#
# Uses the test plugin tests/integration/follow_job.c (handler `follow`,
# payload "n=K": K follow-ups to queue `next`, which nobody serves, so the
# count written is checked in Redis). One redis-server on a unix socket in
# a temp dir per run; every process started here is stopped by its pid.
# Prints one line per run: follow-ups per job, isolation, jobs/s (from the
# worker's start until the queue is empty), follow-ups written.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
N=${N:-20000}
FOLLOW=${FOLLOW:-"0 1"}
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  [ -f "$BUILD_DIR/CMakeCache.txt" ] || cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD_DIR" -j2 --target jobrunner follow_job >/dev/null
fi
JR="$BUILD_DIR/bin/jobrunner"
PLUGIN="$BUILD_DIR/tests/followplugin/follow.so"

run() { # K ISOLATION
  local k=$1 iso=$2 d rp wp t0 t1 n written
  d=$(mktemp -d /tmp/jr-followup.XXXXXX)
  redis-server --port 0 --unixsocket "$d/r.sock" --save '' --appendonly no >"$d/redis.log" 2>&1 &
  rp=$!
  until redis-cli -s "$d/r.sock" PING >/dev/null 2>&1; do sleep 0.05; done
  printf 'redis:\n  url: unix://%s/r.sock\nworker:\n  isolation: %s\nlog:\n  level: warn\n' "$d" "$iso" >"$d/c.yaml"
  "$JR" stats -c "$d/c.yaml" >/dev/null # loads the function library
  for ((i = 0; i < N; i++)); do
    printf 'FCALL jr_enqueue 4 jr:{default}:ready jr:{default}:delayed jr:{default}:wake jr:{default}:seq "" "" 0 h follow p n=%s\n' "$k"
  done | redis-cli -s "$d/r.sock" >/dev/null
  t0=$(date +%s.%N)
  JRT_RECORD=/dev/null "$JR" worker -c "$d/c.yaml" -q default --plugin "$PLUGIN" >"$d/w.log" 2>&1 &
  wp=$!
  while n=$(redis-cli -s "$d/r.sock" XLEN 'jr:{default}:ready') && [ "$n" != 0 ]; do sleep 0.01; done
  t1=$(date +%s.%N)
  kill -TERM "$wp"; wait "$wp" || true
  written=$(redis-cli -s "$d/r.sock" XLEN 'jr:{next}:ready')
  kill "$rp"; wait "$rp" 2>/dev/null || true
  printf 'follow_ups_per_job=%s isolation=%s jobs=%s jobs_per_s=%.0f written=%s\n' \
    "$k" "$iso" "$N" "$(echo "$N / ($t1 - $t0)" | bc -l)" "$written"
  rm -rf "$d"
}

for k in $FOLLOW; do
  for iso in process inline; do run "$k" "$iso"; done
done
