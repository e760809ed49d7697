// AVX2 K-quant x Q8_K dot products. The integer sums of each super-block
// are formed with maddubs/madd (exact: every int16 pair sum stays within
// range, see each kernel) and reduced horizontally to the same int32 the
// scalar kernel computes; then the same scalar float operations as there
// (dot_kquants.cpp) fold them into the accumulator, so the results are the
// same bits. Each weight super-block is decoded once and used for up to four
// activation rows.
//
// Nothing here may be a weak symbol (tools/check-simd-objects.sh): helpers
// are in an anonymous namespace and no inline function of a shared header is
// called.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/dot_kquants.hpp"
#include "kernels/cpu/simd_avx2.hpp"

namespace cortiq::kernels::avx2 {

namespace {

constexpr int64_t kQ2KBytes = 84;
constexpr int64_t kQ3KBytes = 110;
constexpr int64_t kQ4KBytes = 144;
constexpr int64_t kQ5KBytes = 176;
constexpr int64_t kQ6KBytes = 210;
constexpr int64_t kIq4XsBytes = 136;

// fma(a, b, c), correctly rounded (as std::fma).
float fmadd(float a, float b, float c) {
  return __builtin_fmaf(a, b, c);  // a vfmadd instruction under -mfma
}

uint32_t load32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The 8 int32 lanes of v summed, as a float (rounded to nearest, as
// static_cast<float> of the int32).
float hsum_to_float(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtss_f32(_mm_cvtepi32_ps(s));
}

// The sums of the 8 lanes of v and of the 8 lanes of m, as floats.
void hsum2_to_float(__m256i v, __m256i m, float& sv, float& sm) {
  const __m128i v4 = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  const __m128i m4 = _mm_add_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
  __m128i s = _mm_hadd_epi32(v4, m4);                // v01 v23 m01 m23
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));  // v v m m
  const __m128 f = _mm_cvtepi32_ps(s);
  sv = _mm_cvtss_f32(f);
  sm = _mm_cvtss_f32(_mm_movehl_ps(f, f));
}

// pshufb controls broadcasting int16 word j of each 128-bit lane.
__m256i word_broadcast(int j) {
  return _mm256_set1_epi16(static_cast<int16_t>((2 * j) | ((2 * j + 1) << 8)));
}

// pshufb controls taking word 2k in the low lane and 2k + 1 in the high one:
// the scales of a 32-element vector covering groups 2k and 2k + 1 of 16.
__m256i pair_broadcast(int k) {
  const auto lo = static_cast<int16_t>((4 * k) | ((4 * k + 1) << 8));
  const auto hi = static_cast<int16_t>((4 * k + 2) | ((4 * k + 3) << 8));
  return _mm256_setr_m128i(_mm_set1_epi16(lo), _mm_set1_epi16(hi));
}

// ---- Q4_K / Q5_K -----------------------------------------------------------
//
// Codes 0..15 (0..31 for Q5_K) times |a| <= 127: a maddubs pair is at most
// 2 * 31 * 127 = 7874. Then madd by the 6-bit scale into int32.

// The 8 scales of a Q4_K/Q5_K block as int16 in both 128-bit lanes, and
// its 8 mins as int16, each twice (min j against bsums 2j and 2j + 1), from
// the 12 packed bytes (see quant/k_scales.hpp).
void k4_scales_mins(const std::byte* packed, __m256i& scales, __m256i& mins) {
  constexpr uint32_t kLow6 = 0x3f3f3f3f;
  constexpr uint32_t kLow4 = 0x0f0f0f0f;
  constexpr uint32_t kLow2 = 0x03030303;
  const uint32_t p0 = load32(packed);
  const uint32_t p1 = load32(packed + 4);
  const uint32_t p2 = load32(packed + 8);
  const uint32_t scales_lo = p0 & kLow6;
  const uint32_t scales_hi = (p2 & kLow4) | (((p0 >> 6) & kLow2) << 4);
  const uint32_t mins_lo = p1 & kLow6;
  const uint32_t mins_hi = ((p2 >> 4) & kLow4) | (((p1 >> 6) & kLow2) << 4);
  const __m128i sc8 = _mm_setr_epi32(static_cast<int>(scales_lo), static_cast<int>(scales_hi),
                                     static_cast<int>(scales_lo), static_cast<int>(scales_hi));
  const __m128i m8 = _mm_setr_epi32(static_cast<int>(mins_lo), static_cast<int>(mins_hi), 0, 0);
  scales = _mm256_cvtepu8_epi16(sc8);
  mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
}

template <int N, bool kFifth>
void k4_kernel(const std::byte* row, const Q8BlockK* a, int64_t a_stride, int64_t n_blocks,
               float* out) {
  constexpr int64_t kBytes = kFifth ? kQ5KBytes : kQ4KBytes;
  constexpr int kQs = kFifth ? 48 : 16;  // offset of qs in the block
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  float acc[N];
  for (int r = 0; r < N; ++r) acc[r] = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b, row += kBytes) {
    if (N == 1) prefetch_ahead(row, kBytes);
    __m256i scales;
    __m256i mins;
    k4_scales_mins(row + 4, scales, mins);
    __m256i high_bits = _mm256_setzero_si256();
    if constexpr (kFifth) high_bits = load256(row + 16);
    const Q8BlockK* x[N];
    for (int r = 0; r < N; ++r) x[r] = a + r * a_stride + b;
    __m256i isum[N];
    for (int r = 0; r < N; ++r) isum[r] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i sc_lo = _mm256_shuffle_epi8(scales, word_broadcast(2 * c));
      const __m256i sc_hi = _mm256_shuffle_epi8(scales, word_broadcast(2 * c + 1));
      const __m256i q = load256(row + kQs + 32 * c);
      __m256i q_lo = _mm256_and_si256(q, m4);
      __m256i q_hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      if constexpr (kFifth) {
        // Bit 2c of qh[l] -> bit 4 of code (2c, l); bit 2c + 1 -> (2c + 1, l).
        // The 16-bit shifts move the wanted bits to bit 4 of each byte.
        const int s = 2 * c;
        const __m256i h_lo =
            s <= 4 ? _mm256_slli_epi16(high_bits, 4 - s) : _mm256_srli_epi16(high_bits, s - 4);
        const __m256i h_hi =
            s + 1 <= 4 ? _mm256_slli_epi16(high_bits, 3 - s) : _mm256_srli_epi16(high_bits, s - 3);
        q_lo = _mm256_or_si256(q_lo, _mm256_and_si256(h_lo, bit4));
        q_hi = _mm256_or_si256(q_hi, _mm256_and_si256(h_hi, bit4));
      }
      for (int r = 0; r < N; ++r) {
        const int8_t* qa = x[r]->qs + 64 * c;
        const __m256i p_lo = _mm256_madd_epi16(sc_lo, _mm256_maddubs_epi16(q_lo, load256(qa)));
        const __m256i p_hi = _mm256_madd_epi16(sc_hi, _mm256_maddubs_epi16(q_hi, load256(qa + 32)));
        isum[r] = _mm256_add_epi32(_mm256_add_epi32(isum[r], p_lo), p_hi);
      }
    }
    const float d = half_at(row);
    const float dmin = half_at(row + 2);
    for (int r = 0; r < N; ++r) {
      // Lane j: m_j * (bsums[2j] + bsums[2j + 1]).
      const __m256i imin = _mm256_madd_epi16(mins, load256(x[r]->bsums));
      float fsum = 0.0f;
      float fmin = 0.0f;
      hsum2_to_float(isum[r], imin, fsum, fmin);
      const float dl = x[r]->d * d;
      const float ml = x[r]->d * dmin;
      acc[r] = fmadd(dl, fsum, acc[r]);
      acc[r] = fmadd(-ml, fmin, acc[r]);
    }
  }
  for (int r = 0; r < N; ++r) out[r] = acc[r];
}

