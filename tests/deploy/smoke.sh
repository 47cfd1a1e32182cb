#!/bin/bash
# The deployment smoke test: builds the images, starts docker-compose.yml
# with podman-compose and the example plugin of docs/examples/plugin (the
# README's deployment section, step by step), runs jobs through it, kills a
# worker container mid-job, stops the stack and checks every service exited
# 0; then runs the TLS variant (docker-compose.tls.yml) with the same images
# as a second project: jobs and a delayed job over TLS, Redis refusing a
# plain connection and one without a client certificate; then the Redis
# Cluster variant (docker-compose.cluster.yml): 6 nodes made one cluster by
# its one-shot service, jobs and a delayed job through the CLI, stats. At
# the end it removes every container, volume and network it made.
# usage: tests/deploy/smoke.sh [SOURCE_DIR]     (bounded: SMOKE_TIMEOUT, default 1200 s)
# JR_SMOKE_ONLY=cluster builds the images and runs only the cluster variant.
# Needs podman + podman-compose (.ci/container-base.sh sets them up).
set -euo pipefail
# The whole test is bounded: past the limit, timeout sends SIGTERM and the
# EXIT trap still cleans up.
if [ -z "${JR_SMOKE_BOUNDED:-}" ]; then
  export JR_SMOKE_BOUNDED=1
  exec timeout -k 60 "${SMOKE_TIMEOUT:-1200}" bash "$0" "$@"
fi
trap 'exit 143' TERM
src=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
cd "$src"
export COMPOSE_PROJECT_NAME="jrsmoke$$"
P=$COMPOSE_PROJECT_NAME PT="${P}tls" PC="${P}cl"
cur=$P   # the project the helpers below look at: $P, then $PT (TLS), then $PC (cluster)
only=${JR_SMOKE_ONLY:-}
case "$only" in ""|cluster) ;; *) echo "JR_SMOKE_ONLY: \"$only\" is not a part (cluster)" >&2; exit 2 ;; esac
tmp=$(mktemp -d /tmp/jr-smoke.XXXXXX)
app="localhost/$P-app:1" app2="localhost/$P-app:2"
started=$(date +%s)

