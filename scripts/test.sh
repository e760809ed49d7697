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
# The GoogleTest cases of a test program in a few processes (gtest's
# sharding), nproc at a time, rather than one process per case as ctest
# runs them: under ASan a process takes 0.4 s to start, and there are a
# thousand cases. Four shards per core keep a slow shard from leaving a
# core idle at the end. A failing shard's whole output is printed.
#   run_gtest_shards PROGRAM FILTER
run_gtest_shards() {
  local program=$1 filter=$2 shards status failed=0
  shards=$((4 * $(nproc)))
  seq 0 $((shards - 1)) | xargs -P "$(nproc)" -I{} bash -c '
    # From the program'"'"'s folder, as ctest runs it (gtest_discover_tests).
    cd "$(dirname "$1")" && GTEST_TOTAL_SHARDS=$2 GTEST_SHARD_INDEX=$3 \
      timeout 1800 "./$(basename "$1")" --gtest_filter="$4" >"$5.$3" 2>&1
    echo $? >"$5.$3.status"' _ "$program" "$shards" {} "$filter" "$log" || true
  for ((i = 0; i < shards; i++)); do
    status=$(cat "$log.$i.status" 2>/dev/null || echo "none")
    if [ "$status" != 0 ]; then
      failed=1
      echo "== shard $i of $shards failed (exit status $status):"
      cat "$log.$i" 2>/dev/null || true
    fi
  done
  # One summary: the cases run, passed and skipped over the shards.
  cat "$log".*[0-9] | awk -v shards="$shards" '
    /^\[==========\] [0-9]+ tests? from .* ran/ { ran += $2 }
    /^\[  PASSED  \] [0-9]+ tests?\./ { passed += $4 }
    /^\[  SKIPPED \] [0-9]+ tests?, listed below/ { skipped += $4 }
    /^\[  SKIPPED \] [^0-9]/ && !/ms\)$/ { names = names "\n  skipped: " $4 }
    END { printf "GoogleTest: %d cases in %d shards, %d passed, %d skipped%s\n",
                 ran, shards, passed, skipped, names }'
  rm -f "$log".*
  return "$failed"
}

echo "== tests under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan)"
# Left to the release build:
# - what does not depend on the build flavour: the aarch64 compile check,
#   the format check, the public headers' and the layers' checks;
# - the logits goldens of quantized and 16-bit weights (the F32 and
#   all-tensor cases run every family's code, and the kernel tests every
#   weight type's kernels, under the sanitizers);
# - the bench command's read-bandwidth sweep (a measurement);
# - the quantize recipes' goldens (20 whole-model quantizations; the
#   quantizers meet the sanitizers in the per-type tests);
# - what runs outside the sanitized programs: the pkg-config paths check
#   (cmake -P), the Python package (a python3 not built with ASan cannot
#   load the sanitized libcortiq.so) and the install-and-consume check (it
#   installs the release build);
# - Server.JsonSchema's 2,200 generations (a statistical check of the
#   outputs; the grammar code meets the sanitizers in the GoogleTest cases
#   and in Server.Tools' constrained replies).
# The C API's own test program (CApi.*) runs here, sanitized.
golden=*/LogitsGolden.MatchesThePeer
run_gtest_shards build-asan/tests/cortiq_tests "*-$golden/*_f16:$golden/*_bf16:$golden/*_q8_0:\
$golden/*_q4_0:$golden/*_q4_k:$golden/*_q6_k:CliBench.DepthAndReadBandwidth:QuantRecipeGolden.*:Vulkan*:DeviceRoute.*:CliMain.Version*:CliMain.CortiqSimd*"
# The Vulkan tests (and --device's, which open the device) in one process
# (lavapipe compiles each shader once per process) without leak detection,
# and `cortiq --version`'s, which lists the
# Vulkan devices: Mesa's driver leaves a few small blocks behind when the
# loader unloads it, in frames LeakSanitizer cannot name to suppress.
# Address and undefined-behaviour checks stay on.
echo "== Vulkan tests (build-asan, no leak check)"
(cd build-asan/tests && ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 ./cortiq_tests \
  --gtest_filter='Vulkan*:DeviceRoute.*:CliMain.Version*:CliMain.CortiqSimd*' --gtest_brief=1)
# The other programs (the server's tests, the C API's, checks by script).
ctest --test-dir build-asan --output-on-failure -j "$(nproc)" -LE gtest \
  -E 'Portability|Format|PublicHeaders|Layers|^Python\.|CApi\.(Consumer|PkgConfig)|Server\.JsonSchema'
# The kernel tests once more at the AVX2 level: on an AVX-512 machine the
# run above takes the AVX-512 kernels, and the AVX2 ones (what an AVX2-only
# machine runs) would otherwise never meet the sanitizers there.
echo "== kernel tests at CORTIQ_SIMD=avx2 (build-asan)"
CORTIQ_SIMD=avx2 run_gtest_shards build-asan/tests/cortiq_tests 'Kernel*'
echo "== tests (build)"
ctest --test-dir build --output-on-failure -j "$(nproc)"
