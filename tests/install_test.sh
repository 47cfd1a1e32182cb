#!/bin/sh
# Installs into a temp prefix and checks what a user of the install gets:
# bin/jobrunner, the job plugins, the public header and a pkg-config file
# with which a plugin builds outside this tree; then runs one job through the
# installed worker with its default plugin directory. Also the man page, the
# example configuration and environment file, the systemd units (checked with
# systemd-analyze verify where it exists) and the Redis function library,
# loaded into a fresh Redis both as docs/redis-contract.md tells producers
# and by `jobrunner functions load`. And the client library: the producer of
# docs/client.md built out of tree with pkg-config and run against Redis.
# usage: install_test.sh BUILD_DIR SOURCE_DIR REDIS_SERVER [REDIS_CLI]
set -eu
build=$1 src=$2 redis_server=$3
redis_cli=${4:-$(dirname "$redis_server")/redis-cli}
tmp=$(mktemp -d /tmp/jr-install.XXXXXX)
redis_pid=""; worker_pid=""
cleanup() {
  [ -n "$worker_pid" ] && kill "$worker_pid" 2>/dev/null && wait "$worker_pid" 2>/dev/null
  [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$build" --prefix "$tmp/p" >/dev/null
for f in bin/jobrunner lib/jobrunner/jobs/echo.so lib/jobrunner/jobs/sleep.so \
         lib/jobrunner/jobs/order_autoclose.so include/jobrunner/plugin.h lib/pkgconfig/jobrunner.pc; do
  [ -e "$tmp/p/$f" ] || fail "missing $f after install"
done
for f in share/man/man1/jobrunner.1 share/jobrunner/jobrunner.lua \
         share/doc/jobrunner/examples/jobrunner.yaml share/doc/jobrunner/examples/jobrunner.env \
         lib/systemd/system/jobrunner-worker@.service lib/systemd/system/jobrunner-scheduler.service \
         lib/sysusers.d/jobrunner.conf; do
  [ -s "$tmp/p/$f" ] || fail "missing $f after install"
done
cmp -s "$tmp/p/share/jobrunner/jobrunner.lua" "$build/runner/jobrunner.lua" \
  || fail "the installed jobrunner.lua is not the library (the parts of runner/lua/ joined)"

# The man page: found by man(1) in the prefix, rendered without a warning.
if command -v man >/dev/null; then
  [ "$(MANPATH="$tmp/p/share/man" man -w jobrunner)" = "$tmp/p/share/man/man1/jobrunner.1" ] \
    || fail "man -w jobrunner does not find the installed page"
fi
warnings=$(groff -man -Tutf8 -ww -z "$tmp/p/share/man/man1/jobrunner.1" 2>&1) || fail "groff failed"
[ -z "$warnings" ] || fail "the installed man page renders with warnings: $warnings"

# The systemd units: they run the installed program, stop it with SIGTERM
# and wait longer than the worker's grace (worker.grace, 8s by default),
# restart it on failure, as a dedicated user, with settings from the
# environment files.
units="$tmp/p/lib/systemd/system"
for u in jobrunner-worker@.service jobrunner-scheduler.service; do
  role=${u#jobrunner-}; role=${role%%[@.]*}
  for line in "ExecStart=$tmp/p/bin/jobrunner $role" KillSignal=SIGTERM Restart=on-failure \
              User=jobrunner EnvironmentFile=-/etc/jobrunner/jobrunner.env \
              "EnvironmentFile=-/etc/jobrunner/$role.env" NoNewPrivileges=yes; do
    grep -qx "$line" "$units/$u" || fail "$u lacks the line $line"
  done
  # each worker instance serves its metrics on its own port (metrics.port_offset)
  [ "$role" = worker ] && { grep -qx 'Environment=JOBRUNNER_METRICS_PORT_OFFSET=%i' "$units/$u" ||
    fail "$u lacks Environment=JOBRUNNER_METRICS_PORT_OFFSET=%i"; }
  stop=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)s$/\1/p' "$units/$u")
  [ -n "$stop" ] && [ "$stop" -gt 8 ] || fail "$u: TimeoutStopSec must be more than worker.grace (8s)"
done
if command -v systemd-analyze >/dev/null; then
  mkdir "$tmp/units"
  cp "$units/jobrunner-scheduler.service" "$tmp/units/"
  cp "$units/jobrunner-worker@.service" "$tmp/units/jobrunner-worker@.service"
  cp "$units/jobrunner-worker@.service" "$tmp/units/jobrunner-worker@3.service"
  out=$(cd "$tmp/units" && MANPATH="$tmp/p/share/man" systemd-analyze verify \
        ./jobrunner-scheduler.service ./jobrunner-worker@.service ./jobrunner-worker@3.service 2>&1) \
    || fail "systemd-analyze verify: $out"
  [ -z "$out" ] || fail "systemd-analyze verify complains: $out"
else
  echo "note: no systemd-analyze here; units checked by content only"
fi

# A plugin built outside the tree with pkg-config only.
mkdir "$tmp/ext"
cat > "$tmp/ext/hello.c" <<'C'
#include <jobrunner/plugin.h>
static jr_result_t hello(jr_job_t *job, const jr_host_api_t *api, void *u) {
    (void)u;
    api->log(job, JR_LOG_INFO, "hello from an out-of-tree plugin");
    return JR_RESULT_OK;
}
static int init(void *ctx, const jr_host_api_t *api) { return api->register_handler(ctx, "hello", hello, 0); }
static const jr_plugin_t d = {JR_PLUGIN_HEADER, .name = "hello", .version = "1", .init = init};
JR_PLUGIN_EXPORT const jr_plugin_t *jr_plugin_entry(void) { return &d; }
C
export PKG_CONFIG_PATH="$tmp/p/lib/pkgconfig"
plugindir=$(pkg-config --variable=plugindir jobrunner)
[ "$(cd "$plugindir" && pwd -P)" = "$(cd "$tmp/p/lib/jobrunner/jobs" && pwd -P)" ] || fail "plugindir is $plugindir"
cc -shared -fPIC -Wall -Werror $(pkg-config --cflags jobrunner) -o "$plugindir/hello.so" "$tmp/ext/hello.c" \
  || fail "an out-of-tree plugin does not build with pkg-config"

# The installed worker, no --plugin: loads every plugin in the installed jobs dir.
"$redis_server" --port 0 --unixsocket "$tmp/r.sock" --save '' --appendonly no --dir "$tmp" >/dev/null &
redis_pid=$!
url="unix://$tmp/r.sock"
i=0; until [ -S "$tmp/r.sock" ]; do i=$((i+1)); [ $i -gt 200 ] && fail "redis did not start"; sleep 0.02; done
# A fresh Redis has no function library: a producer in another language
# gets "Function not found". Loaded from the installed file with redis-cli
# (as docs/redis-contract.md says), or by `jobrunner functions load`.
fcall() { "$redis_cli" -s "$tmp/r.sock" FCALL jr_version 0 2>&1; }
case $(fcall) in *"Function not found"*) ;; *) fail "a fresh Redis already answers jr_version: $(fcall)" ;; esac
"$redis_cli" -s "$tmp/r.sock" -x FUNCTION LOAD REPLACE < "$tmp/p/share/jobrunner/jobrunner.lua" >/dev/null \
  || fail "redis-cli -x FUNCTION LOAD REPLACE < share/jobrunner/jobrunner.lua"
