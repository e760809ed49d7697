#!/usr/bin/env bash
# Constrained decoding's cost against llama.cpp, in one run: each engine's
# server (`cortiq serve`, `llama-server`) on the same file and threads
# decodes the same prompt greedily, free and under the same JSON Schema,
# alternating engines; the ratio constrained / free of each engine's decode
# tokens/s (its own timings.predicted_per_second) is what the grammar costs.
# Prints a Markdown table.
#
#   bench/grammar/compare.sh MODEL.gguf [options]
#     -t N        threads (default 2)
#     -n N        tokens to generate (default 128)
#     -r N        rounds (default 3)
#     --cortiq P  the cortiq binary (default build/src/cli/cortiq)
#     --peer DIR  llama.cpp's bin directory (default ~/.cache/cortiq-peer/llama.cpp/build/bin)
#
# The issue's file: Llama-3.2-1B geometry with the llama-bpe vocabulary
# (128,256 tokens) in Q4_0 (docs/performance.md, "The target models").
# The schema asks for at least 40 records of several types, so that the
# output runs through numbers, bounded strings, enums and nesting rather
# than one long string, and lasts the whole -n.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
[ $# -ge 1 ] || { sed -n '2,20p' "$0"; exit 2; }
MODEL=$1
shift
THREADS=2 N=128 ROUNDS=3
CORTIQ=$ROOT/build/src/cli/cortiq
PEER=$HOME/.cache/cortiq-peer/llama.cpp/build/bin
while [ $# -gt 0 ]; do
  case $1 in
    -t) THREADS=$2; shift 2 ;;
    -n) N=$2; shift 2 ;;
    -r) ROUNDS=$2; shift 2 ;;
    --cortiq) CORTIQ=$2; shift 2 ;;
    --peer) PEER=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
SCHEMA='{"type": "array", "minItems": 40, "items": {"type": "object", "properties": {
  "id": {"type": "integer", "minimum": 1}, "name": {"type": "string", "maxLength": 16},
  "score": {"type": "number", "minimum": 0, "maximum": 100},
  "tags": {"type": "array", "maxItems": 3, "items": {"enum": ["new", "old", "hot", "cold"]}},
  "active": {"type": "boolean"}}, "required": ["id", "name", "score", "tags", "active"]}}'
PROMPT="List the records as JSON:"
log=$(mktemp -d)
# The servers start in command substitutions (not jobs of this shell):
# their pids are kept in files.
trap 'kill $(cat "$log"/*.pid 2>/dev/null) 2>/dev/null || true; rm -rf "$log"' EXIT

# Starts a server on a free port; echoes the port once it answers.
start() {
  local name=$1 port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  shift
  "$@" --port "$port" >"$log/$name.log" 2>&1 &
  echo $! >"$log/$name.pid"
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && { echo "$port"; return; }
    sleep 0.2
  done
  echo "$name did not start:" >&2
  cat "$log/$name.log" >&2
  exit 1
}

# POST /completion (llama.cpp) or /v1/completions (Cortiq) and print
# "tokens tokens/s" from the response's timings.
request() {
  local url=$1 schema=$2
  python3 - "$url" "$schema" "$PROMPT" "$N" <<'PY'
import json, sys, urllib.request
url, schema, prompt, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
body = {"prompt": prompt, "temperature": 0, "ignore_eos": True, "cache_prompt": False}
if url.endswith("/v1/completions"):
    body["max_tokens"] = n
    if schema:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "records", "schema": json.loads(schema)}}
else:
    body["n_predict"] = n
    if schema:
        body["json_schema"] = json.loads(schema)
req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
reply = json.load(urllib.request.urlopen(req, timeout=600))
t = reply["timings"]
text = reply["choices"][0]["text"] if "choices" in reply else reply["content"]
print(t["predicted_n"], t["predicted_per_second"], json.dumps(text[:60]))
PY
}

cortiq_port=$(start cortiq "$CORTIQ" serve -m "$MODEL" -t "$THREADS" -c 4096 --parallel 1 --host 127.0.0.1)
peer_port=$(start peer "$PEER/llama-server" -m "$MODEL" -t "$THREADS" -c 4096 -np 1 --host 127.0.0.1)
echo "| round | engine | free tokens/s | constrained tokens/s | constrained / free |"
echo "|---:|---|---:|---:|---:|"
for r in $(seq "$ROUNDS"); do
  for engine in llama.cpp cortiq; do
    if [ $engine = cortiq ]; then url=http://127.0.0.1:$cortiq_port/v1/completions; else url=http://127.0.0.1:$peer_port/completion; fi
    read -r n_free free _ < <(request "$url" "")
    read -r n_json json text < <(request "$url" "$SCHEMA")
    python3 -c "print(f'| $r | $engine | {$free:.2f} ({$n_free}) | {$json:.2f} ({$n_json}) | {$json / $free:.2f} |')"
    echo "  $engine constrained output starts: $text" >&2
  done
done
