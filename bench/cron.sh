#!/usr/bin/env bash
# bench/cron.sh — periodic job tick lateness (issue 8: a tick's job never
# ready before its tick; p99 within 2 ms after it).
#
#   bench/cron.sh                     # TICKS=60 SCHEDULERS=3
#
# On a private redis-server (unix socket, no persistence): stores a 1 s
# `every` schedule and a `* * * * * *` cron schedule, runs SCHEDULERS
# `jobrunner scheduler` processes for TICKS seconds, stops them, and reads
# the ready stream. For each tick T (the job id is NAME@T): lateness = the
# time its job entered the ready stream (the stream entry id, Redis's clock,
# whole ms, so a figure of L ms means L to L+1 ms) minus T. Prints p50, p90, p99,
# max, the early count (entered before T), and duplicate and missing ticks.
# Appends a key=value line to bench/results/cron.txt. No workers run.
# Stops what it started by pid.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
TICKS=${TICKS:-60} NS=${SCHEDULERS:-3}
JR=$BUILD/bin/jobrunner
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  [ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
  cmake --build "$BUILD" -j2 --target jobrunner >/dev/null || exit 1
fi
WORK=$(mktemp -d /tmp/jr-cron.XXXXXX)
REDIS_PID= PIDS=
. "$HERE/lib.sh"  # start_redis, rc, stop_redis, stop_pids
cleanup() {
  [ -n "$PIDS" ] && stop_pids $PIDS
  stop_redis
  rm -rf "$WORK"
}
trap cleanup EXIT
start_redis "$WORK" || { echo "redis did not start"; exit 1; }
URL=unix://$SOCK
printf 'log:\n  level: warn\n' >"$WORK/c.yaml"
"$JR" cron add every1s --every 1s -q bench --redis "$URL" noop >/dev/null || exit 1
"$JR" cron add cron1s --cron '* * * * * *' -q bench --redis "$URL" noop >/dev/null || exit 1
for i in $(seq "$NS"); do
  "$JR" scheduler -c "$WORK/c.yaml" --redis "$URL" 2>"$WORK/sched$i.log" &
  PIDS="$PIDS $!"
done
sleep "$TICKS"
stop_pids $PIDS
PIDS=
rc xrange 'jr:{bench}:ready' - + >"$WORK/ready.txt"
mkdir -p "$HERE/results"
python3 - "$WORK/ready.txt" "$NS" "$TICKS" <<'PY' | tee -a "$HERE/results/cron.txt"
import sys, collections
lines = open(sys.argv[1]).read().split('\n')
ticks = collections.defaultdict(list)  # name -> [(tick, entry_ms)]
i = 0
entry = None
while i < len(lines):
    l = lines[i]
    if '-' in l and l.split('-')[0].isdigit():
        entry = int(l.split('-')[0])
    elif l == 'id' and i + 1 < len(lines) and '@' in lines[i + 1]:
        name, t = lines[i + 1].rsplit('@', 1)
        ticks[name].append((int(t), entry))
        i += 1
    i += 1
for name in sorted(ticks):
    v = sorted(ticks[name])
    ts = [t for t, _ in v]
    dup = len(ts) - len(set(ts))
    missing = sum((b - a) // 1000 - 1 for a, b in zip(ts, ts[1:]) if b - a > 1000)
    late = sorted(e - t for t, e in v)
    early = sum(1 for x in late if x < 0)
    p = lambda q: late[min(len(late) - 1, int(q * len(late)))]
    print(f"schedule={name} schedulers={sys.argv[2]} ticks={len(ts)} p50_ms={p(0.5)} p90_ms={p(0.9)} p99_ms={p(0.99)} "
          f"max_ms={late[-1]} early={early} duplicates={dup} missing={missing}")
PY
