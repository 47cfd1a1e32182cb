#!/usr/bin/env bash
# bench/cluster.sh — Redis CPU per job on one plain Redis against a Redis
# Cluster of 3 primaries (no replicas, for cost), in the same run, all on
# 127.0.0.1 TCP ports.
#
#   bench/cluster.sh                      # build (BUILD_DIR, default build-cluster, RelWithDebInfo), run
#   N=20000 bench/cluster.sh              # a small run
#   MODES=single bench/cluster.sh         # one side only (default "cluster single": the cluster first,
#                                         # for its choice of queue names, which the single Redis reuses)
#   PARTITIONS=9 bench/cluster.sh         # partitioned mode: one queue "hot" of 9 partitions (below)
#   PARTITIONS=9 PRIMARIES=1 bench/cluster.sh  # a "cluster" of one primary holding every slot:
#                                         # cluster mode's own cost, without 3 Redis sharing the cores
#   PARTITIONS=8 PQUEUE=hot2 bench/cluster.sh  # another name: 8 partitions of "hot" are 2/4/2 on the 3
#                                         # primaries, of "hot2" 3/3/2 (docs/operations.md, Partitioned queues)
#
# The same workload on each: QUEUES queues (default 12; on the cluster 4 on
# each primary, chosen by CLUSTER KEYSLOT), N jobs in all (default 200000),
# half ready and half delayed, spread evenly over the queues:
#   enqueue_ready    N/2 ready noop jobs, `jr_peer bulk` per queue (FCALLs of 1,000)
#   enqueue_delayed  N/2 jobs delayed DELAY_MS (default 4000: the time wheel), `jr_peer bulkdelayed`
#   promotion        once they are due: 1 scheduler, from its start until no queue has a delayed job
#   drain            2 workers (noop handler, log level warn) of every queue, until nothing is ready or pending
# PARTITIONS=K: instead, one queue `hot` (PQUEUE) of K partitions (`jobrunner queue
# partitions hot K` on each side, the single Redis too, so the workload is the
# same), the same N jobs in QUEUES producer processes of N/2/QUEUES jobs each,
# enqueued with `jr_peer clientbulk` (jr_client_enqueue_many of the client
# library, which spreads them over the partitions; `jr_peer bulk` writes into
# the queue itself), the workers of `-q hot`, the scheduler as before.
# Each primary's share of the jobs: after the enqueues, before the promotion,
# the jobs in its keys (XLEN of each jr:{..}:ready, ZCARD of each :delayed, the
# value of each :wheel:n), and how many of the partitions it holds.
# For each phase and each Redis process: INFO cpu (used_cpu_sys + used_cpu_user)
# before and after; the cluster's figure is the sum over its primaries. The
# polling (`jobrunner stats --json` every 0.5 s) is counted in the phase, on
# both sides alike. The idle CPU of each side (the cluster bus's gossip) is
# measured over IDLE_S seconds (default 3); the table shows the figures with
# and without it.
# Also the 4 commands that took most of Redis's time in each phase (INFO
# commandstats, µs and calls per job). Prints one line per measure, those, and
# then a markdown table: µs of Redis CPU per
# job, single against cluster, and each primary's share of the jobs and of the
# Redis CPU. Every process started here is stopped by its pid.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-cluster}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
N=${N:-200000}
QUEUES=${QUEUES:-12}
DELAY_MS=${DELAY_MS:-4000}
IDLE_S=${IDLE_S:-3}
MODES=${MODES:-cluster single}
PARTITIONS=${PARTITIONS:-}
PQUEUE=${PQUEUE:-hot}
PRIMARIES=${PRIMARIES:-3}
case "$PRIMARIES" in
  3) ;;
  1) [ -n "$PARTITIONS" ] || { echo "PRIMARIES=1 needs PARTITIONS (the plain queues are chosen per primary of 3)" >&2; exit 2; } ;;
  *) echo "PRIMARIES must be 3 or 1, not \"$PRIMARIES\"" >&2; exit 2 ;;
