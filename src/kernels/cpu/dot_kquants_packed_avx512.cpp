// AVX-512 VNNI kernels over pairs of packed K groups (q4_Kx8, q6_Kx8; see
// dot_kquants_packed_avx2.cpp for the block layouts): one 512-bit register
// holds the lanes of two 8-row groups, and vpdpbusd sums four code-times-
// activation products into each int32 lane. Every integer part is exact
// (so its order is free), and each super-block ends in the float
// operations of dot_kquants.cpp lane by lane: the per-row kernels' bits.
//
// A call takes any number of activation rows; they run eight (then four,
// two, one) at a time, each weight chunk decoded once for those rows. The
// single-row kernel prefetches both groups' streams; a decode no longer
// comes here (one group at a time is faster: matmul_integer.cpp), only a
// prefill's odd last row.
//
// Nothing here may be a weak symbol (tools/check-simd-objects.sh).
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/dot_kquants_packed.hpp"
#include "kernels/cpu/simd_avx512.hpp"

namespace cortiq::kernels::avx512 {

namespace {

// The byte of each 32-bit lane at `shift` bits, zero-extended (a 6-bit
// scale or min as an int32 multiplier).
__m512i lane_byte(__m512i v, int shift) {
  return _mm512_and_si512(_mm512_srli_epi32(v, shift), _mm512_set1_epi32(0xFF));
}

// Each 32-bit lane's word 0 (1) of an int16 pair, sign-extended.
__m512i low_word(__m512i v) {
  return _mm512_srai_epi32(_mm512_slli_epi32(v, 16), 16);
}
__m512i high_word(__m512i v) {
  return _mm512_srai_epi32(v, 16);
}

// out rows [0, n) (16 floats each) set to zero.
void zero_rows(int n, float* out) {
  for (int i = 0; i < n; ++i) _mm512_storeu_ps(out + 16 * i, _mm512_setzero_ps());
}

// ---- q4_Kx8 pairs ----------------------------------------------------------
constexpr int64_t kQ4KBlock = 1152;  // packed_block_bytes(q4_Kx8)

struct Q4KPairScales {
  __m512i scale[8];  // lane r: sc_rj as int32
  __m512i min[4];    // lane r: (m_r,2t, m_r,2t+1) as int16
};

// pshufb control (one 128-bit lane, repeated): bytes s and s + 1 of each
// 32-bit lane as an int16 pair, zero-extended.
__m512i byte_two_control(int s) {
  const auto w0 = static_cast<int16_t>(s | 0x8000);
  const auto w1 = static_cast<int16_t>((s + 1) | 0x8000);
  const __m128i lane = _mm_add_epi16(_mm_setr_epi16(w0, w1, w0, w1, w0, w1, w0, w1),
                                     _mm_setr_epi16(0, 0, 4, 4, 8, 8, 12, 12));
  return _mm512_broadcast_i32x4(lane);
}

void q4_k_scales(const std::byte* b0, const std::byte* b1, Q4KPairScales& s) {
  const __m512i low6 = _mm512_set1_epi8(0x3F);
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i top2 = _mm512_set1_epi8(0x30);
  const __m512i p0 = load_pair256(b0 + 32, b1 + 32);
  const __m512i p1 = load_pair256(b0 + 64, b1 + 64);
  const __m512i p2 = load_pair256(b0 + 96, b1 + 96);
  const __m512i sc_lo = _mm512_and_si512(p0, low6);
  const __m512i sc_hi =
      _mm512_or_si512(_mm512_and_si512(p2, low4), _mm512_and_si512(_mm512_srli_epi16(p0, 2), top2));
  const __m512i m_lo = _mm512_and_si512(p1, low6);
  const __m512i m_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(p2, 4), low4),
                                       _mm512_and_si512(_mm512_srli_epi16(p1, 2), top2));
  for (int j = 0; j < 4; ++j) {
    s.scale[j] = lane_byte(sc_lo, 8 * j);
    s.scale[j + 4] = lane_byte(sc_hi, 8 * j);
  }
  s.min[0] = _mm512_shuffle_epi8(m_lo, byte_two_control(0));
  s.min[1] = _mm512_shuffle_epi8(m_lo, byte_two_control(2));
  s.min[2] = _mm512_shuffle_epi8(m_hi, byte_two_control(0));
  s.min[3] = _mm512_shuffle_epi8(m_hi, byte_two_control(2));
}

