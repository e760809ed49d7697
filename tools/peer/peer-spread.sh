#!/usr/bin/env bash
# llama.cpp against itself: for the cases of tests/golden/logits/cases.tsv
# (those ONLY, a regular expression, matches), its logits with one token per
# decode (-b 1, as the goldens) and with the whole sequence in one batch
# (-b 64), and the worst relative L2 error between the two over the 64
# positions. The goldens' bounds are judged against this: a case whose
# Cortiq-vs-llama.cpp error is inside llama.cpp's own spread on the same file
# is at the reference's rounding noise (docs/testing.md).
#
# Where llama.cpp also has an AVX2-only build beside the native one (its
# libraries in $PEER/build-avx2/bin, e.g. cmake -S $PEER -B $PEER/build-avx2
# -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_AVX2=ON
# -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF && ninja -C
# $PEER/build-avx2 llama), the same -b 1 run on it is compared too: the
# spread between two machines' llama.cpp on one file.
#   ONLY='^(mamba|jamba)-f16$' tools/peer/peer-spread.sh [path/to/cortiq]
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CORTIQ=${1:-$ROOT/build/src/cli/cortiq}
PEER=${PEER:-$HOME/.cache/cortiq-peer/llama.cpp}
BIN="$PEER/build/bin"
AVX2="$PEER/build-avx2/bin"
VOCAB=${VOCAB:-$ROOT/../shared/data/vocab}
[ -x "$BIN/peer-logits" ] || { echo "no $BIN/peer-logits: run ../shared/peer/build-llama-cpp.sh" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# The worst per-position relative L2 error of logits files $2.. against $1.
cat >"$WORK/spread.py" <<'PY'
import array, math, sys

def logits(path):
    values = array.array("f")
    with open(path, "rb") as f:
        values.frombytes(f.read())
    return values

def worst(one, other):
    n_vocab, result = len(one) // 64, 0.0
    for p in range(64):
        a, b = one[p * n_vocab:(p + 1) * n_vocab], other[p * n_vocab:(p + 1) * n_vocab]
        diff2 = sum((x - y) ** 2 for x, y in zip(a, b))
        result = max(result, math.sqrt(diff2 / sum(x * x for x in a)))
    return result

one = logits(sys.argv[1])
print(" ".join(f"{worst(one, logits(path)):.3g}" for path in sys.argv[2:]))
PY

# shellcheck source=golden_cases.sh
. "$HERE/golden_cases.sh"
golden_case() {
  local name=$1 model=$2 ids=$3 tag batch libs spreads
  for run in b1:1:$BIN b64:64:$BIN avx2:1:$AVX2; do
    IFS=: read -r tag batch libs <<<"$run"
    [ -f "$libs/libggml-cpu.so" ] || continue
    LD_LIBRARY_PATH="$libs" "$BIN/peer-logits" -m "$model" --ids "$ids" -o "$WORK/$name.$tag" \
      -b "$batch" -t 2 >/dev/null 2>"$WORK/$name.log" || { cat "$WORK/$name.log" >&2; exit 1; }
  done
  if [ -f "$WORK/$name.avx2" ]; then
    read -r b64 avx2 <<<"$(python3 "$WORK/spread.py" "$WORK/$name".{b1,b64,avx2})"
    echo "$name: llama.cpp -b 1 vs -b 64 $b64, vs its AVX2 build $avx2 (max rel L2)"
  else
    spreads=$(python3 "$WORK/spread.py" "$WORK/$name".{b1,b64})
    echo "$name: llama.cpp -b 1 vs -b 64 $spreads (max rel L2)"
  fi
}
each_case "$ROOT/tests/golden/logits/cases.tsv"
