#!/usr/bin/env bash
# Installs a build into a temporary prefix, then builds the example of
# docs/c-api.md outside the tree against the installed files twice: with
# CMake's find_package(cortiq) and with pkg-config (from a moved copy of
# the prefix, which the .pc file must follow). Runs both on a model and
# requires the same greedy text from each.
#   run.sh BUILD_DIR MODEL.gguf
set -euo pipefail
build=$(realpath "$1")
model=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null
# The example is the first ```c block of docs/c-api.md.
awk '/^```c$/ {on = 1; next} /^```$/ && on {exit} on' "$here/../../docs/c-api.md" >"$work/example.c"
[ -s "$work/example.c" ] || { echo "no \`\`\`c block in docs/c-api.md"; exit 1; }

echo "== find_package(cortiq)"
cmake -S "$here" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DEXAMPLE_SOURCE="$work/example.c" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/cmake" >/dev/null
"$work/cmake/example" "$model" "Once upon a time" >"$work/cmake.out"

echo "== pkg-config, prefix moved"
mv "$work/prefix" "$work/moved"
export PKG_CONFIG_PATH="$work/moved/lib/pkgconfig"
flags=$(pkg-config --cflags --libs cortiq)
echo "pkg-config --cflags --libs cortiq: $flags"
# shellcheck disable=SC2086
cc -std=c11 -Wall -Werror "$work/example.c" $flags -o "$work/example-pc"
LD_LIBRARY_PATH="$work/moved/lib" "$work/example-pc" "$model" "Once upon a time" >"$work/pc.out"

# The installed CLI gives the same greedy text.
LD_LIBRARY_PATH="$work/moved/lib" "$work/moved/bin/cortiq" run -m "$model" -p "Once upon a time" \
  -n 32 --temp 0 -t 2 2>/dev/null >"$work/cli.out"
printf '%s\n' "$(cat "$work/cmake.out")" | head -c 200
echo
cmp "$work/cmake.out" "$work/pc.out"
[ -s "$work/cmake.out" ] || { echo "the example printed nothing"; exit 1; }
if ! cmp -s <(tr -d '\n' <"$work/cmake.out") <(tr -d '\n' <"$work/cli.out"); then
  echo "the example's text differs from cortiq run's:"
  diff <(cat "$work/cmake.out") <(cat "$work/cli.out") || true
  exit 1
fi
echo "both builds of the docs' example ran and printed cortiq run's text"

echo "== the Python package, installed with pip beside the library"
python=""
for candidate in /usr/bin/python3 python3; do
  if "$candidate" -c 'import numpy, pip' 2>/dev/null; then python=$candidate && break; fi
done
if [ -z "$python" ]; then
  echo "skipped: no python3 with numpy and pip (apt-get install python3-numpy python3-pip)"
  exit 0
fi
# From a copy: setuptools writes its build folders beside the sources.
cp -r "$here/../../python" "$work/python-src"
"$python" -m pip install --quiet --no-build-isolation --no-deps --no-index \
  --target "$work/site" "$work/python-src" 2>&1 | grep -v "as the 'root' user" || true
LD_LIBRARY_PATH="$work/moved/lib" PYTHONPATH="$work/site" CORTIQ_LIBRARY="" \
  "$python" - "$model" "$work/moved/bin/cortiq" "$work/site" <<'PY'
import json, subprocess, sys
import cortiq
assert cortiq.__file__.startswith(sys.argv[3]), cortiq.__file__  # the installed copy
model = cortiq.Model(sys.argv[1], threads=2)
ids = model.generate("Once upon a time", max_tokens=32, temperature=0).tokens
run = json.loads(subprocess.run([sys.argv[2], "run", "-m", sys.argv[1], "-p", "Once upon a time",
                                 "-n", "32", "--temp", "0", "-t", "2", "--json"],
                                capture_output=True, text=True, check=True).stdout)
assert ids == run["ids"], (ids, run["ids"])
print("the pip-installed package (%s) gives cortiq run's ids" % cortiq.__file__)
PY
