// dot_f32 with AVX2: lanes 0-7 and 8-15 of the reference are two registers;
// multiply and add stay separate instructions (no FMA), so every product and
// every sum rounds exactly as in the scalar reference.
#include <immintrin.h>

#include <array>

#include "kernels/cpu/matmul.hpp"

namespace cortiq::kernels::avx2 {

float dot_f32(const float* a, const float* b, int64_t n) {
  __m256 lo = _mm256_setzero_ps();
  __m256 hi = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    lo = _mm256_add_ps(lo, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    hi = _mm256_add_ps(hi, _mm256_mul_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8)));
  }
  alignas(32) std::array<float, 16> lanes;
  _mm256_store_ps(lanes.data(), lo);
  _mm256_store_ps(lanes.data() + 8, hi);
  for (int j = 0; i + j < n; ++j) lanes[j] += a[i + j] * b[i + j];
  // The fold 8-4-2-1, as the reference: lane j += lane j + width.
  __m256 v = _mm256_add_ps(_mm256_load_ps(lanes.data()), _mm256_load_ps(lanes.data() + 8));
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
  return _mm_cvtss_f32(h);
}

}  // namespace cortiq::kernels::avx2