[ "$(fcall)" = 1 ] || fail "after loading the installed file, jr_version says: $(fcall)"
"$redis_cli" -s "$tmp/r.sock" FUNCTION FLUSH >/dev/null
"$tmp/p/bin/jobrunner" functions load --redis "$url" >/dev/null || fail "jobrunner functions load"
[ "$(fcall)" = 1 ] || fail "after jobrunner functions load, jr_version says: $(fcall)"

# The example configuration and environment file are valid as installed.
ex="$tmp/p/share/doc/jobrunner/examples"
"$tmp/p/bin/jobrunner" stats -c "$ex/jobrunner.yaml" --redis "$url" >/dev/null 2>"$tmp/ex.err" \
  || fail "the example jobrunner.yaml: $(cat "$tmp/ex.err")"
sed 's/^#JOBRUNNER_/JOBRUNNER_/; /JOBRUNNER_CONFIG=/d' "$ex/jobrunner.env" > "$tmp/all.env"
(set -a; . "$tmp/all.env"; "$tmp/p/bin/jobrunner" stats --redis "$url" >/dev/null 2>"$tmp/env.err") \
  || fail "the example jobrunner.env (every line enabled): $(cat "$tmp/env.err")"
[ ! -s "$tmp/env.err" ] || fail "the example jobrunner.env: $(cat "$tmp/env.err")"

