#!/usr/bin/env bash
# Regenerates the tokenizer goldens of ours that llama.cpp answers: the
# synthetic PLaMo-2 and RWKV vocabularies (tools/peer/plamo2_vocab.py,
# tools/peer/rwkv_vocab.py) and the ids llama.cpp's tokenizer gives the
# strings of tests/golden/tokenizer/{plamo2,rwkv}-vocab.gguf.inp (no BOS/EOS,
# specials not parsed), written to its .out; for RWKV also the ids with
# add_special and parse_special (.special.out) and llama_detokenize of each
# id alone, as hex, one line per id (.pieces).
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
g++ -std=c++17 -O1 -I"$PEER/include" -I"$PEER/ggml/include" "$HERE/peer_detokenize.cpp" \
  -L"$BIN" -lllama -Wl,-rpath,"$BIN" -o "$WORK/peer_detokenize"
DATA="$ROOT/tests/golden/tokenizer"
python3 "$HERE/plamo2_vocab.py" "$DATA/plamo2-vocab.gguf"
"$WORK/peer_tokenize" "$DATA/plamo2-vocab.gguf" "$DATA/plamo2-vocab.gguf.inp" \
  >"$DATA/plamo2-vocab.gguf.out" 2>"$WORK/log" || { cat "$WORK/log" >&2; exit 1; }
echo "plamo2-vocab: $(wc -l <"$DATA/plamo2-vocab.gguf.out") strings"
N=$(python3 "$HERE/rwkv_vocab.py" "$DATA/rwkv-vocab.gguf")  # prints the token count
for mode in "" --special; do
  "$WORK/peer_tokenize" "$DATA/rwkv-vocab.gguf" "$DATA/rwkv-vocab.gguf.inp" $mode \
    >"$DATA/rwkv-vocab.gguf${mode:+.special}.out" 2>"$WORK/log" || { cat "$WORK/log" >&2; exit 1; }
done
seq 0 $((N - 1)) | "$WORK/peer_detokenize" "$DATA/rwkv-vocab.gguf" >"$DATA/rwkv-vocab.gguf.pieces"
echo "rwkv-vocab: $N tokens, $(wc -l <"$DATA/rwkv-vocab.gguf.out") strings"