# Whether standard input has a line matching $1. It reads all of its input:
# `producer | grep -q` under pipefail fails when grep stops reading early
# and the producer dies of SIGPIPE, even though grep found the line.
has() { grep -c -- "$1" >/dev/null; }
log() { echo "smoke [$(( $(date +%s) - started ))s] $*"; }
fail() { log "FAIL: $*"; dump; exit 1; }
dump() {
  for c in $(podman ps -a --filter "label=io.podman.compose.project=$cur" --format '{{.Names}}' 2>/dev/null); do
    echo "--- logs of $c (last 30 lines)"; podman logs --tail 30 "$c" 2>&1 || true
  done
}
pc() { podman-compose -p "$P" "$@"; }
pct() { podman-compose -p "$PT" -f docker-compose.yml -f docker-compose.tls.yml "$@"; }
pcc() { podman-compose -p "$PC" -f docker-compose.yml -f docker-compose.cluster.yml "$@"; }
cleanup() {
  set +e
  log "cleaning up"
  pc down -v -t 20 >/dev/null 2>&1
  pct down -v -t 20 >/dev/null 2>&1
  pcc down -v -t 20 >/dev/null 2>&1
  for p in "$P" "$PT" "$PC"; do
    for c in $(podman ps -a --filter "label=io.podman.compose.project=$p" --format '{{.ID}}'); do podman rm -f "$c" >/dev/null 2>&1; done
    for v in $(podman volume ls --filter "label=io.podman.compose.project=$p" --format '{{.Name}}'); do podman volume rm -f "$v" >/dev/null 2>&1; done
    podman network rm -f "${p}_default" >/dev/null 2>&1
  done
  podman rmi -f "$app" "$app2" >/dev/null 2>&1
  # the layers our builds left untagged (an image rebuilt replaces the tag)
  podman images -q --filter dangling=true | sort > "$tmp/dangling.after"
  comm -13 "$tmp/dangling.before" "$tmp/dangling.after" | xargs -r podman rmi -f >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT

command -v podman-compose >/dev/null || fail "podman-compose missing: run .ci/container-base.sh"

# The settings of README's .env, from the environment (which compose
# prefers to a .env file; podman-compose 1.0 has no --env-file): a fresh
# password, and the image with the example plugin.
export REDIS_PASSWORD="smoke-$RANDOM-$RANDOM"

log "building the images"
podman images -q --filter dangling=true | sort > "$tmp/dangling.before"
JOBRUNNER_IMAGE=localhost/jobrunner:latest pc build >"$tmp/build.log" 2>&1 \
  || { tail -40 "$tmp/build.log"; fail "image build"; }
podman build --target sdk -t localhost/jobrunner-sdk:latest . >>"$tmp/build.log" 2>&1 || fail "sdk image"
podman build -t "$app" docs/examples/plugin >>"$tmp/build.log" 2>&1 || { tail -20 "$tmp/build.log"; fail "plugin image"; }

export JOBRUNNER_IMAGE="$app"
containers() { podman ps -a --filter "name=^${cur}_$1_[0-9]+$" --format "{{.Names}}" | sort; }
# Healthy: every container's healthcheck passes (podman runs them from
# systemd timers where systemd runs; otherwise we run them here).
healthy() {
  local c=$1 i
  for i in $(seq 1 60); do
    podman healthcheck run "$c" >/dev/null 2>&1 && return 0
    sleep 1
  done
  return 1
}

# Run a command in the scheduler's container. podman 4.3's DNS server
# (aardvark-dns) was seen to stop answering for a container network right
# after start ("No address associated with hostname" for `redis`, longer
# than redis.wait); then `podman network reload` sets it up again and the
# command is run again (at most twice). Documented in docs/operations.md.
in_sched() {
  local try out
  for try in 1 2 3; do
    if out=$(podman exec "$sched" "$@" 2>&1); then printf '%s\n' "$out"; return 0; fi
    case "$out" in
      *"No address associated with hostname"*|*"Name or service not known"*|*"name resolution"*)
        log "podman's DNS lost the service names (try $try): podman network reload"
        podman network reload "$sched" $(containers worker) $(containers redis) >/dev/null 2>&1 || true
        sleep 2 ;;
      *) printf '%s\n' "$out" >&2; return 1 ;;
    esac
  done
  printf '%s\n' "$out" >&2
  return 1
}
jr() { in_sched jobrunner "$@"; }

count_ok() { local t=0 c; for c in $(containers worker); do t=$((t + $(podman logs "$c" 2>&1 | grep -c "handler=greet .*outcome=ok" || true))); done; echo $t; }
wait_ok() {
  local want=$1 i got=0
  for i in $(seq 1 ${2:-60}); do got=$(count_ok); [ "$got" -ge "$want" ] && return 0; sleep 1; done
  fail "$got of $want greet jobs ran"
}

if [ -z "$only" ]; then  # (the plain stack and the TLS variant, to the cluster variant below)
log "starting the stack"
pc up -d >"$tmp/up.log" 2>&1 || { cat "$tmp/up.log"; fail "up"; }
workers=$(containers worker); sched=$(containers scheduler); redis=$(containers redis)
[ "$(echo "$workers" | wc -w)" = 2 ] || fail "expected 2 worker containers, got: $workers"

for c in $redis $sched $workers; do healthy "$c" || fail "$c never became healthy"; done
log "all healthy: $redis $sched $workers"

log "enqueueing through the CLI in a container"
# One exec, many CLI calls (each exec costs about a second).
in_sched sh -c 'for i in $(seq 1 40); do jobrunner enqueue greet "friend $i" || exit 1; done
                            for i in $(seq 1 10); do jobrunner enqueue --in 3s greet "later $i" || exit 1; done' \
  >/dev/null || fail "enqueue through the CLI"
n=50
wait_ok $n
log "$n greet jobs ran (10 of them delayed)"

log "a periodic job: every 2 s, added through the CLI"
jr cron add smoke-tick --every 2s greet "tick" >/dev/null || fail "cron add"
ticks=0
for i in $(seq 1 30); do
  ticks=0
  for c in $(containers worker); do ticks=$((ticks + $(podman logs "$c" 2>&1 | grep -c "job=smoke-tick@[0-9]* .*handler=greet .*outcome=ok" || true))); done
  [ "$ticks" -ge 2 ] && break
  sleep 1
