#!/usr/bin/env bash
# Regenerates the tokenizer goldens of ours that llama.cpp answers: the
# synthetic PLaMo-2 vocabulary (tools/peer/plamo2_vocab.py) and the ids
# llama.cpp's tokenizer gives the strings of
# tests/golden/tokenizer/plamo2-vocab.gguf.inp
# (no BOS/EOS, specials not parsed), written to its .out.
#   tools/peer/make-tokenizer-goldens.sh
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PEER=${PEER:-$HOME/.cache/cortiq-peer/llama.cpp}
BIN="$PEER/build/bin"
[ -f "$BIN/libllama.so" ] || { echo "no $BIN/libllama.so: run ../shared/peer/build-llama-cpp.sh" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
g++ -std=c++17 -O1 -I"$PEER/include" -I"$PEER/ggml/include" "$HERE/peer_tokenize.cpp" \
  -L"$BIN" -lllama -Wl,-rpath,"$BIN" -o "$WORK/peer_tokenize"
DATA="$ROOT/tests/golden/tokenizer"
python3 "$HERE/plamo2_vocab.py" "$DATA/plamo2-vocab.gguf"
"$WORK/peer_tokenize" "$DATA/plamo2-vocab.gguf" "$DATA/plamo2-vocab.gguf.inp" \
  >"$DATA/plamo2-vocab.gguf.out" 2>"$WORK/log" || { cat "$WORK/log" >&2; exit 1; }
echo "plamo2-vocab: $(wc -l <"$DATA/plamo2-vocab.gguf.out") strings"
