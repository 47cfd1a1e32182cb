#!/usr/bin/env bash
# bench/cancel.sh — the cost of cancelling (and locating) one job among N
# delayed ones (issue 8 §2: no more among 10M than among 100).
#
#   BUILD_DIR=build bench/cancel.sh                 # CANCEL_SIZES="100 1000000"
#   CANCEL_SIZES="100 1000000 10000000" bench/cancel.sh
#
# For each N, on a private redis-server (unix socket, no persistence):
# enqueues N delayed jobs due in an hour (jr_peer bulkdelayed: generated
# ids, 1,000 jobs per call, so 1,000 share each due time), then 1,000 more
# generated ones in ONE call (one exact due time: the worst case for the
# id-form lookup, found by bisection) and 100 with explicit ids (found
# through the index jr:{Q}:ids). Then, on one connection (redis-cli reading a
# file), 100 `jr_locate` and 100 `jr_cancel` of generated ids and 100 of
# each for explicit ids. Reports Redis's own CPU time per call
# (INFO commandstats: usec_per_call of fcall, reset before each group) and
# the wall time per call, and used_memory. Appends key=value lines to
# bench/results/cancel.txt. Stops what it started by pid.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
SIZES=${CANCEL_SIZES:-100 1000000}
JR=$BUILD/bin/jobrunner PEER=$BUILD/bench/jr_peer
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  [ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
  cmake --build "$BUILD" -j2 --target jobrunner jr_peer >/dev/null || exit 1
fi
WORK=$(mktemp -d /tmp/jr-cancel.XXXXXX)
REDIS_PID=
. "$HERE/lib.sh"  # start_redis, rc, stop_redis, stop_pids
cleanup() {
  stop_redis
  rm -rf "$WORK"
}
trap cleanup EXIT
Q=bench
K="'jr:{$Q}:ready' 'jr:{$Q}:delayed' 'jr:{$Q}:ids'"

# group NAME FILE: run the commands of FILE on one connection after a stats
# reset; print NAME usec_per_call=... wall_us_per_call=...
group() {
  local n t0 t1 us
  n=$(wc -l <"$2")
  rc config resetstat >/dev/null
  t0=$("$PEER" mono)
  rc <"$2" >"$WORK/$1.out"
  t1=$("$PEER" mono)
  us=$(rc info commandstats | tr -d '\r' | sed -n 's/^cmdstat_fcall:.*usec_per_call=\([0-9.]*\).*/\1/p')
  printf '%s_redis_us=%s %s_wall_us=%s ' "$1" "$us" "$1" "$(awk -v a="$t0" -v b="$t1" -v n="$n" 'BEGIN{printf "%.1f", (b-a)*1000/n}')"
}

mkdir -p "$HERE/results"
for N in $SIZES; do
  start_redis "$WORK" || { echo "redis did not start"; exit 1; }
  export BENCH_SOCKET=$SOCK BENCH_QUEUE=$Q
  "$PEER" bulkdelayed "$N" 3600000 >/dev/null || { echo "enqueue failed"; exit 1; }
  # 1,000 generated ids in one call (one due time), 100 explicit ids
  { printf "FCALL jr_enqueue_many 4 'jr:{%s}:ready' 'jr:{%s}:delayed' 'jr:{%s}:wake' 'jr:{%s}:seq' 0" "$Q" "$Q" "$Q" "$Q"
    for i in $(seq 1000); do printf " +3600000 '' 1 h bench"; done; echo; } >"$WORK/gen.cmd"
  rc <"$WORK/gen.cmd" | awk 'NR % 2 == 1' >"$WORK/gen.ids"
  for i in $(seq 100); do
    printf "FCALL jr_enqueue 5 'jr:{%s}:ready' 'jr:{%s}:delayed' 'jr:{%s}:wake' 'jr:{%s}:seq' 'jr:{%s}:uniq:t-%d' +3600000 t-%d 0 h bench\n" \
      "$Q" "$Q" "$Q" "$Q" "$Q" "$i" "$i"
  done | rc >/dev/null
  total=$(rc eval "return redis.call('ZCARD', KEYS[1]) + (tonumber(redis.call('GET', KEYS[2]) or '0'))" 2 "jr:{$Q}:delayed" "jr:{$Q}:wheel:n")
  mem=$(rc info memory | tr -d '\r' | sed -n 's/^used_memory:\([0-9]*\)/\1/p')
  awk 'NR % 10 == 5' "$WORK/gen.ids" | head -100 >"$WORK/targets.gen"
  : >"$WORK/locate_gen.cmd"; : >"$WORK/cancel_gen.cmd"; : >"$WORK/locate_exp.cmd"; : >"$WORK/cancel_exp.cmd"
  while read -r id; do
    echo "FCALL jr_locate 4 $K 'jr:{$Q}:dead' $id" >>"$WORK/locate_gen.cmd"
    echo "FCALL jr_cancel 5 $K 'jr:{$Q}:cancelled' 'jr:{$Q}:uniq:$id' $id" >>"$WORK/cancel_gen.cmd"
  done <"$WORK/targets.gen"
  for i in $(seq 100); do
    echo "FCALL jr_locate 4 $K 'jr:{$Q}:dead' t-$i" >>"$WORK/locate_exp.cmd"
    echo "FCALL jr_cancel 5 $K 'jr:{$Q}:cancelled' 'jr:{$Q}:uniq:t-$i' t-$i" >>"$WORK/cancel_exp.cmd"
  done
  line="cancel stamp=$(date -u +%FT%TZ) delayed=$total used_memory=$mem "
  line+=$(group locate_generated "$WORK/locate_gen.cmd")
  line+=$(group cancel_generated "$WORK/cancel_gen.cmd")
  line+=$(group locate_explicit "$WORK/locate_exp.cmd")
  line+=$(group cancel_explicit "$WORK/cancel_exp.cmd")
  ok=$(grep -c '^cancelled$' "$WORK/cancel_generated.out" "$WORK/cancel_explicit.out" | awk -F: '{s+=$2} END{print s}')
  line+="cancelled=$ok/200"
  echo "$line" >>"$HERE/results/cancel.txt"
  echo "$line"
  stop_redis
  REDIS_PID=
done
