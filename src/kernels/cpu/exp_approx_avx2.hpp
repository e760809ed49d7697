// exp_approx (activations.hpp) on eight lanes: the same operations in the
// same order (FMA where the scalar uses std::fma), so every lane is the
// scalar's bits. Only *_avx2.cpp files include this; the anonymous namespace
// keeps each copy internal (SIMD objects define no weak symbols).
#pragma once

#include <immintrin.h>

namespace cortiq::kernels::avx2 {
namespace {

__m256 exp_approx8(__m256 x) {
  const __m256 shifter = _mm256_set1_ps(0x1.8p23f);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), shifter);
  const __m256 n = _mm256_sub_ps(z, shifter);
  const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                    _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
  const __m256 k =
      _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1.0f))));
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 j = _mm256_fmadd_ps(
      _mm256_fmadd_ps(
          _mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
          _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
      u, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
  const __m256 abs_n = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
  // !(|n| > 126), NaN included, takes the plain path, as in the scalar.
  const __m256 big = _mm256_cmp_ps(abs_n, _mm256_set1_ps(126.0f), _CMP_GT_OQ);
  const __m256 plain = _mm256_fmadd_ps(j, k, k);
  if (_mm256_movemask_ps(big) == 0) return plain;
  const __m256i g =
      _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                       _mm256_set1_epi32(static_cast<int>(0x82000000u)));
  const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
  const __m256 huge = _mm256_cmp_ps(abs_n, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
  const __m256 scaled =
      _mm256_blendv_ps(_mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1), _mm256_mul_ps(s1, s1), huge);
  return _mm256_blendv_ps(plain, scaled, big);
}

}  // namespace
}  // namespace cortiq::kernels::avx2
