// What the CPU we run on can do, read once. Kernels for each SIMD level are
// compiled separately (kernels/cpu/*_avx2.cpp, *_avx512.cpp) and picked here
// at run time, so one binary runs on any x86-64.
#pragma once

#include <string>

namespace cortiq {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
  bool neon = false;
};

// Ordered: a level implies the ones below it.
enum class SimdLevel { scalar = 0, avx2 = 1, avx512 = 2, neon = 3 };

const CpuFeatures& cpu_features();

// The best level the CPU supports, lowered by CORTIQ_SIMD=scalar|avx2 when
// set (for tests and benchmarks of the slower paths).
SimdLevel simd_level();
// Forces a level (tests); the level is clamped to what the CPU supports.
void set_simd_level(SimdLevel level);

const char* simd_level_name(SimdLevel level);
// "avx2 fma f16c" etc., for --version and logs.
std::string cpu_features_string();

}  // namespace cortiq
