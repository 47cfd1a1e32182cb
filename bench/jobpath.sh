#!/usr/bin/env bash
# bench/jobpath.sh — the quick acceptance check of jobrunner's job path.
#
#   bench/jobpath.sh                 # build (if needed), run both parts, print a table
#   BUILD_DIR=build-bench bench/jobpath.sh
#   N=20000 N_DELAYED=2000 SKIP_BUILD=1 bench/jobpath.sh
#   ISOLATION=inline CONCURRENCY=4 bench/jobpath.sh   # worker settings (default: jobrunner's)
#   LOG_LEVEL=info LOG_FORMAT=json bench/jobpath.sh   # a log line per job, in JSON
#   METRICS_PORT=19400 bench/jobpath.sh  # workers serve /metrics on 127.0.0.1:19400+i (the
#                                        # scheduler on +WORKERS), scraped every METRICS_SCRAPE_S (1) s
#
# Starts its own redis-server (no TCP: port 0, a unix socket in a temp dir,
# --save '' --appendonly no), then
#   1. exactly once: enqueues N (10,000) jobs with the C API (jr_redis_enqueue,
#      pipelined in chunks of 1000), starts 2 `jobrunner worker` processes, waits
#      for all to run, checks that every job ran exactly once (the bench plugin
#      with BENCH_CHECK=1 does HINCRBY bench:seen <job id> 1) and that
#      `jobrunner stats --json` shows ready=0 pending=0 delayed=0. Reports jobs/s.
#   2. delayed: a `jobrunner scheduler` and 2 fresh workers, warmed with 200 jobs
#      and idle for 1 s; then N_DELAYED (1,000) jobs spread evenly over 1 s, each
#      with delay_ms = 2000. Lateness = handler start - intended due, where intended
#      due = CLOCK_MONOTONIC just before the enqueue call + 2000 ms.
# Exits non-zero if a job was lost or ran twice, ran early, or a count is wrong.
# Stops everything it started, by pid (trap EXIT).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
N=${N:-10000}
N_DELAYED=${N_DELAYED:-1000}
SPREAD_MS=${SPREAD_MS:-1000}
DELAY_MS=${DELAY_MS:-2000}
N_WARM=${N_WARM:-200}
WORKERS=${WORKERS:-2}
LOG_LEVEL=${LOG_LEVEL:-warn}
P99_TARGET_MS=${P99_TARGET_MS:-50}

log() { echo "[jobpath $(date +%T)] $*" >&2; }

# ------------------------------------------------------------------ build
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DJR_WERROR=ON >/dev/null || exit 1
  fi
  cmake --build "$BUILD" -j2 --target jobrunner bench_job jr_peer >/dev/null || { log "build failed"; exit 1; }
fi
JR=$BUILD/bin/jobrunner
PEER=$BUILD/bench/jr_peer
PLUGIN=$BUILD/bench/bench_job.so
for f in "$JR" "$PEER" "$PLUGIN"; do [ -e "$f" ] || { log "missing $f (build first)"; exit 1; }; done

# ------------------------------------------------------------------ redis
WORK=$(mktemp -d /tmp/jobpath.XXXXXX)
PIDS=()      # everything started here except redis, by pid
REDIS_PID=

