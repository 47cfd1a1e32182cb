#!/usr/bin/env bash
# bench/run.sh — the full benchmark suite: jobrunner beside the peer job queues
# (bench/peers/, see its README.md), plus jobrunner-only figures. One command:
#
#   bench/run.sh                          # build, all peers (~15-20 min on 2 cores)
#   PEERS=jobrunner QUICK=1 bench/run.sh  # jobrunner only, one repetition (~1.5 min)
#   BUILD_DIR=build-bench bench/run.sh    # another build tree (default: build)
#   SKIP_PEERS=1 bench/run.sh             # only the jobrunner extras
#   SKIP_EXTRAS=1 bench/run.sh            # only the peer harness
#   SKIP_BURST=1 bench/run.sh             # without bench/burst.sh and bench/fn_cost.sh (issue 23, ~5 min)
#
# Writes:
#   bench/results/peers.txt        result lines of the peer harness (appended, one batch per run)
#   bench/results/extras.txt       result lines of the jobrunner extras (appended)
#   bench/results/latest.txt       key=value lines: this run's figures, targets, ratios
#   bench/results/run-<stamp>.log  everything this run printed
# and prints the table (bench/report.py). Only 127.0.0.1 is used; every process
# started here is stopped by its pid.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
QUICK=${QUICK:-0}
PEERS=${PEERS:-"jobrunner bullmq beequeue sidekiq celery rq_simple rq"}
if [ "$QUICK" = 1 ]; then REPS=${REPS:-1}; LAT_REPS=${LAT_REPS:-1}; else REPS=${REPS:-3}; LAT_REPS=${LAT_REPS:-2}; fi
N_BULK=${N_BULK:-100000}     # bulk enqueue and drain extras
N_MEM=${N_MEM:-100000}       # memory extras
IDLE_S=${IDLE_S:-30}         # idle command count window (6 block periods: the periodic renewals and scans show at their rate)
N_CLI=${N_CLI:-300}          # CLI enqueue invocations
PY=/usr/bin/python3

RESULTS_DIR=$HERE/results
mkdir -p "$RESULTS_DIR"
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
PEER_RESULTS=$RESULTS_DIR/peers.txt
EXTRAS=$RESULTS_DIR/extras.txt
LATEST=$RESULTS_DIR/latest.txt
RUNLOG=$RESULTS_DIR/run-$STAMP.log
exec > >(tee -a "$RUNLOG") 2>&1

log() { echo "[run $(date +%T)] $*" >&2; }

# ------------------------------------------------------------------ build
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
  fi
  BT=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$BUILD/CMakeCache.txt")
  case "$BT" in ""|Release|RelWithDebInfo) ;; *) log "warning: $BUILD is a $BT build; numbers will not be representative" ;; esac
  log "building jobrunner, bench_job, jr_peer, shape_floor in $BUILD"
  cmake --build "$BUILD" -j2 --target jobrunner bench_job jr_peer shape_floor >/dev/null || { log "build failed"; exit 1; }
fi
JR=$BUILD/bin/jobrunner
PEER=$BUILD/bench/jr_peer
PLUGIN=$BUILD/bench/bench_job.so
for f in "$JR" "$PEER" "$PLUGIN"; do [ -e "$f" ] || { log "missing $f"; exit 1; }; done
BUILD_TYPE=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$BUILD/CMakeCache.txt"); BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}

LOAD0=$(cut -d' ' -f1 /proc/loadavg) # other load on the shared machine shows up here
# The batch marker ties the peer lines and the extras of this run together.
BATCH="run=$STAMP"

WORK=$(mktemp -d /tmp/jr-bench.XXXXXX)
PIDS=()
REDIS_PID=
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORT=${EXTRAS_PORT:-6400}
while port_busy "$PORT"; do PORT=$((PORT + 1)); done
URL=redis://127.0.0.1:$PORT

