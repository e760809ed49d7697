#!/usr/bin/env bash
# The include graph follows the layers of docs/architecture.md: a file under
# src/LAYER/ includes headers of its own level and of the levels below it,
# never of one above. The levels, bottom to top (folders on one line are one
# level and may include each other):
#
#   base                      errors, logging, mmap, threads, JSON, strings
#   formats quant kernels     files, weight types, CPU kernels (shared headers)
#   tokenizer grammar         text to ids; constrained decoding
#   chat                      chat templates, tool calls
#   kv                        the batch and the paged KV cache
#   backends                  the op layer and its CPU and Vulkan backends
#   model                     families, blocks, weights
#   runtime convert           Model, Session, sampling; checkpoint converters
#   scoring                   perplexity, KL, calibration, embeddings
#   server capi               cortiq serve; the C API
#   cli                       the cortiq program
#
# The public headers count as layers too: cortiq/cortiq.hpp is the runtime's
# API, cortiq/cortiq.h the C API's, the others (types, sampling, loop_stop)
# are vocabulary every level may use. And the server and the C API reach the
# machine only through the runtime: they include no kernels/ or backends/
# header.
#
#   check-layers.sh [ROOT]    ROOT holds src/ (default: this repository)
set -euo pipefail
root=${1:-"$(dirname "$0")/.."}
cd "$root"

levels=(
  "base"
  "formats quant kernels"
  "tokenizer grammar"
  "chat"
  "kv"
  "backends"
  "model"
  "runtime convert"
  "scoring"
  "server capi"
  "cli"
)
# Folders a layer may not include although they lie below it.
declare -A skips=([server]="kernels backends" [capi]="kernels backends")

declare -A level_of
for i in "${!levels[@]}"; do
  for layer in ${levels[$i]}; do level_of[$layer]=$i; done
done

# The layer an included path belongs to, or nothing for a path outside src/
# (a system or third-party header, a shader include).
layer_of_include() {
  case $1 in
    cortiq/cortiq.hpp) echo runtime ;;
    cortiq/cortiq.h) echo capi ;;
    cortiq/*) echo base ;;
    */*) [ -n "${level_of[${1%%/*}]:-}" ] && echo "${1%%/*}" ;;
  esac
  return 0
}

status=0
while IFS= read -r file; do
  rel=${file#src/}
  layer=${rel%%/*}
  if [ -z "${level_of[$layer]:-}" ]; then
    echo "$file: src/$layer/ is not a layer: add it to tools/check-layers.sh and docs/architecture.md"
    status=1
    continue
  fi
  while IFS=: read -r line included; do
    target=$(layer_of_include "$included")
    [ -n "$target" ] || continue
    if ((level_of[$target] > level_of[$layer])); then
      echo "$file:$line: includes \"$included\": $layer may not include $target, a layer above it"
      status=1
    elif [[ " ${skips[$layer]:-} " == *" $target "* ]]; then
      echo "$file:$line: includes \"$included\": $layer reaches $target only through the runtime"
      status=1
    fi
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" |
    sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1:\2/')
done < <(find src -type f \( -name '*.hpp' -o -name '*.cpp' -o -name '*.h' -o -name '*.inc' \) | sort)

if ((status == 0)); then echo "check-layers: every include of $(find src -type f | wc -l) files follows the layers"; fi
exit $status
