// dot_f32 with AVX2: lanes 0-7 and 8-15 of the reference are two registers;
// multiply and add stay separate instructions (no FMA), so every product and
// every sum rounds exactly as in the scalar reference.
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
