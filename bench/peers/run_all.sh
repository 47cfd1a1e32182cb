#!/usr/bin/env bash
# Side-by-side benchmark of Redis-backed job queues on ONE local redis-server.
#
#   ./run_all.sh                    # install what is missing, run everything (~12-13 min)
#   REPS=1 ./run_all.sh             # one throughput repetition instead of 3
#   WORKLOADS="ceiling throughput latency" PEERS="bullmq sidekiq" ./run_all.sh
#   SKIP_INSTALL=1 ./run_all.sh
#
# Result lines are appended to results/results.txt (override with RESULTS=...); the table
# at the end is `python3 summarize.py results/results.txt` of this batch's lines.
# Traffic goes only to 127.0.0.1. Every run has a timeout and stops its own workers.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE"

PEERS=${PEERS:-"jobrunner bullmq beequeue sidekiq celery rq_simple rq"}
WORKLOADS=${WORKLOADS:-"ceiling throughput latency delayed memory"}
REPS=${REPS:-3}         # throughput and ceiling repetitions
LAT_REPS=${LAT_REPS:-2} # latency repetitions
DELAYED_REPS=${DELAYED_REPS:-1} # delayed-job repetitions (memory runs once)
RUN_TIMEOUT=${RUN_TIMEOUT:-180}
RESULTS=${RESULTS:-$HERE/results/results.txt}
PY=/usr/bin/python3 # Debian's python3-rq/celery/redis are installed for this interpreter

# RQ's default worker forks one process per job; on this VM that caps it near 20 jobs/s, so its
# workloads are scaled down to what it can finish (see README.md). Override from the env.
export N_THROUGHPUT_RQ=${N_THROUGHPUT_RQ:-600}
export N_LATENCY_RQ=${N_LATENCY_RQ:-100} LAT_RATE_RQ=${LAT_RATE_RQ:-5}
export N_DELAYED_RQ=${N_DELAYED_RQ:-100} SPREAD_MS_RQ=${SPREAD_MS_RQ:-10000} N_WARM_RQ=${N_WARM_RQ:-20}

log() { echo "[run_all $(date +%T)] $*" >&2; }

# ---------------------------------------------------------------- install
if [ "${SKIP_INSTALL:-0}" != 1 ]; then
  missing=""
  for p in redis-server redis-tools ruby-sidekiq python3-rq python3-celery python3-redis; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
  done
  if [ -n "$missing" ]; then
    log "apt-get install$missing"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null || { log "apt-get failed"; exit 1; }
  fi
  if [ ! -d node_modules/bullmq ] || [ ! -d node_modules/bee-queue ] || [ ! -d node_modules/ioredis ]; then
    log "npm install (package.json / package-lock.json: bullmq, bee-queue, ioredis)"
    npm install --no-audit --no-fund >/dev/null || { log "npm install failed"; exit 1; }
  fi
fi

# ---------------------------------------------------------------- redis
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORT=${BENCH_PORT:-6390}
while port_busy "$PORT"; do PORT=$((PORT + 1)); done
export BENCH_PORT=$PORT

WORK=$(mktemp -d /tmp/queue-peers.XXXXXX)
export BENCH_LOGDIR=$WORK BENCH_PIDFILE=$WORK/worker-pgids
: >"$BENCH_PIDFILE"
mkdir -p "$(dirname "$RESULTS")"

redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" \
  --logfile "$WORK/redis.log" --daemonize no &
REDIS_PID=$!