// ---- Q2_K / Q3_K / Q6_K: 16 groups of 16 ------------------------------------
//
// Vector (h, k) holds elements 128h + 32k + [0, 32): groups 8h + 2k (low
// 128 bits) and 8h + 2k + 1 (high), each with its own int16 scale.

// Q2_K: codes 0..3, a maddubs pair <= 2 * 3 * 127; 4-bit scales and mins.
template <int N>
void q2_k_kernel(const std::byte* row, const Q8BlockK* a, int64_t a_stride, int64_t n_blocks,
                 float* out) {
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m128i m4 = _mm_set1_epi8(0x0F);
  float acc[N];
  for (int r = 0; r < N; ++r) acc[r] = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b, row += kQ2KBytes) {
    if (N == 1) prefetch_ahead(row, kQ2KBytes);
    const __m128i packed = load128(row);
    const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(packed, m4));
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), m4));
    const Q8BlockK* x[N];
    for (int r = 0; r < N; ++r) x[r] = a + r * a_stride + b;
    __m256i isum[N];
    for (int r = 0; r < N; ++r) isum[r] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i sc_h = h == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00)
                                  : _mm256_permute2x128_si256(sc16, sc16, 0x11);
      const __m256i q = load256(row + 16 + 32 * h);
      for (int k = 0; k < 4; ++k) {
        const __m256i sc = _mm256_shuffle_epi8(sc_h, pair_broadcast(k));
        const __m256i qk = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m3);
        for (int r = 0; r < N; ++r) {
          const __m256i p = _mm256_maddubs_epi16(qk, load256(x[r]->qs + 128 * h + 32 * k));
          isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(sc, p));
        }
      }
    }
    const float d = half_at(row + 80);
    const float dmin = half_at(row + 82);
    for (int r = 0; r < N; ++r) {
      const __m256i imin = _mm256_madd_epi16(mins16, load256(x[r]->bsums));
      float fsum = 0.0f;
      float fmin = 0.0f;
      hsum2_to_float(isum[r], imin, fsum, fmin);
      const float dl = x[r]->d * d;
      const float ml = x[r]->d * dmin;
      acc[r] = fmadd(dl, fsum, acc[r]);
      acc[r] = fmadd(-ml, fmin, acc[r]);
    }
  }
  for (int r = 0; r < N; ++r) out[r] = acc[r];
}

