#!/usr/bin/env bash
# Checks `cortiq convert llama2c` against the peer (llama.cpp):
#   1. stories260K.bin (shared/data) converted to F32 runs in the peer
#      (peer-logits: f32 KV cache, flash attention off) and greedy decoding
#      from BOS gives the 40 ids of shared/data/README.md; F16 and Q8_0
#      conversions decode as llama-quantize's F16 / Q8_0 of the F32 file
#      (their ids may differ from the f32 reference: a note, not a failure);
#   2. with a tokenizer.bin (a synthetic 512-token one written here), the file
#      loads and generates in llama-simple and llama-completion (an ids-only
#      no_vocab file cannot: the peer's text tools need a tokenizer);
#   3. if LLAMA2C_TOKENIZER names llama2.c's own tokenizer.bin (the Llama 2
#      32000-token vocabulary, in the llama2.c repository), a random llama2.c
#      checkpoint of that vocabulary converted with it tokenizes exactly as
#      the peer's ggml-vocab-llama-spm.gguf;
#   4. cortiq's own forward pass (`cortiq logits`, when built) gives the same
#      40 argmax ids on the converted F32 file.
# Not run by CI: it needs the peer's binaries (shared/peer/build-llama-cpp.sh).
#
# usage: tools/peer/check-llama2c.sh [CORTIQ_BINARY]
# env:   PEER_BIN (default ~/.cache/cortiq-peer/llama.cpp/build/bin),
#        SHARED_DATA (default ../shared/data), LLAMA2C_TOKENIZER (optional),
#        THREADS (default 2), KEEP=1 keeps the work folder.
set -uo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
cortiq=${1:-}
if [[ -z $cortiq ]]; then
  for candidate in "$repo/build-conv/src/cli/cortiq" "$repo/build/src/cli/cortiq"; do
    [[ -x $candidate ]] && { cortiq=$candidate; break; }
  done
fi
peer=${PEER_BIN:-$HOME/.cache/cortiq-peer/llama.cpp/build/bin}
shared=${SHARED_DATA:-$repo/../shared/data}
threads=${THREADS:-2}
for tool in "$cortiq" "$peer/peer-logits" "$peer/llama-simple" "$peer/llama-completion" \
            "$peer/llama-tokenize"; do
  [[ -x $tool ]] || { echo "missing executable: $tool" >&2; exit 2; }
done
command -v python3 >/dev/null || { echo "python3 is required" >&2; exit 2; }
model=$shared/models/stories260K.bin
[[ -f $model ]] || { echo "missing $model" >&2; exit 2; }

work=$(mktemp -d /tmp/check-llama2c.XXXXXX)
[[ ${KEEP:-0} == 1 ]] || trap 'rm -rf "$work"' EXIT
n_pass=0 n_fail=0 n_note=0
pass() { n_pass=$((n_pass + 1)); echo "ok    $*"; }
fail() { n_fail=$((n_fail + 1)); echo "FAIL  $*"; }
note() { n_note=$((n_note + 1)); echo "note  $*"; }

# The 40 greedy ids of shared/data/README.md (llama2.c's run.c and the peer).
expected="461 461 401 401 401 461 378 455 473 456 435 299 362 409 283 264 283 452 288 13 \
431 431 431 431 431 431 431 431 431 431 431 431 431 293 430 417 363 416 315 342"
expected=$(echo $expected)

# Greedy decoding in the peer: feed BOS, append the argmax of the last
# position, run again (peer-logits prints "pos id argmax" per position).
peer_greedy() {  # FILE N -> prints the N generated ids
  local file=$1 n=$2 ids=1 next
  for ((i = 0; i < n; i++)); do
    "$peer/peer-logits" -m "$file" --ids "$ids" -o "$work/logits.f32" -t "$threads" \
      >"$work/pl.out" 2>"$work/pl.err" || { tail -3 "$work/pl.err" >&2; return 1; }
    next=$(tail -1 "$work/pl.out" | awk '{print $3}')
    ids="$ids $next"
  done
  echo "${ids#1 }"
}

echo "== 1. stories260K: greedy ids in the peer"
for type in F32 F16 Q8_0; do
  out="$work/stories260K-$type.gguf"
  if ! "$cortiq" convert llama2c "$model" "$out" --type "$type" >"$work/conv.log" 2>&1; then
    fail "convert stories260K $type"; cat "$work/conv.log"; continue
  fi
  got=$(peer_greedy "$out" 40) || { fail "peer-logits on $type"; continue; }
  if [[ $got == "$expected" ]]; then
    pass "stories260K $type: the peer's 40 greedy ids are the reference ids"
  elif [[ $type == F32 ]]; then
    fail "stories260K F32 greedy ids differ:"; echo "  got      $got"; echo "  expected $expected"
  else
    note "stories260K $type greedy ids differ from the f32 reference (quantization): $got"
  fi
  # The same type made by llama-quantize from our F32 file decodes the same.
  if [[ $type != F32 && -x $peer/llama-quantize ]]; then
    "$peer/llama-quantize" "$work/stories260K-F32.gguf" "$work/peer-$type.gguf" "$type" 1 \
      >"$work/pq.log" 2>&1 || { fail "llama-quantize $type"; continue; }
    theirs=$(peer_greedy "$work/peer-$type.gguf" 40)
    [[ $got == "$theirs" ]] && pass "stories260K $type: same greedy ids as llama-quantize's $type" ||
      fail "stories260K $type: llama-quantize's $type decodes $theirs"
  fi
