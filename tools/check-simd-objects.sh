#!/usr/bin/env bash
# A kernel file compiled with AVX2/AVX-512 flags must not define weak
# (inline or template) symbols: the linker keeps one copy of each, and if it
# keeps the AVX copy, baseline code would run AVX instructions on a CPU
# without them. Keep helpers of *_avx2.cpp / *_avx512.cpp files in an
# anonymous namespace or `static`. DW.ref.__gxx_personality_v0 (a pointer to
# the C++ unwinder's personality routine, emitted beside code that may
# unwind, e.g. under ASan) holds no code and is the same everywhere, so it
# is allowed. Usage: check-simd-objects.sh OBJECT...
set -euo pipefail
status=0
for object in "$@"; do
  case $object in *_avx2.cpp.o|*_avx512.cpp.o) ;; *) continue ;; esac
  weak=$(nm -C "$object" | awk '($2 == "W" || $2 == "V" || $2 == "u") && $3 != "DW.ref.__gxx_personality_v0"' || true)
  if [[ -n $weak ]]; then
    echo "$object defines weak symbols compiled for a SIMD level:"
    echo "$weak"
    status=1
  fi
done
[[ $status == 0 ]] && echo "SIMD objects define no weak symbols"
exit $status
