#!/usr/bin/env bash
# Regenerates tests/golden/perplexity/goldens.tsv from the peer (llama.cpp):
#   llama-bpe-f16-ppl   llama-perplexity -c 256 --chunks 8 on Debian's
#                       /usr/share/common-licenses/GPL-3 (base-files),
#                       a gen-model F16 model with the Llama 3 vocabulary
#   llama-bpe-q4_0-kld  llama-perplexity --kl-divergence: that model quantized
#                       to Q4_0 (cortiq quantize) against the F16 one's saved
#                       log-probabilities (mean KLD)
#   stories260K-ppl     stories260K (cortiq convert) over the ids of
#                       tests/data/stories260K-ids.txt in chunks of 128: the
#                       peer's logits (peer-logits) scored with the peer's method
#                       (its tokenizer is absent, so llama-perplexity cannot read text)
# The test (tests/test_scoring_perplexity.cpp) builds the same models.
#   tools/peer/make-perplexity-goldens.sh [path/to/cortiq]
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CORTIQ=${1:-$ROOT/build/src/cli/cortiq}
PEER=${PEER:-$HOME/.cache/cortiq-peer/llama.cpp}
BIN="$PEER/build/bin"
DATA=${DATA:-$ROOT/../shared/data}
[ -x "$BIN/llama-perplexity" ] || { echo "no $BIN/llama-perplexity: run ../shared/peer/build-llama-cpp.sh" >&2; exit 1; }
OUT="$ROOT/tests/golden/perplexity/goldens.tsv"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
peer() { LD_LIBRARY_PATH="$BIN" "$@"; }

"$CORTIQ" gen-model --arch llama --type F16 --vocab-from "$DATA/vocab/ggml-vocab-llama-bpe.gguf" \
  --embd 128 --layers 2 --heads 4 --kv-heads 2 --ff 256 --seed 5 -o "$WORK/f16.gguf" >/dev/null
"$CORTIQ" quantize "$WORK/f16.gguf" "$WORK/q4_0.gguf" Q4_0 >/dev/null 2>&1
ppl=$(peer "$BIN/llama-perplexity" -m "$WORK/f16.gguf" -f /usr/share/common-licenses/GPL-3 -c 256 \
        --chunks 8 -t 2 --kl-divergence-base "$WORK/base.kld" 2>&1 |
      sed -n 's/.*Final estimate: PPL = \([0-9.]*\) .*/\1/p')
kld=$(peer "$BIN/llama-perplexity" -m "$WORK/q4_0.gguf" --kl-divergence-base "$WORK/base.kld" \
        --kl-divergence -t 2 2>&1 | sed -n 's/^Mean    KLD: *\([0-9.e-]*\) .*/\1/p')

"$CORTIQ" convert llama2c "$DATA/models/stories260K.bin" "$WORK/stories.gguf" >/dev/null
read -r -a ids <<< "$(tr '\n' ' ' < "$ROOT/tests/data/stories260K-ids.txt")"
for ((c = 0; c < 8; c++)); do
  peer "$BIN/peer-logits" -m "$WORK/stories.gguf" --ids "${ids[*]:c*128:128}" \
    -o "$WORK/chunk$c.f32" -t 2 >/dev/null 2>&1
done
stories=$(/usr/bin/python3 - "$WORK" "$ROOT/tests/data/stories260K-ids.txt" <<'PY'
import sys, numpy as np
work, ids_file = sys.argv[1], sys.argv[2]
ids = [int(t) for t in open(ids_file).read().split()]
nll = []
for c in range(8):
    chunk = ids[c * 128:(c + 1) * 128]
    logits = np.fromfile(f"{work}/chunk{c}.f32", dtype=np.float32).reshape(128, -1).astype(np.float64)
    for j in range(64, 127):  # rows [ctx/2, ctx-1) predict token j + 1
        row = logits[j]
        m = row.max()
        nll.append(m + np.log(np.exp(row - m).sum()) - row[chunk[j + 1]])
print(f"{np.exp(np.mean(nll)):.6f}")
PY
)
{
  echo "# name	value	(made by tools/peer/make-perplexity-goldens.sh, llama.cpp $(git -C "$PEER" rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo "llama-bpe-f16-ppl	$ppl"
  echo "llama-bpe-q4_0-kld	$kld"
  echo "stories260K-ppl	$stories"
} > "$OUT"
cat "$OUT"