done

# The same weights in export.py's version 1 layout give the same file.
python3 - "$model" "$work/stories260K-v1.bin" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
dim, hidden, layers, heads, kv_heads, vocab, seq = struct.unpack_from("<7i", data)
kv = kv_heads * dim // heads
sizes = [("emb", abs(vocab) * dim), ("rms_att", layers * dim), ("wq", layers * dim * dim),
         ("wk", layers * kv * dim), ("wv", layers * kv * dim), ("wo", layers * dim * dim),
         ("rms_ffn", layers * dim), ("w1", layers * hidden * dim), ("w2", layers * dim * hidden),
         ("w3", layers * hidden * dim), ("rms_final", dim)]
arrays, at = {}, 28
for name, n in sizes:
    arrays[name] = data[at:at + 4 * n]; at += 4 * n
at += 2 * 4 * seq * (dim // heads // 2)  # freq_cis
order = ["rms_att", "rms_ffn", "rms_final", "emb", "wq", "wk", "wv", "wo", "w1", "w2", "w3"]
with open(sys.argv[2], "wb") as f:
    head = struct.pack("<Ii7iB", 0x616B3432, 1, dim, hidden, layers, heads, kv_heads, abs(vocab),
                       seq, 1 if vocab > 0 else 0)
    f.write(head + bytes(256 - len(head)))
    for name in order: f.write(arrays[name])
    if vocab < 0: f.write(data[at:])
PY
if "$cortiq" convert llama2c "$work/stories260K-v1.bin" "$work/v1.gguf" --name stories260K \
    >"$work/conv.log" 2>&1 && cmp -s "$work/v1.gguf" "$work/stories260K-F32.gguf"; then
  pass "stories260K rewritten as a version 1 checkpoint converts to the same bytes"
else
  fail "stories260K as version 1"; cat "$work/conv.log"
fi

# A separate classifier (negative vocab_size, wcls last) equal to the
# embedding: output.weight is written, and decoding does not change.
python3 - "$model" "$work/untied.bin" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
dim, hidden, layers, heads, kv_heads, vocab, seq = struct.unpack_from("<7i", data)
assert vocab > 0
with open(sys.argv[2], "wb") as f:
    f.write(struct.pack("<7i", dim, hidden, layers, heads, kv_heads, -vocab, seq))
    f.write(data[28:] + data[28:28 + 4 * vocab * dim])
PY
if "$cortiq" convert llama2c "$work/untied.bin" "$work/untied.gguf" >"$work/conv.log" 2>&1; then
  got=$(peer_greedy "$work/untied.gguf" 10)
  [[ $got == "$(echo "$expected" | cut -d' ' -f1-10)" ]] &&
    pass "a separate classifier (output.weight) decodes the same first 10 ids" ||
    fail "separate classifier: $got"
else
  fail "convert with a separate classifier"; cat "$work/conv.log"
fi

echo "== 2. with a tokenizer: llama-simple and llama-completion generate"
# A 512-token SentencePiece-style tokenizer.bin: <unk> <s> </s>, 256 bytes,
# then " a".." z", letters, and short pieces (scores rank the merges).
python3 - "$work/tok512.bin" <<'PY'
import struct, sys
pieces = ["<unk>", "\n<s>\n", "\n</s>\n"] + [f"<0x{b:02X}>" for b in range(256)]
pieces += [" " + c for c in "abcdefghijklmnopqrstuvwxyz"] + list("abcdefghijklmnopqrstuvwxyz")
words = ["the", "and", "was", "she", "he", "to", "a", "day", "one", "her", "play", "lily"]
pieces += [" " + w for w in words if " " + w not in pieces]
i = 0
while len(pieces) < 512:  # unique pieces: the peer refuses duplicates
    piece = " " + "abcdefghijklmnopqrstuvwxyz"[i % 26] + "abcdefghijklmnopqrstuvwxyz"[i // 26 % 26]
    if piece not in pieces:
        pieces.append(piece)
    i += 1
with open(sys.argv[1], "wb") as f:
    data = [p.encode() for p in pieces]
    f.write(struct.pack("<i", max(len(d) for d in data)))
    for k, d in enumerate(data):
        f.write(struct.pack("<fi", 0.0 if k < 259 else -float(k), len(d)) + d)
PY
tok_model="$work/stories260K-tok.gguf"
if "$cortiq" convert llama2c "$model" "$tok_model" --tokenizer "$work/tok512.bin" \
    >"$work/conv.log" 2>&1; then
  if timeout 300 "$peer/llama-completion" -m "$tok_model" -p "once upon a time" -n 8 -no-cnv \
      --temp 0 -s 1 -t "$threads" >"$work/completion.log" 2>&1; then
    pass "llama-completion loads and generates"
  else
    fail "llama-completion (exit $?)"; tail -5 "$work/completion.log"
  fi
  if timeout 300 "$peer/llama-simple" -m "$tok_model" -n 8 "the day" >"$work/simple.out" \
      2>"$work/simple.log" && grep -q "decoded 8 tokens" "$work/simple.log"; then
    pass "llama-simple loads and generates: $(tr -d '\n' <"$work/simple.out" | head -c 60)"
  else
    fail "llama-simple"; grep -iE "error|fail" "$work/simple.log" | head -5
  fi
  got=$(peer_greedy "$tok_model" 40)
  [[ $got == "$expected" ]] && pass "with a vocabulary the greedy ids are unchanged" ||
    fail "with a vocabulary the greedy ids changed: $got"
else
  fail "convert stories260K --tokenizer"; cat "$work/conv.log"
fi

echo "== 3. llama2.c's Llama 2 tokenizer.bin against the peer's llama-spm vocabulary"
if [[ -n ${LLAMA2C_TOKENIZER:-} && -f ${LLAMA2C_TOKENIZER:-} ]]; then
  # A random legacy checkpoint with 32000 tokens (dim 64, 2 layers).
  python3 - "$work/rand32k.bin" <<'PY'
import array, random, struct, sys
random.seed(1)
dim, hidden, layers, heads, kv_heads, vocab, seq = 64, 128, 2, 4, 2, 32000, 64
kv = kv_heads * dim // heads
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<7i", dim, hidden, layers, heads, kv_heads, vocab, seq))
    def put(n, mean=0.0, std=0.1):
        f.write(array.array("f", (random.gauss(mean, std) for _ in range(n))).tobytes())
    put(vocab * dim, 0, 0.5)
    put(layers * dim, 1, 0.02)
    for n in (dim * dim, kv * dim, kv * dim, dim * dim): put(layers * n)
    put(layers * dim, 1, 0.02)
    for n in (hidden * dim, dim * hidden, hidden * dim): put(layers * n)
    put(dim, 1, 0.02)
    put(seq * (dim // heads // 2)); put(seq * (dim // heads // 2))
PY
  llama2_model="$work/rand32k.gguf"
  if "$cortiq" convert llama2c "$work/rand32k.bin" "$llama2_model" \
      --tokenizer "$LLAMA2C_TOKENIZER" >"$work/conv.log" 2>&1; then
    spm="$shared/vocab/ggml-vocab-llama-spm.gguf"
    n_same=0 n_all=0
    while IFS= read -r text; do
      n_all=$((n_all + 1))
      a=$("$peer/llama-tokenize" -m "$llama2_model" -p "$text" --ids --log-disable 2>/dev/null | tail -1)
      b=$("$peer/llama-tokenize" -m "$spm" -p "$text" --ids --log-disable 2>/dev/null | tail -1)
      [[ -n $a && $a == "$b" ]] && n_same=$((n_same + 1)) || echo "  differs: '$text': $a vs $b"
    done <<'TEXTS'
Hello world
 Hello World!
Once upon a time, there was a little girl named Lily.
it's 3.14 — naïve café 日本語
	tabs and  double  spaces
TEXTS
    [[ $n_same == "$n_all" ]] && pass "tokenizer.bin: $n_same/$n_all texts tokenize as llama-spm" ||
      fail "tokenizer.bin: only $n_same/$n_all texts tokenize as llama-spm"
    timeout 300 "$peer/llama-simple" -m "$llama2_model" -n 4 "Hello" >/dev/null 2>"$work/simple.log" &&
      grep -q "decoded 4 tokens" "$work/simple.log" && pass "llama-simple runs the 32000-token model" ||
      fail "llama-simple on the 32000-token model"
  else
    fail "convert with $LLAMA2C_TOKENIZER"; cat "$work/conv.log"
  fi
else
  note "LLAMA2C_TOKENIZER not set: skipped (llama2.c's tokenizer.bin, 433,869 bytes)"
fi

echo "== 4. cortiq's own forward pass on the converted file (when \`cortiq logits\` exists)"
if "$cortiq" logits --help >/dev/null 2>&1; then
  # Teacher-forced on BOS + the reference ids: each position's argmax must be
  # the next reference id (the same as greedy decoding, in one run).
  "$cortiq" logits -m "$work/stories260K-F32.gguf" --ids "1 ${expected% *}" --kv-type f32 \
    -o "$work/cortiq.f32" >"$work/cortiq.txt" 2>"$work/cortiq.err"
  got=$(awk '{print $3}' "$work/cortiq.txt" | tr '\n' ' ' | sed 's/ $//')
  [[ $got == "$expected" ]] && pass "cortiq logits: the 40 argmax ids are the reference ids" ||
    fail "cortiq logits argmax ids: $got"
else
  note "cortiq has no logits command yet: skipped"
fi

echo
echo "passed $n_pass, failed $n_fail, notes $n_note"
[[ $n_fail == 0 ]]
