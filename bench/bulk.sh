#!/bin/bash
# bench/bulk.sh — bulk enqueue, ready and delayed, of two builds alternated
# (issue 10, "Issue 10: bulk enqueue" in RESULTS.md).
#
#   BASE_PEER=/tmp/x-base/build/bench/jr_peer bench/bulk.sh [N] [REPS]
#
# Per repetition and mode (ready: jr_peer bulk N; delayed: jr_peer bulkdelayed
# N 3600000 with a 50-byte payload), each variant in turn on one private
# redis-server (unix socket, FLUSHALL + FUNCTION FLUSH before each run):
#   base      BASE_PEER with BENCH_CHUNK=1000 (a build before pipelining: one
#             FCALL per jr_redis_enqueue call)
#   base100k  BASE_PEER with BENCH_CHUNK=100000 (its windowed pipeline)
#   new       PEER (default build/bench/jr_peer), BENCH_BATCH=100000
#   new<C>    PEER with BENCH_CHUNK=C jobs per FCALL (VARIANTS="new500 new2000")
# Prints jobs/s, FCALL us/job (INFO commandstats), Redis CPU us/job
# (used_cpu_user+sys delta) and producer CPU us/job (/usr/bin/time), and the
# XADD -P 64 ceiling before and after (CEIL_EACH=1: before each repetition
# too), with uptime. MODES="ready" runs only
# the ready mode (since the plain-XADD path: "Issue 10: ready bulk enqueue
# without Lua per job").
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
PEER=${PEER:-$here/../build/bench/jr_peer}
BASE_PEER=${BASE_PEER:-}
N=${1:-1000000}; REPS=${2:-3}
VARIANTS=${VARIANTS:-${BASE_PEER:+base base100k }new}
MODES=${MODES:-ready delayed}
D=$(mktemp -d /tmp/jr-bulk.XXXXXX)
start_redis "$D" || { echo "redis-server did not start"; exit 1; }
export BENCH_SOCKET=$SOCK
trap 'stop_redis; rm -rf "$D"' EXIT
cpu() { rc info cpu | awk -F: '/^used_cpu_(user|sys):/{s+=$2} END{printf "%.6f", s}'; }
ceil() {
  redis-benchmark -s "$SOCK" -c 1 -P 64 -n 1000000 --csv XADD bench:ceiling '*' f v 2>/dev/null |
    tail -1 | awk -F'","' '{print $2}' | tr -d '"'
  rc del bench:ceiling >/dev/null
}
run() { # variant mode
  local v=$1 m=$2 P env
  case $v in
    base) P=$BASE_PEER; env="BENCH_CHUNK=1000" ;;
    base100k) P=$BASE_PEER; env="BENCH_CHUNK=100000" ;;
    new) P=$PEER; env="BENCH_BATCH=100000" ;;
    new*) P=$PEER; env="BENCH_BATCH=100000 BENCH_CHUNK=${v#new}" ;;
  esac
  rc flushall >/dev/null; rc function flush >/dev/null
  env $env "$P" warm 1000 >/dev/null; rc flushall >/dev/null; rc config resetstat >/dev/null
  local c0 c1 out
  c0=$(cpu)
  if [ "$m" = ready ]; then out=$(env $env /usr/bin/time -f "pcpu=%U+%S" "$P" bulk "$N" 2>&1)
  else out=$(env $env BENCH_PAYLOAD_BYTES=50 /usr/bin/time -f "pcpu=%U+%S" "$P" bulkdelayed "$N" 3600000 2>&1); fi
  c1=$(cpu)
  local rate pc fc
  rate=$(sed -n 's/.*enqueue_jobs_per_s=\([0-9]*\).*/\1/p' <<<"$out")
  pc=$(sed -n 's/.*pcpu=\(.*\)/\1/p' <<<"$out" | awk -F+ '{print $1 + $2}')
  fc=$(rc info commandstats | awk -F'[:,=]' '/^cmdstat_fcall:/{print $5}')
  awk -v v="$v" -v m="$m" -v r="${rate:-0}" -v fc="${fc:-0}" -v c0="$c0" -v c1="$c1" -v pc="${pc:-0}" -v n="$N" \
    'BEGIN{printf "%-9s %-7s %8d jobs/s  fcall %.2f us/job  redis cpu %.2f us/job  producer cpu %.2f us/job\n", v, m, r, fc/n, (c1-c0)*1e6/n, pc*1e6/n}'
}
echo "uptime: $(uptime)"
echo "XADD -P 64 ceiling (start): $(ceil)"
for rep in $(seq "$REPS"); do
  [ -n "${CEIL_EACH:-}" ] && echo "XADD -P 64 ceiling (rep $rep): $(ceil)"
  for m in $MODES; do for v in $VARIANTS; do run "$v" "$m"; done; done
done
echo "XADD -P 64 ceiling (end): $(ceil)"
echo "uptime: $(uptime)"
