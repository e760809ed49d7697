// Small AVX2 helpers the integer kernels share: unaligned loads, fp16
// scales, activation-code broadcasts and the decode prefetch. Only
// *_avx2.cpp and *_avx512.cpp files (these through simd_avx512.hpp)
// include this; the anonymous namespace keeps every copy internal to its
// file (SIMD objects define no weak symbols), and `inline` spares the files
// that use only some of them an unused-function warning.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cortiq::kernels::avx2 {
namespace {

inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

inline __m128i load128(const void* p) {
  return _mm_loadu_si128(static_cast<const __m128i*>(p));
}

// The fp16 at p as a float (F16C: exact, as fp16_to_fp32).
inline float half_at(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

// Eight consecutive fp16 values at p as floats (a packed group's 8 scales).
inline __m256 halves8(const std::byte* p) {
  return _mm256_cvtph_ps(load128(p));
}

// Eight E8M0 exponents at p (a packed MXFP4 group's) as their halved
// scales 2^(e - 128), the bits of quant::e8m0_to_fp32_half: e = 0 and 1
// are the subnormals 0x00200000 << e, the others (e - 1) << 23.
inline __m256 e8m0_halves8(const std::byte* p) {
  int64_t bytes;
  std::memcpy(&bytes, p, sizeof(bytes));
  const __m256i e = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes));
  const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
  const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
  const __m256i tiny = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
  return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, subnormal, tiny));
}

// MXFP4's codes as maddubs' unsigned operand: kMxfp4Values + 12 (0..24),
// by nibble, in both 128-bit lanes; 12 * a.sum comes off the sum.
inline __m256i mxfp4_unsigned_table() {
  return _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0, 12, 13, 14, 15,
                          16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
}

// Four activation codes, broadcast to every 32-bit lane.
inline __m256i broadcast4(const int8_t* q) {
  int32_t v;
  std::memcpy(&v, q, sizeof(v));
  return _mm256_set1_epi32(v);
}

// Decode streams each thread's share of a matrix once; the hardware
// prefetcher alone leaves ~10 % of the read bandwidth unused (1B Q4_0
// decode 28.6 -> 31-33 tokens/s on the 2-core EPYC), so the single-row
// kernels ask for the bytes this far ahead themselves.
constexpr int64_t kPrefetchBytes = 1024;

// Prefetches the lines of `bytes` bytes starting `distance` bytes past p.
inline void prefetch_ahead(const std::byte* p, int64_t bytes, int64_t distance = kPrefetchBytes) {
  const char* ahead = reinterpret_cast<const char*>(p) + distance;
  for (int64_t off = 0; off < bytes; off += 64) _mm_prefetch(ahead + off, _MM_HINT_T0);
}

}  // namespace
}  // namespace cortiq::kernels::avx2