done
[ "$ticks" -ge 2 ] || fail "the periodic job fired $ticks times in 30 s"
jr cron list | has "smoke-tick" || fail "cron list does not show the schedule"
jr cron remove smoke-tick >/dev/null || fail "cron remove"
log "the periodic job fired $ticks times (ids smoke-tick@<tick ms>)"

log "SIGKILL of a worker container while it runs jobs"
in_sched sh -c 'for i in $(seq 1 16); do jobrunner enqueue sleep 3000 || exit 1; done' >/dev/null \
  || fail "enqueue sleep jobs"
victim=$(echo "$workers" | head -1) survivor=$(echo "$workers" | tail -1)
# Kill the victim while it runs some of them (each takes 3 s).
for i in $(seq 1 50); do
  podman logs "$victim" 2>&1 | has "handler=sleep" && break
  [ "$(jr stats --json | grep -o '"pending": *[0-9]*' | grep -o '[0-9]*$')" -gt 0 ] 2>/dev/null && break
  sleep 0.2
done
podman kill -s KILL "$victim" >/dev/null
ran_by_victim=$(podman logs "$victim" 2>&1 | grep -c "handler=sleep .*outcome=ok" || true)
# The survivor takes over the victim's jobs once their lease ends.
for i in $(seq 1 120); do
  st=$(jr stats --json 2>/dev/null) || st=""
  echo "$st" | has '"ready": *0' && echo "$st" | has '"pending": *0' && echo "$st" | has '"delayed": *0' && break
  sleep 1
done
ran_by_survivor=$(podman logs "$survivor" 2>&1 | grep -c "handler=sleep .*outcome=ok" || true)
echo "$st" | has '"dead": *0' || fail "jobs went dead: $st"
[ $((ran_by_victim + ran_by_survivor)) -ge 16 ] || fail "16 sleep jobs, $ran_by_victim + $ran_by_survivor ran: $st"
[ "$ran_by_survivor" -gt 8 ] || fail "the survivor ran only $ran_by_survivor: did the victim run jobs at all?"
log "every job finished after the kill ($ran_by_victim by the victim before it, $ran_by_survivor by the survivor): $st"
podman start "$victim" >/dev/null || fail "restart $victim"

log "rolling upgrade: a v2 worker (new handler farewell) beside the v1 workers while jobs flow"
podman build --build-arg CFLAGS=-DGREET_V2 -t "$app2" docs/examples/plugin >>"$tmp/build.log" 2>&1 \
  || { tail -20 "$tmp/build.log"; fail "v2 plugin image"; }
# Jobs keep coming while the new worker starts: greet (both versions have
# it) and farewell (only v2 has it: the v1 workers must not bury them).
podman exec -d "$sched" sh -c 'for i in $(seq 1 30); do jobrunner enqueue greet "flow $i"; jobrunner enqueue farewell "flow $i"; sleep 0.1; done'
v2="${P}_worker_v2"
podman run -d --name "$v2" --label "io.podman.compose.project=$P" --network "${P}_default" \
  --health-cmd /opt/jobrunner/bin/jobrunner-healthcheck \
  -e JOBRUNNER_REDIS_URL="redis://:$REDIS_PASSWORD@redis:6379" -e JOBRUNNER_REDIS_WAIT=30s \
  -e JOBRUNNER_PLUGIN_GREET_GREETING=Bonjour \
  "$app2" worker -c /etc/jobrunner/container.yaml >/dev/null || fail "start the v2 worker"
healthy "$v2" || fail "the v2 worker never became healthy"
# Then the v1 workers go (SIGTERM: they finish or hand back what they hold).
for c in $(containers worker); do podman stop -t 20 "$c" >/dev/null; done
for i in $(seq 1 120); do
  farewells=$(podman logs "$v2" 2>&1 | grep -c "handler=farewell .*outcome=ok" || true)
  st=$(jr stats --json 2>/dev/null) || st=""
  [ "$farewells" -ge 30 ] && echo "$st" | has '"ready": *0' && echo "$st" | has '"pending": *0' \
    && echo "$st" | has '"delayed": *0' && break
  sleep 1
