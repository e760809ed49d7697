#!/usr/bin/env bash
# Regenerates tests/golden/logits/*.logits from the peer: for every case of
# tests/golden/logits/cases.tsv, `cortiq gen-model` writes the model, the
# peer's peer-logits (f32 KV cache, flash attention off) computes the logits
# of a fixed 64-token sequence, and logits_golden.py keeps them.
#
# The peer runs with -b 1 (one token per decode, its reference vec_dot path
# for every row). Its batched path rounds differently (up to 2.6e-2 relative
# on Q6_K, 3.7e-3 on BF16, against its own -b 1 result); Cortiq is batch
# invariant, so it can match one of the two, and the per-row one is the
# meaningful reference.
#   tools/peer/make-logits-goldens.sh [path/to/cortiq]
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CORTIQ=${1:-$ROOT/build/src/cli/cortiq}
PEER=${PEER:-$HOME/.cache/cortiq-peer/llama.cpp}
BIN="$PEER/build/bin"
VOCAB=${VOCAB:-$ROOT/../shared/data/vocab}
[ -x "$BIN/peer-logits" ] || { echo "no $BIN/peer-logits: run ../shared/peer/build-llama-cpp.sh" >&2; exit 1; }
OUT="$ROOT/tests/golden/logits"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# shellcheck source=golden_cases.sh
. "$HERE/golden_cases.sh"
golden_case() {
  local name=$1 model=$2 ids=$3
  LD_LIBRARY_PATH="$BIN" "$BIN/peer-logits" -m "$model" --ids "$ids" -o "$WORK/$name.f32" -b 1 -t 2 "${@:4}" \
    >/dev/null 2>"$WORK/$name.log" || { cat "$WORK/$name.log" >&2; exit 1; }
  python3 "$HERE/logits_golden.py" "$WORK/$name.f32" "$ids" "$OUT/$name.logits"
  echo "$name: $(stat -c %s "$OUT/$name.logits") bytes"
}
each_case "$OUT/cases.tsv"

[ -z "${ONLY:-}" ] || exit 0
# stories260K (a real trained model, ../shared/data/models): converted by
# `cortiq convert llama2c`, the logits of BOS and its 40 greedy ids.
STORIES=${STORIES:-$ROOT/../shared/data/models/stories260K.bin}
if [ -f "$STORIES" ]; then
  "$CORTIQ" convert llama2c "$STORIES" "$WORK/stories260K.gguf" >/dev/null
  ids="1 461 461 401 401 401 461 378 455 473 456 435 299 362 409 283 264 283 452 288 13 431 431 431 431 431 431 431 431 431 431 431 431 431 293 430 417 363 416 315 342"
  LD_LIBRARY_PATH="$BIN" "$BIN/peer-logits" -m "$WORK/stories260K.gguf" --ids "$ids" \
    -o "$WORK/stories260K.f32" -b 1 -t 2 >/dev/null 2>"$WORK/stories.log" || { cat "$WORK/stories.log" >&2; exit 1; }
  python3 "$HERE/logits_golden.py" "$WORK/stories260K.f32" "$ids" "$OUT/stories260K.logits"
  echo "stories260K: $(stat -c %s "$OUT/stories260K.logits") bytes"
fi