// The 16 Q3_K scales minus 32 as int16, from the 12 packed bytes: low
// nibbles of groups 0..7 in bytes 0..7, of 8..15 in their high nibbles; the
// top 2 bits of group j at bit 2 (j / 4) of byte 8 + j % 4.
__m256i q3_k_scales(const std::byte* packed) {
  constexpr uint32_t kLow4 = 0x0f0f0f0f;
  constexpr uint32_t kLow2 = 0x03030303;
  const uint32_t p0 = load32(packed);
  const uint32_t p1 = load32(packed + 4);
  const uint32_t p2 = load32(packed + 8);
  const uint32_t s0 = (p0 & kLow4) | ((p2 & kLow2) << 4);
  const uint32_t s1 = (p1 & kLow4) | (((p2 >> 2) & kLow2) << 4);
  const uint32_t s2 = ((p0 >> 4) & kLow4) | (((p2 >> 4) & kLow2) << 4);
  const uint32_t s3 = ((p1 >> 4) & kLow4) | (((p2 >> 6) & kLow2) << 4);
  const __m128i s = _mm_setr_epi32(static_cast<int>(s0), static_cast<int>(s1), static_cast<int>(s2),
                                   static_cast<int>(s3));
  return _mm256_sub_epi16(_mm256_cvtepu8_epi16(s), _mm256_set1_epi16(32));
}

// Q3_K: codes q = low 2 bits | high bit << 2 in 0..7 (a maddubs pair <=
// 2 * 7 * 127); the code's offset -4 enters as -4 * bsums, once per block.
template <int N>
void q3_k_kernel(const std::byte* row, const Q8BlockK* a, int64_t a_stride, int64_t n_blocks,
                 float* out) {
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m256i bit2 = _mm256_set1_epi8(4);
  float acc[N];
  for (int r = 0; r < N; ++r) acc[r] = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b, row += kQ3KBytes) {
    if (N == 1) prefetch_ahead(row, kQ3KBytes);
    const __m256i sc16 = q3_k_scales(row + 96);
    const __m256i hmask = load256(row);
    const Q8BlockK* x[N];
    for (int r = 0; r < N; ++r) x[r] = a + r * a_stride + b;
    __m256i isum[N];
    for (int r = 0; r < N; ++r) isum[r] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i sc_h = h == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00)
                                  : _mm256_permute2x128_si256(sc16, sc16, 0x11);
      const __m256i q = load256(row + 32 + 32 * h);
      for (int k = 0; k < 4; ++k) {
        const int bit = 4 * h + k;  // of hmask, moved to bit 2
        const __m256i sc = _mm256_shuffle_epi8(sc_h, pair_broadcast(k));
        const __m256i hb =
            bit >= 2 ? _mm256_srli_epi16(hmask, bit - 2) : _mm256_slli_epi16(hmask, 2 - bit);
        const __m256i qk = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m3),
                                           _mm256_and_si256(hb, bit2));
        for (int r = 0; r < N; ++r) {
          const __m256i p = _mm256_maddubs_epi16(qk, load256(x[r]->qs + 128 * h + 32 * k));
          isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(sc, p));
        }
      }
    }
    const float d = half_at(row + 108);
    for (int r = 0; r < N; ++r) {
      const __m256i offset = _mm256_madd_epi16(sc16, load256(x[r]->bsums));
      const __m256i total = _mm256_sub_epi32(isum[r], _mm256_slli_epi32(offset, 2));
      acc[r] = fmadd(x[r]->d * d, hsum_to_float(total), acc[r]);
    }
  }
  for (int r = 0; r < N; ++r) out[r] = acc[r];
}

