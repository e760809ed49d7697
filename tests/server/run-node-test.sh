#!/usr/bin/env bash
# Runs one tests/server/*.test.mjs file with node's test runner for ctest.
# Exits 77 (ctest's "skipped") when node or the npm packages are missing;
# `bash scripts/setup.sh` installs both (or: npm ci --prefix tests/server).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if ! command -v node >/dev/null; then
  echo "skipped: node is not installed (bash scripts/setup.sh installs it)"
  exit 77
fi
if [ ! -f "$here/node_modules/openai/package.json" ]; then
  echo "skipped: the openai npm package is missing: run npm ci --prefix tests/server (or bash scripts/setup.sh)"
  exit 77
fi
if [ -z "${CORTIQ_CLI:-}" ]; then
  echo "CORTIQ_CLI must name the cortiq binary" >&2
  exit 2
fi
exec node --test "$@"
