#!/bin/sh
# The man page stays true: every command that `jobrunner --help` lists has a
# section (.SS) in docs/jobrunner.1, and every flag and subcommand that
# `jobrunner CMD --help` prints is in that section (the common options in
# COMMON OPTIONS); groff renders the page without a warning.
# usage: man_test.sh JOBRUNNER MANPAGE
set -eu
jr=$1 page=$2
[ -f "$page" ] || { echo "FAIL: no man page $page"; exit 1; }
fail=0
err() { echo "FAIL: $*"; fail=1; }

if command -v groff >/dev/null; then
  warnings=$(groff -man -Tutf8 -ww -z "$page" 2>&1) || err "groff failed"
  [ -z "$warnings" ] || err "groff warnings: $warnings"
else
  err "groff is not installed (.ci/deps.sh installs groff-base)"
fi

# The page as plain text, one section per command: drop font escapes and
# write \- as -.
text=$(sed -e 's/\\f[BIRP]//g' -e 's/\\-/-/g' -e 's/\\(aq/'"'"'/g' "$page")
# section NAME: the lines from ".SS NAME" (or ".SH NAME") to the next heading.
section() {
  printf '%s\n' "$text" | awk -v want="$1" '
    /^\.S[SH] / { name = $0; sub(/^\.S[SH] +"?/, "", name); sub(/"$/, "", name); on = (name == want); next }
    on { print }'
}
common=$(section "COMMON OPTIONS")
[ -n "$common" ] || err "no COMMON OPTIONS section"

cmds=$("$jr" --help | awk '/^commands:/ { on = 1; next } on && /^$/ { on = 0 } on { print $1 }')
[ -n "$cmds" ] || err "jobrunner --help lists no commands"
for cmd in $cmds; do
  if [ "$cmd" = version ]; then help="usage: jobrunner version"; else
    help=$("$jr" "$cmd" --help) || { err "jobrunner $cmd --help failed"; continue; }
  fi
  body=$(section "$cmd")
  [ -n "$body" ] || { err "no section '.SS $cmd' for command $cmd"; continue; }
  # Flags: -x or --long-name after a space, '[', '(', ',' or '|'.
  flags=$(printf '%s\n' "$help" | grep -oE '(^|[][ (,|])--?[a-zA-Z][a-zA-Z-]*' | sed 's/^[][ (,|]//' | sort -u)
  for f in $flags; do
    printf '%s\n' "$body" "$common" | grep -qE -- "(^|[^a-zA-Z-])$f([^a-zA-Z-]|\$)" ||
      err "flag $f of '$cmd' is not in its man page section"
  done
  # Subcommands: the a|b|c alternatives of the usage line.
  subs=$(printf '%s\n' "$help" | head -n 1 | grep -oE '(^| )[a-z][a-z-]*(\|[a-z][a-z-]*)+' | tr '|' ' ')
  for s in $subs; do
    printf '%s\n' "$body" | grep -qE -- "(^|[^a-zA-Z-])$s([^a-zA-Z-]|\$)" ||
      err "subcommand '$cmd $s' is not in its man page section"
  done
done
[ $fail = 0 ] && echo "man page ok ($(echo $cmds | wc -w) commands)"
exit $fail