// Q6_K: codes 0..63 (a maddubs pair <= 2 * 63 * 127 = 16002), signed 8-bit
// scales; the code's offset -32 enters as -32 * bsums, once per block.
template <int N>
void q6_k_kernel(const std::byte* row, const Q8BlockK* a, int64_t a_stride, int64_t n_blocks,
                 float* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  float acc[N];
  for (int r = 0; r < N; ++r) acc[r] = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b, row += kQ6KBytes) {
    if (N == 1) prefetch_ahead(row, kQ6KBytes);
    const __m256i sc16 = _mm256_cvtepi8_epi16(load128(row + 192));
    const Q8BlockK* x[N];
    for (int r = 0; r < N; ++r) x[r] = a + r * a_stride + b;
    __m256i isum[N];
    for (int r = 0; r < N; ++r) isum[r] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i sc_h = h == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00)
                                  : _mm256_permute2x128_si256(sc16, sc16, 0x11);
      const __m256i ql0 = load256(row + 64 * h);
      const __m256i ql1 = load256(row + 64 * h + 32);
      const __m256i qh = load256(row + 128 + 32 * h);
      const __m256i codes[4] = {
          _mm256_or_si256(_mm256_and_si256(ql0, m4),
                          _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)),
          _mm256_or_si256(_mm256_and_si256(ql1, m4),
                          _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                          _mm256_and_si256(qh, m30)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                          _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30)),
      };
      for (int k = 0; k < 4; ++k) {
        const __m256i sc = _mm256_shuffle_epi8(sc_h, pair_broadcast(k));
        for (int r = 0; r < N; ++r) {
          const __m256i p = _mm256_maddubs_epi16(codes[k], load256(x[r]->qs + 128 * h + 32 * k));
          isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(sc, p));
        }
      }
    }
    const float d = half_at(row + 208);
    for (int r = 0; r < N; ++r) {
      const __m256i offset = _mm256_madd_epi16(sc16, load256(x[r]->bsums));
      const __m256i total = _mm256_sub_epi32(isum[r], _mm256_slli_epi32(offset, 5));
      acc[r] = fmadd(x[r]->d * d, hsum_to_float(total), acc[r]);
    }
  }
  for (int r = 0; r < N; ++r) out[r] = acc[r];
}