// imin of one activation row: lane r = sum_j m_rj * (bsums[2j] + bsums[2j + 1]).
__m512i q4_k_mins(const Q4KPairScales& s, const Q8BlockK& x) {
  const __m512i b_pairs = _mm512_broadcast_i32x4(
      _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.bsums)),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.bsums + 8))));
  __m512i imin = _mm512_madd_epi16(s.min[0], _mm512_shuffle_epi32(b_pairs, _MM_PERM_AAAA));
  imin = _mm512_add_epi32(
      imin, _mm512_madd_epi16(s.min[1], _mm512_shuffle_epi32(b_pairs, _MM_PERM_BBBB)));
  imin = _mm512_add_epi32(
      imin, _mm512_madd_epi16(s.min[2], _mm512_shuffle_epi32(b_pairs, _MM_PERM_CCCC)));
  return _mm512_add_epi32(
      imin, _mm512_madd_epi16(s.min[3], _mm512_shuffle_epi32(b_pairs, _MM_PERM_DDDD)));
}

// The two fused steps of dot_kquants.cpp, lane by lane, into out's row.
void q4_k_fold(const std::byte* b0, const std::byte* b1, float ad_scalar, __m512i isum,
               __m512i imin, float* acc_row) {
  const __m512 ad = _mm512_set1_ps(ad_scalar);
  const __m512 dl = _mm512_mul_ps(ad, halves_pair8(b0, b1));
  const __m512 ml = _mm512_mul_ps(ad, halves_pair8(b0 + 16, b1 + 16));
  __m512 acc = _mm512_fmadd_ps(dl, _mm512_cvtepi32_ps(isum), _mm512_loadu_ps(acc_row));
  // fma(-ml, imin, acc): negating a factor is exact.
  acc = _mm512_fnmadd_ps(ml, _mm512_cvtepi32_ps(imin), acc);
  _mm512_storeu_ps(acc_row, acc);
}

// One activation row's integer sum: each code chunk is loaded once
// and gives both its sub-blocks (low nibbles 2c, high 2c + 1).
__m512i q4_k_one_row_sum(const std::byte* b0, const std::byte* b1, const Q4KPairScales& s,
                         const int8_t* q) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  __m512i isum = _mm512_setzero_si512();
  for (int c = 0; c < 4; ++c) {
    __m512i sum_lo = _mm512_setzero_si512();
    __m512i sum_hi = _mm512_setzero_si512();
    for (int k = 0; k < 8; ++k) {
      const int64_t chunk = 128 + 32 * (8 * c + k);
      const __m512i w = load_pair256(b0 + chunk, b1 + chunk);
      sum_lo =
          _mm512_dpbusd_epi32(sum_lo, _mm512_and_si512(w, low), broadcast4(q + 64 * c + 4 * k));
      sum_hi = _mm512_dpbusd_epi32(sum_hi, _mm512_and_si512(_mm512_srli_epi16(w, 4), low),
                                   broadcast4(q + 64 * c + 32 + 4 * k));
    }
    isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(sum_lo, s.scale[2 * c]));
    isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(sum_hi, s.scale[2 * c + 1]));
  }
  return isum;
}

// N activation rows against one pair, their accumulators in out (zeroed by
// the caller). Sub-block j's codes are chunks 8 (j / 2) + k, low nibbles for
// even j, high for odd.
template <int N>
void q4_k_rows(const std::byte* group, const std::byte* second, const Q8BlockK* a, int64_t a_stride,
               int64_t n_blocks, float* out) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* b0 = group + b * kQ4KBlock;
    const std::byte* b1 = second + b * kQ4KBlock;
    if (N == 1) {
      prefetch_ahead(b0, kQ4KBlock);
      prefetch_ahead(b1, kQ4KBlock);
    }
    Q4KPairScales s;
    q4_k_scales(b0, b1, s);
    const int8_t* q[N];
    for (int i = 0; i < N; ++i) q[i] = a[i * a_stride + b].qs;
    __m512i isum[N];
    for (int i = 0; i < N; ++i) isum[i] = _mm512_setzero_si512();
    if constexpr (N == 1) isum[0] = q4_k_one_row_sum(b0, b1, s, q[0]);
    for (int j = 0; j < (N == 1 ? 0 : 8); ++j) {
      const int c = j / 2;
      __m512i sum[N];
      for (int i = 0; i < N; ++i) sum[i] = _mm512_setzero_si512();
      for (int k = 0; k < 8; ++k) {
        const std::byte* chunk = b0 + 128 + 32 * (8 * c + k);
        const __m512i w = load_pair256(chunk, b1 + (chunk - b0));
        const __m512i nib =
            j % 2 == 0 ? _mm512_and_si512(w, low) : _mm512_and_si512(_mm512_srli_epi16(w, 4), low);
        for (int i = 0; i < N; ++i) {
          sum[i] = _mm512_dpbusd_epi32(sum[i], nib, broadcast4(q[i] + 32 * j + 4 * k));
        }
      }
      for (int i = 0; i < N; ++i) {
        isum[i] = _mm512_add_epi32(isum[i], _mm512_mullo_epi32(sum[i], s.scale[j]));
      }
    }
    for (int i = 0; i < N; ++i) {
      const Q8BlockK& x = a[i * a_stride + b];
      q4_k_fold(b0, b1, x.d, isum[i], q4_k_mins(s, x), out + 16 * i);
    }
  }
}

