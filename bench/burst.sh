#!/usr/bin/env bash
# bench/burst.sh — issue 23's yardstick: does a burst of due jobs start at
# the drain rate, and what does Redis itself spend per job (no-op handler)?
#
#   BUILD_DIR=build-bench bench/burst.sh          # N_BURST=1000000, REPS=3
#   N_BURST=200000 REPS=1 bench/burst.sh          # a quick look
#
# On a private redis-server (unix socket, no persistence), REPS times, in
# this order so that each figure has the ratio of its own run:
#   ready:   N_BURST no-op jobs enqueued ready (jr_peer bulk, C API,
#            pipelined), then 2 workers started: the drain rate (launch until
#            ready, pending and delayed are all 0);
#   delayed: N_BURST no-op jobs enqueued due 3 s later (jr_peer bulkdelayed:
#            the time wheel), no scheduler running; once all are due, 2
#            workers start, then one scheduler: the burst time (scheduler
#            launch until every job has run), against the target
#            1.1 x N_BURST / (the drain rate of the same rep);
#   live:    the burst as production sees it: scheduler and 2 workers
#            running, N_BURST jobs due at one Unix ms LIVE_LEAD_MS (20000)
#            after the enqueue starts (their bucket cascades into the sorted
#            set before): from that ms until every job has run.
# Redis's own CPU (INFO cpu, user + system, all threads) is read around each
# phase: per job, enqueue and drain for ready jobs; enqueue and everything
# after it (wheel, promotion, delivery, acknowledgement) for delayed ones.
# The wait polls `jr_peer waitempty` (a stats call every 2 ms): its own Redis
# time is inside the drain figures (about 7 commands per poll; < 0.05 us/job
# at 1M). INFO commandstats of each drain is kept per command (us/job), the
# per-command profile RESULTS.md records. Each rep then runs shape_floor
# (bench/shape_floor.c) on the same Redis: Redis's CPU per job for the bare
# shape, no Lua (XADD, XREADGROUP, XACK, XTRIM; delayed: ZADD, ZPOPMIN and
# an XADD per job from the client; and each 1 s bucket a stream of its own,
# read in place once due), the floors of that rep.
# Appends one key=value line per rep to bench/results/burst.txt and prints
# the medians. Stops what it started by pid.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
N=${N_BURST:-1000000}
REPS=${REPS:-3}
JR=$BUILD/bin/jobrunner PEER=$BUILD/bench/jr_peer PLUGIN=$BUILD/bench/bench_job.so FLOOR=$BUILD/bench/shape_floor
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  [ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
  cmake --build "$BUILD" -j2 --target jobrunner bench_job jr_peer shape_floor >/dev/null || exit 1
fi
WORK=$(mktemp -d /tmp/jr-burst.XXXXXX)
REDIS_PID= PIDS=()
. "$HERE/lib.sh"  # start_redis, rc, stop_redis, stop_pids
cleanup() {
  [ ${#PIDS[@]} -gt 0 ] && stop_pids "${PIDS[@]}"
  stop_redis
  rm -rf "$WORK"
}
trap cleanup EXIT
log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }
start_redis "$WORK" || { echo "redis did not start"; exit 1; }
export BENCH_SOCKET=$SOCK BENCH_QUEUE=bench BENCH_HANDLER=noop
printf 'redis:\n  url: unix://%s\nlog:\n  level: warn\n' "$SOCK" >"$WORK/c.yaml"
cpu() { rc info cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ { s += $2 } END { printf "%.6f", s }'; }
per_job() { awk -v a="$1" -v b="$2" -v n="$N" 'BEGIN { printf "%.2f", (b - a) * 1e6 / n }'; }
# us of Redis per job, by command (the commands a function runs count on
# their own lines too; fcall is the whole call): "fcall=1.23,xadd=0.40,..."
profile() { rc info commandstats | tr -d '\r' | awk -F'[:=,]' -v n="$N" '
  /^cmdstat_/ { c = $1; sub("cmdstat_", "", c); if (c != "info" && $5 / n >= 0.01) { printf "%s%s=%.2f", sep, c, $5 / n; sep = "," } }'; }
workers() { local i; for i in 1 2; do
  "$JR" worker -c "$WORK/c.yaml" -q bench --plugin "$PLUGIN" >>"$WORK/worker.log" 2>&1 </dev/null &
  PIDS+=($!); done; }
wait_empty() { # prints t_empty (monotonic ms) or fails
  local out; out=$("$PEER" waitempty 300) || return 1
  case "$out" in *timeout*) log "not empty after 300 s: $out"; return 1 ;; esac
  sed -n 's/.*t_empty=\([0-9.]*\).*/\1/p' <<<"$out"
}
"$PEER" bulk 10 >/dev/null  # load the function library once
mkdir -p "$HERE/results"
for rep in $(seq "$REPS"); do
  # --- ready
  rc flushall >/dev/null
  c0=$(cpu); "$PEER" bulk "$N" >/dev/null || { log "enqueue failed"; exit 1; }; c1=$(cpu)
  rc config resetstat >/dev/null
  t0=$("$PEER" mono); workers
  t1=$(wait_empty) || exit 1
  c2=$(cpu); RPROF=$(profile)
  stop_pids "${PIDS[@]}"; PIDS=()
  DRAIN=$(awk -v a="$t0" -v b="$t1" -v n="$N" 'BEGIN { printf "%.0f", n / ((b - a) / 1000) }')
  RENQ=$(per_job "$c0" "$c1") RDRAIN=$(per_job "$c1" "$c2")
  # --- delayed, all due at once
  rc flushall >/dev/null
  c0=$(cpu); "$PEER" bulkdelayed "$N" 3000 >/dev/null || { log "delayed enqueue failed"; exit 1; }; c1=$(cpu)
  sleep 4.1  # every job is due now
  rc config resetstat >/dev/null; c1b=$(cpu)
  workers; sleep 1  # the workers are up and blocked on the empty stream
  t0=$("$PEER" mono)
  "$JR" scheduler -c "$WORK/c.yaml" -q bench >>"$WORK/scheduler.log" 2>&1 </dev/null &
  PIDS+=($!)
  t1=$(wait_empty) || exit 1
  c2=$(cpu); DPROF=$(profile)
  stop_pids "${PIDS[@]}"; PIDS=()
  BURST_S=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1000 }')
  TARGET_S=$(awk -v n="$N" -v d="$DRAIN" 'BEGIN { printf "%.3f", 1.1 * n / d }')
  DENQ=$(per_job "$c0" "$c1") DREST=$(per_job "$c1" "$c2") DIDLE=$(per_job "$c1" "$c1b")
  # --- a burst as it happens in production: the scheduler and the workers
  # run throughout; N_BURST jobs due at one Unix ms (jr_peer clientbulk with
  # BENCH_AT_MS), LIVE_LEAD_MS after the enqueue starts, so that the wheel
  # has cascaded their bucket into the sorted set before they fall due. The
  # time counts from that ms (Redis's clock, mapped onto the monotonic one)
  # until every job has run.
  rc flushall >/dev/null
  "$PEER" bulk 10 >/dev/null; "$PEER" waitempty 1 >/dev/null 2>&1  # the group exists
  workers
  "$JR" scheduler -c "$WORK/c.yaml" -q bench >>"$WORK/scheduler.log" 2>&1 </dev/null &
  PIDS+=($!)
  sleep 1
  m0=$("$PEER" mono); r0=$(rc time | tr -d '\r' | awk 'NR == 1 { s = $1 } NR == 2 { printf "%.3f", s * 1000 + $1 / 1000 }')
  AT=$(awk -v r="$r0" -v l="${LIVE_LEAD_MS:-20000}" 'BEGIN { printf "%.0f", r + l }')
  DUE_MONO=$(awk -v m="$m0" -v r="$r0" -v a="$AT" 'BEGIN { printf "%.3f", m + (a - r) }')
  c0=$(cpu); BENCH_AT_MS=$AT "$PEER" clientbulk "$N" 0 >/dev/null || { log "enqueue at one ms failed"; exit 1; }; c1=$(cpu)
  LATE_ENQ=$(awk -v d="$DUE_MONO" -v m="$("$PEER" mono)" 'BEGIN { print (m >= d) ? 1 : 0 }')
  [ "$LATE_ENQ" = 1 ] && log "the enqueue ran past the due time: raise LIVE_LEAD_MS"
  rc config resetstat >/dev/null
  t1=$(wait_empty) || exit 1
  c2=$(cpu); LPROF=$(profile)
  stop_pids "${PIDS[@]}"; PIDS=()
  LIVE_S=$(awk -v a="$DUE_MONO" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1000 }')
  LENQ=$(per_job "$c0" "$c1") LREST=$(per_job "$c1" "$c2")
  # --- the floor of the same rep: the bare shape, no Lua (shape_floor.c)
  FL=$("$FLOOR" "$SOCK" "$N") || { log "shape_floor failed"; exit 1; }
  FREADY=$(sed -n 's/^floor phase=ready .* redis_us_total=\([0-9.]*\).*/\1/p' <<<"$FL")
  FDELAYED=$(sed -n 's/^floor phase=delayed .* redis_us_total=\([0-9.]*\).*/\1/p' <<<"$FL")
  FINPLACE=$(sed -n 's/^floor phase=inplace .* redis_us_total=\([0-9.]*\).*/\1/p' <<<"$FL")
  FLEAN=$(sed -n 's/^floor phase=inplace_lean .* redis_us_total=\([0-9.]*\).*/\1/p' <<<"$FL")
  FPROF=$(sed -n 's/^floor phase=ready .* redis_us_total=[0-9.]* \(.*\)/\1/p' <<<"$FL" | tr ' ' ',')
  LINE="burst stamp=$(date -u +%FT%TZ) rep=$rep jobs=$N build=$BUILD drain_jobs_per_s=$DRAIN burst_s=$BURST_S target_s=$TARGET_S burst_over_drain=$(awk -v b="$BURST_S" -v n="$N" -v d="$DRAIN" 'BEGIN { printf "%.2f", b / (n / d) }') ready_redis_us_enqueue=$RENQ ready_redis_us_drain=$RDRAIN ready_redis_us_total=$(awk -v a="$RENQ" -v b="$RDRAIN" 'BEGIN { printf "%.2f", a + b }') delayed_redis_us_enqueue=$DENQ delayed_redis_us_after=$DREST delayed_redis_us_total=$(awk -v a="$DENQ" -v b="$DREST" 'BEGIN { printf "%.2f", a + b }') delayed_redis_us_waiting=$DIDLE live_burst_s=$LIVE_S live_over_drain=$(awk -v b="$LIVE_S" -v n="$N" -v d="$DRAIN" 'BEGIN { printf "%.2f", b / (n / d) }') live_redis_us_enqueue=$LENQ live_redis_us_after=$LREST live_profile=$LPROF ready_profile=$RPROF delayed_profile=$DPROF floor_ready_us=$FREADY floor_delayed_us=$FDELAYED floor_inplace_us=$FINPLACE floor_inplace_lean_us=$FLEAN floor_ready_profile=$FPROF loadavg=$(cut -d' ' -f1 /proc/loadavg)"
  echo "$LINE" >>"$HERE/results/burst.txt"
  echo "$LINE" | tee -a "$WORK/lines"
done
med() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" "$WORK/lines" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo
echo "== medians of $REPS (N=$N, no-op handler, 2 workers, unix socket)"
echo "  drain rate (ready)                          $(med drain_jobs_per_s) jobs/s"
echo "  burst: 1 scheduler, all due, until all ran  $(med burst_s) s   target <= $(med target_s) s (1.1 x N / drain)   ratio burst/(N/drain) $(med burst_over_drain)"
echo "  burst, scheduler and workers running, all due at one ms (cascaded before): $(med live_burst_s) s   ratio $(med live_over_drain)   Redis CPU per job: enqueue $(med live_redis_us_enqueue) + cascade..ack $(med live_redis_us_after) us"
echo "  Redis CPU per ready job                     $(med ready_redis_us_total) us  (enqueue $(med ready_redis_us_enqueue) + drain $(med ready_redis_us_drain))   target <= 2.0"
echo "  Redis CPU per delayed job                   $(med delayed_redis_us_total) us  (enqueue $(med delayed_redis_us_enqueue) + wheel..ack $(med delayed_redis_us_after))   target <= 3.0"
echo "  the bare shape, no Lua (shape_floor)        ready $(med floor_ready_us) us   delayed (sorted set, copied by the client) $(med floor_delayed_us) us"
echo "                                              delayed, each bucket a stream read in place: $(med floor_inplace_us) us (fields id h e d p), $(med floor_inplace_lean_us) us (h d p)"
