// SwiGLU and SiLU on eight lanes: silu(g) = g / (1 + exp_approx(0 - g)),
// with the scalar's operations, so the same bits.
#include <immintrin.h>

#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/exp_approx_avx2.hpp"

namespace cortiq::kernels::avx2 {

size_t swiglu(const float* gate, const float* up, float* out, size_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = exp_approx8(_mm256_sub_ps(_mm256_setzero_ps(), g));
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  return i;
}

size_t silu_inplace(float* x, size_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 e = exp_approx8(_mm256_sub_ps(_mm256_setzero_ps(), v));
    _mm256_storeu_ps(x + i, _mm256_div_ps(v, _mm256_add_ps(one, e)));
  }
  return i;
}

}  // namespace cortiq::kernels::avx2