esac
if [ -n "$PARTITIONS" ]; then
  [ "$PARTITIONS" -ge 2 ] 2>/dev/null && [ "$PARTITIONS" -le 1024 ] ||
    { echo "PARTITIONS must be 2..1024, not \"$PARTITIONS\"" >&2; exit 2; }
fi
[ $((QUEUES % 3)) = 0 ] && [ "$QUEUES" -ge 3 ] || { echo "QUEUES must be a multiple of 3" >&2; exit 2; }
PER_Q=$((N / 2 / QUEUES))
[ "$PER_Q" -ge 1 ] || { echo "N=$N is too small for $QUEUES queues" >&2; exit 2; }
N_READY=$((PER_Q * QUEUES)) N_DELAYED=$((PER_Q * QUEUES))

log() { echo "[cluster $(date +%T)] $*" >&2; }

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
fi
cmake --build "$BUILD" -j2 --target jobrunner bench_job jr_peer >/dev/null || { log "build failed"; exit 1; }
JR=$BUILD/bin/jobrunner
PEER=$BUILD/bench/jr_peer
PLUGIN=$BUILD/bench/bench_job.so
for f in "$JR" "$PEER" "$PLUGIN"; do [ -e "$f" ] || { log "missing $f"; exit 1; }; done

. "$HERE/lib.sh" # stop_pids
WORK=$(mktemp -d /tmp/jr-cluster.XXXXXX)
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# free_port FROM: the first port from FROM up with it and its cluster bus port (+10000) free.
free_port() {
  local p=$1
  while port_busy "$p" || port_busy $((p + 10000)); do p=$((p + 1)); done
  echo "$p"
}
PIDS=() REDIS_PIDS=()
cleanup() {
  [ ${#PIDS[@]} -gt 0 ] && stop_pids "${PIDS[@]}"
  PIDS=()
  [ ${#REDIS_PIDS[@]} -gt 0 ] && stop_pids "${REDIS_PIDS[@]}"
  REDIS_PIDS=()
  log "stopped; logs in $WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
RESULTS=$WORK/results.txt
: >"$RESULTS"

# start_node DIR PORT [ARGS...]: a redis-server on 127.0.0.1:PORT, no persistence.
start_node() {
  local dir=$1 port=$2
  shift 2
  mkdir -p "$dir"
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
    --logfile "$dir/redis.log" --daemonize no "$@" &
  REDIS_PIDS+=($!)
  for _ in $(seq 200); do redis-cli -p "$port" ping >/dev/null 2>&1 && return 0; sleep 0.05; done
  log "redis-server on port $port did not start (see $dir/redis.log)"
  return 1
}

cpu_of() { redis-cli -p "$1" info cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {printf "%.6f", s}'; }
# cmdstats PORT...: "COMMAND CALLS USEC" per command, summed over the ports.
cmdstats() {
  local p
  for p in "$@"; do redis-cli -p "$p" info commandstats; done | tr -d '\r' |
    sed -n 's/^cmdstat_\([^:]*\):calls=\([0-9]*\),usec=\([0-9]*\),.*/\1 \2 \3/p' |
    awk '{c[$1] += $2; u[$1] += $3} END {for (k in c) print k, c[k], u[k]}' | sort
}
# calls_of PORT: the commands Redis ran so far (INFO commandstats, every command; the INFO itself included).
calls_of() { redis-cli -p "$1" info commandstats | tr -d '\r' | sed -n 's/^cmdstat_[^:]*:calls=\([0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}'; }

# The queue names: on the cluster, QUEUES/3 on each primary (PORTS, in order).
# owner PORT... -> for each queue "NAME INDEX" (the index of its primary in PORTS).
choose_queues() {
  local k=0 have=(0 0 0) ranges=() i slot name
  for i in 0 1 2; do
    ranges[$i]=$(redis-cli -p "${PORTS[$i]}" cluster nodes | awk '/myself/ {for (f = 9; f <= NF; f++) printf "%s ", $f}')
  done
  QNAMES=() QOWNER=()
  while [ ${#QNAMES[@]} -lt "$QUEUES" ] && [ $k -lt 10000 ]; do
    name=bq$k
    k=$((k + 1))
    slot=$(redis-cli -p "${PORTS[0]}" cluster keyslot "{$name}")
    for i in 0 1 2; do
      if awk -v s="$slot" -v r="${ranges[$i]}" 'BEGIN {n = split(r, a, " "); for (j = 1; j <= n; j++) {split(a[j], b, "-"); if (b[2] == "") b[2] = b[1]; if (s >= b[1] && s <= b[2]) exit 0}; exit 1}'; then
        if [ "${have[$i]}" -lt $((QUEUES / 3)) ]; then
          have[$i]=$((have[$i] + 1))
          QNAMES+=("$name") QOWNER+=("$i")
        fi
        break
      fi
    done
  done
  [ ${#QNAMES[@]} = "$QUEUES" ] || { log "could not spread $QUEUES queues over 3 primaries"; exit 1; }
}

# jobs_of PORT: "JOBS READY_KEYS" of one Redis: the jobs in its queues' keys
# (XLEN of each jr:{Q}:ready, ZCARD of each jr:{Q}:delayed, the value of each
# jr:{Q}:wheel:n) and how many ready streams (queues or partitions) it holds.
jobs_of() {
  local p=$1 k n=0 qs=0
  while read -r k; do
    [ -n "$k" ] || continue
    case "$k" in
      *:ready) n=$((n + $(redis-cli -p "$p" xlen "$k"))) qs=$((qs + 1)) ;;
      *:delayed) n=$((n + $(redis-cli -p "$p" zcard "$k"))) ;;
      *:wheel:n) n=$((n + $(redis-cli -p "$p" get "$k"))) ;;
    esac
  done < <(redis-cli -p "$p" --scan --pattern 'jr:{*}:*' | grep -E ':(ready|delayed|wheel:n)$' | grep -v '^jr:{queues}')
  echo "$n $qs"
}

# total KEY URL: the sum of one counter ("ready", "delayed", ...) over every queue (stats --json).
total() {
  local out
  out=$("$JR" stats --redis "$2" --json 2>>"$WORK/stats.err") || { echo -1; return; }
  grep -o "\"$1\":[0-9]*" <<<"$out" | awk -F: '{s += $2} END {print s + 0}'
}
# wait_zero URL TIMEOUT_S KEY...: until every KEY sums to 0 over the queues.
wait_zero() {
  local url=$1 end=$((SECONDS + $2)) k sum
  shift 2
  while [ $SECONDS -lt $end ]; do
    sum=0
    for k in "$@"; do
      v=$(total "$k" "$url")
      [ "$v" -lt 0 ] && { sum=1; break; }
      sum=$((sum + v))
    done
    [ "$sum" = 0 ] && return 0
    sleep 0.5
  done
  return 1
}

# measure MODE PHASE JOBS CMD...: run CMD, record each node's CPU delta and the wall time.
measure() {
  local mode=$1 phase=$2 jobs=$3 i t0 t1
  shift 3
  local before=() after=() calls0=0 calls1=0
  for i in "${!PORTS[@]}"; do before[$i]=$(cpu_of "${PORTS[$i]}"); calls0=$((calls0 + $(calls_of "${PORTS[$i]}"))); done
  cmdstats "${PORTS[@]}" >"$WORK/cmd.before"
  t0=$("$PEER" mono)
  "$@" || { log "$mode $phase failed"; echo "mode=$mode phase=$phase error=failed" >>"$RESULTS"; return 1; }
  t1=$("$PEER" mono)
  for i in "${!PORTS[@]}"; do after[$i]=$(cpu_of "${PORTS[$i]}"); calls1=$((calls1 + $(calls_of "${PORTS[$i]}"))); done
  cmdstats "${PORTS[@]}" >"$WORK/cmd.after"
  # the commands that took most of Redis's time in the phase (usec per job, calls per job)
  join -a 2 "$WORK/cmd.before" "$WORK/cmd.after" |
    awk -v n="$jobs" -v m="$mode" -v ph="$phase" 'NF == 5 {c = $4 - $2; u = $5 - $3} NF == 3 {c = $2; u = $3}
      c > 0 {printf "top mode=%s phase=%s cmd=%s us_per_job=%.2f calls_per_job=%.3f\n", m, ph, $1, u / n, c / n}' |
    sort -t= -k5 -g -r | head -4 >>"$WORK/top.txt"
  local line="mode=$mode phase=$phase jobs=$jobs wall_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", (b - a) / 1000}')"
  local sum=0
  for i in "${!PORTS[@]}"; do
    d=$(awk -v a="${before[$i]}" -v b="${after[$i]}" 'BEGIN {printf "%.6f", b - a}')
    line="$line cpu$i=$d"
    sum=$(awk -v s="$sum" -v d="$d" 'BEGIN {printf "%.6f", s + d}')
  done
  line="$line calls=$((calls1 - calls0)) cpu_s=$sum us_per_job=$(awk -v s="$sum" -v n="$jobs" 'BEGIN {printf "%.2f", s * 1e6 / n}')"
  echo "$line" | tee -a "$RESULTS"
}

# PARTITIONS=K: QUEUES producers of the one queue, through the client library (it routes partitions).
enqueue_ready() {
  if [ -n "$PARTITIONS" ]; then
    for _ in $(seq "$QUEUES"); do BENCH_URL=$URL BENCH_QUEUE=$PQUEUE BENCH_HANDLER=noop "$PEER" clientbulk "$PER_Q" 0 >/dev/null || return 1; done
    return 0
  fi
  for q in "${QNAMES[@]}"; do BENCH_URL=$URL BENCH_QUEUE=$q BENCH_HANDLER=noop "$PEER" bulk "$PER_Q" >/dev/null || return 1; done
}
enqueue_delayed() {
  local now
  now=$("$PEER" mono)
  DUE_AT=$(( ${now%.*} + DELAY_MS ))
  if [ -n "$PARTITIONS" ]; then
    for _ in $(seq "$QUEUES"); do BENCH_URL=$URL BENCH_QUEUE=$PQUEUE BENCH_HANDLER=noop "$PEER" clientbulk "$PER_Q" "$DELAY_MS" >/dev/null || return 1; done
    return 0
  fi
  for q in "${QNAMES[@]}"; do BENCH_URL=$URL BENCH_QUEUE=$q BENCH_HANDLER=noop "$PEER" bulkdelayed "$PER_Q" "$DELAY_MS" >/dev/null || return 1; done
}
promote() {
  "$JR" scheduler --redis "$URL" -c "$WORK/quiet.yaml" >>"$WORK/scheduler-$MODE.log" 2>&1 </dev/null &
  PIDS+=($!)
  wait_zero "$URL" 300 delayed
  local ok=$?
  stop_pids "${PIDS[@]}"
  PIDS=()
  return $ok
}
drain() {
  local qs=() q
  for q in "${QNAMES[@]}"; do qs+=(-q "$q"); done
  for i in 1 2; do
    env BENCH_N=0 "$JR" worker --redis "$URL" -c "$WORK/quiet.yaml" "${qs[@]}" --plugin "$PLUGIN" \
      >>"$WORK/worker-$MODE.log" 2>&1 </dev/null &
    PIDS+=($!)
  done
  wait_zero "$URL" 600 ready pending delayed
  local ok=$?
  stop_pids "${PIDS[@]}"
  PIDS=()
  return $ok
}
idle() { sleep "$IDLE_S"; }

printf 'log:\n  level: warn\n' >"$WORK/quiet.yaml"
PORT_BASE=${CLUSTER_PORT:-7430}
for MODE in $MODES; do
  case "$MODE" in
    single)
      p=$(free_port "$PORT_BASE")
      start_node "$WORK/single" "$p" || exit 1
      PORTS=("$p") URL=redis://127.0.0.1:$p ;;
    cluster)
      PORTS=()
      p=$PORT_BASE
      for i in $(seq 0 $((PRIMARIES - 1))); do
        p=$(free_port $((p + 1)))
        start_node "$WORK/node$i" "$p" --cluster-enabled yes --cluster-config-file "nodes-$p.conf" || exit 1
        PORTS+=("$p")
      done
      if [ "$PRIMARIES" = 1 ]; then # --cluster create wants 3 primaries: give the one every slot
        redis-cli -p "${PORTS[0]}" cluster addslotsrange 0 16383 >"$WORK/create.log" 2>&1 || { cat "$WORK/create.log" >&2; exit 1; }
      else
        redis-cli --cluster create "127.0.0.1:${PORTS[0]}" "127.0.0.1:${PORTS[1]}" "127.0.0.1:${PORTS[2]}" \
          --cluster-replicas 0 --cluster-yes >"$WORK/create.log" 2>&1 || { cat "$WORK/create.log" >&2; exit 1; }
      fi
      for _ in $(seq 300); do
        ok=1
        for p in "${PORTS[@]}"; do redis-cli -p "$p" cluster info | grep -q '^cluster_state:ok' || ok=0; done
        [ $ok = 1 ] && break
        sleep 0.1
      done
      [ $ok = 1 ] || { log "the cluster did not settle"; exit 1; }
      URL="redis-cluster://$(printf '127.0.0.1:%s,' "${PORTS[@]}")"
      URL=${URL%,} ;;
    *) log "unknown mode $MODE (single or cluster)"; exit 2 ;;
  esac
  if [ -n "$PARTITIONS" ]; then
    QNAMES=("$PQUEUE")
    "$JR" queue partitions "$PQUEUE" "$PARTITIONS" --redis "$URL" >>"$WORK/partitions.log" 2>&1 ||
      { log "$MODE: jobrunner queue partitions $PQUEUE $PARTITIONS failed (see $WORK/partitions.log)"; cat "$WORK/partitions.log" >&2; exit 1; }
  elif [ "$MODE" = cluster ]; then
    choose_queues
  elif [ -z "${QNAMES+x}" ]; then # one Redis alone: any names (CLUSTER KEYSLOT needs a cluster)
    QNAMES=()
    for i in $(seq 0 $((QUEUES - 1))); do QNAMES+=("bq$i"); done
  fi
  log "$MODE: $URL, Redis pids ${REDIS_PIDS[*]}"
  measure "$MODE" idle "$IDLE_S" idle
  measure "$MODE" enqueue_ready "$N_READY" enqueue_ready || continue
  measure "$MODE" enqueue_delayed "$N_DELAYED" enqueue_delayed || continue
  line="jobs mode=$MODE"
  for i in "${!PORTS[@]}"; do read -r nj nq < <(jobs_of "${PORTS[$i]}"); line="$line jobs$i=$nj streams$i=$nq"; done
  echo "$line" | tee -a "$WORK/jobs.txt"
  now=$("$PEER" mono)
  wait_ms=$((DUE_AT + 500 - ${now%.*}))
  [ "$wait_ms" -gt 0 ] && sleep "$(awk -v m="$wait_ms" 'BEGIN {printf "%.3f", m / 1000}')"
  measure "$MODE" promotion "$N_DELAYED" promote || continue
  measure "$MODE" drain $((N_READY + N_DELAYED)) drain || continue
  stop_pids "${REDIS_PIDS[@]}"
  REDIS_PIDS=()
  PORT_BASE=$((PORT_BASE + 10))
done
if [ -n "$PARTITIONS" ]; then
  echo "queue: $PQUEUE of $PARTITIONS partitions, $QUEUES producer processes (jr_peer clientbulk) per enqueue phase"
else
  echo "queues: ${QNAMES[*]:-} (primary of each: ${QOWNER[*]:-})"
fi
echo "jobs in each Redis after the enqueues (jobsI: ready + delayed; streamsI: ready streams, i.e. queues or partitions, on it):"
cat "$WORK/jobs.txt" 2>/dev/null
echo "Redis time by command (INFO commandstats, summed over the primaries; excludes the cost outside commands):"
sort -t' ' -k3,3 -k2,2 "$WORK/top.txt" 2>/dev/null
echo
# The table.
awk -v queues="$QUEUES" -v n="$N" -v owners="${QOWNER[*]:-}" '
  {
    for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
    m = f["mode"]; p = f["phase"]
    if (f["error"] != "") { err[m, p] = 1; next }
    us[m, p] = f["us_per_job"]; wall[m, p] = f["wall_s"]; cpu[m, p] = f["cpu_s"]; jobs[p] = f["jobs"]; calls[m, p] = f["calls"]
    for (k = 0; k < 3; k++) if (("cpu" k) in f) c[m, p, k] = f["cpu" k]
    delete f
  }
  END {
    split(owners, o, " "); for (k = 0; k < 3; k++) share[k] = 0
    for (i in o) share[o[i]]++
    printf "| phase | jobs | one Redis: µs Redis CPU/job | cluster (sum of its primaries): µs/job | cluster / one | the same less idle CPU: one · cluster · ratio | Redis calls per 1,000 jobs: one · cluster | jobs/s one | jobs/s cluster | primary 1 / 2 / 3: share of Redis CPU |\n"
    printf "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
    np = split("enqueue_ready enqueue_delayed promotion drain", ph, " ")
    for (i = 1; i <= np; i++) {
      p = ph[i]
      s = ((("single", p) in us)) ? us["single", p] : "-"
      cl = ((("cluster", p) in us)) ? us["cluster", p] : "-"
      ratio = (s != "-" && cl != "-" && s > 0) ? sprintf("%.2f", cl / s) : "-"
      js = (s != "-" && wall["single", p] > 0) ? sprintf("%.0f", jobs[p] / wall["single", p]) : "-"
      jc = (cl != "-" && wall["cluster", p] > 0) ? sprintf("%.0f", jobs[p] / wall["cluster", p]) : "-"
      sh = "-"
      if (cl != "-" && cpu["cluster", p] > 0)
        sh = sprintf("%.0f %% / %.0f %% / %.0f %%", 100 * c["cluster", p, 0] / cpu["cluster", p],
                     100 * c["cluster", p, 1] / cpu["cluster", p], 100 * c["cluster", p, 2] / cpu["cluster", p])
      if (("single", p) in err || ("cluster", p) in err) sh = sh " (a side failed: see above)"
      net = "-"
      if (s != "-" && cl != "-" && (("single", "idle") in cpu) && (("cluster", "idle") in cpu)) {
        ns = (cpu["single", p] - cpu["single", "idle"] / jobs["idle"] * wall["single", p]) * 1e6 / jobs[p]
        nc = (cpu["cluster", p] - cpu["cluster", "idle"] / jobs["idle"] * wall["cluster", p]) * 1e6 / jobs[p]
        net = sprintf("%.2f · %.2f · %.2f", ns, nc, ns > 0 ? nc / ns : 0)
      }
      cj = sprintf("%s · %s", (s != "-") ? sprintf("%.0f", 1000 * calls["single", p] / jobs[p]) : "-",
                   (cl != "-") ? sprintf("%.0f", 1000 * calls["cluster", p] / jobs[p]) : "-")
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", p, jobs[p], s, cl, ratio, net, cj, js, jc, sh
    }
    printf "| idle (cluster bus etc.), CPU s per s | | %s | %s | | | | | | |\n",
      (("single", "idle") in cpu) ? sprintf("%.4f", cpu["single", "idle"] / jobs["idle"]) : "-",
      (("cluster", "idle") in cpu) ? sprintf("%.4f", cpu["cluster", "idle"] / jobs["idle"]) : "-"
    if (owners != "")
      printf "\nEach primary'"'"'s share of the jobs (by its queues): %.0f %% / %.0f %% / %.0f %%\n",
        100 * share[0] / queues, 100 * share[1] / queues, 100 * share[2] / queues
  }' "$RESULTS"
awk '$2 == "mode=cluster" {for (i = 3; i <= NF; i++) {split($i, kv, "="); f[kv[1]] = kv[2]}
  t = f["jobs0"] + f["jobs1"] + f["jobs2"]
  if (t > 0) printf "Each primary'"'"'s share of the jobs (counted in its keys): %.1f %% / %.1f %% / %.1f %% (%d / %d / %d ready streams)\n",
    100 * f["jobs0"] / t, 100 * f["jobs1"] / t, 100 * f["jobs2"] / t, f["streams0"], f["streams1"], f["streams2"]}' "$WORK/jobs.txt" 2>/dev/null
