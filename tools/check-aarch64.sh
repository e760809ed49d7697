#!/usr/bin/env bash
# Compiles the engine's portable sources for aarch64 (syntax and templates,
# no objects), so the non-x86 paths — the scalar kernels every SIMD level
# falls back to, the NEON dispatch — keep compiling on an x86 machine.
# Needs Debian's g++-aarch64-linux-gnu; exits 77 (skip) without it.
# Usage: tools/check-aarch64.sh GENERATED_DIR [JOBS]
set -euo pipefail
generated=${1:?usage: check-aarch64.sh GENERATED_DIR [JOBS]}
jobs=${2:-2}
cxx=aarch64-linux-gnu-g++
if ! command -v "$cxx" >/dev/null; then
  echo "skipped: $cxx not installed (apt-get install g++-aarch64-linux-gnu)"
  exit 77
fi
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# The tokenizer and chat layers need PCRE2/utf8proc headers for the target;
# everything the kernels and the model depend on is checked.
ls src/base/*.cpp src/kernels/cpu/*.cpp src/quant/*.cpp src/model/*.cpp src/runtime/*.cpp \
  src/formats/*/*.cpp | grep -v '_avx' |
  xargs -P "$jobs" -n 4 "$cxx" -std=c++20 -fsyntax-only -Wall -Wextra -Wno-unused-parameter \
    -Werror -Isrc -Iinclude -I"$generated"
echo "aarch64: portable sources compile"
