#!/bin/sh
# Install the Debian packages jobrunner needs to build and test, if missing
# (chromium, nodejs and npm: the dashboard's browser test, tests/browser/).
set -eu
pkgs="cmake gcc make pkg-config libhiredis-dev libyaml-dev libjansson-dev libmicrohttpd-dev libcriterion-dev redis-server redis-tools valgrind groff-base faketime libssl-dev openssl prometheus chromium nodejs npm"
missing=""
for p in $pkgs; do
  case $p in # a node of another origin (e.g. NodeSource's, which brings its own npm) will do
  nodejs) command -v node >/dev/null 2>&1 && continue ;;
  npm) command -v npm >/dev/null 2>&1 && continue ;;
  esac
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "installing:$missing"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
