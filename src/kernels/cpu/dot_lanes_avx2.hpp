// The 16 float lanes of dot_f32 (matmul.hpp) as two AVX2 registers, for the
// AVX2 kernels that must reproduce its bits. Only *_avx2.cpp files include
// this; the anonymous namespace keeps every copy internal to its file (SIMD
// objects define no weak symbols).
#pragma once

#include <immintrin.h>

#include <array>
#include <cmath>
#include <cstdint>

namespace cortiq::kernels::avx2 {
namespace {

struct DotLanes {
  __m256 lo = _mm256_setzero_ps();  // lanes 0..7
  __m256 hi = _mm256_setzero_ps();  // lanes 8..15

  // One 16-element chunk: lane j = fma(w[j], x[j], lane j).
  void add(__m256 w_lo, __m256 w_hi, const float* x) {
    lo = _mm256_fmadd_ps(w_lo, _mm256_loadu_ps(x), lo);
    hi = _mm256_fmadd_ps(w_hi, _mm256_loadu_ps(x + 8), hi);
  }

  // A last partial chunk of n < 16 elements: lane j = fma(a[j], b[j], lane j).
  void add_tail(const float* a, const float* b, int64_t n) {
    alignas(32) std::array<float, 16> lanes;
    _mm256_store_ps(lanes.data(), lo);
    _mm256_store_ps(lanes.data() + 8, hi);
    for (int64_t j = 0; j < n; ++j) lanes[j] = std::fma(a[j], b[j], lanes[j]);
    lo = _mm256_load_ps(lanes.data());
    hi = _mm256_load_ps(lanes.data() + 8);
  }

  // The reference's fold: lane j += lane j + 8, then + 4, + 2, + 1.
  float fold() const {
    const __m256 v = _mm256_add_ps(lo, hi);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
    return _mm_cvtss_f32(h);
  }
};

}  // namespace
}  // namespace cortiq::kernels::avx2