// ---- IQ4_XS -----------------------------------------------------------------
//
// Signed grid values times signed codes: maddubs(|v|, sign(v) * a), a pair
// <= 2 * 127 * 127 = 32258 (|a| <= 127, so sign() never meets -128).
template <int N>
void iq4_xs_kernel(const std::byte* row, const Q8BlockK* a, int64_t a_stride, int64_t n_blocks,
                   float* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i grid =
      _mm256_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
                       -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
  float acc[N];
  for (int r = 0; r < N; ++r) acc[r] = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b, row += kIq4XsBytes) {
    if (N == 1) prefetch_ahead(row, kIq4XsBytes);
    uint16_t scales_h;
    std::memcpy(&scales_h, row + 2, 2);
    const uint32_t scales_l = load32(row + 4);
    int16_t ls[8];
    for (int j = 0; j < 8; ++j) {
      const int low = static_cast<int>(scales_l >> (4 * j)) & 0xF;
      const int high = (scales_h >> (2 * j)) & 3;
      ls[j] = static_cast<int16_t>((low | (high << 4)) - 32);
    }
    const Q8BlockK* x[N];
    for (int r = 0; r < N; ++r) x[r] = a + r * a_stride + b;
    __m256i isum[N];
    for (int r = 0; r < N; ++r) isum[r] = _mm256_setzero_si256();
    for (int j = 0; j < 8; j += 2) {
      // Groups j (low 128 bits) and j + 1 (high): low nibbles are their
      // elements 0..15, high nibbles 16..31.
      const __m256i q = load256(row + 8 + 16 * j);
      const __m256i v_lo = _mm256_shuffle_epi8(grid, _mm256_and_si256(q, m4));
      const __m256i v_hi = _mm256_shuffle_epi8(grid, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
      const __m256i u_lo = _mm256_abs_epi8(v_lo);
      const __m256i u_hi = _mm256_abs_epi8(v_hi);
      const __m256i sc = _mm256_setr_m128i(_mm_set1_epi16(ls[j]), _mm_set1_epi16(ls[j + 1]));
      for (int r = 0; r < N; ++r) {
        const int8_t* qa = x[r]->qs + 32 * j;
        const __m256i a_lo = _mm256_setr_m128i(load128(qa), load128(qa + 32));
        const __m256i a_hi = _mm256_setr_m128i(load128(qa + 16), load128(qa + 48));
        const __m256i p_lo = _mm256_maddubs_epi16(u_lo, _mm256_sign_epi8(a_lo, v_lo));
        const __m256i p_hi = _mm256_maddubs_epi16(u_hi, _mm256_sign_epi8(a_hi, v_hi));
        isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(sc, p_lo));
        isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(sc, p_hi));
      }
    }
    const float d = half_at(row);
    for (int r = 0; r < N; ++r) acc[r] = fmadd(x[r]->d * d, hsum_to_float(isum[r]), acc[r]);
  }
  for (int r = 0; r < N; ++r) out[r] = acc[r];
}

// n_act -> the kernel instance for that many rows.
#define CORTIQ_KQ_DISPATCH(name, ...)                                             \
  void name(const std::byte* row, const Q8BlockK* a, int64_t a_stride, int n_act, \
            int64_t n_blocks, float* out) {                                       \
    switch (n_act) {                                                              \
      case 1:                                                                     \
        return __VA_ARGS__<1>(row, a, a_stride, n_blocks, out);                   \
      case 2:                                                                     \
        return __VA_ARGS__<2>(row, a, a_stride, n_blocks, out);                   \
      case 3:                                                                     \
        return __VA_ARGS__<3>(row, a, a_stride, n_blocks, out);                   \
      default:                                                                    \
        return __VA_ARGS__<4>(row, a, a_stride, n_blocks, out);                   \
    }                                                                             \
  }

template <int N>
void q4_k_kernel(const std::byte* row, const Q8BlockK* a, int64_t a_stride, int64_t n_blocks,
                 float* out) {
  k4_kernel<N, false>(row, a, a_stride, n_blocks, out);
}

template <int N>
void q5_k_kernel(const std::byte* row, const Q8BlockK* a, int64_t a_stride, int64_t n_blocks,
                 float* out) {
  k4_kernel<N, true>(row, a, a_stride, n_blocks, out);
}

CORTIQ_KQ_DISPATCH(q2_k_dot, q2_k_kernel)
CORTIQ_KQ_DISPATCH(q3_k_dot, q3_k_kernel)
CORTIQ_KQ_DISPATCH(q4_k_dot, q4_k_kernel)
CORTIQ_KQ_DISPATCH(q5_k_dot, q5_k_kernel)
CORTIQ_KQ_DISPATCH(q6_k_dot, q6_k_kernel)
CORTIQ_KQ_DISPATCH(iq4_xs_dot, iq4_xs_kernel)

#undef CORTIQ_KQ_DISPATCH

}  // namespace

KQuantDot kquant_dot(GgmlType type) {
  switch (type) {
    case GgmlType::Q2_K:
      return q2_k_dot;
    case GgmlType::Q3_K:
      return q3_k_dot;
    case GgmlType::Q4_K:
      return q4_k_dot;
    case GgmlType::Q5_K:
      return q5_k_dot;
    case GgmlType::Q6_K:
      return q6_k_dot;
    case GgmlType::IQ4_XS:
      return iq4_xs_dot;
    default:
      return nullptr;
  }
}

}  // namespace cortiq::kernels::avx2
