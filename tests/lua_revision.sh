#!/bin/sh
# The function library's revision (line 2 of the library, that is of
# runner/lua/00-common.lua) must change with its code: processes decide by
# revision whether to replace the library loaded in Redis (see
# jr_redis_load_library), so two different codes under one revision would
# make a rolling upgrade undecidable. The code is the library as the build
# joins it (runner/lua/join.sh, the parts of runner/lua/parts.txt in order),
# hashed here from the same join. tests/lua_revisions.txt records
# "REVISION SHA256" of every revision.
set -eu
src=${1:-$(dirname "$0")/..}
dir="$src/runner/lua"
list="$src/tests/lua_revisions.txt"
tmp=$(mktemp /tmp/jr-lua-revision.XXXXXX)
trap 'rm -f "$tmp" "$tmp.tmp"' EXIT
sh "$dir/join.sh" "$dir" "$tmp"
rev=$(sed -n '2s/^-- jobrunner: contract \([0-9]*\), revision \([0-9]*\)\.$/\2/p' "$tmp")
[ -n "$rev" ] || { echo "$dir/00-common.lua: line 2 must be '-- jobrunner: contract C, revision R.'" >&2; exit 1; }
sum=$(sha256sum "$tmp" | cut -d' ' -f1)
recorded=$(awk -v r="$rev" '$1 == r { print $2 }' "$list")
if [ -z "$recorded" ]; then
  echo "revision $rev is new: record it with" >&2
  echo "  echo '$rev $sum' >> tests/lua_revisions.txt" >&2
  exit 1
fi
if [ "$recorded" != "$sum" ]; then
  echo "the library (runner/lua/, joined) changed but its revision ($rev) did not: raise it on line 2 of" >&2
  echo "runner/lua/00-common.lua, then" >&2
  echo "  echo '$((rev + 1)) <new sha256>' >> tests/lua_revisions.txt" >&2
  exit 1
fi
echo "library revision $rev recorded"