// ---- q6_Kx8 pairs ----------------------------------------------------------
//
// Codes 0..63 are the unsigned operand as they are; the -32 offset comes
// off as 32 * sum_g sc_g * bsums[g] per row, as in the AVX2 kernel.
constexpr int64_t kQ6KBlock = 1680;  // packed_block_bytes(q6_Kx8)

struct Q6KPairScales {
  __m512i scale[16];  // lane r: sc_rg as int32
  __m512i pair[8];    // lane r: (sc_r,2t, sc_r,2t+1) as int16
};

void q6_k_scales(const std::byte* b0, const std::byte* b1, Q6KPairScales& s) {
  for (int t = 0; t < 8; ++t) {
    const __m256i bytes = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(b0 + 16 + 16 * t)),
                                                  load128(b1 + 16 + 16 * t), 1);
    s.pair[t] = _mm512_cvtepi8_epi16(bytes);
    s.scale[2 * t] = low_word(s.pair[t]);
    s.scale[2 * t + 1] = high_word(s.pair[t]);
  }
}

// Code vector k of chunk m of half h: 4 codes of each of the 16 rows.
__m512i q6_codes(const std::byte* b0, const std::byte* b1, int h, int k, int m) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i m30 = _mm512_set1_epi8(0x30);
  const int64_t ql = 144 + 32 * (16 * h + 8 * (k % 2) + m);
  const int64_t qh = 1168 + 32 * (8 * h + m);
  const __m512i l = load_pair256(b0 + ql, b1 + ql);
  const __m512i hb = load_pair256(b0 + qh, b1 + qh);
  const __m512i low =
      k < 2 ? _mm512_and_si512(l, m4) : _mm512_and_si512(_mm512_srli_epi16(l, 4), m4);
  const __m512i high = k == 0   ? _mm512_slli_epi16(hb, 4)
                       : k == 1 ? _mm512_slli_epi16(hb, 2)
                       : k == 2 ? hb
                                : _mm512_srli_epi16(hb, 2);
  return _mm512_or_si512(low, _mm512_and_si512(high, m30));
}

// One activation row's integer sum: each chunk's ql and qh bytes
// are loaded once and give the code vectors of all four k.
void q6_k_one_row_sums(const std::byte* b0, const std::byte* b1, const Q6KPairScales& s,
                       const int8_t* q, __m512i& isum) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i m30 = _mm512_set1_epi8(0x30);
  isum = _mm512_setzero_si512();
  for (int h = 0; h < 2; ++h) {
    for (int m0 = 0; m0 < 8; m0 += 4) {
      __m512i sum[4];
      for (int k = 0; k < 4; ++k) sum[k] = _mm512_setzero_si512();
      for (int m = m0; m < m0 + 4; ++m) {
        const int64_t l0 = 144 + 32 * (16 * h + m);
        const int64_t l1 = 144 + 32 * (16 * h + 8 + m);
        const int64_t qh = 1168 + 32 * (8 * h + m);
        const __m512i ql0 = load_pair256(b0 + l0, b1 + l0);
        const __m512i ql1 = load_pair256(b0 + l1, b1 + l1);
        const __m512i hb = load_pair256(b0 + qh, b1 + qh);
        const __m512i codes[4] = {
            _mm512_or_si512(_mm512_and_si512(ql0, m4),
                            _mm512_and_si512(_mm512_slli_epi16(hb, 4), m30)),
            _mm512_or_si512(_mm512_and_si512(ql1, m4),
                            _mm512_and_si512(_mm512_slli_epi16(hb, 2), m30)),
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql0, 4), m4),
                            _mm512_and_si512(hb, m30)),
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql1, 4), m4),
                            _mm512_and_si512(_mm512_srli_epi16(hb, 2), m30)),
        };
        for (int k = 0; k < 4; ++k) {
          sum[k] = _mm512_dpbusd_epi32(sum[k], codes[k], broadcast4(q + 128 * h + 32 * k + 4 * m));
        }
      }
      for (int k = 0; k < 4; ++k) {
        isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(sum[k], s.scale[8 * h + 2 * k + m0 / 4]));
      }
    }
  }
}

