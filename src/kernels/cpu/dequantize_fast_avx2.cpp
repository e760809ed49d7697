// AVX2 row dequantization for the most common weight types. Each value is
// computed with the reference's operations — an integer converted to float,
// one multiply by the block scale — so the results are the same bits.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/dequantize_fast.hpp"

namespace cortiq::kernels::avx2 {

namespace {

// fp16 -> f32 of a block scale (F16C).
float scale_of(const std::byte* block) {
  uint16_t h;
  std::memcpy(&h, block, 2);
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

// 8 signed bytes -> 8 floats.
__m256 bytes_to_floats(__m128i bytes8) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes8));
}

// Q4_0: 2-byte scale, 16 bytes of nibbles; low nibbles are elements 0..15,
// high nibbles 16..31; x = (q - 8) * d.
void q4_0_rows(const std::byte* src, float* dst, int64_t n_blocks) {
  const __m128i low_mask = _mm_set1_epi8(0x0F);
  const __m128i eight = _mm_set1_epi8(8);
  for (int64_t b = 0; b < n_blocks; ++b, src += 18, dst += 32) {
    const __m256 d = _mm256_set1_ps(scale_of(src));
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2));
    const __m128i lo = _mm_sub_epi8(_mm_and_si128(q, low_mask), eight);
    const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), low_mask), eight);
    _mm256_storeu_ps(dst + 0, _mm256_mul_ps(bytes_to_floats(lo), d));
    _mm256_storeu_ps(dst + 8, _mm256_mul_ps(bytes_to_floats(_mm_srli_si128(lo, 8)), d));
    _mm256_storeu_ps(dst + 16, _mm256_mul_ps(bytes_to_floats(hi), d));
    _mm256_storeu_ps(dst + 24, _mm256_mul_ps(bytes_to_floats(_mm_srli_si128(hi, 8)), d));
  }
}

// Q8_0: 2-byte scale, 32 signed bytes; x = q * d.
void q8_0_rows(const std::byte* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += 34, dst += 32) {
    const __m256 d = _mm256_set1_ps(scale_of(src));
    for (int k = 0; k < 4; ++k) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + 2 + 8 * k));
      _mm256_storeu_ps(dst + 8 * k, _mm256_mul_ps(bytes_to_floats(q), d));
    }
  }
}

}  // namespace

bool dequantize_row(GgmlType type, const std::byte* src, float* dst, int64_t n) {
  switch (type) {
    case GgmlType::Q4_0:
      q4_0_rows(src, dst, n / 32);
      return true;
    case GgmlType::Q8_0:
      q8_0_rows(src, dst, n / 32);
      return true;
    default:
      return false;
  }
}

}  // namespace cortiq::kernels::avx2