. "$HERE/lib.sh"  # stop_pids, start_redis, rc, stop_redis
STOP_GRACE=5
cleanup() {
  [ ${#PIDS[@]} -gt 0 ] && stop_pids "${PIDS[@]}"
  PIDS=()
  stop_redis
  if [ "${KEEP_WORK:-0}" = 1 ] || [ "${FAILED:-0}" = 1 ]; then log "logs kept in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_redis "$WORK" || { log "redis did not start"; FAILED=1; exit 1; }

URL=unix://$SOCK
CONF=$WORK/jobrunner.yaml
{
  printf 'log:\n  level: %s\n  format: %s\n' "$LOG_LEVEL" "${LOG_FORMAT:-text}"
  # ISOLATION (process|inline) and CONCURRENCY override jobrunner's worker defaults
  if [ -n "${ISOLATION:-}${CONCURRENCY:-}" ]; then
    printf 'worker:\n'
    [ -n "${ISOLATION:-}" ] && printf '  isolation: %s\n' "$ISOLATION"
    [ -n "${CONCURRENCY:-}" ] && printf '  concurrency: %s\n' "$CONCURRENCY"
  fi
} >"$CONF"
export BENCH_SOCKET=$SOCK BENCH_CHECK=1 BENCH_QUEUE=bench

# METRICS_PORT: serve metrics (port base + process index) and scrape them meanwhile.
metrics_flag() { [ -n "${METRICS_PORT:-}" ] && echo "--metrics 127.0.0.1:$((METRICS_PORT + $1))"; }
start_scraper() { # ports...
  [ -n "${METRICS_PORT:-}" ] || return 0
  (while sleep "${METRICS_SCRAPE_S:-1}"; do
     for p in "$@"; do curl -s -o /dev/null "http://127.0.0.1:$p/metrics"; done; done) </dev/null >/dev/null 2>&1 &
  PIDS+=($!)
}
start_workers() { # n, then env assignments for them
  local n=$1 i; shift
  for ((i = 0; i < n; i++)); do
    # shellcheck disable=SC2046
    env "$@" "$JR" worker -c "$CONF" --redis "$URL" -q bench --plugin "$PLUGIN" $(metrics_flag "$i") \
      >>"$WORK/worker.$i.log" 2>&1 </dev/null &
    PIDS+=($!)
  done
  [ -n "${METRICS_PORT:-}" ] && start_scraper $(seq "$METRICS_PORT" $((METRICS_PORT + n - 1)))
}
start_scheduler() {
  # shellcheck disable=SC2046
  "$JR" scheduler -c "$CONF" --redis "$URL" -q bench $(metrics_flag "$WORKERS") >>"$WORK/scheduler.log" 2>&1 </dev/null &
  PIDS+=($!)
}

# Wait until a counter reaches target, polling over one connection (jr_peer
# waitkey: no process per poll competing for the 2 cores). Prints the value.
wait_count() { # target deadline_s get|llen key
  "$PEER" waitkey "$3" "$4" "$1" "$2"
}

stats_json() { "$JR" stats --json --redis "$URL" -q bench 2>&1; }
# ready, pending and delayed all 0, and dead (if the version reports it) 0
counts_zero() {
  grep -q '"ready":0[,}]' <<<"$1" && grep -q '"pending":0[,}]' <<<"$1" && grep -q '"delayed":0[,}]' <<<"$1" &&
    { ! grep -q '"dead":' <<<"$1" || grep -q '"dead":0[,}]' <<<"$1"; }
}
stats_zero() { counts_zero "$(stats_json)"; }

# Check bench:seen: expected ids, each exactly once. Prints "ids=.. dup=.. ".
check_seen() { # expected
  local hlen dup
  hlen=$(rc hlen bench:seen)
  dup=$(rc hvals bench:seen | awk '$1 != 1 { d++ } END { print d + 0 }')
  echo "ids=$hlen dup=$dup"
  [ "$hlen" = "$1" ] && [ "$dup" = 0 ]
}

FAIL=()

# ------------------------------------------------------------------ 1. exactly once, N jobs
log "part 1: $N jobs, $WORKERS workers"
rc flushall >/dev/null
ENQ=$(env BENCH_N="$N" "$PEER" bulk "$N") || { log "enqueue failed"; FAILED=1; exit 1; }
ENQ_S=$(sed 's/.*enqueue_s=\([^ ]*\).*/\1/' <<<"$ENQ")
T_LAUNCH=$("$PEER" mono)
start_workers "$WORKERS" BENCH_N="$N"
DONE=$(wait_count "$N" 120 get bench:done)
# give a duplicate a chance to show up, and the last acknowledgements time to land
for _ in $(seq 50); do stats_zero && break; sleep 0.02; done
sleep 0.5
stop_pids "${PIDS[@]}"; PIDS=()
T_FIRST=$(rc get bench:t_first); T_LAST=$(rc get bench:t_last)
DONE=$(rc get bench:done)
SEEN1=$(check_seen "$N") || FAIL+=("part 1: not exactly once ($SEEN1 of $N)")
STATS1=$(stats_json)
counts_zero "$STATS1" || FAIL+=("part 1: queue not empty: $STATS1")
[ "${DONE:-0}" = "$N" ] || FAIL+=("part 1: bench:done=$DONE, expected $N")
read -r DRAIN_RATE WALL_RATE STARTUP_S <<<"$(awk -v n="$N" -v f="${T_FIRST:-nan}" -v l="${T_LAST:-nan}" -v s="$T_LAUNCH" \
  'BEGIN { if (l == "" || f == "" || l == "nan") { print "- - -"; exit }
           printf "%.0f %.0f %.3f\n", (n - 1) / ((l - f) / 1000), n / ((l - s) / 1000), (f - s) / 1000 }')"
ENQ_RATE=$(awk -v n="$N" -v s="$ENQ_S" 'BEGIN { printf "%.0f", n / s }')

# ------------------------------------------------------------------ 2. delayed jobs
log "part 2: $N_DELAYED delayed jobs over ${SPREAD_MS} ms, due +${DELAY_MS} ms; scheduler + $WORKERS warm idle workers"
rc flushall >/dev/null
start_scheduler
start_workers "$WORKERS" BENCH_N=0
"$PEER" warm "$N_WARM" >/dev/null || { log "warm-up enqueue failed"; FAILED=1; exit 1; }
W=$(wait_count "$N_WARM" 60 get bench:done)
[ "$W" -ge "$N_WARM" ] || { log "warm-up jobs did not complete ($W of $N_WARM)"; FAILED=1; exit 1; }
sleep 1
rc del bench:lat >/dev/null
DENQ=$("$PEER" delayed "$N_DELAYED" "$SPREAD_MS" "$DELAY_MS") || { log "delayed enqueue failed"; FAILED=1; exit 1; }
GOT=$(wait_count "$N_DELAYED" $((DELAY_MS / 1000 + 60)) llen bench:lat)
for _ in $(seq 50); do stats_zero && break; sleep 0.02; done
sleep 0.5
stop_pids "${PIDS[@]}"; PIDS=()
SEEN2=$(check_seen $((N_WARM + N_DELAYED))) || FAIL+=("part 2: not exactly once ($SEEN2 of $((N_WARM + N_DELAYED)))")
STATS2=$(stats_json)
counts_zero "$STATS2" || FAIL+=("part 2: queue not empty: $STATS2")
[ "$GOT" -ge "$N_DELAYED" ] || FAIL+=("part 2: only $GOT of $N_DELAYED delayed jobs ran")
# min p50 p99 max early count (percentile index as bench/peers/bench.py: round(q*(n-1)))
read -r LMIN L50 L99 LMAX EARLY LCOUNT <<<"$(rc lrange bench:lat 0 -1 | sort -g | awk '
  { v[NR] = $1; if ($1 < 0) e++ }
  function p(q,  i) { i = int(q * (NR - 1) + 0.5) + 1; return v[i] }
  END { if (NR == 0) { print "- - - - 0 0"; exit }
        printf "%.2f %.2f %.2f %.2f %d %d\n", v[1], p(0.5), p(0.99), v[NR], e, NR }')"
[ "${EARLY:-0}" = 0 ] || FAIL+=("part 2: $EARLY jobs ran early")

# ------------------------------------------------------------------ report
MODEL=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
REDISV=$(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/')
P99_OK=$(awk -v p="$L99" -v t="$P99_TARGET_MS" 'BEGIN { print (p != "-" && p + 0 <= t) ? "met" : "NOT met" }')
P99_2=$(awk -v p="$L99" 'BEGIN { print (p != "-" && p + 0 <= 2) ? "met" : "NOT met" }')
cat <<EOF

jobrunner job path — $(date -u +%Y-%m-%dT%H:%M:%SZ)
machine: nproc=$(nproc) cpu="$MODEL" kernel=$(uname -r) redis=$REDISV (unix socket, --save '' --appendonly no)
build:   $BUILD ($(BT=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$BUILD/CMakeCache.txt" 2>/dev/null); echo "${BT:-RelWithDebInfo}")); workers: log level $LOG_LEVEL, isolation ${ISOLATION:-default}, concurrency ${CONCURRENCY:-default}

1. exactly once: $N jobs, $WORKERS workers (enqueued first, then workers started)
   enqueue (C API, pipelined, chunks of 1000)   $ENQ_RATE jobs/s   (${ENQ_S} s)
   drain  (1st -> N-th completion)              $DRAIN_RATE jobs/s
   wall   (worker launch -> N-th completion)    $WALL_RATE jobs/s   (start-up ${STARTUP_S} s)
   ran: $SEEN1 (ids = distinct job ids seen, dup = ids run more than once), bench:done=$DONE
   stats: $STATS1

2. delayed: $N_DELAYED jobs over ${SPREAD_MS} ms, each due +${DELAY_MS} ms; scheduler + $WORKERS warm idle workers
   lateness = handler start - intended due (ms), $LCOUNT samples
     min      p50      p99      max      early
     $(printf '%-8s %-8s %-8s %-8s %s' "$LMIN" "$L50" "$L99" "$LMAX" "$EARLY")
   p99 <= ${P99_TARGET_MS} ms (issue 2): $P99_OK;  p99 <= 2 ms (issue 4): $P99_2
   ran: $SEEN2 (incl. $N_WARM warm-up jobs); stats: $STATS2
EOF
# machine-readable line for scripts
echo "jobpath metrics=$([ -n "${METRICS_PORT:-}" ] && echo on || echo off) isolation=${ISOLATION:-default} concurrency=${CONCURRENCY:-default} n=$N enqueue_jobs_per_s=$ENQ_RATE drain_jobs_per_s=$DRAIN_RATE wall_jobs_per_s=$WALL_RATE startup_s=$STARTUP_S checks_ok=$([ ${#FAIL[@]} -eq 0 ] && echo 1 || echo 0) delayed_n=$N_DELAYED late_min_ms=$LMIN late_p50_ms=$L50 late_p99_ms=$L99 late_max_ms=$LMAX early=$EARLY"

if [ ${#FAIL[@]} -gt 0 ]; then
  echo
  for f in "${FAIL[@]}"; do echo "FAIL: $f"; done
  FAILED=1
  exit 1
fi
echo "OK: every job ran exactly once, none early"
