#!/usr/bin/env bash
# bench/speed.sh — the job-path speed targets of issue 10 (bulk enqueue of
# ready jobs, enqueue -> start latency at 500 jobs/s, no-op drain), for one
# or several builds side by side in ONE run, on one redis-server, next to the
# XADD ceilings of that run. Builds alternate within each repetition, so slow
# drift on the shared machine hits each of them alike.
#
#   bench/speed.sh                                  # this tree's build/ only
#   BUILDS="before=/tmp/base/build after=build" REPS=3 bench/speed.sh
#   PROFILE=1 bench/speed.sh                        # + Redis CPU per job by command
#   MEASURES=latency bench/speed.sh                 # only some of enqueue drain latency
#
# Per build and repetition, with jobrunner's default worker settings (2
# workers, process isolation):
#   enqueue  jr_peer bulk N_BULK (C API, pipelined): jobs/s
#   drain    N_BULK `noop` jobs enqueued, then 2 workers launched: jobs/s from
#            launch until ready = pending = 0 (start-up included)
#   latency  2 warm workers, idle 1 s, then N_LAT `bench` jobs one at a time
#            at LAT_RATE/s: handler start - time before the enqueue call,
#            p50 / p99 ms
# With PROFILE=1: Redis time per job by command (`INFO commandstats`, reset
# before each measure) for the enqueue and the drain, and for the drain the
# CPU per job of the workers, their runner processes and Redis (/proc), and
# their context switches per 1000 jobs.
# Prints one line per measure and writes them to bench/results/speed.txt.
# Only 127.0.0.1 is used; every process started here is stopped by its pid.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILDS=${BUILDS:-"this=$ROOT/build"}
REPS=${REPS:-3}
N_BULK=${N_BULK:-100000}
N_LAT=${N_LAT:-2000}
LAT_RATE=${LAT_RATE:-500}
PROFILE=${PROFILE:-0}
MEASURES=${MEASURES:-"enqueue drain latency"} # a subset runs only those
want() { case " $MEASURES " in *" $1 "*) return 0 ;; esac; return 1; }
mkdir -p "$HERE/results"
OUT=$HERE/results/speed.txt
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
. "$HERE/lib.sh" # stop_pids

