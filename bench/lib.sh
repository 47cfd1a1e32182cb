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

# start_redis DIR: a private redis-server on DIR/redis.sock, no persistence,
# log in DIR/redis.log. Sets SOCK and REDIS_PID; returns non-zero if it does
# not answer within 5 s.
start_redis() {
  SOCK=$1/redis.sock
  redis-server --port 0 --unixsocket "$SOCK" --unixsocketperm 700 --save '' --appendonly no \
    --dir "$1" --logfile "$1/redis.log" --daemonize no &
  REDIS_PID=$!
  for _ in $(seq 100); do rc ping >/dev/null 2>&1 && return 0; sleep 0.05; done
  return 1
}

# rc ARGS...: redis-cli against the private redis-server.
rc() { redis-cli -s "$SOCK" "$@"; }

# stop_redis: shut the private redis-server down (SIGTERM by pid if it does
# not answer), and reap it.
stop_redis() {
  if [ -n "${REDIS_PID:-}" ] && kill -0 "$REDIS_PID" 2>/dev/null; then
    rc shutdown nosave >/dev/null 2>&1 || kill "$REDIS_PID"
    wait "$REDIS_PID" 2>/dev/null
  fi
}
