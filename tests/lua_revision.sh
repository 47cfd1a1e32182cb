#!/bin/sh
# The function library's revision (line 2 of runner/lua/jobrunner.lua) must
# change with its code: processes decide by revision whether to replace the
# library loaded in Redis (see jr_redis_load_library), so two different
# codes under one revision would make a rolling upgrade undecidable.
# tests/lua_revisions.txt records "REVISION SHA256" of every revision.
set -eu
src=${1:-$(dirname "$0")/..}
lua="$src/runner/lua/jobrunner.lua"
list="$src/tests/lua_revisions.txt"
rev=$(sed -n '2s/^-- jobrunner: contract \([0-9]*\), revision \([0-9]*\)\.$/\2/p' "$lua")
[ -n "$rev" ] || { echo "$lua: line 2 must be '-- jobrunner: contract C, revision R.'" >&2; exit 1; }
sum=$(sha256sum "$lua" | cut -d' ' -f1)
recorded=$(awk -v r="$rev" '$1 == r { print $2 }' "$list")
if [ -z "$recorded" ]; then
  echo "revision $rev is new: record it with" >&2
  echo "  echo '$rev $sum' >> tests/lua_revisions.txt" >&2
  exit 1
fi
if [ "$recorded" != "$sum" ]; then
  echo "$lua changed but its revision ($rev) did not: raise it on line 2, then" >&2
  echo "  echo '$((rev + 1)) <new sha256>' >> tests/lua_revisions.txt" >&2
  exit 1
fi
echo "library revision $rev recorded"
