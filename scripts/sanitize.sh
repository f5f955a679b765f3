#!/usr/bin/env bash
# Builds the tests with AddressSanitizer + UndefinedBehaviorSanitizer (Debug, build-asan) and
# runs them; with --tsan, with ThreadSanitizer instead (build-tsan), for the concurrency of the
# engine thread, the HTTP threads and the kernel thread pool.
# Not part of CI (it doubles the build time); run it before submitting kernel, cache or engine
# changes. Extra arguments go to ctest (e.g. -R Engine).
# Usage: scripts/sanitize.sh [--tsan] [--targets "engine_tests server_tests"] [ctest args...]
#   --targets builds only those targets (ctest then runs the tests of those binaries that match).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-asan
options=(-DREPRISE_SANITIZE=ON)
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    # GCC's -fsanitize=thread warns on switches that cover every enumerator: not an error here.
    --tsan) build=build-tsan; options=(-DREPRISE_TSAN=ON -DREPRISE_WERROR=OFF); shift ;;
    --targets) read -r -a targets <<<"$2"; shift 2 ;;
    *) break ;;
  esac
done
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug "${options[@]}"
if [ ${#targets[@]} -gt 0 ]; then
  cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" reprise
else
  cmake --build "$build" -j "$(nproc)"
fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:history_size=4:suppressions=$PWD/scripts/tsan.supp"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" "$@"
