#!/usr/bin/env bash
# Runs the test suite of the builds made by scripts/setup.sh: under
# ASan+UBSan first, then the release build. Tests that need ../shared/data
# skip with a message when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
echo "== tests under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan)"
ctest --test-dir build-asan --output-on-failure -j "$(nproc)"
echo "== tests (build)"
ctest --test-dir build --output-on-failure -j "$(nproc)"
