// dot_f32: the scalar reference and the dispatch to the SIMD level. The lane
// layout (product i fused into lane i % 16, pairwise fold 8-4-2-1) is the
// contract every variant reproduces exactly; see matmul.hpp. std::fma is
// the instruction where the build targets FMA, glibc's exact fmaf where not.
#include <array>
#include <cmath>

#include "base/cpu_features.hpp"
#include "kernels/cpu/matmul.hpp"

namespace cortiq::kernels {

namespace scalar {
float dot_f32(const float* a, const float* b, int64_t n) {
  constexpr int kLanes = 16;
  std::array<float, kLanes> lanes{};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lanes[j] = std::fma(a[i + j], b[i + j], lanes[j]);
  }
  for (int j = 0; i + j < n; ++j) lanes[j] = std::fma(a[i + j], b[i + j], lanes[j]);
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int j = 0; j < width; ++j) lanes[j] += lanes[j + width];
  }
  return lanes[0];
}
}  // namespace scalar

float dot_f32(const float* a, const float* b, int64_t n) {
#if defined(__x86_64__)
  // AVX-512 machines run the AVX2 variant (same bits; a 16-lane AVX-512
  // one is the speed issue's).
  if (simd_level() >= SimdLevel::avx2) return avx2::dot_f32(a, b, n);
#endif
  return scalar::dot_f32(a, b, n);
}

}  // namespace cortiq::kernels
