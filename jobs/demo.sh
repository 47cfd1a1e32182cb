#!/bin/sh
# The demo: install what is missing, build, and run `jobrunner dev` - a
# private redis-server, a scheduler, two workers and a small shop whose
# unpaid orders get closed by delayed jobs. Arguments go to `jobrunner dev`
# (e.g. --orders 30, or --redis URL to use your own Redis).
set -eu
cd "$(dirname "$0")/.."
sh .ci/deps.sh
sh .ci/build.sh build
exec build/bin/jobrunner dev "$@"