template <int N>
void q6_k_rows(const std::byte* group, const std::byte* second, const Q8BlockK* a, int64_t a_stride,
               int64_t n_blocks, float* out) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* b0 = group + b * kQ6KBlock;
    const std::byte* b1 = second + b * kQ6KBlock;
    if (N == 1) {
      prefetch_ahead(b0, kQ6KBlock);
      prefetch_ahead(b1, kQ6KBlock);
    }
    Q6KPairScales s;
    q6_k_scales(b0, b1, s);
    const int8_t* q[N];
    for (int i = 0; i < N; ++i) q[i] = a[i * a_stride + b].qs;
    __m512i isum[N];
    for (int i = 0; i < N; ++i) isum[i] = _mm512_setzero_si512();
    if constexpr (N == 1) {
      q6_k_one_row_sums(b0, b1, s, q[0], isum[0]);
    } else {
      // Group g = 8h + 2k + m / 4 is chunks m = 0..3 or 4..7 of (h, k).
      for (int h = 0; h < 2; ++h) {
        for (int k = 0; k < 4; ++k) {
          for (int m0 = 0; m0 < 8; m0 += 4) {
            __m512i sum[N];
            for (int i = 0; i < N; ++i) sum[i] = _mm512_setzero_si512();
            for (int m = m0; m < m0 + 4; ++m) {
              const __m512i codes = q6_codes(b0, b1, h, k, m);
              for (int i = 0; i < N; ++i) {
                sum[i] =
                    _mm512_dpbusd_epi32(sum[i], codes, broadcast4(q[i] + 128 * h + 32 * k + 4 * m));
              }
            }
            const __m512i& scale = s.scale[8 * h + 2 * k + m0 / 4];
            for (int i = 0; i < N; ++i) {
              isum[i] = _mm512_add_epi32(isum[i], _mm512_mullo_epi32(sum[i], scale));
            }
          }
        }
      }
    }
    const __m512 d = halves_pair8(b0, b1);
    for (int i = 0; i < N; ++i) {
      const Q8BlockK& x = a[i * a_stride + b];
      __m512i offset = _mm512_setzero_si512();
      for (int t = 0; t < 8; ++t) {
        int32_t bs;
        std::memcpy(&bs, x.bsums + 2 * t, sizeof(bs));
        offset = _mm512_add_epi32(offset, _mm512_madd_epi16(s.pair[t], _mm512_set1_epi32(bs)));
      }
      const __m512i total = _mm512_sub_epi32(isum[i], _mm512_slli_epi32(offset, 5));
      const __m512 dl = _mm512_mul_ps(_mm512_set1_ps(x.d), d);
      float* acc = out + 16 * i;
      _mm512_storeu_ps(acc, _mm512_fmadd_ps(dl, _mm512_cvtepi32_ps(total), _mm512_loadu_ps(acc)));
    }
  }
}

// Any number of rows: eight at a time, then four, two, one.
template <template <int> class Rows>
void pair_kernel(const std::byte* group, const Q8BlockK* a, int64_t a_stride, int n_act,
                 int64_t n_blocks, float* out) {
  const std::byte* second = group + n_blocks * Rows<1>::kBlockBytes;
  zero_rows(n_act, out);
  int i = 0;
  for (; i + 8 <= n_act; i += 8)
    Rows<8>::run(group, second, a + i * a_stride, a_stride, n_blocks, out + 16 * i);
  if (i + 4 <= n_act) {
    Rows<4>::run(group, second, a + i * a_stride, a_stride, n_blocks, out + 16 * i);
    i += 4;
  }
  if (i + 2 <= n_act) {
    Rows<2>::run(group, second, a + i * a_stride, a_stride, n_blocks, out + 16 * i);
    i += 2;
  }
  if (i < n_act) Rows<1>::run(group, second, a + i * a_stride, a_stride, n_blocks, out + 16 * i);
}

template <int N>
struct Q4KRows {
  static constexpr int64_t kBlockBytes = kQ4KBlock;
  static void run(const std::byte* g, const std::byte* s, const Q8BlockK* a, int64_t stride,
                  int64_t n_blocks, float* out) {
    q4_k_rows<N>(g, s, a, stride, n_blocks, out);
  }
};

template <int N>
struct Q6KRows {
  static constexpr int64_t kBlockBytes = kQ6KBlock;
  static void run(const std::byte* g, const std::byte* s, const Q8BlockK* a, int64_t stride,
                  int64_t n_blocks, float* out) {
    q6_k_rows<N>(g, s, a, stride, n_blocks, out);
  }
};

}  // namespace

PackedKDot packed_kquant_dot_pair(PackedLayout layout) {
  switch (layout) {
    case PackedLayout::q4_Kx8:
      return pair_kernel<Q4KRows>;
    case PackedLayout::q6_Kx8:
      return pair_kernel<Q6KRows>;
    default:
      return nullptr;
  }
}

}  // namespace cortiq::kernels::avx512
