#!/bin/sh
# Installs into a temp prefix and checks what a user of the install gets:
# bin/jobrunner, the job plugins, the public header and a pkg-config file
# with which a plugin builds outside this tree; then runs one job through the
# installed worker with its default plugin directory.
# usage: install_test.sh BUILD_DIR SOURCE_DIR REDIS_SERVER
set -eu
build=$1 src=$2 redis_server=$3
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
