# Per-file SIMD flags. The library is built for baseline x86-64 (no
# -march=native); a source named *_avx2.cpp or *_avx512.cpp gets that level's
# flags and is only called after cpu_features() says the CPU has them.
set(CORTIQ_AVX2_FLAGS -mavx2 -mfma -mf16c -Wno-maybe-uninitialized)
# GCC 12's AVX-512 intrinsic headers build casts, masked loads and inserts
# from a deliberately undefined vector and then warn that it is used
# uninitialized (GCC bug 105593): those warnings say nothing about our code.
set(CORTIQ_AVX512_FLAGS -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq
    -mavx512vnni -mavx512bf16 -Wno-maybe-uninitialized -Wno-uninitialized)

function(cortiq_set_simd_flags)
  foreach(src IN LISTS ARGN)
    if(src MATCHES "_avx512\\.cpp$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${CORTIQ_AVX512_FLAGS}")
    elseif(src MATCHES "_avx2\\.cpp$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${CORTIQ_AVX2_FLAGS}")
    endif()
  endforeach()
endfunction()

if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
  set(CORTIQ_X86 ON)
else()
  set(CORTIQ_X86 OFF)
endif()
