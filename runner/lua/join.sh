#!/bin/sh
# usage: join.sh LUA_DIR [OUT]
# Writes the function library jobrunner.lua (to OUT, else to stdout): the
# parts that LUA_DIR/parts.txt lists, in its order, concatenated byte for
# byte. Refuses (exit 1, OUT untouched) a listed part that is missing or
# does not end with a newline (its last line would run into the next
# part's first).
set -eu
dir=$1
out=${2:-}
parts=$(grep -v -e '^#' -e '^$' "$dir/parts.txt")
for p in $parts; do
  [ -f "$dir/$p" ] || { echo "$0: $dir/parts.txt lists $p, which is not in $dir" >&2; exit 1; }
  [ "$(tail -c 1 "$dir/$p" | od -An -c | tr -d ' ')" = '\n' ] ||
    { echo "$0: $dir/$p does not end with a newline" >&2; exit 1; }
done
if [ -z "$out" ]; then
  for p in $parts; do cat "$dir/$p"; done
  exit 0
fi
for p in $parts; do cat "$dir/$p"; done > "$out.tmp"
mv "$out.tmp" "$out"
