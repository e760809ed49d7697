#!/usr/bin/env bash
# Speculative decoding against llama.cpp on the same pair, the same threads,
# in one run: plain decoding (Cortiq `run`, llama.cpp `llama-bench` tg),
# a draft model (Cortiq `--draft-model`, llama.cpp `llama-speculative`)
# at two draft depths, and prompt lookup (Cortiq `--spec lookup`), greedy.
# Prints a Markdown table of tokens/s and acceptance.
#
#   bench/speculative/compare.sh TARGET.gguf DRAFT.gguf [options]
#     -t N        threads (default 2)
#     -n N        tokens to generate (default 64)
#     -p TEXT     the prompt (default: a story opening)
#     --cortiq P  the cortiq binary (default build/src/cli/cortiq)
#     --peer DIR  llama.cpp's bin directory (default ~/.cache/cortiq-peer/llama.cpp/build/bin)
#
# The issue's target: a Llama-1B-geometry F16 file with its own Q4_0
# quantization as the draft (`cortiq quantize T.gguf D.gguf Q4_0`). With
# random weights the two agree on ~20 % of tokens; trained weights agree far
# more often, and only they show what drafting gains.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
[ $# -ge 2 ] || { sed -n '2,18p' "$0"; exit 2; }
TARGET=$1 DRAFT=$2
shift 2
THREADS=2 N=64 PROMPT="Once upon a time there was a little fox who lived in the forest"
CORTIQ=$ROOT/build/src/cli/cortiq
PEER=$HOME/.cache/cortiq-peer/llama.cpp/build/bin
while [ $# -gt 0 ]; do
  case $1 in
    -t) THREADS=$2; shift 2 ;;
    -n) N=$2; shift 2 ;;
    -p) PROMPT=$2; shift 2 ;;
    --cortiq) CORTIQ=$2; shift 2 ;;
    --peer) PEER=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

# `cortiq run --json`: decode tokens/s and the speculative counters.
cortiq_row() {
  local what=$1
  shift
  "$CORTIQ" run -m "$TARGET" -p "$PROMPT" -n "$N" -t "$THREADS" --temp 0 --json "$@" 2>/dev/null |
    python3 -c "
import json, sys
r = json.load(sys.stdin)
s = r['speculative']
rate = f\"{100 * s['acceptance_rate']:.1f} % ({s['accepted']}/{s['drafted']})\" if s['drafted'] else ''
print(f\"| Cortiq | $what | {r['timings']['decode_tokens_per_second']:.2f} | {rate} |\")"
}

# llama-speculative: its decode speed and acceptance.
peer_row() {
  local depth=$1
  "$PEER/llama-speculative" -m "$TARGET" -md "$DRAFT" -p "$PROMPT" -n "$N" -t "$THREADS" \
    -td "$THREADS" --temp 0 --spec-draft-n-max "$depth" --spec-draft-n-min 0 -c 2048 2>&1 |
    python3 -c "
import re, sys
log = sys.stdin.read()
speed = re.search(r'decoded\s+\d+ tokens in\s+[0-9.]+ seconds, speed:\s+([0-9.]+) t/s', log)
drafted = re.search(r'n_drafted\s*=\s*(\d+)', log)
accepted = re.search(r'n_accept\s*=\s*(\d+)', log)
if not speed:
    sys.exit('llama-speculative failed:\n' + log[-2000:])
d, a = int(drafted[1]), int(accepted[1])
print(f'| llama.cpp | draft model, depth $depth | {float(speed[1]):.2f} | {100 * a / d:.1f} % ({a}/{d}) |')"
}

peer_plain() {
  "$PEER/llama-bench" -m "$TARGET" -p 0 -n "$N" -t "$THREADS" -r 1 -o json 2>/dev/null |
    python3 -c "
import json, sys
r = json.load(sys.stdin)[0]
print(f\"| llama.cpp | plain (llama-bench tg$N) | {r['avg_ts']:.2f} | |\")"
}

"$CORTIQ" --version | sed -n 2p
echo
echo "| engine | decoding | tokens/s | drafts kept |"
echo "|---|---|---:|---:|"
cortiq_row "plain"
peer_plain
for depth in 16 4; do
  cortiq_row "draft model, depth $depth" --draft-model "$DRAFT" --draft-max "$depth"
  peer_row "$depth"
done
cortiq_row "prompt lookup" --spec lookup
