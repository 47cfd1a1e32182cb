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
# max, the early count (entered before T), duplicate and missing ticks, and
# via_delayed: how many ticks' jobs were made delayed (the scheduler fired
# before Redis's clock reached the tick) and so waited for a promotion.
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
import sys, re, collections
# redis-cli prints one element a line: an entry id (digits-digits, which no
# field value here has: ids are NAME@T, other values plain digits, words
# or empty), then its field/value pairs.
entries, cur = [], None
for l in open(sys.argv[1]).read().split('\n')[:-1]:
    if re.fullmatch(r'\d+-\d+', l):
        cur = [int(l.split('-')[0]), []]
        entries.append(cur)
    elif cur is not None:
        cur[1].append(l)
ticks = collections.defaultdict(list)  # name -> [(tick, entry_ms, via_delayed)]
for ms, kv in entries:
    f = dict(zip(kv[0::2], kv[1::2]))
    if '@' in f.get('id', ''):
        name, t = f['id'].rsplit('@', 1)
        # a job that waited in the delayed set carries its enqueue time (e)
        ticks[name].append((int(t), ms, 'e' in f))
for name in sorted(ticks):
    v = sorted(ticks[name])
    ts = [t for t, _, _ in v]
    dup = len(ts) - len(set(ts))
    missing = sum((b - a) // 1000 - 1 for a, b in zip(ts, ts[1:]) if b - a > 1000)
    late = sorted(e - t for t, e, _ in v)
    early = sum(1 for x in late if x < 0)
    delayed = sum(1 for _, _, d in v if d)
    p = lambda q: late[min(len(late) - 1, int(q * len(late)))]
    print(f"schedule={name} schedulers={sys.argv[2]} ticks={len(ts)} p50_ms={p(0.5)} p90_ms={p(0.9)} p99_ms={p(0.99)} "
          f"max_ms={late[-1]} early={early} duplicates={dup} missing={missing} via_delayed={delayed}")
PY
