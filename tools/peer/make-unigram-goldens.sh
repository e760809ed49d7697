#!/usr/bin/env bash
# Regenerates the Unigram (tokenizer.ggml.model = "t5") test vocabularies
# and their goldens from the peer, llama.cpp:
#   tests/golden/tokenizer/unigram-{t5,plain}.gguf   (make_unigram_goldens.py vocab)
#   tests/golden/tokenizer/unigram-{t5,plain}.tsv    llama-tokenize's ids for every
#       case, and whether llama_detokenize gives the text back (peer-detokenize,
#       built here from peer_detokenize.cpp against the peer's libllama)
# The cases read ../shared/data/vocab/*.inp (only referenced in the goldens).
# Needs the peer built (/work/shared/peer/build-llama-cpp.sh, or
# PEER=path/to/llama.cpp). Not run by CI: the tests read the committed files.
#   bash tools/peer/make-unigram-goldens.sh
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PEER=${PEER:-$HOME/.cache/cortiq-peer/llama.cpp}
BIN="$PEER/build/bin"
VOCAB=${VOCAB:-$ROOT/../shared/data/vocab}
[ -x "$BIN/llama-tokenize" ] || { echo "no $BIN/llama-tokenize: run ../shared/peer/build-llama-cpp.sh" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
g++ -O2 -std=c++17 -I "$PEER/include" -I "$PEER/ggml/include" "$HERE/peer_detokenize.cpp" \
  -L "$BIN" -lllama -lggml -lggml-base -Wl,-rpath,"$BIN" -o "$WORK/peer-detokenize"
OUT="$ROOT/tests/golden/tokenizer"
mkdir -p "$OUT"
python3 "$HERE/make_unigram_goldens.py" vocab "$OUT"
python3 "$HERE/make_unigram_goldens.py" goldens "$OUT" "$OUT" "$BIN/llama-tokenize" \
  "$WORK/peer-detokenize" "$VOCAB"/*.inp
