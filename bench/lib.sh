# bench/lib.sh — sourced by the bench scripts.

# stop_pids PID...: SIGTERM each, wait up to STOP_GRACE seconds (default 8)
# for all of them, SIGKILL what is left, and reap them. Never by name.
stop_pids() {
  local p end
  for p in "$@"; do kill -TERM "$p" 2>/dev/null; done
  end=$((SECONDS + ${STOP_GRACE:-8}))
  for p in "$@"; do
    while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.05; done
    kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  return 0
}
