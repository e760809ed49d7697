#!/usr/bin/env bash
# Checks that the C and C++ sources are formatted as .clang-format says
# (Debian's clang-format). Exits 77 (skip) without clang-format.
# Fix with: clang-format -i FILE...
set -euo pipefail
if ! command -v clang-format >/dev/null; then
  echo "skipped: clang-format not installed (apt-get install clang-format)"
  exit 77
fi
cd "$(dirname "$0")/.."
mapfile -t files < <(find src include tests bench fuzz tools -type f \
  \( -name '*.c' -o -name '*.cpp' -o -name '*.hpp' -o -name '*.h' \) -not -path '*/node_modules/*' | sort)
# One run over every file; its warnings name the files that differ.
if ! report=$(clang-format --dry-run --Werror "${files[@]}" 2>&1); then
  echo "not formatted as .clang-format says (fix: clang-format -i FILE...):"
  grep -oE '^[^:]+:[0-9]+:[0-9]+: error' <<<"$report" | cut -d: -f1 | sort -u | sed 's/^/  /'
  exit 1
fi
echo "${#files[@]} files formatted as .clang-format says ($(clang-format --version))"