# The client library: libjobrunner.so.1 exporting only jr_client_*, its
# header and jobrunner-client.pc; the producer of docs/client.md built out of
# tree with pkg-config only and run against this Redis (db 1, after
# FUNCTION FLUSH: the library loads the function library itself).
for f in lib/libjobrunner.so lib/libjobrunner.so.1 include/jobrunner/client.h lib/pkgconfig/jobrunner-client.pc; do
  [ -e "$tmp/p/$f" ] || fail "missing $f after install"
done
soname=$(objdump -p "$tmp/p/lib/libjobrunner.so.1" | awk '$1 == "SONAME" {print $2}')
[ "$soname" = libjobrunner.so.1 ] || fail "libjobrunner's SONAME is '$soname'"
other=$(nm -D --defined-only "$tmp/p/lib/libjobrunner.so.1" | awk '$2 ~ /^[TDB]$/ && $3 !~ /^jr_client_/ {print $3}')
[ -z "$other" ] || fail "libjobrunner.so exports more than jr_client_*: $other"
if ldd "$tmp/p/bin/jobrunner" | grep -q libjobrunner; then fail "bin/jobrunner needs libjobrunner.so"; fi
mkdir "$tmp/producer"
cp "$src/docs/examples/client/producer.c" "$tmp/producer/"
# (a library built with -DJR_SANITIZE=ON needs its programs built so too)
san=""; objdump -p "$tmp/p/lib/libjobrunner.so.1" | grep -q 'NEEDED.*libasan' && san="-fsanitize=address,undefined"
(cd "$tmp/producer" && cc -Wall -Werror $san -o producer producer.c $(pkg-config --cflags --libs jobrunner-client) \
   -Wl,-rpath,"$(pkg-config --variable=libdir jobrunner-client)") \
  || fail "docs/examples/client/producer.c does not build with pkg-config jobrunner-client"
"$redis_cli" -s "$tmp/r.sock" FUNCTION FLUSH >/dev/null
"$tmp/producer/producer" "$url?db=1" > "$tmp/producer.out" 2>&1 || { cat "$tmp/producer.out"; fail "the producer failed"; }
r1() { "$redis_cli" -s "$tmp/r.sock" -n 1 "$@"; }
[ "$(r1 XLEN 'jr:{default}:ready')" = 1 ] && [ "$(r1 XLEN 'jr:{mail}:ready')" = 2 ] \
  && [ "$(r1 XLEN 'jr:{reports}:ready')" = 1 ] && [ "$(r1 XLEN 'jr:{billing}:ready')" = 1 ] \
  || { cat "$tmp/producer.out"; fail "the producer's jobs did not land"; }
inwheel=$(r1 GET 'jr:{shop}:wheel:n')
[ "$(r1 ZCARD 'jr:{shop}:delayed')" = 0 ] && [ "${inwheel:-0}" = 0 ] || fail "the producer's cancelled job is still there"
# its idempotency key stays for the window, as a tombstone (issue 18 §2)
[ "$(r1 GET 'jr:{shop}:uniq:close-1042')" = cancelled ] || fail "the cancelled job left no tombstone"
grep -q "job 5 (billing): already there invoice-7" "$tmp/producer.out" || { cat "$tmp/producer.out"; fail "no per-job results"; }
grep -q "close-1042: delayed, due in 1800 s" "$tmp/producer.out" || { cat "$tmp/producer.out"; fail "job show"; }
grep -q "close-1042: cancelled" "$tmp/producer.out" || { cat "$tmp/producer.out"; fail "cancel"; }
[ "$(fcall)" = 1 ] || fail "the function library is not loaded after the producer: $(fcall)"

"$tmp/p/bin/jobrunner" worker --redis "$url" 2>"$tmp/worker.log" &
worker_pid=$!
"$tmp/p/bin/jobrunner" enqueue --redis "$url" hello >/dev/null || fail "enqueue"
"$tmp/p/bin/jobrunner" enqueue --redis "$url" echo "installed echo" >/dev/null || fail "enqueue"
i=0
until [ "$(grep -c 'outcome=ok' "$tmp/worker.log")" -ge 2 ]; do
  i=$((i+1)); [ $i -gt 250 ] && { cat "$tmp/worker.log"; fail "installed worker did not run both jobs"; }
  sleep 0.02
done
grep -q "hello from an out-of-tree plugin" "$tmp/worker.log" || fail "no log line from the external plugin"
grep -q "handlers=4" "$tmp/worker.log" || fail "worker did not load all 4 installed plugins"
echo "install ok"
