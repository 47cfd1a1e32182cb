#!/usr/bin/env bash
# bench/fn_cost.sh — Redis's time per job of each function on the job path,
# each called alone as jobrunner calls it, so that a later library that
# makes one dearer is seen (issue 23: RESULTS.md records these per
# revision). Redis time = INFO commandstats usec of fcall over the jobs
# (reset before each); the commands the calls ran follow, per job.
#
#   bench/fn_cost.sh                 # N=200000 jobs, REPS=3, B=500
#
# On a private redis-server (unix socket, no persistence), per rep:
#   jr_enqueue_many ready    N no-op jobs due now, in calls of 1,000
#                            (`jr_peer bulk`: the C API; plain XADDs when no
#                            job has an id: its fcall line is then ~0)
#   jr_enqueue_many delayed  N jobs due 3 s later: the time wheel
#                            (`jr_peer bulkdelayed`)
#   jr_promote               those N, all due, moved by calls of LIMIT 1000
#                            in the scheduler's 8-key form (a bucket wholly
#                            due: moved by number)
#   jr_promote/cascade       N jobs due at one ms 8-9 s later (`jr_peer
#                            clientbulk`, BENCH_AT_MS), their bucket
#                            cascaded into the sorted set by the same calls
#                            before they are due (a delayed job's usual path)
#   jr_promote/sorted_set    those N promoted from the sorted set once due
#   jr_ack                   N ready entries read by one consumer, then
#                            acknowledged in calls of B as a worker does
#                            (7 keys, ENTRY "" pairs)
# Prints one key=value line per rep and function; appends them to
# bench/results/fn_cost.txt. Stops what it started by pid.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
N=${N:-200000} REPS=${REPS:-3} B=${B:-500}
PEER=$BUILD/bench/jr_peer
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  [ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
  cmake --build "$BUILD" -j2 --target jr_peer >/dev/null || exit 1
fi
WORK=$(mktemp -d /tmp/jr-fncost.XXXXXX)
REDIS_PID=
. "$HERE/lib.sh"
trap 'stop_redis; rm -rf "$WORK"' EXIT
start_redis "$WORK" || { echo "redis did not start"; exit 1; }
export BENCH_SOCKET=$SOCK BENCH_QUEUE=bench BENCH_HANDLER=noop
"$PEER" bulk 10 >/dev/null || exit 1 # loads the build's library
REV=$(rc function list libraryname jobrunner withcode | grep -o 'revision [0-9]*' | head -1)
# us per job of each command ("fcall=1.23 xadd=0.40 ...")
profile() { rc info commandstats | tr -d '\r' | awk -F'[:=,]' -v n="$N" '
  /^cmdstat_/ { c = $1; sub("cmdstat_", "", c); if (c != "info" && c != "config|resetstat" && $5 / n >= 0.005) printf " %s=%.3f", c, $5 / n }'; }
line() { echo "fn_cost stamp=$(date -u +%FT%TZ) rep=$rep jobs=$N library=\"$REV\" function=$1$(profile) loadavg=$(cut -d' ' -f1 /proc/loadavg)"; }
K="jr:{bench}:ready jr:{bench}:delayed jr:{bench}:wake jr:{bench}:dead jr:{bench}:ids jr:{bench}:wheel jr:{bench}:wheel:n jr:{bench}:moved"
A="jr:{bench}:ready jr:{bench}:ids jr:{bench}:cancelled jr:{bench}:stats jr:{bench}:waiters jr:{bench}:done jr:{bench}:history"
mkdir -p "$HERE/results"
for rep in $(seq "$REPS"); do
  rc flushall >/dev/null; rc config resetstat >/dev/null
  "$PEER" bulk "$N" >/dev/null || exit 1
  line "jr_enqueue_many/ready"
  rc xgroup create 'jr:{bench}:ready' jr 0 >/dev/null 2>&1
  rc xreadgroup group jr c count "$N" streams 'jr:{bench}:ready' '>' >/dev/null
  rc --no-raw xrange 'jr:{bench}:ready' - + | grep -o '"[0-9]*-[0-9]*"' | tr -d '"' >"$WORK/ids"
  rc config resetstat >/dev/null
  awk -v b="$B" -v k="$A" '{ l = l " " $1 " \"\""; n++; if (n == b) { print "FCALL jr_ack 7 " k l; l = ""; n = 0 } }
    END { if (n) print "FCALL jr_ack 7 " k l }' "$WORK/ids" | rc >"$WORK/ack.out"
  [ "$(rc xlen 'jr:{bench}:ready')" -le 1 ] || { echo "jr_ack left $(rc xlen 'jr:{bench}:ready') entries"; exit 1; }
  line "jr_ack"
  rc flushall >/dev/null; rc config resetstat >/dev/null
  "$PEER" bulkdelayed "$N" 3000 >/dev/null || exit 1
  line "jr_enqueue_many/delayed"
  sleep 4.1
  rc config resetstat >/dev/null
  for _ in $(seq $((N / 1000 + 2))); do echo "FCALL jr_promote 8 $K 1000"; done | rc >/dev/null
  [ "$(rc xlen 'jr:{bench}:ready')" -eq "$N" ] || { echo "jr_promote moved $(rc xlen 'jr:{bench}:ready') of $N"; exit 1; }
  line "jr_promote"
  # the usual path of a delayed job: its bucket cascades into the sorted set
  # before it is due, then the sorted set's members are promoted
  rc flushall >/dev/null
  AT=$(rc time | tr -d '\r' | awk 'NR == 1 { s = $1 } NR == 2 { printf "%.0f", int((s * 1000 + $1 / 1000 + 8000) / 1000) * 1000 + 900 }')
  BENCH_AT_MS=$AT "$PEER" clientbulk "$N" 0 >/dev/null || exit 1
  until_ms() { while [ "$(rc time | tr -d '\r' | awk 'NR == 1 { s = $1 } NR == 2 { printf "%.0f", s * 1000 + $1 / 1000 }')" -lt "$1" ]; do sleep 0.05; done; }
  # due at the end of its bucket (start + 900 ms): from 1.95 s before the
  # start, the cascade time of whatever the bucket still holds has come
  until_ms $((AT - 2850))
  rc config resetstat >/dev/null
  for _ in $(seq $((N / 1000 + 2))); do echo "FCALL jr_promote 8 $K 1000"; done | rc >/dev/null
  [ "$(rc zcard 'jr:{bench}:delayed')" -eq "$N" ] || { echo "the cascade left $(rc zcard 'jr:{bench}:delayed') of $N in the sorted set (too slow: due before it ended?)"; exit 1; }
  line "jr_promote/cascade"
  until_ms $((AT + 100))
  rc config resetstat >/dev/null
  for _ in $(seq $((N / 1000 + 2))); do echo "FCALL jr_promote 8 $K 1000"; done | rc >/dev/null
  [ "$(rc xlen 'jr:{bench}:ready')" -eq "$N" ] || { echo "jr_promote moved $(rc xlen 'jr:{bench}:ready') of $N from the sorted set"; exit 1; }
  line "jr_promote/sorted_set"
done | tee -a "$HERE/results/fn_cost.txt"
