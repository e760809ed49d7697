#!/usr/bin/env bash
# Checks cortiq's GGUF reading and writing against the peer (llama.cpp):
#   1. `cortiq inspect --json` reports the same keys (in order), tensor names,
#      types, sizes and offsets as `llama-gguf FILE r n`, for every
#      shared vocabulary file and for gen-model / quantize outputs;
#   2. gen-model outputs (llama, qwen2, qwen3 x F32 F16 Q8_0 Q4_0 Q4_K) load
#      and generate in `llama-completion ... -no-cnv` and `llama-simple`;
#   3. `cortiq quantize` outputs load in the peer, and for each recipe give
#      every tensor the same type and the same bytes as `llama-quantize` does
#      on the same input (tests/golden/quantize keeps what llama-quantize
#      wrote, for CI: tools/peer/make-quantize-goldens.sh).
# Not run by CI: it needs the peer's binaries (shared/peer/build-llama-cpp.sh).
#
# usage: tools/peer/check-peer-loads.sh [CORTIQ_BINARY]
# env:   PEER_BIN (default ~/.cache/cortiq-peer/llama.cpp/build/bin),
#        VOCAB_DIR (default ../shared/data/vocab), THREADS (default 2),
#        KEEP=1 keeps the work folder.
set -uo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
cortiq=${1:-}
if [[ -z $cortiq ]]; then
  for candidate in "$repo/build-cli/src/cli/cortiq" "$repo/build/src/cli/cortiq"; do
    [[ -x $candidate ]] && { cortiq=$candidate; break; }
  done
fi
peer=${PEER_BIN:-$HOME/.cache/cortiq-peer/llama.cpp/build/bin}
vocab_dir=${VOCAB_DIR:-$repo/../shared/data/vocab}
threads=${THREADS:-2}
for tool in "$cortiq" "$peer/llama-gguf" "$peer/llama-completion" "$peer/llama-simple" \
            "$peer/llama-quantize"; do
  [[ -x $tool ]] || { echo "missing executable: $tool" >&2; exit 2; }
done
command -v jq >/dev/null || { echo "jq is required" >&2; exit 2; }
command -v python3 >/dev/null || { echo "python3 is required" >&2; exit 2; }

work=$(mktemp -d /tmp/check-peer-loads.XXXXXX)
[[ ${KEEP:-0} == 1 ]] || trap 'rm -rf "$work"' EXIT
n_pass=0 n_fail=0
pass() { n_pass=$((n_pass + 1)); echo "ok    $*"; }
fail() { n_fail=$((n_fail + 1)); echo "FAIL  $*"; }

# "key" lines then "name TYPE bytes offset" lines, as each tool reports them.
cortiq_listing() {
  "$cortiq" inspect --json "$1" 2>/dev/null |
    jq -r '(.metadata[] | "kv \(.key)"), (.tensors[] | "t \(.name) \(.type|ascii_upcase) \(.bytes) \(.offset)")'
}
peer_listing() {
  "$peer/llama-gguf" "$1" r n 2>/dev/null | sed -n \
    -e 's/^gguf_ex_read_1: kv\[[0-9]*\]: key = \(.*\)$/kv \1/p' \
    -e 's/^gguf_ex_read_1: tensor\[[0-9]*\]: name = \(.*\), size = \([0-9]*\), offset = \([0-9]*\), type = \([^,]*\), .*$/t \1 \4 \2 \3/p' |
    awk '$1 == "t" { $3 = toupper($3) } { print }'
}
compare_with_llama_gguf() {  # FILE LABEL
  local file=$1 label=$2
  cortiq_listing "$file" >"$work/c.txt"
  peer_listing "$file" >"$work/p.txt"
  if [[ ! -s $work/p.txt ]]; then
    fail "inspect $label: llama-gguf printed nothing"
  elif diff -q "$work/c.txt" "$work/p.txt" >/dev/null; then
    pass "inspect $label: $(grep -c '^kv' "$work/c.txt") keys, $(grep -c '^t' "$work/c.txt") tensors agree with llama-gguf"
  else
    fail "inspect $label differs from llama-gguf:"; diff "$work/c.txt" "$work/p.txt" | head -10
  fi
}

# Loads FILE in llama-completion and llama-simple and generates 4 tokens.
check_peer_runs() {  # FILE LABEL
  local file=$1 label=$2
  if ! timeout 300 "$peer/llama-completion" -m "$file" -p hi -n 4 -no-cnv --temp 0 -s 1 \
      -t "$threads" >"$work/completion.log" 2>&1; then
    fail "llama-completion $label (exit $?)"; tail -5 "$work/completion.log"; return
  fi
  if ! timeout 300 "$peer/llama-simple" -m "$file" -n 4 hi >"$work/simple.out" 2>"$work/simple.log" ||
     ! grep -q "decoded 4 tokens" "$work/simple.log"; then
    fail "llama-simple $label"; grep -iE "error|fail" "$work/simple.log" | head -5; return
  fi
  pass "peer loads and runs $label: $(tr -d '\n' <"$work/simple.out" | head -c 60 | LC_ALL=C tr -c '[:print:]' '?')"
}

