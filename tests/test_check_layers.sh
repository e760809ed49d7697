#!/usr/bin/env bash
# tools/check-layers.sh itself: it passes a tree whose includes follow the
# layers and fails, naming the file and line, on a deliberate upward include,
# on the server reaching a kernel, and on a folder that is not a layer.
set -euo pipefail
check="$(cd "$(dirname "$0")/.." && pwd)/tools/check-layers.sh"
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
failures=0

# Writes FILE (under the tree's src/) with the given lines.
put() {
  local file=$tree/src/$1
  shift
  mkdir -p "$(dirname "$file")"
  printf '%s\n' "$@" >"$file"
}
# Runs the check and expects it to pass (want = 0) or to fail printing text.
expect() {
  local name=$1 want=$2 text=${3:-}
  local out rc=0
  out=$(bash "$check" "$tree" 2>&1) || rc=$?
  if [ "$want" = 0 ] && [ $rc -ne 0 ]; then
    echo "FAIL $name: the check refused a layered tree:"$'\n'"$out"
    failures=$((failures + 1))
  elif [ "$want" != 0 ] && { [ $rc -eq 0 ] || [[ $out != *"$text"* ]]; }; then
    echo "FAIL $name: wanted a failure saying '$text', got rc $rc:"$'\n'"$out"
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}

put base/log.hpp '#pragma once' '#include <string>' '#include "cortiq/types.hpp"'
put kernels/cpu/rope.hpp '#pragma once' '#include "base/log.hpp"' '#include "quant/blocks.hpp"'
put quant/blocks.hpp '#pragma once' '#include "kernels/cpu/rope.hpp"'
put model/attention.cpp '#include "model/attention.hpp"' '#include "kernels/cpu/rope.hpp"'
put server/scheduler.cpp '#include "cortiq/cortiq.hpp"' '#include "model/attention.hpp"'
put backends/vulkan/shaders/matmul.comp '#include "matmul.glsl"'
expect "a layered tree passes" 0

put base/log.hpp '#pragma once' '#include <string>' '// why' '#include "model/attention.hpp"'
expect "an upward include fails" 1 \
  'src/base/log.hpp:4: includes "model/attention.hpp": base may not include model, a layer above it'
put base/log.hpp '#pragma once'

put kernels/cpu/rope.hpp '#pragma once' '#include "cortiq/cortiq.hpp"'
expect "the runtime's public header counts as the runtime" 1 \
  'kernels may not include runtime, a layer above it'
put kernels/cpu/rope.hpp '#pragma once'

put server/scheduler.cpp '#include "kernels/cpu/rope.hpp"'
expect "the server reaching a kernel fails" 1 \
  'src/server/scheduler.cpp:1: includes "kernels/cpu/rope.hpp": server reaches kernels only through the runtime'
put server/scheduler.cpp '#include "runtime/session.hpp"'

put widgets/knob.cpp '#include "base/log.hpp"'
expect "a folder that is not a layer fails" 1 'src/widgets/ is not a layer'
rm -r "$tree/src/widgets"

expect "the tree passes again" 0
exit $((failures > 0))
