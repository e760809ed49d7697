// AVX-512 row conversions (compiled with the AVX-512 F/BW/VL/DQ/VNNI flags).
#include <immintrin.h>

#include "base/fp16.hpp"
#include "kernels/cpu/convert.hpp"

namespace cortiq::kernels::avx512 {

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}

// See convert_avx2.cpp: NaN lanes become the canonical quiet NaN.
static inline __m256i canonical_nan_fp16(__m256i h) {
  const __m256i exp = _mm256_and_si256(h, _mm256_set1_epi16(0x7C00));
  const __m256i man = _mm256_and_si256(h, _mm256_set1_epi16(0x03FF));
  const __mmask16 is_nan = _mm256_cmpeq_epi16_mask(exp, _mm256_set1_epi16(0x7C00)) &
                           _mm256_cmpneq_epi16_mask(man, _mm256_setzero_si256());
  const __m256i nan =
      _mm256_or_si256(_mm256_and_si256(h, _mm256_set1_epi16(static_cast<short>(0x8000))),
                      _mm256_set1_epi16(0x7E00));
  return _mm256_mask_blend_epi16(is_nan, h, nan);
}

void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), canonical_nan_fp16(h));
  }
  for (; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

void bf16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i w =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
  }
  for (; i < n; ++i) dst[i] = bf16_to_fp32(src[i]);
}

void fp32_to_bf16_row(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i inf = _mm512_set1_epi32(0x7f800000);
  const __m512i round = _mm512_set1_epi32(0x7fff);
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i quiet = _mm512_set1_epi32(64);
  for (; i + 16 <= n; i += 16) {
    const __m512i u = _mm512_castps_si512(_mm512_loadu_ps(src + i));
    const __mmask16 is_nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, abs_mask), inf);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
    const __m512i rounded =
        _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(round, lsb)), 16);
    const __m512i nan = _mm512_or_si512(_mm512_srli_epi32(u, 16), quiet);
    const __m512i r = _mm512_mask_blend_epi32(is_nan, rounded, nan);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(r));
  }
  for (; i < n; ++i) dst[i] = fp32_to_bf16(src[i]);
}

}  // namespace cortiq::kernels::avx512
