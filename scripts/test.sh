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
trap 'rm -rf "$corpus" "$artifacts" "$log"' EXIT
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
# - what runs outside the sanitized programs: the Python package (a python3
#   not built with ASan cannot load the sanitized libcortiq.so) and the
#   install-and-consume check (it installs the release build).
# The C API's own test program (CApi.*) runs here, sanitized.
ctest --test-dir build-asan --output-on-failure -j "$(nproc)" \
  -E 'Portability|Format|PublicHeaders|LogitsGolden\.MatchesThePeer/[a-z0-9_]*_(f16|bf16|q8_0|q4_0|q4_k|q6_k)( |$)|CliBench\.DepthAndReadBandwidth|QuantRecipeGolden|^Python\.|CApi\.Consumer'
# The kernel tests once more at the AVX2 level: on an AVX-512 machine the
# run above takes the AVX-512 kernels, and the AVX2 ones (what an AVX2-only
# machine runs) would otherwise never meet the sanitizers there.
echo "== kernel tests at CORTIQ_SIMD=avx2 (build-asan)"
CORTIQ_SIMD=avx2 ctest --test-dir build-asan --output-on-failure -j "$(nproc)" -R '^Kernel'
echo "== tests (build)"
ctest --test-dir build --output-on-failure -j "$(nproc)"
