// AVX2 + F16C row conversions (compiled with -mavx2 -mfma -mf16c).
#include <immintrin.h>

#include "base/fp16.hpp"
#include "kernels/cpu/convert.hpp"

namespace cortiq::kernels::avx2 {

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}

// F16C keeps NaN payload bits; the scalar reference (like the peer) writes
// the canonical quiet NaN with the sign kept. Patch NaN lanes to match.
static inline __m128i canonical_nan_fp16(__m128i h) {
  const __m128i exp = _mm_and_si128(h, _mm_set1_epi16(0x7C00));
  const __m128i man = _mm_and_si128(h, _mm_set1_epi16(0x03FF));
  const __m128i is_nan = _mm_andnot_si128(_mm_cmpeq_epi16(man, _mm_setzero_si128()),
                                          _mm_cmpeq_epi16(exp, _mm_set1_epi16(0x7C00)));
  const __m128i nan = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16(static_cast<short>(0x8000))),
                                   _mm_set1_epi16(0x7E00));
  return _mm_blendv_epi8(h, nan, is_nan);
}

void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), canonical_nan_fp16(h));
  }
  for (; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

void bf16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
  for (; i < n; ++i) dst[i] = bf16_to_fp32(src[i]);
}

void fp32_to_bf16_row(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(0x7f800000);
  const __m256i round = _mm256_set1_epi32(0x7fff);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i quiet = _mm256_set1_epi32(64);
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(src + i));
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(round, lsb)), 16);
    const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), quiet);
    const __m256i r = _mm256_blendv_epi8(rounded, nan, is_nan);
    // Pack the low 16 bits of the eight lanes (values fit in 16 bits, so the
    // unsigned saturation of packus never triggers).
    const __m128i lo = _mm256_castsi256_si128(r);
    const __m128i hi = _mm256_extracti128_si256(r, 1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm_packus_epi32(lo, hi));
  }
  for (; i < n; ++i) dst[i] = fp32_to_bf16(src[i]);
}

}  // namespace cortiq::kernels::avx2
