// dot_f32 with AVX2: lanes 0-7 and 8-15 of the reference are two registers,
// each product added by one fused multiply-add, which rounds once as the
// scalar reference's std::fma does.
#include "kernels/cpu/dot_lanes_avx2.hpp"
#include "kernels/cpu/matmul.hpp"

namespace cortiq::kernels::avx2 {

float dot_f32(const float* a, const float* b, int64_t n) {
  DotLanes lanes;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) lanes.add(_mm256_loadu_ps(a + i), _mm256_loadu_ps(a + i + 8), b + i);
  if (i < n) lanes.add_tail(a + i, b + i, n - i);
  return lanes.fold();
}

}  // namespace cortiq::kernels::avx2