done
echo "$st" | has '"dead": *0' || fail "jobs went dead during the upgrade: $st"
[ "$farewells" = 30 ] || fail "$farewells of 30 farewell jobs ran on the v2 worker: $st"
greets=$(( $(count_ok) + $(podman logs "$v2" 2>&1 | grep -c "handler=greet .*outcome=ok" || true) ))
[ "$greets" -ge $((n + 30)) ] || fail "$greets of $((n + 30)) greet jobs ran"
# The v2 worker alone now: its greet reads the plugin setting it was given.
jr enqueue greet "v2" >/dev/null || fail "enqueue after the upgrade"
for i in $(seq 1 30); do podman logs "$v2" 2>&1 | has "Bonjour, v2!" && break; sleep 1; done
podman logs "$v2" 2>&1 | has "Bonjour, v2!" || fail "the v2 worker's greet did not use its setting (JOBRUNNER_PLUGIN_GREET_GREETING)"
log "upgrade done: 30 farewell jobs ran on v2, none dead; $greets greet jobs in all; v2 greets with its own setting"

log "stopping the stack"
podman stop -t 20 "$v2" >/dev/null
pc stop -t 20 >/dev/null 2>&1 || true
for c in $(podman ps -a --filter "label=io.podman.compose.project=$P" --format '{{.Names}}'); do
  code=$(podman inspect --format '{{.State.ExitCode}}' "$c")
  [ "$code" = 0 ] || fail "$c exited $code"
done
log "every service exited 0; the plain stack took $(( $(date +%s) - started ))s"

# The TLS variant (docker-compose.tls.yml, docs/tls.md) as a project of its
# own, with the images built above: only the certs image is new.
tls_started=$(date +%s)
cur=$PT
log "the TLS variant: building the certs image, starting the stack"
podman build --target certs -t localhost/jobrunner-certs:latest . >>"$tmp/build.log" 2>&1 \
  || { tail -20 "$tmp/build.log"; fail "certs image"; }
pct up -d --no-build >"$tmp/up-tls.log" 2>&1 || { cat "$tmp/up-tls.log"; fail "up (TLS)"; }
workers=$(containers worker); sched=$(containers scheduler); redis=$(containers redis)
[ "$(echo "$workers" | wc -w)" = 2 ] || fail "expected 2 worker containers, got: $workers"
for c in $redis $sched $workers; do healthy "$c" || fail "$c never became healthy"; done
certs=$(containers certs)
[ "$(podman inspect --format '{{.State.Status}} {{.State.ExitCode}}' "$certs")" = "exited 0" ] \
  || fail "the certs service did not complete: $(podman inspect --format '{{.State.Status}} {{.State.ExitCode}}' "$certs")"
podman logs "$sched" 2>&1 | has "scheduler starting redis=rediss://" || fail "the scheduler does not use rediss://"
log "all healthy over TLS: $redis $sched $workers"
in_sched sh -c 'for i in $(seq 1 10); do jobrunner enqueue greet "tls $i" || exit 1; done
                for i in $(seq 1 3); do jobrunner enqueue --in 2s greet "tls later $i" || exit 1; done' \
  >/dev/null || fail "enqueue through the CLI over TLS"
wait_ok 13
log "13 greet jobs ran over TLS (3 of them delayed)"
# Redis refuses a plain connection (no plain port), and a TLS one without a
# client certificate (mutual TLS).
if out=$(podman exec -e JOBRUNNER_REDIS_URL="redis://:$REDIS_PASSWORD@redis:6379" -e JOBRUNNER_REDIS_WAIT=0s \
           "$sched" jobrunner stats 2>&1); then
  fail "a plain redis:// connection to the TLS Redis was accepted: $out"
fi
echo "$out" | has "use rediss://" || fail "a plain connection failed, but not as refused by TLS: $out"
if out=$(podman exec "$redis" sh -c 'redis-cli --tls --cacert /tls/ca.crt --no-auth-warning -a "$REDIS_PASSWORD" ping' 2>&1) \
   && echo "$out" | has PONG; then
  fail "Redis answered a TLS client without a client certificate: $out"
fi
st=$(jr stats --json) || fail "stats over TLS"
echo "$st" | has '"dead": *0' || fail "jobs went dead over TLS: $st"
log "Redis refused a plain connection and one without a client certificate"
pct stop -t 20 >/dev/null 2>&1 || true
for c in $(podman ps -a --filter "label=io.podman.compose.project=$PT" --format '{{.Names}}'); do
  code=$(podman inspect --format '{{.State.ExitCode}}' "$c")
  [ "$code" = 0 ] || fail "$c exited $code"