. "$HERE/lib.sh"  # stop_pids
cleanup() {
  [ ${#PIDS[@]} -gt 0 ] && stop_pids "${PIDS[@]}"
  PIDS=()
  if [ -n "$REDIS_PID" ] && kill -0 "$REDIS_PID" 2>/dev/null; then
    redis-cli -h 127.0.0.1 -p "$PORT" shutdown nosave >/dev/null 2>&1 || kill "$REDIS_PID"
    wait "$REDIS_PID" 2>/dev/null
  fi
  log "extras: redis (pid $REDIS_PID) stopped; logs in $WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" \
  --logfile "$WORK/redis.log" --daemonize no &
REDIS_PID=$!
rc() { redis-cli -h 127.0.0.1 -p "$PORT" "$@"; }
for _ in $(seq 100); do rc ping >/dev/null 2>&1 && break; sleep 0.05; done
rc ping >/dev/null 2>&1 || { log "redis did not start"; exit 1; }
log "extras: redis-server pid $REDIS_PID on 127.0.0.1:$PORT (dir $WORK)"

# Worker configurations: jobrunner's defaults (log level warn, as every peer),
# and the variants the drain figures are also measured with.
variant_conf() { # name -> prints the path of its YAML
  local f=$WORK/$1.yaml
  {
    printf 'log:\n  level: warn\n'
    case $1 in
      inline) printf 'worker:\n  isolation: inline\n' ;;
      c[0-9]*) printf 'worker:\n  concurrency: %s\n' "${1#c}" ;;
    esac
  } >"$f"
  echo "$f"
}
CONF=$(variant_conf defaults)
export BENCH_PORT=$PORT BENCH_QUEUE=bench BENCH_SOCKET= BENCH_URL=
emit() { echo "$BATCH $*" | tee -a "$EXTRAS"; }
# Redis's own CPU seconds so far (INFO cpu: user + system, all threads)
redis_cpu() { rc info cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ { s += $2 } END { printf "%.6f", s }'; }
used_memory() { rc info memory | sed -n 's/^used_memory:\([0-9]*\).*/\1/p'; }
start_workers() { # n, then env assignments
  local n=$1 i; shift
  for ((i = 0; i < n; i++)); do
    env "$@" "$JR" worker -c "${WCONF:-$CONF}" --redis "$URL" -q bench --plugin "$PLUGIN" \
      >>"$WORK/worker.log" 2>&1 </dev/null &
    PIDS+=($!)
  done
}
start_scheduler() {
  "$JR" scheduler -c "$CONF" --redis "$URL" -q bench >>"$WORK/scheduler.log" 2>&1 </dev/null &
  PIDS+=($!)
}
stop_all() { [ ${#PIDS[@]} -gt 0 ] && stop_pids "${PIDS[@]}"; PIDS=(); }
kv() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" <<<"$2"; }


# ------------------------------------------------------------------ 0. smoke test
# A jobrunner that does not run jobs would waste the whole run: check first.
rc flushall >/dev/null
"$PEER" bulk 100 >/dev/null || { log "smoke test: enqueue failed"; exit 1; }
start_workers 2 BENCH_N=100
if ! "$PEER" waitkey get bench:done 100 20 >/dev/null; then
  stop_all
  log "smoke test: 2 workers did not run 100 jobs in 20 s; see $WORK/worker.log. Not running the suite."
  tail -5 "$WORK/worker.log" >&2
  exit 1
fi
stop_all
log "smoke test passed"

# ------------------------------------------------------------------ 1. peer harness
if [ "${SKIP_PEERS:-0}" != 1 ]; then
  log "peer harness: PEERS=\"$PEERS\" REPS=$REPS LAT_REPS=$LAT_REPS"
  # run_all.sh installs what is missing (apt-get, npm), starts its own redis,
  # and appends a '# batch' header plus one line per result to $PEER_RESULTS.
  (cd "$HERE/peers" && PEERS="$PEERS" REPS="$REPS" LAT_REPS="$LAT_REPS" JR_BUILD_DIR="$BUILD" \
    RESULTS="$PEER_RESULTS" timeout -k 30 3600 ./run_all.sh) || log "peer harness exited with $?"
fi

# ------------------------------------------------------------------ 2. jobrunner extras
if [ "${SKIP_EXTRAS:-0}" = 1 ]; then
  trap - EXIT
  cleanup
  $PY "$HERE/report.py" --peers "$PEER_RESULTS" --extras "$EXTRAS" --batch "$BATCH" --out "$LATEST"
  exit 0
fi

echo "# extras $BATCH" >>"$EXTRAS"
CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//;s/ /_/g')
emit "workload=env nproc=$(nproc) cpu=$CPU kernel=$(uname -r) redis=$(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') jobrunner=$("$JR" version | awk '{print $2}') build=$BUILD_TYPE quick=$QUICK loadavg_start=$LOAD0 loadavg_extras=$(cut -d' ' -f1 /proc/loadavg)" >/dev/null

# --- ceiling, on this redis, in this run
ceiling() { # name clients pipeline requests cmd...
  local name=$1 c=$2 p=$3 n=$4 csv; shift 4
  rc flushall >/dev/null
  csv=$(timeout 120 redis-benchmark -h 127.0.0.1 -p "$PORT" -c "$c" -n "$n" -P "$p" --csv "$@" 2>/dev/null | tail -1)
  emit "$(echo "$csv" | awk -F'","' -v name="$name" -v p="$p" -v n="$n" -v c="$c" '{
    gsub(/"/, "", $0); split($0, f, ",");
    printf "workload=ceiling cmd=%s clients=%s pipeline=%s requests=%s ops_per_s=%.0f p50_ms=%s p99_ms=%s\n", name, c, p, n, f[2], f[5], f[7] }')"
}
log "extras: redis-benchmark XADD ceilings"
CEIL_N64=$([ "$QUICK" = 1 ] && echo 1000000 || echo 2000000)
ceiling XADD 50 1 200000 XADD bench:stream '*' f v
ceiling XADD 50 64 "$CEIL_N64" XADD bench:stream '*' f v
ceiling XADD 1 1 20000 XADD bench:stream '*' f v

# --- bulk enqueue through the C API (pipelined), and through the CLI
"$PEER" bulk 10 >/dev/null  # load the function library once
for k in $(seq "$REPS"); do
  rc flushall >/dev/null
  out=$("$PEER" bulk "$N_BULK") || { log "bulk enqueue failed"; continue; }
  emit "workload=enqueue_bulk rep=$k jobs=$N_BULK $out"
done
rc flushall >/dev/null
t0=$("$PEER" mono)
for ((i = 0; i < N_CLI; i++)); do "$JR" enqueue --redis "$URL" -q bench bench "0 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" >/dev/null || break; done
t1=$("$PEER" mono)
emit "workload=enqueue_cli jobs=$i enqueue_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", (b-a)/1000}') enqueue_jobs_per_s=$(awk -v a="$t0" -v b="$t1" -v n="$i" 'BEGIN{printf "%.0f", n/((b-a)/1000)}') mode=one_process_per_job"

# --- drain: N_BULK jobs enqueued first, then 2 workers; jobrunner's defaults and variants
DRAIN_VARIANTS=${DRAIN_VARIANTS:-"defaults inline c4"}
log "extras: drain of $N_BULK jobs, 2 workers, configs: $DRAIN_VARIANTS (noop handler, then the bench body)"
for v in $DRAIN_VARIANTS; do
  WCONF=$(variant_conf "$v")
  for k in $(seq "$REPS"); do
    rc flushall >/dev/null
    c0=$(redis_cpu)
    BENCH_HANDLER=noop "$PEER" bulk "$N_BULK" >/dev/null
    c1=$(redis_cpu)
    t_launch=$("$PEER" mono)
    start_workers 2 BENCH_N=0
    out=$(BENCH_HANDLER=noop "$PEER" waitempty 60)
    ok=$?
    c2=$(redis_cpu)
    stop_all
    t_empty=$(kv t_empty "$out")
    if [ $ok != 0 ]; then
      emit "workload=drain_noop config=$v rep=$k jobs=$N_BULK error=queue_not_empty_after_60s $out"
      continue
    fi
    emit "workload=drain_noop config=$v rep=$k jobs=$N_BULK wall_s=$(awk -v a="$t_launch" -v b="$t_empty" 'BEGIN{printf "%.3f", (b-a)/1000}') jobs_per_s=$(awk -v a="$t_launch" -v b="$t_empty" -v n="$N_BULK" 'BEGIN{printf "%.0f", n/((b-a)/1000)}') measure=launch_to_empty redis_enqueue_us_per_job=$(awk -v a="$c0" -v b="$c1" -v n="$N_BULK" 'BEGIN{printf "%.2f", (b-a)*1e6/n}') redis_drain_us_per_job=$(awk -v a="$c1" -v b="$c2" -v n="$N_BULK" 'BEGIN{printf "%.2f", (b-a)*1e6/n}')"
  done
  for k in $(seq "$REPS"); do
    rc flushall >/dev/null
    "$PEER" bulk "$N_BULK" >/dev/null
    t_launch=$("$PEER" mono)
    start_workers 2 BENCH_N="$N_BULK"
    "$PEER" waitkey get bench:done "$N_BULK" 120 >/dev/null
    ok=$?
    stop_all
    tf=$(rc get bench:t_first); tl=$(rc get bench:t_last); done_n=$(rc get bench:done)
    if [ $ok != 0 ] || [ -z "$tl" ]; then
      emit "workload=drain_bench config=$v rep=$k jobs=$N_BULK error=incomplete completed=${done_n:-0}"
      continue
    fi
    emit "workload=drain_bench config=$v rep=$k jobs=$N_BULK completed=$done_n drain_s=$(awk -v a="$tf" -v b="$tl" 'BEGIN{printf "%.3f", (b-a)/1000}') jobs_per_s=$(awk -v a="$tf" -v b="$tl" -v n="$N_BULK" 'BEGIN{printf "%.0f", (n-1)/((b-a)/1000)}') wall_jobs_per_s=$(awk -v a="$t_launch" -v b="$tl" -v n="$N_BULK" 'BEGIN{printf "%.0f", n/((b-a)/1000)}') measure=first_to_last_completion"
  done
done
WCONF=

# --- memory per waiting job, per delayed job, and a raw XADD of the same payload
log "extras: memory, $N_MEM jobs, 50-byte payload"
mem() { # name, command...
  local name=$1 before after keys; shift
  rc flushall >/dev/null; sleep 0.5
  before=$(used_memory)
  "$@" >/dev/null
  sleep 0.5
  after=$(used_memory); keys=$(rc dbsize)
  emit "workload=memory kind=$name jobs=$N_MEM payload_bytes=50 used_before=$before used_after=$after keys=$keys bytes_per_job=$(( (after - before) / N_MEM ))"
}
PAY50="0 $(head -c 48 /dev/zero | tr '\0' x)" # 50 bytes, as jr_peer's with BENCH_PAYLOAD_BYTES=50
mem waiting env BENCH_PAYLOAD_BYTES=50 "$PEER" bulk "$N_MEM"
mem delayed env BENCH_PAYLOAD_BYTES=50 "$PEER" bulkdelayed "$N_MEM" 3600000
mem raw_xadd redis-benchmark -h 127.0.0.1 -p "$PORT" -c 1 -P 64 -n "$N_MEM" XADD 'jr:{raw}:ready' '*' h bench p "$PAY50"
rc flushall >/dev/null

# --- idle command count: 2 workers + 1 scheduler, idle
log "extras: idle command count over $IDLE_S s (2 workers + scheduler idle)"
start_scheduler
start_workers 2 BENCH_N=0
"$PEER" warm 10 >/dev/null
for _ in $(seq 200); do [ "$(rc get bench:done)" = 10 ] && break; sleep 0.02; done
rc del bench:done bench:t_first >/dev/null
sleep 1
cstats() { rc info commandstats | tr -d '\r' | sed -n 's/^cmdstat_\([^:]*\):calls=\([0-9]*\),.*/\1 \2/p' | grep -v -e '^info ' -e '^monitor ' | LC_ALL=C sort; }
# Which process owns each client connection: "port pid role" (role = jobrunner command).
owners() {
  ss -tnpH state established "( dport = :$PORT )" 2>/dev/null | awk '{
      n = split($3, a, ":"); port = a[n];
      if (match($0, /pid=[0-9]+/)) print port, substr($0, RSTART + 4, RLENGTH - 4) }' |
    while read -r port pid; do
      role=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | awk '{ print $2 }')
      echo "$port $pid ${role:-?}"
    done
}
before=$(cstats)
redis-cli -h 127.0.0.1 -p "$PORT" monitor >"$WORK/monitor.txt" 2>/dev/null &
MON=$!
sleep "$IDLE_S"
owners >"$WORK/owners.txt"
kill "$MON" 2>/dev/null; wait "$MON" 2>/dev/null
after=$(cstats)
stop_all
# commandstats: every command Redis ran, including those run inside FCALL
delta=$(LC_ALL=C join -a2 -e0 -o 0,1.2,2.2 <(echo "$before") <(echo "$after") | awk '$3 - $2 > 0 { printf "%s:%d,", $1, $3 - $2; t += $3 - $2 } END { printf " total=%d", t }')
total=$(sed 's/.* total=//' <<<"$delta")
# MONITOR: the commands each client sent ([0 lua] lines are the ones run inside FCALL)
BLOCK_S=5
per_proc=$(awk -v owners="$WORK/owners.txt" -v periods="$(awk -v s="$IDLE_S" -v b="$BLOCK_S" 'BEGIN{print s/b}')" '
  BEGIN { while ((getline l < owners) > 0) { split(l, o, " "); pid[o[1]] = o[2]; role[o[1]] = o[3] } }
  NR == 1 && $0 == "OK" { next }
  $3 == "lua]" { lua++; next }
  { split($3, a, ":"); port = a[2]; sub(/]$/, "", port); c = tolower($4); gsub(/"/, "", c)
    p = (port in pid) ? role[port] ":" pid[port] : "other:" port
    n[p]++; cmds[p] = cmds[p] c " "; client++ }
  END {
    for (p in n) { split(p, r, ":"); per = n[p] / periods; if (per > mx[r[1]]) mx[r[1]] = per
      printf "%s=%d(%s) ", p, n[p], cmds[p] > "/dev/stderr" }
    printf "client_cmds=%d script_cmds=%d worker_max_per_block=%.2f scheduler_max_per_block=%.2f",
      client, lua, mx["worker"], mx["scheduler"] }' "$WORK/monitor.txt" 2>"$WORK/per_process.txt")
by_proc=$(sed 's/ $//; s/ /;/g' "$WORK/per_process.txt" | tr -s ' ' '_')
emit "workload=idle seconds=$IDLE_S processes=3 block_s=$BLOCK_S $per_proc commandstats_total=$total commandstats=${delta%% total=*} by_process=$by_proc"

# --- report
trap - EXIT
cleanup
$PY "$HERE/report.py" --peers "$PEER_RESULTS" --extras "$EXTRAS" --batch "$BATCH" --out "$LATEST"

# --- issue 23: N_BURST (1M) jobs due at once against the drain rate of the
# same rep, Redis's CPU per job (ready, delayed) beside the bare shape's
# floors (bench/burst.sh, its own private Redis on a unix socket), then each
# job-path function's Redis time per job (bench/fn_cost.sh). SKIP_BURST=1
# leaves them out.
if [ "${SKIP_BURST:-0}" != 1 ] && [ "$QUICK" != 1 ]; then
  log "burst and Redis CPU per job: bench/burst.sh (N_BURST=${N_BURST:-1000000}, REPS=$REPS), bench/fn_cost.sh"
  SKIP_BUILD=1 BUILD_DIR="$BUILD" REPS="$REPS" bash "$HERE/burst.sh" | sed -n '/^== medians/,$p'
  SKIP_BUILD=1 BUILD_DIR="$BUILD" REPS="$REPS" bash "$HERE/fn_cost.sh" | sed 's/^fn_cost stamp=[^ ]* /  /'
fi
log "results: $LATEST, $PEER_RESULTS, $EXTRAS; log: $RUNLOG"
