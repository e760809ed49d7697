// Small AVX-512 helpers the integer kernels share. The 512-bit kernels take
// two packed 8-row groups at once (packed_weights.hpp): the low 256 bits of
// a register are a lane-for-lane copy of what the AVX2 kernel holds for the
// first group, the high 256 bits the same for the second. Only
// *_avx512.cpp files include this; the anonymous namespace keeps every copy
// internal to its file (SIMD objects define no weak symbols); the AVX-512
// files are compiled with the AVX2 flags too, so they share simd_avx2.hpp's
// loads and prefetch.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/simd_avx2.hpp"

namespace cortiq::kernels::avx512 {
namespace {

// The AVX2 helpers' loads and decode prefetch serve here as they are.
using avx2::load128;
using avx2::load256;
using avx2::prefetch_ahead;

// 32 bytes at p0 (low half) and 32 bytes at p1 (high half).
inline __m512i load_pair256(const std::byte* p0, const std::byte* p1) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(load256(p0)), load256(p1), 1);
}

// Eight fp16 values at p0 and eight at p1 as sixteen floats (two groups'
// block scales).
inline __m512 halves_pair8(const std::byte* p0, const std::byte* p1) {
  return _mm512_cvtph_ps(
      _mm256_inserti128_si256(_mm256_castsi128_si256(load128(p0)), load128(p1), 1));
}

// Eight E8M0 exponents at p0 and eight at p1 as sixteen halved scales
// (two MXFP4 groups').
inline __m512 e8m0_halves_pair8(const std::byte* p0, const std::byte* p1) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(avx2::e8m0_halves8(p0)), avx2::e8m0_halves8(p1),
                            1);
}

// Four activation codes, broadcast to every 32-bit lane.
inline __m512i broadcast4(const int8_t* q) {
  int32_t v;
  std::memcpy(&v, q, sizeof(v));
  return _mm512_set1_epi32(v);
}

}  // namespace
}  // namespace cortiq::kernels::avx512
