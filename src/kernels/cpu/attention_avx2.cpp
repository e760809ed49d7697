// Attention's inner loops on AVX2, each the scalar loop's bits:
// multiply-then-add, exp_approx lane by lane, the peer's group sums.
#include <immintrin.h>

#include "kernels/cpu/attention_simd.hpp"
#include "kernels/cpu/exp_approx_avx2.hpp"

namespace cortiq::kernels::avx2 {

namespace {

void axpy_f32(float a, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  for (int64_t i = 0; i < n; i += 8) {
    _mm256_storeu_ps(
        y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(va, _mm256_loadu_ps(x + i))));
  }
}

// dot_f32's fold: lanes 0-7 + lanes 8-15, then + 4, + 2, + 1.
float fold16(__m256 lo, __m256 hi) {
  const __m256 v = _mm256_add_ps(lo, hi);
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
  return _mm_cvtss_f32(h);
}

void dot_rows(const float* k, const float* q, int64_t n_q, int64_t n, float scale, float* out,
              int64_t out_stride) {
  for (int64_t u = 0; u < n_q; ++u, q += n) {
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
      lo = _mm256_add_ps(lo, _mm256_mul_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(k + i)));
      hi = _mm256_add_ps(hi, _mm256_mul_ps(_mm256_loadu_ps(q + i + 8), _mm256_loadu_ps(k + i + 8)));
    }
    out[u * out_stride] = fold16(lo, hi) * scale;
  }
}

void axpy_rows(const float* v, const float* a, int64_t a_stride, int64_t n_q, float* y,
               int64_t y_stride, int64_t n) {
  for (int64_t u = 0; u < n_q; ++u) axpy_f32(a[u * a_stride], v, y + u * y_stride, n);
}

// ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7))
float hsum8(__m256 v) {
  __m128 h = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

double exp_sum(float* s, int64_t n, float max) {
  const __m256 vmax = _mm256_set1_ps(max);
  double sum = 0.0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = exp_approx8(_mm256_sub_ps(_mm256_loadu_ps(s + i), vmax));
    _mm256_storeu_ps(s + i, v);
    sum += static_cast<double>(hsum8(v));
  }
  if (i < n) {
    alignas(32) float tail[8] = {};
    for (int64_t j = 0; i + j < n; ++j) tail[j] = s[i + j];
    // Padding lanes become exactly 0, as the scalar loop's zeros.
    const __m256 valid = _mm256_cmp_ps(_mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7),
                                       _mm256_set1_ps(static_cast<float>(n - i)), _CMP_LT_OQ);
    const __m256 v = _mm256_and_ps(valid, exp_approx8(_mm256_sub_ps(_mm256_load_ps(tail), vmax)));
    _mm256_store_ps(tail, v);
    for (int64_t j = 0; i + j < n; ++j) s[i + j] = tail[j];
    sum += static_cast<double>(hsum8(v));
  }
  return sum;
}

}  // namespace

const AttentionLoops kAttentionLoops{axpy_f32, dot_rows, axpy_rows, exp_sum};

}  // namespace cortiq::kernels::avx2
