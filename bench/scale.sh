#!/usr/bin/env bash
# bench/scale.sh — optional scale test: 10 million delayed jobs in one queue.
#
#   BUILD_DIR=build-bench bench/scale.sh          # N_SCALE=10000000 (~0.8 GB of Redis memory in the wheel)
#   N_SCALE=1000000 bench/scale.sh
#
# On a private redis-server (unix socket, --save '' --appendonly no):
#   1. enqueues N_SCALE delayed jobs (due in 1 h, 50-byte payload) with jr_peer
#      bulkdelayed (C API, pipelined, chunks of 1000): enqueue rate, and
#      used_memory per delayed job at that size;
#   2. with those N_SCALE jobs still waiting, starts a scheduler and 2 workers,
#      warms them up, and runs the delayed workload of jobpath.sh (1,000 jobs over
#      1 s, due +2 s; LATE_REPS=3 runs, LATE_GAP_S=5 apart, medians): lateness min/p50/p99/max and early count — do 10M
#      jobs waiting (in the time wheel) slow down the job that is due now?
#      Also what that window cost: FCALLs and their Redis time, the
#      schedulers' wake-ups (XREAD) and the pokes of the wake stream; and,
#      on a connection of its own, a PING every 1 ms for the window (jr_peer
#      stallprobe): how long Redis itself could not answer meanwhile. The
#      machine's memory monitor (DAMON, when the kernel runs one) is noted:
#      on this VM it stalls a Redis holding 10M jobs every 0.5 s.
#   3. cancel and locate of one job among them: 100 explicit ids and 100
#      generated ids (due in 1 h), Redis's CPU per call (INFO commandstats);
#   4. a burst: with no scheduler running, N_BURST (2,000,000) more jobs due
#      3 s after their enqueue; once all are due, one scheduler starts and is
#      timed until they are all in the stream (promotion rate with N_SCALE waiting);
#   5. the XADD -P 64 ceiling of this redis (redis-benchmark, 1 client,
#      1M requests), for the ratio.
# Appends a key=value line to bench/results/scale.txt. Stops what it started by pid.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
N_SCALE=${N_SCALE:-10000000}
N_BURST=${N_BURST:-2000000}
JR=$BUILD/bin/jobrunner PEER=$BUILD/bench/jr_peer PLUGIN=$BUILD/bench/bench_job.so
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  [ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
  cmake --build "$BUILD" -j2 --target jobrunner bench_job jr_peer >/dev/null || exit 1
fi
log() { echo "[scale $(date +%T)] $*" >&2; }

# The kernel's data access monitor (DAMON), when running, samples every
# page's accessed bit each sample interval: "on/<sample ms>" or "off".
DAMON=off
for k in /sys/kernel/mm/damon/admin/kdamonds/[0-9]*; do
  [ "$(cat "$k/state" 2>/dev/null)" = on ] || continue
  us=$(cat "$k"/contexts/0/monitoring_attrs/intervals/sample_us 2>/dev/null)
  DAMON="on/$(( ${us:-0} / 1000 ))ms"
done

WORK=$(mktemp -d /tmp/jr-scale.XXXXXX)
PIDS=()
REDIS_PID=
. "$HERE/lib.sh"  # stop_pids, start_redis, rc, stop_redis
cleanup() {
  [ ${#PIDS[@]} -gt 0 ] && stop_pids "${PIDS[@]}"
  stop_redis
  if [ "${OK:-0}" = 1 ] && [ "${KEEP_WORK:-0}" != 1 ]; then rm -rf "$WORK"; else log "logs kept in $WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
start_redis "$WORK" || { log "redis did not start"; exit 1; }
export BENCH_SOCKET=$SOCK BENCH_QUEUE=bench
CONF=$WORK/jobrunner.yaml
printf 'log:\n  level: warn\n' >"$CONF"
used() { rc info memory | sed -n 's/^used_memory:\([0-9]*\).*/\1/p'; }

"$PEER" bulk 10 >/dev/null && rc flushall >/dev/null && sleep 0.5
before=$(used)
log "enqueueing $N_SCALE delayed jobs (due in 1 h)"
ENQ=$(BENCH_PAYLOAD_BYTES=50 "$PEER" bulkdelayed "$N_SCALE" 3600000) || { log "enqueue failed"; exit 1; }
sleep 0.5
after=$(used)
BPJ=$(( (after - before) / N_SCALE ))
log "$ENQ; $BPJ bytes per delayed job"

"$JR" scheduler -c "$CONF" --redis "unix://$SOCK" -q bench >>"$WORK/scheduler.log" 2>&1 </dev/null &
PIDS+=($!)
for i in 1 2; do
  BENCH_N=0 "$JR" worker -c "$CONF" --redis "unix://$SOCK" -q bench --plugin "$PLUGIN" >>"$WORK/worker.log" 2>&1 </dev/null &
  PIDS+=($!)
done
"$PEER" warm 200 >/dev/null
"$PEER" waitkey get bench:done 200 60 >/dev/null || { log "warm-up did not complete"; exit 1; }
sleep 1
rc del bench:lat >/dev/null
# The workload LATE_REPS times (LATE_GAP_S apart): the first starts a second
# after the warm-up that follows the N_SCALE enqueue; the figures reported are the medians of the runs,
# each run's in late_runs (p50/p99/max ms).
LATE_REPS=${LATE_REPS:-3} LATE_GAP_S=${LATE_GAP_S:-5}
wake_added() { rc xinfo stream 'jr:{bench}:wake' 2>/dev/null | awk 'p { print; exit } /^entries-added$/ { p = 1 }'; }
cstat() { rc info commandstats | tr -d '\r' | sed -n "s/^cmdstat_$1:calls=\([0-9]*\),usec=\([0-9]*\).*/\1 \2/p"; }
LATE_RUNS= EARLY=0
for rep in $(seq "$LATE_REPS"); do
  [ "$rep" -gt 1 ] && sleep "$LATE_GAP_S"
  rc del bench:lat >/dev/null
  log "delayed workload with $N_SCALE jobs waiting (run $rep of $LATE_REPS)"
  W0=$(wake_added); rc config resetstat >/dev/null
  "$PEER" stallprobe 3.5 >"$WORK/probe.$rep" & PROBE=$!
  DENQ=$("$PEER" delayed 1000 1000 2000)
  "$PEER" waitkey llen bench:lat 1000 60 >/dev/null
  wait "$PROBE"; PROBE_LINE=$(cat "$WORK/probe.$rep")
  read -r pmax pstalls <<<"$(echo "$PROBE_LINE" | sed -n 's/.*probe_max_ms=\([0-9.]*\) probe_stalls_over_2ms=\([0-9]*\).*/\1 \2/p')"
  # what the window cost Redis: FCALLs (enqueue, promote, ack, ...), the
  # schedulers' wake-ups (XREAD) and the pokes of the wake stream
  read -r LF_CALLS LF_US <<<"$(cstat fcall)"; read -r LX_CALLS _ <<<"$(cstat xread)"
  L_POKES=$(( $(wake_added) - ${W0:-0} ))
  read -r lmin l50 l99 lmax e <<<"$(rc lrange bench:lat 0 -1 | sort -g | awk '
    { v[NR] = $1; if ($1 < 0) e++ }
    function p(q,  i) { i = int(q * (NR - 1) + 0.5) + 1; return v[i] }
    END { printf "%.2f %.2f %.2f %.2f %d\n", v[1], p(0.5), p(0.99), v[NR], e }')"
  log "lateness run $rep: min $lmin p50 $l50 p99 $l99 max $lmax ms, early $e; window: ${LF_CALLS:-0} FCALLs (${LF_US:-0} us of Redis), ${LX_CALLS:-0} scheduler XREADs, $L_POKES pokes; Redis unanswering (PING probe): max ${pmax:-?} ms, ${pstalls:-?} round trips over 2 ms"
  LATE_RUNS="$LATE_RUNS${LATE_RUNS:+,}$l50/$l99/$lmax" EARLY=$((EARLY + e))
  PROBE_RUNS="${PROBE_RUNS:-}${PROBE_RUNS:+,}${pmax:-?}/${pstalls:-?}"
  LMIN_ALL="${LMIN_ALL:-} $lmin" L50_ALL="${L50_ALL:-} $l50" L99_ALL="${L99_ALL:-} $l99" LMAX_ALL="${LMAX_ALL:-} $lmax"
done
median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
LMIN=$(echo "$LMIN_ALL" | median) L50=$(echo "$L50_ALL" | median) L99=$(echo "$L99_ALL" | median) LMAX=$(echo "$LMAX_ALL" | median)
LEFT=$("$JR" stats --json --redis "unix://$SOCK" -q bench)
stop_pids "${PIDS[@]}"; PIDS=()

# 3. cancel / locate of one job among N_SCALE
Q=bench
K="'jr:{$Q}:ready' 'jr:{$Q}:delayed' 'jr:{$Q}:ids'"
{ printf "FCALL jr_enqueue_many 4 'jr:{%s}:ready' 'jr:{%s}:delayed' 'jr:{%s}:wake' 'jr:{%s}:seq' 0" $Q $Q $Q $Q
  for i in $(seq 100); do printf " +3600000 '' 1 h bench"; done; echo; } >"$WORK/gen.cmd"
rc <"$WORK/gen.cmd" | awk 'NR % 2 == 1' >"$WORK/gen.ids"
for i in $(seq 100); do
  printf "FCALL jr_enqueue 5 'jr:{%s}:ready' 'jr:{%s}:delayed' 'jr:{%s}:wake' 'jr:{%s}:seq' 'jr:{%s}:uniq:t-%d' +3600000 t-%d 0 h bench\n" \
    $Q $Q $Q $Q $Q "$i" "$i"
done | rc >/dev/null
: >"$WORK/locate.cmd"; : >"$WORK/cancel.cmd"
for id in $(cat "$WORK/gen.ids") $(seq -f 't-%g' 100); do
  echo "FCALL jr_locate 4 $K 'jr:{$Q}:dead' $id" >>"$WORK/locate.cmd"
  echo "FCALL jr_cancel 5 $K 'jr:{$Q}:cancelled' 'jr:{$Q}:uniq:$id' $id" >>"$WORK/cancel.cmd"
done
usec() { rc info commandstats | tr -d '\r' | sed -n 's/^cmdstat_fcall:.*usec_per_call=\([0-9.]*\).*/\1/p'; }
rc config resetstat >/dev/null; rc <"$WORK/locate.cmd" >"$WORK/locate.out"; LOC_US=$(usec)
rc config resetstat >/dev/null; rc <"$WORK/cancel.cmd" >"$WORK/cancel.out"; CAN_US=$(usec)
CANCELLED=$(grep -c '^cancelled$' "$WORK/cancel.out")
log "locate ${LOC_US} us, cancel ${CAN_US} us of Redis per call among $N_SCALE ($CANCELLED/200 cancelled)"

# 4. a burst of N_BURST due at once, promoted while N_SCALE wait
delayed() { rc eval "return redis.call('ZCARD', KEYS[1]) + (tonumber(redis.call('GET', KEYS[2]) or '0'))" 2 'jr:{bench}:delayed' 'jr:{bench}:wheel:n'; }
base=$(delayed)
BENQ=$("$PEER" bulkdelayed "$N_BURST" 3000) || { log "burst enqueue failed"; exit 1; }
sleep 4.1
rc del 'jr:{bench}:ready' >/dev/null
t0=$("$PEER" mono)
"$JR" scheduler -c "$CONF" --redis "unix://$SOCK" -q bench >>"$WORK/scheduler.log" 2>&1 </dev/null &
PIDS+=($!)
while [ "$(delayed)" -gt "$base" ]; do sleep 0.01; done
t1=$("$PEER" mono)
stop_pids "${PIDS[@]}"; PIDS=()
BURST_S=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", (b-a)/1000}')
BURST_RATE=$(awk -v n="$N_BURST" -v s="$BURST_S" 'BEGIN{printf "%.0f", n/s}')
BURST_STREAMED=$(rc xlen 'jr:{bench}:ready')
log "burst: $(echo "$BENQ" | tr -s ' '); promoted $BURST_STREAMED in $BURST_S s = $BURST_RATE jobs/s"

# 5. the XADD -P 64 ceiling of this redis
CEIL=$(timeout 300 redis-benchmark -s "$SOCK" -c 1 -P 64 -n 1000000 --csv XADD bench:ceiling '*' f v 2>/dev/null | tail -1 | awk -F'","' '{print $2}')
log "XADD -P 64 ceiling: $CEIL ops/s"

LINE="scale stamp=$(date -u +%Y-%m-%dT%H:%M:%SZ) delayed_jobs=$N_SCALE $(echo "$ENQ" | tr -s ' ') used_before=$before used_after=$after bytes_per_delayed_job=$BPJ late_min_ms=$LMIN late_p50_ms=$L50 late_p99_ms=$L99 late_max_ms=$LMAX late_runs=$LATE_RUNS early=$EARLY late_fcalls=${LF_CALLS:-0} late_fcall_us=${LF_US:-0} late_sched_xreads=${LX_CALLS:-0} late_pokes=$L_POKES redis_stall_runs=$PROBE_RUNS damon=$DAMON locate_redis_us=$LOC_US cancel_redis_us=$CAN_US cancelled=$CANCELLED/200 burst=$N_BURST burst_enqueue_jobs_per_s=$(echo "$BENQ" | sed -n 's/.*enqueue_jobs_per_s=\([0-9]*\).*/\1/p') burst_promote_s=$BURST_S burst_promote_jobs_per_s=$BURST_RATE burst_streamed=$BURST_STREAMED xadd_p64_ceiling=$CEIL uptime=\"$(uptime | sed 's/.*load/load/')\""
mkdir -p "$HERE/results"
echo "$LINE" | tee -a "$HERE/results/scale.txt"
echo "stats after: $LEFT"
OK=1
