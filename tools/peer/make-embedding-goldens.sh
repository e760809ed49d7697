#!/usr/bin/env bash
# Regenerates tests/golden/embeddings/*.embd from llama.cpp: for every case
# of tests/golden/embeddings/cases.tsv (the columns of the logits goldens'
# cases.tsv), `cortiq gen-model` writes the encoder model, peer-embeddings
# (built here from peer_embeddings.cpp against llama.cpp's libllama) gives the
# hidden state of every position of a fixed 64-token sequence in one
# llama_encode, and logits_golden.py keeps them (one row per position, every
# column: the embedding width is small).
#   tools/peer/make-embedding-goldens.sh [path/to/cortiq]
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CORTIQ=${1:-$ROOT/build/src/cli/cortiq}
PEER=${PEER:-$HOME/.cache/cortiq-peer/llama.cpp}
BIN="$PEER/build/bin"
VOCAB=${VOCAB:-$ROOT/../shared/data/vocab}
[ -f "$BIN/libllama.so" ] || { echo "no $BIN/libllama.so: run ../shared/peer/build-llama-cpp.sh" >&2; exit 1; }
OUT="$ROOT/tests/golden/embeddings"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
g++ -O2 -std=c++17 -I "$PEER/include" -I "$PEER/ggml/include" "$HERE/peer_embeddings.cpp" \
  -L "$BIN" -lllama -lggml -lggml-base -Wl,-rpath,"$BIN" -o "$WORK/peer-embeddings"

# shellcheck source=golden_cases.sh
. "$HERE/golden_cases.sh"
golden_case() {
  local name=$1 model=$2 ids=$3
  "$WORK/peer-embeddings" -m "$model" --ids "$ids" -o "$WORK/$name.f32" -t 2 \
    >/dev/null 2>"$WORK/$name.log" || { cat "$WORK/$name.log" >&2; exit 1; }
  python3 "$HERE/logits_golden.py" "$WORK/$name.f32" "$ids" "$OUT/$name.embd"
  echo "$name: $(stat -c %s "$OUT/$name.embd") bytes"
}
each_case "$OUT/cases.tsv"
