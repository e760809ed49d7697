#!/usr/bin/env bash
# The public headers (include/cortiq/) include only each other and the
# standard library: each compiles alone with nothing but include/ on the
# path (the C header as C99 and as C++), so an installed copy or a user's
# program never needs the engine's sources.
#   check-public-headers.sh CXX CC
set -euo pipefail
cxx=${1:-c++}
cc=${2:-cc}
cd "$(dirname "$0")/.."
status=0
for header in include/cortiq/*.h include/cortiq/*.hpp; do
  # Quoted includes must name another public header.
  while read -r included; do
    if [ ! -f "include/$included" ]; then
      echo "$header includes \"$included\", which is not a public header"
      status=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$header")
  # A file that includes only this header, as a user's would.
  unit="#include <cortiq/$(basename "$header")>"
  case $header in
    *.h)
      "$cc" -std=c99 -Wall -Wextra -Werror -fsyntax-only -I include -x c - <<<"$unit" || status=1
      "$cxx" -std=c++20 -Wall -Wextra -Werror -fsyntax-only -I include -x c++ - <<<"$unit" || status=1
      ;;
    *.hpp)
      "$cxx" -std=c++20 -Wall -Wextra -Werror -fsyntax-only -I include -x c++ - <<<"$unit" || status=1
      ;;
  esac
done
[ "$status" -eq 0 ] && echo "$(ls include/cortiq | wc -l) public headers compile alone on include/"
exit "$status"
