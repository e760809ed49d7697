// The delta rule's step on eight lanes (kernels/cpu/delta_rule.hpp): the
// scalar's operations lane for lane, so the same bits.
#include <immintrin.h>

#include "kernels/cpu/delta_rule.hpp"

namespace cortiq::kernels::avx2 {

namespace {

// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
float fold(__m256 lanes) {
  const __m128 x = _mm_add_ps(_mm256_castps256_ps128(lanes), _mm256_extractf128_ps(lanes, 1));
  const __m128 y = _mm_add_ps(x, _mm_movehl_ps(x, x));
  const __m128 z = _mm_add_ss(y, _mm_shuffle_ps(y, y, 1));
  return _mm_cvtss_f32(z);
}

}  // namespace

void delta_rule_step(float* state, const float* q, const float* k, const float* v, float beta,
                     float decay, float scale, float* o, int64_t d) {
  const __m256 vdecay = _mm256_set1_ps(decay);
  for (int64_t j = 0; j < d; ++j) {
    float* row = state + j * d;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < d; i += 8) {
      acc = _mm256_fmadd_ps(_mm256_loadu_ps(row + i), _mm256_loadu_ps(k + i), acc);
    }
    const float delta = (v[j] - decay * fold(acc)) * beta;
    const __m256 vdelta = _mm256_set1_ps(delta);
    acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < d; i += 8) {
      const __m256 s = _mm256_fmadd_ps(_mm256_loadu_ps(k + i), vdelta,
                                       _mm256_mul_ps(_mm256_loadu_ps(row + i), vdecay));
      _mm256_storeu_ps(row + i, s);
      acc = _mm256_fmadd_ps(s, _mm256_loadu_ps(q + i), acc);
    }
    o[j] = fold(acc) * scale;
  }
}

void delta_rule_step_keyed(float* state, const float* q, const float* k, const float* v, float beta,
                           const float* decay, float scale, float* o, int64_t d) {
  for (int64_t j = 0; j < d; ++j) {
    float* row = state + j * d;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < d; i += 8) {
      const __m256 s = _mm256_mul_ps(_mm256_loadu_ps(row + i), _mm256_loadu_ps(decay + i));
      _mm256_storeu_ps(row + i, s);
      acc = _mm256_fmadd_ps(s, _mm256_loadu_ps(k + i), acc);
    }
    const __m256 vdelta = _mm256_set1_ps((v[j] - fold(acc)) * beta);
    acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < d; i += 8) {
      const __m256 s = _mm256_fmadd_ps(_mm256_loadu_ps(k + i), vdelta, _mm256_loadu_ps(row + i));
      _mm256_storeu_ps(row + i, s);
      acc = _mm256_fmadd_ps(s, _mm256_loadu_ps(q + i), acc);
    }
    o[j] = fold(acc) * scale;
  }
}

}  // namespace cortiq::kernels::avx2
