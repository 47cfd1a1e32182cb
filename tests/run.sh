#!/bin/sh
# The whole test suite: install what is missing, build with -Werror, run
# every test against real redis-servers, then build and run it all again
# under AddressSanitizer + UndefinedBehaviorSanitizer (any report fails).
# Between the two, the deployment smoke test: the compose stack built and run with
# podman-compose (tests/deploy/smoke.sh; .ci/container-base.sh sets podman
# up). JR_SKIP_SANITIZE=1 skips the sanitizer run, JR_SKIP_DEPLOY=1 the
# smoke test. The test executables run JR_TEST_JOBS (default 3) at a time:
# they share no Redis (each starts its own, on a socket in its own temp dir
# or on ports it finds free), and most of their time is waiting.
set -eu
cd "$(dirname "$0")/.."
jobs=${JR_TEST_JOBS:-3}
case "$jobs" in
  '' | *[!0-9]* | 0*) echo "tests/run.sh: JR_TEST_JOBS must be a whole number from 1, got '$jobs'" >&2; exit 2 ;;
esac
sh .ci/deps.sh
sh .ci/build.sh build
# puppeteer-core for the browser test (test_browser), as package-lock.json pins it
(cd tests/browser && npm ci --no-audit --no-fund --loglevel=error)
(cd build && ctest --output-on-failure -j "$jobs")

if [ "${JR_SKIP_DEPLOY:-0}" != 1 ]; then
  echo "== deployment smoke test =="
  bash .ci/container-base.sh
  bash tests/deploy/smoke.sh
fi

[ "${JR_SKIP_SANITIZE:-0}" = 1 ] && exit 0
echo "== again under ASan+UBSan =="
sh .ci/build.sh build-asan -DJR_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
reports="$PWD/build-asan/sanitizer-reports"
rm -rf "$reports" && mkdir -p "$reports"
export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1:abort_on_error=0"
export UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1"
status=0
(cd build-asan && ctest --output-on-failure -j "$jobs") || status=1
if [ -n "$(ls -A "$reports")" ]; then
  echo "sanitizer reports:"
  for f in "$reports"/*; do echo "--- $f"; cat "$f"; done
  status=1
fi
exit $status
