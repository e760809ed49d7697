// AVX2 row dequantization for the most common weight types. Each value is
// computed with the reference's operations — an integer converted to float,
// one multiply by the block scale — so the results are the same bits.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/dequantize_fast.hpp"
#include "kernels/cpu/simd_avx2.hpp"

namespace cortiq::kernels::avx2 {

namespace {

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
    const __m256 d = _mm256_set1_ps(half_at(src));
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
    const __m256 d = _mm256_set1_ps(half_at(src));
    for (int k = 0; k < 4; ++k) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + 2 + 8 * k));
      _mm256_storeu_ps(dst + 8 * k, _mm256_mul_ps(bytes_to_floats(q), d));
    }
  }
}

// Q4_K: a 256-element super-block of 144 bytes: d, dmin (fp16), 12 bytes of
// packed 6-bit (scale, min) pairs, 128 bytes of nibbles. Sub-block g = 2c + p
// (c = 0..3, p = 0..1) holds elements 64c + 32p + l, the low (p = 0) or high
// (p = 1) nibbles of bytes 32c + l; x = (d * scale_g) * q - dmin * min_g.
constexpr int64_t kQ4KBytes = 144;

// The (scale, min) pair of a sub-block, as quant/k_scales.hpp unpacks it
// (repeated here: SIMD files define no inline functions shared with
// baseline code).
void q4_k_scale_min(const uint8_t* packed, int g, int& scale, int& min) {
  if (g < 4) {
    scale = packed[g] & 63;
    min = packed[g + 4] & 63;
  } else {
    scale = (packed[g + 4] & 0xF) | ((packed[g - 4] >> 6) << 4);
    min = (packed[g + 4] >> 4) | ((packed[g] >> 6) << 4);
  }
}

// The 32 values of one sub-block from its 32 nibble bytes (0..15 each).
void q4_k_values(__m256i nibbles, float dl, float ml, __m256 out[4]) {
  const __m256 vd = _mm256_set1_ps(dl);
  const __m256 vm = _mm256_set1_ps(ml);
  const __m128i halves[2] = {_mm256_castsi256_si128(nibbles), _mm256_extracti128_si256(nibbles, 1)};
  for (int h = 0; h < 2; ++h) {
    for (int k = 0; k < 2; ++k) {
      const __m128i bytes = k == 0 ? halves[h] : _mm_srli_si128(halves[h], 8);
      const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
      out[2 * h + k] = _mm256_sub_ps(_mm256_mul_ps(vd, q), vm);
    }
  }
}

// Calls fn(sub-block values[4], first element) for every sub-block of a row.
template <typename Fn>
void q4_k_each_subblock(const std::byte* src, int64_t n_blocks, Fn fn) {
  const __m256i mask = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < n_blocks; ++b, src += kQ4KBytes) {
    const float d = half_at(src);
    const float dmin = half_at(src + 2);
    const auto* packed = reinterpret_cast<const uint8_t*>(src + 4);
    const std::byte* qs = src + 16;
    for (int c = 0; c < 4; ++c) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c));
      const __m256i parts[2] = {_mm256_and_si256(q, mask),
                                _mm256_and_si256(_mm256_srli_epi16(q, 4), mask)};
      for (int p = 0; p < 2; ++p) {
        int scale = 0, min = 0;
        q4_k_scale_min(packed, 2 * c + p, scale, min);
        __m256 values[4];
        q4_k_values(parts[p], d * static_cast<float>(scale), dmin * static_cast<float>(min),
                    values);
        fn(values, 256 * b + 64 * c + 32 * p);
      }
    }
  }
}

void q4_k_rows(const std::byte* src, float* dst, int64_t n_blocks) {
  q4_k_each_subblock(src, n_blocks, [&](const __m256* v, int64_t at) {
    for (int k = 0; k < 4; ++k) _mm256_storeu_ps(dst + at + 8 * k, v[k]);
  });
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
    case GgmlType::Q4_K:
      q4_k_rows(src, dst, n / 256);
      return true;
    default:
      return false;
  }
}

}  // namespace cortiq::kernels::avx2