# Stop leftover worker process groups (only ids bench.py recorded, only if they still run in
# this folder), then redis by its pid.
reap_workers() {
  local pg
  while read -r pg; do
    [ -n "$pg" ] && [ -d "/proc/$pg" ] || continue
    [ "$(readlink "/proc/$pg/cwd")" = "$HERE" ] || continue
    log "killing leftover worker process group $pg"
    kill -KILL -- "-$pg" 2>/dev/null
  done <"$BENCH_PIDFILE"
  : >"$BENCH_PIDFILE"
}
cleanup() {
  reap_workers
  if kill -0 "$REDIS_PID" 2>/dev/null; then
    redis-cli -h 127.0.0.1 -p "$PORT" shutdown nosave >/dev/null 2>&1 || kill "$REDIS_PID"
    wait "$REDIS_PID" 2>/dev/null
  fi
  log "redis (pid $REDIS_PID) stopped; logs in $WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for _ in $(seq 50); do redis-cli -h 127.0.0.1 -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -h 127.0.0.1 -p "$PORT" ping >/dev/null || { log "redis did not start"; exit 1; }
log "redis-server pid $REDIS_PID on 127.0.0.1:$PORT (dir $WORK)"

# ---------------------------------------------------------------- header
{
  echo "# batch $(date -u +%Y-%m-%dT%H:%M:%SZ) port=$PORT reps=$REPS lat_reps=$LAT_REPS"
  JR_BIN=${JR_BUILD_DIR:-$HERE/../../build}/bin/jobrunner
  printf 'peer=meta workload=env jobrunner=%s cpus=%s redis=%s node=%s bullmq=%s bee-queue=%s ioredis=%s sidekiq=%s ruby=%s rq=%s celery=%s kombu=%s redis-py=%s python=%s\n' \
    "$("$JR_BIN" version 2>/dev/null | awk '{print $2}')" "$(nproc)" "$(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/')" "$(node --version)" \
    "$(node -p 'require("bullmq/package.json").version')" "$(node -p 'require("bee-queue/package.json").version')" \
    "$(node -p 'require("ioredis/package.json").version')" \
    "$(ruby -e 'require "sidekiq"; print Sidekiq::VERSION')" "$(ruby -e 'print RUBY_VERSION')" \
    "$($PY -c 'import rq; print(rq.VERSION)')" "$($PY -c 'import celery; print(celery.__version__)')" \
    "$($PY -c 'import kombu; print(kombu.__version__)')" "$($PY -c 'import redis; print(redis.__version__)')" \
    "$($PY -c 'import platform; print(platform.python_version())')"
} | tee -a "$RESULTS"

# one peer x workload x run; always yields exactly one line
one() {
  local peer=$1 wl=$2 run=$3 out
  out=$(timeout -k 10 "$RUN_TIMEOUT" $PY bench.py "$peer" "$wl" --run "$run")
  local rc=$?
  [ -n "$out" ] || out="peer=$peer workload=$wl run=$run error=timeout_or_crash_rc$rc"
  reap_workers
  echo "$out" | tee -a "$RESULTS"
}

has() { case " $WORKLOADS " in *" $1 "*) return 0 ;; esac; return 1; }
T0=$(date +%s)

if has ceiling; then
  log "ceiling: redis-benchmark"
  for k in $(seq "$REPS"); do
    CEIL_LISTS=$([ "$k" = 1 ] && echo 1 || echo 0) ./redis_ceiling.sh "$k" | tee -a "$RESULTS"
  done
fi

if has throughput; then
  # warm-up (not counted): loads code from disk into the page cache, Lua scripts into redis
  for p in $PEERS; do
    log "throughput warm-up $p"
    N_THROUGHPUT=1000 N_THROUGHPUT_RQ=100 one "$p" throughput warmup >/dev/null
  done
  # repetitions interleaved across peers so slow drifts of the shared machine hit all peers
  for k in $(seq "$REPS"); do
    for p in $PEERS; do log "throughput $p run $k"; one "$p" throughput "$k"; done
  done
fi

if has latency; then
  for k in $(seq "$LAT_REPS"); do
    for p in $PEERS; do
      log "latency $p run $k"; one "$p" latency "$k"
      # jobrunner's default runs handlers in child processes; also measure the inline mode
      if [ "$p" = jobrunner ]; then log "latency jobrunner_inline run $k"; one jobrunner_inline latency "$k"; fi
    done
  done
  # rq_simple saturates at ~450-600 jobs/s here, so 500/s is not "idle workers" for it:
  # also measure it at 100/s.
  case " $PEERS " in *" rq_simple "*)
    log "latency rq_simple at 100/s"
    LAT_RATE_RQ_SIMPLE=100 N_LATENCY_RQ_SIMPLE=1000 one rq_simple latency 1 ;;
  esac
fi

if has delayed; then
  for k in $(seq "$DELAYED_REPS"); do
    for p in $PEERS; do
      log "delayed $p run $k"; one "$p" delayed "$k"
      if [ "$p" = sidekiq ]; then log "delayed sidekiq_poll1 run $k"; one sidekiq_poll1 delayed "$k"; fi
      if [ "$p" = jobrunner ]; then log "delayed jobrunner_inline run $k"; one jobrunner_inline delayed "$k"; fi
    done
  done
fi

if has memory; then
  for p in $PEERS; do
    [ "$p" = rq_simple ] && continue # same enqueue path and data as rq
    log "memory $p"; one "$p" memory 1
  done
fi

log "done in $(( $(date +%s) - T0 )) s; results appended to $RESULTS"
echo
$PY summarize.py "$RESULTS"
