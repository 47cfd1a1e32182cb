#!/bin/sh
# Configure and build into DIR (default build/) with warnings as errors.
# Extra arguments go to cmake's configure step.
set -eu
# The plugin loader refuses plugins in group- or world-writable directories:
# build (and so the test fixtures) with a umask that does not make them.
umask 022
dir=${1:-build}
[ $# -gt 0 ] && shift
cmake -S . -B "$dir" -DJR_WERROR=ON "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)"
