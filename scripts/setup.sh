#!/usr/bin/env bash
# Installs the Debian 12 packages Cortiq needs (skipping those already
# present) and builds everything into ./build, the test programs (the suite
# and the C API's) with AddressSanitizer and UndefinedBehaviorSanitizer into
# ./build-asan, and the libFuzzer targets (clang) into ./build-fuzz; then the
# npm packages of the server tests into tests/server/node_modules (the
# openai client, ajv, and playwright-core, which drives Debian's chromium
# for the chat page's test).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ cmake ninja-build git pkg-config libgtest-dev libbenchmark-dev libpcre2-dev libutf8proc-dev
  clang libclang-rt-14-dev clang-format g++-aarch64-linux-gnu libcpp-httplib-dev nlohmann-json3-dev
  python3 python3-numpy python3-pip chromium)
# The Vulkan backend: headers, loader and shader compiler, and Mesa's lavapipe,
# the software Vulkan device the Vulkan tests run on in CI.
packages+=(libvulkan-dev glslc mesa-vulkan-drivers)
# The server tests (tests/server) run on node; any node >= 18 already
# installed will do, else Debian's.
command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build
# The tests again under the sanitizers: the file parsers must survive the
# corruption tests without a single report. -O1: the instrumented build at
# -O3 took over half of CI's time to compile; the tests run a little slower.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
  -DCORTIQ_SANITIZE=ON -DCORTIQ_BUILD_BENCH=OFF
cmake --build build-asan --target cortiq_tests test_c_api
# The parsers' fuzz targets, with clang's libFuzzer.
cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCORTIQ_FUZZ=ON -DCORTIQ_BUILD_TESTS=OFF -DCORTIQ_BUILD_BENCH=OFF
cmake --build build-fuzz --target gguf_fuzzer
# The server tests' npm packages (openai, ajv, playwright-core), exactly as locked.
if command -v node >/dev/null && command -v npm >/dev/null; then
  npm ci --prefix tests/server --no-audit --no-fund
fi
