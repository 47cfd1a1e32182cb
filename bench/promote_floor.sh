#!/usr/bin/env bash
# bench/promote_floor.sh — the floor of promotion in one Redis thread (issue
# 10): what Lua loops that do only part of a promotion cost per job, so the
# jr_promote figure of bench/promote.sh can be read against what one XADD
# per job allows at all.
#
#   bench/promote_floor.sh            # CALLS=200 calls of B=1000 jobs each
#
# On a private redis-server (unix socket, no persistence), each loop runs as
# CALLS EVALs of B jobs (as a jr_promote of LIMIT B): Redis CPU per job is
# the redis-server process's user + system time over the loop (not inflated
# when other processes share the cores), wall per job the EVAL's own time
# (INFO commandstats usec_per_call / B). The job is the bench's: id
# d<ms>-<n>, h bench, p 50 bytes, e, d (10 strings).
#   xadd_only            B x XADD of the same 10-field entry
#   lpop_unpack          LPOP B compact bucket items + cmsgpack.unpack_limit each
#   lpop_unpack_xadd     both: the least a bucket promotion does
#   hset_index           one HSET of B id/entry pairs (the job index), with
#                        the strings built in Lua
#   lua_strings          building those B pairs only (subtract from hset_index)
# Prints one line per loop. Stops what it started by pid.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
WORK=$(mktemp -d /tmp/jr-floor.XXXXXX)
REDIS_PID=
trap 'stop_redis; rm -rf "$WORK"' EXIT
start_redis "$WORK" || { echo "redis did not start"; exit 1; }
CALLS=${CALLS:-200} B=${B:-1000}
P=$(printf 'x%.0s' $(seq 50))
cpu_ticks() { awk '{print $14 + $15}' "/proc/$REDIS_PID/stat"; }
hz=$(getconf CLK_TCK)
fill() { # CALLS lists b0.. of B compact items each (the wheel's item layout)
  rc eval "for c = 0, $CALLS - 1 do local t = {} for i = 1, $B do t[i] = cmsgpack.pack(c * $B + i, 123456, '', 2999, 'h', 'bench', 'p', ARGV[1]) end redis.call('RPUSH', 'b' .. c, unpack(t)) end return 1" 0 "$P" >/dev/null
  rc set cnt 0 >/dev/null
}
run() { # NAME SCRIPT NKEYS [KEY...] [ARG...]
  local name=$1 c0 c1 u; shift
  rc config resetstat >/dev/null
  c0=$(cpu_ticks)
  for _ in $(seq "$CALLS"); do rc eval "$@" >/dev/null; done
  c1=$(cpu_ticks)
  u=$(rc info commandstats | tr -d '\r' | grep '^cmdstat_eval:' | sed 's/.*usec_per_call=\([0-9.]*\).*/\1/')
  printf '%s cpu_us_per_job=%s wall_us_per_job=%s\n' "$name" \
    "$(awk -v a="$c0" -v b="$c1" -v n=$((CALLS * B)) -v hz="$hz" 'BEGIN{printf "%.2f", (b-a)*1e6/hz/n}')" \
    "$(awk -v u="$u" -v b="$B" 'BEGIN{printf "%.2f", u/b}')"
}
run xadd_only "for i = 1, $B do redis.call('XADD', KEYS[1], '*', 'id', 'd1764581400250-123456', 'h', 'bench', 'p', ARGV[1], 'e', '1764581397250', 'd', '1764581400251') end" 1 s1 "$P"
rc del s1 >/dev/null
fill
run lpop_unpack "local c = redis.call('INCR', 'cnt') - 1 for _, it in ipairs(redis.call('LPOP', 'b' .. c, $B)) do cmsgpack.unpack_limit(it, 2005, 0) end" 0
fill
run lpop_unpack_xadd "local c = redis.call('INCR', 'cnt') - 1 for _, it in ipairs(redis.call('LPOP', 'b' .. c, $B)) do local n, o, s, E, f1, v1, f2, v2 = cmsgpack.unpack_limit(it, 2005, 0) redis.call('XADD', KEYS[1], '*', 'id', 'd1764581400250-' .. n, f1, v1, f2, v2, 'e', '1764581397250', 'd', '1764581400251') end" 1 s2
rc set cnt 0 >/dev/null
run hset_index "local c = redis.call('INCR', 'cnt') local t = {} for i = 1, $B do t[2 * i - 1] = 'd1764581400250-' .. (c * $B + i) t[2 * i] = '1764581400250-' .. (c * $B + i) end redis.call('HSET', KEYS[1], unpack(t))" 1 ids
rc set cnt 0 >/dev/null
run lua_strings "local c = redis.call('INCR', 'cnt') local t = {} for i = 1, $B do t[2 * i - 1] = 'd1764581400250-' .. (c * $B + i) t[2 * i] = '1764581400250-' .. (c * $B + i) end" 0
