#!/usr/bin/env bash
# bench/tls.sh — what TLS (rediss://) costs, against plain TCP, in the same run
# on the same redis-server (one --port and one --tls-port of 127.0.0.1):
#
#   bench/tls.sh                        # ~2-3 minutes on 2 cores
#   N=20000 REPS=1 bench/tls.sh         # shorter
#   BUILD_DIR=build-tls bench/tls.sh    # the build tree (RelWithDebInfo; default build-bench-tls)
#
# Figures, each for plain and tls, the two alternated per repetition:
#   enqueue_bulk    jr_peer bulk N: pipelined enqueue through the C API
#   enqueue_single  jr_peer paced N2 (unpaced): one job per round trip
#   enqueue_cli     N_CLI `jobrunner enqueue` processes: a connect (and handshake) each
#   drain_noop      N jobs enqueued first, then 2 workers (noop handler) drain them
#                   (launch to empty, as bench/run.sh's drain_noop)
# Appends to bench/results/tls.txt and prints the lines. Certificates are made
# with the openssl CLI in the run's temp dir; every process is stopped by pid.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-bench-tls}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
N=${N:-50000}
N_SINGLE=${N_SINGLE:-5000}
N_CLI=${N_CLI:-100}
REPS=${REPS:-2}
RESULTS=$HERE/results/tls.txt
mkdir -p "$HERE/results"
log() { echo "[tls $(date +%T)] $*" >&2; }

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
fi
log "building jobrunner, bench_job, jr_peer in $BUILD"
cmake --build "$BUILD" -j2 --target jobrunner bench_job jr_peer >/dev/null || { log "build failed"; exit 1; }
JR=$BUILD/bin/jobrunner
PEER=$BUILD/bench/jr_peer
PLUGIN=$BUILD/bench/bench_job.so

WORK=$(mktemp -d /tmp/jr-bench-tls.XXXXXX)
. "$HERE/lib.sh" # stop_pids
PIDS=()
REDIS_PID=
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORT=${PORT:-6410}
while port_busy "$PORT"; do PORT=$((PORT + 1)); done
TPORT=$((PORT + 1))
while port_busy "$TPORT"; do TPORT=$((TPORT + 1)); done
rc() { redis-cli -h 127.0.0.1 -p "$PORT" "$@"; }
cleanup() {
  [ ${#PIDS[@]} -gt 0 ] && stop_pids "${PIDS[@]}"
  if [ -n "$REDIS_PID" ] && kill -0 "$REDIS_PID" 2>/dev/null; then
    rc shutdown nosave >/dev/null 2>&1 || kill "$REDIS_PID"
    wait "$REDIS_PID" 2>/dev/null
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

(
  cd "$WORK" && set -e
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj '/CN=bench CA'
  openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj '/CN=bench'
  printf 'subjectAltName=IP:127.0.0.1\n' >san.ext
  openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 -extfile san.ext
) >"$WORK/openssl.log" 2>&1 || { log "openssl failed: see $WORK/openssl.log"; exit 1; }

redis-server --port "$PORT" --tls-port "$TPORT" --bind 127.0.0.1 --tls-cert-file "$WORK/server.crt" \
  --tls-key-file "$WORK/server.key" --tls-ca-cert-file "$WORK/ca.crt" --tls-auth-clients no \
  --save '' --appendonly no --dir "$WORK" --logfile "$WORK/redis.log" --daemonize no &
REDIS_PID=$!
for _ in $(seq 100); do rc ping >/dev/null 2>&1 && break; sleep 0.05; done
rc ping >/dev/null 2>&1 || { log "redis did not start"; exit 1; }

url_of() { [ "$1" = tls ] && echo "rediss://127.0.0.1:$TPORT" || echo "redis://127.0.0.1:$PORT"; }
conf_of() { # transport -> the workers' and the CLI's config
  local f=$WORK/$1.yaml
  printf 'redis:\n  url: %s\n  tls:\n    ca_file: %s\nlog:\n  level: warn\n' "$(url_of "$1")" "$WORK/ca.crt" >"$f"
  echo "$f"
}
export BENCH_QUEUE=bench BENCH_TLS_CA_FILE=$WORK/ca.crt BENCH_SOCKET= BENCH_PORT=$PORT
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//;s/ /_/g')
emit() { echo "run=$STAMP $*" | tee -a "$RESULTS"; }
emit "workload=env nproc=$(nproc) cpu=$CPU redis=$(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') openssl=$(openssl version | awk '{print $2}') n=$N reps=$REPS loadavg=$(cut -d' ' -f1 /proc/loadavg)"

BENCH_URL=$(url_of plain) "$PEER" bulk 10 >/dev/null || { log "smoke: enqueue failed"; exit 1; } # loads the library
for k in $(seq "$REPS"); do
  for t in plain tls; do
    url=$(url_of "$t") conf=$(conf_of "$t")
    rc flushall >/dev/null
    out=$(BENCH_URL=$url "$PEER" bulk "$N") || { log "$t: bulk enqueue failed"; continue; }
    emit "workload=enqueue_bulk transport=$t rep=$k jobs=$N $out"
    rc flushall >/dev/null
    out=$(BENCH_URL=$url "$PEER" paced "$N_SINGLE" 1000000000) || { log "$t: single enqueue failed"; continue; }
    emit "workload=enqueue_single transport=$t rep=$k jobs=$N_SINGLE $out"
    rc flushall >/dev/null
    t0=$("$PEER" mono)
    for ((i = 0; i < N_CLI; i++)); do "$JR" enqueue -c "$conf" -q bench bench "0 x" >/dev/null || break; done
    t1=$("$PEER" mono)
    emit "workload=enqueue_cli transport=$t rep=$k jobs=$i ms_per_process=$(awk -v a="$t0" -v b="$t1" -v n="$i" 'BEGIN{printf "%.2f", (b-a)/n}')"
    rc flushall >/dev/null
    BENCH_URL=$(url_of plain) BENCH_HANDLER=noop "$PEER" bulk "$N" >/dev/null
    t_launch=$("$PEER" mono)
    for _ in 1 2; do
      "$JR" worker -c "$conf" -q bench --plugin "$PLUGIN" >>"$WORK/worker-$t.log" 2>&1 </dev/null &
      PIDS+=($!)
    done
    out=$(BENCH_URL=$(url_of plain) BENCH_HANDLER=noop "$PEER" waitempty 120)
    ok=$?
    stop_pids "${PIDS[@]}"
    PIDS=()
    t_empty=$(sed -n 's/.*t_empty=\([0-9.]*\).*/\1/p' <<<"$out")
    if [ $ok != 0 ] || [ -z "$t_empty" ]; then
      emit "workload=drain_noop transport=$t rep=$k jobs=$N error=not_empty $out"
      continue
    fi
    emit "workload=drain_noop transport=$t rep=$k jobs=$N wall_s=$(awk -v a="$t_launch" -v b="$t_empty" 'BEGIN{printf "%.3f", (b-a)/1000}') jobs_per_s=$(awk -v a="$t_launch" -v b="$t_empty" -v n="$N" 'BEGIN{printf "%.0f", n/((b-a)/1000)}')"
  done
done
if grep -q "Redis unavailable" "$WORK"/worker-*.log 2>/dev/null; then log "a worker lost Redis:"; grep -h "Redis unavailable" "$WORK"/worker-*.log | head -3 >&2; fi
log "done: $RESULTS"
