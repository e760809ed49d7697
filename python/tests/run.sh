#!/usr/bin/env bash
# Runs one TestCase class of test_cortiq.py (ctest's Python.NAME) with a
# python3 that has numpy: Debian's /usr/bin/python3 first (scripts/setup.sh
# installs python3-numpy), else the one on PATH. Exits 77 (skipped) when
# there is none.
#   CORTIQ_CLI=... CORTIQ_LIBRARY=... run.sh CLASS
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for candidate in /usr/bin/python3 python3; do
  if "$candidate" -c 'import numpy' 2>/dev/null; then
    cd "$here"
    PYTHONPATH="$here/.." exec "$candidate" -m unittest -v "test_cortiq.$1"
  fi
done
echo "skipped: no python3 with numpy (apt-get install python3 python3-numpy)"
exit 77