echo "== 1. inspect vs llama-gguf on the shared vocabularies"
shopt -s nullglob
for f in "$vocab_dir"/*.gguf; do compare_with_llama_gguf "$f" "$(basename "$f")"; done

echo "== 2. gen-model outputs in the peer"
for arch in llama qwen2 qwen3; do
  extra=""
  [[ $arch == qwen3 ]] && extra="--head-dim 32"  # q/k/v wider than n_embd/n_head: key_length
  for type in F32 F16 Q8_0 Q4_0 Q4_K; do
    out="$work/$arch-$type.gguf"
    if "$cortiq" gen-model --arch "$arch" --type "$type" --layers 2 $extra -o "$out" 2>"$work/gen.log"; then
      check_peer_runs "$out" "gen-model $arch $type"
    else
      fail "gen-model $arch $type"; cat "$work/gen.log"
    fi
  done
done
"$cortiq" gen-model --arch llama --tied --type Q8_0 -o "$work/tied.gguf" 2>/dev/null &&
  check_peer_runs "$work/tied.gguf" "gen-model llama Q8_0 --tied"
compare_with_llama_gguf "$work/qwen3-Q4_K.gguf" "gen-model qwen3 Q4_K"

echo "== 3. quantize: peer loads the output; per-tensor types (and bytes) match llama-quantize"
base="$work/base.gguf"
"$cortiq" gen-model --arch llama --layers 8 --heads 8 --kv-heads 2 --embd 256 --ff 768 \
  --seed 7 -o "$base" 2>/dev/null || fail "gen-model base"
# Data section starts where llama-gguf says; compare each tensor's bytes.
tensor_bytes_agree() {  # CORTIQ_FILE PEER_FILE -> prints "same N/M"
  python3 - "$1" "$2" "$("$peer/llama-gguf" "$1" r n | sed -n 's/^gguf_ex_read_0: data offset: //p')" \
    "$("$peer/llama-gguf" "$2" r n | sed -n 's/^gguf_ex_read_0: data offset: //p')" \
    <("$cortiq" inspect --json "$1" 2>/dev/null) <("$cortiq" inspect --json "$2" 2>/dev/null) <<'PY'
import json, sys
a_path, b_path, a_off, b_off, a_json, b_json = sys.argv[1:7]
ta = {t["name"]: t for t in json.load(open(a_json))["tensors"]}
tb = {t["name"]: t for t in json.load(open(b_json))["tensors"]}
fa, fb = open(a_path, "rb"), open(b_path, "rb")
same = 0
for name, t in ta.items():
    u = tb[name]
    fa.seek(int(a_off) + t["offset"]); fb.seek(int(b_off) + u["offset"])
    same += fa.read(t["bytes"]) == fb.read(u["bytes"])
print(f"{same}/{len(ta)}")
PY
}
# Rows of 96 (3 blocks of 32) and 200 (not even 32) exercise the fallbacks.
odd="$work/odd.gguf"
"$cortiq" gen-model --arch qwen2 --layers 2 --heads 2 --kv-heads 1 --embd 96 --ff 200 \
  --seed 7 -o "$odd" 2>/dev/null || fail "gen-model odd"
recipes="Q4_K_M Q4_K_S Q5_K_M Q5_K_S Q3_K_S Q3_K_M Q3_K_L Q2_K Q6_K Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 IQ4_NL"
for job in $(for r in $recipes; do echo "base:$r"; done) odd:Q4_K_M odd:Q2_K odd:Q6_K odd:Q5_K_S odd:Q4_0; do
  input="$work/${job%%:*}.gguf" recipe=${job#*:}
  ours="$work/ours-${job%%:*}-$recipe.gguf" theirs="$work/peer-${job%%:*}-$recipe.gguf"
  recipe_label="$recipe (${job%%:*})"
  if ! "$cortiq" quantize "$input" "$ours" "$recipe" --threads "$threads" >"$work/q.log" 2>&1; then
    fail "cortiq quantize $recipe_label"; tail -3 "$work/q.log"; continue
  fi
  "$peer/llama-quantize" "$input" "$theirs" "$recipe" "$threads" >"$work/pq.log" 2>&1 ||
    { fail "llama-quantize $recipe_label"; tail -3 "$work/pq.log"; continue; }
  "$cortiq" inspect --json "$ours" 2>/dev/null | jq -r '.tensors[] | "\(.name) \(.type)"' | sort >"$work/ot.txt"
  "$cortiq" inspect --json "$theirs" 2>/dev/null | jq -r '.tensors[] | "\(.name) \(.type)"' | sort >"$work/pt.txt"
  ft_ours=$("$cortiq" inspect --json "$ours" 2>/dev/null | jq '.metadata[] | select(.key=="general.file_type") | .value')
  ft_peer=$("$cortiq" inspect --json "$theirs" 2>/dev/null | jq '.metadata[] | select(.key=="general.file_type") | .value')
  if diff -q "$work/ot.txt" "$work/pt.txt" >/dev/null && [[ $ft_ours == "$ft_peer" ]]; then
    pass "quantize $recipe_label: tensor types and file_type $ft_ours match llama-quantize"
  else
    fail "quantize $recipe_label: types differ from llama-quantize (file_type $ft_ours vs $ft_peer)"
    diff "$work/ot.txt" "$work/pt.txt" | head -8
  fi
  same=$(tensor_bytes_agree "$ours" "$theirs")
  if [[ ${same%/*} == "${same#*/}" ]]; then
    pass "quantize $recipe_label: all $same tensors byte-identical to llama-quantize"
  else
    fail "quantize $recipe_label: only $same tensors byte-identical to llama-quantize"
  fi
  case $job in base:Q4_K_M|base:Q2_K|base:Q4_0|base:IQ4_NL|base:Q8_0|odd:*) check_peer_runs "$ours" "cortiq quantize $recipe_label" ;; esac
done
compare_with_llama_gguf "$work/ours-base-Q4_K_M.gguf" "quantize Q4_K_M output"
for recipe in Q4_K_M Q6_K IQ4_NL; do  # files the peer wrote
  compare_with_llama_gguf "$work/peer-base-$recipe.gguf" "llama-quantize $recipe output"
done

echo
echo "passed $n_pass, failed $n_fail"
[[ $n_fail == 0 ]]
