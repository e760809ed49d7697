#!/usr/bin/env bash
# llama.cpp against itself: for the cases of tests/golden/logits/cases.tsv
# (those ONLY, a regular expression, matches), its logits with one token per
# decode (-b 1, as the goldens) and with the whole sequence in one batch
# (-b 64), and the worst relative L2 error between the two over the 64
# positions. The goldens' bounds are judged against this: a case whose
# Cortiq-vs-llama.cpp error is inside llama.cpp's own spread on the same file
# is at the reference's rounding noise (docs/testing.md).
#   ONLY='^(mamba|jamba)-f16$' tools/peer/peer-spread.sh [path/to/cortiq]
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CORTIQ=${1:-$ROOT/build/src/cli/cortiq}
PEER=${PEER:-$HOME/.cache/cortiq-peer/llama.cpp}
BIN="$PEER/build/bin"
VOCAB=${VOCAB:-$ROOT/../shared/data/vocab}
[ -x "$BIN/peer-logits" ] || { echo "no $BIN/peer-logits: run ../shared/peer/build-llama-cpp.sh" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# shellcheck source=golden_cases.sh
. "$HERE/golden_cases.sh"
golden_case() {
  local name=$1 model=$2 ids=$3 batch
  for batch in 1 64; do
    LD_LIBRARY_PATH="$BIN" "$BIN/peer-logits" -m "$model" --ids "$ids" -o "$WORK/$name.b$batch" \
      -b "$batch" -t 2 >/dev/null 2>"$WORK/$name.log" || { cat "$WORK/$name.log" >&2; exit 1; }
  done
  python3 - "$name" "$WORK/$name.b1" "$WORK/$name.b64" <<'EOF'
import array, math, sys
name, one, batched = sys.argv[1], array.array("f"), array.array("f")
with open(sys.argv[2], "rb") as f: one.frombytes(f.read())
with open(sys.argv[3], "rb") as f: batched.frombytes(f.read())
n_vocab = len(one) // 64
worst = 0.0
for p in range(64):
    a, b = one[p * n_vocab:(p + 1) * n_vocab], batched[p * n_vocab:(p + 1) * n_vocab]
    diff2 = sum((x - y) ** 2 for x, y in zip(a, b))
    norm2 = sum(x * x for x in a)
    worst = max(worst, math.sqrt(diff2 / norm2))
print(f"{name}: llama.cpp -b 1 vs -b 64, max rel L2 {worst:.3g}")
EOF
}
each_case "$ROOT/tests/golden/logits/cases.tsv"
