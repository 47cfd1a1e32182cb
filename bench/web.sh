#!/usr/bin/env bash
# bench/web.sh — the dashboard's response times with a big queue (issue 22:
# "pages stay fast with 1 million jobs waiting: no full scan on any page").
#
#   BUILD_DIR=build bench/web.sh                 # WEB_DELAYED=1000000 WEB_DEAD=100000
#   WEB_DELAYED=100000 WEB_DEAD=10000 bench/web.sh   # a quick look
#
# On a private redis-server (unix socket, no persistence): WEB_DELAYED
# delayed jobs due in an hour (jr_peer bulkdelayed: jr_redis_enqueue, 1,000
# per FCALL, the bulk path; they land in the time wheel), 1,000 ready jobs
# (jr_peer bulk) and WEB_DEAD dead entries of the worker's form (written by
# one EVAL per 10,000: a job only dies by failing, which would take far
# longer). Then `jobrunner web` on a free port and, for every page and API
# endpoint, WEB_REPS requests with curl (a new connection each, as a browser
# tab's polling): the median and the slowest time_total, the answer's size.
# The POST endpoints act on a different job each time. Appends key=value
# lines to bench/results/web.txt and prints a Markdown table. Stops what it
# started by pid.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
DELAYED=${WEB_DELAYED:-1000000} DEAD=${WEB_DEAD:-100000} REPS=${WEB_REPS:-7}
JR=$BUILD/bin/jobrunner PEER=$BUILD/bench/jr_peer
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  [ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
  cmake --build "$BUILD" -j2 --target jobrunner jr_peer >/dev/null || exit 1
fi
WORK=$(mktemp -d /tmp/jr-web.XXXXXX)
REDIS_PID= WEB_PID=
. "$HERE/lib.sh" # start_redis, rc, stop_redis, stop_pids
cleanup() {
  [ -n "$WEB_PID" ] && stop_pids "$WEB_PID"
  stop_redis
  rm -rf "$WORK"
}
trap cleanup EXIT
Q=bench

start_redis "$WORK" || { echo "redis did not start"; exit 1; }
export BENCH_SOCKET=$SOCK BENCH_QUEUE=$Q
t0=$("$PEER" mono)
"$PEER" bulkdelayed "$DELAYED" 3600000 >/dev/null || { echo "enqueue of the delayed jobs failed"; exit 1; }
"$PEER" bulk 1000 >/dev/null || { echo "enqueue of the ready jobs failed"; exit 1; }
left=$DEAD
while [ "$left" -gt 0 ]; do
  n=$((left < 10000 ? left : 10000))
  rc eval "for i = 1, tonumber(ARGV[1]) do redis.call('XADD', KEYS[1], '*', 'id', 'dead-' .. ARGV[2] .. '-' .. i, 'h', 'bench', 'p', '{\"order\": ' .. i .. '}', 'a', '10', 'why', 'attempts', 'err', 'timeout: still running after 300ms; killed') end return 1" \
    1 "jr:{$Q}:dead" "$n" "$left" >/dev/null || { echo "dead entries failed"; exit 1; }
  left=$((left - n))
done
t1=$("$PEER" mono)
fill_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", (b-a)/1000}')
mem=$(rc info memory | tr -d '\r' | sed -n 's/^used_memory_human:\(.*\)/\1/p')
held=$(rc eval "return redis.call('ZCARD', KEYS[1]) + (tonumber(redis.call('GET', KEYS[2]) or '0'))" 2 "jr:{$Q}:delayed" "jr:{$Q}:wheel:n")
held_dead=$(rc xlen "jr:{$Q}:dead")
[ "$held" = "$DELAYED" ] && [ "$held_dead" = "$DEAD" ] || { echo "Redis holds $held delayed and $held_dead dead jobs, not $DELAYED and $DEAD"; exit 1; }

"$JR" web --redis "unix://$SOCK" --listen 127.0.0.1:0 >"$WORK/web.log" 2>&1 &
WEB_PID=$!
PORT=
for _ in $(seq 100); do
  PORT=$(sed -n 's/.*serving the dashboard.* port=\([0-9]*\).*/\1/p' "$WORK/web.log")
  [ -n "$PORT" ] && break
  sleep 0.05
done
[ -n "$PORT" ] || { echo "jobrunner web did not start:"; cat "$WORK/web.log"; exit 1; }
B=http://127.0.0.1:$PORT
TOK=$(curl -s "$B/api/session" | sed -n 's/.*"csrf":"\([0-9a-f]*\)".*/\1/p')

# cursors and ids to page and look up with
DCUR=$(curl -s "$B/api/jobs?queue=$Q&state=delayed&limit=50" | sed -n 's/.*"next":"\([^"]*\)".*/\1/p')
DID=$(curl -s "$B/api/jobs?queue=$Q&state=delayed&limit=1" | sed -n 's/.*"job":"\([^"]*\)".*/\1/p')
XCUR=$(curl -s "$B/api/jobs?queue=$Q&state=dead&limit=50" | sed -n 's/.*"next":"\([^"]*\)".*/\1/p')
ENTRIES=$(curl -s "$B/api/jobs?queue=$Q&state=dead&limit=$REPS&after=$XCUR" | grep -o '"entry":"[^"]*"' | cut -d'"' -f4)
DELAYED_IDS=$(curl -s "$B/api/jobs?queue=$Q&state=delayed&limit=$((REPS * 2))&after=$DCUR" | grep -o '"job":"[^"]*"' | cut -d'"' -f4)

# time NAME METHOD PATH [BODY...]: REPS requests (POST bodies: one per rep,
# from the remaining arguments); prints a table row, appends to the line
ROWS= LINE="web stamp=$(date -u +%FT%TZ) delayed=$DELAYED dead=$DEAD ready=1000 fill_s=$fill_s used_memory=$mem"
time_it() {
  local name=$1 method=$2 path=$3 i out times=() size=0 status
  shift 3
  for i in $(seq "$REPS"); do
    if [ "$method" = POST ]; then
      local body=${1:-'{}'}
      [ $# -gt 0 ] && shift
      out=$(curl -s -o "$WORK/body" -w '%{http_code} %{time_total} %{size_download}' -X POST \
        -H 'Content-Type: application/json' -H "X-CSRF-Token: $TOK" -d "$body" "$B$path")
    else
      out=$(curl -s -o "$WORK/body" -w '%{http_code} %{time_total} %{size_download}' "$B$path")
    fi
    status=${out%% *}
    times+=("$(echo "$out" | cut -d' ' -f2)")
    size=${out##* }
    case "$status" in 2*) ;; *) echo "$name: HTTP $status: $(head -c 300 "$WORK/body")" >&2 ;; esac
  done
  local med max
  med=$(printf '%s\n' "${times[@]}" | sort -g | awk '{a[NR]=$1} END{printf "%.1f", a[int((NR+1)/2)]*1000}')
  max=$(printf '%s\n' "${times[@]}" | sort -g | tail -1 | awk '{printf "%.1f", $1*1000}')
  ROWS+="| \`$method $path\` | $med | $max | $size |"$'\n'
  LINE+=" ${name}_ms=$med ${name}_max_ms=$max"
}

time_it page GET /
time_it app_js GET /app.js
time_it session GET /api/session
time_it overview GET /api/overview
time_it workers GET /api/workers
time_it schedules GET /api/schedules
time_it ready GET "/api/jobs?queue=$Q&state=ready"
time_it running GET "/api/jobs?queue=$Q&state=running"
time_it delayed_first GET "/api/jobs?queue=$Q&state=delayed"
time_it delayed_next GET "/api/jobs?queue=$Q&state=delayed&after=$DCUR"
time_it delayed_500 GET "/api/jobs?queue=$Q&state=delayed&limit=500"
time_it retrying GET "/api/jobs?queue=$Q&state=retrying"
time_it dead_first GET "/api/jobs?queue=$Q&state=dead"
time_it dead_next GET "/api/jobs?queue=$Q&state=dead&after=$XCUR"
time_it job_delayed GET "/api/job?queue=$Q&id=$DID"
NTH=$((DEAD >= 500 ? 500 : 1)) # the NTH dead entry is job dead-$DEAD-$NTH (the first EVAL's)
DEADJOB=dead-$DEAD-$NTH
DEADENT=$(curl -s "$B/api/jobs?queue=$Q&state=dead&limit=$NTH" | grep -o '"entry":"[^"]*"' | tail -1 | cut -d'"' -f4)
time_it job_dead GET "/api/job?queue=$Q&id=$DEADJOB"
time_it job_dead_entry GET "/api/job?queue=$Q&id=$DEADJOB&entry=$DEADENT"
time_it pause POST /api/pause $(for _ in $(seq "$REPS"); do echo "{\"queue\":\"$Q\"}"; done)
time_it resume POST /api/resume $(for _ in $(seq "$REPS"); do echo "{\"queue\":\"$Q\"}"; done)
time_it run_now POST /api/job/run-now $(for id in $DELAYED_IDS; do echo "{\"queue\":\"$Q\",\"id\":\"$id\"}"; done | head -"$REPS")
time_it bulk_retry_one_id POST /api/bulk $(for i in $(seq "$REPS"); do echo "{\"queue\":\"$Q\",\"state\":\"dead\",\"action\":\"retry\",\"ids\":[\"dead-$DEAD-$((100 + i))\"]}"; done)
time_it dead_retry_one POST /api/dead/retry $(for e in $ENTRIES; do echo "{\"queue\":\"$Q\",\"entries\":[\"$e\"]}"; done | head -"$REPS")

mkdir -p "$HERE/results"
echo "$LINE" >>"$HERE/results/web.txt"
echo "$LINE"
echo
echo "$DELAYED delayed, $DEAD dead, 1000 ready jobs in one queue (filled in ${fill_s}s; Redis used_memory $mem); $REPS requests each, a new connection per request:"
echo
echo "| request | median ms | slowest ms | bytes |"
echo "|---|---:|---:|---:|"
printf '%s' "$ROWS"
