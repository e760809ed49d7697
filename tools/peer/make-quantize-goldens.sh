#!/usr/bin/env bash
# Regenerates tests/golden/quantize/*.tsv: what each `llama-quantize` recipe
# writes for two gen-model inputs (one whose rows fit every block, one with
# 96- and 200-wide rows for the fallbacks): general.file_type, and per
# tensor its type and the FNV-1a 64 hash of its bytes.
# tests/test_quant_recipe_golden.cpp runs `cortiq quantize` on the same
# inputs and requires the same. Needs the peer built
# (../shared/peer/build-llama-cpp.sh; PEER_BIN overrides where) and a cortiq
# binary (for gen-model and inspect).
#
# usage: tools/peer/make-quantize-goldens.sh [CORTIQ_BINARY]
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cortiq=${1:-$repo/build/src/cli/cortiq}
peer=${PEER_BIN:-$HOME/.cache/cortiq-peer/llama.cpp/build/bin}
for tool in "$cortiq" "$peer/llama-quantize" "$peer/llama-gguf"; do
  [[ -x $tool ]] || { echo "missing executable: $tool" >&2; exit 2; }
done
peer_commit=$(git -C "$peer/../.." rev-parse --short HEAD 2>/dev/null || echo unknown)
out=$repo/tests/golden/quantize
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
rm -f "$out"/*.tsv

# The inputs: the same gen-model arguments as tools/peer/check-peer-loads.sh.
declare -A inputs=(
  [base]="--arch llama --layers 8 --heads 8 --kv-heads 2 --embd 256 --ff 768 --seed 7"
  [odd]="--arch qwen2 --layers 2 --heads 2 --kv-heads 1 --embd 96 --ff 200 --seed 7"
)
jobs="base:Q4_K_M base:Q4_K_S base:Q5_K_M base:Q5_K_S base:Q3_K_S base:Q3_K_M base:Q3_K_L base:Q2_K
base:Q6_K base:Q8_0 base:Q4_0 base:Q4_1 base:Q5_0 base:Q5_1 base:IQ4_NL
odd:Q4_K_M odd:Q2_K odd:Q6_K odd:Q5_K_S odd:Q4_0"
for name in "${!inputs[@]}"; do
  # shellcheck disable=SC2086
  "$cortiq" gen-model ${inputs[$name]} -o "$work/$name.gguf" 2>/dev/null
done
for job in $jobs; do
  input=${job%%:*} recipe=${job#*:}
  quantized="$work/$input-$recipe.gguf"
  "$peer/llama-quantize" "$work/$input.gguf" "$quantized" "$recipe" 2 >"$work/log" 2>&1 ||
    { tail -5 "$work/log" >&2; exit 1; }
  offset=$("$peer/llama-gguf" "$quantized" r n | sed -n 's/^gguf_ex_read_0: data offset: //p')
  "$cortiq" inspect --json "$quantized" 2>/dev/null >"$work/inspect.json"
  python3 - "$quantized" "$offset" "$work/inspect.json" "${inputs[$input]}" "$recipe" "$peer_commit" \
    >"$out/$input-$recipe.tsv" <<'PY'
import json, sys
path, offset, inspect, args, recipe, commit = sys.argv[1:7]
info = json.load(open(inspect))
def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h
print(f"# llama-quantize {recipe} (llama.cpp {commit}); tools/peer/make-quantize-goldens.sh")
print(f"gen-model\t{args}")
print(f"recipe\t{recipe}")
file_type = next(kv["value"] for kv in info["metadata"] if kv["key"] == "general.file_type")
print(f"file_type\t{file_type}")
with open(path, "rb") as f:
    for t in info["tensors"]:
        f.seek(int(offset) + t["offset"])
        print(f"{t['name']}\t{t['type'].upper()}\t{fnv1a64(f.read(t['bytes'])):016x}")
PY
  echo "$input $recipe: $(($(wc -l <"$out/$input-$recipe.tsv") - 4)) tensors"
done