WORK=$(mktemp -d /tmp/jr-speed.XXXXXX)
PIDS=()
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORT=${SPEED_PORT:-6420}
while port_busy "$PORT"; do PORT=$((PORT + 1)); done
URL=redis://127.0.0.1:$PORT
REDIS_PID=
cleanup() {
  [ ${#PIDS[@]} -gt 0 ] && stop_pids "${PIDS[@]}"
  PIDS=()
  if [ -n "$REDIS_PID" ] && kill -0 "$REDIS_PID" 2>/dev/null; then
    redis-cli -h 127.0.0.1 -p "$PORT" shutdown nosave >/dev/null 2>&1 || kill "$REDIS_PID"
    wait "$REDIS_PID" 2>/dev/null
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" \
  --logfile "$WORK/redis.log" --daemonize no &
REDIS_PID=$!
rc() { redis-cli -h 127.0.0.1 -p "$PORT" "$@"; }
for _ in $(seq 100); do rc ping >/dev/null 2>&1 && break; sleep 0.05; done
rc ping >/dev/null 2>&1 || { echo "redis did not start" >&2; exit 1; }
export BENCH_PORT=$PORT BENCH_QUEUE=bench BENCH_SOCKET= BENCH_URL=
printf 'log:\n  level: warn\n' >"$WORK/defaults.yaml"

emit() { echo "run=$STAMP $*" | tee -a "$OUT"; }
kv() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" <<<"$2"; }
start_workers() { # jobrunner plugin n env...
  local jr=$1 plugin=$2 n=$3 i; shift 3
  for ((i = 0; i < n; i++)); do
    env "$@" "$jr" worker -c "$WORK/defaults.yaml" --redis "$URL" -q bench --plugin "$plugin" \
      >>"$WORK/worker.log" 2>&1 </dev/null &
    PIDS+=($!)
  done
}
stop_all() { [ ${#PIDS[@]} -gt 0 ] && stop_pids "${PIDS[@]}"; PIDS=(); }
ceiling() { # clients pipeline requests
  rc flushall >/dev/null
  redis-benchmark -h 127.0.0.1 -p "$PORT" -c "$1" -n "$3" -P "$2" --csv XADD bench:stream '*' f v 2>/dev/null |
    tail -1 | awk -F'","' '{ gsub(/"/, "", $2); printf "%.0f", $2 }'
}
ceilings() { emit "measure=ceiling when=$1 xadd_c50_p64=$(ceiling 50 64 1000000) xadd_c50_p1=$(ceiling 50 1 200000) uptime=\"$(uptime | sed 's/.*load/load/')\""; }

# Redis time per job by command since the last CONFIG RESETSTAT (commands
# run inside FCALL are counted twice: alone and in the fcall figure), in us.
per_job() { # jobs
  rc info commandstats | tr -d '\r' |
    awk -F'[:=,]' -v n="$1" '/^cmdstat_/ && $5 / n >= 0.01 { printf "redis_%s=%.2f ", substr($1, 9), $5 / n }'
}
# CPU ticks (user, system) and context switches of a process: "u s cs".
cpu_of() { # pid
  echo "$(awk '{ print $14, $15 }' "/proc/$1/stat" 2>/dev/null || echo 0 0) $(awk '/ctxt_switches/ { s += $2 } END { print s + 0 }' "/proc/$1/status" 2>/dev/null)"
}
# CPU per job of the workers (and their runner processes) and of Redis
# since `cpu_mark`, in us, and context switches per 1000 jobs.
cpu_mark() { REDIS_CPU0=$(cpu_of "$REDIS_PID"); }
cpu_per_job() { # jobs
  local p c wu=0 ws=0 wc=0 ru=0 rs=0 rcs=0 u s x
  for p in "${PIDS[@]}"; do
    read -r u s x <<<"$(cpu_of "$p")"; wu=$((wu + u)) ws=$((ws + s)) wc=$((wc + x))
    for c in $(pgrep -P "$p"); do read -r u s x <<<"$(cpu_of "$c")"; ru=$((ru + u)) rs=$((rs + s)) rcs=$((rcs + x)); done
  done
  read -r u s x <<<"$(cpu_of "$REDIS_PID")"
  read -r u0 s0 x0 <<<"$REDIS_CPU0"
  awk -v n="$1" -v hz="$(getconf CLK_TCK)" -v wu="$wu" -v ws="$ws" -v wc="$wc" -v ru="$ru" -v rs="$rs" -v rcs="$rcs" \
    -v du=$((u - u0)) -v ds=$((s - s0)) -v dc=$((x - x0)) 'BEGIN { f = 1e6 / hz / n
    printf "cpu_us_per_job: workers_user=%.2f workers_sys=%.2f runners_user=%.2f runners_sys=%.2f redis_user=%.2f redis_sys=%.2f ctxsw_per_1000_jobs: workers=%.0f runners=%.0f redis=%.0f",
      wu * f, ws * f, ru * f, rs * f, du * f, ds * f, wc * 1000 / n, rcs * 1000 / n, dc * 1000 / n }'
}

ceilings start
for k in $(seq "$REPS"); do
  for b in $BUILDS; do
    name=${b%%=*} dir=${b#*=}
    JR=$dir/bin/jobrunner PEER=$dir/bench/jr_peer PLUGIN=$dir/bench/bench_job.so
    # each build with its own function library (a newer revision loaded
    # before would otherwise serve an older build too)
    rc function flush >/dev/null
    if want enqueue; then
    # enqueue
    rc flushall >/dev/null
    "$PEER" bulk 10 >/dev/null
    rc flushall >/dev/null
    rc config resetstat >/dev/null
    out=$("$PEER" bulk "$N_BULK")
    prof=
    [ "$PROFILE" = 1 ] && prof=$(per_job "$N_BULK")
    emit "measure=enqueue build=$name rep=$k jobs=$N_BULK jobs_per_s=$(kv enqueue_jobs_per_s "$out") $prof"
    fi
    if want drain; then
    # drain
    rc flushall >/dev/null
    BENCH_HANDLER=noop "$PEER" bulk "$N_BULK" >/dev/null
    rc config resetstat >/dev/null
    cpu_mark
    t0=$("$PEER" mono)
    start_workers "$JR" "$PLUGIN" 2 BENCH_N=0
    out=$(BENCH_HANDLER=noop "$PEER" waitempty 60)
    ok=$?
    prof=
    [ "$PROFILE" = 1 ] && prof="$(cpu_per_job "$N_BULK") $(per_job "$N_BULK")"
    stop_all
    t1=$(kv t_empty "$out")
    if [ $ok = 0 ]; then
      emit "measure=drain build=$name rep=$k jobs=$N_BULK jobs_per_s=$(awk -v a="$t0" -v b="$t1" -v n="$N_BULK" 'BEGIN{printf "%.0f", n/((b-a)/1000)}') $prof"
    else
      emit "measure=drain build=$name rep=$k error=not_empty_after_60s"
    fi
    fi
    if want latency; then
    # latency
    rc flushall >/dev/null
    start_workers "$JR" "$PLUGIN" 2 BENCH_N=0
    "$PEER" warm 200 >/dev/null
    "$PEER" waitkey get bench:done 200 30 >/dev/null
    sleep 1
    rc del bench:lat bench:done >/dev/null
    rc config resetstat >/dev/null
    "$PEER" paced "$N_LAT" "$LAT_RATE" >/dev/null
    "$PEER" waitkey llen bench:lat "$N_LAT" 30 >/dev/null
    prof=
    [ "$PROFILE" = 1 ] && prof=$(per_job "$N_LAT")
    stop_all
    emit "measure=latency build=$name rep=$k jobs=$N_LAT rate=$LAT_RATE $(rc lrange bench:lat 0 -1 | sort -g |
      awk '{ v[NR] = $1 } END { if (!NR) { print "error=no_samples"; exit }
        i50 = int(0.50 * (NR - 1) + 0.5) + 1; i99 = int(0.99 * (NR - 1) + 0.5) + 1 # as peers/bench.py pct
        printf "n=%d p50_ms=%.3f p99_ms=%.3f max_ms=%.3f", NR, v[i50], v[i99], v[NR] }') $prof"
    fi
  done
done
ceilings end