done
pct down -v -t 20 >/dev/null 2>&1 || fail "down -v (TLS)"
log "TLS variant done in $(( $(date +%s) - tls_started ))s; every service exited 0; total $(( $(date +%s) - started ))s"
fi  # (the plain stack and the TLS variant)

# The Redis Cluster variant (docker-compose.cluster.yml, docs/operations.md)
# as a project of its own, with the images built above: six nodes of the
# redis image, made one cluster of 3 primaries + 3 replicas by the one-shot
# cluster-create service; the scheduler and workers on redis-cluster://.
cl_started=$(date +%s)
cur=$PC
log "the cluster variant: starting 6 Redis nodes, cluster-create, a scheduler and 2 workers"
pcc up -d --no-build >"$tmp/up-cluster.log" 2>&1 || { cat "$tmp/up-cluster.log"; fail "up (cluster)"; }
workers=$(containers worker); sched=$(containers scheduler); redis=$(containers redis)
nodes="$redis $(for i in 2 3 4 5 6; do containers "redis-$i"; done | tr '\n' ' ')"
[ "$(echo "$nodes" | wc -w)" = 6 ] || fail "expected 6 Redis nodes, got: $nodes"
[ "$(echo "$workers" | wc -w)" = 2 ] || fail "expected 2 worker containers, got: $workers"
create=$(containers cluster-create)
for i in $(seq 1 120); do
  [ "$(podman inspect --format '{{.State.Status}}' "$create")" = exited ] && break
  sleep 1
done
[ "$(podman inspect --format '{{.State.Status}} {{.State.ExitCode}}' "$create")" = "exited 0" ] \
  || fail "cluster-create did not complete: $(podman inspect --format '{{.State.Status}} {{.State.ExitCode}}' "$create"); $(podman logs "$create" 2>&1 | tail -20)"
for c in $nodes $sched $workers; do healthy "$c" || fail "$c never became healthy"; done
info=$(podman exec "$redis" sh -c 'REDISCLI_AUTH="$REDIS_PASSWORD" redis-cli cluster info' | tr -d '\r')
echo "$info" | has '^cluster_state:ok' && echo "$info" | has '^cluster_size:3' \
  && echo "$info" | has '^cluster_known_nodes:6' || fail "not one cluster of 3 primaries and 6 nodes: $info"
podman logs "$sched" 2>&1 | has "redis=redis-cluster://" || fail "the scheduler does not use redis-cluster://"
log "all healthy, one cluster of 3 primaries + 3 replicas: $nodes $sched $workers"
in_sched sh -c 'for i in $(seq 1 10); do jobrunner enqueue greet "cluster $i" || exit 1; done
                for i in $(seq 1 3); do jobrunner enqueue --in 2s greet "cluster later $i" || exit 1; done' \
  >/dev/null || fail "enqueue through the CLI on the cluster"
wait_ok 13
st=$(jr stats --json) || fail "stats on the cluster"
echo "$st" | has '"dead": *0' || fail "jobs went dead on the cluster: $st"
log "13 greet jobs ran on the cluster (3 of them delayed); stats: $st"
# cluster-create again (as a second `up` would run it): it finds the cluster and makes nothing.
out=$(podman start -a "$create" 2>&1) || fail "cluster-create, run again, failed: $out"
echo "$out" | has "the cluster exists" || fail "cluster-create, run again, did not see the cluster: $out"
# The scheduler and workers first: podman-compose 1.0.3 stops services in
# the reverse of the files' order (the override's nodes before them), not
# by depends_on, and a worker whose cluster is gone did not stop within 20 s.
pcc stop -t 20 scheduler worker >/dev/null 2>&1 || true
pcc stop -t 20 >/dev/null 2>&1 || true
for c in $(podman ps -a --filter "label=io.podman.compose.project=$PC" --format '{{.Names}}'); do
  code=$(podman inspect --format '{{.State.ExitCode}}' "$c")
  [ "$code" = 0 ] || fail "$c exited $code"
done
pcc down -v -t 20 >/dev/null 2>&1 || fail "down -v (cluster)"
log "cluster variant done in $(( $(date +%s) - cl_started ))s; every service exited 0; total $(( $(date +%s) - started ))s"
