#!/usr/bin/env bash
# bench/lua_cost.sh — Redis time of one enqueue call of ONE job due now
# (`FCALL jr_enqueue_many` as the C API sends it), for one or several
# versions of the function library, alternated within each repetition on one
# private redis-server (unix socket). Redis time = `usec_per_call` of fcall in
# INFO commandstats (reset before each measure), over N calls made by
# redis-benchmark with one client; the commands the call ran follow, per call.
#
#   bench/lua_cost.sh                                         # this tree's library
#   LIBS="before=/tmp/base/build/runner/jobrunner.lua after=build/runner/jobrunner.lua" REPS=3 bench/lua_cost.sh
#
# (A library is the file the build joins from runner/lua/; by default this
# tree's parts are joined here by runner/lua/join.sh.)
#
# Every process started here is stopped by its pid.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
REPS=${REPS:-3}
N=${N:-20000}
WORK=$(mktemp -d /tmp/jr-luacost.XXXXXX)
SOCK=$WORK/redis.sock
REDIS_PID=
cleanup() {
  if [ -n "$REDIS_PID" ] && kill -0 "$REDIS_PID" 2>/dev/null; then
    kill "$REDIS_PID"
    wait "$REDIS_PID" 2>/dev/null
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ -z "${LIBS:-}" ]; then
  sh "$ROOT/runner/lua/join.sh" "$ROOT/runner/lua" "$WORK/jobrunner.lua" || exit 1
  LIBS="this=$WORK/jobrunner.lua"
fi
redis-server --unixsocket "$SOCK" --port 0 --save '' --appendonly no --dir "$WORK" --daemonize no \
  >"$WORK/redis.log" 2>&1 &
REDIS_PID=$!
rc() { redis-cli -s "$SOCK" "$@"; }
for _ in $(seq 100); do rc ping >/dev/null 2>&1 && break; sleep 0.05; done
rc ping >/dev/null 2>&1 || { echo "redis did not start" >&2; exit 1; }
KEYS=('jr:{b}:ready' 'jr:{b}:delayed' 'jr:{b}:wake' 'jr:{b}:seq')
JOB=(0 '' '' 2 h bench p 0123456789012345678901234567890123456789012345678901)
echo "uptime: $(uptime | sed 's/.*load/load/')"
for k in $(seq "$REPS"); do
  for l in $LIBS; do
    name=${l%%=*} file=${l#*=}
    rc flushall >/dev/null
    rc function flush >/dev/null
    rc -x function load <"$file" >/dev/null
    rc fcall jr_enqueue_many 4 "${KEYS[@]}" "${JOB[@]}" >/dev/null # the stream and its group exist
    rc config resetstat >/dev/null
    redis-benchmark -s "$SOCK" -c 1 -n "$N" fcall jr_enqueue_many 4 "${KEYS[@]}" "${JOB[@]}" >/dev/null 2>&1
    echo "lib=$name rep=$k calls=$N $(rc info commandstats | tr -d '\r' | awk -F'[:=,]' -v n="$N" '
      /^cmdstat_fcall:/ { f = sprintf("fcall_us=%.2f", $5 / n) }
      /^cmdstat_/ && !/^cmdstat_(fcall|config\||info:)/ { c = c sprintf(" %s=%.2f", substr($1, 9), $3 / n) }
      END { print f, "commands_per_call:" c }') entries=$(rc xlen 'jr:{b}:ready')"
  done
done
