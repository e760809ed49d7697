#!/usr/bin/env bash
# Runs the checks of the builds made by scripts/setup.sh: a short seeded
# fuzzing run of the GGUF parser, the test suite under ASan+UBSan, then the
# test suite of the release build. Tests that need ../shared/data
# skip with a message when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
echo "== fuzzing the GGUF parser for 30 s (build-fuzz)"
corpus=$(mktemp -d)
artifacts=$(mktemp -d)
log=$(mktemp)
trap 'rm -rf "$corpus" "$artifacts" "$log" "$log".*' EXIT
if ! build-fuzz/fuzz/gguf_fuzzer -seed=1 -max_total_time=30 -rss_limit_mb=2048 -max_len=4096 \
    -artifact_prefix="$artifacts/" "$corpus" fuzz/seeds/gguf >"$log" 2>&1; then
  tail -60 "$log"
  # The failing input, so it can be replayed: base64 -d > crash.bin, then
  # build-fuzz/fuzz/gguf_fuzzer crash.bin
  for input in "$artifacts"/*; do
    [ -f "$input" ] || continue
    echo "== $(basename "$input") ($(stat -c %s "$input") bytes, base64):"
    base64 "$input"
  done
  echo "gguf_fuzzer found a crash (the failing input is printed above)"
  exit 1
fi
grep -E "^Done [0-9]+ runs" "$log"
# The GoogleTest cases of a test program in one process per core (gtest's
# sharding) rather than one process per case as ctest runs them: under ASan
# a process takes 0.4 s to start, and there are a thousand cases. A failing
# shard's whole output is printed.
#   run_gtest_shards PROGRAM FILTER
run_gtest_shards() {
  local program=$1 filter=$2 shards pids=() failed=0
  shards=$(nproc)
  for ((i = 0; i < shards; i++)); do
    # Run from the program's folder, as ctest does (gtest_discover_tests).
    (cd "$(dirname "$program")" && GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i \
      timeout 1800 "./$(basename "$program")" --gtest_filter="$filter") >"$log.$i" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < shards; i++)); do
    if ! wait "${pids[$i]}"; then
      failed=1
      echo "== shard $i of $shards failed:"
      cat "$log.$i"
    fi
    grep -E "^\[==========\] [0-9]+ tests? from .* ran|^\[ +(PASSED|FAILED|SKIPPED) +\]" "$log.$i" |
      sed "s/^/shard $i: /" || true  # a crashed shard has no summary
    rm -f "$log.$i"
  done
  return "$failed"
}

echo "== tests under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan)"
# Left to the release build:
# - what does not depend on the build flavour: the aarch64 compile check,
#   the format check, the public headers' check;
# - the logits goldens of quantized and 16-bit weights (the F32 and
#   all-tensor cases run every family's code, and the kernel tests every
#   weight type's kernels, under the sanitizers);
# - the bench command's read-bandwidth sweep (a measurement);
# - the quantize recipes' goldens (20 whole-model quantizations; the
#   quantizers meet the sanitizers in the per-type tests);
# - what runs outside the sanitized programs: the pkg-config paths check
#   (cmake -P), the Python package (a python3 not built with ASan cannot
#   load the sanitized libcortiq.so) and the install-and-consume check (it
#   installs the release build).
# The C API's own test program (CApi.*) runs here, sanitized.
golden=*/LogitsGolden.MatchesThePeer
run_gtest_shards build-asan/tests/cortiq_tests "*-$golden/*_f16:$golden/*_bf16:$golden/*_q8_0:\
$golden/*_q4_0:$golden/*_q4_k:$golden/*_q6_k:CliBench.DepthAndReadBandwidth:QuantRecipeGolden.*"
# The other programs (the server's tests, the C API's, checks by script).
ctest --test-dir build-asan --output-on-failure -j "$(nproc)" -LE gtest \
  -E 'Portability|Format|PublicHeaders|^Python\.|CApi\.(Consumer|PkgConfig)'
# The kernel tests once more at the AVX2 level: on an AVX-512 machine the
# run above takes the AVX-512 kernels, and the AVX2 ones (what an AVX2-only
# machine runs) would otherwise never meet the sanitizers there.
echo "== kernel tests at CORTIQ_SIMD=avx2 (build-asan)"
CORTIQ_SIMD=avx2 run_gtest_shards build-asan/tests/cortiq_tests 'Kernel*'
echo "== tests (build)"
ctest --test-dir build --output-on-failure -j "$(nproc)"
