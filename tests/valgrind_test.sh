#!/bin/sh
# A worker (with its runner processes) and a scheduler under valgrind, on a
# private redis-server: jobs that succeed, are delayed, crash, time out and
# have no handler (deferred, then dead after worker.handler_wait). Fails on any valgrind error or definite leak, a job not
# settled, or a non-zero exit on SIGTERM. (valgrind has no pidfd_open: this
# also runs the executor's waitid fallback.)
# usage: valgrind_test.sh BUILD_DIR REDIS_SERVER RECORD_PLUGIN
set -eu
build=$1 redis_server=$2 record=$3
command -v valgrind >/dev/null || { echo "valgrind not installed: skipped"; exit 0; }
tmp=$(mktemp -d /tmp/jr-valgrind.XXXXXX)
redis_pid="" worker_pid="" sched_pid=""
cleanup() {
  for p in $worker_pid $sched_pid $redis_pid; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*.vg "$tmp"/*.log; do echo "--- $f"; cat "$f"; done; exit 1; }

"$redis_server" --port 0 --unixsocket "$tmp/s" --dir "$tmp" --save '' --appendonly no >"$tmp/redis.log" 2>&1 &
redis_pid=$!
url="unix://$tmp/s"
jr="$build/bin/jobrunner"
for i in $(seq 50); do "$jr" stats --redis "$url" >/dev/null 2>&1 && break; sleep 0.1; done
vg="valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --log-file=$tmp/%p.vg"
JRT_RECORD="$tmp/record.txt" JOBRUNNER_WORKER_HANDLER_WAIT=2s $vg "$jr" worker --redis "$url" --plugin "$record" \
  --plugin "$build/lib/jobrunner/jobs" >"$tmp/worker.log" 2>&1 &
worker_pid=$!
# A periodic schedule (time zone work under valgrind), changed at run time.
"$jr" cron add vg --cron '* * * * * *' --tz Europe/Berlin -q vgq --redis "$url" echo tick >/dev/null
$vg "$jr" scheduler --redis "$url" >"$tmp/sched.log" 2>&1 &
sched_pid=$!
"$jr" cron add vg2 --every 1s --missed once -q vgq --redis "$url" echo tock >/dev/null
for i in 1 2 3 4 5; do "$jr" enqueue --redis "$url" echo "x$i" >/dev/null; done
"$jr" enqueue --redis "$url" --in 500ms echo later >/dev/null
"$jr" enqueue --redis "$url" nosuch y >/dev/null
"$jr" enqueue --redis "$url" --max-attempts 1 crash y >/dev/null
"$jr" enqueue --redis "$url" --max-attempts 1 --timeout 300ms hang y >/dev/null
settled=""
for i in $(seq 300); do  # valgrind is slow to start: up to 30 s
  s=$("$jr" stats --redis "$url" --json)
  case "$s" in *'"ready":0,"pending":0,"delayed":0,"dead":3'*) settled=1; break ;; esac
  sleep 0.1
done
[ -n "$settled" ] || fail "jobs not settled: $s"
# The jobs can settle before the scheduler (slow under valgrind) has fired
# both schedules: wait for their first firings too (up to 30 s).
for i in $(seq 300); do
  grep -q "fired a periodic job schedule=vg " "$tmp/sched.log" &&
    grep -q "fired a periodic job schedule=vg2 " "$tmp/sched.log" && break
  sleep 0.1
done
kill -TERM "$worker_pid" "$sched_pid"
wait "$worker_pid" || fail "worker exited with $?"
wait "$sched_pid" || fail "scheduler exited with $?"
worker_pid="" sched_pid=""
grep -q "crashed: SIGSEGV" "$tmp/worker.log" || fail "the crash was not reported with its signal"
grep -q "timeout: still running" "$tmp/worker.log" || fail "the timeout was not reported"
grep -q "fired a periodic job schedule=vg " "$tmp/sched.log" || fail "the periodic schedule did not fire"
grep -q "fired a periodic job schedule=vg2 " "$tmp/sched.log" || fail "the schedule added at run time did not fire"
n=$(ls "$tmp"/*.vg | wc -l)
[ "$n" -ge 3 ] || fail "expected valgrind logs of worker, runners and scheduler, got $n"
if grep -l -E "ERROR SUMMARY: [1-9]|definitely lost: [1-9]" "$tmp"/*.vg; then fail "valgrind found errors"; fi
echo "valgrind: $n processes clean"
