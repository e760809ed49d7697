// RWKV's state updates on eight lanes (kernels/cpu/rwkv_wkv.hpp): the
// scalar's operations lane for lane, its 64 lanes as eight vectors, so the
// same bits.
#include <immintrin.h>

#include <array>

#include "kernels/cpu/rwkv_wkv.hpp"

namespace cortiq::kernels::avx2 {

namespace {

// The scalar's fold of 64 lanes (vector m holds lanes 8m..8m+7): the four
// 16-lane accumulators x0..x3 are v0|v1 .. v6|v7; x0 += x2, x1 += x3,
// x0 += x1, then 8 + 8, 4 + 4 and (q0 + q2) + (q1 + q3).
float fold(std::array<__m256, 8>& v) {
  for (int m = 0; m < 4; ++m) v[m] = _mm256_add_ps(v[m], v[m + 4]);
  v[0] = _mm256_add_ps(v[0], v[2]);
  v[1] = _mm256_add_ps(v[1], v[3]);
  const __m256 x = _mm256_add_ps(v[0], v[1]);
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  const __m128 t = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

}  // namespace

void wkv6_step(float* state, const float* r, const float* k, const float* v, const float* u,
               const float* w, float* out, int64_t d) {
  for (int64_t j = 0; j < d; j += 8) _mm256_storeu_ps(out + j, _mm256_setzero_ps());
  for (int64_t i = 0; i < d; ++i) {
    float* row = state + i * d;
    const __m256 ki = _mm256_set1_ps(k[i]), ui = _mm256_set1_ps(u[i]);
    const __m256 ri = _mm256_set1_ps(r[i]), wi = _mm256_set1_ps(w[i]);
    for (int64_t j = 0; j < d; j += 8) {
      const __m256 s = _mm256_loadu_ps(row + j);
      const __m256 kv = _mm256_mul_ps(_mm256_loadu_ps(v + j), ki);
      const __m256 o = _mm256_fmadd_ps(_mm256_fmadd_ps(kv, ui, s), ri, _mm256_loadu_ps(out + j));
      _mm256_storeu_ps(out + j, o);
      _mm256_storeu_ps(row + j, _mm256_fmadd_ps(s, wi, kv));
    }
  }
}

void wkv7_step(float* state, const float* r, const float* w, const float* k, const float* v,
               const float* a, const float* b, float* out, int64_t d) {
  std::array<__m256, 8> lanes;
  for (int64_t i = 0; i < d; ++i) {
    float* row = state + i * d;
    lanes.fill(_mm256_setzero_ps());
    for (int64_t j = 0; j < d; j += 8) {
      __m256& acc = lanes[static_cast<size_t>((j % 64) / 8)];
      acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(row + j), acc);
    }
    const __m256 sa = _mm256_set1_ps(fold(lanes));
    const __m256 vi = _mm256_set1_ps(v[i]);
    lanes.fill(_mm256_setzero_ps());
    for (int64_t j = 0; j < d; j += 8) {
      const __m256 kv = _mm256_mul_ps(vi, _mm256_loadu_ps(k + j));
      __m256 s = _mm256_fmadd_ps(_mm256_loadu_ps(row + j), _mm256_loadu_ps(w + j), kv);
      s = _mm256_fmadd_ps(sa, _mm256_loadu_ps(b + j), s);
      _mm256_storeu_ps(row + j, s);
      __m256& acc = lanes[static_cast<size_t>((j % 64) / 8)];
      acc = _mm256_fmadd_ps(s, _mm256_loadu_ps(r + j), acc);
    }
    out[i] = fold(lanes);
  }
}

}  // namespace cortiq::kernels::avx2
