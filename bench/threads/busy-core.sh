#!/bin/bash
# Decode and prompt speed with -t equal to the cores, idle and while another
# process keeps one core busy (the thread-stall case): each binary given,
# alternating, for a few rounds, and -t cores-1 beside them under load as
# the speed a stall-free pool should at least reach.
#
#   bench/threads/busy-core.sh MODEL.gguf CORTIQ [CORTIQ_OTHER...]
#
# Environment: ROUNDS (3), ARGS (-p 128 -n 32 -r 3), BUSY_CORE (the last).
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 MODEL.gguf CORTIQ [CORTIQ_OTHER...]" >&2
  exit 2
fi
model=$1
shift
cores=$(nproc)
threads=$cores
busy_core=${BUSY_CORE:-$((cores - 1))}
rounds=${ROUNDS:-3}
read -r -a args <<< "${ARGS:--p 128 -n 32 -r 3}"

bench() {  # binary threads -> "pp t/s | tg t/s" lines of its table
  "$1" bench -m "$model" -t "$2" "${args[@]}" 2>/dev/null |
    awk -F'|' '/^\| / && $8 ~ /[0-9]/ {gsub(/ +/, " ", $7); gsub(/ +/, " ", $8); print $7 ":" $8}'
}

run_all() {  # label
  for round in $(seq "$rounds"); do
    for bin in "$@"; do
      echo "$label round $round  $bin -t $threads: $(bench "$bin" "$threads" | paste -sd' ')"
    done
    if [ "$label" = busy ] && [ "$threads" -gt 1 ]; then
      echo "$label round $round  $1 -t $((threads - 1)): $(bench "$1" $((threads - 1)) | paste -sd' ')"
    fi
  done
}

echo "$("$1" --version | head -3 | paste -sd' ')"
label=idle run_all "$@"
taskset -c "$busy_core" sh -c 'while :; do :; done' &
busy=$!
trap 'kill $busy 2>/dev/null' EXIT
sleep 1
label=busy run_all "$@"
