#!/usr/bin/env bash
# Regenerates tests/golden/quant/*.qgold from the peer (llama.cpp's
# ggml-base): builds make_quant_goldens.cpp against the peer's headers and
# libggml-base and runs it. Needs the peer built first
# (/work/shared/peer/build-llama-cpp.sh, or PEER=path/to/llama.cpp).
# Not part of the CMake build: the tests only read the committed files.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PEER=${PEER:-$HOME/.cache/cortiq-peer/llama.cpp}
LIB="$PEER/build/bin"
[ -f "$LIB/libggml-base.so" ] || { echo "no $LIB/libggml-base.so: build the peer first" >&2; exit 1; }
BUILD=$(mktemp -d)
trap 'rm -rf "$BUILD"' EXIT
g++ -O2 -std=c++17 -I "$PEER/ggml/include" "$HERE/make_quant_goldens.cpp" \
  -L "$LIB" -lggml-cpu -lggml-base -Wl,-rpath,"$LIB" -o "$BUILD/make_quant_goldens"
OUT="$ROOT/tests/golden/quant"
mkdir -p "$OUT"
"$BUILD/make_quant_goldens" "$OUT"
