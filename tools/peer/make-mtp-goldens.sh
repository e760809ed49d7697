#!/usr/bin/env bash
# Regenerates tests/golden/mtp/glm4moe.tsv from the peer: `cortiq gen-model
# --arch glm4moe` (its defaults: one MTP layer) served by llama-server with
# its draft-mtp speculative decoding (3 drafts per round, no probability
# floor, the draft sampled on the CPU so it logs its candidates, f32 caches),
# greedy, from a fixed prompt of ids. Its debug log gives, for each draft
# step, the MTP layer's three best tokens and their probabilities among its
# ten best (llama.cpp's draft-mtp samples from a top-10 sampler); the TSV
# keeps them with the generated ids:
#   tokens  ID ID ...
#   step    ROUND STEP ID0 P0 ID1 P1 ID2 P2
#   tools/peer/make-mtp-goldens.sh [path/to/cortiq]
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CORTIQ=${1:-$ROOT/build/src/cli/cortiq}
PEER=${PEER:-$HOME/.cache/cortiq-peer/llama.cpp}
BIN="$PEER/build/bin"
[ -x "$BIN/llama-server" ] || { echo "no $BIN/llama-server: run ../shared/peer/build-llama-cpp.sh" >&2; exit 1; }
OUT="$ROOT/tests/golden/mtp/glm4moe.tsv"
WORK=$(mktemp -d)
PORT=${PORT:-18391}
trap 'kill "$SERVER" 2>/dev/null || true; rm -rf "$WORK"' EXIT

"$CORTIQ" gen-model --arch glm4moe -o "$WORK/glm4moe.gguf" >/dev/null
"$BIN/llama-server" -m "$WORK/glm4moe.gguf" --port "$PORT" -t 2 -c 512 \
  --spec-type draft-mtp --spec-draft-n-max 3 --spec-draft-p-min 0 \
  --no-spec-draft-backend-sampling -ctk f32 -ctv f32 -ctkd f32 -ctvd f32 -v \
  >"$WORK/server.log" 2>&1 &
SERVER=$!
for _ in $(seq 100); do
  curl -sf "localhost:$PORT/health" >/dev/null 2>&1 && break
  sleep 0.2
done
# The prompt: BOS and six ids of the built-in vocabulary. Streamed: the
# server's final "content format" check refuses some random-weight text,
# after the tokens have come.
curl -s "localhost:$PORT/completion" \
  -d '{"prompt": [1, 450, 123, 77, 300, 12, 599], "n_predict": 10, "temperature": 0,
       "cache_prompt": false, "return_tokens": true, "stream": true}' >"$WORK/reply.sse"
kill "$SERVER" 2>/dev/null || true
while kill -0 "$SERVER" 2>/dev/null; do sleep 0.1; done

python3 - "$WORK/reply.sse" "$WORK/server.log" "$OUT" <<'PY'
import json, re, sys
tokens = []
for line in open(sys.argv[1]):
    if line.startswith("data: {"):
        tokens += json.loads(line[6:]).get("tokens", [])
lines = open(sys.argv[2], errors="replace").read().splitlines()
pattern = re.compile(r"draft candidate\s+(\d+), pos\s+(\d+):\s+(\d+) \(\s*([0-9.]+)\)")
steps, round_ = [], -1
for line in lines:
    m = pattern.search(line)
    if not m:
        continue
    k, pos, tok, p = int(m[1]), int(m[2]), int(m[3]), m[4]
    if k == 0:
        if pos == 0:
            round_ += 1
        steps.append([round_, pos])
    steps[-1] += [tok, p]
with open(sys.argv[3], "w") as out:
    out.write("# llama.cpp draft-mtp candidates on `cortiq gen-model --arch glm4moe`"
              " (tools/peer/make-mtp-goldens.sh)\n")
    out.write("tokens\t" + " ".join(map(str, tokens)) + "\n")
    for s in steps:
        out.write("step\t" + "\t".join(map(str, s)) + "\n")
print(f"{sys.argv[3]}: {len(tokens)} tokens, {len(steps)} draft steps")
PY
