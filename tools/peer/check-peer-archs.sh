#!/usr/bin/env bash
# Runs llama.cpp's own random test models through Cortiq: for every
# architecture Cortiq supports (or those named), llama.cpp's test-llama-archs
# writes its dense and mixture-of-experts models of that architecture — every optional tensor and
# odd-but-legal metadata present — and the logits of 24 positions from
# `cortiq logits` (f32 KV cache) are compared with peer-logits' (-b 1) on
# the same file. Prints the worst relative L2 error per model; a model
# Cortiq refuses prints its error. Not run by CI: it needs the peer's
# binaries (shared/peer/build-llama-cpp.sh).
#
# usage: tools/peer/check-peer-archs.sh [ARCH...]
# env:   CORTIQ (default build/src/cli/cortiq), PEER_BIN (default
#        ~/.cache/cortiq-peer/llama.cpp/build/bin), TOLERANCE (default 1e-4),
#        KEEP=1 keeps the work folder.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cortiq=${CORTIQ:-$repo/build/src/cli/cortiq}
peer=${PEER_BIN:-$HOME/.cache/cortiq-peer/llama.cpp/build/bin}
tolerance=${TOLERANCE:-1e-4}
for tool in "$cortiq" "$peer/peer-logits" "$peer/test-llama-archs"; do
  [[ -x $tool ]] || { echo "missing executable: $tool" >&2; exit 2; }
done
work=$(mktemp -d /tmp/check-peer-archs.XXXXXX)
[[ ${KEEP:-0} == 1 ]] || trap 'rm -rf "$work"' EXIT

archs=("$@")
if ((${#archs[@]} == 0)); then
  # gen-model's --arch help lists every supported architecture.
  IFS='|' read -r -a archs < <("$cortiq" gen-model --help 2>&1 |
    sed -n 's/.*--arch A *architecture: //p')
fi
ids="1 5 9 22 33 44 55 66 77 88 99 100 3 7 11 13 17 19 23 29 31 37 41 43"
n_pass=0 n_fail=0
for arch in "${archs[@]}"; do
  dir="$work/$arch"
  mkdir -p "$dir"
  "$peer/test-llama-archs" -a "$arch" -o "$dir" -s 1 >"$dir/archs.log" 2>&1
  models=()
  for variant in dense moe; do
    [[ -f $dir/$arch-$variant.gguf ]] && models+=("$dir/$arch-$variant.gguf")
  done
  if ((${#models[@]} == 0)); then
    echo "skip  $arch: test-llama-archs wrote no model"
    continue
  fi
  for model in "${models[@]}"; do
  name=$(basename "$model" .gguf)
  if ! "$cortiq" logits -m "$model" --ids "$ids" --kv-type f32 -o "$dir/c.f32" \
      >"$dir/c.log" 2>&1; then
    n_fail=$((n_fail + 1))
    echo "FAIL  $name: $(tail -1 "$dir/c.log")"
    continue
  fi
  "$peer/peer-logits" -m "$model" --ids "$ids" -o "$dir/p.f32" -b 1 -t 2 >/dev/null 2>&1 ||
    { echo "skip  $name: peer-logits failed"; continue; }
  worst=$(python3 - "$dir/c.f32" "$dir/p.f32" "$(echo $ids | wc -w)" <<'EOF'
import array, math, sys
a = array.array("f"); a.frombytes(open(sys.argv[1], "rb").read())
b = array.array("f"); b.frombytes(open(sys.argv[2], "rb").read())
n_pos = int(sys.argv[3]); n = len(b) // n_pos
worst = 0.0
for p in range(n_pos):
    x, y = a[p * n:(p + 1) * n], b[p * n:(p + 1) * n]
    num = sum((u - v) ** 2 for u, v in zip(x, y)); den = sum(v * v for v in y)
    worst = max(worst, math.sqrt(num / den) if den > 0 else (0.0 if num == 0 else math.inf))
print("%.3g" % worst)
EOF
)
  if python3 -c "import sys; sys.exit(0 if float('$worst') <= float('$tolerance') else 1)"; then
    n_pass=$((n_pass + 1))
    echo "ok    $name: max rel L2 $worst"
  else
    n_fail=$((n_fail + 1))
    echo "FAIL  $name: max rel L2 $worst"
  fi
  done
done
echo "$n_pass passed, $n_fail failed"
((n_fail == 0))
